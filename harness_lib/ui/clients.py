"""建客户端：服务商预设、按环境变量选模型、真实端点客户端的统一设置。

辅助工具，不是课程内容。模型切换器（`harness_lib.ui.switch`）的控件用这里的函数建客户端，
无头运行（nbclient、CI）直接用 `client_from_env()`：

- `PRESETS`：服务商预设（下拉框里的名字、base_url、默认模型名、是否需要密钥），每个模型名都写着出处和
  核对日期（`source`、`checked`），会停用的写着停用日期（`retires`）；
- `preset_for(base_url)`：这个地址属于哪个预设（按主机名认，认不出是 None）；
- `client_from_env()`：只看环境变量选模型，`HARNESS_MODE` 为 `fake`（默认）、`real` 或 `local`；
- `real_client(base_url, api_key, extra_body=None)`：真实端点的 `openai.OpenAI`，重试次数和超时取
  `RETRY_POLICY`；给了 `extra_body` 时是 `PresetClient`，每次 `chat.completions.create` 都带上这几个字段
  （预设用它关掉默认开着的思考模式，见 `Preset.extra_body`）；
- `fake_client()`：离线假模型，模型名是 `FAKE_MODEL`（即 `harness_lib.models.fake.DEFAULT_MODEL`）；
- `needs_key(base_url)`：这个地址要不要密钥（本机服务不要）；
- `learner_environment()`：去掉 `HARNESS_*`、`OPENAI_*` 之后的环境变量，也就是一个刚打开笔记本、
  什么都没设置的学习者看到的环境（默认假模型）。测试、性能测量和自动评分启动内核时用它。

要不要审批由提出调用的客户端自己决定（见 `approval.trusted`），交出客户端时这里不记任何状态。
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import date
from urllib.parse import urlsplit

import openai

from ..models.server import ensure_local_server
from ..models.errors import RETRY_POLICY, SwitchConfigError
from ..models.fake import DEFAULT_MODEL as FAKE_MODEL
from ..models.fake import FakeClient
from ..models.net import is_loopback
from ..safety.secrets import NO_KEY

__all__ = [
    "DEFAULT_OPENAI_BASE_URL",
    "FAKE_MODEL",
    "PRESETS",
    "PRESETS_BY_KEY",
    "PRESETS_CHECKED",
    "Preset",
    "PresetClient",
    "SwitchConfigError",
    "client_from_env",
    "fake_client",
    "learner_environment",
    "needs_key",
    "preset_for",
    "real_client",
]

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"  # SDK 在没有设置 OPENAI_BASE_URL 时用的地址
SETTING_PREFIXES = ("HARNESS_", "OPENAI_")  # 选模型、选策略的环境变量都以它们开头


def learner_environment(environ=None) -> dict:
    """`environ`（默认 `os.environ`）去掉所有 `HARNESS_*`、`OPENAI_*` 之后的副本。"""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items() if not k.upper().startswith(SETTING_PREFIXES)}


PRESETS_CHECKED = "2026-12-01"
"""下面每个模型名和服务商说法的核对日期。服务商会改名、下线模型：过了这个日期，先点切换器的「测试连接」。"""


@dataclass(frozen=True)
class Preset:
    """一个服务商预设：下拉框里的名字、base_url、默认模型名、是否需要密钥，以及这些事实的出处。

    - `source`：模型名（和 base_url）的出处，服务商自己的文档优先；`checked`：哪天核对的；
    - `retires`：服务商公布的停用日期（`YYYY-MM-DD`），没有公布就是空的；
    - `extra_body`：每次请求都带上的字段，用来关掉默认开着的思考模式（见 `thinking`）；
    - `thinking`：这个模型的思考模式默认开还是关、预设怎样处理，一句话。
    """

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

    def retired_on(self, today: date | None = None) -> bool:
        """到 `today`（默认今天）为止，服务商公布的停用日期是不是已经过了。"""
        return bool(self.retires) and (today or date.today()).isoformat() >= self.retires

    def facts(self) -> str:
        """一行中文：模型名的出处、核对日期、停用日期、思考模式的处理。切换器的状态行显示它。"""
        if not self.source:
            return ""
        parts = [f"模型名 {self.model} 出自 {self.source}（核对于 {self.checked}）"]
        if self.retires:
            parts.append(f"服务商公布 {self.retires} 停用这个名字")
        if self.thinking:
            parts.append(self.thinking)
        return "；".join(parts) + "。"


PRESETS = [
    # 阿里云百炼：qwen-plus 仍是文档示例里的模型名；Qwen3 的商业版 qwen-plus 是“混合思考、默认不开”，
    # 开源版 Qwen3 默认开着，非流式调用开着思考会回 400 “parameter.enable_thinking must be set to false
    # for non-streaming calls”。预设照文档的开关传 enable_thinking=False，换成别的 Qwen 名字也不会撞上这条 400。
    # 出处：https://help.aliyun.com/zh/model-studio/qwq（支持的模型：qwen-plus 默认不开启思考模式）、
    # https://www.alibabacloud.com/help/zh/model-studio/deep-thinking（2026-06-18 更新，示例仍用 qwen-plus）、
    # https://www.alibabacloud.com/help/en/model-studio/error-code（400 InvalidParameter 那一条）。核对日期 2026-12-01。
    # 未能确认：只能思考的模型（QwQ 一类）收到 enable_thinking=False 会怎样，文档没写。
    Preset("dashscope", "阿里云百炼 DashScope", "https://dashscope.aliyuncs.com/compatible-mode/v1", "qwen-plus",
           source="https://help.aliyun.com/zh/model-studio/qwq", checked=PRESETS_CHECKED,
           extra_body={"enable_thinking": False},
           thinking="qwen-plus 默认不思考；预设照文档每次传 enable_thinking=False，开源版 Qwen3 也不会因思考模式回 400"),
    # DeepSeek：deepseek-chat、deepseek-reasoner 两个名字 2026-07-24 15:59 UTC 起不能再用
    # （https://api-docs.deepseek.com/news/news260424，经 https://github.com/Open-Less/openless/issues/132 转引）。
    # 模型与价格页现在写“模型名请使用 deepseek-flash”，旧名 deepseek-v4-flash 仍可调用、由 DeepSeek-V4.1-Flash 作答；
    # 另一个名字是 deepseek-v4-pro。BASE URL（OpenAI 格式）写的是 https://api.deepseek.com（不带 /v1）。
    # 出处：https://api-docs.deepseek.com/zh-cn/quick_start/pricing 。核对日期 2026-12-01。
    # 思考模式默认打开，开关是 {"thinking": {"type": "enabled/disabled"}}，用 OpenAI SDK 时放进 extra_body：
    # https://api-docs.deepseek.com/guides/thinking_mode 。思维链算在 max_tokens 里（deepseek-reasoner 的文档写明
    # “含思维链输出”：https://api-docs.deepseek.com/zh-cn/guides/reasoning_model ；V4 的页面没有逐字确认），
    # 系列里每次调用只给 MAX_TOKENS=512，思考会把它用光，所以预设关掉思考。
    Preset("deepseek", "DeepSeek", "https://api.deepseek.com", "deepseek-flash",
           source="https://api-docs.deepseek.com/zh-cn/quick_start/pricing", checked=PRESETS_CHECKED,
           extra_body={"thinking": {"type": "disabled"}},
           thinking="DeepSeek 默认开着思考模式，思维链也算在 max_tokens 里；预设每次传 thinking={\"type\": \"disabled\"} 关掉它"),
    # OpenAI：gpt-4o-mini 已列入弃用，API 在 2027-01-14 停用（第三方按 OpenAI 弃用页整理，2026-10-15、2026-10-28：
    # https://dev.to/max_bob/openai-api-deprecations-2026-2027-every-shutdown-date-and-recommended-replacement-gpt-4o-2ffm ）。
    # 弃用页本身（https://developers.openai.com/api/docs/deprecations）检索到的片段里没有这一行，未能逐字确认；
    # 第三方说的替代模型默认就思考，这里没有换过去。停用以后「测试连接」会列出这把密钥能用的模型。核对日期 2026-12-01。
    Preset("openai", "OpenAI", DEFAULT_OPENAI_BASE_URL, "gpt-4o-mini",
           source="https://developers.openai.com/api/docs/deprecations", checked=PRESETS_CHECKED,
           retires="2027-01-14"),
    # 月之暗面：moonshot-v1-8k 仍在现行模型里（kimi-k2.6、kimi-k2.5、moonshot-v1-8k/32k/128k），
    # 出处：https://github.com/mnfst/modelparams.dev/pull/22（2026-05-23，依据 https://platform.kimi.ai/docs/api/chat）。
    # 官方文档页本身没有检索到，未能直接确认。moonshot-v1 系列不思考。核对日期 2026-12-01。
    Preset("moonshot", "Moonshot 月之暗面", "https://api.moonshot.cn/v1", "moonshot-v1-8k",
           source="https://platform.kimi.ai/docs/api/chat", checked=PRESETS_CHECKED),
    # 智谱：免费语言模型的模型编码是 glm-4-flash-250414（GLM-4 系列，不思考）。
    # 出处：https://docs.bigmodel.cn/cn/guide/models/free/glm-4-flash-250414 。核对日期 2026-12-01。
    # 旧写法 glm-4-flash 现在还认不认，文档里没有找到，未能确认。
    Preset("zhipu", "智谱 GLM", "https://open.bigmodel.cn/api/paas/v4/", "glm-4-flash-250414",
           source="https://docs.bigmodel.cn/cn/guide/models/free/glm-4-flash-250414", checked=PRESETS_CHECKED),
    # 硅基流动：Qwen/Qwen2.5-7B-Instruct 在免费模型列表里（第三方调研 2026-02-08：
    # https://huasheng.ai/insights/siliconflow-api-guide ；官方模型页 https://www.siliconflow.cn/models 没有检索到，
    # 未能直接确认）。Qwen2.5 不思考。核对日期 2026-12-01。
    Preset("siliconflow", "硅基流动 SiliconFlow", "https://api.siliconflow.cn/v1", "Qwen/Qwen2.5-7B-Instruct",
           source="https://www.siliconflow.cn/models", checked=PRESETS_CHECKED),
    Preset("ollama", "本地 Ollama", "http://localhost:11434/v1", "qwen2.5:7b", needs_key=False),
    Preset("vllm", "本地 vLLM", "http://localhost:8000/v1", "", needs_key=False,
           model_hint="填 vLLM 启动时加载的模型名"),
    Preset("llamacpp", "本地 llama.cpp", "http://localhost:8080/v1", "", needs_key=False,
           model_hint="llama-server 加载的模型名（随便填也行）"),
    Preset("local", "本项目的本地端点", "", FAKE_MODEL, needs_key=False),
    Preset("custom", "自定义", "", "", needs_key=True, model_hint="填写服务商给的模型名"),
]
PRESETS_BY_KEY = {p.key: p for p in PRESETS}


def needs_key(base_url: str) -> bool:
    """这个地址要不要 API 密钥：本机上的服务（Ollama、vLLM、llama.cpp……）通常不要。"""
    return not is_loopback(base_url)


def preset_for(base_url: str) -> Preset | None:
    """`base_url` 属于哪个云服务商预设：按主机名认（`https://api.deepseek.com/v1` 也算 DeepSeek）；认不出是 None。"""
    host = (urlsplit((base_url or "").strip()).hostname or "").lower()
    if not host:
        return None
    return next((p for p in PRESETS if p.base_url and p.needs_key
                 and (urlsplit(p.base_url).hostname or "").lower() == host), None)


class PresetClient(openai.OpenAI):
    """一个 `openai.OpenAI`，每次 `chat.completions.create` 都带上预设的几个字段（`preset_body`）。

    和在每次调用里写 `extra_body=...` 效果一样：字段并进请求体，调用里自己写了同名字段时以调用为准。
    预设用它关掉默认开着的思考模式（`Preset.extra_body`）。`with_options(...)` 得到的副本照样带着。
    """

    def __init__(self, *args, preset_body: dict | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.preset_body = dict(preset_body or {})

    def copy(self, *args, **kwargs):
        clone = super().copy(*args, **kwargs)
        clone.preset_body = dict(self.preset_body)
        return clone

    with_options = copy

    def _prepare_options(self, options):
        options = super()._prepare_options(options)
        body = options.json_data
        if (self.preset_body and options.method.lower() == "post" and options.url.endswith("/chat/completions")
                and isinstance(body, dict)):
            extra = dict(options.extra_json or {})
            for key, value in self.preset_body.items():
                if key not in body and key not in extra:
                    extra[key] = value
            options.extra_json = extra
        return options

    def __repr__(self) -> str:
        return f"PresetClient(base_url={str(self.base_url)!r}, 每次请求带上 {self.preset_body})"


def real_client(base_url: str, api_key: str, extra_body: dict | None = None) -> openai.OpenAI:
    """真实端点的客户端：`openai.OpenAI`，重试次数和超时取 `RETRY_POLICY`。

    给了 `extra_body` 时返回 `PresetClient`：每次 `chat.completions.create` 都带上这几个字段。
    """
    if extra_body:
        return PresetClient(api_key=api_key, base_url=base_url, preset_body=extra_body, **RETRY_POLICY)
    return openai.OpenAI(api_key=api_key, base_url=base_url, **RETRY_POLICY)


def fake_client() -> FakeClient:
    """离线假模型，模型名是 `FAKE_MODEL`。"""
    return FakeClient(model=FAKE_MODEL)


def client_from_env(environ=os.environ):
    """只看环境变量选模型，返回 `(client, model)`。无头运行（nbclient、CI）和切换器启动时都用它。

    - `HARNESS_MODE=fake`（默认）：离线假模型 `FakeClient`；
    - `HARNESS_MODE=real`：`openai.OpenAI`，密钥取 `OPENAI_API_KEY`，地址取 `OPENAI_BASE_URL`
      （不设则用 SDK 的默认地址），模型名取 `HARNESS_MODEL`（必填）；地址属于某个预设（`preset_for`）、
      预设有 `extra_body` 时（关掉思考模式），客户端每次请求都带上它；
    - `HARNESS_MODE=local`：本项目的本地端点（按需启动），模型名默认 `fake-agent-1`。

    设置不完整时抛出 `SwitchConfigError`，消息说明缺什么、在哪里设。
    """
    mode = (environ.get("HARNESS_MODE") or "fake").strip().lower()
    if mode == "fake":
        return fake_client(), FAKE_MODEL
    if mode == "local":
        model = environ.get("HARNESS_MODEL") or FAKE_MODEL
        return real_client(ensure_local_server(), NO_KEY), model
    if mode == "real":
        base_url = (environ.get("OPENAI_BASE_URL") or "").strip() or DEFAULT_OPENAI_BASE_URL
        model = (environ.get("HARNESS_MODEL") or "").strip()
        if not model:
            raise SwitchConfigError(
                "HARNESS_MODE=real 时必须用环境变量 HARNESS_MODEL 指定模型名，"
                "例如 HARNESS_MODEL=qwen-plus（阿里云百炼）或 HARNESS_MODEL=deepseek-flash（DeepSeek）。"
            )
        key = (environ.get("OPENAI_API_KEY") or "").strip()
        if not key:
            if needs_key(base_url):
                raise SwitchConfigError(
                    f"HARNESS_MODE=real 需要密钥：请在启动 JupyterLab 之前设置环境变量 OPENAI_API_KEY"
                    f"（当前 base_url 是 {base_url}）。"
                )
            key = NO_KEY
        preset = preset_for(base_url)
        return real_client(base_url, key, preset.extra_body if preset else None), model
    raise SwitchConfigError(f"HARNESS_MODE 只能是 fake、real 或 local，现在是 {mode!r}。")
