"""只读*白名单*（allowlist）：`check_allowlist(command, cwd=...)` 判断一条 bash 命令是不是只读的，
读的是不是只有工作目录里的东西。

先按 shell 的引号规则扫整行，拒绝能让 shell 多做事的写法；再用 `shlex` 切词，逐个程序检查参数：
读文件的程序（`PATH_PROGRAMS`）的每个参数，展开 `~`、通配符，解析 `..` 和符号链接以后，都要落在工作目录里。
接真实端点时，命令读到的东西都会发给模型的服务商：读一次就是泄露一次，所以工作目录外面的要先问人。
规则和理由的全文见 docs/approval.md（“白名单放行什么”）。
"""

import glob as globbing
import ntpath
import os
import posixpath
import re
import shlex
from dataclasses import dataclass

DENIED_PREFIX = "错误（执行授权失败）："  # 与 execute_tool_call 处理 ToolDenied 时写的文字相同
READ_ONLY_PROGRAMS = frozenset({"ls", "cat", "head", "tail", "wc", "pwd", "echo", "grep", "find", "date",
                                "whoami"})
GIT_REASON = ("git 不在只读白名单里：仓库的配置可以点名要运行的程序（core.fsmonitor、diff.external、"
              "textconv、filter），git status、git diff、git log -p 都可能运行它们，需要人批准")
# 参数里的路径会被读（或列出）的程序：它们的每个参数都要在工作目录里
PATH_PROGRAMS = frozenset({"ls", "cat", "head", "tail", "wc", "grep", "find"})
WINDOWS_PATH_PROGRAMS = frozenset({"dir", "type", "findstr"})
FIND_ACTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
                          "-fls"})
# 暴露别的进程的环境变量或内存的路径，以及常见的凭据文件：按路径的各段比较
SECRET_PATH_PARTS = ("proc", ".ssh", ".aws", ".azure", ".gnupg", ".kube", ".docker", ".netrc",
                     ".git-credentials", ".pypirc", ".npmrc", ".env", "gcloud")
SECRET_DEVICES = ("/dev/mem", "/dev/kmem", "/dev/port", "/dev/core")
WINDOWS_PROGRAMS = frozenset({"dir", "type", "echo", "whoami", "findstr"})
WINDOWS_SPECIAL = set("&|<>^%!()\"'`;\r\n")
# 引号外不允许的字符和理由
_OUTSIDE = {"&": "有 &：连接第二条命令、放到后台或重定向", ";": "有 ;：连接了第二条命令", "`": "有反引号：命令替换",
            "$": "有 $：变量展开或 $( ) 命令替换", **dict.fromkeys("<>", "有重定向 < 或 >：会读写别的文件"),
            **dict.fromkeys("()", "有括号：子 shell 或进程替换"), **dict.fromkeys("{}", "有花括号：命令组或花括号展开")}


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


class _Reject(Exception):
    """检查命令时遇到不允许的写法：理由就是异常的文字。"""


def _scan(command: str) -> list[tuple[str, bool]]:
    """按引号规则扫一遍，返回按 `|` 切开的各段，以及每段有没有引号外的通配符；不允许的写法抛 `_Reject`。"""
    segments, current, glob, quote, i = [], [], False, None, 0
    while i < len(command):
        c = command[i]
        if c in "\n\r":
            raise _Reject("命令里有换行：一次只能执行一行命令")
        if ord(c) < 32 and c != "\t":
            raise _Reject(f"命令里有控制字符 {c!r}")
        if quote == "'":  # 单引号里的一切都是普通字符
            quote = None if c == "'" else quote
        elif c == "\\":
            if i + 1 >= len(command):
                raise _Reject("命令以反斜杠结尾")
            current.append(c)
            i += 1
            c = command[i]  # 反斜杠让下一个字符变成普通字符
        elif quote == '"':  # 双引号里，$ 和反引号仍然会展开
            if c in "$`":
                raise _Reject("双引号里" + _OUTSIDE[c])
            quote = None if c == '"' else quote
        elif c in "'\"":
            quote = c
        elif c == "|":
            if command[i + 1:i + 2] in ("|", "&"):
                raise _Reject(f"有 |{command[i + 1]}：连接了第二条命令")
            segments.append(("".join(current), glob))
            current, glob, i = [], False, i + 1
            continue
        elif c in _OUTSIDE:
            raise _Reject(_OUTSIDE[c])
        elif c == "#" and (not current or current[-1].isspace()):
            raise _Reject("有 #：后面的内容会被 shell 当成注释")
        elif c in "*?[":
            glob = True
        current.append(c)
        i += 1
    if quote:
        raise _Reject("引号没有配对")
    return segments + [("".join(current), glob)]


