"""截止时间名副其实（harness_lib.models.net.DeadlineHttpClient），余额用完的 429 不重试。

- 一直在发事件的流（长长的思维链）比每次尝试的截止时间长，照样收完；
- 只发保持连接的空行和注释的流，在写明的“沉默”秒数断开；一直在发事件的流，到一次调用的总上限断开；
- 说明里写的是这个客户端自己的秒数，不是常量；
- `insufficient_quota` 的 429 只发一次，说成余额问题。
都走真正的 HTTP：本机服务器（models.server.serve）按我们写的节奏发字节，客户端是真正的 openai.OpenAI。
秒数都取零点几秒；断言只给下限和宽松的上限，机器慢时也不会误报。
"""

import json
import threading
import time

import httpx2
import openai
import pytest

from harness_lib.models.call import ATTEMPT_DEADLINE, CALL_CEILING, STREAM_SILENCE, call_model
from harness_lib.models.errors import EndpointError, explain_error
from harness_lib.models.net import DeadlineExceeded, DeadlineHttpClient, Deadlines, what_timed_out
from harness_lib.models.server import serve
from harness_lib.models.streaming import stream_turn
from harness_lib.models.wire import CHUNKED
from harness_lib.ui.clients import real_client

MODEL = "fake-agent-1"
ASK = [{"role": "user", "content": "想一想再回答"}]
BEAT = 0.05  # 服务器每隔多少秒发一次


def _event(delta, finish=None):
    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": MODEL,
             "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
    return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode()


class Paced:
    """本机端点的处理函数：每 `BEAT` 秒发一段，发 `seconds` 秒。`kind` 决定发什么：
    `reasoning`：思维链事件，中间夹着保持连接的注释和空行，最后给回答和 finish_reason；
    `keepalive`：只有 `: keep-alive` 注释和空行；`endless`：一直发思维链事件。服务器关闭时立刻停下。"""

    def __init__(self, kind, seconds):
        self.kind, self.seconds = kind, seconds
        self.stopping = threading.Event()
        self.hits = 0

    def stop(self):
        self.stopping.set()

    def __call__(self, request):
        self.hits += 1

        def pieces():
            yield _event({"role": "assistant", "content": ""})
            end, n = time.monotonic() + self.seconds, 0
            while time.monotonic() < end and not self.stopping.wait(BEAT):
                n += 1
                if self.kind == "keepalive":
                    yield b": keep-alive\n\n" if n % 2 else b"\n"
                else:
                    yield _event({"reasoning_content": f"第{n}步。"}) + (b": keep-alive\n\n" if n % 3 == 0 else b"")
            if self.kind == "reasoning":
                yield _event({"content": "想好了。"})
                yield _event({}, "stop")
                yield b"data: [DONE]\n\n"

        return httpx2.Response(200, content=pieces(), headers={"content-type": "text/event-stream", CHUNKED: "1"})


@pytest.fixture
def paced():
    servers = []

    def start(kind, seconds):
        handler = Paced(kind, seconds)
        servers.append(serve(handler))
        return servers[-1].base_url, handler

    yield start
    for server in servers:
        server.close()


def _client(base_url, **deadlines):
    return openai.OpenAI(base_url=base_url, api_key="x", max_retries=1,
                         http_client=DeadlineHttpClient(**deadlines))


def _limit(err):
    """起因链上 `DeadlineExceeded` 的 `limit`：是哪一条上限断开的（SDK 把它包成 APITimeoutError）。"""
    cause = err.original
    while cause is not None and not isinstance(cause, DeadlineExceeded):
        cause = cause.__cause__ or cause.__context__
    return getattr(cause, "limit", None)


def test_the_constants_are_the_defaults_and_the_client_says_its_own():
    assert DeadlineHttpClient().deadlines == Deadlines(ATTEMPT_DEADLINE, STREAM_SILENCE, CALL_CEILING)
    assert ATTEMPT_DEADLINE <= CALL_CEILING and STREAM_SILENCE <= CALL_CEILING
    mine = DeadlineHttpClient(attempt=0.2, silence=0.3, ceiling=4)
    assert mine.deadlines == (0.2, 0.3, 4)
    assert "0.2 秒" in mine.deadlines.describe() and "0.3 秒" in mine.deadlines.describe()


@pytest.mark.parametrize("make", [
    lambda url: _client(url, attempt=0.3, silence=0.5, ceiling=20),
    lambda url: real_client(url, "x", deadline=0.3),  # 切换器的客户端：每次尝试 0.3 秒，沉默和总上限用默认值
], ids=["DeadlineHttpClient", "real_client"])
def test_a_reasoning_stream_longer_than_the_attempt_deadline_completes(paced, make):
    url, server = paced("reasoning", 1.2)
    started = time.monotonic()
    reply = stream_turn(make(url), MODEL, ASK)
    took = time.monotonic() - started
    message = reply.choices[0].message
    assert took > 1.0, "流发了 1.2 秒，比每次尝试的 0.3 秒长得多"
    assert reply.choices[0].finish_reason == "stop" and message.content == "想好了。"
    assert message.reasoning_content.startswith("第1步。") and message.reasoning_content.count("步。") > 5
    assert server.hits == 1, "收完了，没有重试"


