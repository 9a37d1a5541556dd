"""批改练习用：确认学生的函数是自己写的，没有把题目的活交给 harness_lib 里现成的定义。

`assert_own_work(fn, *forbidden)` 顺着 `fn` 能走到的代码（全局名字、import、`模块.属性`、嵌套函数、闭包、
默认参数、`partial`、学生自己的辅助函数和类，连同类继承来的父类）查一遍。`forbidden` 是对象本身，或者一个模块（连同它交出去的
harness_lib 定义；一个包算上它下面的每个模块）。

被禁止的是 harness_lib 里的一个定义时，它所在模块的私有名字（`_` 开头的定义，比如 `accumulate` 背后的 `_Message`）
也算被禁止：那是它的实现。被禁止的函数造出来的函数（它自己、或者它直接调用的同一模块里的函数在里面定义的，
比如 `make_file_tools` 登记的 `read_file` 处理函数）也算。学生的代码运行时从 harness_lib 的对象或字典里取这样的函数
（`registry.handlers["read_file"]`），也查得到：`fn` 在里面定义、此刻还活着的函数（比如登记进注册表的处理函数），
连同它们闭包里的值一起查；碰到对象，就按代码里出现的名字读它的属性（`property` 只算库里和笔记本里定义的，
第三方包的不碰），碰到字典就按代码里出现的字符串取值。

静态的检查：`eval`、拼出来的 `getattr` 或字典键查不到。
"""

import functools
import gc
import inspect
import sys
import types

_PACKAGE = "harness_lib"


def _inside(name, package: str = _PACKAGE) -> bool:
    return isinstance(name, str) and (name == package or name.startswith(package + "."))


def _from_package(obj) -> bool:
    """obj 是不是 harness_lib 里定义的东西（函数、类、模块）。"""
    return _inside(obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None))


def _here(fn) -> bool:
    """fn 是 harness_lib 或笔记本（`__main__`）里定义的函数。"""
    return isinstance(fn, types.FunctionType) and (_from_package(fn) or fn.__module__ == "__main__")


def _codes(code: types.CodeType):
    """code 和它里面定义的每一段代码（嵌套函数、lambda、推导式）。"""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _made(fn) -> dict[int, str]:
    """函数 fn 造出来的函数：fn 自己、或者 fn 直接调用的同一模块里的函数，在里面定义的那些。
    返回 {代码对象的 id: 说明}。"""
    if not isinstance(fn, types.FunctionType):
        return {}
    makers = [fn]
    for code in _codes(fn.__code__):
        for name in code.co_names:
            callee = fn.__globals__.get(name)
            if (isinstance(callee, types.FunctionType) and callee is not fn
                    and callee.__module__ == fn.__module__):
                makers.append(callee)
    return {id(inner): f"{fn.__qualname__} 造出来的 {inner.co_name}"
            for maker in makers for inner in list(_codes(maker.__code__))[1:]}


def _private(obj) -> list:
    """harness_lib 里一个定义所在模块的私有定义（`_` 开头的名字）：那是它的实现。"""
    if isinstance(obj, types.ModuleType) or not _from_package(obj):
        return []
    module = sys.modules.get(getattr(obj, "__module__", None))
    if module is None:
        return []
    return [v for name, v in list(vars(module).items()) if name.startswith("_") and not name.startswith("__")
            and not isinstance(v, types.ModuleType) and _from_package(v)]


def _expand(forbidden) -> tuple[set[int], dict[int, str], list[str]]:
    """禁止清单 → 被禁止对象的 id 集合、被禁止的函数造出来的代码（id → 说明），以及给人看的清单。"""
    ids, made, shown = set(), {}, []
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
            ids.update(id(v) for v in _private(item))
            made.update(_made(item))
            shown.append(getattr(item, "__qualname__", repr(item)))
    return ids, made, list(dict.fromkeys(shown))


_DEPTH = 2  # 运行时取值查几层：registry → .handlers → ["read_file"]


