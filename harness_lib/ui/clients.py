"""建客户端：服务商预设（`PRESETS`，每个模型名都写着出处和核对日期）、只看环境变量选模型（`client_from_env`，
无头运行用它）、真实端点客户端的统一设置（`real_client`），以及「测试连接」的第一步 `check_model`。
要不要审批由客户端自己决定（见 `safety.trust`），这里不记任何状态。
"""

import difflib
import json
import os
import re
import time
from dataclasses import dataclass, field
from datetime import date
from typing import NamedTuple
from urllib.parse import urlsplit

import openai
import pandas as pd
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent

from ..models.bridge import StreamFailed, chat_chunks, chat_completion, responses_request, without_reasoning_items
from ..models.call import ATTEMPT_DEADLINE, RETRY_POLICY
from ..models.errors import EndpointError, SwitchConfigError, explain_error, offers_none, server_words
from ..models.fake import DEFAULT_MODEL as FAKE_MODEL
from ..models.fake import FakeClient
from ..models.calls import RecordsCalls, record
from ..models.net import DeadlineHttpClient, is_loopback
from ..models.quirks import AS_OF, QUIRKS, STATUS_COLUMN
from ..models.server import ensure_local_server
from ..safety.secrets import NO_KEY
from .memory import Memory

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"  # SDK 在没有设置 OPENAI_BASE_URL 时用的地址
PRESETS_CHECKED = "2026-12-02"  # 下面每个模型名和服务商说法的核对日期；过了这一天，先点「测试连接」
# 百炼的另外两种接口各有自己的地址（出处见 PRESETS 里百炼那一项）
DASHSCOPE_RESPONSES_URL = "https://dashscope.aliyuncs.com/api/v2/apps/protocols/compatible-mode/v1"
DASHSCOPE_ANTHROPIC_URL = "https://dashscope.aliyuncs.com/apps/anthropic"


@dataclass(frozen=True)
class Preset:
    """一个服务商预设。`source` 是模型名的出处（服务商自己的文档优先），`checked` 是核对日期，
    `retires` 是服务商公布的停用日期，`extra_body` 是每次请求都带上的字段，`thinking` 说思考模式怎样处理。"""

    key: str
    label: str
    base_url: str
    model: str
    needs_key: bool = True
    model_hint: str = ""
    source: str = ""
    checked: str = ""
    retires: str = ""
    extra_body: dict | None = None
    thinking: str = ""
    # 另外两种接口（笔记本 11）的地址：服务商另给了地址才写，空的表示本项目没有记下
    responses_base_url: str = ""
    anthropic_base_url: str = ""

    def retired_on(self, today: date | None = None) -> bool:
        """到 `today`（默认今天）为止，公布的停用日期是不是已经过了。"""
        return bool(self.retires) and (today or date.today()).isoformat() >= self.retires

    def facts(self) -> str:
        """一行中文：模型名的出处、核对日期、停用日期、思考模式的处理（切换器的状态行显示它）。"""
        parts = [f"模型名 {self.model} 出自 {self.source}（核对于 {self.checked}）",
                 self.retires and f"服务商公布 {self.retires} 停用这个名字", self.thinking]
        return "；".join(filter(None, parts)) + "。" if self.source else ""


