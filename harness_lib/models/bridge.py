"""Chat Completions 和 Responses 之间的转换：有的模型只在 `/v1/responses` 上调用工具，切换器的客户端替这样的模型
把请求改写成 Responses 的样子发出去，再把回答拼回 `ChatCompletion` 的样子交给循环（`ui.clients.PresetClient`）。

- `responses_request(chat_body)`：Chat Completions 的请求体 → Responses 的请求体（不存在服务器上，`store=False`）；
- `chat_completion(response)`：Responses 的回答（字典）→ `chat.completion` 的字典；
- `chat_chunks(events)`：Responses 的流式事件（字典）→ `chat.completion.chunk` 的字典，一个事件到了就交出对应的块。

对应关系（笔记本 11 逐条演示）：`tool_calls` 里的一项 ↔ 一个 `function_call` 条目（`id` ↔ `call_id`）；
`role: "tool"` 的消息 ↔ `function_call_output` 条目；`max_tokens` ↔ `max_output_tokens`；
思考留下的 `reasoning` 条目（带 `encrypted_content`）放在助手消息的额外字段 `REASONING_FIELD` 里，
`model_dump()` 保留它，下一次请求原样放回它所在的位置。
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from .messages import as_dict, text_of

REASONING_FIELD = "reasoning_items"  # 助手消息上的额外字段：这一轮 Responses 回答里的 reasoning 条目
_PASSED = ("model", "temperature", "top_p", "parallel_tool_calls", "user", "metadata", "service_tier")


def _tool(tool: dict) -> dict:
    function = tool.get("function") or {}
    flat = {"type": "function", "name": function.get("name"), "description": function.get("description"),
            "parameters": function.get("parameters")}
    if "strict" in function:
        flat["strict"] = function["strict"]
    return {k: v for k, v in flat.items() if v is not None}


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"type": "function", "name": (choice.get("function") or {}).get("name")}
    return choice


def _items(message: dict) -> list[dict]:
    """一条 Chat 消息 → 一个或几个 Responses 的输入条目。"""
    role = message.get("role")
    if role == "tool":
        return [{"type": "function_call_output", "call_id": message.get("tool_call_id"),
                 "output": text_of(message.get("content"))}]
    if role != "assistant":
        return [{"role": role, "content": text_of(message.get("content"))}]
    items = [dict(item) for item in message.get(REASONING_FIELD) or ()]
    if text_of(message.get("content")):
        items.append({"role": "assistant", "content": text_of(message.get("content"))})
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        items.append({"type": "function_call", "call_id": call.get("id"), "name": function.get("name"),
                      "arguments": function.get("arguments") or ""})
    return items


def responses_request(body: dict) -> dict:
    """Chat Completions 的请求体改写成 Responses 的：消息变成输入条目，工具定义摊平，上限换成 `max_output_tokens`，
    思考强度放进 `reasoning`。不存在服务器上（`store=False`），要回思考条目的加密内容，下一次原样带回。"""
    request = {k: body[k] for k in _PASSED if k in body}
    request["input"] = [item for message in body.get("messages") or () for item in _items(as_dict(message))]
    if body.get("tools"):
        request["tools"] = [_tool(as_dict(t)) for t in body["tools"]]
    if "tool_choice" in body:
        request["tool_choice"] = _tool_choice(body["tool_choice"])
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is not None:
        request["max_output_tokens"] = limit
    if body.get("reasoning_effort") is not None:
        request["reasoning"] = {"effort": body["reasoning_effort"]}
    request.update(store=False, include=["reasoning.encrypted_content"])
    return request


def _finish(response: dict, calls: list) -> str:
    if calls:
        return "tool_calls"
    reason = (response.get("incomplete_details") or {}).get("reason")
    if response.get("status") == "incomplete":
        return "content_filter" if reason == "content_filter" else "length"
    return "stop"


def chat_completion(response: dict) -> dict:
    """Responses 的回答（字典）拼回 `chat.completion`：文字接起来，`function_call` 条目变成 `tool_calls`，
    `reasoning` 条目挂在助手消息的 `REASONING_FIELD` 上，用量换成 Chat 的三个字段。"""
    output = response.get("output") or []
    text = "".join(part.get("text") or "" for item in output if item.get("type") == "message"
                   for part in item.get("content") or () if part.get("type") == "output_text")
    calls = [{"id": item.get("call_id"), "type": "function",
              "function": {"name": item.get("name"), "arguments": item.get("arguments") or ""}}
             for item in output if item.get("type") == "function_call"]
    reasoning = [{k: v for k, v in item.items() if v is not None}
                 for item in output if item.get("type") == "reasoning"]
    message = {"role": "assistant", "content": text or (None if calls else ""), "refusal": None,
               **({"tool_calls": calls} if calls else {}), **({REASONING_FIELD: reasoning} if reasoning else {})}
    usage = response.get("usage") or {}
    completion = {"id": response.get("id"), "object": "chat.completion", "created": int(response.get("created_at") or 0),
                  "model": response.get("model"),
                  "choices": [{"index": 0, "message": message, "logprobs": None,
                               "finish_reason": _finish(response, calls)}]}
    if usage:
        prompt, done = usage.get("input_tokens") or 0, usage.get("output_tokens") or 0
        completion["usage"] = {"prompt_tokens": prompt, "completion_tokens": done,
                               "total_tokens": usage.get("total_tokens") or prompt + done}
    return completion


class StreamFailed(Exception):
    """Responses 的流里来了 `error` 或 `response.failed` 事件：`message` 是服务器的原话，`body` 是错误体。"""

    def __init__(self, message: str, body: Any):
        super().__init__(message)
        self.message, self.body = message, body


def chat_chunks(events: Iterable[dict], *, usage: bool = False) -> Iterator[dict]:
    """Responses 的流式事件 → Chat Completions 的流式块，边收边交：文字片段变成 `content` 的片段；一个
    `function_call` 条目先来一块带 id、类型和函数名，参数片段接着来；`response.completed`（或 `incomplete`）给出
    带 `finish_reason` 的最后一块，`usage=True` 时再加一块用量。思考条目在结束事件里才齐全（带着
    `encrypted_content`），放在最后一块之前单独的一块里，字段名是 `REASONING_FIELD`：拼好的助手消息带着它，
    下一次请求原样放回，和非流式时一样。流里断了、没有结束事件，就没有这两块（循环按“没有 finish_reason 的断流”处理）。"""
    head: dict = {}
    tool_index: dict[int, int] = {}  # 输出条目的位置 → tool_calls 里的序号

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    for event in events:
        kind = event.get("type")
        if kind == "response.created":
            started = event.get("response") or {}
            head = {"id": started.get("id"), "object": "chat.completion.chunk",
                    "created": int(started.get("created_at") or 0), "model": started.get("model")}
            yield chunk({"role": "assistant", "content": "", "refusal": None})
        elif kind == "response.output_text.delta":
            yield chunk({"content": event.get("delta") or ""})
        elif kind == "response.output_item.added" and (event.get("item") or {}).get("type") == "function_call":
            item = event["item"]
            tool_index[event.get("output_index")] = n = len(tool_index)
            yield chunk({"tool_calls": [{"index": n, "id": item.get("call_id"), "type": "function",
                                         "function": {"name": item.get("name"), "arguments": ""}}]})
        elif kind == "response.function_call_arguments.delta" and event.get("output_index") in tool_index:
            yield chunk({"tool_calls": [{"index": tool_index[event["output_index"]],
                                         "function": {"arguments": event.get("delta") or ""}}]})
        elif kind in ("response.completed", "response.incomplete"):
            final = chat_completion(event.get("response") or {})
            reasoning = final["choices"][0]["message"].get(REASONING_FIELD)
            if reasoning:
                yield chunk({REASONING_FIELD: reasoning})
            yield chunk({}, final["choices"][0]["finish_reason"])
            if usage and final.get("usage"):
                yield {**head, "choices": [], "usage": final["usage"]}
            return
        elif kind in ("error", "response.failed"):
            error = event if kind == "error" else (event.get("response") or {}).get("error") or {}
            raise StreamFailed(error.get("message") or "Responses 的流里来了一个错误事件", error)


def without_reasoning_items(messages: Any) -> Any:
    """发往 Chat Completions 的消息去掉 `REASONING_FIELD`（那是 Responses 的东西，别的端点不认识）。"""
    if not isinstance(messages, list):
        return messages
    return [{k: v for k, v in m.items() if k != REASONING_FIELD} if isinstance(m, dict) and REASONING_FIELD in m
            else m for m in messages]

