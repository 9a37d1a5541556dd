"""故障端点：一个只在本机运行、故意出错的 OpenAI 兼容测试服务器。

它不是课程内容本身，只放在 ``harness_lib`` 里，07_endpoint_faults 和 tests/test_faults.py 用它。
真实端点会出的错（密钥不对、被限流、服务器出错、超时、返回网页、流式回复断掉……）
在这里都能用真正的 HTTP 复现，交给真正的 ``openai.OpenAI`` 客户端去碰。

用法：一个服务器同时提供所有故障，路径的第一段就是故障名::

    server = start_fault_server()
    client = openai.OpenAI(base_url=server.url("rate_limit"), api_key="随便", max_retries=2)
    server.hits["rate_limit"]   # 这个故障收到了几次请求（SDK 重试也算）

``start_fault_server("auth")`` 时，``server.base_url`` 就是 ``server.url("auth")``。
故障名和含义见 ``FAULTS``。“连接被拒绝”不需要服务器：``closed_port_url()`` 给出一个没有人监听的地址。

安全与收尾：只允许回环地址；请求体最多 1 MB；“超时”故障最多拖 30 秒，服务器关闭时立刻放手；
服务器默认 10 分钟后自己停下（``lifetime``），也可以用 ``with`` 或 ``close()`` 提前关掉。
"""

from __future__ import annotations

import collections
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .fake import CREATED, DEFAULT_MODEL, FakeClient
from .net import closed_port_url, free_port, is_loopback

__all__ = ["FAULTS", "FaultServer", "closed_port_url", "free_port", "start_fault_server"]

FAULTS = {
    "ok": "正常回答（由离线假模型的默认策略作答），用来对照",
    "auth": "HTTP 401：密钥不对；像真实服务商一样在报错里回显密钥的开头和结尾",
    "permission": "HTTP 403：密钥有效，但没有这个模型的权限",
    "not_found": "HTTP 404：模型名不存在",
    "rate_limit": "HTTP 429：被限流，带 Retry-After 响应头",
    "server": "HTTP 500：服务器内部错误",
    "unavailable": "HTTP 503：服务器暂时不可用（过载）",
    "timeout": "迟迟不回应，直到客户端超时放弃",
    "connection": "连接被拒绝：地址上根本没有服务在监听（不经过本服务器）",
    "html": "HTTP 200，但回来的是一个 HTML 网页（Content-Type: text/html），像代理或登录页",
    "not_json": "HTTP 200，Content-Type 写着 JSON，内容却是 HTML",
    "no_choices": "HTTP 200，合法的 JSON，但 choices 是空列表",
    "stream_cut": "流式回复发了几块就结束了，没有 finish_reason，也没有 [DONE]",
}

MAX_BODY = 1_000_000  # 请求体上限（字节）
MAX_DELAY = 30.0  # “超时”故障最多拖多少秒
RETRY_AFTER_MS = 20  # 429/5xx 建议客户端等多少毫秒再试；设得很短，演示和测试才快

_HTML_PAGE = (
    "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>请先登录</title></head>\n"
    "<body><h1>请先登录网络</h1><p>这是代理或网关返回的网页，不是模型的回复。</p></body></html>\n"
)


