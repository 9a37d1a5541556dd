"""本机网络的小工具：一个地址是不是只通向本机，以及找一个空闲端口。

- `is_loopback(host)`：主机名或整个 URL 是否只通向本机（`localhost`、`127.x.x.x`、`::1`……）。
  切换器用它判断“本机服务不需要密钥”，审批用它判断“本项目的本地端点”，故障服务器用它挡住对外监听。
- `free_port()`：此刻没有人使用的端口号。
- `closed_port_url()`：一个没有服务监听的 base_url，连上去会被拒绝。
"""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit

__all__ = ["closed_port_url", "free_port", "is_loopback"]


def is_loopback(host, *, listening: bool = False) -> bool:
    """`host` 是否只通向本机。`host` 可以是主机名、IP 地址，也可以是整个 URL（取其中的主机）。

    认得 `localhost`、`127.0.0.1` 及整个 `127.0.0.0/8`（包括 `127.1`、`2130706433` 这样的简写）、
    `::1` 及其完整写法、`::ffff:127.0.0.1`。

    `0.0.0.0` 和 `::` 要看用途：作为连接的目的地址，它们连到的就是本机，所以默认算；
    作为服务器的监听地址（`listening=True`），它们表示“所有网卡”，外面的机器也能连进来，所以不算。
    """
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
    except ValueError:
        address = None
    if address is not None:
        if address.is_unspecified:
            return not listening
        mapped = getattr(address, "ipv4_mapped", None)
        return (mapped or address).is_loopback
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
