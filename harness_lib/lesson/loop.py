"""课程层 `loop`：笔记本里标了 `# harness_lib: save loop` 的格子，按笔记本和格子的顺序拼在一起。

每个名字由哪本笔记本定义：

- `SYSTEM`、`TOOLS`：03_one_request《03 跟着一次请求读代码（原文第三节）》；
- `ToolInputError`、`ToolDenied`、`parse_arguments`、`BLOCKED_SNIPPETS`、`check_arguments`、`check_permission`、`bash_handler`、`HANDLERS`、`execute_tool_call`、`layer_of`：04_failure_paths《04 失败路径与四个层次（原文第三节末尾）》；
- `agent_loop`、`NOT_EXECUTED`、`check_transcript`：05_limits《05 最小循环能做什么、还不能做什么（原文第四节）》。

每段代码前的 `# %%` 注释写明它来自哪本笔记本的第几格（从 0 数起）。
本文件由 `make lesson`（`python scripts/export_lesson.py`）从这些标记格子生成，不要手改：
要改就改笔记本里的格子，再重新生成。
"""


# %% notebooks/03_one_request.ipynb 第 10 格
from harness_lib.support.runner import BASH_TOOL

SYSTEM = "你在用户的电脑上帮忙查看文件。需要执行命令时调用 bash 工具；拿到结果后，用简短的中文回答。"

TOOLS = [BASH_TOOL]


# %% notebooks/04_failure_paths.ipynb 第 9 格
import json


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


# %% notebooks/04_failure_paths.ipynb 第 11 格
from harness_lib.support.runner import run_bash

BLOCKED_SNIPPETS = ["rm -rf /", "sudo ", "shutdown", "reboot", "mkfs", "> /dev/sd"]


def check_arguments(args, schema):
    """按工具定义的 parameters 校验参数：必填的都在，声明为 string 的是字符串；不合格就抛 ToolInputError。"""
    for key in schema.get("required", []):
        if key not in args:
            raise ToolInputError(f"缺少必填参数 {key}")
    for key, spec in schema.get("properties", {}).items():
        if key in args and spec.get("type") == "string" and not isinstance(args[key], str):
            raise ToolInputError(f"{key} 应当是字符串，实际是 {type(args[key]).__name__}")


def check_permission(name, args):
    """执行授权：bash 的命令里有 BLOCKED_SNIPPETS 里的片段，就抛 ToolDenied（教学级的黑名单）。"""
    command = args.get("command")
    if name == "bash" and isinstance(command, str):
        for snippet in BLOCKED_SNIPPETS:
            if snippet in command:
                raise ToolDenied(f"命令里有被禁止的片段 {snippet!r}")


def bash_handler(args):
    """bash 工具的处理函数：参数已经校验过、命令已经放行，这里只管执行。"""
    return run_bash(args["command"])


HANDLERS = {"bash": bash_handler}


# %% notebooks/04_failure_paths.ipynb 第 15 格
def execute_tool_call(tool_call, handlers, tools=TOOLS):
    """执行一个工具调用。无论成败都返回一段文字，交给 tool 消息；失败时写明属于哪一层。

    顺序照原文第二节：查工具名、解析、按工具定义校验、授权，都在调用处理函数之前。
    """
    name = tool_call.function.name
    schemas = {t["function"]["name"]: t["function"].get("parameters") or {} for t in tools}
    try:
        if name not in handlers:
            known = "、".join(handlers) or "（无）"
            raise ToolInputError(f"没有名为 {name!r} 的工具，可用的工具：{known}")
        args = parse_arguments(tool_call.function.arguments)
        check_arguments(args, schemas.get(name, {}))
        check_permission(name, args)
        return handlers[name](args)  # 前面几步都过了，才轮到处理函数
    except ToolInputError as exc:
        return f"错误（调用解析失败）：{exc}"
    except ToolDenied as exc:
        return f"错误（执行授权失败）：{exc}"
    except Exception as exc:
        return f"错误（工具结果失败）：{type(exc).__name__}: {exc}"


# %% notebooks/04_failure_paths.ipynb 第 17 格
def layer_of(content):
    """按工具消息的开头判断层次；None 表示没有工具消息。"""
    if content is None:
        return "循环结束条件"
    if content.startswith("错误（"):  # execute_tool_call 写的：错误（层次名）：……
        return content[len("错误（"):content.index("）")]
    notes = ("[超时", "[退出码", "[被信号")  # run_bash 不抛异常，把超时和非零退出码写成附注
    return "工具结果失败" if any(note in content for note in notes) else "（成功）"


# %% notebooks/05_limits.ipynb 第 15 格
import time

from harness_lib.support.errors import call_model  # 调模型；端点出错时抛出简短的中文 EndpointError（07 细讲）
# （笔记本里在这里从 harness_lib.lesson.loop 导入 HANDLERS、SYSTEM、TOOLS、execute_tool_call；它们就定义在本模块上文）
from harness_lib.support.approval import guard  # 按提出调用的客户端决定要不要先问人（10 细讲）
from harness_lib.support.step import MAX_TOKENS  # 每次回复的长度上限（512 个 token）


def agent_loop(messages, *, client, model, tools=TOOLS, handlers=HANDLERS, system=SYSTEM,
               max_turns=10, max_tokens_total=None, max_seconds=None, max_tokens=MAX_TOKENS, on_turn=None):
    """改进后的循环：就地扩展 messages，返回最后一条回答的文字；三种上限都只在两轮之间停下。"""
    started, tokens = time.monotonic(), 0
    handlers = guard(handlers, client)  # 执行授权：不是离线假模型提出的调用，先经人批准
    for _ in range(max_turns):
        if max_seconds is not None and time.monotonic() - started > max_seconds:
            return f"[运行已超过 {max_seconds} 秒的时间预算，循环停止；messages 仍然完整，可以接着再跑]"
        prefix = [{"role": "system", "content": system}] if system else []
        response = call_model(client, model=model, messages=[*prefix, *messages], tools=tools,
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


# %% notebooks/05_limits.ipynb 第 22 格
NOT_EXECUTED = ("错误（调用解析失败）", "错误（执行授权失败）")  # 这两层停在处理函数动手之前（04）


def check_transcript(messages):
    """用原文第四节的四个问题检查一份对话记录，返回 {问题: 是否成立}。"""
    msgs = [m if isinstance(m, dict) else m.model_dump(exclude_none=True) for m in messages]
    calls = {tc["id"]: i for i, m in enumerate(msgs) for tc in m.get("tool_calls") or []}
    answered = {m.get("tool_call_id"): i for i, m in enumerate(msgs) if m.get("role") == "tool"}
    last = msgs[-1] if msgs else {}
    return {
        "1. 模型返回了结构化的工具调用": bool(calls),
        "2. 程序真的执行了处理函数": any(
            msgs[i].get("content") and not str(msgs[i]["content"]).startswith(NOT_EXECUTED)
            for i in answered.values()),
        "3. 调用和结果成对回到了上下文": bool(calls) and set(calls) == set(answered)
            and all(answered[cid] > pos for cid, pos in calls.items()),
        "4. 模型看到结果后继续，直到不再请求工具": bool(answered) and last.get("role") == "assistant"
            and not last.get("tool_calls") and len(msgs) - 1 > max(answered.values()),
    }
