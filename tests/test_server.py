"""本地端点 harness_lib.models.server 的测试：用真正的 openai.OpenAI 客户端走真实的 HTTP。"""

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest
from openai.types.chat import ChatCompletion

from harness_lib.models.net import free_port
from harness_lib.models.server import ensure_local_server, start_server

ROOT = Path(__file__).resolve().parents[1]
from harness_lib.safety.runner import BASH_TOOL  # noqa: E402

MODEL = "fake-agent-1"
TOOLS = [BASH_TOOL]  # 与笔记本用的是同一个工具定义
TASK = "列出当前目录中的 Python 文件"
LIST_PY = "dir /b *.py" if os.name == "nt" else "ls *.py"


@pytest.fixture(scope="module")
def server():
    with start_server() as running:
        yield running


@pytest.fixture
def client(server):
    with openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0) as c:
        yield c


def raw_request(port, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.headers, response.read().decode("utf-8")
    finally:
        conn.close()


def test_base_url_and_repr(server):
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    assert server.port > 0
    assert "运行中" in repr(server)


def test_plain_completion_with_tool_calls(client):
    response = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": TASK}], tools=TOOLS, max_tokens=8000)
    assert isinstance(response, ChatCompletion)
    assert response.id.startswith("chatcmpl-fake-")
    assert response.model == MODEL
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.id == "call_001" and call.type == "function" and call.function.name == "bash"
    assert json.loads(call.function.arguments) == {"command": LIST_PY}
    assert response.usage.total_tokens > 0


def test_full_two_turn_loop_with_a_real_command(client, tmp_path):
    for name in ("app.py", "utils.py", "README.md"):
        (tmp_path / name).write_text("# demo\n", encoding="utf-8")
    messages = [{"role": "user", "content": TASK}]
    turns = 0
    while True:
        turns += 1
        response = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            command = json.loads(call.function.arguments)["command"]
            done = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True)
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": done.stdout + done.stderr})
        assert turns < 5
    assert turns == 2
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    answer = messages[-1]["content"]
    assert "app.py" in answer and "utils.py" in answer and "README.md" not in answer


def reassemble(stream):
    content, calls, finish, usage, chunks = "", {}, None, None, 0
    for chunk in stream:
        chunks += 1
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for part in choice.delta.tool_calls or []:
                slot = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] += part.id or ""
                slot["name"] += (part.function.name if part.function else None) or ""
                slot["arguments"] += (part.function.arguments if part.function else None) or ""
            finish = choice.finish_reason or finish
    return content, [calls[i] for i in sorted(calls)], finish, usage, chunks


def test_streaming_tool_call_deltas(client):
    messages = [{"role": "user", "content": TASK}]
    plain = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
    stream = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, stream=True,
                                            stream_options={"include_usage": True})
    assert isinstance(stream, openai.Stream)
    content, calls, finish, usage, chunks = reassemble(stream)
    expected = plain.choices[0].message.tool_calls[0]
    assert calls == [{"id": expected.id, "name": "bash", "arguments": expected.function.arguments}]
    assert finish == "tool_calls"
    assert usage == plain.usage
    assert chunks >= 5  # 角色、调用头、至少两段参数、结束原因……


def test_streaming_text_deltas(client):
    messages = [{"role": "user", "content": TASK}]
    plain = client.chat.completions.create(model=MODEL, messages=messages)
    pieces = [chunk.choices[0].delta.content
              for chunk in client.chat.completions.create(model=MODEL, messages=messages, stream=True)
              if chunk.choices and chunk.choices[0].delta.content]
    assert len(pieces) > 3
    assert "".join(pieces) == plain.choices[0].message.content


