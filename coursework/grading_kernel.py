"""评分用的内核：就是 ipykernel，只多做三件事，让学生的代码改不了后面的测试格，测试格也碰不到学生的名字。

1. 每一格运行之前，先拆掉上一格可能装上的钩子：输入变换、AST 变换、自定义异常显示、事件回调、
   `sys.settrace`/`setprofile`、`sys.excepthook`，改动过的内置名字，以及被换掉的 harness_lib 作业检查
   （`assert_own_work` 从磁盘上只读的那一份重新导入）。一格自己的代码在运行前已经变换好了，
   所以学生在答案格里装的钩子，最多只影响它自己那一格。
2. `assert a == b` 改写成类型严格的比较：内置类型（数、字符串、列表、字典……）要同类才相等，
   再按内置类型自己的规则逐项比较，所以“和什么都相等”的对象骗不过测试。
3. 测试格（评分程序用 `__run_test_cell__(源代码)` 交来）在自己的命名空间里运行：起点是学生此刻的全部名字，
   再盖上第一道练习之前笔记本自己定义的名字（`__snapshot_teacher_names__()` 记下的）。测试自己定义的辅助函数
   和变量留在这个命名空间里，学生的函数看不见，也就不会被它们顶替；学生改写了笔记本前文的名字
   （比如自己又定义了一个 `accepted`），测试用的仍是前文那一个。

它在评分沙盒（coursework/sandbox.py）里运行：`python grading_kernel.py -f 连接文件`。
能被下定决心的作弊者绕过的地方，见 docs/teaching.md 的“评分时保护了什么”。
"""

import ast
import builtins
import itertools
import linecache
import sys

import harness_lib  # 包的根用到才加载名字；这里只为记下它本来的样子
from ipykernel.ipkernel import IPythonKernel
from ipykernel.kernelapp import IPKernelApp


def _kind(x):
    if x is None:
        return "none"
    for kind, types in (("bool", bool), ("num", (int, float, complex)), ("str", str), ("bytes", bytes),
                        ("list", list), ("tuple", tuple), ("dict", dict), ("set", (set, frozenset))):
        if isinstance(x, types):
            return kind
    return None


def strict_equal(a, b):
    """内置类型按内置的规则比较（不调用子类改写过的 `__eq__`），别的对象照常用 `==`。"""
    ka, kb = _kind(a), _kind(b)
    if ka is None and kb is None:
        return bool(a == b)
    if ka != kb:
        return False
    if ka in ("none", "bool"):
        return bool(a) is bool(b)
    if ka == "num":
        return complex.__eq__(complex(a), complex(b))
    if ka in ("str", "bytes"):
        return (str if ka == "str" else bytes).__eq__(a, b)
    if ka in ("list", "tuple"):
        base = list if ka == "list" else tuple
        items_a, items_b = list(base.__iter__(a)), list(base.__iter__(b))
        return len(items_a) == len(items_b) and all(map(strict_equal, items_a, items_b))
    if ka == "dict":
        keys = list(dict.keys(a))
        return (frozenset(keys) == frozenset(dict.keys(b))
                and all(strict_equal(dict.__getitem__(a, k), dict.__getitem__(b, k)) for k in keys))
    return frozenset.__eq__(frozenset(a), frozenset(b))


class StrictAsserts(ast.NodeTransformer):
    """`assert x == y, 说明` → `assert __strict_equal__(x, y), 说明`。"""

    def visit_Assert(self, node):
        test = node.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            call = ast.Call(ast.Name("__strict_equal__", ast.Load()), [test.left, test.comparators[0]], [])
            node.test = ast.copy_location(call, test)
        return node


class TestCells:
    """测试格的命名空间：`snapshot()` 在第一道练习之前记下笔记本自己的名字，`run(source)` 运行一个测试格。"""

    def __init__(self, shell):
        self.shell, self.teacher, self.count = shell, {}, itertools.count(1)

    def snapshot(self):
        self.teacher = dict(self.shell.user_ns)

    def run(self, source):
        filename = f"<测试格 {next(self.count)}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # 回溯里看得到出错的那行
        tree = StrictAsserts().visit(ast.parse(source, filename))
        namespace = {**self.shell.user_ns, **self.teacher}
        exec(compile(ast.fix_missing_locations(tree), filename, "exec"), namespace)


class GradingKernel(IPythonKernel):
    """每格之前恢复到内核刚启动时的样子（钩子和内置名字），再照常执行。"""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        shell = self.shell
        shell.ast_transformers.append(StrictAsserts())
        builtins.__strict_equal__ = strict_equal
        tests = TestCells(shell)
        builtins.__snapshot_teacher_names__, builtins.__run_test_cell__ = tests.snapshot, tests.run
        manager = shell.input_transformer_manager
        self._saved = {
            "cleanup": list(shell.input_transformers_cleanup),
            "post": list(shell.input_transformers_post),
            "manager": (list(manager.cleanup_transforms), list(manager.line_transforms),
                        list(manager.token_transformers)),
            "ast": list(shell.ast_transformers),
            "events": {name: list(funcs) for name, funcs in shell.events.callbacks.items()},
            "builtins": dict(vars(builtins)),
            "hooks": (sys.excepthook, sys.displayhook),
        }
        self._package = (harness_lib, dict(vars(harness_lib)), dict(harness_lib._PUBLIC))

    def _restore(self):
        shell, saved = self.shell, self._saved
        shell.input_transformers_cleanup[:] = saved["cleanup"]
        shell.input_transformers_post[:] = saved["post"]
        manager = shell.input_transformer_manager
        manager.cleanup_transforms[:], manager.line_transforms[:], manager.token_transformers[:] = (
            list(part) for part in saved["manager"])
        shell.ast_transformers[:] = saved["ast"]
        for name, funcs in saved["events"].items():
            shell.events.callbacks[name][:] = funcs
        shell.custom_exceptions, shell.CustomTB = (), None
        sys.settrace(None)
        sys.setprofile(None)
        sys.excepthook, sys.displayhook = saved["hooks"]
        names = vars(builtins)
        for name in set(names) - set(saved["builtins"]):
            del names[name]
        names.update(saved["builtins"])
        # 作业检查：丢掉内存里（可能被改过）的那一份，下次导入时从只读的磁盘上重新读
        sys.modules.pop("harness_lib.safety.own_work", None)
        package, contents, public = self._package
        sys.modules["harness_lib"] = package
        vars(package).clear()
        vars(package).update(contents)
        package._PUBLIC.clear()
        package._PUBLIC.update(public)

    async def do_execute(self, *args, **kwargs):
        self._restore()
        return await super().do_execute(*args, **kwargs)


def main():
    IPKernelApp.launch_instance(kernel_class=GradingKernel)


if __name__ == "__main__":
    main()
