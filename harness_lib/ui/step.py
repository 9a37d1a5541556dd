"""调一次模型、跑一次循环：不管回来什么（包括什么都没回来），笔记本都能接着往下走。

`ask_model` 打印一行“这次：……”，说的是真正回来的东西；要的形状 `want` 没出现时，改用脚本模式的假模型回答同一个
请求，标着【脚本示范】。`run_loop` 中途出错时，`messages` 退回到这一格开始时的样子，再由假模型跑一遍。
两者都补上 `max_tokens`（没写时用 `MAX_TOKENS`）：没有上限时，本机的小模型会一直写到上下文装满。
假模型只替这一步：下一步照样先问所选模型。消息表（`MessagesView`）的标题说回复来自谁。
接口不止一种：`Api` 说一种接口怎样调、怎样读回复、谁替它作答；默认是 Chat Completions（`CHAT`），
`RESPONSES` 是 OpenAI 的 Responses API，Anthropic 的 Messages API 在 `ui.apis`（那里才导入 anthropic SDK）。
"""

import json
from dataclasses import dataclass, field
from typing import Any, Callable

import openai

from ..models.call import MAX_TOKENS, call_model
from ..models.errors import EndpointError, classify, from_sdk, server_words
from ..models.fake import FakeClient
from ..models.messages import as_dict, calls_of, text_of
from ..safety.secrets import redact
from ..safety.trust import trusted
from ..text import one_line, shorten
from .view import SCRIPTED, MessagesView, table_rows

WANTS = {None: "任何一种回复", "text": "一段文字回答（不请求工具）", "tools": "至少一个工具调用",
         "bash": "调用 bash 工具、参数是带字符串 command 的 JSON 对象"}


def clip(text: Any, limit: int = 80) -> str:
    """压成一行，长于 `limit` 个字符时截断，末尾加 …。"""
    return shorten(one_line(text), limit)


def _bash_command(name: str, args: str) -> str | None:
    """这个调用是 bash、参数是带字符串 command 的 JSON 对象时，返回那条命令；否则 None。"""
    try:
        command = json.loads(args or "").get("command") if name == "bash" else None
    except (TypeError, ValueError, AttributeError):
        return None
    return command if isinstance(command, str) else None


def _wanted(message: Any, want: Any, api: "Api | None" = None) -> bool:
    if callable(want):
        return bool(want(message))
    api = api or CHAT
    calls = api.calls(message)
    shapes = {None: True, "text": not calls and bool(api.text(message).strip()),
              "tools": bool(calls), "bash": bool(calls) and all(_bash_command(n, a) is not None for _, n, a in calls)}
    if not isinstance(want, str | None) or want not in shapes:
        raise ValueError(f"want 只能是 None、{'、'.join(repr(k) for k in WANTS if k)} 或一个函数，收到 {want!r}")
    return shapes[want]


def _describe(message: Any, api: "Api | None" = None) -> str:
    """一句话：这条助手消息（另外两种接口是这次的回复）里有几个工具调用、各是什么；没有调用时是那段文字的开头。"""
    api = api or CHAT
    calls = api.calls(message)
    if not calls:
        text = api.text(message)
        return f"没有请求工具，只回了文字：{clip(text)!r}" if text.strip() else "没有请求工具，文字也是空的"
    parts = [f"bash {cmd!r}" if (cmd := _bash_command(name, args)) is not None else f"{name} {clip(args, 60)!r}"
             for _, name, args in calls]
    return f"请求了 {len(calls)} 个工具调用：" + "；".join(parts)


def _explain(exc: BaseException, client: Any, api: "Api | None" = None) -> str:
    """任何一次失败的中文说明（已打码）。"""
    key = getattr(client, "api_key", None)
    api = api or CHAT
    if isinstance(exc, api.failures) and not isinstance(exc, (json.JSONDecodeError, UnicodeError)):
        return str(api.endpoint_error(exc, key))
    if isinstance(exc, json.JSONDecodeError):
        return redact(f"模型给的 arguments 不是合法的 JSON（{exc.msg}），循环里的 json.loads 抛了异常（04 处理这种调用）。", key)
    if isinstance(exc, KeyError):
        return redact(f"模型给的参数里缺少字段 {exc}，循环取值时抛了 KeyError（04 处理这种调用）。", key)
    return redact(f"{type(exc).__name__}：{clip(exc, 200)}", key)


@dataclass
class Step:
    """一次模型调用的结果：笔记本接着用 `message`、`client`、`model`。`scripted`：走了【脚本示范】（`client` 是假模型）；
    `live`：所选模型这次真正回来的消息（端点出错时是 None，`error` 是那个错误）；`said`：打印出来的那几行。"""

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
        return list(self.message.tool_calls or [])


