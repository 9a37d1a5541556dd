"""本地端点：把一个处理函数（`wire` 里说的 `handler(request) -> response`）放到本机端口上。
假模型的处理函数说三种线路格式：OpenAI 的 `/v1/chat/completions` 和 `/v1/responses`（`openai.OpenAI` 的
`base_url` 用 `LocalServer.base_url`），Anthropic 的 `/v1/messages`（`anthropic.Anthropic` 的 `base_url`
用 `LocalServer.origin`，SDK 自己接上 `/v1`）。

- `serve(handler)`：在后台线程里提供任意处理函数，返回 `LocalServer`（故障、怪脾气端点也用它）；
- `start_server()`：提供离线假模型；`ensure_local_server()`：切换器里“本项目的本地端点”，进程内共享一个；
- `start_tls_server()`：HTTPS 版的假模型端点，证书由一个临时的、谁都不认识的根证书签发（像替换证书的代理）；
- 命令行 `harness-endpoint [--host 127.0.0.1] [--port 8000] [--api-key KEY] [--verbose]`（同 `python -m`）。
只用标准库的 `http.server`：HTTP/1.1 keep-alive，流式响应用分块传输编码、每个事件立刻发出，`TCP_NODELAY`。
"""

from __future__ import annotations

import argparse
import socket
import ssl
from pathlib import Path
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import httpx2

from .fake import DEFAULT_MODEL, FakeHandler, FakeModel
from .script import OTHER_PATH_MODELS
from .wire import Rejected, is_stream
from ..safety.trust import forget_url, trust_url

MAX_BODY = 10_000_000  # 请求体上限（字节）
_SKIPPED_HEADERS = {"content-length", "transfer-encoding", "connection", "x-harness-chunked"}


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # 关闭时不等待还挂着的 keep-alive 连接

    def __init__(self, address: tuple[str, int], handler: Callable, *, stream_delay: float = 0.0,
                 verbose: bool = False):
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, _Bridge)
        self.handler, self.stream_delay, self.verbose = handler, stream_delay, verbose
        self.connections = 0  # 接受过的 TCP 连接数（看 keep-alive 是否生效）

    def server_bind(self) -> None:
        # HTTPServer.server_bind 会调用 socket.getfqdn()（可能要等 DNS），这里跳过
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request: Any, client_address: Any) -> None:
        # 客户端提前断开（例如 SDK 读到 [DONE] 就关闭连接）是正常现象，不打印
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        self.connections += 1
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, address


class _Bridge(BaseHTTPRequestHandler):
    """把收到的 HTTP 请求变成 httpx 的 Request 交给处理函数，再把 Response 原样写回去。"""

    protocol_version = "HTTP/1.1"
    server_version = "harness-lib/0.1"
    timeout = 120  # 空闲的 keep-alive 连接两分钟后关闭
    wbufsize = -1  # 带缓冲写：响应头和响应体合成一次发送
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            sys.stderr.write(f"{self.client_address[0]} - {format % args}\n")

    def _serve(self) -> None:
        size = int(self.headers.get("Content-Length") or 0)  # openai SDK 总是写明请求体的长度
        if size > MAX_BODY:
            self.close_connection = True
            return self._write(Rejected(413, "Request body too large.").response())
        host, port = self.server.server_address[:2]
        request = httpx2.Request(self.command, f"http://{host}:{port}{self.path}",
                                 headers=list(self.headers.items()), content=self.rfile.read(size))
        try:
            response = self.server.handler(request)
        except Exception as exc:  # 处理函数自身的缺陷：回一个 JSON 错误，不让连接挂住
            response = Rejected(500, f"The handler failed: {type(exc).__name__}: {exc}",
                                type="server_error").response()
        self._write(response)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve

    def _write(self, response: httpx2.Response) -> None:
        self.send_response(response.status_code)
        for name, value in response.headers.items():
            if name.lower() not in _SKIPPED_HEADERS:
                self.send_header(name, value)
        if (response.headers.get("connection") or "").lower() == "close":
            self.send_header("Connection", "close")
            self.close_connection = True
        if not is_stream(response):
            data = response.read()
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        # 流式：分块传输编码，连接在流结束后还能复用；每个事件立刻发出，客户端边收边显示
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for piece in filter(None, response.iter_raw()):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
            time.sleep(self.server.stream_delay)
        self.wfile.write(b"0\r\n\r\n")


