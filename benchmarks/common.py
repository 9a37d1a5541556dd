"""各组基准共用的东西：一行结果 `Figure`、机器信息、终端表格与 Markdown 表格。"""

from __future__ import annotations

import importlib
import os
import platform
import statistics
import sys
import types
import unicodedata
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIB_DIR = ROOT / "harness_lib"

_OPS = {
    "<": lambda v, t: v < t,
    "<=": lambda v, t: v <= t,
    ">": lambda v, t: v > t,
    ">=": lambda v, t: v >= t,
}
_OP_TEXT = {"<": "<", "<=": "≤", ">": ">", ">=": "≥"}


@dataclass
class Figure:
    """表里的一行。`target` 是 `("<=", 1.0)` 这样的比较，或 None（只作对照，不设目标）。"""

    group: str
    name: str
    value: float | None
    unit: str
    target: tuple[str, float] | None = None
    note: str = ""
    digits: int = 2

    @property
    def met(self) -> bool | None:
        if self.target is None or self.value is None:
            return None
        op, limit = self.target
        return _OPS[op](self.value, limit)

    def value_text(self) -> str:
        if self.value is None:
            return "—"
        return f"{self.value:,.{self.digits}f}"

    def target_text(self) -> str:
        if self.target is None:
            return "—"
        op, limit = self.target
        return f"{_OP_TEXT[op]} {limit:g}"

    def met_text(self) -> str:
        return {True: "是", False: "否", None: "—"}[self.met]


def median(values) -> float:
    return statistics.median(values)


# ---------------------------------------------------------------------------
# 导入 harness_lib 的模块
# ---------------------------------------------------------------------------


def lib_module(name: str) -> types.ModuleType:
    """导入 `harness_lib.<name>`。包的根用到才加载（见 harness_lib/__init__.py），所以只会带进这个模块要的东西。"""
    return importlib.import_module(f"harness_lib.{name}")


# ---------------------------------------------------------------------------
# 机器信息
# ---------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gib() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    try:
        return f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 1024**3:.1f} GiB"
    except (ValueError, OSError, AttributeError):
        return "未知"


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return f"{line.split('=', 1)[1].strip(chr(34))}（{platform.system()} {platform.release()}）"
    except OSError:
        pass
    return platform.platform()


def _version(package: str) -> str:
    try:
        from importlib.metadata import version

        return version(package)
    except Exception:
        return "未安装"


def machine_info() -> list[tuple[str, str]]:
    """[(项目, 值)]：CPU 型号、核数、内存、Python、操作系统、openai 版本等。"""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    cores = f"{os.cpu_count()} 个逻辑核（本进程可用 {usable} 个）"
    return [
        ("CPU", _cpu_model()),
        ("核数", cores),
        ("内存", _ram_gib()),
        ("Python", f"{platform.python_version()}（{platform.python_implementation()}）"),
        ("操作系统", _os_name()),
        ("openai", _version("openai")),
        ("nbclient", _version("nbclient")),
        ("ipykernel", _version("ipykernel")),
        ("pandas", _version("pandas")),
        ("开始时的负载", load_text()),
        ("单核参考速度", f"纯 Python 循环 1,000 万次加法 {_reference_loop():.2f} s（越小越快；虚拟机上时快时慢，对照用）"),
    ]


def _reference_loop() -> float:
    """一段固定的纯 Python 计算，用来比较不同时间、不同机器上的运行快慢。"""
    import time

    start = time.perf_counter()
    total = 0
    for i in range(10_000_000):
        total += i
    return time.perf_counter() - start


def load_text() -> str:
    """1/5/15 分钟平均负载。别的程序同时在跑时，数字会明显变差，结果要对照它来看。"""
    try:
        one, five, fifteen = os.getloadavg()
    except (AttributeError, OSError):
        return "未知"
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}（1 / 5 / 15 分钟平均）"


# ---------------------------------------------------------------------------
# 表格
# ---------------------------------------------------------------------------

HEADERS = ("指标", "数值", "单位", "目标", "达标？")


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _pad(text: str, width: int, right: bool = False) -> str:
    space = " " * max(width - _width(text), 0)
    return space + text if right else text + space


def _rows(figures: list[Figure]) -> list[tuple[str, ...]]:
    return [(f.name, f.value_text(), f.unit, f.target_text(), f.met_text()) for f in figures]


def format_table(figures: list[Figure]) -> str:
    """终端里对齐的表格（按显示宽度对齐，汉字算两格），按组分段，附注放在表后。"""
    rows = _rows(figures)
    widths = [max(_width(r[i]) for r in [HEADERS, *rows]) for i in range(len(HEADERS))]
    right = (False, True, False, False, False)

    def line(cells):
        return "  ".join(_pad(c, w, r) for c, w, r in zip(cells, widths, right)).rstrip()

    out = [line(HEADERS), "  ".join("-" * w for w in widths)]
    group = None
    for fig, row in zip(figures, rows):
        if fig.group != group:
            if group is not None:
                out.append("")
            group = fig.group
            out.append(f"[{group}]")
        out.append(line(row))
    notes = [(f.name, f.note) for f in figures if f.note]
    if notes:
        out.append("")
        out.append("附注：")
        out.extend(f"- {name}：{note}" for name, note in notes)
    return "\n".join(out)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(figures: list[Figure]) -> str:
    lines = ["| 组 | " + " | ".join(HEADERS) + " | 附注 |",
             "| --- | --- | ---: | --- | --- | --- | --- |"]
    for f, row in zip(figures, _rows(figures)):
        name, value, unit, target, met = row
        met = {"是": "✅ 是", "否": "❌ 否"}.get(met, met)
        cells = [f.group, name, value, unit, target, met, f.note]
        lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def format_machine(info: list[tuple[str, str]]) -> str:
    width = max(_width(k) for k, _ in info)
    return "\n".join(f"{_pad(k, width)}  {v}" for k, v in info)


def markdown_machine(info: list[tuple[str, str]]) -> str:
    lines = ["| 项目 | 值 |", "| --- | --- |"]
    lines.extend(f"| {_md_cell(k)} | {_md_cell(v)} |" for k, v in info)
    return "\n".join(lines)
