"""批改练习用的小工具：确认学生的函数是自己写的，没有把题目的活交给 harness_lib 里现成的定义。

`assert_own_work(fn, *forbidden)` 顺着 `fn` 能走到的代码查一遍：

- 函数体里用到的全局名字（按 `fn.__globals__` 解析，别名也一样认得）；
- 函数体里 `import` 的模块，以及 `模块.属性` 这样的属性访问（`harness_lib.lesson.loop.parse_arguments`）；
- 嵌套的函数、lambda、推导式（它们的代码对象在 `co_consts` 里）；
- 闭包里的变量、参数的默认值、`functools.partial`、绑定方法；
- 学生自己写的辅助函数和类：接着查它们的代码。

走到一个被禁止的定义（或者它的实例）时，抛出 `AssertionError`，说明用中文。
`forbidden` 可以是对象本身（harness_lib 里的定义，也可以是笔记本里讲过的同名定义）、名字（字符串，
匹配 harness_lib 里同名的定义），或者一个 harness_lib 模块（模块里定义的，连同它从 harness_lib
别处导入的，全都算；一个包算上它下面的每个模块）。没有列出的 harness_lib 定义（例如题目允许用的 `string_arg`）照常可以用。

这是静态的检查：`eval`、`getattr(模块, "拼出来的名字")` 这类写法查不到，批改时由老师留意。
"""

from __future__ import annotations

import builtins
import functools
import sys
import types
from typing import Any

__all__ = ["assert_own_work", "delegations"]

_PACKAGE = "harness_lib"


def _from_package(obj: Any) -> bool:
    """obj 是不是 harness_lib 里定义的东西（函数、类、模块）。"""
    if isinstance(obj, types.ModuleType):
        name = obj.__name__
    else:
        name = getattr(obj, "__module__", None) or ""
    return name == _PACKAGE or name.startswith(_PACKAGE + ".")


def _package_modules() -> list[types.ModuleType]:
    return [m for name, m in list(sys.modules.items())
            if m is not None and (name == _PACKAGE or name.startswith(_PACKAGE + "."))]


def _expand(forbidden) -> tuple[set[int], set[str], list]:
    """把禁止清单变成：对象 id 的集合、名字的集合、可读的清单。"""
    ids: set[int] = set()
    names: set[str] = set()
    shown = []
    for item in forbidden:
        if isinstance(item, str):
            names.add(item)
            shown.append(item)
        elif isinstance(item, types.ModuleType):
            shown.append(item.__name__)
            # 一个包（例如 harness_lib.ui）算上它下面已经加载的每个模块
            inside = [m for name, m in list(sys.modules.items()) if m is not None
                      and (name == item.__name__ or name.startswith(item.__name__ + "."))]
            for module in inside or [item]:
                ids.add(id(module))
                for value in vars(module).values():
                    # 模块自己定义的，和它从 harness_lib 别处导入、再交出去的，都算
                    if not isinstance(value, types.ModuleType) and _from_package(value):
                        ids.add(id(value))
        else:
            ids.add(id(item))
            shown.append(getattr(item, "__qualname__", repr(item)))
    if names:
        for module in _package_modules():
            for key, value in list(vars(module).items()):
                if key in names and _from_package(value):
                    ids.add(id(value))
    return ids, names, list(dict.fromkeys(shown))


class _Walker:
    def __init__(self, ids: set[int]):
        self.ids = ids
        self.found: list[str] = []
        self.seen: set[int] = set()

    def hit(self, obj: Any, how: str) -> bool:
        """obj 是被禁止的定义或它的实例时记下来。"""
        if id(obj) in self.ids:
            real = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
            self.found.append(how if not real or how.endswith(real) else f"{how}（即 {real}）")
            return True
        cls = obj if isinstance(obj, type) else type(obj)
        if not isinstance(obj, type) and id(cls) in self.ids:
            self.found.append(f"{how}（{cls.__name__} 的实例）")
            return True
        return False

    def value(self, obj: Any, how: str) -> None:
        """查一个值：被禁止就记下；是学生自己的函数或类，就接着查它的代码。"""
        if self.hit(obj, how) or id(obj) in self.seen:
            return
        self.seen.add(id(obj))
        if isinstance(obj, functools.partial):
            self.value(obj.func, how)
            for arg in (*obj.args, *obj.keywords.values()):
                self.value(arg, how)
        elif isinstance(obj, types.MethodType):
            self.value(obj.__func__, how)
            self.value(obj.__self__, how)
        elif isinstance(obj, types.FunctionType):
            if not _from_package(obj):
                self.function(obj)
        elif isinstance(obj, type):
            if not _from_package(obj):
                for attr in vars(obj).values():
                    if isinstance(attr, (staticmethod, classmethod)):
                        attr = attr.__func__
                    if isinstance(attr, property):
                        for part in (attr.fget, attr.fset, attr.fdel):
                            if part is not None:
                                self.value(part, how)
                    elif isinstance(attr, types.FunctionType):
                        self.value(attr, how)

    def function(self, fn: types.FunctionType) -> None:
        for default in (*(fn.__defaults__ or ()), *((fn.__kwdefaults__ or {}).values())):
            self.value(default, f"{fn.__name__} 的默认参数")
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                content = cell.cell_contents
            except ValueError:  # 还没赋值的闭包变量
                continue
            self.value(content, f"{fn.__name__} 的闭包变量 {name}")
        self.code(fn.__code__, fn.__globals__)

    def code(self, code: types.CodeType, globals_: dict) -> None:
        names = set(code.co_names)
        modules: list[types.ModuleType] = []
        for name in names:
            if name in globals_:
                obj = globals_[name]
            elif "." not in name and hasattr(builtins, name):
                continue
            else:
                obj = sys.modules.get(name)  # 函数体里 import 的模块，名字带点
                if obj is None:
                    continue
            if isinstance(obj, types.ModuleType):
                if _from_package(obj):
                    modules.append(obj)
                self.hit(obj, name)
                continue
            self.value(obj, name)
        # 模块.属性：沿着函数体里出现的名字往下走，走到的模块也算
        for module in modules:
            if "." in module.__name__:
                parent = sys.modules.get(module.__name__.rsplit(".", 1)[0])
                if parent is not None and parent not in modules and _from_package(parent):
                    modules.append(parent)
        checked: set[int] = set()
        while modules:
            module = modules.pop()
            if id(module) in checked:
                continue
            checked.add(id(module))
            for name in names:
                attr = getattr(module, name, None)
                if attr is None:
                    continue
                if isinstance(attr, types.ModuleType):
                    if _from_package(attr):
                        modules.append(attr)
                    continue
                self.hit(attr, f"{module.__name__}.{name}")
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self.code(const, globals_)


def delegations(fn, *forbidden) -> list[str]:
    """fn 的代码能走到的被禁止定义，每处一条说明；没有就是空列表。"""
    ids, _, _ = _expand(forbidden)
    walker = _Walker(ids)
    walker.value(fn, getattr(fn, "__name__", repr(fn)))
    return sorted(set(walker.found))


def assert_own_work(fn, *forbidden) -> None:
    """fn 用到了 forbidden 里的任何一个定义，就抛出带中文说明的 AssertionError。"""
    if not callable(fn):
        raise AssertionError(f"{fn!r} 不是函数，先把练习的函数写出来")
    found = delegations(fn, *forbidden)
    if found:
        _, _, shown = _expand(forbidden)
        raise AssertionError(
            f"{getattr(fn, '__name__', fn)} 用到了现成的 {'、'.join(found)}。"
            f"这道题要你自己写出这部分逻辑，不能交给 {'、'.join(shown)}。"
        )
