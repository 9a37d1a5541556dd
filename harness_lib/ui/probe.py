"""兼容性探针：用十来个小请求检查一个端点在工具调用上的表现，结果是一张中文表。

辅助工具，不是课程内容；09_probe_and_replay（原文第三节 OpenAI-compatible 一段的延伸）讲怎么用、怎么读。

“兼容”只说明请求和响应的字段形状一样，不保证行为一样。`probe(client, model)` 对任何
`openai.OpenAI` 风格的客户端（真实端点、本地端点、假模型）逐项检查，发的请求和循环发的一样：
工具结果那一项追加的是真实回复的 `model_dump(exclude_none=True)`（扩展字段照样带着），不是手写的字典。

检查：普通对话；提供工具后返回 `tool_calls`（不写 `tool_choice`，以及写明 `"auto"`）；`arguments` 是合法 JSON；
接受工具结果；没有 `content` 的助手消息；`reasoning_content` 的往返；并行工具调用，流式和非流式给的是否同一组；
`tool_choice="required"` 与 `"none"`；流式输出里的工具调用增量；用量在哪里；响应里的扩展字段。

每一项自己捕获异常（一项失败不影响其余各项）。每次请求都限制 `max_tokens`、设置超时，
并且不让 SDK 自动重试（`max_retries=0`）：一个 `Retry-After` 不会让探针卡上几分钟。
`max_tokens` 默认 128：够写一个工具调用，又不让本机的小模型每项都写上一千个 token。
每个 ✗ 都在 `hint` 一列写着该怎么办，而且按顺序推理：

- 一项出错时，办法按错误本身给（超时说超时、连不上说连不上），不套用这一项检查的办法；
- 后面出同一个错的行记为“出错（同第 N 项）”，办法是“先解决第 N 项”，不再猜；
- 要用到前面结果的项（没拿到工具调用就无从检查的），办法也是“先解决第 N 项”。

表的最上面一句结论放在 `table.attrs["verdict"]`（`probe_verdict(table)` 算出同一句）：
循环在这里照原样能跑 / 做这些改动后能跑 / 跑不起来。
"""

from __future__ import annotations

import json
from typing import Any, Callable

import openai
import pandas as pd
import pydantic

from ..safety.runner import BASH_TOOL
from ..models.errors import EndpointError, classify, explain_error
from ..models.quirks import AS_OF, QUIRKS, STATUS_COLUMN
from ..models.streaming import accumulate

__all__ = ["quirk_table", "CHECKS", "ERROR_HINTS", "HINTS", "IMPACT", "PARALLEL_PROMPT", "VERDICTS", "probe", "probe_verdict"]

LIST_PY_PROMPT = "列出当前目录中的 Python 文件"
PARALLEL_PROMPT = (
    "请同时做两件互不相关的事：查看当前工作目录（pwd），以及查看今天的日期（date）。"
    "两条命令互不依赖，请在同一条回复里发出两个 bash 工具调用，不要等第一个的结果。"
)
GREETING_PROMPT = "你好！请用一句话介绍你自己。"
TOOL_OUTPUT = "app.py\nutils.py"

OK, FAIL, INFO = "✓", "✗", "ℹ"

# 每一项不通过时，对本系列的循环意味着什么
IMPACT = {
    "普通对话": "连最基本的请求都走不通：先检查 base_url、模型名和密钥。",
    "提供工具后返回 tool_calls": "模型只会用文字描述命令，循环第一轮就因为没有 tool_calls 而结束，什么都没执行。",
    '写明 tool_choice="auto"': "有的服务不写 tool_choice 就不看工具；写明了才调用。循环默认不写。",
    "arguments 是合法 JSON": "每次调用都会变成“调用解析失败”的工具消息，模型要多花几轮重试。",
    "接受工具结果": "第二轮请求就会被拒绝：循环追加的助手消息或 tool 消息，这个服务不接受。",
    "没有 content 的助手消息": "循环用 model_dump(exclude_none=True) 追加消息，content 是 None 时这个键就没了；这个服务会拒绝。",
    "reasoning_content 的往返": "思考模式的服务要求把 reasoning_content 传回去；丢了它，带工具调用的第二轮就 400。",
    "并行工具调用": "循环照样能跑，只是两件独立的事要分两轮做，多一次往返。",
    "并行调用：流式与非流式一致": "流式循环拼出的调用和非流式不一样：可能少了调用，或者参数拼坏了。",
    'tool_choice="required"': "不能强制模型调用工具；本系列的循环不依赖它。",
    'tool_choice="none"': "不能临时禁止工具；想只要一段文字时，得改为不传 tools。",
    "流式输出里的工具调用增量": "stream=True 时拼不出工具调用，流式循环用不了；非流式循环不受影响。",
    "报告用量（usage）": "统计不了 token 用量，max_tokens_total 预算不起作用；循环本身照常。",
    "响应里的扩展字段": "不是错误。model_dump 会把这些字段带进 messages，下一次请求会原样发回，要确认服务接受。",
}