def _is_script(client: Any) -> bool:
    """脚本模式的假模型（笔记本为精确演示自己写的脚本；FakeClient 和 FakeAnthropic 都有 `script_remaining`）。"""
    return trusted(client) and getattr(client, "script_remaining", None) is not None


def _scripted_client(script: Any) -> FakeClient:
    """替所选模型演示的假模型（不写脚本时用默认策略）；标记它，后面的步骤用它时也标上【脚本示范】。"""
    fake = script if isinstance(script, FakeClient) else FakeClient(script=script)
    fake.stands_in = True
    return fake


@dataclass(frozen=True)
class Api:
    """一种接口：怎样调一次模型、怎样读回复、谁替它作答。`Chat(api=...)`、`run_loop(api=...)` 用它；
    `name` 也是消息表的 `api`。`reply` 从回复里取出 `want` 和描述要看的那一部分（Chat 是助手消息，另外两种是整个回复），
    `calls`、`text` 读那一部分（调用是 (id, 工具名, 参数原文)）；`entries` 是这次回复要追加进历史的几项（字典）；
    `failures` 是算作“端点没有给出回复”的异常，`endpoint_error` 把它们变成带中文说明的 `EndpointError`。"""

    name: str
    history: str  # 请求里装历史的参数：messages 或 input
    limit: str  # 长度上限的参数：max_tokens 或 max_output_tokens
    create: Callable
    reply: Callable
    calls: Callable
    text: Callable
    entries: Callable
    stand_in: Callable
    failures: tuple
    endpoint_error: Callable


_FAILURES = (openai.APIError, EndpointError, json.JSONDecodeError, UnicodeError)


def as_endpoint_error(exc: BaseException, key: Any) -> EndpointError:
    """SDK 的异常按错误分类表变成 `EndpointError`（已经是的原样返回）。"""
    return exc if isinstance(exc, EndpointError) else from_sdk(exc, key)


def no_such_api(path: str, convert: Callable = as_endpoint_error) -> Callable:
    """`endpoint_error` 的一种：HTTP 404 而服务器没说是模型名的问题时，说清是这个端点没有 `path` 这条路
    （llama.cpp 这类只有 Chat Completions 的服务就这样回），别的照错误分类表说。"""
    def endpoint_error(exc: BaseException, key: Any) -> EndpointError:
        error = convert(exc, key)
        original = error.original if error.original is not None else exc
        said = server_words(original)
        if error.kind == "not_found" and classify(original).match is openai.NotFoundError \
                and "model" not in said.lower():  # Anthropic 说模型不存在是 404 “model: …”
            return EndpointError("no_such_api", redact(
                f"这个端点没有这种接口：POST {path} 回了 HTTP 404（服务器原话：{said or '无'}）。"
                "它也许只有 Chat Completions（前面几本用的那条路）；本节要用这种接口，得换一个端点，"
                "或者用离线假模型。", key), original=original)
        return error
    return endpoint_error


def _output(response: Any) -> list:
    return list(getattr(response, "output", None) or [])


CHAT = Api("chat", "messages", "max_tokens", call_model, lambda r: r.choices[0].message, calls_of,
           lambda m: text_of(as_dict(m).get("content")), lambda r: [as_dict(r.choices[0].message)],
           _scripted_client, _FAILURES, as_endpoint_error)
RESPONSES = Api(
    "responses", "input", "max_output_tokens", lambda client, **request: client.responses.create(**request),
    lambda r: r, lambda r: [(i.call_id, i.name, i.arguments) for i in _output(r) if i.type == "function_call"],
    lambda r: getattr(r, "output_text", "") or "", lambda r: [as_dict(i) for i in _output(r)],
    _scripted_client, _FAILURES, no_such_api("/v1/responses"))


def ask_model(client, *, want=None, script=None, quiet=False, api: Api | None = None, **kwargs) -> Step:
    """调一次模型（默认 `client.chat.completions.create(**kwargs)`，`api` 换别的接口），返回 `Step`。
    `want`：`None`（只有端点出错才换）、`"text"`、`"tools"`、`"bash"` 或一个判断回复的函数；没出现时由假模型按
    `script`（回复列表或假模型客户端）作答。"""
    api = api or CHAT
    kwargs.setdefault(api.limit, MAX_TOKENS)
    label = SCRIPTED if _is_script(client) or getattr(client, "stands_in", False) else ""  # 脚本模式，或替过别人
    said, live, response, error = [], None, None, None
    try:
        response = api.create(client, **kwargs)  # Chat 的回复不是 JSON、没有 choices，它也抛 EndpointError
        live = api.reply(response)
        said.append(label + "这次：模型" + _describe(live, api) + "。")
    except api.failures as exc:
        error = api.endpoint_error(exc, getattr(client, "api_key", None))
        said.append("这次：端点没有给出回复。" + _explain(error, client, api))
    if live is not None and _wanted(live, want, api):
        step = Step(live, response, client, kwargs.get("model"), False, live, None, said)
    else:
        fake = api.stand_in(script)
        if live is not None:
            wanted = (want.__doc__ or "另一种形状的回复").strip().splitlines()[0] if callable(want) else WANTS[want]
            said.append(f"这一步要的是{wanted}。")
        said.append(f"{SCRIPTED}下面改用脚本模式的假模型回答同一个请求；只替这一步，下一步照样先问所选模型。")
        response = api.create(fake, **dict(kwargs, model=fake.model))
        step = Step(api.reply(response), response, fake, fake.model, True, live, error, said)
        said.append(f"{SCRIPTED}假模型" + _describe(step.message, api) + "。")
    if not quiet:
        print("\n".join(said))
    return step


