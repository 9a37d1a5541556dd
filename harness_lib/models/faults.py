"""故障端点：只在本机运行、故意出错的 OpenAI 兼容服务器，07_endpoint_faults 用真正的 HTTP 逐个碰。

一个服务器同时提供所有故障，路径的第一段就是故障名（含义见 `FAULTS`）：`faults.url("rate_limit")` 是
base_url，`faults.hits["rate_limit"]` 是它收到了几次请求（SDK 重试也算），`faults.log` 每个请求一行。
另外两种接口（`/v1/responses`、`/v1/messages`，笔记本 11）只认和接口无关的几种：状态码、超时、网页、时好时坏（`ANY_API`），
所以挂掉的端点在三种接口上都一样挂着。
只听回环地址；“超时”最多拖 30 秒，服务器关闭时立刻放手。默认一直开到内核退出（线程是守护线程），读得慢也不会过期；`lifetime` 秒后自己停下只给测试用。
几种故障照 DeepSeek 的原话作答（`PROVIDER_BODIES`，出处和核对日期写在旁边）。
"""

from __future__ import annotations

import collections
import json
import threading
import time

import httpx2

from .fake import CREATED, DEFAULT_MODEL, FakeHandler, FakeModel, prompt_tokens
from .net import closed_port_url, is_loopback
from .server import LocalServer, serve
from .wire import CHUNKED, Rejected, cut_stream, error_body, json_response, with_body

FAULTS = {
    "ok": "正常回答（由离线假模型的默认策略作答），用来对照",
    "auth": "HTTP 401：密钥不对；像真实服务商一样在报错里回显密钥的开头和结尾",
    "permission": "HTTP 403：密钥有效，但没有这个模型的权限",
    "not_found": "HTTP 404：模型名不存在",
    "rate_limit": "HTTP 429：被限流，带 Retry-After 响应头",
    "quota": "HTTP 429：余额用完（OpenAI 的 insufficient_quota），也带 Retry-After 响应头，但等多久都不会好",
    "server": "HTTP 500：服务器内部错误",
    "unavailable": "HTTP 503：服务器暂时不可用（过载）",
    "timeout": "迟迟不回应，直到客户端超时放弃",
    "connection": "连接被拒绝：地址上根本没有服务在监听（不经过本服务器）",
    "html": "HTTP 200，但回来的是一个 HTML 网页（Content-Type: text/html），像代理或登录页",
    "not_json": "HTTP 200，Content-Type 写着 JSON，内容却是 HTML",
    "no_choices": "HTTP 200，合法的 JSON，但 choices 是空列表",
    "stream_cut": "流式回复发了几块就结束了，没有 finish_reason，也没有 [DONE]",
    "flaky": "时好时坏：每三个请求里的第三个回 HTTP 503，其余由离线假模型正常回答",
    "unknown_model": "HTTP 400 “The supported API model names are …, but you passed …”（DeepSeek 现在的说法）：模型名不在 /models 的名单里；名单里的名字正常回答",
    "context_length": "token（估算）加上 max_tokens 超过 CONTEXT_LIMIT 时回 HTTP 400（DeepSeek 的原话），否则正常回答",
    "keepalive": "排队：HTTP 200 之后每 0.2 秒发一个空行（流式请求发 \": keep-alive\" 注释），delay 秒后才给出回答；"
                 "每一个字节都让读超时重新计时，DeepSeek 负载高时就这样（它的限流说明：最多等 10 分钟）",
    "thinking": "默认开着思考模式：先写 REASONING_TOKENS 个 token 的 reasoning_content，也算在 max_tokens 里，"
                "不够时 content 为空、finish_reason 是 length；extra_body={\"thinking\": {\"type\": \"disabled\"}} 关掉",
}
FLAKY_EVERY = 3  # “时好时坏”每几个请求失败一次
CONTEXT_LIMIT = 1024  # “上下文超长”的模型能读多少 token（真实模型是几万到上百万）
REASONING_TOKENS = 600  # “思考模式”每次先写多少 token 的思维链
MAX_DELAY = 30.0  # “超时”“排队”最多拖多少秒
KEEPALIVE_EVERY = 0.2  # “排队”每隔多少秒发一次保持连接
# 和接口无关的故障：Responses 和 Messages 的请求也照样作答（其余的只认 /chat/completions）
ANY_API = {"ok", "auth", "permission", "not_found", "rate_limit", "quota", "server", "unavailable", "timeout", "html",
           "not_json", "flaky"}
