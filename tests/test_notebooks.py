"""每本笔记本都用 nbclient 无头执行一遍（假模型、无密钥、无网络）。"""

import json
import os

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import NOTEBOOKS, notebook_paths
from harness_lib.ui.clients import learner_environment

PATHS = notebook_paths()


def execute(path, extra_env=None):
    """在全新内核里执行笔记本，返回执行后的笔记本对象（不写回磁盘）。"""
    nb = nbformat.read(path, as_version=4)
    env = learner_environment()
    env.update(extra_env or {})
    client = NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS)}},
        allow_errors=False,
        # 无头内核里没有要保存的东西：立即关闭，省掉“体面关闭”偶尔的 3 秒等待（见 docs/benchmarks.md）
        shutdown_kernel="immediate",
    )
    # env 交给内核管理器的 start_kernel：内核看不到开发者自己的密钥与模式设置
    client.execute(env=env)
    return nb


def outputs_text(nb):
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(json.dumps(out, ensure_ascii=False))
    return "\n".join(parts)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_notebook_runs_headless(path):
    nb = execute(path)
    text = outputs_text(nb)
    assert "Traceback" not in text
    # 调用过模型的笔记本，消息表至少出现一次
    if "show_messages" in "".join(c.source for c in nb.cells):
        assert "messages-view" in text, "应当显示实时消息表"
