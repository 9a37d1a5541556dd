"""服务商的“怪脾气”：离线假模型照着真实服务商的已知行为作答，不用密钥也能遇到它们（07–09）。
`QUIRKS` 每一条写明哪家、版本范围、出处和状态，整张表核对于 `AS_OF`。行为是数据：`_REFUSE`（会拒绝的
请求）、`_REWRITE`（改写完整回复）、`_RESTREAM`（改写 `wire.stream_chunks` 切出的块）。
`QuirkClient(quirk)` 离线用；`start_quirk_server()` 按模型名选（`fake-agent-1@ollama_no_tools`）；
`naive_loop`、`naive_stream` 是教程里常见的朴素写法，用来看它们在哪一步坏掉。
"""

from __future__ import annotations

import json
from typing import Any, Iterable, NamedTuple

import httpx2

from .checks import DASHSCOPE_PAIRING, pairing_error
from .fake import FakeClient, FakeHandler, FakeModel
from .messages import text_of
from .server import LocalServer, serve
from .wire import Rejected, json_response, route, sse_response, stream_chunks, with_body

AS_OF = "2026-12-02"  # 这张表核对到哪一天
CURRENT, PARTLY_FIXED, FIXED = "现存", "部分修复", "已修复（历史）"
STATUS_COLUMN = f"状态（截至 {AS_OF}）"  # `quirk_table()` 状态一列的列名：日期就写在表头上
FLAGGED = "【审核样例】"  # `dashscope_inspection` 当作审核不通过的文字（演示用的记号，不是真的敏感词）


class Quirk(NamedTuple):
    """一条怪脾气：服务商、行为、出处、版本范围、状态；修好了的写明修复于哪里、为什么还要防。"""

    name: str
    provider: str
    behaviour: str
    source: str
    versions: str
    status: str = CURRENT
    fixed_in: str = ""
    why_keep: str = ""
    refs: tuple = ()
    models: tuple = ()  # 替身代表的模型名：本机的替身在 /models 里也列出它们，像那家服务商一样