_PATHS = {"chat/completions": None, "responses": ANY_API, "messages": ANY_API}  # 路径 → 认哪些故障（None：全部）
# 429/5xx 建议客户端等多久再试：设得很短，演示和测试才快；SDK 优先看更精细的 ms
_RETRY = {"Retry-After": "0", "retry-after-ms": "20"}

# 固定的错误响应：故障 → (状态码, 原话, type, code, 响应头)；{model} 是请求的模型名，{key} 是打了码的密钥
_STATUS = {
    "auth": (401, "Incorrect API key provided: {key}. You can find your API key in your account settings.",
             "invalid_request_error", "invalid_api_key", None),
    "permission": (403, "Your project does not have access to model `{model}`.", "invalid_request_error",
                   "model_not_allowed", None),
    "not_found": (404, "The model `{model}` does not exist or you do not have access to it.",
                  "invalid_request_error", "model_not_found", None),
    "rate_limit": (429, "Rate limit reached for requests. Please try again later.", "requests",
                   "rate_limit_exceeded", _RETRY),
    # OpenAI 的余额用完：429，type 和 code 都是 insufficient_quota（platform.openai.com/docs/guides/error-codes；
    # 原话见 NVIDIA-NeMo/Guardrails#371、openai-python#1671，核对 2026-12-06）
    "quota": (429, "You exceeded your current quota, please check your plan and billing details. For more "
                   "information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
              "insufficient_quota", "insufficient_quota", _RETRY),
    "server": (500, "The server had an error while processing your request. Sorry about that!", "server_error",
               None, _RETRY),
    "unavailable": (503, "The engine is currently overloaded, please try again later.", "server_error", None,
                    _RETRY),
}

# DeepSeek 现在列出的模型名（模型与价格页 https://api-docs.deepseek.com/zh-cn/quick_start/pricing ；
# deepseek-v4-flash 2026-09-10 起不再列出，models.dev#6721；核对 2026-12-06）
MODELS = {"unknown_model": ["deepseek-flash", "deepseek-v4-pro"]}
PROVIDER_BODIES = {name: error_body(message, code="invalid_request_error") for name, message in {
    # 不存在或已下线的模型名 → 400（不是 404）。以前是 “Model Not Exist”（LangBot#1643，2025-09）；2026-09 起
    # 说出它收哪些名字（interview-coder-cn#87，2026-09-20；kolega-code#695，2026-09-10），核对 2026-12-06
    "unknown_model": "The supported API model names are {names}, but you passed {model}.",
    # 上下文超长 → 400，messages 和 max_tokens 加在一起算。https://github.com/NoFxAiOS/nofx/issues/1278（2025-12）、
    # https://github.com/evalstate/fast-agent/issues/621（2026-01），核对 2026-12-01
    "context_length": "This model's maximum context length is {limit} tokens. However, you requested {total} "
                      "tokens ({prompt} in the messages, {completion} in the completion). "
                      "Please reduce the length of the messages or completion.",
}.items()}
# 思考模式：DeepSeek V4 默认开着，extra_body={"thinking": {"type": "disabled"}} 关掉
# （https://api-docs.deepseek.com/guides/thinking_mode）；max_tokens 含思维链照 deepseek-reasoner 的文档模拟
# （https://api-docs.deepseek.com/zh-cn/guides/reasoning_model），V4 未能逐字确认。核对 2026-12-01
_REASONING = "用户要列出 Python 文件。我先想一想该用哪条命令、结果怎样读、怎样回答……"
_HTML_PAGE = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>请先登录</title></head>\n"
              "<body><h1>请先登录网络</h1><p>这是代理或网关返回的网页，不是模型的回复。</p></body></html>\n").encode()


