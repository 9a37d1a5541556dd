"""模型切换器：在假模型（离线）和真实端点之间切换，笔记本的其余代码不用改。

这是辅助工具，不是课程内容，所以只放在这里，笔记本直接导入使用：

- `model_switch()`：一组 ipywidgets 控件（模式、服务商预设、base_url、模型名、API 密钥、测试连接）；
  `switch.current()` 返回 `(client, model)`。「测试连接」先问服务商有哪些模型（`client.models.list()`），
  说清所选模型在不在里面、有哪些相近的名字，再试发一次很小的请求；
- `check_model(client, model)`：只做前一半，返回 `ModelCheck`（在不在列表里、相近的名字、一句中文）；
- `presets_table()`：所有预设的一张表：模型名、出处、核对日期、停用日期、思考模式怎样处理。

客户端怎样建、环境变量怎样读在 `harness_lib.ui.clients`（无头运行用那里的 `client_from_env()`）；
失败的中文说明在 `harness_lib.models.errors.explain_error`；打码在 `harness_lib.safety.secrets.redact`。

密钥的去处：只在 Python 对象的私有属性里。环境变量 `OPENAI_API_KEY` 的值不会复制进任何控件；
在密码框里粘贴的密钥会立刻移走，密码框清空，所以单元格输出、保存下来的控件状态和文件里都没有它。
"""

from __future__ import annotations

import difflib
import html
import os
import time
from dataclasses import dataclass, field

import openai

import ipywidgets as widgets
import pandas as pd
from IPython import get_ipython
from traitlets import Unicode

from .clients import (
    DEFAULT_OPENAI_BASE_URL,
    FAKE_MODEL,
    PRESETS,
    PRESETS_BY_KEY,
    PRESETS_CHECKED,
    Preset,
    fake_client,
    needs_key,
    preset_for,
    real_client,
)
from ..models.server import ensure_local_server
from ..models.errors import SwitchConfigError, classify, explain_error
from ..safety.secrets import NO_KEY, redact

__all__ = ["ModelCheck", "ModelSwitch", "check_model", "closest_models", "model_switch", "presets_table"]

KEY_PLACEHOLDER = "粘贴 API 密钥（只留在内存里，不显示也不保存）"
KEY_PLACEHOLDER_SET = "已设置密钥（不会显示或保存）"
PROBE_TIMEOUT = 15  # 测试连接最多等几秒


class SecretPassword(widgets.Password):
    """密码框：收到的值会被切换器立刻移走；前端更新不回显（echo_update=False），避免密钥在消息里多走一趟。"""

    value = Unicode(help="密码框的内容").tag(sync=True, echo_update=False)


_COLORS = {"ok": "#1a7f37", "error": "#b42318", "warn": "#9a6700", "info": "#57606a"}
SUGGESTIONS = 5  # 所选模型不在列表里时，最多建议几个名字
NO_MODELS_STATUS = (404, 405, 501)  # 服务没有 /models 接口时常见的回答：不算错


# ---------------------------------------------------------------------------
# 这个模型在不在服务商的列表里
# ---------------------------------------------------------------------------


def closest_models(model: str, available, n: int = SUGGESTIONS) -> list[str]:
    """从 `available` 里挑最多 `n` 个名字：和 `model` 最像的排在前面（不分大小写），不够再按原顺序补上。"""
    names = [str(a) for a in available]
    lowered = {name.lower(): name for name in names}
    close = [lowered[m] for m in difflib.get_close_matches((model or "").lower(), list(lowered), n=n, cutoff=0.3)]
    family = [name for name in names if name not in close and model
              and name.lower().split("-")[0] == model.lower().split("-")[0]]
    rest = [name for name in names if name not in close and name not in family]
    return (close + family + rest)[:n]


@dataclass
class ModelCheck:
    """`check_model` 的结果。

    - `listed`：True（在列表里）、False（不在）、None（没有取到列表：服务没有 /models，或出错了）；
    - `available`：服务商列出的模型名；`suggestions`：相近的几个（最像的在前）；
    - `error`：取列表时的异常（没有 /models 接口不算，`error` 是 None）；`text`：一句中文。
    """

    model: str
    listed: bool | None
    available: list[str] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)
    error: BaseException | None = None
    text: str = ""


