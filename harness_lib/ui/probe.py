"""兼容性探针：用十来个和循环一样的小请求逐项检查一个端点，结果是一张中文表（09 讲怎么读）。

每一项兜住自己的错误；每个 ✗ 在 `hint` 写着办法，同一个错误再出现、或要用到前面没通过的结果时写“先解决第 N 项”。
"""

import json

import openai
import pandas as pd
import pydantic

from ..models.errors import EndpointError, classify, explain_error
from ..models.messages import calls_of
from ..models.streaming import accumulate
from ..safety.runner import BASH_TOOL
from .step import clip

LIST_PY = "列出当前目录中的 Python 文件"
GREETING = "你好！请用一句话介绍你自己。"
OK, FAIL, INFO = "✓", "✗", "ℹ"

# 每一项不通过时：对本系列的循环意味着什么（IMPACT），怎么办（HINTS）
IMPACT = {
    "普通对话": "连最基本的请求都走不通：先检查 base_url、模型名和密钥。",
    "提供工具后返回 tool_calls": "模型只会用文字描述命令，循环第一轮就因为没有 tool_calls 而结束，什么都没执行。",
    '写明 tool_choice="auto"': "有的服务不写 tool_choice 就不看工具；写明了才调用。循环默认不写。",
    "arguments 是合法 JSON": "每次调用都会变成“调用解析失败”的工具消息，模型要多花几轮重试。",
    "接受工具结果": "第二轮请求就会被拒绝：循环追加的助手消息或 tool 消息，这个服务不接受。",
    "reasoning_content 的往返": "思考模式的服务要求把 reasoning_content 传回去；丢了它，带工具调用的第二轮就 400。",
    'tool_choice="required"': "不能强制模型调用工具；本系列的循环不依赖它。",
    "流式输出里的工具调用增量": "stream=True 时拼不出工具调用，流式循环用不了；非流式循环不受影响。",
    "报告用量（usage）": "统计不了 token 用量，within_budget 的 max_tokens_total 不起作用；循环本身照常。",
    "响应里的扩展字段": "不是错误。model_dump 会把这些字段带进 messages，下一次请求会原样发回，要确认服务接受。",
}
HINTS = {
    "普通对话": "核对 base_url（通常以 /v1 结尾）、模型名和密钥；detail 里有服务器原话。",
    "提供工具后返回 tool_calls": "换一个支持工具调用的模型（小模型常常只会把调用写成文字）；Ollama 选标着 tools 的模型。",
    '写明 tool_choice="auto"': "这个服务不接受 tool_choice 参数：请求里别写它，循环默认就不写。",
    "arguments 是合法 JSON": "换更大的模型，或把工具参数设计得更简单；循环会把解析失败写回 tool 消息，让模型重试。",
    "接受工具结果": "读 detail 里的原话：常见是 tool 消息的格式或 tool_call_id 不被接受，或者缺了某个扩展字段。",
    "reasoning_content 的往返": "用 model_dump() 追加整条消息，别自己拼字典；流式时用 accumulate 拼回，它保留这个字段。",
    'tool_choice="required"': '不要传 tool_choice="required"；本系列的循环本来就不传。',
    "流式输出里的工具调用增量": "这个服务的流式工具调用不可用：改用非流式的 agent_loop。",
    "报告用量（usage）": "流式没有用量时，within_budget 的 max_tokens_total 不起作用，改用 max_turns 和 max_seconds。",
    "响应里的扩展字段": "这一项本来只是提示；出错时先按 detail 里的说明修好前面的问题。",
}
NO_CONTENT_HINT = '追加助手消息前补上 "content": ""（llama.cpp 一类的服务需要）。'
NEEDS_AUTO_HINT = '这个服务要写明 tool_choice="auto" 才调用工具：在循环调模型的那一行加上它，或者换一个服务或模型。'
ERROR_HINT = "这是端点本身的错误，和这一项检查的内容无关：按 detail 里的说明处理，再探一次。"
TIMEOUT_HINT = "本机模型常常是还在加载或太慢：等它加载好再探，或调大 probe 的 timeout（这次是 {timeout:g} 秒）。"
JINJA_HINT = "这台 llama-server 没开 jinja 模板，不接受 tools：升级到 llama.cpp PR #17524（2025-11）以后的构建，或启动时加 --jinja。"
NO_CHAT_TOOLS_HINT = "这个模型在这里的 Chat Completions 里带不了工具：换 detail 里列出的能调用工具的模型，或者用离线假模型。"
AS_IS = "结论：本系列的循环在这里照原样能跑。"
_CUT = {"length": "（finish_reason=length：回复被 max_tokens 截断，可以调大 probe 的 max_tokens 再试）"}


