"""课程作业：用 nbgrader 生成学生版、批量自动评分。

    python -m coursework.course release   [--out release]
    python -m coursework.course autograde SUBMISSIONS [--out grades] [--jobs N] [--feedback safe|full]
    python -m coursework.course grade-one STUDENT_DIR [--out grades] [--student 学号]
    python -m coursework.course gather GRADED... [--out grades]
    python -m coursework.course classroom [--out classroom-template]

`notebooks/` 里是教师版（带参考答案和隐藏测试）。`release` 把它们交给 nbgrader 的
generate_assignment：答案变成 `raise NotImplementedError()`，隐藏测试被删掉，结果放进 `--out`。

`autograde` 先整理 `SUBMISSIONS`（`coursework/collect.py`：nbgrader 的 collect 目录、压缩包、改了名的笔记本、
丢了元数据或重复的测试格都认得），再逐个学生、逐本笔记本评分。nbgrader 和成绩库在外面；执行学生代码的内核在
沙盒里（`coursework/sandbox.py`：每个学生一个，没有网络、看不到老师的文件、只读的项目、进程数和磁盘有上限；
每本笔记本一个从沙盒里的内核工厂 fork 出来的新内核，`coursework/forkserver.py`；每格之前拆掉学生装的钩子）。
一本笔记本出了任何事（超时、内核退出、读不了），只影响它自己，并在状态一栏用中文写明原因。写出：

- `grades.csv`：每个学生一行，每道题一列，外加状态、原因、总分（UTF-8 带 BOM，表格软件直接打开）；
- `notebooks.csv`：每个学生每本笔记本一行（得分、满分、状态、原因）；
- `similar.csv`：答案相同或几乎相同的学生对；
- `course/`：nbgrader 的课程目录，成绩库 `gradebook.db` 留着，formgrader 复核、手动改分、`nbgrader export` 都能用；
- `feedback/<学号>/<笔记本>.html` 和 `.ipynb`：逐题反馈和评分后的笔记本，和反馈用同一种方式处理。

`--feedback safe`（默认）时，反馈和评分后的笔记本里没有隐藏测试：代码换成一行占位注释，
这些测试格只留下错误的类型和说明（断言里写的那句话），回溯和其他输出都去掉；每格得分照常显示。
`--feedback full` 是 nbgrader 原本的反馈，隐藏测试和回溯全部可见。两种方式的成绩表完全一样。

学生多时用 `--jobs` 并行：几个评分进程共用一个课程目录，每评完一个学生就把结果记下来，
`grades.csv` 也随即改写（还没评到的学生写着“评分中”）。

`grade-one` 给一个学生的文件夹评分（GitHub Classroom 的一次推送、Kubernetes 的一个 Job、评分镜像的默认命令）：
把这个文件夹当成只有一个学生的 `SUBMISSIONS` 交给 `autograde`，写出同样的表和反馈，
另外写出 GitHub Classroom 的分数和给学生看的摘要（`coursework/classroom.py`）。
`gather` 把几次 `grade-one` 的输出合成一份全班的 `grades.csv`、`notebooks.csv`、`similar.csv` 和 `feedback/`。
`classroom` 生成 GitHub Classroom 的模板仓库：学生版加上 `coursework/template/` 里的工作流和说明。
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from harness_lib.safety.secrets import redact
from harness_lib.safety.secrets import learner_environment

from . import NEEDS_NBGRADER, ROOT, instructor_notebooks

try:
    import nbformat
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from nbgrader.preprocessors import Execute, GetGrades
except ImportError as exc:
    raise SystemExit(NEEDS_NBGRADER) from exc

from . import classroom, collect, report, sandbox
from .intake import clean_student_id
from .feedback import TIMEOUT_NAMES, HideHiddenTests, ScrubFullOutputs, ScrubOutputs, StderrIsNotFailure

# nbgrader 会按名字调用 alembic：把当前解释器所在的 bin/Scripts 目录放到 PATH 最前面，
# 这样不激活虚拟环境、直接用 .venv/bin/python 运行也能找到它。
os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
ASSIGNMENT = "agent_loop"
FEEDBACK_MODES = ("safe", "full")


def _clean_env():
    """评分时的环境：假模型、没有任何密钥或端点设置。"""
    env = learner_environment()
    env["HARNESS_MODE"] = "fake"
    return env


def _config(course: Path, timeout: int, feedback: str = "safe", manager=None, notebook: str = "*"):
    from traitlets.config import Config

    c = Config()
    c.CourseDirectory.root = str(course)
    c.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
    c.CourseDirectory.course_id = ASSIGNMENT
    c.CourseDirectory.notebook_id = notebook
    c.Execute.timeout = timeout
    c.Execute.allow_errors = True
    c.Execute.interrupt_on_timeout = True
    if manager is not None:  # 学生的代码在评分内核里跑（沙盒里，或者老师明确选择的不用沙盒）
        from nbgrader.converters.autograde import Autograde

        steps = list(Autograde.class_traits()["autograde_preprocessors"].default())
        at = steps.index(Execute)
        steps[at:at + 1] = [sandbox.execute_with(manager), StderrIsNotFailure]
        c.Autograde.autograde_preprocessors = steps
    if feedback == "safe":
        # nbgrader 生成反馈的预处理器链，在读成绩之后、套网页模板之前藏起隐藏测试、清理学生输出
        c.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTests, ScrubOutputs, CSSHTMLHeaderPreprocessor]
    elif feedback == "full":
        c.GenerateFeedback.preprocessors = [GetGrades, ScrubFullOutputs, CSSHTMLHeaderPreprocessor]
    else:
        raise ValueError(f"feedback 只能是 {FEEDBACK_MODES} 之一，不是 {feedback!r}")
    return c


def _api(course: Path, timeout: int = 120, feedback: str = "safe", manager=None, notebook: str = "*"):
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    config = _config(course, timeout, feedback, manager, notebook)
    coursedir = CourseDirectory(config=config)
    return NbGraderAPI(coursedir=coursedir, config=config)


def _check(result, what):
    if not result.get("success"):
        sys.stderr.write(result.get("log", "") + "\n" + result.get("error", "") + "\n")
        raise SystemExit(f"nbgrader {what} 失败（日志见上）")


def _prepare_course(course: Path, notebooks, timeout: int = 120, feedback: str = "safe"):
    source = course / "source" / ASSIGNMENT
    source.mkdir(parents=True, exist_ok=True)
    for nb in notebooks:
        shutil.copy2(nb, source / nb.name)
    api = _api(course, timeout, feedback)
    _check(api.generate_assignment(ASSIGNMENT, force=True, create=True), "generate_assignment")
    return api


def release(out: Path, notebooks=None) -> list:
    """生成学生版到 out，返回生成的文件列表。"""
    notebooks = notebooks or instructor_notebooks()
    with tempfile.TemporaryDirectory(prefix="course-") as tmp:
        course = Path(tmp)
        _prepare_course(course, notebooks)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for nb in sorted((course / "release" / ASSIGNMENT).glob("*.ipynb")):
            shutil.copy2(nb, out / nb.name)
            written.append(out / nb.name)
    return written


def _write_graded_notebooks(course: Path, sid: str, feedback: str):
    """把评分后的笔记本放到反馈网页旁边，先用和网页相同的预处理器处理（safe 方式下藏起隐藏测试）。"""
    dest = course / "feedback" / sid / ASSIGNMENT
    for path in sorted((course / "autograded" / sid / ASSIGNMENT).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
        if feedback == "safe":
            nb, _ = HideHiddenTests().preprocess(nb, {})
        nb, _ = (ScrubOutputs() if feedback == "safe" else ScrubFullOutputs()).preprocess(nb, {})
        dest.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, dest / path.name)


def _notebook_status(result: dict, graded: Path) -> tuple[str, str]:
    """一本笔记本评完之后的状态和中文原因：完成、超时、内核退出、出错。"""
    if not result.get("success"):
        text = (result.get("error") or "") + (result.get("log") or "")
        if "DeadKernel" in text or "Kernel died" in text or "kernel died" in text:
            return "内核退出", ("运行中内核退出了（代码里调用了 os._exit、sys.exit，用光了内存，"
                               "或者整本运行超过了 --timeout 的 5 倍）；这本笔记本没有分数")
        last = [line for line in text.strip().splitlines() if line.strip()][-1:] or ["（没有日志）"]
        return "出错", f"评分程序没能处理这本笔记本：{redact(last[0])[:200]}"
    if graded.exists():
        errors = [o for c in nbformat.read(graded, as_version=4).cells for o in c.get("outputs", [])
                  if o.get("output_type") == "error" and o.get("ename") in TIMEOUT_NAMES]
        if errors:
            return "超时", f"有 {len(errors)} 格运行超时，被停下了（这几格按没通过算）"
    return "完成", ""


def _grade_students(course: Path, results: Path, timeout: int, feedback: str, unsandboxed: bool,
                    hide: list, students: list) -> None:
    """在一个评分进程里依次给 students 评分：每本笔记本单独评，每评完一个学生就往 results 里追加一行 JSON。"""
    if unsandboxed:
        manager = type("Plain", (sandbox.PlainKernelManager,), {"env": _clean_env()})
    else:
        manager = type("Sandboxed", (sandbox.SandboxKernelManager,),
                       {"hide": tuple(hide), "boxes": {}, "notebook_limit": 5 * timeout})
    stems = [nb.stem for nb in instructor_notebooks()]
    for sid in students:
        statuses = {}
        for stem in stems:
            if not (course / "submitted" / sid / ASSIGNMENT / f"{stem}.ipynb").exists():
                statuses[stem] = ("缺少", "没有交这本笔记本")
                continue
            try:
                result = _api(course, timeout, feedback, manager, stem).autograde(ASSIGNMENT, sid, force=True,
                                                                                   create=True)
            except Exception as exc:  # noqa: BLE001  一本笔记本的任何问题都不能停下整批
                result = {"success": False, "error": f"{type(exc).__name__}: {exc}"}
            graded = course / "autograded" / sid / ASSIGNMENT / f"{stem}.ipynb"
            statuses[stem] = _notebook_status(result, graded)
        if not unsandboxed:
            manager.close_all()  # 这位学生的沙盒（和里面的一切）到此为止
        try:
            _api(course, timeout, feedback).generate_feedback(ASSIGNMENT, sid, force=True)
            _write_graded_notebooks(course, sid, feedback)
        except Exception as exc:  # noqa: BLE001
            statuses["反馈"] = ("出错", f"没能生成反馈：{type(exc).__name__}")
        with results.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"student": sid, "notebooks": statuses}, ensure_ascii=False) + "\n")


def _scores(course: Path, sid: str, exercise_list) -> dict:
    """成绩库里这个学生每道题的得分（在沙盒外面读）。"""
    from nbgrader.api import Gradebook, MissingEntry

    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for stem, grade_id, _ in exercise_list:
            try:
                scores[grade_id] = float(gb.find_grade(grade_id, stem, ASSIGNMENT, sid).score or 0)
            except MissingEntry:
                scores[grade_id] = 0.0
    return scores


def autograde(submissions: Path, out: Path, jobs: int = 1, timeout: int = 120, feedback: str = "safe",
              *, unsandboxed: bool = False, due=None):
    """给 submissions 里的全部学生评分，把成绩表、课程目录和反馈写进 out。返回每个学生一行的成绩。

    feedback 是 "safe"（默认，反馈里没有隐藏测试）或 "full"（nbgrader 原样的反馈）；成绩表与它无关。
    没有沙盒可用时拒绝评分，除非 unsandboxed=True（学生的代码就会以你的权限运行）。
    """
    if feedback not in FEEDBACK_MODES:
        raise ValueError(f"feedback 只能是 {FEEDBACK_MODES} 之一，不是 {feedback!r}")
    reason = sandbox.available()
    if reason and not unsandboxed:
        raise SystemExit(f"不能在沙盒里评分：{reason}。学生的代码会以你的身份运行、读到你的文件；"
                         "确实要这样评，加上 --unsandboxed。")
    if reason:
        sys.stderr.write(f"警告：不用沙盒评分（{reason}）。学生的代码以你的身份运行。\n")
    elif note := sandbox.limits_note():
        sys.stderr.write(f"注意：{note}\n")
    submissions, out = submissions.resolve(), out.resolve()
    notebooks = instructor_notebooks()
    exercise_list = report.exercises(notebooks)
    course = out / "course"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="grading-") as tmp:
        tmp = Path(tmp)
        subs = collect.collect(submissions, notebooks, tmp / "clean", due=due)
        if not subs:
            raise SystemExit(f"{submissions} 里没有找到任何学生的作业")
        if not (course / "gradebook.db").exists():
            _prepare_course(course, notebooks, timeout, feedback)
        for sub in subs:
            target = course / "submitted" / sub.student / ASSIGNMENT
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            for stem, path in sub.notebooks.items():
                shutil.copy2(path, target / f"{stem}.ipynb")
            if sub.submitted_at is not None:
                (target / "timestamp.txt").write_text(sub.submitted_at.strftime("%Y-%m-%d %H:%M:%S.%f %Z"))
        ids = [sub.student for sub in subs]
        jobs = max(1, min(jobs, len(ids)))
        procs = []
        for i in range(jobs):
            results = tmp / f"results{i}.jsonl"
            results.touch()
            cmd = [sys.executable, "-m", "coursework.course", "_group", str(course), str(results), str(timeout), feedback,
                   "1" if unsandboxed else "0", json.dumps([str(submissions), str(out), tempfile.gettempdir()]), *ids[i::jobs]]
            procs.append((subprocess.Popen(cmd, env={**_clean_env(), "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                                           stderr=open(tmp / f"log{i}.txt", "w")), results))
        written = {}  # 学生 → 成绩表里的一行：评完就定了，边评边写和最后一次都不再重读成绩库
        statuses = _collect_results(procs, lambda done: _write_rows(subs, done, course, out, exercise_list,
                                                                    cache=written))
        similar = report.similar_submissions(subs)  # 整理好的作业在临时目录里：离开 with 之前比较
    rows = _write_rows(subs, statuses, course, out, exercise_list, cache=written, final=True)
    report.write_notebook_table(rows, exercise_list, out)
    report.write_similarity(similar, out)
    _print_attention(rows, subs)
    return rows


def grade_one(student_dir: Path, out: Path, student: str | None = None, timeout: int = 120, feedback: str = "safe",
              *, unsandboxed: bool = False, due=None) -> dict:
    """给一个学生的文件夹评分，返回他在成绩表里的一行。

    走的就是 `autograde`：把这个文件夹（`.git` 除外）复制成只有一个学生的 SUBMISSIONS，
    学号是 student（默认用文件夹名，整理方式和收作业时一样）。out 里照常写出 `grades.csv`、`notebooks.csv`、
    `course/`、`feedback/<学号>/`，另外写出 `classroom.env`、`runners.txt` 和 `summary.md`（`coursework/classroom.py`）。
    """
    student_dir, out = Path(student_dir).resolve(), Path(out).resolve()
    if not student_dir.is_dir():
        raise SystemExit(f"{student_dir} 不是一个文件夹")
    sid = clean_student_id(student or student_dir.name)
    with tempfile.TemporaryDirectory(prefix="one-student-") as tmp:
        shutil.copytree(student_dir, Path(tmp) / sid, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        rows = autograde(Path(tmp), out, jobs=1, timeout=timeout, feedback=feedback, unsandboxed=unsandboxed, due=due)
    row = next(r for r in rows if r["student"] == sid)
    classroom.write(row, report.exercises(instructor_notebooks()), out)
    return row


def _graded_students(folder: Path) -> list[str]:
    """一个评分输出目录里评过的学生（原样的学号，成绩表里的可能加了防公式的 `'`）。"""
    submitted = folder / "course" / "submitted"
    return sorted(p.name for p in submitted.iterdir() if p.is_dir()) if submitted.is_dir() else []


def gather(graded: list, out: Path) -> list[str]:
    """把几次 `grade-one`（或 `autograde`）的输出合成一份全班的结果，返回合进来的学号。

    graded 里每一项是一个输出目录（里面有 `grades.csv`），或者装着很多个输出目录的文件夹
    （比如 Kubernetes 的每个 Pod 各写一个子目录）。合成的 `grades.csv`、`notebooks.csv` 按学号排好；
    `feedback/<学号>/` 复制过来；`similar.csv` 用各目录成绩库旁边整理好的作业（`course/submitted/`）重新算，
    所以不同 Job 评的学生之间也比较。同一个学号出现两次、表头不同（不是同一套笔记本评的）就停下并说明。
    """
    folders = []
    for path in map(Path, graded):
        path = path.resolve()
        if (path / "grades.csv").exists():
            folders.append(path)
        else:
            folders += sorted(p.parent for p in path.glob("*/grades.csv"))
    if not folders:
        raise SystemExit(f"{'、'.join(map(str, graded))} 里没有找到评分的输出（grades.csv）")
    out = Path(out).resolve()
    report.merge_tables(folders, out)
    subs = []
    for folder in folders:
        for sid in _graded_students(folder):
            target = out / "feedback" / sid
            if folder != out:
                shutil.rmtree(target, ignore_errors=True)
                if (folder / "feedback" / sid).is_dir():
                    shutil.copytree(folder / "feedback" / sid, target)
            notebooks = {p.stem: p for p in sorted((folder / "course" / "submitted" / sid / ASSIGNMENT).glob("*.ipynb"))}
            subs.append(collect.Submission(sid, notebooks, [], [], [], None, False))
    report.write_similarity(report.similar_submissions(subs), out)
    return [sub.student for sub in subs]


TEMPLATE = Path(__file__).with_name("template")  # GitHub Classroom 模板仓库里除了笔记本以外的文件


def classroom_template(out: Path, notebooks=None) -> list:
    """GitHub Classroom 的模板仓库：学生版笔记本（和 `release` 一样），加上 `coursework/template/` 里的
    工作流 `.github/workflows/classroom.yml`、给学生的 `README.md` 和 `.gitignore`。返回写出的文件。"""
    written = release(out, notebooks)
    for path in sorted(TEMPLATE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            target = out / path.relative_to(TEMPLATE)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            written.append(target)
    return written


PROGRESS_EVERY = 5  # 秒：评分时每隔这么久，把评完的学生写进 grades.csv


def _collect_results(procs, progress) -> dict:
    """等评分进程都结束；其间每有学生评完，就用目前的全部结果调用一次 progress（成绩表边评边写）。"""
    statuses, seen = {}, 0
    while True:
        running = any(proc.poll() is None for proc, _ in procs)
        for _, results in procs:
            for line in results.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:  # 评分进程正写到一半的一行：下次再读
                    continue
                statuses[entry["student"]] = entry["notebooks"]
        if len(statuses) > seen and running:
            seen = len(statuses)
            try:
                progress(dict(statuses))
            except Exception as exc:  # noqa: BLE001  中途写不成（成绩库正忙）就等下一次，最后总会写全
                sys.stderr.write(f"（中途写成绩表没成功，稍后再写：{type(exc).__name__}）\n")
        if not running:
            return statuses
        try:
            next(proc for proc, _ in procs if proc.poll() is None).wait(timeout=PROGRESS_EVERY)
        except (subprocess.TimeoutExpired, StopIteration):
            pass


def _write_rows(subs, statuses, course: Path, out: Path, exercise_list, cache: dict, *, final=False) -> list:
    """按目前的结果写 grades.csv，返回每个学生一行。

    一个学生的结果一记下，他的分数和反馈就不会再变：读一次成绩库、复制一次反馈，这一行存进 cache。
    还没评到的学生，中途写时标为“评分中”，最后一次（final）标为出错。"""
    rows = []
    for sub in subs:
        if sub.student not in cache:
            notebook_status = statuses.get(sub.student)
            if notebook_status is None and not final:
                rows.append({"student": sub.student, "status": "评分中", "reason": "", "scores": {},
                             "late": sub.late, "missing": sub.missing, "notebooks": {}})
                continue
            if notebook_status is None:
                notebook_status = {nb: ("出错", "评分进程中断，没有评到这位学生")
                                   for nb in dict.fromkeys(s for s, _, _ in exercise_list)}
            cache[sub.student] = _graded_row(sub, notebook_status, course, out, exercise_list)
        rows.append(cache[sub.student])
    report.write_grades(rows, out, exercise_list)
    return rows


def _graded_row(sub, notebook_status: dict, course: Path, out: Path, exercise_list) -> dict:
    """一个评完的学生在成绩表里的一行（分数在沙盒外面从成绩库读），顺便把他的反馈复制到 out/feedback/。"""
    problems = {stem: why for stem, why in notebook_status.items() if why[0] != "完成"}
    scores = _scores(course, sub.student, exercise_list)
    target = out / "feedback" / sub.student
    graded = course / "feedback" / sub.student / ASSIGNMENT
    shutil.rmtree(target, ignore_errors=True)
    if graded.exists():
        shutil.copytree(graded, target)
    return {
        "student": sub.student, "scores": scores, "notebooks": notebook_status,
        "status": "完成" if not problems else "要看一下",
        "reason": "；".join(f"{stem}：{why[1]}" for stem, why in problems.items() if why[0] != "缺少"),
        "total": sum(scores.values()), "max_total": sum(p for _, _, p in exercise_list),
        "late": sub.late, "missing": sub.missing,
    }


def _print_attention(rows, subs):
    """安静的日志：只列出要老师看一眼的学生。"""
    notes = {sub.student: sub.notes for sub in subs}
    for row in rows:
        lines = [row["reason"]] if row["reason"] else []
        lines += notes.get(row["student"], [])
        if row["missing"]:
            lines.append("缺少：" + "、".join(row["missing"]))
        if lines:
            print(f"[{row['student']}] " + "；".join(lines))


def _grading_options(parser) -> None:
    """autograde 和 grade-one 共用的选项。"""
    parser.add_argument("--timeout", type=int, default=120, help="每一格的执行上限（秒）")
    parser.add_argument("--due", help="截止时间（例如 2026-12-15T23:59+08:00）：之后交的在成绩表里标为迟交")
    parser.add_argument("--unsandboxed", action="store_true",
                        help="没有 bubblewrap 时也评分：学生的代码会以你的身份运行、读得到你的文件，只在信得过的作业上用")
    parser.add_argument(
        "--feedback", choices=FEEDBACK_MODES, default="safe",
        help="safe（默认）：反馈里没有隐藏测试的代码、输出和回溯，每格得分照常显示，"
             "没通过的隐藏测试只给出断言里写的说明，可以放心发回，下学期还能接着用这些测试；"
             "full：nbgrader 原样的反馈，隐藏测试全部可见，只适合自己查看或不再复用这些测试时发回。"
             "两种方式的成绩表完全一样")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "_group":  # 评分进程的入口
        course, results, timeout, feedback, unsandboxed, hide, *students = argv[1:]
        _grade_students(Path(course), Path(results), int(timeout), feedback, unsandboxed == "1",
                        json.loads(hide), students)
        return 0
    parser = argparse.ArgumentParser(description="用 nbgrader 生成学生版、自动评分")
    sub = parser.add_subparsers(dest="command", required=True)
    p_rel = sub.add_parser("release", help="生成学生版（答案换成占位、删去隐藏测试）")
    p_rel.add_argument("--out", type=Path, default=ROOT / "release")
    p_grade = sub.add_parser(
        "autograde", help="在沙盒里给 SUBMISSIONS 里的作业自动评分",
        description="整理 SUBMISSIONS 里的作业（每人一个文件夹、nbgrader collect 目录、压缩包、平台整批下载都行），"
                    "在 bubblewrap 沙盒里逐本评分，写出 grades.csv、notebooks.csv、similar.csv、course/（成绩库）"
                    "和 feedback/<学号>/（默认的 safe 方式下可以整个文件夹发回给学生）。")
    p_grade.add_argument("submissions", type=Path)
    p_grade.add_argument("--out", type=Path, default=ROOT / "grades")
    p_grade.add_argument("--jobs", type=int, default=2 * (os.cpu_count() or 1),
                         help="同时评分的进程数，默认每核两个：笔记本里有 sleep 和超时演示要等，两个正好用满一核")
    _grading_options(p_grade)
    p_one = sub.add_parser(
        "grade-one", help="给一个学生的文件夹评分（GitHub Classroom 的工作流、Kubernetes 的 Job、评分镜像都用它）",
        description="和 autograde 是同一条路：写出同样的 grades.csv、notebooks.csv、course/、feedback/<学号>/，"
                    "另外写出 GitHub Classroom 的分数（classroom.env、runners.txt）和给学生看的摘要 summary.md。")
    p_one.add_argument("student_dir", type=Path, help="学生的文件夹（比如他的作业仓库），里面的笔记本放在哪一层都行")
    p_one.add_argument("--out", type=Path, default=ROOT / "grades")
    p_one.add_argument("--student", help="成绩表里的学号，默认用文件夹名")
    _grading_options(p_one)
    p_gather = sub.add_parser(
        "gather", help="把几次 grade-one 的输出合成一份全班的成绩表",
        description="GRADED 是 grade-one 或 autograde 的输出目录，或者装着很多个输出目录的文件夹（每个 Job 一个）。"
                    "写出合在一起的 grades.csv、notebooks.csv、similar.csv 和 feedback/<学号>/。")
    p_gather.add_argument("graded", type=Path, nargs="+")
    p_gather.add_argument("--out", type=Path, default=ROOT / "grades")
    p_cls = sub.add_parser("classroom", help="生成 GitHub Classroom 的模板仓库：学生版加上按推送评分的工作流")
    p_cls.add_argument("--out", type=Path, default=ROOT / "classroom-template")
    args = parser.parse_args(argv)
    if args.command in ("release", "classroom"):
        for path in (release if args.command == "release" else classroom_template)(args.out):
            print(path)
        return 0
    if args.command == "gather":
        students = gather(args.graded, args.out)
        print(f"合并了 {len(students)} 名学生，成绩表：{args.out / 'grades.csv'}")
        return 0
    os.environ.update(_clean_env())
    for key in [k for k in os.environ if k.startswith("OPENAI_")]:
        del os.environ[key]
    from datetime import datetime

    due = datetime.fromisoformat(args.due) if args.due else None
    if args.command == "grade-one":
        row = grade_one(args.student_dir, args.out, args.student, timeout=args.timeout, feedback=args.feedback,
                        unsandboxed=args.unsandboxed, due=due)
        print(f"已评分 {row['student']}：{row['total']:g} / {row['max_total']:g} 分，"
              f"成绩表：{args.out / 'grades.csv'}，摘要：{args.out / 'summary.md'}")
    else:
        rows = autograde(args.submissions.resolve(), args.out, jobs=args.jobs, timeout=args.timeout,
                         feedback=args.feedback, unsandboxed=args.unsandboxed, due=due)
        print(f"已评分 {len({r['student'] for r in rows})} 名学生，成绩表：{args.out / 'grades.csv'}")
    if args.feedback == "full":
        sys.stderr.write(f"注意：{args.out / 'feedback'} 里有隐藏测试的全部代码，发回给学生就等于公开了这些测试。\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