_GH = "https://github.com/"
QUIRKS: dict[str, Quirk] = {q.name: q for q in [
    Quirk("ollama_parallel_index0", "Ollama", "流式输出并行的工具调用时，每个调用一块发完，都写成 index 0，各自带新的 id。",
          _GH + "ollama/ollama/issues/15457",
          versions="Ollama ≤ v0.20.5 的所有模型；v0.20.6 起有内置解析器的模型已修好，"
                   "没有专用解析器的模型（如 qwen2.5-coder:7b）仍有报告（#15497）",
          status=PARTLY_FIXED, fixed_in="Ollama v0.20.6（2026-04-11，PR #15467）",
          why_keep="v0.20.6 以前的 Ollama 还装在很多机器上，没有专用解析器的模型仍可能这样发；"
                   "按 id 分开调用，对规矩的服务也没有坏处。",
          refs=(_GH + "ollama/ollama/pull/15467", _GH + "ollama/ollama/issues/15497",
                _GH + "ollama/ollama/issues/16212")),
    Quirk("ollama_no_tools", "Ollama（小模型）", "提供了工具，小模型却不发 tool_calls，而是把调用写成一段 JSON 文字。",
          _GH + "ollama/ollama/issues/13519",
          versions="与 Ollama 版本无关，取决于模型（例如 llama3.2:3b、qwen2.5-coder:7b 一类小模型）",
          refs=(_GH + "ollama/ollama-vscode/pull/20",)),
    Quirk("deepseek_thinking", "DeepSeek（思考模式）", "回复带 reasoning_content；带工具调用的那轮助手消息，之后每次请求都要原样带着它，否则 400。",
          "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls",
          versions="DeepSeek API 现行的 deepseek-flash（V4.1 Flash）和 deepseek-v4-pro，思考模式默认开启；V4 起的原话是"
                   "“The `reasoning_content` in the thinking mode must be passed back to the API.”（2026-04 起的报告）。"
                   "原定 2026-09-14 把 v4-pro 转到 Flash 的安排，DeepSeek 于 2026-09-11 取消（价格页的说明，见 models.dev#6904）。"
                   "已下线的 deepseek-reasoner 回的是旧原话 “Missing `reasoning_content` field …”（cherry-studio#11751，2025-12）",
          refs=("https://api-docs.deepseek.com/zh-cn/guides/thinking_mode", _GH + "JohnnyZ93/oai-compatible-copilot/issues/215",
                _GH + "anomalyco/models.dev/pull/6904", _GH + "CherryHQ/cherry-studio/issues/11751")),
    Quirk("dashscope_tool_rule", "阿里云百炼",
          "每个 tool_call_id 都要有 tool 消息紧跟在后面，tool 消息前面必须是带 tool_calls 的助手消息；"
          "措辞和 OpenAI 的相同，前面多了 “<400> InternalError.Algo.InvalidParameter:”。",
          _GH + "agentscope-ai/agentscope/issues/772",
          versions="百炼 DashScope 接口与 OpenAI 兼容接口（通义千问系列）；2025-06 至 2025-11 的报告里都是这句原话"
                   "（官方错误码页面里没有找到，未在官方文档核实）",
          refs=(_GH + "agentscope-ai/agentscope-java/issues/53", _GH + "run-llama/llama_index/pull/19224")),
    Quirk("dashscope_thinking_only", "阿里云百炼（只会思考的模型）",
          "带 enable_thinking=False 回 400 “restricted to True”；不带它的非流式调用也回 400，只能流式调用。",
          _GH + "lobehub/lobe-chat/issues/8613",
          versions="qwen3-235b-a22b-thinking-2507 一类只会思考的 Qwen3 模型（2025-07 起的报告；qwen3.8-max 也只会思考，"
                   "lobehub#17363，2026-07）；非流式的那句原话写在阿里云百炼的错误码页面上（2026-09-28 更新），"
                   "“restricted to True” 一句未在官方文档核实",
          refs=("https://www.alibabacloud.com/help/en/model-studio/error-code",
                _GH + "langchain4j/langchain4j/issues/3974", _GH + "agentscope-ai/agentscope/issues/2346")),
    Quirk("dashscope_inspection", "阿里云百炼",
          "内容审核：messages 里有审核不通过的内容（这里用 FLAGGED 这段文字代表）时回 400 data_inspection_failed。",
          "https://help.aliyun.com/zh/model-studio/error-code#inappropriate-content",
          versions="百炼所有文本模型（OpenAI 兼容接口与 DashScope 接口）；2026 年仍常见",
          refs=(_GH + "666ghj/BettaFish/issues/557", _GH + "QwenLM/qwen-code/issues/3145")),
    Quirk("dashscope_output_inspection", "阿里云百炼", "流式输出到一半，输出审核没通过：流里来一个 {\"error\": {...}} 事件，之后就没有了。",
          _GH + "666ghj/BettaFish/issues/570", versions="百炼文本模型的流式输出；错误事件的确切形状未在官方文档核实",
          refs=("https://help.aliyun.com/zh/model-studio/error-code#inappropriate-content",)),
    Quirk("llamacpp_content", "llama.cpp（llama-server）",
          "助手消息没有 content（或是 null）时回 500 “Expected 'content' to be a string or an array”。",
          _GH + "ggml-org/llama.cpp/issues/13471",
          versions="llama-server 约 b5331 至 2025-05-12 之间的构建（null），以及 PR #12293 之前的构建（缺键）",
          status=FIXED, fixed_in="llama.cpp PR #13477（2025-05-12；缺键早在 PR #12293，2025-03-10）",
          why_keep="旧构建和以它为底的打包还在很多机器上（2025-09 仍有报告），llama-cpp-python 对缺 content "
                   "的消息也回 500；补上 \"content\": \"\" 对任何服务都无害。",
          refs=(_GH + "ggml-org/llama.cpp/pull/13477", _GH + "ggml-org/llama.cpp/pull/12293",
                _GH + "lemonade-sdk/lemonade/issues/390")),
    Quirk("llamacpp_no_jinja", "llama.cpp（llama-server）",
          "没有用 --jinja 启动的 llama-server 收到带 tools 的请求，回 500 “tools param requires --jinja flag”。",
          _GH + "ggml-org/llama.cpp/pull/17524",
          versions="默认开启 jinja 之前（2025-11/12，PR #17524、#17911）的 llama-server 构建，以及用 --no-jinja 启动的",
          status=FIXED, fixed_in="llama.cpp PR #17524（2025-11 提出）、#17911（2025-12），llama-server 默认开启 jinja",
          why_keep="发行版和镜像里的旧 llama-server 还很多，有的打包特意用 --no-jinja 启动；"
                   "认得这句原话，就知道该升级，而不是去改自己的代码。",
          refs=(_GH + "containers/ramalama/issues/988", _GH + "huggingface/hub-docs/pull/2420")),
    Quirk("llamacpp_python", "llama-cpp-python（chatml-function-calling）",
          "不写 tool_choice 就不调用工具；写明 \"auto\" 的流式请求一块都不发就结束；助手消息没有 content 键、"
          "tool_choice=\"required\"（处理函数里断言失败，错误消息是空的）都回 500；流式不报用量。",
          _GH + "abetlen/llama-cpp-python/blob/main/llama_cpp/llama_chat_format.py",
          versions="llama-cpp-python v0.3.x 至 v0.3.35（2026-08）的 chatml-function-calling 格式"
                   "（PR #1613 未合并）；流式的两条是本项目 make test-real 量到的，未在上游逐行核实",
          refs=(_GH + "abetlen/llama-cpp-python/issues/1338", _GH + "abetlen/llama-cpp-python/pull/1613")),
    Quirk("moonshot_usage_in_choice", "月之暗面", "流式输出的用量不在块的顶层，而在最后一块的 choices[0].usage 里。",
          _GH + "earendil-works/pi/issues/2017",
          versions="moonshot-v1-* 起（2024-06 的报告）到 Kimi K2.5（2026-03 的报告）；未在官方文档核实",
          status=FIXED, fixed_in="报告里的两族模型（moonshot-v1-*、kimi-k2.5）2026-08-31 下线；现行的 kimi-k2.6、kimi-k3 "
                                 "没有见到这样的报告（核对 2026-12-06）",
          why_keep="兼容 Moonshot 格式的转发服务和旧的本地部署还可能这样发；拼流时两处都看，对谁都无害。",
          refs=(_GH + "northes/go-moonshot/issues/17",)),
    Quirk("empty_choices_first", "多家（Azure OpenAI 等）", "流的第一块 choices 是空列表（内容过滤的提示块）。",
          _GH + "seratch/ChatGPT-in-Slack/pull/49",
          versions="Azure OpenAI api-version 2023-06-01-preview 起；2024-08 仍有报告；未在 Azure 官方文档核实",
          refs=(_GH + "AbanteAI/archive-old-cli-mentat/issues/429", _GH + "langfuse/langfuse/issues/2833")),
    Quirk("openai_max_completion_tokens", "OpenAI（GPT-5.x、GPT-6 系列；以前的 o 系列）",
          "请求里带 max_tokens 就回 400 unsupported_parameter：“Use 'max_completion_tokens' instead.”",
          _GH + "griptape-ai/ComfyUI-Griptape/issues/312",
          versions="o1、o3、o4-mini（2024-11 起的报告）、gpt-5（2025-08）、gpt-5.1（2025-12）、gpt-5.4（2026-04），"
                   "Azure 上的 GPT-5.1 也一样（2026-07）；gpt-4o、gpt-4o-mini 两种都收。o1、o3-mini、o4-mini 已于 2026-10-23 "
                   "停用，gpt-5、gpt-5-mini、o3 于 2026-12-10 停用（OpenAI 的弃用页，见 models.dev#3707、llmgateway#2696）",
          refs=(_GH + "fish2018/YPrompt/issues/26", _GH + "koosoli/ESPHomeDesigner/issues/379",
                _GH + "anomalyco/opencode/issues/37964", _GH + "dsp05/overleaf-copilot/pull/43")),
    Quirk("openai_tools_reasoning", "OpenAI（GPT-5.6、GPT-6 系列）",
          "Chat Completions 的请求带了 tools 而 reasoning_effort 不是 \"none\"（不写也算：模型默认会思考）就回 400："
          "“Function tools with reasoning_effort are not supported …”；同样不收 max_tokens。"
          "gpt-6-astra 连 \"none\" 也不收，在 Chat Completions 里就不能带工具（只能走 Responses）。",
          _GH + "BerriAI/litellm/pull/34569",
          versions="gpt-5.4 显式写 reasoning_effort 时（2026-03 的报告）；gpt-5.6 系列不写也被拒（2026-07 起）；"
                   "gpt-6-sol（2026-09）；OpenAI 的 gpt-6-luna 模型页写明 Chat Completions 只有 reasoning_effort 为 none 时"
                   "才能调用函数（https://developers.openai.com/api/docs/models/gpt-6-luna ，2026-12-02 核对）",
          refs=(_GH + "danny-avila/LibreChat/issues/14231", _GH + "onyx-dot-app/onyx/issues/15008",
                _GH + "pipecat-ai/pipecat/issues/4043", _GH + "genkit-ai/genkit/pull/6303",
                _GH + "bolna-ai/bolna/pull/1019")),
    Quirk("openai_tools_responses_only", "OpenAI（gpt-6.1-sol、gpt-6-astra）",
          "Chat Completions 里不能带工具：reasoning_effort 不收 \"none\"（400 “Supported values are: 'low', 'medium', "
          "'high', and 'xhigh'.”），别的强度（不写也算）带工具就回 400，只给 /v1/responses 这一条路；"
          "同样不收 max_tokens。",
          _GH + "blakeblackshear/frigate/discussions/24555",
          versions="gpt-6-astra（2026-09）；gpt-6.1-sol（2026-09-29 发布，2026-10 起的报告）",
          refs=(_GH + "BerriAI/litellm-docs/pull/1173", _GH + "genkit-ai/genkit/pull/6303",
                _GH + "sandialabs/atlas-ui-3/issues/756"), models=("gpt-6.1-sol", "gpt-6-astra")),
    Quirk("moonshot_thinking", "月之暗面（Kimi K2.6）",
          "思考模式默认开着：回复带 reasoning_content；带工具调用的那轮助手消息以后要原样带着它，否则 400 “thinking is "
          "enabled but reasoning_content is missing in assistant tool call message at index N”。"
          "请求里写 thinking={\"type\": \"disabled\"} 就不思考。",
          _GH + "OnesoftQwQ/opencode-go-copilot/issues/1",
          versions="kimi-k2.5（2026-01 起，Moonshot 文档：思考默认开）、kimi-k2.6（2026-04 至 2026-06 的报告）；"
                   "moonshot-v1-* 与 kimi-k2.5 已于 2026-08-31 下线（chatcli#1344 对着线上接口核对过，2026-09-02）",
          refs=(_GH + "SillyTavern/SillyTavern/issues/5072", _GH + "earendil-works/pi/issues/5531",
                _GH + "diillson/chatcli/issues/1344")),
    Quirk("moonshot_always_thinks", "月之暗面（kimi-k3）",
          "总在思考：每个回复都带 reasoning_content，没有“关掉思考”这一说。请求里写 thinking={\"type\": \"disabled\"} 回 400 "
          "“invalid thinking: only type=enabled is allowed for this model”；thinking 和 reasoning_effort 一起写回 400 "
          "“cannot specify both 'thinking' and 'reasoning_effort'”。思考多深用顶层的 reasoning_effort（low、high、max）。",
          "https://platform.kimi.ai/docs/guide/use-reasoning-effort",
          versions="kimi-k3（2026-07-27 发布）：Kimi 的文档说 K3 总在思考，从 K2.x 迁过来要去掉 thinking 配置（2026-08 的引述，"
                   "tau#560、hermes-agent#81647）。拒绝 disabled 的原话出自同样不能关思考的 kimi-k2.7-code（oh-my-pi#3852，"
                   "2026-06-30），两者并用的原话出自 kimi-k2.6（nanobot#3939，2026-05-20）；K3 回的是不是同一句，未在线上核实。"
                   "2026-09-04/06 对着线上接口核对：kimi-k2.6、kimi-k3 的历史消息缺了 reasoning_content 不再被拒（Datus-agent#1400）",
          refs=(_GH + "can1357/oh-my-pi/issues/3852", _GH + "HKUDS/nanobot/issues/3939",
                _GH + "NousResearch/hermes-agent/pull/55488", _GH + "Datus-ai/Datus-agent/pull/1400"),
          models=("kimi-k3",)),
    Quirk("siliconflow_params", "硅基流动 SiliconFlow",
          "错误体不包在 error 里：{\"code\": 20015, \"message\": …, \"data\": null}。不支持思考的模型收到 enable_thinking "
          "回 400 “current model does not support parameter `enable_thinking`”；tool_choice=\"required\" 回 400 "
          "“The `required` option for tool_choice is not yet supported”。",
          "https://docs.siliconflow.cn/cn/faqs/error-code",
          versions="硅基流动的 OpenAI 兼容接口（2025-03 至 2025-12 的报告）；只有列出的模型（如 Qwen3 系列）收 enable_thinking",
          refs=(_GH + "immersive-translate/immersive-translate/issues/3418",
                _GH + "FoundationAgents/OpenManus/issues/30")),
    Quirk("zhipu_tool_choice", "智谱 GLM（Z.AI）", "tool_choice 只收 \"auto\"：写成 \"required\" 或指定某个工具都回 400 "
          "“Tool choice must be auto”。",
          _GH + "vectorize-io/hindsight/issues/4246", versions="glm-5.3-flash 经 OpenRouter 的 Z.AI（2026-09 的报告）；"
          "未在智谱官方文档核实"),
    Quirk("vllm_no_tool_parser", "vLLM（启动时没开工具调用）", "带 tools 的请求回 400："
          "“\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set”。",
          "https://docs.vllm.ai/en/stable/features/tool_calling.html",
          versions="vLLM 0.6 起（vllm#9986，2024-11）到 2026-04 仍有报告（AstrBot#7356）",
          refs=(_GH + "vllm-project/vllm/issues/9986", _GH + "AstrBotDevs/AstrBot/issues/7356")),
    Quirk("vllm_empty_tool_calls", "vLLM（OpenAI 兼容服务）",
          "文字回答（finish_reason 是 stop）也带着 \"tool_calls\": []：SDK 里 message.tool_calls 是空列表而不是 None，"
          "照原样存进历史，下一次请求就带着空数组，OpenAI 回 400 “empty array”，Llama 3.1 等的对话模板也不收。",
          _GH + "vllm-project/vllm/issues/44104",
          versions="vLLM 0.20.2 和当时的 main（2026-05-31 报告）；v0.5.0 起的老版本也这样（autogen#3120，2024-07）",
          status=PARTLY_FIXED, fixed_in="vLLM PR #44105（#44104 已关闭；从哪个发行版起带上，2026-12-06 未核实）",
          why_keep="还在用的老版本 vLLM 和基于它的服务（如 vLLM-Ascend，#9790）照样这样发；"
                   "不写空的 tool_calls，对规矩的服务也没有坏处。",
          refs=(_GH + "vllm-project/vllm/issues/13978", _GH + "microsoft/autogen/issues/3120",
                _GH + "vllm-project/vllm-ascend/issues/9790")),
    Quirk("deepseek_balance", "DeepSeek", "余额不足：HTTP 402 “Insufficient Balance”。",
          "https://api-docs.deepseek.com/quick_start/error_codes", versions="DeepSeek API（所有模型）"),
]}

