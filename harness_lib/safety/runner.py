"""笔记本使用的命令执行器：`BASH_TOOL` 和 `run_bash`。

这里放的不是课程内容本身，而是笔记本背后真正去跑命令的那部分代码。
原文第三、四节的 `run_bash` 很短：子串黑名单、`shell=True`、120 秒超时、
最多 50,000 个字符。笔记本 05 会把那个朴素版本和本模块放在一起对照，
说明一个“不会卡死、不会撑爆内存、不会抛异常”的执行器还要多做哪些事：

- 超时后结束整个进程树，连孙进程一起；已有的部分输出照样返回。
- 前台命令结束后，后台任务若还占着输出管道，只再等一小会儿就停止读取，
  并结束这些占着管道的进程，不让它们泄漏。
- 标准输入直接给空（`DEVNULL`），`cat`、`read` 之类不会等输入。
- 分块读取，只保留开头和结尾两段，中间只计数，内存占用与输出大小无关；
  截断点落在完整字符上，结果（连同说明文字）不超过 `max_chars` 个字符。
- 先按 UTF-8 解码，不行再用控制台/区域设置的编码，最后用替换字符兜底。
- 设置 `PAGER=cat`、`GIT_EDITOR=false` 等环境变量，分页器和编辑器不会卡住。
- 命令看不到秘密：交给命令的环境由 `secrets.command_env()` 给出，去掉了所有像凭据的变量
  （`*_API_KEY`、`*_TOKEN`、`*SECRET*`、`*PASSWORD*`、云服务的 `AWS_*` 等）、本项目的 `HARNESS_*`
  和 openai SDK 的 `OPENAI_*`。模型让我们跑 `env`、`cat /proc/self/environ` 时，密钥不会跟着工具结果回到 `messages`。
- 交回的文字再经过 `secrets.redact`：万一命令从别处读到了环境里的秘密值（比如父进程的
  `/proc/<pid>/environ`），值和它任何 8 个字符以上的片段都换成 `***`。编码过的（如 base64）认不出来。
- 命令里的 git 不运行仓库配置里点名的几类程序：用 `GIT_CONFIG_COUNT` 一类环境变量在命令行一级
  关掉 `core.fsmonitor`、钩子（`core.hooksPath=/dev/null`）、分页器、签名程序（`gpg.program` 等）
  和 `log.showSignature`，并设 `GIT_OPTIONAL_LOCKS=0`，让 `git status` 不顺手改写索引。
  `diff.external`、`textconv` 和 `filter` 驱动没法这样关掉（见 docs/approval.md），
  所以 git 不在只读白名单里。
- 操作系统层面的错误（目录不存在、找不到 shell）以中文文字返回，不抛异常。

平台差异：
- POSIX：有 bash 就用 `bash -c`，否则 `/bin/sh -c`；`start_new_session=True`
  让命令自成一个进程组，超时用 `killpg` 结束整组。用 `setsid` 启动的孙进程
  会离开这个组；在 Linux 上我们再扫描 `/proc/*/fd`，找出仍持有我们输出管道
  （同一个 pipe inode）的进程并结束它们。没有 `/proc` 的系统（如 macOS）
  做不到这一步；把输出重定向到别处、又用 `setsid` 脱离的进程也找不到。
- Windows：用 `COMSPEC` 指定的 cmd.exe 运行（`shell=True`），加上
  `creationflags=CREATE_NEW_PROCESS_GROUP`，没有 POSIX 进程组；结束进程树用
  `taskkill /T /F /PID`。后备编码取控制台代码页（`GetConsoleOutputCP`，没有控制台
  时用 `GetOEMCP`，例如 cp936/GBK），再不行用 `mbcs`。前台 shell 退出后
  `taskkill /T` 找不到它的后台子进程，这时只停止读取，读线程留到管道关闭为止。
  这个分支在本项目的测试里没有运行过。
"""

import codecs
import locale
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from .secrets import command_env, redact

BASH_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": (
            "在当前工作目录里执行一条 shell 命令，返回合并后的标准输出和标准错误。"
            "命令拿不到任何输入，超时会被终止，过长的输出只保留开头和结尾。"
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "description": "要执行的完整命令行，例如 `ls -la` 或 `python app.py`。",
                }
            },
            "required": ["command"],
        },
    },
}

GRACE_SECONDS = 0.5  # 前台 shell 退出后，再等管道关闭（EOF）的时间
_CHUNK = 1 << 16  # 每次从管道读取的字节数

# 让分页器直接输出、让编辑器立刻失败、让 git 不向终端要密码。
_QUIET_ENV = {"PAGER": "cat", "GIT_PAGER": "cat", "GIT_EDITOR": "false", "EDITOR": "false",
              "VISUAL": "false", "GIT_TERMINAL_PROMPT": "0", "TERM": "dumb"}