# 每一项不通过时，怎么办
HINTS = {
    "普通对话": "核对 base_url（通常以 /v1 结尾）、模型名和密钥；detail 里有服务器原话。",
    # llama-server 自 llama.cpp PR #17524（2025-11）起默认开启 jinja 模板，新版本不必再加 --jinja
    # （见 quirks.QUIRKS["llamacpp_no_jinja"]，核对于 2026-12-01）；Ollama 要选支持工具的模型。
    "提供工具后返回 tool_calls": "换一个支持工具调用的模型（小模型常常只会把调用写成文字）；"
                               "Ollama 选标着 tools 的模型。",
    '写明 tool_choice="auto"': "这个服务不接受 tool_choice 参数：请求里别写它，循环默认就不写。",
    "arguments 是合法 JSON": "换更大的模型，或把工具参数设计得更简单；循环会把解析失败写回 tool 消息，让模型重试。",
    "接受工具结果": "读 detail 里的原话：常见是 tool 消息的格式或 tool_call_id 不被接受，或者缺了某个扩展字段。",
    "没有 content 的助手消息": '追加助手消息前补上 "content": ""（llama.cpp 一类的服务需要）。',
    "reasoning_content 的往返": "用 model_dump() 追加整条消息，别自己拼字典；流式时用 accumulate 拼回，它保留这个字段。",
    "并行工具调用": "不必处理：循环一轮执行一个调用也能完成任务，只是慢一点。",
    "并行调用：流式与非流式一致": "用 harness_lib 的 accumulate 拼流式块：同一个 index 换了 id 时它会开新调用（Ollama 就这样发）。",
    'tool_choice="required"': '不要传 tool_choice="required"；本系列的循环本来就不传。',
    'tool_choice="none"': "想只要文字时，干脆不传 tools。",
    "流式输出里的工具调用增量": "这个服务的流式工具调用不可用：改用非流式的 agent_loop。",
    "报告用量（usage）": "探针已经要了 include_usage。流式没有用量时，流式循环的 max_tokens_total 不起作用，改用 max_turns 和 max_seconds。",
    "响应里的扩展字段": "这一项本来只是提示；出错时先按 detail 里的说明修好前面的问题。",
}

# 一项出错时按错误本身给的办法（`classify(exc).kind` → 办法）。不在这里的类别（请求形状、400 一类）
# 说的是这一项请求本身的问题，才用 HINTS 里这一项的办法。
ERROR_HINTS = {
    "timeout": "超时：{timeout:g} 秒内没等到回答。本机模型常见的原因是还在加载或太慢：等它加载好再探，"
               "或调大 probe 的 timeout；远程服务检查代理和网络。",
    "connection": "连不上服务：确认它已经启动、base_url 的主机和端口写对；走代理时把本机地址加进 NO_PROXY。",
    "auth": "密钥不对：按 detail 里的说明换上正确的密钥，再重新探测；和这一项检查的内容无关。",
    "permission": "密钥没有这个模型的权限：到服务商控制台开通，或换一个模型，再重新探测。",
    "not_found": "模型名或 base_url 不对：用 client.models.list() 看看有哪些模型，核对 base_url（通常以 /v1 结尾）。",
    "balance": "余额不足：充值或换一个有余额的密钥，再重新探测；重试没用。",
    "rate_limit": "被限流：探针不自动重试。等一会儿再探，或降低别处的请求频率。",
    "server": "服务端出错（5xx），和这一项检查的内容无关：稍后再探；一直这样就看服务端的日志。",
    "bad_response": "回来的不是模型的回复：base_url 多半指向了网页、登录页或代理的提示页。",
    "no_choices": "服务回了空结果（choices 为空）：换个模型或稍后再探；反复出现就是这个服务的毛病。",
    "stream_cut": "流在中途断了（没有 finish_reason）：这是服务或网络把流式回复截断了，不是调用拼错了。"
                  "再探一次；反复出现就改用非流式的 agent_loop。",
    "content_filter": "内容审核没通过：探针的提示词很普通，多半是服务商的审核误判；换个服务或联系服务商。",
    "context_length": "上下文太长：探针的请求很短，多半是 max_tokens 设得比模型上限还大；调小 probe 的 max_tokens。",
}
_JINJA_HINT = ("这台 llama-server 没有开启 jinja 模板，不接受 tools：升级到 llama.cpp PR #17524（2025-11）以后的构建"
               "（默认开启），或者启动时加 --jinja；不带工具的对话不受影响。")
_SAME_ERROR = "先解决第 {n} 项：这一行出的是同一个错误，那一项解决了，这一项多半也就好了。"
_NEEDS = "先解决第 {n} 项（{name}）：这一项要用到它的结果，它没通过，这里无从判断。"

VERDICTS = {
    "as_is": "结论：本系列的循环在这里照原样能跑。",
    "changes": "结论：做这些改动后循环能跑：{changes}。",
    "cannot": "结论：本系列的循环在这里跑不起来：{reason}",
}
"""一句话结论的三种说法（`probe_verdict` 用它）。"""


