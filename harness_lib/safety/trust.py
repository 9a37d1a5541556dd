"""谁提出的工具调用可信：由本项目的假模型回答的客户端。

可信的只有两种，都由回答它的那一方登记，不看客户端是什么类：
- 离线线路上的假模型客户端：`FakeClient` 建好时调用 `trust_client(self)`；
- 本进程里还开着的假模型端点：`start_server` 启动时 `trust_url(base_url)`，关闭时 `forget_url(base_url)`。
  `base_url` 指向它的任何 `openai.OpenAI` 都可信；别的进程开的端点、已经关掉的端点都不算。

其余一律不可信（fail closed）：真实端点、回放录像、`None`、没有 `base_url` 的对象。
审批（`approval.guard`）只问这里。本模块只用标准库，课程层的循环导入它也不会带进假模型或端点。
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

__all__ = ["forget_url", "trust_client", "trust_url", "trusted"]

_clients: "weakref.WeakSet[Any]" = weakref.WeakSet()
_urls: set[str] = set()
_lock = threading.Lock()


def _normal(base_url: Any) -> str:
    return str(base_url or "").strip().rstrip("/")


def trust_client(client: Any) -> Any:
    """登记一个由本项目的假模型回答的客户端，原样返回它。"""
    with _lock:
        _clients.add(client)
    return client


def trust_url(base_url: Any) -> None:
    """登记本进程里刚启动的假模型端点。"""
    with _lock:
        _urls.add(_normal(base_url))


def forget_url(base_url: Any) -> None:
    """端点关闭了：这个地址不再可信。"""
    with _lock:
        _urls.discard(_normal(base_url))


def trusted(client: Any) -> bool:
    """这个客户端提出的调用可不可信：登记过的假模型客户端，或者指向本进程里开着的假模型端点。"""
    with _lock:
        try:
            if client in _clients:
                return True
        except TypeError:  # 不能弱引用的对象（None、数字……）不可能登记过
            pass
        try:
            base_url = getattr(client, "base_url", None)
        except Exception:  # noqa: BLE001  任何古怪的对象都按不可信处理
            return False
        return base_url is not None and _normal(base_url) in _urls
