"""两个探测器：这段时间里磁盘变了没有、启动了哪些进程。01、02 用它们证明“模型回复了”不等于“有事发生了”。

辅助工具，不是课程内容。

- `disk_snapshot(root=".")`：目录里每个文件的（大小，修改时间），前后两次一比就知道变没变；
- `watch_processes()`：`with` 块里 Python 每启动一个进程，都会发出一个审计事件（audit event），
  例如 `subprocess.Popen`、`os.system`、`os.posix_spawn`。这里把这些事件记进一个列表。
  审计钩子装上就拆不掉（Python 的规定），所以整个进程只装一个，它只在 `with` 块里记录，别的时候什么也不做。
"""

from __future__ import annotations

import contextlib
import sys
import threading
from pathlib import Path

__all__ = ["PROCESS_EVENTS", "disk_snapshot", "watch_processes"]

PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.posix_spawn", "os.exec", "os.spawn",
                            "os.startfile", "os.fork"})

_watchers: list[list] = []
_lock = threading.Lock()
_installed = False


def _hook(event: str, args: tuple) -> None:
    if _watchers and event in PROCESS_EVENTS:
        shown = repr(args[1] if event == "subprocess.Popen" and len(args) > 1 else args)[:80]
        for events in list(_watchers):
            events.append((event, shown))


@contextlib.contextmanager
def watch_processes():
    """在 `with` 块里收集“启动了哪些进程”的审计事件：每项是（事件名，参数的开头）。"""
    global _installed
    with _lock:
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True
    events: list = []
    _watchers.append(events)
    try:
        yield events
    finally:
        _watchers.remove(events)


def disk_snapshot(root=".") -> dict[str, tuple[int, int]]:
    """`root` 下每个文件的（大小，修改时间 ns），键是相对路径。"""
    root = Path(root)
    return {p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}