_REASONING = ("结果已经有了，简短回答即可。", "用户想让我查看文件。我先调用 bash 工具执行命令，拿到结果再回答。")
_INSPECTION = "data may contain inappropriate content."


def _messages(body: dict, role: str | None = None) -> list[dict]:
    messages = body.get("messages") if isinstance(body.get("messages"), list) else []
    return [m for m in messages if isinstance(m, dict) and role in (None, m.get("role"))]


def _when(test, status: int, message: Any, type: str, code: Any = None):
    """请求满足 `test(body)` 时拒绝；`message` 可以是 `message(body)`，按请求写原话。"""
    def refuse(body: dict) -> httpx2.Response | None:
        if test(body):
            text = message(body) if callable(message) else message
            return Rejected(status, text, type=type, code=code).response()
    return refuse


def _unreasoned(body: dict) -> int | None:
    """第一条带工具调用、却没带回 reasoning_content 的助手消息的下标。"""
    return next((i for i, m in enumerate(_messages(body)) if m.get("role") == "assistant"
                 and m.get("tool_calls") and "reasoning_content" not in m), None)


def _thinks(body: dict) -> bool:
    """DeepSeek、Kimi：思考模式默认开着，请求里写 thinking={"type": "disabled"} 才关掉。"""
    return not (isinstance(body.get("thinking"), dict) and body["thinking"].get("type") == "disabled")


