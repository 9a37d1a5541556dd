"""本地 OpenAI 兼容端点：在本机用 HTTP 提供离线假模型。

它不是课程内容本身，只放在 ``harness_lib`` 里。有了它，笔记本可以用真正的
``openai.OpenAI(base_url=..., api_key=...)`` 走一遍真实的 HTTP 往返，
而回复仍由 ``harness_lib.fake`` 的默认策略决定（离线、结果固定）。

* 命令行：``python -m harness_lib.server [--host 127.0.0.1] [--port 8000] [--api-key KEY]``
* 代码里：``with start_server() as server: ... server.base_url``
* 模型切换器里的“本项目的本地端点”：``ensure_local_server()`` 按需启动一个进程内共享的端点。

只用标准库（``http.server``）。支持的路径：

* ``POST /v1/chat/completions``（含 ``stream=true`` 的 SSE 流式输出）
* ``GET /v1/models`` 与 ``GET /v1/models/<id>``
"""

from __future__ import annotations

import argparse
import hmac
import itertools
import json
import socket
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai

from .fake import CREATED, DEFAULT_MODEL, OWNED_BY, FakeClient

__all__ = ["LocalServer", "ensure_local_server", "main", "start_server"]


def _error(message: str, *, type: str = "invalid_request_error",
           param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def _model_known(name: Any) -> bool:
    """接受 ``fake-agent-1``，以及任何以 ``fake`` 开头的模型名。"""
    return isinstance(name, str) and name.startswith("fake")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # 关闭时不等待还挂着的 keep-alive 连接

    def __init__(self, address: tuple[str, int], *, api_key: str | None = None,
                 stream_delay: float = 0.0, verbose: bool = False):
        super().__init__(address, _Handler)
        self.api_key = api_key
        self.stream_delay = stream_delay
        self.verbose = verbose
        self.fake = FakeClient()
        self.request_ids = itertools.count(1)
        self.connections = 0  # 接受过的 TCP 连接数（看 keep-alive 是否生效）

    def server_bind(self) -> None:
        # HTTPServer.server_bind 会调用 socket.getfqdn()（可能要等 DNS），这里跳过
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request: Any, client_address: Any) -> None:
        # 客户端提前断开（例如 SDK 读到 [DONE] 就关闭连接）是正常现象，不打印
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        self.connections += 1
        # 小响应立即发出，不等 Nagle 算法攒包
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, address


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "harness-lib-fake/0.1"
    timeout = 120  # 空闲的 keep-alive 连接两分钟后关闭
    wbufsize = -1  # 带缓冲写：响应头和响应体合成一次发送，每个请求结束时统一 flush
    server: _HTTPServer

    # ---- 日志：默认不输出；不做反向 DNS 查询 ----
    def address_string(self) -> str:
        return str(self.client_address[0])

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            sys.stderr.write(f"{self.address_string()} - {format % args}\n")

    # ---- 读写 ----
    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is not None:
            return self.rfile.read(int(length))
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        return b""

    def _send_json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", f"req_fake_{next(self.server.request_ids):06d}")
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, chunks: list[dict]) -> None:
        # HTTP/1.1 下用分块传输编码，连接在流结束后还能复用
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", f"req_fake_{next(self.server.request_ids):06d}")
        self.end_headers()
        delay = self.server.stream_delay
        events = [f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks]
        events.append("data: [DONE]\n\n")
        for event in events:
            data = event.encode("utf-8")
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()  # 每个事件立刻发出，客户端边收边显示
            if delay:
                time.sleep(delay)
        self.wfile.write(b"0\r\n\r\n")

    def _authorized(self) -> bool:
        expected = self.server.api_key
        if expected is None:
            return True
        header = self.headers.get("Authorization") or ""
        if not header.startswith("Bearer ") or not header[7:].strip():
            self._send_json(401, _error(
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."))
            return False
        # 只比较、不回显：错误信息里绝不出现收到的密钥
        if not hmac.compare_digest(header[7:].strip().encode(), expected.encode()):
            self._send_json(401, _error(
                "Incorrect API key provided. Use the key this local server was started with "
                "(--api-key).", code="invalid_api_key"))
            return False
        return True

    @staticmethod
    def _route(path: str) -> str:
        path = path.split("?", 1)[0].rstrip("/")
        return path[3:] if path.startswith("/v1/") else path

    def _not_found(self) -> None:
        self._send_json(404, _error(f"Invalid URL ({self.command} {self.path})"))

    # ---- 路由 ----
    def do_GET(self) -> None:
        self._read_body()
        if not self._authorized():
            return
        route = self._route(self.path)
        if route == "/models":
            self._send_json(200, {"object": "list", "data": [_model_info(DEFAULT_MODEL)]})
        elif route.startswith("/models/"):
            name = route[len("/models/"):]
            if _model_known(name):
                self._send_json(200, _model_info(name))
            else:
                self._send_json(404, _unknown_model(name))
        else:
            self._not_found()

    def do_POST(self) -> None:
        raw = self._read_body()
        if not self._authorized():
            return
        if self._route(self.path) != "/chat/completions":
            self._not_found()
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send_json(400, _error(
                "We could not parse the JSON body of your request. The body must be a JSON "
                "object sent with Content-Type: application/json."))
            return
        if not isinstance(body, dict):
            self._send_json(400, _error(
                "Invalid type for request body: expected an object.", code="invalid_type"))
            return
        model = body.get("model")
        if model is None:
            self._send_json(400, _error("you must provide a model parameter"))
            return
        if not _model_known(model):
            self._send_json(404, _unknown_model(model))
            return
        try:
            result = self.server.fake.respond(body)
        except openai.APIStatusError as err:
            self._send_json(err.status_code, {"error": err.body})
            return
        except Exception as err:  # 假模型自身的缺陷：照样回一个 JSON 错误，不让连接挂住
            self._send_json(500, _error(f"The fake model failed: {type(err).__name__}: {err}",
                                        type="server_error"))
            return
        if isinstance(result, list):
            self._send_stream(result)
        else:
            self._send_json(200, result)

    def _other(self) -> None:
        self._read_body()
        self._not_found()

    do_PUT = do_DELETE = do_PATCH = _other


def _model_info(name: str) -> dict:
    return {"id": name, "object": "model", "created": CREATED, "owned_by": OWNED_BY}


def _unknown_model(name: Any) -> dict:
    return _error(f"The model `{name}` does not exist or you do not have access to it.",
                  code="model_not_found")


class LocalServer:
    """一个在后台线程里运行的本地端点。``base_url`` 交给 ``openai.OpenAI`` 使用。"""

    def __init__(self, httpd: _HTTPServer, thread: threading.Thread):
        self._httpd = httpd
        self._thread = thread
        self.host, self.port = httpd.server_address[:2]
        self.base_url = f"http://{self.host}:{self.port}/v1"
        self.closed = False

    @property
    def connections(self) -> int:
        """到目前为止接受过的 TCP 连接数；同一个客户端复用连接时不会增加。"""
        return self._httpd.connections

    def close(self) -> None:
        """停止服务并释放端口；可以重复调用。"""
        if self.closed:
            return
        self.closed = True
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "LocalServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "已关闭" if self.closed else "运行中"
        return f"LocalServer(base_url={self.base_url!r}, {state})"


def start_server(host: str = "127.0.0.1", port: int = 0, *, api_key: str | None = None,
                 stream_delay: float = 0.0, verbose: bool = False) -> LocalServer:
    """在后台守护线程里启动本地端点并立即返回。

    ``port=0`` 表示由系统挑一个空闲端口；``api_key`` 不为空时，请求必须带
    ``Authorization: Bearer <api_key>``；``stream_delay`` 是流式输出时每块之间
    停顿的秒数（演示用，默认不停顿）。
    """
    httpd = _HTTPServer((host, port), api_key=api_key, stream_delay=stream_delay, verbose=verbose)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
                              name=f"harness_lib.server:{httpd.server_address[1]}", daemon=True)
    thread.start()
    return LocalServer(httpd, thread)


_shared: LocalServer | None = None
_shared_lock = threading.Lock()


def ensure_local_server() -> str:
    """返回进程内共享的本地端点的 ``base_url``；第一次调用时才启动（回环地址、空闲端口）。"""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.closed:
            _shared = start_server()
        return _shared.base_url


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m harness_lib.server",
        description="在本机启动一个 OpenAI 兼容端点，由离线假模型作答。",
    )
    parser.add_argument("--host", default="127.0.0.1", help="监听地址（默认 127.0.0.1，只接受本机连接）")
    parser.add_argument("--port", type=int, default=8000, help="端口（默认 8000；0 表示随便挑一个空闲端口）")
    parser.add_argument("--api-key", default=None, help="要求请求携带的密钥；不写则接受任何密钥")
    parser.add_argument("--stream-delay", type=float, default=0.0, help="流式输出每块之间停顿的秒数（演示用）")
    parser.add_argument("--verbose", action="store_true", help="打印每个请求的日志")
    args = parser.parse_args(argv)

    httpd = _HTTPServer((args.host, args.port), api_key=args.api_key,
                        stream_delay=args.stream_delay, verbose=args.verbose)
    host, port = httpd.server_address[:2]
    print(f"本地假模型端点已启动：http://{host}:{port}/v1", flush=True)
    print(f"模型名：{DEFAULT_MODEL}。按 Ctrl+C 停止。", flush=True)
    try:
        httpd.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()


if __name__ == "__main__":
    main()
