"""消息表：`show_messages(messages)` 显示一张活的表，之后每轮 `view.update()` 原地刷新。
表先是一个 pandas 的 DataFrame（`table_frame`，`view.frame` 取得到，`messages_frame(messages)` 是同一张），
再从这张 DataFrame 画出 HTML 和纯文本：学习者查询的就是画出来的那些数据。
另外两种线路格式用同一张表：`show_items(items, api="responses")` 画 Responses API 的输入条目，
`show_items(messages, api="messages")` 画 Anthropic Messages API 的消息。三种格式先各自变成同样的“行”（`_Row`：
第二列的字、内容、提出的调用、回应的调用），再变成 DataFrame 的一行；配对、小标签、折叠和警告都是同一份代码。

表格按角色上色；同一个 `tool_call_id` 在助手行和工具行用同色的小标签，注明“由 pos 几回应”“回应 pos 几”（pos 就是表的第一列），没有回应的
调用标成“等回应”（一轮中间本来就这样），找不到调用的工具消息标红；长内容点开看全文。只用行内样式、不用脚本；样式被去掉时文字提示也还在。
表开着的时候假模型或切换器的客户端完成的调用，每条助手消息下面标出这次调用的用量和用时（假模型的用量是估计的，标着“估计”），
写到 `max_tokens` 被截断的标出来；
传了 `outcomes`（循环按调用 ID 记下的结局）时，每条工具消息标出它的层次。两样都读数据，不读消息的文字。
知道所选模型（`chosen`，由 `show_messages(..., chat=chat)` 或 `run_loop` 填上）时，标题说回复来自谁：
所选模型，还是替它作答的【脚本示范】（`scripted` 里的助手消息，按值认），这样的行另外标出。
"""

import json
from collections import Counter
from dataclasses import dataclass, field
from html import escape
from typing import Callable

import pandas as pd
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import display

from ..models.calls import calls_since, last_call_seq
from ..models.messages import as_dict, calls_of, text_of
from ..text import shorten

COLUMNS = ["pos", "role", "content", "tool_calls", "tool_call_id"]  # Chat 的表头
SCRIPTED = "【脚本示范】"  # 和 step.SCRIPTED 同一个记号：替所选模型作答的假模型
# pandas 的表（汇总表、自查表）在 JupyterLab 里的样子：表头和内容靠左，按内容分宽度（JupyterLab 默认靠右、
# table-layout: fixed，列一多“请求数”就一字一行）。切换器把它放在自己的输出里，网站用 site.css 里同样的规则。
DATAFRAME_STYLE = ("<style>.jp-RenderedHTMLCommon table.dataframe{table-layout:auto}"
                   ".jp-RenderedHTMLCommon table.dataframe th,.jp-RenderedHTMLCommon table.dataframe td"
                   "{text-align:left;vertical-align:top}"
                   ".jp-RenderedHTMLCommon table.dataframe thead th{white-space:nowrap}</style>")
PREVIEW_CHARS = 60
SHOWN_CHARS = 120  # 显示 DataFrame 时每格最多这么多字符
FULL_TEXT_CAP = 20_000  # 每个单元格最多嵌入这么多字符的全文
SCROLL_CUE_ROWS = 6  # 超过这么多行，表框底边贴一行“上下滚动”的提示（表框最高 420 像素）
TOTAL_FULL_TEXT = 400_000  # 整张表最多嵌入这么多（先给最新的消息），超出后只给预览
# 底色按角色；另外两种线路格式的条目类型借用同样的颜色（调用像助手、回应像工具），推理条目单给一种
ROLE_COLORS = {"system": "#eef0f4", "developer": "#eef0f4", "user": "#e6f0ff", "assistant": "#e9f7ec", "tool": "#fff5dc",
               "reasoning": "#f3eefc"}
CALL_COLORS = [("#dbeafe", "#3b82f6"), ("#fce7f3", "#db2777"), ("#ede9fe", "#7c3aed"), ("#ccfbf1", "#0d9488"),
               ("#fef3c7", "#d97706"), ("#e0e7ff", "#4f46e5"), ("#ecfccb", "#65a30d"), ("#ffedd5", "#ea580c")]
_WARN = "#b42318"
_TD = 'style="text-align:left;vertical-align:top;padding:3px 8px"'
_TH = ('style="position:sticky;top:0;z-index:1;background:#f6f8fa;text-align:left;'
       'padding:4px 8px;border-bottom:1px solid #d0d7de;white-space:nowrap"')
