"""harness_lib.models.streaming：流式块拼回消息、截断检测、流式循环。

用假模型，也用真正的 openai.OpenAI 客户端走真实的 HTTP（本地端点，以及一个会把流掐断的小服务器）。
"""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from harness_lib import (
    FakeClient,
    agent_loop,
    check_transcript,
    start_server,
    text_reply,
    scripted_call,
    tool_reply,
)
from harness_lib.safety.runner import BASH_TOOL
from harness_lib.models.errors import EndpointError
from harness_lib.lesson.loop import SYSTEM
from harness_lib.lesson.stream import agent_loop_stream, streaming
from harness_lib.lesson.loop import BudgetExceeded, within_budget
from harness_lib.models.fake import CutStreamClient
from harness_lib.models.quirks import QuirkClient
from harness_lib.models.streaming import (
    accumulate,
    live_preview,
    stream_turn,
)

MODEL = "fake-agent-1"
TASK = "列出当前目录中的 Python 文件"
USER = {"role": "user", "content": TASK}


@pytest.fixture(scope="module")
def server():
    with start_server() as running:
        yield running


@pytest.fixture
def http_client(server):
    with openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0) as c:
        yield c


def plain_message(client, messages, **kwargs):
    reply = client.chat.completions.create(model=MODEL, messages=messages, **kwargs)
    return reply.choices[0].message.model_dump(exclude_none=True)


def streamed(client, messages, **kwargs):
    return client.chat.completions.create(model=MODEL, messages=messages, stream=True, **kwargs)


# ---------------------------------------------------------------------------
# accumulate：拼回来的消息与非流式回复完全相同
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("script", [
    None,  # 默认策略：一个 bash 调用
    [text_reply("这是一段比较长的文字回答，会被切成好几块送达。")],
    [tool_reply(scripted_call("bash", {"command": "ls"}), scripted_call("bash", {"command": "pwd"}))],
    [tool_reply(scripted_call("bash", '{"command": "ls"'), content="先看看目录")],  # 坏 JSON、带文字
    [text_reply("")],
], ids=["default", "text", "two-calls", "broken-json-with-text", "empty-text"])
def test_accumulate_matches_the_non_streamed_message(script):
    def fake():
        return FakeClient() if script is None else FakeClient(script=script)

    expected = plain_message(fake(), [USER], tools=[BASH_TOOL])
    result = accumulate(streamed(fake(), [USER], tools=[BASH_TOOL], stream_options={"include_usage": True}))
    assert result["message"] == expected
    assert result["finish_reason"] == ("tool_calls" if expected.get("tool_calls") else "stop")
    assert set(result["usage"]) >= {"prompt_tokens", "completion_tokens", "total_tokens"}


def test_accumulate_over_real_http(http_client):
    expected = plain_message(http_client, [USER], tools=[BASH_TOOL])
    stream = streamed(http_client, [USER], tools=[BASH_TOOL], stream_options={"include_usage": True})
    assert isinstance(stream, openai.Stream)
    result = accumulate(stream)
    assert result["message"] == expected
    assert result["message"]["tool_calls"][0]["function"]["name"] == "bash"
    assert result["finish_reason"] == "tool_calls"
    assert result["usage"]["total_tokens"] > 0


def test_no_usage_unless_asked(http_client):
    result = accumulate(streamed(http_client, [{"role": "user", "content": "你好"}]))
    assert result["usage"] is None
    assert result["message"]["content"].startswith("你好")


def test_on_delta_sees_the_message_grow():
    seen = []
    result = accumulate(streamed(FakeClient(), [USER], tools=[BASH_TOOL]), seen.append)
    pieces = [p["tool_calls"][0]["function"]["arguments"] for p in seen if p.get("tool_calls")]
    assert len(pieces) >= 3
    assert all(b.startswith(a) for a, b in zip(pieces, pieces[1:])), "参数应当一段段变长"
    assert pieces[-1] == result["message"]["tool_calls"][0]["function"]["arguments"]
    # 回调拿到的是副本：改它不影响最终结果
    seen[-1]["tool_calls"][0]["function"]["arguments"] = "被改掉了"
    assert result["message"]["tool_calls"][0]["function"]["arguments"] != "被改掉了"