class _Walker:
    def __init__(self, ids: set[int], made: dict[int, str]):
        self.ids, self.made, self.found, self.seen, self.walked = ids, made, [], set(), set()

    def hit(self, obj, how: str) -> bool:
        """obj 是被禁止的定义、被禁止的函数造出来的函数，或者被禁止的类的实例时记下来。"""
        if id(obj) in self.ids:
            real = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
            self.found.append(how if not real or how.endswith(real) else f"{how}（即 {real}）")
            return True
        if isinstance(obj, types.FunctionType) and id(obj.__code__) in self.made:
            self.found.append(f"{how}（{self.made[id(obj.__code__)]}）")
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
            words = _words(obj.__code__)
            for default in (*(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values()):
                self.value(default, f"{obj.__name__} 的默认参数")
                self.look(default, f"{obj.__name__} 的默认参数", words)
            for name, cell in zip(obj.__code__.co_freevars, obj.__closure__ or ()):
                try:
                    contents = cell.cell_contents
                except ValueError:  # 还没赋值的闭包变量
                    continue
                self.value(contents, f"{obj.__name__} 的闭包变量 {name}")
                self.look(contents, f"{obj.__name__} 的闭包变量 {name}", words)
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

    def look(self, obj, how: str, words: tuple[frozenset, frozenset], depth: int = _DEPTH) -> None:
        """学生的代码拿着 obj 在运行时取东西：字典按代码里出现的字符串取值，对象按代码里出现的名字读属性。
        属性用 `inspect.getattr_static` 读，不运行 `__getattr__`；`property` 只在它是库里或笔记本里的代码时才算出来
        （比如注册表的 `handlers`）。"""
        names, keys = words
        found = []
        if isinstance(obj, dict):
            found = [(f"{how}[{key!r}]", dict.__getitem__(obj, key)) for key in sorted(keys)
                     if dict.__contains__(obj, key)]
        elif not isinstance(obj, (type, types.ModuleType, types.FunctionType)) and type(obj).__module__ != "builtins":
            for name in sorted(names):
                attr = inspect.getattr_static(obj, name, None)
                if isinstance(attr, property):
                    if not _here(attr.fget):
                        continue
                    try:
                        attr = attr.fget(obj)
                    except Exception:
                        continue
                if attr is not None:
                    found.append((f"{how}.{name}", attr))
        for where, item in found:
            self.value(item, where)
            if depth > 1:
                self.look(item, where, words, depth - 1)

    def made_from(self, code: types.CodeType) -> list:
        """code 里面定义、此刻还活着的函数（比如学生登记进注册表的处理函数）：它们的闭包和默认参数只在运行时才有。"""
        inner = {id(c): c for c in list(_codes(code))[1:]
                 if not c.co_name.startswith("<") or c.co_name == "<lambda>"}  # 推导式的函数用完就没了
        if not inner:
            return []
        return [f for f in gc.get_referrers(*inner.values())
                if isinstance(f, types.FunctionType) and id(f.__code__) in inner]

    def code(self, code: types.CodeType, globals_: dict) -> None:
        if id(code) in self.walked:
            return
        self.walked.add(id(code))
        words = _words(code)
        for fn in self.made_from(code):
            self.value(fn, f"{code.co_name} 里造出来的 {fn.__name__}")
        modules = []
        for name in code.co_names:
            obj = globals_[name] if name in globals_ else sys.modules.get(name)  # 函数体里 import 的模块名字带点
            if obj is None:
                continue
            if not isinstance(obj, types.ModuleType):
                self.value(obj, name)
                self.look(obj, name, words)
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


def _words(code: types.CodeType) -> tuple[frozenset, frozenset]:
    """code（连同里面定义的代码）出现的名字和字符串常量：运行时取属性、取字典的值，只认这些。"""
    codes = list(_codes(code))
    return (frozenset(name for c in codes for name in c.co_names),
            frozenset(k for c in codes for k in c.co_consts if isinstance(k, str)))


def delegations(fn, *forbidden) -> list[str]:
    """fn 的代码能走到的被禁止定义，每处一条说明；没有就是空列表。"""
    ids, made, _ = _expand(forbidden)
    walker = _Walker(ids, made)
    walker.value(fn, getattr(fn, "__name__", repr(fn)))
    return sorted(set(walker.found))


def assert_own_work(fn, *forbidden) -> None:
    """fn 用到了 forbidden 里的任何一个定义，就抛出带中文说明的 AssertionError。"""
    if not callable(fn):
        raise AssertionError(f"{fn!r} 不是函数，先把练习的函数写出来")
    found = delegations(fn, *forbidden)
    if found:
        raise AssertionError(f"{getattr(fn, '__name__', fn)} 用到了现成的 {'、'.join(found)}。"
                             f"这道题要你自己写出这部分逻辑，不能交给 {'、'.join(_expand(forbidden)[2])}。")
