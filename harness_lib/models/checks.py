"""像服务商一样检查一次请求：结构不对就拒绝，措辞仿照 OpenAI。

辅助工具，不是课程内容。离线假模型和本地端点在作答之前都先过这一关，所以学习者把
不成对的工具调用、缺字段的消息交出去时，看到的是和真实服务商一样的 HTTP 400。

- `validate(messages, tools=None, tool_choice=None)`：不合规时抛出 `Rejected`（由处理函数写成 400 响应）；
- `check_request(...)`：同样的检查，不合规时抛出 SDK 自己构造的 `openai.BadRequestError`。
"""

from __future__ import annotations

import re
from typing import Any, Iterable

import openai

from .wire import Rejected, api_error

__all__ = ["as_dict", "bad", "check_request", "is_given", "validate", "wrong_type"]

_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def bad(message: str, param: str | None = None, code: str | None = None) -> Rejected:
    return Rejected(400, message, param=param, code=code)


_JSON_TYPES = {dict: "object", list: "array", tuple: "array", str: "string",
               int: "integer", float: "number", bool: "boolean", type(None): "null"}


def _json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _missing(param: str) -> Rejected:
    return bad(f"Missing required parameter: '{param}'.", param, "missing_required_parameter")


def wrong_type(param: str, expected: str, value: Any) -> Rejected:
    return bad(
        f"Invalid type for '{param}': expected {expected}, but got {_json_type(value)} instead.",
        param,
        "invalid_type",
    )


def _empty_array(param: str) -> Rejected:
    return bad(
        f"Invalid '{param}': empty array. Expected an array with minimum length 1, "
        "but got an empty array instead.",
        param,
        "empty_array",
    )


# ---------------------------------------------------------------------------
# 请求检查：真实服务商在生成之前就会做的那些结构检查
# ---------------------------------------------------------------------------


def as_dict(item: Any) -> Any:
    """SDK 的 pydantic 对象转成字典；字典原样返回；其他类型留给调用者报错。"""
    if type(item) is dict:
        return item
    dump = getattr(item, "model_dump", None)
    if dump is not None:
        return dump(exclude_none=True)
    if hasattr(item, "keys"):
        return dict(item)
    return item


def is_given(value: Any) -> bool:
    return value is not None and not isinstance(value, (openai.NotGiven, openai.Omit))


def _check_tool_call(call: Any, where: str) -> str:
    """检查一个工具调用的结构，返回它的 id。"""
    if not isinstance(call, dict):
        raise wrong_type(where, "an object", call)
    if "id" not in call or call["id"] is None:
        raise _missing(f"{where}.id")
    if not isinstance(call["id"], str):
        raise wrong_type(f"{where}.id", "a string", call["id"])
    if "type" not in call:
        raise _missing(f"{where}.type")
    if call["type"] != "function":
        raise bad(
            f"Invalid value: {call['type']!r}. Supported values are: 'function'.",
            f"{where}.type",
            "invalid_value",
        )
    function = call.get("function")
    if function is None:
        raise _missing(f"{where}.function")
    if not isinstance(function, dict):
        raise wrong_type(f"{where}.function", "an object", function)
    if "name" not in function:
        raise _missing(f"{where}.function.name")
    if not isinstance(function["name"], str):
        raise wrong_type(f"{where}.function.name", "a string", function["name"])
    if "arguments" not in function:
        raise _missing(f"{where}.function.arguments")
    if not isinstance(function["arguments"], str):
        raise wrong_type(f"{where}.function.arguments", "a string", function["arguments"])
    return call["id"]


def _check_tools(tools: Any, tool_choice: Any) -> list[dict]:
    if not is_given(tools):
        if is_given(tool_choice):
            raise bad(
                "Invalid value for 'tool_choice': 'tool_choice' is only allowed "
                "when 'tools' are specified.",
                "tool_choice",
            )
        return []
    if isinstance(tools, (str, bytes, dict)) or not isinstance(tools, Iterable):
        raise wrong_type("tools", "an array", tools)
    tools = [as_dict(t) for t in tools]
    if not tools:
        raise _empty_array("tools")
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise wrong_type(where, "an object", tool)
        if tool.get("type") != "function":
            if "type" not in tool:
                raise _missing(f"{where}.type")
            raise bad(
                f"Invalid value: {tool['type']!r}. Supported values are: 'function'.",
                f"{where}.type",
                "invalid_value",
            )
        function = tool.get("function")
        if not isinstance(function, dict):
            raise _missing(f"{where}.function")
        name = function.get("name")
        if not isinstance(name, str):
            raise _missing(f"{where}.function.name")
        if not _TOOL_NAME.match(name):
            raise bad(
                f"Invalid '{where}.function.name': string does not match pattern. "
                "Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                f"{where}.function.name",
                "invalid_value",
            )
    if isinstance(tool_choice, str) and tool_choice not in ("none", "auto", "required"):
        raise bad(
            f"Invalid value: {tool_choice!r}. Supported values are: 'none', 'auto', and 'required'.",
            "tool_choice",
            "invalid_value",
        )
    if isinstance(tool_choice, dict):
        wanted = (tool_choice.get("function") or {}).get("name")
        if wanted not in {t["function"]["name"] for t in tools}:
            raise bad(
                f"Invalid value for 'tool_choice': tool choice {wanted!r} not found in 'tools' parameter.",
                "tool_choice",
            )
    return tools


