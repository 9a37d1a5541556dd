"""离线假模型：不联网、结果固定，用来代替 ``openai.OpenAI``。

它不是课程内容本身，所以只放在 ``harness_lib`` 里，笔记本直接导入使用
（做法类似 mini-swe-agent 自带的 ``DeterministicModel``）。

两种用法：

* ``FakeClient()``：默认策略。只看请求本身（无状态）决定回复，
  认得原文的例子“列出当前目录中的 Python 文件”和几类简单请求。
* ``FakeClient(script=[...])``：脚本模式。每次 ``create()`` 按顺序取出一条
  事先写好的回复，用 ``text_reply``、``tool_call``、``tool_reply`` 来写。
  需要精确控制模型输出的单元格（比如坏掉的 JSON 参数）用这种模式。

``FakeClient`` 就是一个真正的 ``openai.OpenAI``，只是它的线路（HTTP 传输层）在本进程里：
请求照常由 SDK 编成 HTTP 请求，交给 ``FakeHandler``；``FakeHandler`` 让 ``FakeModel`` 决定回复，
写成 JSON 或 SSE 响应；SDK 再照常解析，构造 ``ChatCompletion``、流式块和异常。
本地端点 ``harness_lib.support.endpoint`` 在本机端口上提供的是同一个 ``FakeHandler``。

无论哪种模式，每次请求都先像真实服务商一样检查 ``messages`` 的结构，
不合规就回 HTTP 400，SDK 抛出 ``openai.BadRequestError``。
"""

from __future__ import annotations

import hmac
import itertools
import json
import os
import re
from typing import Any, Iterable

import httpx2
import openai

from .runner import list_py_command
from .wire import (
    OfflineClient,
    OfflineHTTP,
    Rejected,
    api_error,
    error_body,
    error_response,
    json_response,
    offline_http,
    route,
    sse_response,
)

__all__ = [
    "DEFAULT_MODEL",
    "CutStreamClient",
    "FakeClient",
    "FakeHandler",
    "FakeModel",
    "ScriptExhaustedError",
    "api_error",
    "check_request",
    "is_fake_model_name",
    "text_reply",
    "tool_call",
    "tool_reply",
]

DEFAULT_MODEL = "fake-agent-1"
# 固定的创建时间（2026-01-01 00:00:00 UTC），让输出每次都一样。
CREATED = 1767225600
OWNED_BY = "harness_lib"

_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_STREAM_PIECE = 6  # 流式输出时每一块的字符数


def _bad(message: str, param: str | None = None, code: str | None = None) -> Rejected:
    return Rejected(400, message, param=param, code=code)


_JSON_TYPES = {dict: "object", list: "array", tuple: "array", str: "string",
               int: "integer", float: "number", bool: "boolean", type(None): "null"}


def _json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _missing(param: str) -> Rejected:
    return _bad(f"Missing required parameter: '{param}'.", param, "missing_required_parameter")


def _wrong_type(param: str, expected: str, value: Any) -> Rejected:
    return _bad(
        f"Invalid type for '{param}': expected {expected}, but got {_json_type(value)} instead.",
        param,
        "invalid_type",
    )


def _empty_array(param: str) -> Rejected:
    return _bad(
        f"Invalid '{param}': empty array. Expected an array with minimum length 1, "
        "but got an empty array instead.",
        param,
        "empty_array",
    )


# ---------------------------------------------------------------------------
# 请求检查：真实服务商在生成之前就会做的那些结构检查
# ---------------------------------------------------------------------------


def _as_dict(item: Any) -> Any:
    """SDK 的 pydantic 对象转成字典；字典原样返回；其他类型留给调用者报错。"""
    if type(item) is dict:
        return item
    dump = getattr(item, "model_dump", None)
    if dump is not None:
        return dump(exclude_none=True)
    if hasattr(item, "keys"):
        return dict(item)
    return item


def _is_given(value: Any) -> bool:
    return value is not None and not isinstance(value, (openai.NotGiven, openai.Omit))


def _check_tool_call(call: Any, where: str) -> str:
    """检查一个工具调用的结构，返回它的 id。"""
    if not isinstance(call, dict):
        raise _wrong_type(where, "an object", call)
    if "id" not in call or call["id"] is None:
        raise _missing(f"{where}.id")
    if not isinstance(call["id"], str):
        raise _wrong_type(f"{where}.id", "a string", call["id"])
    if "type" not in call:
        raise _missing(f"{where}.type")
    if call["type"] != "function":
        raise _bad(
            f"Invalid value: {call['type']!r}. Supported values are: 'function'.",
            f"{where}.type",
            "invalid_value",
        )
    function = call.get("function")
    if function is None:
        raise _missing(f"{where}.function")
    if not isinstance(function, dict):
        raise _wrong_type(f"{where}.function", "an object", function)
    if "name" not in function:
        raise _missing(f"{where}.function.name")
    if not isinstance(function["name"], str):
        raise _wrong_type(f"{where}.function.name", "a string", function["name"])
    if "arguments" not in function:
        raise _missing(f"{where}.function.arguments")
    if not isinstance(function["arguments"], str):
        raise _wrong_type(f"{where}.function.arguments", "a string", function["arguments"])
    return call["id"]