PRESETS = [
    # 百炼：2026-10-10 下线了 qwen-turbo、qwen-vl-max、qwen-vl-plus、qwq-plus、qvq-max（以前这里引的 QwQ 页随之作废），
    # 出处改成模型列表页。qwen-plus 混合思考、默认不开；开源版 Qwen3 默认开着，非流式调用会回 400（“enable_thinking must be set
    # to false for non-streaming calls”，https://www.alibabacloud.com/help/zh/model-studio/deep-thinking ）。
    Preset("dashscope", "阿里云百炼 DashScope", "https://dashscope.aliyuncs.com/compatible-mode/v1", "qwen-plus",
           source="https://help.aliyun.com/zh/model-studio/models", checked="2026-12-06",
           extra_body={"enable_thinking": False},
           thinking="qwen-plus 默认不思考；预设照文档每次传 enable_thinking=False，开源版 Qwen3 也不会因思考模式回 400；"
                    "只会思考的模型（名字里带 thinking）不收这个字段，碰到一次 400 就不再替它传；它们只收流式调用，客户端替它们在底下流式调用",
           # Responses API 不在兼容模式的地址上：百炼《文本生成模型 API 参考》（2026-12-06 读）；Anthropic 兼容接口：
           # https://help.aliyun.com/zh/model-studio/anthropic-api-messages （2026-12-06 核对；SDK 自己接上 /v1/messages）
           responses_base_url=DASHSCOPE_RESPONSES_URL, anthropic_base_url=DASHSCOPE_ANTHROPIC_URL),
    # DeepSeek：deepseek-chat、deepseek-reasoner 2026-07-24 起不能再用（https://api-docs.deepseek.com/news/news260424 ），
    # base_url 不带 /v1。思维链也占 max_tokens：现行文档只对已下线的 deepseek-reasoner 写明
    # （https://api-docs.deepseek.com/guides/thinking_mode ，2026-12-01 核对），所以关掉思考更稳。
    Preset("deepseek", "DeepSeek", "https://api.deepseek.com", "deepseek-flash",
           source="https://api-docs.deepseek.com/zh-cn/quick_start/pricing", checked=PRESETS_CHECKED,
           extra_body={"thinking": {"type": "disabled"}},
           thinking="DeepSeek 默认开着思考模式，思维链可能占掉 max_tokens（文档只对旧模型写明）；预设每次传 thinking={\"type\": \"disabled\"} 关掉它"),
    # OpenAI：gpt-4o-mini 2027-01-14 停用，弃用页给的替代是 gpt-6-luna（按弃用页整理的 https://github.com/orgs/cometapi-dev/
    # discussions/151 ，2026-10-14；OpenAI 的弃用页本身只读到摘录）。gpt-6-luna 默认会思考，Chat Completions 里要调用函数
    # 必须 reasoning_effort="none"（OpenAI 的模型页，见 QUIRKS["openai_tools_reasoning"]），也只收 max_completion_tokens：
    # 两条都在 PresetClient 里处理。2026-12-02 核对。
    Preset("openai", "OpenAI", DEFAULT_OPENAI_BASE_URL, "gpt-6-luna",
           source="https://developers.openai.com/api/docs/models/gpt-6-luna", checked="2026-12-02",
           thinking="gpt-6-luna 默认会思考；带工具的请求替它传 reasoning_effort=\"none\"（不然回 400），max_tokens 改发 "
                    "max_completion_tokens"),
    # 月之暗面：moonshot-v1-* 和 kimi-k2.5 已于 2026-08-31 下线（Moonshot 的模型页；chatcli#1344 在 2026-09-02 对着线上
    # 接口核对：moonshot-v1-8k 回 404，现行的只有 kimi-k3、kimi-k2.7-code、kimi-k2.7-code-highspeed、kimi-k2.6）。
    # kimi-k2.6 默认会思考，thinking={"type": "disabled"} 关掉（QUIRKS["moonshot_thinking"]）。2026-12-02 核对。
    Preset("moonshot", "Moonshot 月之暗面", "https://api.moonshot.cn/v1", "kimi-k2.6",
           source="https://platform.kimi.ai/docs/models", checked="2026-12-02",
           extra_body={"thinking": {"type": "disabled"}},
           thinking="kimi-k2.6 默认会思考；预设每次传 thinking={\"type\": \"disabled\"} 关掉它（旧的 moonshot-v1-* 已于 2026-08-31 下线）；"
                    "kimi-k3 总在思考、不收这个字段，碰到一次 400 就不再替它传"),
    # 智谱：免费模型 glm-4-flash-250414（不思考）；旧写法 glm-4-flash 现在还认不认，文档里没有找到。
    Preset("zhipu", "智谱 GLM", "https://open.bigmodel.cn/api/paas/v4/", "glm-4-flash-250414",
           source="https://docs.bigmodel.cn/cn/guide/models/free/glm-4-flash-250414", checked=PRESETS_CHECKED),
    # 硅基流动：Qwen/Qwen2.5-7B-Instruct 不思考；“在免费模型里”只有第三方的说法（https://huasheng.ai/insights/siliconflow-api-guide ），
    # 未在硅基流动官方的模型页上核实（2026-12-01）。
    Preset("siliconflow", "硅基流动 SiliconFlow", "https://api.siliconflow.cn/v1", "Qwen/Qwen2.5-7B-Instruct",
           source="https://www.siliconflow.cn/models", checked=PRESETS_CHECKED),
    Preset("ollama", "本地 Ollama", "http://localhost:11434/v1", "qwen2.5:7b", needs_key=False),
    Preset("vllm", "本地 vLLM", "http://localhost:8000/v1", "", needs_key=False, model_hint="填 vLLM 启动时加载的模型名"),
    Preset("llamacpp", "本地 llama.cpp", "http://localhost:8080/v1", "", needs_key=False,
           model_hint="llama-server 加载的模型名（随便填也行）"),
    Preset("local", "本项目的本地端点", "", FAKE_MODEL, needs_key=False),
    Preset("custom", "自定义", "", "", model_hint="填写服务商给的模型名"),
]
PRESETS_BY_KEY = {p.key: p for p in PRESETS}


