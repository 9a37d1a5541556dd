"""网络的小工具：`is_loopback(host)` 判断一个地址是不是只通向本机（切换器据此不要密钥，故障服务器
据此挡住对外监听）；`free_port()` 找一个空闲端口；`closed_port_url()` 给出一个连上去会被拒绝的 base_url；
`DeadlineHttpClient` 让截止时间名副其实：非流式每次尝试有墙上时钟的截止时间，流式回复按“多久没有新事件”断开，
两者之上还有一次调用的总上限；余额用完的 429 不再重试（`no_retry_when_quota_is_gone`）。
`what_timed_out(exc)` 说出一次超时是哪一条上限、多少秒，错误说明用它。
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
import time
from typing import NamedTuple
from urllib.parse import urlsplit

import httpx2
import openai

# 三条上限（秒，墙上时钟），切换器的真实端点客户端（`DeadlineHttpClient`）执行：
# 非流式回复：每次尝试从发出请求到收完回复最多多少秒。服务器一直发保持连接的空行，读超时不会触发，这条会。
# 超时交给 SDK 重试，所以一次非流式调用最坏约 3 × 60 秒，加上两次重试之间的等待（几秒）。
ATTEMPT_DEADLINE = 60
# 流式回复：多少秒没有新事件（`data:` 行）就断开。保持连接的空行和 `:` 开头的注释不算事件。
# 一直在发事件的流（长长的思维链）不受 ATTEMPT_DEADLINE 限制。
STREAM_SILENCE = 60
# 一次调用的总上限：从发出请求到收完回复，流式、非流式都算。流开始以后 SDK 不再重试，所以流式回复最多就这么久。
CALL_CEILING = 600


def is_loopback(host, *, listening: bool = False) -> bool:
    """`host`（主机名、IP 地址或整个 URL）是否只通向本机：`localhost`、`127.0.0.0/8`（含 `127.1` 这样的简写）、
    `::1`、`::ffff:127.0.0.1`。`0.0.0.0` 和 `::` 作为目的地址连到本机，算；作为监听地址（`listening=True`）
    表示“所有网卡”，外面的机器也能连进来，不算。"""
    host = str(host or "").strip()
    if "://" in host:
        try:
            host = urlsplit(host).hostname or ""
        except ValueError:
            return False
    host = host.strip("[]").lower()
    if host in ("localhost", "localhost."):
        return True
    try:
        address = ipaddress.ip_address(host)
        if address.is_unspecified:
            return not listening
        return (getattr(address, "ipv4_mapped", None) or address).is_loopback
    except ValueError:
        pass
    if not re.fullmatch(r"[0-9a-fx.]+", host):  # inet_aton 会忽略空白后面的内容，先挡掉
        return False
    try:
        return socket.inet_aton(host)[0] == 127  # 127.1、2130706433 这样的旧式写法
    except OSError:
        return False


def free_port(host: str = "127.0.0.1") -> int:
    """找一个此刻没有人使用的端口号：绑定端口 0 让系统挑一个，然后马上关掉。"""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def closed_port_url(host: str = "127.0.0.1") -> str:
    """一个没有服务监听的 base_url，连上去会被拒绝（“连接被拒绝”故障）。"""
    netloc = f"[{host}]" if ":" in host else host
    return f"http://{netloc}:{free_port(host)}/v1"


class Deadlines(NamedTuple):
    """一个客户端的三条上限（秒）：`attempt` 非流式每次尝试，`silence` 流式两次事件之间，`ceiling` 一次调用的总上限。"""

    attempt: float
    silence: float
    ceiling: float

    def describe(self) -> str:
        """一句中文，写出这三个数。"""
        return (f"非流式每次尝试最多 {self.attempt:g} 秒；流式回复 {self.silence:g} 秒没有新事件就断开；"
                f"一次调用最多 {self.ceiling:g} 秒")


class DeadlineExceeded(httpx2.ReadTimeout):
    """`DeadlineHttpClient` 的一条上限到了：`limit` 是哪一条（`attempt`、`silence`、`ceiling`），`seconds` 是它的秒数。
    它是读超时的一种：还没交回回复时 SDK 照常重试，流已经开始时由读流的一方报告（08 的 `stream_cut`）。"""

    WORDS = {
        "attempt": "非流式回复每次尝试最多等 {s:g} 秒收完，这次没有收完（服务器一直发保持连接的空行也算在内）",
        "silence": "流式回复 {s:g} 秒没有新事件（保持连接的空行和注释不算事件）",
        "ceiling": "一次调用最多 {s:g} 秒，到点还没有收完回复",
    }

    def __init__(self, limit: str, seconds: float, request: httpx2.Request):
        super().__init__(self.WORDS[limit].format(s=seconds), request=request)
        self.limit, self.seconds = limit, seconds


_PHASES = {httpx2.ConnectTimeout: ("connect", "连接超时是 {s:g} 秒（这么久还没连上）"),
           httpx2.ReadTimeout: ("read", "读超时是 {s:g} 秒（两块数据之间最多等这么久）"),
           httpx2.WriteTimeout: ("write", "写超时是 {s:g} 秒（请求这么久还没发完）"),
           httpx2.PoolTimeout: ("pool", "等连接池最多 {s:g} 秒（这么久没有空闲的连接）")}


def what_timed_out(exc) -> str:
    """一次超时是哪一条上限、多少秒：用的是那次请求自己的设置，不是常量。顺着起因链找 `DeadlineExceeded`
    或 httpx 的超时异常，秒数取自请求的 `extensions["timeout"]`（SDK 按客户端的 `timeout` 写进去）。"""
    seen, cause = set(), exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, DeadlineExceeded):
            return str(cause)
        for kind, (phase, words) in _PHASES.items():
            seconds = _timeout_of(cause, phase) if isinstance(cause, kind) else None
            if seconds is not None:
                return words.format(s=seconds)
        cause = cause.__cause__ or cause.__context__
    seconds = _timeout_of(exc, "read")
    return f"这个客户端的超时是 {seconds:g} 秒（连接、读、写各自计时）" if seconds is not None else "这次请求没有记下是哪一条上限"


def _timeout_of(exc, phase: str) -> float | None:
    try:
        seconds = exc.request.extensions.get("timeout", {}).get(phase)
    except (AttributeError, RuntimeError):  # httpx 的异常没带请求时，读 .request 抛 RuntimeError
        return None
    return seconds if isinstance(seconds, (int, float)) else None


class _Watched(httpx2.SyncByteStream):
    """回复体的每一块到来时看一眼表，上限到了就抛 `DeadlineExceeded`。只有块到来时才看，所以最多晚一块的间隔；
    一块也不来时，httpx 自己的读超时管。流式回复（SSE）数事件：以 `data` 开头的整行才算，空行和注释不算。"""

    def __init__(self, stream, request: httpx2.Request, deadlines: Deadlines, *, started: float, events: bool,
                 packed: bool = False):
        self.stream, self.request, self.deadlines, self.events = stream, request, deadlines, events
        self.packed = packed  # 回复体压缩过（Content-Encoding）：看不见里面的行，每一块都算事件
        self.ceiling = started + deadlines.ceiling
        self.attempt = started + deadlines.attempt
        self.last_event = started  # 发出请求也算一个起点：之后 silence 秒内要有第一个事件
        self.line = b""  # 还没收完的那一行的开头几个字节

    def __iter__(self):
        for chunk in self.stream:
            now = time.monotonic()
            if now > self.ceiling:
                raise DeadlineExceeded("ceiling", self.deadlines.ceiling, self.request)
            if not self.events and now > self.attempt:
                raise DeadlineExceeded("attempt", self.deadlines.attempt, self.request)
            if self.events:
                if now > self.last_event + self.deadlines.silence:
                    raise DeadlineExceeded("silence", self.deadlines.silence, self.request)
                if self.packed or self._has_event(chunk):
                    self.last_event = now
            yield chunk

    def _has_event(self, chunk: bytes) -> bool:
        """这一块里有没有收完的 `data` 行（SSE 的一个事件就是一行或几行 `data:`，再加一个空行）。"""
        *done, rest = chunk.split(b"\n")
        found = False
        for piece in done:
            head = (self.line + piece[:5])[:5].rstrip(b"\r")
            found = found or head == b"data" or head.startswith(b"data:")
            self.line = b""
        self.line = (self.line + rest[:5])[:5]
        return found

    def close(self) -> None:
        self.stream.close()


def _asks_for_stream(request: httpx2.Request) -> bool:
    """请求体里写着 `"stream": true` 吗（SDK 发的请求体是 JSON）。"""
    try:
        body = json.loads(request.content or b"{}")
    except (ValueError, UnicodeDecodeError, httpx2.RequestNotRead):
        return False
    return isinstance(body, dict) and body.get("stream") is True


QUOTA_CODES = ("insufficient_quota",)  # 429 里说“余额用完”的 code 或 type（OpenAI 的说法）


def no_retry_when_quota_is_gone(response: httpx2.Response) -> None:
    """httpx 的响应钩子：429 的错误体里 code 或 type 是 `insufficient_quota`（余额用完，不是请求太快）时，
    给响应加上 `x-should-retry: false`。openai SDK 看到这个响应头就不重试：等多久余额也不会回来。"""
    if response.status_code != 429:
        return
    try:
        body = json.loads(response.read() or b"{}")
    except (ValueError, UnicodeDecodeError):
        return
    error = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(error, dict) and (error.get("code") in QUOTA_CODES or error.get("type") in QUOTA_CODES):
        response.headers["x-should-retry"] = "false"


class DeadlineHttpClient(openai.DefaultHttpxClient):
    """SDK 用的 HTTP 客户端，多两条：上限（`deadlines`）和余额用完不重试（`no_retry_when_quota_is_gone`）。

    - 非流式回复：每次尝试从发出请求算起，`attempt` 秒内收不完就读超时，交给 SDK 重试（`max_retries`）。
      httpx 的读超时管的是两块数据之间的间隔：服务器每隔几秒发一个空行（DeepSeek 排队时就这样），它永远不触发。
    - 流式回复（SSE，或请求里写了 `stream: true`）：`silence` 秒没有新事件就断开；保持连接的空行和 `:` 注释不算事件。
      一直在发事件的流不受 `attempt` 限制，长长的思维链也能收完。
    - 都有：从发出请求算起最多 `ceiling` 秒。
    上限在每一块到来时检查，所以最多晚一块的间隔。经过代理时也一样：包的是回复体，不是某一种传输。"""

    def __init__(self, *, attempt: float = ATTEMPT_DEADLINE, silence: float = STREAM_SILENCE,
                 ceiling: float = CALL_CEILING, **kwargs):
        hooks = dict(kwargs.pop("event_hooks", None) or {})
        hooks["response"] = [*hooks.get("response", ()), no_retry_when_quota_is_gone]
        super().__init__(event_hooks=hooks, **kwargs)
        self.deadlines = Deadlines(attempt, silence, ceiling)

    def send(self, request, *, stream: bool = False, **kwargs):
        started = time.monotonic()
        response = super().send(request, stream=True, **kwargs)
        events = (response.headers.get("content-type", "").startswith("text/event-stream")
                  or _asks_for_stream(request))
        packed = response.headers.get("content-encoding", "identity").strip().lower() not in ("", "identity")
        response.stream = _Watched(response.stream, request, self.deadlines, started=started, events=events,
                                   packed=packed)
        if not stream:
            try:
                response.read()
            except BaseException:
                response.close()
                raise
        return response