def _thinking_unreasoned(body: dict) -> int | None:
    """思考模式开着，却有一条带工具调用的助手消息没带回 reasoning_content：它的下标（否则 None）。"""
    return _unreasoned(body) if _thinks(body) else None


def _reasoned(message: dict, body: dict, **extra) -> dict:
    """思考模式开着时，回复带上思维链（`extra` 是这家服务商另外改的字段）。"""
    if not _thinks(body):
        return message
    return {**message, **extra, "reasoning_content": _REASONING[bool(message.get("tool_calls"))]}


def _siliconflow(body: dict) -> httpx2.Response | None:
    """硅基流动：错误体不包在 error 里（code、message、data 三个键）。"""
    said = None
    if "enable_thinking" in body and not str(body.get("model", "")).startswith("Qwen/Qwen3"):
        said = "Value error, current model does not support parameter `enable_thinking`."
    elif body.get("tool_choice") == "required":
        said = "Value error, The `required` option for tool_choice is not yet supported."
    return json_response(400, {"code": 20015, "message": said, "data": None}) if said else None


def _llamacpp_python(body: dict) -> httpx2.Response | None:
    if body.get("tool_choice") == "required":  # 处理函数里的断言失败：500，错误消息是空的
        return Rejected(500, "", type="internal_server_error").response()
    if any("content" not in m for m in _messages(body, "assistant")):
        return Rejected(500, "'dict object' has no attribute 'content'",
                        type="internal_server_error").response()
    if body.get("stream") and body.get("tools") and body.get("tool_choice") == "auto":
        return sse_response([], done=False)  # 服务端在生成之前就出错了，流里什么都没有