def needs_key(base_url: str) -> bool:
    """这个地址要不要 API 密钥：本机上的服务（Ollama、vLLM、llama.cpp……）通常不要。"""
    return not is_loopback(base_url)


def preset_for(base_url: str) -> Preset | None:
    """`base_url` 属于哪个云服务商预设：按主机名认（`https://api.deepseek.com/v1` 也算 DeepSeek）；认不出是 None。"""
    host = (urlsplit((base_url or "").strip()).hostname or "").lower()
    return next((p for p in PRESETS if host and p.base_url and p.needs_key
                 and (urlsplit(p.base_url).hostname or "").lower() == host), None)


# 名单只用来在 OpenAI 自己的地址上“一开始就发对”；猜错了，第一个 400 会纠正它（规矩按服务器的原话学，见下面）。
# GPT-5.x、GPT-6 系列只收 max_completion_tokens（QUIRKS["openai_max_completion_tokens"]，核对于 PRESETS_CHECKED）。
# o1、o3-mini、o4-mini 已于 2026-10-23 停用，gpt-5、gpt-5-mini、o3 于 2026-12-10 停用（OpenAI 的弃用页，
# 见 models.dev#3707、llmgateway#2696）；前缀留着，给还在转发旧名字的服务，猜错了第一个 400 会纠正
COMPLETION_TOKENS_PREFIXES = ("gpt-5", "gpt-6", "o1", "o3", "o4")
# GPT-5.6 系列、gpt-6-luna、gpt-6-sol 带工具要 reasoning_effort="none"（QUIRKS["openai_tools_reasoning"]）
TOOLS_WITHOUT_REASONING_PREFIXES = ("gpt-5.6", "gpt-6-luna", "gpt-6-sol")
# 已知在 Chat Completions 里根本不能带工具的：OpenAI 的地址上一开始就改走 Responses API，切换器在第一次调用之前就说明
# （genkit#6303、bolna#1019，2026-09；gpt-6.1-sol：OpenAI 的推理指南，引自 frigate 讨论 #24555，2026-11）。
# 不在名单里的，由服务器的回答认出来
NO_CHAT_TOOLS_PREFIXES = ("gpt-6-astra", "gpt-6.1-sol")


def _rejects_max_tokens(exc: openai.BadRequestError) -> bool:
    """服务器说“不收 max_tokens，改用 max_completion_tokens”。"""
    said = f"{getattr(exc, 'message', '')} {getattr(exc, 'code', '')} {getattr(exc, 'param', '')}"
    return "max_completion_tokens" in said or (getattr(exc, "param", None) == "max_tokens"
                                               and getattr(exc, "code", None) == "unsupported_parameter")


def _wants_streaming(exc: openai.BadRequestError) -> bool:
    """服务器说“思考模式只收流式调用”（百炼：“… must be set to false for non-streaming calls”；
    别的转发服务：“enable thinking can not be support when `stream=False`”）。"""
    said = str(exc).lower()
    return "non-streaming" in said or "stream=false" in said.replace("`", "")


# 预设里关掉思考的字段（百炼的 enable_thinking、DeepSeek 和月之暗面的 thinking）
THINKING_SWITCHES = ("enable_thinking", "thinking")


def _insists_on_thinking(said: str) -> bool:
    """服务器说这个模型关不掉思考（百炼：“… restricted to True”；月之暗面：“only type=enabled is allowed”）。"""
    said = said.lower()
    return "restricted to true" in said or "only type=enabled is allowed" in said


def _rejects_tools_with_reasoning(exc: openai.BadRequestError) -> bool:
    """服务器说“带工具时不能带着思考强度”（不论 param 写的是什么）。"""
    return "function tools with reasoning_effort" in str(exc).lower()


def _refuses_none(exc: openai.BadRequestError) -> bool:
    """服务器说 reasoning_effort 不收 "none"：明说不支持，或者列出的可选值里没有它。"""
    said = str(exc)
    if re.search(r"does not support ['\"]none['\"]", said, re.I):
        return True
    listed = re.search(r"supported values are:?(.*)", said, re.I | re.S)
    return bool(listed) and "reasoning_effort" in said and "'none'" not in listed.group(1)


