"""每本笔记本主线的阅读用时（分钟），离线假模型执行一遍后按两种算法各算一次，打印成表：

- 「现行」：tests/test_reading.py 的算法（说明 350 字/分钟，新代码 537 字符/分钟，输出 900 字/分钟，消息表 15 秒）；
- 「逐行」：读者实际花的时间，每一行代码都算（不论以前见没见过，每分钟 12 行），说明 450 字/分钟，
  输出 1,500 字/分钟，每张消息表 15 秒，每个代码格另加 9 秒（运行、找到它打印了什么）。

用法：`.venv/bin/python scripts/reading_minutes.py [编号 ...]`（在项目根目录运行，不写编号就是全部）。
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from conftest import executed, notebook_paths  # noqa: E402
from test_reading import (BUDGETS, MAX_MINUTES, code_lines, main_line, minutes, output_amounts,  # noqa: E402
                          output_minutes, prose, seen_before)

PROSE_PER_MINUTE, LINES_PER_MINUTE, OUTPUT_PER_MINUTE = 450, 12, 1500
TABLE_MINUTES, CELL_SECONDS = 0.25, 9


def per_line(cells) -> float:
    """「逐行」算法：说明、每一行代码、输出、消息表、每格的运行时间。"""
    markdown = sum(len(prose(c)) for c in cells if c["cell_type"] == "markdown")
    code = [c for c in cells if c["cell_type"] == "code"]
    lines = len(code_lines(code))  # 每一行都算，见过的也算
    chars, tables = output_amounts(code)
    return (markdown / PROSE_PER_MINUTE + lines / LINES_PER_MINUTE + chars / OUTPUT_PER_MINUTE
            + tables * TABLE_MINUTES + len(code) * CELL_SECONDS / 60)


def main(wanted: list[str]) -> None:
    print(f"| 笔记本 | 预算 | 现行 | 逐行 |\n|---|---|---|---|")
    for path in notebook_paths():
        if wanted and path.name[:2] not in wanted:
            continue
        name = path.stem
        ids = {c["id"] for c in main_line(name)}
        cells = [c for c in executed(path).nb.cells if c.get("id") in ids]
        now = minutes(cells, seen_before(name)) + output_minutes(cells)
        print(f"| {name} | {BUDGETS.get(name, MAX_MINUTES)} | {now:.1f} | {per_line(cells):.1f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
