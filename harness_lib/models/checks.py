"""像服务商一样检查一次请求：结构不对就拒绝，措辞仿照 OpenAI。假模型和本地端点作答之前都先过这一关，
所以学习者交出不成对的工具调用、缺字段的消息时，看到的是和真实服务商一样的 HTTP 400。
`check_request(...)` 返回规整成字典的 `messages`，不合规时抛出 SDK 自己构造的 `openai.BadRequestError`；
`pairing_error(...)` 是唯一的配对检查，各家的措辞是数据（OpenAI 的和阿里云百炼的）；
消息转成字典用 `messages.as_dict`。
"""

from __future__ import annotations

import re
from typing import Any, Iterable

import openai

from .messages import as_dict
from .wire import Rejected, api_error

_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_JSON_TYPES = {dict: "object", list: "array", tuple: "array", str: "string",
               int: "integer", float: "number", bool: "boolean", type(None): "null"}

# 配对出错时的原话：{i} 是出问题的那条消息的下标，{caller} 是提出调用的助手消息，{ids} 是没有回应的 id
OPENAI_PAIRING = {
    "prefix": "", "code": None,
    "orphan": "Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
              "with 'tool_calls'.",
    "unknown": "Invalid parameter: 'tool_call_id' of {id!r} not found in 'tool_calls' of previous message.",
    "unanswered": "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                  "'tool_call_id'. The following tool_call_ids did not have response messages: {ids}",
}
# 阿里云百炼（quirks 的 dashscope_tool_rule）：规则和 OpenAI 一样，措辞不同
DASHSCOPE_PAIRING = {
    "prefix": "<400> InternalError.Algo.InvalidParameter: ", "code": "invalid_parameter_error",
    "orphan": 'messages with role "tool" must be a response to a preceeding message with "tool_calls".',
    "unknown": None,
    "unanswered": 'An assistant message with "tool_calls" must be followed by tool messages responding to each '
                  '"tool_call_id". The following tool_call_ids did not have response messages: message[{i}].role',
}


def is_given(value: Any) -> bool:
    return value is not None and not isinstance(value, (openai.NotGiven, openai.Omit))


def bad(message: str, param: str | None = None, code: str | None = None) -> Rejected:
    return Rejected(400, message, param=param, code=code)


def wrong_type(param: str, expected: str, value: Any) -> Rejected:
    got = _JSON_TYPES.get(type(value), type(value).__name__)
    return bad(f"Invalid type for '{param}': expected {expected}, but got {got} instead.", param, "invalid_type")


def missing(param: str) -> Rejected:
    """缺了必填参数，OpenAI 的说法（Responses 线路也用）。"""
    return bad(f"Missing required parameter: '{param}'.", param, "missing_required_parameter")


def _invalid(value: Any, allowed: str, param: str) -> Rejected:
    return bad(f"Invalid value: {value!r}. Supported values are: {allowed}.", param, "invalid_value")


def _array(value: Any, param: str) -> list:
    if value is None:
        raise missing(param)
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable):
        raise wrong_type(param, "an array", value)
    items = [as_dict(v) for v in value]
    if not items:
        raise bad(f"Invalid '{param}': empty array. Expected an array with minimum length 1, "
                  "but got an empty array instead.", param, "empty_array")
    return items


def check_fields(obj: Any, where: str, fields: tuple[str, ...]) -> None:
    """`obj` 是对象，`fields` 里的每一项（`function.name` 这样写嵌套）都在、都是字符串，`type` 是 function。"""
    for field in fields:
        value, path = obj, where
        for part in field.split("."):
            if not isinstance(value, dict):
                raise wrong_type(path, "an object", value)
            path = f"{path}.{part}"
            if value.get(part) is None:
                raise missing(path)
            value = value[part]
        if field == "type" and value != "function":
            raise _invalid(value, "'function'", path)
        if not isinstance(value, str):
            raise wrong_type(path, "a string", value)


