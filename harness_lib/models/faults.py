"""故障端点：一个只在本机运行、故意出错的 OpenAI 兼容测试服务器。

故障写成处理函数 `FaultHandler`（见 `harness_lib.models.wire`），由 `endpoint.serve` 放到本机端口上。

它不是课程内容本身，只放在 ``harness_lib`` 里，07_endpoint_faults 和 tests/test_faults.py 用它。
真实端点会出的错（密钥不对、被限流、服务器出错、超时、返回网页、流式回复断掉……）
在这里都能用真正的 HTTP 复现，交给真正的 ``openai.OpenAI`` 客户端去碰。

用法：一个服务器同时提供所有故障，路径的第一段就是故障名::

    server = start_fault_server()
    client = openai.OpenAI(base_url=server.url("rate_limit"), api_key="随便", max_retries=2)
    server.hits["rate_limit"]   # 这个故障收到了几次请求（SDK 重试也算）

``start_fault_server("auth")`` 时，``server.base_url`` 就是 ``server.url("auth")``。
故障名和含义见 ``FAULTS``。“连接被拒绝”不需要服务器：``closed_port_url()`` 给出一个没有人监听的地址。
每个故障路径也回答 ``GET /<故障名>/v1/models``（``client.models.list()``）：列出 ``MODELS`` 里的名字
（``auth`` 照样回 401）。``log`` 每个请求一行：第几次尝试、消息条数、请求里的 token（估算）、状态码，
看得出每次重试都把整段 prompt 又发了一遍。

几种故障照某家服务商的原话作答（出处和核对日期写在 ``PROVIDER_BODIES`` 旁边）：
``unknown_model`` 是 DeepSeek 对不存在或已下线的模型名回的 400 “Model Not Exist”；
``context_length`` 是 DeepSeek 的上下文超长 400；``thinking`` 是默认开着思考模式的模型，
思维链也算在 ``max_tokens`` 里。

安全与收尾：只允许回环地址；请求体最多 1 MB；“超时”故障最多拖 30 秒，服务器关闭时立刻放手；
服务器默认 10 分钟后自己停下（``lifetime``），也可以用 ``with`` 或 ``close()`` 提前关掉。
"""

from __future__ import annotations

import collections
import json
import threading
from typing import Any

import httpx2

from .server import LocalServer, serve
from .fake import CREATED, DEFAULT_MODEL, FakeHandler, FakeModel, _prompt_tokens
from .net import closed_port_url, free_port, is_loopback
from .wire import Rejected, json_response, sse_response, with_body

__all__ = ["CONTEXT_LIMIT", "FAULTS", "MODELS", "PROVIDER_BODIES", "REASONING_TOKENS", "FaultHandler", "FaultServer",
           "closed_port_url", "free_port", "start_fault_server"]

FAULTS = {
    "ok": "正常回答（由离线假模型的默认策略作答），用来对照",
    "auth": "HTTP 401：密钥不对；像真实服务商一样在报错里回显密钥的开头和结尾",
    "permission": "HTTP 403：密钥有效，但没有这个模型的权限",
    "not_found": "HTTP 404：模型名不存在",
    "rate_limit": "HTTP 429：被限流，带 Retry-After 响应头",
    "server": "HTTP 500：服务器内部错误",
    "unavailable": "HTTP 503：服务器暂时不可用（过载）",
    "timeout": "迟迟不回应，直到客户端超时放弃",
    "connection": "连接被拒绝：地址上根本没有服务在监听（不经过本服务器）",
    "html": "HTTP 200，但回来的是一个 HTML 网页（Content-Type: text/html），像代理或登录页",
    "not_json": "HTTP 200，Content-Type 写着 JSON，内容却是 HTML",
    "no_choices": "HTTP 200，合法的 JSON，但 choices 是空列表",
    "stream_cut": "流式回复发了几块就结束了，没有 finish_reason，也没有 [DONE]",
    "flaky": "时好时坏：每三个请求里的第三个回 HTTP 503，其余由离线假模型正常回答",
    "unknown_model": "HTTP 400 “Model Not Exist”（DeepSeek 的说法）：模型名不在 /models 的名单里"
                     "（拼错或已下线）；名单里的名字正常回答",
    "context_length": "请求里的 token（估算）加上 max_tokens 超过 CONTEXT_LIMIT 时回 HTTP 400（DeepSeek 的上下文超长原话），"
                      "没超过时正常回答：越跑越长的循环迟早撞上它",
    "thinking": "默认开着思考模式：先写 REASONING_TOKENS 个 token 的 reasoning_content，也算在 max_tokens 里；"
                "max_tokens 不够时 content 是空的、finish_reason 是 length。"
                "请求带 extra_body={\"thinking\": {\"type\": \"disabled\"}} 时不思考",
}
FLAKY_EVERY = 3  # “时好时坏”故障每几个请求失败一次

