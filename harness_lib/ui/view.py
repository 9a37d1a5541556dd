"""消息表：把 `messages` 列表画成一张随对话原地刷新的表。

这是辅助工具，不是课程内容，所以只放在这里，笔记本直接导入使用：

- `messages_frame(messages)`：每条消息一行的 `pandas.DataFrame`，方便用代码查看；
- `show_messages(messages)`：显示一张活的表，之后每轮调用 `view.update()` 原地刷新；
- `MessagesView.detail(i)`：打印第 i 条消息的完整 JSON。

表格按角色（`role`）上色；同一个 `tool_call_id` 在助手行和工具行用同一种颜色的小标签，
并注明“由第几行回应”“回应第几行”。没有回应的工具调用、找不到调用的工具消息都会标红。
HTML 只用行内样式、不用脚本，JupyterLab 里不受信任的输出也照样显示；样式若被去掉（比如在 GitHub 上），
“⚠ 未回应”“↩ 回应第 N 行”这些文字提示也还在。
"""

from __future__ import annotations

import html
import json
import unicodedata
from collections.abc import Mapping
from typing import Any

import pandas as pd

__all__ = [
    "COLUMNS",
    "MessagesView",
    "messages_frame",
    "messages_html",
    "messages_text",
    "show_messages",
]

# 数据表的列名（英文，方便用代码按列取值）。
COLUMNS = ["pos", "role", "content", "tool_calls", "tool_call_id"]

PREVIEW_CHARS = 60  # 预览保留的字符数
FULL_TEXT_CAP = 20_000  # 每个单元格最多嵌入这么多字符的全文
TOTAL_FULL_TEXT_BUDGET = 400_000  # 整张表最多嵌入这么多字符的全文（先给最新的消息），超出后只给预览
SCROLL_MAX_HEIGHT = 420  # 滚动区域的最大高度（像素）

# 角色底色：柔和、彼此可分。
ROLE_COLORS = {
    "system": "#eef0f4",
    "user": "#e6f0ff",
    "assistant": "#e9f7ec",
    "tool": "#fff5dc",
}
OTHER_ROLE_COLOR = "#f5f5f5"
ROLE_ORDER = ["system", "user", "assistant", "tool"]

# 调用 id 小标签的颜色：(底色, 边框色)。同一个 id 在两行里用同一组颜色。
CALL_COLORS = [
    ("#dbeafe", "#3b82f6"),
    ("#fce7f3", "#db2777"),
    ("#ede9fe", "#7c3aed"),
    ("#ccfbf1", "#0d9488"),
    ("#fef3c7", "#d97706"),
    ("#e0e7ff", "#4f46e5"),
    ("#ecfccb", "#65a30d"),
    ("#ffedd5", "#ea580c"),
    ("#cffafe", "#0891b2"),
    ("#f5d0fe", "#c026d3"),
]

_WARN = "#b42318"
_TD = 'style="text-align:left;vertical-align:top;padding:3px 8px"'
_TH = (
    'style="position:sticky;top:0;z-index:1;background:#f6f8fa;text-align:left;'
    'padding:4px 8px;border-bottom:1px solid #d0d7de;white-space:nowrap"'
)
_PRE = (
    'style="white-space:pre-wrap;word-break:break-word;margin:4px 0;padding:6px;'
    'max-height:320px;overflow:auto;background:#fff;border:1px solid #e3e6ea;'
    'border-radius:4px;font-size:12px;text-align:left"'
)


# ---------------------------------------------------------------------------
# 把各种形态的消息整理成统一的 dict
# ---------------------------------------------------------------------------


def _as_dict(message: Any, index: int) -> Mapping:
    """dict 原样返回；SDK 对象（pydantic 模型）用 `model_dump(exclude_none=True)` 转成 dict。"""
    if isinstance(message, Mapping):
        return message
    dump = getattr(message, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)
    raise TypeError(
        f"第 {index} 条消息既不是 dict 也不是 SDK 消息对象，而是 {type(message).__name__}"
    )


