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

import copy
import difflib
import io
import json
import os
import re
import shutil
import unicodedata
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Callable

import nbformat

try:
    from nbgrader.nbgraderformat import MetadataValidator
    from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions
    from nbgrader.utils import parse_utc
except ImportError as exc:
    raise SystemExit('课程作业需要 nbgrader：.venv/bin/python -m pip install -e ".[teach]"') from exc

MAX_NOTEBOOK_BYTES = 50 * 1024 * 1024   # 再大的笔记本多半是把大输出存了进去，不读
MAX_ZIP_BYTES = 200 * 1024 * 1024       # 嵌套压缩包展开前的上限
MAX_ZIP_MEMBERS = 2000
MAX_ZIP_DEPTH = 3
SKIP_DIRS = {"__MACOSX", ".ipynb_checkpoints", "__pycache__", ".git"}
KEY_FIELDS = ("grade_id", "grade", "solution", "locked", "task", "points", "schema_version")

MOODLE = re.compile(r"^(?P<name>.+?)_(?P<id>\d+)_assignsubmission_[A-Za-z]+_?(?P<rest>.*)$")
CANVAS = re.compile(r"^(?P<name>[^_]*[^\W\d_][^_]*?)(?P<late>_LATE)?_(?P<uid>\d+)_(?P<sub>\d+)_(?P<rest>.+)$")
LEADING_ID = re.compile(r"^(?P<id>\d{4,})(?:[ _\-]+(?P<rest>.+))?\.ipynb$", re.I)
COPY_SUFFIX = re.compile(r"(\s*\(\d+\)|\s*-\s*\d+|\s*[-_ ]?副本\d*|\s*[-_ ]?copy\d*|^copy of\s+)", re.I)
CELL_ID = re.compile(r"^[a-zA-Z0-9-_]{1,64}$")


@dataclass
class Submission:
    student: str                      # 学号 / 文件夹名，整理过
    notebooks: dict[str, Path]        # 教师版笔记本名（如 "03_one_request"）→ 写在 workdir 里的整理后的笔记本
    missing: list[str]                # 没有交、或交了打不开的教师版笔记本名
    extra: list[str]                  # 对不上任何一本的笔记本文件名（包括重复交了、没被采用的）
    notes: list[str]                  # 给老师看的简短说明：修了什么、改了名、补回了什么、迟交……
    submitted_at: datetime | None     # nbgrader 的 timestamp.txt；没有就是文件最新的修改时间
    late: bool


# ---------------------------------------------------------------- 虚拟文件树：文件夹和压缩包一样看待


@dataclass
class _Entry:
    parts: tuple[str, ...]            # 相对 submissions 的路径，压缩包算一层文件夹（名字带 .zip）
    mtime: datetime | None
    read: Callable[[], bytes] | None  # 不需要读的文件是 None
    size: int = 0
    problem: str = ""                 # 读不了的原因（符号链接、压缩包坏了……）


def _skip(name: str) -> bool:
    return name in SKIP_DIRS or name.startswith(".")


def _wanted(name: str) -> bool:
    low = name.lower()
    return low.endswith((".ipynb", ".zip")) or low == "timestamp.txt"


def _walk_folder(root: Path) -> list[_Entry]:
    entries = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not _skip(d))
        rel = Path(folder).relative_to(root).parts
        for d in dirs:
            if (Path(folder) / d).is_symlink():
                entries.append(_Entry(rel + (d,), None, None, problem="是符号链接，没有读"))
        dirs[:] = [d for d in dirs if not (Path(folder) / d).is_symlink()]
        for name in sorted(files):
            if _skip(name):
                continue
            path = Path(folder) / name
            if path.is_symlink():
                entries.append(_Entry(rel + (name,), None, None, problem="是符号链接，没有读"))
                continue
            try:
                st = path.stat()
            except OSError as exc:
                entries.append(_Entry(rel + (name,), None, None, problem=f"读不了（{exc.strerror}）"))
                continue
            mtime = datetime.fromtimestamp(st.st_mtime, timezone.utc).astimezone()
            entries.append(_Entry(rel + (name,), mtime, (lambda p=path: p.read_bytes()) if _wanted(name) else None,
                                  st.st_size))
    return entries


