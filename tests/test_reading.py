"""阅读预算：笔记本要短，主线（00–06）能和原文对着读，选学的 07–11 也一样。

主线是一本笔记本里 `## 练习` 和 `## 选读：…` 之前的部分。用时按一位细心的读者实际花的时间估计：
说明文字每分钟 450 个字（读者看的是画出来的样子：Mermaid 图只算框里和箭头上的字，表格不算竖线和分隔行）；
读者看到的每一行代码都算，每分钟 12 行（以前见过的同一行也算：它又占了一行，读者又要扫一眼）；
每个代码格另加 9 秒（运行它、找到它打印了什么）；输出每分钟 1,500 个字（打印的文字和文字表格），每张消息表 15 秒。
输出要执行以后才有，所以含输出的那一项在 test_notebooks.py 里，和执行共用一次；这里只查不含输出的部分。
每本（00–11）的主线不超过 30 分钟；每本还有含输出的预算（`BUDGETS`，写在 docs/teaching.md 里；
`scripts/reading_minutes.py` 打印每本的分钟数）；00–06 合起来（练习也算）不超过 350 格、35,000 个字的说明文字。
同一件事只说一次：几句以前反复出现的话，整套笔记本里最多出现一次。
"""

import json
import re

import pytest

from conftest import NOTEBOOKS, notebook_paths

MAIN_LINE = ["00_setup", "01_model_only_proposes", "02_each_turn", "03_one_request", "04_failure_paths",
             "05_limits", "06_five_tools"]
OPTIONAL = ["07_endpoint_faults", "08_streaming", "09_probe_and_replay", "10_approval", "11_two_more_apis"]
CHARS_PER_MINUTE = 450
LINES_PER_MINUTE = 12  # 每一行代码，见过的也算
CELL_SECONDS = 9  # 每个代码格：运行它、找到它打印了什么
OUTPUT_CHARS_PER_MINUTE = 1500
TABLE_MINUTES = 0.25  # 一张消息表
# 主线的预算（分钟，细心的读者，含输出）：原文对应部分的约 3 倍
# 07–11 是选学，没有对应的原文篇幅：按“细心的读者 30 分钟”给，含输出也算进去
BUDGETS = {"00_setup": 10, "01_model_only_proposes": 8, "02_each_turn": 10, "03_one_request": 25,
           "04_failure_paths": 18, "05_limits": 15, "06_five_tools": 20,
           **{name: 30 for name in OPTIONAL}}
MAX_MINUTES = 30
MAX_CELLS = 350
MAX_MARKDOWN = 35_000
_AFTER_MAIN = re.compile(r"^## (练习|选读)", re.M)


def _cells(name):
    return json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))["cells"]


def _source(cell):
    return "".join(cell["source"])


_MERMAID = re.compile(r"```mermaid\n(.*?)```", re.S)
_TABLE_RULE = re.compile(r"^\|[-:| ]+\|$\n?", re.M)


def prose(cell):
    """一格说明文字里读者要读的字：Mermaid 图换成图上的字（引号里的标签），表格去掉分隔行和竖线。"""
    text = _MERMAID.sub(lambda m: " ".join(re.findall(r'"([^"]*)"', m.group(1))), _source(cell))
    return _TABLE_RULE.sub("", text).replace(" | ", " ")


def main_line(name):
    """笔记本开头到第一个 `## 练习` 或 `## 选读` 标题之前的格子。"""
    cells = []
    for cell in _cells(name):
        if cell["cell_type"] == "markdown" and _AFTER_MAIN.search(_source(cell)):
            break
        cells.append(cell)
    return cells


def executed_main_line(nb, name):
    """执行过的笔记本 `nb` 里，主线的那些格子（带着输出）。"""
    ids = {c["id"] for c in main_line(name)}
    return [c for c in nb.cells if c.get("id") in ids]


def budget_section(text):
    """docs/teaching.md 里“主线的阅读预算”那一节的 (开头, 结尾)：表里“现在”一列写的就是这里算出的分钟数。"""
    start = text.index("### 主线的阅读预算")
    return start, text.index("\n## ", start)


def code_lines(cells):
    return [line.strip() for c in cells if c["cell_type"] == "code" for line in _source(c).splitlines() if line.strip()]


def minutes(cells):
    """说明文字、每一行代码和每个代码格的用时（不含输出）。"""
    markdown = sum(len(prose(c)) for c in cells if c["cell_type"] == "markdown")
    code = [c for c in cells if c["cell_type"] == "code"]
    return (markdown / CHARS_PER_MINUTE + len(code_lines(code)) / LINES_PER_MINUTE
            + len(code) * CELL_SECONDS / 60)


