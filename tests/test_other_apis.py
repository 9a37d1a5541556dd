"""另外两种接口的那一步（笔记本 11）：`other_apis` 从切换器的客户端换出 Responses 和 Messages 的 `Chat`，
`Chat(api=...)`、`run_loop(api=...)` 不管端点回来什么都能接着走，错误用同一张分类表说明。

端点用真正的 HTTP：本项目的端点（两种接口都认）、一个只会回 404 的服务（像只有 Chat Completions 的 llama.cpp）、
故障服务器（503）。
"""

import json

import anthropic
import httpx2
import openai
import pytest

from harness_lib import TOOLS, FakeAnthropic, FakeClient, MessagesView, api_error, run_loop, start_server, trusted
from harness_lib.models.server import serve
from harness_lib.models.wire import json_response
from harness_lib.ui.apis import MESSAGES, NoEndpoint, as_openai_error, other_apis
from harness_lib.ui.clients import DASHSCOPE_ANTHROPIC_URL, DASHSCOPE_RESPONSES_URL, real_client
from harness_lib.ui.step import RESPONSES, Chat

ASK = "列出当前目录中的 Python 文件"
FLAT_TOOLS = [{"type": "function", **tool["function"]} for tool in TOOLS]
ANTHROPIC_TOOLS = [{"name": f["name"], "description": f["description"], "input_schema": f["parameters"]}
                   for f in (tool["function"] for tool in TOOLS)]


def responses_loop(items, *, client, model, on_turn=None, outcomes=None):
    """笔记本 11 的循环的缩写：调用一律回答“好”。"""
    while True:
        response = client.responses.create(model=model, input=items, tools=FLAT_TOOLS, max_output_tokens=512)
        items += [item.model_dump(exclude_none=True) for item in response.output]
        calls = [item for item in response.output if item.type == "function_call"]
        items += [{"type": "function_call_output", "call_id": c.call_id, "output": "好"} for c in calls]
        if on_turn:
            on_turn(items)
        if not calls:
            return response.output_text


def messages_loop(messages, *, client, model, on_turn=None, outcomes=None):
    while True:
        reply = client.messages.create(model=model, messages=messages, tools=ANTHROPIC_TOOLS, max_tokens=512)
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
        uses = [b for b in reply.content if b.type == "tool_use"]
        if uses:
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": b.id, "content": "好"} for b in uses]})
        if on_turn:
            on_turn(messages)
        if reply.stop_reason != "tool_use":
            return "".join(b.text for b in reply.content if b.type == "text")


@pytest.fixture(scope="module")
def local():
    with start_server() as server:
        yield server


@pytest.fixture(scope="module")
def chat_only():
    """只有 Chat Completions 的服务：别的路径回 FastAPI 的 404（llama-cpp-python 的兼容服务器就这样回）。"""
    with serve(lambda request: json_response(404, {"detail": "Not Found"})) as server:
        yield server


def test_the_offline_fake_speaks_both(capsys):
    client = FakeClient()
    responses, messages = other_apis(client, "fake-agent-1")
    assert responses.client is client and responses.api is RESPONSES
    assert isinstance(messages.client, FakeAnthropic) and trusted(messages.client) and messages.api is MESSAGES
    reply = responses.ask([{"role": "user", "content": ASK}], want="bash", tools=FLAT_TOOLS)
    assert reply.output[0].type == "function_call" and not responses.last.scripted
    assert client.last_request["max_tokens"] == 512, "Chat 补上 max_output_tokens"
    reply = messages.ask([{"role": "user", "content": ASK}], want="bash", tools=ANTHROPIC_TOOLS)
    assert reply.stop_reason == "tool_use" and reply.content[0].input == {"command": "ls *.py"}
    assert messages.client.last_request["max_tokens"] == 512, "Messages API 必须写 max_tokens，Chat 补上"
    out = capsys.readouterr().out
    assert out.count("这次：模型请求了 1 个工具调用：bash 'ls *.py'") == 2
    table = other_apis(client, "fake-agent-1").table()
    assert list(table.index) == ["Responses API", "Messages API"] and "FakeAnthropic" in table.loc["Messages API"].tolist()


def test_the_project_endpoint_answers_both_over_http_and_stays_trusted(local):
    client = openai.OpenAI(base_url=local.base_url, api_key="x", max_retries=0)
    responses, messages = apis = other_apis(client, "fake-agent-1")
    assert isinstance(messages.client, anthropic.Anthropic) and str(messages.client.base_url).rstrip("/") == local.origin
    assert trusted(messages.client), "回答它的是同一个本项目的假模型"
    assert apis.table().loc["Messages API", "发往"] == f"{local.origin}/v1/messages"
    assert responses.ask([{"role": "user", "content": ASK}], want="bash", tools=FLAT_TOOLS, quiet=True).output
    assert not responses.last.scripted
    assert messages.ask([{"role": "user", "content": ASK}], want="bash", tools=ANTHROPIC_TOOLS, quiet=True).content
    assert not messages.last.scripted