def _text_of(content: Any) -> str:
    """把 `content` 变成一段文字：None 为空串；分段内容（列表）把文字段拼起来。"""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping):
                if part.get("type") == "text" or "text" in part:
                    parts.append(str(part.get("text", "")))
                else:
                    parts.append(f"[{part.get('type', '?')}]")
            else:
                parts.append(str(part))
        return "\n".join(parts)
    try:
        return json.dumps(content, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(content)


def _preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """取前 `limit` 个字符作预览，换行显示为 ⏎，截断处加 …。"""
    head = text[:limit].replace("\r\n", "⏎").replace("\n", "⏎").replace("\r", "⏎")
    return head + "…" if len(text) > limit else head


def _calls_of(msg: Mapping) -> list[tuple[str, str, str]]:
    """取出一条消息里的工具调用，每个是 (id, name, arguments)。"""
    calls = msg.get("tool_calls") or []
    out = []
    for call in calls:
        if not isinstance(call, Mapping):
            dump = getattr(call, "model_dump", None)
            call = dump(exclude_none=True) if callable(dump) else {}
        fn = call.get("function") or call.get("custom") or {}
        if not isinstance(fn, Mapping):
            dump = getattr(fn, "model_dump", None)
            fn = dump(exclude_none=True) if callable(dump) else {}
        args = fn.get("arguments", fn.get("input", ""))
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False, default=str)
        out.append((str(call.get("id") or ""), str(fn.get("name") or "?"), args))
    return out


def _rows(messages) -> list[Mapping]:
    return [_as_dict(m, i) for i, m in enumerate(messages)]


# ---------------------------------------------------------------------------
# 数据表
# ---------------------------------------------------------------------------


class MessagesFrame(pd.DataFrame):
    """`messages_frame` 的结果：普通的 `pandas.DataFrame`，只是显示时不再把单元格截到 50 个字符。

    预览在生成时已经截好（`content` 前 60 个字符；`tool_calls` 里调用 id 写在最后），
    pandas 默认的截断会正好切掉两个调用之间不同的那一段，所以这里显示全文；
    设置只在显示这张表的那一刻生效，不改动全局的 pandas 选项。
    """

    @property
    def _constructor(self):
        return MessagesFrame

    def _repr_html_(self):
        with pd.option_context("display.max_colwidth", None):
            return super()._repr_html_()

    def __repr__(self) -> str:
        # 纯文字显示：列不折叠、不省略
        with pd.option_context("display.max_colwidth", None, "display.max_columns", None, "display.width", 0):
            return super().__repr__()


def messages_frame(messages):
    """把消息列表变成 `MessagesFrame`（`pandas.DataFrame` 的子类），每条消息一行。

    索引是 `pos`（从 0 开始的位置，与 `messages[i]` 一致），列依次是 `role`、`content`（前 60 个字符的预览，
    换行显示为 ⏎）、`tool_calls`（每个调用写成 `name(arguments) [id]`，多个用换行连接）、
    `tool_call_id`（没有则为空串）。dict 和 SDK 对象都可以。
    """
    rows = _rows(messages)
    data = {
        "pos": list(range(len(rows))),
        "role": [str(r.get("role", "")) for r in rows],
        "content": [_preview(_text_of(r.get("content"))) for r in rows],
        "tool_calls": [
            "\n".join(f"{name}({_preview(args)}) [{cid}]" for cid, name, args in _calls_of(r))
            for r in rows
        ],
        "tool_call_id": [str(r.get("tool_call_id") or "") for r in rows],
    }
    # 位置做索引：显示时只有一列编号，和实时消息表的 pos 列一致
    return MessagesFrame(data, columns=COLUMNS).set_index("pos")


# ---------------------------------------------------------------------------
# 配对分析：哪个调用由哪一行回应
# ---------------------------------------------------------------------------


class _Pairing:
    """记录每个 `tool_call_id` 出现在哪些行。"""

    def __init__(self, rows: list[Mapping]):
        self.calls: list[list[tuple[str, str, str]]] = []
        self.call_pos: dict[str, int] = {}  # id -> 发起调用的助手消息位置
        self.answer_pos: dict[str, list[int]] = {}  # id -> 回应它的工具消息位置
        self.color: dict[str, int] = {}
        for pos, r in enumerate(rows):
            calls = _calls_of(r)
            self.calls.append(calls)
            for cid, _, _ in calls:
                self.call_pos.setdefault(cid, pos)
                self.color.setdefault(cid, len(self.color))
            if r.get("role") == "tool":
                cid = str(r.get("tool_call_id") or "")
                self.answer_pos.setdefault(cid, []).append(pos)
                self.color.setdefault(cid, len(self.color))
        self.unanswered = [c for c in self.call_pos if c not in self.answer_pos]
        self.orphans = [
            (c, p) for c, ps in self.answer_pos.items() if c not in self.call_pos for p in ps
        ]


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _chip(cid: str, pairing: _Pairing) -> str:
    bg, border = CALL_COLORS[pairing.color.get(cid, 0) % len(CALL_COLORS)]
    return (
        f'<span style="background:{bg};border:1.5px solid {border};border-radius:9px;'
        f'padding:0 6px;font-family:monospace;font-size:11.5px;white-space:nowrap">'
        f"{_esc(cid) or '（空）'}</span>"
    )


