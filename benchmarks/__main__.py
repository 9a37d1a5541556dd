"""`python -m benchmarks`：运行基准，打印结果表；可选地写进 docs/benchmarks.md。

    python -m benchmarks                       # 全部五组，完整规模（约五分钟）
    python -m benchmarks --quick               # 小规模，冒烟用
    python -m benchmarks --only runner,loop    # 只跑某几组：runner、loop、view、series、grading
    python -m benchmarks --markdown docs/benchmarks.md   # 同时改写文档里的结果一节
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import os
import re
import sys
import time
from pathlib import Path

from .common import (Figure, format_machine, format_table, load_text, machine_info, markdown_machine,
                     markdown_table)

GROUPS = ("runner", "loop", "view", "series", "grading")
START = "<!-- benchmarks:results:start -->"
END = "<!-- benchmarks:results:end -->"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks",
                                     description="测量执行器、循环、消息表和整套笔记本的性能，打印一张表。")
    parser.add_argument("--quick", action="store_true", help="小规模运行（冒烟用，几十秒）")
    parser.add_argument("--only", default=",".join(GROUPS),
                        help=f"逗号分隔的组名，可选 {', '.join(GROUPS)}（默认全部）")
    parser.add_argument("--markdown", metavar="PATH", type=Path,
                        help="把结果写进这个 Markdown 文件：改写其中的结果一节，没有就追加到末尾")
    args = parser.parse_args(argv)
    chosen = [g.strip() for g in args.only.split(",") if g.strip()]
    unknown = [g for g in chosen if g not in GROUPS]
    if unknown or not chosen:
        parser.error(f"未知的组：{', '.join(unknown) or '（空）'}；可选 {', '.join(GROUPS)}")
    args.groups = [g for g in GROUPS if g in chosen]
    return args


def _load1() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except (AttributeError, OSError):
        return "?"


def _results_section(figures: list[Figure], info, args, seconds: float) -> str:
    when = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    options = " ".join(["--quick"] if args.quick else []) or "（无，完整规模）"
    return "\n".join([
        START,
        "## 结果",
        "",
        "这一节由 `python -m benchmarks --markdown docs/benchmarks.md` 自动生成，重跑会整节改写。",
        "",
        f"- 时间：{when}",
        f"- 选项：{options}；组：{', '.join(args.groups)}",
        f"- 整次运行用时：{seconds:.0f} s",
        "",
        "### 机器",
        "",
        markdown_machine(info),
        "",
        "### 数字",
        "",
        markdown_table(figures),
        END,
    ])


def write_markdown(path: Path, section: str) -> None:
    """改写 path 里 START 与 END 之间的结果一节；文件里没有这一节就追加到末尾。"""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text, count=1)
    else:
        text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + section
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.rstrip("\n") + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    info = machine_info()
    print("机器：")
    print(format_machine(info))
    print(f"\n规模：{'--quick（小规模）' if args.quick else '完整'}；组：{', '.join(args.groups)}\n",
          flush=True)

    started = time.perf_counter()
    figures: list[Figure] = []
    loads = []
    for group in args.groups:
        t0 = time.perf_counter()
        loads.append(f"{group} {_load1()}")
        print(f"正在测 {group}（开始时 1 分钟负载 {_load1()}）……", end="", flush=True)
        module = importlib.import_module(f"benchmarks.{group}")
        figures += module.run(args.quick)
        print(f" {time.perf_counter() - t0:.1f} s", flush=True)
    seconds = time.perf_counter() - started
    info.append(("各组开始时的 1 分钟负载", "，".join(loads)))
    info.append(("结束时的负载", load_text()))

    print(f"结束时的负载：{info[-1][1]}\n")
    print(format_table(figures))
    missed = [f.name for f in figures if f.met is False]
    print(f"\n共 {len(figures)} 项，用时 {seconds:.0f} s；"
          + (f"没有达标：{'、'.join(missed)}" if missed else "设了目标的都达标了。"))

    if args.markdown:
        write_markdown(args.markdown, _results_section(figures, info, args, seconds))
        print(f"结果已写入 {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
