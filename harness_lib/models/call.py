"""调一次模型，和它的几个上限：`call_model`、每次回答的 `MAX_TOKENS`、SDK 的重试与超时 `RETRY_POLICY`、
墙上时钟的三条上限 `ATTEMPT_DEADLINE`、`STREAM_SILENCE`、`CALL_CEILING`（定义在 `net`，由 `net.DeadlineHttpClient` 执行）。
出错时的中文说明在 `errors`。"""

from __future__ import annotations

import json

import openai

from .errors import bad_reply, classify, from_sdk
from .net import ATTEMPT_DEADLINE, CALL_CEILING, STREAM_SILENCE

__all__ = ["ATTEMPT_DEADLINE", "CALL_CEILING", "MAX_TOKENS", "RETRY_POLICY", "STREAM_SILENCE", "call_model"]

# 真实端点的客户端设置：失败后 SDK 自动重试 2 次，连接、读、写每一步最多等 60 秒（不是整个请求的总时长）。
# SDK 只重试 `ERROR_TABLE` 里 `sdk_retries` 为真的那几行；两次之间先看 Retry-After，没有就 0.5、1、2…… 秒退避。
RETRY_POLICY = {"max_retries": 2, "timeout": 60}
# 每次回答的长度上限（token）。原文写 8000，那是给云端大模型的；512 让上下文只有 2048 的本机小模型也装得下
MAX_TOKENS = 512


def call_model(client, **kwargs):
    """调用 `client.chat.completions.create(**kwargs)`；端点出错、回复不是 JSON 或没有 choices 时抛出
    `EndpointError`；我们自己的请求不合格（HTTP 400）原样抛出，要改的是代码。`stream=True` 时原样返回流。"""
    key = getattr(client, "api_key", None)
    try:
        response = client.chat.completions.create(**kwargs)
    except openai.BadRequestError as exc:
        if classify(exc).kind == "bad_request":
            raise  # 我们自己的请求不合格：要改代码
        raise from_sdk(exc, key) from exc  # 余额、内容审核、上下文太长：改代码没用，说清楚怎么办
    except (openai.APIError, json.JSONDecodeError, UnicodeEncodeError) as exc:
        raise from_sdk(exc, key) from exc
    if kwargs.get("stream"):  # 流式回复：块还没到，交给 collect_stream 去拼、去检查
        return response
    if isinstance(response, str):  # Content-Type 不是 JSON 时，SDK 直接把文字交回来
        raise bad_reply("bad_response", response, key)
    choices = getattr(response, "choices", None)
    if not choices or getattr(choices[0], "message", None) is None:
        raise bad_reply("no_choices", json.dumps(response.model_dump(exclude_none=True), ensure_ascii=False), key)
    return response
