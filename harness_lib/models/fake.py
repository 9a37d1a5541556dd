"""离线假模型：不联网、结果固定，用来代替 `openai.OpenAI`（做法类似 mini-swe-agent 的 `DeterministicModel`）。

`FakeClient()` 用默认策略（`script.default_reply`）；`FakeClient(script=[...])` 每次 `create()` 按顺序取
一条写好的回复（`text_reply`、`tool_reply`，或 `api_error(...)` 这样的异常）。SDK 照常编出 HTTP 请求，
交给 `FakeHandler`（本地端点用的也是它）；`FakeModel` 先像服务商一样检查请求（`checks`），再作答。
`FakeModel` 只懂 Chat Completions；`client.responses.create(...)` 的请求由 `responses_api` 译给它再译回来，
Anthropic 的 `/v1/messages` 由 `messages_api` 译（客户端是 `fake_anthropic.FakeAnthropic`）。
"""

from __future__ import annotations

import hmac
import itertools
import json
from typing import Any, Iterable

import httpx2
import openai

from ..safety.trust import trust_client
from .calls import FAKE_ID_PREFIX
from .checks import bad, check_request, is_given, wrong_type
from .messages import as_dict, text_of, token_count
# scripted_call、api_error 在这里没有用到：写脚本的人常从这里一起导入
from .script import OTHER_COMMANDS, TALK_ONLY, default_reply, scripted_call, text_reply, tool_reply
from .messages_api import MessagesAPI
from .responses_api import ResponsesAPI
from .wire import (OPENAI_WORDS, OfflineClient, OfflineHTTP, Rejected, api_error, cut_stream, error_body,
                   json_response, openai_error, route, sse_response, stream_chunks)

DEFAULT_MODEL = "fake-agent-1"


def _model_info(name: str) -> dict:
    return {"id": name, "object": "model", "created": CREATED, "owned_by": "harness_lib"}
CREATED = 1767225600  # 固定的创建时间（2026-01-01 00:00:00 UTC），让输出每次都一样


class ScriptExhaustedError(openai.OpenAIError, RuntimeError):
    """脚本里的回复用完了，却还有人调用 `create()`。SDK 对 `OpenAIError` 原样放行，不重试。"""


def _script_item(item: Any) -> Any:
    if isinstance(item, BaseException) or (isinstance(item, dict) and item.get("role") == "assistant"):
        return item  # 异常轮到它时直接抛出，用来模拟接口出错
    if isinstance(item, str):
        return text_reply(item)
    if isinstance(item, dict) and item.get("type") == "function" and "function" in item:
        return tool_reply(item)  # 单独一个 scripted_call(...) 也可以放进脚本
    raise TypeError("脚本里的每一项应当是 text_reply(...)、scripted_call(...)、tool_reply(...)、"
                    f"字符串或异常对象，收到的是 {item!r}")


def _tokens(message: dict) -> int:
    """一条消息的 token 数，粗略估计（`messages.token_count`），每个调用另加 8。"""
    calls = message.get("tool_calls") or ()
    texts = [text_of(message.get("content")), *(c["function"]["arguments"] for c in calls)]
    return sum(map(token_count, texts)) + 8 * (len(texts) - 1)


def prompt_tokens(msgs: list[dict], tools: list[dict]) -> int:
    """请求里 messages 和 tools 的 token 数（粗略估计）。"""
    return 3 + 60 * len(tools) + sum(4 + _tokens(m) for m in msgs)


def _truncate(reply: dict, max_tokens: int) -> dict:
    """回复超过 max_tokens 时像真实模型一样被截断（参数被截断后通常不再是合法 JSON）。"""
    budget = max_tokens * 3  # 和 _tokens 同样的换算
    content = (reply.get("content") or "").encode("utf-8")[:budget].decode("utf-8", "ignore")
    budget -= len(content.encode("utf-8"))
    calls = []
    for c in reply.get("tool_calls") or ():
        if budget > 0:
            calls.append({**c, "function": {**c["function"], "arguments": c["function"]["arguments"][:budget]}})
        budget -= len(c["function"]["arguments"])
    if calls:
        return {"role": "assistant", "content": content or None, "tool_calls": calls}
    return {"role": "assistant", "content": content}


