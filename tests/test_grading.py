"""批改用的 `assert_own_work`：认得各种把活交给 harness_lib 的写法，也不冤枉允许用的辅助函数。

最后两个测试看 04、05、06 的练习：隐藏测试里的每条断言都带中文说明（学生在反馈里只看得到这句话），
每道练习的测试格都用 `assert_own_work` 查过学生的函数（库里根本没有现成做法的几道除外，`NOTHING_TO_DELEGATE` 写明原因）。
"""

import ast
import functools
import json
import re
import textwrap

import pytest

import harness_lib
import harness_lib.lesson.loop
import harness_lib.lesson.tools
from harness_lib import Workspace
from harness_lib.lesson.loop import parse_arguments
from harness_lib.lesson.tools import string_arg
from harness_lib.lesson import tools as lesson_tools
from harness_lib.safety import runner
from harness_lib.safety.own_work import assert_own_work, delegations

from conftest import ROOT, notebook_paths

W = Workspace  # 别名


def own(raw):
    import json as _json
    return _json.loads(raw)


def direct(raw):
    return parse_arguments(raw)


def by_attribute(raw):
    return harness_lib.lesson.loop.parse_arguments(raw)


def by_package_attribute(root, path):
    return harness_lib.Workspace(root).resolve(path)


def by_alias(root, path):
    return W(root).resolve(path)


def nested(raw):
    def inner(text):
        return parse_arguments(text)
    return inner(raw)


def in_lambda(raw):
    parse = lambda text: parse_arguments(text)  # noqa: E731
    return parse(raw)


def in_comprehension(raws):
    return [parse_arguments(r) for r in raws]


def imported_inside(raw):
    from harness_lib.lesson.loop import parse_arguments as p
    return p(raw)


def module_imported_inside(raw):
    import harness_lib.lesson.loop as loop_module
    return loop_module.parse_arguments(raw)


def helper(raw):
    return parse_arguments(raw)


def through_helper(raw):
    return helper(raw)


def by_default(raw, parse=parse_arguments):
    return parse(raw)


def make_closure():
    parse = parse_arguments

    def closed(raw):
        return parse(raw)
    return closed


by_partial = functools.partial(parse_arguments)


def uses_instance(path, ws=Workspace(ROOT)):
    return ws.resolve(path)


def allowed_helper(args):
    return string_arg(args, "path")


def allowed_module_helper(args):
    return harness_lib.lesson.tools.string_arg(args, "path")


class Checker:
    def check(self, raw):
        return parse_arguments(raw)


def uses_class(raw):
    return Checker().check(raw)


@pytest.mark.parametrize("fn", [
    direct, by_attribute, nested, in_lambda, in_comprehension, imported_inside, module_imported_inside,
    through_helper, by_default, make_closure(), by_partial, uses_class,
])
def test_catches_every_way_to_reach_parse_arguments(fn):
    assert delegations(fn, parse_arguments), fn
    with pytest.raises(AssertionError, match="parse_arguments.*自己写"):
        assert_own_work(fn, parse_arguments)


@pytest.mark.parametrize("fn", [by_package_attribute, by_alias, uses_instance])
def test_catches_workspace_through_package_alias_and_instance(fn):
    with pytest.raises(AssertionError, match="Workspace"):
        assert_own_work(fn, Workspace)


def test_own_code_and_allowed_helpers_pass():
    assert_own_work(own, parse_arguments)
    assert_own_work(allowed_helper, Workspace, parse_arguments)
    assert_own_work(allowed_module_helper, Workspace, parse_arguments)
    assert delegations(allowed_helper, string_arg)  # 只有列出来的才算禁止


def test_a_whole_module_can_be_forbidden():
    def sneaky(command):
        return runner.run_bash(command, timeout=1)

    with pytest.raises(AssertionError, match="run_bash"):
        assert_own_work(sneaky, runner)
    assert_own_work(own, runner)


