"""离线的 `anthropic.Anthropic`：`FakeClient` 的 Anthropic 版。

和 `FakeClient` 一样是真正的 SDK，只是线路（`wire.OfflineHTTP`）在本进程里：SDK 照常编请求、解析回答、
抛出 `anthropic.BadRequestError` 这样的异常；作答的是同一个假模型大脑（`fake.FakeModel`），
经 `messages_api` 译成 Anthropic 的格式。脚本也一样写：`FakeAnthropic(script=[tool_reply(...), "好了"])`。
单独一个模块：只有用到它时才导入 anthropic SDK，别的笔记本不多花这份导入时间。
"""

from __future__ import annotations

from typing import Any, Iterable

import anthropic

from ..safety.trust import trust_client
from .fake import DEFAULT_MODEL, FakeHandler, FakeModel
from .wire import OFFLINE_KEY, OfflineHTTP

OFFLINE_ORIGIN = "http://offline.invalid"  # anthropic SDK 自己在后面接 /v1/messages


class FakeAnthropic(anthropic.Anthropic):
    """离线假模型的 Anthropic 客户端。SDK 的自动重试关掉（`max_retries=0`），脚本里的每一项正好对应一次请求；
    `with_options(...)` 得到的副本共用同一个假模型。`last_request` 是最近一次请求体（SDK 发出的原样）。"""

    def __init__(self, script: Iterable[Any] | None = None, *, model: str = DEFAULT_MODEL, **options: Any):
        http = options.pop("http_client", None)
        if not isinstance(http, OfflineHTTP):  # SDK 复制出的副本沿用原来的线路
            http = OfflineHTTP(FakeHandler(FakeModel(script, model=model)))
        self.offline_http = http
        for ignored in ("base_url", "auth_token"):
            options.pop(ignored, None)
        options.setdefault("max_retries", 0)
        super().__init__(api_key=options.pop("api_key", None) or OFFLINE_KEY, base_url=OFFLINE_ORIGIN,
                         http_client=http, **options)
        trust_client(self)  # 回答它的是本项目的假模型（safety.trust）

    @property
    def fake_model(self) -> FakeModel:
        return self.offline_http.handler.responder

    model = property(lambda self: self.fake_model.model)
    script_remaining = property(lambda self: self.fake_model.script_remaining)
    last_request = property(lambda self: self.offline_http.handler.last_body)

    def __repr__(self) -> str:
        return repr(self.fake_model).replace("FakeModel", type(self).__name__, 1)
