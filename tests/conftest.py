"""测试共用的路径与小工具。"""

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def notebook_paths():
    """按文件名顺序列出所有教学笔记本。"""
    return sorted(p for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


@pytest.fixture(autouse=True)
def _no_endpoint_left_over():
    """审批看的是“最近交出的端点”，这是进程级的状态：每个测试前后都复位成假模型。"""
    from harness_lib.support import approval

    approval.note_endpoint(None, None)
    yield
    approval.note_endpoint(None, None)