# 怪脾气 → 请求进来时先看一眼：服务商会拒绝的，返回它的响应（否则 None）
def _both_thinking_controls(body: dict) -> httpx2.Response | None:
    """月之暗面：thinking 和 reasoning_effort 只能写一个（nanobot#3939 里的原话）。"""
    if "thinking" in body and "reasoning_effort" in body:
        return Rejected(400, "cannot specify both 'thinking' and 'reasoning_effort'",
                        type="invalid_request_error").response()
    return None


_REFUSE = {
    "deepseek_balance": _when(lambda b: True, 402, "Insufficient Balance", "unknown_error",
                              "invalid_request_error"),
    "deepseek_thinking": _when(lambda b: _thinking_unreasoned(b) is not None, 400,
                               "The `reasoning_content` in the thinking mode must be passed back to the API.",
                               "invalid_request_error", "invalid_request_error"),
    "moonshot_thinking": _when(lambda b: _thinking_unreasoned(b) is not None, 400, lambda b: (
        "thinking is enabled but reasoning_content is missing in assistant tool call message at index "
        f"{_thinking_unreasoned(b)}"), "invalid_request_error"),
    "moonshot_always_thinks": lambda b: _both_thinking_controls(b) or (Rejected(
        400, "invalid thinking: only type=enabled is allowed for this model", type="invalid_request_error").response()
        if isinstance(b.get("thinking"), dict) and b["thinking"].get("type") == "disabled" else None),
    "siliconflow_params": _siliconflow,
    "dashscope_tool_rule": lambda b: (p := pairing_error(_messages(b), DASHSCOPE_PAIRING)) and p.response(),
    "dashscope_inspection": _when(lambda b: any(FLAGGED in text_of(m.get("content")) for m in _messages(b)), 400,
                                  "Input " + _INSPECTION, "data_inspection_failed", "data_inspection_failed"),
    "dashscope_output_inspection": _when(lambda b: not b.get("stream"), 400, "Output " + _INSPECTION,
                                         "data_inspection_failed", "data_inspection_failed"),
    # 原话和状态码照 ramalama#988 里贴出的旧 llama-server 回复
    "llamacpp_no_jinja": _when(lambda b: b.get("tools"), 500, "tools param requires --jinja flag",
                               "server_error", 500),
    "llamacpp_content": _when(lambda b: any(m.get("content") is None for m in _messages(b, "assistant")), 500,
                              "Expected 'content' to be a string or an array", "server_error", 500),
    "llamacpp_python": _llamacpp_python,
    "dashscope_thinking_only": lambda b: Rejected(
        400, "<400> InternalError.Algo.InvalidParameter: The value of the enable_thinking parameter is restricted to "
        "True.", type="invalid_request_error", code="invalid_parameter_error").response()
    if b.get("enable_thinking") is False else Rejected(
        400, "<400> InternalError.Algo.InvalidParameter: parameter.enable_thinking must be set to false for "
        "non-streaming calls", type="invalid_request_error", code="invalid_parameter_error").response()
    if not b.get("stream") else None,
    "openai_max_completion_tokens": lambda b: Rejected(
        400, "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
        type="invalid_request_error", param="max_tokens", code="unsupported_parameter").response()
    if "max_tokens" in b else None,
    "zhipu_tool_choice": _when(lambda b: b.get("tool_choice") not in (None, "auto"), 400, "Tool choice must be auto",
                               "invalid_request_error", 400),
    "vllm_no_tool_parser": _when(lambda b: b.get("tools"), 400, "\"auto\" tool choice requires --enable-auto-tool-choice "
                                 "and --tool-call-parser to be set", "BadRequestError", 400),
    "openai_tools_responses_only": lambda b: _REFUSE["openai_max_completion_tokens"](b) or (Rejected(
        400, "Unsupported value: 'reasoning_effort' does not support 'none' with this model. Supported values are: "
        "'low', 'medium', 'high', and 'xhigh'.", type="invalid_request_error", param="reasoning_effort",
        code="unsupported_value").response() if b.get("reasoning_effort") == "none" else Rejected(
        400, f"Function tools with reasoning_effort are not supported for {b.get('model')} in /v1/chat/completions. "
        "Please use /v1/responses instead.", type="invalid_request_error", param="tools").response()
        if b.get("tools") else None),
    "openai_tools_reasoning": lambda b: _REFUSE["openai_max_completion_tokens"](b) or (Rejected(
        400, f"Function tools with reasoning_effort are not supported for {b.get('model')} in /v1/chat/completions. "
        "To use function tools, use /v1/responses or set reasoning_effort to 'none'.",
        type="invalid_request_error", param="reasoning_effort").response()
        if b.get("tools") and b.get("reasoning_effort") != "none" else None),
}


