"""录制与回放：把一次运行里每次模型调用的请求和响应存成 JSONL，之后离线重放。

辅助工具，不是课程内容；09_probe_and_replay（原文第三节 OpenAI-compatible 一段的延伸）讲怎么用。

- `Recorder(client)`：包住任何 `openai.OpenAI` 风格的客户端，每次 `chat.completions.create()`
  （普通的和流式的）都记下来；`recorder.save(path)` 写成 JSONL，一次调用一行：
  请求体（`messages`、`tools` 和其他参数）以及响应的原始 JSON，流式调用则是全部块的列表。
  不记录请求头，也不记录密钥；万一密钥出现在对话内容里，写文件时也会被替换掉。
- `ReplayClient(path)`：离线的假客户端，按录制的顺序给出同样的回复（真正的 SDK 对象）。
  这次的请求和录像里的不一样时（比如 `messages` 走岔了），抛出中文说明的 `ReplayMismatchError`；
  `ReplayClient(path, check=False)` 则不检查，只按顺序回放。

一行的样子：
`{"call": 1, "request": {...}, "stream": false, "response": {...}}`，
流式调用是 `{"call": 2, "request": {...}, "stream": true, "chunks": [...], "ended": true}`，
失败的调用是 `{"call": 3, "request": {...}, "stream": false, "error": {...}}`。
`ended` 表示调用者把流读到了头（SDK 不报错地读完，不代表回复完整：有没有 `finish_reason` 要看块本身）。
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Iterable, Iterator

import httpx2
import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from .fake import FAKE_URL, api_error

__all__ = [
    "Recorder",
    "ReplayClient",
    "ReplayExhaustedError",
    "ReplayMismatchError",
    "load_calls",
    "replay",
]

# 不写进录像的参数：请求头（可能带密钥）、查询串、超时等传输层设置
_SKIP_PARAMS = {"extra_headers", "extra_query", "timeout"}
# 回放时逐项比较的请求字段
_COMPARED = ("messages", "tools", "tool_choice", "stream")
_REDACTED = "[已隐去的密钥]"
_MIN_SECRET = 8  # 太短的字符串不当作密钥替换，免得误伤正文


def _is_given(value: Any) -> bool:
    return not isinstance(value, (openai.NotGiven, openai.Omit))


def _plain(value: Any) -> Any:
    """把请求参数变成能写进 JSON 的普通值；SDK 对象按 `model_dump(exclude_none=True)` 转换。"""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items() if _is_given(v)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return _plain(dump(mode="json", exclude_none=True))
    if isinstance(value, Iterable):
        return [_plain(v) for v in value]
    return str(value)


def _request_record(kwargs: Mapping) -> dict:
    """请求体：去掉没给的参数和传输层设置，其余按 JSON 保存。"""
    return {k: _plain(v) for k, v in kwargs.items() if _is_given(v) and k not in _SKIP_PARAMS}


def _response_json(obj: Any) -> Any:
    """响应（或一块）的原始 JSON：SDK 对象用 `to_dict()`，保留服务返回的每个字段。"""
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    return _plain(obj)


def _error_record(exc: BaseException) -> dict:
    record: dict = {"type": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, Mapping) else {}
        record.update(status=exc.status_code, message=str(body.get("message") or exc.message),
                      param=body.get("param"), code=body.get("code"))
    return record


class _RecordingStream:
    """把流式块原样交给调用者，同时记进录像。"""

    def __init__(self, stream: Any, entry: dict):
        self._stream = stream
        self._entry = entry

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        try:
            chunk = next(self._stream)
        except StopIteration:
            self._entry["ended"] = True
            raise
        except Exception as exc:
            self._entry["error"] = _error_record(exc)
            raise
        self._entry["chunks"].append(_response_json(chunk))
        return chunk

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> "_RecordingStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _RecordingCompletions:
    def __init__(self, recorder: "Recorder"):
        self._recorder = recorder

    def create(self, **kwargs: Any) -> Any:
        """同 `client.chat.completions.create`：照常转交给被包住的客户端，同时记下这次调用。"""
        recorder = self._recorder
        for key in ("messages", "tools"):
            value = kwargs.get(key)
            if value is not None and _is_given(value) and not isinstance(value, (list, tuple, dict, str)):
                kwargs[key] = list(value)  # 迭代器只能读一次：先变成列表，录像和请求用同一份
        stream = bool(kwargs.get("stream")) and _is_given(kwargs.get("stream"))
        entry: dict = {"call": len(recorder.calls) + 1, "request": _request_record(kwargs), "stream": stream}
        recorder.calls.append(entry)
        try:
            result = recorder.client.chat.completions.create(**kwargs)
        except Exception as exc:
            entry["error"] = _error_record(exc)
            raise
        if stream:
            entry["chunks"] = []
            entry["ended"] = False
            return _RecordingStream(iter(result), entry)
        entry["response"] = _response_json(result)
        return result


class _RecordingChat:
    def __init__(self, recorder: "Recorder"):
        self.completions = _RecordingCompletions(recorder)


class Recorder:
    """录制器：用法和被包住的客户端相同，每次 `chat.completions.create()` 都记进 `calls`。

    `Recorder(client)` 之后把它当 client 用（例如 `agent_loop(..., client=recorder)`），
    最后 `recorder.save(path)` 写出 JSONL。`secrets` 是额外需要从文件里抹掉的字符串；
    被包住的客户端自己的 `api_key` 总是会被抹掉。
    """

    def __init__(self, client: Any, *, secrets: Iterable[str] = ()):
        self.client = client
        self.calls: list[dict] = []
        self.chat = _RecordingChat(self)
        self._secrets = [s for s in secrets if isinstance(s, str)]

    def _all_secrets(self) -> list[str]:
        found = [*self._secrets, getattr(self.client, "api_key", None)]
        keep = {s for s in found if isinstance(s, str) and len(s) >= _MIN_SECRET}
        return sorted(keep, key=len, reverse=True)  # 先换长的，再换短的

    def lines(self) -> list[str]:
        """录像的每一行（JSON 文本，中文原样保存，密钥已替换）。"""
        out = []
        for entry in self.calls:
            line = json.dumps(entry, ensure_ascii=False, separators=(",", ":"))
            for secret in self._all_secrets():
                line = line.replace(secret, _REDACTED)
                escaped = json.dumps(secret, ensure_ascii=False)[1:-1]
                line = line.replace(escaped, _REDACTED)
            out.append(line)
        return out

    def save(self, path: str | Path) -> Path:
        """把录像写成 UTF-8 的 JSONL 文件（一次调用一行），返回文件路径。"""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(line + "\n" for line in self.lines())
        path.write_text(text, encoding="utf-8")
        return path

    def __getattr__(self, name: str) -> Any:
        # 其余属性（例如 models）交给被包住的客户端
        return getattr(self.client, name)

    def __repr__(self) -> str:
        return f"Recorder({self.client!r}，已录 {len(self.calls)} 次调用)"


# ---------------------------------------------------------------------------
# 回放
# ---------------------------------------------------------------------------


class ReplayMismatchError(AssertionError):
    """这次的请求和录像里同一次调用的请求不一样。"""


class ReplayExhaustedError(RuntimeError):
    """录像里的调用已经用完，却还有人调用 `create()`。"""


def load_calls(path: str | Path) -> list[dict]:
    """读出录像文件里的每一次调用（一行一个字典）。"""
    calls = []
    text = Path(path).read_text(encoding="utf-8")
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            calls.append(json.loads(line))
        except ValueError as exc:
            raise ValueError(f"{path} 第 {number} 行不是合法的 JSON：{exc}") from None
    return calls


def _preview(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _difference(recorded: Any, actual: Any, path: str) -> str | None:
    """找出两个 JSON 值第一处不同的位置，返回中文说明；相同则返回 None。"""
    if isinstance(recorded, dict) and isinstance(actual, dict):
        for key in list(recorded) + [k for k in actual if k not in recorded]:
            if key not in actual:
                return f"{path}.{key}：录像里有，这次没有（录像里是 {_preview(recorded[key])}）"
            if key not in recorded:
                return f"{path}.{key}：这次多出来了（这次是 {_preview(actual[key])}）"
            found = _difference(recorded[key], actual[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(actual, list):
        for i, (a, b) in enumerate(zip(recorded, actual)):
            found = _difference(a, b, f"{path}[{i}]")
            if found:
                return found
        if len(recorded) != len(actual):
            return f"{path}：录像里有 {len(recorded)} 项，这次有 {len(actual)} 项"
        return None
    if recorded != actual:
        return f"{path}：录像里是 {_preview(recorded)}，这次是 {_preview(actual)}"
    return None


class _ReplayStream:
    """回放一次流式调用：逐个产出真正的 `ChatCompletionChunk`。"""

    def __init__(self, entry: dict):
        self._entry = entry
        self._chunks = iter(entry.get("chunks") or [])

    def __iter__(self) -> Iterator[ChatCompletionChunk]:
        return self

    def __next__(self) -> ChatCompletionChunk:
        try:
            data = next(self._chunks)
        except StopIteration:
            error = self._entry.get("error")
            if error:
                self._entry = {}
                raise _rebuild_error(error) from None
            raise
        return ChatCompletionChunk.construct(**data)

    def close(self) -> None:
        self._chunks = iter(())

    def __enter__(self) -> "_ReplayStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _rebuild_error(error: Mapping) -> Exception:
    """按录像重建当时的异常：HTTP 错误是同一个 SDK 异常类，连接中断是 APIConnectionError。"""
    status = error.get("status")
    if isinstance(status, int):
        return api_error(status, error.get("message") or "", param=error.get("param"),
                         code=error.get("code"))
    if error.get("type") in ("APIConnectionError", "APITimeoutError"):
        request = httpx2.Request("POST", FAKE_URL)
        if error["type"] == "APITimeoutError":
            return openai.APITimeoutError(request=request)
        return openai.APIConnectionError(message=error.get("message") or "Connection error.",
                                         request=request)
    return RuntimeError(f"录制时这次调用失败了：{error.get('type')}: {error.get('message')}")


class _ReplayCompletions:
    def __init__(self, client: "ReplayClient"):
        self._client = client

    def create(self, **kwargs: Any) -> Any:
        """同 `client.chat.completions.create`：不联网，按顺序给出录像里的下一次回复。"""
        return self._client._answer(kwargs)


class _ReplayChat:
    def __init__(self, client: "ReplayClient"):
        self.completions = _ReplayCompletions(client)


class ReplayClient:
    """回放客户端：按录像的顺序离线给出同样的回复，返回真正的 SDK 对象。

    `check=True`（默认）时，每次请求的 `messages`、`tools`、`tool_choice`、`stream`
    都要和录像里同一次调用一致，否则抛出 `ReplayMismatchError`，写明第一处不同在哪里。
    模型名不比较：`model` 属性是录像里用的模型名，回放时照着用即可。
    """

    def __init__(self, path: str | Path, *, check: bool = True):
        self.path = Path(path)
        self.calls = load_calls(self.path)
        self.check = check
        self.position = 0
        self.chat = _ReplayChat(self)
        first = self.calls[0]["request"] if self.calls else {}
        self.model = first.get("model", "replay")

    @property
    def remaining(self) -> int:
        """录像里还剩几次调用没有回放。"""
        return len(self.calls) - self.position

    def _answer(self, kwargs: Mapping) -> Any:
        if self.position >= len(self.calls):
            raise ReplayExhaustedError(
                f"录像 {self.path.name} 里只有 {len(self.calls)} 次调用，已经全部回放完，"
                f"这是第 {self.position + 1} 次调用 create()。回放的运行比录制时多调用了模型："
                "检查循环的参数（比如 max_turns）或用户消息是否和录制时一样。"
            )
        entry = self.calls[self.position]
        self.position += 1
        number = entry.get("call", self.position)
        if self.check:
            recorded = entry.get("request") or {}
            actual = _request_record(kwargs)
            actual["stream"] = bool(actual.get("stream"))
            expected = {**recorded, "stream": bool(recorded.get("stream"))}
            for field in _COMPARED:
                found = _difference(expected.get(field), actual.get(field), field)
                if found:
                    raise ReplayMismatchError(
                        f"回放对不上：第 {number} 次调用的请求和录像里的不一样。\n"
                        f"第一处不同：{found}\n"
                        "常见原因：用户消息改了；工具的输出随机器或时间而变（临时目录的路径、日期）；"
                        "循环的参数变了。确认无妨时，可以用 ReplayClient(path, check=False) 只按顺序回放。"
                    )
        if "chunks" in entry:
            return _ReplayStream(entry)
        if "error" in entry:
            raise _rebuild_error(entry["error"])
        return ChatCompletion.construct(**entry["response"])

    def __repr__(self) -> str:
        mode = "检查请求" if self.check else "不检查请求"
        return f"ReplayClient({self.path.name!r}，{len(self.calls)} 次调用，剩 {self.remaining} 次，{mode})"


def replay(path: str | Path, *, check: bool = True) -> ReplayClient:
    """`ReplayClient(path, check=check)` 的简写。"""
    return ReplayClient(path, check=check)
