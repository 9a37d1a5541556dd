"""执行前先问人：*审批*（approval）策略、只读*白名单*（allowlist），以及“谁提出的调用可信”。

笔记本 10_approval 讲解这里的内容（原文第二、四节的延伸）。原文第二节说权限控制要放在处理函数
之前；第四节说子串黑名单容易被变体绕过，生产环境要问“高风险动作是否需要用户批准”。

要不要审批，只看提出这次调用的客户端（`trusted(client)`），不看进程里的任何全局状态：
- 可信的只有两种：离线假模型 `FakeClient`（包括它的子类，回复都由本项目的代码决定），以及
  `base_url` 指向本进程里用 `endpoint.start_server` 启动、还没有关闭的本地端点的客户端
  （背后还是那个确定的假模型，见 `endpoint.serves_fake`）；
- 其余一律不可信（fail closed）：切换器交出的真实端点客户端、自己 `openai.OpenAI(...)` 建的客户端、
  回放录像的 `ReplayClient`、本机的 Ollama、vLLM、别的进程里启动的本地端点、已经关闭的本地端点、
  `None`，以及没有 `base_url` 的对象。

两个入口：
1. `guard(handlers, client, policy=None, *, ask=None)`：客户端可信时（不管哪种策略）原样返回
   `handlers`（同一个 dict 对象）；否则返回一张只读的新分发表 `Guarded`，其中会运行程序或改动
   文件的工具（bash、write_file、edit_file，以及名字不认识的工具）先审批，再交给原来的处理函数。
   只读的 `read_file`、`glob` 原样保留。
2. `guard(handlers, None, policy)`：不给客户端，一律当作不可信。

`agent_loop` 和 `agent_loop_stream` 每次运行开头都调用 `guard(handlers, client)`。已经包好的 `Guarded`
再交给 `guard` 时原样返回，所以把 `guard` 的结果传给循环，同一次调用也只问一遍。

被拒绝时，包好的处理函数自己返回 `错误（执行授权失败）：理由`，和 `execute_tool_call` 处理
`ToolDenied` 时写的文字一样，原来的处理函数根本不会被调用，所以不会启动任何进程、不会碰任何文件。
本模块属于下面的辅助层，不导入课程层（`harness_lib.lesson`）的任何东西。

问人时给人看的是一句说明（`describe(tool, args)`）：bash 是完整的命令；write_file 是路径、字符数和
内容的开头；edit_file 是路径，以及要被替换的原文和新文字（过长时截短）。

策略由参数 `policy` 指定；不指定时，在调用 `guard` 的那一刻读环境变量 `HARNESS_APPROVAL`，默认 `auto`：
- `auto`（默认）：不可信的客户端，只读白名单里的命令直接放行，其余逐条询问，无法询问时拒绝；
- `ask`：不可信的客户端连只读命令也逐条询问，无法询问时退回白名单；
- `allowlist`：不询问，只放行只读调用（生产做法：默认拒绝，明确允许）；
- `allow`：一律放行，必须自己明确选择；
- `deny`：不可信的客户端提出的、会运行程序或改动文件的调用一律拒绝。
不管哪种策略，可信的客户端（离线假模型、本进程里的假模型端点）都不审批：它们提出的调用是笔记本作者写好的。
不给客户端（`None`）时一律按不可信处理，所以笔记本 10 用它演示每种策略。
环境变量写错时不会被当成放行：不可信的客户端提出的、包好的工具调用一律拒绝，理由里说明可选的值。
“只读调用”指白名单放行的 bash 命令；write_file、edit_file 和不认识的工具都不算。

记忆：答 `a` 时，记住的是“同一个工具、逐字相同的参数”，只记在这一张 `Guarded` 分发表里
（`always_allowed()` 查看，`forget()` 清空）。另一张分发表、单独调用的 `decide` 都不知道它；
分发表不用了，记忆也就没了。循环每次运行自己包的表只活一次运行；想让记忆跨过几次运行，
就自己先 `guard` 好，再把这张表传给循环的 `handlers`。

怎样询问：用内核的标准输入请求，也就是 `input()`。JupyterLab 会在单元格下面显示一个输入框，
单元格一直等到你回车。我们没有用 ipywidgets 按钮：单元格运行期间，内核不处理前端发来的控件消息
（comm 消息），按钮的点击要等单元格结束才会到达，在运行中的单元格里等待点击只会卡死。
询问之前先把说明、提出调用的客户端和白名单的意见打印出来，再提示 “y 批准 / n 原因 拒绝 / a 以后都允许同样的调用”。
拿不到标准输入时（nbclient 无头运行会抛 `StdinNotImplementedError`；普通 Python 进程没有终端），
`ask_stdin` 返回 None，决定退回白名单。测试和笔记本可以传入自己的 `ask(说明) -> str | None`
代替真人回答，例如 `guard(handlers, client, "ask", ask=lambda text: "n 不要删文件")`。

白名单怎样判断一条命令是不是只读的，见 `harness_lib.safety.allowlist`。
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from .allowlist import (  # noqa: F401  笔记本 10 通过 approval 查看这些常量
    DENIED_PREFIX,
    FIND_ACTIONS,
    GIT_REASON,
    READ_ONLY_PROGRAMS,
    WINDOWS_PROGRAMS,
    WINDOWS_SPECIAL,
    Verdict,
    check_allowlist,
)
from .trust import trusted

__all__ = [
    "DENIED_PREFIX",
    "ENV_VAR",
    "POLICIES",
    "PROMPT",
    "READ_ONLY_TOOLS",
    "Guarded",
    "Verdict",
    "ask_stdin",
    "check_allowlist",
    "decide",
    "describe",
    "guard",
    "parse_answer",
    "policy_from_env",
    "trusted",
]

ENV_VAR = "HARNESS_APPROVAL"
POLICIES = ("auto", "ask", "allowlist", "allow", "deny")
DEFAULT_POLICY = "auto"
PROMPT = "y 批准 / n 原因 拒绝 / a 以后都允许同样的调用："
MAX_TRIES = 3  # 答复看不懂时最多再问几次
CLIP = 60  # 说明里引用文字时最多保留的字符数

READ_ONLY_TOOLS = frozenset({"read_file", "glob"})  # 只读的工具：不审批，原样保留
# ---------------------------------------------------------------------------
# 谁提出的调用可信
# ---------------------------------------------------------------------------


def _source(client) -> str:
    """给人看的“这次调用是谁提出的”：客户端的类型和地址（地址里的用户名、密码不显示）。"""
    if client is None:
        return "没有给出客户端，按不可信处理"
    name = type(client).__name__
    if trusted(client):
        return f"{name}，由本项目的假模型回答，可信"
    try:
        base_url = getattr(client, "base_url", None)
    except Exception:  # noqa: BLE001
        base_url = None
    if base_url is None:
        return f"{name}，没有 base_url，不可信"
    try:
        parts = urlsplit(str(base_url))
        port = f":{parts.port}" if parts.port else ""
        where = f"{parts.scheme}://{parts.hostname or ''}{port}{parts.path}"
    except ValueError:
        where = "（无法解析的地址）"
    return f"{name}，base_url={where}，不可信"


# ---------------------------------------------------------------------------
# 一次待审批的调用，以及给人看的说明
# ---------------------------------------------------------------------------


def _quote(text: str, limit: int = CLIP) -> str:
    """引用一段文字：过长时截短并注明原长，用 repr 写出，换行和不可见字符都看得见。"""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}…（共 {len(text)} 个字符）"


def _canonical(args) -> str:
    try:
        return json.dumps(args, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return repr(args)


def _strings(args, *keys) -> bool:
    return isinstance(args, dict) and all(isinstance(args.get(k), str) for k in keys)


def describe(tool: str, args) -> str:
    """审批时给人看的一句说明：这次调用会做什么。

    bash 是完整的命令本身；write_file 是路径、字符数和内容的开头；edit_file 是路径、被替换的原文和
    新文字（过长时截短）；其余工具和参数不合格的调用，写出工具名和参数（过长时截短）。
    """
    if tool == "bash" and _strings(args, "command"):
        return args["command"]
    if tool == "write_file" and _strings(args, "path", "content"):
        content = args["content"]
        return (f"write_file：把 {len(content)} 个字符写进 {args['path']!r}（不存在就新建，存在就整个覆盖），"
                f"内容开头是 {_quote(content)}")
    if tool == "edit_file" and _strings(args, "path", "old_string", "new_string"):
        return (f"edit_file：在 {args['path']!r} 里把 {_quote(args['old_string'])} "
                f"换成 {_quote(args['new_string'])}")
    if tool in ("bash", "write_file", "edit_file"):
        return f"{tool}：参数不合格，原样是 {_quote(_canonical(args), 200)}"
    return f"{tool}：参数是 {_quote(_canonical(args), 200)}"


@dataclass(frozen=True)
class _Call:
    """一次待审批的工具调用。"""

    tool: str
    text: str  # 给人看的说明（bash 就是命令本身）
    key: tuple  # 记忆用：同一个工具、逐字相同的参数
    read_only: Verdict  # 不问人时的判断：只有白名单放行的 bash 命令算只读


def _call(tool: str, args) -> _Call:
    text = describe(tool, args)
    if tool == "bash" and _strings(args, "command"):
        read_only = check_allowlist(args["command"])
    elif tool in ("write_file", "edit_file"):
        read_only = Verdict(False, f"{tool} 会改动文件，不在只读白名单里", "白名单")
    elif tool == "bash":
        read_only = Verdict(False, "bash 的参数不合格（没有字符串参数 command），无法判断是否只读", "白名单")
    else:
        read_only = Verdict(False, f"工具 {tool!r} 不在只读白名单里"
                                   "（只读的只有白名单放行的 bash 命令，以及 read_file、glob）", "白名单")
    return _Call(tool, text, (tool, _canonical(args)), read_only)


# ---------------------------------------------------------------------------
# 询问
# ---------------------------------------------------------------------------


def parse_answer(text) -> tuple[str | None, str]:
    """把一句答复变成 `(选择, 原因)`：选择是 "y"、"n"、"a"，看不懂时是 None。

    认得 y/yes/是/批准、n/no/否/拒绝（后面可以跟原因）、a/always/总是。
    """
    text = (text or "").strip()
    words = {"y": "y", "yes": "y", "是": "y", "批准": "y",
             "n": "n", "no": "n", "否": "n", "拒绝": "n",
             "a": "a", "always": "a", "总是": "a"}
    for word in sorted(words, key=len, reverse=True):
        head, rest = text[:len(word)], text[len(word):]
        if head.lower() == word and not (rest[:1].isascii() and rest[:1].isalpha()):
            return words[word], rest.strip(" \t:：,，。.")
    return None, ""


def _in_kernel() -> bool:
    """是否运行在 Jupyter 内核里（那里的 input() 走内核的标准输入请求）。"""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # noqa: BLE001
        return False
    return getattr(shell, "kernel", None) is not None


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, OSError, ValueError):
        return False


def _box(text: str, source: str, hint: Verdict) -> str:
    """把待审批的调用排成几行：说明、提出它的客户端、白名单的意见。"""
    lines = [f"┌ 审批：执行框架即将执行下面这次工具调用（提出它的：{source}）"]
    lines += [f"│ {line}" for line in text.split("\n")]
    if any(not ch.isprintable() for ch in text if ch != "\n"):
        lines.append(f"│ （含有不可见字符，原样是 {text!r}）")
    lines.append(f"└ 白名单的意见：{'放行' if hint.allowed else '拒绝'}（{hint.reason}）")
    return "\n".join(lines)


def ask_stdin(text: str, *, source: str | None = None, hint: Verdict | None = None) -> str | None:
    """默认的询问方式：先打印说明，再用 `input()` 等人回答。拿不到标准输入时返回 None。

    `source` 是提出调用的客户端（给人看的文字），`hint` 是白名单的意见；
    不给 `hint` 时把 `text` 当作一条 bash 命令交给白名单判断。
    """
    hint = check_allowlist(text) if hint is None else hint
    print(_box(text, source or _source(None), hint), flush=True)
    if _in_kernel() or _stdin_is_terminal():
        try:
            return input(PROMPT)
        except (EOFError, OSError, NotImplementedError):  # StdinNotImplementedError 是它的子类
            pass
    print("（这里没有可用的标准输入，无法询问；改用白名单判断。）", flush=True)
    return None


# ---------------------------------------------------------------------------
# 决定
# ---------------------------------------------------------------------------


def _policy_name(value) -> str:
    name = str(value).strip().lower()
    if name not in POLICIES:
        raise ValueError(
            f"审批策略只能是 {'、'.join(POLICIES)}，现在是 {value!r}。"
        )
    return name


def policy_from_env(environ=None) -> str:
    """读环境变量 `HARNESS_APPROVAL`，没设置时是 `auto`；取值不认识时抛 ValueError。"""
    environ = os.environ if environ is None else environ
    raw = (environ.get(ENV_VAR) or "").strip()
    try:
        return _policy_name(raw) if raw else DEFAULT_POLICY
    except ValueError:
        raise ValueError(f"环境变量 {ENV_VAR} 只能是 {'、'.join(POLICIES)}，现在是 {raw!r}。") from None


def _resolve(policy):
    """`policy` 参数 → 策略名。None 时读环境变量；环境变量写错时得到一个拒绝的结论，不当成放行。"""
    if policy is not None:
        return _policy_name(policy)  # 代码里明确写错是编程错误：抛 ValueError
    try:
        return policy_from_env()
    except ValueError as exc:
        return Verdict(False, f"{exc}为安全起见，不执行这次调用", "策略")


class _Memory:
    """“以后都允许”的记忆：键是（工具名, 参数），值是给人看的说明。属于某一张 `Guarded` 分发表。"""

    def __init__(self):
        self._lock = threading.Lock()
        self._items: dict[tuple, str] = {}

    def __contains__(self, key) -> bool:
        with self._lock:
            return key in self._items

    def add(self, call: _Call) -> None:
        with self._lock:
            self._items[call.key] = call.text

    def texts(self) -> frozenset:
        with self._lock:
            return frozenset(self._items.values())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


def _ask_person(call: _Call, ask, memory: _Memory | None) -> Verdict:
    """问人（或问传进来的 ask 函数），把答复变成结论；没人可问时退回白名单。"""
    for _ in range(MAX_TRIES):
        answer = ask(call.text)
        if answer is None:
            return Verdict(call.read_only.allowed, call.read_only.reason, "白名单（无法询问）")
        choice, reason = parse_answer(answer)
        if choice == "y":
            return Verdict(True, "人工批准", "人工")
        if choice == "a":
            if memory is None:
                return Verdict(True, "人工批准；这里没有分发表可以记住“以后都允许”，只算这一次", "人工")
            memory.add(call)
            return Verdict(True, "人工批准，这张分发表以后不再询问同样的调用", "人工")
        if choice == "n":
            return Verdict(False, f"用户拒绝执行：{reason or '没有说明原因'}", "人工")
    return Verdict(False, "没有得到有效的答复（y / n 原因 / a），按拒绝处理", "人工")


def _judge(call: _Call, policy, *, ask, source: str, memory: _Memory | None) -> Verdict:
    """按策略决定一次调用能不能执行。`policy` 是策略名，或者环境变量写错时的拒绝结论。"""
    if isinstance(policy, Verdict):
        return policy
    if policy == "allow":
        return Verdict(True, "策略 allow：一律放行", "策略")
    if policy == "deny":
        return Verdict(False, "策略 deny：不执行任何会运行程序或改动文件的调用", "策略")
    if memory is not None and call.key in memory:
        return Verdict(True, "这张分发表记住了：同样的调用以后都允许", "记忆")
    if policy == "allowlist":
        return call.read_only
    if policy == "auto" and call.read_only.allowed:
        # 只读白名单里的命令不打扰人：问的次数少了，真正要问的那几次才会被认真看
        return Verdict(True, f"{call.read_only.reason}；auto 策略下只读命令不询问", "白名单")
    if ask is None:
        def ask(text):
            return ask_stdin(text, source=source, hint=call.read_only)
    return _ask_person(call, ask, memory)  # auto（不可信的客户端）与 ask


def decide(command, *, policy=None, ask=None) -> Verdict:
    """按策略决定一条 bash 命令能不能执行；不看任何客户端，提出它的一方按不可信处理。

    `policy=None` 时读环境变量 `HARNESS_APPROVAL`（写错时拒绝）。`ask(command) -> str | None`
    代替真人回答；不给时用 `ask_stdin`。单独调用时没有记忆：答 `a` 也只批准这一次。
    """
    call = _call("bash", {"command": command})
    return _judge(call, _resolve(policy), ask=ask, source=_source(None), memory=None)


# ---------------------------------------------------------------------------
# 包住分发表
# ---------------------------------------------------------------------------


class Guarded(Mapping):
    """`guard` 返回的分发表：会运行程序或改动文件的工具先审批，只读工具（read_file、glob）原样保留。

    用法和普通的 dict 一样（`name in table`、`table[name]`），但不能修改：后加进来的处理函数
    会绕过审批，所以想加工具时，在原来的分发表里加好，再调用一次 `guard`。
    `client` 是提出调用的客户端，`policy` 是策略名（环境变量写错时是 None，一律拒绝）；
    `always_allowed()` 列出这张表记住的“以后都允许”的调用，`forget()` 清空它们。
    """

    def __init__(self, handlers, client, policy, ask=None):
        self.client = client
        self.policy = None if isinstance(policy, Verdict) else policy
        self._policy = policy
        self._ask = ask
        self._source = _source(client)
        self._memory = _Memory()
        self._handlers = {name: handler if name in READ_ONLY_TOOLS else self._wrap(name, handler)
                          for name, handler in handlers.items()}

    def _wrap(self, tool, handler):
        """包一层：先审批，批准了才调用原来的处理函数；拒绝时直接返回拒绝的文字。"""
        def guarded(args):
            call = _call(tool, args)
            verdict = _judge(call, self._policy, ask=self._ask, source=self._source, memory=self._memory)
            if not verdict.allowed:
                return verdict.message  # 原处理函数没有被调用：不启动进程，不碰文件
            return handler(args)

        guarded.__wrapped__ = handler
        return guarded

    def __getitem__(self, name):
        return self._handlers[name]

    def __iter__(self):
        return iter(self._handlers)

    def __len__(self) -> int:
        return len(self._handlers)

    def always_allowed(self) -> frozenset:
        """这张表记住的“以后都允许”的调用（给人看的说明）。"""
        return self._memory.texts()

    def forget(self) -> None:
        """清空这张表的“以后都允许”。"""
        self._memory.clear()

    def __repr__(self) -> str:
        tools = "、".join(name if name in READ_ONLY_TOOLS else f"{name}（先审批）" for name in self._handlers)
        policy = self.policy or "环境变量写错，一律拒绝"
        return f"Guarded({tools}；策略：{policy}；客户端：{self._source})"


def guard(handlers, client, policy=None, *, ask=None):
    """按提出调用的客户端给分发表加上审批。

    客户端可信（`trusted(client)`）时，原样返回 `handlers`（同一个对象）：离线假模型提出的调用是笔记本作者写好的，
    策略管的只是不可信的客户端，所以设了 `HARNESS_APPROVAL=ask` / `allowlist` / `deny`，脚本模式的格子也照常运行、从不询问。
    否则返回 `Guarded`：bash、write_file、edit_file 和名字不认识的工具先审批，read_file、glob 原样保留。
    `handlers` 已经是 `Guarded` 时也原样返回：它的策略和记忆在包的时候就定下了，再包一层只会把同一次调用问两遍。
    `policy` 为 None 时在这一刻读环境变量 `HARNESS_APPROVAL`；代码里明确写错的 `policy` 抛 ValueError。
    `ask(说明) -> str | None` 代替真人回答（返回 None 表示没人可问）；不给时用 `ask_stdin`。
    """
    resolved = _resolve(policy)
    if isinstance(handlers, Guarded) or trusted(client):
        return handlers
    return Guarded(handlers, client, resolved, ask)
