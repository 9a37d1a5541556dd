"""兼容性探针：用十个小请求检查一个端点在工具调用上的表现，结果是一张中文表。

辅助工具，不是课程内容；09_probe_and_replay（原文第三节 OpenAI-compatible 一段的延伸）讲怎么用、怎么读。

“兼容”只说明请求和响应的字段形状一样，不保证行为一样。`probe(client, model)` 对任何
`openai.OpenAI` 风格的客户端（真实端点、本地端点、假模型）逐项检查：

普通对话、提供工具后返回 `tool_calls`、`arguments` 是合法 JSON、接受工具结果、并行工具调用、
`tool_choice="required"` 与 `"none"`、流式输出里的工具调用增量、用量 `usage`、响应里的扩展字段。

每一项自己捕获异常（一项失败不影响其余各项），每次请求都限制 `max_tokens` 并设置超时。
"""

from __future__ import annotations

import json
from typing import Any, Callable

import openai
import pydantic

from .runner import BASH_TOOL
from .errors import EndpointError, explain_error
from .streaming import accumulate

__all__ = ["CHECKS", "IMPACT", "PARALLEL_PROMPT", "probe"]

LIST_PY_PROMPT = "列出当前目录中的 Python 文件"
PARALLEL_PROMPT = (
    "请同时做两件互不相关的事：查看当前工作目录（pwd），以及查看今天的日期（date）。"
    "两条命令互不依赖，请在同一条回复里发出两个 bash 工具调用，不要等第一个的结果。"
)
GREETING_PROMPT = "你好！请用一句话介绍你自己。"
PROBE_CALL_ID = "call_probe_001"

OK, FAIL, INFO = "✓", "✗", "ℹ"

# 每一项不通过时，对本系列的循环意味着什么
IMPACT = {
    "普通对话": "连最基本的请求都走不通：先检查 base_url、模型名和密钥。",
    "提供工具后返回 tool_calls": "模型只会用文字描述命令，循环第一轮就因为没有 tool_calls 而结束，什么都没执行。",
    "arguments 是合法 JSON": "每次调用都会变成“调用解析失败”的工具消息，模型要多花几轮重试。",
    "接受工具结果": "第二轮请求就会被拒绝（通常是 400）：tool 消息的格式或 tool_call_id 不被接受。",
    "并行工具调用": "循环照样能跑，只是两件独立的事要分两轮做，多一次往返。",
    'tool_choice="required"': "不能强制模型调用工具；本系列的循环不依赖它。",
    'tool_choice="none"': "不能临时禁止工具；想只要一段文字时，得改为不传 tools。",
    "流式输出里的工具调用增量": "stream=True 时拼不出工具调用，流式循环用不了；非流式循环不受影响。",
    "报告用量（usage）": "统计不了 token 用量和费用；循环本身不受影响。",
    "响应里的扩展字段": "不是错误。model_dump 会把这些字段带进 messages，下一次请求会原样发回，要确认服务接受。",
}


class _Context:
    """一次探测的共享状态：统一的请求参数，以及收集到的响应（供最后两项复用）。"""

    def __init__(self, client, model: str, timeout: float, max_tokens: int | None):
        self.client = client
        self.model = model
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.token_param = "max_tokens"
        self.responses: list[Any] = []  # 非流式的 ChatCompletion
        self.chunks: list[Any] = []  # 流式块
        self.tool_message: Any = None  # 第二项拿到的、带 tool_calls 的消息
        self.stream_usage: Any = None
        self.stream_checked = False

    def create(self, **kwargs: Any) -> Any:
        """发一次请求；端点不认 max_tokens 时改用 max_completion_tokens 再试一次。"""
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
            if not kwargs.get("stream"):
                self.responses.append(result)
            return result

    def chat(self, content: str, **kwargs: Any) -> Any:
        return self.create(messages=[{"role": "user", "content": content}], **kwargs)


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


# ---------------------------------------------------------------------------
# 十项检查：每项返回 (结果, 说明)，结果是 True / False / None（仅供参考）
# ---------------------------------------------------------------------------


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
        return False, (f"提供了 bash 工具，回复里却没有 tool_calls，只有文字：「{_clip(message.content)}」。"
                       f"{_length_note(finish)}")
    ctx.tool_message = message
    note = "" if finish == "tool_calls" else (
        f"（finish_reason 是 {finish!r} 而不是 'tool_calls'；本系列的循环只看 tool_calls，不受影响）")
    return True, f"{len(message.tool_calls)} 个调用：{_calls_text(message.tool_calls)}{note}"


def _arguments_json(ctx: _Context) -> tuple[bool | None, str]:
    if ctx.tool_message is None:
        return False, "上一项没有拿到工具调用，无从检查。"
    required = BASH_TOOL["function"]["parameters"].get("required", [])
    for call in ctx.tool_message.tool_calls:
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
    messages = [
        {"role": "user", "content": LIST_PY_PROMPT},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": PROBE_CALL_ID, "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": "ls *.py"})},
        }]},
        {"role": "tool", "tool_call_id": PROBE_CALL_ID, "content": "app.py\nutils.py"},
    ]
    message, finish = _first(ctx.create(messages=messages, tools=[BASH_TOOL]))
    if message.tool_calls:
        return True, f"接受了工具结果；模型又发出了调用：{_calls_text(message.tool_calls)}"
    if not message.content:
        return False, f"请求被接受，但回复是空的（finish_reason={finish}）。{_length_note(finish)}"
    return True, f"接受了工具结果，回答：「{_clip(message.content)}」"