@dataclass
class _Learned:
    """客户端从服务器的 400 里学到的模型：只收 max_completion_tokens 的、带工具要 reasoning_effort="none" 的、
    不收 "none" 的、在这里的 Chat Completions 里不能带工具的、只会思考（不收 enable_thinking=False）的、
    只收流式调用的。`with_options` 的副本共用同一份。有 `memory`（`ui.memory.Memory`）时，开头读出以前学到的，
    学到新的就记下：下一本笔记本的客户端一开始就知道。"""

    completion_tokens: set = field(default_factory=set)
    no_reasoning: set = field(default_factory=set)
    refuses_none: set = field(default_factory=set)
    no_chat_tools: dict = field(default_factory=dict)  # 模型 → 服务器的原话
    responses_only: set = field(default_factory=set)  # 服务器指向 /v1/responses 的：在底下改走 Responses API
    thinking_only: set = field(default_factory=set)
    stream_only: set = field(default_factory=set)
    memory: Memory | None = None
    remembered: set = field(default_factory=set)  # 从记忆里读出来的模型（不是这一次学到的）
    tool_models: list | None = None  # /models 里能调用工具的名字（建议用，问一次就记下）
    told: set = field(default_factory=set)  # 已经完整说明过“带不了工具”的模型（每个客户端一次）

    def __post_init__(self):
        for model, rules in (self.memory.learned() if self.memory else {}).items():
            for rule, value in rules.items():
                if not (rule == "responses_only" and "no_chat_tools" in rules):  # 试过 Responses 也不行的，以后者为准
                    self.note(model, rule, value, save=False)
            self.remembered.add(model)

    def note(self, model: str, rule: str, value=True, *, save: bool = True) -> None:
        """记下一条：`rule` 是 `memory.RULES` 里的名字；no_chat_tools 的值是服务器的原话。"""
        target = getattr(self, rule)
        if isinstance(target, dict):
            target[model] = value
        else:
            target.add(model)
        if save and self.memory is not None:
            self.memory.remember(model, rule, value)


class _Fix(NamedTuple):
    """客户端为一次 400 做的一处改动：服务器的原话，和“改发什么”。"""

    said: str
    change: str


def _follows(model, learned: set, prefixes: tuple) -> bool:
    """这个模型守这条规矩吗：学到过，或者名字以这些前缀开头。"""
    return isinstance(model, str) and (model in learned or model.startswith(prefixes))


def _sent(exc) -> dict:
    """被拒的那次请求实际发出的请求体（SDK 的异常带着那次真实的请求）。"""
    try:
        body = json.loads(exc.request.content or b"{}")
    except (AttributeError, ValueError, RuntimeError):
        return {}
    return body if isinstance(body, dict) else {}


