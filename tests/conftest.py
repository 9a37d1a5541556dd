"""测试共用的路径与小工具。"""

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def notebook_paths():
    """按文件名顺序列出所有教学笔记本。"""
    return sorted(p for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
