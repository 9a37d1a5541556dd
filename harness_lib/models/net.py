"""本机网络的小工具：`is_loopback(host)` 判断一个地址是不是只通向本机（切换器据此不要密钥，故障服务器
据此挡住对外监听）；`free_port()` 找一个空闲端口；`closed_port_url()` 给出一个连上去会被拒绝的 base_url。
"""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit

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
