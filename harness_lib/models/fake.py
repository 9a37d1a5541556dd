"""离线假模型：不联网、结果固定，用来代替 ``openai.OpenAI``。

它不是课程内容本身，所以只放在 ``harness_lib`` 里，笔记本直接导入使用
（做法类似 mini-swe-agent 自带的 ``DeterministicModel``）。

两种用法：

* ``FakeClient()``：默认策略。只看请求本身（无状态）决定回复，
  认得原文的例子“列出当前目录中的 Python 文件”和几类简单请求。
* ``FakeClient(script=[...])``：脚本模式。每次 ``create()`` 按顺序取出一条
  事先写好的回复，用 ``text_reply``、``scripted_call``、``tool_reply`` 来写。
  需要精确控制模型输出的单元格（比如坏掉的 JSON 参数）用这种模式。

分在三个模块里：请求检查在 ``request_checks``，默认策略和写脚本的三个函数在 ``fake_policy``，
这里是把它们接到 HTTP 上的部分（``FakeModel``、``FakeHandler``、``FakeClient``、``CutStreamClient``）。

``FakeClient`` 就是一个真正的 ``openai.OpenAI``，只是它的线路（HTTP 传输层）在本进程里：
请求照常由 SDK 编成 HTTP 请求，交给 ``FakeHandler``；``FakeHandler`` 让 ``FakeModel`` 决定回复，
写成 JSON 或 SSE 响应；SDK 再照常解析，构造 ``ChatCompletion``、流式块和异常。
本地端点 ``harness_lib.models.server`` 在本机端口上提供的是同一个 ``FakeHandler``。

无论哪种模式，每次请求都先像真实服务商一样检查 ``messages`` 的结构，
不合规就回 HTTP 400，SDK 抛出 ``openai.BadRequestError``。
"""

from __future__ import annotations

import hmac
import itertools
import json
from typing import Any, Iterable

import httpx2
import openai

from .script import default_reply, text_of, text_reply, scripted_call, tool_reply
from .checks import as_dict, bad, check_request, is_given, validate, wrong_type
from ..safety.trust import trust_client
from .wire import (
    OfflineClient,
    OfflineHTTP,
    Rejected,
    api_error,
    error_response,
    json_response,
    offline_http,
    route,
    sse_response,
)

__all__ = [
    "DEFAULT_MODEL",
    "CutStreamClient",
    "FakeClient",
    "FakeHandler",
    "FakeModel",
    "ScriptExhaustedError",
    "api_error",
    "check_request",
    "is_fake_model_name",
    "text_reply",
    "scripted_call",
    "tool_reply",
]

DEFAULT_MODEL = "fake-agent-1"
# 固定的创建时间（2026-01-01 00:00:00 UTC），让输出每次都一样。
CREATED = 1767225600
OWNED_BY = "harness_lib"

_STREAM_PIECE = 6  # 流式输出时每一块的字符数


class ScriptExhaustedError(openai.OpenAIError, RuntimeError):
    """脚本里的回复用完了，却还有人调用 ``create()``。

    它是 `openai.OpenAIError` 的子类：SDK 对这类异常原样放行，不重试、也不改包成连接错误，
    所以调用 ``create()`` 的人收到的就是它。
    """


def _script_item(item: Any) -> Any:
    if isinstance(item, BaseException):
        return item  # 轮到它时直接抛出，用来模拟接口出错
    if isinstance(item, str):
        return text_reply(item)
    if isinstance(item, dict):
        if item.get("type") == "function" and "function" in item:
            return tool_reply(item)  # 单独一个 scripted_call(...) 也可以直接放进脚本
        if item.get("role") == "assistant":
            return item
    raise TypeError(
        "脚本里的每一项应当是 text_reply(...)、scripted_call(...)、tool_reply(...)、"
        f"字符串或异常对象，收到的是 {item!r}"
    )





# ---------------------------------------------------------------------------
# 把 assistant 消息包装成服务商返回的 JSON（字典）
# ---------------------------------------------------------------------------


def _tokens(text: str) -> int:
    """粗略估计 token 数：UTF-8 字节数除以 3（一个汉字约一个 token）。"""
    return (len(text.encode("utf-8")) + 2) // 3