class FakeModel:
    """假模型的“大脑”：请求体（字典）进，响应体（字典）出，不知道 HTTP 和 SDK。`script` 为 None 时用默认策略，
    否则按顺序取脚本里的回复，用完后抛出 `ScriptExhaustedError`。`last_request` 是最近一次请求。"""

    def __init__(self, script: Iterable[Any] | None = None, *, model: str = DEFAULT_MODEL):
        self.model, self._position, self._ids = model, 0, itertools.count(1)
        self._script = None if script is None else [_script_item(item) for item in script]
        self.last_request: dict | None = None

    @property
    def script_remaining(self) -> int | None:
        """脚本里还剩几条回复；默认策略下是 None。"""
        return None if self._script is None else len(self._script) - self._position

    def __repr__(self) -> str:
        if self._script is None:
            return f"FakeModel(model={self.model!r}, 默认策略)"
        return f"FakeModel(model={self.model!r}, 脚本 {len(self._script)} 条，剩 {self.script_remaining} 条)"

    def respond(self, request: dict) -> dict | list[dict]:
        """回答一次请求体：`chat.completion` 的字典（流式时是块的列表）；不合规时抛出 400 的异常。"""
        request = {k: v for k, v in request.items() if is_given(v)}  # NOT_GIVEN / omit 和没传一样
        tools, tool_choice = request.get("tools"), request.get("tool_choice")
        msgs = check_request(request.get("messages"), tools, tool_choice=tool_choice)
        tools = [as_dict(t) for t in tools or ()]
        self.last_request = {**request, "messages": msgs, "tools": tools or None}
        param = "max_completion_tokens" if "max_completion_tokens" in request else "max_tokens"
        max_tokens = request.get(param)
        if max_tokens is not None and type(max_tokens) is not int:
            raise wrong_type(param, "an integer", max_tokens)
        if max_tokens is not None and max_tokens < 1:
            raise bad(f"Invalid '{param}': integer below minimum value. Expected a value >= 1, "
                      f"but got {max_tokens} instead.", param, "integer_below_min_value")

        model = request.get("model")
        reply = self._next_scripted() if self._script is not None else \
            default_reply(msgs, tools, tool_choice, model or self.model)
        finish = "tool_calls" if reply.get("tool_calls") else "stop"
        if self._script is None and max_tokens is not None and _tokens(reply) + 1 > max_tokens:
            reply, finish = _truncate(reply, max_tokens), "length"
        used = sum(len(m.get("tool_calls") or ()) for m in msgs)  # 新的调用 id 接着往下编
        calls = [c if c.get("id") else {"id": f"call_{n:03d}", **c}
                 for n, c in enumerate(reply.get("tool_calls") or (), start=used + 1)]
        thought = reply.get("reasoning_content")  # 脚本里写了思考文字就带上（另外两种线路格式译成推理条目、thinking 块）
        message = {"role": "assistant", "content": reply.get("content"), "refusal": None,
                   **({"reasoning_content": thought} if isinstance(thought, str) else {}),
                   **({"tool_calls": calls} if calls else {})}
        prompt, completion = prompt_tokens(msgs, tools), max_tokens if finish == "length" else _tokens(message) + 1
        answer = {"id": f"{FAKE_ID_PREFIX}{next(self._ids):04d}", "object": "chat.completion", "created": CREATED,
                  "model": model, "choices": [{"index": 0, "message": message, "logprobs": None,
                                               "finish_reason": finish}],
                  "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                            "total_tokens": prompt + completion}}
        if not request.get("stream"):
            return answer
        options = request.get("stream_options")
        return stream_chunks(answer, usage=isinstance(options, dict) and bool(options.get("include_usage")))

    def _next_scripted(self) -> dict:
        if self._position >= len(self._script):
            raise ScriptExhaustedError(
                f"脚本里只有 {len(self._script)} 条回复，已经全部用完，这是第 {self._position + 1} 次调用 create()。"
                "请在 FakeClient(script=[...]) 里补上回复，或检查循环是否多调用了一次模型。")
        item = self._script[self._position]
        self._position += 1
        if isinstance(item, BaseException):
            raise item
        return item


class ChatAPI:
    """Chat Completions（`POST /chat/completions`）：大脑本来就说这种格式，请求原样交给它。
    另外两种线路格式在 `responses_api.ResponsesAPI` 和 `messages_api.MessagesAPI`，三者的样子相同：
    `answer(body, respond)` 作答，`error(...)` 写出这种格式的错误，`words` 是认证和模型名出错时的话。"""

    words = OPENAI_WORDS
    error = staticmethod(openai_error)

    def answer(self, body: dict, respond: Any) -> httpx2.Response:
        result = respond(body)
        return sse_response(result) if isinstance(result, list) else json_response(200, result)


def _keys(request: httpx2.Request) -> list[str]:
    """请求带的密钥：OpenAI 的 `Authorization: Bearer …`，或 Anthropic 的 `x-api-key`。"""
    header = request.headers.get("authorization") or ""
    bearer = header[7:].strip() if header.startswith("Bearer ") else ""
    return [key for key in (bearer, (request.headers.get("x-api-key") or "").strip()) if key]


class FakeHandler:
    """处理函数：按路径选线路格式（Chat Completions、Responses、Anthropic Messages），把请求交给
    `responder.respond(body)`（Chat 形状），把结果写成那种格式的 HTTP 响应。`api_key` 不为空时请求必须带上它
    （`Authorization: Bearer` 或 `x-api-key` 都行；报错里绝不回显收到的密钥）；`check_model=True` 时只认
    `fake` 开头的模型名（本地端点这样做）。`last_body` 是最近一次请求体的原样（哪种格式就是哪种）。"""

    def __init__(self, responder: Any, *, api_key: str | None = None, check_model: bool = False):
        self.responder, self.api_key, self.check_model = responder, api_key, check_model
        self.apis = {"/chat/completions": ChatAPI(), "/responses": ResponsesAPI(), "/messages": MessagesAPI()}
        self.last_body: dict | None = None
        self._request_ids = itertools.count(1)

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        response = self._answer(request)
        response.headers["x-request-id"] = f"req_fake_{next(self._request_ids):06d}"
        return response

    def _answer(self, request: httpx2.Request) -> httpx2.Response:
        path = route(request)
        api = self.apis.get(path, self.apis["/chat/completions"])

        def reject(status: int, message: str, **fields: Any) -> httpx2.Response:
            return api.error(status, error_body(message, **fields))

        keys = _keys(request)
        if self.api_key is not None and not keys:
            return reject(401, api.words["no_key"])
        if self.api_key is not None and not any(hmac.compare_digest(key.encode(), self.api_key.encode())
                                                for key in keys):  # 比较的耗时与内容无关
            return reject(401, api.words["bad_key"], code="invalid_api_key")
        name = getattr(self.responder, "model", None) or DEFAULT_MODEL
        if request.method == "GET" and (path == "/models" or path.startswith("/models/")):
            wanted = path[len("/models/"):] or name
            if wanted != name and not (self.check_model and wanted.startswith("fake")):
                return reject(404, api.words["unknown_model"].format(name=wanted), code="model_not_found")
            if path != "/models":
                return json_response(200, _model_info(wanted))
            # 列表：所选的名字在前，再是本项目另外两个会走别的路的假模型（README 里写着，切换器里可以填）
            names = [name, *(m for m in (TALK_ONLY, OTHER_COMMANDS) if m != name)] if self.check_model else [name]
            return json_response(200, {"object": "list", "data": [_model_info(m) for m in names]})
        if request.method != "POST" or path not in self.apis:
            return reject(404, f"Invalid URL ({request.method} {request.url.path})")
        try:
            body = json.loads(request.content)
        except ValueError:
            return reject(400, "We could not parse the JSON body of your request. The body must be a JSON "
                               "object sent with Content-Type: application/json.")
        if not isinstance(body, dict):
            return reject(400, "Invalid type for request body: expected an object.", code="invalid_type")
        self.last_body = body
        if body.get("model") is None:
            return reject(400, api.words["no_model"])
        if self.check_model and not (isinstance(body["model"], str) and body["model"].startswith("fake")):
            # 本地端点认得任何以 fake 开头的模型名
            return reject(404, api.words["unknown_model"].format(name=body["model"]), code="model_not_found")
        try:
            return api.answer(body, self.responder.respond)
        except Rejected as rejected:
            return api.error(rejected.status, rejected.error, rejected.headers)
        except openai.APIStatusError as exc:  # 请求检查的 400，或脚本里的 api_error(...)：照原样回
            error = exc.body if isinstance(exc.body, dict) else {"message": str(exc.message)}
            keep = {k: v for k, v in exc.response.headers.items() if k.lower().startswith(("retry-after", "x-"))}
            return api.error(exc.status_code, error, keep)
        except openai.APITimeoutError:  # 脚本里的超时：让传输层超时，由 SDK 自己报告
            raise httpx2.ReadTimeout("脚本安排的超时", request=request) from None
        except openai.APIConnectionError:
            raise httpx2.ConnectError("脚本安排的连接失败", request=request) from None
        except ScriptExhaustedError:
            raise
        except Exception as exc:  # 假模型自身的缺陷：照样回一个 JSON 错误，不让连接挂住
            return reject(500, f"The fake model failed: {type(exc).__name__}: {exc}", type="server_error")


class FakeClient(OfflineClient):
    """离线假模型：一个真正的 `openai.OpenAI`，请求不出本进程，由 `FakeModel` 作答。SDK 的自动重试关掉，
    脚本里的每一项正好对应一次请求；`with_options(...)` 得到的副本共用同一个假模型。
    `stands_in`：它在替所选模型作答（【脚本示范】），`Chat` 和 `run_loop` 换上它时设成 True。"""

    stands_in = False

    def __init__(self, script: Iterable[Any] | None = None, *, model: str = DEFAULT_MODEL, **options: Any):
        copied = isinstance(options.get("http_client"), OfflineHTTP)  # SDK 复制出的副本沿用原来的线路
        self._model = None if copied else FakeModel(script, model=model)
        super().__init__(None if copied else self._make_handler(), **options)
        trust_client(self)  # 回答它的是本项目的假模型：审批信任它提出的调用（safety.trust）

    def _make_handler(self):
        return FakeHandler(self)

    @property
    def fake_model(self) -> FakeModel:
        responder = getattr(self.handler, "responder", self)
        return self._model if responder is self else responder.fake_model

    def respond(self, request: dict) -> dict | list[dict]:
        return self.fake_model.respond(request)

    model = property(lambda self: self.fake_model.model)
    last_request = property(lambda self: self.fake_model.last_request)
    script_remaining = property(lambda self: self.fake_model.script_remaining)

    def __repr__(self) -> str:
        return repr(self.fake_model).replace("FakeModel", type(self).__name__, 1)


class _CutStreams:
    """处理函数的包装：第 `cut_on` 次（不写就是每一次）流式请求只放出前 `after` 块（`wire.cut_stream`）。"""

    def __init__(self, inner: FakeHandler, after: int, cut_on: set[int] | None):
        self.inner, self.responder, self.after, self.cut_on, self.calls = inner, inner.responder, after, cut_on, 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.calls += 1
        response = self.inner(request)
        if self.cut_on is not None and self.calls not in self.cut_on:
            return response
        return cut_stream(response, self.after)


class CutStreamClient(FakeClient):
    """演示用：流式回复只放出前 `after` 块就结束，像连接中途断开。`CutStreamClient(FakeClient(), after=4)`
    和给定的假模型共用同一个“大脑”；`cut_on` 是要截断的第几次调用（从 1 开始），不写就截断每一次。"""

    def __init__(self, client: FakeClient | None = None, after: int = 5, *,
                 cut_on: Iterable[int] | None = None, **options: Any):
        if not isinstance(options.get("http_client"), OfflineHTTP):
            inner = FakeHandler(client if client is not None else FakeClient())
            cut_on = None if cut_on is None else set(cut_on)
            options["http_client"] = OfflineHTTP(_CutStreams(inner, after, cut_on))
        super().__init__(**options)