_PRE = ('style="white-space:pre-wrap;word-break:break-word;margin:4px 0;padding:6px;max-height:320px;'
        'overflow:auto;background:#fff;border:1px solid #e3e6ea;border-radius:4px;font-size:12px"')
_CHIP = "border-radius:9px;padding:0 6px;font-size:11.5px;white-space:nowrap"


def _rows(messages) -> list[dict]:
    rows = [as_dict(m) for m in messages]
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise TypeError(f"第 {i} 条消息既不是 dict 也不是 SDK 消息对象，而是 {type(row).__name__}")
    return rows


def _preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """前 `limit` 个字符，换行显示为 ⏎，截断处加 …。"""
    return shorten(text, limit).replace("\r\n", "⏎").replace("\n", "⏎").replace("\r", "⏎")


class MessagesFrame(pd.DataFrame):
    """`table_frame` 的结果：显示时每格最多 `SHOWN_CHARS` 个字符（pandas 默认 50，两个调用常常只差在最后的 id；
    全文在数据里，显示时不整段铺开）。只在显示时设这个选项，不改全局的 pandas 选项。"""

    @property
    def _constructor(self):
        return MessagesFrame

    def _repr_html_(self):
        with pd.option_context("display.max_colwidth", SHOWN_CHARS):
            return super()._repr_html_()

    def __repr__(self) -> str:
        with pd.option_context("display.max_colwidth", SHOWN_CHARS, "display.max_columns", None, "display.width", 0):
            return super().__repr__()


# ---------------------------------------------------------------------------
# 三种线路格式 → 同样的行：配对、小标签、折叠都只写一份
# ---------------------------------------------------------------------------


@dataclass
class _Row:
    """表上的一行，不管来自哪种线路格式。`role`：第二列的字（也决定底色，`color` 另给时除外）；`parts`：内容，
    一段或几段，每段是（小标题, 文字），Chat 只有一段、没有小标题；`calls`：这一行提出的调用 (id, 工具名, 参数原文)；
    `answers`：这一行回应的调用 (id, is_error)；`tagged`：不是回应、却带着配对字段的行，只画它的小标签；
    `reply`：这一行是模型交回来的（【脚本示范】按它标）。"""

    role: str
    parts: list = field(default_factory=lambda: [("", "")])
    calls: list = field(default_factory=list)
    answers: list = field(default_factory=list)
    tagged: str | None = None
    reply: bool = False
    color: str | None = None


def _args(value) -> str:
    """参数的原文：Chat 和 Responses 给的是字符串，原样；Anthropic 给的是对象，写成 JSON。"""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _sealed(secret) -> str:
    """加密的或签名的内容：只给开头，说一共多长（读不懂，也不该改，原样带回去）。"""
    secret = str(secret or "")
    return f"{secret[:16]}…（共 {len(secret)} 个字符，原样带回）" if len(secret) > 16 else secret


def _chat_row(message: dict) -> _Row:
    role = str(message.get("role", ""))
    cid = str(message.get("tool_call_id") or "")
    return _Row(role, [("", text_of(message.get("content")))], calls_of(message),
                [(cid, None)] if role == "tool" else [], cid if role != "tool" and "tool_call_id" in message else None,
                role == "assistant")


def _responses_row(item: dict) -> _Row:
    """Responses API 的一个条目：消息、`function_call`、`function_call_output`、`reasoning`，别的类型原样给 JSON。"""
    kind = item.get("type") or ("message" if "role" in item else "")
    if kind == "message":
        role = str(item.get("role", ""))
        return _Row(role, [("", text_of(item.get("content")))], reply=role == "assistant")
    if kind == "function_call":
        call = (str(item.get("call_id") or ""), str(item.get("name") or "?"), _args(item.get("arguments", "")))
        return _Row(kind, calls=[call], reply=True, color="assistant")
    if kind == "function_call_output":
        return _Row(kind, [("", text_of(item.get("output")))], answers=[(str(item.get("call_id") or ""), None)],
                    color="tool")
    if kind == "reasoning":
        summary = "\n".join(str(p.get("text", "")) for p in item.get("summary") or () if isinstance(p, dict))
        parts = [("summary", summary)] if summary else []
        parts += [("content", text_of(item.get("content")))] if item.get("content") else []
        parts += [("encrypted_content", _sealed(item["encrypted_content"]))] if item.get("encrypted_content") else []
        return _Row(kind, parts or [("", "")], reply=True)
    return _Row(kind or "（没有 type）", [("", _args(item))])


