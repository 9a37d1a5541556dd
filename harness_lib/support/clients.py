"""建客户端：服务商预设、按环境变量选模型、真实端点客户端的统一设置。

辅助工具，不是课程内容。模型切换器（`harness_lib.support.switch`）的控件用这里的函数建客户端，
无头运行（nbclient、CI）直接用 `client_from_env()`：

- `PRESETS`：服务商预设（下拉框里的名字、base_url、默认模型名、是否需要密钥）；
- `client_from_env()`：只看环境变量选模型，`HARNESS_MODE` 为 `fake`（默认）、`real` 或 `local`；
- `real_client(base_url, api_key)`：真实端点的 `openai.OpenAI`，重试次数和超时取 `RETRY_POLICY`；
- `fake_client()`：离线假模型，模型名是 `FAKE_MODEL`（即 `harness_lib.support.fake.DEFAULT_MODEL`）；
- `needs_key(base_url)`：这个地址要不要密钥（本机服务不要）；
- `learner_environment()`：去掉 `HARNESS_*`、`OPENAI_*` 之后的环境变量，也就是一个刚打开笔记本、
  什么都没设置的学习者看到的环境（默认假模型）。测试、性能测量和自动评分启动内核时用它。

要不要审批由提出调用的客户端自己决定（见 `approval.trusted`），交出客户端时这里不记任何状态。
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import openai

from .endpoint import ensure_local_server
from .errors import RETRY_POLICY, SwitchConfigError
from .fake import DEFAULT_MODEL as FAKE_MODEL
from .fake import FakeClient
from .net import is_loopback
from .secrets import NO_KEY

__all__ = [
    "DEFAULT_OPENAI_BASE_URL",
    "FAKE_MODEL",
    "PRESETS",
    "PRESETS_BY_KEY",
    "Preset",
    "SwitchConfigError",
    "client_from_env",
    "fake_client",
    "learner_environment",
    "needs_key",
    "real_client",
]

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"  # SDK 在没有设置 OPENAI_BASE_URL 时用的地址
SETTING_PREFIXES = ("HARNESS_", "OPENAI_")  # 选模型、选策略的环境变量都以它们开头


def learner_environment(environ=None) -> dict:
    """`environ`（默认 `os.environ`）去掉所有 `HARNESS_*`、`OPENAI_*` 之后的副本。"""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items() if not k.upper().startswith(SETTING_PREFIXES)}


@dataclass(frozen=True)
class Preset:
    """一个服务商预设：下拉框里的名字、base_url、默认模型名、是否需要密钥。"""

    key: str
    label: str
    base_url: str
    model: str
    needs_key: bool = True
    model_hint: str = ""


PRESETS = [
    Preset("dashscope", "阿里云百炼 DashScope", "https://dashscope.aliyuncs.com/compatible-mode/v1", "qwen-plus"),
    Preset("deepseek", "DeepSeek", "https://api.deepseek.com/v1", "deepseek-chat"),
    Preset("openai", "OpenAI", DEFAULT_OPENAI_BASE_URL, "gpt-4o-mini"),
    Preset("moonshot", "Moonshot 月之暗面", "https://api.moonshot.cn/v1", "moonshot-v1-8k"),
    Preset("zhipu", "智谱 GLM", "https://open.bigmodel.cn/api/paas/v4/", "glm-4-flash"),
    Preset("siliconflow", "硅基流动 SiliconFlow", "https://api.siliconflow.cn/v1", "Qwen/Qwen2.5-7B-Instruct"),
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


def real_client(base_url: str, api_key: str) -> openai.OpenAI:
    """真实端点的客户端：`openai.OpenAI`，重试次数和超时取 `RETRY_POLICY`。"""
    return openai.OpenAI(api_key=api_key, base_url=base_url, **RETRY_POLICY)


def fake_client() -> FakeClient:
    """离线假模型，模型名是 `FAKE_MODEL`。"""
    return FakeClient(model=FAKE_MODEL)


def client_from_env(environ=os.environ):
    """只看环境变量选模型，返回 `(client, model)`。无头运行（nbclient、CI）和切换器启动时都用它。

    - `HARNESS_MODE=fake`（默认）：离线假模型 `FakeClient`；
    - `HARNESS_MODE=real`：`openai.OpenAI`，密钥取 `OPENAI_API_KEY`，地址取 `OPENAI_BASE_URL`
      （不设则用 SDK 的默认地址），模型名取 `HARNESS_MODEL`（必填）；
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
                "例如 HARNESS_MODEL=qwen-plus。"
            )
        key = (environ.get("OPENAI_API_KEY") or "").strip()
        if not key:
            if needs_key(base_url):
                raise SwitchConfigError(
                    f"HARNESS_MODE=real 需要密钥：请在启动 JupyterLab 之前设置环境变量 OPENAI_API_KEY"
                    f"（当前 base_url 是 {base_url}）。"
                )
            key = NO_KEY
        return real_client(base_url, key), model
    raise SwitchConfigError(f"HARNESS_MODE 只能是 fake、real 或 local，现在是 {mode!r}。")