def test_a_server_without_the_api_is_explained_and_the_step_goes_on(chat_only, capsys):
    client = openai.OpenAI(base_url=chat_only.base_url, api_key="sk-secret-key-123456", max_retries=0)
    responses, messages = other_apis(client, "small-model")
    assert not trusted(messages.client), "别人的服务不可信"
    reply = responses.ask([{"role": "user", "content": ASK}], want="bash", tools=FLAT_TOOLS)
    assert responses.last.scripted and responses.last.error.kind == "no_such_api"
    assert reply.output[0].type == "function_call", "【脚本示范】的假模型回答同一个请求"
    assert responses.scripted_replies == [reply.output[0].model_dump(exclude_none=True)]
    messages.ask([{"role": "user", "content": ASK}], want="bash", tools=ANTHROPIC_TOOLS)
    assert messages.last.scripted and isinstance(messages.last.client, FakeAnthropic)
    out = capsys.readouterr().out
    assert "POST /v1/responses 回了 HTTP 404（服务器原话：Not Found）" in out
    assert "POST /v1/messages 回了 HTTP 404（服务器原话：Not Found）" in out
    assert "sk-secret-key-123456" not in out


def test_an_unknown_model_is_not_a_missing_api(local):
    client = openai.OpenAI(base_url=local.base_url, api_key="x", max_retries=0)
    responses, messages = other_apis(client, "claude-nope")
    messages.ask([{"role": "user", "content": ASK}], quiet=True)
    assert messages.last.error.kind == "not_found", "Anthropic 的 404 “model: …” 说的是模型名"


def test_a_provider_with_no_known_anthropic_address_says_so_every_time(capsys):
    client = real_client("https://api.example.com/v1", "sk-x")
    responses, messages = apis = other_apis(client, "some-model")
    assert responses.client is client and isinstance(messages.client, NoEndpoint)
    assert "没有记下" in apis.table().loc["Messages API", "说明"]
    messages.ask([{"role": "user", "content": ASK}], want="bash", tools=ANTHROPIC_TOOLS)
    assert messages.last.scripted and messages.last.error.kind == "no_such_api"
    assert "没有可用的 Messages API 地址" in capsys.readouterr().out


def test_dashscope_takes_its_own_addresses_for_the_other_two():
    client = real_client("https://dashscope.aliyuncs.com/compatible-mode/v1", "sk-x", {"enable_thinking": False})
    responses, messages = other_apis(client, "qwen-plus")
    assert str(responses.client.base_url).rstrip("/") == DASHSCOPE_RESPONSES_URL
    assert responses.client.preset_body == {"enable_thinking": False}, "还是同一种客户端，预设照带"
    assert str(messages.client.base_url).rstrip("/") == DASHSCOPE_ANTHROPIC_URL
    assert not trusted(responses.client) and not trusted(messages.client)


def _raise(status):
    """脚本里的一项：这一次请求回 HTTP `status`（Anthropic 的错误形状）。"""
    return api_error(status, "错误原话", code="some_code")


@pytest.mark.parametrize("status, kind, words", [
    (503, openai.InternalServerError, "HTTP 503"), (401, openai.AuthenticationError, "401"),
    (429, openai.RateLimitError, "429"), (418, openai.APIStatusError, "418")])
def test_anthropic_errors_are_explained_by_the_same_table(status, kind, words):
    client = FakeAnthropic(script=[_raise(status)])
    with pytest.raises(anthropic.APIStatusError) as info:
        client.messages.create(model="m", max_tokens=16, messages=[{"role": "user", "content": "?"}])
    same = as_openai_error(info.value)
    assert type(same) is kind and same.status_code == status and same.body == info.value.body
    error = MESSAGES.endpoint_error(info.value, None)
    assert words in error.explanation and type(error.original) is kind and "错误原话" in error.explanation


def test_connection_and_timeout_errors_keep_their_kind():
    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/messages")
    assert MESSAGES.endpoint_error(anthropic.APIConnectionError(request=request), None).kind == "connection"
    assert MESSAGES.endpoint_error(anthropic.APITimeoutError(request=request), None).kind == "timeout"


