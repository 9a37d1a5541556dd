"""HTTP 这一层：所有模型替身（假模型、故障、怪脾气、断流、回放）都在这里变成真正的 HTTP 响应。
替身只写一个处理函数 `handler(httpx.Request) -> httpx.Response`。离线时 `OfflineClient(handler)`
是真正的 `openai.OpenAI`，只是传输层（`MockTransport`）把请求直接交给处理函数；联网时
`server.serve(handler)` 把同一个处理函数放到本机端口上。响应、异常和流式块都由 SDK 自己解析。
完整回复切成流式块只有一处：`stream_chunks`；流的截断也只有一处：`cut_stream`。
另外两种线路格式（`responses_api`、`messages_api`）的事件各在各的模块里，文字都用 `pieces` 切。
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Iterator

import httpx2
import openai

from .calls import RecordsCalls

OFFLINE_BASE_URL = "http://offline.invalid/v1"  # .invalid 永远解析不到：离线请求不可能走上网络
OFFLINE_KEY = "offline"  # SDK 要求有一个密钥；离线线路不看它
PIECE = 6  # 流式输出时每块的字符数
Handler = Callable[[httpx2.Request], httpx2.Response]


def pieces(text: str) -> list[str]:
    """流式输出时把一段文字切成每块 `PIECE` 个字符（三种线路格式都用它）。"""
    return [text[i:i + PIECE] for i in range(0, len(text), PIECE)]


def error_body(message: str, *, type: str = "invalid_request_error",
               param: str | None = None, code: str | None = None) -> dict:
    """OpenAI 错误体里 `error` 那一层。"""
    return {"message": message, "type": type, "param": param, "code": code}


class Rejected(Exception):
    """替身拒绝这次请求：状态码加上和 OpenAI 同样形状的错误体。"""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status, self.headers = status, dict(headers or {})
        self.error = error_body(message, type=type, param=param, code=code)

    def response(self) -> httpx2.Response:
        return openai_error(self.status, self.error, self.headers)


# 认证和模型名出错时处理函数的话：OpenAI 的说法（Anthropic 的在 messages_api.ANTHROPIC_WORDS）。
# 密钥不对时不说 OpenAI 原话里的 “platform.openai.com”，而是提醒本机端点启动时给的 --api-key
OPENAI_WORDS = {
    "no_key": "You didn't provide an API key. You need to provide your API key in an Authorization header "
              "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
    "bad_key": "Incorrect API key provided. Use the key this local server was started with (--api-key).",
    "no_model": "you must provide a model parameter",
    "unknown_model": "The model `{name}` does not exist or you do not have access to it.",
}


def openai_error(status: int, error: dict, headers: dict | None = None) -> httpx2.Response:
    """OpenAI 形状的错误响应：`{"error": {...}}`（Anthropic 的形状见 `messages_api.anthropic_error`）。"""
    return json_response(status, {"error": error}, headers)


def json_response(status: int, payload: Any, headers: dict | None = None) -> httpx2.Response:
    """一个 JSON 响应（中文原样输出，UTF-8）。"""
    data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    return httpx2.Response(status, content=data, headers={"content-type": "application/json", **(headers or {})})


def with_body(request: httpx2.Request, body: dict) -> httpx2.Request:
    """同一个请求换一个 JSON 请求体：处理函数改写请求后交给下一个处理函数。"""
    headers = {k: v for k, v in request.headers.items() if k.lower() not in ("content-length", "host")}
    return httpx2.Request(request.method, request.url, headers=headers,
                          content=json.dumps(body, ensure_ascii=False).encode("utf-8"))


def route(request: httpx2.Request) -> str:
    """请求的路径去掉开头的 `/v1`：`/v1/chat/completions` → `/chat/completions`。"""
    path = request.url.path.rstrip("/")
    index = path.find("/v1/")
    return path[index + 3:] if index >= 0 else path


def stream_chunks(completion: dict, *, usage: bool = False) -> list[dict]:
    """把一条完整回复（`chat.completion` 的字典）切成流式块，顺序和真实服务商一样：先是带 `role` 的一块，
    再是协议之外的文字字段（如 `reasoning_content`）和 `content` 的片段；每个工具调用先来一块带 id、类型和
    函数名，再来参数片段；最后一块带 `finish_reason`。`usage=True` 时再加一块只带用量、choices 为空的块。"""
    choice = completion["choices"][0]
    message = choice["message"]
    head = {"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
            "model": completion["model"]}

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    content = message.get("content")
    out = [chunk({"role": "assistant", "content": "" if content is not None else None, "refusal": None})]
    for key, value in message.items():
        if key not in ("role", "content", "refusal") and isinstance(value, str):
            out += [chunk({key: p}) for p in pieces(value)]
    out += [chunk({"content": p}) for p in pieces(content or "")]
    for index, call in enumerate(message.get("tool_calls") or ()):
        function = call["function"]
        out.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                          "function": {"name": function["name"], "arguments": ""}}]}))
        out += [chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]})
                for p in pieces(function["arguments"])]
    out.append(chunk({}, choice["finish_reason"]))
    if usage and completion.get("usage") is not None:
        out.append({**head, "choices": [], "usage": completion["usage"]})
    return out


def sse_response(chunks: Iterable[dict], *, done: bool = True, named: bool = False,
                 headers: dict | None = None) -> httpx2.Response:
    """流式响应：每块一条 `data:` 事件，最后是 `data: [DONE]`（`done=False` 时没有，流就那样结束）。
    `named=True`：每条事件前面再写一行 `event: <块的 type>`（Responses 和 Anthropic 的流这样写）。"""
    def events() -> Iterator[bytes]:
        for chunk in chunks:
            name = f"event: {chunk['type']}\n" if named else ""
            yield f"{name}data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode("utf-8")
        if done:
            yield b"data: [DONE]\n\n"
    base = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}
    return httpx2.Response(200, content=events(), headers={**base, **(headers or {})})


def sse_chunks(data: bytes) -> tuple[list[dict], bool]:
    """SSE 文本 → (每个 `data:` 事件的 JSON，有没有 `[DONE]`)。"""
    chunks, done = [], False
    for line in data.decode("utf-8", "replace").splitlines():
        payload = line[5:].strip() if line.startswith("data:") else ""
        done = done or payload == "[DONE]"
        if payload and payload != "[DONE]":
            try:
                chunks.append(json.loads(payload))
            except ValueError:
                chunks.append({"_raw": payload})
    return chunks, done


CHUNKED = "x-harness-chunked"  # 替身自己的响应头：这个回复边生成边发（本机端点发送前去掉它）


def is_stream(response: httpx2.Response) -> bool:
    return response.headers.get("content-type", "").startswith("text/event-stream") or CHUNKED in response.headers


def cut_stream(response: httpx2.Response, after: int) -> httpx2.Response:
    """流式响应只放出前 `after` 块就结束：没有 `finish_reason`，也没有 `[DONE]`。别的响应原样返回。"""
    if not is_stream(response):
        return response
    chunks, _ = sse_chunks(response.read())
    return sse_response(chunks[:after], done=False, headers={"connection": "close"})


class OfflineHTTP(httpx2.Client):
    """不碰网络的 `httpx2.Client`（给 `openai.OpenAI(http_client=...)` 用）：每个请求都交给 `handler`。
    `transport`：请求先经过它（录制器的录音线路），由它再交给原来的线路；`handler` 还是原来那个。"""

    def __init__(self, handler: Handler, transport: httpx2.BaseTransport | None = None):
        super().__init__(transport=transport or httpx2.MockTransport(handler))
        self.handler = handler


class OfflineClient(RecordsCalls, openai.OpenAI):
    """真正的 `openai.OpenAI`，线路在本进程里：每个请求都交给 `handler`。`with_options(...)` 复制出的副本
    沿用同一条线路。SDK 的自动重试默认关掉（`max_retries=0`），替身的每一次回答正好对应一次请求。"""

    def __init__(self, handler: Handler | None = None, **options: Any):
        http = options.pop("http_client", None)
        if not isinstance(http, OfflineHTTP):
            if handler is None:
                raise TypeError("OfflineClient 需要一个处理函数 handler(request) -> response")
            http = OfflineHTTP(handler)
        self.offline_http = http  # 自己记下线路：SDK 没有公开取出它的 httpx 客户端的办法
        options.pop("base_url", None)
        options.setdefault("max_retries", 0)
        super().__init__(api_key=options.pop("api_key", None) or OFFLINE_KEY, base_url=OFFLINE_BASE_URL,
                         http_client=http, **options)

    @property
    def handler(self) -> Handler:
        return self.offline_http.handler


def _raised(handler: Handler, kind: type[openai.APIError]) -> openai.APIError | None:
    """让 SDK 经这个处理函数发一次请求，交回它自己构造、抛出的 `kind` 异常（没抛出时是 None）。"""
    client = OfflineClient(handler)
    try:
        client.chat.completions.create(model="offline", messages=[{"role": "user", "content": "?"}])
    except kind as exc:
        return exc
    finally:
        client.close()
    return None


def api_error(status: int, message: str, *, type: str = "invalid_request_error", param: str | None = None,
              code: str | None = None, headers: dict | None = None) -> openai.APIStatusError:
    """返回（不抛出）SDK 自己从一次这样的错误响应里构造的异常；放进脚本里，轮到它时假模型回这个状态码。"""
    answer = json_response(status, {"error": error_body(message, type=type, param=param, code=code)}, headers)
    exc = _raised(lambda request: answer, openai.APIStatusError)
    if exc is None:
        raise ValueError(f"状态码 {status} 不是错误（SDK 没有抛出异常）")
    return exc


def api_timeout() -> openai.APITimeoutError:
    """返回（不抛出）SDK 自己在一次读超时后构造的异常，带着那次真实的请求；放进脚本里，轮到它时
    假模型让传输层超时，由 SDK 自己报告（或重试）。"""
    def too_slow(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("读超时", request=request)

    exc = _raised(too_slow, openai.APITimeoutError)
    if exc is None:
        raise ValueError("SDK 没有把读超时报告成 APITimeoutError")
    return exc
