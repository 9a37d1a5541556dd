"""参考循环：笔记本一步步搭出来的改进版智能体循环，供后面的笔记本和测试直接调用。

来源（每个定义都与笔记本里标了 `# harness_lib: save loop` 的那一格逐字一致，由 tests/test_sync.py 检查）：

- `SYSTEM`、`TOOLS`：03_one_request（原文第三节，第一、二步）；
- `ToolInputError`、`ToolDenied`、`parse_arguments`、`BLOCKED_SNIPPETS`、`bash_handler`、
  `HANDLERS`、`execute_tool_call`：04_failure_paths（原文第三节末尾的失败分支）；
- `agent_loop`、`check_transcript`：05_limits（原文第四节）。`agent_loop` 通过
  `harness_lib.errors.call_model` 调模型，端点出错时抛出简短的 `EndpointError`（07_endpoint_faults 细讲）。

这里只放笔记本讲过的东西；假模型、消息表、切换器、执行器各在自己的模块里。
"""

import json
import time

from harness_lib.support.runner import BASH_TOOL, run_bash
from harness_lib.support.errors import call_model

SYSTEM = "你在用户的电脑上帮忙查看文件。需要执行命令时调用 bash 工具；拿到结果后，用简短的中文回答。"

TOOLS = [BASH_TOOL]


class ToolInputError(Exception):
    """模型给的调用用不了：工具名不存在、JSON 坏了、缺字段、类型不对（调用解析失败）。"""


class ToolDenied(Exception):
    """参数没有问题，但这条命令不允许执行（执行授权失败）。"""


def parse_arguments(raw):
    """把 `function.arguments` 这个 JSON 字符串变成 dict；不合格就抛 ToolInputError。"""
    try:
        value = json.loads(raw)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ToolInputError(f"arguments 不是合法的 JSON：{exc}") from None
    if not isinstance(value, dict):
        raise ToolInputError(f"arguments 应当是 JSON 对象，实际是 {type(value).__name__}")
    return value


BLOCKED_SNIPPETS = ["rm -rf /", "sudo ", "shutdown", "reboot", "mkfs", "> /dev/sd"]


def bash_handler(args):
    """bash 工具的处理函数：先校验参数，再做教学级的片段检查，最后才启动进程。"""
    command = args.get("command")
    if command is None:
        raise ToolInputError("缺少必填参数 command")
    if not isinstance(command, str):
        raise ToolInputError(f"command 应当是字符串，实际是 {type(command).__name__}")
    for snippet in BLOCKED_SNIPPETS:
        if snippet in command:
            raise ToolDenied(f"命令里有被禁止的片段 {snippet!r}")
    return run_bash(command)


HANDLERS = {"bash": bash_handler}


def execute_tool_call(tool_call, handlers):
    """执行一个工具调用。无论成败都返回一段文字，交给 tool 消息；失败时写明属于哪一层。"""
    name = tool_call.function.name
    try:
        if name not in handlers:
            known = "、".join(handlers) or "（无）"
            raise ToolInputError(f"没有名为 {name!r} 的工具，可用的工具：{known}")
        args = parse_arguments(tool_call.function.arguments)
        return handlers[name](args)
    except ToolInputError as exc:
        return f"错误（调用解析失败）：{exc}"
    except ToolDenied as exc:
        return f"错误（执行授权失败）：{exc}"
    except Exception as exc:
        return f"错误（工具结果失败）：{type(exc).__name__}: {exc}"


def agent_loop(messages, *, client, model, tools=TOOLS, handlers=HANDLERS, system=SYSTEM,
               max_turns=10, max_tokens_total=None, max_seconds=None, on_turn=None):
    """改进后的循环：就地扩展 messages，返回最后一条回答的文字。

    每一轮先把 assistant 消息和它的全部 tool 消息攒在 `turn` 里，再一次性追加，
    所以模型调用失败（`EndpointError`）或被中断时，messages 保持上一轮结束时的样子。
    三种停法都只在两轮之间发生：跑满 `max_turns` 轮；本次运行用掉的 token 超过
    `max_tokens_total`；运行时间超过 `max_seconds` 秒（每次调模型之前检查）。
    """
    started = time.monotonic()
    tokens = 0
    for _ in range(max_turns):
        if max_seconds is not None and time.monotonic() - started > max_seconds:
            return f"[运行已超过 {max_seconds} 秒的时间预算，循环停止；messages 仍然完整，可以接着再跑]"
        prefix = [{"role": "system", "content": system}] if system else []
        response = call_model(client, model=model, messages=[*prefix, *messages], tools=tools)
        tokens += response.usage.total_tokens if response.usage else 0
        message = response.choices[0].message
        turn = [message.model_dump(exclude_none=True)]
        for tool_call in message.tool_calls or []:
            turn.append({
                "role": "tool",
                "tool_call_id": tool_call.id,
                "content": execute_tool_call(tool_call, handlers),
            })
        messages.extend(turn)
        if on_turn is not None:
            on_turn(messages)
        if not message.tool_calls:
            return message.content or ""
        if max_tokens_total is not None and tokens > max_tokens_total:
            return f"[已用掉 {tokens} 个 token，超过预算 {max_tokens_total}，循环停止；messages 仍然完整，可以接着再跑]"
    return f"[已经跑满 {max_turns} 轮，循环强制停止；messages 仍然完整，可以接着再跑]"


def check_transcript(messages):
    """用原文第四节的四个问题检查一份对话记录，返回 {问题: 是否成立}。"""
    msgs = [m if isinstance(m, dict) else m.model_dump(exclude_none=True) for m in messages]
    calls = {}
    answered = {}
    for i, m in enumerate(msgs):
        for tc in m.get("tool_calls") or []:
            calls[tc["id"]] = i
        if m.get("role") == "tool":
            answered[m.get("tool_call_id")] = i
    paired = bool(calls) and all(
        cid in answered and answered[cid] > pos for cid, pos in calls.items()
    ) and all(cid in calls for cid in answered)
    last = msgs[-1] if msgs else {}
    finished = (
        bool(answered)
        and last.get("role") == "assistant"
        and not last.get("tool_calls")
        and len(msgs) - 1 > max(answered.values())
    )
    return {
        "1. 模型返回了结构化的工具调用": bool(calls),
        "2. 程序真的执行了处理函数": any(msgs[i].get("content") for i in answered.values()),
        "3. 调用和结果成对回到了上下文": paired,
        "4. 模型看到结果后继续，直到不再请求工具": finished,
    }