def _prompt_tokens(msgs: list[dict], tools: list[dict]) -> int:
    total = 3 + 60 * len(tools)
    for m in msgs:
        total += 4 + _tokens(text_of(m.get("content")))
        for c in m.get("tool_calls") or ():
            total += 8 + _tokens(c["function"]["arguments"])
    return total


def _completion_tokens(reply: dict) -> int:
    total = _tokens(reply.get("content") or "") + 1
    for c in reply.get("tool_calls") or ():
        total += 8 + _tokens(c["function"]["arguments"])
    return total


def _truncate(reply: dict, max_tokens: int) -> dict:
    """回复超过 max_tokens 时像真实模型一样被截断，finish_reason 变成 "length"。"""
    budget = max(0, max_tokens * 3)  # 和 _tokens 同样的粗略换算：一个 token 约 3 个字节
    out: dict = {"role": "assistant", "content": None}
    content = reply.get("content") or ""
    if content:
        cut = content.encode("utf-8")[:budget].decode("utf-8", "ignore")
        out["content"] = cut
        budget -= len(cut.encode("utf-8"))
    calls = []
    for c in reply.get("tool_calls") or ():
        if budget <= 0:
            break
        arguments = c["function"]["arguments"][:budget]  # 参数被截断后通常不再是合法 JSON
        budget -= len(arguments)
        calls.append({**c, "function": {**c["function"], "arguments": arguments}})
    if calls:
        out["tool_calls"] = calls
    elif out["content"] is None:
        out["content"] = ""
    return out


def _completion_dict(cid: str, model: str, reply: dict, finish: str, usage: dict) -> dict:
    message: dict = {"role": "assistant", "content": reply.get("content"), "refusal": None}
    if reply.get("tool_calls"):
        message["tool_calls"] = reply["tool_calls"]
    return {
        "id": cid,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": usage,
    }


def _pieces(text: str, size: int = _STREAM_PIECE) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def _chunk_dicts(cid: str, model: str, reply: dict, finish: str, usage: dict | None) -> list[dict]:
    """把一条回复拆成流式块，顺序和真实服务商一致。"""
    def chunk(delta: dict, finish_reason: str | None = None) -> dict:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None,
                         "finish_reason": finish_reason}],
        }

    content = reply.get("content")
    calls = reply.get("tool_calls") or []
    chunks = [chunk({"role": "assistant", "content": "" if content is not None else None,
                     "refusal": None})]
    for piece in _pieces(content or ""):
        chunks.append(chunk({"content": piece}))
    for index, c in enumerate(calls):
        # 第一块带 index、id、type 和函数名，arguments 为空；之后只送参数片段
        chunks.append(chunk({"tool_calls": [{
            "index": index, "id": c["id"], "type": "function",
            "function": {"name": c["function"]["name"], "arguments": ""},
        }]}))
        for piece in _pieces(c["function"]["arguments"]):
            chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    chunks.append(chunk({}, finish))
    if usage is not None:
        last = chunk({})
        last["choices"] = []
        last["usage"] = usage
        chunks.append(last)
    return chunks




# ---------------------------------------------------------------------------
# 假模型本身：请求体（字典）进，响应体（字典）出
# ---------------------------------------------------------------------------


