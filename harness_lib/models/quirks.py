"""服务商的“怪脾气”：让离线假模型照着真实服务商的已知行为作答，不用密钥也能遇到它们。

辅助工具，不是课程内容；07–09 用它演示，tests/test_quirks.py 用真正的 HTTP 逐个检查。

“兼容 OpenAI 接口”只说明字段长得一样。真实的服务商各有各的脾气：Ollama 把并行调用都写成 `index` 0，
DeepSeek 的思考模式要求把 `reasoning_content` 传回去，阿里云百炼有内容审核，llama.cpp 用 500 拒绝请求……
`QUIRKS` 里每一条都写明：哪家、哪个版本范围、出处（服务商文档、issue 或 PR 编号）、现在的状态
（现存 / 部分修复 / 已修复，已修复的写明修复版本和日期，并用一句话说明防御代码为什么还值得留着：
旧版本的服务器到处都是）。整张表核对于 `AS_OF` 这一天，`quirk_table()` 的状态一列标着这个日期。

做法和别的替身一样，只在 HTTP 这一层动手（见 `harness_lib.models.wire`）：

- `QuirkHandler(quirk=None, inner=None)`：处理函数的包装。先按怪脾气检查请求（该拒绝的就拒绝），
  再让里面的假模型作答，最后按怪脾气改写回复（普通的和流式的都改）。`quirk` 不写时，
  从请求的模型名里读：`ollama_parallel_index0`，或 `fake-agent-1@ollama_parallel_index0`；
- `QuirkClient(quirk, script=None)`：离线客户端（`FakeClient` 的子类），每个请求都带着这个怪脾气；
- `start_quirk_server()`：把同一个处理函数放到本机端口上，用模型名选怪脾气；
- `naive_loop`、`naive_stream`：教程里常见的“朴素”写法，用来看它们在哪一步坏掉。
"""

from __future__ import annotations

import json
from typing import Any, Iterable, NamedTuple

import httpx2

from .server import LocalServer, serve
from .fake import FakeClient, FakeHandler, FakeModel
from .wire import OfflineHTTP, Rejected, json_response, route, sse_response, with_body

__all__ = [
    "AS_OF",
    "CURRENT",
    "FIXED",
    "FLAGGED",
    "PARTLY_FIXED",
    "QUIRKS",
    "Quirk",
    "QuirkClient",
    "QuirkHandler",
    "STATUS_COLUMN",
    "naive_loop",
    "naive_stream",
    "quirk_of",
        "start_quirk_server",
]


AS_OF = "2026-12-01"
"""这张表核对到哪一天：每一条的版本范围和状态都是这一天在出处里查到的样子。"""

CURRENT = "现存"
PARTLY_FIXED = "部分修复"
FIXED = "已修复（历史）"
STATUS_COLUMN = f"状态（截至 {AS_OF}）"
"""`quirk_table()` 里状态那一列的列名：日期就写在表头上，表一显示就看得见。"""

FLAGGED = "【审核样例】"
"""`dashscope_inspection` 把含有这段文字的请求当作审核不通过（只是演示用的记号，不是真的敏感词）。"""


class Quirk(NamedTuple):
    """一条怪脾气。

    前六项：名字、服务商、行为、出处（主要的一条 URL）、朴素写法怎么坏、本项目怎么应对。
    后几项给这条事实标上日期：
    - `versions`：哪个产品、哪些版本会这样（以及怎么知道的）；
    - `status`：`CURRENT`（现存）、`PARTLY_FIXED`（部分修复）或 `FIXED`（已修复，算历史）；
    - `fixed_in`：修复它的版本、PR 和日期（现存的留空）；
    - `why_keep`：已修复（或部分修复）的，为什么防御代码还值得留着；
    - `refs`：其余出处（issue / PR 编号的 URL），和 `source` 一样在 `checked` 那天核对过；
    - `checked`：核对日期。
    """

    name: str
    provider: str
    behaviour: str
    source: str
    naive: str
    project: str
    versions: str = ""
    status: str = CURRENT
    fixed_in: str = ""
    why_keep: str = ""
    refs: tuple = ()
    checked: str = AS_OF