def check_model(client, model: str, *, timeout: float = 15, key=None) -> ModelCheck:
    """问服务商有哪些模型（`client.models.list()`），说清 `model` 在不在里面。不重试、最多等 `timeout` 秒。

    服务没有 /models 接口（404、405、501）不算错：`listed` 是 None，说明里写明这一点。
    其余失败（密钥不对、连不上……）也不抛出：`error` 里是异常，`text` 是 `explain_error` 的中文说明。
    """
    try:
        page = client.with_options(max_retries=0, timeout=timeout).models.list()
        available = [m.id for m in page.data] if hasattr(page, "data") else [m.id for m in page]
    except Exception as exc:  # noqa: BLE001  密钥不对、连不上、超时、回来的不是 JSON……
        if isinstance(exc, openai.APIStatusError) and exc.status_code in NO_MODELS_STATUS:
            return ModelCheck(model, None, text=(
                f"这个服务没有模型列表接口（GET /models 回 HTTP {exc.status_code}）。这不算错，"
                "模型名对不对，要看下面那次请求。"))
        return ModelCheck(model, None, error=exc, text="没能取到模型列表：" + explain_error(exc, key))
    if model in available:
        return ModelCheck(model, True, available, text=f"模型 {model} 在服务商列出的 {len(available)} 个模型里。")
    suggestions = closest_models(model, available)
    if not available:
        return ModelCheck(model, False, available, text="服务商的模型列表是空的：这把密钥也许还没有开通任何模型。")
    return ModelCheck(model, False, available, suggestions, text=(
        f"⚠ 服务商列出的 {len(available)} 个模型里没有 {model}（拼错了，或者已经下线、改名）。"
        f"相近的有：{'、'.join(suggestions)}。"))


def presets_table():
    """所有预设一张表（pandas DataFrame）：服务商、base_url、模型名、出处、核对日期、停用日期、思考模式怎样处理。"""
    rows = [{
        "预设": p.key, "服务商": p.label, "base_url": p.base_url, "模型名": p.model or p.model_hint,
        "出处": p.source, "核对日期": p.checked, "停用日期": p.retires,
        "每次请求带上": p.extra_body or "", "思考模式": p.thinking,
    } for p in PRESETS if p.key not in ("local", "custom")]
    table = pd.DataFrame(rows)
    table.attrs["checked"] = PRESETS_CHECKED
    return table


