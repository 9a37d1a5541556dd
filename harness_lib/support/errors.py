"""端点故障：项目自己的异常类型，在 Jupyter 里只显示几行中文，而不是几十行调用栈。

这里不是课程内容本身。真实端点会遇到假模型从不出现的问题：密钥不对、被限流、服务器出错、
返回的不是 JSON、流式回复中途断掉……`EndpointError` 把这些统一成一句“原因 + 怎么办”，
SDK 抛出的原始异常保存在 `original`（也是 `__cause__`），需要细节时还能找到。
07_endpoint_faults 逐个演示这些故障。

- `from_sdk(exc, key=None)`：把 openai SDK 的异常归类，变成 `EndpointError`（说明文字复用
  `harness_lib.switch.explain_error`，已打码）；
- `call_model(client, **kwargs)`：调用 `client.chat.completions.create(**kwargs)`，端点出错时抛出
  `EndpointError`；回复里没有 choices 也算出错。`agent_loop` 用它调模型；
- `collect_stream(stream)`：把流式回复拼回一条消息；流没有发出 `finish_reason` 就结束时抛出
  `EndpointError("stream_cut", ...)`；
- `RETRY_POLICY`：真实端点的客户端用的重试次数和超时。
"""

import json

import openai

from .switch import explain_error, redact

RETRY_POLICY = {"max_retries": 2, "timeout": 60}
"""真实端点的客户端设置：失败后 SDK 自动重试 2 次（一共最多 3 次请求），每次请求最多等 60 秒。

SDK 只重试可能自己好起来的错误：连接失败、超时、408、409、429 和 5xx；401、403、404、400 不重试。
两次尝试之间先看服务器的 `Retry-After`（或 `retry-after-ms`）响应头，没有就按 0.5、1、2……秒递增等待（最多 8 秒）。
每次重试，SDK 都在名为 "openai" 的 logger 上记一条 INFO 日志。`harness_lib.switch` 建的真实客户端用的就是这组值。
"""


class EndpointError(Exception):
    """调用模型端点失败。`kind` 是简短的类别名，`explanation` 是给学习者看的中文说明。

    类别：auth、permission、not_found、rate_limit、server、timeout、connection、
    bad_response、no_choices、stream_cut、bad_request、other。
    """

    def __init__(self, kind, explanation, *, original=None):
        super().__init__(explanation)
        self.kind = kind
        self.explanation = explanation
        self.original = original
        if original is not None:
            self.__cause__ = original

    def __str__(self):
        return f"[{self.kind}] {self.explanation}"

    def _render_traceback_(self):
        """IPython 用这个方法代替完整的调用栈：只显示类别、说明和原始异常的类型。"""
        lines = [f"EndpointError（{self.kind}）：{self.explanation}"]
        if self.original is not None:
            lines.append(f"    原始异常：{type(self.original).__name__}（保存在 .original 里）")
        lines.append("    agent_loop 遇到这种错误时不会改动 messages：修好原因后重新运行这一格，就能接着跑。")
        return lines


def _kind_of(exc):
    """SDK 异常 → 类别名。顺序要紧：超时是连接错误的子类，4xx 的具体类都是 APIStatusError 的子类。"""
    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "connection"
    if isinstance(exc, openai.APIResponseValidationError):
        return "bad_response"
    if isinstance(exc, openai.AuthenticationError):
        return "auth"
    if isinstance(exc, openai.PermissionDeniedError):
        return "permission"
    if isinstance(exc, openai.NotFoundError):
        return "not_found"
    if isinstance(exc, openai.RateLimitError):
        return "rate_limit"
    if isinstance(exc, (openai.BadRequestError, openai.UnprocessableEntityError)):
        return "bad_request"
    if isinstance(exc, openai.APIStatusError):
        return "server" if exc.status_code >= 500 else "other"
    if isinstance(exc, json.JSONDecodeError):
        return "bad_response"
    if isinstance(exc, UnicodeEncodeError):
        return "auth"  # 密钥或 base_url 里混进了非 ASCII 字符，请求头发不出去
    return "other"


def _retries_taken(exc):
    """SDK 在每次请求的 x-stainless-retry-count 头里写着这是第几次重试；取最后一次请求的值。"""
    request = getattr(exc, "request", None)
    try:
        return int(request.headers.get("x-stainless-retry-count") or 0)
    except (AttributeError, TypeError, ValueError, RuntimeError):
        return 0


