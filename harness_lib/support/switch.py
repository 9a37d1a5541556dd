"""模型切换器：在假模型（离线）和真实端点之间切换，笔记本的其余代码不用改。

这是辅助工具，不是课程内容，所以只放在这里，笔记本直接导入使用：

- `model_switch()`：一组 ipywidgets 控件（模式、服务商预设、base_url、模型名、API 密钥、测试连接）；
  `switch.current()` 返回 `(client, model)`。
- `client_from_env()`：不点按钮、只看环境变量的选择方式（无头运行、CI 用）。
  `HARNESS_MODE` 为 `fake`（默认）、`real` 或 `local`。
- `explain_error(exc)`：把 openai SDK 的异常翻译成一句中文原因和建议，其他模块也复用它。
- `redact(text, key)`：从文字里抹掉密钥以及密钥中任何 6 个字符以上的片段。

每次交出 `(client, model)` 时都告诉 `approval` 现在用的是哪个端点：真实端点提出的命令要先审批，
假模型和本项目的本地端点不用（见 approval.py）。

密钥的去处：只在 Python 对象的私有属性里。环境变量 `OPENAI_API_KEY` 的值不会复制进任何控件；
在密码框里粘贴的密钥会立刻移走，密码框清空，所以单元格输出、保存下来的控件状态和文件里都没有它。
"""

from __future__ import annotations

import html
import os
import re
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from . import approval

__all__ = [
    "DEFAULT_OPENAI_BASE_URL",
    "PRESETS",
    "ModelSwitch",
    "Preset",
    "SwitchConfigError",
    "client_from_env",
    "explain_error",
    "model_switch",
    "redact",
]

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"  # SDK 在没有设置 OPENAI_BASE_URL 时用的地址
FAKE_MODEL = "fake-agent-1"  # 与 harness_lib.fake.DEFAULT_MODEL 相同
NO_KEY = "not-needed"  # 不校验密钥的本地服务也要求请求里带一个值，就用这个占位
KEY_PLACEHOLDER = "粘贴 API 密钥（只留在内存里，不显示也不保存）"
KEY_PLACEHOLDER_SET = "已设置密钥（不会显示或保存）"
PROBE_TIMEOUT = 15  # 测试连接最多等几秒
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


class SwitchConfigError(ValueError):
    """模型设置不完整或写错了（缺模型名、缺密钥、HARNESS_MODE 取值不对……），消息是中文。"""


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
_PRESETS = {p.key: p for p in PRESETS}


# ---------------------------------------------------------------------------
# 密钥打码与错误说明
# ---------------------------------------------------------------------------

_KEYLIKE = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}|(?i:bearer)\s+[A-Za-z0-9_\-.]{8,}")


def redact(text, key) -> str:
    """从 `text` 里抹掉密钥：整把密钥，以及密钥中任何连续 6 个字符以上的片段都换成 `***`。

    `key` 可以是一个字符串、若干字符串组成的列表，或 None。服务商常在报错里回显密钥的
    开头结尾（如 `sk-abc***xyz`），所以只抹整把密钥不够。另外把形如 `sk-…`、`Bearer …`
    的长串也一并抹掉。
    """
    text = "" if text is None else str(text)
    keys = [key] if isinstance(key, str) else [k for k in (key or []) if k]
    mask = bytearray(len(text))
    for k in keys:
        if not k or k == NO_KEY:
            continue
        if len(k) < 6:
            start = text.find(k)
            while start != -1:
                mask[start:start + len(k)] = b"\x01" * len(k)
                start = text.find(k, start + 1)
            continue
        # 任何 ≥6 个字符的片段都是若干 6 字符片段的并集，所以标出所有 6 字符片段即可
        for i in range(len(k) - 5):
            gram = k[i:i + 6]
            start = text.find(gram)
            while start != -1:
                mask[start:start + 6] = b"\x01" * 6
                start = text.find(gram, start + 1)
    if any(mask):
        out, i = [], 0
        while i < len(text):
            if mask[i]:
                while i < len(text) and mask[i]:
                    i += 1
                out.append("***")
            else:
                out.append(text[i])
                i += 1
        text = "".join(out)
    return _KEYLIKE.sub("***", text)


def _first_line(text, limit: int = 200) -> str:
    line = str(text).strip().splitlines()[0] if str(text).strip() else ""
    return line if len(line) <= limit else line[:limit] + "…"


def _server_words(exc) -> str:
    """服务器返回的原话（第一行）。优先用响应体里的 error.message。"""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        msg = inner.get("message") if isinstance(inner, dict) else None
        if isinstance(msg, str) and msg.strip():
            return _first_line(msg)
    return _first_line(getattr(exc, "message", None) or exc)


