"""第 4 项：消息表原地刷新一次要多久（10、100、1,000 条消息）。

`MessagesView.update()` 每次都重画整张表：先建消息表的 DataFrame（`table_frame`），从它画出 HTML
（`frame_html`）和纯文本（`frame_text`），再通过 IPython 的 `update_display` 发出去。这里在本进程里建一个
IPython shell，把它的显示发布器换成一个只做 JSON 编码的版本（内核把显示消息发给前端前
也要做这一步），然后照常调用 `show_messages(...)` 和 `view.update()`。
浏览器把 HTML 画出来的时间不在其中；为此另外报告每次刷新要发送的字节数。

消息是仿真的一段长对话：用户提问，助手一次提出一到两个工具调用，工具消息回应；
每四条工具输出里有一条是 30,000 字符的长输出（中英混排、多行）；
一半助手消息是 SDK 对象（`ChatCompletionMessage`），另一半是 dict，两种写法笔记本里都有。
"""

from __future__ import annotations

import json
import time

from .common import Figure, lib_module, median

GROUP = "view 消息表"
SIZES = (10, 100, 1000)


def fake_messages(n: int) -> list:
    """造 n 条消息：user → assistant(tool_calls) → tool… → assistant(文字) → user ……"""
    from openai.types.chat import ChatCompletionMessage

    long_line = "第 {i} 行：-rw-r--r-- 1 user staff 1024 Jan  1 00:00 some_file_{i}.py 中文说明\n"
    long_output = "".join(long_line.format(i=i) for i in range(600))[:30_000]
    messages: list = []
    calls_made = tools_made = 0
    while len(messages) < n:
        messages.append({"role": "user", "content": f"第 {len(messages)} 条：看看当前目录里有哪些 Python 文件，各有多少行？"})
        for _ in range(3):  # 每个问题三轮工具调用，然后一条文字回答
            k = 1 + calls_made % 2
            calls = []
            for _ in range(k):
                calls_made += 1
                calls.append({"id": f"call_{calls_made:04d}", "type": "function",
                              "function": {"name": "bash",
                                           "arguments": json.dumps({"command": f"wc -l *.py  # {calls_made}"})}})
            assistant = {"role": "assistant", "content": None, "tool_calls": calls}
            if calls_made % 2:
                assistant = ChatCompletionMessage.model_validate(assistant)
            messages.append(assistant)
            for call in calls:
                tools_made += 1
                content = long_output if tools_made % 4 == 0 else "  12 app.py\n   3 utils.py\n  15 total\n"
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
        messages.append({"role": "assistant", "content": "一共 2 个 Python 文件：app.py 12 行，utils.py 3 行。"})
    return messages[:n]


def _shell_with_json_publisher():
    """初始化一个 IPython shell；显示消息只做 JSON 编码（与内核发消息前相同），记下字节数。"""
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell

    class JsonPublisher(DisplayPublisher):
        last_bytes = 0

        def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kw):
            content = {"data": data, "metadata": metadata or {}, "transient": transient or {}}
            self.last_bytes = len(json.dumps(content, ensure_ascii=False).encode("utf-8"))

    shell = InteractiveShell.instance()
    shell.display_pub = JsonPublisher(shell=shell)
    return shell


def run(quick: bool) -> list[Figure]:
    view = lib_module("ui.view")
    shell = _shell_with_json_publisher()
    figs: list[Figure] = []
    for n in SIZES:
        messages = fake_messages(n)
        table = view.show_messages(messages)  # 先显示一次，之后都是原地刷新
        reps = (3 if quick else 10) if n >= 1000 else (10 if quick else 30)
        table.update()  # 预热
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            table.update()
            times.append(time.perf_counter() - start)
        sent = shell.display_pub.last_bytes
        # 分开看：DataFrame、从它画的 HTML 和纯文本各占多少（update 三样都要做，DataFrame 只建一次）
        frame = view.table_frame(messages)
        t_frame = _median_time(lambda: view.table_frame(messages), reps)
        t_html = _median_time(lambda: view.frame_html(frame), reps)
        t_text = _median_time(lambda: view.frame_text(frame), reps)
        figs.append(Figure(
            GROUP, f"update() 用时（{n:,} 条）", median(times) * 1000, "ms",
            ("<=", 100) if n == 1000 else None,
            note=f"{reps} 次中位数；其中 DataFrame {t_frame * 1000:.1f} ms、HTML {t_html * 1000:.1f} ms、"
                 f"纯文本 {t_text * 1000:.1f} ms；每次发送 {sent / 1024:,.0f} KiB", digits=1))
    return figs


def _median_time(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return median(times)
