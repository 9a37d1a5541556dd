"""性能测量脚本本身能跑：`python -m benchmarks --quick --only loop,view` 打印出完整的表。

这里不比较快慢（快慢归 benchmarks/ 自己，机器忙时数字会摆动），只防止脚本跟不上代码的改动而坏掉。
"""

import subprocess
import sys

from conftest import ROOT


def test_quick_benchmarks_print_every_row():
    result = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--only", "loop,view"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    out = result.stdout
    for row in ("假模型：循环每轮用时（笔记本规模）", "假模型：循环每轮用时（20 轮）",
                "本地 HTTP：循环每轮用时", "update() 用时（1,000 条）"):
        assert row in out, f"表里缺少「{row}」"
    assert "审批" not in out, "测速度的循环不应当停下来问审批"
    assert "Traceback" not in out + result.stderr
