"""Anthropic 的 Messages API（`POST /v1/messages`）：同一个假模型大脑（`fake.FakeModel`）的第三种线路格式。

和 `responses_api` 一样只做翻译：请求里的 `system`、`messages`（内容块 `text`、`tool_use`、`tool_result`、
`thinking`）和 `tools`（`input_schema`）译成 Chat 的请求交给大脑，大脑的回答译回 `message` 对象
（`content` 块和 `stop_reason`），流式时切成 Anthropic 的事件。报错是 Anthropic 的形状
（`{"type": "error", "error": {"type", "message"}}`）和原话（出处见下）。

请求里写了 `thinking: {"type": "enabled", "budget_tokens": N}` 时，回答以一个带 `signature` 的 `thinking` 块开头。
签名是思考原文的校验：带工具调用的那轮助手消息传回来时丢了 thinking 块，或者改了签名、改了原文，就是 400。
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any, Callable

import httpx2

from .messages import text_of, token_count
from .script import default_thinking
from .wire import Rejected, json_response, pieces, sse_response

# Anthropic 的原话和出处（2026-12-06 读过的公开报告）：
#   tool_use 后面没有 tool_result："messages.N: `tool_use` ids were found without `tool_result` blocks immediately
#     after: toolu_…. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
#     （N 是提出调用的那条助手消息：[user, assistant(tool_use), user(文字)] 报的是 messages.1）：
#     anthropics/claude-code#5989
#   对不上的 tool_result："messages.N.content.K: unexpected `tool_use_id` found in `tool_result` blocks: toolu_….
#     Each `tool_result` block must have a corresponding `tool_use` block in the previous message."：
#     router-for-me/CLIProxyAPI#497
#   "max_tokens: Field required"：tickernelz/opencode-mem#50
#   "messages.N.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`. When `thinking` is
#     enabled, a final `assistant` message must start with a thinking block …"：lbjlaq/Antigravity-Manager#139
#   "messages.N.content.K: Invalid `signature` in `thinking` block"：ding113/claude-code-hub#518
#   "messages.N.content.K.thinking.signature: Field required"：anthropics/claude-code#26542
#   "`max_tokens` must be greater than `thinking.budget_tokens`. …"：ProfSynapse/nexus#17
#   认证："invalid x-api-key"（authentication_error）：abi/screenshot-to-code#430；没带密钥 "x-api-key header is
#     required"：stackblitz-labs/bolt.diy#156
# 流式事件的名字和字段照 anthropic-python 2.17 的 anthropic/types/raw_*_event.py。
ANTHROPIC_WORDS = {
    "no_key": "x-api-key header is required",
    "bad_key": "invalid x-api-key",
    "no_model": "model: Field required",
    "unknown_model": "model: {name}",
}
THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
                529: "overloaded_error"}
_STOP = {"tool_calls": "tool_use", "stop": "end_turn", "length": "max_tokens"}
_SEAL = b"harness-lib fake thinking"  # 签名只是原文的校验，不是秘密
_REQUIRED = {"text": ("text",), "thinking": ("thinking", "signature"), "tool_use": ("id", "name"),
             "tool_result": ("tool_use_id",)}  # 每种内容块必须有的字符串字段


def anthropic_error(status: int, error: dict, headers: dict | None = None) -> httpx2.Response:
    """Anthropic 形状的错误响应；`error` 是 OpenAI 形状的那一层（`wire.error_body`），只取它的 `message`。"""
    kind = _ERROR_TYPES.get(status, "api_error")
    body = {"type": "error", "error": {"type": kind, "message": error.get("message", "")}}
    return json_response(status, body, headers)


def sign(thinking: str) -> str:
    """thinking 块的 `signature`：原文的校验，改一个字就对不上。"""
    return base64.b64encode(hashlib.sha256(_SEAL + thinking.encode("utf-8")).digest()).decode("ascii")


def _blocks(content: Any) -> list:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or ())


def _ids(message: dict, kind: str, key: str) -> list:
    return [b.get(key) for b in _blocks(message.get("content")) if isinstance(b, dict) and b.get("type") == kind]


def _check_thinking(body: dict, msgs: list, limit: Any) -> None:
    thinking = body.get("thinking")
    if not (isinstance(thinking, dict) and thinking.get("type") == "enabled"):
        return
    budget = thinking.get("budget_tokens")
    if type(budget) is not int:
        raise Rejected(400, "thinking.enabled.budget_tokens: Field required")
    if budget < 1024:
        raise Rejected(400, "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
    if limit <= budget:
        raise Rejected(400, "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
                            f"documentation at {THINKING_DOCS}#max-tokens-and-context-window-size")
    # 正在工具循环里（最后一条是带 tool_result 的用户消息）：提出调用的那条助手消息要以 thinking 块开头
    if len(msgs) >= 2 and _ids(msgs[-1], "tool_result", "tool_use_id") and msgs[-2].get("role") == "assistant":
        first = (_blocks(msgs[-2].get("content")) or [{}])[0]
        found = first.get("type") if isinstance(first, dict) else None
        if found not in ("thinking", "redacted_thinking"):
            raise Rejected(400, f"messages.{len(msgs) - 2}.content.0.type: Expected `thinking` or `redacted_thinking`, "
                                f"but found `{found}`. When `thinking` is enabled, a final `assistant` message must "
                                "start with a thinking block (preceeding the lastmost set of `tool_use` and "
                                "`tool_result` blocks). We recommend you include thinking blocks from previous turns. "
                                f"To avoid this requirement, disable `thinking`. Please consult our documentation at "
                                f"{THINKING_DOCS}")


def _check_blocks(i: int, content: Any) -> None:
    """第 i 条消息的内容块：每种块必须有的字段都在，thinking 块的签名对得上原文。"""
    if not isinstance(content, (str, list)):
        raise Rejected(400, f"messages.{i}.content: Input should be a valid list")
    for k, block in enumerate(_blocks(content)):
        kind = block.get("type") if isinstance(block, dict) else None
        for field in _REQUIRED.get(kind, ()):
            if not isinstance(block.get(field), str):
                raise Rejected(400, f"messages.{i}.content.{k}.{kind}.{field}: Field required")
        if kind == "thinking" and block["signature"] != sign(block["thinking"]):
            raise Rejected(400, f"messages.{i}.content.{k}: Invalid `signature` in `thinking` block")


def _check_pairs(msgs: list) -> None:
    """每个 `tool_use` 在紧接着的用户消息里有 `tool_result`；每个 `tool_result` 回应的是上一条助手消息的调用。"""
    for i, m in enumerate(msgs):
        if m["role"] == "assistant" and (proposed := _ids(m, "tool_use", "id")):
            after = msgs[i + 1] if i + 1 < len(msgs) and msgs[i + 1]["role"] == "user" else {}
            unanswered = [x for x in proposed if x not in _ids(after, "tool_result", "tool_use_id")]
            if unanswered:
                raise Rejected(400, f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
                                    f"after: {', '.join(unanswered)}. Each `tool_use` block must have a "
                                    "corresponding `tool_result` block in the next message.")
        before = msgs[i - 1] if i > 0 and msgs[i - 1]["role"] == "assistant" else {}
        for k, block in enumerate(_blocks(m["content"])):
            if isinstance(block, dict) and block.get("type") == "tool_result" \
                    and block["tool_use_id"] not in _ids(before, "tool_use", "id"):
                raise Rejected(400, f"messages.{i}.content.{k}: unexpected `tool_use_id` found in `tool_result` "
                                    f"blocks: {block['tool_use_id']}. Each `tool_result` block must have a "
                                    "corresponding `tool_use` block in the previous message.")


def check_body(body: dict) -> None:
    """像 Anthropic 一样检查一次请求：必填字段、角色、内容块、配对、thinking 的预算和开头、工具名。"""
    for field in ("max_tokens", "messages"):
        if body.get(field) is None:
            raise Rejected(400, f"{field}: Field required")
    limit, msgs = body["max_tokens"], body["messages"]
    if type(limit) is not int:
        raise Rejected(400, "max_tokens: Input should be a valid integer")
    if limit < 1:
        raise Rejected(400, "max_tokens: Input should be greater than or equal to 1")
    if not isinstance(msgs, list):
        raise Rejected(400, "messages: Input should be a valid list")
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            raise Rejected(400, f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if m.get("content") is None:
            raise Rejected(400, f"messages.{i}.content: Field required")
        _check_blocks(i, m["content"])
    _check_pairs(msgs)
    _check_thinking(body, msgs, limit)
    for i, tool in enumerate(body.get("tools") or ()):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise Rejected(400, f"tools.{i}.name: Field required")


def to_chat(body: dict) -> dict:
    """Messages 请求 → Chat 请求：`system` 成为第一条消息，`tool_use` 成为 `tool_calls`，
    每个 `tool_result` 成为一条 tool 消息（排在同一条用户消息的文字前面），thinking 块大脑用不着。"""
    system = text_of(body.get("system")) if body.get("system") else ""
    msgs = [{"role": "system", "content": system}] if system else []
    for m in body["messages"]:
        blocks = [b for b in _blocks(m["content"]) if isinstance(b, dict)]
        text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        if m["role"] == "assistant":
            calls = [{"id": b["id"], "type": "function", "function": {
                "name": b["name"], "arguments": json.dumps(b.get("input") or {}, ensure_ascii=False)}}
                for b in blocks if b.get("type") == "tool_use"]
            msgs.append({"role": "assistant", "content": text or (None if calls else ""),
                         **({"tool_calls": calls} if calls else {})})
            continue
        results = [b for b in blocks if b.get("type") == "tool_result"]
        msgs += [{"role": "tool", "tool_call_id": b["tool_use_id"], "content": text_of(b.get("content"))}
                 for b in results]
        if text or not results:
            msgs.append({"role": "user", "content": text})
    choice = body.get("tool_choice") if isinstance(body.get("tool_choice"), dict) else {}
    chosen = {"auto": "auto", "any": "required", "none": "none"}.get(choice.get("type"))
    if choice.get("type") == "tool":
        chosen = {"type": "function", "function": {"name": choice.get("name")}}
    tools = [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                               "parameters": t.get("input_schema") or {}}}
             for t in body.get("tools") or ()]
    chat = {"model": body["model"], "messages": msgs, "max_tokens": body["max_tokens"], "tools": tools or None,
            "tool_choice": chosen if tools else None}
    return {k: v for k, v in chat.items() if v is not None}


def _input(arguments: str) -> dict:
    try:
        value = json.loads(arguments)
    except ValueError:  # 被 max_tokens 截断的参数不是完整的 JSON
        return {}
    return value if isinstance(value, dict) else {}


def to_message(completion: dict, body: dict) -> dict:
    """大脑的 `chat.completion` → Messages 的 `message`：开了 thinking 就先是 thinking 块，再是文字和 tool_use。"""
    choice = completion["choices"][0]
    message, content, thinking = choice["message"], [], 0
    if isinstance(body.get("thinking"), dict) and body["thinking"].get("type") == "enabled":
        thought = message.get("reasoning_content") or default_thinking(message)
        content.append({"type": "thinking", "thinking": thought, "signature": sign(thought)})
        thinking = token_count(thought)
    if message.get("content"):
        content.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or ():
        number = call["id"][len("call_"):] if call["id"].startswith("call_") else None
        content.append({"type": "tool_use", "id": f"toolu_{number}" if number else call["id"],
                        "name": call["function"]["name"], "input": _input(call["function"]["arguments"])})
    usage = completion["usage"]
    return {"id": "msg_" + completion["id"].replace("chatcmpl-", "").replace("-", "_"), "type": "message",
            "role": "assistant", "model": completion["model"], "content": content,
            "stop_reason": _STOP.get(choice["finish_reason"], "end_turn"), "stop_sequence": None,
            "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"] + thinking,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}


def stream_events(message: dict) -> list[dict]:
    """一个完整的 `message` 切成 Anthropic 的流式事件：message_start、ping，每个块 start → delta → stop，
    最后 message_delta（`stop_reason` 和用量）、message_stop。"""
    started = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
    out = [{"type": "message_start", "message": started}, {"type": "ping"}]
    for n, block in enumerate(message["content"]):
        if block["type"] == "thinking":
            first, deltas = {**block, "thinking": "", "signature": ""}, [
                *({"type": "thinking_delta", "thinking": p} for p in pieces(block["thinking"])),
                {"type": "signature_delta", "signature": block["signature"]}]
        elif block["type"] == "text":
            first, deltas = {**block, "text": ""}, [{"type": "text_delta", "text": p} for p in pieces(block["text"])]
        else:
            arguments = json.dumps(block["input"], ensure_ascii=False)
            first, deltas = {**block, "input": {}}, [{"type": "input_json_delta", "partial_json": p}
                                                     for p in pieces(arguments)]
        out.append({"type": "content_block_start", "index": n, "content_block": first})
        out += [{"type": "content_block_delta", "index": n, "delta": d} for d in deltas]
        out.append({"type": "content_block_stop", "index": n})
    out.append({"type": "message_delta", "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]}})
    return out + [{"type": "message_stop"}]


class MessagesAPI:
    """处理函数的 Messages 线路：检查、译给大脑、译回来；报错用 Anthropic 的形状和说法。"""

    words = ANTHROPIC_WORDS
    error = staticmethod(anthropic_error)

    def answer(self, body: dict, respond: Callable[[dict], Any]) -> httpx2.Response:
        check_body(body)
        message = to_message(respond(to_chat(body)), body)
        if body.get("stream"):
            return sse_response(stream_events(message), done=False, named=True)
        return json_response(200, message)