class _Blocked(Exception):
    """这一项要用到前面某几项的结果，而它们都没通过：记下是哪几项，行里写“先解决第 N 项”。"""

    def __init__(self, after: tuple, detail: str, mark: bool | None = False):
        super().__init__(detail)
        self.after, self.detail, self.mark = after, detail, mark


class _Context:
    """一次探测的共享状态：统一的请求参数，以及收集到的响应（后面几项复用）。"""

    def __init__(self, client, model: str, timeout: float, max_tokens: int | None):
        self.client = client
        self.model = model
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.token_param = "max_tokens"
        self.responses: list[Any] = []  # 非流式的 ChatCompletion
        self.chunks: list[Any] = []  # 流式块
        self.tool_reply: Any = None  # 第二项拿到的、带 tool_calls 的回复消息
        self.turn: list[dict] | None = None  # 循环会追加的那一轮：助手消息（model_dump）和 tool 消息
        self.parallel: list[tuple[str, str]] | None = None  # 非流式并行调用：(函数名, arguments)
        self.stream_usage: str | None = None  # 流式用量在哪里："顶层" / "choices[0].usage" / None
        self.stream_usage_value: Any = None
        self.stream_checked = False
        self.stream_cut = False  # 某个流读完了却没有 finish_reason（被截断了）
        self.needs_auto = False  # 不写明 tool_choice="auto" 就不调用工具（llama-cpp-python 就这样）

    def tools(self) -> dict:
        """工具相关的请求参数：工具表，以及（这个服务需要时）写明的 tool_choice="auto"。"""
        return {"tools": [BASH_TOOL], **({"tool_choice": "auto"} if self.needs_auto else {})}

    def create(self, **kwargs: Any) -> Any:
        """发一次请求；端点不认 max_tokens 时改用 max_completion_tokens 再试一次。

        上一项的流被服务端中途关掉后，连接池里可能留着一条死连接：连接错误（不是超时）时立刻再发一次，不等待。
        """
        reconnected = False
        while True:
            request = {"model": self.model, "timeout": self.timeout, **kwargs}
            if self.max_tokens:
                request[self.token_param] = self.max_tokens
            try:
                result = self.client.chat.completions.create(**request)
            except openai.BadRequestError as exc:
                if self.token_param == "max_tokens" and self.max_tokens and "max_tokens" in str(exc):
                    self.token_param = "max_completion_tokens"
                    continue
                raise
            except openai.APIConnectionError as exc:
                if reconnected or isinstance(exc, openai.APITimeoutError):
                    raise
                reconnected = True
                continue
            if not kwargs.get("stream"):
                self.responses.append(result)
            return result

    def chat(self, content: str, **kwargs: Any) -> Any:
        return self.create(messages=[{"role": "user", "content": content}], **kwargs)

    def stream(self, **kwargs: Any) -> list[Any]:
        """发一次流式请求，把块全部读回来（无论成败都关掉流）。"""
        stream = self.create(stream=True, stream_options={"include_usage": True}, **kwargs)
        self.stream_checked = True
        chunks = []
        try:
            for chunk in stream:
                chunks.append(chunk)
        finally:
            close = getattr(stream, "close", None)
            if callable(close):
                close()
        self.chunks.extend(chunks)
        if chunks and not any(getattr(choice, "finish_reason", None)
                              for chunk in chunks for choice in (getattr(chunk, "choices", None) or [])):
            self.stream_cut = True
        self._note_usage(chunks)
        return chunks

    def _note_usage(self, chunks: list[Any]) -> None:
        for chunk in chunks:
            if getattr(chunk, "usage", None):
                self.stream_usage, self.stream_usage_value = "顶层的用量块", chunk.usage
                return
        for chunk in chunks:
            for choice in getattr(chunk, "choices", None) or []:
                usage = (choice.model_extra or {}).get("usage")
                if usage:
                    self.stream_usage, self.stream_usage_value = "choices[0].usage", usage
                    return


def _clip(text: Any, limit: int = 40) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[:limit] + "…"


def _first(response: Any) -> tuple[Any, Any]:
    if not getattr(response, "choices", None):
        raise EndpointError("no_choices", "响应里没有 choices：服务返回了空结果。")
    choice = response.choices[0]
    return choice.message, choice.finish_reason


def _length_note(finish: Any) -> str:
    if finish == "length":
        return "（finish_reason=length：回复被 max_tokens 截断，可以调大 probe 的 max_tokens 再试）"
    return ""


def _calls_text(calls: Any) -> str:
    return "；".join(f"{c.function.name}({_clip(c.function.arguments, 60)})" for c in calls)


def _pairs(calls: Any) -> list[tuple[str, str]]:
    """调用列表（SDK 对象或字典）→ [(函数名, 规整后的 arguments)]，用来比较两组调用是否相同。"""
    out = []
    for c in calls or []:
        function = c["function"] if isinstance(c, dict) else c.function.model_dump()
        raw = function.get("arguments") or ""
        try:
            raw = json.dumps(json.loads(raw), ensure_ascii=False, sort_keys=True)
        except ValueError:
            pass
        out.append((function.get("name") or "", raw))
    return out