def _paths_in(word: str) -> list[str]:
    """词本身、`=` 后面的值、短选项后面紧跟着的值（如 `-f/proc/…`）。"""
    option = word.startswith("-")
    glued = word[2:] if option and not word.startswith("--") else ""
    return [p for p in (word, word.split("=", 1)[1] if option and "=" in word else "", glued) if p]


def _is_secret(path: str) -> str | None:
    """路径指向 /proc、内存设备或凭据位置时，返回那一段的名字。"""
    if posixpath.normpath(path).startswith(SECRET_DEVICES):
        return "内存设备"
    return next((part for part in path.split("/") if part in SECRET_PATH_PARTS), None)


def _expanded(word: str, glob: bool, cwd: str) -> list[str]:
    """这个词（和它带的 `=值`、紧跟的值）在工作目录 `cwd` 里指的路径：展开 `~`；有引号外的通配符时按 shell
    的样子展开（最多 1000 个），一个也没匹配上就是字面上的那个路径。"""
    names = []
    for candidate in _paths_in(word):
        path = os.path.join(cwd, os.path.expanduser(candidate))
        matches = globbing.glob(path) if glob and any(c in candidate for c in "*?[") else []
        names += sorted(matches)[:1000] or [path]
    return names


def _on_disk(word: str, glob: bool, cwd: str) -> list[str]:
    """这个词在工作目录里对应的已有路径，解析过符号链接的真实路径。"""
    return [os.path.realpath(name) for name in _expanded(word, glob, cwd) if os.path.lexists(name)]


def _check_path(word: str, glob: bool, cwd: str) -> None:
    """任何参数都不能指向 /proc、内存设备或凭据位置，经符号链接或通配符到达的也不行。"""
    part = next(filter(None, map(_is_secret, _paths_in(word))), None)
    real = part or next(filter(_is_secret, _on_disk(word, glob, cwd)), None)
    if real:
        how = "指向" if part else "经符号链接或通配符指向"
        kind = part or _is_secret(real)
        risk = ("可能读到别的进程的环境变量或内存" if kind in ("proc", "内存设备")
                else "这是常见的凭据位置（密钥、令牌、密码）")
        raise _Reject(f"{word} {how} {real}：{risk}")


def _option(word: str, letters: str, *long_names: str) -> bool:
    """`word` 是带 `letters` 里某个字母的短选项，或者是某个长选项的缩写（GNU getopt 认无歧义的前缀）。"""
    if word.startswith("--"):
        given = word[2:].split("=", 1)[0]
        return bool(given) and any(name.startswith(given) for name in long_names)
    return word.startswith("-") and any(letter in word[1:] for letter in letters)


def _inside(real: str, here: str) -> bool:
    return real == here or real.startswith(here.rstrip(os.sep) + os.sep)


def _outside(word: str, glob: bool, cwd: str) -> str | None:
    """这个词（和它带的 `=值`、紧跟的值）会读到的路径里，第一个落在工作目录外面的真实路径；都在里面时是 None。
    展开 `~` 和通配符，解析 `..` 和符号链接；不存在的路径照样按字面解析（读不到，也不该去读）。"""
    here = os.path.realpath(cwd)
    return next((real for real in map(os.path.realpath, _expanded(word, glob, cwd)) if not _inside(real, here)),
                None)


def _check_inside(program: str, args: list[str], glob: bool, cwd: str) -> None:
    """读文件的程序只读工作目录里的东西；会跟着符号链接走出去、或从文件里读一张路径单的选项，一律先问人。"""
    if program == "find" and any(word in ("-L", "-follow", "-files0-from") for word in args):
        raise _Reject("find 的 -L、-follow 会跟着符号链接走出工作目录，-files0-from 从文件里读要找的路径")
    if any(_option(word, "", "files0-from") for word in args):
        raise _Reject(f"{program} 的 --files0-from 从文件里读一张路径单，读哪些文件看不出来")
    if program == "ls" and any(_option(w, "L", "dereference") for w in args) \
            and any(_option(w, "R", "recursive") for w in args):
        raise _Reject("ls 同时带 -R 和 -L 会跟着符号链接走出工作目录")
    for word in args:
        real = _outside(word, glob, cwd)
        if real:
            raise _Reject(f"{word} 在工作目录外面（{real}）：只读命令也只在工作目录里直接放行，"
                          f"读到的内容会发给模型的服务商；要读先问人")


