"""网络的小工具：`is_loopback(host)` 判断一个地址是不是只通向本机（切换器据此不要密钥，故障服务器
据此挡住对外监听）；`free_port()` 找一个空闲端口；`closed_port_url()` 给出一个连上去会被拒绝的 base_url；
`DeadlineHttpClient` 给每次尝试加一个墙上时钟的截止时间。
"""

from __future__ import annotations

import ipaddress
import re
import socket
import time
from urllib.parse import urlsplit

import httpx2
import openai

# 每次尝试从发出请求到收完回复最多多少秒（墙上时钟）：服务器一直发保持连接的空行，读超时不会触发，这条会。
# 所以一次调模型最坏约 3 × 60 秒，加上两次重试之间的等待（几秒）。
CALL_DEADLINE = 60


def is_loopback(host, *, listening: bool = False) -> bool:
    """`host`（主机名、IP 地址或整个 URL）是否只通向本机：`localhost`、`127.0.0.0/8`（含 `127.1` 这样的简写）、
    `::1`、`::ffff:127.0.0.1`。`0.0.0.0` 和 `::` 作为目的地址连到本机，算；作为监听地址（`listening=True`）
    表示“所有网卡”，外面的机器也能连进来，不算。"""
    host = str(host or "").strip()
    if "://" in host:
        try:
            host = urlsplit(host).hostname or ""
        except ValueError:
            return False
    host = host.strip("[]").lower()
    if host in ("localhost", "localhost."):
        return True
    try:
        address = ipaddress.ip_address(host)
        if address.is_unspecified:
            return not listening
        return (getattr(address, "ipv4_mapped", None) or address).is_loopback
    except ValueError:
        pass
    if not re.fullmatch(r"[0-9a-fx.]+", host):  # inet_aton 会忽略空白后面的内容，先挡掉
        return False
    try:
        return socket.inet_aton(host)[0] == 127  # 127.1、2130706433 这样的旧式写法
    except OSError:
        return False


def free_port(host: str = "127.0.0.1") -> int:
    """找一个此刻没有人使用的端口号：绑定端口 0 让系统挑一个，然后马上关掉。"""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def closed_port_url(host: str = "127.0.0.1") -> str:
    """一个没有服务监听的 base_url，连上去会被拒绝（“连接被拒绝”故障）。"""
    netloc = f"[{host}]" if ":" in host else host
    return f"http://{netloc}:{free_port(host)}/v1"


class _Deadline(httpx2.SyncByteStream):
    """回复体的每一块到来时看一眼表：过了截止时间就当作读超时。"""

    def __init__(self, stream, deadline: float, seconds: float, request: httpx2.Request):
        self.stream, self.deadline, self.seconds, self.request = stream, deadline, seconds, request

    def __iter__(self):
        for chunk in self.stream:
            if time.monotonic() > self.deadline:
                raise httpx2.ReadTimeout(f"{self.seconds:g} 秒内没有收完回复（服务器可能一直在发保持连接的空行或注释）",
                                         request=self.request)
            yield chunk

    def close(self) -> None:
        self.stream.close()


class DeadlineHttpClient(openai.DefaultHttpxClient):
    """SDK 用的 HTTP 客户端，只多一条：每次尝试从发出请求算起，`seconds` 秒内收不完回复就读超时。

    httpx 的读超时管的是两块数据之间的间隔：服务器每隔几秒发一个空行（DeepSeek 排队时就这样），它永远不触发。
    截止时间在每一块到来时检查，所以最多晚一个间隔；超时照常交给 SDK 重试（`max_retries`）。
    经过代理时也一样：包的是回复体，不是某一种传输。"""

    def __init__(self, *, seconds: float, **kwargs):
        super().__init__(**kwargs)
        self.seconds = seconds

    def send(self, request, *, stream: bool = False, **kwargs):
        deadline = time.monotonic() + self.seconds
        response = super().send(request, stream=True, **kwargs)
        response.stream = _Deadline(response.stream, deadline, self.seconds, request)
        if not stream:
            try:
                response.read()
            except BaseException:
                response.close()
                raise
        return response