def _zip_name(info: zipfile.ZipInfo) -> str:
    """压缩包里的文件名。中文 Windows 的压缩工具常用 GBK 存名字又不做标记，Python 会按 cp437 读成乱码。"""
    name = info.filename
    if not info.flag_bits & 0x800:
        try:
            raw = name.encode("cp437")
        except UnicodeEncodeError:
            return name
        for enc in ("utf-8", "gb18030"):
            try:
                return raw.decode(enc)
            except UnicodeDecodeError:
                pass
    return name


def _zip_entries(data: bytes, prefix: tuple[str, ...], depth: int) -> list[_Entry]:
    """压缩包的内容：只在内存里读，不解压到磁盘，`..` 和绝对路径都当作普通的名字处理。"""
    zf = zipfile.ZipFile(io.BytesIO(data))
    infos = [i for i in zf.infolist() if not i.is_dir()]
    if len(infos) > MAX_ZIP_MEMBERS:
        raise zipfile.BadZipFile(f"里面有 {len(infos)} 个文件，太多了")
    entries = []
    for info in infos:
        parts = tuple(p for p in PurePosixPath(_zip_name(info).replace("\\", "/")).parts
                      if p not in ("", "/", ".", ".."))
        if not parts or any(_skip(p) for p in parts):
            continue
        try:
            mtime = datetime(*info.date_time).astimezone()
        except ValueError:
            mtime = None
        reader = (lambda i=info: zf.read(i)) if _wanted(parts[-1]) else None
        entries.append(_Entry(prefix + parts, mtime, reader, info.file_size))
    return _expand_zips(entries, depth + 1)


def _expand_zips(entries: list[_Entry], depth: int = 0) -> list[_Entry]:
    """把压缩包换成它里面的文件（路径里压缩包算一层文件夹）；坏的压缩包留一条带原因的记录。"""
    out = []
    for e in entries:
        if e.read is None or not e.parts[-1].lower().endswith(".zip"):
            out.append(e)
            continue
        if depth >= MAX_ZIP_DEPTH or e.size > MAX_ZIP_BYTES:
            out.append(_Entry(e.parts, e.mtime, None, e.size, problem="压缩包套得太深或太大，没有打开"))
            continue
        try:
            out.extend(_zip_entries(e.read(), e.parts, depth))
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
            out.append(_Entry(e.parts, e.mtime, None, e.size, problem=f"压缩包打不开（{exc}）"))
    return out


# ---------------------------------------------------------------- 认出学生


def clean_student_id(raw: str) -> str:
    """学号整理干净：去掉首尾空白，空白换成 `_`，只留文字、数字和 `._-`。"""
    text = unicodedata.normalize("NFKC", raw).strip()
    text = re.sub(r"\s+", "_", text)
    text = re.sub(r"[^\w.\-]", "", text)
    text = re.sub(r"_+", "_", text).lstrip(".-_").rstrip("._")
    return text[:64] or "unknown"


@dataclass
class _Student:
    entries: list[_Entry] = field(default_factory=list)   # parts 已去掉学生那一层
    sources: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    canvas_late: bool = False