def _error(message: str, *, type: str, code: str | None = None, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def _masked(key: str) -> str:
    """像服务商那样回显密钥：露出开头和结尾，中间打星号。"""
    if len(key) <= 16:
        return "*" * len(key)
    return key[:8] + "*" * 12 + key[-6:]


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], *, delay: float, verbose: bool):
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, _Handler)
        self.delay = min(float(delay), MAX_DELAY)
        self.verbose = verbose
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.hits: collections.Counter = collections.Counter()
        self.log: list[dict] = []
        self.fake = FakeClient()

    def server_bind(self) -> None:
        # 跳过 HTTPServer.server_bind 里可能要等 DNS 的 getfqdn()
        import socketserver

        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request: Any, client_address: Any) -> None:
        # 客户端超时后先挂断，之后的写入失败是预料之中的，不打印
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "harness-lib-faults/0.1"
    timeout = 10  # 空闲连接 10 秒后关闭
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            sys.stderr.write(f"{self.client_address[0]} - {format % args}\n")

    def address_string(self) -> str:
        return str(self.client_address[0])

    # ---- 发送 ----
    def _send(self, status: int, body: bytes, content_type: str, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _send_json(self, status: int, payload: dict, headers: dict | None = None) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self._send(status, data, "application/json", headers)

    def _send_events(self, chunks: list[dict], *, done: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        if not done:
            self.send_header("Connection", "close")
        self.end_headers()
        events = [f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks]
        if done:
            events.append("data: [DONE]\n\n")
        for event in events:
            data = event.encode("utf-8")
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        if not done:
            self.close_connection = True

    # ---- 路由 ----
    def _fault_of(self) -> tuple[str | None, str]:
        """``/<故障名>/v1/chat/completions`` → (故障名, ``/chat/completions``)。"""
        parts = self.path.split("?", 1)[0].strip("/").split("/")
        if len(parts) >= 2 and parts[0] in FAULTS and parts[1] == "v1":
            return parts[0], "/" + "/".join(parts[2:])
        return None, ""

    def do_GET(self) -> None:
        self._send_json(404, _error(f"Invalid URL (GET {self.path})", type="invalid_request_error"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.close_connection = True
            self._send_json(413, _error("Request body too large.", type="invalid_request_error"))
            return
        raw = self.rfile.read(length)
        fault, route = self._fault_of()
        if fault is None or route != "/chat/completions":
            self._send_json(404, _error(f"Invalid URL (POST {self.path})", type="invalid_request_error"))
            return
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        with self.server.lock:
            self.server.hits[fault] += 1
            self.server.log.append({
                "故障": fault,
                "第几次尝试": int(self.headers.get("x-stainless-retry-count") or 0) + 1,
                "时间": time.monotonic(),
            })
        getattr(self, f"_fault_{fault}")(body)

    # ---- 各个故障 ----
    def _fault_ok(self, body: dict) -> None:
        try:
            result = self.server.fake.respond(body)
        except Exception as err:  # 请求本身不合格：照服务商的样子回 400
            error = getattr(err, "body", None) or {"message": str(err), "type": "invalid_request_error"}
            self._send_json(getattr(err, "status_code", 400), {"error": error})
            return
        if isinstance(result, list):
            self._send_events(result, done=True)
        else:
            self._send_json(200, result)

    def _fault_auth(self, body: dict) -> None:
        header = self.headers.get("Authorization") or ""
        key = header[7:].strip() if header.startswith("Bearer ") else ""
        self._send_json(401, _error(
            f"Incorrect API key provided: {_masked(key)}. You can find your API key in your account settings.",
            type="invalid_request_error", code="invalid_api_key"))

    def _fault_permission(self, body: dict) -> None:
        self._send_json(403, _error(
            f"Your project does not have access to model `{body.get('model')}`.",
            type="invalid_request_error", code="model_not_allowed"))

    def _fault_not_found(self, body: dict) -> None:
        self._send_json(404, _error(
            f"The model `{body.get('model')}` does not exist or you do not have access to it.",
            type="invalid_request_error", code="model_not_found"))

    def _retry_headers(self) -> dict:
        # Retry-After 以秒为单位；SDK 优先看更精细的 retry-after-ms
        return {"Retry-After": "0", "retry-after-ms": str(RETRY_AFTER_MS)}

    def _fault_rate_limit(self, body: dict) -> None:
        self._send_json(429, _error(
            "Rate limit reached for requests. Please try again later.",
            type="requests", code="rate_limit_exceeded"), self._retry_headers())

    def _fault_server(self, body: dict) -> None:
        self._send_json(500, _error(
            "The server had an error while processing your request. Sorry about that!",
            type="server_error"), self._retry_headers())

    def _fault_unavailable(self, body: dict) -> None:
        self._send_json(503, _error(
            "The engine is currently overloaded, please try again later.",
            type="server_error"), self._retry_headers())

    def _fault_timeout(self, body: dict) -> None:
        # 等到客户端放弃；服务器关闭时立刻结束，不让线程挂着
        self.server.stopping.wait(self.server.delay)
        self.close_connection = True
        if not self.server.stopping.is_set():
            self._fault_ok(body)

    def _fault_connection(self, body: dict) -> None:
        # 真正的“连接被拒绝”用 closed_port_url()；万一有请求走到这里，直接挂断
        self.close_connection = True

    def _fault_html(self, body: dict) -> None:
        self._send(200, _HTML_PAGE.encode("utf-8"), "text/html; charset=utf-8")

    def _fault_not_json(self, body: dict) -> None:
        self._send(200, _HTML_PAGE.encode("utf-8"), "application/json")

    def _fault_no_choices(self, body: dict) -> None:
        self._send_json(200, {
            "id": "chatcmpl-fault-0001", "object": "chat.completion", "created": CREATED,
            "model": body.get("model") or DEFAULT_MODEL, "choices": [],
            "usage": {"prompt_tokens": 12, "completion_tokens": 0, "total_tokens": 12},
        })

    def _fault_stream_cut(self, body: dict) -> None:
        if not body.get("stream"):
            self._send_json(400, _error(
                "This test path only serves stream=true requests.", type="invalid_request_error"))
            return
        model = body.get("model") or DEFAULT_MODEL

        def chunk(delta: dict) -> dict:
            return {"id": "chatcmpl-fault-cut", "object": "chat.completion.chunk", "created": CREATED,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]}

        pieces = ["当前目录", "中有两个 ", "Python 文", "件：app"]
        chunks = [chunk({"role": "assistant", "content": ""})] + [chunk({"content": p}) for p in pieces]
        self._send_events(chunks, done=False)


class FaultServer:
    """后台线程里运行的故障服务器。``url(故障名)`` 给出 base_url，``hits`` 记着每个故障收到几次请求。"""

    def __init__(self, httpd: _HTTPServer, thread: threading.Thread, fault: str):
        self._httpd = httpd
        self._thread = thread
        self.fault = fault
        self.host, self.port = httpd.server_address[:2]
        self.closed = False
        self._timer: threading.Timer | None = None

    def url(self, fault: str) -> str:
        """某个故障的 base_url。``"connection"`` 返回一个没有人监听的地址。"""
        if fault not in FAULTS:
            raise ValueError(f"没有名为 {fault!r} 的故障，可选：{'、'.join(FAULTS)}")
        if fault == "connection":
            return closed_port_url(self.host)
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/{fault}/v1"

    @property
    def base_url(self) -> str:
        """启动时选定的那个故障的 base_url。"""
        return self.url(self.fault)

    @property
    def hits(self) -> collections.Counter:
        """每个故障收到的请求数（``Counter``，没收到过的是 0）。SDK 的每次重试都算一次。"""
        return self._httpd.hits

    @property
    def requests(self) -> int:
        """一共收到的请求数。"""
        return sum(self._httpd.hits.values())

    @property
    def log(self) -> list[dict]:
        """每个请求一行：故障名、这是 SDK 的第几次尝试（来自请求头 x-stainless-retry-count）。"""
        return [{k: v for k, v in row.items() if k != "时间"} for row in self._httpd.log]

    def reset(self) -> None:
        """把计数和请求记录清零。"""
        with self._httpd.lock:
            self._httpd.hits.clear()
            self._httpd.log.clear()

    def close(self) -> None:
        """停止服务并释放端口；正在“拖时间”的请求立刻结束。可以重复调用。"""
        if self.closed:
            return
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
        self._httpd.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "FaultServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "已关闭" if self.closed else "运行中"
        return f"FaultServer(本机测试服务器 http://{self.host}:{self.port}，默认故障 {self.fault!r}，{state})"


def start_fault_server(fault: str = "ok", *, host: str = "127.0.0.1", port: int = 0,
                       delay: float = 5.0, lifetime: float | None = 600.0,
                       verbose: bool = False) -> FaultServer:
    """在后台守护线程里启动故障服务器并立即返回。

    ``fault`` 只决定 ``base_url`` 指向哪个故障；所有故障都能用 ``url(名字)`` 访问。
    ``host`` 只能是回环地址；``port=0`` 表示由系统挑一个空闲端口；``delay`` 是“超时”故障拖的秒数
    （最多 30 秒，要比客户端的 timeout 长）；``lifetime`` 秒后服务器自己停下，``None`` 表示不限。
    """
    if fault not in FAULTS:
        raise ValueError(f"没有名为 {fault!r} 的故障，可选：{'、'.join(FAULTS)}")
    if not is_loopback(host, listening=True):
        raise ValueError(f"故障服务器只监听本机回环地址（如 127.0.0.1、::1、localhost），收到 {host!r}")
    httpd = _HTTPServer((host, port), delay=delay, verbose=verbose)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
                              name=f"harness_lib.faults:{httpd.server_address[1]}", daemon=True)
    thread.start()
    server = FaultServer(httpd, thread, fault)
    if lifetime is not None:
        server._timer = threading.Timer(lifetime, server.close)
        server._timer.daemon = True
        server._timer.start()
    return server
