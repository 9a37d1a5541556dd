"""这套笔记本有哪几本：文件名以两位编号开头（`00_setup.ipynb` …… `11_two_more_apis.ipynb`），按编号排好。
导出课程层、建网站、测试、跑分和发作业都从这里取名单，不各写一份通配符。"""

from pathlib import Path

NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"


def notebooks(folder: Path) -> list[Path]:
    """`folder` 里这套笔记本的路径，按编号排好。"""
    return sorted(Path(folder).glob(NOTEBOOK_GLOB))