class ModelSwitch:
    """模型切换器：选假模型还是真实端点，`current()` 返回 `(client, model)`。

    在笔记本里把它放在格子最后一行就会显示控件。初始状态跟 `client_from_env` 看同样的环境变量，
    所以无头运行（没有人点按钮）时默认用假模型。
    """

    def __init__(self, environ=None):
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
        self.key_password = SecretPassword(
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
                # 和 client_from_env 一样：本地端点也认 HARNESS_MODEL（比如 fake-talk-only）
                self.model_text.value = (env.get("HARNESS_MODEL") or "").strip() or self.model_text.value
            elif mode == "real":
                self.mode_buttons.value = "real"
                base_url = (env.get("OPENAI_BASE_URL") or "").strip() or DEFAULT_OPENAI_BASE_URL
                preset = next(
                    (p for p in PRESETS if p.base_url and p.base_url.rstrip("/") == base_url.rstrip("/")),
                    preset_for(base_url) or PRESETS_BY_KEY["custom"],  # 同一家服务商的旧写法（比如多了 /v1）也认
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
        preset = PRESETS_BY_KEY[key]
        old_quiet, self._quiet = self._quiet, True
        try:
            self.preset_dropdown.value = key
            if key == "local":
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
        return PRESETS_BY_KEY[self.preset_dropdown.value]

    def _preset_for_request(self, base_url: str) -> Preset | None:
        """这次请求按哪个云服务商预设的规矩发：选了它，或者地址（主机名）是它的。"""
        preset = self.preset
        if preset.key not in ("custom", "local") and preset.base_url and preset.needs_key:
            return preset
        return preset_for(base_url)

    def _env_key(self) -> str:
        return (self._environ.get("OPENAI_API_KEY") or "").strip()

    def _known_keys(self) -> list[str]:
        return [k for k in (self._typed_key, self._env_key()) if k]

    def _needs_key(self, base_url: str) -> bool:
        preset = self.preset
        if preset.key == "custom":
            return needs_key(base_url)
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
                client, model = fake_client(), FAKE_MODEL
            else:
                _, base_url, model, key = signature
                preset = self._preset_for_request(base_url)
                client = real_client(base_url, key, preset.extra_body if preset else None)
            self._cache = (signature, client, model)
        return self._cache[1], self._cache[2]

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
        lines = [f"当前：真实端点 {base_url} · 模型 {model} · 密钥：{self._key_source()}。"
                 "点「测试连接」检查能否连通、模型在不在。"]
        kind = "warn" if "⚠" in self._key_source() else "info"
        lines += self._preset_notes(model)
        if any(line.startswith("⚠") for line in lines[1:]):
            kind = "warn"
        self._set_status("\n".join(lines), kind)

    def _preset_notes(self, model: str) -> list[str]:
        """状态行里关于预设的几行：模型名的出处和核对日期、停用日期、每次请求带上的字段。"""
        preset = self._preset_for_request(self.base_url_text.value.strip())
        if preset is None or not preset.source:
            return []
        notes = []
        if model == preset.model:
            notes.append("预设：" + preset.facts())
            if preset.retired_on():
                notes.append(f"⚠ 服务商公布的停用日期 {preset.retires} 已过：这个名字多半不能用了，"
                             "点「测试连接」看看能用哪些模型。")
        if preset.extra_body:
            notes.append(f"每次请求都带上 {preset.extra_body}（{preset.label} 预设）。")
        return notes

    def test_connection(self) -> str:
        """测试连接，把结果写进状态行并返回这段文字（中文、已打码）。

        真实端点分两步：先问服务商有哪些模型（`check_model`，服务没有 /models 接口不算错），
        再试发一次很小的请求（不重试，最多等 `PROBE_TIMEOUT` 秒）。连不上时不再发第二步。
        """
        self._set_status("正在测试连接……", "info")
        try:
            client, model = self.current()
        except SwitchConfigError as exc:
            return self._set_status(f"⚠ {exc}", "warn")
        except Exception as exc:
            return self._set_status("❌ " + explain_error(exc, self._known_keys()), "error")
        messages = [{"role": "user", "content": "ping"}]
        if self.mode == "fake":
            try:
                reply = client.chat.completions.create(model=model, messages=messages, max_tokens=16)
            except Exception as exc:
                return self._set_status("❌ " + explain_error(exc, self._known_keys()), "error")
            return self._set_status(f"✅ 假模型可用：{reply.model}（离线，没有发网络请求）。", "ok")

        listing = check_model(client, model, timeout=PROBE_TIMEOUT, key=self._known_keys())
        if isinstance(listing.error, (openai.APIConnectionError, openai.APIResponseValidationError)):
            return self._set_status("❌ " + explain_error(listing.error, self._known_keys()), "error")
        started = time.monotonic()
        try:
            probe = client.with_options(max_retries=0, timeout=PROBE_TIMEOUT)
            reply = probe.chat.completions.create(model=model, messages=messages, max_tokens=8)
        except Exception as exc:
            lines = ["❌ " + explain_error(exc, self._known_keys())]
            unknown = classify(exc).kind == "not_found"  # 只有“找不到”时，模型名才是要查的东西
            if unknown and listing.suggestions:
                lines.append(f"服务商列出的模型里，相近的有：{'、'.join(listing.suggestions)}。")
            elif unknown and listing.listed is True:
                lines.append(f"模型 {model} 在模型列表里：多半是 base_url 的路径不对（通常以 /v1 结尾）。")
            elif unknown and listing.listed is None and listing.error is None:
                lines.append(listing.text)
            return self._set_status("\n".join(lines), "error")
        seconds = time.monotonic() - started
        lines = [f"✅ 连接成功：服务器回报的模型是 {reply.model}（用时 {seconds:.1f} 秒）。"]
        if listing.listed is False:
            lines.append(listing.text.replace("⚠ ", "") + "这次请求却成功了：有的服务接受列表以外的名字（别名）。")
        elif listing.text:
            lines.append(listing.text)
        lines += [n for n in self._preset_notes(model) if not n.startswith("⚠")]
        return self._set_status("\n".join(lines), "ok")

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


# ---------------------------------------------------------------------------
# 在 Jupyter 里：没被接住的端点错误，先给一句中文说明
# ---------------------------------------------------------------------------

_UNCAUGHT_HEAD = "端点出错了。先看中文说明；完整的调用栈在下面，需要细节时再往下看。"


def _show_with_explanation(shell, etype, value, tb, tb_offset=None):
    """IPython 的自定义异常显示：中文说明在前，原来的调用栈在后（都已打码）。"""
    stb = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
    lines = [redact(line) for line in [_UNCAUGHT_HEAD, "  " + explain_error(value), ""] + list(stb)]
    # IPython 执行格子时只调用这个函数、不管它的返回值，所以这里自己显示（内核把它作为错误输出发给前端）
    shell._showtraceback(etype, redact(str(value)), lines)
    return lines


def explain_uncaught_errors(shell=None) -> bool:
    """让 Jupyter 在显示没被接住的 openai SDK 异常时，先给出 `explain_error` 的中文说明。

    学习者自己写的 `client.chat.completions.create(...)` 出错时（密钥不对、连不上、上下文太长……），
    格子下面先是一句“出了什么事、该怎么办”，然后才是原来的调用栈，一行也不少；异常本身不变，
    `try/except` 照样接得住，接住的异常不受影响。说明和调用栈里的密钥都会被抹掉。
    `model_switch()` 调用它（每本笔记本开头都建切换器）；不在 IPython 里（普通 Python、测试进程）什么也不做，返回 False。
    """
    shell = shell if shell is not None else get_ipython()
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return False
    shell.set_custom_exc((openai.APIError,), _show_with_explanation)
    return True


def model_switch(environ=None) -> ModelSwitch:
    """建一个模型切换器并返回；放在格子最后一行就会显示。`environ` 默认是 `os.environ`。

    顺带装上 `explain_uncaught_errors`：之后没被接住的端点错误先显示一句中文说明。
    """
    explain_uncaught_errors()
    return ModelSwitch(environ=environ)
