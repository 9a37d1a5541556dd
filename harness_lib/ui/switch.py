"""模型切换器：`model_switch()` 是一组控件，`switch.current()` 返回 `(client, model)`，笔记本的其余代码不用改。

它不改 IPython 的设置；`explain_uncaught_errors()` 是另一行明写的调用。密钥只在 Python 对象的私有属性里：
`OPENAI_API_KEY` 的值不复制进任何控件；密码框里粘贴的密钥立刻移走、密码框清空，所以输出、控件状态和文件里都没有它。建客户端的规矩在 `clients`。
"""

import html
import os
import re
import time

import ipywidgets as widgets
import openai
import pandas as pd
from IPython import get_ipython
from traitlets import Unicode

from ..models.errors import EndpointError, SwitchConfigError, classify, explain_error
from ..models.server import ensure_local_server
from ..safety.runner import BASH_TOOL
from ..safety.secrets import NO_KEY, redact
from .clients import DEFAULT_OPENAI_BASE_URL, FAKE_MODEL, NO_CHAT_TOOLS_PREFIXES, PRESETS, PRESETS_BY_KEY, PRESETS_CHECKED
from .clients import Preset
from .clients import check_model, client_from_env, needs_key, preset_for, real_client
from .memory import Memory
from .view import DATAFRAME_STYLE

KEY_PLACEHOLDER = "粘贴 API 密钥（只留在内存里，不显示也不保存）"
KEY_PLACEHOLDER_SET = "已设置密钥（不会显示或保存）"
PROBE_TIMEOUT = 15  # 测试连接最多等几秒
_COLORS = {"ok": "#1a7f37", "error": "#b42318", "warn": "#9a6700", "info": "#57606a"}


class SecretPassword(widgets.Password):
    """密码框：前端的更新不回显（echo_update=False），密钥不在消息里多走一趟。"""

    value = Unicode(help="密码框的内容").tag(sync=True, echo_update=False)


def presets_table():
    """所有云服务商预设一张表：base_url、模型名、出处、核对日期、停用日期、每次请求带上的字段、思考模式。"""
    table = pd.DataFrame([{"预设": p.key, "服务商": p.label, "base_url": p.base_url, "模型名": p.model or p.model_hint,
                           "出处": p.source, "核对日期": p.checked, "停用日期": p.retires,
                           "每次请求带上": p.extra_body or "", "思考模式": p.thinking}
                          for p in PRESETS if p.key not in ("local", "custom")])
    table.attrs["checked"] = PRESETS_CHECKED
    return table