class FakeModel:
    """假模型的“大脑”：只和 JSON 字典打交道，不知道 HTTP 和 SDK。

    ``script`` 为 None 时用默认策略；否则按顺序取脚本里的回复，用完后抛出 ``ScriptExhaustedError``。
    ``last_request`` 保存最近一次请求（``messages`` 已规整成字典）。
    """

    def __init__(self, script: Iterable[Any] | None = None, *, model: str = DEFAULT_MODEL):
        self.model = model
        self._script = None if script is None else [_script_item(item) for item in script]
        self._position = 0
        self._ids = itertools.count(1)
        self.last_request: dict | None = None

    @property
    def script_remaining(self) -> int | None:
        """脚本里还剩几条回复；默认策略下是 ``None``。"""
        if self._script is None:
            return None
        return len(self._script) - self._position

    def __repr__(self) -> str:
        if self._script is None:
            return f"FakeModel(model={self.model!r}, 默认策略)"
        return f"FakeModel(model={self.model!r}, 脚本 {len(self._script)} 条，剩 {self.script_remaining} 条)"

    def respond(self, request: dict) -> dict | list[dict]:
        """处理一次请求体（和 HTTP 请求的 JSON 相同），返回响应字典。

        ``stream`` 为真时返回流式块字典的列表。不合规时抛出 `Rejected`（由处理函数写成 HTTP 错误响应）。
        """
        # openai.NOT_GIVEN / openai.omit 和没传一样
        request = {k: v for k, v in request.items() if is_given(v)}
        tools = request.get("tools")
        tool_choice = request.get("tool_choice")
        msgs = validate(request.get("messages"), tools, tool_choice=tool_choice)
        tools = [as_dict(t) for t in tools] if tools is not None else []
        model = request.get("model")
        self.last_request = {**request, "messages": msgs, "tools": tools or None}

        # 已有的工具调用数量，新的调用 id 接着往下编
        used = sum(len(m.get("tool_calls") or ()) for m in msgs)
        max_tokens = request.get("max_completion_tokens", request.get("max_tokens"))
        if max_tokens is not None and (type(max_tokens) is not int or max_tokens < 1):
            param = "max_completion_tokens" if "max_completion_tokens" in request else "max_tokens"
            if type(max_tokens) is not int:
                raise wrong_type(param, "an integer", max_tokens)
            raise bad(f"Invalid '{param}': integer below minimum value. Expected a value >= 1, "
                       f"but got {max_tokens} instead.", param, "integer_below_min_value")
        if self._script is None:
            reply = default_reply(msgs, tools, tool_choice, model or self.model)
            if max_tokens is not None and _completion_tokens(reply) > max_tokens:
                reply = _truncate(reply, max_tokens)
                finish = "length"
            else:
                finish = "tool_calls" if reply.get("tool_calls") else "stop"
        else:
            reply = self._next_scripted()
            finish = "tool_calls" if reply.get("tool_calls") else "stop"

        if reply.get("tool_calls"):
            calls = []
            for n, c in enumerate(reply["tool_calls"], start=used + 1):
                calls.append(c if c.get("id") else {"id": f"call_{n:03d}", **c})
            reply = {**reply, "tool_calls": calls}

        usage_prompt = _prompt_tokens(msgs, tools)
        usage_completion = _completion_tokens(reply)
        if finish == "length":
            usage_completion = max_tokens
        usage = {"prompt_tokens": usage_prompt, "completion_tokens": usage_completion,
                 "total_tokens": usage_prompt + usage_completion}
        cid = f"chatcmpl-fake-{next(self._ids):04d}"
        if request.get("stream"):
            options = request.get("stream_options")
            include = isinstance(options, dict) and options.get("include_usage")
            return _chunk_dicts(cid, model, reply, finish, usage if include else None)
        return _completion_dict(cid, model, reply, finish, usage)

    def _next_scripted(self) -> dict:
        assert self._script is not None
        if self._position >= len(self._script):
            raise ScriptExhaustedError(
                f"脚本里只有 {len(self._script)} 条回复，已经全部用完，"
                f"这是第 {self._position + 1} 次调用 create()。"
                "请在 FakeClient(script=[...]) 里补上回复，或检查循环是否多调用了一次模型。"
            )
        item = self._script[self._position]
        self._position += 1
        if isinstance(item, BaseException):
            raise item
        return item


# ---------------------------------------------------------------------------
# HTTP 这一层：同一个处理函数，离线客户端和本地端点都用它
# ---------------------------------------------------------------------------


def is_fake_model_name(name: Any) -> bool:
    """本地端点认得的模型名：``fake-agent-1``，以及任何以 ``fake`` 开头的名字。"""
    return isinstance(name, str) and name.startswith("fake")