class _Blocked(Exception):
    """要用到前面几项的结果，它们都没通过。args：(说明, 那几项是第几项, 这一行的结果)。"""


class _Context:
    """一次探测的共享状态：统一的请求参数，以及后面几项要复用的响应。"""

    def __init__(self, client, model: str, timeout: float, max_tokens: int):
        self.client, self.model, self.timeout, self.max_tokens = client, model, timeout, max_tokens
        self.key = getattr(client, "api_key", None)  # 说明里要抹掉的密钥
        self.responses, self.chunks = [], []  # 非流式的 ChatCompletion；所有流式块
        self.tool_reply = None  # 带 tool_calls 的那条回复消息
        self.tools = {"tools": [BASH_TOOL]}  # 后面几项带的工具；要写明才调用时（llama-cpp-python）加上 tool_choice

    def chat(self, messages, stream: bool = False, **kwargs):
        """发一句话（或一组消息），返回 (助手消息, finish_reason)；`stream=True` 时返回所有流式块。"""
        request = {"model": self.model, "timeout": self.timeout, "max_tokens": self.max_tokens,
                   "messages": [{"role": "user", "content": messages}] if isinstance(messages, str) else messages,
                   **({"stream": True, "stream_options": {"include_usage": True}} if stream else {}), **kwargs}
        try:
            reply = self.client.chat.completions.create(**request)
        except openai.APIConnectionError as exc:  # 上一项的流被服务端关掉后，连接池里可能留着死连接：再发一次
            if isinstance(exc, openai.APITimeoutError):
                raise
            reply = self.client.chat.completions.create(**request)
        if stream:
            with reply:
                chunks = list(reply)
            self.chunks += chunks
            return chunks
        self.responses.append(reply)
        if not getattr(reply, "choices", None):
            raise EndpointError("no_choices", "响应里没有 choices：服务返回了空结果。")
        return reply.choices[0].message, reply.choices[0].finish_reason


def _calls_text(message) -> str:
    return "；".join(f"{name}({clip(args, 60)})" for _, name, args in calls_of(message))


def _plain_chat(ctx: _Context):
    message, finish = ctx.chat(GREETING)
    if not (message.content or "").strip():
        return False, f"回复没有文字内容（finish_reason={finish}）。{_CUT.get(finish, '')}"
    return True, f"回复 {len(message.content)} 个字：「{clip(message.content)}」"


def _tools_offered(ctx: _Context):
    message, finish = ctx.chat(LIST_PY, tools=[BASH_TOOL])
    if not message.tool_calls:
        return False, f"提供了 bash 工具（没写 tool_choice），回复里却只有文字：「{clip(message.content)}」{_CUT.get(finish, '')}"
    ctx.tool_reply = message
    return True, f"{len(message.tool_calls)} 个调用：{_calls_text(message)}"


def _choice_auto(ctx: _Context):
    message, finish = ctx.chat(LIST_PY, tools=[BASH_TOOL], tool_choice="auto")
    if not message.tool_calls:
        return (False, f"写明了 \"auto\" 也没有 tool_calls：「{clip(message.content)}」{_CUT.get(finish, '')}",
                HINTS["提供工具后返回 tool_calls"])
    got = f"{len(message.tool_calls)} 个调用：{_calls_text(message)}"
    if ctx.tool_reply is None:  # 不写 tool_choice 时没有调用
        ctx.tool_reply, ctx.tools["tool_choice"] = message, "auto"
        return True, f"写明 \"auto\" 才调用了工具，{got}。这个服务要写明（后面几项都写明了再测）。"
    return True, got