# 每一条的出处都在 2026-12-01 核对过（服务商文档、issue / PR 页面，或上游仓库的源码与标签）。
# 核对不到的地方，在那一条的注释里写明“未核实”。
QUIRKS: dict[str, Quirk] = {q.name: q for q in [
    # Ollama 0.20.2/0.20.4 上报告（#15457，2026-04-09）；修复：PR #15467（提交 fdfe9cec9，
    # “Fixes: #15457”），第一个含它的标签是 v0.20.6（2026-04-11）。它只修了 8 个内置解析器
    # （cogito、deepseek3、functiongemma、gemma4、lfm2、ministral、olmo3、qwen3vl）；
    # 没有专用解析器的模型（如 qwen2.5-coder:7b）见 #15497（2026-04-11 提出，核对时仍是 open），
    # qwen3-coder 在 0.23.2 上又被报告过一次（#16212，2026-05，已关闭，修复提交未找到）。
    Quirk("ollama_parallel_index0", "Ollama",
          "流式输出并行的工具调用时，每个调用一块发完，都写成 index 0，各自带新的 id。",
          "https://github.com/ollama/ollama/issues/15457",
          "按 index 拼接：两个调用拼成一个，arguments 变成 {…}{…}，第二个调用丢了。",
          "accumulate 见到同一个 index 换了 id，就开一个新调用。",
          versions="Ollama ≤ v0.20.5 的所有模型；v0.20.6 起有内置解析器的模型已修好，"
                   "没有专用解析器的模型（如 qwen2.5-coder:7b）仍有报告（#15497）",
          status=PARTLY_FIXED,
          fixed_in="Ollama v0.20.6（2026-04-11，PR #15467）",
          why_keep="v0.20.6 以前的 Ollama 还装在很多机器上，没有专用解析器的模型仍可能这样发；"
                   "按 id 分开调用，对规矩的服务也没有坏处。",
          refs=("https://github.com/ollama/ollama/pull/15467",
                "https://github.com/ollama/ollama/issues/15497",
                "https://github.com/ollama/ollama/issues/16212")),
    # 与 Ollama 版本无关，取决于模型：llama3.2:3b 见 ollama#13519（2025-12-18 提出，核对时仍 open）。
    Quirk("ollama_no_tools", "Ollama（小模型）",
          "提供了工具，小模型却不发 tool_calls，而是把调用写成一段 JSON 文字。",
          "https://github.com/ollama/ollama/issues/13519",
          "第一轮就因为没有 tool_calls 而结束，把那段 JSON 当成最终回答，什么都没执行。",
          "循环同样停下（协议上这就是回答）；探针的“提供工具后返回 tool_calls”一项给出 ✗ 和办法。",
          versions="与 Ollama 版本无关，取决于模型（例如 llama3.2:3b、qwen2.5-coder:7b 一类小模型）",
          refs=("https://github.com/ollama/ollama-vscode/pull/20",)),
    # DeepSeek 官方文档“思考模式”：V4（deepseek-v4-flash / deepseek-v4-pro）思考模式默认开启；
    # 两条 user 消息之间有工具调用时，那轮的 reasoning_content 以后每次请求都必须传回，否则 400。
    # 反过来，已下线的 deepseek-reasoner 的文档要求把 reasoning_content 删掉再发（传了会 400）。
    Quirk("deepseek_thinking", "DeepSeek（思考模式）",
          "回复带 reasoning_content；带工具调用的那轮助手消息，之后每次请求都要原样带着它，否则 400。",
          "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls",
          "自己拼助手消息、只抄 content 和 tool_calls：第二轮就收到 400。",
          "循环用 model_dump(exclude_none=True) 追加整条消息，reasoning_content 跟着回去；流式的也拼好保留。",
          versions="DeepSeek API 的 V4 模型（deepseek-v4-flash、deepseek-v4-pro），思考模式默认开启；"
                   "已下线的 deepseek-reasoner 的规矩相反（要求删掉 reasoning_content）",
          refs=("https://api-docs.deepseek.com/zh-cn/guides/thinking_mode",
                "https://api-docs.deepseek.com/zh-cn/guides/reasoning_model")),
    # 原话见 agentscope#772（2025-09-16，DashScope 接口）和 agentscope-java#53（2025-11）；
    # “messages with role "tool" must be a response to a preceeding message” 见 llama_index#19224（2025-06）。
    # 百炼官方错误码页面里没有找到这两句：规则来自用户报告，未在官方文档核实。
    Quirk("dashscope_tool_rule", "阿里云百炼",
          "每个 tool_call_id 都要有 tool 消息紧跟在后面，tool 消息前面必须是带 tool_calls 的助手消息；措辞是百炼自己的。",
          "https://github.com/agentscope-ai/agentscope/issues/772",
          "并行调用只执行第一个（tool_calls[0]）：下一次请求 400。",
          "循环为每个调用都追加一条 tool 消息；explain_error 认得这句原话。",
          versions="百炼 DashScope 接口与 OpenAI 兼容接口（通义千问系列）；2025-06 至 2025-11 的报告里都是这句原话",
          refs=("https://github.com/agentscope-ai/agentscope-java/issues/53",
                "https://github.com/run-llama/llama_index/pull/19224")),
    # 百炼把这类错误的说明放在错误码页面的 inappropriate-content 一节（报错原文里就带着这个链接，
    # 见 BettaFish#557，2026-01）；原生接口的措辞是 “Input text data may contain …”（qwen-code#3145，2026-04）。
    Quirk("dashscope_inspection", "阿里云百炼",
          "内容审核：messages 里有审核不通过的内容（这里用 FLAGGED 这段文字代表）时回 400 data_inspection_failed。",
          "https://help.aliyun.com/zh/model-studio/error-code#inappropriate-content",
          "原样抛出 BadRequestError，看起来像代码写错了；重试也一样被拦。",
          "call_model 把它变成 EndpointError（content_filter），说明是审核、该删哪条消息；messages 不变。",
          versions="百炼所有文本模型（OpenAI 兼容接口与 DashScope 接口）；2026 年仍常见",
          refs=("https://github.com/666ghj/BettaFish/issues/557",
                "https://github.com/QwenLM/qwen-code/issues/3145")),
    # 流式调用中途报 “Output data may contain inappropriate content” 见 BettaFish#570（2026-02）。
    # 流里那个 {"error": …} 事件的确切形状没有在百炼官方文档里核实（照用户报告和 SDK 的处理方式写的）。
    Quirk("dashscope_output_inspection", "阿里云百炼",
          "流式输出到一半，输出审核没通过：流里来一个 {\"error\": {...}} 事件，之后就没有了。",
          "https://github.com/666ghj/BettaFish/issues/570",
          "SDK 抛出 APIError，笼统地说流出错了；手写的拼接代码只会以为断流。",
          "stream_turn 抛出 EndpointError（content_filter），附上服务商原话；半条消息不进 messages。",
          versions="百炼文本模型的流式输出；错误事件的确切形状未在官方文档核实",
          refs=("https://help.aliyun.com/zh/model-studio/error-code#inappropriate-content",)),
    # llama.cpp：缺 content 的助手消息在 PR #12293（2025-03-10 合并）起被接受；b5331 起 content 为 null
    # 又被拒（browser-use#1635），issue #13471（b5350 上报告）由 PR #13477（2025-05-12）修好。
    # 确切的修复构建号未核实。以它为底的打包之后仍报过同一句（lemonade#390，2025-09）。
    Quirk("llamacpp_content", "llama.cpp（llama-server）",
          "助手消息没有 content（或是 null）时回 500 “Expected 'content' to be a string or an array”。",
          "https://github.com/ggml-org/llama.cpp/issues/13471",
          "以为是服务器坏了（500），SDK 还会白白重试两次。",
          "explain_error 认出这是请求形状的问题（request_shape），说明补上 \"content\": \"\"。",
          versions="llama-server 约 b5331 至 2025-05-12 之间的构建（null），以及 PR #12293 之前的构建（缺键）",
          status=FIXED,
          fixed_in="llama.cpp PR #13477（2025-05-12；缺键早在 PR #12293，2025-03-10）",
          why_keep="旧构建和以它为底的打包还在很多机器上（2025-09 仍有报告），llama-cpp-python 对缺 content "
                   "的消息也回 500；补上 \"content\": \"\" 对任何服务都无害。",
          refs=("https://github.com/ggml-org/llama.cpp/pull/13477",
                "https://github.com/ggml-org/llama.cpp/pull/12293",
                "https://github.com/lemonade-sdk/lemonade/issues/390")),
    # llama.cpp PR #17524（“server: enable jinja by default”，2025-11-26 提出，已合并）：llama-server
    # 默认开启 jinja 模板。之前不加 --jinja 就带工具请求，回 500 “tools param requires --jinja flag”
    # （ramalama#988，2025-03；LLMKube#126，2026-01 仍有旧构建的报告）。
    Quirk("llamacpp_no_jinja", "llama.cpp（llama-server）",
          "没有用 --jinja 启动的 llama-server 收到带 tools 的请求，回 500 “tools param requires --jinja flag”。",
          "https://github.com/ggml-org/llama.cpp/pull/17524",
          "以为是服务器坏了（500），SDK 还会白白重试两次；教程让人“加 --jinja”，新版本上这句已经多余。",
          "探针认出这句原话，说明升级 llama-server（或启动时加 --jinja）；不带工具的对话照常。",
          versions="PR #17524（2025-11）之前的 llama-server 构建，以及用 --no-jinja 启动的",
          status=FIXED,
          fixed_in="llama.cpp PR #17524（2025-11，llama-server 默认开启 jinja）",
          why_keep="发行版和镜像里的旧 llama-server 还很多，有的打包特意用 --no-jinja 启动；"
                   "认得这句原话，就知道该升级，而不是去改自己的代码。",
          refs=("https://github.com/containers/ramalama/issues/988",
                "https://github.com/huggingface/hub-docs/pull/2420")),
    # llama-cpp-python 的 chatml_function_calling（核对 v0.3.35，主分支 2026-08-17）：
    # tool_choice 既不是 None/"none"、也不是指定函数时，执行 `assert tool_choice == "auto"`，
    # 于是 "required" 变成 500 且消息为空。允许 "required" 的 PR #1613（2024-07）没有合并就关闭了。
    Quirk("llamacpp_required", "llama-cpp-python（chatml-function-calling）",
          "tool_choice=\"required\" 不被支持：处理函数里断言失败，回 500，错误消息是空的。",
          "https://github.com/abetlen/llama-cpp-python/pull/1613",
          "强制调用工具的请求一律 500，看不出原因。",
          "循环不传 tool_choice，不受影响；探针的 tool_choice=\"required\" 一项给出 ✗ 和办法。",
          versions="llama-cpp-python 至 v0.3.35（2026-08）；PR #1613 未合并",
          refs=("https://github.com/abetlen/llama-cpp-python/blob/main/llama_cpp/llama_chat_format.py",)),
    # 同一个处理函数（v0.3.35 源码核对）：tool_choice 为 None 时用 tools=[] 渲染模板，所以不会调用工具；
    # 模板直接读 message['content']，缺这个键就 500。“写明 auto 的流式请求一块都不发”和“流式不报用量”
    # 是本项目 make test-real 在这台服务器上量到的，没有在上游文档或源码里逐行核实。
    Quirk("llamacpp_python", "llama-cpp-python（chatml-function-calling）",
          "不写 tool_choice 就不调用工具；写明 \"auto\" 的流式请求一块都不发就结束；"
          "助手消息没有 content 键时回 500；流式不报用量。",
          "https://github.com/abetlen/llama-cpp-python/blob/main/llama_cpp/llama_chat_format.py",
          "照 OpenAI 的习惯不写 tool_choice：一个工具都不调用；写明了再开流式：什么都收不到，也没有报错。",
          "探针逐项点名这些差别并给出办法；这台服务上要写明 tool_choice、用非流式、追加前补上 content。",
          versions="llama-cpp-python v0.3.x 至 v0.3.35（2026-08）的 chatml-function-calling 格式",
          refs=("https://github.com/abetlen/llama-cpp-python/issues/1338",)),
    # go-moonshot#17（2024-06）贴的官网流式样例里，用量就在最后一块的 choices[0].usage；
    # Kimi K2.5 上仍是这样（pi#2017，2026-03-10）。月之暗面官方文档里没有找到明确说明：未在官方文档核实。
    Quirk("moonshot_usage_in_choice", "月之暗面",
          "流式输出的用量不在块的顶层，而在最后一块的 choices[0].usage 里。",
          "https://github.com/earendil-works/pi/issues/2017",
          "只看 chunk.usage：永远是空的，token 预算永远不触发。",
          "accumulate 两处都看；agent_loop_stream 的 max_tokens_total 照样生效。",
          versions="moonshot-v1-* 起（2024-06 的报告）到 Kimi K2.5（2026-03 的报告）",
          refs=("https://github.com/northes/go-moonshot/issues/17",)),
    # Azure OpenAI 从 api-version 2023-06-01-preview 起，流的第一块 choices 为空、只带 prompt_filter_results
    # （ChatGPT-in-Slack#49，2023-08；mentat#429，2023-12；langfuse#2833，2024-08 仍有报告）。
    # 未在 Azure 官方文档里核实；别的带内容过滤的网关也可能这样。
    Quirk("empty_choices_first", "多家（Azure OpenAI 等）",
          "流的第一块 choices 是空列表（内容过滤的提示块）。",
          "https://github.com/seratch/ChatGPT-in-Slack/pull/49",
          "直接取 chunk.choices[0]：第一块就抛出 IndexError。",
          "accumulate 跳过 choices 为空的块，在哪个位置都一样。",
          versions="Azure OpenAI api-version 2023-06-01-preview 起；2024-08 仍有报告",
          refs=("https://github.com/AbanteAI/archive-old-cli-mentat/issues/429",
                "https://github.com/langfuse/langfuse/issues/2833")),
    # DeepSeek 官方错误码表：402 - Insufficient Balance（余额不足，去充值）。
    Quirk("deepseek_balance", "DeepSeek",
          "余额不足：HTTP 402 “Insufficient Balance”。",
          "https://api-docs.deepseek.com/quick_start/error_codes",
          "一个没见过的状态码，原样抛出英文异常。",
          "call_model 抛出 EndpointError（balance）：余额不足、重试没用、去充值。",
          versions="DeepSeek API（所有模型）"),
]}
"""所有怪脾气，按名字查。每一条都标着版本范围、状态和核对日期（`AS_OF`）。"""

