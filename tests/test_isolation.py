"""测试格和学生的名字互不干扰：测试格把自己的名字都放在一个函数里，评分内核再给测试格一个自己的命名空间。

- 每个测试格在模块层只定义一个函数 `_test_NN_exK` 并调用它：测试用的 `_answer`、`msg`、`out`、`seen`……
  都是这个函数里的局部名字（静态检查，每本笔记本）。
- 一位“细心的学生”在答案格里定义了模块级的辅助函数，名字恰好是测试用到的每一个名字（04 的 `msg`、`out`、
  `errors`、`echo`、`stop`，05 的 `msgs`、`handlers`、`seen`、`fake`……），他的每个函数被调用时都先用一遍
  这些辅助函数，看它们还是不是自己的：
  - 通过真实的 autograde（评分沙盒、评分内核）批改，分数和参考答案一样是满分；
  - 在普通内核里顺序运行（学生在自己的笔记本里点“运行全部”就是这样），没有一格出错。
- 04 练习 1 的一种正确写法：模块级的辅助函数就叫 `_answer`，和隐藏测试里的辅助函数同名，照样满分。
- 反过来：学生自己又定义了一个笔记本前文的名字（比如 `accepted`），评分时测试读到的仍是前文那一个（评分内核的单元测试）。
"""

import ast
import json
import re
import shutil
import symtable

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import ROOT, notebook_paths

pytest.importorskip("nbgrader", reason="课程作业需要 pip install -e .[teach]")

from coursework import course  # noqa: E402

MARKERS = re.compile(r"^\s*### (BEGIN|END) (SOLUTION|HIDDEN TESTS)\s*$", re.M)
WRAPPER = re.compile(r"_test_\d\d_ex\d+")


def _nbg(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def _is_test(cell):
    return cell["cell_type"] == "code" and _nbg(cell).get("grade") and not _nbg(cell).get("solution")


def _source(cell):
    return MARKERS.sub("", "".join(cell["source"]))


def _scopes(source):
    table = symtable.symtable(source, "<格子>", "exec")
    todo = [table]
    while todo:
        scope = todo.pop()
        yield scope
        todo.extend(scope.get_children())


def _globals_read(source, module_level=True):
    """一格代码读的全局名字：函数里读到的全局名字，`module_level` 时再加上模块层读到的。"""
    return {s.get_name() for scope in _scopes(source) for s in scope.get_symbols()
            if s.is_referenced() and (scope.get_type() == "module" and module_level
                                      or scope.get_type() != "module" and s.is_global())}


def _test_locals(source):
    """测试格的函数里自己绑定的名字（赋值、def、class、import、for、except …… as），不算参数。"""
    return {s.get_name() for scope in _scopes(source) if scope.get_type() == "function"
            for s in scope.get_symbols()
            if (s.is_assigned() or s.is_imported()) and s.is_local() and not s.is_parameter()}


def _names(path):
    """测试自己用的名字里，学生可以放心拿来给模块级辅助函数用的那些：不是答案格和测试格要读的全局名字，
    也不是笔记本前文的函数被调用时要读的全局名字（那些是学生自己的、笔记本自己的名字），也不是测试格的函数名。"""
    cells = [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    mine, read = set(), set()
    for cell in cells:
        exercise = _is_test(cell) or _nbg(cell).get("solution")
        if _is_test(cell):
            mine |= _test_locals(_source(cell))
        read |= _globals_read(_source(cell), module_level=bool(exercise))
    return {n for n in mine - read if n.isidentifier() and not WRAPPER.fullmatch(n)}


# 一眼就会撞上的名字：这几本的测试都用它们
COMMON = {"02_each_turn": {"_answer", "_call", "_fake", "_ask"},
          "04_failure_paths": {"_answer", "msg", "out", "errors", "echo", "stop", "called"},
          "05_limits": {"msgs", "handlers", "seen", "fake", "out", "ALLOWED"}}


@pytest.mark.parametrize("name", sorted(COMMON))
def test_the_common_names_are_the_tests_own(name):
    """下面的学生确实占用了这些名字（防止他什么也没覆盖）。"""
    assert COMMON[name] <= _names(ROOT / "notebooks" / f"{name}.ipynb")


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.stem)
def test_a_test_cell_binds_nothing_at_module_level_but_its_function(path):
    """测试格的模块层只有 `def _test_NN_exK():` 和最后一行 `_test_NN_exK()`：别的名字都是函数里的局部名字，
    学生在自己的笔记本里运行测试格，也不会被它盖掉同名的辅助函数。"""
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if not _is_test(cell):
            continue
        gid = _nbg(cell)["grade_id"]
        wrapper = "_test_" + gid.removesuffix("-tests").replace("-", "_")
        body = ast.parse(_source(cell)).body
        assert [type(node).__name__ for node in body] == ["FunctionDef", "Expr"], gid
        assert body[0].name == wrapper and ast.unparse(body[1]) == f"{wrapper}()", gid


WATCHER = '''

# —— 这位学生也有自己的模块级辅助函数，名字恰好和测试用的一样 ——
def _install_my_helpers(names, functions, space):
    """给每个名字放一个辅助函数；答案格里的函数每次被调用，都先用一遍这些辅助函数。"""
    def make(name):
        return lambda: ("学生自己的", name)

    def uses_my_helpers(f):
        def watched(*args, **kwargs):
            taken = [name for name in names
                     if not callable(space.get(name)) or space[name]() != ("学生自己的", name)]
            if taken:
                raise RuntimeError(f"学生的名字被测试格改写了：{{taken}}")
            return f(*args, **kwargs)
        return watched

    for name in names:
        space[name] = make(name)
    for name in functions:
        space[name] = uses_my_helpers(space[name])


_install_my_helpers({names!r}, {functions!r}, globals())
'''


def _careful_student(path):
    """参考答案，外加 WATCHER：每个答案格定义的函数在被调用时先用一遍学生的辅助函数。"""
    names = sorted(_names(path))
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and _nbg(cell).get("solution"):
            source = _source(cell)
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
            cell["source"] = ANSWER_HELPER if gid == "04-ex1-solution" else _source(cell)
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


def test_a_test_cell_reads_the_notebooks_names_and_keeps_its_own(monkeypatch):
    import builtins
    from types import SimpleNamespace

    from coursework import grading_kernel as kernel

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


@pytest.mark.parametrize("name", sorted(COMMON))
def test_in_a_plain_kernel_the_tests_leave_the_students_names_alone(name, tmp_path, monkeypatch):
    """学生在自己的笔记本里顺序运行（没有评分内核的隔离）：测试格也不改写他的名字，没有一格出错。"""
    path = ROOT / "notebooks" / f"{name}.ipynb"
    nb = nbformat.reads(json.dumps(_careful_student(path)), as_version=4)
    monkeypatch.chdir(tmp_path)
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    errors = [(c.get("id"), o.get("ename"), o.get("evalue", "")[:200]) for c in nb.cells
              for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