def _parallel(ctx: _Context) -> tuple[bool | None, str]:
    message, finish = _first(ctx.chat(PARALLEL_PROMPT, tools=[BASH_TOOL]))
    calls = message.tool_calls or []
    if len(calls) >= 2:
        ids = [c.id for c in calls]
        if len(set(ids)) != len(ids):
            return False, f"一次给出 {len(calls)} 个调用，但 id 有重复：{ids}"
        return True, f"一条回复里有 {len(calls)} 个调用：{_calls_text(calls)}"
    if calls:
        return False, f"只给出 1 个调用：{_calls_text(calls)}。这个端点可能不支持或默认关闭了并行调用。"
    return False, f"没有给出工具调用：「{_clip(message.content)}」{_length_note(finish)}"


def _choice_required(ctx: _Context) -> tuple[bool | None, str]:
    message, finish = _first(ctx.chat(GREETING_PROMPT, tools=[BASH_TOOL], tool_choice="required"))
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
    stream = ctx.create(messages=[{"role": "user", "content": LIST_PY_PROMPT}], tools=[BASH_TOOL],
                        stream=True, stream_options={"include_usage": True})
    ctx.stream_checked = True
    chunks = []
    try:
        for chunk in stream:
            chunks.append(chunk)
    finally:
        close = getattr(stream, "close", None)
        if callable(close):
            close()
    ctx.chunks.extend(chunks)
    ctx.stream_usage = next((c.usage for c in chunks if getattr(c, "usage", None)), None)
    deltas = [d for c in chunks for ch in (c.choices or []) if ch.index == 0 and ch.delta is not None
              for d in (ch.delta.tool_calls or [])]
    result = accumulate(chunks)  # 没有 finish_reason 时抛出 EndpointError
    calls = result["message"].get("tool_calls") or []
    if not deltas or not calls:
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
    return True, (f"收到 {len(chunks)} 块，{len(deltas)} 块带工具调用增量（参数分 {pieces} 段）；"
                  f"拼回后：{'；'.join(c['function']['name'] + '(' + _clip(c['function']['arguments'], 60) + ')' for c in calls)}，"
                  f"finish_reason={result['finish_reason']}")


def _usage_text(usage: Any) -> str:
    return f"prompt {usage.prompt_tokens} / completion {usage.completion_tokens} / total {usage.total_tokens}"


def _usage(ctx: _Context) -> tuple[bool | None, str]:
    plain = next((r for r in ctx.responses if getattr(r, "usage", None)), None)
    if plain is None and not ctx.responses:
        ctx.chat(GREETING_PROMPT)
        plain = next((r for r in ctx.responses if getattr(r, "usage", None)), None)
    if not ctx.stream_checked:
        stream = ctx.chat(GREETING_PROMPT, stream=True, stream_options={"include_usage": True})
        chunks = list(stream)
        ctx.chunks.extend(chunks)
        ctx.stream_usage = next((c.usage for c in chunks if getattr(c, "usage", None)), None)
    parts = [f"非流式：{_usage_text(plain.usage) if plain else '没有'}",
             f"流式（include_usage）：{_usage_text(ctx.stream_usage) if ctx.stream_usage else '没有'}"]
    ok = plain is not None and ctx.stream_usage is not None
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
    ("arguments 是合法 JSON", _arguments_json),
    ("接受工具结果", _tool_result),
    ("并行工具调用", _parallel),
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


def probe(client, model, *, timeout=30.0, max_tokens=1024):
    """对一个端点跑一遍兼容性检查，返回 `pandas.DataFrame`（列：check、result、detail）。

    `result` 是 ✓（通过）、✗（不通过）或 ℹ（仅供参考，不算失败）；`detail` 是中文说明。
    每一项单独捕获异常：一项出错只记为 ✗，其余各项照常检查。每次请求带 `timeout`（秒）
    和 `max_tokens`（端点不认时自动改用 `max_completion_tokens`）。一共大约八次小请求。
    """
    import pandas as pd

    ctx = _Context(client, model, timeout, max_tokens)
    rows = []
    errors: dict[str, int] = {}  # 出错说明 -> 第一次出现在第几项
    for number, (name, check) in enumerate(CHECKS, start=1):
        try:
            ok, detail = check(ctx)
        except Exception as exc:  # 每一项自己兜底：出错也只影响这一行
            ok, text = False, _describe(exc, client)
            detail = f"出错（同第 {errors[text]} 项）" if text in errors else f"出错：{text}"
            errors.setdefault(text, number)
        mark = OK if ok else (INFO if ok is None else FAIL)
        rows.append({"check": name, "result": mark, "detail": detail})
    return pd.DataFrame(rows, columns=["check", "result", "detail"])