def _arguments_json(ctx: _Context):
    if ctx.tool_reply is None:
        raise _Blocked("前两项都没有拿到工具调用，无从检查。", (2, 3), False)
    for _, name, raw in calls_of(ctx.tool_reply):
        try:
            value = json.loads(raw)
        except (TypeError, ValueError) as exc:
            return False, f"{name} 的 arguments 不是合法 JSON：{exc}（原文：{clip(raw)}）"
        if not isinstance(value, dict) or (name == "bash" and "command" not in value):
            return False, f"arguments 应当是带 command 字段的 JSON 对象，实际是：{clip(raw)}"
    return True, "每个调用的 arguments 都能用 json.loads 解析成对象，必填字段齐全。"


def _turn(ctx: _Context, drop: str = "", mark: bool | None = False) -> list[dict]:
    """循环的第二轮：用户消息、`model_dump(exclude_none=True)` 的助手消息（可去掉一个键）、每个调用的 tool 消息。"""
    if ctx.tool_reply is None:
        raise _Blocked("前面没有拿到工具调用，发不出循环的第二轮。", (2, 3), mark)
    assistant = {k: v for k, v in ctx.tool_reply.model_dump(exclude_none=True).items() if k != drop}
    tools = [{"role": "tool", "tool_call_id": cid, "content": "app.py\nutils.py"}
             for cid, _, _ in calls_of(ctx.tool_reply)]
    return [{"role": "user", "content": LIST_PY}, assistant, *tools]


def _tool_result(ctx: _Context):
    messages = _turn(ctx)
    try:
        message, finish = ctx.chat(messages, **ctx.tools)
    except openai.APIStatusError as exc:
        if "content" in messages[1] or classify(exc).kind != "request_shape":
            raise
        return False, ("循环追加的助手消息没有 content 键（model_dump(exclude_none=True) 去掉了值为 None 的 content），"
                       f"服务不接受：{explain_error(exc, ctx.key)}"), NO_CONTENT_HINT
    if not message.tool_calls and not message.content:
        return False, f"请求被接受，但回复是空的（finish_reason={finish}）。{_CUT.get(finish, '')}"
    return True, (f"接受了循环的第二轮（助手消息的键：{', '.join(sorted(messages[1]))}）："
                  f"「{clip(message.content or _calls_text(message))}」")


def _reasoning(ctx: _Context):
    if "reasoning_content" not in _turn(ctx, mark=None)[1]:
        return None, "回复里没有 reasoning_content（不是思考模式），不涉及。"
    try:
        ctx.chat(_turn(ctx, drop="reasoning_content"), **ctx.tools)
    except openai.BadRequestError as exc:
        return True, ("回复带 reasoning_content；原样发回被接受，去掉它就被拒绝（HTTP 400）：这个服务要求传回。"
                      f"原话：{clip(explain_error(exc, ctx.key), 80)}")
    return True, "回复带 reasoning_content；原样发回和去掉它，服务都接受。"


def _choice_required(ctx: _Context):
    try:
        message, finish = ctx.chat(GREETING, tools=[BASH_TOOL], tool_choice="required")
    except openai.InternalServerError as exc:
        if "--jinja" in str(exc) or exc.status_code != 500:  # 不接受任何 tools 的旧服务，或整台服务的故障
            raise
        return False, "只因为写了 tool_choice=\"required\"，服务就回了 HTTP 500：它不支持这个取值，不是临时故障。"
    if message.tool_calls:
        return True, f"打招呼也被要求调用工具，给出了：{_calls_text(message)}"
    return False, f"要求必须调用工具，回复里却只有文字：「{clip(message.content)}」{_CUT.get(finish, '')}"