class PresetClient(RecordsCalls, openai.OpenAI):
    """真实端点的客户端：请求参数和服务商相遇的地方，也只有这一处。

    - 每次 `chat.completions.create` 都把 `preset_body` 并进请求体（调用里的同名字段优先）；
    - 规矩按服务器说的话学，不按模型名猜：一次 400 说了什么（状态码、`param`、`code` 和原话），客户端就只改那一处、
      重发一次；等重发有了结果，才打印一行“改发 … 后成功”或“改发 … 后仍被拒：服务器原话 …”，并记下这个模型。
      能学的几条：不收 `max_tokens` 的改发 `max_completion_tokens`；服务器给的出路里有 `reasoning_effort` 设成
      `"none"` 的，带工具时替它写上；不收 `"none"` 的不再写；只会思考、不收 `enable_thinking=False` 的不再替它传；
      思考时只收流式调用的，以后在底下流式发出、收齐了拼回完整的 ChatCompletion（`_streamed`）。
    - 服务器说这个模型在 Chat Completions 里带不了工具时（只给 `/v1/responses` 这条路，或者连 `"none"` 也不收），
      抛出 `EndpointError`（类别 `no_chat_tools`），说清能用什么；以后带工具的请求不再发出，直接抛同一个错误。
    - 名单（`COMPLETION_TOKENS_PREFIXES`、`TOOLS_WITHOUT_REASONING_PREFIXES`）只在 OpenAI 的地址上用来一开始就发对，
      猜错了由第一个 400 纠正。
    `with_options` 的副本照样带着，记下的模型也共用。"""

    def __init__(self, *args, preset_body: dict | None = None, completion_tokens_prefixes: tuple = (),
                 no_reasoning_prefixes: tuple = (), responses_prefixes: tuple = (), memory: Memory | None = None,
                 **kwargs):
        super().__init__(*args, **kwargs)
        self.preset_body = dict(preset_body or {})
        self.completion_tokens_prefixes = tuple(completion_tokens_prefixes)
        self.no_reasoning_prefixes = tuple(no_reasoning_prefixes)
        self.responses_prefixes = tuple(responses_prefixes)
        self.learned = _Learned(memory=memory)

    def copy(self, *args, **kwargs):
        clone = super().copy(*args, **kwargs)
        clone.preset_body = dict(self.preset_body)
        clone.completion_tokens_prefixes = self.completion_tokens_prefixes
        clone.no_reasoning_prefixes = self.no_reasoning_prefixes
        clone.responses_prefixes = self.responses_prefixes
        clone.learned = self.learned  # 学到的共用
        return clone

    with_options = copy

    def uses_completion_tokens(self, model) -> bool:
        return _follows(model, self.learned.completion_tokens, self.completion_tokens_prefixes)

    def uses_responses(self, model) -> bool:
        """这个模型的请求要不要在底下改走 Responses API：服务器指过路，或者 OpenAI 的地址上名字在名单里
        （试过 Responses 也不行的除外）。"""
        return _follows(model, self.learned.responses_only, self.responses_prefixes) \
            and model not in self.learned.no_chat_tools

    def tools_need_no_reasoning(self, model) -> bool:
        return _follows(model, self.learned.no_reasoning, self.no_reasoning_prefixes) \
            and model not in self.learned.refuses_none

    # SDK 没有公开的“改每个请求”的钩子：_prepare_options 是它留给子类覆盖的那一步（openai._base_client）
    def _prepare_options(self, options):
        options = super()._prepare_options(options)
        body = options.json_data
        if options.method.lower() == "post" and options.url.endswith("/chat/completions") and isinstance(body, dict):
            body = options.json_data = {**body, "messages": without_reasoning_items(body.get("messages"))}
            extra = dict(options.extra_json or {})
            skip = set(THINKING_SWITCHES) if body.get("model") in self.learned.thinking_only else set()
            preset = {k: v for k, v in self.preset_body.items() if k not in body and k not in skip}
            options.extra_json = {**preset, **extra}
            if "max_tokens" in body and "max_completion_tokens" not in body \
                    and self.uses_completion_tokens(body.get("model")):
                body = options.json_data = {**{k: v for k, v in body.items() if k != "max_tokens"},
                                            "max_completion_tokens": body["max_tokens"]}
            if body.get("tools") and "reasoning_effort" not in body and "reasoning_effort" not in options.extra_json \
                    and self.tools_need_no_reasoning(body.get("model")):
                options.json_data = {**body, "reasoning_effort": "none"}
        return options

    def _streamed(self, options, body: dict):
        """只收流式调用的模型：这次请求改成流式发出，收齐以后用 SDK 的 `ChatCompletionStreamState` 拼回一个完整的
        ChatCompletion（`reasoning_content` 这类协议之外的文字字段照样拼上），调用方看到的和非流式一样。"""
        streamed = options.model_copy(update={"json_data": {
            **body, "stream": True, "stream_options": body.get("stream_options") or {"include_usage": True}}})
        state, started = ChatCompletionStreamState(), time.monotonic()
        for chunk in super().request(ChatCompletionChunk, streamed, stream=True,
                                     stream_cls=openai.Stream[ChatCompletionChunk]):
            state.handle_chunk(chunk)
        completion = state.get_final_completion()
        record(completion, time.monotonic() - started)  # 在底下流式的调用也记一条用量和用时
        return completion

    def _bridged(self, options, body: dict, stream: bool):
        """服务器指向 /v1/responses 的模型：这次请求改写成 Responses 的样子发出去（`models.bridge`），回答拼回一个
        ChatCompletion（思考条目挂在助手消息上，下一次原样带回）。调用方要流式的，就流式地发，Responses 的事件
        到一个转一个，成了 Chat 的流式块（`chat_chunks`）：和直接调 Chat Completions 一样边到边看，
        沉默的上限也按块算。"""
        request = responses_request(body)
        if stream:
            streamed = options.model_copy(update={"url": "/responses", "json_data": {**request, "stream": True},
                                                  "extra_json": None})
            events = super().request(ResponseStreamEvent, streamed, stream=True,
                                     stream_cls=openai.Stream[ResponseStreamEvent])
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return _BridgedStream(events, usage)
        bridged = options.model_copy(update={"url": "/responses", "json_data": request, "extra_json": None})
        started = time.monotonic()
        response = super().request(Response, bridged)
        reply = ChatCompletion.model_validate(chat_completion(response.model_dump(mode="json")))
        record(reply, time.monotonic() - started)
        return reply

    def no_chat_tools(self, model: str, said: str, original=None, *, sent: bool = True) -> EndpointError:
        """“这个模型在这里的 Chat Completions 里带不了工具”的错误：服务器的原话，和能用什么。
        `sent=False`：这次请求没有发出去，是按以前学到的（这一次运行里，或记忆文件里）。"""
        if model in self.learned.told:  # 这个客户端已经完整说明过一次：这次只说一句
            return EndpointError("no_chat_tools", (
                f"同上：模型 {model} 在这个端点的 Chat Completions 里不能调用工具，这次请求没有发出去"
                "（完整的说明和能用什么，见这本笔记本里第一次出现的那段）。"), original=original)
        self.learned.told.add(model)
        listed = self._listed_tool_models()
        where = f"这个服务商列出的 {'、'.join(listed)}" if listed else "OpenAI 的 gpt-6-luna、gpt-5.6 系列"
        when = "" if sent else ("这次请求没有发出去：" + (
            "学到的规矩里记着服务器以前这样回过（切换器里可以忘掉）。" if model in self.learned.remembered
            else "这个客户端前面已经收到过服务器的这句话。"))
        return EndpointError("no_chat_tools", (
            f"模型 {model} 在这个端点的 Chat Completions 里不能调用工具（服务器原话：{said}）。{when}本系列的循环靠工具调用。"
            f"能用的：{where}（带 reasoning_effort=\"none\" 可以调用工具，OpenAI 的模型页，核对于 {PRESETS_CHECKED}）；"
            "切换器里的离线假模型；或者这个模型的 Responses API（/v1/responses）。"), original=original)

    def _listed_tool_models(self) -> list[str]:
        """服务商 /models 里，已知在 Chat Completions 里带 none 能调用工具的名字（取不到就是空的）。
        只问一次：以后每一步再说明时用记下的（副本共用）。"""
        if self.learned.tool_models is None:
            try:
                names = [m.id for m in self.with_options(max_retries=0, timeout=10).models.list()]
            except Exception:  # noqa: BLE001  列表只是建议，取不到就不建议
                names = []
            self.learned.tool_models = [n for n in names if n.startswith(TOOLS_WITHOUT_REASONING_PREFIXES)][:5]
        return self.learned.tool_models

    def _learn(self, exc: openai.BadRequestError, model: str, stream: bool) -> _Fix | None:
        """按服务器这次说的话（和被拒的那次请求实际发了什么）学一条规矩；学不到时是 None。
        服务器说这个模型在这里带不了工具时，抛出 `no_chat_tools`。"""
        sent, said, learned = _sent(exc), server_words(exc), self.learned
        if "max_tokens" in sent and model not in learned.completion_tokens and _rejects_max_tokens(exc):
            learned.note(model, "completion_tokens")
            return _Fix(said, "max_tokens 换成 max_completion_tokens（上限不变）")
        if sent.get("tools") and _rejects_tools_with_reasoning(exc):
            if offers_none(exc) and "reasoning_effort" not in sent and model not in learned.refuses_none:
                learned.note(model, "no_reasoning")
                return _Fix(said, "写上 reasoning_effort=\"none\"（不再思考）")
            if _points_to_responses(said) and model not in learned.responses_only:
                learned.note(model, "responses_only")
                return _Fix(said, RESPONSES_FIX)
            learned.note(model, "no_chat_tools", said)
            raise self.no_chat_tools(model, said, exc) from exc
        if sent.get("reasoning_effort") == "none" and model not in learned.refuses_none and _refuses_none(exc):
            learned.note(model, "refuses_none")  # 带着工具时，去掉以后服务器会说下一步（比如指向 /v1/responses）
            return _Fix(said, "去掉 reasoning_effort")
        switches = [k for k in THINKING_SWITCHES if k in self.preset_body and k in sent]
        if switches and model not in learned.thinking_only and _insists_on_thinking(said):
            learned.note(model, "thinking_only")
            return _Fix(said, f"去掉预设的 {'、'.join(switches)}（这个模型总在思考）")
        if not stream and model not in learned.stream_only and _wants_streaming(exc):
            learned.note(model, "stream_only")
            return _Fix(said, "改成流式调用，收齐再交回完整的回复（思维链 reasoning_content 也留着）")
        return None

    def request(self, cast_to, options, **kwargs):
        body = options.json_data if isinstance(options.json_data, dict) else {}
        model = body.get("model")
        chat = options.url.endswith("/chat/completions")
        if chat and body.get("tools") and model in self.learned.no_chat_tools:  # 服务器说过了：不再发出去碰同一个 400
            raise self.no_chat_tools(model, self.learned.no_chat_tools[model], sent=False)
        fixes: list[_Fix] = []
        while True:
            if chat and self.uses_responses(model):
                try:
                    result = self._bridged(options, body, bool(kwargs.get("stream")))
                except openai.NotFoundError as exc:  # 这个端点没有 /v1/responses（只转发 Chat 的代理）：在这里带不了工具
                    said = fixes[-1].said if fixes else self.learned.no_chat_tools.get(model, server_words(exc))
                    self.learned.note(model, "no_chat_tools", said)
                    _report(model, fixes, "仍不行：这个端点没有 /v1/responses（HTTP 404），见下面的说明")
                    raise self.no_chat_tools(model, said, exc) from exc
                except openai.APIError as exc:
                    _report(model, fixes, f"改走 Responses API 也失败了：{server_words(exc) or type(exc).__name__}")
                    raise
                _report(model, fixes, "成功，这个客户端以后对它都这样发")
                return result
            try:
                if chat and model in self.learned.stream_only and not kwargs.get("stream"):
                    result = self._streamed(options, body)
                else:
                    result = super().request(cast_to, options, **kwargs)
            except openai.BadRequestError as exc:
                try:
                    fix = self._learn(exc, model, bool(kwargs.get("stream"))) if isinstance(model, str) and chat \
                        else None
                except EndpointError:
                    _report(model, fixes, "仍被拒，这个模型在这里带不了工具（见下面的说明）")
                    raise
                if fix is None:  # 学不到新规矩：这一次的改动照实说“仍被拒”，原样抛出
                    _report(model, fixes, f"仍被拒，服务器原话：{server_words(exc)}")
                    raise
                fixes.append(fix)
                continue  # 每条规矩每个模型只学一次，所以最多重发几次就停
            _report(model, fixes, "成功，这个客户端以后对它都这样发")
            return result


