"""评分沙盒：运行学生代码的内核放进 bubblewrap（bwrap）里，nbgrader 和成绩库留在外面。

nbgrader 在沙盒外面读笔记本、改写测试格、记分、写反馈；只有执行学生代码的 Jupyter 内核在沙盒里。
每个学生一个沙盒（`StudentSandbox`），里面跑着 `forkserver.serve`：它导入好评分内核和常用的包，
每本笔记本 fork 出一个全新的内核（见 forkserver.py）。内核和 nbgrader 之间走 Unix 套接字
（ZeroMQ 的 ipc 传输），套接字在沙盒自己的 /tmp 里，外面经 `/proc/<pid>/root/…` 连进去，
所以沙盒可以完全没有网络，也没有一处可写的目录在宿主机的磁盘上。沙盒里：

- 没有任何特权（以 root 评分时 bwrap 默认会留下全部特权，这里明确丢掉），不能 umount 露出藏起来的目录；
- 没有网络，看不到别的进程（自己的 PID 命名空间），不能再建用户命名空间；沙盒一结束，里面的每个进程
  都跟着结束，每本笔记本评完也会杀掉学生留下的进程；
- 整个文件系统只读；家目录、项目目录、学生作业和输出目录都换成空的、只读的临时目录；
  只把 Python、虚拟环境、`harness_lib` 和评分内核（都只读）放回来；
- 当前目录是这位学生文件的一份新副本（每本笔记本之前重新复制）；环境变量只有评分需要的几个；
- 上限：每个进程的内存、单个文件大小、打开的文件数；整个沙盒的进程数（含线程）；
  可写的地方只有当前目录和 /tmp，两处都是有大小上限的内存盘。

进程数上限：普通用户用 `prlimit --nproc`（新的用户命名空间里只数沙盒自己的进程）；root 不受它约束，
改用一个新建的 cgroup（pids.max），建不了时 `limits_note()` 说明。

没有 bwrap 的系统（macOS、Windows、没有用户命名空间的容器）上 `available()` 说明原因；
是否不用沙盒评分由调用者明确决定（course.py 的 `--unsandboxed`）。
"""

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbgrader.preprocessors import Execute

ROOT = Path(__file__).resolve().parents[1]
KERNEL = Path(__file__).with_name("grading_kernel.py")
FORKSERVER = Path(__file__).with_name("forkserver.py")

from . import forkserver  # noqa: E402

MEMORY = 4 << 30  # 每个进程的虚拟内存上限（字节）：pandas、openai 加上学生的代码都够用
FILE_SIZE = 256 << 20  # 单个文件的上限
TMP_SIZE = 512 << 20  # 沙盒里 /tmp 的大小
CWD_SIZE = 256 << 20  # 当前目录（学生文件的副本）的大小
PROCESSES = 256  # 整个沙盒的进程数上限（线程也算）：内核自己十来个，笔记本里的命令再用几十个
# 换成空目录的地方：/run 和 /var 里有宿主机的 Unix 套接字（docker、D-Bus、数据库……），没有网络也连得上
HIDDEN = ["/home", "/root", "/tmp", "/run", "/var", "/mnt", "/media", "/srv", "/etc/ssh", "/etc/ssl/private"]
MASKED = ["/etc/shadow", "/etc/gshadow", "/etc/sudoers"]  # 以 root 评分时沙盒能读 root 的文件：至少盖住这几个
DEV_SHM_SIZE = 64 << 20
START_TIMEOUT = 120  # 等沙盒里的工厂准备好（导入 pandas、openai……）最多多少秒


def _cgroup_procs() -> Path | None:
    """root 评分时进程数上限靠 cgroup 的 pids 控制器（root 不受 RLIMIT_NPROC 约束）：建一个新的 cgroup，
    返回它的 cgroup.procs；建不了就返回 None。不是 root 时不需要（用 prlimit）。"""
    if os.geteuid() != 0:
        return None
    own = Path("/proc/self/cgroup").read_text() if Path("/proc/self/cgroup").exists() else ""
    if Path("/sys/fs/cgroup/pids").is_dir():  # cgroup v1
        base = Path("/sys/fs/cgroup/pids")
    elif "0::/\n" in own + "\n":  # cgroup v2，而且在根 cgroup 里（别处要先在父 cgroup 里打开 pids 控制器）
        base = Path("/sys/fs/cgroup")
    else:
        return None
    group = base / f"harness-grading-{os.getpid()}-{time.monotonic_ns()}"
    try:
        group.mkdir()
        (group / "pids.max").write_text(str(PROCESSES))
        return group / "cgroup.procs"
    except OSError:
        shutil.rmtree(group, ignore_errors=True)
        return None


def limits_note() -> str | None:
    """有哪一项上限这台机器上给不了，就返回一句中文说明。"""
    if os.geteuid() == 0:
        procs = _cgroup_procs()
        if procs is None:
            return "以 root 评分，又建不了 cgroup：沙盒里的进程数没有上限（用普通用户评分就有）"
        procs.parent.rmdir()
    return None