_PIECE = 6  # 流式输出时每块的字符数
_REASONING = "用户想让我查看文件。我先调用 bash 工具执行命令，拿到结果再回答。"


def quirk_of(model: Any) -> str | None:
    """从模型名里读出怪脾气：`"deepseek_thinking"` 或 `"fake-agent-1@deepseek_thinking"`；没有就是 None。"""
    if not isinstance(model, str):
        return None
    name = model.rsplit("@", 1)[-1]
    return name if name in QUIRKS else None


# ---------------------------------------------------------------------------
# 请求检查：服务商会拒绝的请求，在这里就拒绝，措辞照服务商的原话
# ---------------------------------------------------------------------------


def _dashscope(message: str) -> Rejected:
    return Rejected(400, f"<400> InternalError.Algo.InvalidParameter: {message}",
                    type="invalid_request_error", code="invalid_parameter_error")


def _check_dashscope_pairs(messages: list) -> None:
    pending: list[str] = []
    caller = -1
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            continue
        if m.get("role") == "tool":
            if caller < 0:
                raise _dashscope('messages with role "tool" must be a response to a preceeding '
                                 'message with "tool_calls".')
            if m.get("tool_call_id") in pending:
                pending.remove(m.get("tool_call_id"))
            continue
        if pending:
            raise _dashscope('An assistant message with "tool_calls" must be followed by tool messages '
                             'responding to each "tool_call_id". The following tool_call_ids did not have '
                             f"response messages: message[{i}].role")
        caller = -1
        if m.get("role") == "assistant" and m.get("tool_calls"):
            pending = [c.get("id") for c in m["tool_calls"] if isinstance(c, dict)]
            caller = i
    if pending:
        raise _dashscope('An assistant message with "tool_calls" must be followed by tool messages '
                         'responding to each "tool_call_id". The following tool_call_ids did not have '
                         f"response messages: message[{len(messages)}].role")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _check(quirk: str, body: dict) -> None:
    """按怪脾气检查请求；服务商会拒绝的，抛出 `Rejected`。"""
    messages = body.get("messages") if isinstance(body.get("messages"), list) else []
    if quirk == "deepseek_balance":
        raise Rejected(402, "Insufficient Balance", type="unknown_error", code="invalid_request_error")
    if quirk == "deepseek_thinking":
        for i, m in enumerate(messages):
            if isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls") \
                    and "reasoning_content" not in m:
                raise Rejected(400, f"Missing `reasoning_content` field in the assistant message at message "
                                    f"index {i}. For more information, please refer to "
                                    "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls",
                               code="invalid_request_error")
    if quirk == "dashscope_tool_rule":
        _check_dashscope_pairs(messages)
    if quirk == "dashscope_inspection":
        if any(isinstance(m, dict) and FLAGGED in _text(m.get("content")) for m in messages):
            raise Rejected(400, "Input data may contain inappropriate content.",
                           type="data_inspection_failed", code="data_inspection_failed")
    if quirk == "dashscope_output_inspection" and not body.get("stream"):
        raise Rejected(400, "Output data may contain inappropriate content.",
                       type="data_inspection_failed", code="data_inspection_failed")
    if quirk == "llamacpp_no_jinja" and body.get("tools"):
        # 原话和状态码照 ramalama#988 / LLMKube#126 里贴出的旧 llama-server 回复
        raise Rejected(500, "tools param requires --jinja flag", type="server_error", code=500)
    if quirk == "llamacpp_content":
        for m in messages:
            if isinstance(m, dict) and m.get("role") == "assistant" and m.get("content") is None:
                raise Rejected(500, "Expected 'content' to be a string or an array", type="server_error",
                               code=500)
    if quirk in ("llamacpp_required", "llamacpp_python") and body.get("tool_choice") == "required":
        raise Rejected(500, "", type="internal_server_error")
    if quirk == "llamacpp_python":
        for m in messages:
            if isinstance(m, dict) and m.get("role") == "assistant" and "content" not in m:
                raise Rejected(500, "'dict object' has no attribute 'content'", type="internal_server_error")


