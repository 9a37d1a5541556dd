"""假模型的默认策略（外加默认的思考文字 `default_thinking`），以及写脚本用的 `text_reply`、`scripted_call`、`tool_reply`。
默认策略不是真的模型：只认几类固定请求（原文的“列出当前目录中的 Python 文件”、当前目录、日期、
行数、打招呼），拿到工具结果后照着输出写一句中文小结。
“走别的路”的模型名（`OTHER_PATH_MODELS`）让笔记本在测试里也要面对“模型没照剧本走”。
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from ..safety.runner import list_py_command
from ..text import shorten
from .messages import text_of

TALK_ONLY, OTHER_COMMANDS = "fake-talk-only", "fake-other-commands"
OTHER_PATH_MODELS = {  # 模型名 → 一句说明（本地端点按模型名选规则）
    TALK_ONLY: "从不调用工具，只用文字回答",
    OTHER_COMMANDS: "一次提出两个别的无害命令，拿到结果后用文字总结",
}


def text_reply(content: str) -> dict:
    """脚本里的一条文字回复（`finish_reason="stop"`）。"""
    return {"role": "assistant", "content": content}


def scripted_call(name: str, arguments: Any, *, id: str | None = None) -> dict:
    """脚本里的一个工具调用。`arguments` 是字典时转成 JSON，是字符串时原样保留（可以故意写坏 JSON）；
    `id` 不写时，请求到来时按 `call_001`、`call_002` …… 接着编号。"""
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {**({"id": id} if id is not None else {}), "type": "function",
            "function": {"name": name, "arguments": arguments}}


def tool_reply(*calls: dict, content: str | None = None) -> dict:
    """脚本里的一条助手消息，带一个或几个工具调用（`finish_reason="tool_calls"`）。"""
    if not calls:
        raise ValueError("tool_reply() 至少需要一个 scripted_call(...)")
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def default_thinking(reply: dict) -> str:
    """回复没带 `reasoning_content` 时的思考文字（Responses 的推理条目、Anthropic 的 thinking 块用它）：
    只说接下来要做什么，像真实模型的思考摘要，不是真的推理。"""
    calls = [c["function"] for c in reply.get("tool_calls") or ()]
    if calls:
        wanted = "；".join(f"{f['name']} {f['arguments']}" for f in calls)
        return f"这一步要先调用工具：{wanted}。等看到结果再回答。"
    return "需要的信息已经齐了，直接用文字回答。"


def _commands() -> dict[str, str]:
    windows = os.name == "nt"
    return {"list_py": list_py_command(), "count_lines": 'find /c /v "" *.py' if windows else "wc -l *.py",
            "list_files": "dir /b" if windows else "ls", "pwd": "cd" if windows else "pwd",
            "date": "date /t" if windows else "date"}


_PY_FILE = re.compile(r"\.py\b|python|py\s*文件", re.I)
_FILE_WORD = re.compile(r"文件|file|脚本|script|\.py\b", re.I)
_LINES = re.compile(r"行数|多少行|几行|代码量|\blines?\b|\bwc\b", re.I)
_LIST_FILES = re.compile(r"哪些文件|什么文件|列出.*文件|文件列表|列出.*目录|目录(里|中|下)?(有|的)(什么|哪些)|\bls\b|"
                         r"\bdir\b|\blist\b.*\bfiles?\b|\b(what|which)\s+files\b|\bshow\b.*\bfiles?\b|"
                         r"what'?s in (the|this) (current )?(directory|folder)", re.I)
_PWD = re.compile(r"\bpwd\b|当前(工作)?目录(是|在)|哪个目录|什么目录|工作目录|当前路径|当前文件夹|在哪个文件夹|"
                  r"current (working )?directory|working directory|where am i", re.I)
_DATE = re.compile(r"日期|几号|星期几|今天是|\bdate\b|what day|\btoday\b", re.I)
_GREETING = re.compile(r"^\s*(你好|您好|嗨|哈喽|早上好|下午好|晚上好|(hello|hi|hey)\b)", re.I)
_INTENTS = (("list_files", _LIST_FILES), ("pwd", _PWD), ("date", _DATE), ("greeting", _GREETING))
_HANDLED = ("列出当前目录中的 Python 文件", "当前目录是哪里（pwd）", "当前目录里有哪些文件", "今天的日期",
            "统计 Python 文件的行数", "打个招呼")
_PY_NAME = re.compile(r"[^\s'\"`:,;()<>|*?]+\.py(?![\w.])")
_NO_OUTPUT = ("(没有输出)", "(no output)")  # 执行器在命令没有输出时写的占位文字（safety.runner 用前一种）
_OUTPUT_SIGNS = (".py", "/", "No such file", "cannot access", "找不到", "File Not Found")


def _intent(text: str) -> str:
    if _PY_FILE.search(text) and _LINES.search(text):
        return "count_lines"
    if _PY_FILE.search(text) and _FILE_WORD.search(text):
        return "list_py"
    return next((name for name, pattern in _INTENTS if pattern.search(text)), "unknown")


def _command_of(call: dict) -> str | None:
    try:
        args = json.loads(call["function"]["arguments"])
    except ValueError:
        return None
    return args["command"] if isinstance(args, dict) and isinstance(args.get("command"), str) else None


def _intent_of_command(command: str | None, commands: dict[str, str]) -> str | None:
    """一条命令是哪一类：和默认命令一样的直接认，别的按 `*.py`、开头的程序名猜。"""
    if command is None:
        return None
    known = {c: intent for intent, c in commands.items()}
    if command.strip() in known:
        return known[command.strip()]
    if "*.py" in command:
        return "count_lines" if ("wc" in command or "find /c" in command) else "list_py"
    head = command.strip().split(" ", 1)[0]
    return {"ls": "list_files", "dir": "list_files", "pwd": "pwd", "date": "date"}.get(head)


def _clip(text: str, limit: int = 200) -> str:
    return shorten(text.strip(), limit, total=True)


def _names(names: list[str], limit: int = 20) -> str:
    return "、".join(names[:limit]) + (" 等" if len(names) > limit else "")


def _summary(intent: str | None, command: str | None, output: str) -> str:
    """拿到一条工具结果后的中文小结。"""
    shown = f"`{command}`" if command else "命令"
    text = "" if output.strip() in _NO_OUTPUT else output.strip()
    if intent == "list_py":
        files = list(dict.fromkeys(n[2:] if n.startswith(("./", ".\\")) else n for n in _PY_NAME.findall(text)))
        if files:
            return f"当前目录中有 {len(files)} 个 Python 文件：{_names(files)}。"
        if not text:
            return f"当前目录中没有 Python 文件（{shown} 没有输出）。"
        return f"没有找到 Python 文件。{shown} 的输出是：{_clip(' '.join(text.split()), 120)}"
    if not text:
        return f"{shown} 执行完了，但没有输出。"
    if intent == "pwd":
        return f"当前目录是 {_clip(text.splitlines()[0])}。"
    if intent == "list_files":
        entries = [line.strip() for line in text.splitlines() if line.strip()]
        return f"当前目录中有 {len(entries)} 项：{_names(entries)}。"
    if intent == "date":
        return f"{shown} 的输出是：{_clip(text)}。"
    clipped = _clip(text, 400 if intent == "count_lines" else 200)
    indented = "\n".join("    " + line for line in clipped.splitlines())
    if intent == "count_lines":
        return f"各个 Python 文件的行数如下（{shown} 的输出）：\n\n{indented}"
    return f"工具返回了：\n\n{indented}"


def _pasted_back(msgs: list[dict], commands: dict[str, str]) -> str | None:
    """最后两条是“助手用文字建议命令 → 用户贴回输出”时，返回那条命令，否则 None。"""
    if len(msgs) < 2 or msgs[-1].get("role") != "user" or msgs[-2].get("role") != "assistant" \
            or msgs[-2].get("tool_calls"):
        return None
    pasted = text_of(msgs[-1].get("content"))
    # 只有看起来像命令输出的内容才算“贴回结果”，“谢谢”之类的闲聊不算
    if not ("\n" in pasted or any(s in pasted for s in _OUTPUT_SIGNS)):
        return None
    suggested = text_of(msgs[-2].get("content"))
    return next((c for c in commands.values() if f"\n    {c}\n" in suggested), None)


def _other_path_reply(msgs: list[dict], names: list[str], model: str) -> dict:
    """“走别的路”的模型：`fake-talk-only` 只说话；`fake-other-commands` 提出两个别的无害命令，再用文字总结。"""
    finished = msgs[-1].get("role") == "tool"
    if model == TALK_ONLY or "bash" not in names:
        if finished:
            return text_reply("我看到了工具的结果，不过我只用文字回答。")
        why = "只用文字回答，不调用任何工具" if model == TALK_ONLY else "这次请求没有提供工具，只能用文字回答"
        return text_reply(f"我是 {model}，{why}。你可以自己运行：\n\n    {list_py_command()}\n")
    if finished:
        k = len(msgs)
        while k > 0 and msgs[k - 1].get("role") == "tool":
            k -= 1
        return text_reply("我运行了别的命令，看到的是：" + "；".join(_clip(text_of(m.get("content")), 80)
                                                             for m in msgs[k:]))
    others = ["cd", "ver"] if os.name == "nt" else ["pwd", "uname -s"]  # 都无害，但都不是课上等着的那一条
    return tool_reply(*(scripted_call("bash", {"command": c}) for c in others))


def _bash(*commands: str) -> dict:
    return tool_reply(*(scripted_call("bash", {"command": c}) for c in commands))


def default_reply(msgs: list[dict], tools: list[dict], tool_choice: Any, model: str) -> dict:
    """默认策略：根据请求内容给出一条助手消息（不含调用 id）；“走别的路”的模型名用它自己的规则。"""
    names = [] if tool_choice == "none" else [t["function"]["name"] for t in tools]
    if model in OTHER_PATH_MODELS:
        return _other_path_reply(msgs, names, model)
    forced = tool_choice["function"]["name"] if isinstance(tool_choice, dict) else None
    if tool_choice == "required":
        forced = "bash" if "bash" in names else (names[0] if names else None)
    if forced not in (None, "bash"):
        return tool_reply(scripted_call(forced, {}))
    commands = _commands()
    last_user = next((text_of(m.get("content")) for m in reversed(msgs) if m.get("role") == "user"), "")
    intent = _intent(last_user)

    if msgs[-1].get("role") == "tool":  # 末尾这一组工具结果，和它们回应的那条助手消息
        k = len(msgs) - 1
        while k >= 0 and msgs[k].get("role") == "tool":
            k -= 1
        proposed = {c["id"]: (c["function"]["name"], _command_of(c)) for c in msgs[k].get("tool_calls") or []}
        results = msgs[k + 1:]
        if forced == "bash":  # tool_choice 要求必须调用工具：那就再调用一次
            _, command = proposed.get(results[-1]["tool_call_id"], ("bash", None))
            return _bash(command or commands.get(intent, commands["list_files"]))
        parts = []
        for r in results:
            name, command = proposed.get(r["tool_call_id"], ("bash", None))
            kind = _intent_of_command(command, commands) if name == "bash" else None
            if kind is None and name == "bash" and command is None:
                kind = intent if intent in commands else None
            parts.append(_summary(kind, command, text_of(r.get("content"))))
        return text_reply("\n\n".join(parts))

    suggested = _pasted_back(msgs, commands) if "bash" not in names else None
    if suggested is not None:  # 上一条建议了命令、这一条贴回了结果：像对待工具结果一样总结它
        return text_reply(_summary(_intent_of_command(suggested, commands), suggested, last_user))
    if "bash" in names and _PWD.search(last_user) and _DATE.search(last_user):
        return _bash(commands["pwd"], commands["date"])  # 两件互不依赖的事：一条回复里并行发出两个调用
    if intent in commands and "bash" in names:
        return _bash(commands[intent])
    if intent in commands:
        return text_reply(f"可以在终端里运行：\n\n    {commands[intent]}\n\n我自己没法执行它，需要你运行后把结果告诉我。")
    if forced == "bash":
        return _bash(commands["list_files"])
    if intent == "greeting":
        return text_reply("你好！我是离线假模型。可以试试让我“列出当前目录中的 Python 文件”。")
    items = "\n".join(f"- {item}" for item in _HANDLED)
    return text_reply(f"我是本项目内置的离线假模型（{model}），并不真正理解问题，只认得下面几类固定请求：\n{items}\n"
                      "想和真实模型对话，请在模型切换器里选择一个真实端点。")