# 命令里的 git 不运行仓库配置点名的程序：这些设置的优先级和 `git -c` 一样，高于仓库自己的配置。
# diff.external 不在其中：把它设成空值会让每一次 git diff 都失败。
GIT_SAFE_CONFIG = {
    "core.fsmonitor": "false",
    "core.hooksPath": "/dev/null",
    "core.pager": "cat",
    "log.showSignature": "false",
    "gpg.program": "false",
    "gpg.ssh.program": "false",
    "gpg.x509.program": "false",
}


def _git_safe_env() -> dict[str, str]:
    env = {"GIT_CONFIG_COUNT": str(len(GIT_SAFE_CONFIG)), "GIT_OPTIONAL_LOCKS": "0"}
    for i, (key, value) in enumerate(GIT_SAFE_CONFIG.items()):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def child_env() -> dict[str, str]:
    """交给命令的环境：去掉秘密（`secrets.command_env`），再加上安静和关掉 git 外部程序的设置。"""
    return {**command_env(), **_QUIET_ENV, **_git_safe_env()}


def list_py_command() -> str:
    """返回在本平台列出当前目录下 Python 文件的命令（假模型会用到）。"""
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
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _fallback_encoding() -> str:
    """输出不是合法 UTF-8 时改用的编码：Windows 取控制台代码页，其他系统取区域设置。"""
    if os.name == "nt":
        try:
            import ctypes

            kernel32 = ctypes.windll.kernel32
            name = f"cp{kernel32.GetConsoleOutputCP() or kernel32.GetOEMCP()}"
            codecs.lookup(name)
            return name
        except (AttributeError, OSError, LookupError):
            return "mbcs"
    return locale.getpreferredencoding(False) or "utf-8"


def _decode(data: bytes, fallback: str, cut_start=False, cut_end=False) -> tuple[str, str]:
    """把一段字节解码成文字，返回 (文字, 所用编码)。

    `cut_start`/`cut_end` 表示这段字节的开头/结尾是我们截出来的：开头丢掉残缺的
    UTF-8 续字节，结尾交给增量解码器留下不完整的字符，所以截断处不会出现半个字。
    最后的兜底用 `surrogateescape`：每个坏字节对应一个字符，字节数仍能精确换算，
    输出前再换成替换字符 U+FFFD。
    """
    if cut_start:
        skip = 0
        while skip < min(3, len(data)) and 0x80 <= data[skip] <= 0xBF:
            skip += 1
        data = data[skip:]
    for enc in ("utf-8", fallback):
        try:
            return codecs.getincrementaldecoder(enc)("strict").decode(data, final=not cut_end), enc
        except (UnicodeDecodeError, LookupError):
            continue
    return codecs.getincrementaldecoder("utf-8")("surrogateescape").decode(data, final=not cut_end), "utf-8"


class _Collector:
    """只保留输出的开头 `head_limit` 字节和结尾 `tail_limit` 字节，其余只计数。"""

    def __init__(self, head_limit: int, tail_limit: int):
        self.head, self.tail = bytearray(), bytearray()
        self.head_limit, self.tail_limit = head_limit, tail_limit
        self.total = 0
        self.lock = threading.Lock()

    def feed(self, chunk: bytes) -> None:
        with self.lock:
            self.total += len(chunk)
            room = self.head_limit - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            self.tail += chunk
            if len(self.tail) > self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    def snapshot(self) -> tuple[bytes, bytes, int]:
        with self.lock:
            return bytes(self.head), bytes(self.tail), self.total


def _read_all(stream, sink: _Collector) -> None:
    """读线程：一直读到 EOF（所有写端都关闭），然后关闭读端。"""
    try:
        fd = stream.fileno()
        while chunk := os.read(fd, _CHUNK):
            sink.feed(chunk)
    except OSError:
        pass
    finally:
        stream.close()


def _pipe_holders(inode: int) -> set[int]:
    """Linux：扫描 /proc/*/fd，找出持有这个管道的其他进程（读端只在本进程里）。"""
    target, me, pids = f"pipe:[{inode}]", os.getpid(), set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return pids
    for name in entries:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            fds = os.listdir(f"/proc/{name}/fd")
            if any(os.readlink(f"/proc/{name}/fd/{fd}") == target for fd in fds):
                pids.add(int(name))
        except OSError:  # 进程已退出，或不是我们的进程
            continue
    return pids