def _warn_chip(text: str) -> str:
    return (
        f'<span style="background:{_WARN};color:#fff;border-radius:9px;padding:0 6px;'
        f'font-size:11.5px;font-weight:600;white-space:nowrap">{_esc(text)}</span>'
    )


def _hint(text: str) -> str:
    return f'<span style="color:#57606a;font-size:11.5px;white-space:nowrap">{_esc(text)}</span>'


def _line_list(positions: list[int]) -> str:
    return "、".join(str(p) for p in positions)


class _Budget:
    """整张表嵌入全文的字符预算，防止几百条大输出把表撑得很重。"""

    def __init__(self, total: int):
        self.left = total


def _full_cell(text: str, pos: int, budget: _Budget, *, code: bool = False) -> str:
    """短文字直接显示；长文字或多行文字折叠成 <details>，点开看全文。"""
    preview = _preview(text)
    shown = _esc(preview)
    if code:
        shown = f'<code style="font-size:12px">{shown}</code>'
    if len(text) <= PREVIEW_CHARS and "\n" not in text and "\r" not in text:
        return shown
    if budget.left <= 0:
        note = f"（这张表已经嵌入了很多全文，这里不再嵌入；用 view.detail({pos}) 查看）"
        body = _esc(note)
    else:
        cap = min(FULL_TEXT_CAP, budget.left)
        body = _esc(text[:cap])
        budget.left -= min(len(text), cap)
        if len(text) > cap:
            body += _esc(
                f"\n……（还有 {len(text) - cap} 个字符没有嵌入，用 view.detail({pos}) 查看全文）"
            )
    return (
        f'<details><summary style="cursor:pointer">{shown}</summary>'
        f"<pre {_PRE}>{body}</pre></details>"
    )


def _tool_calls_cell(pos: int, pairing: _Pairing, budget: _Budget) -> str:
    parts = []
    for cid, name, args in pairing.calls[pos]:
        answers = pairing.answer_pos.get(cid)
        if answers:
            status = _hint(f"→ 由第 {_line_list(answers)} 行回应")
        else:
            status = _warn_chip("⚠ 未回应")
        args_html = _full_cell(args, pos, budget, code=True)
        parts.append(
            f'<div style="margin:1px 0">{_chip(cid, pairing)} '
            f'<b style="font-family:monospace">{_esc(name)}</b>({args_html}) {status}</div>'
        )
    return "".join(parts)


def _tool_call_id_cell(r: Mapping, pairing: _Pairing) -> str:
    if "tool_call_id" not in r and r.get("role") != "tool":
        return ""
    cid = str(r.get("tool_call_id") or "")
    if r.get("role") != "tool":
        return _chip(cid, pairing)
    if not cid:
        return _warn_chip("⚠ 缺少 tool_call_id")
    if cid in pairing.call_pos:
        return f"{_chip(cid, pairing)} {_hint(f'↩ 回应第 {pairing.call_pos[cid]} 行')}"
    return f"{_chip(cid, pairing)} {_warn_chip('⚠ 找不到对应的调用')}"


