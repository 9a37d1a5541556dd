"""端点故障：一个异常类型 `EndpointError` 和一张错误分类表 `ERROR_TABLE`，在 Jupyter 里只显示几行中文。

真实端点会遇到假模型从不出现的问题（密钥不对、限流、服务器出错、返回的不是 JSON……）。
表里一行认一种异常：类别名、中文说明的开头、SDK 会不会自动重试、要不要附上服务器原话。
`explain_error`（说明）、`from_sdk`（归类成 `EndpointError`）和 `call_model`（`agent_loop` 调模型用的）
都只查这一张表；SDK 的原始异常留在 `EndpointError.original`。07_endpoint_faults 逐个演示。
"""

from __future__ import annotations

import json
from typing import NamedTuple

import openai

from ..safety.secrets import redact

# 真实端点的客户端设置：失败后 SDK 自动重试 2 次，连接、读、写每一步最多等 60 秒（不是整个请求的总时长）。
# SDK 只重试 `ERROR_TABLE` 里 `sdk_retries` 为真的那几行；两次之间先看 Retry-After，没有就 0.5、1、2…… 秒退避。
RETRY_POLICY = {"max_retries": 2, "timeout": 60}
# 每次回答的长度上限（token）。原文写 8000，那是给云端大模型的；512 让上下文只有 2048 的本机小模型也装得下
MAX_TOKENS = 512


class SwitchConfigError(ValueError):
    """模型设置不完整或写错了（缺模型名、缺密钥、HARNESS_MODE 取值不对……），消息是中文。"""


class EndpointError(Exception):
    """调用模型端点失败。`kind` 是类别名（`ERROR_TABLE` 的一列，另有 stream_cut、stream_error、no_choices），
    `explanation` 是给学习者看的中文说明，`original` 是 SDK 的原始异常。"""

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


class Status:
    """按状态码认：`Status(408)` 只认 408，`Status(500, 999)` 认 500 到 999。"""

    def __init__(self, low: int, high: int | None = None):
        self.low = low
        self.high = low if high is None else high

    def __call__(self, exc) -> bool:
        return isinstance(exc, openai.APIStatusError) and self.low <= exc.status_code <= self.high


class Says:
    """按错误体认：code、type、message 里出现任何一个词（不分大小写），或 `code` 整个等于 `codes` 之一。

    写了 `status` 只认这些状态码；不写时，没有状态码的流中途报错（`openai.APIError`）也认。
    """

    def __init__(self, *words: str, codes: tuple[str, ...] = (), status: tuple[int, ...] | None = None):
        self.words = tuple(w.lower() for w in words)
        self.codes = tuple(str(c).lower() for c in codes)
        self.status = status

    def __call__(self, exc) -> bool:
        if not isinstance(exc, openai.APIError) or isinstance(exc, openai.APIConnectionError):
            return False
        code = getattr(exc, "status_code", None)
        if self.status is not None and code not in self.status:
            return False
        if self.codes and _body_code(exc) in self.codes:
            return True
        text = _body_text(exc).lower()
        return any(word in text for word in self.words)


def _error_object(exc):
    """错误体里说明错误的那一层：有 `error` 键就是它（多数服务商），没有就是整个错误体（硅基流动）。"""
    body = getattr(exc, "body", None)
    return body.get("error", body) if isinstance(body, dict) else body


def _body_code(exc) -> str:
    """错误体里的 `code`（小写字符串）；没有就是空的。"""
    inner = _error_object(exc)
    code = inner.get("code") if isinstance(inner, dict) else None
    return "" if code is None else str(code).strip().lower()


def _body_text(exc) -> str:
    """错误体里能说明原因的文字：code、type、message，还有异常自己的消息。"""
    inner = _error_object(exc)
    parts = [str(getattr(exc, "message", "") or "")]
    if isinstance(inner, dict):
        parts += [str(inner.get(k) or "") for k in ("code", "type", "message")]
    elif inner:
        parts.append(str(inner))
    return " ".join(parts)