def _loop_turn(message: Any) -> list[dict]:
    """循环会追加的那一轮：`model_dump(exclude_none=True)` 的助手消息，加上每个调用的 tool 消息。"""
    turn = [message.model_dump(exclude_none=True)]
    for call in message.tool_calls or []:
        turn.append({"role": "tool", "tool_call_id": call.id, "content": TOOL_OUTPUT})
    return turn


# ---------------------------------------------------------------------------
# 各项检查：每项返回 (结果, 说明)，结果是 True / False / None（仅供参考）；
# 个别情形多返回一个更贴切的办法，代替 HINTS 里的那一条
# ---------------------------------------------------------------------------


_TOOL_ROWS = ("提供工具后返回 tool_calls", '写明 tool_choice="auto"')
_STREAM_ROWS = ("并行调用：流式与非流式一致", "流式输出里的工具调用增量")


def _plain_chat(ctx: _Context) -> tuple[bool | None, str]:
    message, finish = _first(ctx.chat(GREETING_PROMPT))
    if message.tool_calls:
        return False, "没有提供工具，回复里却有 tool_calls。"
    if not isinstance(message.content, str) or not message.content.strip():
        return False, f"回复没有文字内容（finish_reason={finish}）。{_length_note(finish)}"
    return True, f"回复 {len(message.content)} 个字：「{_clip(message.content)}」"


def _tools_offered(ctx: _Context) -> tuple[bool | None, str]:
    message, finish = _first(ctx.chat(LIST_PY_PROMPT, tools=[BASH_TOOL]))
    if not message.tool_calls:
        return False, (f"提供了 bash 工具（没写 tool_choice），回复里却没有 tool_calls，只有文字："
                       f"「{_clip(message.content)}」。{_length_note(finish)}")
    ctx.tool_reply = message
    note = "" if finish == "tool_calls" else (
        f"（finish_reason 是 {finish!r} 而不是 'tool_calls'；本系列的循环只看 tool_calls，不受影响）")
    return True, f"{len(message.tool_calls)} 个调用：{_calls_text(message.tool_calls)}{note}"


def _choice_auto(ctx: _Context) -> tuple[bool | None, str]:
    message, finish = _first(ctx.chat(LIST_PY_PROMPT, tools=[BASH_TOOL], tool_choice="auto"))
    if message.tool_calls:
        if ctx.tool_reply is None:
            ctx.tool_reply = message
            ctx.needs_auto = True
            return True, (f"写明 \"auto\" 才调用了工具：{_calls_text(message.tool_calls)}。"
                          "不写 tool_choice 时没有调用：这个服务要写明（后面几项都写明了再测）。")
        return True, f"{len(message.tool_calls)} 个调用：{_calls_text(message.tool_calls)}"
    return (False, f"写明了 \"auto\" 也没有 tool_calls：「{_clip(message.content)}」{_length_note(finish)}",
            HINTS["提供工具后返回 tool_calls"])


def _arguments_json(ctx: _Context) -> tuple[bool | None, str]:
    if ctx.tool_reply is None:
        raise _Blocked(_TOOL_ROWS, "前两项都没有拿到工具调用，无从检查。")
    required = BASH_TOOL["function"]["parameters"].get("required", [])
    for call in ctx.tool_reply.tool_calls:
        raw = call.function.arguments
        try:
            value = json.loads(raw)
        except (TypeError, ValueError) as exc:
            return False, f"{call.function.name} 的 arguments 不是合法 JSON：{exc}（原文：{_clip(raw)}）"
        if not isinstance(value, dict):
            return False, f"arguments 应当是 JSON 对象，实际是 {type(value).__name__}：{_clip(raw)}"
        missing = [k for k in required if k not in value]
        if call.function.name == "bash" and missing:
            return False, f"JSON 合法，但缺少必填字段 {missing}：{_clip(raw)}"
    return True, "每个调用的 arguments 都能用 json.loads 解析成对象，必填字段齐全。"


def _tool_result(ctx: _Context) -> tuple[bool | None, str]:
    if ctx.tool_reply is None:
        raise _Blocked(_TOOL_ROWS, "前面没有拿到工具调用，发不出循环的第二轮。")
    ctx.turn = _loop_turn(ctx.tool_reply)
    sent = ", ".join(sorted(ctx.turn[0]))
    messages = [{"role": "user", "content": LIST_PY_PROMPT}, *ctx.turn]
    try:
        message, finish = _first(ctx.create(messages=messages, **ctx.tools()))
    except openai.APIStatusError as exc:
        if "content" in ctx.turn[0] or classify(exc).kind != "request_shape":
            raise
        text = explain_error(exc, getattr(ctx.client, "api_key", None))
        return False, (f"循环追加的助手消息没有 content 键（model_dump(exclude_none=True) 去掉了值为 None 的 content），"
                       f"服务不接受：{text}"), HINTS["没有 content 的助手消息"]
    if message.tool_calls:
        return True, f"接受了循环的第二轮（助手消息的键：{sent}）；模型又发出了调用：{_calls_text(message.tool_calls)}"
    if not message.content:
        return False, f"请求被接受，但回复是空的（finish_reason={finish}）。{_length_note(finish)}"
    return True, f"接受了循环的第二轮（助手消息的键：{sent}），回答：「{_clip(message.content)}」"


