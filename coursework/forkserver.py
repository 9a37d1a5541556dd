"""评分沙盒里的内核工厂：每个学生一个沙盒，每本笔记本一个从它分出来（fork）的全新内核。

新起一个 Python 内核再导入 openai、pandas、ipywidgets，要花一秒多 CPU；一个学生 11 本笔记本，
200 个学生就是四十多分钟 CPU 只花在启动上。所以每个学生的沙盒里先跑一个“工厂”进程：它把评分内核和
这些包导入好，然后每来一个请求就 fork 出一个内核。fork 出来的内核是工厂的一份副本：前一本笔记本对
内存做的任何改动都到不了下一本。两个入口：

- `serve`：在沙盒里（`sandbox.StudentSandbox` 用 bwrap 启动它）。每个请求：把学生文件的一份新副本
  放进当前目录，fork 出内核，等它结束（或者被要求中断、结束），再杀掉沙盒里剩下的每个进程、
  清空当前目录和 /tmp，才接下一个请求。工厂自己设成不可转储（PR_SET_DUMPABLE=0），学生的代码
  不能用 ptrace 或 /proc/<pid>/mem 改它。
- `launch`：在沙盒外，jupyter_client 把它当作“内核进程”启动。它把连接信息交给工厂，把中断信号
  转过去，内核结束时带着同样的退出码结束；它自己被杀掉时，连接断开，工厂就杀掉内核。

两边只通过沙盒里 /tmp 下的 Unix 套接字说话；沙盒外面经 `/proc/<沙盒进程>/root/…` 连进去，
所以沙盒里没有一处可写的目录在宿主机的磁盘上。
"""

import json
import os
import select
import shutil
import signal
import socket
import sys
import time

CONTROL = "/tmp/.grading"  # 沙盒里：控制套接字、内核的连接文件和套接字
SOURCE = "/tmp/.submission"  # 沙盒里：学生文件（只读），每本笔记本之前复制一份到当前目录
SOCKET = "fork.sock"
PRELOAD = ("openai", "pandas", "ipywidgets", "harness_lib.ui.switch", "harness_lib.ui.view")


def _set_dumpable(on: bool) -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(4, int(on), 0, 0, 0)  # PR_SET_DUMPABLE


def _send(conn, **message) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def _clear(folder: str, keep=()) -> None:
    """删掉 folder 里的一切，keep 里的路径（和通往它们的目录）除外。"""
    for entry in os.scandir(folder):
        if entry.path in keep:
            continue
        if any(k.startswith(entry.path + "/") for k in keep):
            _clear(entry.path, keep)
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            try:
                os.unlink(entry.path)
            except OSError:
                pass


def _kill_the_rest() -> None:
    """杀掉沙盒里除了 bwrap 的 1 号进程和工厂自己以外的每个进程（学生留下的后台进程都在这里）。"""
    me = os.getpid()
    for _ in range(200):
        others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
        if not others:
            return
        for pid in others:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.01)


def _run_kernel(connection_file: str, cwd: str) -> None:
    """fork 出来的子进程：成为一个普通的评分内核。"""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # 工厂忽略 SIGINT；内核要靠它中断一格
        os.setsid()
        _set_dumpable(True)
        os.chdir(cwd)
        import grading_kernel

        sys.argv = [grading_kernel.__file__, "-f", connection_file]
        grading_kernel.main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001  内核起不来：原因写到日志，退出码告诉外面
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def _one_kernel(conn, request: dict, cwd: str, count: int, server) -> None:
    info = request.get("connection") or {}
    if request.get("cwd") != cwd or not str(info.get("ip", "")).startswith(CONTROL + "/"):
        _send(conn, error=f"请求不对：当前目录应当是 {cwd}，套接字应当在 {CONTROL} 里")
        return
    _clear(cwd)
    shutil.copytree(SOURCE, cwd, dirs_exist_ok=True, symlinks=True)
    connection_file = f"{CONTROL}/k{count}.json"
    with open(connection_file, "w") as f:
        json.dump(info, f)
    pid = os.fork()
    if pid == 0:  # 内核拿不到工厂的套接字：既不能冒充工厂，也不能替外面的 launch 说话
        os.close(conn.fileno())
        os.close(server.fileno())
        _run_kernel(connection_file, cwd)
    pidfd = os.pidfd_open(pid)
    status, watched = None, [conn, pidfd]
    deadline = time.monotonic() + float(request.get("limit") or 600)
    try:
        _send(conn, pid=pid)
        while status is None:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select(watched, [], [], wait)
            if not ready:  # 整本笔记本超过了上限（比如吞掉了中断的死循环）：杀掉内核
                os.killpg(pid, signal.SIGKILL)
                deadline = None
                continue
            if pidfd in ready:
                status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
                break
            command = conn.recv(1)
            try:
                if command == b"i":
                    os.kill(pid, signal.SIGINT)
                elif command == b"t":
                    os.killpg(pid, signal.SIGTERM)
                else:  # 外面的 launch 没了（被杀掉、连接断了）：内核也不能留
                    os.killpg(pid, signal.SIGKILL)
                    watched = [pidfd]
            except ProcessLookupError:
                pass
    finally:
        os.close(pidfd)
        _kill_the_rest()
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        _clear(cwd)
        _clear("/tmp", keep=(CONTROL, SOURCE, cwd))
        _clear(CONTROL, keep=(f"{CONTROL}/{SOCKET}",))
        _clear("/dev/shm")
        if os.listdir(cwd) or os.listdir("/dev/shm"):  # 删不掉的（比如改成只读的目录）：这个沙盒不再用
            os._exit(3)
    if status is not None:
        try:
            _send(conn, exit=status)
        except OSError:
            pass


def serve(cwd: str) -> None:
    import grading_kernel  # noqa: F401  ipykernel、IPython、harness_lib 都在这里导入好（以脚本运行，所在目录就在 sys.path 上）

    for name in PRELOAD:  # 笔记本第一格就要导入的包；装不上也照样评分，只是慢些
        try:
            __import__(name)
        except Exception:  # noqa: BLE001
            pass
    _set_dumpable(False)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(f"{CONTROL}/{SOCKET}")
    server.listen(1)
    count = 0
    while True:
        conn, _ = server.accept()
        count += 1
        with conn:
            try:
                request = json.loads(conn.makefile("rb").readline() or b"{}")
                _one_kernel(conn, request, cwd, count, server)
            except Exception as exc:  # noqa: BLE001  一个坏请求不能让工厂停下
                try:
                    _send(conn, error=f"{type(exc).__name__}: {exc}")
                except OSError:
                    pass


def launch(root: str, connection_file: str, limit: str = "600") -> int:
    """沙盒外：请工厂起一个内核，转发中断信号，内核结束时带着它的退出码结束。"""
    with open(connection_file) as f:
        connection = json.load(f)
    connection["ip"] = connection["ip"].removeprefix(root)  # 沙盒外经 /proc/<pid>/root 看到的路径，在沙盒里没有这个前缀
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(f"{root}{CONTROL}/{SOCKET}")
    _send(conn, connection=connection, cwd=os.getcwd(), limit=float(limit))
    signal.signal(signal.SIGINT, lambda *_: conn.sendall(b"i"))
    signal.signal(signal.SIGTERM, lambda *_: conn.sendall(b"t"))
    replies = conn.makefile("rb")
    for line in replies:
        reply = json.loads(line)
        if "error" in reply:
            sys.stderr.write(f"评分沙盒没能启动内核：{reply['error']}\n")
            return 1
        if "exit" in reply:
            return int(reply["exit"])
    return 1


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        raise SystemExit(launch(*sys.argv[2:]))
