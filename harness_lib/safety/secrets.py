"""密钥的处理：哪些环境变量算秘密、交给命令的环境里去掉什么、怎样从文字里抹掉密钥。

- `is_secret_name(name)`：变量名像不像装着凭据（`*_API_KEY`、`*_TOKEN`、`*SECRET*`、`*PASSWORD*`……）。
- `hidden_from_commands(name)`：这个变量要不要从命令的环境里去掉。除了像凭据的变量，还有云服务的整组变量
  （`AWS_*`、`AZURE_*`、`GOOGLE_APPLICATION_CREDENTIALS`……）、本项目自己的 `HARNESS_*`，
  以及 openai SDK 的 `OPENAI_*`；值里带着 `用户名:密码@` 的地址也去掉。
- `command_env(environ=None)`：交给命令的环境，上面这些变量都已去掉。执行器 `run_bash` 用它。
- `env_secrets(environ=None)`：环境里的秘密值（像凭据的变量里、至少 8 个字符的值）。
- `redact(text, key=None)`：从文字里抹掉密钥。录制器、错误说明、切换器和执行器都用这一个函数。
- `NO_KEY`：不校验密钥时用的占位值；它不是秘密，不打码。

这里只读环境变量，从不修改它们。
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

__all__ = [
    "MIN_ENV_FRAGMENT",
    "MIN_KEY_FRAGMENT",
    "NO_KEY",
    "command_env",
    "env_secrets",
    "hidden_from_commands",
    "is_secret_name",
    "redact",
]

NO_KEY = "not-needed"  # 不校验密钥的本地服务也要求请求里带一个值，就用这个占位

MIN_KEY_FRAGMENT = 6  # 明确给出的密钥：任何 6 个字符以上的片段都抹掉
MIN_ENV_FRAGMENT = 8  # 环境里的秘密值：任何 8 个字符以上的片段都抹掉；更短的值不当作秘密

# 变量名里出现这些词，就当它装着凭据（名字先转成大写再比较）
_SECRET_NAME = re.compile(
    r"(^|_)(API_?KEYS?|KEYS?|TOKENS?|PASSWD|PASSPHRASE|CREDENTIALS?|AUTH)(_|$)|SECRET|PASSWORD|APIKEY"
)
# 名字像凭据、值却只是一个位置（文件、目录、地址）的变量：照样不交给命令，但不把值当秘密打码
_LOCATION_NAME = re.compile(r"_(PATH|FILE|DIR|HOME|URL|ENDPOINT|HOST|REGION|SOCK|SOCKET)$")
# 整组交给命令前去掉的前缀：云服务的凭据与配置、本项目自己的设置、openai SDK 的设置
_HIDDEN_PREFIXES = (
    "HARNESS_", "OPENAI_", "AWS_", "AZURE_", "ARM_CLIENT", "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_CLOUD_", "GCLOUD_", "CLOUDSDK_", "ALIBABA_CLOUD_", "ALICLOUD_", "TENCENTCLOUD_",
    "HF_", "HUGGING_FACE_", "HUGGINGFACE_", "DASHSCOPE_", "DEEPSEEK_", "ANTHROPIC_", "MOONSHOT_",
    "ZHIPU", "SILICONFLOW_", "GITHUB_TOKEN", "GH_", "GITLAB_", "NPM_CONFIG__AUTH", "PYPI_", "TWINE_",
    "DOCKER_AUTH", "KUBECONFIG", "VAULT_",
)
_URL_WITH_PASSWORD = re.compile(r"://[^/@\s:]+:[^/@\s]+@")
_KEYLIKE = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}|(?i:bearer)\s+[A-Za-z0-9_\-.]{8,}")


def is_secret_name(name: str) -> bool:
    """变量名像不像装着凭据：`*_API_KEY`、`*_TOKEN`、`*SECRET*`、`*PASSWORD*`、`*_KEY` 等。"""
    return bool(_SECRET_NAME.search(str(name).upper()))


def hidden_from_commands(name: str, value: str = "") -> bool:
    """这个变量要不要从交给命令的环境里去掉：像凭据的、云服务的、本项目和 openai SDK 的，以及带密码的地址。"""
    upper = str(name).upper()
    return (is_secret_name(upper) or upper.startswith(_HIDDEN_PREFIXES)
            or bool(_URL_WITH_PASSWORD.search(str(value))))


def command_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """交给命令的环境：`environ`（默认是当前进程的环境）去掉 `hidden_from_commands` 的变量之后的副本。"""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items() if not hidden_from_commands(k, v)}


def env_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """环境里的秘密值：名字像凭据、不是位置、值至少 `MIN_ENV_FRAGMENT` 个字符，以及地址里的密码。"""
    environ = os.environ if environ is None else environ
    found = set()
    for name, value in environ.items():
        value = str(value)
        upper = str(name).upper()
        if is_secret_name(upper) and not _LOCATION_NAME.search(upper):
            if len(value.strip()) >= MIN_ENV_FRAGMENT and value != NO_KEY:
                found.add(value.strip())
        for match in re.finditer(r"://[^/@\s:]+:([^/@\s]+)@", value):
            if len(match.group(1)) >= MIN_ENV_FRAGMENT:
                found.add(match.group(1))
    return sorted(found, key=len, reverse=True)


def _mark(text: str, mask: bytearray, secret: str, size: int) -> None:
    """在 `mask` 里标出 `secret` 在 `text` 里出现的位置：整段，以及它的每个 `size` 字符片段。

    任何不短于 `size` 的片段，都是若干个 `size` 字符片段的并集，所以只找 `size` 字符片段就够了。
    """
    if len(secret) <= size:
        grams = [secret]
    else:
        grams = {secret[i:i + size] for i in range(len(secret) - size + 1)}
    for gram in grams:
        start = text.find(gram)
        while start != -1:
            mask[start:start + len(gram)] = b"\x01" * len(gram)
            start = text.find(gram, start + 1)


def redact(text, key=None, *, environ: Mapping[str, str] | None = None, mask: str = "***") -> str:
    """从 `text` 里抹掉密钥，换成 `mask`（默认 `***`）。

    抹掉三样东西：
    1. `key`（一个字符串、若干字符串，或 None）：整把密钥，以及其中任何连续 6 个字符以上的片段。
       不到 8 个字符的值（本地服务常用的占位值，如 `x`、`EMPTY`）不当作密钥。
       服务商常在报错里回显密钥的开头结尾（如 `sk-abc***xyz`），所以只抹整把密钥不够。
    2. 环境里的秘密值（`env_secrets(environ)`，默认读当前进程的环境）：整个值，以及其中任何连续
       8 个字符以上的片段。所以命令打印出来的、报错里回显的别家密钥也会被抹掉。
    3. 形如 `sk-…`、`Bearer …` 的长串。
    占位值 `NO_KEY` 不是秘密，不抹。
    """
    text = "" if text is None else str(text)
    if not text:
        return text
    keys = [key] if isinstance(key, str) else [k for k in (key or []) if isinstance(k, str)]
    marks = bytearray(len(text))
    for k in keys:
        # 太短的“密钥”（"x"、"EMPTY"、"ollama" 这类本地服务的占位值）不是秘密：抹掉它们只会把正文抹花
        if k and k != NO_KEY and len(k) >= MIN_ENV_FRAGMENT:
            _mark(text, marks, k, MIN_KEY_FRAGMENT)
    for secret in env_secrets(environ):
        _mark(text, marks, secret, MIN_ENV_FRAGMENT)
    if any(marks):
        out, i = [], 0
        while i < len(text):
            if marks[i]:
                while i < len(text) and marks[i]:
                    i += 1
                out.append(mask)
            else:
                out.append(text[i])
                i += 1
        text = "".join(out)
    return _KEYLIKE.sub(mask, text)