def _snippet(text, key, limit=80):
    """回复内容的开头一小段，压成一行并打码。"""
    text = " ".join(str(text).split())
    return redact(text if len(text) <= limit else text[:limit] + "…", key)


def _not_json(text, key):
    return ("返回的不是 JSON（HTTP 200）：服务器回了一个网页或别的文字，而不是模型的回复。"
            "常见原因：base_url 指向了网页、登录页或代理的提示页，而不是 API 地址（通常以 /v1 结尾）；"
            f"也可能是网络要求先登录。回复开头：{_snippet(text, key)}")


def from_sdk(exc, key=None):
    """把调用端点时抛出的异常变成 `EndpointError`：类别 + 中文说明（已打码），原异常放在 `original`。

    `key` 是要从说明里抹掉的密钥（一个或多个）。已经是 `EndpointError` 的原样返回。
    """
    if isinstance(exc, EndpointError):
        return exc
    kind = _kind_of(exc)
    if kind == "bad_response":
        body = getattr(exc, "body", None) if isinstance(exc, openai.APIError) else getattr(exc, "doc", "")
        text = _not_json(body or "", key)
    else:
        text = explain_error(exc, key)
    retries = _retries_taken(exc)
    if retries:
        text += f"（SDK 已经自动重试了 {retries} 次，仍然失败。）"
    return EndpointError(kind, text, original=exc)


def call_model(client, **kwargs):
    """调用 `client.chat.completions.create(**kwargs)`，返回完整的回复。

    端点出错时抛出 `EndpointError`（原异常在 `original` 里）；回复不是 JSON、或者没有任何 choices，
    也抛出 `EndpointError`。`stream=True` 时原样返回流，用 `collect_stream` 读完并检查。只有 HTTP 400 原样抛出 `openai.BadRequestError`：那说明是我们自己
    发出的请求不合格（比如对话记录不成对），要改的是代码，不是端点，03、04 教过怎样读它。
    """
    key = getattr(client, "api_key", None)
    try:
        response = client.chat.completions.create(**kwargs)
    except openai.BadRequestError:
        raise
    except (openai.APIError, json.JSONDecodeError, UnicodeEncodeError) as exc:
        raise from_sdk(exc, key) from exc
    if kwargs.get("stream"):  # 流式回复：块还没到，交给 collect_stream 去拼、去检查
        return response
    if isinstance(response, str):  # Content-Type 不是 JSON 时，SDK 直接把文字交回来
        raise EndpointError("bad_response", _not_json(response, key))
    choices = getattr(response, "choices", None)
    if not choices or getattr(choices[0], "message", None) is None:
        raise EndpointError("no_choices", (
            "回复里没有候选回答（HTTP 200，但 choices 为空）：服务器收下了请求，却没有给出任何内容。"
            "常见原因：内容被服务商的安全过滤拦下、兼容接口不完整，或者把错误写在了正常回复里。"
            "可以重试一次，或换个说法；反复出现就检查服务商的说明。"
            f"回复内容：{_snippet(_dump(response), key)}"))
    return response


def _dump(response):
    try:
        return json.dumps(response.model_dump(exclude_none=True), ensure_ascii=False)
    except Exception:
        return repr(response)


def collect_stream(stream):
    """把流式回复的各块拼回一条消息，返回 `(message_dict, finish_reason)`。

    `message_dict` 的样子和 `message.model_dump(exclude_none=True)` 相同，可以直接追加进 messages。
    流结束了却没有收到任何 `finish_reason`（连接中途断开、代理截断），SDK 不会报错，
    这里抛出 `EndpointError("stream_cut", ...)`：半截回复不能当成完整的一轮。
    """
    import httpx2

    from .streaming import accumulate  # 拼块的逻辑只有一份，在 stream.py 里（08_streaming 讲它）

    try:
        result = accumulate(stream)
    except (openai.APIError, httpx2.TransportError) as exc:
        raise EndpointError("stream_cut", "流式回复在中途断开了：已经收到的只是半条消息，不能放进 messages。"
                            f"连接报错：{type(exc).__name__}。检查网络或代理后重新运行这一格即可。",
                            original=exc) from exc
    return result["message"], result["finish_reason"]