class Chat:
    """切换器选中的模型，外加它的替补，笔记本里调模型的那一步都经过它。

    `chat.ask(messages, want=..., **请求参数)` 调一次模型（补上 `max_tokens`），打印一行“这次：……”，返回 SDK 的
    `ChatCompletion`，像原文那样取 `response.choices[0].message`。拿不到 `want` 要的回复（包括端点出错）时，
    由脚本模式的假模型回答同一个请求（【脚本示范】）。假模型只替这一步：下一步照样先问所选模型。
    `client`、`model`：所选的客户端和模型名，不会换（审批按 `client` 决定要不要问人）。
    `scripted_replies`：【脚本示范】替它给出的助手消息；`show_messages(messages, chat=chat)` 的标题据此说回复来自谁。
    """

    def __init__(self, client, model: str, *, script: Any = None, api: Api | None = None):
        self.client, self.model, self.api = client, model, api or CHAT
        self.scripted_replies: list[dict] = []  # 【脚本示范】给出的助手消息（字典，和追加进 messages 的一样）
        self.last: Step | None = None  # 上一次调用的全部细节（真正回来的消息、端点错误、打印的几行）
        # 替补是同一个假模型：构造时给的脚本按顺序一步一步用下去
        self._stand_in = self.api.stand_in(script)

    def ask(self, messages: list, *, want=None, script=None, quiet=False, **request):
        """调一次模型，返回 SDK 的回复（Chat 是 `ChatCompletion`）。`messages` 是这次的历史（Responses 的 `input`）。
        `script`：这一步的替补回复（不给时用构造时的，或默认策略）。"""
        step = ask_model(self.client, want=want, script=script if script is not None else self._stand_in,
                         quiet=quiet, api=self.api, model=self.model, **{self.api.history: messages}, **request)
        if step.scripted:
            self.scripted_replies.extend(self.api.entries(step.response))
        self.last = step
        return step.response


@dataclass
class Attempt:
    """一次循环的尝试：`label` 是表格里的前缀（所选模型那一次为空，假模型那一遍是【脚本示范】）；`messages` 是这次的
    整份记录；`outcomes` 是循环按调用 ID 记下的结局（调用方传了 `outcomes=` 才有）；`error` 是让它中途停下的错误。"""

    label: str
    messages: list
    outcomes: dict
    error: BaseException | None = None

    @property
    def name(self) -> str:
        """表格里这一次的名字：所选模型那一次是“所选模型这一次”，假模型那一遍是“【脚本示范】”。"""
        return self.label or "所选模型这一次"

    @property
    def error_kind(self) -> str:
        """端点错误的种类（`EndpointError.kind`；SDK 原样抛出的异常，比如我们自己的请求不合格的 400，按 `ERROR_TABLE`
        归类），别的异常是它的类名；没出错时为空。"""
        if self.error is None:
            return ""
        if isinstance(self.error, EndpointError):
            return self.error.kind
        return classify(self.error).kind if isinstance(self.error, openai.APIError) else type(self.error).__name__

    def layers(self) -> list[str]:
        """这次每条工具消息的层次（从 `outcomes` 按调用 ID 读出，不读文字）；端点出错时末尾再加一项，它不在四层里。"""
        layers = [self.outcomes[m["tool_call_id"]].layer for m in map(as_dict, self.messages)
                  if m.get("role") == "tool" and m.get("tool_call_id") in self.outcomes]
        if self.error is not None:
            layers.append(f"端点出错（不在四层里）：{self.error_kind}")
        return layers


@dataclass
class LoopRun:
    """`run_loop` 的结果：`answer` 是循环的返回值，`scripted` 说是不是走了【脚本示范】。
    `attempts`：先是所选模型那一次（中途出错或形状不对时，是退回之前的记录），走了【脚本示范】时再加假模型那一遍。"""

    answer: Any
    client: Any
    model: str
    scripted: bool
    error: BaseException | None = None
    said: list[str] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)