class ErrorRule(NamedTuple):
    """错误分类表的一行。`match` 是异常类型、`Status` 或 `Says`；`head` 可以引用 `{host}`、`{status}`、
    `{snippet}`（回复的开头）、`{message}`、`{type}`、`{first_line}`；`server_words`：要不要附上服务器原话。"""

    match: type | tuple | Status | Says
    kind: str
    head: str
    sdk_retries: bool
    server_words: bool

    def matches(self, exc) -> bool:
        """这一行认不认这个异常。"""
        return isinstance(exc, self.match) if isinstance(self.match, (type, tuple)) else self.match(exc)


_NOT_JSON = ("返回的不是 JSON（HTTP 200）：服务器回了一个网页或别的文字，而不是模型的回复。"
             "常见原因：base_url 指向了网页、登录页或代理的提示页，而不是 API 地址（通常以 /v1 结尾）；"
             "也可能是网络要求先登录。回复开头：{snippet}")
_OTHER_STATUS = "服务器返回了错误（HTTP {status}）。"

ERROR_TABLE = [
    # 顺序要紧，越具体的越靠前：超时是连接错误的子类，4xx 的具体类都是 APIStatusError 的子类
    ErrorRule(openai.APITimeoutError, "timeout",
              "无法连接（超时）：{host} 在规定时间内没有回应。"
              "请检查网络或代理，稍后再试；本地服务请确认它已经启动、没有卡住。", True, False),
    ErrorRule(openai.APIConnectionError, "connection",
              "无法连接：连不上 {host}。请检查 base_url 是否写对、网络或代理是否正常；"
              "本地服务（Ollama、vLLM、llama.cpp）请先确认它已经启动。", True, False),
    ErrorRule(openai.APIResponseValidationError, "bad_response", _NOT_JSON, False, False),
    ErrorRule(json.JSONDecodeError, "bad_response", _NOT_JSON, False, False),
    # 服务商的具体情形：按错误体里的原话认，排在同一状态码的一般说明前面
    ErrorRule(Says("insufficient balance", "insufficient_balance", "arrearage", status=(402, 400, 403)), "balance",
              "余额不足或欠费（HTTP {status}）：账户里没钱了，重试没用。"
              "到服务商控制台充值，或换一个有余额的密钥。", False, True),
    # 没有这个模型：OpenAI、vLLM、百炼兼容模式 404 “… does not exist …”；DeepSeek 400 “Model Not Exist”；
    # 月之暗面 404 “Not found the model”；智谱 400 业务码 1211；硅基流动 400 code 20012。
    # 出处：openai-agents-python#458、Qwen3#20、LangBot#1643、OpenDeepWiki#308、docs.bigmodel.cn/cn/faq/api-code、
    # docs.siliconflow.cn/en/faqs/error-code（核对 2026-12-01）
    ErrorRule(Says("model not exist", "model does not exist", "does not exist or you do not have access",
                   "` does not exist",  # vLLM、Ollama：“The model `x` does not exist.”
                   "not found the model", "模型不存在",
                   codes=("model_not_found", "modelnotfound", "1211", "20012"), status=(400, 404)), "not_found",
              "找不到这个模型（HTTP {status}）：服务商不认这个模型名。常见原因：名字拼错（大小写也算）、"
              "服务商已经把它下线或改名、账户还没开通它。点切换器的「测试连接」，或调用 client.models.list()，"
              "看看这把密钥能用哪些名字，再改「模型名」。", False, True),
    ErrorRule(Says("data_inspection_failed", "datainspectionfailed", "inappropriate content"), "content_filter",
              "内容审核没通过（阿里云百炼的 data_inspection_failed）：服务商认为输入或输出里有不合适的内容。"
              "原样重试多半没用：触发审核的内容若在 messages 里（常见是工具输出里的网页、日志），每次都会再被拦下。"
              "删掉那条消息或换个说法再跑。", False, True),
    ErrorRule(Says("context_length_exceeded", "maximum context length", "context window",
                   "range of input length", "input is too long", "prompt is too long", status=(400, 413)),
              "context_length",
              "上下文太长（HTTP {status}）：messages 加起来超过了模型能读的长度。循环每一轮都把工具输出放进去，"
              "越跑越长。开一段新对话、把工具输出截短（05 讲过），或换上下文更长的模型。", False, True),
    # 百炼：思考模式的非流式调用回 400 “parameter.enable_thinking must be set to false …”
    # （alibabacloud.com/help/en/model-studio/error-code，核对 2026-12-01）
    ErrorRule(Says("enable_thinking", status=(400,)), "bad_request",
              "这个模型默认开着思考模式（通义千问 Qwen3 一类），非流式调用不接受（HTTP {status}）。"
              "请求里加上 extra_body={{\"enable_thinking\": False}}，或改用流式调用（08 的 agent_loop_stream）。",
              False, True),
    # 思考模式没带回 reasoning_content：DeepSeek（api-docs.deepseek.com/guides/thinking_mode）、
    # Kimi（kimi.com/code/docs/en/kimi-code/error-reference.html）都回 400（核对 2026-12-01）
    ErrorRule(Says("missing `reasoning_content`", "must be passed back", "reasoning_content is missing",
                   status=(400,)), "bad_request",
              "少了 reasoning_content（HTTP {status}，思考模式，DeepSeek、Kimi 都这样要求）：带工具调用的那一轮助手消息，"
              "以后每次请求都要原样带着它的 reasoning_content。用 model_dump() 追加整条消息就会带上；"
              "自己拼字典、只抄 content 和 tool_calls 的代码会丢掉它。", False, True),
    ErrorRule(Says("role 'tool'", 'role \"tool\"', "role \\\"tool\\\"", "followed by tool messages",
                   "did not have response messages", status=(400,)), "bad_request",
              "工具调用和工具结果没有配对（HTTP {status}）：每个 tool_call_id 都要有一条 tool 消息，"
              "紧跟在提出它的那条助手消息后面。检查是不是只执行了第一个调用，"
              "或者截短 messages 时把一对拆开了。", False, True),
    ErrorRule(Says("'content'", "content' to be", "tool_choice", "unsupported param", "cannot use tools",
                   "raise_exception", "unsupported role", status=(500,)), "request_shape",
              "服务器出错（HTTP {status}），但原话说的是请求的形状：llama.cpp 一类的本地服务常把不接受的请求"
              "写成 500，而不是 400。重试没用，先读原话。常见两种：助手消息没有 content"
              "（补上 \"content\": \"\"）；不支持 tool_choice=\"required\"（不传它）。", True, True),
    ErrorRule(openai.AuthenticationError, "auth",
              "密钥不对（HTTP 401）：服务器不接受这个 API 密钥。请确认密钥复制完整、"
              "属于当前这家服务商（和 base_url 对得上），然后重新粘贴。", False, True),
    ErrorRule(openai.PermissionDeniedError, "permission",
              "没有权限（HTTP 403）：密钥有效，但不能用这个模型或接口。"
              "请到服务商控制台检查模型是否已开通、账户余额和地区限制。", False, True),
    ErrorRule(openai.NotFoundError, "not_found",
              "找不到（HTTP 404）：模型名不存在，或 base_url 的路径不对（通常以 /v1 结尾）。"
              "请核对模型名和 base_url。", False, True),
    ErrorRule(openai.RateLimitError, "rate_limit",
              "被限流（HTTP 429）：请求太频繁，或者额度已经用完。"
              "稍等一会儿再试，或到服务商控制台查看余额和配额。", True, True),
    ErrorRule(Status(500, 999), "server",
              "服务器出错（HTTP {status}）：问题出在服务商那边，不是你的代码。稍后再试。", True, True),
    ErrorRule((openai.BadRequestError, openai.UnprocessableEntityError), "bad_request",
              "请求被拒绝（HTTP {status}）：服务器认为这次请求的内容不合格，原话里通常写明了是哪个字段。",
              False, True),
    ErrorRule(Status(408), "other", _OTHER_STATUS, True, True),  # 服务器等请求等得超时了
    ErrorRule(Status(409), "other", _OTHER_STATUS, True, True),  # 冲突（常见于锁超时）
    ErrorRule(openai.APIStatusError, "other", _OTHER_STATUS, False, True),
    ErrorRule(openai.APIError, "other", "服务商报告了错误（没有状态码，常见于流的中途）。", False, True),
    ErrorRule(UnicodeEncodeError, "auth",  # 请求头发不出去，SDK 连请求都没发
              "密钥或 base_url 里有非 ASCII 字符，请求头发不出去。常见原因：复制时带上了中文、"
              "全角字符或不可见的空白。请重新粘贴纯英文、数字组成的密钥。", False, False),
    ErrorRule(SwitchConfigError, "other", "{message}", False, False),
    ErrorRule(BaseException, "other", "出错了：{type}: {first_line}", False, False),
]