def _no_content(ctx: _Context) -> tuple[bool | None, str]:
    if ctx.turn is None:
        raise _Blocked(_TOOL_ROWS, "前面没有拿到工具调用，无从检查。")
    assistant = {k: v for k, v in ctx.turn[0].items() if k != "content"}
    messages = [{"role": "user", "content": LIST_PY_PROMPT}, assistant, *ctx.turn[1:]]
    _first(ctx.create(messages=messages, **ctx.tools()))
    return True, "助手消息里没有 content 键，服务照样接受。"


def _reasoning(ctx: _Context) -> tuple[bool | None, str]:
    if ctx.turn is None:
        raise _Blocked(_TOOL_ROWS, "前面没有拿到工具调用，无从检查。", mark=None)
    if "reasoning_content" not in ctx.turn[0]:
        return None, "回复里没有 reasoning_content（不是思考模式），不涉及。"
    stripped = {k: v for k, v in ctx.turn[0].items() if k != "reasoning_content"}
    messages = [{"role": "user", "content": LIST_PY_PROMPT}, stripped, *ctx.turn[1:]]
    try:
        ctx.create(messages=messages, **ctx.tools())
    except openai.BadRequestError as exc:
        return True, ("回复带 reasoning_content；原样发回被接受，去掉它就被拒绝（HTTP 400）："
                      f"这个服务要求传回。原话：{_clip(explain_error(exc, getattr(ctx.client, 'api_key', None)), 80)}")
    return True, "回复带 reasoning_content；原样发回和去掉它，服务都接受。"


def _parallel(ctx: _Context) -> tuple[bool | None, str]:
    message, finish = _first(ctx.chat(PARALLEL_PROMPT, **ctx.tools()))
    calls = message.tool_calls or []
    ctx.parallel = _pairs(calls)
    if len(calls) >= 2:
        ids = [c.id for c in calls]
        if len(set(ids)) != len(ids):
            return False, f"一次给出 {len(calls)} 个调用，但 id 有重复：{ids}"
        return True, f"一条回复里有 {len(calls)} 个调用：{_calls_text(calls)}"
    if calls:
        return False, f"只给出 1 个调用：{_calls_text(calls)}。这个端点可能不支持或默认关闭了并行调用。"
    if ctx.tool_reply is None:  # 根本不调用工具的服务：问题在前面，不在并行
        raise _Blocked(_TOOL_ROWS, f"没有给出工具调用：「{_clip(message.content)}」，前面也没有拿到过。")
    return False, f"没有给出工具调用：「{_clip(message.content)}」{_length_note(finish)}"


_EMPTY_STREAM = ("带工具的流式请求，一块都没收到流就结束了：服务端在生成之前出错，却没有报告错误"
                 "（llama-cpp-python 遇到写明 tool_choice=\"auto\" 的流式请求就这样）。")


def _parallel_stream(ctx: _Context) -> tuple[bool | None, str]:
    chunks = ctx.stream(messages=[{"role": "user", "content": PARALLEL_PROMPT}], **ctx.tools())
    if not chunks:
        return False, _EMPTY_STREAM, HINTS["流式输出里的工具调用增量"]
    result = accumulate(chunks)
    streamed = _pairs(result["message"].get("tool_calls"))
    ids_at: dict[int, set] = {}
    for chunk in chunks:
        for choice in chunk.choices or []:
            for part in (choice.delta.tool_calls if choice.delta else None) or []:
                if part.id:
                    ids_at.setdefault(part.index, set()).add(part.id)
    reused = [i for i, ids in ids_at.items() if len(ids) > 1]
    note = (f"（流里同一个 index {reused[0]} 出现了 {len(ids_at[reused[0]])} 个不同的 id，像 Ollama 那样；"
            "accumulate 已按 id 分开）") if reused else ""
    if ctx.parallel is None:
        return None, f"非流式那一项没有结果，只看流式：{len(streamed)} 个调用{note}"
    if not streamed and not ctx.parallel:
        return None, "两种方式都没有给出调用，无从比较。"
    if streamed == ctx.parallel:
        return True, f"两种方式给的是同一组调用（{len(streamed)} 个）{note}"
    if len(streamed) == len(ctx.parallel):
        return None, (f"调用个数相同（{len(streamed)} 个），参数不同：模型每次的回答可以不一样，"
                      f"这不一定是问题{note}")
    return False, f"非流式 {len(ctx.parallel)} 个调用，流式拼回 {len(streamed)} 个{note}"