def test_a_forbidden_module_covers_what_it_re_exports():
    from harness_lib.safety import approval
    from harness_lib.safety.allowlist import check_allowlist as moved

    def by_re_export(command):
        return approval.check_allowlist(command).allowed

    def by_home(command):
        return moved(command).allowed

    with pytest.raises(AssertionError, match="approval"):  # 用到被禁止的模块本身
        assert_own_work(by_re_export, approval)
    with pytest.raises(AssertionError, match="check_allowlist"):  # 定义在别处、由 approval 交出去的
        assert_own_work(by_home, approval)


def test_forbidden_module_reached_through_the_package():
    def make(root):
        return lesson_tools.make_file_tools(root)

    with pytest.raises(AssertionError, match="make_file_tools"):
        assert_own_work(make, lesson_tools.make_file_tools)


def test_not_a_function():
    with pytest.raises(AssertionError, match="不是函数"):
        assert_own_work(None, parse_arguments)


# ---------------------------------------------------------------------------
# 04、05、06 的练习
# ---------------------------------------------------------------------------

NOTEBOOKS = ["04_failure_paths", "05_limits", "06_five_tools"]
HAN = re.compile(r"[\u4e00-\u9fff]")


def _graded_cells(name):
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            yield meta["grade_id"], "".join(cell["source"])


def _hidden(source):
    """隐藏测试那一段，去掉测试格的函数带来的缩进。"""
    block = source.split("### BEGIN HIDDEN TESTS\n", 1)[1].split("### END HIDDEN TESTS", 1)[0]
    return textwrap.dedent(block)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_hidden_assertion_speaks_chinese(name):
    cells = list(_graded_cells(name))
    assert cells
    for grade_id, source in cells:
        for node in ast.walk(ast.parse(_hidden(source))):
            if isinstance(node, ast.Assert):
                texts = [c.value for c in ast.walk(node.msg) if isinstance(c, ast.Constant)
                         and isinstance(c.value, str)] if node.msg is not None else []
                assert any(HAN.search(t) for t in texts), f"{grade_id} 第 {node.lineno} 行的断言没有中文说明"


# 库里没有现成做这件事的函数，所以这几道题的测试不用查（每一道都写明原因）
NOTHING_TO_DELEGATE = {
    "10-ex2-tests": "把拒绝和命令配成对：库里没有这样的函数，消息表只显示截短的预览",
}
ALL_NOTEBOOKS = [p.stem for p in notebook_paths()]


@pytest.mark.parametrize("name", ALL_NOTEBOOKS)
def test_every_exercise_checks_for_delegation(name):
    for grade_id, source in _graded_cells(name):
        if grade_id in NOTHING_TO_DELEGATE:
            assert "assert_own_work(" not in source, f"{grade_id} 已经查了，从例外清单里删掉它"
            continue
        assert "assert_own_work(" in source, f"{grade_id} 的测试没有检查学生是否把活交给了 harness_lib"


def test_a_notebook_copy_of_a_definition_is_caught_when_listed():
    """笔记本里定义的同名类不是库里那一个：把它也列进禁止清单，照样认得出来。"""
    namespace = {}
    exec("class Workspace:\n    def resolve(self, p):\n        return p\n\n"
         "def resolve_inside(root, path):\n    return Workspace().resolve(path)\n", namespace)
    assert_own_work(namespace["resolve_inside"], Workspace)  # 只禁库里的那一个：查不到
    with pytest.raises(AssertionError, match="Workspace"):
        assert_own_work(namespace["resolve_inside"], Workspace, namespace["Workspace"])


def test_the_message_names_the_real_definition_behind_an_alias():
    with pytest.raises(AssertionError, match=r"即 Workspace"):
        assert_own_work(by_alias, Workspace)


def test_a_role_package_forbids_every_module_inside_it():
    """笔记本的测试格写 `assert_own_work(fn, harness_lib.ui)`：包下面每个模块里的定义都算被禁止。"""
    import harness_lib
    from harness_lib import assert_own_work
    from harness_lib.ui.view import messages_frame

    def uses_the_table(messages):
        return len(messages_frame(messages))

    with pytest.raises(AssertionError, match="messages_frame"):
        assert_own_work(uses_the_table, harness_lib.ui)
    assert_own_work(uses_the_table, harness_lib.safety)  # 别的包不管它