# ---------------------------------------------------------------------------
# 回复改写：先拿到完整的回复，再按怪脾气改，流式的自己切块
# ---------------------------------------------------------------------------


def _rewrite(quirk: str, completion: dict, body: dict) -> dict:
    """按怪脾气改写一条完整回复（字典），返回新的。`body` 是原来的请求体。"""
    choice = completion["choices"][0]
    message = dict(choice["message"])
    if quirk == "llamacpp_python" and message.get("tool_calls") and body.get("tool_choice") is None:
        message.pop("tool_calls")  # 不写 tool_choice：模板里根本没有工具，模型只会说话
        message["content"] = "你可以在终端里运行 ls 看看当前目录。"
        choice = {**choice, "finish_reason": "stop"}
    if quirk == "ollama_no_tools" and message.get("tool_calls"):
        call = message.pop("tool_calls")[0]["function"]
        try:
            arguments = json.loads(call["arguments"])
        except ValueError:
            arguments = call["arguments"]
        message["content"] = json.dumps({"name": call["name"], "arguments": arguments}, ensure_ascii=False)
        choice = {**choice, "finish_reason": "stop"}
    if quirk == "deepseek_thinking":
        message["reasoning_content"] = _REASONING if message.get("tool_calls") else "结果已经有了，简短回答即可。"
        if message.get("content") is None:
            message["content"] = ""  # DeepSeek 在工具调用的回复里给空字符串
    return {**completion, "choices": [{**choice, "message": message}]}