def _choice_required(ctx: _Context) -> tuple[bool | None, str]:
    try:
        message, finish = _first(ctx.chat(GREETING_PROMPT, tools=[BASH_TOOL], tool_choice="required"))
    except openai.InternalServerError as exc:
        if "--jinja" in str(exc) or exc.status_code != 500:
            # 不接受任何 tools 的旧 llama-server，或者 502/503/504 这类整台服务的故障：和 tool_choice 无关，照出错处理
            raise
        words = _clip((exc.body or {}).get("message") if isinstance(exc.body, dict) else "", 60) or "（空）"
        return False, (f"只因为写了 tool_choice=\"required\"，服务就回了 HTTP {exc.status_code}（原话：{words}）："
                       "它不支持这个取值，这不是临时故障（llama-cpp-python 就这样）。")
    if message.tool_calls:
        return True, f"打招呼也被要求调用工具，给出了：{_calls_text(message.tool_calls)}"
    return False, f"要求必须调用工具，回复里却只有文字：「{_clip(message.content)}」{_length_note(finish)}"


def _choice_none(ctx: _Context) -> tuple[bool | None, str]:
    message, finish = _first(ctx.chat(LIST_PY_PROMPT, tools=[BASH_TOOL], tool_choice="none"))
    if message.tool_calls:
        return False, f"禁止了工具调用，回复里还是有：{_calls_text(message.tool_calls)}"
    if not message.content:
        return False, f"没有工具调用，但也没有文字（finish_reason={finish}）。{_length_note(finish)}"
    return True, f"只回了文字：「{_clip(message.content)}」"


def _stream_deltas(ctx: _Context) -> tuple[bool | None, str]:
    chunks = ctx.stream(messages=[{"role": "user", "content": LIST_PY_PROMPT}], **ctx.tools())
    if not chunks:
        return False, _EMPTY_STREAM
    deltas = [d for c in chunks for ch in (c.choices or []) if ch.index == 0 and ch.delta is not None
              for d in (ch.delta.tool_calls or [])]
    result = accumulate(chunks)  # 没有 finish_reason 时抛出 EndpointError
    calls = result["message"].get("tool_calls") or []
    if not deltas or not calls:
        if ctx.tool_reply is None:  # 非流式也从没调用过工具：问题在前面，不在流式
            raise _Blocked(_TOOL_ROWS, f"收到 {len(chunks)} 块，没有工具调用；非流式的请求也没有拿到过。")
        return False, f"收到 {len(chunks)} 块，没有一块带 tool_calls 增量。"
    first = deltas[0]
    if first.index is None or not first.id or not (first.function and first.function.name):
        return False, (f"第一段工具调用增量缺少 index、id 或函数名："
                       f"index={first.index!r}，id={first.id!r}。")
    for call in calls:
        try:
            json.loads(call["function"]["arguments"])
        except ValueError:
            return False, f"按 index 拼回后，arguments 不是合法 JSON：{_clip(call['function']['arguments'])}"
    pieces = sum(1 for d in deltas if d.function and d.function.arguments)
    empty = sum(1 for c in chunks if not c.choices)
    return True, (f"收到 {len(chunks)} 块（其中 {empty} 块 choices 为空），{len(deltas)} 块带工具调用增量"
                  f"（参数分 {pieces} 段）；拼回后："
                  f"{'；'.join(c['function']['name'] + '(' + _clip(c['function']['arguments'], 60) + ')' for c in calls)}，"
                  f"finish_reason={result['finish_reason']}")


def _usage_text(usage: Any) -> str:
    if isinstance(usage, dict):
        return f"total {usage.get('total_tokens')}"
    return f"prompt {usage.prompt_tokens} / completion {usage.completion_tokens} / total {usage.total_tokens}"


def _usage(ctx: _Context) -> tuple[bool | None, str]:
    plain = next((r for r in ctx.responses if getattr(r, "usage", None)), None)
    if plain is None and not ctx.responses:
        ctx.chat(GREETING_PROMPT)
        plain = next((r for r in ctx.responses if getattr(r, "usage", None)), None)
    if ctx.stream_usage is None:  # 前面带工具的流可能什么都没收到：用一个不带工具的流再看一次
        ctx.stream(messages=[{"role": "user", "content": GREETING_PROMPT}])
    where = ctx.stream_usage
    if where is None and ctx.stream_cut:
        raise _Blocked(_STREAM_ROWS, "流式回复被截断了，看不到最后的用量块，无从判断流式报不报用量。")
    parts = [f"非流式：{_usage_text(plain.usage) if plain else '没有'}",
             f"流式（include_usage）：{_usage_text(ctx.stream_usage_value) + '，在' + where if where else '没有'}"]
    if where == "choices[0].usage":
        parts.append("不在标准的位置（月之暗面这样做）；accumulate 两处都认，预算照样生效")
    ok = plain is not None and where is not None
    return ok, "；".join(parts)


