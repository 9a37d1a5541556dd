"""第 1、2 项：执行器 `run_bash` 的内存、速度与进程清理。

- 巨量输出：`yes | head -c N`。每次测量都在一个全新的子 Python 进程里只做这一次运行，
  峰值内存取这个子进程自己的 `ru_maxrss`（不含 bash、yes 等孙进程）。
  旁边放着原文那种朴素写法（`naive_run_bash`，见下）和 `cat > /dev/null`
  读同一条数据流的用时，后者是速度的基线。
- 超时：命令派生出好几层子孙进程，timeout=1。从截止时刻起，轮询 /proc，
  直到带标记的进程一个都不剩（僵尸进程算已结束）。
- 后台任务占着管道：`sleep … & echo done`，看 `run_bash` 多久返回。

只在 Linux 上有意义（用到 /proc 和 `resource`），其他系统整组跳过。
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from .common import Figure, median
from harness_lib.safety.secrets import learner_environment

GROUP = "runner 执行器"
MB = 1_000_000


def naive_run_bash(command: str) -> str:
    """原文那种朴素写法（本项目自己写的对照版本）：整段输出读进内存，再截前 50,000 个字符。"""
    try:
        result = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "错误：超时（120 秒）"
    output = result.stdout + result.stderr
    return output[:50_000] if output else "(没有输出)"


# 子进程里执行的代码：只做一次运行，打印用时和自己的峰值内存（KiB）。
# 包的根用到才加载，导入执行器只带进 runner 和 secrets（都只用标准库）。
_CHILD = """
import json, os, resource, subprocess, sys, time
mode, command = os.environ["BENCH_MODE"], os.environ["BENCH_CMD"]
if mode == "run_bash":
    from harness_lib.safety.runner import run_bash
    def run(command):
        return run_bash(command, timeout=float(os.environ.get("BENCH_TIMEOUT", "120")))
elif mode == "naive":
    sys.path.insert(0, os.environ["BENCH_ROOT"])
    from benchmarks.runner import naive_run_bash as run
elif mode == "cat":
    def run(command):
        return subprocess.run(["bash", "-c", command + " | cat > /dev/null"]).returncode
else:  # baseline：导入执行器后什么都不做
    from harness_lib.safety.runner import run_bash
    def run(command):
        return None