def _pieces(text: str) -> list[str]:
    return [text[i:i + _PIECE] for i in range(0, len(text), _PIECE)]


def _chunks(quirk: str, completion: dict, include_usage: bool) -> list[dict]:
    """把一条完整回复切成流式块。块的排法按怪脾气变。"""
    choice = completion["choices"][0]
    message = choice["message"]
    base = {"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
            "model": completion["model"]}

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    chunks: list[dict] = []
    if quirk == "empty_choices_first":
        # Azure 一类：先来一块只有过滤结果、choices 为空的块
        chunks.append({**base, "choices": [], "prompt_filter_results": [
            {"prompt_index": 0, "content_filter_results": {}}]})
    content = message.get("content")
    chunks.append(chunk({"role": "assistant", "content": "" if content is not None else None}))
    for piece in _pieces(message.get("reasoning_content") or ""):
        chunks.append(chunk({"reasoning_content": piece}))
    pieces = _pieces(content or "")
    for piece in pieces[:2] if quirk == "dashscope_output_inspection" else pieces:
        chunks.append(chunk({"content": piece}))
    if quirk == "dashscope_output_inspection":
        # 输出审核没通过：流里来一个错误事件，之后就结束了（没有 finish_reason，也没有 [DONE]）
        chunks.append({"error": {"code": "data_inspection_failed", "param": None,
                                 "message": "Output data may contain inappropriate content.",
                                 "type": "data_inspection_failed"}})
        return chunks
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        if quirk == "ollama_parallel_index0":
            # Ollama：每个调用一块发完，index 都是 0
            chunks.append(chunk({"tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                                                 "function": dict(function)}]}))
            continue
        chunks.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                             "function": {"name": function["name"], "arguments": ""}}]}))
        for piece in _pieces(function["arguments"]):
            chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    last = chunk({}, choice["finish_reason"])
    usage = completion.get("usage")
    if include_usage and usage is not None and quirk != "llamacpp_python":
        if quirk == "moonshot_usage_in_choice":
            last["choices"][0]["usage"] = usage  # 月之暗面：用量放在 choice 里，没有单独的用量块
            chunks.append(last)
            return chunks
        chunks.append(last)
        chunks.append({**base, "choices": [], "usage": usage})
        return chunks
    chunks.append(last)
    return chunks