def _extra_keys(obj: Any, path: str, found: dict[str, None]) -> None:
    """把 SDK 对象里“不认识的字段”（pydantic 的 model_extra）记下来，逐层往下找。"""
    if obj is None:
        return
    if isinstance(obj, list):
        for item in obj:
            _extra_keys(item, path, found)
        return
    if not isinstance(obj, pydantic.BaseModel):
        return
    for key in obj.model_extra or {}:
        found.setdefault(f"{path}.{key}" if path else key, None)
    for name in type(obj).model_fields:
        value = getattr(obj, name, None)
        if isinstance(value, (pydantic.BaseModel, list)):
            _extra_keys(value, f"{path}.{name}" if path else name, found)


def _extras(ctx: _Context) -> tuple[bool | None, str]:
    if not ctx.responses and not ctx.chunks:
        ctx.chat(GREETING_PROMPT)
    found: dict[str, None] = {}
    for response in ctx.responses:
        _extra_keys(response, "", found)
    for chunk in ctx.chunks:
        _extra_keys(chunk, "chunk", found)
    if not found:
        return True, f"看了 {len(ctx.responses)} 个响应和 {len(ctx.chunks)} 个流式块，没有标准之外的字段。"
    return None, ("发现标准之外的字段：" + "、".join(found)
                  + "（仅供参考：SDK 把它们放在 model_extra 里，model_dump 会一起带上）")


CHECKS: list[tuple[str, Callable[[_Context], tuple[bool | None, str]]]] = [
    ("普通对话", _plain_chat),
    ("提供工具后返回 tool_calls", _tools_offered),
    ('写明 tool_choice="auto"', _choice_auto),
    ("arguments 是合法 JSON", _arguments_json),
    ("接受工具结果", _tool_result),
    ("没有 content 的助手消息", _no_content),
    ("reasoning_content 的往返", _reasoning),
    ("并行工具调用", _parallel),
    ("并行调用：流式与非流式一致", _parallel_stream),
    ('tool_choice="required"', _choice_required),
    ('tool_choice="none"', _choice_none),
    ("流式输出里的工具调用增量", _stream_deltas),
    ("报告用量（usage）", _usage),
    ("响应里的扩展字段", _extras),
]


def _describe(exc: BaseException, client: Any) -> str:
    if isinstance(exc, EndpointError):
        return exc.explanation
    return explain_error(exc, getattr(client, "api_key", None))


def _quiet(client: Any) -> Any:
    """同一个客户端，只是不自动重试：探针的每个请求只发一次。"""
    with_options = getattr(client, "with_options", None)
    return with_options(max_retries=0) if callable(with_options) else client


def _error_kind(exc: BaseException) -> str:
    return exc.kind if isinstance(exc, EndpointError) else classify(exc).kind


def _error_hint(exc: BaseException, text: str, name: str, timeout: float) -> str:
    """一项第一次出这个错时的办法：按错误本身说；只有请求本身被拒的，才用这一项检查自己的办法。

    `text` 是这一行已经写好的中文说明（`_describe` 的结果），服务器原话也在里面。
    """
    if "--jinja" in str(exc) or "--jinja" in text:
        return _JINJA_HINT
    kind = _error_kind(exc)
    if kind in ERROR_HINTS:
        return ERROR_HINTS[kind].format(timeout=timeout)
    return HINTS[name]


