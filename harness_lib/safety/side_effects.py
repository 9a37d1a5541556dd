"""两个探测器：这段时间里磁盘变了没有、启动了哪些进程。01、02 用它们证明“模型回复了”不等于“有事发生了”。

`watch_processes()` 收集 Python 启动进程时发出的*审计事件*（audit event），如 `subprocess.Popen`、`os.system`。
审计钩子装上就拆不掉，所以导入本模块时只装一个，它只在 `with` 块里记录，别的时候什么也不做。
"""

import contextlib
import sys
from pathlib import Path

PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.posix_spawn", "os.exec", "os.spawn",
                            "os.startfile", "os.fork"})
_watchers: list[list] = []


def _hook(event: str, args: tuple) -> None:
    if _watchers and event in PROCESS_EVENTS:
        shown = repr(args[1] if event == "subprocess.Popen" and len(args) > 1 else args)[:80]
        for events in list(_watchers):
            events.append((event, shown))


sys.addaudithook(_hook)


@contextlib.contextmanager
def watch_processes():
    """在 `with` 块里收集“启动了哪些进程”的审计事件：每项是（事件名，参数的开头）。"""
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