def _messages_row(message: dict) -> _Row:
    """Anthropic Messages API 的一条消息：内容是字符串，或者块的列表（`text`、`tool_use`、`tool_result`、`thinking`……）。
    一条用户消息可以装着几个 `tool_result` 块，各回应一个调用。"""
    role, content = str(message.get("role", "")), message.get("content")
    if not isinstance(content, (list, tuple)):
        return _Row(role, [("", text_of(content))], reply=role == "assistant")
    parts, calls, answers = [], [], []
    for block in map(as_dict, content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append(("", str(block.get("text", ""))))
        elif kind == "tool_use":
            calls.append((str(block.get("id") or ""), str(block.get("name") or "?"), _args(block.get("input", {}))))
        elif kind == "tool_result":
            answers.append((str(block.get("tool_use_id") or ""), bool(block.get("is_error"))))
            parts.append(("tool_result", text_of(block.get("content"))))
        elif kind == "thinking":
            parts.append(("thinking", str(block.get("thinking", ""))))
            parts += [("signature", _sealed(block["signature"]))] if block.get("signature") else []
        elif kind == "redacted_thinking":
            parts.append(("redacted_thinking", _sealed(block.get("data"))))
        else:
            parts.append((str(kind or "?"), _args(block)))
    only_results = answers and len(parts) == len(answers)
    return _Row(role, parts or [("", "")], calls, answers, reply=role == "assistant",
                color="tool" if only_results else None)


@dataclass(frozen=True)
class _Wire:
    """一种线路格式在表上的说法：列名、配对字段、一行叫什么、回应叫什么、行从哪里来。"""

    columns: tuple
    id_name: str  # 配对字段：tool_call_id、call_id、tool_use_id
    measure: str  # 量词
    noun: str  # 一行是什么：消息、条目
    answer: str  # 回应调用的东西，带量词
    source: str  # 全文在哪个变量里，例如 "messages[{pos}]"
    row: Callable[[dict], _Row]

    @property
    def unit(self) -> str:
        return self.measure + self.noun


WIRES = {
    "chat": _Wire(tuple(COLUMNS), "tool_call_id", "条", "消息", "条工具消息", "messages[{pos}]", _chat_row),
    "responses": _Wire(("pos", "type · role", "content", "function_call", "call_id"), "call_id", "个", "条目",
                       "个 function_call_output 条目", "items[{pos}]", _responses_row),
    "messages": _Wire(("pos", "role", "content", "tool_use", "tool_use_id"), "tool_use_id", "条", "消息",
                      "个 tool_result 块", "messages[{pos}]", _messages_row),
}


def _wire(api: str) -> _Wire:
    if api not in WIRES:
        raise ValueError(f"api 只能是 {'、'.join(map(repr, WIRES))}，收到 {api!r}")
    return WIRES[api]


def table_rows(messages, api: str = "chat") -> list[_Row]:
    """每条消息（或条目）变成表上的一行（`_Row`）：`ui.step` 也按它数回复和调用。"""
    wire = _wire(api)
    return [wire.row(r) for r in _rows(messages)]


class _Pairing:
    """每个调用 id 由哪一行提出、由哪几行回应，以及它的小标签用哪种颜色。按每行提出的调用 id 和回应的调用 id 算
    （DataFrame 的 `calls`、`answers` 两列），行号就是 `pos`。不管先后：服务商那条讲先后的规矩
    （调用之后紧跟着回应）在 `checks.pairing_error`。"""

    def __init__(self, positions, calls, answers, wire: _Wire = WIRES["chat"]):
        self.wire = wire
        self.call_pos: dict[str, int] = {}  # id → 提出它的行
        self.answer_pos: dict[str, list[int]] = {}  # id → 回应它的各行
        for pos, called, answered in zip(positions, calls, answers):
            for cid in called:
                self.call_pos.setdefault(cid, pos)
            for cid in answered:
                self.answer_pos.setdefault(cid, []).append(pos)
        first = dict(self.call_pos)  # 每个 id 第一次出现的行：提出它的，或更早的回应
        for cid, answered in self.answer_pos.items():
            first[cid] = min(first.get(cid, answered[0]), answered[0])
        self.color = {cid: n for n, cid in enumerate(sorted(first, key=first.get))}  # 颜色序号

    @classmethod
    def of(cls, frame: pd.DataFrame, wire: _Wire) -> "_Pairing":
        return cls(frame.index, frame["calls"], frame["answers"], wire)

    def waiting(self) -> list[str]:  # 表头上方：还在等回应的调用（一轮中间本来就这样）
        return self._lines([(c, p) for c, p in self.call_pos.items() if c not in self.answer_pos],
                           "… 有 {n} 个工具调用还没有回应（执行、写回之前就是这样；下一次请求之前要补齐）：")

    def problems(self) -> list[str]:  # 表头上方：真正的错，找不到调用的回应
        return self._lines([(c, p) for c, ps in self.answer_pos.items() if c not in self.call_pos for p in ps],
                           "⚠ 有 {n} " + self.wire.answer + "找不到对应的调用：")

    @staticmethod
    def _lines(found: list, what: str) -> list[str]:
        if not found:
            return []
        where = "、".join(f"{c or '（空）'}（pos {p}）" for c, p in found[:5])
        return [what.format(n=len(found)) + where + (" 等" if len(found) > 5 else "")]


TABLE_COLUMNS = ("pos", "role", "content", "calls", "tools", "arguments", "answers", "answered_by", "answers_pos",
                 "prompt_tokens", "completion_tokens", "seconds", "estimated", "finish_reason", "layer", "scripted",
                 "parts", "is_error", "layers", "tagged", "shade")


def table_frame(messages, api: str = "chat", *, outcomes=None, turns=None, scripted=()) -> MessagesFrame:
    """消息表此刻的数据，一行一条消息（或条目），索引 `pos` 与列表的下标一致；表格就是从这张 DataFrame 画出来的，
    配对、用量、层次都是列，可以直接查询：
    `content` 全文；`calls` 这一行提出的调用 id，`tools`、`arguments` 是它们的工具名和参数原文；`answers` 它回应的调用 id，
    `answered_by` 回应这些调用的行，`answers_pos` 被回应的调用在哪一行；`prompt_tokens`、`completion_tokens`、`seconds`、
    `estimated`、`finish_reason` 是那次调用的记录（没有就是空）；`layer` 是循环记下的结局的层次；`scripted` 是【脚本示范】给的行。
    画表还用到的几列：`parts` 内容的各段（小标题, 文字），`is_error`、`layers` 和 `answers` 一一对应（每个回应的
    `is_error` 和层次），`tagged` 不是回应、却带着配对字段的行的 id，`shade` 这一行的底色跟哪个角色。"""
    wire, rows = _wire(api), table_rows(messages, api)
    calls = [[cid for cid, _, _ in row.calls] for row in rows]
    answers = [[cid for cid, _ in row.answers] for row in rows]
    pairing, turns, outcomes = _Pairing(range(len(rows)), calls, answers, wire), turns or {}, outcomes or {}
    records = []
    for pos, row in enumerate(rows):
        turn, answered = turns.get(pos), answers[pos]
        layers = [getattr(outcomes.get(cid), "layer", None) for cid in answered]
        records.append({
            "pos": pos, "role": row.role, "content": "\n".join(text for _, text in row.parts if text),
            "calls": calls[pos], "tools": [name for _, name, _ in row.calls], "arguments": [a for _, _, a in row.calls],
            "answers": answered,
            "answered_by": sorted({p for cid in calls[pos] for p in pairing.answer_pos.get(cid, ())}),
            "answers_pos": next((pairing.call_pos[cid] for cid in answered if cid in pairing.call_pos), None),
            "prompt_tokens": getattr(turn, "prompt_tokens", None),
            "completion_tokens": getattr(turn, "completion_tokens", None),
            "seconds": getattr(turn, "seconds", None), "estimated": getattr(turn, "estimated", None),
            "finish_reason": getattr(turn, "finish_reason", None),
            "layer": next((layer for layer in layers if layer), None), "scripted": pos in scripted,
            "parts": list(row.parts), "is_error": [e for _, e in row.answers], "layers": layers,
            "tagged": row.tagged, "shade": row.color or row.role})
    return MessagesFrame(records, columns=list(TABLE_COLUMNS)).set_index("pos").astype(
        {"answers_pos": "Int64", "prompt_tokens": "Int64", "completion_tokens": "Int64", "scripted": bool})


def messages_frame(messages) -> MessagesFrame:
    """消息表画的那张 DataFrame（`table_frame(messages)`）：每条消息（dict 或 SDK 对象）一行，索引 `pos` 与
    `messages[i]` 一致。"""
    return table_frame(messages)


def _chip(cid: str, pairing: _Pairing) -> str:
    bg, border = CALL_COLORS[pairing.color.get(cid, 0) % len(CALL_COLORS)]
    return (f'<span style="background:{bg};border:1.5px solid {border};{_CHIP};font-family:monospace">'
            f"{escape(cid) or '（空）'}</span>")


def _warn(text: str) -> str:
    return f'<span style="background:{_WARN};color:#fff;font-weight:600;{_CHIP}">{escape(text)}</span>'


def _badge(text: str, background: str, border: str, color: str) -> str:
    return f'<span style="background:{background};border:1px solid {border};color:{color};{_CHIP}">{escape(text)}</span>'


def _pending(text: str) -> str:  # 一轮中间的正常状态：醒目，但不是错误的红色
    return _badge(text, "#fff8c5", "#bf8700", "#6f4e00")


def _hint(text: str) -> str:
    return f'<span style="color:#57606a;font-size:11.5px;white-space:nowrap">{escape(text)}</span>'


def _cell(text: str, where: str, budget: list[int], code: bool = False) -> str:
    """短文字直接显示；长的或多行的折叠成 <details>，点开看全文（全文有上限）。`where`：全文在哪里（`messages[3]`）。"""
    shown = f'<code style="font-size:12px">{escape(_preview(text))}</code>' if code else escape(_preview(text))
    if len(text) <= PREVIEW_CHARS and "\n" not in text and "\r" not in text:
        return shown
    cap = min(FULL_TEXT_CAP, budget[0])
    budget[0] -= min(len(text), cap)
    body = escape(text[:cap])
    if len(text) > cap:
        body += escape(f"\n……（还有 {len(text) - cap} 个字符没有嵌入这张表，全文在 {where} 里）")
    return f'<details><summary style="cursor:pointer">{shown}</summary><pre {_PRE}>{body}</pre></details>'


def _stacked(cells: list[str]) -> str:
    """一格里的几项：一项直接放，几项各占一行。"""
    return cells[0] if len(cells) == 1 else "".join(f'<div style="margin:1px 0">{c}</div>' for c in cells)


def _content_cell(parts, where: str, budget: list[int]) -> str:
    """内容（`parts` 列）：一段没有小标题的（Chat 的每条消息）直接放；几段的（Anthropic 的块、推理条目）每段一行，
    前面是小标题。"""
    return _stacked([(_hint(label) + " " if label else "") + _cell(text, where, budget) for label, text in parts])


def _calls_cell(row, pairing: _Pairing, where: str, budget: list[int]) -> str:
    """提出的调用（`calls`、`tools`、`arguments` 三列）：小标签、工具名、参数，由哪几行回应（或还在等回应）。"""
    parts = []
    for cid, name, args in zip(row.calls, row.tools, row.arguments):
        answers = pairing.answer_pos.get(cid)
        status = _hint(f"→ 由 pos {'、'.join(map(str, answers))} 回应") if answers else _pending("等回应")
        parts.append(f'<div style="margin:1px 0">{_chip(cid, pairing)} <b style="font-family:monospace">'
                     f"{escape(name)}</b>({_cell(args, where, budget, code=True)}) {status}</div>")
    return "".join(parts)


def _id_cell(row, pairing: _Pairing) -> str:
    """回应的行（`answers`、`is_error`、`layers` 三列）：每个回应一项，小标签、回应哪一行（或找不到调用）、
    `is_error`、循环记下的层次。"""
    if not row.answers:
        return "" if pd.isna(row.tagged) else _chip(row.tagged, pairing)
    cells = []
    for cid, is_error, layer in zip(row.answers, row.is_error, row.layers):
        if not cid:
            cells.append(_warn(f"⚠ 缺少 {pairing.wire.id_name}"))
            continue
        shown = ("" if not is_error else " " + _layer("is_error")) + (  # 层次是循环记下的结局，不从文字里猜
            "" if layer is None else " " + (_hint("✓ 成功") if layer == "成功" else _layer(layer)))
        found = (_hint(f"↩ 回应 pos {pairing.call_pos[cid]}") if cid in pairing.call_pos
                 else _warn("⚠ 找不到对应的调用"))
        cells.append(f"{_chip(cid, pairing)} {found}{shown}")
    return _stacked(cells)


def _layer(text: str) -> str:  # 失败的层次：处理函数之前停下的，或动手后出错的
    return _badge(text, "#fff1d6", "#d97706", "#7c2d12")


def _role_cell(role: str, turn, scripted: bool = False) -> str:
    """角色；助手消息下面再标这次调用的用量、用时，被 max_tokens 截断时标出来（没有记录就不标）；
    【脚本示范】给的助手消息标出来。`turn`：有 `prompt_tokens`、`completion_tokens`、`estimated`、`seconds`、
    `finish_reason` 的东西（DataFrame 的一行，或一条 `CallRecord`）。"""
    cell = f"<b>{escape(role)}</b>" + (f"<br>{_pending(SCRIPTED)}" if scripted else "")
    if turn is None:
        return cell
    used = "+".join(str(n) for n in (turn.prompt_tokens, turn.completion_tokens) if pd.notna(n))
    used = f"估计 {used}" if used and turn.estimated else used  # 假模型的用量按字数估计，不是服务商数的
    parts = ([f"{used} token"] if used else []) + [f"{turn.seconds:.2f} 秒" if turn.seconds >= 0.01 else "不到 0.01 秒"]
    cell += f"<br>{_hint(' · '.join(parts))}"
    if turn.finish_reason == "length":
        cell += f"<br>{_warn('⚠ 写到 max_tokens 被截断')}"
    return cell


def frame_html(frame: pd.DataFrame, api: str = "chat", title: str | None = None, whose: str | None = None) -> str:
    """从消息表的 DataFrame（`table_frame` 的结果）画出整张表的 HTML（只用行内样式，不用脚本）。
    `whose`：标题里“回复来自谁”那一句。"""
    wire = _wire(api)
    title = " · ".join(filter(None, [title, whose]))
    pairing = _Pairing.of(frame, wire)
    legend = " ".join(f'<span style="background:{ROLE_COLORS.get(role, "#f5f5f5")};border:1px solid #d0d7de;'
                      f'border-radius:4px;padding:0 6px;white-space:nowrap">{escape(role or "（无 role）")} {n}</span>'
                      for role, n in Counter(frame["role"]).items())
    head = (f"<b>{escape(title)}</b> · " if title else "") + f"共 {len(frame)} {wire.unit} {legend}"
    if pairing.color:
        head += " " + _hint(f"同色小标签 = 同一个 {wire.id_name}")
    out = ['<div class="messages-view" style="font-size:13px;color:#1f2328;line-height:1.45;max-width:100%">',
           f'<div style="margin:2px 0 4px">{head}</div>']
    out += [f'<div style="color:#6f4e00;margin:2px 0">{escape(line)}</div>' for line in pairing.waiting()]
    out += [f'<div style="color:{_WARN};font-weight:600;margin:2px 0">{escape(line)}</div>'
            for line in pairing.problems()]
    out.append('<div style="max-height:420px;overflow:auto;border:1px solid #d0d7de;border-radius:6px;'
               'background:#fff"><table style="border-collapse:collapse;width:100%;margin:0;font-size:12.5px;'
               # JupyterLab 给渲染出的表格 table-layout: fixed，五列就一样宽；这里按内容分配宽度
               'color:#1f2328;table-layout:auto"><thead><tr>' + "".join(f"<th {_TH}>{h}</th>" for h in wire.columns)
               + "</tr></thead><tbody>")
    if frame.empty:
        out.append(f'<tr><td colspan="5" {_TD}>（还没有{wire.noun}）</td></tr>')
    budget, body = [TOTAL_FULL_TEXT], []
    for row in reversed(list(frame.itertuples())):  # 倒着画：全文预算先给最新的消息
        pos, where = row.Index, wire.source.format(pos=row.Index)
        turn = row if pd.notna(row.seconds) else None  # 这一行有调用记录：用量、用时都是这一行的列
        cells = [f'<span style="color:#57606a">{pos}</span>', _role_cell(row.role, turn, row.scripted),
                 _content_cell(row.parts, where, budget), _calls_cell(row, pairing, where, budget),
                 _id_cell(row, pairing)]
        background = ROLE_COLORS.get(row.shade, "#f5f5f5")
        body.append(f'<tr style="background:{background};border-bottom:1px solid #e3e6ea">'
                    + "".join(f'<td data-label="{name}" {_TD}>{cell}</td>' for name, cell in zip(wire.columns, cells))
                    + "</tr>")
    out += reversed(body)
    out.append("</tbody>")
    if len(frame) > SCROLL_CUE_ROWS:  # 行多时表框会滚动：底边贴一行提示，框里还有行就看得见它
        out.append(f'<tfoot><tr><td colspan="5" style="position:sticky;bottom:0;background:#f6f8fa;color:#57606a;'
                   f'border-top:1px solid #d0d7de;font-size:11.5px;padding:2px 8px">↕ 共 {len(frame)} {wire.unit}，'
                   "放不下时在框里上下滚动</td></tr></tfoot>")
    out.append("</table></div></div>")
    return "".join(out)


def frame_text(frame: pd.DataFrame, api: str = "chat", title: str | None = None, last: int = 30,
               whose: str | None = None) -> str:
    """纯文本版本（控制台、保存下来的 text/plain），也从 DataFrame 画：计数和最后 `last` 行的角色（或条目类型），
    再是问题提示。"""
    wire = _wire(api)
    roles = list(frame["role"])
    title = " · ".join(filter(None, [title, whose]))
    shown = ("… → " if len(roles) > last else "") + " → ".join(roles[-last:])
    head = (f"{title} · " if title else "") + f"共 {len(roles)} {wire.unit}" + (
        f"：{shown}" if roles else f"（还没有{wire.noun}）")
    pairing = _Pairing.of(frame, wire)
    return "\n".join([head, *pairing.waiting(), *pairing.problems()])


def messages_html(messages, title: str | None = None, outcomes=None, turns=None, whose: str | None = None,
                  scripted=(), api: str = "chat") -> str:
    """整张表的 HTML：先 `table_frame`，再从它画（`frame_html`）。`outcomes`：调用 ID → 结局（有 `.layer`）；
    `turns`：位置 → 那条助手消息对应的 `CallRecord`；`whose`：标题里“回复来自谁”那一句；`scripted`：【脚本示范】给的行的位置；
    `api`：`"chat"`（Chat Completions 的 messages）、`"responses"`（Responses 的输入条目）或 `"messages"`（Anthropic）。"""
    frame = table_frame(messages, api, outcomes=outcomes, turns=turns, scripted=scripted)
    return frame_html(frame, api, title, whose)


def messages_text(messages, title: str | None = None, last: int = 30, whose: str | None = None,
                  api: str = "chat") -> str:
    """纯文本版本：先 `table_frame`，再从它画（`frame_text`）。"""
    return frame_text(table_frame(messages, api), api, title, last, whose)


def _execution_count() -> int | None:  # 不在 IPython 里是 None
    return InteractiveShell.instance().execution_count if InteractiveShell.initialized() else None


class MessagesView:
    """一张活的消息表。它保存列表的引用：循环往 `messages` 里追加后 `view.update()` 就能看到此刻的样子。
    每张表是它那一格的快照：在显示它的那一格里原地刷新，在后面的格子里 `update()` 会另起一张，前面那张保持原样。
    `api`：列表是哪种线路格式（`"chat"`、`"responses"`、`"messages"`，见 `messages_html`）。"""

    def __init__(self, messages=None, title: str | None = None, outcomes=None, chat=None, api: str = "chat"):
        self.api, self._wire = api, _wire(api)
        self.messages = messages if messages is not None else []
        self.title = title
        self.outcomes = outcomes  # 循环按调用 ID 记下的结局（同一个字典，循环往里写）
        # 回复来自谁：所选模型的名字（None 时标题不说），【脚本示范】替它给出的助手消息（和 chat 共用同一个列表）
        self.chosen = getattr(chat, "model", None)
        self.scripted: list = chat.scripted_replies if chat is not None else []
        self._handle = self._shown_in = self.display_id = None  # 显示句柄、在第几次执行里显示的、它的 display_id
        self._seq = last_call_seq()
        self._seen: dict[int, tuple] = {}  # id(助手消息) → (那条消息, 对上的 CallRecord 或 None)
        self._match_calls()  # 表建好之前就在的助手消息算见过，不对上任何调用

    @property
    def turns(self) -> dict:
        """位置 → 那条助手消息对应的 CallRecord（按消息对象本身认，记录被退回又重写时不会张冠李戴）。"""
        out = {}
        for pos, message in enumerate(self.messages):
            seen = self._seen.get(id(message))
            if seen is not None and seen[0] is message and seen[1] is not None:
                out[pos] = seen[1]
        return out

    def _match_calls(self) -> None:
        """表开着以后记下的调用（`harness_lib.models.calls`），按先后对上新出现的助手消息；条数对不上（有的调用
        没有记录，比如自己新建的 openai.OpenAI）就不标，宁可空着也不标错。"""
        if self.api != "chat":  # 记下的是 chat.completions 的调用，对不上另外两种格式的行
            return
        new = [m for m in self.messages if self.is_reply(m)
               and not (id(m) in self._seen and self._seen[id(m)][0] is m)]
        records = calls_since(self._seq)
        matched = records if records and len(records) == len(new) else [None] * len(new)
        for message, record in zip(new, matched):
            self._seen[id(message)] = (message, record)
        if records:
            self._seq = records[-1].seq

    def is_reply(self, message) -> bool:
        """这一行是模型交回来的吗：Chat 和 Anthropic 的助手消息，Responses 的输出条目（推理、调用、助手消息）。"""
        return self._wire.row(as_dict(message)).reply

    def scripted_positions(self) -> list[int]:
        """【脚本示范】给的行在表里的位置（按值认：追加进 messages 的是同样的字典）。"""
        return [pos for pos, m in enumerate(self.messages) if self.is_reply(m)
                and any(m is known or as_dict(m) == as_dict(known) for known in self.scripted)]

    def whose(self) -> str | None:
        """标题里的一句：回复来自所选模型，还是【脚本示范】；不知道所选模型时是 None。"""
        if self.chosen is None:
            return None
        scripted = self.scripted_positions()
        replies = sum(1 for m in self.messages if self.is_reply(m))
        if not scripted:
            return f"回复来自所选模型 {self.chosen}"
        if len(scripted) == replies:
            return f"回复来自{SCRIPTED}的假模型（所选模型 {self.chosen} 没给出要的回复）"
        return f"回复来自所选模型 {self.chosen}，pos {'、'.join(map(str, scripted))} 来自{SCRIPTED}"

    def _frame(self) -> MessagesFrame:
        return table_frame(self.messages, self.api, outcomes=self.outcomes, turns=self.turns,
                           scripted=set(self.scripted_positions()))

    def _bundle(self) -> dict:
        """这一刻的两种样子，从同一张 DataFrame 画出来。"""
        frame, whose = self._frame(), self.whose()
        return {"text/html": frame_html(frame, self.api, self.title, whose),
                "text/plain": frame_text(frame, self.api, self.title, whose=whose)}

    def html(self) -> str:
        return frame_html(self._frame(), self.api, self.title, self.whose())

    _repr_html_ = html

    def __repr__(self) -> str:
        return frame_text(self._frame(), self.api, self.title, whose=self.whose())

    def show(self) -> None:
        """在当前位置显示一张新表；以后的 `update()` 刷新的是这一张。不在 IPython 里就打印文字版。"""
        if _execution_count() is None:
            print(repr(self))
            return
        self._handle = display(self._bundle(), raw=True, display_id=True)
        self._shown_in, self.display_id = _execution_count(), self._handle.display_id

    def update(self, messages=None) -> None:
        """按列表此刻的内容重画：在显示它的那一格里原地替换，在后面的格子里另起一张。"""
        if messages is not None:
            self.messages = messages
        self._match_calls()  # 每轮对一次，只在这里：不显示（不在 IPython 里）时也按轮对上
        if self._handle is None or _execution_count() != self._shown_in:
            self.show()
        else:
            self._handle.update(self._bundle(), raw=True)

    @property
    def frame(self) -> MessagesFrame:
        """这张表此刻的数据（`table_frame`）：表格就是从这张 pandas 的 DataFrame 画出来的，可以查询，例如
        `view.frame.query("role == 'tool'")`、`view.frame.completion_tokens.sum()`。"""
        self._match_calls()
        return self._frame()

    def _ipython_display_(self) -> None:
        self.update()  # 同一格里刚显示过（`show_messages(...)` 写在最后一行）就只原地刷新，不多出一张


def show_messages(messages, title: str | None = None, outcomes=None, chat=None) -> MessagesView:
    """显示一张消息表并返回它；同一格里每轮 `view.update()` 原地刷新，后面的格子里另起一张。
    `outcomes`：传给循环的同一个字典，工具消息就标出各自的层次。`chat`：回复经过的 `Chat`，标题就说回复来自
    所选模型还是【脚本示范】。"""
    view = MessagesView(messages, title=title, outcomes=outcomes, chat=chat)
    view.show()
    return view


def show_items(items, title: str | None = None, api: str = "responses", outcomes=None, chat=None) -> MessagesView:
    """另外两种线路格式的活表，和 `show_messages` 同样用法：`api="responses"` 时 `items` 是 Responses API 的输入条目
    （`function_call` 和 `function_call_output` 按 `call_id` 配对，`reasoning` 条目单独一行），`api="messages"` 时是
    Anthropic Messages API 的消息（`tool_use` 块和 `tool_result` 块按 `tool_use_id` 配对，`is_error` 标出来）。"""
    view = MessagesView(items, title=title, outcomes=outcomes, chat=chat, api=api)
    view.show()
    return view