start = time.monotonic()
result = run(command)
end = time.monotonic()
print(json.dumps({
    "start": start, "end": end,
    "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    "chars": len(result) if isinstance(result, str) else None,
    "text": (result[:80] + " … " + result[-120:]) if isinstance(result, str) else None,
    "marks": [m for m in ("中间省略", "超时", "done") if isinstance(result, str) and m in result],
}))
"""


def _spawn(mode: str, command: str, timeout: float = 120) -> subprocess.Popen:
    """启动一个子进程做一次运行。命令放在环境变量里，不出现在子进程的命令行上。"""
    # 和测试一样：子进程看不到开发者自己的模型设置（真实端点会让 run_bash 先要求审批）
    env = learner_environment()
    env.update({"HARNESS_MODE": "fake", "BENCH_MODE": mode, "BENCH_CMD": command,
                "BENCH_TIMEOUT": str(timeout), "BENCH_ROOT": str(Path(__file__).resolve().parents[1])})
    # 经过一个小小的 sh 再 fork 出 Python：Linux 在 exec 时会把旧地址空间的峰值
    # 带进新进程的 ru_maxrss，直接从本进程（可能已经很大）启动会把我们的峰值算进去。
    # `; exit $?` 让 sh 不能直接 exec，只能 fork。
    return subprocess.Popen(["/bin/sh", "-c", '"$0" -c "$1"; exit $?', sys.executable, _CHILD],
                            env=env, stdout=subprocess.PIPE, text=True)


def _report(proc: subprocess.Popen) -> dict:
    out, _ = proc.communicate()
    if proc.returncode:
        raise RuntimeError(f"基准子进程失败，退出码 {proc.returncode}")
    return json.loads(out.strip().splitlines()[-1])


def _child(mode: str, command: str) -> dict:
    return _report(_spawn(mode, command))


def _expect(report: dict, snippet: str, what: str) -> dict:
    """确认执行器真的跑了命令（而不是比如被审批拦下）：结果里应当有 snippet。不是计时断言。"""
    if snippet not in report.get("marks", ()):
        raise RuntimeError(f"{what}：run_bash 的结果里没有 {snippet!r}，实际是 {report.get('text')!r}")
    return report


def _size_text(n: int) -> str:
    return f"{n / 1e9:g} GB" if n >= 1e9 else f"{n / 1e6:g} MB"


def huge_output(quick: bool) -> list[Figure]:
    big = 100 * MB if quick else 1000 * MB
    small = big // 10
    reps = 1 if quick else 5
    cmd = "yes | head -c {n}"
    figs: list[Figure] = []

    base = _child("baseline", "true")
    base_mib = base["maxrss_kib"] / 1024

    # 大的那一档：cat 与 run_bash 轮流测，各取中位数（朴素版本太吃内存，只测一次）
    times = {"cat": [], "run_bash": []}
    peaks = {"run_bash": []}
    for _ in range(reps):
        times["cat"].append(_timed(_child("cat", cmd.format(n=big))))
        r = _expect(_child("run_bash", cmd.format(n=big)), "中间省略", "巨量输出")
        times["run_bash"].append(_timed(r))
        peaks["run_bash"].append(r["maxrss_kib"] / 1024)
    # 朴素版本要把整段输出放进内存好几份（实测约 3 倍），内存不够就不测大的那一档
    naive = _child("naive", cmd.format(n=big)) if _available_bytes() > 4 * big else None
    small_run = _expect(_child("run_bash", cmd.format(n=small)), "中间省略", "巨量输出")
    small_naive = _child("naive", cmd.format(n=small))

    B, S = _size_text(big), _size_text(small)
    t_cat, t_run = median(times["cat"]), median(times["run_bash"])
    figs += [
        Figure(GROUP, f"run_bash 峰值内存（{B}）", max(peaks["run_bash"]), "MiB", ("<", 64),
               note=f"子进程 ru_maxrss，{reps} 次取最大；只导入执行器、不运行命令的子进程是 {base_mib:.1f} MiB"),
        Figure(GROUP, f"run_bash 峰值内存（{S}）", small_run["maxrss_kib"] / 1024, "MiB", ("<", 64),
               note="与上一行比较：输出大十倍，内存不变"),
        Figure(GROUP, f"朴素版本峰值内存（{B}）", naive and naive["maxrss_kib"] / 1024, "MiB",
               note="subprocess.run(capture_output=True, text=True) 后截 50,000 字符"
                    + ("" if naive else "；可用内存不足，跳过")),
        Figure(GROUP, f"朴素版本峰值内存（{S}）", small_naive["maxrss_kib"] / 1024, "MiB",
               note="随输出大小线性增长"),
        Figure(GROUP, f"cat > /dev/null 用时（{B}）", t_cat, "s",
               note=f"速度基线：bash -c '{cmd.format(n=big)} | cat > /dev/null'，{reps} 次中位数"),
        Figure(GROUP, f"run_bash 用时（{B}）", t_run, "s", note=f"{reps} 次中位数"),
        Figure(GROUP, f"朴素版本用时（{B}）", naive and _timed(naive), "s", note="一次"),
        Figure(GROUP, "run_bash 用时 / cat 用时", t_run / t_cat, "倍", ("<=", 2)),
        Figure(GROUP, "run_bash 吞吐量", big / t_run / MB, "MB/s", digits=0),
    ]
    return figs


def _available_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _timed(result: dict) -> float:
    return result["end"] - result["start"]


# ---------------------------------------------------------------------------
# 超时与后台任务：轮询 /proc
# ---------------------------------------------------------------------------


def _marked(token: str, exclude: int) -> set[int]:
    """命令行里含有 token 的进程。"""
    pids = set()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == exclude:
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if token.encode() in f.read():
                    pids.add(int(name))
        except OSError:
            continue
    return pids


def _alive(pid: int) -> bool:
    """进程还在运行（不存在或已成僵尸都算结束）。"""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] != b"Z"


def _watch(command: str, token: str, settle: float, timeout: float = 120):
    """在子进程里运行 run_bash(command)，同时轮询 /proc。

    先用 settle 秒找齐带标记的进程，再每毫秒检查一次它们是否还活着。
    返回 (子进程报告, 标记进程数, 最后一个标记进程结束的 monotonic 时刻或 None)。
    """
    proc = _spawn("run_bash", command, timeout)
    found: set[int] = set()
    until = time.monotonic() + settle
    while time.monotonic() < until:
        found |= _marked(token, proc.pid)
        time.sleep(0.005)
    gone_at = None
    alive = {p for p in found if _alive(p)}
    while alive and time.monotonic() < until + 30:  # 清理失败时别永远等下去
        time.sleep(0.001)
        alive = {p for p in alive if _alive(p)}
        if not alive:
            gone_at = time.monotonic()
    return _report(proc), len(found), gone_at


def _token() -> str:
    return f"100.{random.randrange(10**5, 10**6)}"


def timeouts(quick: bool) -> list[Figure]:
    reps = 1 if quick else 3
    timeout = 1.0
    tree_gone, returned, counts = [], [], []
    for _ in range(reps):
        t = _token()
        # 三层：shell → sleep、sleep、bash -c → sleep、sleep；它们的命令行里都带着同一个标记
        command = f"sleep {t} & sleep {t} & bash -c 'sleep {t} & sleep {t}; wait' & wait"
        report, count, gone_at = _watch(command, t, settle=timeout / 2, timeout=timeout)
        _expect(report, "超时", "超时")
        deadline = report["start"] + timeout
        counts.append(count)
        tree_gone.append(gone_at - deadline if gone_at is not None else float("inf"))
        returned.append(report["end"] - deadline)

    bg_return, bg_gone = [], []
    for _ in range(reps):
        t = _token()
        report, _, gone_at = _watch(f"sleep {t} & echo done", t, settle=0.2)
        _expect(report, "done", "后台任务")
        bg_return.append(report["end"] - report["start"])
        bg_gone.append(gone_at - report["start"] if gone_at is not None else float("inf"))

    return [
        Figure(GROUP, "超时：截止后到进程树全部结束", median(tree_gone), "s", ("<=", 0.5),
               note=f"timeout=1，树里 {min(counts)}–{max(counts)} 个带标记的进程（三层），"
                    f"/proc 每毫秒轮询，{reps} 次中位数", digits=3),
        Figure(GROUP, "超时：截止后到 run_bash 返回", median(returned), "s", digits=3),
        Figure(GROUP, "后台任务占着管道：run_bash 返回用时", median(bg_return), "s", ("<=", 2.5),
               note=f"sleep 100 & echo done；其中 0.5 s 是执行器有意等待的宽限期，{reps} 次中位数",
               digits=3),
        Figure(GROUP, "后台任务占着管道：到后台 sleep 结束", median(bg_gone), "s", digits=3),
    ]


def run(quick: bool) -> list[Figure]:
    if not os.path.isdir("/proc"):
        return [Figure(GROUP, "（跳过：需要 Linux 的 /proc 和 resource）", None, "")]
    return huge_output(quick) + timeouts(quick)