def _role_counts(rows: list[Mapping]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in rows:
        role = str(r.get("role", ""))
        counts[role] = counts.get(role, 0) + 1
    ordered = {k: counts[k] for k in ROLE_ORDER if k in counts}
    ordered.update({k: v for k, v in counts.items() if k not in ordered})
    return ordered


def _problems(pairing: _Pairing) -> list[str]:
    """表头上方的提示句（中文）。"""
    lines = []
    if pairing.unanswered:
        where = "、".join(f"{c}（第 {pairing.call_pos[c]} 行）" for c in pairing.unanswered[:5])
        more = " 等" if len(pairing.unanswered) > 5 else ""
        lines.append(f"⚠ 有 {len(pairing.unanswered)} 个工具调用还没有回应：{where}{more}")
    if pairing.orphans:
        where = "、".join(f"{c or '（空）'}（第 {p} 行）" for c, p in pairing.orphans[:5])
        more = " 等" if len(pairing.orphans) > 5 else ""
        lines.append(f"⚠ 有 {len(pairing.orphans)} 条工具消息找不到对应的调用：{where}{more}")
    return lines


def messages_html(messages, title: str | None = None) -> str:
    """把消息列表画成一段自包含的 HTML（只用行内样式，不用脚本）。"""
    rows = _rows(messages)
    pairing = _Pairing(rows)
    budget = _Budget(TOTAL_FULL_TEXT_BUDGET)

    counts = _role_counts(rows)
    legend = " ".join(
        f'<span style="background:{ROLE_COLORS.get(role, OTHER_ROLE_COLOR)};border:1px solid #d0d7de;'
        f'border-radius:4px;padding:0 6px;white-space:nowrap">{_esc(role or "（无 role）")} {n}</span>'
        for role, n in counts.items()
    )
    head = []
    if title:
        head.append(f"<b>{_esc(title)}</b> · ")
    head.append(f"共 {len(rows)} 条消息 {legend}")
    if pairing.color:
        head.append(f' {_hint("同色小标签 = 同一个 tool_call_id")}')

    out = [
        '<div class="messages-view" style="font-size:13px;color:#1f2328;line-height:1.45;'
        'max-width:100%">',
        f'<div style="margin:2px 0 4px">{"".join(head)}</div>',
    ]
    for line in _problems(pairing):
        out.append(f'<div style="color:{_WARN};font-weight:600;margin:2px 0">{_esc(line)}</div>')
    out.append(
        f'<div style="max-height:{SCROLL_MAX_HEIGHT}px;overflow:auto;border:1px solid #d0d7de;'
        'border-radius:6px;background:#fff">'
        '<table style="border-collapse:collapse;width:100%;margin:0;'
        'font-size:12.5px;color:#1f2328">'
        "<thead><tr>"
        + "".join(f"<th {_TH}>{h}</th>" for h in COLUMNS)
        + "</tr></thead><tbody>"
    )
    if not rows:
        out.append(f'<tr><td colspan="5" {_TD}>（还没有消息）</td></tr>')
    # 倒着生成各行：全文预算先给最新的消息（通常最想看的是最后几轮），再把顺序翻回来。
    body = []
    for pos in range(len(rows) - 1, -1, -1):
        r = rows[pos]
        role = str(r.get("role", ""))
        bg = ROLE_COLORS.get(role, OTHER_ROLE_COLOR)
        calls = _tool_calls_cell(pos, pairing, budget)
        content = _full_cell(_text_of(r.get("content")), pos, budget)
        body.append(
            f'<tr style="background:{bg};border-bottom:1px solid #e3e6ea">'
            f'<td {_TD}><span style="color:#57606a">{pos}</span></td>'
            f"<td {_TD}><b>{_esc(role)}</b></td>"
            f"<td {_TD}>{content}</td>"
            f"<td {_TD}>{calls}</td>"
            f"<td {_TD}>{_tool_call_id_cell(r, pairing)}</td>"
            "</tr>"
        )
    body.reverse()
    out.extend(body)
    out.append("</tbody></table></div></div>")
    return "".join(out)


def _width(text: str) -> int:
    """终端里的显示宽度：中文等宽字符算 2 格。"""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - _width(text))


def messages_text(messages, title: str | None = None, head: int = 10, tail: int = 30) -> str:
    """纯文本版本（控制台、无界面运行时用）：计数、问题提示，再加一张文字表。

    消息很多时只列开头 `head` 行和最后 `tail` 行。不依赖 pandas，第一次显示也很快。
    """
    rows = _rows(messages)
    pairing = _Pairing(rows)
    counts = " · ".join(f"{role or '（无 role）'} {n}" for role, n in _role_counts(rows).items())
    lines = [f"{title + ' · ' if title else ''}共 {len(rows)} 条消息" + (f"（{counts}）" if counts else "")]
    lines += _problems(pairing)
    if not rows:
        lines.append("（还没有消息）")
        return "\n".join(lines)
    picked = list(range(len(rows)))
    if len(rows) > head + tail:
        picked = picked[:head] + [-1] + picked[-tail:]
    table = [COLUMNS]
    for pos in picked:
        if pos < 0:
            table.append(None)
            continue
        r = rows[pos]
        calls = " ; ".join(f"{name}({_preview(args, 30)}) [{cid}]" for cid, name, args in pairing.calls[pos])
        table.append([str(pos), str(r.get("role", "")), _preview(_text_of(r.get("content")), 40),
                      _preview(calls, 60), str(r.get("tool_call_id") or "")])
    widths = [max(_width(row[i]) for row in table if row) for i in range(len(COLUMNS))]
    for row in table:
        if row is None:
            lines.append(f"…（省略 {len(rows) - head - tail} 行）…")
        else:
            lines.append("  ".join(_pad(cell, w) for cell, w in zip(row, widths)).rstrip())
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# 活的表
# ---------------------------------------------------------------------------