def _host_of(exc) -> str:
    request = getattr(exc, "request", None)
    try:
        url = request.url
        return f"{url.scheme}://{url.netloc.decode() if isinstance(url.netloc, bytes) else url.netloc}"
    except Exception:
        return ""


def explain_error(exc, key=None) -> str:
    """把一次失败的请求翻译成一句中文：原因、该怎么办，再附上服务器原话（已打码）。

    认得 openai SDK 的 401、403、404、429、5xx、400、连接失败与超时；其他异常给出类型和第一行。
    `key` 是需要抹掉的密钥（一个或多个），见 `redact`。
    """
    import openai

    words = ""
    if isinstance(exc, openai.APITimeoutError):
        host = _host_of(exc)
        head = (f"无法连接（超时）：{host or '服务器'} 在规定时间内没有回应。"
                "请检查网络或代理，稍后再试；本地服务请确认它已经启动、没有卡住。")
    elif isinstance(exc, openai.APIConnectionError):
        host = _host_of(exc)
        head = (f"无法连接：连不上 {host or '服务器'}。请检查 base_url 是否写对、网络或代理是否正常；"
                "本地服务（Ollama、vLLM、llama.cpp）请先确认它已经启动。")
    elif isinstance(exc, openai.AuthenticationError):
        head = ("密钥不对（HTTP 401）：服务器不接受这个 API 密钥。请确认密钥复制完整、"
                "属于当前这家服务商（和 base_url 对得上），然后重新粘贴。")
        words = _server_words(exc)
    elif isinstance(exc, openai.PermissionDeniedError):
        head = ("没有权限（HTTP 403）：密钥有效，但不能用这个模型或接口。"
                "请到服务商控制台检查模型是否已开通、账户余额和地区限制。")
        words = _server_words(exc)
    elif isinstance(exc, openai.NotFoundError):
        head = ("找不到（HTTP 404）：模型名不存在，或 base_url 的路径不对（通常以 /v1 结尾）。"
                "请核对模型名和 base_url。")
        words = _server_words(exc)
    elif isinstance(exc, openai.RateLimitError):
        head = ("被限流（HTTP 429）：请求太频繁，或者额度已经用完。"
                "稍等一会儿再试，或到服务商控制台查看余额和配额。")
        words = _server_words(exc)
    elif isinstance(exc, openai.InternalServerError) or (
        isinstance(exc, openai.APIStatusError) and exc.status_code >= 500
    ):
        head = f"服务器出错（HTTP {exc.status_code}）：问题出在服务商那边，不是你的代码。稍后再试。"
        words = _server_words(exc)
    elif isinstance(exc, openai.BadRequestError):
        head = "请求被拒绝（HTTP 400）：服务器认为这次请求的内容不合格，原话里通常写明了是哪个字段。"
        words = _server_words(exc)
    elif isinstance(exc, openai.APIStatusError):
        head = f"服务器返回了错误（HTTP {exc.status_code}）。"
        words = _server_words(exc)
    elif isinstance(exc, SwitchConfigError):
        head = str(exc)
    elif isinstance(exc, UnicodeEncodeError):
        head = ("密钥或 base_url 里有非 ASCII 字符，请求头发不出去。常见原因：复制时带上了中文、"
                "全角字符或不可见的空白。请重新粘贴纯英文、数字组成的密钥。")
    else:
        head = f"出错了：{type(exc).__name__}: {_first_line(exc)}"
    text = head + (f" 服务器原话：{words}" if words else "")
    return redact(text, key)


# ---------------------------------------------------------------------------
# 建客户端
# ---------------------------------------------------------------------------


def _is_local(base_url: str) -> bool:
    try:
        return (urlsplit(base_url).hostname or "") in LOCAL_HOSTS
    except ValueError:
        return False


def _real_client(base_url: str, api_key: str):
    import openai

    return openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=2, timeout=60)


def _fake_client():
    from .fake import FakeClient

    return FakeClient(model=FAKE_MODEL)


def _handed_out(client, model):
    """交出 `(client, model)` 之前告诉 approval 现在用的是哪个端点（假模型没有 base_url，记为 None）。"""
    base_url = getattr(client, "base_url", None)
    approval.note_endpoint(None if base_url is None else str(base_url), model)
    return client, model


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
        return _handed_out(_fake_client(), FAKE_MODEL)
    if mode == "local":
        from .endpoint import ensure_local_server

        model = environ.get("HARNESS_MODEL") or FAKE_MODEL
        return _handed_out(_real_client(ensure_local_server(), NO_KEY), model)
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
            if not _is_local(base_url):
                raise SwitchConfigError(
                    f"HARNESS_MODE=real 需要密钥：请在启动 JupyterLab 之前设置环境变量 OPENAI_API_KEY"
                    f"（当前 base_url 是 {base_url}）。"
                )
            key = NO_KEY
        return _handed_out(_real_client(base_url, key), model)
    raise SwitchConfigError(f"HARNESS_MODE 只能是 fake、real 或 local，现在是 {mode!r}。")