def _stream_deltas(ctx: _Context):
    chunks = ctx.chat(LIST_PY, stream=True, **ctx.tools)
    if not chunks:
        return False, "带工具的流式请求一块都没收到就结束了：服务端在生成之前出错，却没有报告错误（llama-cpp-python 就这样）。"
    result = accumulate(chunks)  # 没有 finish_reason 时抛出 EndpointError（stream_cut）
    got = _calls_text(result["message"])
    if not got:
        if ctx.tool_reply is None:  # 非流式也从没调用过工具：问题在前面，不在流式
            raise _Blocked(f"收到 {len(chunks)} 块，没有工具调用；非流式的请求也没有拿到过。", (2, 3), False)
        return False, f"收到 {len(chunks)} 块，没有一块带 tool_calls 增量。"
    for _, _, raw in calls_of(result["message"]):
        try:
            json.loads(raw)
        except ValueError:
            return False, f"按 index 拼回后，arguments 不是合法 JSON：{clip(raw)}"
    return True, f"收到 {len(chunks)} 块，按 index 拼回后：{got}，finish_reason={result['finish_reason']}"


def _usage(ctx: _Context):
    plain = next((r.usage for r in ctx.responses if getattr(r, "usage", None)), None)
    if not any(c.choices for c in ctx.chunks):  # 前面带工具的流可能什么都没收到：用不带工具的流再看一次
        ctx.chat(GREETING, stream=True)
    top = any(getattr(c, "usage", None) for c in ctx.chunks)
    inner = any((ch.model_extra or {}).get("usage") for c in ctx.chunks for ch in c.choices or [])
    cut = ctx.chunks and not any(ch.finish_reason for c in ctx.chunks for ch in c.choices or [])  # 流被截断
    if not top and not inner and cut:
        raise _Blocked("流式回复被截断了，看不到最后的用量块，无从判断流式报不报用量。", (8,), False)
    where = ("在顶层的用量块" if top else "没有" if not inner else
             "在 choices[0].usage；不在标准的位置（月之暗面这样做），accumulate 两处都认，预算照样生效")
    plain_text = f"total {plain.total_tokens}" if plain else "没有"
    return plain is not None and where != "没有", f"非流式：{plain_text}；流式（include_usage）：{where}"


def _extra_keys(obj, prefix: str = "") -> list[str]:
    """SDK 对象里“不认识的字段”（pydantic 的 model_extra），逐层写成 `a.b.c`。"""
    if isinstance(obj, list):
        return [key for item in obj for key in _extra_keys(item, prefix)]
    if not isinstance(obj, pydantic.BaseModel):
        return []
    return [*(prefix + key for key in obj.model_extra or {}),
            *(k for name in type(obj).model_fields for k in _extra_keys(getattr(obj, name), f"{prefix}{name}."))]


def _extras(ctx: _Context):
    if not ctx.responses and not ctx.chunks:
        ctx.chat(GREETING)
    found = dict.fromkeys(_extra_keys(ctx.responses) + _extra_keys(ctx.chunks, "chunk."))
    if not found:
        return True, f"看了 {len(ctx.responses)} 个响应和 {len(ctx.chunks)} 个流式块，没有标准之外的字段。"
    return None, "发现标准之外的字段：" + "、".join(found) + "（SDK 把它们放在 model_extra 里，model_dump 会一起带上）"


CHECKS = list(zip(IMPACT, [_plain_chat, _tools_offered, _choice_auto, _arguments_json, _tool_result, _reasoning,
                          _choice_required, _stream_deltas, _usage, _extras]))


def _error_hint(exc: BaseException, text: str, name: str, timeout: float) -> str:
    """一项第一次出这个错时的办法：请求本身被拒（400、请求形状）才用这一项自己的办法。"""
    if "--jinja" in str(exc) + text:
        return JINJA_HINT
    kind = exc.kind if isinstance(exc, EndpointError) else classify(exc).kind
    if kind == "timeout":
        return TIMEOUT_HINT.format(timeout=timeout)
    if kind == "no_chat_tools":
        return NO_CHAT_TOOLS_HINT
    return HINTS[name] if kind in ("bad_request", "request_shape", "other") else ERROR_HINT