def _talk_instead(message: dict, content: str) -> dict:
    return {**{k: v for k, v in message.items() if k != "tool_calls"}, "content": content}


def _as_json_text(message: dict) -> dict:
    """Ollama 的小模型：把调用写成一段 JSON 文字，而不是 tool_calls。"""
    call = message["tool_calls"][0]["function"]
    try:
        arguments = json.loads(call["arguments"])
    except ValueError:
        arguments = call["arguments"]
    return _talk_instead(message, json.dumps({"name": call["name"], "arguments": arguments}, ensure_ascii=False))


# 怪脾气 → 改写一条完整回复里的助手消息（拿掉 tool_calls 时 finish_reason 跟着变成 stop）
_REWRITE = {
    "llamacpp_python": lambda message, body: _talk_instead(message, "你可以在终端里运行 ls 看看当前目录。")
    if message.get("tool_calls") and body.get("tool_choice") is None else message,
    "ollama_no_tools": lambda message, body: _as_json_text(message) if message.get("tool_calls") else message,
    # 百炼只会思考的模型：每个回复都带思维链（流式时在 delta.reasoning_content 里）
    "dashscope_thinking_only": lambda message, body: {**message,
                                                       "reasoning_content": _REASONING[bool(message.get("tool_calls"))]},
    # DeepSeek 在工具调用的回复里给空字符串的 content
    "deepseek_thinking": lambda message, body: _reasoned(message, body, content=message.get("content") or ""),
    "moonshot_thinking": _reasoned,
    "moonshot_always_thinks": lambda message, body: {**message, "reasoning_content": _REASONING[bool(message.get("tool_calls"))]},
    "vllm_empty_tool_calls": lambda message, body: message if message.get("tool_calls") else {**message, "tool_calls": []},
}