CONTEXT_LIMIT = 1024  # “上下文超长”故障的模型能读多少 token（真实模型是几万到上百万）
REASONING_TOKENS = 600  # “思考模式”故障每次先写多少 token 的思维链
MODELS = {  # GET /models 列出的名字：unknown_model 照 DeepSeek 现在的名单，其余只有假模型
    # DeepSeek 模型与价格页（https://api-docs.deepseek.com/zh-cn/quick_start/pricing，核对日期 2026-12-01）：
    # 推荐 deepseek-flash，deepseek-v4-flash、deepseek-v4-pro 仍可调用；和 clients.py 的预设一致
    "unknown_model": ["deepseek-flash", "deepseek-v4-flash", "deepseek-v4-pro"],
}

# 服务商的原话（错误体的形状），每条写明出处和核对日期。
PROVIDER_BODIES = {
    # DeepSeek API：不存在或已下线的模型名 → HTTP 400，错误体如下（不是 404 model_not_found）。
    # 出处（公开 issue 里贴出的原始响应）：https://github.com/langbot-app/LangBot/issues/1643（2025-09-02）、
    # https://github.com/deepwn/addi/issues/13（2026-03-30，模型名 deepseek-chat）。核对日期 2026-12-01。
    # 现在的模型名见上面的 MODELS；预设里的名字以 clients.py 为准。
    "unknown_model": {"message": "Model Not Exist", "type": "invalid_request_error", "param": None,
                      "code": "invalid_request_error"},
    # DeepSeek API：上下文超长 → HTTP 400，原话把 messages 和 max_tokens（completion）加在一起算。
    # 出处：https://github.com/NoFxAiOS/nofx/issues/1278（2025-12-26）、
    # https://github.com/evalstate/fast-agent/issues/621（2026-01-19）。核对日期 2026-12-01。
    # OpenAI 的同一种错误 code 是 context_length_exceeded、param 是 messages
    # （https://github.com/crewAIInc/crewAI-examples/issues/121）；errors.py 的 context_length 一行两种都认。
    "context_length": {"message": "This model's maximum context length is {limit} tokens. However, you requested "
                                  "{total} tokens ({prompt} in the messages, {completion} in the completion). "
                                  "Please reduce the length of the messages or completion.",
                       "type": "invalid_request_error", "param": None, "code": "invalid_request_error"},
}
# “思考模式”故障依据的事实（核对日期 2026-12-01）：
# - DeepSeek V4 默认开着思考模式，关掉要传 extra_body={"thinking": {"type": "disabled"}}：
#   https://api-docs.deepseek.com/guides/thinking_mode ；
# - max_tokens 含思维链：DeepSeek 文档对 deepseek-reasoner 写明“模型单次回答的最大长度（含思维链输出）”
#   （https://api-docs.deepseek.com/zh-cn/guides/reasoning_model）；V4 的思考模式页在检索到的片段里没有写这一句，
#   腾讯云 TokenHub 的指南建议思考模式的 max_tokens 不小于 2048（出处同上）。这里按“含思维链”模拟，未能逐字确认 V4。
_REASONING = "用户要列出 Python 文件。我先想一想该用哪条命令、结果怎样读、怎样回答……"

MAX_DELAY = 30.0  # “超时”故障最多拖多少秒
RETRY_AFTER_MS = 20  # 429/5xx 建议客户端等多少毫秒再试；设得很短，演示和测试才快
_RETRY_HEADERS = {"Retry-After": "0", "retry-after-ms": str(RETRY_AFTER_MS)}  # SDK 优先看更精细的 ms

