"""每本笔记本主线的阅读用时（分钟）：离线假模型执行一遍，按 tests/test_reading.py 的算法算，打印成表。

算法：说明 450 字/分钟；读者看到的每一行代码都算（见过的也算），12 行/分钟；每个代码格另加 9 秒；
输出 1,500 字/分钟，每张消息表 15 秒。`tests/test_notebooks.py` 用同一个算法检查每本不超过预算。

用法：`.venv/bin/python scripts/reading_minutes.py [--docs] [编号 ...]`（在项目根目录运行，不写编号就是全部）。
`--docs`：把 docs/teaching.md 阅读预算表里“现在”一列改成算出来的含输出的分钟数。
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from conftest import executed, notebook_paths  # noqa: E402
from test_reading import (BUDGETS, MAX_MINUTES, budget_section, executed_main_line, minutes,  # noqa: E402
                          output_minutes)


DOCS = ROOT / "docs" / "teaching.md"


def measured(wanted: list[str]) -> dict[str, tuple[float, float]]:
    """每本主线的（不含输出, 含输出）分钟数。"""
    found = {}
    for path in notebook_paths():
        if wanted and path.name[:2] not in wanted:
            continue
        cells = executed_main_line(executed(path).nb, path.stem)
        found[path.stem] = (minutes(cells), minutes(cells) + output_minutes(cells))
    return found


def write_docs(found: dict[str, tuple[float, float]]) -> None:
    """docs/teaching.md 的表里，每本那一行最后一格（“现在”）换成含输出的分钟数。"""
    def row(match: re.Match) -> str:
        name = match.group(1)
        return match.group(0) if name not in found else f"{match.group(2)}| {found[name][1]:.1f} 分钟 |"
    text = DOCS.read_text(encoding="utf-8")
    start, end = budget_section(text)  # 只改这一节的表，不碰前面的课时表
    table = re.sub(r"^(?=\| `(\w+)`)((?:\|[^|\n]*){3})\| [\d.]+ 分钟 \|$", row, text[start:end], flags=re.M)
    DOCS.write_text(text[:start] + table + text[end:], encoding="utf-8")


def main(args: list[str]) -> None:
    found = measured([a for a in args if a != "--docs"])
    print("| 笔记本 | 预算 | 不含输出 | 含输出 |\n|---|---|---|---|")
    for name, (alone, total) in found.items():
        print(f"| {name} | {BUDGETS.get(name, MAX_MINUTES)} | {alone:.1f} | {total:.1f} |")
    if "--docs" in args:
        write_docs(found)
        print(f"已写进 {DOCS.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
