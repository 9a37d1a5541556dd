"""每本笔记本都用 nbclient 无头执行一遍（假模型、无密钥、无网络），执行结果由几个测试共用。"""

import json

import pytest

from conftest import executed, notebook_paths
from test_reading import BUDGETS, budget_section, executed_main_line, minutes, output_minutes

PATHS = notebook_paths()


def outputs_text(nb):
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(json.dumps(out, ensure_ascii=False))
    return "\n".join(parts)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_notebook_runs_headless(path):
    nb = executed(path).nb
    text = outputs_text(nb)
    assert "Traceback" not in text
    # 调用过模型的笔记本，消息表至少出现一次
    if "show_messages" in "".join(c.source for c in nb.cells):
        assert "messages-view" in text, "应当显示实时消息表"


def _rows(html: str) -> int:
    return html.count("<tr style=")


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_tables_are_only_rewritten_by_their_own_cell(path):
    """消息表是快照：一张表只在显示它的那一格运行期间刷新，格子跑完就定住。

    记下每条 `update_display_data` 是在哪一格运行时到来的，以及它要改的那张表最初显示在哪一格：
    两者必须是同一格。否则“运行全部”之后，前面的表会显示后面才发生的事。
    """
    run = executed(path)
    later = [(d, at) for d, at in run.rewrites if run.shown_in.get(d) != at]
    assert not later, (
        f"{path.name}：有表被后面的格子改写了（表所在的格子 → 改写时运行的格子）："
        f"{[(run.shown_in.get(d), at) for d, at in later]}"
    )
    if path.name == "03_one_request.ipynb":
        # 第一张表只画了用户的那一条消息；“运行全部”之后也还是一条
        first = next(out for cell in run.nb.cells for out in cell.get("outputs", [])
                     if "text/html" in out.get("data", {}) and "<tr style=" in out["data"]["text/html"])
        assert _rows(first["data"]["text/html"]) == 1


@pytest.mark.parametrize("name", sorted(BUDGETS))
def test_main_line_reads_within_its_budget(name):
    """细心的读者读完主线（说明、代码、执行出来的输出）的估计用时，不超过这本的预算（见 test_reading.py）。"""
    cells = executed_main_line(executed(next(p for p in PATHS if p.stem == name)).nb, name)
    total = minutes(cells) + output_minutes(cells)
    assert total <= BUDGETS[name], f"{name} 的主线估计要 {total:.1f} 分钟，预算 {BUDGETS[name]} 分钟"


def test_the_teaching_guide_gives_the_minutes_the_notebooks_take():
    """docs/teaching.md 阅读预算表里“现在”一列，和算出来的相差不到 0.2 分钟（改了笔记本就运行
    `scripts/reading_minutes.py --docs`）。"""
    import re

    text = (PATHS[0].parents[1] / "docs" / "teaching.md").read_text(encoding="utf-8")
    start, end = budget_section(text)
    section = text[start:end]
    stated = {m.group(1): float(m.group(2)) for m in re.finditer(r"^\| `(\w+)`.*\| ([\d.]+) 分钟 \|$", section, re.M)}
    assert set(BUDGETS) <= set(stated)
    for name in BUDGETS:
        cells = executed_main_line(executed(next(p for p in PATHS if p.stem == name)).nb, name)
        total = minutes(cells) + output_minutes(cells)
        assert abs(stated[name] - total) < 0.2, (
            f"docs/teaching.md 说 {name} 要 {stated[name]} 分钟，算出来是 {total:.1f}：运行 scripts/reading_minutes.py --docs")


def test_07_prints_the_deadline_of_the_client_in_use():
    """07 的说明写的是所用客户端自己的上限：0.2 秒的客户端说 0.2 秒、截止 0.5 秒的说 0.5 秒，不是常量 60；
    余额用完的 429，切换器的客户端只发一次。"""
    text = outputs_text(executed(next(p for p in PATHS if p.stem == "07_endpoint_faults")).nb)
    assert "读超时是 0.2 秒" in text and "每次尝试最多等 0.5 秒" in text
    assert "最多等 60 秒" not in text
    assert "余额用完了（HTTP 429，insufficient_quota）" in text
