"""密钥的处理：`command_env` 是交给命令的、去掉了秘密和设置的环境；`redact` 从文字里抹掉密钥；
`learner_environment` 是刚打开笔记本的学习者看到的环境（测试、网站、批改都从它起步）。

录制器、错误说明、切换器和执行器都用这一个 `redact`。这里只读环境变量，从不修改它们。
"""

import os
import re
from collections.abc import Mapping

NO_KEY = "not-needed"  # 不校验密钥的本地服务也要求请求里带一个值，就用这个占位

MIN_KEY_FRAGMENT = 6  # 明确给出的密钥：任何 6 个字符以上的片段都抹掉
MIN_ENV_FRAGMENT = 8  # 环境里的秘密值：任何 8 个字符以上的片段都抹掉；更短的值不当作秘密

# 变量名里出现这些词，就当它装着凭据（名字先转成大写再比较）
_SECRET_NAME = re.compile(r"(^|_)(API_?KEYS?|KEYS?|TOKENS?|PASSWD|PASSPHRASE|CREDENTIALS?|AUTH)(_|$)"
                          r"|SECRET|PASSWORD|APIKEY")
# 名字像凭据、值却只是一个位置（文件、目录、地址）的变量：照样不交给命令，但不把值当秘密打码
_LOCATION_NAME = re.compile(r"_(PATH|FILE|DIR|HOME|URL|ENDPOINT|HOST|REGION|SOCK|SOCKET)$")
SETTING_PREFIXES = ("HARNESS_", "OPENAI_")  # 选模型、选策略的环境变量：本项目的和 openai SDK 的设置
# 整组交给命令前去掉的前缀：上面的设置，以及云服务、各家模型服务的凭据与配置
_HIDDEN_PREFIXES = (*SETTING_PREFIXES, "AWS_", "AZURE_", "ARM_CLIENT", "GOOGLE_APPLICATION_CREDENTIALS",
                    "GOOGLE_CLOUD_", "GCLOUD_", "CLOUDSDK_", "ALIBABA_CLOUD_", "ALICLOUD_", "TENCENTCLOUD_",
                    "HF_", "HUGGING_FACE_", "HUGGINGFACE_", "DASHSCOPE_", "DEEPSEEK_", "ANTHROPIC_",
                    "MOONSHOT_", "ZHIPU", "SILICONFLOW_", "GITHUB_TOKEN", "GH_", "GITLAB_",
                    "NPM_CONFIG__AUTH", "PYPI_", "TWINE_", "DOCKER_AUTH", "KUBECONFIG", "VAULT_")
_URL_WITH_PASSWORD = re.compile(r"://[^/@\s:]+:[^/@\s]+@")
_KEYLIKE = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}|(?i:bearer)\s+[A-Za-z0-9_\-.]{8,}")
# 服务器在报错里回显的密钥：头几位、一串星号、末几位（“demo-key************Rt5Wp8”），不知道是哪把钥匙也认得出
_ECHOED = re.compile(r"[^\s*'\"]{2,}\*{4,}[^\s*'\".,;]{2,}")


def hidden_from_commands(name: str, value: str = "") -> bool:
    """这个变量要不要从交给命令的环境里去掉：像凭据的、整组去掉的，以及带密码的地址。"""
    upper = str(name).upper()
    return (bool(_SECRET_NAME.search(upper)) or upper.startswith(_HIDDEN_PREFIXES)
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
        if _SECRET_NAME.search(upper) and not _LOCATION_NAME.search(upper):
            if len(value.strip()) >= MIN_ENV_FRAGMENT and value != NO_KEY:
                found.add(value.strip())
        for match in re.finditer(r"://[^/@\s:]+:([^/@\s]+)@", value):
            if len(match.group(1)) >= MIN_ENV_FRAGMENT:
                found.add(match.group(1))
    return sorted(found, key=len, reverse=True)


def _mark(text: str, mask: bytearray, secret: str, size: int) -> None:
    """在 `mask` 里标出 `secret` 的每个 `size` 字符片段在 `text` 里出现的位置（更长的片段是它们的并集）。"""
    for gram in {secret[i:i + size] for i in range(max(len(secret) - size, 0) + 1)}:
        start = text.find(gram)
        while start != -1:
            mask[start:start + len(gram)] = b"\x01" * len(gram)
            start = text.find(gram, start + 1)


def redact(text, key=None, *, environ: Mapping[str, str] | None = None, mask: str = "***") -> str:
    """从 `text` 里抹掉密钥，换成 `mask`。

    抹掉 `key`（一把或几把，至少 8 个字符）的任何 6 字符片段，环境里秘密值的任何 8 字符片段
    （服务商常在报错里回显密钥的一部分），形如 `sk-…`、`Bearer …` 的长串，以及服务器回显的“头几位****末几位”。
    """
    text = "" if text is None else str(text)
    if not text:
        return text
    keys = [key] if isinstance(key, str) else [k for k in (key or []) if isinstance(k, str)]
    marks = bytearray(len(text))
    for k in keys:
        # 太短的“密钥”（"x"、"EMPTY" 这类本地服务的占位值）不是秘密：抹掉它们只会把正文抹花
        if k and k != NO_KEY and len(k) >= MIN_ENV_FRAGMENT:
            _mark(text, marks, k, MIN_KEY_FRAGMENT)
    for secret in env_secrets(environ):
        _mark(text, marks, secret, MIN_ENV_FRAGMENT)
    pieces, end = [], 0
    for run in re.finditer(rb"\x01+", bytes(marks)):  # 连成一片的标记换成一个 mask
        pieces += [text[end:run.start()], mask]
        end = run.end()
    text = "".join(pieces) + text[end:]
    return _ECHOED.sub(mask, _KEYLIKE.sub(mask, text))


def learner_environment(environ=None) -> dict:
    """`environ`（默认 `os.environ`）去掉所有 `HARNESS_*`、`OPENAI_*` 之后的副本：刚打开笔记本的学习者看到的环境。"""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items() if not k.upper().startswith(SETTING_PREFIXES)}
