"""录制与回放：把每次模型调用的 HTTP 请求和响应存成 JSONL，之后离线重放（09_probe_and_replay）。

`Recorder(client)` 给任何 `openai.OpenAI` 接上“录音线路”，`save(path)` 一次调用写一行：不记请求头，每段文字
都经过 `secrets.redact`；SDK 重试过的调用只留最后一次尝试（多一个 `attempts`）。录制经过这个客户端自己的副本
（`with_options`），切换器的客户端学到的规矩照样生效：它改好重发的调用也只留最后一次（被拒的原话记在
`fixed_by_client`），在底下改成流式发出的调用记成它交回的完整回复（多一个 `streamed_by_client`），在底下改走 Responses API 的调用
记成 Chat 的请求和它交回的 ChatCompletion（多一个 `bridged_by_client`）。`ReplayClient(path)` 按顺序
回出同样的响应，请求和录像不一样时抛出 `ReplayMismatchError`（`check=False` 只按顺序回放）。
一行的样子：`{"call": 1, "request": {...}, "stream": false, "response": {...}}`；流式调用有 `chunks`、
`done`（服务发了 `[DONE]`）和 `ended`（流读到了头）；失败的调用有 `error`。
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator

import httpx2
import openai
from pydantic_core import to_jsonable_python

from ..safety.secrets import redact
from ..text import shorten
from .wire import (OFFLINE_KEY, OfflineClient, OfflineHTTP, error_body, is_stream, json_response, sse_chunks,
                   sse_response)

_COMPARED = ("messages", "tools", "tool_choice", "stream")  # 回放时逐项比较的请求字段
_DROPPED_HEADERS = {"content-length", "content-encoding", "transfer-encoding"}


def _json_or(data: bytes, fallback: Any) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return fallback


def _request_json(request: httpx2.Request) -> dict:
    body = _json_or(request.content or b"{}", request.content.decode("utf-8", "replace"))
    return body if isinstance(body, dict) else {"_raw": body}


def _error_record(response: httpx2.Response, data: bytes) -> dict:
    body = _json_or(data, None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    record = {"status": response.status_code, **({k: inner.get(k) for k in ("message", "type", "param", "code")}
                                                 if isinstance(inner, dict) else
                                                 {"message": data.decode("utf-8", "replace")[:500]})}
    retry = {k: v for k, v in response.headers.items() if k.lower().startswith("retry-after")}
    return {**record, "headers": retry} if retry else record


class _TeeStream(httpx2.SyncByteStream):
    """流式响应：字节原样交给 SDK，同时攒下来；SDK 读完或出错后总会关掉流，那时写进录像。"""

    def __init__(self, response: httpx2.Response, entry: dict):
        self._response, self._entry, self._data = response, entry, bytearray()

    def __iter__(self) -> Iterator[bytes]:
        try:
            for piece in self._response.iter_bytes():
                self._data += piece
                yield piece
            self._entry["ended"] = True
        except httpx2.HTTPError as exc:
            self._entry["error"] = {"type": type(exc).__name__, "message": str(exc)}
            raise

    def close(self) -> None:
        self._entry["chunks"], self._entry["done"] = sse_chunks(bytes(self._data))
        # SDK 读到 [DONE] 就停手、关掉响应：这也算读到了头
        self._entry["ended"] = bool(self._entry.get("ended") or self._entry["done"])
        self._response.close()


class _Tap(httpx2.BaseTransport):
    """录音线路：请求照常交给原来的 httpx 客户端发出去，请求体和响应同时记进录像。"""

    def __init__(self, inner: httpx2.Client, calls: list[dict]):
        self.inner, self.calls = inner, calls

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path.rstrip("/")
        if request.method != "POST" or not path.endswith(("/chat/completions", "/responses")):
            return self.inner.send(request)  # 只录模型调用；列模型之类的请求照常转交
        body = _request_json(request)
        retry = int(request.headers.get("x-stainless-retry-count") or 0)
        if retry and self.calls and "error" in self.calls[-1]:
            # 上一次尝试失败了，SDK 在重试同一个调用：录像里一次调用只留最后一次尝试，回放才对得上
            self.calls.pop()
        entry: dict = {"call": len(self.calls) + 1, "request": body, "stream": bool(body.get("stream")),
                       **({"attempts": retry + 1} if retry else {}),  # SDK 试了几次才得到这个结果
                       **({"responses": True} if path.endswith("/responses") else {})}  # 客户端在底下改走的
        self.calls.append(entry)
        try:
            response = self.inner.send(request, stream=True)
        except httpx2.HTTPError as exc:
            kind = "APITimeoutError" if isinstance(exc, httpx2.TimeoutException) else "APIConnectionError"
            entry["error"] = {"type": kind, "message": str(exc)}
            raise
        headers = [(k, v) for k, v in response.headers.items() if k.lower() not in _DROPPED_HEADERS]
        if is_stream(response) and response.status_code == 200:
            entry.update(chunks=[], done=False, ended=False)
            return httpx2.Response(200, headers=headers, stream=_TeeStream(response, entry))
        data = response.read()
        response.close()
        if response.status_code >= 400:
            entry["error"] = _error_record(response, data)
        else:
            parsed = _json_or(data, None)
            entry.update({"response": parsed} if parsed is not None else
                         {"response_text": data.decode("utf-8", "replace")})
        return httpx2.Response(response.status_code, headers=headers, content=data)


class Recorder:
    """录制器：`recorder.client` 是接上录音线路的客户端副本（`Recorder` 本身也能当 client 用），
    每次 `create()` 记进 `calls` 一行；`secrets` 是额外要从文件里抹掉的字符串。"""

    def __init__(self, client: openai.OpenAI, *, secrets: Iterable[str] = ()):
        self.original = client
        self.calls: list[dict] = []
        # SDK 没有公开取出自己 httpx 客户端的办法，私有的 _client 是唯一的入口：录音线路接在它前面，原来的传输层照常工作
        tap = _Tap(client._client, self.calls)
        # 离线客户端的副本要认得出自己的线路（OfflineHTTP），才会沿用原来的假模型
        http = OfflineHTTP(client.handler, tap) if isinstance(client, OfflineClient) else httpx2.Client(transport=tap)
        # 副本就是这个客户端自己：预设每次带的字段、学到的规矩、重试和截止时间都不变
        self.client = client.with_options(http_client=http)
        # 离线线路的占位密钥不是秘密：抹掉它的片段只会误伤正文（比如 "offline" 这个词）
        self._secrets = [s for s in (*secrets, getattr(client, "api_key", None))
                         if isinstance(s, str) and s and s != OFFLINE_KEY]

    @property
    def chat(self) -> "_Chat":
        return _Chat(self)

    def _create(self, **kwargs: Any) -> Any:
        """调一次 `create()`，录像里只留一行：客户端改好重发的，只留最后一次。"""
        start = len(self.calls)
        try:
            result = self.client.chat.completions.create(**kwargs)
        finally:
            self._one_line(start)
            last = self.calls[-1] if len(self.calls) > start else None
            bridged = last is not None and last.pop("responses", False)
            if bridged:
                # 客户端在底下改走了 Responses API：录下循环发的 Chat 调用（失败的也一样，回放时照样失败）
                last.update(request=to_jsonable_python(kwargs), stream=bool(kwargs.get("stream")),
                            bridged_by_client=True)
        if bridged and "error" not in last:
            # 和它交回的 ChatCompletion（或流式块），回放时照 Chat 回
            if kwargs.get("stream"):
                chunks = list(result)
                last.pop("response", None)
                last.update(chunks=[c.model_dump(mode="json", exclude_none=True) for c in chunks], done=True, ended=True)
                return iter(chunks)
            last["response"] = result.model_dump(mode="json", exclude_none=True)
            return result
        if last is not None and last["stream"] and not kwargs.get("stream"):
            # 客户端在底下改成了流式：录下它交回的完整回复，回放时就是一次普通的调用
            for key in ("chunks", "done", "ended"):
                last.pop(key, None)
            last["request"] = {k: v for k, v in last["request"].items() if k not in ("stream", "stream_options")}
            last.update(stream=False, streamed_by_client=True,
                        response=result.model_dump(mode="json", exclude_none=True))
        return result

    def _one_line(self, start: int) -> None:
        """一次 `create()` 留下了几行（客户端学到规矩后改好重发）：只留最后一行，被拒的原话记在 `fixed_by_client`。"""
        if len(self.calls) - start < 2:
            return
        *fixed, last = self.calls[start:]
        del self.calls[start:]
        last["call"] = start + 1
        last["fixed_by_client"] = [entry.get("error") or {} for entry in fixed]
        self.calls.append(last)

    def _scrub(self, value: Any) -> Any:
        """录像里的每一段文字（包括字典的键）都交给 `secrets.redact`。"""
        if isinstance(value, str):
            return redact(value, self._secrets, mask="[已隐去的密钥]")
        if isinstance(value, dict):
            return {self._scrub(k): self._scrub(v) for k, v in value.items()}
        return [self._scrub(v) for v in value] if isinstance(value, list) else value

    def lines(self) -> list[str]:
        """录像的每一行（JSON 文本，中文原样保存，密钥和环境里的秘密值已替换）。"""
        return [json.dumps(self._scrub(entry), ensure_ascii=False, separators=(",", ":")) for entry in self.calls]

    def save(self, path: str | Path) -> Path:
        """把录像写成 UTF-8 的 JSONL 文件（一次调用一行），返回文件路径。"""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in self.lines()), encoding="utf-8")
        return path

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)  # models 等属性交给接好线的客户端

    def __repr__(self) -> str:
        return f"Recorder({self.original!r}，已录 {len(self.calls)} 次调用)"


class _Completions:
    """`recorder.chat.completions`：`create()` 经过录制器（一次调用一行），别的交给接好线的客户端。"""

    def __init__(self, recorder: Recorder):
        self._recorder = recorder

    def create(self, **kwargs: Any) -> Any:
        return self._recorder._create(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._recorder.client.chat.completions, name)


class _Chat:
    def __init__(self, recorder: Recorder):
        self._recorder, self.completions = recorder, _Completions(recorder)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._recorder.client.chat, name)


class ReplayMismatchError(openai.OpenAIError, AssertionError):
    """这次的请求和录像里同一次调用的请求不一样。（SDK 对 `OpenAIError` 原样放行。）"""


class ReplayExhaustedError(openai.OpenAIError, RuntimeError):
    """录像里的调用已经用完，却还有人调用 `create()`。"""


def load_calls(path: str | Path) -> list[dict]:
    """读出录像文件里的每一次调用（一行一个字典）。"""
    calls = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        try:
            calls += [json.loads(line)] if line.strip() else []
        except ValueError as exc:
            raise ValueError(f"{path} 第 {number} 行不是合法的 JSON：{exc}") from None
    return calls


def _preview(value: Any, limit: int = 80) -> str:
    return shorten(json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value), limit)


def _without_none(value: Any) -> Any:
    """值为 None 的键等于没有：SDK 对象发出去时带着 `"content": null`，字典往往不写这个键。"""
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    return [_without_none(v) for v in value] if isinstance(value, list) else value


def _first_difference(recorded: Any, actual: Any, path: str) -> str | None:
    """两个 JSON 值第一处不同的位置，返回中文说明；相同则返回 None。"""
    if isinstance(recorded, dict) and isinstance(actual, dict):
        for key in [*recorded, *(k for k in actual if k not in recorded)]:
            if key not in actual:
                return f"{path}.{key}：录像里有，这次没有（录像里是 {_preview(recorded[key])}）"
            if key not in recorded:
                return f"{path}.{key}：这次多出来了（这次是 {_preview(actual[key])}）"
            found = _first_difference(recorded[key], actual[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(actual, list):
        found = next(filter(None, (_first_difference(a, b, f"{path}[{i}]")
                                   for i, (a, b) in enumerate(zip(recorded, actual)))), None)
        if found is None and len(recorded) != len(actual):
            return f"{path}：录像里有 {len(recorded)} 项，这次有 {len(actual)} 项"
        return found
    return None if recorded == actual else f"{path}：录像里是 {_preview(recorded)}，这次是 {_preview(actual)}"


class _ReplayHandler:
    """回放线路：按录像的顺序回出同样的响应。"""

    def __init__(self, path: Path, calls: list[dict], check: bool):
        self.path, self.calls, self.check, self.position = path, calls, check, 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if self.position >= len(self.calls):
            raise ReplayExhaustedError(
                f"录像 {self.path.name} 里只有 {len(self.calls)} 次调用，已经全部回放完，"
                f"这是第 {self.position + 1} 次调用 create()。回放的运行比录制时多调用了模型："
                "检查循环的参数（比如 max_turns）或用户消息是否和录制时一样。")
        entry = self.calls[self.position]
        self.position += 1
        recorded, actual = entry.get("request") or {}, _request_json(request)
        for field in _COMPARED if self.check else ():
            found = _first_difference(*(_without_none(bool(r.get(field)) if field == "stream" else r.get(field))
                                        for r in (recorded, actual)), field)
            if found:
                raise ReplayMismatchError(
                    f"回放对不上：第 {entry.get('call', self.position)} 次调用的请求和录像里的不一样。\n"
                    f"第一处不同：{found}\n常见原因：用户消息改了；工具的输出随机器或时间而变（临时目录的路径、"
                    "日期）；循环的参数变了。确认无妨时，可以用 ReplayClient(path, check=False) 只按顺序回放。")
        error = entry.get("error") or {}
        if "chunks" in entry and "status" not in error:
            return sse_response(entry.get("chunks") or [], done=entry.get("done", True))
        if isinstance(error.get("status"), int):
            body = error_body(error.get("message") or "", type=error.get("type") or "invalid_request_error",
                              param=error.get("param"), code=error.get("code"))
            return json_response(error["status"], {"error": body}, error.get("headers"))
        if error.get("type") == "APITimeoutError":
            raise httpx2.ReadTimeout("录制时这次调用超时了", request=request)
        if error:
            raise httpx2.ConnectError(f"录制时这次调用没连上：{error.get('message')}", request=request)
        if "response_text" in entry:
            return httpx2.Response(200, content=entry["response_text"].encode("utf-8"),
                                   headers={"content-type": "text/html; charset=utf-8"})
        return json_response(200, entry["response"])


class ReplayClient(OfflineClient):
    """回放客户端：`check=True` 时每次请求的 `messages`、`tools`、`tool_choice`、`stream` 都要和录像一致
    （模型名不比，`model` 是录像里的）。回放的是谁的回复，它就还是谁的回复：真实模型录下的命令照样要审批。"""

    def __init__(self, path: str | Path | None = None, *, check: bool = True, **options: Any):
        copied = isinstance(options.get("http_client"), OfflineHTTP)  # SDK 复制出的副本沿用原来的线路
        super().__init__(None if copied else _ReplayHandler(Path(path), load_calls(path), check), **options)
        self._replay = self.handler
        self.model = (self._replay.calls[0]["request"] if self._replay.calls else {}).get("model", "replay")

    @property
    def remaining(self) -> int:
        """录像里还剩几次调用没有回放。"""
        return len(self._replay.calls) - self._replay.position