def probe(client, model, *, timeout=30.0, max_tokens=128):
    """逐项检查一个端点，返回一张表（列 check、result、detail、hint）；每个请求带 `timeout` 和 `max_tokens`，不重试。"""
    ctx = _Context(client.with_options(max_retries=0), model, timeout, max_tokens)
    rows, errors, roots = [], {}, {}  # errors：说明 → 第一次出现在第几项；roots：第几项 → 问题出在第几项
    for n, (name, check) in enumerate(CHECKS, start=1):
        try:
            ok, detail, hint = (*check(ctx), HINTS[name])[:3]  # 少数情形，检查自己给出更贴切的办法
        except _Blocked as blocked:  # 指回第一个没通过的前置项，再一直指到根上
            detail, after, ok = blocked.args
            first = next((a for a in after if rows[a - 1]["result"] != OK), after[0])
            roots[n] = root = roots.get(first, first)
            hint = f"先解决第 {root} 项（{CHECKS[root - 1][0]}）：这一项要用到它的结果。"
        except Exception as exc:  # 每一项自己兜底：出错也只影响这一行
            text = exc.explanation if isinstance(exc, EndpointError) else explain_error(exc, ctx.key)
            ok, roots[n] = False, errors.setdefault(text, n)
            same = roots[n] != n
            detail = f"出错（同第 {roots[n]} 项）" if same else f"出错：{text}"
            hint = f"先解决第 {roots[n]} 项：这一行出的是同一个错误。" if same else _error_hint(exc, text, name, timeout)
        mark = OK if ok else INFO if ok is None else FAIL
        keep = mark == FAIL or (mark == INFO and hint.startswith("先解决"))  # ℹ 只留“先解决第 N 项”
        rows.append({"check": name, "result": mark, "detail": detail, "hint": hint if keep else ""})
    if "tool_choice" in ctx.tools:  # 不写 tool_choice 时没有调用，写明了才有：办法是写明它
        rows[1]["hint"] = NEEDS_AUTO_HINT
    table = pd.DataFrame(rows, columns=["check", "result", "detail", "hint"])
    table.attrs["verdict"] = probe_verdict(table)
    return table


def probe_verdict(table) -> str:
    """从 `probe()` 的表算出一句话结论：只看非流式循环要用到的几项；流式增量不通过时另加一句。"""
    rows = list(table.itertuples(index=False))  # 和 CHECKS 同序：rows[0] 是第 1 项
    no = [r.result != OK for r in rows]
    cannot = "结论：本系列的循环在这里跑不起来：".__add__
    if no[0]:
        return cannot("第 1 项（普通对话）没有通过，连最基本的请求都走不通；先按那一行的办法解决它。")
    if no[1] and no[2] and rows[1].detail.startswith("出错"):
        return cannot("带工具的请求出错了，见第 2 项；循环第一轮就会失败，先按那一行的办法解决它。")
    if no[1] and no[2]:
        return cannot("第 2、3 项都没有拿到工具调用，循环第一轮就会停下；换一个会调用工具的模型或服务。")
    if no[4] and rows[4].hint != NO_CONTENT_HINT:
        return cannot("第 5 项（接受工具结果）没有通过，循环的第二轮会被拒绝；按那一行的办法处理。")
    changes = [text for bad, text in ((no[1], '调模型时写明 tool_choice="auto"（见第 3 项）'),
                                      (no[4], '追加助手消息前补上 "content": ""（见第 5 项）'),
                                      (no[3], "换一个能写出合法 arguments 的模型，否则每轮都要重试（见第 4 项）")) if bad]
    verdict = f"结论：做这些改动后循环能跑：{'；'.join(changes)}。" if changes else AS_IS
    if rows[7].result == FAIL:
        verdict += "另外，流式循环（08 的 agent_loop_stream）在这里用不了（见第 8 项），用非流式的 agent_loop。"
    return verdict
