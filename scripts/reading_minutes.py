"""每本笔记本主线的阅读用时（分钟）：离线假模型执行一遍，按 tests/test_reading.py 的算法算，打印成表。

算法：说明 450 字/分钟；读者看到的每一行代码都算（见过的也算），12 行/分钟；每个代码格另加 9 秒；
输出 1,500 字/分钟，每张消息表 15 秒。`tests/test_notebooks.py` 用同一个算法检查每本不超过预算。

用法：`.venv/bin/python scripts/reading_minutes.py [编号 ...]`（在项目根目录运行，不写编号就是全部）。
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from conftest import executed, notebook_paths  # noqa: E402
from test_reading import BUDGETS, MAX_MINUTES, main_line, minutes, output_minutes  # noqa: E402


def main(wanted: list[str]) -> None:
    print("| 笔记本 | 预算 | 不含输出 | 含输出 |\n|---|---|---|---|")
    for path in notebook_paths():
        if wanted and path.name[:2] not in wanted:
            continue
        name = path.stem
        ids = {c["id"] for c in main_line(name)}
        cells = [c for c in executed(path).nb.cells if c.get("id") in ids]
        print(f"| {name} | {BUDGETS.get(name, MAX_MINUTES)} | {minutes(cells):.1f} "
              f"| {minutes(cells) + output_minutes(cells):.1f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