def validate(messages: Any, tools: Any = None, *, tool_choice: Any = None) -> list[dict]:
    """像真实服务商一样检查一次请求的结构，返回规整成字典的 ``messages``；不合规抛出 `Rejected`。

    ``messages`` 里可以是字典，也可以是 SDK 的 pydantic 对象（比如
    ``ChatCompletionMessage``），后者按 ``model_dump(exclude_none=True)`` 转换。

    检查的规则：

    * ``messages`` 是非空列表，每条是对象，``role`` 是合法值；
    * 带 ``tool_calls`` 的 assistant 消息后面，必须紧跟着若干条 tool 消息，
      每个调用 id 都有回应；
    * tool 消息的 ``tool_call_id`` 必须回应前一条 assistant 消息里的某个调用；
    * 每个工具调用都有 ``id``、``type="function"``、``function.name``，
      ``function.arguments`` 是字符串。

    措辞仿照 OpenAI。
    """
    if messages is None:
        raise _missing("messages")
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Iterable):
        raise wrong_type("messages", "an array", messages)
    msgs = [as_dict(m) for m in messages]
    if not msgs:
        raise _empty_array("messages")
    _check_tools(tools, tool_choice)

    open_ids: list[str] = []  # 上一条 assistant 消息提出的调用 id
    pending: list[str] = []  # 其中还没有收到回应的 id
    caller = -1  # 那条 assistant 消息的下标；-1 表示当前不在“回应工具调用”的位置
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            raise wrong_type(f"messages[{i}]", "an object", m)
        role = m.get("role")
        if role is None:
            raise _missing(f"messages[{i}].role")
        if role not in _ROLES:
            raise bad(
                f"Invalid value: {role!r}. Supported values are: 'system', 'assistant', "
                "'user', 'function', 'tool', and 'developer'.",
                f"messages[{i}].role",
                "invalid_value",
            )

        if role == "tool":
            call_id = m.get("tool_call_id")
            if call_id is None:
                raise _missing(f"messages[{i}].tool_call_id")
            if caller < 0:
                raise bad(
                    "Invalid parameter: messages with role 'tool' must be a response "
                    "to a preceeding message with 'tool_calls'.",
                    f"messages.[{i}].role",
                )
            if call_id not in open_ids:
                raise bad(
                    f"Invalid parameter: 'tool_call_id' of {call_id!r} not found in "
                    "'tool_calls' of previous message.",
                    f"messages.[{i}].tool_call_id",
                )
            if call_id in pending:
                pending.remove(call_id)
            if m.get("content") is None:
                raise _missing(f"messages[{i}].content")
            continue

        # 不是 tool 消息：上一组工具调用必须已经全部得到回应
        if pending:
            raise _unanswered(pending, caller)
        caller = -1
        open_ids = []

        if role == "assistant":
            calls = m.get("tool_calls")
            if calls is not None:
                if not isinstance(calls, (list, tuple)):
                    raise wrong_type(f"messages[{i}].tool_calls", "an array", calls)
                if not calls:
                    raise _empty_array(f"messages[{i}].tool_calls")
                open_ids = [_check_tool_call(c, f"messages[{i}].tool_calls[{j}]")
                            for j, c in enumerate(calls)]
                pending = list(open_ids)
                caller = i
            elif m.get("content") is None and m.get("function_call") is None:
                raise _missing(f"messages[{i}].content")
        elif role != "function" and m.get("content") is None:
            raise _missing(f"messages[{i}].content")

    if pending:
        raise _unanswered(pending, caller)
    return msgs


def check_request(messages: Any, tools: Any = None, *, tool_choice: Any = None) -> list[dict]:
    """像服务商一样检查一次请求的结构，返回规整成字典的 ``messages``。

    不合规时抛出 ``openai.BadRequestError``（状态码 400）：这个异常由 SDK 自己从一次 400 响应里构造，
    和真实服务商拒绝请求时一模一样。规则见 `validate`。
    """
    try:
        return validate(messages, tools, tool_choice=tool_choice)
    except Rejected as rejected:
        raise api_error(rejected.status, str(rejected), param=rejected.error["param"],
                        code=rejected.error["code"]) from None


def _unanswered(ids: list[str], index: int) -> Rejected:
    return bad(
        "An assistant message with 'tool_calls' must be followed by tool messages "
        "responding to each 'tool_call_id'. The following tool_call_ids did not have "
        f"response messages: {', '.join(ids)}",
        f"messages.[{index}].role",
    )
