"""执行前先问人：*审批*（approval）。笔记本 10 讲它，规则的全文见 docs/approval.md。

`guard(handlers, client)`：客户端不可信时，会运行程序或改动文件的工具先按策略（`HARNESS_APPROVAL`）审批，
被拒绝时原处理函数不被调用；问人用 `input()`，拿不到标准输入时退回白名单。
"""

import copy
import json
import os
import re
import sys
from collections.abc import Mapping

from ..text import shorten
from .allowlist import Verdict, check_allowlist
from .trust import trusted

ENV_VAR = "HARNESS_APPROVAL"
POLICIES = ("auto", "ask", "allowlist", "allow", "deny")
PROMPT = "y 批准 / n 原因 拒绝 / a 以后都允许同样的调用："
MAX_TRIES = 3  # 答复看不懂时最多问几次


def working_dir(handler):
    """处理函数在哪个目录里执行命令（`handler.cwd`，06 的 bash 这样标）；没标时是当前目录。
    白名单按它判断命令读的路径在不在工作目录里。"""
    return getattr(handler, "cwd", None)


def read_only(handler) -> bool:
    """处理函数自己声明只读（`handler.read_only = True`，06 的 `read_file`、`glob` 这样标）：不审批，原样保留。
    看的是处理函数的标记，不是工具名：另一个叫 `read_file` 的处理函数照样要审批。"""
    return getattr(handler, "read_only", False) is True
_WORDS = {"y": "y", "yes": "y", "是": "y", "批准": "y", "n": "n", "no": "n", "否": "n", "拒绝": "n",
          "a": "a", "always": "a", "总是": "a"}


def _source(client) -> str:
    """给人看的“这次调用是谁提出的”（只用于不可信的客户端）：类型和地址，不显示地址里的用户名、密码。"""
    if client is None:
        return "没有给出客户端，按不可信处理"
    try:
        where = f"base_url={re.sub(r'//[^/@]*@', '//', str(client.base_url))}" if client.base_url else ""
    except Exception:  # noqa: BLE001  没有 base_url 的对象、古怪的对象：照样不可信
        where = ""
    return f"{type(client).__name__}，{where or '没有 base_url'}，不可信"


def _quote(text: str, limit: int = 60) -> str:
    return repr(shorten(text, limit, total=True))


