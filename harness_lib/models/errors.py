"""端点故障：一个异常类型 `EndpointError` 和一张错误分类表 `ERROR_TABLE`，在 Jupyter 里只显示几行中文。
真实端点会遇到假模型从不出现的问题（密钥不对、限流、服务器出错、返回的不是 JSON……），表里一行认一种异常：类别名、中文说明的开头、SDK 会不会自动重试、要不要附上服务器原话。
`explain_error`（说明）、`from_sdk`（归类成 `EndpointError`）和 `call_model`（`agent_loop` 调模型用的）
都只查这一张表；SDK 的原始异常留在 `EndpointError.original`。07_endpoint_faults 逐个演示。
"""

from __future__ import annotations

import json
import ssl
from typing import Any, NamedTuple

import openai

from ..safety.secrets import redact
from ..text import one_line, shorten
from .net import what_timed_out


class SwitchConfigError(ValueError):
    """模型设置不完整或写错了（缺模型名、缺密钥、HARNESS_MODE 取值不对……），消息是中文。"""


class EndpointError(Exception):
    """调用模型端点失败。`kind` 是类别名（`ERROR_TABLE` 的一列，另有 stream_cut、stream_error、no_choices；certificate 是证书校验失败；
    no_chat_tools 是模型在这个端点的 Chat Completions 里带不了工具），
    `explanation` 是给学习者看的中文说明，`original` 是 SDK 的原始异常。"""

    def __init__(self, kind, explanation, *, original=None):
        super().__init__(explanation)
        self.kind, self.explanation, self.original = kind, explanation, original
        self.__cause__ = original

    def __str__(self):
        return f"[{self.kind}] {self.explanation}"

    def _render_traceback_(self):
        """IPython 用这个方法代替完整的调用栈：只显示类别、说明和原始异常的类型。"""
        original = [f"    原始异常：{type(self.original).__name__}（保存在 .original 里）"] if self.original else []
        return [f"EndpointError（{self.kind}）：{self.explanation}", *original,
                "    agent_loop 遇到这种错误时不会改动 messages：修好原因后重新运行这一格，就能接着跑。"]


def status(low: int, high: int | None = None):
    """按状态码认：`status(408)` 只认 408，`status(500, 999)` 认 500 到 999。"""
    return lambda exc: isinstance(exc, openai.APIStatusError) and low <= exc.status_code <= (high or low)