def _mark_scripted(view: MessagesView, messages: list, start: int) -> None:
    """`start` 以后模型交回的行（助手消息，Responses 的输出条目）都是【脚本示范】给的：记进消息表的 `scripted`。"""
    view.scripted.extend(m for m in messages[start:] if view.is_reply(m)
                         and not any(m is known for known in view.scripted))


def _marking(view: MessagesView, on_turn: Callable, messages: list, start: int) -> Callable:
    """假模型那一遍的 `on_turn`：先把新的助手消息记成【脚本示范】，再刷新表。"""
    def marked(*args, **kwargs):
        _mark_scripted(view, messages, start)
        return on_turn(*args, **kwargs)
    return marked


def _calls_since(messages: list, start: int, api: Api = CHAT) -> int:
    return sum(len(row.calls) for row in table_rows(messages[start:], api.name) if row.reply)


def _replies_since(messages: list, start: int, api: Api = CHAT) -> int:
    """模型回复了几次：连在一起的几项回复算一次（Responses 的一次回复是几个输出条目）。"""
    rows = table_rows(messages[start:], api.name)
    return sum(1 for i, row in enumerate(rows) if row.reply and (i == 0 or not rows[i - 1].reply))


def run_loop(loop: Callable, messages: list, *, client, model, want=None, script=None, quiet=False,
             api: Api | None = None, **kwargs) -> LoopRun:
    """跑 `loop(messages, client=client, model=model, **kwargs)`，打印“这次：……”。中途抛出异常时（`want="tools"` 而
    一个工具都没调用时也一样）把 `messages` 退回开始时的样子，再用假模型（`script`）跑同一个循环，标着【脚本示范】。
    所选模型那一次的记录和结局留在 `attempts[0]` 里；传了 `outcomes={}` 时，它在换假模型之前被清空。
    `on_turn` 是一张消息表的 `update` 时，表的标题说回复来自谁：所选模型，还是【脚本示范】的假模型。
    `api`：循环用的是哪种接口（默认 Chat Completions）：数调用、说明错误、换哪种假模型都按它。"""
    api = api or CHAT
    start, said, error = len(messages), [], None
    label = SCRIPTED if getattr(client, "stands_in", False) else ""  # 传进来的已经是替人作答的假模型
    view = getattr(kwargs.get("on_turn"), "__self__", None)
    view = view if isinstance(view, MessagesView) else None
    # 表知道所选模型是谁：除非传进来的就是脚本（脚本模式的假模型不是谁选的模型）
    if view is not None and view.chosen is None and not label and not _is_script(client):
        view.chosen = model
    outcomes = kwargs.get("outcomes")
    outcomes = outcomes if isinstance(outcomes, dict) else {}
    try:
        answer = loop(messages, client=client, model=model, **kwargs)
    except Exception as exc:  # noqa: BLE001  任何失败都要说清楚，然后接着演示
        error = exc
    if error is None:
        replies = _replies_since(messages, start, api)
        calls = _calls_since(messages, start, api)
        said.append(f"{label}这次：模型回复了 {replies} 次，一共请求了 {calls} 个工具调用；最后的回答：{clip(answer)!r}。")
        if want != "tools" or calls:
            if not quiet:
                print("\n".join(said))
            # 所选模型这一次的记录和结局，就是调用方手里的那两份
            return LoopRun(answer, client, model, False, None, said, [Attempt("", messages, outcomes)])
        said.append("这一格要演示的是工具往返，模型这次一个工具都没调用。")
    else:
        replies = _replies_since(messages, start, api)
        stopped = f"模型回复了 {replies} 次之后，循环中途停了" if replies else "循环还没追加任何消息就停了"
        said.append(f"这次：{stopped}。{_explain(error, client, api)}")
        what = "输入条目（input）" if api.history == "input" else "messages "
        said.append(f"{what}退回到这一格开始时的 {start} 条（去掉了这次追加的 {len(messages) - start} 条）。")
    live = Attempt("", list(messages), dict(outcomes), error)  # 退回之前，留下所选模型这一次
    del messages[start:]
    outcomes.clear()
    fake = api.stand_in(script)
    said.append(f"{SCRIPTED}下面用脚本模式的假模型把同一个循环跑一遍；只替这一格，下一格照样先问所选模型。")
    if not quiet:
        print("\n".join(said))
    if view is not None:
        kwargs = dict(kwargs, on_turn=_marking(view, kwargs["on_turn"], messages, start))
    answer = loop(messages, client=fake, model=fake.model, **kwargs)
    if view is not None:
        _mark_scripted(view, messages, start)
    said.append(f"{SCRIPTED}假模型请求了 {_calls_since(messages, start, api)} 个工具调用，最后的回答：{clip(answer)!r}。")
    if not quiet:
        print(said[-1])
    return LoopRun(answer, fake, fake.model, True, error, said, [live, Attempt(SCRIPTED, messages, outcomes)])