class QuirkHandler:
    """处理函数的包装：按一种怪脾气检查请求、改写回复。

    `quirk` 不写时按请求的模型名选（见 `quirk_of`），模型名里没有怪脾气就原样交给里面的处理函数。
    `inner` 默认是默认策略的假模型。`requests` 记着收到的请求体（字典），方便查看发出去的是什么。
    """

    def __init__(self, quirk: str | None = None, inner: Any = None):
        if quirk is not None and quirk not in QUIRKS:
            raise ValueError(f"没有名为 {quirk!r} 的怪脾气，可选：{'、'.join(QUIRKS)}")
        self.quirk = quirk
        self.inner = inner if inner is not None else FakeHandler(FakeModel())
        self.responder = getattr(self.inner, "responder", None)
        self.requests: list[dict] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if request.method != "POST" or route(request) != "/chat/completions":
            return self.inner(request)
        try:
            body = json.loads(request.content)
        except ValueError:
            return self.inner(request)
        if not isinstance(body, dict):
            return self.inner(request)
        self.requests.append(body)
        quirk = self.quirk or quirk_of(body.get("model"))
        if quirk is None:
            return self.inner(request)
        try:
            _check(quirk, body)
        except Rejected as rejected:
            return rejected.response()
        stream = bool(body.get("stream"))
        if quirk == "llamacpp_python" and stream and body.get("tools") and body.get("tool_choice") == "auto":
            return sse_response([], done=False)  # 服务端在生成之前就出错了，流里什么都没有
        options = body.get("stream_options")
        include_usage = stream and isinstance(options, dict) and bool(options.get("include_usage"))
        plain = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        answer = self.inner(with_body(request, plain))
        if answer.status_code != 200:
            return answer
        completion = _rewrite(quirk, json.loads(answer.read()), body)
        if not stream:
            return json_response(200, completion)
        return sse_response(_chunks(quirk, completion, include_usage))

    def __repr__(self) -> str:
        return f"QuirkHandler({self.quirk or '按模型名选'})"