def _one_chunk_per_call(chunks: list[dict]) -> list[dict]:
    """Ollama：每个调用一块发完，index 都是 0。"""
    out: list[dict] = []
    for chunk in chunks:
        parts = chunk["choices"][0]["delta"].get("tool_calls") if chunk["choices"] else None
        if parts and "id" not in parts[0]:
            last = out[-1]["choices"][0]["delta"]["tool_calls"][0]["function"]
            last["arguments"] += parts[0]["function"]["arguments"]
            continue
        if parts:
            parts[0]["index"] = 0
        out.append(chunk)
    return out


def _usage_in_choice(chunks: list[dict]) -> list[dict]:
    """月之暗面：用量放在最后一块的 choice 里，没有单独的用量块。"""
    if not chunks[-1]["choices"]:
        chunks[-2]["choices"][0]["usage"] = chunks.pop()["usage"]
    return chunks


# 怪脾气 → 改写流式块（由 wire.stream_chunks 从完整回复切出）
_RESTREAM = {
    "ollama_parallel_index0": _one_chunk_per_call,
    "moonshot_usage_in_choice": _usage_in_choice,
    "empty_choices_first": lambda chunks: [{**chunks[0], "choices": [], "prompt_filter_results": [
        {"prompt_index": 0, "content_filter_results": {}}]}, *chunks],  # Azure 一类：先来一块只有过滤结果
    # 百炼输出审核：文字发到一半，来一个错误事件就结束
    "dashscope_output_inspection": lambda chunks: chunks[:3] + [{"error": {
        "code": "data_inspection_failed", "param": None, "type": "data_inspection_failed",
        "message": "Output " + _INSPECTION}}],
}


