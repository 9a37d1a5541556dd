"""测试格和学生的名字互不干扰：用真实的 autograde（评分沙盒、评分内核）批改。

- 一位学生的答案格里，定义了这本笔记本的测试格用到的每一个辅助名字（`_answer`、`_call`、`out`、`seen`……），
  他的每个函数被调用时都检查这些名字还是不是他自己的；他的分数必须和参考答案一样是满分。
- 04 练习 1 的一种正确写法：模块级的辅助函数就叫 `_answer`，和隐藏测试里的辅助函数同名。
- 反过来：学生自己又定义了一个笔记本前文的名字（比如 `accepted`），测试读到的仍是前文那一个（评分内核的单元测试）。
- 不隔离会怎样：同一份答案在普通内核里顺序运行，测试格确实改写了学生的名字（所以上面的检查不是摆设）。
"""

import ast
import json
import re
import shutil

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import ROOT, notebook_paths

pytest.importorskip("nbgrader", reason="课程作业需要 pip install -e .[teach]")

from coursework import course  # noqa: E402

MARKERS = re.compile(r"^\s*### (BEGIN|END) (SOLUTION|HIDDEN TESTS)\s*$", re.M)


def _nbg(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def _is_test(cell):
    return cell["cell_type"] == "code" and _nbg(cell).get("grade") and not _nbg(cell).get("solution")


def _top_bound(source):
    """一格代码在模块层绑定的名字（赋值、def、class、import、for/with 的目标）。"""
    names = set()
    for node in ast.parse(MARKERS.sub("", source)).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        else:
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names


def _loaded(source):
    return {n.id for n in ast.walk(ast.parse(MARKERS.sub("", source))) if isinstance(n, ast.Name)}


def test_helper_names(name="04_failure_paths"):
    """这个文件要用的名字确实是测试格自己的（防止下面的学生什么也没覆盖）。"""
    names = _test_only_names(ROOT / "notebooks" / f"{name}.ipynb")
    assert {"_answer", "_call", "_log", "called", "echo"} <= names


def _test_only_names(path):
    """测试格在模块层绑定、而答案格和笔记本前文都不用也不绑定的名字。"""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    tests, others = set(), set()
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        if _is_test(cell):
            tests |= _top_bound(source)
        else:
            others |= _top_bound(source) | _loaded(source)
    return {n for n in tests - others if n.isidentifier()}


WATCHER = '''

# —— 这位学生也有自己的辅助名字，恰好和测试格里的同名 ——
_MINE = {{name: ("学生自己的", name) for name in {names!r}}}
globals().update(_MINE)


def _watched(f):
    def watched(*args, **kwargs):
        taken = [name for name, value in _MINE.items() if globals().get(name) is not value]
        if taken:
            raise RuntimeError(f"学生的名字被测试格改写了：{{taken}}")
        return f(*args, **kwargs)
    return watched


for _name in {functions!r}:
    globals()[_name] = _watched(globals()[_name])
'''


def _careful_student(path):
    """参考答案，外加 WATCHER：每个答案格定义的函数在被调用时检查学生的辅助名字还在不在。"""
    names = sorted(_test_only_names(path))
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and _nbg(cell).get("solution"):
            source = MARKERS.sub("", "".join(cell["source"]))
            functions = [n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)]
            cell["source"] = source + WATCHER.format(names=names, functions=functions)
    return nb


ANSWER_HELPER = '''def _answer(call_id):
    """我的辅助函数：一条写明没有执行的工具消息。"""
    return {"role": "tool", "tool_call_id": call_id,
            "content": "错误（执行授权失败）：没有执行，循环在回应这个调用之前就停了，执行框架不补跑它"}


def patch_unanswered(messages):
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    result, waiting = [], []
    for m in messages:
        if waiting and m.get("role") != "tool":
            result += waiting
            waiting = []
        result.append(dict(m))
        if m.get("role") == "assistant":
            waiting = [_answer(c["id"]) for c in m.get("tool_calls") or [] if c["id"] not in answered]
    return result + waiting
'''

