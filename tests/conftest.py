"""测试共用的路径与小工具。"""

import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

from harness_lib.models.faults import start_fault_server
from harness_lib.safety.runner import demo_workspace
from harness_lib.series import notebooks

# 测试从不读写学习者记下的规矩（harness_lib/ui/memory.py）；要测它的测试自己给一个临时文件
os.environ["HARNESS_MEMORY"] = "off"

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def notebook_paths():
    """按文件名顺序列出所有教学笔记本。"""
    return notebooks(NOTEBOOKS)


class Execution:
    """一本笔记本在全新内核里（假模型、无密钥、无网络）执行一遍的结果，以及执行时看到的消息表刷新。

    `shown_in`：每张消息表（display_id）最初显示在哪一格；`rewrites`：每次改写它时正在运行哪一格。
    """

    def __init__(self, nb, shown_in, rewrites):
        self.nb, self.shown_in, self.rewrites = nb, shown_in, rewrites


_EXECUTIONS = {}


def executed(path):
    """执行一本笔记本并缓存：同一次 pytest 里，几个测试看的是同一次执行，不再重跑。"""
    import nbformat
    from nbclient import NotebookClient

    from harness_lib.safety.secrets import learner_environment

    class Watching(NotebookClient):
        def process_message(self, msg, cell, cell_index):
            content = msg.get("content", {})
            display_id = (content.get("transient") or {}).get("display_id")
            if display_id and msg["msg_type"] == "display_data":
                shown_in.setdefault(display_id, cell_index)
            elif display_id and msg["msg_type"] == "update_display_data":
                rewrites.append((display_id, cell_index))
            return super().process_message(msg, cell, cell_index)

    path = pathlib.Path(path)
    if path not in _EXECUTIONS:
        shown_in, rewrites = {}, []
        nb = nbformat.read(path, as_version=4)
        # 无头内核里没有要保存的东西：立即关闭，省掉“体面关闭”偶尔的 3 秒等待（见 docs/benchmarks.md）
        client = Watching(nb, timeout=120, kernel_name="python3", allow_errors=False, shutdown_kernel="immediate",
                          resources={"metadata": {"path": str(NOTEBOOKS)}})
        # env 交给内核管理器的 start_kernel：内核看不到开发者自己的密钥与模式设置
        client.execute(env=learner_environment())
        _EXECUTIONS[path] = Execution(nb, shown_in, rewrites)
    return _EXECUTIONS[path]


def key_leaks(text, key, n=6):
    """`text` 里出现了密钥的哪些 n 字符片段（空列表表示没有泄露）。"""
    return sorted({key[i:i + n] for i in range(len(key) - n + 1)} & {text[i:i + n] for i in range(len(text) - n + 1)})


@pytest.fixture(scope="module")
def fault_server():
    """本机故障服务器（harness_lib.models.faults），一个测试文件共用一台；数请求前先 `reset()`。"""
    with start_fault_server(delay=5) as srv:
        yield srv


@pytest.fixture()
def workspace(monkeypatch):
    """新建一个演示用的临时目录（有 app.py 和 utils.py），测试期间把当前目录切过去。"""
    path = demo_workspace()
    monkeypatch.chdir(path)
    return path


def stop_process(proc, timeout=10):
    """请子进程退出；等 `timeout` 秒还没退出就强制结束。"""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def printed_base_url(proc, out_path, what, log_path=None, timeout=30):
    """等子进程在 `out_path` 里打印出 `http://…/v1` 并返回它；进程退出或超时就带着日志失败。"""
    log_path = log_path or out_path
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"{what}没能启动：{log_path.read_text(errors='replace')}"
        assert time.monotonic() < deadline, f"{what} {timeout} 秒内没有打印地址"
        match = re.search(r"http://[^\s]+/v1", out_path.read_text(encoding="utf-8", errors="replace"))
        if match:
            return match.group(0)
        time.sleep(0.05)


@pytest.fixture(scope="session")
def release_dir(tmp_path_factory):
    """学生版：`python -m coursework.course release` 的真实输出（约 10 秒），几个测试文件共用一份，只读不改。"""
    out = tmp_path_factory.mktemp("release")
    subprocess.run([sys.executable, "-m", "coursework.course", "release", "--out", str(out)],
                   check=True, capture_output=True, cwd=ROOT)
    assert sorted(p.name for p in out.glob("*.ipynb")) == sorted(p.name for p in notebook_paths())
    return out


@pytest.fixture(scope="session")
def prepared_course(tmp_path_factory):
    """一个准备好的 nbgrader 课程目录（成绩库里已有作业和全部测试格）。

    `course.autograde` 见到 `<out>/course/gradebook.db` 已经存在就不再准备；几个测试把它复制过去，
    省下每次约 5 秒的 generate_assignment。
    """
    from coursework import course

    path = tmp_path_factory.mktemp("prepared") / "course"
    course._prepare_course(path, course.instructor_notebooks())
    return path