# ---------------------------------------------------------------------------
# 切换器控件
# ---------------------------------------------------------------------------

_SECRET_PASSWORD = None


def _secret_password_class():
    """密码框：`value` 不回显给前端（echo_update=False），其余与 ipywidgets.Password 相同。"""
    global _SECRET_PASSWORD
    if _SECRET_PASSWORD is None:
        import ipywidgets as widgets
        from traitlets import Unicode

        class SecretPassword(widgets.Password):
            """收到的值会被切换器立刻移走；前端更新不回显，避免密钥在消息里多走一趟。"""

            value = Unicode(help="密码框的内容").tag(sync=True, echo_update=False)

        _SECRET_PASSWORD = SecretPassword
    return _SECRET_PASSWORD


_COLORS = {"ok": "#1a7f37", "error": "#b42318", "warn": "#9a6700", "info": "#57606a"}


class ModelSwitch:
    """模型切换器：选假模型还是真实端点，`current()` 返回 `(client, model)`。

    在笔记本里把它放在格子最后一行就会显示控件。初始状态跟 `client_from_env` 看同样的环境变量，
    所以无头运行（没有人点按钮）时默认用假模型。
    """

    def __init__(self, environ=None):
        import ipywidgets as widgets

        self._environ = os.environ if environ is None else environ
        self._typed_key: str | None = None  # 在密码框里粘贴的密钥，只存在这里
        self._cache = None  # (设置签名, client, model)
        self._quiet = False  # 程序自己改控件时，不触发“选了预设就切到真实端点”
        self._status_text = ""

        label_style = {"description_width": "72px"}
        wide = widgets.Layout(width="560px")
        self.mode_buttons = widgets.ToggleButtons(
            options=[("假模型（离线）", "fake"), ("真实端点", "real")],
            value="fake",
            description="模型",
            style=label_style,
        )
        self.preset_dropdown = widgets.Dropdown(
            options=[(p.label, p.key) for p in PRESETS],
            value=PRESETS[0].key,
            description="服务商",
            style=label_style,
            layout=widgets.Layout(width="360px"),
        )
        self.base_url_text = widgets.Text(
            description="base_url", placeholder="https://…/v1", style=label_style, layout=wide,
            continuous_update=False,
        )
        self.model_text = widgets.Text(
            description="模型名", style=label_style, layout=wide, continuous_update=False,
        )
        self.key_password = _secret_password_class()(
            description="API 密钥", placeholder=KEY_PLACEHOLDER, style=label_style, layout=wide,
            continuous_update=False,
        )
        self.test_button = widgets.Button(description="测试连接", icon="plug", button_style="info")
        self.forget_button = widgets.Button(description="清除密钥", icon="eraser")
        self.status_html = widgets.HTML()
        self.widget = widgets.VBox([
            self.mode_buttons,
            self.preset_dropdown,
            self.base_url_text,
            self.model_text,
            self.key_password,
            widgets.HBox([self.test_button, self.forget_button]),
            self.status_html,
        ])

        self._apply_environ()

        self.mode_buttons.observe(self._on_change, names="value")
        self.preset_dropdown.observe(self._on_preset, names="value")
        self.base_url_text.observe(self._on_change, names="value")
        self.model_text.observe(self._on_change, names="value")
        self.key_password.observe(self._on_key, names="value")
        self.test_button.on_click(lambda _button: self.test_connection())
        self.forget_button.on_click(lambda _button: self.forget_key())

    # -- 初始状态 -----------------------------------------------------------

    def _apply_environ(self) -> None:
        env = self._environ
        mode = (env.get("HARNESS_MODE") or "fake").strip().lower()
        self._quiet = True
        try:
            if mode == "local":
                self.mode_buttons.value = "real"
                self._select_preset("local")
            elif mode == "real":
                self.mode_buttons.value = "real"
                base_url = (env.get("OPENAI_BASE_URL") or "").strip() or DEFAULT_OPENAI_BASE_URL
                preset = next(
                    (p for p in PRESETS if p.base_url and p.base_url.rstrip("/") == base_url.rstrip("/")),
                    _PRESETS["custom"],
                )
                self.preset_dropdown.value = preset.key
                self.base_url_text.value = base_url
                self.model_text.value = (env.get("HARNESS_MODEL") or "").strip() or preset.model
            else:
                self.mode_buttons.value = "fake"
                self._select_preset(PRESETS[0].key)
        finally:
            self._quiet = False
        if mode not in ("fake", "real", "local"):
            self._set_status(f"HARNESS_MODE 只能是 fake、real 或 local，现在是 {mode!r}；先用假模型。", "warn")
        else:
            self._refresh_status()

    # -- 控件事件 -----------------------------------------------------------

    def _select_preset(self, key: str) -> None:
        preset = _PRESETS[key]
        old_quiet, self._quiet = self._quiet, True
        try:
            self.preset_dropdown.value = key
            if key == "local":
                from .endpoint import ensure_local_server

                self.base_url_text.value = ensure_local_server()
            elif preset.base_url:
                self.base_url_text.value = preset.base_url
            if key != "custom":
                self.model_text.value = preset.model
            self.model_text.placeholder = preset.model_hint or "模型名"
        finally:
            self._quiet = old_quiet

    def _on_preset(self, change) -> None:
        if self._quiet:
            return
        try:
            self._select_preset(change["new"])
        except Exception as exc:  # 本地端点启动失败等
            self._set_status("❌ " + explain_error(exc, self._known_keys()), "error")
            return
        if change["new"] != "custom":
            self._quiet = True
            try:
                self.mode_buttons.value = "real"
            finally:
                self._quiet = False
        self._refresh_status()

    def _on_change(self, _change) -> None:
        if not self._quiet:
            self._refresh_status()

    def _on_key(self, change) -> None:
        new = change["new"]
        if not new:
            return
        # 立刻把密钥移进私有属性，再清空密码框：控件状态里从此没有它
        self._typed_key = new.strip() or None
        self.key_password.value = ""
        self.key_password.placeholder = KEY_PLACEHOLDER_SET if self._typed_key else KEY_PLACEHOLDER
        self._refresh_status()

    def forget_key(self) -> None:
        """忘掉粘贴过的密钥（之后若设置了环境变量 OPENAI_API_KEY，就改用它）。"""
        self._typed_key = None
        self.key_password.value = ""
        self.key_password.placeholder = KEY_PLACEHOLDER
        self._refresh_status()

    # -- 当前设置 -----------------------------------------------------------

    @property
    def mode(self) -> str:
        """`"fake"`（假模型）或 `"real"`（真实端点，包括本地服务和本项目的本地端点）。"""
        return self.mode_buttons.value

    @property
    def preset(self) -> Preset:
        """当前选中的服务商预设。"""
        return _PRESETS[self.preset_dropdown.value]

    def _env_key(self) -> str:
        return (self._environ.get("OPENAI_API_KEY") or "").strip()

    def _known_keys(self) -> list[str]:
        return [k for k in (self._typed_key, self._env_key()) if k]

    def _needs_key(self, base_url: str) -> bool:
        preset = self.preset
        if preset.key == "custom":
            return not _is_local(base_url)
        return preset.needs_key

    def _key_source(self) -> str:
        if self._typed_key:
            return "已在上面粘贴"
        if not self._needs_key(self.base_url_text.value.strip()):
            return "不需要"
        if self._env_key():
            return "来自环境变量 OPENAI_API_KEY"
        return "⚠ 还没有设置"

    def _real_settings(self) -> tuple[str, str, str]:
        """真实端点的 (base_url, model, key)；缺东西时抛出 SwitchConfigError。"""
        if self.preset.key == "local":
            from .endpoint import ensure_local_server

            url = ensure_local_server()  # 端点若被关掉，会在这里重新启动
            if self.base_url_text.value != url:
                self._quiet = True
                try:
                    self.base_url_text.value = url
                finally:
                    self._quiet = False
        base_url = self.base_url_text.value.strip()
        model = self.model_text.value.strip()
        if not base_url:
            raise SwitchConfigError("base_url 是空的：请选一个服务商预设，或在 base_url 框里填上地址（通常以 /v1 结尾）。")
        if not base_url.startswith(("http://", "https://")):
            raise SwitchConfigError(f"base_url 应当以 http:// 或 https:// 开头，现在是 {base_url!r}。")
        if not model:
            raise SwitchConfigError("模型名是空的：请在「模型名」框里填上服务商给的模型名。")
        env_url = (self._environ.get("OPENAI_BASE_URL") or "").strip().rstrip("/")
        if self._typed_key:
            key = self._typed_key
        elif self._env_key() and env_url and base_url.rstrip("/") == env_url:
            key = self._env_key()  # 环境变量里的密钥本来就是给这个地址的（例如加了 --api-key 的本地服务）
        elif not self._needs_key(base_url):
            key = NO_KEY
        elif self._env_key():
            key = self._env_key()
        else:
            raise SwitchConfigError(
                f"还没有 API 密钥：把 {self.preset.label} 的密钥粘贴到「API 密钥」框里"
                "（只留在内存里，不显示也不保存），或者在启动 JupyterLab 之前设置环境变量 OPENAI_API_KEY。"
            )
        return base_url, model, key

    def current(self):
        """按当前选择返回 `(client, model)`。设置不变时返回同一个 client。

        真实端点的设置不完整时抛出 `SwitchConfigError`（中文说明缺什么）。
        """
        if self.mode == "fake":
            signature = ("fake",)
        else:
            signature = ("real", *self._real_settings())
        if self._cache is None or self._cache[0] != signature:
            if signature[0] == "fake":
                client, model = _fake_client(), FAKE_MODEL
            else:
                _, base_url, model, key = signature
                client = _real_client(base_url, key)
            self._cache = (signature, client, model)
        return _handed_out(self._cache[1], self._cache[2])

    @property
    def client(self):
        """当前的 client（`current()[0]`）。"""
        return self.current()[0]

    @property
    def model(self) -> str:
        """当前的模型名（`current()[1]`）。"""
        return self.current()[1]

    # -- 状态行 -------------------------------------------------------------

    @property
    def status(self) -> str:
        """状态行的纯文字（已打码）。"""
        return self._status_text

    def _set_status(self, text: str, kind: str = "info") -> str:
        text = redact(text, self._known_keys())
        self._status_text = text
        self.status_html.value = (
            f'<div style="color:{_COLORS.get(kind, _COLORS["info"])};white-space:pre-wrap">'
            f"{html.escape(text)}</div>"
        )
        return text

    def _refresh_status(self) -> None:
        if self.mode == "fake":
            self._set_status(f"当前：假模型 {FAKE_MODEL}（离线、结果固定、不需要密钥）。", "info")
            return
        base_url = self.base_url_text.value.strip() or "（未填写）"
        model = self.model_text.value.strip() or "（未填写）"
        self._set_status(
            f"当前：真实端点 {base_url} · 模型 {model} · 密钥：{self._key_source()}。"
            "点「测试连接」检查能否连通。",
            "warn" if "⚠" in self._key_source() else "info",
        )

    def test_connection(self) -> str:
        """试发一次很小的请求，把结果写进状态行并返回这段文字（中文、已打码）。"""
        self._set_status("正在测试连接……", "info")
        try:
            client, model = self.current()
        except SwitchConfigError as exc:
            return self._set_status(f"⚠ {exc}", "warn")
        except Exception as exc:
            return self._set_status("❌ " + explain_error(exc, self._known_keys()), "error")
        messages = [{"role": "user", "content": "ping"}]
        started = time.monotonic()
        try:
            if self.mode == "fake":
                reply = client.chat.completions.create(model=model, messages=messages, max_tokens=16)
            else:
                probe = client.with_options(max_retries=0, timeout=PROBE_TIMEOUT)
                reply = probe.chat.completions.create(model=model, messages=messages, max_tokens=8)
        except Exception as exc:
            return self._set_status("❌ " + explain_error(exc, self._known_keys()), "error")
        seconds = time.monotonic() - started
        if self.mode == "fake":
            return self._set_status(f"✅ 假模型可用：{reply.model}（离线，没有发网络请求）。", "ok")
        return self._set_status(
            f"✅ 连接成功：服务器回报的模型是 {reply.model}（用时 {seconds:.1f} 秒）。", "ok"
        )

    # -- 显示 ---------------------------------------------------------------

    def __repr__(self) -> str:
        if self.mode == "fake":
            return f"ModelSwitch(mode='fake', model={FAKE_MODEL!r})"
        return (
            f"ModelSwitch(mode='real', preset={self.preset.label!r}, "
            f"base_url={self.base_url_text.value.strip()!r}, model={self.model_text.value.strip()!r}, "
            f"密钥={self._key_source()})"
        )

    __str__ = __repr__

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs):
        bundle = {}
        inner = getattr(self.widget, "_repr_mimebundle_", None)
        if callable(inner):
            bundle = dict(inner(include=include, exclude=exclude, **kwargs) or {})
        bundle["text/plain"] = repr(self)
        return bundle


def model_switch(environ=None) -> ModelSwitch:
    """建一个模型切换器并返回；放在格子最后一行就会显示。`environ` 默认是 `os.environ`。"""
    return ModelSwitch(environ=environ)
