"""执行前先问人：*审批*（approval）策略、只读*白名单*（allowlist），以及 `run_bash` 里的安全网。

笔记本 10_approval 讲解这里的内容（原文第二、四节的延伸）。原文第二节说权限控制要放在处理函数
之前；第四节说子串黑名单容易被变体绕过，生产环境要问“高风险动作是否需要用户批准”。本模块给出
两道闸门：

1. `gate(handlers, policy=None, *, ask=None)`：包一层分发表，bash 在进入处理函数之前先审批。
   被拒绝时抛出 `loop.ToolDenied`，`execute_tool_call` 把它写成“错误（执行授权失败）：原因”，
   作为工具结果交给模型，循环照常继续。笔记本 10 用的就是它。
2. 安全网 `check(command)`：`run_bash` 在启动任何进程之前调用它一次。只有当前端点需要审批时才生效，
   被拒绝时 `run_bash` 直接返回同样格式的文字，不启动进程。这样，任何一本笔记本的循环只要用了
   真实端点，都会先经过审批；假模型和本项目的本地端点完全不受影响。已经由 `gate` 批准过的同一条
   命令，安全网不会再问第二遍。

哪些端点需要审批：切换器（`ModelSwitch.current()`）和 `client_from_env()` 每次交出客户端时，
都会调用 `note_endpoint(base_url, model)` 告诉本模块“现在用的是谁”。
- 假模型（`base_url` 为 None）：不需要；
- 本项目的本地端点（回环地址，并且模型名以 `fake` 开头，也就是背后仍是确定的假模型）：不需要；
- 其他一切，包括本机的 Ollama、vLLM、llama.cpp：需要。模型跑在自己电脑上，提出的命令照样
  可能删文件，所以“本机”不等于“可信”。
只有经过切换器或 `client_from_env` 交出的客户端才会被记下；自己直接 `openai.OpenAI(...)` 建的客户端，
需要手动调用 `note_endpoint`。记录的是“最近一次交出的客户端”，整个进程共用一份。

策略由环境变量 `HARNESS_APPROVAL` 选择（启动 JupyterLab 之前设置），默认 `auto`：
- `auto`：端点不需要审批时直接放行；需要审批时逐条询问，无法询问时退回白名单；
- `ask`：逐条询问（`gate` 里即使用假模型也问），无法询问时退回白名单；
- `allowlist`：不询问，只放行只读命令（生产做法：默认拒绝，明确允许）；
- `allow`：一律放行，必须自己明确选择；
- `deny`：一律拒绝。
写错的取值不会被当成放行：需要审批的命令一律拒绝，并在理由里说明可选的值。
“本次会话总是允许”的命令只记在内存里（`always_allowed()`、`forget()`），内核重启就没了。

怎样询问：用内核的标准输入请求，也就是 `input()`。JupyterLab 会在单元格下面显示一个输入框，
单元格一直等到你回车。我们没有用 ipywidgets 按钮：单元格运行期间，内核不处理前端发来的控件消息
（comm 消息），按钮的点击要等单元格结束才会到达，在运行中的单元格里等待点击只会卡死。
询问之前先把命令完整打印出来，再提示 “y 批准 / n 原因 拒绝 / a 本次会话都允许这条命令”。
拿不到标准输入时（nbclient 无头运行会抛 `StdinNotImplementedError`；普通 Python 进程没有终端），
`ask_stdin` 返回 None，决定退回白名单。测试和笔记本可以传入自己的 `ask(command) -> str | None`
代替真人回答，例如 `gate(HANDLERS, "ask", ask=lambda command: "n 不要删文件")`。

白名单（`check_allowlist`）只认这些只读程序：`ls cat head tail wc pwd echo grep find date whoami`，
以及 `git status / log / diff / show`。`find` 不能带 `-exec`、`-delete`、`-fprint` 一类动作；
`git` 不能带 `--output`、`--ext-diff`；`date` 不能带 `-s`。命令先按 shell 的引号规则扫描，
引号外的 `;`、`&`、`||`、重定向 `<` `>`、`$`（变量与 `$( )`）、反引号、括号、花括号、注释 `#`，
以及任何位置的换行一律拒绝；`|` 只允许连接两个都在白名单里的程序。然后用 `shlex` 切词检查。
`find`、`git`、`date` 的参数里不允许引号外的通配符，因为通配符展开后可能变成一个选项
（比如一个名叫 `-delete` 的文件）。白名单只管“会不会改动东西”，不管“会不会读到秘密”：
`cat` 照样能读出私钥文件，所以交给真实端点之前，工作目录里不要放敏感文件。
Windows 上命令交给 cmd.exe，引号规则不同，所以只认 `dir type echo whoami findstr`，并且拒绝所有
特殊字符（包括引号）。这个分支在本项目的测试里只检查了判断结果，没有在 Windows 上运行过。
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import shlex
import socket
import sys
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = [
    "DENIED_PREFIX",
    "ENV_VAR",
    "POLICIES",
    "PROMPT",
    "Verdict",
    "active_endpoint",
    "always_allowed",
    "ask_stdin",
    "check",
    "check_allowlist",
    "decide",
    "forget",
    "gate",
    "note_endpoint",
    "parse_answer",
    "policy_from_env",
    "requires_approval",
    "using_endpoint",
]

ENV_VAR = "HARNESS_APPROVAL"
POLICIES = ("auto", "ask", "allowlist", "allow", "deny")
DEFAULT_POLICY = "auto"
DENIED_PREFIX = "错误（执行授权失败）："  # 与 loop.execute_tool_call 处理 ToolDenied 时的写法相同
PROMPT = "y 批准 / n 原因 拒绝 / a 本次会话都允许这条命令："
MAX_TRIES = 3  # 答复看不懂时最多再问几次

READ_ONLY_PROGRAMS = frozenset({
    "ls", "cat", "head", "tail", "wc", "pwd", "echo", "grep", "find", "date", "whoami", "git",
})
GIT_READ_ONLY = frozenset({"status", "log", "diff", "show"})
GIT_BAD_OPTIONS = ("--output", "--ext-diff", "--textconv")  # 写文件，或运行配置里的外部程序
FIND_ACTIONS = frozenset({
    "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls",
})
NO_GLOB_PROGRAMS = frozenset({"find", "git", "date"})  # 通配符展开后可能变成选项
WINDOWS_PROGRAMS = frozenset({"dir", "type", "echo", "whoami", "findstr"})
WINDOWS_SPECIAL = set("&|<>^%!()\"'`;\r\n")


@dataclass(frozen=True)
class Verdict:
    """一次审批的结论：`allowed` 放行与否，`reason` 中文理由，`by` 是谁做的决定。"""

    allowed: bool
    reason: str
    by: str

    def __bool__(self) -> bool:
        return self.allowed

    @property
    def message(self) -> str:
        """被拒绝时交给模型的文字：`错误（执行授权失败）：理由`。"""
        return f"{DENIED_PREFIX}{self.reason}"


# ---------------------------------------------------------------------------
# 当前端点与会话记忆（都只在内存里）
# ---------------------------------------------------------------------------

_lock = threading.Lock()
_active: tuple[str, str] | None = None  # (base_url, model)；None 表示假模型
_always: set[str] = set()  # 本次会话选择了“总是允许”的命令，逐字比较
# gate 刚刚批准、正在交给处理函数的那条命令；run_bash 的安全网看到它就不再问第二遍
_approved: contextvars.ContextVar[str | None] = contextvars.ContextVar("harness_approved", default=None)


def note_endpoint(base_url=None, model=None) -> None:
    """记下当前交出的客户端连的是哪个端点。`base_url=None` 表示离线假模型。切换器会自动调用。"""
    global _active
    with _lock:
        _active = None if base_url is None else (str(base_url), str(model or ""))


def active_endpoint() -> tuple[str, str] | None:
    """最近一次交出的客户端：`(base_url, model)`；假模型时是 None。"""
    return _active


@contextlib.contextmanager
def using_endpoint(base_url, model=None):
    """在 with 块里假装当前端点是 `base_url`，离开时恢复原样（演示和测试用，不发任何网络请求）。"""
    global _active
    before = _active
    note_endpoint(base_url, model)
    try:
        yield
    finally:
        with _lock:
            _active = before


def _is_loopback(host: str) -> bool:
    host = (host or "").strip("[]").lower()
    if host in ("localhost", "localhost.", "0.0.0.0", "::1"):
        return True
    if not re.fullmatch(r"[0-9a-fx.]+", host):  # inet_aton 会忽略空白后面的内容，先挡掉
        return False
    try:
        return socket.inet_aton(host)[0] == 127  # 也认得 127.1、2130706433 这样的写法
    except OSError:
        return False


def requires_approval(endpoint=...) -> bool:
    """这个端点提出的命令要不要先审批。不给参数时看当前端点。

    `endpoint` 可以是 None（假模型）、一个 base_url 字符串，或 `(base_url, model)`。
    只有假模型和本项目的本地端点（回环地址上、模型名以 `fake` 开头）不需要。
    """
    if endpoint is ...:
        endpoint = _active
    if endpoint is None:
        return False
    base_url, model = (endpoint, "") if isinstance(endpoint, str) else endpoint
    try:
        host = urlsplit(str(base_url)).hostname or ""
    except ValueError:
        return True
    return not (_is_loopback(host) and str(model or "").startswith("fake"))


def always_allowed() -> frozenset:
    """本次会话里选择了“总是允许”的命令（副本）。"""
    with _lock:
        return frozenset(_always)


def forget() -> None:
    """清空“总是允许”的记录。"""
    with _lock:
        _always.clear()


# ---------------------------------------------------------------------------
# 白名单
# ---------------------------------------------------------------------------


class _Reject(Exception):
    """扫描命令时遇到不允许的写法。"""


def _scan(command: str) -> list[tuple[str, bool]]:
    """按 shell 的引号规则扫描一遍，返回按 `|` 切开的各段，以及每段有没有引号外的通配符。

    遇到会让 shell 多做事情的写法（连接多条命令、重定向、展开、替换、子 shell……）就抛出 `_Reject`。
    """
    segments: list[tuple[str, bool]] = []
    current: list[str] = []
    glob = False
    quote = None
    i = 0
    while i < len(command):
        c = command[i]
        if c in "\n\r":
            raise _Reject("命令里有换行：一次只能执行一行命令")
        if ord(c) < 32 and c != "\t":
            raise _Reject(f"命令里有控制字符 {c!r}")
        if quote == "'":  # 单引号里的一切都是普通字符
            if c == "'":
                quote = None
            current.append(c)
            i += 1
            continue
        if c == "\\":
            if i + 1 >= len(command):
                raise _Reject("命令以反斜杠结尾")
            current.append(command[i:i + 2])  # 反斜杠让下一个字符变成普通字符
            i += 2
            continue
        if quote == '"':  # 双引号里，$ 和反引号仍然会展开
            if c == '"':
                quote = None
            elif c == "$":
                raise _Reject("双引号里有 $：变量展开或 $( ) 命令替换")
            elif c == "`":
                raise _Reject("双引号里有反引号：命令替换")
            current.append(c)
            i += 1
            continue
        # 引号外
        if c in "'\"":
            quote = c
        elif c == "|":
            if command[i + 1:i + 2] == "|":
                raise _Reject("有 ||：连接了第二条命令")
            if command[i + 1:i + 2] == "&":
                raise _Reject("有 |&：把标准错误也接进管道")
            segments.append(("".join(current), glob))
            current, glob = [], False
            i += 1
            continue
        elif c == "&":
            raise _Reject("有 &：连接第二条命令、放到后台或重定向")
        elif c == ";":
            raise _Reject("有 ;：连接了第二条命令")
        elif c in "<>":
            raise _Reject(f"有重定向 {c}：会读写别的文件")
        elif c == "$":
            raise _Reject("有 $：变量展开或 $( ) 命令替换")
        elif c == "`":
            raise _Reject("有反引号：命令替换")
        elif c in "()":
            raise _Reject("有括号：子 shell 或进程替换")
        elif c in "{}":
            raise _Reject("有花括号：命令组或花括号展开")
        elif c == "#" and (not current or current[-1][-1:].isspace()):
            raise _Reject("有 #：后面的内容会被 shell 当成注释")
        elif c in "*?[":
            glob = True
        current.append(c)
        i += 1
    if quote:
        raise _Reject("引号没有配对")
    segments.append(("".join(current), glob))
    return segments


def _check_words(words: list[str], glob: bool) -> str | None:
    """检查一段命令切好的词；不允许时返回理由，允许时返回 None。"""
    program = words[0]
    if program not in READ_ONLY_PROGRAMS:
        return f"程序 {program!r} 不在只读白名单里"
    if glob and program in NO_GLOB_PROGRAMS:
        return f"{program} 的参数里有引号外的通配符，展开后可能变成一个选项"
    if program == "git":
        if len(words) < 2 or words[1] not in GIT_READ_ONLY:
            sub = words[1] if len(words) > 1 else "（没有子命令）"
            return f"git 只允许 status、log、diff、show，这里是 {sub}"
        for word in words[2:]:
            if word.startswith(GIT_BAD_OPTIONS):
                return f"git 的 {word} 会写文件或运行外部程序"
    if program == "find":
        for word in words[1:]:
            if word in FIND_ACTIONS:
                return f"find 的 {word} 会执行命令、删除或写文件"
    if program == "date":
        for word in words[1:]:
            if word.startswith("--set") or re.match(r"-[^-]*s", word):
                return "date 的 -s/--set 会修改系统时间"
    return None


def check_allowlist(command, *, windows: bool | None = None) -> Verdict:
    """白名单判断：只放行只读命令。返回 `Verdict`，理由是中文。

    `windows` 默认看当前系统；测试里可以指定。
    """
    if not isinstance(command, str):
        return Verdict(False, f"command 应当是字符串，实际是 {type(command).__name__}", "白名单")
    if not command.strip():
        return Verdict(False, "空命令", "白名单")
    if windows is None:
        windows = os.name == "nt"
    if windows:
        bad = sorted(set(command) & WINDOWS_SPECIAL)
        if bad:
            return Verdict(False, f"Windows 上不允许特殊字符 {''.join(bad)!r}", "白名单")
        program = command.split()[0].lower()
        if program not in WINDOWS_PROGRAMS:
            return Verdict(False, f"程序 {program!r} 不在只读白名单里", "白名单")
        return Verdict(True, f"只读命令：{program}", "白名单")
    try:
        segments = _scan(command)
    except _Reject as exc:
        return Verdict(False, str(exc), "白名单")
    programs = []
    for text, glob in segments:
        try:
            words = shlex.split(text)
        except ValueError as exc:
            return Verdict(False, f"无法按 shell 规则切词：{exc}", "白名单")
        if not words:
            return Verdict(False, "管道 | 的两边都要有命令", "白名单")
        problem = _check_words(words, glob)
        if problem:
            return Verdict(False, problem, "白名单")
        programs.append(words[0])
    if len(programs) == 1:
        return Verdict(True, f"只读命令：{programs[0]}", "白名单")
    return Verdict(True, "管道里每一段都是只读命令：" + " | ".join(programs), "白名单")


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


def _describe(command: str) -> str:
    """把待审批的命令排成几行，连同端点和白名单的意见。"""
    endpoint = _active[0] if _active else "假模型"
    lines = [f"┌ 审批：执行框架即将运行下面这条命令（端点：{endpoint}）"]
    lines += [f"│ {line}" for line in command.split("\n")]
    if any(not ch.isprintable() for ch in command if ch != "\n"):
        lines.append(f"│ （含有不可见字符，原样是 {command!r}）")
    hint = check_allowlist(command)
    lines.append(f"└ 白名单的意见：{'放行' if hint.allowed else '拒绝'}（{hint.reason}）")
    return "\n".join(lines)


def ask_stdin(command: str) -> str | None:
    """默认的询问方式：先打印命令，再用 `input()` 等人回答。拿不到标准输入时返回 None。"""
    print(_describe(command), flush=True)
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


def _ask_person(command: str, ask) -> Verdict:
    """问人（或问传进来的 ask 函数），把答复变成结论；没人可问时退回白名单。"""
    ask = ask_stdin if ask is None else ask
    for _ in range(MAX_TRIES):
        answer = ask(command)
        if answer is None:
            fallback = check_allowlist(command)
            return Verdict(fallback.allowed, fallback.reason, "白名单（无法询问）")
        choice, reason = parse_answer(answer)
        if choice == "y":
            return Verdict(True, "人工批准", "人工")
        if choice == "a":
            with _lock:
                _always.add(command)
            return Verdict(True, "人工批准，本次会话里这条命令以后都不再询问", "人工")
        if choice == "n":
            return Verdict(False, f"用户拒绝执行：{reason or '没有说明原因'}", "人工")
    return Verdict(False, "没有得到有效的答复（y / n 原因 / a），按拒绝处理", "人工")


def decide(command: str, *, policy=None, ask=None) -> Verdict:
    """按策略决定这条命令能不能执行。`policy=None` 时读环境变量 `HARNESS_APPROVAL`。

    `ask(command) -> str | None` 代替真人回答；不给时用 `ask_stdin`。
    """
    if policy is None:
        try:
            name = policy_from_env()
        except ValueError as exc:  # 写错了：不当成放行
            return Verdict(False, f"{exc}为安全起见，不执行这条命令", "策略")
    else:
        name = _policy_name(policy)
    if name == "allow":
        return Verdict(True, "策略 allow：一律放行", "策略")
    if name == "deny":
        return Verdict(False, "策略 deny：不执行任何命令", "策略")
    if name == "auto" and not requires_approval():
        return Verdict(True, "当前是假模型或本项目的本地端点，不需要审批", "无需审批")
    if command in always_allowed():
        return Verdict(True, "本次会话已经选择总是允许这条命令", "会话记忆")
    if name == "allowlist":
        return check_allowlist(command)
    return _ask_person(command, ask)  # auto（需要审批的端点）与 ask


def check(command: str, *, policy=None, ask=None) -> Verdict:
    """`run_bash` 的安全网：当前端点需要审批时才按策略决定，否则直接放行。

    `gate` 刚刚批准、正在执行的同一条命令也直接放行，不问第二遍。
    """
    if _approved.get() == command:
        return Verdict(True, "处理函数之前已经审批过", "gate")
    if not requires_approval():
        return Verdict(True, "当前是假模型或本项目的本地端点，不需要审批", "无需审批")
    return decide(command, policy=policy, ask=ask)


def gate(handlers, policy=None, *, ask=None, tools=("bash",)):
    """返回新的分发表：`tools` 里的工具（默认只有 bash）先审批，再交给原来的处理函数。

    `policy` 为 None 时每次都读环境变量 `HARNESS_APPROVAL`。被拒绝时抛出 `ToolDenied`，
    `execute_tool_call` 会把它写成“错误（执行授权失败）：理由”交给模型。
    参数本身不合格（没有 command、不是字符串）时不审批，交给原处理函数去报“调用解析失败”。
    """
    from harness_lib.lesson.loop import ToolDenied  # 放在函数里：loop 导入 bash，bash 又导入本模块

    if policy is not None:
        policy = _policy_name(policy)

    def wrap(handler):
        def gated(args):
            command = args.get("command") if isinstance(args, dict) else None
            if not isinstance(command, str):
                return handler(args)
            verdict = decide(command, policy=policy, ask=ask)
            if not verdict.allowed:
                raise ToolDenied(verdict.reason)
            token = _approved.set(command)  # 告诉安全网：这条命令刚刚审批过
            try:
                return handler(args)
            finally:
                _approved.reset(token)

        gated.__wrapped__ = handler
        return gated

    return {name: wrap(handler) if name in tools else handler for name, handler in handlers.items()}