class QuirkClient(FakeClient):
    """离线客户端：默认策略（或脚本）的假模型，带上一种怪脾气。

    `QuirkClient("ollama_parallel_index0")` 的每个请求都按 Ollama 的样子回答；
    `requests` 是它收到的请求体列表（最近的在最后）。和 `FakeClient` 一样，SDK 的自动重试关掉。
    """

    def __init__(self, quirk: str | None = None, script: Iterable[Any] | None = None, **options: Any):
        if not isinstance(options.get("http_client"), OfflineHTTP) and quirk not in QUIRKS:
            raise ValueError(f"没有名为 {quirk!r} 的怪脾气，可选：{'、'.join(QUIRKS)}")
        self._quirk = quirk
        super().__init__(script, **options)

    def _make_handler(self):
        return QuirkHandler(self._quirk, FakeHandler(self))

    @property
    def quirk(self) -> str | None:
        return self.handler.quirk

    @property
    def requests(self) -> list[dict]:
        """收到的请求体（字典），按顺序。"""
        return self.handler.requests

    def __repr__(self) -> str:
        return f"QuirkClient({self.quirk!r}：{QUIRKS[self.quirk].provider})"


def start_quirk_server(quirk: str | None = None, *, host: str = "127.0.0.1", port: int = 0) -> LocalServer:
    """在本机端口上提供带怪脾气的假模型。`quirk` 不写时按模型名选：

        with start_quirk_server() as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="x")
            client.chat.completions.create(model="ollama_parallel_index0", ...)
    """
    return serve(QuirkHandler(quirk, FakeHandler(FakeModel())), host, port, fake=True)


# ---------------------------------------------------------------------------
# 朴素写法：网上教程里常见的样子，用来看它们在哪一步坏掉
# ---------------------------------------------------------------------------


def naive_loop(client, model: str, prompt: str, tools: list, *, max_turns: int = 4) -> list[dict]:
    """常见的朴素循环：自己拼助手消息（只抄 content 和 tool_calls），只执行第一个调用。

    工具并不真的执行，tool 消息里写“（演示）”。返回 messages；出错时异常原样抛出。
    """
    messages: list[dict] = [{"role": "user", "content": prompt}]
    for _ in range(max_turns):
        reply = client.chat.completions.create(model=model, messages=messages, tools=tools)
        message = reply.choices[0].message
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
    """常见的朴素流式读法：认得 OpenAI 最后那个用量块，其余的块直接取 `chunk.choices[0]`，按 `index` 拼参数。

    返回 `{"tool_calls": {index: {...}}, "content": ..., "usage": ...}`；出错时异常原样抛出。
    """
    stream = client.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}],
                                            tools=tools, stream=True, stream_options={"include_usage": True})
    calls: dict[int, dict] = {}
    content = ""
    usage = None
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