class FakeHandler:
    """把 HTTP 请求交给假模型，把结果写成 HTTP 响应：``handler(request) -> response``。

    ``responder`` 是有 ``respond(body)`` 方法的对象（``FakeModel`` 或 ``FakeClient``）。
    ``api_key`` 不为空时，请求必须带 ``Authorization: Bearer <api_key>``；
    ``check_model=True`` 时只认 ``fake`` 开头的模型名（本地端点这样做，离线客户端不查）。
    """

    def __init__(self, responder: Any, *, api_key: str | None = None, check_model: bool = False):
        self.responder = responder
        self.api_key = api_key
        self.check_model = check_model
        self._request_ids = itertools.count(1)

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        response = self._answer(request)
        response.headers["x-request-id"] = f"req_fake_{next(self._request_ids):06d}"
        return response

    def _authorized(self, request: httpx2.Request) -> httpx2.Response | None:
        """密钥不对时返回 401 响应；对了返回 None。错误信息里绝不回显收到的密钥。"""
        if self.api_key is None:
            return None
        header = request.headers.get("authorization") or ""
        given = header[7:].strip() if header.startswith("Bearer ") else ""
        if not given:
            return Rejected(401, "You didn't provide an API key. You need to provide your API key in an "
                                 "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).").response()
        if not _same_secret(given, self.api_key):
            return Rejected(401, "Incorrect API key provided. Use the key this local server was started with "
                                 "(--api-key).", code="invalid_api_key").response()
        return None

    def _model_name(self) -> str:
        return getattr(self.responder, "model", None) or DEFAULT_MODEL

    def _model_info(self, name: str) -> dict:
        return {"id": name, "object": "model", "created": CREATED, "owned_by": OWNED_BY}

    def _answer(self, request: httpx2.Request) -> httpx2.Response:
        refused = self._authorized(request)
        if refused is not None:
            return refused
        path = route(request)
        if request.method == "GET" and path == "/models":
            return json_response(200, {"object": "list", "data": [self._model_info(self._model_name())]})
        if request.method == "GET" and path.startswith("/models/"):
            name = path[len("/models/"):]
            if name == self._model_name() or (self.check_model and is_fake_model_name(name)):
                return json_response(200, self._model_info(name))
            return _unknown_model(name).response()
        if request.method != "POST" or path != "/chat/completions":
            return Rejected(404, f"Invalid URL ({request.method} {request.url.path})").response()
        try:
            body = json.loads(request.content)
        except ValueError:
            return Rejected(400, "We could not parse the JSON body of your request. The body must be a JSON "
                                 "object sent with Content-Type: application/json.").response()
        if not isinstance(body, dict):
            return Rejected(400, "Invalid type for request body: expected an object.", code="invalid_type").response()
        if body.get("model") is None:
            return Rejected(400, "you must provide a model parameter").response()
        if self.check_model and not is_fake_model_name(body["model"]):
            return _unknown_model(body["model"]).response()
        try:
            result = self.responder.respond(body)
        except Rejected as rejected:
            return rejected.response()
        except openai.APIStatusError as exc:  # 脚本里放的 api_error(...)：照原样回这个状态码
            return error_response(exc)
        except openai.APITimeoutError:  # 脚本里放的超时：让传输层超时，由 SDK 自己报告
            raise httpx2.ReadTimeout("脚本安排的超时", request=request) from None
        except openai.APIConnectionError:
            raise httpx2.ConnectError("脚本安排的连接失败", request=request) from None
        except ScriptExhaustedError:
            raise
        except Exception as exc:  # 假模型自身的缺陷：照样回一个 JSON 错误，不让连接挂住
            return Rejected(500, f"The fake model failed: {type(exc).__name__}: {exc}",
                            type="server_error").response()
        if isinstance(result, list):
            return sse_response(result)
        return json_response(200, result)


def _same_secret(given: str, expected: str) -> bool:
    """逐字节比较，耗时与内容无关。"""
    return hmac.compare_digest(given.encode(), expected.encode())


def _unknown_model(name: Any) -> Rejected:
    return Rejected(404, f"The model `{name}` does not exist or you do not have access to it.",
                    code="model_not_found")


# ---------------------------------------------------------------------------
# 客户端：真正的 openai.OpenAI，线路在本进程里
# ---------------------------------------------------------------------------