def test_stream_wire_format(server):
    body = json.dumps({"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "你好"}]})
    status, headers, text = raw_request(server.port, "POST", "/v1/chat/completions", body,
                                        {"Content-Type": "application/json"})
    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    events = [e for e in text.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    assert json.loads(events[0][6:])["object"] == "chat.completion.chunk"


def test_broken_transcript_is_a_400(client):
    messages = [
        {"role": "user", "content": TASK},
        {"role": "assistant", "tool_calls": [{"id": "call_001", "type": "function",
                                              "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "user", "content": "结果呢？"},
    ]
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
    err = info.value
    assert err.status_code == 400
    assert "did not have response messages: call_001" in str(err)
    assert err.body["param"] == "messages.[1].role"
    assert err.body["type"] == "invalid_request_error"


def test_wrong_api_key_is_a_401_that_does_not_echo_the_key():
    secret = "sk-right-key-123"
    wrong = "sk-wrong-key-456"
    with start_server(api_key=secret) as locked:
        with openai.OpenAI(base_url=locked.base_url, api_key=wrong, max_retries=0) as c:
            with pytest.raises(openai.AuthenticationError) as info:
                c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": TASK}])
        err = info.value
        assert err.status_code == 401
        assert "Incorrect API key provided" in str(err)
        assert wrong not in err.response.text and secret not in err.response.text
        status, _, text = raw_request(locked.port, "GET", "/v1/models")
        assert status == 401 and "didn't provide an API key" in text
        with openai.OpenAI(base_url=locked.base_url, api_key=secret, max_retries=0) as c:
            assert c.models.list().data[0].id == MODEL


def test_unknown_model_is_a_404(client):
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="gpt-unknown", messages=[{"role": "user", "content": TASK}])
    assert "The model `gpt-unknown` does not exist" in str(info.value)
    assert info.value.body["code"] == "model_not_found"


def test_unknown_path_and_invalid_json(server):
    status, headers, text = raw_request(server.port, "POST", "/v1/nothing", "{}",
                                        {"Content-Type": "application/json"})
    assert status == 404
    assert json.loads(text)["error"]["message"] == "Invalid URL (POST /v1/nothing)"
    status, _, text = raw_request(server.port, "POST", "/v1/chat/completions", "{not json",
                                  {"Content-Type": "application/json"})
    assert status == 400
    assert "parse the JSON body" in json.loads(text)["error"]["message"]


def test_models_list(client):
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL, "fake-talk-only", "fake-other-commands"]
    assert models.data[0].owned_by == "harness_lib"
    assert client.models.retrieve(MODEL).id == MODEL


def test_keep_alive_reuses_one_connection():
    with start_server() as fresh:
        with openai.OpenAI(base_url=fresh.base_url, api_key="x", max_retries=0) as c:
            messages = [{"role": "user", "content": TASK}]
            a = c.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
            c.models.list()
            b = c.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
            assert fresh.connections == 1
            # SDK 读到 data: [DONE] 就关闭流式响应，连接随之丢弃；下一次调用会新开连接，照样能用
            list(c.chat.completions.create(model=MODEL, messages=messages, stream=True))
            c.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
            assert fresh.connections <= 2
        assert a.choices[0].message == b.choices[0].message
        assert a.id != b.id


def median_seconds(call, repeat=20):
    call()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return sorted(times)[repeat // 2]


def test_no_nagle_delay(client):
    """Nagle 算法与延迟确认叠加时，每次往返会多出 40 ms 左右；关掉 Nagle 后只有几毫秒（速度本身由 benchmarks/ 测量）。"""
    messages = [{"role": "user", "content": TASK}]
    assert median_seconds(lambda: client.chat.completions.create(
        model=MODEL, messages=messages, tools=TOOLS)) < 0.03
    assert median_seconds(lambda: list(client.chat.completions.create(
        model=MODEL, messages=messages, tools=TOOLS, stream=True))) < 0.03


def test_close_releases_the_port():
    running = start_server()
    port = running.port
    running.close()
    running.close()  # 重复关闭没有问题
    assert "已关闭" in repr(running)
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0


def test_ensure_local_server_is_a_shared_singleton():
    url = ensure_local_server()
    assert url == ensure_local_server()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
    with openai.OpenAI(base_url=url, api_key="x", max_retries=0) as c:
        assert c.models.list().data[0].id == MODEL


def test_command_line_server():
    port = free_port()
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness_lib.models.server", "--port", str(port), "--api-key", "k-123"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )
    try:
        first = proc.stdout.readline().decode("utf-8")
        assert f"http://127.0.0.1:{port}/v1" in first, proc.stderr.read().decode("utf-8", "replace")
        with openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k-123", max_retries=0) as c:
            response = c.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": TASK}], tools=TOOLS)
        assert json.loads(response.choices[0].message.tool_calls[0].function.arguments) == {"command": LIST_PY}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()


def test_command_line_help_is_chinese():
    done = subprocess.run([sys.executable, "-m", "harness_lib.models.server", "--help"], cwd=ROOT,
                          capture_output=True, env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    assert done.returncode == 0
    assert "端口" in done.stdout.decode("utf-8")


def test_the_local_endpoint_lists_the_fake_models_the_readme_names():
    """本地端点的 /models 列出所选的假模型，再是 fake-talk-only、fake-other-commands：切换器里填它们，测试连接不说“拼错了”。"""
    import openai

    from harness_lib.models.quirks import start_quirk_server
    from harness_lib.models.server import start_server

    server = start_server()
    try:
        listed = [m.id for m in openai.OpenAI(base_url=server.base_url, api_key="x").models.list()]
    finally:
        server.close()
    assert listed == ["fake-agent-1", "fake-talk-only", "fake-other-commands"]
    stand_in = start_quirk_server("openai_tools_responses_only")
    try:
        listed = [m.id for m in openai.OpenAI(base_url=stand_in.base_url, api_key="x").models.list()]
    finally:
        stand_in.close()
    assert listed[:2] == ["gpt-6.1-sol", "gpt-6-astra"] and "fake-agent-1" in listed, "替身也列出它代表的模型"
