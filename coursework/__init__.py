"""课程作业：发作业、收作业、沙盒评分、给老师的表。各模块做什么见同一目录的 README.md。

命令行入口是 `python -m coursework.course`（`make release`、`make autograde`）。
"""

from pathlib import Path

from harness_lib.series import notebooks

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"  # 教师版笔记本：带参考答案和隐藏测试
# 没装 teach 时的说明：make release / make autograde 会自己装上锁定的版本
NEEDS_NBGRADER = "课程作业需要 nbgrader：.venv/bin/python -m pip install -r requirements/dev-teach.txt"


def instructor_notebooks() -> list[Path]:
    """教师版笔记本，按编号排好。"""
    return notebooks(NOTEBOOKS)
