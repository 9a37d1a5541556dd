"""阅读预算：笔记本要短，主线（00–06）能和原文对着读，选学的 07–10 也一样。

主线是一本笔记本里 `## 练习` 和 `## 选读：…` 之前的部分。估计的阅读时间按
每分钟 400 个字的说明文字、25 行代码算（边读边运行）。每本（00–10）的主线不超过 30 分钟；
00–06 合起来（练习也算）不超过 350 格、35,000 个字的说明文字。
同一件事只说一次：几句以前反复出现的话，整套笔记本里最多出现一次。
"""

import json
import re

import pytest

from conftest import NOTEBOOKS

MAIN_LINE = ["00_setup", "01_model_only_proposes", "02_each_turn", "03_one_request", "04_failure_paths",
             "05_limits", "06_five_tools"]
OPTIONAL = ["07_endpoint_faults", "08_streaming", "09_probe_and_replay", "10_approval"]
CHARS_PER_MINUTE = 400
CODE_LINES_PER_MINUTE = 25
MAX_MINUTES = 30
MAX_CELLS = 350
MAX_MARKDOWN = 35_000
_AFTER_MAIN = re.compile(r"^## (练习|选读)", re.M)


def _cells(name):
    return json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))["cells"]


def _source(cell):
    return "".join(cell["source"])


def main_line(name):
    """笔记本开头到第一个 `## 练习` 或 `## 选读` 标题之前的格子。"""
    cells = []
    for cell in _cells(name):
        if cell["cell_type"] == "markdown" and _AFTER_MAIN.search(_source(cell)):
            break
        cells.append(cell)
    return cells


def minutes(cells):
    markdown = sum(len(_source(c)) for c in cells if c["cell_type"] == "markdown")
    code = sum(len(_source(c).splitlines()) for c in cells if c["cell_type"] == "code")
    return markdown / CHARS_PER_MINUTE + code / CODE_LINES_PER_MINUTE


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
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        if path.name.startswith("10_"):
            continue
        text = "\n".join(_source(c) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]
                         if c["cell_type"] == "markdown")
        assert not re.search(r"答\s*`?y`?.{0,40}答\s*`?n`?", text, re.S), f"{path.name} 又讲了一遍怎样回答审批"