def output_minutes(cells):
    """执行过的格子的输出用时：打印的文字和文字表格按字数，消息表按张数。"""
    chars, tables = output_amounts(cells)
    return chars / OUTPUT_CHARS_PER_MINUTE + tables * TABLE_MINUTES


def output_amounts(cells):
    """执行过的格子的输出有多少：(打印的文字和文字表格的字数, 消息表的张数)。"""
    chars = tables = 0
    for cell in cells:
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            data = out.get("data", {})
            if out.get("output_type") == "stream":
                chars += len("".join(out.get("text", "")))
            elif "messages-view" in "".join(data.get("text/html", "")):
                tables += 1
            elif "application/vnd.jupyter.widget-view+json" not in data:
                chars += len("".join(data.get("text/plain", "")))
    return chars, tables


@pytest.mark.parametrize("name", MAIN_LINE + OPTIONAL)
def test_main_line_fits_the_reading_budget(name):
    cells = main_line(name)
    assert cells and len(cells) < len(_cells(name)), f"{name}：找不到 ## 练习"
    assert minutes(cells) <= MAX_MINUTES, f"{name} 的主线估计要读 {minutes(cells):.0f} 分钟，超过 {MAX_MINUTES} 分钟"


def test_the_main_line_series_is_short():
    cells = [c for name in MAIN_LINE for c in _cells(name)]
    markdown = sum(len(_source(c)) for c in cells if c["cell_type"] == "markdown")
    assert len(cells) <= MAX_CELLS, f"00–06 一共 {len(cells)} 格，超过 {MAX_CELLS}"
    assert markdown <= MAX_MARKDOWN, f"00–06 的说明文字一共 {markdown} 字，超过 {MAX_MARKDOWN}"


@pytest.mark.parametrize("name", MAIN_LINE + OPTIONAL)
def test_the_scripted_mode_rule_is_stated_once(name):
    """【脚本示范】是什么意思，每本最多在一格说明文字里讲一次。"""
    rule = [i for i, c in enumerate(_cells(name))
            if c["cell_type"] == "markdown" and "脚本模式" in _source(c) and "【脚本示范】" in _source(c)]
    assert len(rule) <= 1, f"{name}：第 {rule} 格都在讲脚本模式"


def test_no_second_loop_in_02():
    """循环只在 03 搭一次：02 一格一格走六个阶段，不另写一个循环函数。"""
    source = "\n".join(_source(c) for c in _cells("02_each_turn") if c["cell_type"] == "code")
    assert not re.search(r"^def \w*loop\w*\(", source, re.M)


def test_approval_answers_are_explained_only_in_10():
    """y / n / a 怎样回答审批，只在 10 里讲。"""
    for path in notebook_paths():
        if path.name.startswith("10_"):
            continue
        text = "\n".join(_source(c) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]
                         if c["cell_type"] == "markdown")
        assert not re.search(r"答\s*`?y`?.{0,40}答\s*`?n`?", text, re.S), f"{path.name} 又讲了一遍怎样回答审批"


def test_a_diagram_counts_its_labels_not_its_syntax():
    cell = {"cell_type": "markdown", "source": ['看图：\n', '```mermaid\n', 'flowchart TD\n',
                                               '    A["助手消息"] -->|"没有 tool_calls"| B["结束"]\n', '```\n']}
    assert prose(cell) == "看图：\n助手消息 没有 tool_calls 结束\n"
    table = {"cell_type": "markdown", "source": ["| 问题 | 教学版 |\n", "|---|:---:|\n", "| 谁批准 | `guard` |\n"]}
    assert prose(table) == "| 问题 教学版 |\n| 谁批准 `guard` |\n"


def test_the_measure_charges_every_line_cell_output_and_table():
    """每行代码都算（见过的也算）、每格另加 9 秒、输出和消息表照算。"""
    code = {"cell_type": "code", "source": "a = 1\n\nb = 2\n", "outputs": [
        {"output_type": "stream", "text": "x" * 1500},
        {"output_type": "display_data", "data": {"text/html": '<div class="messages-view"></div>'}}]}
    text = {"cell_type": "markdown", "source": "字" * 450}
    one = 1 + 2 / 12 + 9 / 60
    assert abs(minutes([text, code]) - one) < 1e-9
    assert abs(minutes([text, code, code]) - (one + 2 / 12 + 9 / 60)) < 1e-9, "见过的行照样算"
    assert abs(output_minutes([text, code]) - (1 + 0.25)) < 1e-9