def _who(entry: _Entry) -> tuple[str | None, tuple[str, ...], str, bool]:
    """一项属于谁：(原始学号, 学生文件夹里的路径, 来源种类, Canvas 是否标了迟交)；认不出时学号是 None。

    来源种类是 "folder"（文件夹或压缩包，名字就是学号）、"lms-folder" 或 "lms-file"。
    """
    top, rest = entry.parts[0], entry.parts[1:]
    is_zip = top.lower().endswith(".zip")
    is_folder = bool(rest) or is_zip          # 打不开的压缩包也算这个学生的，原因记在他名下
    name = top[:-4] if is_zip else top
    rest = rest or (top,)
    m = MOODLE.match(name)
    if m and (is_folder or m["rest"]):
        return f"{m['name']}_{m['id']}", rest if is_folder else (m["rest"],), \
            "lms-folder" if is_folder else "lms-file", False
    m = CANVAS.match(name)
    if m:
        return f"{m['name']}_{m['uid']}", rest if is_folder else (m["rest"],), \
            "lms-folder" if is_folder else "lms-file", bool(m["late"])
    if is_folder:
        return name, rest, "folder", False
    m = LEADING_ID.match(top)
    if m:
        return m["id"], (m["rest"] + top[-6:] if m["rest"] else top,), "lms-file", False
    return None, entry.parts, "", False


def find_students(submissions: Path) -> tuple[dict[str, _Student], list[str]]:
    """按模块说明里的规则把提交文件分给学生。返回 ({学号: 这个学生的文件}, 认不出是谁的文件名)。"""
    submissions = Path(submissions)
    if submissions.is_file() and submissions.suffix.lower() == ".zip":
        entries = _zip_entries(submissions.read_bytes(), (), 0)
    elif submissions.is_dir():
        entries = _expand_zips(_walk_folder(submissions))
    else:
        raise FileNotFoundError(f"找不到提交文件夹（或压缩包）：{submissions}")
    students: dict[str, _Student] = {}
    strays = []
    for e in entries:
        raw, rest, kind, late = _who(e)
        if raw is None:
            if e.parts[-1].lower().endswith(".ipynb") or e.problem:
                strays.append("/".join(e.parts))
            continue
        sid = clean_student_id(raw)
        st = students.setdefault(sid, _Student())
        top = e.parts[0]
        if kind != "lms-file" and top not in st.sources:
            st.sources.add(top)
            shown = top[:-4] if top.lower().endswith(".zip") else top
            if kind == "folder" and shown != sid:
                st.notes.append(f"学号从 `{shown}` 整理成 `{sid}`")
        st.canvas_late |= late
        st.entries.append(_Entry(rest, e.mtime, e.read, e.size, e.problem))
    if submissions.is_dir():   # 空的学生文件夹也是一个学生：什么都没交
        for d in submissions.iterdir():
            if d.is_dir() and not d.is_symlink() and not _skip(d.name):
                raw, _, kind, _ = _who(_Entry((d.name, "-"), None, None))
                sid = clean_student_id(raw)
                if sid not in students:
                    students[sid] = _Student(sources={d.name})
                    if kind == "folder" and d.name != sid:
                        students[sid].notes.append(f"学号从 `{d.name}` 整理成 `{sid}`")
    for st in students.values():
        if len(st.sources) > 1:
            st.notes.append(f"同一个学号有 {len(st.sources)} 份来源，合在一起：{'、'.join(sorted(st.sources))}")
    return students, strays


# ---------------------------------------------------------------- 教师版


@dataclass
class _Cell:
    cell_type: str
    source: str
    metadata: dict
    id: str | None
    attachments: dict | None = None

    @property
    def nbgrader(self) -> dict:
        meta = self.metadata.get("nbgrader")
        return meta if isinstance(meta, dict) else {}


def _tracked(meta: dict) -> bool:
    """nbgrader 自己会追踪的格子：答案格、测试格、只读格、任务格。"""
    return bool(meta.get("grade_id")) and any(meta.get(k) for k in ("grade", "solution", "locked", "task"))


def _norm(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.splitlines() if line.strip())


