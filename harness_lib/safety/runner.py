"""笔记本背后真正去跑命令的执行器：`BASH_TOOL`、`run_command` 和 `run_bash`。05 把它和原文的朴素版本对照。

`run_command` 不抛异常，返回 `CommandResult`：结局是字段（`status`、`exit_code`、`signal`、`background_cut`），
交给模型的文字 `text` 由输出和这些字段拼出来，程序读字段，不读文字。`run_bash` 只返回 `text`（原文的形状）。
超时结束整个进程组，再加上仍占着输出管道的进程（Windows 上 `taskkill /T`）；用 setsid 离开进程组、又不占管道的进程不在内。
输出只留开头和结尾，先按 UTF-8、再按控制台编码（如 GBK）解码；命令的环境里没有秘密，交回的文字再打一遍码。
各项保证和没防住的地方见 docs/approval.md（“执行器自己的保证”）。
"""

import codecs
import contextlib
import locale
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .secrets import command_env, redact

BASH_TOOL = {"type": "function", "function": {
    "name": "bash",
    "description": ("在当前工作目录里执行一条 shell 命令，返回合并后的标准输出和标准错误。"
                    "命令拿不到任何输入，超时会被终止，过长的输出只保留开头和结尾。"),
    "parameters": {"type": "object", "required": ["command"], "properties": {"command": {
        "type": "string", "description": "要执行的完整命令行，例如 `ls -la` 或 `python app.py`。"}}},
}}

GRACE_SECONDS = 0.5  # 前台 shell 退出后，再等管道关闭（EOF）的时间
_CHUNK = 1 << 16  # 每次从管道读取的字节数
# 让分页器直接输出、让编辑器立刻失败、让 git 不向终端要密码
_QUIET_ENV = {"PAGER": "cat", "GIT_PAGER": "cat", "GIT_EDITOR": "false", "EDITOR": "false",
              "VISUAL": "false", "GIT_TERMINAL_PROMPT": "0", "TERM": "dumb"}
# 命令里的 git 不运行仓库配置点名的程序：这些设置的优先级和 `git -c` 一样，高于仓库自己的配置。
# diff.external 关不掉：设成空值会让每一次 git diff 都失败（所以 git 不在只读白名单里）。
GIT_SAFE_CONFIG = {"core.fsmonitor": "false", "core.hooksPath": "/dev/null", "core.pager": "cat",
                   "log.showSignature": "false", "gpg.program": "false", "gpg.ssh.program": "false",
                   "gpg.x509.program": "false"}
_GIT_SAFE_ENV = {"GIT_OPTIONAL_LOCKS": "0", "GIT_CONFIG_COUNT": str(len(GIT_SAFE_CONFIG)),
                 **{f"GIT_CONFIG_KEY_{i}": key for i, key in enumerate(GIT_SAFE_CONFIG)},
                 **{f"GIT_CONFIG_VALUE_{i}": value for i, value in enumerate(GIT_SAFE_CONFIG.values())}}


def child_env() -> dict[str, str]:
    """交给命令的环境：去掉秘密（`secrets.command_env`），再加上安静和关掉 git 外部程序的设置。"""
    return {**command_env(), **_QUIET_ENV, **_GIT_SAFE_ENV}


def list_py_command() -> str:
    """在本平台列出当前目录下 Python 文件的命令（假模型会用到）。"""
    return "dir /b *.py" if os.name == "nt" else "ls *.py"


