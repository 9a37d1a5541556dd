"""课程作业：用 nbgrader 生成学生版、批量自动评分。

    python coursework/course.py release   [--out release]
    python coursework/course.py autograde SUBMISSIONS [--out grades] [--jobs N] [--feedback safe|full]

`notebooks/` 里是教师版（带参考答案和隐藏测试）。`release` 把它们交给 nbgrader 的
generate_assignment：答案变成 `raise NotImplementedError()`，隐藏测试被删掉，结果放进 `--out`。

`autograde` 读取 `SUBMISSIONS/<学号>/<笔记本>.ipynb`，在干净的环境里（强制假模型、没有密钥）
执行并评分，写出：

- `grades.csv`：每个学生每本笔记本一行（学号、笔记本、得分、满分）；
- `summary.csv`：每个学生一行，总分和各本笔记本的得分；
- `feedback/<学号>/<笔记本>.html`：nbgrader 生成的逐题反馈；
- `feedback/<学号>/<笔记本>.ipynb`：评分后的笔记本，和反馈用同一种方式处理。

`--feedback safe`（默认）时，反馈和评分后的笔记本里没有隐藏测试：代码换成一行占位注释，
这些测试格只留下错误的类型和说明（断言里写的那句话），回溯和其他输出都去掉；每格得分照常显示。
`--feedback full` 是 nbgrader 原本的反馈，隐藏测试和回溯全部可见。两种方式的成绩表完全一样。

学生多时用 `--jobs` 并行：每个进程有自己的课程目录和成绩库，互不加锁，最后合并。
"""

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from harness_lib.ui.clients import learner_environment

try:
    import nbformat
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from nbgrader.preprocessors import ClearHiddenTests, GetGrades
    from traitlets import Unicode
except ImportError as exc:
    raise SystemExit('课程作业需要 nbgrader：.venv/bin/python -m pip install -e ".[teach]"') from exc

ROOT = Path(__file__).resolve().parents[1]
# nbgrader 会按名字调用 alembic：把当前解释器所在的 bin/Scripts 目录放到 PATH 最前面，
# 这样不激活虚拟环境、直接用 .venv/bin/python 运行也能找到它。
os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
NOTEBOOKS = ROOT / "notebooks"
ASSIGNMENT = "agent_loop"
FEEDBACK_MODES = ("safe", "full")


class HideHiddenTests(ClearHiddenTests):
    """给学生看的反馈里藏起隐藏测试，只留下没通过的那条断言的说明。

    在 nbgrader 的 ClearHiddenTests 上加两件事：被删掉的隐藏测试区换成一行占位注释，
    让学生知道这里还有测试；含隐藏测试的格子只保留错误的类型和说明。
    回溯会把出错那一行连同前后几行代码一起打印出来，打印和表格也可能来自隐藏测试，所以都不保留。
    """

    placeholder = Unicode(
        "# ……这里还有隐藏测试：批改时运行，代码不公开；没通过时下面只给出那条断言的说明",
        help="隐藏测试区被删掉后留下的一行",
    ).tag(config=True)

    def _remove_hidden_test_region(self, cell):
        kept, inside, removed = [], False, False
        for line in cell.source.split("\n"):
            if self.begin_test_delimeter in line:
                if inside:
                    raise RuntimeError("隐藏测试区不能嵌套")
                inside = removed = True
                indent = line[: len(line) - len(line.lstrip())]
                kept.append(indent + self.placeholder)
            elif self.end_test_delimeter in line:
                inside = False
            elif not inside:
                kept.append(line)
        if inside:
            raise RuntimeError("隐藏测试区没有结束标记")
        cell.source = "\n".join(kept)
        return removed

    def preprocess_cell(self, cell, resources, cell_index):
        had_hidden = self.begin_test_delimeter in cell.source
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if had_hidden and cell.cell_type == "code":
            cell.outputs = [_message_only(o) for o in cell.outputs if o.output_type == "error"]
        return cell, resources


def _message_only(error):
    """一个错误输出只留类型和说明：`AssertionError: 说明`。"""
    message = error.evalue
    if not message and error.ename == "AssertionError":
        message = "（这条断言没有附说明）"
    line = f"\x1b[31m{error.ename}\x1b[39m" + (f": {message}" if message else "")
    error.traceback = [line]
    return error


