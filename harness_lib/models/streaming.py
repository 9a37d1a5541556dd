"""流式输出：回复分成一块块到达，把它们拼回一条完整的助手消息。

来源：`agent_loop_stream` 与 08_streaming（原文第三节的延伸）里标了
`# harness_lib: save stream` 的那一格逐字一致（tests/test_sync.py 检查）。

其余是辅助工具，笔记本直接导入使用：

- `accumulate(chunks, on_delta=None)`：把流式块拼回助手消息，外加 `finish_reason` 和 `usage`；
  流没有给出 `finish_reason` 就结束时抛出 `EndpointError("stream_cut", ...)`（SDK 自己不报错）；
  流里夹着服务商的错误事件时抛出 `EndpointError`，说明里是服务商的原话；
- `stream_turn(client, model, messages, tools=None, on_delta=None)`：流式地调用一次模型，
  收齐后返回和非流式完全同类的 `ChatCompletion`，所以循环其余部分一个字都不用改；
- `collect_stream(stream)`：把流式回复读完、拼回 `(message_dict, finish_reason)`；流中途断开或没有
  `finish_reason` 时抛出 `EndpointError("stream_cut", ...)`（07_endpoint_faults 用它）；
- `live_preview(view, messages)`：给 `on_delta` 用的回调，在消息表末尾显示一行“接收中”的临时助手消息，
  但不往 `messages` 里放任何东西；
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from typing import Any, Callable, Iterable, Iterator

import httpx2
import openai
from openai.types.chat import ChatCompletion

from .errors import EndpointError, call_model, classify, explain_error

__all__ = [
    "collect_stream",
    "accumulate",
    "live_preview",
    "stream_error",
    "stream_turn",
]

_NO_REQUEST = httpx2.Request("POST", "http://stream.invalid/v1/chat/completions")  # 录像里的错误块没有请求

# delta 里协议规定的字段；其余字段（例如 reasoning_content）按字符串片段拼接，原样保留
_DELTA_FIELDS = {"role", "content", "refusal", "tool_calls", "function_call"}


def _as_dict(obj: Any) -> dict:
    """流式块可以是 SDK 对象，也可以是字典（比如从录像文件里读出来的）。"""
    if isinstance(obj, Mapping):
        return dict(obj)
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_unset=True)
    raise TypeError(f"认不出这一块：{type(obj).__name__}")


class _Message:
    """拼接中的助手消息。"""

    def __init__(self) -> None:
        self.role: str | None = None
        self.content: str | None = None
        self.refusal: str | None = None
        self.extras: dict[str, Any] = {}
        self.calls: list[dict] = []  # 按到达顺序排列的调用
        self.slot_of: dict[int, dict] = {}  # index -> 这个 index 眼下对应的调用

    def apply(self, delta: Mapping) -> bool:
        """把一块的 delta 并进来；返回这一块有没有带来新东西。"""
        changed = False
        if delta.get("role"):
            changed = self.role != delta["role"]
            self.role = delta["role"]
        for field in ("content", "refusal"):
            piece = delta.get(field)
            if piece is not None:
                setattr(self, field, (getattr(self, field) or "") + piece)
                changed = True
        for key, value in delta.items():
            if key in _DELTA_FIELDS or value is None:
                continue
            if isinstance(value, str) and isinstance(self.extras.get(key, ""), str):
                self.extras[key] = self.extras.get(key, "") + value
            else:
                self.extras[key] = value
            changed = True
        for part in delta.get("tool_calls") or ():
            self._apply_call(part)
            changed = True
        return changed

    def _apply_call(self, part: Mapping) -> None:
        """并进一段工具调用增量。

        按协议，同一个调用的各段共用一个 `index`，只有第一段带 `id`。有的服务不守这个约定：
        Ollama 把并行的几个调用都写成 `index` 0，各自带着新的 `id`，每个调用一块就发完。
        所以“`index` 相同、却带来了另一个 `id`”算作一个新调用，不往旧调用上拼。
        """
        index = part.get("index")
        new_id = part.get("id")
        if index is None:
            # 少数服务不给 index：新的 id 开一个新调用，否则接在最后一个调用后面
            known = [c["id"] for c in self.calls]
            if not self.calls or (new_id and new_id not in known):
                slot = self._new_call()
            else:
                slot = self.calls[-1]
        else:
            slot = self.slot_of.get(index)
            if slot is None or (new_id and slot["id"] and new_id != slot["id"]):
                slot = self._new_call()
                self.slot_of[index] = slot
        if new_id and not slot["id"]:
            slot["id"] = new_id
        if part.get("type") and not slot["type"]:
            slot["type"] = part["type"]
        function = part.get("function") or {}
        name = function.get("name")
        if name and name != slot["function"]["name"]:
            # 名字通常只来一次；有的服务每块都重复一遍，重复的不再拼接
            slot["function"]["name"] += name
        if function.get("arguments"):
            slot["function"]["arguments"] += function["arguments"]

    def _new_call(self) -> dict:
        slot = {"id": None, "type": None, "function": {"name": "", "arguments": ""}}
        self.calls.append(slot)
        return slot

    def as_dict(self) -> dict:
        """和非流式回复的 `message.model_dump(exclude_none=True)` 同样形状的字典。"""
        out: dict = {"role": self.role or "assistant"}
        if self.content is not None:
            out["content"] = self.content
        if self.refusal is not None:
            out["refusal"] = self.refusal
        if self.calls:
            calls = []
            for slot in self.calls:
                call: dict = {"id": slot["id"]} if slot["id"] is not None else {}
                call["type"] = slot["type"] or "function"
                call["function"] = dict(slot["function"])
                calls.append(call)
            out["tool_calls"] = calls
        out.update(copy.deepcopy(self.extras))
        return out


def accumulate(chunks: Iterable[Any], on_delta: Callable[[dict], Any] | None = None) -> dict:
    """把流式块拼回一条完整的助手消息，返回 `{"message", "finish_reason", "usage"}`。

    * `message`：和非流式回复的 `message.model_dump(exclude_none=True)` 同样形状：
      `role`、`content`（文字片段依次拼接），`tool_calls` 按 `index` 分组——
      `id`、`type`、函数名取自该调用的第一块，`arguments` 把各块的片段按到达顺序接起来；
      `index` 相同却换了一个 `id`（Ollama 这样发并行调用），算作新的调用；
      协议之外的字段（例如 `reasoning_content`）按片段拼接，原样保留；
    * `finish_reason`：流里最后出现的结束原因；
    * `usage`：请求时带了 `stream_options={"include_usage": True}` 才有，否则为 `None`。
      一般在最后一块的顶层；月之暗面放在 `choices[0].usage` 里，两处都认。

    `choices` 为空的块（用量块、内容过滤的提示块）出现在哪个位置都不要紧，跳过即可。
    `on_delta(partial)` 在每一块带来新内容之后被调用，`partial` 是“到目前为止”的消息字典（副本）。

    流结束时还没见到 `finish_reason`，说明回复被截断了：抛出 `EndpointError("stream_cut", ...)`。
    SDK 遇到这种情况不会报错，只是迭代提前结束。块里带着 `error`（服务商在流中途报错）时，
    抛出 `EndpointError`，说明里是服务商的原话。
    """
    message = _Message()
    finish_reason = None
    usage = None
    count = 0
    for chunk in chunks:
        count += 1
        data = _as_dict(chunk)
        if data.get("error"):
            raise stream_error(data["error"], count)
        if data.get("usage"):
            usage = data["usage"]
        changed = False
        for choice in data.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue  # 只拼第一个候选（n=1，本系列总是如此）
            if choice.get("usage"):  # 月之暗面：用量在 choice 里
                usage = choice["usage"]
            changed = message.apply(choice.get("delta") or {}) or changed
            if choice.get("finish_reason"):
                finish_reason = choice["finish_reason"]
        if changed and on_delta is not None:
            on_delta(message.as_dict())
    if finish_reason is None:
        raise EndpointError(
            "stream_cut",
            f"流式回复没有正常结束：收到 {count} 块后流就停了，始终没有出现 finish_reason。"
            "已经收到的只是半条消息，不能放进 messages。常见原因是网络中断、代理或网关超时、"
            "服务端中途出错；重新运行这一格即可重试。",
        )
    return {"message": message.as_dict(), "finish_reason": finish_reason, "usage": usage}


def stream_error(error: Any, received: int, original: BaseException | None = None) -> EndpointError:
    """服务商在流的中途发来 `{"error": {...}}`：按错误分类表说明，附上服务商的原话。"""
    body = error if isinstance(error, Mapping) else {"message": str(error)}
    exc = original if isinstance(original, openai.APIError) else openai.APIError(
        str(body.get("message") or "stream error"), request=_NO_REQUEST, body=dict(body))
    rule = classify(exc)
    kind = rule.kind if rule.kind not in ("other", "bad_request") else "stream_error"
    text = explain_error(exc)
    return EndpointError(kind, f"服务商在流式回复的中途报错（已收到 {received} 块）。{text}"
                               "（半条消息没有放进 messages。）", original=original)


def _is_stream_error(exc: BaseException) -> bool:
    """SDK 读到流里的错误事件时抛出的是 `openai.APIError` 本身（不是连接错误，也没有状态码）。"""
    return type(exc) is openai.APIError


def stream_turn(client, model, messages, tools=None, *, on_delta=None, include_usage=True, **params):
    """流式地调用一次模型：边收边调用 `on_delta(partial)`，收齐后返回一个 `ChatCompletion`。

    返回值和非流式调用同类，`response.choices[0].message` 照常可用，所以循环的其余部分不用改。
    无论成败，流结束时都会再调用一次 `on_delta(None)`，表示“临时消息不再显示”。

    * 流没有给出 `finish_reason` 就结束，或者连接在中途断开（SDK 抛出 `openai.APIError`），
      都抛出 `EndpointError("stream_cut", ...)`；此时什么都没有返回，调用者的 `messages` 不会被改动。
    * 服务商在流里发来错误事件（比如内容审核在输出途中没通过），抛出的 `EndpointError`
      带着服务商的原话，而不是笼统的“断流”。
    * 开始之前就失败的请求和非流式一样经过 `call_model`：端点故障变成 `EndpointError`，
      HTTP 400 原样抛出 `openai.BadRequestError`。
    """
    request = {"model": model, "messages": messages, "stream": True, **params}
    if tools is not None:
        request["tools"] = tools
    if include_usage:
        request["stream_options"] = {"include_usage": True}
    stream = call_model(client, **request)
    head: dict = {}
    received = 0

    def tap() -> Iterator[Any]:
        nonlocal received
        for chunk in stream:
            received += 1
            if not head:
                data = _as_dict(chunk)
                head.update({k: data[k] for k in ("id", "created", "model", "system_fingerprint")
                             if data.get(k) is not None})
            yield chunk

    try:
        result = accumulate(tap(), on_delta)
    except (openai.APIError, httpx2.TransportError) as exc:
        if _is_stream_error(exc):
            raise stream_error(exc.body if isinstance(exc.body, Mapping) else {"message": exc.message},
                               received, exc) from exc
        raise EndpointError(
            "stream_cut",
            f"流式回复在中途断开了：收到 {received} 块之后，SDK 报告 {type(exc).__name__}：{exc}。"
            "半条消息没有放进 messages；检查网络或代理后重新运行这一格即可。",
            original=exc,
        ) from exc
    finally:
        close = getattr(stream, "close", None)
        if callable(close):
            close()
        if on_delta is not None:
            on_delta(None)
    completion = {
        "id": head.get("id", ""),
        "object": "chat.completion",
        "created": head.get("created", 0),
        "model": head.get("model", model),
        "choices": [{"index": 0, "message": result["message"], "logprobs": None,
                     "finish_reason": result["finish_reason"]}],
    }
    if "system_fingerprint" in head:
        completion["system_fingerprint"] = head["system_fingerprint"]
    if result["usage"] is not None:
        completion["usage"] = result["usage"]
    # construct 是 SDK 解析 HTTP 响应时用的宽松构造：不认识的字段和取值也照样保留
    return ChatCompletion.construct(**completion)


def live_preview(view, messages, *, min_interval=0.05):
    """返回一个 `on_delta` 回调：在消息表末尾显示一行“接收中”的临时助手消息。

    临时行只画在表上（`view.update([*messages, partial])`），`messages` 本身一条都不多。
    收到 `None`（流结束，无论成败）时，表重新指回 `messages`，临时行消失。
    两次刷新至少间隔 `min_interval` 秒，块很多时也不会把页面刷得太频繁。
    """
    title = view.title
    last = 0.0

    def on_delta(partial):
        nonlocal last
        if partial is None:
            view.title = title
            view.update(messages)
            last = 0.0
            return
        now = time.monotonic()
        if now - last < min_interval:
            return
        last = now
        view.title = f"{title} · 接收中……" if title else "接收中……"
        view.update([*messages, partial])

    return on_delta


def collect_stream(stream):
    """把流式回复的各块拼回一条消息，返回 `(message_dict, finish_reason)`。

    `message_dict` 的样子和 `message.model_dump(exclude_none=True)` 相同，可以直接追加进 messages。
    流结束了却没有收到任何 `finish_reason`（连接中途断开、代理截断），SDK 不会报错，
    这里抛出 `EndpointError("stream_cut", ...)`：半截回复不能当成完整的一轮。
    """
    try:
        result = accumulate(stream)
    except (openai.APIError, httpx2.TransportError) as exc:
        if _is_stream_error(exc):
            raise stream_error(exc.body if isinstance(exc.body, Mapping) else {"message": exc.message},
                               0, exc) from exc
        raise EndpointError("stream_cut", "流式回复在中途断开了：已经收到的只是半条消息，不能放进 messages。"
                            f"连接报错：{type(exc).__name__}。检查网络或代理后重新运行这一格即可。",
                            original=exc) from exc
    return result["message"], result["finish_reason"]
