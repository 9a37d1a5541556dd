"""OpenAI 的 Responses API（`POST /responses`）：同一个假模型大脑（`fake.FakeModel`）的另一种线路格式。

大脑只懂 Chat Completions。这里只做翻译：请求里 `input` 的条目译成 `messages` 交给大脑，大脑的
`chat.completion` 译回 `response` 对象（`output` 里的 `reasoning`、`message`、`function_call` 条目），
流式时再切成带名字的 SSE 事件。所以脚本（`text_reply`、`tool_reply`……）和默认策略一行不改就能用。
方向相反的翻译（客户端替 Chat 形状的循环去问 Responses 端点）在 `bridge`，两者绕一圈对得上（tests/test_apis.py）。

请求先按 Responses 自己的规矩检查，报错用 OpenAI 的原话（出处见下）：调用和输出按 `call_id` 配对，
推理条目后面要跟着它带出来的那一条，工具定义是平的（`name` 在第一层，不在 `function` 里）。
`store` 默认为 true：回答存在这个处理函数里，`previous_response_id` 能接上它；`store: false` 的回答不存，
它的推理条目只能靠 `encrypted_content` 带回来（假模型的“加密”只是编码加校验，解开就能看见原文）。
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
from typing import Any, Callable

import httpx2

from .checks import bad, check_fields, is_given, missing, wrong_type
from .messages import as_dict, text_of, token_count
from .script import default_thinking
from .wire import OPENAI_WORDS, Rejected, json_response, openai_error, pieces, sse_response

# OpenAI 的原话和出处（2026-12-06 读过的公开报告）：
#   未配对的调用 "No tool output found for function call call_….", param "input"：tjardoo/openai-client#124
#   没有调用的输出 "No tool call found for function call output with call_id call_….", param "input"：
#     continuedev/continue#10092
#   推理条目后面缺了它的那一条 "Item 'rs_…' of type 'reasoning' was provided without its required following
#     item.", param "input"：continuedev/continue#8933
#   没存过的推理条目（404）"Item with id 'rs_…' not found. Items are not persisted when `store` is set to false. …"：
#     can1357/oh-my-pi#41
#   "Previous response with id 'resp_…' not found."，code previous_response_not_found：maximhq/bifrost#2441
#   "The encrypted content gAAA...Rg== could not be verified."，code invalid_encrypted_content：openai/codex#8132
#   "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, …"：vectorize-io/hindsight#58
# 流式事件的名字和字段照 openai-python 3.63 的 openai/types/responses/response_*_event.py。
NOT_STORED = ("Item with id '{id}' not found. Items are not persisted when `store` is set to false. "
              "Try again with `store` set to true, or remove this item from your input.")
MIN_OUTPUT_TOKENS = 16
KEEP = 200  # 最多存多少个回答（更早的忘掉）
_SEAL = b"harness-lib fake reasoning"  # 给推理原文做校验用；不是秘密，假模型不需要真的加密


def seal(item_id: str, text: str) -> str:
    """推理条目的 `encrypted_content`：id 和原文编码后加一段校验（改动一个字就验不过）。"""
    payload = json.dumps({"id": item_id, "text": text}, ensure_ascii=False).encode("utf-8")
    return base64.b64encode(hashlib.sha256(_SEAL + payload).digest()[:16] + payload).decode("ascii")


def unseal(token: Any) -> dict | None:
    """`seal` 的反面：验得过就是 `{"id", "text"}`，验不过是 None。"""
    try:
        raw = base64.b64decode(str(token).encode("ascii"), validate=True)
        mac, payload = raw[:16], raw[16:]
        return json.loads(payload) if hashlib.sha256(_SEAL + payload).digest()[:16] == mac else None
    except ValueError:
        return None


def _kind(item: dict) -> str | None:
    return item.get("type") or ("message" if "role" in item else None)


def _check_item(item: Any, i: int) -> dict:
    where = f"input[{i}]"
    if not isinstance(item, dict):
        raise wrong_type(where, "an object", item)
    kind = _kind(item)
    if kind == "message":
        role = item.get("role")
        if role not in ("user", "system", "developer", "assistant"):
            raise bad(f"Invalid value: {role!r}. Supported values are: 'assistant', 'system', 'developer', and "
                      "'user'.", f"{where}.role", "invalid_value")
        if item.get("content") is None:
            raise missing(f"{where}.content")
    elif kind == "function_call":
        check_fields(item, where, ("call_id", "name", "arguments"))
    elif kind == "function_call_output":
        check_fields(item, where, ("call_id",))
        if item.get("output") is None:
            raise missing(f"{where}.output")
    elif kind == "reasoning":
        check_fields(item, where, ("id",))
    elif kind is None:
        raise missing(f"{where}.type")
    else:
        raise bad(f"Invalid value: {kind!r}. This local fake model supports the input item types 'message', "
                  "'function_call', 'function_call_output' and 'reasoning'.", f"{where}.type", "invalid_value")
    return item


def _check_pairs(items: list[dict]) -> None:
    """调用和输出按 `call_id` 配对；推理条目后面紧跟着它带出来的那一条（调用或助手消息）。"""
    called: set = set()
    for i, item in enumerate(items):
        kind = _kind(item)
        if kind == "function_call":
            called.add(item["call_id"])
        elif kind == "function_call_output" and item["call_id"] not in called:
            raise bad(f"No tool call found for function call output with call_id {item['call_id']}.", "input")
        elif kind == "reasoning":
            after = items[i + 1] if i + 1 < len(items) else {}
            if not (_kind(after) == "function_call" or after.get("role") == "assistant"):
                raise bad(f"Item '{item['id']}' of type 'reasoning' was provided without its required following "
                          "item.", "input")
    answered = {item["call_id"] for item in items if _kind(item) == "function_call_output"}
    for item in items:
        if _kind(item) == "function_call" and item["call_id"] not in answered:
            raise bad(f"No tool output found for function call {item['call_id']}.", "input")


def _chat_tools(tools: Any) -> list[dict] | None:
    """平的工具定义 → Chat 的 `{"type": "function", "function": {...}}`。"""
    if not is_given(tools):
        return None
    if not isinstance(tools, list):
        raise wrong_type("tools", "an array", tools)
    out = []
    for i, tool in enumerate(tools):
        check_fields(tool, f"tools[{i}]", ("type", "name"))  # Chat 的嵌套写法在这里缺 'tools[i].name'
        function = {key: tool[key] for key in ("name", "description", "parameters") if key in tool}
        out.append({"type": "function", "function": function})
    return out


def _chat_choice(choice: Any) -> Any:
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    return choice


def to_messages(instructions: Any, items: list[dict]) -> list[dict]:
    """条目 → Chat 的 `messages`。一串相邻的调用并进一条助手消息（前面紧挨着的助手文字也并进去），
    它们的输出紧跟在后面：大脑看到的总是成对的 Chat 记录。推理条目大脑用不着，跳过。"""
    msgs = [{"role": "system", "content": instructions}] if isinstance(instructions, str) and instructions else []
    outputs = {item["call_id"]: item for item in items if _kind(item) == "function_call_output"}
    i = 0
    while i < len(items):
        if _kind(items[i]) == "message":
            msgs.append({"role": items[i]["role"], "content": text_of(items[i]["content"])})
        if _kind(items[i]) != "function_call":
            i += 1
            continue
        run = []
        while i < len(items) and _kind(items[i]) in ("function_call", "reasoning"):
            run += [items[i]] if _kind(items[i]) == "function_call" else []
            i += 1
        host = msgs[-1] if msgs and msgs[-1]["role"] == "assistant" and "tool_calls" not in msgs[-1] else None
        if host is None:
            host = {"role": "assistant", "content": None}
            msgs.append(host)
        host["tool_calls"] = [{"id": c["call_id"], "type": "function",
                               "function": {"name": c["name"], "arguments": c["arguments"]}} for c in run]
        msgs += [{"role": "tool", "tool_call_id": c["call_id"], "content": text_of(outputs[c["call_id"]]["output"])}
                 for c in run]
    return msgs


def _output(completion: dict, body: dict, tag: str) -> tuple[list[dict], int]:
    """大脑的回答 → `output` 条目，和推理用掉的 token 数。"""
    choice = completion["choices"][0]
    message, cut = choice["message"], choice["finish_reason"] == "length"
    status = "incomplete" if cut else "completed"
    asked = body.get("reasoning") if isinstance(body.get("reasoning"), dict) else {}
    thought = message.get("reasoning_content")
    if thought is None and asked.get("effort") not in (None, "none"):
        thought = default_thinking(message)  # 要了推理（reasoning.effort）：默认的思考文字
    output, used = [], 0
    if thought is not None:
        item = {"type": "reasoning", "id": f"rs_{tag}", "summary": []}
        if asked.get("summary"):  # 摘要要了才给
            item["summary"] = [{"type": "summary_text", "text": thought}]
        if "reasoning.encrypted_content" in (body.get("include") or ()):
            item["encrypted_content"] = seal(item["id"], thought)
        output.append(item)
        used = token_count(thought)
    if message.get("content"):
        output.append({"type": "message", "id": f"msg_{tag}", "status": status, "role": "assistant",
                       "content": [{"type": "output_text", "text": message["content"], "annotations": [],
                                    "logprobs": []}]})
    for call in message.get("tool_calls") or ():
        number = call["id"][len("call_"):] if call["id"].startswith("call_") else call["id"]
        output.append({"type": "function_call", "id": f"fc_{number}", "call_id": call["id"], "status": status,
                       "name": call["function"]["name"], "arguments": call["function"]["arguments"]})
    return output, used


def to_response(completion: dict, body: dict) -> dict:
    """大脑的 `chat.completion` → Responses 的 `response` 对象。"""
    tag = completion["id"].replace("chatcmpl-", "").replace("-", "_")  # chatcmpl-fake-0001 → fake_0001
    output, thinking = _output(completion, body, tag)
    usage = completion["usage"]
    cut = completion["choices"][0]["finish_reason"] == "length"
    return {"id": f"resp_{tag}", "object": "response", "created_at": completion["created"],
            "status": "incomplete" if cut else "completed", "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
            "instructions": body.get("instructions"), "max_output_tokens": body.get("max_output_tokens"),
            "model": completion["model"], "output": output, "parallel_tool_calls": True,
            "previous_response_id": body.get("previous_response_id"), "reasoning": body.get("reasoning"),
            "store": body.get("store", True), "temperature": 1.0, "text": {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools") or [], "top_p": 1.0,
            "truncation": "disabled", "metadata": {},
            "usage": {"input_tokens": usage["prompt_tokens"], "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": usage["completion_tokens"] + thinking,
                      "output_tokens_details": {"reasoning_tokens": thinking},
                      "total_tokens": usage["total_tokens"] + thinking}}


def stream_events(response: dict) -> list[dict]:
    """一个完整的 `response` 切成流式事件，顺序和真实服务一样：created、in_progress，每个条目 added → 增量 →
    done，最后 completed（被 `max_output_tokens` 截断时是 incomplete）。每个事件带递增的 `sequence_number`。"""
    numbers = itertools.count()

    def event(type: str, **fields: Any) -> dict:
        return {"type": type, "sequence_number": next(numbers), **fields}

    started = {**response, "status": "in_progress", "output": [], "usage": None, "incomplete_details": None}
    out = [event("response.created", response=started), event("response.in_progress", response=started)]
    for n, item in enumerate(response["output"]):
        at = {"item_id": item["id"], "output_index": n}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            out.append(event("response.output_item.added", output_index=n,
                             item={**item, "status": "in_progress", "content": []}))
            out.append(event("response.content_part.added", **at, content_index=0, part=part))
            out += [event("response.output_text.delta", **at, content_index=0, delta=p, logprobs=[])
                    for p in pieces(text)]
            out.append(event("response.output_text.done", **at, content_index=0, text=text, logprobs=[]))
            out.append(event("response.content_part.done", **at, content_index=0, part={**part, "text": text}))
        elif item["type"] == "function_call":
            out.append(event("response.output_item.added", output_index=n,
                             item={**item, "status": "in_progress", "arguments": ""}))
            out += [event("response.function_call_arguments.delta", **at, delta=p) for p in pieces(item["arguments"])]
            out.append(event("response.function_call_arguments.done", **at, arguments=item["arguments"]))
        else:  # 推理条目：先空着加进来，摘要（要了才有）一段段地来，完成时带上 encrypted_content
            out.append(event("response.output_item.added", output_index=n,
                             item={k: v for k, v in item.items() if k != "encrypted_content"} | {"summary": []}))
            for s, part in enumerate(item["summary"]):
                at_part = {**at, "summary_index": s}
                out.append(event("response.reasoning_summary_part.added", **at_part, part={**part, "text": ""}))
                out += [event("response.reasoning_summary_text.delta", **at_part, delta=p)
                        for p in pieces(part["text"])]
                out.append(event("response.reasoning_summary_text.done", **at_part, text=part["text"]))
                out.append(event("response.reasoning_summary_part.done", **at_part, part=part))
        out.append(event("response.output_item.done", output_index=n, item=item))
    finished = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    return out + [event(finished, response=response)]


class ResponsesAPI:
    """一个处理函数的 Responses 线路。`stored`：`store` 为 true 的回答 id → 到它为止的全部条目
    （输入加输出），`previous_response_id` 靠它接上；`reasoning`：存过的推理条目 id。"""

    words = OPENAI_WORDS  # 认证和模型名的报错
    error = staticmethod(openai_error)

    def __init__(self) -> None:
        self.stored: dict[str, list[dict]] = {}
        self.reasoning: set[str] = set()

    def answer(self, body: dict, respond: Callable[[dict], Any]) -> httpx2.Response:
        store = body.get("store", True) is not False
        items = self._context(body, store)
        limit = body.get("max_output_tokens")
        if limit is not None and type(limit) is not int:
            raise wrong_type("max_output_tokens", "an integer", limit)
        if limit is not None and limit < MIN_OUTPUT_TOKENS:
            raise bad(f"Invalid 'max_output_tokens': integer below minimum value. Expected a value >= "
                      f"{MIN_OUTPUT_TOKENS}, but got {limit} instead.", "max_output_tokens", "integer_below_min_value")
        chat = {"model": body["model"], "messages": to_messages(body.get("instructions"), items),
                "tools": _chat_tools(body.get("tools")), "tool_choice": _chat_choice(body.get("tool_choice")),
                "max_tokens": limit}
        response = to_response(respond({k: v for k, v in chat.items() if v is not None}), body)
        if store:
            self._remember(response, items)
        if body.get("stream"):
            return sse_response(stream_events(response), done=False, named=True)
        return json_response(200, response)

    def _context(self, body: dict, store: bool) -> list[dict]:
        """这次的全部条目：`previous_response_id` 接上的，加上 `input` 里的；检查格式、配对和推理条目。"""
        given = body.get("input")
        if given is None and body.get("previous_response_id") is None:
            raise missing("input")
        if isinstance(given, str):
            given = [{"type": "message", "role": "user", "content": given}]
        elif given is not None and not isinstance(given, list):
            raise wrong_type("input", "a string or an array of input items", given)
        items = [_check_item(as_dict(item), i) for i, item in enumerate(given or ())]
        earlier = body.get("previous_response_id")
        if earlier is not None:
            if earlier not in self.stored:
                raise bad(f"Previous response with id '{earlier}' not found.", "previous_response_id",
                          "previous_response_not_found")
            items = self.stored[earlier] + items
        for item in items:
            if _kind(item) != "reasoning":
                continue
            sealed = item.get("encrypted_content")
            if sealed is not None and unseal(sealed) is None:
                shown = f"{sealed[:4]}...{sealed[-4:]}" if isinstance(sealed, str) else repr(sealed)
                raise bad(f"The encrypted content {shown} could not be verified.", None, "invalid_encrypted_content")
            if sealed is None and item["id"] not in self.reasoning:
                raise Rejected(404, NOT_STORED.format(id=item["id"]) if not store else
                               f"Item with id '{item['id']}' not found.", param="input")
        _check_pairs(items)
        return items

    def _remember(self, response: dict, items: list[dict]) -> None:
        self.stored[response["id"]] = items + response["output"]
        self.reasoning |= {item["id"] for item in response["output"] if item["type"] == "reasoning"}
        while len(self.stored) > KEEP:
            del self.stored[next(iter(self.stored))]