def _clean_env():
    """评分时的环境：假模型、没有任何密钥或端点设置。"""
    env = learner_environment()
    env["HARNESS_MODE"] = "fake"
    return env


def _config(course: Path, timeout: int, feedback: str = "safe"):
    from traitlets.config import Config

    c = Config()
    c.CourseDirectory.root = str(course)
    c.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
    c.CourseDirectory.course_id = ASSIGNMENT
    c.Execute.timeout = timeout
    c.Execute.allow_errors = True
    c.Execute.interrupt_on_timeout = True
    if feedback == "safe":
        # nbgrader 生成反馈的预处理器链，在读成绩之后、套网页模板之前藏起隐藏测试
        c.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTests, CSSHTMLHeaderPreprocessor]
    elif feedback != "full":
        raise ValueError(f"feedback 只能是 {FEEDBACK_MODES} 之一，不是 {feedback!r}")
    return c


def _api(course: Path, timeout: int = 120, feedback: str = "safe"):
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    config = _config(course, timeout, feedback)
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


def instructor_notebooks():
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


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


def _student_ids(submissions: Path):
    ids = sorted(p.name for p in submissions.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not ids:
        raise SystemExit(f"{submissions} 里没有学生文件夹（应为 SUBMISSIONS/<学号>/<笔记本>.ipynb）")
    return ids


def _grade_group(submissions: Path, students, workdir: Path, timeout: int, feedback: str = "safe"):
    """在一个独立的课程目录里给一组学生评分，返回成绩行。

    反馈写在 workdir/feedback/<学号>/ 下：nbgrader 生成的网页，加上评分后的笔记本。
    """
    from nbgrader.api import MissingEntry

    notebooks = instructor_notebooks()
    api = _prepare_course(workdir, notebooks, timeout, feedback)
    rows = []
    for sid in students:
        target = workdir / "submitted" / sid / ASSIGNMENT
        target.mkdir(parents=True, exist_ok=True)
        for nb in (submissions / sid).glob("*.ipynb"):
            shutil.copy2(nb, target / nb.name)
        result = api.autograde(ASSIGNMENT, sid, force=True, create=True)
        if not result.get("success"):
            sys.stderr.write(f"[{sid}] 自动评分出错：\n{result.get('error', '')}\n")
        result = api.generate_feedback(ASSIGNMENT, sid, force=True)
        if not result.get("success"):
            sys.stderr.write(f"[{sid}] 生成反馈出错：\n{result.get('error', '')}\n")
        _write_graded_notebooks(workdir, sid, feedback)
        with api.gradebook as gb:
            for nb in notebooks:
                name = nb.stem
                max_score = gb.find_notebook(name, ASSIGNMENT).max_score
                try:
                    score = gb.find_submission_notebook(name, ASSIGNMENT, sid).score
                except MissingEntry:
                    score = 0.0
                rows.append({"student": sid, "notebook": name,
                             "score": float(score), "max_score": float(max_score)})
    return rows


def _write_graded_notebooks(workdir: Path, sid: str, feedback: str):
    """把评分后的笔记本放到反馈网页旁边；safe 方式下先用和网页相同的预处理器藏起隐藏测试。"""
    dest = workdir / "feedback" / sid / ASSIGNMENT
    for path in sorted((workdir / "autograded" / sid / ASSIGNMENT).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
        if feedback == "safe":
            nb, _ = HideHiddenTests().preprocess(nb, {})
        dest.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, dest / path.name)


def autograde(submissions: Path, out: Path, jobs: int = 1, timeout: int = 120, feedback: str = "safe"):
    """给 submissions 里的全部学生评分，把成绩表和反馈写进 out。返回成绩行。

    feedback 是 "safe"（默认，反馈里没有隐藏测试）或 "full"（nbgrader 原样的反馈）；成绩表与它无关。
    """
    if feedback not in FEEDBACK_MODES:
        raise ValueError(f"feedback 只能是 {FEEDBACK_MODES} 之一，不是 {feedback!r}")
    students = _student_ids(submissions)
    jobs = max(1, min(jobs, len(students)))
    groups = [students[i::jobs] for i in range(jobs)]
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="grading-") as tmp:
        tmp = Path(tmp)
        if jobs == 1:
            rows = _grade_group(submissions, groups[0], tmp / "g0", timeout, feedback)
        else:
            procs = []
            for i, group in enumerate(groups):
                rows_file = tmp / f"rows{i}.csv"
                cmd = [sys.executable, __file__, "_group", str(submissions), str(tmp / f"g{i}"),
                       str(rows_file), str(timeout), feedback, *group]
                procs.append((subprocess.Popen(cmd, env=_clean_env()), rows_file))
            rows = []
            for proc, rows_file in procs:
                if proc.wait() != 0:
                    raise SystemExit("有一个评分进程失败了（日志见上）")
                with rows_file.open(encoding="utf-8") as f:
                    rows += [dict(r, score=float(r["score"]), max_score=float(r["max_score"]))
                             for r in csv.DictReader(f)]
        # 先清掉这次评分的学生以前的反馈：上一次用 full 写出的文件不能留在要发回的文件夹里
        for sid in students:
            shutil.rmtree(out / "feedback" / sid, ignore_errors=True)
        for folder in tmp.glob("g*/feedback/*/" + ASSIGNMENT):
            shutil.copytree(folder, out / "feedback" / folder.parent.name, dirs_exist_ok=True)
    rows.sort(key=lambda r: (r["student"], r["notebook"]))
    _write_tables(rows, out)
    return rows


