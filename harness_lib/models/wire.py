"""HTTP 这一层：所有模型替身（假模型、故障、断流、回放）都在这里变成真正的 HTTP 响应。

辅助工具，不是课程内容。做法：替身只写一个“处理函数” `handler(request) -> response`
（参数和返回值都是 httpx 的对象）。同一个处理函数有两种用法：

- 离线：`offline_http(handler)` 得到一个 `httpx2.Client`，它的传输层（`MockTransport`）
  不碰网络，直接把请求交给处理函数。把它交给 `openai.OpenAI(http_client=...)`，
  得到的就是一个真正的 SDK 客户端，只是“线路”在本进程里；
- 联网：`harness_lib.models.server.serve(handler)` 在本机端口上提供同一个处理函数。

两种用法里，响应对象、异常（按真实状态码）和流式块（按 SSE 格式）都由 SDK 自己构造、
自己解析，替身不用复制 SDK 的任何一部分。

- `Rejected`：替身拒绝一次请求时抛出它，处理函数把它写成 `{"error": {...}}` 和对应的状态码；
- `json_response`、`sse_response`：写出 JSON 响应和 SSE 流式响应；
- `api_error(status, message)`：让 SDK 收一次这样的错误响应，返回 SDK 自己构造的异常对象；
- `error_response(exc)`：反过来，把一个 SDK 的状态码异常还原成 HTTP 响应。
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Iterator

import httpx2
import openai

__all__ = [
    "OFFLINE_BASE_URL",
    "OFFLINE_KEY",
    "OfflineClient",
    "OfflineHTTP",
    "Rejected",
    "api_error",
    "error_body",
    "error_response",
    "json_response",
    "offline_http",
    "route",
    "sse_response",
    "with_body",
]

# .invalid 是保留的顶级域名，永远解析不到：离线客户端的请求不可能意外走上网络
OFFLINE_BASE_URL = "http://offline.invalid/v1"
OFFLINE_KEY = "offline"  # SDK 要求有一个密钥；离线的线路不看它

Handler = Callable[[httpx2.Request], httpx2.Response]


class Rejected(Exception):
    """替身拒绝这次请求：状态码加上和 OpenAI 同样形状的错误体。"""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status = status
        self.error = error_body(message, type=type, param=param, code=code)
        self.headers = dict(headers or {})

    def response(self) -> httpx2.Response:
        """这次拒绝对应的 HTTP 响应。"""
        return json_response(self.status, {"error": self.error}, self.headers)


def error_body(message: str, *, type: str = "invalid_request_error",
               param: str | None = None, code: str | None = None) -> dict:
    """OpenAI 的错误体里 `error` 那一层：message、type、param、code。"""
    return {"message": message, "type": type, "param": param, "code": code}


def json_response(status: int, payload: Any, headers: dict | None = None) -> httpx2.Response:
    """一个 JSON 响应（中文原样输出，UTF-8）。"""
    data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    return httpx2.Response(status, content=data,
                           headers={"content-type": "application/json", **(headers or {})})


def with_body(request: httpx2.Request, body: dict) -> httpx2.Request:
    """同一个请求（方法、地址、请求头），换一个 JSON 请求体：处理函数改写请求后，交给下一个处理函数。"""
    headers = {k: v for k, v in request.headers.items() if k.lower() not in ("content-length", "host")}
    return httpx2.Request(request.method, request.url, headers=headers,
                          content=json.dumps(body, ensure_ascii=False).encode("utf-8"))


def _events(chunks: Iterable[dict], done: bool) -> Iterator[bytes]:
    for chunk in chunks:
        yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode("utf-8")
    if done:
        yield b"data: [DONE]\n\n"


def sse_response(chunks: Iterable[dict], *, done: bool = True, headers: dict | None = None) -> httpx2.Response:
    """流式响应：每个块一条 `data:` 事件，最后是 `data: [DONE]`。

    `done=False` 时不发 `[DONE]`，流就那样结束了：SDK 不报错，读的人只会发现没有 `finish_reason`。
    """
    base = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}
    return httpx2.Response(200, content=_events(chunks, done), headers={**base, **(headers or {})})


def error_response(exc: openai.APIStatusError) -> httpx2.Response:
    """把 SDK 的状态码异常还原成当时的 HTTP 响应（状态码、错误体、Retry-After 一类的响应头）。"""
    body = exc.body if isinstance(exc.body, dict) else {"message": str(exc.message)}
    keep = {k: v for k, v in exc.response.headers.items() if k.lower().startswith(("retry-after", "x-"))}
    return json_response(exc.status_code, {"error": body}, keep)


def route(request: httpx2.Request) -> str:
    """请求的路径去掉开头的 `/v1`：`/v1/chat/completions` → `/chat/completions`。"""
    path = request.url.path.rstrip("/")
    index = path.find("/v1/")
    return path[index + 3:] if index >= 0 else path


class OfflineHTTP(httpx2.Client):
    """不碰网络的 `httpx2.Client`：每个请求都交给 `handler`，`handler` 也留在属性上。"""

    def __init__(self, handler: Handler):
        super().__init__(transport=httpx2.MockTransport(handler))
        self.handler = handler


def offline_http(handler: Handler) -> OfflineHTTP:
    """给 `openai.OpenAI(http_client=...)` 用的离线线路。"""
    return OfflineHTTP(handler)


class OfflineClient(openai.OpenAI):
    """真正的 `openai.OpenAI`，只是线路在本进程里：每个请求都交给 `handler`。

    SDK 复制客户端（`with_options(...)`）时把原来的 `http_client` 传进来，这里就沿用同一条线路，
    副本和原来的客户端共用同一个替身。SDK 的自动重试默认关掉（`max_retries=0`）：
    替身的每一次回答正好对应一次请求。假模型、断流演示、回放客户端都是它的子类。
    """

    def __init__(self, handler: Handler | None = None, **options: Any):
        http = options.pop("http_client", None)
        if not isinstance(http, OfflineHTTP):
            if handler is None:
                raise TypeError("OfflineClient 需要一个处理函数 handler(request) -> response")
            http = offline_http(handler)
        api_key = options.pop("api_key", None) or OFFLINE_KEY  # 离线线路不看密钥；测试可以放一个进去
        options.pop("base_url", None)
        options.setdefault("max_retries", 0)
        super().__init__(api_key=api_key, base_url=OFFLINE_BASE_URL, http_client=http, **options)

    @property
    def handler(self) -> Handler:
        """这个客户端背后的处理函数。"""
        return self._client.handler


def api_error(status: int, message: str, *, type: str = "invalid_request_error",
              param: str | None = None, code: str | None = None,
              headers: dict | None = None) -> openai.APIStatusError:
    """返回（不抛出）一个 SDK 异常：让真正的 SDK 收一次这样的错误响应，由它挑异常类、填 `body`。

    `str(err)` 是 `"Error code: 400 - ..."`，`err.body` 是 `error` 那一层，和真实服务商一样。
    脚本模式的假模型可以把它放进脚本：轮到它时，假模型回这个状态码，SDK 再抛出同类异常。
    """
    answer = json_response(status, {"error": error_body(message, type=type, param=param, code=code)},
                           headers)
    client = openai.OpenAI(api_key=OFFLINE_KEY, base_url=OFFLINE_BASE_URL, max_retries=0,
                           http_client=offline_http(lambda request: answer))
    try:
        client.chat.completions.create(model="offline", messages=[{"role": "user", "content": "?"}])
    except openai.APIStatusError as exc:
        return exc
    finally:
        client.close()
    raise ValueError(f"状态码 {status} 不是错误（SDK 没有抛出异常）")
