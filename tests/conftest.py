"""测试共用的路径与小工具。"""

import pathlib
import re
import subprocess
import time

import pytest

from harness_lib.models.faults import start_fault_server
from harness_lib.safety.runner import demo_workspace

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def notebook_paths():
    """按文件名顺序列出所有教学笔记本。"""
    return sorted(p for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


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
