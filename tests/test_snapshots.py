"""消息表是快照：一张表只在显示它的那一格运行期间刷新，格子跑完就定住。

用 nbclient 真正执行笔记本，记下每条 `update_display_data` 消息是在哪一格运行时到来的，
以及它要改的那张表最初显示在哪一格：两者必须是同一格。否则“运行全部”之后，
前面的表会显示后面才发生的事（一张写着“只有一条”的表里已经有四条）。
"""

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import NOTEBOOKS
from harness_lib.ui.clients import learner_environment

# 这几本在一格里建表、在后面的格子里跑循环并刷新
NOTEBOOKS_WITH_TABLES = ["01_model_only_proposes", "02_each_turn", "03_one_request", "06_five_tools"]


class _Watching(NotebookClient):
    """记录每个 display_id 最初出现在哪一格，以及每次改写它时正在运行哪一格。"""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.shown_in: dict[str, int] = {}
        self.rewrites: list[tuple[str, int]] = []  # (display_id, 正在运行的格子)

    def process_message(self, msg, cell, cell_index):
        content = msg.get("content", {})
        display_id = (content.get("transient") or {}).get("display_id")
        if display_id:
            if msg["msg_type"] == "display_data":
                self.shown_in.setdefault(display_id, cell_index)
            elif msg["msg_type"] == "update_display_data":
                self.rewrites.append((display_id, cell_index))
        return super().process_message(msg, cell, cell_index)


def _rows(html: str) -> int:
    return html.count("<tr style=")


@pytest.mark.parametrize("name", NOTEBOOKS_WITH_TABLES)
def test_tables_are_only_rewritten_by_their_own_cell(name):
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    client = _Watching(nb, timeout=120, kernel_name="python3", shutdown_kernel="immediate",
                       resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute(env=learner_environment())
    assert client.shown_in, "这本笔记本里应当有消息表"
    later = [(d, at) for d, at in client.rewrites if client.shown_in.get(d) != at]
    assert not later, (
        f"{name}：有表被后面的格子改写了（表所在的格子 → 改写时运行的格子）："
        f"{[(client.shown_in.get(d), at) for d, at in later]}"
    )
    if name == "03_one_request":
        # 第一张表只画了用户的那一条消息；“运行全部”之后也还是一条
        first = next(out for cell in nb.cells for out in cell.get("outputs", [])
                     if "text/html" in out.get("data", {}) and "<tr style=" in out["data"]["text/html"])
        assert _rows(first["data"]["text/html"]) == 1