class ModelSwitch:
    """模型切换器：放在格子最后一行就显示控件；初始状态和 `client_from_env` 看同样的环境变量（默认假模型）。"""

    def __init__(self, environ=None):
        self._environ = os.environ if environ is None else environ
        self._typed_key: str | None = None  # 在密码框里粘贴的密钥，只存在这里
        self._cache = None  # (设置签名, client, model)
        self.status = ""  # 状态行的纯文字（已打码）
        style = {"description_width": "72px"}
        text = {"style": style, "layout": widgets.Layout(width="560px"), "continuous_update": False}
        self.mode_buttons = widgets.ToggleButtons(options=[("假模型（离线）", "fake"), ("真实端点", "real")],
                                                  description="模型", style=style)
        self.preset_dropdown = widgets.Dropdown(options=[(p.label, p.key) for p in PRESETS], description="服务商",
                                                style=style, layout=widgets.Layout(width="360px"))
        self.base_url_text = widgets.Text(description="base_url", placeholder="https://…/v1", **text)
        self.model_text = widgets.Text(description="模型名", **text)
        self.key_password = SecretPassword(description="API 密钥", placeholder=KEY_PLACEHOLDER, **text)
        self.test_button = widgets.Button(description="测试连接", icon="plug", button_style="info")
        self.forget_button = widgets.Button(description="忘掉学到的规矩", icon="eraser",
                                            tooltip="客户端从服务器的 400 里学到、记在缓存文件夹里的规矩：清空这个地址的")
        self.status_html = widgets.HTML()
        # 真实端点的几栏只在选了“真实端点”时出现：假模型用不到它们，选中的是哪一个也一眼看得出
        self.real_fields = widgets.VBox([self.preset_dropdown, self.base_url_text, self.model_text,
                                         self.key_password, widgets.HBox([self.test_button, self.forget_button])])
        # 第一格是本笔记本里 pandas 表的样式（只是 CSS：靠左对齐、按内容分列宽），不改任何行为
        self.widget = widgets.VBox([widgets.HTML(DATAFRAME_STYLE), self.mode_buttons, self.real_fields,
                                    self.status_html])
        self._fill(self.preset.key)
        for w in (self.mode_buttons, self.base_url_text, self.model_text):
            w.observe(lambda _change: self._refresh_status(), names="value")
        self.preset_dropdown.observe(self._on_preset, names="value")
        self.key_password.observe(self._on_key, names="value")
        self.test_button.on_click(lambda _button: self.test_connection())
        self.forget_button.on_click(lambda _button: self.forget_learned())
        self.mode_buttons.observe(lambda _change: self._show_real_fields(), names="value")
        self._apply_environ()
        self._show_real_fields()
        if self._environ.get("HARNESS_SITE"):  # make site：网页上没有内核，切换器只是样子，不能点，也没有填密钥的框
            for w in (self.mode_buttons, self.preset_dropdown, self.base_url_text, self.model_text, self.test_button,
                      self.forget_button):
                w.disabled = True
            self.key_password.layout.display = "none"

    def _show_real_fields(self) -> None:
        self.real_fields.layout.display = "" if self.mode == "real" else "none"

    def _apply_environ(self) -> None:
        """和 client_from_env 看同样的变量：HARNESS_MODE、HARNESS_MODEL、OPENAI_BASE_URL。"""
        mode = (self._environ.get("HARNESS_MODE") or "fake").strip().lower()
        model = (self._environ.get("HARNESS_MODEL") or "").strip()
        if mode == "local":  # 本地端点也认 HARNESS_MODEL（比如 fake-talk-only）
            self._fill("local")  # 端点起不来时在这里就报错
            self.preset_dropdown.value = "local"
            self.model_text.value = model or self.model_text.value
        elif mode == "real":
            base_url = (self._environ.get("OPENAI_BASE_URL") or "").strip() or DEFAULT_OPENAI_BASE_URL
            # 同一家服务商的旧写法（比如多了 /v1）也认；地址原样保留
            same = [p for p in PRESETS if p.base_url and p.base_url.rstrip("/") == base_url.rstrip("/")]
            self.preset_dropdown.value = (preset_for(base_url) or (same + [PRESETS_BY_KEY["custom"]])[0]).key
            self.base_url_text.value = base_url
            self.model_text.value = model or self.preset.model
            self.mode_buttons.value = "real"
        if mode not in ("fake", "real", "local"):
            self._set_status(f"HARNESS_MODE 只能是 fake、real 或 local，现在是 {mode!r}；先用假模型。", "warn")
        else:
            self._refresh_status()

    def _fill(self, key: str) -> None:
        """按预设填好 base_url 和模型名（自定义只换提示）；本地端点这时才启动。"""
        preset = PRESETS_BY_KEY[key]
        if key == "local":
            self.base_url_text.value = ensure_local_server()
        elif preset.base_url:
            self.base_url_text.value = preset.base_url
        if key != "custom":
            self.model_text.value = preset.model
        self.model_text.placeholder = preset.model_hint or "模型名"

    def _on_preset(self, change) -> None:
        try:
            self._fill(change["new"])
        except Exception as exc:  # 本地端点启动失败等
            self._set_status("✗ " + explain_error(exc, self._known_keys()), "error")
            return
        if change["new"] != "custom":
            self.mode_buttons.value = "real"
        self._refresh_status()

    def _on_key(self, change) -> None:
        if change["new"]:  # 立刻把密钥移进私有属性，再清空密码框：控件状态里从此没有它
            self._typed_key = change["new"].strip() or None
            self.key_password.value = ""
            self.key_password.placeholder = KEY_PLACEHOLDER_SET if self._typed_key else KEY_PLACEHOLDER
            self._refresh_status()

    @property
    def mode(self) -> str:
        """`"fake"`（假模型）或 `"real"`（真实端点，包括本机服务和本项目的本地端点）。"""
        return self.mode_buttons.value

    @property
    def preset(self) -> Preset:
        return PRESETS_BY_KEY[self.preset_dropdown.value]

    def _request_preset(self) -> Preset | None:
        """这次请求按哪个云服务商预设的规矩发：选了它，或者地址（主机名）是它的。"""
        chosen = self.preset
        return chosen if chosen.base_url and chosen.needs_key else preset_for(self.base_url_text.value)

    def _env_key(self) -> str:
        return (self._environ.get("OPENAI_API_KEY") or "").strip()

    def _known_keys(self) -> list[str]:
        return [k for k in (self._typed_key, self._env_key()) if k]

    def _needs_key(self) -> bool:
        return needs_key(self.base_url_text.value) if self.preset.key == "custom" else self.preset.needs_key

    def _key_source(self) -> str:
        if self._typed_key:
            return "已在上面粘贴"
        if not self._needs_key():
            return "不需要"
        return "来自环境变量 OPENAI_API_KEY" if self._env_key() else "⚠ 还没有设置"

    def _real_settings(self) -> tuple[str, str, str]:
        """真实端点的 (base_url, model, key)；缺东西时抛出 SwitchConfigError。"""
        if self.preset.key == "local":
            self.base_url_text.value = ensure_local_server()  # 端点若被关掉，会在这里重新启动
        base_url, model = self.base_url_text.value.strip(), self.model_text.value.strip()
        if not base_url:
            raise SwitchConfigError("base_url 是空的：请选一个服务商预设，或在 base_url 框里填上地址（通常以 /v1 结尾）。")
        if not base_url.startswith(("http://", "https://")):
            raise SwitchConfigError(f"base_url 应当以 http:// 或 https:// 开头，现在是 {base_url!r}。")
        if not model:
            raise SwitchConfigError("模型名是空的：请在「模型名」框里填上服务商给的模型名。")
        env_key, env_url = self._env_key(), (self._environ.get("OPENAI_BASE_URL") or "").strip().rstrip("/")
        # 环境里的密钥本来就是给 OPENAI_BASE_URL 的：那个地址在本机（比如加了 --api-key 的服务）也发给它
        for_env_url = bool(env_key and env_url and base_url.rstrip("/") == env_url)
        key = self._typed_key or (env_key if for_env_url or self._needs_key() else NO_KEY)
        if not key:
            raise SwitchConfigError(f"还没有 API 密钥：把 {self.preset.label} 的密钥粘贴到「API 密钥」框里（只留在内存里，"
                                    "不显示也不保存），或者在启动 JupyterLab 之前设置环境变量 OPENAI_API_KEY。")
        return base_url, model, key

    def current(self):
        """按当前选择返回 `(client, model)`；设置不变时返回同一个 client。设置不完整时抛出 `SwitchConfigError`。"""
        signature = ("fake",) if self.mode == "fake" else ("real", *self._real_settings())
        if self._cache is None or self._cache[0] != signature:
            if self.mode == "fake":
                self._cache = (signature, *client_from_env({}))
            else:
                _, base_url, model, key = signature
                preset = self._request_preset()
                memory = None if self.preset.key == "local" else self.memory()
                self._cache = (signature, real_client(base_url, key, preset and preset.extra_body, memory=memory),
                               model)
        return self._cache[1], self._cache[2]

    def memory(self) -> Memory | None:
        """这个 base_url 记下的规矩（`ui.memory`）；`HARNESS_MEMORY=off` 或还没填地址时是 None。"""
        return Memory.for_url(self.base_url_text.value.strip())

    def forget_learned(self) -> str:
        """清空这个地址记下的规矩，下一次请求从头学；结果写进状态行。"""
        memory = self.memory()
        if memory is None:
            return self._set_status("没有记下任何规矩（HARNESS_MEMORY=off，或还没填 base_url）。")
        gone = memory.forget()
        self._cache = None  # 客户端也重建：它手里学到的一并丢掉
        return self._set_status(f"已忘掉 {memory.base_url} 下 {gone} 个模型的规矩；下一次请求从头学。")

    def _set_status(self, text: str, kind: str = "info") -> str:
        self.status = text = redact(text, self._known_keys())
        self.status_html.value = f'<div style="color:{_COLORS[kind]};white-space:pre-wrap">{html.escape(text)}</div>'
        return text

    def _refresh_status(self):
        if self.mode == "fake":
            return self._set_status(f"当前：假模型 {FAKE_MODEL}（离线、结果固定、不需要密钥）。")
        model = self.model_text.value.strip() or "（未填写）"
        lines = [f"当前：真实端点 {self.base_url_text.value.strip() or '（未填写）'} · 模型 {model} · "
                 f"密钥：{self._key_source()}。点「测试连接」检查能否连通、模型在不在。", *self._preset_notes(model),
                 *self._remembered(model)]
        self._set_status("\n".join(lines), "warn" if any("⚠" in line for line in lines) else "info")

    def _remembered(self, model: str) -> list[str]:
        """记忆文件里这个地址、这个模型的规矩（上一本笔记本学到的），一行。"""
        memory = self.memory() if self.preset.key != "local" else None
        line = memory.describe().get(model) if memory else None
        return [f"记得：{line}。想重新学，点「忘掉学到的规矩」。"] if line else []

    def _preset_notes(self, model: str) -> list[str]:
        """关于预设的几行：模型名的出处和核对日期、停用日期、每次请求带上的字段。"""
        tools_note = [f"{model} 在 Chat Completions 里不能带工具（reasoning_effort 不收 \"none\"，别的值又不许带工具，"
                      "只能走 Responses 接口）；切换器的客户端在 OpenAI 的地址上直接替它走 /v1/responses，"
                      "回答照旧交给循环（11 讲这个接口）。"] \
            if model.startswith(NO_CHAT_TOOLS_PREFIXES) and self._request_preset() is PRESETS_BY_KEY["openai"] else []
        preset = self._request_preset()
        if preset is None or not preset.source:
            return tools_note
        notes = tools_note + (["预设：" + preset.facts()] if model == preset.model else [])
        if notes and preset.retired_on():
            notes.append(f"⚠ 服务商公布的停用日期 {preset.retires} 已过：这个名字多半不能用了，"
                         "点「测试连接」看看能用哪些模型。")
        if preset.extra_body:
            notes.append(f"每次请求都带上 {preset.extra_body}（{preset.label} 预设）。")
        return notes

    def test_connection(self) -> str:
        """测试连接，结果写进状态行并返回（已打码）。真实端点分两步：先问服务商有哪些模型（`check_model`），
        连得上再试发一次很小的请求（不重试，最多等 `PROBE_TIMEOUT` 秒），再试一次带工具的。两次都不写 `max_tokens`：
        回答本来就短，有的模型又不收这个参数名，试连接时不必先为它被拒一次（循环里的请求照样带上限）。"""
        self._set_status("正在测试连接……")
        keys = self._known_keys()
        try:
            client, model = self.current()
        except SwitchConfigError as exc:
            return self._set_status(f"⚠ {exc}", "warn")
        except Exception as exc:
            return self._set_status("✗ " + explain_error(exc, keys), "error")
        if self.mode == "fake":
            reply = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "ping"}])
            return self._set_status(f"✓ 假模型可用：{reply.model}（离线，没有发网络请求）。", "ok")
        listing = check_model(client, model, timeout=PROBE_TIMEOUT, key=keys)
        if isinstance(listing.error, (openai.APIConnectionError, openai.APIResponseValidationError)):
            return self._set_status("✗ " + explain_error(listing.error, keys), "error")
        started = time.monotonic()
        try:
            reply = client.with_options(max_retries=0, timeout=PROBE_TIMEOUT).chat.completions.create(
                model=model, messages=[{"role": "user", "content": "ping"}])
        except Exception as exc:
            lines = ["✗ " + explain_error(exc, keys)]
            if classify(exc).kind == "not_found" and listing.error is None:  # 只有“找不到”时，才要查模型名
                lines.append(f"模型 {model} 在模型列表里：多半是 base_url 的路径不对（通常以 /v1 结尾）。"
                             if listing.listed else listing.text)
            return self._set_status("\n".join(lines), "error")
        lines = [f"✓ 连接成功：服务器回报的模型是 {reply.model}（用时 {time.monotonic() - started:.1f} 秒）。"]
        alias = "这次请求却成功了：有的服务接受列表以外的名字（别名）。" if listing.listed is False else ""
        lines.append((listing.text if "已于" in listing.text else listing.text.replace("⚠ ", "")) + alias)
        tools_line, kind = self._try_tools(client, model, keys)
        lines.append(tools_line)
        lines += [n for n in self._preset_notes(model) if not n.startswith("⚠")]
        return self._set_status("\n".join(lines), kind)

    def _try_tools(self, client, model: str, keys) -> tuple[str, str]:
        """再发一次很小的、带一个工具的请求：本系列的循环每一轮都带工具。返回（一行，状态的种类）。"""
        try:
            reply = client.with_options(max_retries=0, timeout=PROBE_TIMEOUT).chat.completions.create(
                model=model, messages=[{"role": "user", "content": "列出当前目录里的文件"}], tools=[BASH_TOOL])
        except EndpointError as exc:
            return "✗ 带工具的请求不行：" + exc.explanation, "error"
        except Exception as exc:  # noqa: BLE001  连得上、普通请求也成功，只是带工具的这次失败
            return "⚠ 带工具的请求失败：" + explain_error(exc, keys), "warn"
        message = reply.choices[0].message if reply.choices else None
        if getattr(client, "uses_responses", lambda name: False)(model):
            return ("✓ 带工具的请求改走 Responses API 成功了：这个模型在 Chat Completions 里带不了工具，切换器的客户端"
                    "以后在底下替它走 /v1/responses，回答照旧交给循环（11 讲这个接口）。"
                    + ("模型提出了工具调用。" if message is not None and message.tool_calls else "这次模型只回了文字。")), "ok"
        if message is not None and message.tool_calls:
            return "✓ 带工具的请求也成功了：模型提出了工具调用。", "ok"
        return ("✓ 带工具的请求也成功了，但这次模型只回了文字，没有提出工具调用（小模型常这样；循环照样能跑，"
                "只是它不动手）。"), "ok"

    def __repr__(self) -> str:
        return (f"ModelSwitch(mode={self.mode!r}, preset={self.preset.label!r}, "
                f"base_url={self.base_url_text.value!r}, model={self.model_text.value!r}, 密钥={self._key_source()})")

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs):
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude, **kwargs) or {})
        return {**bundle, "text/plain": repr(self)}