class _BridgedStream:
    """Responses 的事件流，用起来像 Chat 的 SDK 流：迭代得到 `ChatCompletionChunk`，可以 `close()`，可以放进 `with`。
    流里的错误事件变成 `openai.APIError`（服务器的原话和错误体），和 SDK 在 Chat 的流里遇到错误时一样。"""

    def __init__(self, events, usage: bool):
        self._events = events
        self._chunks = chat_chunks((e.model_dump(mode="json") for e in events), usage=usage)

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return ChatCompletionChunk.model_validate(next(self._chunks))
        except StopIteration:
            self.close()  # 结束事件已到：关掉 HTTP 流（录音线路这时写下录像），不等垃圾回收
            raise
        except StreamFailed as exc:
            self.close()
            raise openai.APIError(exc.message, self._events.response.request, body=exc.body) from None

    def close(self) -> None:
        self._events.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _points_to_responses(said: str) -> bool:
    """服务器的原话指向 Responses API（“… use /v1/responses …”）。"""
    return "/v1/responses" in said or "responses api" in said.lower()


RESPONSES_FIX = ("改走 Responses API（/v1/responses，11 讲这个接口）：请求在底下改写过去，回答拼回 ChatCompletion 的样子"
                 "交给循环")


def _report(model, fixes: list[_Fix], outcome: str) -> None:
    """重发有了结果以后，每处改动说一行：服务器说了什么，改发了什么，结果怎样。"""
    for fix in fixes:
        print(f"提示：模型 {model} 被拒（HTTP 400，服务器原话：{fix.said}）。改发：{fix.change}。结果：{outcome}。")