def _check_tools(tools: Any, tool_choice: Any) -> list[dict]:
    if not _is_given(tools):
        if _is_given(tool_choice):
            raise _bad(
                "Invalid value for 'tool_choice': 'tool_choice' is only allowed "
                "when 'tools' are specified.",
                "tool_choice",
            )
        return []
    if isinstance(tools, (str, bytes, dict)) or not isinstance(tools, Iterable):
        raise _wrong_type("tools", "an array", tools)
    tools = [_as_dict(t) for t in tools]
    if not tools:
        raise _empty_array("tools")
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise _wrong_type(where, "an object", tool)
        if tool.get("type") != "function":
            if "type" not in tool:
                raise _missing(f"{where}.type")
            raise _bad(
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
            raise _bad(
                f"Invalid '{where}.function.name': string does not match pattern. "
                "Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                f"{where}.function.name",
                "invalid_value",
            )
    if isinstance(tool_choice, str) and tool_choice not in ("none", "auto", "required"):
        raise _bad(
            f"Invalid value: {tool_choice!r}. Supported values are: 'none', 'auto', and 'required'.",
            "tool_choice",
            "invalid_value",
        )
    if isinstance(tool_choice, dict):
        wanted = (tool_choice.get("function") or {}).get("name")
        if wanted not in {t["function"]["name"] for t in tools}:
            raise _bad(
                f"Invalid value for 'tool_choice': tool choice {wanted!r} not found in 'tools' parameter.",
                "tool_choice",
            )
    return tools


def _validate(messages: Any, tools: Any = None, *, tool_choice: Any = None) -> list[dict]:
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
        raise _wrong_type("messages", "an array", messages)
    msgs = [_as_dict(m) for m in messages]
    if not msgs:
        raise _empty_array("messages")
    _check_tools(tools, tool_choice)

    open_ids: list[str] = []  # 上一条 assistant 消息提出的调用 id
    pending: list[str] = []  # 其中还没有收到回应的 id
    caller = -1  # 那条 assistant 消息的下标；-1 表示当前不在“回应工具调用”的位置
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            raise _wrong_type(f"messages[{i}]", "an object", m)
        role = m.get("role")
        if role is None:
            raise _missing(f"messages[{i}].role")
        if role not in _ROLES:
            raise _bad(
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
                raise _bad(
                    "Invalid parameter: messages with role 'tool' must be a response "
                    "to a preceeding message with 'tool_calls'.",
                    f"messages.[{i}].role",
                )
            if call_id not in open_ids:
                raise _bad(
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
                    raise _wrong_type(f"messages[{i}].tool_calls", "an array", calls)
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
    和真实服务商拒绝请求时一模一样。规则见 `_validate`。
    """
    try:
        return _validate(messages, tools, tool_choice=tool_choice)
    except Rejected as rejected:
        raise api_error(rejected.status, str(rejected), param=rejected.error["param"],
                        code=rejected.error["code"]) from None


def _unanswered(ids: list[str], index: int) -> Rejected:
    return _bad(
        "An assistant message with 'tool_calls' must be followed by tool messages "
        "responding to each 'tool_call_id'. The following tool_call_ids did not have "
        f"response messages: {', '.join(ids)}",
        f"messages.[{index}].role",
    )


# ---------------------------------------------------------------------------
# 脚本模式的三个辅助函数
# ---------------------------------------------------------------------------


def text_reply(content: str) -> dict:
    """脚本里的一条普通文字回复（没有工具调用，``finish_reason="stop"``）。"""
    return {"role": "assistant", "content": content}


def tool_call(name: str, arguments: Any, *, id: str | None = None) -> dict:
    """脚本里的一个工具调用。

    ``arguments`` 是字典时用 ``json.dumps(ensure_ascii=False)`` 转成字符串；
    是字符串时原样保留，所以可以故意写出坏 JSON（``'{"command": "ls"'``）、
    空字符串、缺字段（``'{}'``）或类型不对（``'{"command": 42}'``）的参数。
    ``id`` 不写时，在请求到来时按 ``call_001``、``call_002`` …… 接着编号。
    """
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    call: dict = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if id is not None:
        call = {"id": id, **call}
    return call


def tool_reply(*calls: dict, content: str | None = None) -> dict:
    """脚本里的一条 assistant 消息，带一个或几个工具调用（``finish_reason="tool_calls"``）。"""
    if not calls:
        raise ValueError("tool_reply() 至少需要一个 tool_call(...)")
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


class ScriptExhaustedError(openai.OpenAIError, RuntimeError):
    """脚本里的回复用完了，却还有人调用 ``create()``。

    它是 `openai.OpenAIError` 的子类：SDK 对这类异常原样放行，不重试、也不改包成连接错误，
    所以调用 ``create()`` 的人收到的就是它。
    """


def _script_item(item: Any) -> Any:
    if isinstance(item, BaseException):
        return item  # 轮到它时直接抛出，用来模拟接口出错
    if isinstance(item, str):
        return text_reply(item)
    if isinstance(item, dict):
        if item.get("type") == "function" and "function" in item:
            return tool_reply(item)  # 单独一个 tool_call(...) 也可以直接放进脚本
        if item.get("role") == "assistant":
            return item
    raise TypeError(
        "脚本里的每一项应当是 text_reply(...)、tool_call(...)、tool_reply(...)、"
        f"字符串或异常对象，收到的是 {item!r}"
    )


# ---------------------------------------------------------------------------
# 默认策略：只看请求本身决定回复
# ---------------------------------------------------------------------------

def _commands() -> dict[str, str]:
    windows = os.name == "nt"
    return {
        "list_py": list_py_command(),
        "count_lines": 'find /c /v "" *.py' if windows else "wc -l *.py",
        "list_files": "dir /b" if windows else "ls",
        "pwd": "cd" if windows else "pwd",
        "date": "date /t" if windows else "date",
    }


_PY_FILE = re.compile(r"\.py\b|python|py\s*文件", re.I)
_FILE_WORD = re.compile(r"文件|file|脚本|script|\.py\b", re.I)
_LINES = re.compile(r"行数|多少行|几行|代码量|\blines?\b|\bwc\b", re.I)
_LIST_FILES = re.compile(
    r"哪些文件|什么文件|列出.*文件|文件列表|列出.*目录|目录(里|中|下)?(有|的)(什么|哪些)|"
    r"\bls\b|\bdir\b|\blist\b.*\bfiles?\b|\b(what|which)\s+files\b|\bshow\b.*\bfiles?\b|"
    r"what'?s in (the|this) (current )?(directory|folder)",
    re.I,
)
_PWD = re.compile(
    r"\bpwd\b|当前(工作)?目录是|当前(工作)?目录在|哪个目录|什么目录|工作目录|当前路径|"
    r"当前文件夹|在哪个文件夹|current (working )?directory|working directory|where am i",
    re.I,
)
_DATE = re.compile(r"日期|几号|星期几|今天是|\bdate\b|what day|\btoday\b", re.I)
_GREETING = re.compile(r"^\s*(你好|您好|嗨|哈喽|早上好|下午好|晚上好|(hello|hi|hey)\b)", re.I)

_HANDLED = (
    "列出当前目录中的 Python 文件",
    "当前目录是哪里（pwd）",
    "当前目录里有哪些文件",
    "今天的日期",
    "统计 Python 文件的行数",
    "打个招呼",
)


def _text_of(content: Any) -> str:
    """消息内容可能是字符串，也可能是内容片段列表；统一取出文字。"""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        parts = []
        for part in content:
            if isinstance(part, dict):
                parts.append(str(part.get("text", "")))
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return str(content)


def _intent(text: str) -> str:
    if _PY_FILE.search(text):
        if _LINES.search(text):
            return "count_lines"
        if _FILE_WORD.search(text):
            return "list_py"
    if _LIST_FILES.search(text):
        return "list_files"
    if _PWD.search(text):
        return "pwd"
    if _DATE.search(text):
        return "date"
    if _GREETING.search(text):
        return "greeting"
    return "unknown"


def _intent_of_command(command: str | None, commands: dict[str, str]) -> str | None:
    if command is None:
        return None
    for intent, known in commands.items():
        if command.strip() == known:
            return intent
    if "*.py" in command:
        return "count_lines" if ("wc" in command or "find /c" in command) else "list_py"
    head = command.strip().split(" ", 1)[0]
    return {"ls": "list_files", "dir": "list_files", "pwd": "pwd", "date": "date"}.get(head)


def _clip(text: str, limit: int = 200) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return f"{text[:limit]}……（共 {len(text)} 个字符，只摘录了前 {limit} 个）"


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


_PY_NAME = re.compile(r"[^\s'\"`:,;()<>|*?]+\.py(?![\w.])")


def _py_files(output: str) -> list[str]:
    """从命令输出里找出以 .py 结尾的文件名（去重，保持顺序）。"""
    seen: dict[str, None] = {}
    for name in _PY_NAME.findall(output):
        if name.startswith("./") or name.startswith(".\\"):
            name = name[2:]
        seen.setdefault(name, None)
    return list(seen)


def _join_names(names: list[str], limit: int = 20) -> str:
    shown = "、".join(names[:limit])
    return shown if len(names) <= limit else f"{shown} 等"


# 执行器在命令没有输出时写的占位文字（harness_lib.bash.run_bash 用前一种）
_NO_OUTPUT = ("(没有输出)", "(no output)")


def _summary(intent: str | None, command: str | None, output: str) -> str:
    """拿到一条工具结果后的中文小结。"""
    shown = f"`{command}`" if command else "命令"
    text = output.strip()
    if text in _NO_OUTPUT:
        text = ""
    if intent == "list_py":
        files = _py_files(text)
        if files:
            return f"当前目录中有 {len(files)} 个 Python 文件：{_join_names(files)}。"
        if not text:
            return f"当前目录中没有 Python 文件（{shown} 没有输出）。"
        return f"没有找到 Python 文件。{shown} 的输出是：{_clip(' '.join(text.split()), 120)}"
    if not text:
        return f"{shown} 执行完了，但没有输出。"
    if intent == "pwd":
        return f"当前目录是 {_clip(text.splitlines()[0])}。"
    if intent == "list_files":
        entries = [line.strip() for line in text.splitlines() if line.strip()]
        return f"当前目录中有 {len(entries)} 项：{_join_names(entries)}。"
    if intent == "date":
        return f"{shown} 的输出是：{_clip(text)}。"
    if intent == "count_lines":
        return f"各个 Python 文件的行数如下（{shown} 的输出）：\n\n{_indent(_clip(text, 400))}"
    return f"工具返回了：\n\n{_indent(_clip(text))}"


def _suggest(command: str) -> str:
    return f"可以在终端里运行：\n\n    {command}\n\n我自己没法执行它，需要你运行后把结果告诉我。"


def _fallback(model: str) -> str:
    items = "\n".join(f"- {item}" for item in _HANDLED)
    return (
        f"我是本项目内置的离线假模型（{model}），并不真正理解问题，"
        f"只认得下面几类固定请求：\n{items}\n"
        "想和真实模型对话，请在模型切换器里选择一个真实端点。"
    )


_GREETING_TEXT = "你好！我是离线假模型。可以试试让我“列出当前目录中的 Python 文件”。"


_OUTPUT_SIGNS = (".py", "/", "No such file", "cannot access", "找不到", "File Not Found")


def _pasted_back(msgs: list[dict], commands: dict[str, str]) -> str | None:
    """最后两条是“助手用文字建议命令 → 用户贴回输出”时，返回那条命令，否则 None。"""
    if len(msgs) < 2 or msgs[-1].get("role") != "user":
        return None
    prev = msgs[-2]
    if prev.get("role") != "assistant" or prev.get("tool_calls"):
        return None
    pasted = _text_of(msgs[-1].get("content"))
    # 只有看起来像命令输出的内容才算“贴回结果”，“谢谢”之类的闲聊不算
    if not ("\n" in pasted or any(s in pasted for s in _OUTPUT_SIGNS)):
        return None
    text = _text_of(prev.get("content"))
    for command in commands.values():
        if f"\n    {command}\n" in text:
            return command
    return None


def _tool_names(tools: list[dict]) -> list[str]:
    return [t["function"]["name"] for t in tools]


def _default_reply(msgs: list[dict], tools: list[dict], tool_choice: Any, model: str) -> dict:
    """默认策略：根据请求内容给出一条 assistant 消息（不含调用 id）。"""
    names = _tool_names(tools)
    forced: str | None = None
    if tool_choice == "none":
        names = []
    elif tool_choice == "required":
        forced = "bash" if "bash" in names else (names[0] if names else None)
    elif isinstance(tool_choice, dict):
        forced = tool_choice["function"]["name"]
    commands = _commands()

    def call(command: str) -> dict:
        return tool_reply(tool_call("bash", {"command": command}))

    last_user = ""
    for m in reversed(msgs):
        if m.get("role") == "user":
            last_user = _text_of(m.get("content"))
            break
    intent = _intent(last_user)

    if forced is not None and forced != "bash":
        return tool_reply(tool_call(forced, {}))

    if msgs[-1].get("role") == "tool":
        # 收集末尾这一组工具结果，以及它们回应的那条 assistant 消息
        results = []
        k = len(msgs) - 1
        while k >= 0 and msgs[k].get("role") == "tool":
            results.append(msgs[k])
            k -= 1
        results.reverse()
        proposed: dict[str, tuple[str, str | None]] = {}
        for c in msgs[k].get("tool_calls") or []:
            fn = c["function"]
            command = None
            try:
                args = json.loads(fn["arguments"])
                if isinstance(args, dict) and isinstance(args.get("command"), str):
                    command = args["command"]
            except ValueError:
                pass
            proposed[c["id"]] = (fn["name"], command)
        if forced == "bash":  # tool_choice 要求必须调用工具：那就再调用一次
            _, command = proposed.get(results[-1]["tool_call_id"], ("bash", None))
            return call(command or commands.get(intent, commands["list_files"]))
        parts = []
        for r in results:
            name, command = proposed.get(r["tool_call_id"], ("bash", None))
            kind = _intent_of_command(command, commands) if name == "bash" else None
            if kind is None and name == "bash" and command is None:
                kind = intent if intent in commands else None
            parts.append(_summary(kind, command, _text_of(r.get("content"))))
        return text_reply("\n\n".join(parts))

    suggested = _pasted_back(msgs, commands) if "bash" not in names else None
    if suggested is not None:
        # 上一条回复建议了命令、这一条用户消息贴回了结果：像对待工具结果一样总结它
        return text_reply(_summary(_intent_of_command(suggested, commands), suggested, last_user))

    if "bash" in names and _PWD.search(last_user) and _DATE.search(last_user):
        # 两件互不依赖的事（当前目录和日期）：一条回复里并行发出两个调用
        return tool_reply(tool_call("bash", {"command": commands["pwd"]}),
                          tool_call("bash", {"command": commands["date"]}))

    if intent in commands:
        if "bash" in names:
            return call(commands[intent])
        return text_reply(_suggest(commands[intent]))
    if forced == "bash":
        return call(commands["list_files"])
    if intent == "greeting":
        return text_reply(_GREETING_TEXT)
    return text_reply(_fallback(model))


# ---------------------------------------------------------------------------
# 把 assistant 消息包装成服务商返回的 JSON（字典）
# ---------------------------------------------------------------------------


def _tokens(text: str) -> int:
    """粗略估计 token 数：UTF-8 字节数除以 3（一个汉字约一个 token）。"""
    return (len(text.encode("utf-8")) + 2) // 3


def _prompt_tokens(msgs: list[dict], tools: list[dict]) -> int:
    total = 3 + 60 * len(tools)
    for m in msgs:
        total += 4 + _tokens(_text_of(m.get("content")))
        for c in m.get("tool_calls") or ():
            total += 8 + _tokens(c["function"]["arguments"])
    return total


def _completion_tokens(reply: dict) -> int:
    total = _tokens(reply.get("content") or "") + 1
    for c in reply.get("tool_calls") or ():
        total += 8 + _tokens(c["function"]["arguments"])
    return total


def _truncate(reply: dict, max_tokens: int) -> dict:
    """回复超过 max_tokens 时像真实模型一样被截断，finish_reason 变成 "length"。"""
    budget = max(0, max_tokens * 3)  # 和 _tokens 同样的粗略换算：一个 token 约 3 个字节
    out: dict = {"role": "assistant", "content": None}
    content = reply.get("content") or ""
    if content:
        cut = content.encode("utf-8")[:budget].decode("utf-8", "ignore")
        out["content"] = cut
        budget -= len(cut.encode("utf-8"))
    calls = []
    for c in reply.get("tool_calls") or ():
        if budget <= 0:
            break
        arguments = c["function"]["arguments"][:budget]  # 参数被截断后通常不再是合法 JSON
        budget -= len(arguments)
        calls.append({**c, "function": {**c["function"], "arguments": arguments}})
    if calls:
        out["tool_calls"] = calls
    elif out["content"] is None:
        out["content"] = ""
    return out


def _completion_dict(cid: str, model: str, reply: dict, finish: str, usage: dict) -> dict:
    message: dict = {"role": "assistant", "content": reply.get("content"), "refusal": None}
    if reply.get("tool_calls"):
        message["tool_calls"] = reply["tool_calls"]
    return {
        "id": cid,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": usage,
    }


def _pieces(text: str, size: int = _STREAM_PIECE) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def _chunk_dicts(cid: str, model: str, reply: dict, finish: str, usage: dict | None) -> list[dict]:
    """把一条回复拆成流式块，顺序和真实服务商一致。"""
    def chunk(delta: dict, finish_reason: str | None = None) -> dict:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None,
                         "finish_reason": finish_reason}],
        }

    content = reply.get("content")
    calls = reply.get("tool_calls") or []
    chunks = [chunk({"role": "assistant", "content": "" if content is not None else None,
                     "refusal": None})]
    for piece in _pieces(content or ""):
        chunks.append(chunk({"content": piece}))
    for index, c in enumerate(calls):
        # 第一块带 index、id、type 和函数名，arguments 为空；之后只送参数片段
        chunks.append(chunk({"tool_calls": [{
            "index": index, "id": c["id"], "type": "function",
            "function": {"name": c["function"]["name"], "arguments": ""},
        }]}))
        for piece in _pieces(c["function"]["arguments"]):
            chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    chunks.append(chunk({}, finish))
    if usage is not None:
        last = chunk({})
        last["choices"] = []
        last["usage"] = usage
        chunks.append(last)
    return chunks




# ---------------------------------------------------------------------------
# 假模型本身：请求体（字典）进，响应体（字典）出
# ---------------------------------------------------------------------------


class FakeModel:
    """假模型的“大脑”：只和 JSON 字典打交道，不知道 HTTP 和 SDK。

    ``script`` 为 None 时用默认策略；否则按顺序取脚本里的回复，用完后抛出 ``ScriptExhaustedError``。
    ``last_request`` 保存最近一次请求（``messages`` 已规整成字典）。
    """

    def __init__(self, script: Iterable[Any] | None = None, *, model: str = DEFAULT_MODEL):
        self.model = model
        self._script = None if script is None else [_script_item(item) for item in script]
        self._position = 0
        self._ids = itertools.count(1)
        self.last_request: dict | None = None

    @property
    def script_remaining(self) -> int | None:
        """脚本里还剩几条回复；默认策略下是 ``None``。"""
        if self._script is None:
            return None
        return len(self._script) - self._position

    def __repr__(self) -> str:
        if self._script is None:
            return f"FakeModel(model={self.model!r}, 默认策略)"
        return f"FakeModel(model={self.model!r}, 脚本 {len(self._script)} 条，剩 {self.script_remaining} 条)"

    def respond(self, request: dict) -> dict | list[dict]:
        """处理一次请求体（和 HTTP 请求的 JSON 相同），返回响应字典。

        ``stream`` 为真时返回流式块字典的列表。不合规时抛出 `Rejected`（由处理函数写成 HTTP 错误响应）。
        """
        # openai.NOT_GIVEN / openai.omit 和没传一样
        request = {k: v for k, v in request.items() if _is_given(v)}
        tools = request.get("tools")
        tool_choice = request.get("tool_choice")
        msgs = _validate(request.get("messages"), tools, tool_choice=tool_choice)
        tools = [_as_dict(t) for t in tools] if tools is not None else []
        model = request.get("model")
        self.last_request = {**request, "messages": msgs, "tools": tools or None}

        # 已有的工具调用数量，新的调用 id 接着往下编
        used = sum(len(m.get("tool_calls") or ()) for m in msgs)
        max_tokens = request.get("max_completion_tokens", request.get("max_tokens"))
        if max_tokens is not None and (type(max_tokens) is not int or max_tokens < 1):
            param = "max_completion_tokens" if "max_completion_tokens" in request else "max_tokens"
            if type(max_tokens) is not int:
                raise _wrong_type(param, "an integer", max_tokens)
            raise _bad(f"Invalid '{param}': integer below minimum value. Expected a value >= 1, "
                       f"but got {max_tokens} instead.", param, "integer_below_min_value")
        if self._script is None:
            reply = _default_reply(msgs, tools, tool_choice, model or self.model)
            if max_tokens is not None and _completion_tokens(reply) > max_tokens:
                reply = _truncate(reply, max_tokens)
                finish = "length"
            else:
                finish = "tool_calls" if reply.get("tool_calls") else "stop"
        else:
            reply = self._next_scripted()
            finish = "tool_calls" if reply.get("tool_calls") else "stop"

        if reply.get("tool_calls"):
            calls = []
            for n, c in enumerate(reply["tool_calls"], start=used + 1):
                calls.append(c if c.get("id") else {"id": f"call_{n:03d}", **c})
            reply = {**reply, "tool_calls": calls}

        usage_prompt = _prompt_tokens(msgs, tools)
        usage_completion = _completion_tokens(reply)
        if finish == "length":
            usage_completion = max_tokens
        usage = {"prompt_tokens": usage_prompt, "completion_tokens": usage_completion,
                 "total_tokens": usage_prompt + usage_completion}
        cid = f"chatcmpl-fake-{next(self._ids):04d}"
        if request.get("stream"):
            options = request.get("stream_options")
            include = isinstance(options, dict) and options.get("include_usage")
            return _chunk_dicts(cid, model, reply, finish, usage if include else None)
        return _completion_dict(cid, model, reply, finish, usage)

    def _next_scripted(self) -> dict:
        assert self._script is not None
        if self._position >= len(self._script):
            raise ScriptExhaustedError(
                f"脚本里只有 {len(self._script)} 条回复，已经全部用完，"
                f"这是第 {self._position + 1} 次调用 create()。"
                "请在 FakeClient(script=[...]) 里补上回复，或检查循环是否多调用了一次模型。"
            )
        item = self._script[self._position]
        self._position += 1
        if isinstance(item, BaseException):
            raise item
        return item


# ---------------------------------------------------------------------------
# HTTP 这一层：同一个处理函数，离线客户端和本地端点都用它
# ---------------------------------------------------------------------------


def is_fake_model_name(name: Any) -> bool:
    """本地端点认得的模型名：``fake-agent-1``，以及任何以 ``fake`` 开头的名字。"""
    return isinstance(name, str) and name.startswith("fake")


class FakeHandler:
    """把 HTTP 请求交给假模型，把结果写成 HTTP 响应：``handler(request) -> response``。

    ``responder`` 是有 ``respond(body)`` 方法的对象（``FakeModel`` 或 ``FakeClient``）。
    ``api_key`` 不为空时，请求必须带 ``Authorization: Bearer <api_key>``；
    ``check_model=True`` 时只认 ``fake`` 开头的模型名（本地端点这样做，离线客户端不查）。
    """

    def __init__(self, responder: Any, *, api_key: str | None = None, check_model: bool = False):
        self.responder = responder
        self.api_key = api_key
        self.check_model = check_model
        self._request_ids = itertools.count(1)

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        response = self._answer(request)
        response.headers["x-request-id"] = f"req_fake_{next(self._request_ids):06d}"
        return response

    def _authorized(self, request: httpx2.Request) -> httpx2.Response | None:
        """密钥不对时返回 401 响应；对了返回 None。错误信息里绝不回显收到的密钥。"""
        if self.api_key is None:
            return None
        header = request.headers.get("authorization") or ""
        given = header[7:].strip() if header.startswith("Bearer ") else ""
        if not given:
            return Rejected(401, "You didn't provide an API key. You need to provide your API key in an "
                                 "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).").response()
        if not _same_secret(given, self.api_key):
            return Rejected(401, "Incorrect API key provided. Use the key this local server was started with "
                                 "(--api-key).", code="invalid_api_key").response()
        return None

    def _model_name(self) -> str:
        return getattr(self.responder, "model", None) or DEFAULT_MODEL

    def _model_info(self, name: str) -> dict:
        return {"id": name, "object": "model", "created": CREATED, "owned_by": OWNED_BY}

    def _answer(self, request: httpx2.Request) -> httpx2.Response:
        refused = self._authorized(request)
        if refused is not None:
            return refused
        path = route(request)
        if request.method == "GET" and path == "/models":
            return json_response(200, {"object": "list", "data": [self._model_info(self._model_name())]})
        if request.method == "GET" and path.startswith("/models/"):
            name = path[len("/models/"):]
            if name == self._model_name() or (self.check_model and is_fake_model_name(name)):
                return json_response(200, self._model_info(name))
            return _unknown_model(name).response()
        if request.method != "POST" or path != "/chat/completions":
            return Rejected(404, f"Invalid URL ({request.method} {request.url.path})").response()
        try:
            body = json.loads(request.content)
        except ValueError:
            return Rejected(400, "We could not parse the JSON body of your request. The body must be a JSON "
                                 "object sent with Content-Type: application/json.").response()
        if not isinstance(body, dict):
            return Rejected(400, "Invalid type for request body: expected an object.", code="invalid_type").response()
        if body.get("model") is None:
            return Rejected(400, "you must provide a model parameter").response()
        if self.check_model and not is_fake_model_name(body["model"]):
            return _unknown_model(body["model"]).response()
        try:
            result = self.responder.respond(body)
        except Rejected as rejected:
            return rejected.response()
        except openai.APIStatusError as exc:  # 脚本里放的 api_error(...)：照原样回这个状态码
            return error_response(exc)
        except openai.APITimeoutError:  # 脚本里放的超时：让传输层超时，由 SDK 自己报告
            raise httpx2.ReadTimeout("脚本安排的超时", request=request) from None
        except openai.APIConnectionError:
            raise httpx2.ConnectError("脚本安排的连接失败", request=request) from None
        except ScriptExhaustedError:
            raise
        except Exception as exc:  # 假模型自身的缺陷：照样回一个 JSON 错误，不让连接挂住
            return Rejected(500, f"The fake model failed: {type(exc).__name__}: {exc}",
                            type="server_error").response()
        if isinstance(result, list):
            return sse_response(result)
        return json_response(200, result)


def _same_secret(given: str, expected: str) -> bool:
    """逐字节比较，耗时与内容无关。"""
    return hmac.compare_digest(given.encode(), expected.encode())


def _unknown_model(name: Any) -> Rejected:
    return Rejected(404, f"The model `{name}` does not exist or you do not have access to it.",
                    code="model_not_found")


# ---------------------------------------------------------------------------
# 客户端：真正的 openai.OpenAI，线路在本进程里
# ---------------------------------------------------------------------------


class FakeClient(OfflineClient):
    """离线假模型：一个真正的 ``openai.OpenAI``，请求不出本进程，由 ``FakeModel`` 作答。

    * ``FakeClient()``：默认策略，只根据请求内容决定回复；
    * ``FakeClient(script=[...])``：按顺序返回脚本里的回复，用完后抛出 ``ScriptExhaustedError``。

    ``last_request`` 保存最近一次请求（``messages`` 已规整成字典），方便查看。
    SDK 默认的自动重试在这里关掉（``max_retries=0``）：脚本里的每一项正好对应一次请求。
    ``with_options(...)`` 得到的副本和原来的客户端共用同一个假模型。
    """

    def __init__(self, script: Iterable[Any] | None = None, *, model: str = DEFAULT_MODEL, **options: Any):
        self._model = FakeModel(script, model=model)
        handler = None if isinstance(options.get("http_client"), OfflineHTTP) else self._make_handler()
        super().__init__(handler, **options)

    def _make_handler(self):
        return FakeHandler(self)

    @property
    def fake_model(self) -> FakeModel:
        """作答的假模型；SDK 复制出来的副本指向原来那个客户端的假模型。"""
        responder = getattr(self.handler, "responder", self)
        return self._model if responder is self else responder.fake_model

    def respond(self, request: dict) -> dict | list[dict]:
        """处理一次请求体（字典），返回响应体；见 ``FakeModel.respond``。子类可以改写它来模拟别的服务。"""
        return self.fake_model.respond(request)

    @property
    def model(self) -> str:
        """假模型回报的模型名。"""
        return self.fake_model.model

    @property
    def last_request(self) -> dict | None:
        """最近一次请求体（``messages`` 已规整成字典）。"""
        return self.fake_model.last_request

    @property
    def script_remaining(self) -> int | None:
        """脚本里还剩几条回复；默认策略下是 ``None``。"""
        return self.fake_model.script_remaining

    def __repr__(self) -> str:
        fake = self.fake_model
        if fake._script is None:
            return f"{type(self).__name__}(model={fake.model!r}, 默认策略)"
        return (f"{type(self).__name__}(model={fake.model!r}, 脚本 {len(fake._script)} 条，"
                f"剩 {fake.script_remaining} 条)")


class _CutStreams:
    """处理函数的包装：第 `cut_on` 次（不写就是每一次）流式请求只放出前 `after` 块，然后悄悄结束。"""

    def __init__(self, inner, after: int, cut_on: set[int] | None):
        self.inner = inner
        self.responder = inner.responder
        self.after = after
        self.cut_on = cut_on
        self.calls = 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.calls += 1
        response = self.inner(request)
        streaming = response.headers.get("content-type", "").startswith("text/event-stream")
        if not streaming or (self.cut_on is not None and self.calls not in self.cut_on):
            return response
        events = [e for e in response.read().split(b"\n\n") if e.strip() and e.strip() != b"data: [DONE]"]
        chunks = [json.loads(e.decode("utf-8")[len("data: "):]) for e in events[:self.after]]
        return sse_response(chunks, done=False, headers={"connection": "close"})


class CutStreamClient(FakeClient):
    """演示用：流式回复只放出前 `after` 块就结束（没有 `finish_reason`，也没有 `[DONE]`），模拟连接中途断开。

    ``CutStreamClient(FakeClient(), after=4)`` 和给定的假模型共用同一个“大脑”；``cut_on`` 是要截断的
    第几次调用（从 1 开始的集合），不写就截断每一次流式调用；非流式调用原样回答。
    截断发生在 HTTP 这一层：SDK 读到的就是一个提前结束的 SSE 响应。
    """

    def __init__(self, client: FakeClient | None = None, after: int = 5, *,
                 cut_on: Iterable[int] | None = None, **options: Any):
        if not isinstance(options.get("http_client"), OfflineHTTP):
            base = client if client is not None else FakeClient()
            options["http_client"] = offline_http(
                _CutStreams(FakeHandler(base), after, None if cut_on is None else set(cut_on)))
        super().__init__(**options)

    @property
    def after(self) -> int:
        return self.handler.after

    @property
    def cut_on(self) -> set[int] | None:
        return self.handler.cut_on

    @property
    def calls(self) -> int:
        """到目前为止收到的请求数。"""
        return self.handler.calls

    def __repr__(self) -> str:
        which = "每一次" if self.cut_on is None else "第 " + "、".join(map(str, sorted(self.cut_on))) + " 次"
        return f"CutStreamClient({self.handler.responder!r}，{which}流式调用只放出前 {self.after} 块)"