# 格子里直接写的密钥：调用栈会引用那行源码
_LITERAL_KEY = re.compile(r"""api_key\s*=\s*(['"])([^'"\s]{8,})\1""")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _masked(lines: list[str]) -> list[str]:
    """打码（`redact`：环境变量里的秘密、服务器回显的密钥……），再加上格子里直接写的 `api_key="..."`：
    学习者自己建的客户端，密钥不在环境变量里。"""
    plain = [_ANSI.sub("", line) for line in lines]  # 调用栈带颜色：控制码会把 api_key= 和引号隔开
    keys = [m.group(2) for line in plain for m in _LITERAL_KEY.finditer(line)]
    return [redact(line, keys) for line in lines]


def _show_with_explanation(shell, etype, value, tb, tb_offset=None):
    """IPython 的自定义异常显示：中文说明在前，原来的调用栈在后，每一行都打码（`_masked`：格子里若直接写了密钥，
    调用栈引用的那行源码也不会露出它）。异常本身不变，try/except 照样接得住。"""
    stb = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
    head = "端点出错了。先看中文说明；完整的调用栈在下面。"
    *lines, evalue = _masked([head, "  " + explain_error(value), "", *stb, str(value)])
    # IPython 没有“显示一份现成的调用栈”的公开调用：_showtraceback 是它写明给子类覆盖的那一步（ipykernel 在这里发出
    # 错误消息），showtraceback 会重新生成调用栈、不打码；自定义处理函数的返回值 IPython 不用
    shell._showtraceback(etype, evalue, lines)
    return lines


def explain_uncaught_errors(shell=None) -> bool:
    """打开“没接住的 openai SDK 异常先给一句中文说明”：说明在前、调用栈在后，都打码。
    自己调用 `create()`、可能有端点异常没接住的笔记本，在切换器那一格明写（00 写这一行，07–11 写
    `model_switch(explain_errors=True)`）；调模型都经过 `Chat` 或 `run_loop` 的笔记本（它们自己接住端点异常）不写。不在 IPython 里时什么也不做，返回 False。"""
    shell = shell if shell is not None else get_ipython()
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return False
    shell.set_custom_exc((openai.APIError,), _show_with_explanation)
    return True


def model_switch(environ=None, *, explain_errors: bool = False) -> ModelSwitch:
    """建一个模型切换器（`environ` 默认 `os.environ`）。默认不改 IPython 的任何设置；`explain_errors=True` 时顺带
    调一次 `explain_uncaught_errors()`：自己调用 `create()` 的笔记本，切换器那一行就够了。"""
    if explain_errors:
        explain_uncaught_errors()
    return ModelSwitch(environ=environ)