def test_a_subclass_of_a_forbidden_class_is_caught():
    """学生的类继承了被禁止的类（隔几代也算）：活还是交给了它。继承内置的异常不算。"""
    namespace = {"Workspace": Workspace}
    exec("class Mine(Workspace):\n    pass\n\nclass Deeper(Mine):\n    def go(self):\n        return 1\n\n"
         "def resolve_inside(root, path):\n    return Deeper(root).resolve(path)\n\n"
         "class Refused(Exception):\n    pass\n\n"
         "def own(root, path):\n    raise Refused(path)\n", namespace)
    with pytest.raises(AssertionError, match="父类 Workspace"):
        assert_own_work(namespace["resolve_inside"], Workspace)
    assert_own_work(namespace["own"], Workspace)


def test_a_forbidden_definition_covers_its_modules_private_names():
    """禁止 `accumulate`，它背后的 `_Message` 也禁止：一行 import 不能绕过去。学生自己的 `_Message` 不算。"""
    from harness_lib.models import streaming

    namespace = {}
    exec("from harness_lib.models.streaming import _Message as M\n\n"
         "def rebuild(chunks):\n    return M().as_dict()\n\n"
         "def by_module(chunks):\n    import harness_lib.models.streaming as s\n    return s._Message().as_dict()\n",
         namespace)
    mine = {}
    exec("class _Message:\n    def __init__(self):\n        self.fields = {}\n\n"
         "def rebuild(chunks):\n    return {'role': 'assistant', **_Message().fields}\n", mine)
    for fn in (namespace["rebuild"], namespace["by_module"]):
        with pytest.raises(AssertionError, match="_Message"):
            assert_own_work(fn, streaming.accumulate)
    assert_own_work(mine["rebuild"], streaming.accumulate, streaming.stream_turn)
    assert_own_work(namespace["rebuild"], runner.run_bash)  # 别的模块的私有名字不管


def _count_lines_answers():
    namespace = {"string_arg": string_arg, "ToolFailed": harness_lib.ToolFailed}
    exec('''
def through_registry(registry, workspace):
    @registry.register("count_lines", "数行数", {"type": "object"})
    def count_lines(args):
        return str(len(registry.handlers["read_file"](args).splitlines()))
    return count_lines


def looked_up_early(registry, workspace):
    read = registry.handlers.get("read_file")

    def count_lines(args):
        return str(len(read(args).splitlines()))
    registry.register("count_lines", "数行数", {"type": "object"})(count_lines)
    return count_lines


def own_handlers(registry, workspace):
    handlers = {"count": lambda text: str(len(text.splitlines()))}

    @registry.register("count_lines", "数行数", {"type": "object"})
    def count_lines(args):
        if "count_lines" not in registry.handlers:
            raise ToolFailed("没有登记")
        target = workspace.resolve(string_arg(args, "path"))
        return handlers["count"](target.read_text(encoding="utf-8"))
    return count_lines
''', namespace)
    return namespace


@pytest.mark.parametrize("name", ["through_registry", "looked_up_early"])
def test_a_library_handler_looked_up_at_run_time_is_caught(name):
    """`make_file_tools` 被禁止：它登记的 `read_file` 处理函数也不能在运行时从注册表里取出来用。"""
    fn = _count_lines_answers()[name]
    root = runner.demo_workspace()
    handler = fn(lesson_tools.make_file_tools(root), Workspace(root))
    assert handler({"path": "app.py"}) == "3"
    with pytest.raises(AssertionError, match="make_file_tools 造出来的 read_file"):
        assert_own_work(fn, lesson_tools.make_file_tools)


def test_own_handlers_and_the_registry_itself_are_allowed():
    """自己的 `handlers` 字典、查自己登记的名字：都不算把活交出去。"""
    fn = _count_lines_answers()["own_handlers"]
    root = runner.demo_workspace()
    handler = fn(lesson_tools.make_file_tools(root), Workspace(root))
    assert handler({"path": "app.py"}) == "3"
    assert_own_work(fn, lesson_tools.make_file_tools, harness_lib.make_file_tools)