def _check_tools(tools: Any, tool_choice: Any) -> None:
    if not is_given(tools):
        if is_given(tool_choice):
            raise bad("Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
                      "tool_choice")
        return
    tools = _array(tools, "tools")
    for i, tool in enumerate(tools):
        check_fields(tool, f"tools[{i}]", ("type", "function.name"))
        if not _TOOL_NAME.match(tool["function"]["name"]):
            raise bad(f"Invalid 'tools[{i}].function.name': string does not match pattern. Expected a string "
                      "that matches the pattern '^[a-zA-Z0-9_-]+$'.", f"tools[{i}].function.name", "invalid_value")
    if isinstance(tool_choice, str) and tool_choice not in ("none", "auto", "required"):
        raise _invalid(tool_choice, "'none', 'auto', and 'required'", "tool_choice")
    if isinstance(tool_choice, dict):
        wanted = (tool_choice.get("function") or {}).get("name")
        if wanted not in {t["function"]["name"] for t in tools}:
            raise bad(f"Invalid value for 'tool_choice': tool choice {wanted!r} not found in 'tools' parameter.",
                      "tool_choice")


def pairing_error(messages: list, words: dict = OPENAI_PAIRING) -> Rejected | None:
    """带 `tool_calls` 的助手消息后面紧跟着每个调用的 tool 消息吗？不成对时返回按 `words` 措辞的 `Rejected`。"""
    def rejected(key: str, param: str, **values: Any) -> Rejected:
        return Rejected(400, words["prefix"] + words[key].format(**values), param=param, code=words["code"])

    open_ids: list = []  # 上一条助手消息提出的调用 id
    pending: list = []  # 其中还没有回应的
    caller = -1  # 那条助手消息的下标；-1 表示不在“回应工具调用”的位置
    for i, m in enumerate([*messages, {}]):  # 末尾的空消息：记录结束时也要查一次
        m = m if isinstance(m, dict) else {}
        if m.get("role") == "tool":
            call_id = m.get("tool_call_id")
            if caller < 0:
                return rejected("orphan", f"messages.[{i}].role", i=i)
            if call_id not in open_ids and words.get("unknown"):
                return rejected("unknown", f"messages.[{i}].tool_call_id", id=call_id)
            if call_id in pending:
                pending.remove(call_id)
            continue
        if pending:
            return rejected("unanswered", f"messages.[{caller}].role", ids=", ".join(pending), i=i, caller=caller)
        calls = m.get("tool_calls") if m.get("role") == "assistant" else None
        open_ids = [c.get("id") for c in calls if isinstance(c, dict)] if calls else []
        pending, caller = list(open_ids), (i if calls else -1)
    return None


def _check_messages(msgs: list) -> None:
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            raise wrong_type(f"messages[{i}]", "an object", m)
        role = m.get("role")
        if role is None:
            raise missing(f"messages[{i}].role")
        if role not in _ROLES:
            raise _invalid(role, "'system', 'assistant', 'user', 'function', 'tool', and 'developer'",
                           f"messages[{i}].role")
        calls = m.get("tool_calls") if role == "assistant" else None
        if calls is not None:
            for j, call in enumerate(_array(calls, f"messages[{i}].tool_calls")):
                check_fields(call, f"messages[{i}].tool_calls[{j}]",
                              ("id", "type", "function.name", "function.arguments"))
        elif role == "tool" and m.get("tool_call_id") is None:
            raise missing(f"messages[{i}].tool_call_id")
        elif role != "function" and m.get("content") is None and not (role == "assistant"
                                                                      and m.get("function_call")):
            raise missing(f"messages[{i}].content")
    if (problem := pairing_error(msgs)) is not None:
        raise problem


def check_request(messages: Any, tools: Any = None, *, tool_choice: Any = None) -> list[dict]:
    """像服务商一样检查请求的结构（消息、配对、工具），返回规整成字典的 `messages`。不合规时抛出
    `openai.BadRequestError`：SDK 自己从一次 400 响应里构造的，和真实服务商拒绝时一样。"""
    try:
        msgs = _array(messages, "messages")
        _check_tools(tools, tool_choice)
        _check_messages(msgs)
    except Rejected as rejected:
        raise api_error(rejected.status, str(rejected), param=rejected.error["param"],
                        code=rejected.error["code"]) from None
    return msgs