def classify(exc) -> ErrorRule:
    """在 `ERROR_TABLE` 里找第一行认得 `exc` 的，返回这一行（最后一行认得任何异常）。"""
    return next(rule for rule in ERROR_TABLE if rule.matches(exc))


def _first_line(text, limit: int = 200) -> str:
    line = str(text).strip().splitlines()[0] if str(text).strip() else ""
    return line if len(line) <= limit else line[:limit] + "…"


def _server_words(exc) -> str:
    """服务器返回的原话（第一行）。优先用错误体里的 message。"""
    inner = _error_object(exc)
    msg = inner.get("message") if isinstance(inner, dict) else None
    return _first_line(msg if isinstance(msg, str) and msg.strip() else getattr(exc, "message", None) or exc)


def _host_of(exc) -> str:
    request = getattr(exc, "request", None)
    try:
        url = request.url
        return f"{url.scheme}://{url.netloc.decode() if isinstance(url.netloc, bytes) else url.netloc}"
    except Exception:
        return ""


def _snippet(text, key, limit=80):
    """回复内容的开头一小段，压成一行并打码。"""
    text = " ".join(str(text).split())
    return redact(text if len(text) <= limit else text[:limit] + "…", key)


def _reply_text(exc) -> str:
    """坏回复的原文：SDK 的校验错误放在 `body` 里，JSON 解析错误放在 `doc` 里。"""
    body = getattr(exc, "body", None) if isinstance(exc, openai.APIError) else getattr(exc, "doc", "")
    return body or ""


