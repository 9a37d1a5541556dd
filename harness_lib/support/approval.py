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
1. `guard(handlers, client, policy=None, *, ask=None)`：客户端可信、策略是 `auto` 时原样返回
   `handlers`（同一个 dict 对象）；否则返回一张只读的新分发表 `Guarded`，其中会运行程序或改动
   文件的工具（bash、write_file、edit_file，以及名字不认识的工具）先审批，再交给原来的处理函数。
   只读的 `read_file`、`glob` 原样保留。
2. `gate(handlers, policy=None, *, ask=None)`：即 `guard(handlers, None, ...)`，不看客户端，一律当作不可信。

`agent_loop` 和 `agent_loop_stream` 每次运行开头都调用 `guard(handlers, client)`。已经包好的 `Guarded`
再交给 `guard` 时原样返回，所以把 `gate`、`guard` 的结果传给循环，同一次调用也只问一遍。

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
`gate` 不看客户端，一律按不可信处理，所以笔记本 10 用它演示每种策略。
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

白名单（`check_allowlist`）只认这些只读程序：`ls cat head tail wc pwd echo grep find date whoami`。
命令先按 shell 的引号规则扫描，引号外的 `;`、`&`、`||`、重定向 `<` `>`、`$`（变量与 `$( )`）、反引号、
括号、花括号、注释 `#`，以及任何位置的换行一律拒绝；`|` 只允许连接两个都在白名单里的程序。
然后用 `shlex` 切词，逐个程序检查：
- `find` 不能带 `-exec`、`-delete`、`-fprint` 一类动作；`find`、`date` 的参数里不允许引号外的通配符，
  因为通配符展开后可能变成一个选项（比如一个名叫 `-delete` 的文件）。
- `date` 不能带 `-s`，也不能带 `--set` 的任何缩写（GNU getopt 把无歧义的前缀当成完整的长选项，
  `date --s=…` 就是 `--set`）；不以 `+` 开头的参数（`MMDDhhmm`）也会设置时间，一并拒绝。
- 任何参数都不能指向 `/proc`（别的进程的环境变量 `environ`、内存 `mem`、命令行 `cmdline`……，
  `/proc/self` 也算）、`/dev/mem` 一类设备，以及常见的凭据位置（`.ssh`、`.aws`、`.netrc`、`.env`……），
  包括用 `..`、通配符拼出来的写法。
- 已有的路径按当前目录解析（有通配符时先展开）：经符号链接落到 `/proc`、内存设备或凭据位置的，一律拒绝。
- 递归的 `grep` 只能在工作目录里找：路径不能是绝对路径、不能以 `~` 开头、不能含 `..`，也不能是指向外面的链接；
  `-R` 会跟着目录里的每一个符号链接走，拒绝。
- `git` 不在白名单里。仓库自己的配置可以点名要运行的程序：`git status` 会运行 `core.fsmonitor`，
  `git diff`、`git log -p` 会运行 `diff.external`、`diff.<驱动>.textconv`，`git status`、`git diff`
  还会运行 `filter.<驱动>.clean`。后几样按驱动的名字配置，没法统一关掉，所以 git 一律先问人。
  （执行器另外在命令行一级关掉了 fsmonitor、钩子、分页器和签名程序，见 `runner`。）