def _kill_tree(proc: subprocess.Popen, inode: int | None) -> None:
    """结束命令的整个进程树，以及仍然占着输出管道的进程。"""
    if os.name == "nt":
        try:
            subprocess.run(["taskkill", "/T", "/F", "/PID", str(proc.pid)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except OSError:
            proc.kill()  # 没有 taskkill：至少结束 shell 本身
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # 整个进程组（组号就是 shell 的 pid）
    except OSError:
        pass
    for _ in range(3):  # 用 setsid 离开进程组的进程：按管道 inode 找
        holders = _pipe_holders(inode) if inode is not None else set()
        if not holders:
            break
        for pid in holders:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:  # 已经退出
                pass
        time.sleep(0.01)


def _shell_args(command: str) -> list[str]:
    return [shutil.which("bash") or "/bin/sh", "-c", command]


def _format(head: bytes, tail: bytes, total: int, notes: list[str], max_chars: int) -> str:
    """拼出交给模型的文字：开头 + 省略说明 + 结尾 + 各条附注，总长不超过 max_chars。"""
    fallback = _fallback_encoding()
    notes_text = "\n".join(notes)
    reserve = len(notes_text) + (1 if notes else 0)  # 附注前面可能要补一个换行
    if total == len(head) + len(tail):  # 一个字节都没丢：整体解码
        text, enc = _decode(head + tail, fallback)
        if len(text or "(没有输出)") + reserve <= max_chars:
            return _finish(text or "(没有输出)", notes_text, max_chars)
        head_text, tail_text, tail_enc = text, text, enc
    else:  # 中间的字节已经丢掉：两段分别解码，截断处不留半个字
        head_text, enc = _decode(head, fallback, cut_end=True)
        tail_text, tail_enc = _decode(tail, fallback, cut_start=True)
    budget = max(max_chars - reserve - len(_cut_note(total)), 0)  # 省略数不会超过 total
    head_text = head_text[: budget // 2]
    keep = budget - len(head_text)
    tail_text = tail_text[max(len(tail_text) - keep, 0):] if keep else ""
    shown = len(head_text.encode(enc, "surrogateescape"))
    shown += len(tail_text.encode(tail_enc, "surrogateescape"))
    return _finish(head_text + _cut_note(total - shown) + tail_text, notes_text, max_chars)


def _finish(body: str, notes_text: str, max_chars: int) -> str:
    if notes_text:
        body += ("" if body.endswith("\n") else "\n") + notes_text
    body = re.sub("[\udc80-\udcff]", "\ufffd", body)  # 兜底解码留下的坏字节
    return body[:max_chars]  # 只有 max_chars 小得放不下附注时才会真的截


def _cut_note(omitted: int) -> str:
    return f"\n…[中间省略 {omitted} 个字节]…\n"


def run_bash(command: str, timeout: float = 120, max_chars: int = 50_000, cwd=None) -> str:
    """在 shell 里执行 `command`，返回给模型看的文字。命令做了什么都不会让它抛异常。

    返回值：合并后的标准输出和标准错误（保持先后顺序）；没有输出时是 "(没有输出)"。
    之后按需要追加几行附注：
    - 超时："[超时：命令运行超过 N 秒，已终止整个进程树]"
    - 后台进程占着管道："[提示：……]"
    - 退出码非零："[退出码 N]"；被信号结束："[被信号 N 终止]"
    输出过长时，中间换成 "…[中间省略 N 个字节]…"，整个结果不超过 `max_chars` 个字符。
    """
    if not isinstance(command, str):
        return f"[错误：command 应该是字符串，收到的是 {type(command).__name__}]"
    env = child_env()
    common = dict(stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                  stderr=subprocess.STDOUT, cwd=cwd, env=env)
    try:
        if os.name == "nt":
            proc = subprocess.Popen(command, shell=True, **common,
                                    creationflags=subprocess.CREATE_NEW_PROCESS_GROUP)
        else:
            proc = subprocess.Popen(_shell_args(command), start_new_session=True, **common)
    except (OSError, ValueError) as exc:
        return f"[错误：无法启动命令：{exc}]"

    inode = os.fstat(proc.stdout.fileno()).st_ino if os.path.isdir("/proc") else None
    sink = _Collector(max_chars * 4, max_chars * 4)  # UTF-8 一个字符最多 4 个字节
    reader = threading.Thread(target=_read_all, args=(proc.stdout, sink), daemon=True)
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
            if exited_at is not None and now - exited_at >= GRACE_SECONDS:
                lingering = True
                break
            if now >= deadline:
                timed_out = True
                break
    finally:  # 包括 KeyboardInterrupt：不留下任何进程
        if timed_out or lingering or reader.is_alive() or proc.poll() is None:
            _kill_tree(proc, inode)
            reader.join(1.0)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            pass

    notes = []
    if timed_out:
        notes.append(f"[超时：命令运行超过 {timeout:g} 秒，已终止整个进程树]")
    else:
        if lingering:
            notes.append(f"[提示：命令结束后仍有后台进程占着输出，"
                         f"{GRACE_SECONDS:g} 秒后已停止读取并结束这些进程]")
        code = proc.returncode
        if code is not None and code < 0:
            notes.append(f"[被信号 {-code} 终止]")
        elif code:
            notes.append(f"[退出码 {code}]")
    head, tail, total = sink.snapshot()
    return redact(_format(head, tail, total, notes, max_chars))
