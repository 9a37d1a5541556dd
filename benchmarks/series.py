"""第 5 项：用 nbclient 无头执行整套笔记本（假模型），看时间花在哪里。

和 tests/test_notebooks.py 一样：每本笔记本一个全新内核，工作目录是 notebooks/，
内核看不到 `HARNESS_*`、`OPENAI_*` 环境变量（另外显式设 `HARNESS_MODE=fake`）。
执行结果只留在内存里，不写回笔记本文件。

每本笔记本拆成三段：启动内核（直到内核就绪）、执行各格、关闭内核。
另外在一个全新内核里单独执行 `import harness_lib`，看导入本身要多久，
并用 `python -X importtime` 列出最重的几个依赖。完整规模下再完整执行一遍作参考：
两本笔记本同时跑（每核一个内核），并且立即关闭内核。
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from .common import ROOT, Figure
from harness_lib.safety.secrets import learner_environment
from harness_lib.series import notebooks

GROUP = "series 整套笔记本"
NOTEBOOKS = ROOT / "notebooks"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def notebook_paths() -> list[Path]:
    return notebooks(NOTEBOOKS)


def _kernel_env() -> dict:
    env = learner_environment()
    env["HARNESS_MODE"] = "fake"
    return env


async def _execute(nb, env: dict, shutdown: str = "graceful") -> dict:
    """执行一本笔记本（内存里的对象），返回各段用时（秒）。"""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from nbclient.util import ensure_async

    client = NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}}, allow_errors=False,
                            shutdown_kernel=shutdown)
    cells: list[tuple[int, float]] = []
    error = None
    t0 = time.perf_counter()
    # 内核自己的 stderr（启动警告之类）不混进基准输出
    async with client.async_setup_kernel(env=env, stderr=subprocess.DEVNULL):
        msg_id = await ensure_async(client.kc.kernel_info())
        await client.async_wait_for_reply(msg_id)
        t1 = time.perf_counter()
        for index, cell in enumerate(nb.cells):
            c0 = time.perf_counter()
            try:
                await client.async_execute_cell(cell, index,
                                                execution_count=client.code_cells_executed + 1)
            except CellExecutionError as exc:
                last = _ANSI.sub("", str(exc)).strip().splitlines()[-1]
                error = f"第 {index} 格出错：{last[:120]}"
                break
            if cell.cell_type == "code":
                cells.append((index, time.perf_counter() - c0))
        t2 = time.perf_counter()
    t3 = time.perf_counter()
    return {"kernel": t1 - t0, "cells": t2 - t1, "shutdown": t3 - t2, "total": t3 - t0,
            "per_cell": cells, "error": error}


def _run_notebook(path: Path, env: dict, shutdown: str = "graceful") -> dict:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    return asyncio.run(_execute(nb, env, shutdown))


def _parallel(paths: list[Path], env: dict, workers: int, shutdown: str) -> tuple[float, list[str]]:
    """同时跑 workers 本（每本仍是自己的全新内核），返回 (墙钟总用时, 出错的笔记本)。"""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    start = time.perf_counter()
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(_run_notebook, paths, [env] * len(paths), [shutdown] * len(paths)))
    seconds = time.perf_counter() - start
    return seconds, [p.name for p, r in zip(paths, results) if r["error"]]


def _import_in_fresh_kernel(env: dict) -> dict:
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import harness_lib")])
    return asyncio.run(_execute(nb, env, shutdown="immediate"))


def _heaviest_imports(top: int = 3) -> str:
    """`python -X importtime -c "import harness_lib, pandas"`：笔记本第一格导入的包里累计用时最多的几个。

    harness_lib 自己的模块往下展开，记到它们导入的第三方包头上；pandas 是笔记本另外导入的。
    """
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import harness_lib, pandas"],
                         capture_output=True, text=True, cwd=ROOT, env=_kernel_env())
    # 输出是后序的（子模块先于父模块），缩进每深一层多两个空格；先还原成树
    pending: dict[int, list] = {}
    for line in out.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( +)(\S+)", line)
        if not m:
            continue
        depth = (len(m.group(2)) - 1) // 2
        node = (m.group(3), int(m.group(1)), pending.pop(depth + 1, []))
        pending.setdefault(depth, []).append(node)
    totals: dict[str, int] = {}

    def walk(nodes):
        for name, cumulative, children in nodes:
            if name.split(".")[0] == "harness_lib":
                walk(children)
            else:
                package = name.split(".")[0]
                totals[package] = totals.get(package, 0) + cumulative

    walk([n for n in pending.get(0, []) if n[0] in ("harness_lib", "pandas")])
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:top]
    return "、".join(f"{name} {us / 1e6:.2f} s" for name, us in ranked)


def run(quick: bool) -> list[Figure]:
    try:
        import nbclient  # noqa: F401
    except ImportError:
        return [Figure(GROUP, "（跳过：没有安装 nbclient，先 pip install -e '.[dev]'）", None, "")]
    paths = notebook_paths()
    if not paths:
        return [Figure(GROUP, "（跳过：notebooks/ 里还没有笔记本）", None, "")]
    env = _kernel_env()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()

    results = {}
    for path in paths:
        results[path.name] = _run_notebook(path, env)
    fresh = _import_in_fresh_kernel(env)

    total = sum(r["total"] for r in results.values())
    failed = [name for name, r in results.items() if r["error"]]
    first_cells = sum(r["per_cell"][0][1] for r in results.values() if r["per_cell"])
    figs = [
        Figure(GROUP, f"整套 {len(paths)} 本笔记本总用时", total, "s",
               None if failed else ("<=", 20),
               note=(f"一本接一本执行，本机 {cores} 核"
                     + (f"；{len(failed)} 本出错（{'、'.join(failed)}），总用时不完整，不判断达标"
                        if failed else ""))),
        Figure(GROUP, "其中：启动内核（合计）", sum(r["kernel"] for r in results.values()), "s",
               note=f"平均每本 {sum(r['kernel'] for r in results.values()) / len(paths):.2f} s"),
        Figure(GROUP, "其中：执行各格（合计）", sum(r["cells"] for r in results.values()), "s"),
        Figure(GROUP, "其中：关闭内核（合计）", sum(r["shutdown"] for r in results.values()), "s"),
        Figure(GROUP, "各本第一个代码格（合计，含导入）", first_cells, "s",
               note="已计入“执行各格”"),
        Figure(GROUP, "全新内核里 import harness_lib", fresh["cells"], "s",
               note=("笔记本第一格导入的包里最重的（-X importtime，在内核之外测）："
                     + _heaviest_imports()) if not fresh["error"] else fresh["error"]),
        Figure(GROUP, "参考：立即关闭内核（immediate）", fresh["shutdown"], "s",
               note="同一个全新内核用 NotebookClient(shutdown_kernel='immediate') 关闭；"
                    "上面各本用的是默认的 graceful；tests/test_notebooks.py 用的是 immediate"),
    ]
    shutdown_sum = sum(r["shutdown"] for r in results.values())
    if not failed and not fresh["error"]:
        figs.append(Figure(
            GROUP, "估算：一本接一本 + 立即关闭内核", total - shutdown_sum + len(paths) * fresh["shutdown"],
            "s", note="由上面几行算出（总用时 − 关闭内核合计 + 本数 × 立即关闭用时），不是实测"))
    if not quick:
        # 同样的笔记本，两本同时跑，并且立即关闭内核：完整地再执行一遍
        seconds, bad = _parallel(paths, env, 2, "immediate")
        figs.append(Figure(
            GROUP, "参考：两本并行 + 立即关闭内核，总用时", seconds, "s", None if bad else ("<=", 20),
            note="ProcessPoolExecutor(2)，按文件名顺序分派，shutdown_kernel='immediate'；"
                 "墙钟时间，含启动工作进程" + (f"；出错：{'、'.join(bad)}" if bad else "")))
    for name, r in results.items():
        slowest = max(r["per_cell"], key=lambda c: c[1], default=None)
        detail = f"内核 {r['kernel']:.2f} s + 各格 {r['cells']:.2f} s + 关闭 {r['shutdown']:.2f} s"
        if slowest:
            detail += f"；最慢的是第 {slowest[0]} 格 {slowest[1]:.2f} s"
        if r["error"]:
            detail += f"；{r['error']}"
        figs.append(Figure(GROUP, f"单本：{name}", r["total"], "s", note=detail))
    return figs
