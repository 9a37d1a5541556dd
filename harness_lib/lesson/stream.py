"""课程层 `stream`：笔记本里标了 `# harness_lib: save stream` 的格子，按笔记本和格子的顺序拼在一起。

每个名字由哪本笔记本定义：

- `agent_loop_stream`：08_streaming《08 流式输出：同一个循环，边收边看（原文第三节的延伸）》。

每段代码前的 `# %%` 注释写明它来自哪本笔记本的第几格（从 0 数起）。
本文件由 `make lesson`（`python scripts/export_lesson.py`）从这些标记格子生成，不要手改：
要改就改笔记本里的格子，再重新生成。
"""


# %% notebooks/08_streaming.ipynb 第 17 格
import time

from harness_lib.lesson.loop import HANDLERS, SYSTEM, TOOLS, execute_tool_call
from harness_lib.support.streaming import stream_turn
from harness_lib.support.approval import guard  # 按提出调用的客户端决定要不要先问人（10 细讲）
from harness_lib.support.step import MAX_TOKENS  # 每次回复的长度上限：512 个 token


def agent_loop_stream(messages, *, client, model, tools=TOOLS, handlers=HANDLERS, system=SYSTEM,
                      max_turns=10, max_tokens_total=None, max_seconds=None, max_tokens=MAX_TOKENS,
                      on_turn=None, on_delta=None):
    """和 agent_loop 相同的循环，只是每一轮用 stream_turn 边收边读回复；on_delta 看到接收中的半条消息。

    回复收齐、拼成完整的消息之后，才和原来一样连同工具消息一次性追加；流中途断了，
    stream_turn 抛出 `EndpointError("stream_cut", ...)`，messages 保持上一轮结束时的样子。
    停止条件（`max_turns`、`max_tokens_total`、`max_seconds`）和每次请求带的 `max_tokens` 都与 agent_loop 相同。
    """
    started, tokens = time.monotonic(), 0
    handlers = guard(handlers, client)  # 执行授权：不是离线假模型提出的调用，先经人批准
    for _ in range(max_turns):
        if max_seconds is not None and time.monotonic() - started > max_seconds:
            return f"[运行已超过 {max_seconds} 秒的时间预算，循环停止；messages 仍然完整，可以接着再跑]"
        prefix = [{"role": "system", "content": system}] if system else []
        response = stream_turn(client, model, [*prefix, *messages], tools, on_delta=on_delta,
                               max_tokens=max_tokens)
        tokens += response.usage.total_tokens if response.usage else 0
        message = response.choices[0].message
        turn = [message.model_dump(exclude_none=True)]  # 一轮攒齐了再追加
        for tool_call in message.tool_calls or []:
            turn.append({"role": "tool", "tool_call_id": tool_call.id,
                         "content": execute_tool_call(tool_call, handlers, tools)})
        messages.extend(turn)
        if on_turn is not None:
            on_turn(messages)
        if not message.tool_calls:
            return message.content or ""
        if max_tokens_total is not None and tokens > max_tokens_total:
            return f"[已用掉 {tokens} 个 token，超过预算 {max_tokens_total}，循环停止；messages 仍然完整，可以接着再跑]"
    return f"[已经跑满 {max_turns} 轮，循环强制停止；messages 仍然完整，可以接着再跑]"