def demo_workspace(prefix: str = "agent-loop-") -> Path:
    """新建一个临时目录，放几个无害的小文件，返回它的路径。笔记本会 chdir 进去。"""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    files = {
        "app.py": 'from utils import greet\n\nprint(greet("世界"))\n',
        "utils.py": 'def greet(name):\n    return f"你好，{name}！"\n',
        "README.md": "# 演示目录\n\n笔记本在这里运行命令，随便改、随便删都没关系。\n",
        "data/notes.txt": "第一行笔记\n第二行笔记\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def _fallback_encoding() -> str:
    """输出不是合法 UTF-8 时改用的编码：Windows 取控制台代码页（如 cp936/GBK），其他系统取区域设置。"""
    if os.name != "nt":
        return locale.getpreferredencoding(False) or "utf-8"
    import ctypes  # 只有 Windows 上才有 windll；不认识的代码页由 _decode 跳过

    kernel32 = ctypes.windll.kernel32
    return f"cp{kernel32.GetConsoleOutputCP() or kernel32.GetOEMCP()}"


def _decode(data: bytes, fallback: str, cut_start=False, cut_end=False) -> tuple[str, str]:
    """把字节解码成 (文字, 所用编码)。`cut_start`/`cut_end`：开头/结尾是截出来的，丢掉半个字。

    兜底的 `surrogateescape` 让每个坏字节对应一个字符，省略的字节数仍能精确换算。
    """
    if cut_start:  # 丢掉开头最多 3 个残缺的 UTF-8 续字节（0x80–0xBF）
        data = data[len(data[:3]) - len(data[:3].lstrip(bytes(range(0x80, 0xC0)))):]
    for enc, errors in (("utf-8", "strict"), (fallback, "strict"), ("utf-8", "surrogateescape")):
        try:
            return codecs.getincrementaldecoder(enc)(errors).decode(data, final=not cut_end), enc
        except (UnicodeDecodeError, LookupError):
            continue


class _Collector:
    """只保留输出的开头 `limit` 字节和结尾 `limit` 字节，其余只计数。"""

    def __init__(self, limit: int):
        self.head, self.tail, self.limit, self.total = bytearray(), bytearray(), limit, 0
        self.lock = threading.Lock()

    def read_all(self, stream) -> None:
        """读线程：一直读到 EOF（所有写端都关闭），然后关闭读端。"""
        try:
            while chunk := os.read(stream.fileno(), _CHUNK):
                with self.lock:
                    self.total += len(chunk)
                    room = max(self.limit - len(self.head), 0)
                    self.head += chunk[:room]
                    self.tail += chunk[room:]
                    del self.tail[:max(len(self.tail) - self.limit, 0)]
        except OSError:
            pass
        finally:
            stream.close()

    def snapshot(self) -> tuple[bytes, bytes, int]:
        with self.lock:
            return bytes(self.head), bytes(self.tail), self.total


def _pipe_holders(inode: int) -> set[int]:
    """Linux：扫描 /proc/*/fd，找出还占着这个输出管道的进程（用 setsid 离开了进程组的也在内）。"""
    target, found = f"pipe:[{inode}]", set()
    for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            if any(os.readlink(f"/proc/{name}/fd/{fd}") == target for fd in os.listdir(f"/proc/{name}/fd")):
                found.add(int(name))
        except OSError:  # 进程已退出，或不是我们的进程
            continue
    return found


def _kill_tree(proc: subprocess.Popen, inode: int | None) -> None:
    """结束命令：POSIX 上是整个进程组，再加上仍占着输出管道的进程（setsid 离开了进程组、又不占管道的不在内）；Windows 上用 taskkill /T。"""
    try:
        if os.name == "nt":
            subprocess.run(["taskkill", "/T", "/F", "/PID", str(proc.pid)], capture_output=True)
        else:
            os.killpg(proc.pid, signal.SIGKILL)  # 组号就是 shell 的 pid
    except OSError:  # 已经退出，或者没有 taskkill：至少结束 shell 本身
        proc.kill()
    for pid in _pipe_holders(inode) if inode is not None else ():
        with contextlib.suppress(OSError):  # 已经退出
            os.kill(pid, signal.SIGKILL)


def _shell_args(command: str) -> list[str]:
    return [shutil.which("bash") or "/bin/sh", "-c", command]


def _format(head: bytes, tail: bytes, total: int, notes: list[str], max_chars: int) -> str:
    """交给模型的文字：开头 + 省略说明 + 结尾 + 附注，总长不超过 max_chars。"""
    fallback, notes_text = _fallback_encoding(), "\n".join(notes)
    reserve = len(notes_text) + (1 if notes else 0)  # 附注前面可能要补一个换行
    whole = total == len(head) + len(tail)
    if whole:  # 一个字节都没丢：整体解码
        body, enc = _decode(head + tail, fallback)
        head_text, tail_text, tail_enc = body, body, enc
        body = body or "(没有输出)"
    else:  # 中间的字节已经丢掉：两段分别解码
        head_text, enc = _decode(head, fallback, cut_end=True)
        tail_text, tail_enc = _decode(tail, fallback, cut_start=True)
    if not whole or len(body) + reserve > max_chars:
        budget = max(max_chars - reserve - len(f"\n…[中间省略 {total} 个字节]…\n"), 0)  # 省略数不会超过 total
        head_text = head_text[: budget // 2]
        keep = budget - len(head_text)
        tail_text = tail_text[max(len(tail_text) - keep, 0):] if keep else ""
        shown = len(head_text.encode(enc, "surrogateescape"))
        shown += len(tail_text.encode(tail_enc, "surrogateescape"))
        body = f"{head_text}\n…[中间省略 {total - shown} 个字节]…\n{tail_text}"
    if notes_text:
        body += ("" if body.endswith("\n") else "\n") + notes_text
    # 兜底解码留下的坏字节换成替换字符；只有 max_chars 小得放不下附注时才会真的截
    return re.sub("[\udc80-\udcff]", "\ufffd", body)[:max_chars]


STATUSES = {  # status → 中文说明；除了 "ok"，都是处理函数动手了却没做成（工具结果失败）
    "ok": "命令正常结束（退出码 0）",
    "exit": "命令以非零退出码结束",
    "signal": "命令被信号结束",
    "timeout": "命令超时，被执行框架结束",
    "not_started": "命令没能启动",
}


@dataclass(frozen=True)
class CommandResult:
    """一次命令的结局。字段给程序读；`text` 是交给模型的文字（输出 + 由字段写出的附注），读它只为给人和模型看。

    `status`：`STATUSES` 里的一个。`exit_code`：shell 的退出码（超时、没启动时是 None）；`signal`：结束它的信号编号；
    `background_cut`：命令结束后还有后台进程占着输出，执行框架停止读取并结束了它们（输出可能不全）。
    """

    text: str
    status: str
    exit_code: int | None = None
    signal: int | None = None
    background_cut: bool = False

    @property
    def ok(self) -> bool:
        """正常结束、输出完整：只有这时才算成功。"""
        return self.status == "ok" and not self.background_cut

    def __str__(self) -> str:
        return self.text


def _notes(status: str, exit_code, sig, background_cut: bool, timeout: float) -> list[str]:
    """由结局的字段写出附注（给模型看的文字）；顺序和字段一一对应，不从别处读回。"""
    if status == "timeout":
        return [f"[超时：命令运行超过 {timeout:g} 秒，已结束它的进程组和仍占着输出的进程]"]
    notes = []
    if background_cut:
        notes.append(f"[提示：命令结束后仍有后台进程占着输出，{GRACE_SECONDS:g} 秒后已停止读取并结束整个进程组]")
    if status == "signal":
        notes.append(f"[被信号 {sig} 终止]")
    elif status == "exit":
        notes.append(f"[退出码 {exit_code}]")
    return notes


def run_bash(command: str, timeout: float = 120, max_chars: int = 50_000, cwd=None) -> str:
    """在 shell 里执行 `command`，返回交给模型的文字（`run_command(...).text`），从不抛异常。"""
    return run_command(command, timeout=timeout, max_chars=max_chars, cwd=cwd).text


def run_command(command: str, timeout: float = 120, max_chars: int = 50_000, cwd=None) -> CommandResult:
    """在 shell 里执行 `command`，返回 `CommandResult`，从不抛异常。`text` 是合并后的标准输出和标准错误
    （没有时是 "(没有输出)"）；超时、后台进程占着管道、退出码非零、被信号结束时，末尾各有一行由字段写出的附注；
    过长时中间换成 "…[中间省略 N 个字节]…"，整个 `text` 不超过 `max_chars` 个字符。"""
    if not isinstance(command, str):
        return CommandResult(f"[错误：command 应该是字符串，收到的是 {type(command).__name__}]", "not_started")
    common = dict(stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd,
                  env=child_env())
    try:
        if os.name == "nt":
            proc = subprocess.Popen(command, shell=True, creationflags=subprocess.CREATE_NEW_PROCESS_GROUP,
                                    **common)
        else:
            proc = subprocess.Popen(_shell_args(command), start_new_session=True, **common)
    except (OSError, ValueError) as exc:
        return CommandResult(redact(f"[错误：无法启动命令：{exc}]"), "not_started")

    inode = os.fstat(proc.stdout.fileno()).st_ino if os.path.isdir("/proc") else None
    sink = _Collector(max_chars * 4)  # UTF-8 一个字符最多 4 个字节
    reader = threading.Thread(target=sink.read_all, args=(proc.stdout,), daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    exited_at = None  # 前台 shell 退出的时刻
    timed_out = lingering = False
    try:
        while True:
            reader.join(0.05)
            now = time.monotonic()
            if not reader.is_alive():  # 读到 EOF；shell 一般也已退出
                try:
                    proc.wait(max(deadline - now, 0))
                except subprocess.TimeoutExpired:
                    timed_out = True
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            lingering = exited_at is not None and now - exited_at >= GRACE_SECONDS
            timed_out = not lingering and now >= deadline
            if lingering or timed_out:
                break
    finally:  # 包括 KeyboardInterrupt：不留下任何进程
        if timed_out or lingering or reader.is_alive() or proc.poll() is None:
            _kill_tree(proc, inode)
            reader.join(1.0)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            pass

    code = proc.returncode
    if timed_out:
        status, exit_code, sig = "timeout", None, None
    elif code is not None and code < 0:
        status, exit_code, sig = "signal", None, -code
    else:
        status, exit_code, sig = ("exit" if code else "ok"), code, None
    cut = lingering and not timed_out  # 超时已经把后台进程一起结束了，不再另记
    notes = _notes(status, exit_code, sig, cut, timeout)
    return CommandResult(redact(_format(*sink.snapshot(), notes, max_chars)), status, exit_code, sig, cut)