@pytest.fixture(scope="module")
def graded(release_dir, prepared_course, tmp_path_factory):
    subs = tmp_path_factory.mktemp("isolation-submitted")
    (subs / "careful").mkdir()
    for path in notebook_paths():
        nb = _careful_student(path)
        (subs / "careful" / path.name).write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    # 04：练习 1 的模块级辅助函数就叫 _answer，和隐藏测试里的辅助函数同名
    path = ROOT / "notebooks" / "04_failure_paths.ipynb"
    (subs / "helper").mkdir()
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if _nbg(cell).get("solution"):
            gid = _nbg(cell)["grade_id"]
            cell["source"] = ANSWER_HELPER if gid == "04-ex1-solution" else MARKERS.sub("", "".join(cell["source"]))
    (subs / "helper" / path.name).write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    out = tmp_path_factory.mktemp("isolation-grades")
    shutil.copytree(prepared_course, out / "course")
    course.autograde(subs, out, jobs=2)
    return out


def _scores(out, student):
    import csv

    with (out / "notebooks.csv").open(encoding="utf-8-sig") as f:
        return {r["notebook"]: (float(r["score"]), float(r["max_score"])) for r in csv.DictReader(f)
                if r["student"] == student}


def test_a_student_with_every_test_helper_name_keeps_full_marks(graded):
    scores = _scores(graded, "careful")
    assert len(scores) == len(notebook_paths())
    for notebook, (score, max_score) in scores.items():
        assert max_score > 0 and score == max_score, f"{notebook}: {score}/{max_score}"


def test_a_module_level_helper_named_like_the_tests_one_is_not_replaced(graded):
    score, max_score = _scores(graded, "helper")["04_failure_paths"]
    assert score == max_score, f"{score}/{max_score}"


def _test_cells():
    from coursework import grading_kernel

    return grading_kernel


def test_a_test_cell_reads_the_notebooks_names_and_keeps_its_own(monkeypatch):
    import builtins
    from types import SimpleNamespace

    kernel = _test_cells()
    monkeypatch.setattr(builtins, "__strict_equal__", kernel.strict_equal, raising=False)  # 评分内核启动时装上的

    def teacher_accepted(transcript):
        return "前文的"

    def student_accepted(transcript):
        return "能"

    def patch(messages):
        return _answer(1)  # noqa: F821  学生模块里的 _answer

    shell = SimpleNamespace(user_ns={"accepted": teacher_accepted, "__builtins__": __builtins__})
    tests = kernel.TestCells(shell)
    tests.snapshot()  # 第一道练习之前
    student = {"accepted": student_accepted, "patch_unanswered": patch, "_answer": lambda cid: "学生的"}
    shell.user_ns.update(student)
    globals()["_answer"] = student["_answer"]
    try:
        tests.run("def _answer(cid, text='a.py'):\n    return '测试的'\n"
                  "assert accepted([]) == '前文的', '测试读到的是前文的 accepted'\n"
                  "assert patch_unanswered([]) == '学生的', '学生的函数用的仍是学生的 _answer'\n"
                  "leaked = 1\n")
    finally:
        del globals()["_answer"]
    assert "leaked" not in shell.user_ns and shell.user_ns["accepted"] is student_accepted
    with pytest.raises(AssertionError, match="测试读到"):
        tests.run("assert accepted([]) == '能', '测试读到的不是前文的'")
    with pytest.raises(AssertionError):  # 测试格照样用严格比较：True 和 1 在评分内核里不相等
        tests.run("assert [True] == [1]")


def test_without_isolation_the_tests_would_overwrite_the_students_names(tmp_path, monkeypatch):
    """对照：同一份“细心的学生”在普通内核里顺序运行，04 的测试格确实改写了他的名字，函数调用时报错。"""
    path = ROOT / "notebooks" / "04_failure_paths.ipynb"
    nb = nbformat.reads(json.dumps(_careful_student(path)), as_version=4)
    monkeypatch.chdir(tmp_path)
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    errors = [o.get("evalue", "") for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert any("学生的名字被测试格改写了" in e for e in errors), errors