def real_client(base_url: str, api_key: str, extra_body: dict | None = None, *,
                deadline: float = ATTEMPT_DEADLINE, memory: Memory | None = None) -> PresetClient:
    """真实端点的客户端（`PresetClient`），重试次数和超时取 `RETRY_POLICY`；`extra_body` 是预设每次都带的字段。
    非流式每次尝试最多 `deadline` 秒收完回复，流式回复按 `STREAM_SILENCE`、`CALL_CEILING` 断开（`DeadlineHttpClient`）；
    OpenAI 的地址上，名字以 `COMPLETION_TOKENS_PREFIXES` 开头的模型一开始就发 `max_completion_tokens`。"""
    host = (urlsplit(base_url).hostname or "").lower()
    on_openai = host == urlsplit(DEFAULT_OPENAI_BASE_URL).hostname
    return PresetClient(api_key=api_key, base_url=base_url, preset_body=extra_body,
                        completion_tokens_prefixes=COMPLETION_TOKENS_PREFIXES if on_openai else (),
                        no_reasoning_prefixes=TOOLS_WITHOUT_REASONING_PREFIXES if on_openai else (),
                        responses_prefixes=NO_CHAT_TOOLS_PREFIXES if on_openai else (),
                        http_client=DeadlineHttpClient(attempt=deadline), memory=memory,
                        **RETRY_POLICY)