def _defined_names(source: str) -> set[str]:
    return set(re.findall(r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", source, re.M))


@dataclass
class _Template:
    stem: str
    cells: list[_Cell]                 # 学生版：参考答案换成占位，隐藏测试删掉
    metadata: dict
    tracked: list[str]                 # 按教师版顺序的 grade_id
    by_gid: dict[str, int]             # grade_id → 在 cells 里的位置
    id_to_gid: dict[str, str]          # 格子 id → grade_id（只有被追踪的格子）
    ids: set[str]                      # 全部格子 id
    test_sources: dict[str, str]       # 测试格/只读格的 grade_id → 整理过空白的代码
    solution_names: dict[str, set[str]]  # 答案格的 grade_id → 它定义的函数名

    def kind(self, gid: str) -> str:
        meta = self.cells[self.by_gid[gid]].nbgrader
        return "solution" if meta.get("solution") else "fixed"


def _template(path: Path) -> _Template:
    nb = nbformat.read(path, as_version=4)
    nb, _ = ClearSolutions().preprocess(nb, {})
    nb, _ = ClearHiddenTests().preprocess(nb, {})
    cells = [_Cell(c.cell_type, c.source, _plain(c.metadata), c.get("id"), _plain(c.get("attachments")))
             for c in nb.cells]
    tracked, by_gid, id_to_gid, tests, names = [], {}, {}, {}, {}
    for i, c in enumerate(cells):
        meta = c.nbgrader
        if not _tracked(meta):
            continue
        gid = meta["grade_id"]
        tracked.append(gid)
        by_gid[gid] = i
        if c.id:
            id_to_gid[c.id] = gid
        if meta.get("solution"):
            names[gid] = _defined_names(c.source)
        elif _norm(c.source):
            tests[gid] = _norm(c.source)
    return _Template(path.stem, cells, _plain(nb.metadata), tracked, by_gid, id_to_gid,
                     {c.id for c in cells if c.id}, tests, names)


def _plain(obj):
    """NotebookNode 换成普通的 dict/list，方便深拷贝和比较。"""
    return json.loads(json.dumps(obj)) if obj is not None else None


# ---------------------------------------------------------------- 读学生的笔记本


def _parse(data: bytes) -> tuple[list[_Cell] | None, list[str], str]:
    """读一份笔记本：(格子, 说明, 读不了的原因)。宽容地读：格式不全的笔记本也尽量取出格子。"""
    notes = []
    if len(data) > MAX_NOTEBOOK_BYTES:
        return None, notes, f"文件太大（{len(data) // 2**20} MB），没有读"
    if not data.strip():
        return None, notes, "是空文件"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        try:
            text = data.decode("gb18030")
            notes.append("不是 UTF-8 编码，按 GBK 读的")
        except UnicodeDecodeError:
            return None, notes, "不是文本文件"
    try:
        doc = json.loads(text)
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        return None, notes, "不是合法的 JSON" + (f"（第 {line} 行）" if line else "")
    if not isinstance(doc, dict) or not isinstance(doc.get("cells", doc.get("worksheets")), list):
        return None, notes, "不是 Jupyter 笔记本（没有 cells）"
    if doc.get("nbformat", 4) != 4 or "worksheets" in doc:
        try:
            doc = _plain(nbformat.reads(text, as_version=4))
            notes.append("是旧版笔记本格式，转换成了第 4 版")
        except Exception as exc:  # nbformat 对坏文件抛的异常种类很多
            return None, notes, f"旧版笔记本转换失败（{type(exc).__name__}）"
    cells, dropped = [], 0
    for raw in doc.get("cells") or []:
        if not isinstance(raw, dict) or raw.get("cell_type") not in ("code", "markdown", "raw"):
            dropped += 1
            continue
        source = raw.get("source", "")
        if isinstance(source, list):
            source = "".join(s for s in source if isinstance(s, str))
        elif not isinstance(source, str):
            source = ""
        metadata = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
        cid = raw.get("id") if isinstance(raw.get("id"), str) else None
        attachments = raw.get("attachments") if isinstance(raw.get("attachments"), dict) else None
        cells.append(_Cell(raw["cell_type"], source, metadata, cid, attachments))
    if dropped:
        notes.append(f"有 {dropped} 格格式不对，去掉了")
    return cells, notes, ""


def _answered(cells: list[_Cell], tpl: _Template) -> int:
    """大概答了几题：答案格里不再是占位的格数，用来在重复提交里挑一份。"""
    stubs = {_norm(tpl.cells[tpl.by_gid[g]].source) for g in tpl.tracked if tpl.kind(g) == "solution"}
    return sum(1 for c in cells if c.nbgrader.get("solution") and _norm(c.source) not in stubs)


def _similar(a: str, b: str) -> bool:
    if a == b:
        return True
    return len(a) > 40 and difflib.SequenceMatcher(None, a, b, autojunk=False).quick_ratio() > 0.9 and \
        difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() > 0.9


def _evidence(cells: list[_Cell], tpl: _Template) -> tuple[int, str]:
    """一份学生笔记本和一本教师版有多少共同点：(分数, 主要凭据)。"""
    gids = {c.nbgrader.get("grade_id") for c in cells} & set(tpl.tracked)
    ids = {c.id for c in cells if c.id} & tpl.ids
    sources = {_norm(c.source) for c in cells if c.cell_type == "code"}
    tests = [g for g, s in tpl.test_sources.items() if s in sources]
    defined = set().union(*(_defined_names(c.source) for c in cells if c.cell_type == "code"))
    answers = [g for g, want in tpl.solution_names.items() if want and want <= defined]
    score = 3 * len(gids) + len(ids) + 2 * len(tests) + len(answers)
    if gids:
        return score, " grade_id "
    if ids:
        return score, "格子 id "
    if tests:
        return score, "测试格的代码"
    if answers:
        return score, "答案里的函数名"
    return 0, ""


def _name_match(filename: str, templates: list[_Template]) -> _Template | None:
    stem = filename.rsplit("/", 1)[-1]
    stem = stem[:-6] if stem.lower().endswith(".ipynb") else stem
    stem = COPY_SUFFIX.sub("", stem).strip()
    for tpl in templates:
        if stem.lower() == tpl.stem.lower():
            return tpl
    numbers = {int(n) for n in re.findall(r"\d+", stem)}
    if len(numbers) == 1:
        (n,) = numbers
        hits = [t for t in templates if t.stem[:2].isdigit() and int(t.stem[:2]) == n]
        if len(hits) == 1:
            return hits[0]
    return None


# ---------------------------------------------------------------- 整理一本笔记本


def _identify(cells: list[_Cell], tpl: _Template) -> list[tuple[str | None, str]]:
    """每个学生格子对应教师版哪个被追踪的格子：[(grade_id 或 None, 怎么认出来的)]。"""
    found = []
    for c in cells:
        gid = c.nbgrader.get("grade_id")
        if gid in tpl.by_gid and _tracked(c.nbgrader):
            found.append((gid, "metadata"))
        elif c.id in tpl.id_to_gid:
            found.append((tpl.id_to_gid[c.id], "id"))
        else:
            found.append((None, ""))
    taken = {g for g, _ in found if g}
    # 标记和格子 id 都没了：测试格看代码，答案格看定义的函数名（取最后一格：答案写在讲解之后）。
    # 格子 id 还是教师版讲解格的那些格子不算
    free = [i for i, c in enumerate(cells)
            if not found[i][0] and c.cell_type == "code" and c.id not in tpl.ids]
    for i in free:   # 测试格的副本也认出来：之后只留一格
        norm = _norm(cells[i].source)
        for gid, src in tpl.test_sources.items():
            if _similar(norm, src):
                found[i] = (gid, "source")
                taken.add(gid)
                break
    for gid, want in tpl.solution_names.items():
        if gid in taken or not want:
            continue
        hits = [i for i in free if not found[i][0] and want <= _defined_names(cells[i].source)]
        if hits:
            found[hits[-1]] = (gid, "source")
            taken.add(gid)
    return found


def _fresh_id(used: set[str], hint: str) -> str:
    n = len(used)
    while True:
        candidate = f"{hint[:50]}-{n}"
        if candidate not in used:
            return candidate
        n += 1


def _make_cell(cell_type: str, source: str, metadata: dict, cid: str, attachments=None) -> dict:
    """新的一格：代码格没有输出、没有执行序号。整本笔记本最后一起检查格式。"""
    cell = {"cell_type": cell_type, "id": cid, "metadata": copy.deepcopy(metadata), "source": source}
    if cell_type == "code":
        cell.update(execution_count=None, outputs=[])
    elif attachments and cell_type == "markdown":
        cell["attachments"] = copy.deepcopy(attachments)
    return cell


def _fixed_metadata(tpl_cell: _Cell) -> dict:
    meta = copy.deepcopy(tpl_cell.metadata)
    meta.pop("nbgrader", None)
    meta["nbgrader"] = copy.deepcopy(tpl_cell.nbgrader)
    meta["deletable"] = False
    if tpl_cell.nbgrader.get("locked"):
        meta["editable"] = False
    return meta


def _clean(cells: list[_Cell], tpl: _Template) -> tuple[dict, list[str]]:
    """按教师版整理一本学生笔记本，返回 (nbformat 笔记本, 说明)。"""
    notes = []
    found = _identify(cells, tpl)
    # 每个 grade_id 留哪一格：测试格留格子 id 没变的那格（没有就第一格），答案格留最后一格
    places: dict[str, list[int]] = {}
    for i, (gid, _) in enumerate(found):
        if gid:
            places.setdefault(gid, []).append(i)
    keep = {}
    for gid, idx in places.items():
        if tpl.kind(gid) == "solution":
            strong = [i for i in idx if found[i][1] != "source"] or idx
            keep[gid] = strong[-1]
            if len(idx) > 1:
                notes.append(f"答案格 {gid} 有 {len(idx)} 格，用最后一格评分，其余照常运行")
        else:
            same_id = [i for i in idx if cells[i].id == tpl.cells[tpl.by_gid[gid]].id]
            keep[gid] = (same_id or idx)[0]
            if len(idx) > 1:
                notes.append(f"测试格 {gid} 出现 {len(idx)} 次，只留一次")
    kept_at = {i: g for g, i in keep.items()}

    restored = 0
    items: list[tuple[str | None, _Cell | None, int]] = []   # (grade_id, 学生的格子, 学生格子的位置)
    for i, c in enumerate(cells):
        gid = found[i][0]
        if i in kept_at:
            items.append((gid, c, i))
            want = {k: tpl.cells[tpl.by_gid[gid]].nbgrader.get(k) for k in KEY_FIELDS}
            have = {k: c.nbgrader.get(k) for k in KEY_FIELDS}
            if want != have:
                restored += 1
        elif gid and tpl.kind(gid) != "solution":
            # 多出来的测试格：原样的副本直接去掉；改过的可能是学生的草稿，去掉标记留着
            if _norm(c.source) != tpl.test_sources.get(gid, ""):
                items.append((None, c, i))
        else:
            items.append((None, c, i))
    if restored:
        notes.append(f"恢复了 {restored} 格的 nbgrader 标记")

    # 被追踪的格子按教师版的顺序放回原来的这些位置
    slots = [k for k, (gid, _, _) in enumerate(items) if gid]
    present = [gid for gid, _, _ in items if gid]
    ordered = sorted(present, key=tpl.tracked.index)
    if ordered != present:
        by = {items[k][0]: items[k] for k in slots}
        for k, gid in zip(slots, ordered):
            items[k] = by[gid]
        notes.append("格子的顺序被调过，按教师版的顺序放回")

    out, used = [], set()
    for gid, c, _ in items:
        if gid:
            t = tpl.cells[tpl.by_gid[gid]]
            if tpl.kind(gid) == "solution":
                meta = {k: v for k, v in c.metadata.items() if k != "nbgrader"}
                meta.update(_fixed_metadata(t))
                if c.cell_type != t.cell_type:
                    notes.append(f"答案格 {gid} 被改成了 {c.cell_type} 格，改回 {t.cell_type}")
                cell = _make_cell(t.cell_type, c.source, meta, t.id, c.attachments)
            else:
                if _norm(c.source) != tpl.test_sources.get(gid, _norm(t.source)):
                    notes.append(f"{'测试格' if t.nbgrader.get('grade') else '只读格'} {gid} 被改过，换回原样")
                cell = _make_cell(t.cell_type, t.source, _fixed_metadata(t), t.id, t.attachments)
        else:
            meta = {k: v for k, v in c.metadata.items() if k != "nbgrader"}
            cid = c.id if c.id and CELL_ID.match(c.id) and c.id not in used and c.id not in tpl.id_to_gid else None
            cell = _make_cell(c.cell_type, c.source, meta, cid or "", c.attachments)
            if not cid:
                cell["id"] = ""
        out.append((gid, cell))
        if cell["id"]:
            used.add(cell["id"])
    for _, cell in out:
        if not cell["id"]:
            cell["id"] = _fresh_id(used | tpl.ids, "cell")
            used.add(cell["id"])

    # 删掉的格子从学生版补回来：放在教师版里它前面那一格（学生笔记本里还在的）后面
    for gid in tpl.tracked:
        if gid in keep:
            continue
        k = tpl.by_gid[gid]
        t = tpl.cells[k]
        meta = _fixed_metadata(t)
        if tpl.kind(gid) == "solution":
            notes.append(f"答案格 {gid} 不见了，补了空白的答案格（这题按没做算）")
        else:
            notes.append(f"补回了被删掉的{'测试格' if t.nbgrader.get('grade') else '只读格'} {gid}")
        new = _make_cell(t.cell_type, t.source, meta, t.id, t.attachments)
        where = {cell["id"]: j for j, (_, cell) in enumerate(out)}
        position = next((where[c.id] + 1 for c in reversed(tpl.cells[:k]) if c.id in where), None)
        if position is None:   # 前面的格子都不在了：放在教师版里排在它后面的第一个被追踪的格子前面
            later = set(tpl.tracked[tpl.tracked.index(gid) + 1:])
            position = next((j for j, (g, _) in enumerate(out) if g in later), len(out))
        out.insert(position, (gid, new))

    nb = {"cells": [c for _, c in out], "metadata": copy.deepcopy(tpl.metadata), "nbformat": 4, "nbformat_minor": 5}
    return nb, notes


def _validate(nb) -> str:
    """整理好的笔记本先用 nbformat 和 nbgrader 自己的检查过一遍：有问题返回原因。"""
    try:
        nbformat.validate(nb)
        MetadataValidator().validate_nb(nbformat.from_dict(nb))
    except Exception as exc:  # 两个检查器抛的异常种类不同，原因都写给老师
        return f"{type(exc).__name__}: {str(exc)[:200]}"
    return ""


# ---------------------------------------------------------------- 提交时间


def _parse_timestamp(text: str) -> datetime | None:
    """nbgrader 的 timestamp.txt（`2024-06-01 10:00:00.000000 UTC`），也接受 ISO 格式。"""
    text = text.strip()
    if not text:
        return None
    try:
        ts = datetime.fromisoformat(text)
        return ts if ts.tzinfo else ts.astimezone()
    except ValueError:
        pass
    try:
        return parse_utc(text).replace(tzinfo=timezone.utc)
    except (ValueError, OverflowError, TypeError):
        return None


def _aware(dt: datetime) -> datetime:
    return dt if dt.tzinfo else dt.astimezone()


def _duration(delta) -> str:
    minutes = int(delta.total_seconds() // 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    parts = [f"{days} 天"] * bool(days) + [f"{hours} 小时"] * bool(hours) + [f"{mins} 分钟"] * (not days and bool(mins))
    return "".join(parts) or "不到 1 分钟"


# ---------------------------------------------------------------- 一个学生


def _label(parts: tuple[str, ...]) -> str:
    return "/".join(parts)


def _collect_one(sid: str, st: _Student, templates: list[_Template], workdir: Path, due) -> Submission:
    notes = list(st.notes)
    extra: list[str] = []
    candidates = []          # (文件名, 格子, mtime)
    timestamps = []
    others = []
    mtimes = []
    for e in st.entries:
        name = _label(e.parts)
        if e.problem:
            notes.append(f"`{name}` {e.problem}")
            continue
        low = e.parts[-1].lower()
        if low == "timestamp.txt":
            try:
                ts = _parse_timestamp(e.read().decode("utf-8", "replace"))
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
            cells, parse_notes, problem = _parse(e.read())
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

    # 每份笔记本认作哪一本
    claims: dict[str, list] = {}
    for name, cells, mtime in candidates:
        scored = [(_evidence(cells, t), t) for t in templates]
        (score, why), best = max(scored, key=lambda s: s[0][0])
        if score == 0:
            best, why = _name_match(name, templates), "文件名"
        if best is None:
            notes.append(f"`{name}` 对不上任何一本笔记本")
            extra.append(name)
            continue
        if name.rsplit("/", 1)[-1] != f"{best.stem}.ipynb":
            notes.append(f"`{name}` 按{why}认作 {best.stem}")
        claims.setdefault(best.stem, []).append((name, cells, mtime, best))

    notebooks: dict[str, Path] = {}
    folder = workdir / sid
    if folder.exists():
        shutil.rmtree(folder)
    for tpl in templates:
        options = claims.get(tpl.stem)
        if not options:
            continue
        far_past = datetime.min.replace(tzinfo=timezone.utc)
        options.sort(key=lambda o: (o[2] or far_past, _answered(o[1], tpl),
                                    o[0].rsplit("/", 1)[-1] == f"{tpl.stem}.ipynb"), reverse=True)
        name, cells, mtime, _ = options[0]
        if len(options) > 1:
            losers = [o[0] for o in options[1:]]
            extra.extend(losers)
            why = "最新的" if mtime and all(o[2] is None or o[2] < mtime for o in options[1:]) else "答题最多的"
            notes.append(f"{tpl.stem} 交了 {len(options)} 份，用了{why} `{name}`，没用：{'、'.join(losers)}")
        nb, clean_notes = _clean(cells, tpl)
        problem = _validate(nb)
        if problem:
            notes.append(f"{tpl.stem} 整理后仍然不合格式，按没交算：{problem}")
            continue
        notes.extend(f"{tpl.stem}：{n}" for n in clean_notes)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{tpl.stem}.ipynb"
        nbformat.write(nbformat.from_dict(nb), path)
        notebooks[tpl.stem] = path

    missing = [t.stem for t in templates if t.stem not in notebooks]
    if not candidates and not extra:
        notes.append("没有找到任何笔记本")

    submitted_at, from_files = None, False
    if timestamps:
        submitted_at = max(timestamps)
    elif mtimes:
        submitted_at, from_files = max(mtimes), True
    late = False
    if due is not None and submitted_at is not None:
        due_at = _aware(due)
        late = submitted_at > due_at
        if late:
            notes.append(f"迟交 {_duration(submitted_at - due_at)}"
                         + ("（提交时间取自文件的修改时间，只作参考）" if from_files else ""))
    elif due is not None:
        notes.append("没有提交时间，无法判断是否迟交")
    if st.canvas_late:
        notes.append("Canvas 把这份提交标成了迟交")
        late = late or due is None
    return Submission(sid, notebooks, missing, extra, notes, submitted_at, late)


def collect(submissions: Path, instructor: list[Path], workdir: Path, *,
            due: datetime | None = None) -> list[Submission]:
    """整理全部提交，每个学生一份 Submission（按学号排序）。规则见模块说明。

    instructor 是教师版笔记本（带参考答案和隐藏测试；给学生版也行）；整理好的笔记本写进
    workdir/<学号>/。只有教师这边的问题（提交文件夹不存在、教师版打不开）才会抛异常。
    """
    templates = [_template(Path(p)) for p in instructor]
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