白名单只管“会不会改动东西、会不会读到别的进程的秘密”，挡不住一切：它按调用 `check_allowlist` 时的当前目录解析链接，
处理函数在别的目录里运行时（比如 06 的工作区不是当前目录），那里的链接它看不到。执行器把命令环境里的秘密都去掉了，交回的文字也会抹掉环境里的秘密值，
但交给真实端点之前，工作目录里仍然不要放敏感文件。
Windows 上命令交给 cmd.exe，引号规则不同，所以只认 `dir type echo whoami findstr`，并且拒绝所有
特殊字符（包括引号）。这个分支在本项目的测试里只检查了判断结果，没有在 Windows 上运行过。
"""

from __future__ import annotations

import fnmatch
import glob as globbing
import json
import os
import posixpath
import re
import shlex
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from .endpoint import serves_fake
from .fake import FakeClient

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
    "gate",
    "guard",
    "parse_answer",
    "policy_from_env",
    "trusted",
]

ENV_VAR = "HARNESS_APPROVAL"
POLICIES = ("auto", "ask", "allowlist", "allow", "deny")
DEFAULT_POLICY = "auto"
DENIED_PREFIX = "错误（执行授权失败）："  # 与 execute_tool_call 处理 ToolDenied 时写的文字相同
PROMPT = "y 批准 / n 原因 拒绝 / a 以后都允许同样的调用："
MAX_TRIES = 3  # 答复看不懂时最多再问几次
CLIP = 60  # 说明里引用文字时最多保留的字符数

READ_ONLY_TOOLS = frozenset({"read_file", "glob"})  # 只读的工具：不审批，原样保留
READ_ONLY_PROGRAMS = frozenset({
    "ls", "cat", "head", "tail", "wc", "pwd", "echo", "grep", "find", "date", "whoami",
})
# git 不在白名单里：仓库自己的配置可以点名程序（core.fsmonitor、diff.external、diff.<驱动>.textconv、
# filter.<驱动>.clean），git status、git diff、git log -p 会运行它们，而后两类按名字配置，没法统一关掉。
GIT_REASON = ("git 不在只读白名单里：仓库的配置可以点名要运行的程序（core.fsmonitor、diff.external、"
              "textconv、filter），git status、git diff、git log -p 都可能运行它们，需要人批准")
FIND_ACTIONS = frozenset({
    "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls",
})
# 会改动东西的长选项。GNU getopt 接受长选项的任何无歧义前缀（`date --s=…` 就是 `--set`），
# 所以只要一个长选项是这些名字的前缀，就拒绝。
DANGEROUS_LONG_OPTIONS = {"date": ("set",)}
GREP_RECURSIVE = ("-r", "-R")
# 暴露别的进程的环境变量或内存的路径，以及常见的凭据文件：按路径的各段比较
SECRET_PATH_PARTS = (
    "proc", ".ssh", ".aws", ".azure", ".gnupg", ".kube", ".docker", ".netrc", ".git-credentials",
    ".pypirc", ".npmrc", ".env", "gcloud",
)
SECRET_DEVICES = ("/dev/mem", "/dev/kmem", "/dev/port", "/dev/core")
MAX_EXPANSION = 1000  # 检查通配符展开的结果时，最多看这么多个
NO_GLOB_PROGRAMS = frozenset({"find", "date"})  # 通配符展开后可能变成选项
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
# 谁提出的调用可信
# ---------------------------------------------------------------------------


def trusted(client) -> bool:
    """提出调用的这个客户端可不可信：只有离线假模型和本进程里还在运行的本地假模型端点可信。

    判断只看传进来的这个对象：`FakeClient`（含子类）可信；有 `base_url`、并且这个地址由本进程里
    `endpoint.start_server` 启动、还没关闭的端点提供（`endpoint.serves_fake`）的客户端可信。
    其余一切，包括 None、没有 `base_url` 的对象、回放录像的客户端，都不可信。
    """
    if isinstance(client, FakeClient):
        return True
    try:
        base_url = getattr(client, "base_url", None)
    except Exception:  # noqa: BLE001  任何古怪的对象都按不可信处理
        return False
    return base_url is not None and serves_fake(str(base_url))


def _source(client) -> str:
    """给人看的“这次调用是谁提出的”：客户端的类型和地址（地址里的用户名、密码不显示）。"""
    if client is None:
        return "没有给出客户端，按不可信处理"
    if isinstance(client, FakeClient):
        return f"离线假模型 {type(client).__name__}，可信"
    name = type(client).__name__
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
    return f"{name}，base_url={where}，{'本进程的本地假模型端点，可信' if trusted(client) else '不可信'}"


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


def _long_prefix_of(word: str, names) -> str | None:
    """`word` 是不是某个长选项的缩写（GNU getopt 的规则：无歧义的前缀就算数）。是的话返回那个选项名。"""
    if not word.startswith("--") or word == "--":
        return None
    given = word[2:].split("=", 1)[0]
    for name in names:
        if given and name.startswith(given):
            return name
    return None


def _path_candidates(word: str) -> list[str]:
    """一个词里可能是路径的部分：词本身、`=` 后面的值、短选项后面紧跟着的值（如 `-f/proc/…`）。"""
    found = [word]
    if word.startswith("-") and "=" in word:
        found.append(word.split("=", 1)[1])
    if word.startswith("-") and not word.startswith("--") and len(word) > 2:
        found.append(word[2:])
    return found


def _secret_path(word: str, glob: bool) -> str | None:
    """这个词会不会读到别的进程的环境或内存、或者常见的凭据文件。会的话返回理由。"""
    for candidate in _path_candidates(word):
        normal = posixpath.normpath(candidate) if candidate else candidate
        if normal.startswith(SECRET_DEVICES):
            return f"{word} 会读内存或设备"
        parts = [p for p in candidate.split("/") if p]
        outside = candidate.startswith(("/", "~")) or ".." in parts
        for part in parts:
            if part in SECRET_PATH_PARTS:
                what = "别的进程的环境变量和内存" if part == "proc" else "凭据文件"
                return f"{word} 指向 {part}：可能读到{what}"
            if glob and any(ch in part for ch in "*?["):
                for secret in SECRET_PATH_PARTS:
                    if (outside or secret.startswith(".")) and fnmatch.fnmatchcase(secret, part) \
                            and (secret.startswith(".") == part.startswith(".")):
                        return f"{word} 展开后可能指向 {secret}"
    return None


def _on_disk(word: str, glob: bool) -> list[tuple[str, str]]:
    """这个词在当前目录下对应的已有路径（有引号外的通配符时先展开），返回（写法, 真实路径）。

    白名单按当前目录解析：工作目录里的一个符号链接，可能把 `cat 说明.txt` 引到 `/proc/<pid>/environ`。
    """
    try:
        here = os.getcwd()
    except OSError:
        return []
    found = []
    for candidate in _path_candidates(word):
        if not candidate:
            continue
        path = os.path.join(here, os.path.expanduser(candidate))
        names = sorted(globbing.glob(path))[:MAX_EXPANSION] if glob and any(c in candidate for c in "*?[") else [path]
        for name in names:
            if os.path.lexists(name):
                found.append((name, os.path.realpath(name)))
    return found


def _secret_target(word: str, glob: bool) -> str | None:
    """路径经过符号链接（或通配符展开）之后，是不是落到 /proc、内存设备或凭据文件上。"""
    for name, real in _on_disk(word, glob):
        parts = [p for p in real.split("/") if p]
        if real.startswith(SECRET_DEVICES) or any(part in SECRET_PATH_PARTS for part in parts):
            shown = os.path.basename(name) or name
            return f"{shown} 经符号链接指向 {real}：可能读到别的进程的环境变量、内存或凭据文件"
    return None


def _check_date(words: list[str]) -> str | None:
    """date 只能显示时间：不能带 -s/--set（包括缩写），也不能带不以 + 开头的参数（MMDDhhmm 会设置时间）。"""
    skip = False
    options_done = False
    for word in words[1:]:
        if skip:
            skip = False
            continue
        if not options_done and word == "--":
            options_done = True
            continue
        if not options_done and word.startswith("--"):
            if _long_prefix_of(word, DANGEROUS_LONG_OPTIONS["date"]):
                return f"date 的 {word} 就是 --set（GNU 接受长选项的缩写），会修改系统时间"
            if "=" not in word and _long_prefix_of(word, ("date", "file", "reference")):
                skip = True
            continue
        if not options_done and word.startswith("-") and len(word) > 1:
            for i, letter in enumerate(word[1:], start=1):  # 一串短选项：带值的字母把后面的字吃掉
                if letter == "s":
                    return "date 的 -s/--set 会修改系统时间"
                if letter in "dfrI":
                    skip = letter != "I" and i == len(word) - 1
                    break
            continue
        if not word.startswith("+"):
            return f"date 的参数 {word!r} 不以 + 开头：这种写法会设置系统时间"
    return None


def _check_grep(words: list[str], glob: bool) -> str | None:
    """递归的 grep 只能在当前目录里找：路径不能是绝对路径、不能以 ~ 开头、不能含 ..，也不能是指向外面的符号链接。

    `-R`（`--dereference-recursive`）会跟着目录里的每一个符号链接走，一律拒绝。
    """
    recursive = False
    for word in words[1:]:
        if word.startswith("--"):
            if _long_prefix_of(word, ("dereference-recursive",)):
                return "grep 的 -R 会跟着目录里的每个符号链接走出去，用 -r"
            if _long_prefix_of(word, ("recursive", "directories")):
                recursive = True
        elif word.startswith("-") and "R" in word[1:]:
            return "grep 的 -R 会跟着目录里的每个符号链接走出去，用 -r"
        elif word.startswith("-") and re.search(r"[rd]", word[1:]):
            recursive = True
    if not recursive:
        return None
    try:
        here = os.path.realpath(os.getcwd())
    except OSError:
        here = None
    for word in words[1:]:
        if word.startswith("-"):
            continue
        parts = [p for p in word.split("/") if p]
        if word.startswith(("/", "~")) or ".." in parts:
            return f"递归的 grep 只能在工作目录里找，{word!r} 会走出去（比如读到 /proc 里别的进程的环境）"
        for _name, real in _on_disk(word, glob):
            if here is not None and real != here and not real.startswith(here.rstrip("/") + "/"):
                return f"递归的 grep 只能在工作目录里找，{word!r} 经符号链接指向 {real}"
    return None


def _check_words(words: list[str], glob: bool) -> str | None:
    """检查一段命令切好的词；不允许时返回理由，允许时返回 None。"""
    program = words[0]
    if program == "git":
        return GIT_REASON
    if program not in READ_ONLY_PROGRAMS:
        return f"程序 {program!r} 不在只读白名单里"
    if glob and program in NO_GLOB_PROGRAMS:
        return f"{program} 的参数里有引号外的通配符，展开后可能变成一个选项"
    for word in words[1:]:
        problem = _secret_path(word, glob) or _secret_target(word, glob)
        if problem:
            return problem
    if program == "find":
        for word in words[1:]:
            if word in FIND_ACTIONS:
                return f"find 的 {word} 会执行命令、删除或写文件"
    if program == "date":
        return _check_date(words)
    if program == "grep":
        return _check_grep(words, glob)
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


def gate(handlers, policy=None, *, ask=None):
    """不看客户端的审批：等于 `guard(handlers, None, policy, ask=ask)`，提出调用的一方一律按不可信处理。"""
    return guard(handlers, None, policy, ask=ask)