def _check_grep(args: list[str], glob: bool, cwd: str) -> None:
    """递归的 grep 只能在工作目录里找；`-R` 会跟着目录里的每个符号链接走出去，拒绝。"""
    if any(_option(word, "R", "dereference-recursive") for word in args):
        raise _Reject("grep 的 -R 会跟着目录里的每个符号链接走出去，用 -r")
    if not any(_option(word, "rd", "recursive", "directories") for word in args):
        return
    here = os.path.realpath(cwd)
    for word in (w for w in args if not w.startswith("-")):
        if word.startswith(("/", "~")) or ".." in word.split("/"):
            raise _Reject(f"递归的 grep 只能在工作目录里找，{word!r} 会走出去（比如读到 /proc 里别的进程的环境）")
        for real in _on_disk(word, glob, cwd):
            if not _inside(real, here):
                raise _Reject(f"递归的 grep 只能在工作目录里找，{word!r} 经符号链接指向 {real}")


def _check_words(program: str, args: list[str], glob: bool, cwd: str) -> None:
    """检查一段命令切好的词；不允许时抛 `_Reject`。"""
    if program == "git":
        raise _Reject(GIT_REASON)
    if program not in READ_ONLY_PROGRAMS:
        raise _Reject(f"程序 {program!r} 不在只读白名单里")
    if glob and program in ("find", "date"):
        raise _Reject(f"{program} 的参数里有引号外的通配符，展开后可能变成一个选项")
    for word in args:
        _check_path(word, glob, cwd)
    if program == "find" and FIND_ACTIONS & set(args):
        raise _Reject(f"find 的 {sorted(FIND_ACTIONS & set(args))[0]} 会执行命令、删除或写文件")
    if program == "date" and any(not (a.startswith("+") or a in ("-u", "--utc")) for a in args):
        raise _Reject("date 只认 +格式 和 -u：别的参数可能设置系统时间（GNU 把 --s 当成 --set）")
    if program == "grep":
        _check_grep(args, glob, cwd)
    if program in PATH_PROGRAMS:
        _check_inside(program, args, glob, cwd)


def _check_windows(words: list[str]) -> None:
    """cmd.exe 的路径：选项以 / 开头；绝对路径、盘符、`..`、`~` 都可能走出工作目录，先问人。"""
    if words[0].lower() not in WINDOWS_PATH_PROGRAMS:
        return
    for word in words[1:]:
        if word.startswith("/"):
            continue
        if ntpath.isabs(word) or ntpath.splitdrive(word)[0] or word.startswith("~") \
                or ".." in re.split(r"[\\/]", word):
            raise _Reject(f"{word} 可能指向工作目录外面：只读命令也只在工作目录里放行，要读先问人")


def _programs(command, windows: bool, cwd: str) -> list[str]:
    """命令里的各个程序；有任何不允许的写法时抛 `_Reject`。"""
    if not isinstance(command, str):
        raise _Reject(f"command 应当是字符串，实际是 {type(command).__name__}")
    if not command.strip():
        raise _Reject("空命令")
    if windows:  # cmd.exe 的引号规则不同：只认几个程序，拒绝所有特殊字符
        program = command.split()[0].lower()
        if set(command) & WINDOWS_SPECIAL or program not in WINDOWS_PROGRAMS:
            raise _Reject(f"Windows 上只放行 {'、'.join(sorted(WINDOWS_PROGRAMS))}，并且不能有特殊字符")
        _check_windows(command.split())
        return [program]
    programs = []
    for text, glob in _scan(command):
        words = shlex.split(text)
        if not words:
            raise _Reject("管道 | 的两边都要有命令")
        _check_words(words[0], words[1:], glob, cwd)
        programs.append(words[0])
    return programs


def check_allowlist(command, *, windows: bool | None = None, cwd=None) -> Verdict:
    """白名单判断：只放行只读、并且只读工作目录 `cwd`（默认是当前目录）里的东西的命令。
    `windows` 默认看当前系统；测试里可以指定。"""
    try:
        where = os.fspath(cwd) if cwd is not None else os.getcwd()
        programs = _programs(command, os.name == "nt" if windows is None else windows, where)
    except _Reject as exc:
        return Verdict(False, str(exc), "白名单")
    except ValueError as exc:
        return Verdict(False, f"无法按 shell 规则切词：{exc}", "白名单")
    except OSError as exc:  # 当前目录不见了之类：拿不准就不放
        return Verdict(False, f"无法检查命令里的路径：{exc}", "白名单")
    what = f"只读命令：{programs[0]}" if len(programs) == 1 else "管道里每一段都是只读命令：" + " | ".join(programs)
    return Verdict(True, what, "白名单")
