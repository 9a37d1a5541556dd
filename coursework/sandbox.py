"""评分沙盒：运行学生代码的内核放进 bubblewrap（bwrap）里，nbgrader 和成绩库留在外面。

nbgrader 在沙盒外面读笔记本、改写测试格、记分、写反馈；只有执行学生代码的 Jupyter 内核在沙盒里。
内核和 nbgrader 之间走 Unix 套接字（ZeroMQ 的 ipc 传输），所以沙盒可以完全没有网络。沙盒里：

- 没有网络，看不到别的进程（自己的 PID 命名空间），内核一结束，里面的每个进程都跟着结束；
- 整个文件系统只读；家目录、/tmp、项目目录、学生作业和输出目录都换成空的临时目录；
  只把 Python、虚拟环境、`harness_lib` 和评分内核（都只读）放回来；
- 当前目录是这位学生文件的一份临时副本；环境变量只有评分需要的几个（假模型，没有任何密钥）；
- 内存、单个文件大小、打开的文件数、/tmp 的大小都有上限。

没有 bwrap 的系统（macOS、Windows、没有用户命名空间的容器）上 `available()` 说明原因；
是否不用沙盒评分由调用者明确决定（course.py 的 `--unsandboxed`）。
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from nbgrader.preprocessors import Execute

ROOT = Path(__file__).resolve().parents[1]
KERNEL = Path(__file__).with_name("grading_kernel.py")
MEMORY = 4 << 30  # 虚拟内存上限（字节）：pandas、openai 加上学生的代码都够用
FILE_SIZE = 256 << 20  # 单个文件的上限
TMP_SIZE = 512 << 20  # 沙盒里 /tmp 的大小
HIDDEN = ["/home", "/root", "/tmp", "/var/tmp", "/run/user", "/mnt", "/media", "/srv"]


def available() -> str | None:
    """能用 bwrap 时返回 None，否则返回一句中文原因。"""
    if not sys.platform.startswith("linux"):
        return f"这台机器是 {sys.platform}：bubblewrap 只在 Linux 上有"
    if shutil.which("bwrap") is None:
        return "没有找到 bwrap：Debian/Ubuntu 上 `sudo apt install bubblewrap`"
    probe = subprocess.run(["bwrap", "--unshare-all", "--ro-bind", "/", "/", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return f"bwrap 建不了命名空间（{probe.stderr.strip()[:200]}）：这台机器或容器可能关掉了非特权用户命名空间"
    return None


def command(kernel_cmd, cwd: Path, run_dir: Path, hide=()) -> list[str]:
    """在沙盒里运行 `kernel_cmd` 的完整命令行。`hide` 是还要藏起来的目录（学生作业、输出目录……）。"""
    args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for path in [*HIDDEN, str(ROOT), *map(str, hide)]:
        if os.path.isdir(path):
            args += ["--size", str(TMP_SIZE), "--tmpfs", path] if path == "/tmp" else ["--tmpfs", path]
    keep = {Path(sys.base_prefix), Path(sys.prefix), ROOT / "harness_lib", KERNEL.parent}
    for path in sorted(keep):
        args += ["--ro-bind", str(path), str(path)]
    scratch = run_dir / "cwd"
    args += ["--bind", str(run_dir), str(run_dir), "--bind", str(scratch), str(cwd), "--chdir", str(cwd),
             "--clearenv", "--setenv", "PATH", f"{Path(sys.executable).parent}:/usr/bin:/bin",
             "--setenv", "HOME", str(cwd), "--setenv", "LANG", "C.UTF-8", "--setenv", "HARNESS_MODE", "fake",
             "--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--"]
    limits = ["prlimit", f"--as={MEMORY}", f"--fsize={FILE_SIZE}", "--nofile=1024", "--core=0", "--"]
    return args + (limits if shutil.which("prlimit") else []) + list(kernel_cmd)


class SandboxKernelManager(AsyncKernelManager):
    """启动评分内核：套上 `command(...)` 的沙盒，连接文件和套接字放在它自己的临时目录里。"""

    hide: tuple = ()  # 由 course.py 按这次评分的作业和输出目录设置

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.run_dir = Path(tempfile.mkdtemp(prefix="kernel-"))
        self.transport, self.ip = "ipc", str(self.run_dir / "zmq")
        self.connection_file = str(self.run_dir / "kernel.json")

    def format_kernel_cmd(self, extra_arguments=None):
        return [sys.executable, str(KERNEL), "-f", self.connection_file, *(extra_arguments or [])]

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        cwd = Path(kw.get("cwd") or os.getcwd())
        shutil.copytree(cwd, self.run_dir / "cwd", dirs_exist_ok=True)  # 学生文件的一份临时副本
        kw["env"] = {}
        await super()._async_launch_kernel(command(kernel_cmd, cwd, self.run_dir, self.hide), **kw)

    async def _async_cleanup_resources(self, restart=False):
        await super()._async_cleanup_resources(restart)
        if not restart:
            shutil.rmtree(self.run_dir, ignore_errors=True)


class PlainKernelManager(AsyncKernelManager):
    """不用沙盒（老师用 --unsandboxed 明确选择时）：还是评分内核，环境变量换成 `env`。"""

    env: dict = {}

    def format_kernel_cmd(self, extra_arguments=None):
        return [sys.executable, str(KERNEL), "-f", self.connection_file, *(extra_arguments or [])]

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        kw["env"] = dict(self.env)
        await super()._async_launch_kernel(kernel_cmd, **kw)


def execute_with(manager):
    """nbgrader 的 Execute 预处理器，只是内核换成 `manager` 启动的评分内核。"""

    class SandboxExecute(Execute):
        def __init__(self, *args, **kwargs):
            kwargs["kernel_manager_class"] = manager
            super().__init__(*args, **kwargs)

    return SandboxExecute
