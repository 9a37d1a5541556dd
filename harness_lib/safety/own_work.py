"""批改练习用：确认学生的函数是自己写的，没有把题目的活交给 harness_lib 里现成的定义。

`assert_own_work(fn, *forbidden)` 顺着 `fn` 能走到的代码（全局名字、import、`模块.属性`、嵌套函数、闭包、
默认参数、`partial`、学生自己的辅助函数和类，连同类继承来的父类）查一遍。`forbidden` 是对象本身，或者一个模块（连同它交出去的
harness_lib 定义；一个包算上它下面的每个模块）。静态的检查：`eval`、拼出来的 `getattr` 查不到。
"""

import functools
import sys
import types

_PACKAGE = "harness_lib"


def _inside(name, package: str = _PACKAGE) -> bool:
    return isinstance(name, str) and (name == package or name.startswith(package + "."))


def _from_package(obj) -> bool:
    """obj 是不是 harness_lib 里定义的东西（函数、类、模块）。"""
    return _inside(obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None))


def _expand(forbidden) -> tuple[set[int], list[str]]:
    """禁止清单 → 被禁止对象的 id 集合，以及给人看的清单。"""
    ids, shown = set(), []
    for item in forbidden:
        if isinstance(item, types.ModuleType):
            shown.append(item.__name__)
            inside = [m for name, m in list(sys.modules.items())
                      if m is not None and _inside(name, item.__name__)]
            for module in inside or [item]:  # 一个包算上它下面已经加载的每个模块
                ids.add(id(module))
                ids.update(id(v) for v in vars(module).values()
                           if not isinstance(v, types.ModuleType) and _from_package(v))
        else:
            ids.add(id(item))
            shown.append(getattr(item, "__qualname__", repr(item)))
    return ids, list(dict.fromkeys(shown))


class _Walker:
    def __init__(self, ids: set[int]):
        self.ids, self.found, self.seen = ids, [], set()

    def hit(self, obj, how: str) -> bool:
        """obj 是被禁止的定义或它的实例时记下来。"""
        if id(obj) in self.ids:
            real = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
            self.found.append(how if not real or how.endswith(real) else f"{how}（即 {real}）")
            return True
        if not isinstance(obj, type) and id(type(obj)) in self.ids:
            self.found.append(f"{how}（{type(obj).__name__} 的实例）")
            return True
        return False

    def value(self, obj, how: str) -> None:
        """查一个值：被禁止就记下；是学生自己的函数或类，就接着查它的代码。"""
        if self.hit(obj, how) or id(obj) in self.seen:
            return
        self.seen.add(id(obj))
        if isinstance(obj, functools.partial):
            for part in (obj.func, *obj.args, *obj.keywords.values()):
                self.value(part, how)
        elif isinstance(obj, types.MethodType):
            self.value(obj.__func__, how)
            self.value(obj.__self__, how)
        elif isinstance(obj, types.FunctionType) and not _from_package(obj):
            for default in (*(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values()):
                self.value(default, f"{obj.__name__} 的默认参数")
            for name, cell in zip(obj.__code__.co_freevars, obj.__closure__ or ()):
                try:
                    self.value(cell.cell_contents, f"{obj.__name__} 的闭包变量 {name}")
                except ValueError:  # 还没赋值的闭包变量
                    pass
            self.code(obj.__code__, obj.__globals__)
        elif isinstance(obj, type) and not _from_package(obj):
            for base in obj.__mro__[1:]:  # 继承来的也算：子类化一个被禁止的类，等于把活交给了它
                if self.hit(base, f"{how} 的父类 {base.__qualname__}"):
                    break
                if base.__module__ == obj.__module__:  # 同一处定义的父类（学生自己的）接着查它的代码
                    self.value(base, how)
            for attr in list(vars(obj).values()):
                attr = getattr(attr, "__func__", attr)  # staticmethod、classmethod
                for part in (attr.fget, attr.fset) if isinstance(attr, property) else (attr,):
                    if isinstance(part, types.FunctionType):
                        self.value(part, how)

    def code(self, code: types.CodeType, globals_: dict) -> None:
        modules = []
        for name in code.co_names:
            obj = globals_[name] if name in globals_ else sys.modules.get(name)  # 函数体里 import 的模块名字带点
            if obj is None:
                continue
            if not isinstance(obj, types.ModuleType):
                self.value(obj, name)
                continue
            self.hit(obj, name)
            if _from_package(obj):
                parent = sys.modules.get(obj.__name__.rpartition(".")[0])
                modules += [obj] + ([parent] if parent is not None and _from_package(parent) else [])
        checked = set()
        while modules:  # 模块.属性：沿着函数体里出现的名字往下走
            module = modules.pop()
            if id(module) in checked:
                continue
            checked.add(id(module))
            for name in code.co_names:
                attr = getattr(module, name, None)
                if isinstance(attr, types.ModuleType):
                    modules += [attr] if _from_package(attr) else []
                elif attr is not None:
                    self.hit(attr, f"{module.__name__}.{name}")
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self.code(const, globals_)


def delegations(fn, *forbidden) -> list[str]:
    """fn 的代码能走到的被禁止定义，每处一条说明；没有就是空列表。"""
    walker = _Walker(_expand(forbidden)[0])
    walker.value(fn, getattr(fn, "__name__", repr(fn)))
    return sorted(set(walker.found))


def assert_own_work(fn, *forbidden) -> None:
    """fn 用到了 forbidden 里的任何一个定义，就抛出带中文说明的 AssertionError。"""
    if not callable(fn):
        raise AssertionError(f"{fn!r} 不是函数，先把练习的函数写出来")
    found = delegations(fn, *forbidden)
    if found:
        raise AssertionError(f"{getattr(fn, '__name__', fn)} 用到了现成的 {'、'.join(found)}。"
                             f"这道题要你自己写出这部分逻辑，不能交给 {'、'.join(_expand(forbidden)[1])}。")