def _write_rows(rows, path: Path):
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["student", "notebook", "score", "max_score"])
        writer.writeheader()
        writer.writerows(rows)


def _write_tables(rows, out: Path):
    _write_rows(rows, out / "grades.csv")
    notebooks = sorted({r["notebook"] for r in rows})
    by_student = {}
    for r in rows:
        by_student.setdefault(r["student"], {})[r["notebook"]] = r["score"]
    total_max = sum({r["notebook"]: r["max_score"] for r in rows}.values())
    with (out / "summary.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "total", "max_total", *notebooks])
        for sid, scores in sorted(by_student.items()):
            writer.writerow([sid, sum(scores.values()), total_max, *(scores.get(n, 0.0) for n in notebooks)])


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "_group":  # 并行评分时的子进程入口
        submissions, workdir, rows_file, timeout, feedback, *students = argv[1:]
        rows = _grade_group(Path(submissions), students, Path(workdir), int(timeout), feedback)
        _write_rows(rows, Path(rows_file))
        return 0
    parser = argparse.ArgumentParser(description="用 nbgrader 生成学生版、自动评分")
    sub = parser.add_subparsers(dest="command", required=True)
    p_rel = sub.add_parser("release", help="生成学生版（答案换成占位、删去隐藏测试）")
    p_rel.add_argument("--out", type=Path, default=ROOT / "release")
    p_grade = sub.add_parser(
        "autograde", help="给 SUBMISSIONS/<学号>/*.ipynb 自动评分",
        description="给 SUBMISSIONS/<学号>/*.ipynb 自动评分，写出 grades.csv、summary.csv "
                    "和 feedback/<学号>/（反馈网页与评分后的笔记本；默认的 safe 方式下可以整个文件夹发回给学生）。")
    p_grade.add_argument("submissions", type=Path)
    p_grade.add_argument("--out", type=Path, default=ROOT / "grades")
    p_grade.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p_grade.add_argument("--timeout", type=int, default=120, help="每一格的执行上限（秒）")
    p_grade.add_argument(
        "--feedback", choices=FEEDBACK_MODES, default="safe",
        help="safe（默认）：反馈里没有隐藏测试的代码、输出和回溯，每格得分照常显示，"
             "没通过的隐藏测试只给出断言里写的说明，可以放心发回，下学期还能接着用这些测试；"
             "full：nbgrader 原样的反馈，隐藏测试全部可见，只适合自己查看或不再复用这些测试时发回。"
             "两种方式的成绩表完全一样")
    args = parser.parse_args(argv)
    if args.command == "release":
        for path in release(args.out):
            print(path)
        return 0
    os.environ.update(_clean_env())
    for key in [k for k in os.environ if k.startswith("OPENAI_")]:
        del os.environ[key]
    rows = autograde(args.submissions.resolve(), args.out, jobs=args.jobs, timeout=args.timeout,
                     feedback=args.feedback)
    print(f"已评分 {len({r['student'] for r in rows})} 名学生，成绩表：{args.out / 'grades.csv'}")
    if args.feedback == "full":
        sys.stderr.write(f"注意：{args.out / 'feedback'} 里有隐藏测试的全部代码，发回给学生就等于公开了这些测试。\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