def available() -> str | None:
    """能用 bwrap 时返回 None，否则返回一句中文原因。"""
    if not sys.platform.startswith("linux"):
        return f"这台机器是 {sys.platform}：bubblewrap 只在 Linux 上有"
    for tool, package in (("bwrap", "bubblewrap"), ("prlimit", "util-linux")):
        if shutil.which(tool) is None:
            return f"没有找到 {tool}：Debian/Ubuntu 上 `sudo apt install {package}`"
    probe = subprocess.run(["bwrap", "--unshare-all", "--unshare-user", "--disable-userns",
                            "--ro-bind", "/", "/", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"bwrap 建不了命名空间（{probe.stderr.strip()[:200]}）：这台机器或容器可能关掉了非特权用户命名空间"
    # 沙盒还要挂一个新的 /proc：容器盖住了 /proc 里的几处（Docker 和 Kubernetes 默认如此）时，内核不许
    probe = subprocess.run(["bwrap", "--unshare-all", "--unshare-user", "--disable-userns",
                            "--ro-bind", "/", "/", "--proc", "/proc", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return (f"bwrap 挂不上新的 /proc（{probe.stderr.strip()[:200]}）：在容器里评分时，容器不能盖住 /proc 里的路径"
                "（Docker 加 --security-opt systempaths=unconfined，Kubernetes 用 procMount: Unmasked，见 docs/teaching.md）")
    return None


def command(cwd: str, hide=(), info_fd=None) -> list[str]:
    """一个学生的沙盒的完整命令行，`cwd` 是学生文件所在的目录（也是沙盒里的当前目录）。
    `hide` 是还要藏起来的目录（学生作业、输出目录……）；`info_fd` 上 bwrap 会写出沙盒进程的 pid。"""
    args = ["bwrap", *(["--info-fd", str(info_fd)] if info_fd is not None else []),
            "--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL", "--die-with-parent",
            "--new-session", "--ro-bind", "/", "/", "--dev", "/dev", "--size", str(DEV_SHM_SIZE),
            "--tmpfs", "/dev/shm", "--proc", "/proc"]
    emptied = ["/dev"]
    for path in MASKED:
        if os.path.exists(path):
            args += ["--ro-bind", "/dev/null", path]
    for path in dict.fromkeys([*HIDDEN, str(ROOT), *map(str, hide)]):
        if os.path.isdir(path):
            args += ["--size", str(TMP_SIZE), "--tmpfs", path] if path == "/tmp" else ["--tmpfs", path]
            emptied += [] if path == "/tmp" else [path]
    for path in sorted({Path(sys.base_prefix), Path(sys.prefix), ROOT / "harness_lib", FORKSERVER.parent}):
        args += ["--ro-bind", str(path), str(path)]
    args += ["--dir", forkserver.CONTROL, "--ro-bind", cwd, forkserver.SOURCE,
             "--size", str(CWD_SIZE), "--tmpfs", cwd]
    for path in emptied:  # 藏起来的目录是空的，也不能写（不然就是不限大小的内存盘）
        args += ["--remount-ro", path]
    args += ["--chdir", cwd, "--clearenv", "--setenv", "PATH", f"{Path(sys.executable).parent}:/usr/bin:/bin",
             "--setenv", "HOME", cwd, "--setenv", "LANG", "C.UTF-8", "--setenv", "HARNESS_MODE", "fake",
             "--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--",
             "prlimit", f"--as={MEMORY}", f"--fsize={FILE_SIZE}", "--nofile=1024", "--core=0",
             f"--nproc={PROCESSES}", "--"]
    return args + [sys.executable, str(FORKSERVER), "serve", cwd]


class StudentSandbox:
    """一个学生的沙盒：bwrap 里跑着内核工厂。`root` 是从外面看沙盒根目录的路径（`/proc/<pid>/root`）。"""

    def __init__(self, cwd: str, hide=()):
        read, write = os.pipe()
        self.cgroup = _cgroup_procs()
        args = command(cwd, hide, info_fd=write)
        if self.cgroup is not None:  # 先进 cgroup 再 exec bwrap：沙盒里的每个进程都在里面
            args = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.cgroup), *args]
        try:
            self.proc = subprocess.Popen(args, pass_fds=[write], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL)
        except OSError:
            self._remove_cgroup()
            raise
        finally:
            os.close(write)
        with os.fdopen(read, "rb") as info:
            data = b""
            while chunk := info.read1(4096):
                data += chunk
                try:
                    pid = json.loads(data)["child-pid"]
                    break
                except ValueError:
                    continue
            else:
                self.proc.wait()
                self._remove_cgroup()
                raise RuntimeError(f"评分沙盒没有启动（bwrap 退出码 {self.proc.returncode}）")
        self.root = f"/proc/{pid}/root"
        ready = f"{self.root}{forkserver.CONTROL}/{forkserver.SOCKET}"
        deadline = time.monotonic() + START_TIMEOUT
        while not os.path.exists(ready):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("评分沙盒里的内核工厂没有准备好（日志里有它的报错）")
            time.sleep(0.02)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def reusable(self) -> bool:
        """下一本笔记本还能用这个沙盒吗：只剩 bwrap 的 1 号进程和（没有被暂停的）工厂，
        控制目录和套接字是工厂建的那两样（不是学生换上的符号链接）。否则换一个新沙盒。"""
        if not self.alive():
            return False
        try:
            pids = {name for name in os.listdir(f"{self.root}/proc") if name.isdigit()}
            state = Path(f"{self.root}/proc/2/stat").read_text().rsplit(")", 1)[1].split()[0]
            control = os.lstat(f"{self.root}{forkserver.CONTROL}")
            sock = os.lstat(f"{self.root}{forkserver.CONTROL}/{forkserver.SOCKET}")
        except (OSError, IndexError):
            return False
        return pids == {"1", "2"} and state in ("R", "S", "D") and stat.S_ISDIR(control.st_mode) and stat.S_ISSOCK(sock.st_mode)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._remove_cgroup()

    def _remove_cgroup(self) -> None:
        if self.cgroup is not None:
            for _ in range(500):  # PID 命名空间里的进程是异步退出的，机器忙时要好几秒
                try:
                    self.cgroup.parent.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


class SandboxKernelManager(AsyncKernelManager):
    """在学生的沙盒里启动评分内核：沙盒按当前目录（每个学生一个）建一次，之后每本笔记本只是 fork。"""

    hide: tuple = ()  # 由 course.py 按这次评分的作业和输出目录设置
    notebook_limit: int = 600  # 一本笔记本最多运行多少秒（吞掉中断的死循环也停得下）；course.py 按 --timeout 设置
    boxes: dict = {}  # 当前目录 → StudentSandbox；course.py 每评完一个学生就关掉

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.run_dir = Path(tempfile.mkdtemp(prefix="kernel-"))  # 只放连接文件
        self.transport = "ipc"
        self.connection_file = str(self.run_dir / "kernel.json")

    async def _async_pre_start_kernel(self, **kw):
        cwd = str(kw.get("cwd") or os.getcwd())
        box = self.boxes.get(cwd)
        if box is None or not box.reusable():
            if box is not None:
                box.stop()
            box = self.boxes[cwd] = StudentSandbox(cwd, self.hide)
        self.box, self.ip = box, f"{box.root}{forkserver.CONTROL}/k"
        return await super()._async_pre_start_kernel(**kw)

    def format_kernel_cmd(self, extra_arguments=None):
        return [sys.executable, "-I", str(FORKSERVER), "launch", self.box.root, self.connection_file,
                str(self.notebook_limit)]

    def cleanup_ipc_files(self):
        """套接字在沙盒的 /tmp 里，随沙盒消失；不经 /proc/<pid>/root 去删（学生可能把那里换成了指向外面的链接）。"""

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        kw["env"] = {}
        await super()._async_launch_kernel(kernel_cmd, **kw)

    async def _async_cleanup_resources(self, restart=False):
        await super()._async_cleanup_resources(restart)
        if not restart:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    @classmethod
    def close_all(cls) -> None:
        for box in cls.boxes.values():
            box.stop()
        cls.boxes.clear()


class PlainKernelManager(AsyncKernelManager):
    """不用沙盒（老师用 --unsandboxed 明确选择时）：还是评分内核，环境变量换成 `env`。"""

    env: dict = {}

    def format_kernel_cmd(self, extra_arguments=None):
        return [sys.executable, str(KERNEL), "-f", self.connection_file, *(extra_arguments or [])]

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        kw["env"] = dict(self.env)
        await super()._async_launch_kernel(kernel_cmd, **kw)


def execute_with(manager):
    """nbgrader 的 Execute 预处理器，只是内核换成 `manager` 启动的评分内核（coursework/grading_kernel.py），
    并且测试格交给评分内核的 `__run_test_cell__`，在自己的命名空间里运行；第一道练习之前，先让内核记下
    笔记本自己的名字。笔记本里存的源代码不变：反馈里看到的还是原来的测试格。"""

    class SandboxExecute(Execute):
        def __init__(self, *args, **kwargs):
            kwargs["kernel_manager_class"] = manager
            super().__init__(*args, **kwargs)
            self._snapshot_taken = False

        def preprocess_cell(self, cell, resources, index):
            meta = cell.metadata.get("nbgrader", {}) if cell.cell_type == "code" else {}
            if meta.get("solution") and not self._snapshot_taken:
                self._snapshot_taken = True
                marker = nbformat.v4.new_code_cell("__snapshot_teacher_names__()")
                super().preprocess_cell(marker, resources, index)
            if not (meta.get("grade") and not meta.get("solution")):
                return super().preprocess_cell(cell, resources, index)
            source = cell.source
            cell.source = f"__run_test_cell__({source!r})"
            try:
                return super().preprocess_cell(cell, resources, index)
            finally:
                cell.source = source

    return SandboxExecute
