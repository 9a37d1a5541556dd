"""只读*白名单*（allowlist）：一条 bash 命令是不是只读的、碰不碰得到别的进程的秘密。

辅助工具，不是课程内容。审批（`harness_lib.safety.approval`）用它决定：不可信的客户端提出的只读命令直接放行，
没有人可问时只放行这些命令。`check_allowlist(command)` 返回 `Verdict`。

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
import os
import posixpath
import re
import shlex
from dataclasses import dataclass

__all__ = [
    "DENIED_PREFIX",
    "FIND_ACTIONS",
    "GIT_REASON",
    "READ_ONLY_PROGRAMS",
    "Verdict",
    "WINDOWS_PROGRAMS",
    "WINDOWS_SPECIAL",
    "check_allowlist",
]

DENIED_PREFIX = "错误（执行授权失败）："  # 与 execute_tool_call 处理 ToolDenied 时写的文字相同
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