class LocalServer:
    """一个在后台线程里运行的本地端点。`base_url`（带 `/v1`）交给 `openai.OpenAI`，`origin`（不带）交给
    `anthropic.Anthropic`。"""

    def __init__(self, httpd: _HTTPServer, thread: threading.Thread, *, fake: bool = False):
        """`fake=True` 表示背后是确定的假模型：审批据此信任指向它的客户端（safety.trust）。"""
        self._httpd, self._thread, self.handler, self._fake, self.closed = httpd, thread, httpd.handler, fake, False
        self.host, self.port = httpd.server_address[:2]
        scheme = "https" if isinstance(httpd.socket, ssl.SSLSocket) else "http"
        self.origin = f"{scheme}://[{self.host}]:{self.port}" if ":" in self.host else f"{scheme}://{self.host}:{self.port}"
        self.base_url = f"{self.origin}/v1"
        if fake:
            trust_url(self.base_url)

    @property
    def connections(self) -> int:
        """到目前为止接受过的 TCP 连接数；同一个客户端复用连接时不会增加。"""
        return self._httpd.connections

    def close(self) -> None:
        """停止服务并释放端口；可以重复调用。"""
        if self.closed:
            return
        self.closed = True
        if self._fake:
            forget_url(self.base_url)
        getattr(self.handler, "stop", lambda: None)()  # 故障服务器：正在拖时间的请求立刻放手
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "LocalServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LocalServer(base_url={self.base_url!r}, {'已关闭' if self.closed else '运行中'})"


def serve(handler: Callable, host: str = "127.0.0.1", port: int = 0, *, stream_delay: float = 0.0,
          verbose: bool = False, fake: bool = False, cls: type = LocalServer,
          tls: ssl.SSLContext | None = None) -> LocalServer:
    """在后台守护线程里提供 `handler` 并立即返回一个 `cls`（默认 `LocalServer`）；给了 `tls` 就是 HTTPS。"""
    httpd = _HTTPServer((host, port), handler, stream_delay=stream_delay, verbose=verbose)
    if tls is not None:
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
                              name=f"harness_lib.endpoint:{httpd.server_address[1]}", daemon=True)
    thread.start()
    return cls(httpd, thread, fake=fake)


def start_server(host: str = "127.0.0.1", port: int = 0, *, api_key: str | None = None,
                 stream_delay: float = 0.0, verbose: bool = False) -> LocalServer:
    """在后台线程里启动提供离线假模型的本地端点（Chat Completions、Responses、Anthropic Messages 三种格式）。
    `port=0` 由系统挑空闲端口；`api_key` 不为空时请求必须带上它（`Authorization: Bearer` 或 Anthropic 的
    `x-api-key`）；`stream_delay` 是流式输出每块之间停顿的秒数（演示用）。"""
    handler = FakeHandler(FakeModel(), api_key=api_key, check_model=True)
    return serve(handler, host, port, stream_delay=stream_delay, verbose=verbose, fake=True)


DEMO_TLS = Path(__file__).with_name("demo_tls")  # 演示用的根证书和服务器证书（私钥公开，见那里的 README）


def start_tls_server(host: str = "127.0.0.1") -> LocalServer:
    """HTTPS 版的离线假模型端点。证书由 `demo_tls/ca.pem` 这个演示用的根证书签发，本机不认识它，所以客户端会报
    CERTIFICATE_VERIFY_FAILED，就像经过一个替换证书的校园网或公司代理。返回的服务器多一个 `ca_file`：
    那个根证书的路径；把环境变量 SSL_CERT_FILE 设成它，之后新建的客户端就认这个证书。"""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(DEMO_TLS / "server.pem")
    server = serve(FakeHandler(FakeModel(), check_model=True), host, 0, fake=True, tls=context)
    server.ca_file = str(DEMO_TLS / "ca.pem")
    return server


_shared: LocalServer | None = None
_shared_lock = threading.Lock()


def ensure_local_server() -> str:
    """进程内共享的本地端点的 `base_url`；第一次调用时才启动（回环地址、空闲端口）。"""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.closed:
            _shared = start_server()
        return _shared.base_url


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="harness-endpoint", description="在本机启动一个端点，由离线假模型作答："
                                     "OpenAI 的 Chat Completions 和 Responses，Anthropic 的 Messages。")
    parser.add_argument("--host", default="127.0.0.1", help="监听地址（默认只接受本机连接；全班共用时写 0.0.0.0）")
    parser.add_argument("--port", type=int, default=8000, help="端口（默认 8000；0 表示随便挑一个空闲端口）")
    parser.add_argument("--api-key", help="要求请求携带的密钥；不写则接受任何密钥")
    parser.add_argument("--verbose", action="store_true", help="打印每个请求的日志")
    args = parser.parse_args(argv)
    with start_server(args.host, args.port, api_key=args.api_key, verbose=args.verbose) as server:
        print(f"本地假模型端点已启动：{server.base_url}（openai SDK 的 base_url；anthropic SDK 用 {server.origin}）",
              flush=True)
        print(f"模型名：{DEFAULT_MODEL}（也认得走别的路的 {'、'.join(OTHER_PATH_MODELS)}）。按 Ctrl+C 停止。", flush=True)
        try:
            while server._thread.is_alive():
                server._thread.join(0.5)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