def test_run_loop_counts_calls_in_items_and_falls_back_to_the_right_fake(tmp_path, monkeypatch, chat_only):
    monkeypatch.chdir(tmp_path)
    items = [{"role": "user", "content": ASK}]
    view = MessagesView(items, api="responses")
    run = run_loop(responses_loop, items, client=FakeClient(), model="fake-agent-1", api=RESPONSES, want="tools",
                   on_turn=view.update, quiet=True)
    assert not run.scripted and "一共请求了 1 个工具调用" in run.said[0] and "模型回复了 2 次" in run.said[0]
    assert view.whose() == "回复来自所选模型 fake-agent-1"

    talker = FakeClient(model="fake-talk-only")
    items = [{"role": "user", "content": ASK}]
    view = MessagesView(items, api="responses")
    run = run_loop(responses_loop, items, client=talker, model="fake-talk-only", api=RESPONSES, want="tools",
                   on_turn=view.update, quiet=True)
    assert run.scripted and isinstance(run.client, FakeClient)
    assert [i.get("type", i.get("role")) for i in items] == ["user", "function_call", "function_call_output",
                                                             "message"]
    assert view.scripted_positions() == [1, 3] and view.whose().startswith("回复来自【脚本示范】")

    down = openai.OpenAI(base_url=chat_only.base_url, api_key="x", max_retries=0)
    messages = [{"role": "user", "content": ASK}]
    view = MessagesView(messages, api="messages")
    run = run_loop(messages_loop, messages, client=other_apis(down, "m").messages.client, model="m", api=MESSAGES,
                   on_turn=view.update, quiet=True)
    assert run.scripted and isinstance(run.client, FakeAnthropic)
    assert "这个端点没有这种接口：POST /v1/messages" in run.said[0]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert view.scripted_positions() == [1, 3]
    assert json.dumps(messages[1]["content"][0]["input"]) == '{"command": "ls *.py"}'
    assert "messages 退回到这一格开始时的 1 条" in run.said[1]

    items = [{"role": "user", "content": ASK}]
    run = run_loop(responses_loop, items, client=other_apis(down, "m").responses.client, model="m", api=RESPONSES,
                   quiet=True)
    assert run.scripted and "输入条目（input）退回到这一格开始时的 1 条" in run.said[1], run.said


def test_a_chat_for_another_api_keeps_the_scripted_items_for_the_table():
    chat = Chat(FakeClient(model="fake-talk-only"), "fake-talk-only", api=RESPONSES)
    items = [{"role": "user", "content": ASK}]
    view = MessagesView(items, api="responses", chat=chat)
    items += [i.model_dump(exclude_none=True) for i in chat.ask(items, want="bash", tools=FLAT_TOOLS, quiet=True).output]
    assert chat.last.scripted and view.scripted_positions() == [1]
    assert view.whose() == "回复来自【脚本示范】的假模型（所选模型 fake-talk-only 没给出要的回复）"


def test_a_stand_in_at_dashscopes_two_paths_runs_both_loops(local):
    """百炼的两种接口各有路径（Responses：/api/v2/apps/protocols/compatible-mode/v1，Anthropic 兼容：/apps/anthropic）：
    同一个本机端点放在这两条路径下，真正的 SDK 照百炼的地址样式发请求，两个循环都走完一轮工具调用。"""
    from urllib.parse import urlsplit

    origin = local.base_url.rsplit("/v1", 1)[0]
    responses_path = urlsplit(DASHSCOPE_RESPONSES_URL).path
    anthropic_path = urlsplit(DASHSCOPE_ANTHROPIC_URL).path
    to_responses = openai.OpenAI(base_url=origin + responses_path, api_key="x", max_retries=0)
    items = [{"role": "user", "content": ASK}]
    assert responses_loop(items, client=to_responses, model="fake-agent-1")
    assert [i.get("type") for i in items[1:3]] == ["function_call", "function_call_output"]
    to_messages = anthropic.Anthropic(base_url=origin + anthropic_path, api_key="x", max_retries=0)
    messages = [{"role": "user", "content": ASK}]
    assert messages_loop(messages, client=to_messages, model="fake-agent-1")
    assert messages[1]["content"][-1]["type"] == "tool_use" and messages[2]["content"][0]["type"] == "tool_result"


def test_anatomy_reads_where_each_api_keeps_the_call_the_answer_and_the_thinking_state():
    from harness_lib import anatomy

    chat = [{"role": "user", "content": "q"},
            {"role": "assistant", "reasoning_content": "想一想", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    responses = [{"role": "user", "content": "q"},
                 {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "abcd"},
                 {"type": "function_call", "call_id": "c2", "name": "bash", "arguments": "{}"},
                 {"type": "function_call_output", "call_id": "c2", "output": "ok"}]
    messages = [{"role": "user", "content": "q"},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "嗯", "signature": "sig"},
                                                  {"type": "tool_use", "id": "c3", "name": "bash", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c3", "content": "ok"}]}]
    assert anatomy(chat) == {"调用": "pos 1 · assistant 的 tool_calls 里：id、type、function",
                             "回应": "pos 2 · tool：role、tool_call_id、content", "配对（调用 → 回应）": "id → tool_call_id",
                             "参数的类型": "str", "思考状态": "pos 1 · assistant：reasoning_content（3 个字符）"}
    assert anatomy(responses)["配对（调用 → 回应）"] == "call_id → call_id"
    assert anatomy(responses)["思考状态"] == "pos 1 · reasoning：encrypted_content（4 个字符）"
    assert anatomy(messages)["调用"] == "pos 1 · assistant 的 tool_use 块：type、id、name、input"
    assert anatomy(messages)["参数的类型"] == "dict"
    assert anatomy(messages)["配对（调用 → 回应）"] == "id → tool_use_id"
    with pytest.raises(ValueError, match="找不到调用、回应、思考状态"):
        anatomy([{"role": "user", "content": "q"}, {"role": "assistant", "content": "答"}])