# 只发保持连接的空行：0.4 秒没有新事件就断开（最多晚一次保持连接的间隔）；
# 一直有事件、永远不结束：一次调用最多 0.8 秒
CUTS = {"silence": ("keepalive", dict(attempt=30, silence=0.4, ceiling=30), "0.4 秒没有新事件", (0.4, 2.5)),
        "ceiling": ("endless", dict(attempt=0.2, silence=0.5, ceiling=0.8), "一次调用最多 0.8 秒", (0.8, 3.0))}


@pytest.mark.parametrize("limit", sorted(CUTS))
def test_a_stream_is_cut_for_silence_or_at_the_call_ceiling(paced, limit):
    pace, seconds, says, (low, high) = CUTS[limit]
    url, server = paced(pace, 6)
    started = time.monotonic()
    with pytest.raises(EndpointError) as info:
        stream_turn(_client(url, **seconds), MODEL, ASK)
    took = time.monotonic() - started
    assert info.value.kind == "stream_cut"
    assert low <= took < high, f"写明的是 {says}，实际 {took:.2f} 秒"
    assert _limit(info.value) == limit and says in info.value.explanation
    assert server.hits == 1, "流已经开始，SDK 不重试"


def test_a_non_streamed_reply_that_dribbles_keep_alive_bytes_is_cut_per_attempt(fault_server):
    """非流式：服务器一直发空行（DeepSeek 排队时这样），每次尝试到点就断，SDK 重试一次。"""
    fault_server.reset()
    started = time.monotonic()
    with pytest.raises(EndpointError) as info:
        call_model(_client(fault_server.url("keepalive"), attempt=0.4, silence=30, ceiling=30),
                   model=MODEL, messages=ASK)
    took = time.monotonic() - started
    assert info.value.kind == "timeout" and 0.8 <= took < 4.0, (info.value.kind, took)
    assert fault_server.hits["keepalive"] == 2, "超时交给 SDK 重试：两次尝试"
    assert "每次尝试最多等 0.4 秒" in info.value.explanation


@pytest.mark.parametrize("seconds", [0.2, 0.35])
def test_a_timeout_is_explained_with_the_clients_own_seconds(fault_server, seconds):
    """07 的故障一览里，“超时”的说明写的是那个客户端的秒数，不是常量 60。"""
    client = openai.OpenAI(base_url=fault_server.url("timeout"), api_key="x", max_retries=0, timeout=seconds)
    with pytest.raises(EndpointError) as info:
        call_model(client, model=MODEL, messages=ASK)
    assert info.value.kind == "timeout"
    assert f"读超时是 {seconds:g} 秒" in info.value.explanation
    assert f"{ATTEMPT_DEADLINE} 秒" not in info.value.explanation
    assert what_timed_out(info.value.original) in info.value.explanation


def test_insufficient_quota_is_sent_once_and_explained_as_balance(fault_server):
    """余额用完的 429：SDK 自己会重试（把 429 都当限流），切换器的客户端只发一次，说明讲充值。"""
    fault_server.reset()
    plain = openai.OpenAI(base_url=fault_server.url("quota"), api_key="x", max_retries=2)
    with pytest.raises(EndpointError):
        call_model(plain, model=MODEL, messages=ASK)
    assert fault_server.hits["quota"] == 3, "（测试的前提）SDK 自己会重试 insufficient_quota"

    for stream in (False, True):
        fault_server.reset()
        client = real_client(fault_server.url("quota"), "x")  # RETRY_POLICY：max_retries=2
        with pytest.raises(EndpointError) as info:
            call_model(client, model=MODEL, messages=ASK, stream=stream)
        assert fault_server.hits["quota"] == 1, f"stream={stream}：余额用完不重试"
        text = info.value.explanation
        assert info.value.kind == "balance" and "余额用完" in text and "充值" in text, text
        assert "等一会儿" not in text and "稍等" not in text and "重试了" not in text, text
        assert "You exceeded your current quota" in text, "附上服务器原话"


def test_an_ordinary_429_is_still_retried(fault_server):
    fault_server.reset()
    with pytest.raises(EndpointError) as info:
        call_model(real_client(fault_server.url("rate_limit"), "x"), model=MODEL, messages=ASK)
    assert fault_server.hits["rate_limit"] == 3 and info.value.kind == "rate_limit"
    assert "稍等" in explain_error(info.value.original)
