"""谁提出的工具调用可信：由本项目的假模型回答的客户端，由回答它的一方登记，其余一律不可信（fail closed）。

`FakeClient` 建好时 `trust_client(self)`；`start_server` 启动时 `trust_url(base_url)`、关闭时 `forget_url`，
所以只有 `base_url` 指向本进程里还开着的假模型端点的客户端可信。审批（`approval.guard`）只问这里。
"""

import weakref

_clients = weakref.WeakSet()
_urls: set[str] = set()


def _normal(base_url) -> str:
    return str(base_url or "").strip().rstrip("/")


def trust_client(client):
    """登记一个由本项目的假模型回答的客户端，原样返回它。"""
    _clients.add(client)
    return client


def trust_url(base_url) -> None:
    _urls.add(_normal(base_url))


def forget_url(base_url) -> None:
    _urls.discard(_normal(base_url))


def trusted(client) -> bool:
    """登记过的假模型客户端，或者 `base_url` 指向本进程里开着的假模型端点。"""
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