def explain_error(exc, key=None) -> str:
    """按 `ERROR_TABLE` 把一次失败翻译成一句中文：原因、怎么办、服务器原话；`key`（一个或多个）会被打码。"""
    rule = classify(exc)
    text = rule.head.format(
        host=_host_of(exc) or "服务器",
        status=getattr(exc, "status_code", "?"),
        snippet=_snippet(_reply_text(exc), key) if "{snippet}" in rule.head else "",
        message=str(exc),
        type=type(exc).__name__,
        first_line=_first_line(exc),
    )
    words = _server_words(exc) if rule.server_words else ""
    return redact(text + (f" 服务器原话：{words}" if words else ""), key)


def _retries_taken(exc):
    """SDK 在每次请求的 x-stainless-retry-count 头里写着这是第几次重试；取最后一次请求的值。"""
    request = getattr(exc, "request", None)
    try:
        return int(request.headers.get("x-stainless-retry-count") or 0)
    except (AttributeError, TypeError, ValueError, RuntimeError):
        return 0


def from_sdk(exc, key=None):
    """按 `ERROR_TABLE` 把异常变成 `EndpointError`（说明已打码，原异常在 `original`）；已经是的原样返回。"""
    if isinstance(exc, EndpointError):
        return exc
    text = explain_error(exc, key)
    retries = _retries_taken(exc)
    if retries:
        text += f"（SDK 已经自动重试了 {retries} 次，仍然失败。）"
    return EndpointError(classify(exc).kind, text, original=exc)


def call_model(client, **kwargs):
    """调用 `client.chat.completions.create(**kwargs)`；端点出错、回复不是 JSON 或没有 choices 时抛出 `EndpointError`。

    我们自己的请求不合格（HTTP 400，比如记录不成对）原样抛出 `openai.BadRequestError`：要改的是代码。
    余额、内容审核、上下文太长的 400 改代码没用，也变成 `EndpointError`。`stream=True` 时原样返回流。
    """
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
        raise EndpointError("bad_response", _NOT_JSON.format(snippet=_snippet(response, key)))
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
