"""收作业：把乱七八糟的提交文件夹整理成每个学生一份干净的笔记本，交给评分。

    from coursework.collect import collect
    subs = collect(Path("submissions"), instructor_notebooks, Path("work/collected"), due=截止时间)

整理后的笔记本写在 `workdir/<学号>/<教师版笔记本名>.ipynb`，正好是 `python -m coursework.course autograde`
要的 `SUBMISSIONS/<学号>/<笔记本>.ipynb`。这里只读文件、改 JSON，不执行任何东西；
一个学生的文件再乱也不会抛异常，发现和修好的问题都写进这个学生的 `notes`。

## 怎样认出学生（按顺序，第一条对得上的算数）

`submissions` 可以是一个文件夹，也可以是平台导出的一整个 `.zip`（先在内存里展开）。
文件夹和压缩包一样看待：`<学号>.zip` 相当于文件夹 `<学号>/`。顶层的每一项：

1. Moodle 的文件夹 `<姓名>_<编号>_assignsubmission_file_/…` → 学生 `<姓名>_<编号>`；
   老版本 Moodle 平铺的文件 `<姓名>_<编号>_assignsubmission_file_<原文件名>` 也一样；
2. Canvas 的文件 `<姓名>_<用户号>_<提交号>_<原文件名>`（迟交时姓名后面多一段 `_LATE`）
   → 学生 `<姓名>_<用户号>`，`_LATE` 记进 notes；
3. 其他文件夹（或压缩包）→ 学生就是文件夹名（压缩包去掉 `.zip`），nbgrader 的
   `<学号>/<作业名>/*.ipynb` 加 `timestamp.txt` 也在这一条里：学生文件夹里多深都找；
4. 其他散放的笔记本：文件名以至少 4 位数字开头、后面跟 `_`、`-` 或空格（`2021001_03_one_request.ipynb`）
   → 学生就是这串数字；
5. 都不是：认不出是谁的，`find_students` 把它们列在 `strays` 里，`collect` 跳过它们。

学号会整理干净：去掉首尾空白，中间的空白换成 `_`，只留文字、数字和 `._-`。整理后相同的来源
（同一个人的文件夹和压缩包、Moodle 的文件和在线文本两个文件夹）合成一个学生，并在 notes 里说明。
学生文件夹里跳过 `.ipynb_checkpoints`、`__MACOSX`、以点开头的文件和符号链接。

## 怎样认出是哪本笔记本

不看文件名，看内容：学生笔记本里的格子和教师版共有多少个 nbgrader `grade_id`、多少个格子 id、
多少个测试格的代码、多少道题的函数名。共有的最多的那本就是它（`03_one_request (1).ipynb`、`作业03.ipynb` 都能认出）。
内容一点都对不上时才看文件名：去掉 ` (1)`、`-1`、`副本` 这类后缀后和教师版同名，或者文件名里
只有一个编号、和某本教师版的两位编号相同。同一本交了几份时，用修改时间最新的一份
（一样新就用答了更多题的一份），其余的列进 `extra`。

## 整理后的笔记本

以教师版为准，nbgrader 要的格子（答案格、测试格、只读格）每个恰好一格、按教师版的顺序：

- 测试格和只读格：换成学生版的样子（教师版去掉参考答案和隐藏测试，和 `course.py release` 的结果一样），
  带教师版的 `nbgrader` 标记和格子 id。隐藏测试不写进这里：评分时 nbgrader 从成绩库里把它放回去；
- 答案格：学生写的代码原样保留，只把 `nbgrader` 标记和格子 id 换成教师版的；
- 格子认法：先看 `nbgrader` 标记里的 `grade_id`，再看格子 id，标记被删掉时再看代码
  （测试格看代码是否和学生版相同，答案格看定义的函数名）；
- 重复的测试格只留一格（优先留格子 id 没变的那格）；重复的答案格用最后一格评分，
  前面的几格去掉标记照常保留（执行顺序和学生自己运行时一样）；
- 删掉的格子从学生版补回来，放在教师版里它前面那一格后面；补回来的答案格是空白占位，这题按没做算；
- 其他格子原样保留，去掉残留的 `nbgrader` 标记（空的或旧版本的标记会让 nbgrader 报 SchemaTooOld，
  重复的 `grade_id` 会让它报 Duplicate grade id）；所有代码格的输出都清空。

## 提交时间

有 nbgrader 的 `timestamp.txt` 就用它；没有就用笔记本文件（压缩包里记的）最新的修改时间，
这时 notes 里会说明这只是参考。给了 `due` 时，晚于它就算迟交；不带时区的时间按本机时区理解。
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import nbformat

from .intake import Student, aware, duration, find_students, parse_timestamp
from .repair import Template, answered, clean, evidence, name_match, parse, template, validate


@dataclass
class Submission:
    student: str                      # 学号 / 文件夹名，整理过
    notebooks: dict[str, Path]        # 教师版笔记本名（如 "03_one_request"）→ 写在 workdir 里的整理后的笔记本
    missing: list[str]                # 没有交、或交了打不开的教师版笔记本名
    extra: list[str]                  # 对不上任何一本的笔记本文件名（包括重复交了、没被采用的）
    notes: list[str]                  # 给老师看的简短说明：修了什么、改了名、补回了什么、迟交……
    submitted_at: datetime | None     # nbgrader 的 timestamp.txt；没有就是文件最新的修改时间
    late: bool


# ---------------------------------------------------------------- 一个学生


def label(parts: tuple[str, ...]) -> str:
    return "/".join(parts)


def _read_files(st: Student, notes: list[str], extra: list[str]):
    """一个学生交的每个文件：笔记本解析出格子，timestamp.txt 读出时间，别的文件只记下名字。
    返回 (候选笔记本 [(文件名, 格子, 修改时间)], timestamp.txt 里的时间, 笔记本的修改时间)。"""
    candidates, timestamps, mtimes, others = [], [], [], []
    for e in st.entries:
        name = label(e.parts)
        if e.problem:
            notes.append(f"`{name}` {e.problem}")
            continue
        low = e.parts[-1].lower()
        if low == "timestamp.txt":
            try:
                ts = parse_timestamp(e.read().decode("utf-8", "replace"))
            except OSError:
                ts = None
            if ts:
                timestamps.append(ts)
            else:
                notes.append(f"`{name}` 里的时间读不出来")
            continue
        if not low.endswith(".ipynb"):
            others.append(name)
            continue
        if e.mtime:
            mtimes.append(e.mtime)
        try:
            cells, parse_notes, problem = parse(e.read())
        except OSError as exc:
            cells, parse_notes, problem = None, [], f"读不了（{exc}）"
        if cells is None:
            notes.append(f"`{name}` 打不开：{problem}")
            extra.append(name)
            continue
        notes.extend(f"`{name}` {n}" for n in parse_notes)
        candidates.append((name, cells, e.mtime))
    if others:
        shown = "、".join(others[:5]) + ("……" if len(others) > 5 else "")
        notes.append(f"还交了 {len(others)} 个别的文件，不评分：{shown}")
    return candidates, timestamps, mtimes


def _claims(candidates: list, templates: list[Template], notes: list[str], extra: list[str]) -> dict[str, list]:
    """每份笔记本认作哪一本：按格子里的证据，认不出再看文件名。返回 教师版笔记本名 → 认作它的几份。"""
    claims: dict[str, list] = {}
    for name, cells, mtime in candidates:
        scored = [(evidence(cells, t), t) for t in templates]
        (score, why), best = max(scored, key=lambda s: s[0][0])
        if score == 0:
            best, why = name_match(name, templates), "文件名"
        if best is None:
            notes.append(f"`{name}` 对不上任何一本笔记本")
            extra.append(name)
            continue
        if name.rsplit("/", 1)[-1] != f"{best.stem}.ipynb":
            notes.append(f"`{name}` 按{why}认作 {best.stem}")
        claims.setdefault(best.stem, []).append((name, cells, mtime, best))
    return claims


def _write_notebooks(claims: dict[str, list], templates: list[Template], folder: Path, notes: list[str],
                     extra: list[str]) -> dict[str, Path]:
    """每本教师版笔记本挑一份（最新的，一样新就挑答题最多的），整理好写进 folder。"""
    notebooks: dict[str, Path] = {}
    if folder.exists():
        shutil.rmtree(folder)
    far_past = datetime.min.replace(tzinfo=timezone.utc)
    for tpl in templates:
        options = claims.get(tpl.stem)
        if not options:
            continue
        options.sort(key=lambda o: (o[2] or far_past, answered(o[1], tpl),
                                    o[0].rsplit("/", 1)[-1] == f"{tpl.stem}.ipynb"), reverse=True)
        name, cells, mtime, _ = options[0]
        if len(options) > 1:
            losers = [o[0] for o in options[1:]]
            extra.extend(losers)
            why = "最新的" if mtime and all(o[2] is None or o[2] < mtime for o in options[1:]) else "答题最多的"
            notes.append(f"{tpl.stem} 交了 {len(options)} 份，用了{why} `{name}`，没用：{'、'.join(losers)}")
        nb, clean_notes = clean(cells, tpl)
        problem = validate(nb)
        if problem:
            notes.append(f"{tpl.stem} 整理后仍然不合格式，按没交算：{problem}")
            continue
        notes.extend(f"{tpl.stem}：{n}" for n in clean_notes)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{tpl.stem}.ipynb"
        nbformat.write(nbformat.from_dict(nb), path)
        notebooks[tpl.stem] = path
    return notebooks


def _lateness(timestamps: list, mtimes: list, due, canvas_late: bool, notes: list[str]):
    """提交时间（timestamp.txt，没有就取文件最新的修改时间）和是否迟交。"""
    submitted_at, from_files = None, False
    if timestamps:
        submitted_at = max(timestamps)
    elif mtimes:
        submitted_at, from_files = max(mtimes), True
    late = False
    if due is not None and submitted_at is not None:
        due_at = aware(due)
        late = submitted_at > due_at
        if late:
            notes.append(f"迟交 {duration(submitted_at - due_at)}"
                         + ("（提交时间取自文件的修改时间，只作参考）" if from_files else ""))
    elif due is not None:
        notes.append("没有提交时间，无法判断是否迟交")
    if canvas_late:
        notes.append("Canvas 把这份提交标成了迟交")
        late = late or due is None
    return submitted_at, late


def _collect_one(sid: str, st: Student, templates: list[Template], workdir: Path, due) -> Submission:
    notes, extra = list(st.notes), []
    candidates, timestamps, mtimes = _read_files(st, notes, extra)
    claims = _claims(candidates, templates, notes, extra)
    notebooks = _write_notebooks(claims, templates, workdir / sid, notes, extra)
    missing = [t.stem for t in templates if t.stem not in notebooks]
    if not candidates and not extra:
        notes.append("没有找到任何笔记本")
    submitted_at, late = _lateness(timestamps, mtimes, due, st.canvas_late, notes)
    return Submission(sid, notebooks, missing, extra, notes, submitted_at, late)


def collect(submissions: Path, instructor: list[Path], workdir: Path, *,
            due: datetime | None = None) -> list[Submission]:
    """整理全部提交，每个学生一份 Submission（按学号排序）。规则见模块说明。

    instructor 是教师版笔记本（带参考答案和隐藏测试；给学生版也行）；整理好的笔记本写进
    workdir/<学号>/。只有教师这边的问题（提交文件夹不存在、教师版打不开）才会抛异常。
    """
    templates = [template(Path(p)) for p in instructor]
    students, _ = find_students(Path(submissions))
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    results = []
    for sid in sorted(students):
        try:
            results.append(_collect_one(sid, students[sid], templates, workdir, due))
        except Exception as exc:  # 一个学生的文件再乱，也不能挡住别的学生
            shutil.rmtree(workdir / sid, ignore_errors=True)
            results.append(Submission(sid, {}, [t.stem for t in templates], [],
                                      [f"整理时出错，这个学生的笔记本都按没交算，请人工查看：{type(exc).__name__}: {exc}"],
                                      None, False))
    return results
