"""流式输出：回复分成一块块到达，把它们拼回一条完整的助手消息（08_streaming）。

`accumulate(chunks)` 拼回 `{"message", "finish_reason", "usage"}`，流断了、没有 `finish_reason` 就结束时抛出
`EndpointError`（SDK 自己不报错）；`stream_turn(...)` 收齐后返回和非流式同类的 `ChatCompletion`；
`live_preview(view, messages)` 是 `on_delta` 回调，在消息表末尾画一行“接收中”，`messages` 一条都不多。
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from typing import Any, Callable, Iterable

import httpx2
import openai
from openai.types.chat import ChatCompletion

from .messages import as_dict
from .call import call_model
from .errors import EndpointError, classify, explain_error
from .net import what_timed_out

_HEAD = ("id", "created", "model", "system_fingerprint")
_NO_REQUEST = httpx2.Request("POST", "http://stream.invalid/v1/chat/completions")  # 录像里的错误块没有请求


def stream_cut(received: int, exc: BaseException | None = None) -> EndpointError:
    """流没有正常结束：半条消息不能放进 messages。这句说明只写在这里。"""
    if exc is None:
        why = "始终没有出现 finish_reason"
    elif isinstance(exc, (openai.APITimeoutError, httpx2.TimeoutException)):  # 哪一条上限、多少秒：客户端自己的
        why = f"客户端不再等了：{what_timed_out(exc)}"
    else:
        why = f"SDK 报告 {type(exc).__name__}：{exc}"
    return EndpointError("stream_cut", f"流式回复没有正常结束：收到 {received} 块后流就停了，{why}。"
                         "已经收到的只是半条消息，不能放进 messages。常见原因是网络中断、代理或网关超时、"
                         "服务端中途出错；重新运行这一格即可重试。", original=exc)


class _Message:
    """拼接中的助手消息。"""

    def __init__(self) -> None:
        self.fields: dict[str, Any] = {}  # role、content、refusal，以及协议之外的字段（按字符串片段拼接）
        self.calls: list[dict] = []  # 按到达顺序排列的调用
        self.slot_of: dict[int, dict] = {}  # index -> 这个 index 眼下对应的调用

    def apply(self, delta: Mapping) -> bool:
        """把一块的 delta 并进来；返回这一块有没有带来新东西。"""
        changed = False
        for key, value in delta.items():
            if key in ("tool_calls", "function_call") or value is None:
                continue
            old = self.fields.get(key)
            joined = key != "role" and isinstance(value, str) and (old is None or isinstance(old, str))
            self.fields[key] = (old or "") + value if joined else value
            changed = changed or key != "role" or old != value
        for part in delta.get("tool_calls") or ():
            self._apply_call(part)
            changed = True
        return changed

    def _apply_call(self, part: Mapping) -> None:
        """并进一段工具调用增量。按协议同一个调用的各段共用一个 `index`，只有第一段带 `id`；
        Ollama 把并行的几个调用都写成 `index` 0、各带新的 `id`，所以“同一个 index 换了 id”算新调用。"""
        index, new_id = part.get("index"), part.get("id")
        if index is None:  # 少数服务不给 index：新的 id 开新调用，否则接在最后一个后面
            fresh = not self.calls or (new_id and new_id not in [c["id"] for c in self.calls])
            slot = self._new_call() if fresh else self.calls[-1]
        else:
            slot = self.slot_of.get(index)
            if slot is None or (new_id and slot["id"] and new_id != slot["id"]):
                slot = self.slot_of[index] = self._new_call()
        if new_id and not slot["id"]:
            slot["id"] = new_id
        if part.get("type") and not slot["type"]:
            slot["type"] = part["type"]
        function = part.get("function") or {}
        name = function.get("name")
        if name and name != slot["function"]["name"]:  # 有的服务每块都重复一遍名字，重复的不拼
            slot["function"]["name"] += name
        slot["function"]["arguments"] += function.get("arguments") or ""

    def _new_call(self) -> dict:
        self.calls.append({"id": None, "type": None, "function": {"name": "", "arguments": ""}})
        return self.calls[-1]

    def as_dict(self) -> dict:
        """和非流式回复的 `message.model_dump(exclude_none=True)` 同样形状的字典。"""
        out: dict = {"role": "assistant", **copy.deepcopy(self.fields)}
        if self.calls:
            out["tool_calls"] = [{**({"id": c["id"]} if c["id"] is not None else {}),
                                  "type": c["type"] or "function", "function": dict(c["function"])}
                                 for c in self.calls]
        return out


def accumulate(chunks: Iterable[Any], on_delta: Callable[[dict], Any] | None = None) -> dict:
    """把流式块拼回一条助手消息（和非流式的 `model_dump(exclude_none=True)` 同样形状），返回 `{"message",
    "finish_reason", "usage"}`。`usage` 认顶层和 `choices[0].usage`（月之暗面）两处，`choices` 为空的块跳过；
    `on_delta(partial)` 在每块带来新内容后被调用。断流或没见到 `finish_reason` 抛出 `stream_cut`，
    流里的错误事件抛出 `stream_error`。"""
    message, finish_reason, usage, count = _Message(), None, None, 0
    try:
        for chunk in chunks:
            count += 1
            data = as_dict(chunk)
            if data.get("error"):
                raise stream_error(data["error"], count)
            usage = data.get("usage") or usage
            changed = False
            for choice in data.get("choices") or ():
                if choice.get("index", 0) != 0:
                    continue  # 只拼第一个候选（n=1）
                usage = choice.get("usage") or usage
                changed = message.apply(choice.get("delta") or {}) or changed
                finish_reason = choice.get("finish_reason") or finish_reason
            if changed and on_delta is not None:
                on_delta(message.as_dict())
    except (openai.APIError, httpx2.TransportError) as exc:
        if type(exc) is openai.APIError:  # SDK 读到流里的错误事件：不是连接错误，也没有状态码
            body = exc.body if isinstance(exc.body, Mapping) else {"message": exc.message}
            raise stream_error(body, count, exc) from exc
        raise stream_cut(count, exc) from exc
    if finish_reason is None:
        raise stream_cut(count)
    return {"message": message.as_dict(), "finish_reason": finish_reason, "usage": usage}


def stream_error(error: Any, received: int, original: BaseException | None = None) -> EndpointError:
    """服务商在流的中途发来 `{"error": {...}}`：按错误分类表说明，附上服务商的原话。"""
    body = error if isinstance(error, Mapping) else {"message": str(error)}
    exc = original if isinstance(original, openai.APIError) else openai.APIError(
        str(body.get("message") or "stream error"), request=_NO_REQUEST, body=dict(body))
    kind = classify(exc).kind
    return EndpointError(kind if kind not in ("other", "bad_request") else "stream_error",
                         f"服务商在流式回复的中途报错（已收到 {received} 块）。{explain_error(exc)}"
                         "（半条消息没有放进 messages。）", original=original)


def stream_turn(client, model, messages, tools=None, *, on_delta=None, include_usage=True, **params):
    """流式地调用一次模型：边收边调用 `on_delta(partial)`，流结束时（无论成败）再调用一次 `on_delta(None)`，
    收齐后返回一个 `ChatCompletion`。流断了抛出 `EndpointError("stream_cut")`，调用者的 `messages` 不会被改动。"""
    request = {"model": model, "messages": messages, "stream": True, **params,
               **({"tools": tools} if tools is not None else {}),
               **({"stream_options": {"include_usage": True}} if include_usage else {})}
    stream = call_model(client, **request)  # 开始之前就失败的请求和非流式一样经过 call_model
    head: dict = {}  # 第一块的 id、created、model，收齐后写进 ChatCompletion

    def remember(chunks):
        for chunk in chunks:
            if not head:
                head.update({k: v for k, v in as_dict(chunk).items() if k in _HEAD})
            yield chunk

    try:
        result = accumulate(remember(stream), on_delta)
    finally:
        if callable(getattr(stream, "close", None)):
            stream.close()
        if on_delta is not None:
            on_delta(None)
    choice = {"index": 0, "message": result["message"], "logprobs": None, "finish_reason": result["finish_reason"]}
    completion = {"id": head.get("id", ""), "object": "chat.completion", "created": head.get("created", 0),
                  "model": head.get("model", model), "choices": [choice],
                  "system_fingerprint": head.get("system_fingerprint"), "usage": result["usage"]}
    completion = {k: v for k, v in completion.items() if v is not None}
    return ChatCompletion.construct(**completion)  # SDK 解析响应时用的宽松构造：不认识的字段也保留


def collect_stream(stream):
    """把流式回复读完、拼回 `(message_dict, finish_reason)`；流断了或没有 `finish_reason` 时抛出 `stream_cut`。"""
    result = accumulate(stream)
    return result["message"], result["finish_reason"]


def live_preview(view, messages, *, min_interval=0.05):
    """`on_delta` 回调：在消息表末尾显示一行“接收中”的临时助手消息（`view.update([*messages, partial])`）；
    收到 `None`（流结束）时表重新指回 `messages`。两次刷新至少间隔 `min_interval` 秒。"""
    title, last = view.title, 0.0

    def on_delta(partial):
        nonlocal last
        if partial is None:
            view.title, last = title, 0.0
            view.update(messages)
            return
        now = time.monotonic()
        if now - last < min_interval:
            return
        last = now
        view.title = f"{title} · 接收中……" if title else "接收中……"
        view.update([*messages, partial])

    return on_delta