def _canonical(args) -> str:
    try:
        return json.dumps(args, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return repr(args)


def _strings(args, *keys) -> bool:
    return isinstance(args, dict) and all(isinstance(args.get(k), str) for k in keys)


def describe(tool: str, args) -> str:
    """审批时给人看的一句说明：bash 是完整的命令；写文件、改文件是路径和（截短的）内容。"""
    if tool == "bash" and _strings(args, "command"):
        return args["command"]
    if tool == "write_file" and _strings(args, "path", "content"):
        return (f"write_file：把 {len(args['content'])} 个字符写进 {args['path']!r}（不存在就新建，存在就整个覆盖），"
                f"内容开头是 {_quote(args['content'])}")
    if tool == "edit_file" and _strings(args, "path", "old_string", "new_string"):
        return f"edit_file：在 {args['path']!r} 里把 {_quote(args['old_string'])} 换成 {_quote(args['new_string'])}"
    return f"{tool}：参数是 {_quote(_canonical(args), 200)}"


def _read_only(tool: str, args, cwd=None) -> Verdict:
    """不问人时的判断：只有白名单放行的 bash 命令算只读（它读的路径都在工作目录 `cwd` 里）。"""
    if tool == "bash" and _strings(args, "command"):
        return check_allowlist(args["command"], cwd=cwd)
    if tool in ("write_file", "edit_file"):
        return Verdict(False, f"{tool} 会改动文件，不在只读白名单里", "白名单")
    return Verdict(False, f"工具 {tool!r} 的这次调用不在只读白名单里（bash 要有字符串参数 command）", "白名单")


def parse_answer(text) -> tuple[str | None, str]:
    """把一句答复变成 `(选择, 原因)`：选择是 "y"、"n"、"a"，看不懂时是 None。"""
    text = (text or "").strip()
    for word in sorted(_WORDS, key=len, reverse=True):
        rest = text[len(word):]
        if text[:len(word)].lower() == word and not (rest[:1].isascii() and rest[:1].isalpha()):
            return _WORDS[word], rest.strip(" \t:：,，。.")
    return None, ""


def _can_ask() -> bool:
    """在 Jupyter 内核里（input() 走内核的标准输入请求），或者标准输入是终端。"""
    try:
        shell = sys.modules["IPython"].get_ipython() if "IPython" in sys.modules else None
        return getattr(shell, "kernel", None) is not None or (sys.stdin is not None and sys.stdin.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def ask_stdin(text: str, *, source: str | None = None, hint: Verdict | None = None) -> str | None:
    """默认的询问：先打印说明、提出调用的客户端和白名单的意见，再 `input()`；拿不到标准输入时返回 None。"""
    hint = check_allowlist(text) if hint is None else hint
    hidden = any(not ch.isprintable() for ch in text if ch != "\n")
    print(f"┌ 审批：执行框架即将执行下面这次工具调用（提出它的：{source or _source(None)}）\n{text}\n"
          + (f"（含有不可见字符，原样是 {text!r}）\n" if hidden else "")
          + f"└ 白名单的意见：{'放行' if hint else '拒绝'}（{hint.reason}）", flush=True)
    if _can_ask():
        try:
            return input(PROMPT)
        except (EOFError, OSError, NotImplementedError):  # StdinNotImplementedError 是它的子类
            pass
    print("（这里没有可用的标准输入，无法询问；改用白名单判断。）", flush=True)
    return None


def _policy_name(value, where="审批策略") -> str:
    name = str(value).strip().lower()
    if name not in POLICIES:
        raise ValueError(f"{where}只能是 {'、'.join(POLICIES)}，现在是 {value!r}。")
    return name


def policy_from_env(environ=None) -> str:
    """读环境变量 `HARNESS_APPROVAL`，没设置时是 `auto`；取值不认识时抛 ValueError。"""
    raw = ((os.environ if environ is None else environ).get(ENV_VAR) or "").strip() or "auto"
    return _policy_name(raw, f"环境变量 {ENV_VAR} ")


def _resolve(policy):
    """策略名；`policy` 为 None 时读环境变量，写错时得到一个拒绝的结论（代码里写错的 `policy` 抛 ValueError）。"""
    if policy is not None:
        return _policy_name(policy)
    try:
        return policy_from_env()
    except ValueError as exc:
        return Verdict(False, f"{exc}为安全起见，不执行这次调用", "策略")


def _judge(tool, args, policy, ask, source, memory: dict | None, cwd=None) -> Verdict:
    """按策略决定一次调用能不能执行；`memory` 是一张 `Guarded` 记住的“以后都允许”，没有时是 None；
    `cwd` 是处理函数执行命令的目录。"""
    if isinstance(policy, Verdict):
        return policy
    if policy == "allow":
        return Verdict(True, "策略 allow：一律放行", "策略")
    if policy == "deny":
        return Verdict(False, "策略 deny：不执行任何会运行程序或改动文件的调用", "策略")
    key, text, read_only = (tool, _canonical(args)), describe(tool, args), _read_only(tool, args, cwd)
    if memory is not None and key in memory:
        return Verdict(True, "这张分发表记住了：同样的调用以后都允许", "记忆")
    if policy == "allowlist":
        return read_only
    if policy == "auto" and read_only:  # 只读命令不打扰人：真正要问的那几次才会被认真看
        return Verdict(True, f"{read_only.reason}；auto 策略下只读命令不询问", "白名单")
    for _ in range(MAX_TRIES):
        answer = ask(text) if ask else ask_stdin(text, source=source, hint=read_only)
        if answer is None:
            return Verdict(read_only.allowed, read_only.reason, "白名单（无法询问）")
        choice, reason = parse_answer(answer)
        if choice == "a" and memory is not None:
            memory[key] = text
            return Verdict(True, "人工批准，这张分发表以后不再询问同样的调用", "人工")
        if choice in ("y", "a"):
            return Verdict(True, "人工批准" if choice == "y" else "人工批准；没有分发表可以记住，只算这一次", "人工")
        if choice == "n":
            return Verdict(False, f"用户拒绝执行：{reason or '没有说明原因'}", "人工")
    return Verdict(False, "没有得到有效的答复（y / n 原因 / a），按拒绝处理", "人工")


def decide(command, *, policy=None, ask=None) -> Verdict:
    """按策略决定一条 bash 命令能不能执行，不执行它；提出它的一方按不可信处理，答 `a` 也只批准这一次。"""
    return _judge("bash", {"command": command}, _resolve(policy), ask, _source(None), None)


class Guarded(Mapping):
    """`guard` 交回的分发表：会运行程序或改动文件的工具先审批，声明了只读的处理函数（`read_only`）原样保留。
    不能修改（后加的处理函数会绕过审批）。`always_allowed()` 列出答过 `a` 的调用，`forget()` 清空它们。"""

    def __init__(self, handlers, client, policy, ask=None, denied=None):
        self.client, self._denied = client, denied
        self.policy = None if isinstance(policy, Verdict) else policy  # None：环境变量写错，一律拒绝
        self._policy, self._ask, self._source = policy, ask, _source(client)
        self._memory: dict[tuple, str] = {}
        self._originals = dict(handlers)
        self._handlers = self._table()

    def _table(self) -> dict:
        """原来的处理函数，没声明只读的包上审批。"""
        return {name: handler if read_only(handler) else self._wrap(name, handler)
                for name, handler in self._originals.items()}

    def _wrap(self, tool, handler):
        def guarded(args):
            verdict = _judge(tool, args, self._policy, self._ask, self._source, self._memory,
                             working_dir(handler))
            if verdict:
                return handler(args)
            if self._denied is not None:  # 拒绝是数据：抛出调用方给的异常（循环给的是 ToolDenied，执行授权失败）
                raise self._denied(verdict.reason)
            return verdict.message  # 没给异常类时交回文字；两种情况下原处理函数都没有被调用

        guarded.__wrapped__ = handler
        return guarded

    def __getitem__(self, name):
        return self._handlers[name]

    def __iter__(self):
        return iter(self._handlers)

    def __len__(self) -> int:
        return len(self._handlers)

    def raising(self, denied) -> "Guarded":
        """同样的策略、同一份记忆的一张表，只是拒绝时抛出 `denied`（循环要的是数据，不是文字）。"""
        twin = copy.copy(self)
        twin._denied = denied
        twin._handlers = twin._table()
        return twin

    def always_allowed(self) -> frozenset:
        return frozenset(self._memory.values())

    def forget(self) -> None:
        self._memory.clear()

    def __repr__(self) -> str:
        tools = "、".join(name if read_only(h) else f"{name}（先审批）" for name, h in self._handlers.items())
        return f"Guarded({tools}；策略：{self.policy or '环境变量写错，一律拒绝'}；客户端：{self._source})"


def guard(handlers, client, policy=None, *, ask=None, denied=None):
    """按提出调用的客户端给分发表加上审批；可信的客户端、已经包好的 `Guarded` 都原样交回。
    `ask(说明) -> str | None` 代替真人回答（None 表示没人可问）；不给时用 `ask_stdin`。
    `denied`：拒绝时抛出的异常类（以理由为参数），例如 04 的 `ToolDenied`；不给时拒绝交回 `错误（执行授权失败）：理由`。"""
    resolved = _resolve(policy)
    if isinstance(handlers, Guarded):  # 已经包好了：不再问第二遍；循环要异常时换成抛异常的那一张
        return handlers if denied is None or handlers._denied is denied else handlers.raising(denied)
    if trusted(client):
        return handlers
    return Guarded(handlers, client, resolved, ask, denied)
