"""每次调模型的记录：第几次、用量、用时、`finish_reason`。消息表拿它给每条助手消息标上那次调用花了多少。

假模型（`OfflineClient` 和它的子类）和切换器给真实端点的客户端（`PresetClient`）都混入 `RecordsCalls`：
每次非流式的 `chat.completions` 调用成功，记一条 `CallRecord`。学生自己新建的 `openai.OpenAI` 不记，表上就不标。
"""

from __future__ import annotations

import collections
import itertools
import time
from typing import NamedTuple


# 假模型回复的 id 以它开头（本地端点背后也是假模型）；它报的用量是估计的（`messages.token_count`：字节数除以 3）
FAKE_ID_PREFIX = "chatcmpl-fake-"


class CallRecord(NamedTuple):
    """完成的一次调用：第几次（`seq`，从 1 数起）、提示和回答各用了多少 token（服务没报就是 None）、
    从发出到收完用了几秒（SDK 自己的重试也算在内）、`finish_reason`；`estimated`：用量是假模型估计的，不是服务商数的。"""

    seq: int
    prompt_tokens: int | None
    completion_tokens: int | None
    seconds: float
    finish_reason: str | None
    estimated: bool = False


_CALLS: collections.deque = collections.deque(maxlen=1000)  # 最近的调用记录，先到先出
_count = itertools.count(1)


def calls_since(seq: int) -> list[CallRecord]:
    """第 `seq` 次之后完成的调用（按先后）。"""
    return [record for record in list(_CALLS) if record.seq > seq]


def last_call_seq() -> int:
    """到现在为止最后一次调用的序号（还没有调用过是 0）。"""
    return _CALLS[-1].seq if _CALLS else 0


def record(response, seconds: float) -> None:
    """记下一次完成的调用（`response` 是 ChatCompletion）。"""
    usage = getattr(response, "usage", None)
    _CALLS.append(CallRecord(next(_count), getattr(usage, "prompt_tokens", None),
                             getattr(usage, "completion_tokens", None), round(seconds, 3),
                             getattr(response.choices[0], "finish_reason", None),
                             str(getattr(response, "id", "")).startswith(FAKE_ID_PREFIX)))


class RecordsCalls:
    """混入 `openai.OpenAI` 的子类：每次非流式的 chat.completions 调用成功，记一条 `CallRecord`。"""

    def request(self, cast_to, options, **kwargs):
        started = time.monotonic()
        result = super().request(cast_to, options, **kwargs)
        if not kwargs.get("stream") and str(getattr(options, "url", "")).endswith("/chat/completions") \
                and getattr(result, "choices", None):
            record(result, time.monotonic() - started)
        return result