class QuirkHandler:
    """处理函数的包装：按一种怪脾气检查请求、改写回复；`quirk` 不写时按模型名选，`requests` 是收到的请求体。"""

    def __init__(self, quirk: str | None = None, inner: Any = None):
        if quirk is not None and quirk not in QUIRKS:
            raise ValueError(f"没有名为 {quirk!r} 的怪脾气，可选：{'、'.join(QUIRKS)}")
        self.quirk = quirk
        self.inner = inner if inner is not None else FakeHandler(FakeModel())
        self.responder = self.inner.responder  # 副本的 fake_model 据此找到原来的假模型
        self.requests: list[dict] = []

    def _models(self, request: httpx2.Request) -> httpx2.Response:
        """模型列表：假模型的，加上这个替身代表的模型名（`Quirk.models`），排在前面。"""
        answer = self.inner(request)
        if answer.status_code != 200:
            return answer
        listed = json.loads(answer.read())
        known = {m["id"] for m in listed["data"]}
        extra = [{**listed["data"][0], "id": name} for name in QUIRKS[self.quirk].models if name not in known]
        return json_response(200, {**listed, "data": extra + listed["data"]})

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        try:
            body = json.loads(request.content) if request.method == "POST" else None
        except ValueError:
            body = None
        if request.method == "GET" and route(request) == "/models" and self.quirk in QUIRKS:
            return self._models(request)
        if not isinstance(body, dict) or route(request) != "/chat/completions":
            return self.inner(request)
        self.requests.append(body)
        named = str(body.get("model")).rsplit("@", 1)[-1]  # "deepseek_thinking" 或 "fake-agent-1@deepseek_thinking"
        quirk = self.quirk or (named if named in QUIRKS else None)
        refused = _REFUSE[quirk](body) if quirk in _REFUSE else None
        if refused is not None:
            return refused
        if quirk is None:
            return self.inner(request)
        answer = self.inner(with_body(request, {k: v for k, v in body.items()
                                                if k not in ("stream", "stream_options")}))
        if answer.status_code != 200:
            return answer
        completion = json.loads(answer.read())
        choice = completion["choices"][0]
        message = _REWRITE.get(quirk, lambda message, body: message)(dict(choice["message"]), body)
        if choice["finish_reason"] == "tool_calls" and not message.get("tool_calls"):
            choice["finish_reason"] = "stop"
        completion["choices"] = [{**choice, "message": message}]
        if not body.get("stream"):
            return json_response(200, completion)
        options = body.get("stream_options")
        usage = isinstance(options, dict) and bool(options.get("include_usage")) and quirk != "llamacpp_python"
        chunks = _RESTREAM.get(quirk, list)(stream_chunks(completion, usage=usage))
        return sse_response(chunks, done=not any("error" in c for c in chunks))


class QuirkClient(FakeClient):
    """离线客户端：默认策略（或脚本）的假模型带上一种怪脾气（不写时按模型名选）；`requests` 是收到的请求体。"""

    def __init__(self, quirk: str | None = None, script: Iterable[Any] | None = None, **options: Any):
        self._quirk = quirk
        super().__init__(script, **options)
        # SDK 复制出的副本沿用原来的线路：怪脾气和收到的请求体都是同一份
        self.quirk, self.requests = self.handler.quirk, self.handler.requests

    def _make_handler(self):
        return QuirkHandler(self._quirk, FakeHandler(self))


def start_quirk_server(quirk: str | None = None, *, host: str = "127.0.0.1", port: int = 0) -> LocalServer:
    """在本机端口上提供带怪脾气的假模型；`quirk` 不写时按模型名选（`model="ollama_parallel_index0"`）。"""
    return serve(QuirkHandler(quirk), host, port, fake=True)


def naive_loop(client, model: str, prompt: str, tools: list, *, max_turns: int = 4) -> list[dict]:
    """常见的朴素循环：自己拼助手消息（只抄 content 和 tool_calls），只执行第一个调用（不真的执行）。"""
    messages: list[dict] = [{"role": "user", "content": prompt}]
    for _ in range(max_turns):
        message = client.chat.completions.create(model=model, messages=messages, tools=tools).choices[0].message
        if not message.tool_calls:
            messages.append({"role": "assistant", "content": message.content})
            return messages
        messages.append({"role": "assistant", "content": message.content,
                         "tool_calls": [c.model_dump() for c in message.tool_calls]})
        first = message.tool_calls[0]  # 只看第一个调用
        messages.append({"role": "tool", "tool_call_id": first.id,
                         "content": f"（演示：没有真的执行 {first.function.arguments}）"})
    return messages


def naive_stream(client, model: str, prompt: str, tools: list) -> dict:
    """常见的朴素流式读法：认得最后那个用量块，其余的块直接取 `chunk.choices[0]`，按 `index` 拼参数。"""
    stream = client.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}],
                                            tools=tools, stream=True, stream_options={"include_usage": True})
    calls: dict[int, dict] = {}
    content, usage = "", None
    for chunk in stream:
        if chunk.usage:  # OpenAI 把用量放在最后一块，那一块的 choices 是空的
            usage = chunk.usage
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for part in delta.tool_calls or []:
            slot = calls.setdefault(part.index, {"id": part.id, "name": "", "arguments": ""})
            slot["name"] = slot["name"] or (part.function.name or "")
            slot["arguments"] += part.function.arguments or ""
    return {"tool_calls": calls, "content": content, "usage": usage}