def client_from_env(environ=os.environ):
    """按 `HARNESS_MODE`（`fake` 默认、`real`、`local`）选模型，返回 `(client, model)`；设置不完整时抛出
    `SwitchConfigError`。`real` 的地址属于某个预设时，照那个预设关掉思考模式。"""
    mode = (environ.get("HARNESS_MODE") or "fake").strip().lower()
    if mode == "fake":
        return FakeClient(model=FAKE_MODEL), FAKE_MODEL
    if mode == "local":
        return real_client(ensure_local_server(), NO_KEY), environ.get("HARNESS_MODEL") or FAKE_MODEL
    if mode != "real":
        raise SwitchConfigError(f"HARNESS_MODE 只能是 fake、real 或 local，现在是 {mode!r}。")
    base_url = (environ.get("OPENAI_BASE_URL") or "").strip() or DEFAULT_OPENAI_BASE_URL
    model = (environ.get("HARNESS_MODEL") or "").strip()
    if not model:
        raise SwitchConfigError("HARNESS_MODE=real 时必须用环境变量 HARNESS_MODEL 指定模型名，"
                                "例如 HARNESS_MODEL=qwen-plus（阿里云百炼）或 HARNESS_MODEL=deepseek-flash（DeepSeek）。")
    key = (environ.get("OPENAI_API_KEY") or "").strip()
    if not key and needs_key(base_url):
        raise SwitchConfigError("HARNESS_MODE=real 需要密钥：请在启动 JupyterLab 之前设置环境变量 OPENAI_API_KEY"
                                f"（当前 base_url 是 {base_url}）。")
    preset = preset_for(base_url)
    return real_client(base_url, key or NO_KEY, preset.extra_body if preset else None,
                       memory=Memory.for_url(base_url, environ)), model


def closest_models(model: str, available, n: int = 5) -> list[str]:
    """从 `available` 里挑最多 `n` 个名字：和 `model` 最像的在前（不分大小写），不够再按原顺序补上。"""
    lowered = {str(name).lower(): str(name) for name in available}
    close = [lowered[m] for m in difflib.get_close_matches((model or "").lower(), list(lowered), n=n, cutoff=0.3)]
    return list(dict.fromkeys(close + list(lowered.values())))[:n]


class ModelCheck(NamedTuple):
    """`check_model` 的结果：`listed` 为 True / False / None（没取到列表），`text` 一句中文（列出相近的名字）。"""

    listed: bool | None
    text: str
    error: BaseException | None = None


def check_model(client, model: str, *, timeout: float = 15, key=None) -> ModelCheck:
    """问服务商有哪些模型（`client.models.list()`，不重试），说清 `model` 在不在里面；失败也不抛出。
    服务没有 /models 接口（404、405、501）不算错：`listed` 是 None，`error` 也是 None。"""
    try:
        entries = list(client.with_options(max_retries=0, timeout=timeout).models.list())
    except Exception as exc:  # noqa: BLE001  密钥不对、连不上、超时、回来的不是 JSON……
        if isinstance(exc, openai.APIStatusError) and exc.status_code in (404, 405, 501):
            return ModelCheck(None, f"这个服务没有模型列表接口（GET /models 回 HTTP {exc.status_code}）。"
                                    "这不算错，模型名对不对，要看下面那次请求。")
        return ModelCheck(None, "没能取到模型列表：" + explain_error(exc, key), exc)
    available = [m.id for m in entries]
    if model in available:
        entry = entries[available.index(model)]
        return ModelCheck(True, f"模型 {model} 在服务商列出的 {len(available)} 个模型里。" + _shutdown(entry))
    if not available:
        return ModelCheck(False, "服务商的模型列表是空的：这把密钥也许还没有开通任何模型。")
    return ModelCheck(False, f"⚠ 服务商返回的 {len(available)} 个模型里没有 {model}：有的服务商只列出一部分模型，"
                             f"下面那次请求说了算（也可能是拼错了，或者已经下线、改名）。"
                             f"相近的有：{'、'.join(closest_models(model, available))}。")


def _shutdown(entry, today: date | None = None) -> str:
    """/models 给了 `shutdown_date` 时（OpenAI 2026-12 起这样给），说出停用的日期；过了就警告。"""
    value = getattr(entry, "shutdown_date", None) or (getattr(entry, "model_extra", None) or {}).get("shutdown_date")
    if not value:
        return ""
    try:
        when = date.fromtimestamp(int(value)) if str(value).isdigit() else date.fromisoformat(str(value)[:10])
    except (ValueError, OverflowError, OSError):
        return f"服务商写着它的停用日期：{value}。"
    if when <= (today or date.today()):
        return f"⚠ 服务商写明它已于 {when} 停用（/models 的 shutdown_date）：换一个还在用的模型。"
    return f"服务商写明它将于 {when} 停用（/models 的 shutdown_date）。"


def quirk_table():
    """怪脾气图库（各家服务商已知的不一致做法）一览；状态一列的表头和 `table.attrs["as_of"]` 写着核对日期。"""
    table = pd.DataFrame([{"怪脾气": q.name, "服务商": q.provider, "行为": q.behaviour, "版本范围": q.versions,
                           STATUS_COLUMN: q.status, "修复于": q.fixed_in, "为什么还要防": q.why_keep, "出处": q.source}
                          for q in QUIRKS.values()])
    table.attrs["as_of"] = AS_OF
    return table