class FakeClient(OfflineClient):
    """离线假模型：一个真正的 ``openai.OpenAI``，请求不出本进程，由 ``FakeModel`` 作答。

    * ``FakeClient()``：默认策略，只根据请求内容决定回复；
    * ``FakeClient(script=[...])``：按顺序返回脚本里的回复，用完后抛出 ``ScriptExhaustedError``。

    ``last_request`` 保存最近一次请求（``messages`` 已规整成字典），方便查看。
    SDK 默认的自动重试在这里关掉（``max_retries=0``）：脚本里的每一项正好对应一次请求。
    ``with_options(...)`` 得到的副本和原来的客户端共用同一个假模型。
    """

    def __init__(self, script: Iterable[Any] | None = None, *, model: str = DEFAULT_MODEL, **options: Any):
        if isinstance(options.get("http_client"), OfflineHTTP):
            self._model = None  # SDK 复制出来的副本：沿用原来那条线路和它背后的假模型
            handler = None
        else:
            self._model = FakeModel(script, model=model)
            handler = self._make_handler()
        super().__init__(handler, **options)
        trust_client(self)  # 回答它的是本项目的假模型：审批信任它提出的调用（safety.trust）

    def _make_handler(self):
        return FakeHandler(self)

    @property
    def fake_model(self) -> FakeModel:
        """作答的假模型；SDK 复制出来的副本指向原来那个客户端的假模型。"""
        responder = getattr(self.handler, "responder", self)
        return self._model if responder is self else responder.fake_model

    def respond(self, request: dict) -> dict | list[dict]:
        """处理一次请求体（字典），返回响应体；见 ``FakeModel.respond``。子类可以改写它来模拟别的服务。"""
        return self.fake_model.respond(request)

    @property
    def model(self) -> str:
        """假模型回报的模型名。"""
        return self.fake_model.model

    @property
    def last_request(self) -> dict | None:
        """最近一次请求体（``messages`` 已规整成字典）。"""
        return self.fake_model.last_request

    @property
    def script_remaining(self) -> int | None:
        """脚本里还剩几条回复；默认策略下是 ``None``。"""
        return self.fake_model.script_remaining

    def __repr__(self) -> str:
        fake = self.fake_model
        if fake._script is None:
            return f"{type(self).__name__}(model={fake.model!r}, 默认策略)"
        return (f"{type(self).__name__}(model={fake.model!r}, 脚本 {len(fake._script)} 条，"
                f"剩 {fake.script_remaining} 条)")


class _CutStreams:
    """处理函数的包装：第 `cut_on` 次（不写就是每一次）流式请求只放出前 `after` 块，然后悄悄结束。"""

    def __init__(self, inner, after: int, cut_on: set[int] | None):
        self.inner = inner
        self.responder = inner.responder
        self.after = after
        self.cut_on = cut_on
        self.calls = 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.calls += 1
        response = self.inner(request)
        streaming = response.headers.get("content-type", "").startswith("text/event-stream")
        if not streaming or (self.cut_on is not None and self.calls not in self.cut_on):
            return response
        events = [e for e in response.read().split(b"\n\n") if e.strip() and e.strip() != b"data: [DONE]"]
        chunks = [json.loads(e.decode("utf-8")[len("data: "):]) for e in events[:self.after]]
        return sse_response(chunks, done=False, headers={"connection": "close"})


class CutStreamClient(FakeClient):
    """演示用：流式回复只放出前 `after` 块就结束（没有 `finish_reason`，也没有 `[DONE]`），模拟连接中途断开。

    ``CutStreamClient(FakeClient(), after=4)`` 和给定的假模型共用同一个“大脑”；``cut_on`` 是要截断的
    第几次调用（从 1 开始的集合），不写就截断每一次流式调用；非流式调用原样回答。
    截断发生在 HTTP 这一层：SDK 读到的就是一个提前结束的 SSE 响应。
    """

    def __init__(self, client: FakeClient | None = None, after: int = 5, *,
                 cut_on: Iterable[int] | None = None, **options: Any):
        if not isinstance(options.get("http_client"), OfflineHTTP):
            base = client if client is not None else FakeClient()
            options["http_client"] = offline_http(
                _CutStreams(FakeHandler(base), after, None if cut_on is None else set(cut_on)))
        super().__init__(**options)

    @property
    def after(self) -> int:
        return self.handler.after

    @property
    def cut_on(self) -> set[int] | None:
        return self.handler.cut_on

    @property
    def calls(self) -> int:
        """到目前为止收到的请求数。"""
        return self.handler.calls

    def __repr__(self) -> str:
        which = "每一次" if self.cut_on is None else "第 " + "、".join(map(str, sorted(self.cut_on))) + " 次"
        return f"CutStreamClient({self.handler.responder!r}，{which}流式调用只放出前 {self.after} 块)"
