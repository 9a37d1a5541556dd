"""另外两种接口（笔记本 11）：切换器选中的模型，换成 OpenAI 的 Responses API 和 Anthropic 的 Messages API 来调。

- `other_apis(client, model)`：切换器交出的客户端 → 讲 Responses 的 `Chat` 和讲 Messages 的 `Chat`，各说一句发往哪里；
- `MESSAGES`：Messages API 的 `Api`（怎样调、怎样读回复、谁替它作答、错误怎样说明），和 `ui.step` 里的 `CHAT`、
  `RESPONSES` 一样交给 `Chat(api=...)`、`run_loop(api=...)`。

单独一个模块：只有用到它时才导入 anthropic SDK（约一秒），别的笔记本不多花这份时间。
anthropic SDK 的异常换成 openai SDK 里同一种错误再查错误分类表（`models.errors`），中文说明只有一份。
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import anthropic
import openai
import pandas as pd

from ..models.call import RETRY_POLICY
from ..models.errors import EndpointError
from ..models.fake import FakeClient
from ..models.fake_anthropic import FakeAnthropic
from ..models.net import ATTEMPT_DEADLINE, DeadlineHttpClient, is_loopback
from ..safety.secrets import NO_KEY
from ..safety.trust import trust_client, trusted
from .clients import preset_for
from .step import RESPONSES, Api, Chat, as_endpoint_error, no_such_api

# anthropic 的状态码错误 → openai 里同一种（构造参数相同：message、response、body）
_SAME_ERROR = {400: openai.BadRequestError, 401: openai.AuthenticationError, 403: openai.PermissionDeniedError,
               404: openai.NotFoundError, 409: openai.ConflictError, 422: openai.UnprocessableEntityError,
               429: openai.RateLimitError}


def as_openai_error(exc: BaseException) -> BaseException:
    """anthropic SDK 的异常换成 openai SDK 里同一种（同一个 HTTP 响应、同一个错误体），错误分类表就认得它；
    别的异常原样返回。"""
    if isinstance(exc, anthropic.APITimeoutError):
        return openai.APITimeoutError(request=exc.request)
    if isinstance(exc, anthropic.APIConnectionError):
        return openai.APIConnectionError(message=str(exc), request=exc.request)
    if isinstance(exc, anthropic.APIStatusError):
        kind = _SAME_ERROR.get(exc.status_code) or (openai.InternalServerError if exc.status_code >= 500
                                                    else openai.APIStatusError)
        return kind(exc.message, response=exc.response, body=exc.body)
    if isinstance(exc, anthropic.APIResponseValidationError):
        return openai.APIResponseValidationError(response=exc.response, body=exc.body, message=exc.message)
    return exc


class NoEndpoint:
    """没有已知地址的接口：`messages.create(...)` 抛出 `EndpointError`（no_such_api），说明为什么。"""

    api_key = None

    def __init__(self, why: str):
        self.why = why
        self.messages = self

    def create(self, **request):
        raise EndpointError("no_such_api", self.why)

    def __repr__(self) -> str:
        return "NoEndpoint（没有已知的地址）"


def _stand_in(script: Any) -> FakeAnthropic:
    """替所选模型作答的离线假模型（Anthropic 版），标上【脚本示范】。"""
    fake = script if isinstance(script, FakeAnthropic) else FakeAnthropic(script=script)
    fake.stands_in = True
    return fake


def _blocks(message) -> list:
    return list(getattr(message, "content", None) or [])


MESSAGES = Api(
    "messages", "messages", "max_tokens", lambda client, **request: client.messages.create(**request),
    lambda r: r,
    lambda r: [(b.id, b.name, json.dumps(b.input, ensure_ascii=False)) for b in _blocks(r) if b.type == "tool_use"],
    lambda r: "".join(b.text for b in _blocks(r) if b.type == "text"),
    lambda r: [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in _blocks(r)]}],
    _stand_in, (anthropic.APIError, EndpointError),
    no_such_api("/v1/messages", lambda exc, key: as_endpoint_error(as_openai_error(exc), key)))


@dataclass
class OtherApis:
    """`other_apis` 的结果：两个 `Chat`（`responses`、`messages`）和一张小表（哪种接口、发往哪里、为什么）。"""

    responses: Chat
    messages: Chat
    rows: list

    def __iter__(self):  # responses_chat, messages_chat = other_apis(...)
        return iter((self.responses, self.messages))

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows).set_index("接口")

    def _repr_html_(self) -> str:
        with pd.option_context("display.max_colwidth", None):
            return self.table()._repr_html_()

    def __repr__(self) -> str:
        with pd.option_context("display.max_colwidth", None, "display.width", 0):
            return repr(self.table())


def _anthropic_client(base_url: str, key: str) -> anthropic.Anthropic:
    """真实端点的 Anthropic 客户端：重试、超时和截止时间和切换器的客户端一样（`RETRY_POLICY`、`ATTEMPT_DEADLINE`）。"""
    return anthropic.Anthropic(base_url=base_url, api_key=key or NO_KEY,
                               http_client=DeadlineHttpClient(attempt=ATTEMPT_DEADLINE), **RETRY_POLICY)


def other_apis(client, model: str) -> OtherApis:
    """切换器交出的 `(client, model)` → 讲 Responses API 的 `Chat` 和讲 Messages API 的 `Chat`。

    - 离线假模型：Responses 用同一个 `FakeClient`，Messages 用 `FakeAnthropic`（同一种假模型）；
    - 服务商另给了地址的（百炼，见 `PRESETS`）：用那个地址；
    - 本机的服务（本项目的端点、llama.cpp、Ollama……）：Responses 发往同一个 base_url，Anthropic SDK 的 base_url 去掉
      末尾的 `/v1`（它自己接上 `/v1/messages`）；本项目的端点回答两种接口，别的服务没有时回 404，说明会讲清；
    - 别的服务商：Responses 发往同一个 base_url；Messages 没有已知的地址，每次调用都说明这一点（然后【脚本示范】）。
    可信的客户端（本项目的假模型）换出来的客户端同样可信：回答它们的是同一个假模型。"""
    if isinstance(client, FakeClient):
        fake = FakeAnthropic(model=model)
        rows = [{"接口": "Responses API", "客户端": "同一个 FakeClient", "发往": "离线（POST /v1/responses）",
                 "说明": "离线假模型也认 Responses 的请求"},
                {"接口": "Messages API", "客户端": "FakeAnthropic", "发往": "离线（POST /v1/messages）",
                 "说明": "离线的 anthropic.Anthropic，背后是同一种假模型"}]
        return OtherApis(Chat(client, model, api=RESPONSES), Chat(fake, model, api=MESSAGES), rows)
    base = str(getattr(client, "base_url", "") or "").rstrip("/")
    key = getattr(client, "api_key", None) or NO_KEY
    preset = preset_for(base)
    responses, note = client, "同一个客户端，同一个 base_url"
    if preset is not None and preset.responses_base_url:
        responses = client.with_options(base_url=preset.responses_base_url)
        note = f"{preset.label} 的 Responses API 另有地址（预设里写着出处）"
    if preset is not None and preset.anthropic_base_url:
        messages, where = _anthropic_client(preset.anthropic_base_url, key), preset.anthropic_base_url
        why = f"{preset.label} 的 Anthropic 兼容地址（预设里写着出处）"
    elif is_loopback(base):
        origin = base.removesuffix("/v1")
        messages, where = _anthropic_client(origin, key), origin
        why = "本机的服务：anthropic SDK 的 base_url 不带 /v1，它自己接上 /v1/messages"
        if trusted(client):
            trust_client(messages)  # 本项目的端点：回答它的是同一个假模型
    else:
        where = "（没有）"
        why = (f"本项目没有记下 {base or '这个端点'} 的 Anthropic 兼容地址（只记了预设里写明的，比如百炼）；"
               "这一部分每次调用都会说明这一点，然后用【脚本示范】")
        messages = NoEndpoint(f"没有可用的 Messages API 地址：{why}。")
    rows = [{"接口": "Responses API", "客户端": type(responses).__name__,
             "发往": f"{str(responses.base_url).rstrip('/')}/responses", "说明": note},
            {"接口": "Messages API", "客户端": type(messages).__name__,
             "发往": where if isinstance(messages, NoEndpoint) else f"{where}/v1/messages", "说明": why}]
    return OtherApis(Chat(responses, model, api=RESPONSES), Chat(messages, model, api=MESSAGES), rows)



# 调用、回应、思考状态各认哪几个字段（三种接口的并集）
_ANATOMY_KEYS = [("调用", ("arguments", "input")), ("回应", ("tool_call_id", "output", "tool_use_id")),
                 ("思考状态", ("reasoning_content", "encrypted_content", "signature"))]


def _parts(pos: int, entry: dict):
    """一条记录里可能放着调用、回应或思考状态的地方：(在哪里, 那一块)。"""
    content = entry.get("content")
    yield f"pos {pos} · {entry.get('type') or entry['role']}", entry
    for call in entry.get("tool_calls") or []:
        yield f"pos {pos} · {entry['role']} 的 tool_calls 里", call
    for block in content if isinstance(content, list) else []:
        yield f"pos {pos} · {entry['role']} 的 {block['type']} 块", block


def anatomy(log: list) -> dict:
    """一份记录（Chat 的 messages、Responses 的输入条目或 Anthropic 的消息，都是 dict）里，第一个调用、第一个回应、
    第一份思考状态各在哪里，配对靠哪两个字段，参数是什么类型（11 的并排表，每一格都从记录里读出来）。"""
    found = {}
    for pos, entry in enumerate(log):
        for where, part in _parts(pos, entry):
            for name, keys in _ANATOMY_KEYS:
                if any(key in part.get("function", part) for key in keys):
                    found.setdefault(name, (where, part))
    missing = [name for name, _ in _ANATOMY_KEYS if name not in found]
    if missing:
        raise ValueError(f"记录里找不到{'、'.join(missing)}：这次运行没有走到调用工具那一步")
    (call_at, call), (answer_at, answer), (state_at, state) = (found[name] for name, _ in _ANATOMY_KEYS)
    args = call.get("function", call)
    key = next(k for k in _ANATOMY_KEYS[2][1] if k in state)
    return {"调用": f"{call_at}：{'、'.join(call)}", "回应": f"{answer_at}：{'、'.join(answer)}",
            "配对（调用 → 回应）": next(f"{k} → {a}" for k in call for a in answer
                                   if k != "type" and call[k] == answer[a]),
            "参数的类型": type(args.get("arguments", args.get("input"))).__name__,
            "思考状态": f"{state_at}：{key}（{len(state[key])} 个字符）"}