_HTML_PAGE = (
    "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>请先登录</title></head>\n"
    "<body><h1>请先登录网络</h1><p>这是代理或网关返回的网页，不是模型的回复。</p></body></html>\n"
)


def _masked(key: str) -> str:
    """像服务商那样回显密钥：露出开头和结尾，中间打星号。"""
    if len(key) <= 16:
        return "*" * len(key)
    return key[:8] + "*" * 12 + key[-6:]


def _html(content_type: str) -> httpx2.Response:
    return httpx2.Response(200, content=_HTML_PAGE.encode("utf-8"), headers={"content-type": content_type})


class FaultHandler:
    """处理函数：路径的第一段是故障名（``/<故障名>/v1/chat/completions``），按那个故障作答。

    ``hits`` 记着每个故障收到几次请求（SDK 的每次重试都算一次），``log`` 每个请求一行。
    """

    def __init__(self, *, delay: float = 5.0):
        self.delay = min(float(delay), MAX_DELAY)
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.hits: collections.Counter = collections.Counter()
        self.log: list[dict] = []
        self.ok = FakeHandler(FakeModel())

    def stop(self) -> None:
        """服务器关闭时调用：正在“拖时间”的请求立刻结束。"""
        self.stopping.set()

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        parts = request.url.path.strip("/").split("/")
        fault = parts[0] if len(parts) >= 2 and parts[0] in FAULTS and parts[1] == "v1" else None
        if fault is not None and request.method == "GET" and "/".join(parts[2:]) == "models":
            return self._models(request, fault)
        if fault is None or request.method != "POST" or "/".join(parts[2:]) != "chat/completions":
            return Rejected(404, f"Invalid URL ({request.method} {request.url.path})").response()
        try:
            body = json.loads(request.content)
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        messages = body.get("messages") if isinstance(body.get("messages"), list) else []
        row = {
            "故障": fault,
            "第几次尝试": int(request.headers.get("x-stainless-retry-count") or 0) + 1,
            "消息条数": len(messages),
            "请求里的 token（估算）": _estimate(body),
        }
        with self.lock:
            self.hits[fault] += 1
            self.log.append(row)
        response = getattr(self, f"_{fault}")(request, body)
        row["状态码"] = response.status_code  # 超时故障在客户端放弃以后才写上
        return response

    def _models(self, request: httpx2.Request, fault: str) -> httpx2.Response:
        """GET /models：列出这个路径上能用的模型名。密钥不对的路径照样回 401。"""
        if fault == "auth":
            return self._auth(request, {})
        names = MODELS.get(fault, [DEFAULT_MODEL])
        return json_response(200, {"object": "list", "data": [
            {"id": name, "object": "model", "created": CREATED, "owned_by": "harness-faults"} for name in names]})

    # ---- 各个故障 ----
    def _ok(self, request: httpx2.Request, body: dict) -> httpx2.Response:
        return self.ok(request)

    def _auth(self, request: httpx2.Request, body: dict) -> httpx2.Response:
        header = request.headers.get("authorization") or ""
        key = header[7:].strip() if header.startswith("Bearer ") else ""
        return Rejected(401, f"Incorrect API key provided: {_masked(key)}. You can find your API key "
                             "in your account settings.", code="invalid_api_key").response()

    def _permission(self, request: httpx2.Request, body: dict) -> httpx2.Response:
        return Rejected(403, f"Your project does not have access to model `{body.get('model')}`.",
                        code="model_not_allowed").response()

    def _not_found(self, request: httpx2.Request, body: dict) -> httpx2.Response:
        return Rejected(404, f"The model `{body.get('model')}` does not exist or you do not have access to it.",
                        code="model_not_found").response()

    def _rate_limit(self, request: httpx2.Request, body: dict) -> httpx2.Response:
        return Rejected(429, "Rate limit reached for requests. Please try again later.", type="requests",
                        code="rate_limit_exceeded", headers=_RETRY_HEADERS).response()

    def _server(self, request: httpx2.Request, body: dict) -> httpx2.Response:
        return Rejected(500, "The server had an error while processing your request. Sorry about that!",
                        type="server_error", headers=_RETRY_HEADERS).response()

    def _unavailable(self, request: httpx2.Request, body: dict) -> httpx2.Response:
        return Rejected(503, "The engine is currently overloaded, please try again later.",
                        type="server_error", headers=_RETRY_HEADERS).response()

    def _flaky(self, request: httpx2.Request, body: dict) -> httpx2.Response:
        if self.hits["flaky"] % FLAKY_EVERY == 0:  # 计数在进来时已经加过
            return self._unavailable(request, body)
        return self.ok(request)

    def _timeout(self, request: httpx2.Request, body: dict) -> httpx2.Response:
        # 等到客户端放弃；服务器关闭时立刻结束，不让线程挂着
        self.stopping.wait(self.delay)
        response = self.ok(request)
        response.headers["connection"] = "close"
        return response

    def _connection(self, request: httpx2.Request, body: dict) -> httpx2.Response:
        # 真正的“连接被拒绝”用 closed_port_url()；万一有请求走到这里，回完就挂断
        return httpx2.Response(502, content=b"", headers={"connection": "close"})

    def _html(self, request: httpx2.Request, body: dict) -> httpx2.Response:
        return _html("text/html; charset=utf-8")

    def _not_json(self, request: httpx2.Request, body: dict) -> httpx2.Response:
        return _html("application/json")

    def _no_choices(self, request: httpx2.Request, body: dict) -> httpx2.Response:
        return json_response(200, {
            "id": "chatcmpl-fault-0001", "object": "chat.completion", "created": CREATED,
            "model": body.get("model") or DEFAULT_MODEL, "choices": [],
            "usage": {"prompt_tokens": 12, "completion_tokens": 0, "total_tokens": 12},
        })

    def _unknown_model(self, request: httpx2.Request, body: dict) -> httpx2.Response:
        if body.get("model") in MODELS["unknown_model"]:
            return self.ok(request)
        error = PROVIDER_BODIES["unknown_model"]
        return json_response(400, {"error": dict(error)})

    def _context_length(self, request: httpx2.Request, body: dict) -> httpx2.Response:
        prompt = _estimate(body)
        completion = body.get("max_tokens") if isinstance(body.get("max_tokens"), int) else 0
        if prompt + completion <= CONTEXT_LIMIT:
            return self.ok(request)
        error = dict(PROVIDER_BODIES["context_length"])
        error["message"] = error["message"].format(limit=CONTEXT_LIMIT, total=prompt + completion, prompt=prompt,
                                                   completion=completion)
        return json_response(400, {"error": error})

    def _thinking(self, request: httpx2.Request, body: dict) -> httpx2.Response:
        if body.get("stream"):
            return Rejected(400, "This test path only serves stream=false requests.").response()
        thinking = body.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") == "disabled":
            return self.ok(request)  # 关掉思考模式：和普通模型一样
        limit = body.get("max_tokens") if isinstance(body.get("max_tokens"), int) else None
        # 先去掉 max_tokens 拿到完整的回答，再按思维链用掉的份额截断
        unlimited = {k: v for k, v in body.items() if k not in ("max_tokens", "max_completion_tokens")}
        answer = json.loads(self.ok(with_body(request, unlimited)).content)
        choice = answer["choices"][0]
        message = dict(choice["message"])
        usage = dict(answer["usage"])
        needed = usage["completion_tokens"]
        reasoning = REASONING_TOKENS
        if limit is not None and reasoning + needed > limit:  # 思维链先把上限用掉了：回答是空的
            reasoning = min(reasoning, limit)
            message = {"role": "assistant", "content": ""}
            choice = {**choice, "finish_reason": "length"}
            needed = 0
        message["reasoning_content"] = (_REASONING * (reasoning // 30 + 1))[: reasoning]
        usage = {"prompt_tokens": usage["prompt_tokens"], "completion_tokens": reasoning + needed,
                 "total_tokens": usage["prompt_tokens"] + reasoning + needed,
                 "completion_tokens_details": {"reasoning_tokens": reasoning}}
        return json_response(200, {**answer, "choices": [{**choice, "message": message}], "usage": usage})

    def _stream_cut(self, request: httpx2.Request, body: dict) -> httpx2.Response:
        if not body.get("stream"):
            return Rejected(400, "This test path only serves stream=true requests.").response()
        model = body.get("model") or DEFAULT_MODEL

        def chunk(delta: dict) -> dict:
            return {"id": "chatcmpl-fault-cut", "object": "chat.completion.chunk", "created": CREATED,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]}

        pieces = ["当前目录", "中有两个 ", "Python 文", "件：app"]
        chunks = [chunk({"role": "assistant", "content": ""})] + [chunk({"content": p}) for p in pieces]
        return sse_response(chunks, done=False, headers={"connection": "close"})


def _estimate(body: dict) -> int:
    """请求体里 messages 和 tools 的 token 数，用假模型同样的粗略算法（一个汉字约一个 token）；形状不对时是 0。"""
    messages = body.get("messages") if isinstance(body.get("messages"), list) else []
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    try:
        return _prompt_tokens([m for m in messages if isinstance(m, dict)], tools)
    except (KeyError, TypeError, AttributeError):
        return 0


class FaultServer:
    """后台线程里运行的故障服务器。``url(故障名)`` 给出 base_url，``hits`` 记着每个故障收到几次请求。"""

    def __init__(self, server: LocalServer, handler: FaultHandler, fault: str):
        self._server = server
        self._handler = handler
        self.fault = fault
        self.host, self.port = server.host, server.port
        self._timer: threading.Timer | None = None

    @property
    def closed(self) -> bool:
        return self._server.closed

    def url(self, fault: str) -> str:
        """某个故障的 base_url。``"connection"`` 返回一个没有人监听的地址。"""
        if fault not in FAULTS:
            raise ValueError(f"没有名为 {fault!r} 的故障，可选：{'、'.join(FAULTS)}")
        if fault == "connection":
            return closed_port_url(self.host)
        return f"{self._server.origin}/{fault}/v1"

    @property
    def base_url(self) -> str:
        """启动时选定的那个故障的 base_url。"""
        return self.url(self.fault)

    @property
    def hits(self) -> collections.Counter:
        """每个故障收到的请求数（``Counter``，没收到过的是 0）。SDK 的每次重试都算一次。"""
        return self._handler.hits

    @property
    def requests(self) -> int:
        """一共收到的请求数。"""
        return sum(self._handler.hits.values())

    @property
    def log(self) -> list[dict]:
        """每个请求一行：故障名、这是 SDK 的第几次尝试（来自请求头 x-stainless-retry-count）、
        消息条数、请求里的 token（估算，一个汉字约一个 token）、回的状态码。"""
        return [dict(row) for row in self._handler.log]

    def reset(self) -> None:
        """把计数和请求记录清零。"""
        with self._handler.lock:
            self._handler.hits.clear()
            self._handler.log.clear()

    def close(self) -> None:
        """停止服务并释放端口；正在“拖时间”的请求立刻结束。可以重复调用。"""
        if self._timer is not None:
            self._timer.cancel()
        self._server.close()

    def __enter__(self) -> "FaultServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "已关闭" if self.closed else "运行中"
        return f"FaultServer(本机测试服务器 {self._server.origin}，默认故障 {self.fault!r}，{state})"


def start_fault_server(fault: str = "ok", *, host: str = "127.0.0.1", port: int = 0,
                       delay: float = 5.0, lifetime: float | None = 600.0,
                       verbose: bool = False) -> FaultServer:
    """在后台守护线程里启动故障服务器并立即返回。

    ``fault`` 只决定 ``base_url`` 指向哪个故障；所有故障都能用 ``url(名字)`` 访问。
    ``host`` 只能是回环地址；``port=0`` 表示由系统挑一个空闲端口；``delay`` 是“超时”故障拖的秒数
    （最多 30 秒，要比客户端的 timeout 长）；``lifetime`` 秒后服务器自己停下，``None`` 表示不限。
    """
    if fault not in FAULTS:
        raise ValueError(f"没有名为 {fault!r} 的故障，可选：{'、'.join(FAULTS)}")
    if not is_loopback(host, listening=True):
        raise ValueError(f"故障服务器只监听本机回环地址（127.0.0.1、::1、localhost），收到 {host!r}")
    handler = FaultHandler(delay=delay)
    server = FaultServer(serve(handler, host, port, verbose=verbose), handler, fault)
    if lifetime is not None:
        server._timer = threading.Timer(lifetime, server.close)
        server._timer.daemon = True
        server._timer.start()
    return server