def probe(client, model, *, timeout=30.0, max_tokens=128):
    """对一个端点跑一遍兼容性检查，返回 `pandas.DataFrame`（列：check、result、detail、hint）。

    `result` 是 ✓（通过）、✗（不通过）或 ℹ（仅供参考，不算失败）；`detail` 是中文说明，
    `hint` 是不通过时该怎么办。每一项单独捕获异常：一项出错只记为 ✗，其余各项照常检查。
    办法按顺序推理：出错的行按错误本身给办法；同一个错误再出现、或要用到前面没通过的结果时，
    写“先解决第 N 项”。一句话结论在 `table.attrs["verdict"]`（见 `probe_verdict`）。
    每次请求带 `timeout`（秒）和 `max_tokens`（端点不认时自动改用 `max_completion_tokens`），
    SDK 不自动重试。一共十来个小请求。
    """
    ctx = _Context(_quiet(client), model, timeout, max_tokens)
    rows = []
    numbers = {name: number for number, (name, _) in enumerate(CHECKS, start=1)}
    errors: dict[str, int] = {}  # 出错说明 -> 第一次出现在第几项
    roots: dict[int, int] = {}  # 第几项 -> 它的问题出在第几项（自己出错或不通过，就是自己）
    for number, (name, check) in enumerate(CHECKS, start=1):
        hint = HINTS[name]
        roots[number] = number
        try:
            ok, detail, *special = check(ctx)  # 少数情形，检查自己给出更贴切的办法
            hint = special[0] if special else hint
        except _Blocked as blocked:  # 要用到的前几项都没通过：指回第一个没通过的
            ok, detail = blocked.mark, blocked.detail
            first = next((numbers[n] for n in blocked.after if rows[numbers[n] - 1]["result"] != OK),
                         numbers[blocked.after[0]])
            roots[number] = first = roots[first]  # 那一项自己也是被更前面的拖累的：一直指到根上
            hint = _NEEDS.format(n=first, name=CHECKS[first - 1][0])
        except Exception as exc:  # 每一项自己兜底：出错也只影响这一行
            ok, text = False, _describe(exc, client)
            if text in errors:
                detail = f"出错（同第 {errors[text]} 项）"
                hint = _SAME_ERROR.format(n=errors[text])
                roots[number] = errors[text]
            else:
                detail = f"出错：{text}"
                hint = _error_hint(exc, text, name, timeout)
                errors[text] = number
        mark = OK if ok else (INFO if ok is None else FAIL)
        rows.append({"check": name, "result": mark, "detail": detail, "hint": hint if mark != OK else ""})
    for row in rows:  # ℹ 不算失败，不写办法（“先解决第 N 项”除外：它说明这一项为什么没法判断）
        if row["result"] == INFO and not row["hint"].startswith("先解决"):
            row["hint"] = ""
    if ctx.needs_auto:  # 不写 tool_choice 时没有调用，写明了就有：办法是写明它
        rows[1]["hint"] = ('这个服务要写明 tool_choice="auto" 才调用工具。本项目的循环不写它，在这里模型不会调用工具：'
                           '要么在循环调模型的那一行加上 tool_choice="auto"，要么换一个服务或模型。')
    table = pd.DataFrame(rows, columns=["check", "result", "detail", "hint"])
    table.attrs["verdict"] = probe_verdict(table)
    return table


def probe_verdict(table) -> str:
    """从 `probe()` 的表算出一句话结论：照原样能跑 / 做这些改动后能跑 / 跑不起来。

    只看非流式循环（本系列的 agent_loop）要用到的几项：普通对话、工具调用、arguments、接受工具结果。
    流式那几项不通过时，结论后面加一句：流式循环要换成非流式。
    """
    results = dict(zip(table["check"], table["result"]))
    hints = dict(zip(table["check"], table["hint"]))
    details = dict(zip(table["check"], table["detail"]))
    number = {name: i for i, name in enumerate(table["check"], start=1)}

    def label(name: str) -> str:
        return f"第 {number[name]} 项（{name}）"

    def passed(name: str) -> bool:
        return results.get(name) == OK

    chat, offered, auto, args, accepted = (name for name, _ in CHECKS[:5])
    if not passed(chat):
        return VERDICTS["cannot"].format(reason=f"{label(chat)}没有通过，连最基本的请求都走不通；先按那一行的办法解决它。")
    if not passed(offered) and not passed(auto):
        if str(details.get(offered, "")).startswith("出错"):
            return VERDICTS["cannot"].format(reason=f"带工具的请求出错了，见{label(offered)}；"
                                                     "循环第一轮就会失败，先按那一行的办法解决它。")
        return VERDICTS["cannot"].format(reason=f"{label(offered)}和{label(auto)}都没有拿到工具调用，"
                                                 "循环第一轮就会停下；换一个会调用工具的模型或服务。")
    changes = []
    if not passed(offered):
        changes.append(f'调模型时写明 tool_choice="auto"（见第 {number[auto]} 项）')
    if not passed(accepted):
        if hints.get(accepted) == HINTS["没有 content 的助手消息"]:
            changes.append(f'追加助手消息前补上 "content": ""（见第 {number[accepted]} 项）')
        else:
            return VERDICTS["cannot"].format(reason=f"{label(accepted)}没有通过，循环的第二轮会被拒绝；"
                                                     "按那一行的办法处理。")
    if not passed(args):
        changes.append(f"换一个能写出合法 arguments 的模型，否则每轮都要重试（见第 {number[args]} 项）")
    verdict = VERDICTS["changes"].format(changes="；".join(changes)) if changes else VERDICTS["as_is"]
    stream_rows = [name for name in _STREAM_ROWS[1:] if name in results and results[name] == FAIL]
    if stream_rows:
        verdict += (f"另外，流式循环（08 的 agent_loop_stream）在这里用不了（见第 {number[stream_rows[0]]} 项），"
                    "用非流式的 agent_loop。")
    return verdict


def quirk_table():
    """所有怪脾气的一览表（`pandas.DataFrame`）：服务商、行为、版本范围、状态、修复于、为什么还要防、出处。

    状态一列的表头写着核对日期（`STATUS_COLUMN`），`table.attrs["as_of"]` 也是它。
    """
    rows = [{"怪脾气": q.name, "服务商": q.provider, "行为": q.behaviour, "版本范围": q.versions,
             STATUS_COLUMN: q.status, "修复于": q.fixed_in, "为什么还要防": q.why_keep, "出处": q.source}
            for q in QUIRKS.values()]
    table = pd.DataFrame(rows)
    table.attrs["as_of"] = AS_OF
    return table