def _said(exc) -> tuple[str, str, str]:
    """错误体里的 (`code`，能说明原因的全部文字，`message`)。多数服务商包在 `error` 里，硅基流动不包；
    没有 `message` 时取 `detail`。"""
    body = getattr(exc, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else body
    if not isinstance(inner, dict):
        return "", f"{getattr(exc, 'message', '') or ''} {inner or ''}", ""
    # FastAPI 写的服务（llama-cpp-python 的兼容服务器）没有 message，原话在 detail 里：{"detail": "Not Found"}
    code, message = inner.get("code"), inner.get("message", inner.get("detail"))
    text = " ".join(str(x or "") for x in (getattr(exc, "message", ""), code, inner.get("type"), message))
    return ("" if code is None else str(code).strip().lower()), text, (message if isinstance(message, str) else "")


def offers_none(exc) -> bool:
    """服务器给的出路里有“把 reasoning_effort 设成 none”。"""
    return "reasoning_effort to 'none'" in str(exc).lower().replace('"', "'")


def says(*words: str, codes: tuple[str, ...] = (), status: tuple[int, ...] | None = None):
    """按错误体认：code、type、message 里出现任何一个词（不分大小写），或 `code` 整个等于 `codes` 之一。
    写了 `status` 只认这些状态码；不写时，没有状态码的流中途报错（`openai.APIError`）也认。"""
    def match(exc) -> bool:
        if not isinstance(exc, openai.APIError) or isinstance(exc, openai.APIConnectionError):
            return False
        if status is not None and getattr(exc, "status_code", None) not in status:
            return False
        code, text, _ = _said(exc)
        return code in codes or any(word.lower() in text.lower() for word in words)
    return match


class ErrorRule(NamedTuple):
    """错误分类表的一行。`match` 是异常类型或 `status(...)`、`says(...)`；`head` 可以引用 `{host}`、`{status}`、
    `{snippet}`（回复的开头）、`{message}`、`{type}`、`{first_line}`、`{limit}`（超时的是哪一条上限、多少秒）；
    `server_words`：要不要附上服务器原话。"""

    match: Any
    kind: str
    head: str
    sdk_retries: bool
    server_words: bool

    def matches(self, exc) -> bool:
        return isinstance(exc, self.match) if isinstance(self.match, (type, tuple)) else self.match(exc)


_NOT_JSON = ("返回的不是 JSON（HTTP 200）：服务器回了一个网页或别的文字，而不是模型的回复。"
             "常见原因：base_url 指向了网页、登录页或代理的提示页，而不是 API 地址（通常以 /v1 结尾）；"
             "也可能是网络要求先登录。回复开头：{snippet}")
_NO_CHOICES = ("回复里没有候选回答（HTTP 200，但 choices 为空）：服务器收下了请求，却没有给出任何内容。"
               "常见原因：内容被服务商的安全过滤拦下、兼容接口不完整，或者把错误写在了正常回复里。"
               "可以重试一次，或换个说法；反复出现就检查服务商的说明。回复内容：{snippet}")
_OTHER_STATUS = "服务器返回了错误（HTTP {status}）。"

ERROR_TABLE = [
    # 顺序要紧，越具体的越靠前：超时是连接错误的子类，4xx 的具体类都是 APIStatusError 的子类
    # {limit} 是这次请求自己的上限（net.what_timed_out），不是常量：0.2 秒的客户端就说 0.2 秒
    ErrorRule(openai.APITimeoutError, "timeout", "超时：{host} 没有在规定时间内给出完整的回复：{limit}。"
              "请检查网络或代理，稍后再试；本地服务请确认它已经启动、没有卡住。", True, False),
    ErrorRule(lambda exc: isinstance(exc, openai.APIConnectionError) and certificate_failure(exc), "certificate",
              "证书校验失败（CERTIFICATE_VERIFY_FAILED）：{host} 出示的证书不是本机信任的机构签发的。校园网、公司网络的代理"
              "常常这样替换证书。办法：向网络管理员要代理的根证书文件，启动 Jupyter 之前把环境变量 SSL_CERT_FILE 设成它的路径。"
              "不要关掉证书校验：那样密钥可能被中间人看到。", True, False),
    ErrorRule(openai.APIConnectionError, "connection", "无法连接：连不上 {host}。请检查 base_url 是否写对、"
              "网络或代理是否正常；本地服务（Ollama、vLLM、llama.cpp）请先确认它已经启动。", True, False),
    ErrorRule((openai.APIResponseValidationError, json.JSONDecodeError), "bad_response", _NOT_JSON, False, False),
    # 服务商的具体情形：按错误体里的原话认，排在同一状态码的一般说明前面
    ErrorRule(says("insufficient balance", "insufficient_balance", "arrearage", status=(402, 400, 403)), "balance",
              "余额不足或欠费（HTTP {status}）：账户里没钱了，重试没用。到服务商控制台充值，或换一个有余额的密钥。",
              False, True),
    # OpenAI 余额用完回 429（不是 402），code 和 type 都是 insufficient_quota，原话 “You exceeded your current quota,
    # please check your plan and billing details.”（platform.openai.com/docs/guides/error-codes；openai-python#1671、
    # mindsdb/anton#284，2026-07；核对 2026-12-06）。SDK 把 429 都当限流照样重试（这一列记的是它）；切换器的客户端不重试
    # （net.no_retry_when_quota_is_gone）
    ErrorRule(says("insufficient_quota", "exceeded your current quota", status=(429,)), "balance",
              "余额用完了（HTTP {status}，insufficient_quota）：这不是请求太快，等多久、重试几次都不会好。"
              "到服务商控制台的账单页充值或提高额度上限，或换一个有余额的密钥。", True, True),
    # 没有这个模型：OpenAI、vLLM、百炼兼容模式 404 “… does not exist …”；DeepSeek 400 “Model Not Exist”，
    # 2026-09 起是 “The supported API model names are deepseek-flash, deepseek-v4-pro, but you passed X”
    # （interview-coder-cn#87，2026-09-20）；
    # 月之暗面 404 “Not found the model”；智谱 400 业务码 1211；硅基流动 400 code 20012。
    # 出处：openai-agents-python#458、Qwen3#20、LangBot#1643、OpenDeepWiki#308、docs.bigmodel.cn/cn/faq/api-code、
    # docs.siliconflow.cn/en/faqs/error-code（核对 2026-12-01）
    ErrorRule(says("model not exist", "model does not exist", "does not exist or you do not have access",
                   "supported api model names are",
                   "` does not exist",  # vLLM、Ollama：“The model `x` does not exist.”
                   "not found the model", "模型不存在",
                   codes=("model_not_found", "modelnotfound", "1211", "20012"), status=(400, 404)), "not_found",
              "找不到这个模型（HTTP {status}）：服务商不认这个模型名。常见原因：名字拼错（大小写也算）、"
              "服务商已经把它下线或改名、账户还没开通它。点切换器的「测试连接」，或调用 client.models.list()，"
              "看看这把密钥能用哪些名字，再改「模型名」。", False, True),
    ErrorRule(says("data_inspection_failed", "datainspectionfailed", "inappropriate content"), "content_filter",
              "内容审核没通过（阿里云百炼的 data_inspection_failed）：服务商认为输入或输出里有不合适的内容。"
              "原样重试多半没用：触发审核的内容若在 messages 里（常见是工具输出里的网页、日志），每次都会再被拦下。"
              "删掉那条消息或换个说法再跑。", False, True),
    ErrorRule(says("context_length_exceeded", "maximum context length", "context window", "max_seq_len",
                   "range of input length", "input is too long", "prompt is too long", status=(400, 413)),
              "context_length", "上下文太长（HTTP {status}）：messages 加起来超过了模型能读的长度。"
              "循环每一轮都把工具输出放进去，越跑越长。开一段新对话、把工具输出截短（05 讲过），或换上下文更长的模型。",
              False, True),
    # OpenAI 的 GPT-5.6、GPT-6 系列：Chat Completions 带工具时思考强度只能是 none；服务器的原话里给了哪几条路，
    # 说明就只讲哪几条（QUIRKS["openai_tools_reasoning"]、["openai_tools_responses_only"] 的出处，核对 2026-12-06）
    ErrorRule(lambda exc: offers_none(exc) and says("function tools with reasoning_effort", status=(400,))(exc),
              "bad_request",
              "OpenAI 的 Chat Completions 不让这个模型带着思考调用工具（HTTP {status}）。服务器给了两条路："
              "改用 /v1/responses，或者请求里写 reasoning_effort=\"none\"（不再思考）；切换器的客户端会替你写上 none 再试。",
              False, True),
    ErrorRule(says("function tools with reasoning_effort", status=(400,)), "no_chat_tools",
              "这个模型在 Chat Completions 里不能调用工具（HTTP {status}）：服务器只给了 /v1/responses 这一条路。"
              "切换器的客户端会在底下替它改走那里（11 讲这个接口）；自己建的 openai.OpenAI 不会：换用切换器的客户端，"
              "或者换一个能调用工具的模型（OpenAI 的 gpt-6-luna、gpt-5.6 系列带 reasoning_effort=\"none\" 可以），"
              "或者用离线假模型。", False, True),
    # gpt-6-astra、gpt-6.1-sol：reasoning_effort 不收 "none"（litellm-docs#1173，2026-09；核对 2026-12-06）
    ErrorRule(says("supported values are: 'low'", status=(400,)), "bad_request",
              "这个模型的 reasoning_effort 不收 \"none\"（HTTP {status}），服务器列出了它收的值。要是为了带工具才写的 none，"
              "这个模型在 Chat Completions 里就带不了工具：换 gpt-6-luna、gpt-5.6 系列，或者用离线假模型，"
              "也可以改用它的 Responses API。", False, True),
    # 硅基流动：不支持思考的模型收到 enable_thinking 回 400 20015（immersive-translate#3418，2025-10，核对 2026-12-02）
    ErrorRule(says("does not support parameter `enable_thinking`", status=(400,)), "bad_request",
              "这个模型不支持思考模式，也就不收 enable_thinking（HTTP {status}）：请求里别传这个字段。", False, True),
    # 百炼的只思考模型（如 qwen3-235b-a22b-thinking-2507）不收 enable_thinking=False：
    # “The value of the enable_thinking parameter is restricted to True”（lobehub#8613、agentscope#2346，核对 2026-12-01）
    ErrorRule(says("restricted to true", status=(400,)), "bad_request",
              "这个模型只会思考（HTTP {status}），不收 enable_thinking=False：不要再传这个字段（百炼预设碰到一次就不再替这个模型传）。"
              "只思考的模型通常还只收流式调用：切换器的客户端碰到一次就替它在底下流式调用；自己建的客户端请用 08 的 agent_loop_stream。",
              False, True),
    # 月之暗面总在思考的模型（kimi-k3、kimi-k2.7-code）不收 thinking={"type": "disabled"}：
    # “invalid thinking: only type=enabled is allowed for this model”（oh-my-pi#3852，2026-06-30；QUIRKS["moonshot_always_thinks"]）
    ErrorRule(says("only type=enabled is allowed", status=(400,)), "bad_request",
              "这个模型总在思考（HTTP {status}），关不掉：请求里别传 thinking={{\"type\": \"disabled\"}}"
              "（月之暗面预设碰到一次就不再替这个模型传）。思考多深用顶层的 reasoning_effort。", False, True),
    # 月之暗面：thinking 和 reasoning_effort 只能写一个（nanobot#3939，2026-05-20）
    ErrorRule(says("cannot specify both 'thinking' and 'reasoning_effort'", status=(400,)), "bad_request",
              "thinking 和 reasoning_effort 只能写一个（HTTP {status}）：月之暗面的模型用其中之一控制思考，两个都写就拒绝。",
              False, True),
    # 百炼：思考模式的非流式调用回 400 “parameter.enable_thinking must be set to false …”
    # （alibabacloud.com/help/en/model-studio/error-code，核对 2026-12-01）
    ErrorRule(says("enable_thinking", status=(400,)), "bad_request",
              "这个模型开着思考模式，非流式调用不接受（HTTP {status}）。混合思考的模型（如开源版 Qwen3）："
              "请求里加上 extra_body={{\"enable_thinking\": False}}（百炼预设会替你加）；只会思考的模型（名字里带 thinking）："
              "只能流式调用：切换器的客户端碰到一次就替它在底下流式调用；自己建的客户端请用 08 的 agent_loop_stream。",
              False, True),
    # 思考模式没带回 reasoning_content：DeepSeek（api-docs.deepseek.com/guides/thinking_mode）、
    # Kimi（kimi.com/code/docs/en/kimi-code/error-reference.html）都回 400（核对 2026-12-01）
    ErrorRule(says("missing `reasoning_content`", "must be passed back", "reasoning_content is missing",
                   status=(400,)), "bad_request",
              "少了 reasoning_content（HTTP {status}，思考模式，DeepSeek、Kimi 都这样要求）：带工具调用的那一轮助手消息，"
              "以后每次请求都要原样带着它的 reasoning_content。用 model_dump() 追加整条消息就会带上；"
              "自己拼字典、只抄 content 和 tool_calls 的代码会丢掉它。", False, True),
    ErrorRule(says("role 'tool'", 'role \"tool\"', "role \\\"tool\\\"", "followed by tool messages",
                   "did not have response messages", status=(400,)), "bad_request",
              "工具调用和工具结果没有配对（HTTP {status}）：每个 tool_call_id 都要有一条 tool 消息，"
              "紧跟在提出它的那条助手消息后面。检查是不是只执行了第一个调用，或者截短 messages 时把一对拆开了。",
              False, True),
    # vLLM 启动时没开工具调用：带 tools 的请求回 400（docs.vllm.ai 的 tool_calling 一节；vllm#9986，核对 2026-12-02）
    ErrorRule(says("enable-auto-tool-choice", status=(400,)), "bad_request",
              "这个 vLLM 服务启动时没有打开工具调用（HTTP {status}）：代码不用改，要改的是服务。启动 vLLM 时加上 "
              "--enable-auto-tool-choice 和 --tool-call-parser（按模型选，Qwen 一类用 hermes），重启以后再试。", False, True),
    # 智谱（Z.AI）只收 tool_choice="auto"（hindsight#4246，2026-09，核对 2026-12-02）；本课程的循环不传 tool_choice
    # 硅基流动不收 tool_choice="required"（OpenManus#30，2025-03，核对 2026-12-02）
    ErrorRule(says("tool choice must be auto", "option for tool_choice is not yet supported", status=(400,)), "bad_request",
              "这个服务只接受 tool_choice=\"auto\"（HTTP {status}，智谱 GLM、硅基流动都这样）：去掉请求里的 tool_choice，"
              "或者写成 \"auto\"。本课程的循环本来就不传它。", False, True),
    ErrorRule(says("'content'", "content' to be", "tool_choice", "unsupported param", "cannot use tools",
                   "raise_exception", "unsupported role", status=(500,)), "request_shape",
              "服务器出错（HTTP {status}），但原话说的是请求的形状：llama.cpp 一类的本地服务常把不接受的请求"
              "写成 500，而不是 400。重试没用，先读原话。常见两种：助手消息没有 content"
              "（补上 \"content\": \"\"）；不支持 tool_choice=\"required\"（不传它）。", True, True),
    ErrorRule(openai.AuthenticationError, "auth", "密钥不对（HTTP 401）：服务器不接受这个 API 密钥。"
              "请确认密钥复制完整、属于当前这家服务商（和 base_url 对得上），然后重新粘贴。", False, True),
    ErrorRule(openai.PermissionDeniedError, "permission", "没有权限（HTTP 403）：密钥有效，但不能用这个模型或接口。"
              "请到服务商控制台检查模型是否已开通、账户余额和地区限制。", False, True),
    ErrorRule(openai.NotFoundError, "not_found", "找不到（HTTP 404）：模型名不存在，或 base_url 的路径不对"
              "（通常以 /v1 结尾）。请核对模型名和 base_url。", False, True),
    ErrorRule(openai.RateLimitError, "rate_limit", "被限流（HTTP 429）：请求太频繁，或者额度已经用完。"
              "稍等一会儿再试，或到服务商控制台查看余额和配额。", True, True),
    ErrorRule(status(500, 999), "server",
              "服务器出错（HTTP {status}）：问题出在服务商那边，不是你的代码。稍后再试。", True, True),
    ErrorRule((openai.BadRequestError, openai.UnprocessableEntityError), "bad_request",
              "请求被拒绝（HTTP {status}）：服务器认为这次请求的内容不合格，原话里通常写明了是哪个字段。", False, True),
    ErrorRule(status(408, 409), "other", _OTHER_STATUS, True, True),  # 408 服务器等请求超时，409 冲突（常见于锁超时）
    ErrorRule(openai.APIStatusError, "other", _OTHER_STATUS, False, True),
    ErrorRule(openai.APIError, "other", "服务商报告了错误（没有状态码，常见于流的中途）。", False, True),
    ErrorRule(UnicodeEncodeError, "auth",  # 请求头发不出去，SDK 连请求都没发
              "密钥或 base_url 里有非 ASCII 字符，请求头发不出去。常见原因：复制时带上了中文、"
              "全角字符或不可见的空白。请重新粘贴纯英文、数字组成的密钥。", False, False),
    ErrorRule(SwitchConfigError, "other", "{message}", False, False),
    ErrorRule(BaseException, "other", "出错了：{type}: {first_line}", False, False),
]


def certificate_failure(exc) -> bool:
    """异常的起因链里有没有证书校验失败（`ssl.SSLCertVerificationError`，或原话里的 CERTIFICATE_VERIFY_FAILED）。"""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def classify(exc) -> ErrorRule:
    """在 `ERROR_TABLE` 里找第一行认得 `exc` 的，返回这一行（最后一行认得任何异常）。"""
    return next(rule for rule in ERROR_TABLE if rule.matches(exc))


def _first_line(text, limit: int = 200) -> str:
    return shorten((str(text).strip().splitlines() or [""])[0], limit)


def _snippet(text, key, limit=80):
    """回复内容的开头一小段，压成一行并打码。"""
    return redact(shorten(one_line(text), limit), key)


def bad_reply(kind: str, reply, key=None) -> EndpointError:
    """SDK 没报错、回复却用不了时的 `EndpointError`：`kind` 是 `bad_response`（回来的是文字，不是 JSON）
    或 `no_choices`（JSON 里没有候选回答）；说明里带着打了码的回复开头。"""
    head = {"bad_response": _NOT_JSON, "no_choices": _NO_CHOICES}[kind]
    return EndpointError(kind, head.format(snippet=_snippet(reply, key)))


def _host_of(exc) -> str:
    try:
        url = exc.request.url
        return f"{url.scheme}://{url.netloc.decode() if isinstance(url.netloc, bytes) else url.netloc}"
    except Exception:
        return ""


def explain_error(exc, key=None) -> str:
    """按 `ERROR_TABLE` 把一次失败翻译成一句中文：原因、怎么办、服务器原话；`key`（一个或多个）会被打码。"""
    rule = classify(exc)
    # 坏回复的原文：SDK 的校验错误放在 `body` 里，JSON 解析错误放在 `doc` 里
    reply = getattr(exc, "body", None) if isinstance(exc, openai.APIError) else getattr(exc, "doc", "")
    text = rule.head.format(host=_host_of(exc) or "服务器",
                            status=getattr(exc, "status_code", "?"), snippet=_snippet(reply or "", key),
                            message=str(exc), type=type(exc).__name__, first_line=_first_line(exc),
                            limit=what_timed_out(exc))
    if rule.server_words:
        words = server_words(exc)
        text += f" 服务器原话：{words}" if words else ""
    return redact(text, key)


def server_words(exc, key=None) -> str:
    """服务器这次说的话：错误体里的 message（没有时用 SDK 的整段文字）的第一行，截短、打码。"""
    message = _said(exc)[2]
    return redact(_first_line(message if message.strip() else getattr(exc, "message", None) or exc), key)


def from_sdk(exc, key=None):
    """按 `ERROR_TABLE` 把异常变成 `EndpointError`（说明已打码，原异常在 `original`）；已经是的原样返回。"""
    if isinstance(exc, EndpointError):
        return exc
    text = explain_error(exc, key)
    try:  # SDK 在每次请求的 x-stainless-retry-count 头里写着这是第几次重试
        retries = int(exc.request.headers.get("x-stainless-retry-count") or 0)
    except (AttributeError, TypeError, ValueError, RuntimeError):
        retries = 0
    if retries:
        text += f"（SDK 已经自动重试了 {retries} 次，仍然失败。）"
    return EndpointError(classify(exc).kind, text, original=exc)