def chunk(delta, finish=None, **extra):
    return {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def test_interleaved_parallel_fragments_and_dict_chunks():
    chunks = [
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "bash", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "b", "type": "function", "function": {"name": "bash", "arguments": '{"com'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"command": '}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": 'mand": "pwd"}'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"ls"}'}}]}),
        chunk({}, "tool_calls"),
    ]
    result = accumulate(chunks)
    calls = result["message"]["tool_calls"]
    assert [c["id"] for c in calls] == ["a", "b"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"command": "ls"}, {"command": "pwd"}]
    # SDK 对象也一样
    objects = [ChatCompletionChunk.model_validate(c) for c in chunks]
    assert accumulate(objects) == result


def test_provider_quirks_repeated_name_missing_index_and_extra_fields():
    chunks = [
        chunk({"role": "assistant", "reasoning_content": "先想"}),
        chunk({"reasoning_content": "一想"}),
        chunk({"tool_calls": [{"id": "x1", "function": {"name": "bash", "arguments": '{"command"'}}]}),
        chunk({"tool_calls": [{"id": "x1", "function": {"name": "bash", "arguments": ': "ls"}'}}]}),
        chunk({}, "tool_calls", usage=None),
    ]
    message = accumulate(chunks)["message"]
    assert message["reasoning_content"] == "先想一想"
    assert message["tool_calls"] == [
        {"id": "x1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    ]


def test_usage_chunk_without_choices_comes_after_finish():
    stream = streamed(FakeClient(), [USER], tools=[BASH_TOOL], stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert accumulate(chunks)["finish_reason"] == "tool_calls"


# ---------------------------------------------------------------------------
# 截断：SDK 不报错，accumulate / stream_turn 报告 stream_cut
# ---------------------------------------------------------------------------


def test_cut_stream_raises_stream_cut():
    cut = CutStreamClient(FakeClient(), after=3)
    chunks = list(streamed(cut, [USER], tools=[BASH_TOOL]))  # 迭代本身安安静静地结束
    assert len(chunks) == 3 and all(c.choices[0].finish_reason is None for c in chunks)
    with pytest.raises(EndpointError) as info:
        accumulate(chunks)
    assert info.value.kind == "stream_cut"
    assert "3 块" in info.value.explanation and "finish_reason" in info.value.explanation
    with pytest.raises(EndpointError) as empty:
        accumulate([])
    assert empty.value.kind == "stream_cut"


def test_cut_on_selects_which_calls():
    cut = CutStreamClient(FakeClient(), after=2, cut_on={2})
    assert accumulate(streamed(cut, [USER], tools=[BASH_TOOL]))["finish_reason"] == "tool_calls"
    with pytest.raises(EndpointError):
        accumulate(streamed(cut, [USER], tools=[BASH_TOOL]))
    # 非流式调用原样转交
    assert plain_message(cut, [USER], tools=[BASH_TOOL])["tool_calls"]


class _CuttingHandler(BaseHTTPRequestHandler):
    """先送出几块 SSE，再按 server.mode 收尾：clean = 正常结束分块传输但没有结束块；abrupt = 直接断开。"""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        chunks = FakeClient().respond({**body, "model": MODEL})[:4]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        # 每次响应后都关掉连接，并明说：否则客户端会拿一条已被关掉的连接发下一个请求，偶尔得到连接错误
        self.send_header("Connection", "close")
        self.end_headers()
        for c in chunks:
            data = f"data: {json.dumps(c, ensure_ascii=False)}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        if self.server.mode == "clean":
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.wfile.write(b"80\r\ndata: {\"id")
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True


@pytest.fixture()
def cutting_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _CuttingHandler)
    httpd.daemon_threads = True
    httpd.mode = "clean"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize("mode", ["clean", "abrupt"])
def test_stream_turn_over_http_cut(cutting_server, mode):
    cutting_server.mode = mode
    url = f"http://127.0.0.1:{cutting_server.server_address[1]}/v1"
    with openai.OpenAI(base_url=url, api_key="x", max_retries=0) as client:
        if mode == "clean":
            # SDK 自己什么都不报：只是少了几块
            chunks = list(streamed(client, [USER], tools=[BASH_TOOL]))
            assert chunks and all(c.choices[0].finish_reason is None for c in chunks)
        previews = []
        with pytest.raises(EndpointError) as info:
            stream_turn(client, MODEL, [USER], [BASH_TOOL], on_delta=previews.append)
    assert info.value.kind == "stream_cut"
    assert previews and previews[-1] is None, "流断了也要通知 on_delta(None)，让临时行消失"
    if mode == "abrupt":
        assert isinstance(info.value.original, openai.APIConnectionError)
        assert info.value.__cause__ is info.value.original


# ---------------------------------------------------------------------------
# stream_turn 与流式循环
# ---------------------------------------------------------------------------


def test_stream_turn_returns_a_chat_completion(http_client):
    previews = []
    response = stream_turn(http_client, MODEL, [USER], [BASH_TOOL], on_delta=previews.append)
    assert isinstance(response, ChatCompletion)
    message = response.choices[0].message
    assert message.tool_calls[0].function.name == "bash"
    assert response.choices[0].finish_reason == "tool_calls"
    assert response.usage.total_tokens > 0
    assert response.model == MODEL and response.id.startswith("chatcmpl-")
    assert message.model_dump(exclude_none=True) == plain_message(http_client, [USER], tools=[BASH_TOOL])
    assert previews[-1] is None and len(previews) > 2


def test_errors_before_the_stream_starts_go_through_call_model():
    with start_server(api_key="right-key-123") as running:
        with openai.OpenAI(base_url=running.base_url, api_key="wrong-key-456", max_retries=0) as client:
            with pytest.raises(EndpointError) as info:
                stream_turn(client, MODEL, [USER], [BASH_TOOL])
            assert info.value.kind == "auth"
            assert "wrong-key-456" not in str(info.value)
    # 我们自己发出的请求不合格（调用没有回应）：400 原样抛出
    broken = [USER, {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}]
    with pytest.raises(openai.BadRequestError):
        stream_turn(FakeClient(), MODEL, broken, [BASH_TOOL])


def test_budgets_work_like_agent_loop(workspace):
    messages = [dict(USER)]
    with pytest.raises(BudgetExceeded):
        agent_loop(messages, client=FakeClient(), model=MODEL, call=within_budget(streaming(), max_tokens_total=1))
    assert len(messages) == 3
    assert "轮" in agent_loop_stream([dict(USER)], client=FakeClient(), model=MODEL, max_turns=1)


def test_streaming_loop_gives_the_same_transcript(workspace):
    plain = [dict(USER)]
    agent_loop(plain, client=FakeClient(), model=MODEL)
    live, outcomes = [dict(USER)], {}
    answer = agent_loop_stream(live, client=FakeClient(), model=MODEL, outcomes=outcomes)
    assert live == plain
    assert answer == plain[-1]["content"]
    assert all(check_transcript(live, outcomes).values())


def test_streaming_loop_over_real_http_with_delay(workspace):
    with start_server(stream_delay=0.002) as running:
        with openai.OpenAI(base_url=running.base_url, api_key="x", max_retries=0) as client:
            messages = [dict(USER)]
            turns = []
            agent_loop_stream(messages, client=client, model=MODEL, on_turn=lambda m: turns.append(len(m)))
    assert turns == [3, 4]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert "app.py" in messages[-1]["content"]


def test_cut_in_the_second_turn_leaves_messages_untouched(workspace):
    messages = [dict(USER)]
    client = CutStreamClient(FakeClient(), after=4, cut_on={2})
    with pytest.raises(EndpointError) as info:
        agent_loop_stream(messages, client=client, model=MODEL)
    assert info.value.kind == "stream_cut"
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"], "半条消息不能留在 messages 里"
    # 修好之后接着跑：从断开的地方继续
    agent_loop_stream(messages, client=FakeClient(), model=MODEL)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]


class _StubView:
    def __init__(self):
        self.title = "演示"
        self.shown = []

    def update(self, messages=None):
        self.shown.append((self.title, list(messages)))


def test_live_preview_never_touches_messages():
    messages = [dict(USER)]
    view = _StubView()
    on_delta = live_preview(view, messages, min_interval=0)
    stream_turn(FakeClient(), MODEL, [{"role": "system", "content": SYSTEM}, *messages], [BASH_TOOL],
                on_delta=on_delta)
    assert messages == [USER]
    provisional = [shown for title, shown in view.shown if "接收中" in title]
    assert provisional and all(len(s) == 2 and s[-1]["role"] == "assistant" for s in provisional)
    assert view.shown[-1] == ("演示", [USER]), "结束后表格指回 messages，标题复原"


def test_live_preview_throttles():
    view = _StubView()
    on_delta = live_preview(view, [], min_interval=60)
    for i in range(20):
        on_delta({"role": "assistant", "content": str(i)})
    on_delta(None)
    assert len(view.shown) == 2


# ---------------------------------------------------------------------------
# 服务商的扩展字段：reasoning_content 流式拼回后和非流式一样，并随循环发回
# ---------------------------------------------------------------------------


def test_reasoning_content_streamed_matches_plain_and_goes_back():
    expected = plain_message(QuirkClient("deepseek_thinking"), [USER], tools=[BASH_TOOL])
    result = accumulate(streamed(QuirkClient("deepseek_thinking"), [USER], tools=[BASH_TOOL]))
    assert expected["reasoning_content"] and result["message"] == expected
    thinking = QuirkClient("deepseek_thinking")
    messages = [dict(USER)]
    agent_loop_stream(messages, client=thinking, model=MODEL)
    second = thinking.requests[-1]["messages"]
    assert any(m.get("reasoning_content") for m in second if m.get("role") == "assistant")