def _estimate(body: dict) -> int:
    """请求里 messages 和 tools 的 token 数（和假模型同样的粗算）；形状不对时是 0。"""
    messages, tools = body.get("messages"), body.get("tools")
    try:
        return prompt_tokens([m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else [],
                             tools if isinstance(tools, list) else [])
    except (KeyError, TypeError, AttributeError):
        return 0


class FaultHandler:
    """处理函数：`/<故障名>/v1/chat/completions`（`ANY_API` 里的故障也认 `/responses`、`/messages`）按那个故障作答。
    `hits` 数请求，`log` 每个请求一行。"""

    def __init__(self, *, delay: float = 5.0):
        self.delay = min(float(delay), MAX_DELAY)
        self.stopping, self.lock = threading.Event(), threading.Lock()
        self.hits: collections.Counter = collections.Counter()
        self.log: list[dict] = []
        self.ok = FakeHandler(FakeModel())

    def stop(self) -> None:
        """服务器关闭时调用：正在“拖时间”的请求立刻结束。"""
        self.stopping.set()

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        fault, _, rest = request.url.path.strip("/").partition("/v1/")
        if fault in FAULTS and request.method == "GET" and rest == "models":
            if fault == "auth":
                return self._answer(fault, request, {})
            return json_response(200, {"object": "list", "data": [
                {"id": name, "object": "model", "created": CREATED, "owned_by": "harness-faults"}
                for name in MODELS.get(fault, [DEFAULT_MODEL])]})
        if fault not in FAULTS or request.method != "POST" or rest not in _PATHS \
                or fault not in (_PATHS[rest] or FAULTS):
            return Rejected(404, f"Invalid URL ({request.method} {request.url.path})").response()
        try:
            body = json.loads(request.content)
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        row = {"故障": fault, "第几次尝试": int(request.headers.get("x-stainless-retry-count") or 0) + 1,
               "消息条数": len(body["messages"]) if isinstance(body.get("messages"), list) else 0,
               "请求里的 token（估算）": _estimate(body)}
        with self.lock:
            self.hits[fault] += 1
            self.log.append(row)
        response = self._answer(fault, request, body)
        row["状态码"] = response.status_code  # 超时故障在客户端放弃以后才写上
        return response

    def _answer(self, fault: str, request: httpx2.Request, body: dict) -> httpx2.Response:
        if fault == "flaky" and self.hits["flaky"] % FLAKY_EVERY == 0:  # 计数在进来时已经加过
            fault = "unavailable"
        if fault in _STATUS:
            status, message, type_, code, headers = _STATUS[fault]
            header = request.headers.get("authorization") or ""
            key = header[7:].strip() if header.startswith("Bearer ") else ""
            key = "*" * len(key) if len(key) <= 16 else key[:8] + "*" * 12 + key[-6:]  # 像服务商那样只露两头
            return Rejected(status, message.format(model=body.get("model"), key=key), type=type_, code=code,
                            headers=headers).response()
        if fault == "timeout":
            self.stopping.wait(self.delay)  # 等到客户端放弃；服务器关闭时立刻结束
            response = self.ok(request)
            response.headers["connection"] = "close"
            return response
        if fault == "keepalive":
            return self._keep_alive(request, body)
        if fault == "connection":  # 真正的“连接被拒绝”用 closed_port_url()；万一走到这里，回完就挂断
            return httpx2.Response(502, content=b"", headers={"connection": "close"})
        if fault in ("html", "not_json"):
            kind = "text/html; charset=utf-8" if fault == "html" else "application/json"
            return httpx2.Response(200, content=_HTML_PAGE, headers={"content-type": kind})
        if fault == "no_choices":
            usage = {"prompt_tokens": 12, "completion_tokens": 0, "total_tokens": 12}
            return json_response(200, {"id": "chatcmpl-fault-0001", "object": "chat.completion", "created": CREATED,
                                       "model": body.get("model") or DEFAULT_MODEL, "choices": [], "usage": usage})
        if fault == "stream_cut":
            return cut_stream(self.ok(request), 5)
        if fault == "unknown_model" and body.get("model") not in MODELS["unknown_model"]:
            error = dict(PROVIDER_BODIES["unknown_model"])
            error["message"] = error["message"].format(names=", ".join(MODELS["unknown_model"]),
                                                       model=body.get("model"))
            return json_response(400, {"error": error})
        prompt = _estimate(body)
        completion = body.get("max_tokens") if isinstance(body.get("max_tokens"), int) else 0
        if fault == "context_length" and prompt + completion > CONTEXT_LIMIT:
            error = dict(PROVIDER_BODIES["context_length"])
            error["message"] = error["message"].format(limit=CONTEXT_LIMIT, total=prompt + completion,
                                                       prompt=prompt, completion=completion)
            return json_response(400, {"error": error})
        thinking = body.get("thinking")
        if fault == "thinking" and not (isinstance(thinking, dict) and thinking.get("type") == "disabled"):
            return self._think(request, body)
        return self.ok(request)

    def _keep_alive(self, request: httpx2.Request, body: dict) -> httpx2.Response:
        """先发 delay 秒的保持连接（空行，或流式的 SSE 注释），再把正常的回答发完；服务器关闭时立刻放手。"""
        answer = self.ok(request)
        streaming = bool(body.get("stream"))
        beat = b": keep-alive\n\n" if streaming else b"\n"

        def pieces():
            end = time.monotonic() + self.delay
            while time.monotonic() < end and not self.stopping.wait(KEEPALIVE_EVERY):
                yield beat
            yield answer.read()

        kind = "text/event-stream" if streaming else "application/json"
        return httpx2.Response(200, content=pieces(), headers={"content-type": kind, CHUNKED: "1"})

    def _think(self, request: httpx2.Request, body: dict) -> httpx2.Response:
        """先拿到不限长度的完整回答，再让思维链先用掉 max_tokens：不够时回答是空的。"""
        if body.get("stream"):
            return Rejected(400, "This test path only serves stream=false requests.").response()
        limit = body.get("max_tokens") if isinstance(body.get("max_tokens"), int) else None
        unlimited = {k: v for k, v in body.items() if k not in ("max_tokens", "max_completion_tokens")}
        answer = json.loads(self.ok(with_body(request, unlimited)).content)
        choice, usage = answer["choices"][0], answer["usage"]
        message, needed, reasoning = dict(choice["message"]), usage["completion_tokens"], REASONING_TOKENS
        if limit is not None and reasoning + needed > limit:
            reasoning, needed = min(reasoning, limit), 0
            message, choice = {"role": "assistant", "content": ""}, {**choice, "finish_reason": "length"}
        message["reasoning_content"] = (_REASONING * (reasoning // 30 + 1))[:reasoning]
        prompt = usage["prompt_tokens"]
        usage = {"prompt_tokens": prompt, "completion_tokens": reasoning + needed,
                 "total_tokens": prompt + reasoning + needed,
                 "completion_tokens_details": {"reasoning_tokens": reasoning}}
        return json_response(200, {**answer, "choices": [{**choice, "message": message}], "usage": usage})


def _known(fault: str) -> None:
    if fault not in FAULTS:
        raise ValueError(f"没有名为 {fault!r} 的故障，可选：{'、'.join(FAULTS)}")


class FaultServer(LocalServer):
    """后台线程里的故障服务器：`url(故障名)` 给出 base_url，`reset()` 把收到的请求清零。`hits` 数每个故障的请求，
    `log` 每个请求一行：故障、SDK 的第几次尝试（请求头 x-stainless-retry-count）、消息条数、token（估算）、状态码。"""

    fault = "ok"
    hits: collections.Counter
    log: list[dict]
    _timer: threading.Timer | None = None

    def url(self, fault: str) -> str:
        """某个故障的 base_url；`"connection"` 给出一个没有人监听的地址。"""
        _known(fault)
        return closed_port_url(self.host) if fault == "connection" else f"{self.origin}/{fault}/v1"

    def reset(self) -> None:
        with self.handler.lock:
            self.handler.hits.clear()
            self.handler.log.clear()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        super().close()


def start_fault_server(fault: str = "ok", *, host: str = "127.0.0.1", port: int = 0, delay: float = 5.0,
                       lifetime: float | None = None, verbose: bool = False) -> FaultServer:
    """在后台线程里启动故障服务器。`fault` 只决定 `base_url` 指向哪个故障；`delay` 是“超时”拖的秒数
    （要比客户端的 timeout 长）；`lifetime` 秒后自己停下，默认 `None`：开到进程退出为止。"""
    _known(fault)
    if not is_loopback(host, listening=True):
        raise ValueError(f"故障服务器只监听本机回环地址（127.0.0.1、::1、localhost），收到 {host!r}")
    server = serve(FaultHandler(delay=delay), host, port, verbose=verbose, cls=FaultServer)
    server.fault, server.base_url = fault, server.url(fault)
    server.hits, server.log = server.handler.hits, server.handler.log  # 和处理函数共用，reset() 就地清零
    if lifetime is not None:
        server._timer = threading.Timer(lifetime, server.close)
        server._timer.daemon = True
        server._timer.start()
    return server
