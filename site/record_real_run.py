"""给网站录一次真实模型的运行：09 第三节录制的那一格，换成真实端点跑一遍，录像存进 `site/recordings/`。

`make site` 发现 `site/recordings/09_run.jsonl` 时，把录像里的对话和假模型那一遍并排放在 09 的网页上。
模型按环境变量选（和无头运行笔记本一样，见 README）；审批用默认做法：没人回答，只放行只读白名单里的命令。

    HARNESS_MODE=real OPENAI_BASE_URL=https://dashscope.aliyuncs.com/compatible-mode/v1 \\
    HARNESS_MODEL=qwen-plus OPENAI_API_KEY=sk-... \\
    .venv/bin/python site/record_real_run.py --server "阿里云百炼（DashScope 兼容模式）"

录像不含请求头和密钥（`Recorder` 写文件前把密钥换成占位文字）；提交之前读一遍，特别是 `tool_calls` 里的命令。
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import date
from pathlib import Path

from harness_lib import Recorder, agent_loop, client_from_env, demo_workspace

OUT = Path(__file__).resolve().parent / "recordings" / "09_run.jsonl"
QUESTION = "列出当前目录中的 Python 文件"  # 09 录制那一格问的问题


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True, help="录像是在什么服务上录的，写在网页上，例如“阿里云百炼”")
    parser.add_argument("--notes", default="", help="网页上录像说明的最后一句（可选）")
    args = parser.parse_args(argv)
    if (os.environ.get("HARNESS_MODE") or "fake").strip().lower() != "real":
        raise SystemExit("请设置 HARNESS_MODE=real、OPENAI_BASE_URL、HARNESS_MODEL（需要的话还有 OPENAI_API_KEY）")
    client, model = client_from_env()
    os.chdir(demo_workspace())  # 和 09 一样的演示文件夹：app.py、utils.py
    recorder = Recorder(client)
    messages = [{"role": "user", "content": QUESTION}]
    answer = agent_loop(messages, client=recorder, model=model)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    recorder.save(OUT)
    meta = {"model": model, "server": args.server, "recorded": date.today().isoformat(), "notes": args.notes}
    OUT.with_suffix(".json").write_text(json.dumps(meta, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"录像：{OUT}（{len(recorder.lines())} 次调用）；循环的回答：{answer!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