def _shell():
    """当前的 IPython shell；没有（普通 Python 里）就返回 None。"""
    try:
        from IPython.core.interactiveshell import InteractiveShell
    except ImportError:  # pragma: no cover - IPython 是依赖，这里只是保险
        return None
    return InteractiveShell.instance() if InteractiveShell.initialized() else None


class MessagesView:
    """一张活的消息表：显示一次，之后 `update()` 原地刷新——但只在显示它的那一格运行期间。

    它保存的是同一个列表的引用，所以循环往 `messages` 里追加消息后，调用 `view.update()`
    就能看到列表当前的样子，同一格里页面上不会一张张往下堆。

    每张表都是它那一格的快照：格子跑完，表就定住了。后面的格子再调用 `update()`，
    会在那一格的输出里显示一张新表（从那一刻起由它接着刷新），前面那张保持原样，
    所以“运行全部”之后、或者打开保存过的笔记本时，每张表仍然是它那一步的样子。
    """

    def __init__(self, messages=None, title: str | None = None):
        self.messages = messages if messages is not None else []
        self.title = title
        self._handle = None
        self._shown_in = None  # 在第几次执行里显示的（用来避免同一格里显示两遍）

    # -- 渲染 --------------------------------------------------------------

    def frame(self):
        """当前消息的 `pandas.DataFrame`（见 `messages_frame`）。"""
        return messages_frame(self.messages)

    def html(self) -> str:
        """当前消息的 HTML。"""
        return messages_html(self.messages, self.title)

    def _repr_html_(self) -> str:
        return self.html()

    def __repr__(self) -> str:
        return messages_text(self.messages, self.title)

    __str__ = __repr__

    def _bundle(self) -> dict:
        return {"text/html": self.html(), "text/plain": repr(self)}

    # -- 显示与刷新 --------------------------------------------------------

    @property
    def display_id(self) -> str | None:
        """这张表的 display_id；还没显示过则为 None。"""
        return self._handle.display_id if self._handle is not None else None

    def show(self) -> None:
        """在当前位置显示一张新表；以后的 `update()` 刷新的是这一张。"""
        shell = _shell()
        if shell is None:
            print(repr(self))
            return
        from IPython.display import display

        self._handle = display(self._bundle(), raw=True, display_id=True)
        self._shown_in = shell.execution_count

    def update(self, messages=None) -> None:
        """按列表当前的内容重画。

        在显示这张表的那一格里：原地替换它。在后面的格子里：前一张表保持它那一格结束时的样子，
        在当前这一格显示一张新表。传入 `messages` 会改为跟踪这个新列表。还没显示过时，相当于 `show()`。
        """
        if messages is not None:
            self.messages = messages
        shell = _shell()
        if self._handle is None or (shell is not None and shell.execution_count != self._shown_in):
            self.show()
            return
        self._handle.update(self._bundle(), raw=True)

    def _ipython_display_(self) -> None:
        # 同一格里刚显示过（比如 `show_messages(...)` 写在格子最后一行）就只原地刷新，
        # 不再多出一张；在别的格子里求值则在那里显示一张新的活表。
        shell = _shell()
        if self._handle is not None and shell is not None and shell.execution_count == self._shown_in:
            self.update()
        else:
            self.show()

    def detail(self, i: int) -> None:
        """打印第 i 条消息的完整 JSON（缩进排版，中文原样显示）；内容有多行时再单独打印原文。"""
        msg = _as_dict(self.messages[i], i)
        print(f"第 {i if i >= 0 else len(self.messages) + i} 条消息：")
        print(json.dumps(msg, ensure_ascii=False, indent=2, default=str))
        text = msg.get("content")
        if isinstance(text, str) and "\n" in text:
            print("\n—— content 原文 ——")
            print(text)
        for cid, name, args in _calls_of(msg):
            if "\n" in args:
                print(f"\n—— {name} [{cid}] 的 arguments 原文 ——")
                print(args)


def show_messages(messages, title: str | None = None) -> MessagesView:
    """显示一张消息表并返回它；同一格里每轮调用 `view.update()` 原地刷新，后面的格子里另起一张。"""
    view = MessagesView(messages, title=title)
    view.show()
    return view
