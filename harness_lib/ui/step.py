"""调一次模型、跑一次循环：不管回来什么（包括什么都没回来），笔记本都能接着往下走。

辅助工具，不是课程内容。笔记本里每一格调模型的代码都经过这里的两个函数之一：

- `ask_model(client, want=..., script=..., **create 的参数)`：调一次
  `client.chat.completions.create(...)`，打印一行“这次：……”，说的是这次真正回来的东西：
  端点出错（附中文说明）、只有文字、提出了哪几个工具调用。这一步要的形状没有出现时
  （`want`），改用脚本模式的假模型回答同一个请求，打印【脚本示范】，笔记本照样往下走；
- `run_loop(loop, messages, client=..., model=...)`：跑一个循环函数。循环中途出错时，
  `messages` 退回到这一格开始时的样子，再由假模型【脚本示范】跑一遍，所以它不会停在半截。

两者都给请求补上 `max_tokens`（没写时用 `MAX_TOKENS`）：原文的循环也写了回答长度上限，
没有上限时，本机的小模型会一直写到上下文装满。
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

import openai

from ..models.errors import MAX_TOKENS, EndpointError, call_model, from_sdk
from ..models.fake import FakeClient
from ..safety.secrets import redact

__all__ = ["MAX_TOKENS", "LoopRun", "Step", "ask_model", "describe_reply", "run_loop"]


SCRIPTED = "【脚本示范】"
_CLIP = 80

WANTS = {
    None: "任何一种回复",
    "text": "一段文字回答（不请求工具）",
    "tools": "至少一个工具调用",
    "bash": "调用 bash 工具、参数是带字符串 command 的 JSON 对象",
}


def _clip(text: Any, limit: int = _CLIP) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _calls(message: Any) -> list:
    return list(_field(message, "tool_calls") or [])


def _bash_command(call: Any) -> str | None:
    """这个调用是 bash、参数是带字符串 command 的 JSON 对象时，返回那条命令；否则 None。"""
    function = _field(call, "function")
    if _field(function, "name") != "bash":
        return None
    try:
        args = json.loads(_field(function, "arguments") or "")
    except (TypeError, ValueError):
        return None
    command = args.get("command") if isinstance(args, dict) else None
    return command if isinstance(command, str) else None


def _wanted(message: Any, want: Any) -> bool:
    if message is None:
        return False
    calls = _calls(message)
    if want is None:
        return True
    if callable(want):
        return bool(want(message))
    if want == "text":
        return not calls and bool((_field(message, "content") or "").strip())
    if want == "tools":
        return bool(calls)
    if want == "bash":
        return bool(calls) and all(_bash_command(c) is not None for c in calls)
    raise ValueError(f"want 只能是 None、{'、'.join(repr(k) for k in WANTS if k)} 或一个函数，收到 {want!r}")


def _want_text(want: Any) -> str:
    if callable(want):
        return (want.__doc__ or "").strip().splitlines()[0] if want.__doc__ else "另一种形状的回复"
    return WANTS.get(want, str(want))


def describe_reply(message: Any) -> str:
    """用一句话说这条助手消息里有什么：几个工具调用、各是什么；没有调用时是那段文字的开头。"""
    calls = _calls(message)
    if not calls:
        text = _field(message, "content")
        if not (text or "").strip():
            return "没有请求工具，文字也是空的"
        return f"没有请求工具，只回了文字：{_clip(text)!r}"
    parts = []
    for call in calls:
        function = _field(call, "function")
        command = _bash_command(call)
        if command is not None:
            parts.append(f"bash {command!r}")
        else:
            parts.append(f"{_field(function, 'name')} {_clip(_field(function, 'arguments'), 60)!r}")
    return f"请求了 {len(calls)} 个工具调用：" + "；".join(parts)


def _explain(exc: BaseException, client: Any) -> str:
    """任何一次失败的中文说明（已打码）。"""
    key = getattr(client, "api_key", None)
    if isinstance(exc, (EndpointError, openai.APIError)):
        return str(from_sdk(exc, key))
    if isinstance(exc, json.JSONDecodeError):
        return redact(f"模型给的 arguments 不是合法的 JSON（{exc.msg}），循环里的 json.loads 抛了异常（04 处理这种调用）。", key)
    if isinstance(exc, KeyError):
        return redact(f"模型给的参数里缺少字段 {exc}，循环取值时抛了 KeyError（04 处理这种调用）。", key)
    return redact(f"{type(exc).__name__}：{_clip(exc, 200)}", key)


@dataclass
class Step:
    """一次模型调用的结果。笔记本接着用 `message`、`client`、`model`，不管它们来自哪里。

    - `message`：接着往下用的助手消息（SDK 的消息对象）；
    - `response`：它所在的完整回复（`ChatCompletion`）；
    - `client`、`model`：后面的步骤接着用的客户端和模型名。走了【脚本示范】时是脚本模式的假模型；
    - `scripted`：是不是走了【脚本示范】；
    - `live`：所选模型这次真正回来的助手消息；端点出错时是 `None`；
    - `error`：端点出错时的 `EndpointError`，否则 `None`；
    - `said`：打印出来的那几行。
    """

    message: Any
    response: Any
    client: Any
    model: str
    scripted: bool
    live: Any = None
    error: EndpointError | None = None
    said: list[str] = field(default_factory=list)

    @property
    def tool_calls(self) -> list:
        return _calls(self.message)


def _scripted_client(script: Any) -> FakeClient:
    if script is None:
        fake = FakeClient()  # 默认策略：认得原文的例子，拿到工具结果后写一句总结
    elif isinstance(script, FakeClient):
        fake = script
    else:
        fake = FakeClient(script=list(script))
    fake._stands_in = True  # 它是替所选模型演示的：后面的步骤用它时也标上【脚本示范】
    return fake


def _is_stand_in(client: Any) -> bool:
    """这个客户端是不是在替所选模型演示：脚本模式的假模型，或者 `ask_model`/`run_loop` 换上的假模型。"""
    return isinstance(client, FakeClient) and (client.script_remaining is not None
                                               or getattr(client, "_stands_in", False))


def ask_model(client, *, want=None, script=None, quiet=False, **kwargs) -> Step:
    """调一次 `client.chat.completions.create(**kwargs)`（经 `errors.call_model`），不管回来什么都返回一个 `Step`。

    `want` 是这一步要的回复形状：`None`（什么都行，只有端点出错才换）、`"text"`、`"tools"`、
    `"bash"`，或者一个收助手消息、返回真假的函数。没出现时，用脚本模式的假模型回答同一个请求：
    `script` 是它的回复列表（`text_reply(...)`、`tool_reply(...)`），或者一个现成的 `FakeClient`；
    不写就用默认策略的假模型。`quiet=True` 时不打印。没写 `max_tokens` 时补上 `MAX_TOKENS`。
    """
    kwargs.setdefault("max_tokens", MAX_TOKENS)
    # 已经在用脚本模式的假模型（前面一步换过来的）时，这一步也标上【脚本示范】
    label = SCRIPTED if _is_stand_in(client) else ""
    said: list[str] = []
    live = response = error = None
    try:
        response = call_model(client, **kwargs)  # 回复不是 JSON、没有 choices，它也抛 EndpointError
        live = response.choices[0].message
        said.append(label + "这次：模型" + describe_reply(live) + "。")
    except (openai.APIError, EndpointError, json.JSONDecodeError, UnicodeError) as exc:
        error = exc if isinstance(exc, EndpointError) else from_sdk(exc, getattr(client, "api_key", None))
        said.append("这次：端点没有给出回复。" + _explain(error, client))
        response = None
    if live is not None and _wanted(live, want):
        step = Step(live, response, client, kwargs.get("model"), False, live, None, said)
    else:
        fake = _scripted_client(script)
        if live is not None:
            said.append(f"这一步要的是{_want_text(want)}。")
        said.append(f"{SCRIPTED}下面改用脚本模式的假模型回答同一个请求。")
        request = dict(kwargs, model=fake.model)
        response = fake.chat.completions.create(**request)
        step = Step(response.choices[0].message, response, fake, fake.model, True, live, error, said)
        said.append(f"{SCRIPTED}假模型" + describe_reply(step.message) + "。")
    if not quiet:
        print("\n".join(said))
    return step


@dataclass
class LoopRun:
    """`run_loop` 的结果：`answer` 是循环的返回值，`scripted` 说是不是走了【脚本示范】。"""

    answer: Any
    client: Any
    model: str
    scripted: bool
    error: BaseException | None = None
    said: list[str] = field(default_factory=list)


def _tool_calls_in(messages: list, start: int) -> int:
    return sum(len(_calls(m)) for m in messages[start:] if _field(m, "role") == "assistant")


def run_loop(loop: Callable, messages: list, *, client, model, want=None, script=None, quiet=False,
             **kwargs) -> LoopRun:
    """跑 `loop(messages, client=client, model=model, **kwargs)`，不管模型怎样回复都返回。

    跑完打印一行“这次：……”（几轮、几个工具调用、最后的回答）。循环中途抛出异常（端点出错、
    模型给的参数解析不了……）时，先打印中文说明，把 `messages` 退回到开始时的样子，
    再用脚本模式的假模型（`script`，不写就用默认策略）跑同一个循环，标着【脚本示范】。
    `want="tools"` 时，模型一个工具都没调用也改用【脚本示范】，因为这一格要演示的是工具往返。
    """
    start = len(messages)
    said: list[str] = []
    error = None
    answer = None
    try:
        answer = loop(messages, client=client, model=model, **kwargs)
    except Exception as exc:  # noqa: BLE001  任何失败都要说清楚，然后接着演示
        error = exc
        kept = len(messages) - start
        del messages[start:]
        said.append(f"这次：循环中途停了。{_explain(exc, client)}")
        said.append(f"messages 退回到这一格开始时的 {start} 条（去掉了这次追加的 {kept} 条）。")
    if error is None:
        assistants = sum(1 for m in messages[start:] if _field(m, "role") == "assistant")
        calls = _tool_calls_in(messages, start)
        said.append(f"这次：模型回复了 {assistants} 次，一共请求了 {calls} 个工具调用；"
                    f"最后的回答：{_clip(answer)!r}。")
        if want == "tools" and calls == 0:
            said.append("这一格要演示的是工具往返，模型这次一个工具都没调用。")
            del messages[start:]
        else:
            if not quiet:
                print("\n".join(said))
            return LoopRun(answer, client, model, False, None, said)
    fake = _scripted_client(script)
    said.append(f"{SCRIPTED}下面用脚本模式的假模型把同一个循环跑一遍。")
    if not quiet:
        print("\n".join(said))
    answer = loop(messages, client=fake, model=fake.model, **kwargs)
    done = f"{SCRIPTED}假模型请求了 {_tool_calls_in(messages, start)} 个工具调用，最后的回答：{_clip(answer)!r}。"
    said.append(done)
    if not quiet:
        print(done)
    return LoopRun(answer, fake, fake.model, True, error, said)
