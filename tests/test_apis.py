"""假模型的另外两种线路格式：OpenAI 的 Responses（`/v1/responses`）和 Anthropic 的 Messages（`/v1/messages`）。

都用真正的 SDK 驱动：离线（`FakeClient`、`FakeAnthropic`，请求不出本进程）和走真实 HTTP（`start_server`）各一遍。
报错断言的是 SDK 自己抛出的异常和服务商的原话（出处写在 `responses_api.py`、`messages_api.py` 里）。
"""

import http.client
import json
import os

import anthropic
import openai
import pytest

from harness_lib import (BASH_TOOL, FakeAnthropic, FakeClient, api_error, scripted_call, start_server, tool_reply,
                         trusted)
from harness_lib.models.bridge import REASONING_FIELD, chat_completion, responses_request, without_reasoning_items
from harness_lib.models.messages_api import sign

MODEL = "fake-agent-1"
TASK = "列出当前目录中的 Python 文件"
LIST_PY = "dir /b *.py" if os.name == "nt" else "ls *.py"
FILES = "agent.py\ntools.py"
SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
FLAT_TOOLS = [{"type": "function", "name": "bash", "description": "运行一条 shell 命令", "parameters": SCHEMA}]
ANTHROPIC_TOOLS = [{"name": "bash", "description": "运行一条 shell 命令", "input_schema": SCHEMA}]
THINKING = {"type": "enabled", "budget_tokens": 1024}


@pytest.fixture(scope="module")
def server():
    with start_server() as running:
        yield running


def both_ways(name, offline, online):
    """一个夹具：真正的 SDK，离线（替身客户端，请求不出本进程）一遍，走 HTTP 到本机端点一遍。"""
    @pytest.fixture(name=name, params=["offline", "http"])
    def client(request, server):
        with (offline() if request.param == "offline" else online(server)) as made:
            yield made
    return client


oai = both_ways("oai", FakeClient, lambda s: openai.OpenAI(base_url=s.base_url, api_key="x", max_retries=0))
# anthropic SDK 的 base_url 不带 /v1，它自己接上
claude = both_ways("claude", FakeAnthropic,
                   lambda s: anthropic.Anthropic(base_url=s.origin, api_key="x", max_retries=0))


def dumped(items):
    """SDK 返回的条目或内容块，照学习者追加历史的写法转成字典。"""
    return [item.model_dump(exclude_none=True) for item in items]


# ---- Responses ----

def test_responses_tool_round_trip(oai):
    first = oai.responses.create(model=MODEL, input=TASK, tools=FLAT_TOOLS)
    assert first.object == "response" and first.id.startswith("resp_") and first.status == "completed"
    [call] = first.output
    assert call.type == "function_call" and call.name == "bash" and call.status == "completed"
    assert call.id.startswith("fc_") and call.call_id.startswith("call_")
    assert json.loads(call.arguments) == {"command": LIST_PY}
    history = [{"role": "user", "content": TASK}, *dumped(first.output),
               {"type": "function_call_output", "call_id": call.call_id, "output": FILES}]
    final = oai.responses.create(model=MODEL, input=history, tools=FLAT_TOOLS)
    [message] = final.output
    assert message.type == "message" and message.role == "assistant" and message.id.startswith("msg_")
    assert "agent.py" in final.output_text and "tools.py" in final.output_text
    usage = final.usage
    assert usage.input_tokens > first.usage.input_tokens  # 第二次请求带着整段历史
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens


def test_responses_instructions_become_the_system_message():
    client = FakeClient()
    client.responses.create(model=MODEL, input="你好", instructions="只说中文。")
    assert client.last_request["messages"][0] == {"role": "system", "content": "只说中文。"}
    assert client.last_request["messages"][1] == {"role": "user", "content": "你好"}


@pytest.mark.parametrize("change, words, param", [
    ("drop_output", "No tool output found for function call call_001.", "input"),
    ("unknown_output", "No tool call found for function call output with call_id call_999.", "input"),
    ("chat_tools", "Missing required parameter: 'tools[0].name'.", "tools[0].name"),
    ("object_input", "Invalid type for 'input': expected a string or an array of input items, but got object instead.",
     "input"),
    ("short_limit", "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, "
                    "but got 8 instead.", "max_output_tokens"),
])
def test_responses_rejects_like_openai(oai, change, words, param):
    call = {"type": "function_call", "call_id": "call_001", "name": "bash", "arguments": json.dumps({"command": "ls"})}
    output = {"type": "function_call_output", "call_id": "call_001", "output": FILES}
    request = {"model": MODEL, "input": [{"role": "user", "content": TASK}, call, output], "tools": FLAT_TOOLS}
    if change == "drop_output":
        request["input"] = request["input"][:2]
    elif change == "unknown_output":
        request["input"].append({**output, "call_id": "call_999"})
    elif change == "chat_tools":
        request["tools"] = [{"type": "function", "function": {"name": "bash", "parameters": SCHEMA}}]
    elif change == "object_input":
        request["input"] = {"role": "user", "content": TASK}
    else:
        request["max_output_tokens"] = 8
    with pytest.raises(openai.BadRequestError) as info:
        oai.responses.create(**request)
    assert info.value.status_code == 400
    assert info.value.body["message"] == words and info.value.body["param"] == param


def test_responses_stream_is_assembled_by_the_sdk_helper(oai):
    plain = oai.responses.create(model=MODEL, input="你好")
    with oai.responses.stream(model=MODEL, input="你好") as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert final.output_text == plain.output_text and final.status == "completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert [e.type for e in events[:4]] == ["response.created", "response.in_progress",
                                            "response.output_item.added", "response.content_part.added"]
    assert events[-1].type == "response.completed"
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 1 and "".join(deltas) == plain.output_text
    assert {"response.output_text.done", "response.content_part.done", "response.output_item.done"} <= \
        {e.type for e in events}


def test_responses_streamed_function_call_has_its_argument_events(oai):
    raw = list(oai.responses.create(model=MODEL, input=TASK, tools=FLAT_TOOLS, stream=True))
    kinds = [e.type for e in raw]
    assert "response.function_call_arguments.delta" in kinds
    done = next(e for e in raw if e.type == "response.function_call_arguments.done")
    assert json.loads(done.arguments) == {"command": LIST_PY}
    assert "".join(e.delta for e in raw if e.type == "response.function_call_arguments.delta") == done.arguments
    assert raw[-1].response.output[0].call_id == "call_001"


def test_responses_max_output_tokens_cuts_the_answer(oai):
    whole = oai.responses.create(model=MODEL, input="随便说点什么")
    cut = oai.responses.create(model=MODEL, input="随便说点什么", max_output_tokens=16)
    assert whole.status == "completed" and cut.status == "incomplete"
    assert cut.incomplete_details.reason == "max_output_tokens" and cut.output[0].status == "incomplete"
    assert cut.usage.output_tokens == 16
    assert whole.output_text.startswith(cut.output_text) and len(cut.output_text) < len(whole.output_text)
    streamed = list(oai.responses.create(model=MODEL, input="随便说点什么", max_output_tokens=16, stream=True))
    assert streamed[-1].type == "response.incomplete"  # 截断的流不以 response.completed 结束


def test_responses_encrypted_reasoning_round_trip(oai):
    """`store: false` 时推理条目不存在服务端：要用 `include` 拿到 `encrypted_content`，下一次原样带回。"""
    ask = {"model": MODEL, "tools": FLAT_TOOLS, "store": False, "reasoning": {"effort": "low"},
           "include": ["reasoning.encrypted_content"]}
    first = oai.responses.create(input=TASK, **ask)
    reasoning, call = first.output
    assert reasoning.type == "reasoning" and reasoning.id.startswith("rs_") and reasoning.encrypted_content
    assert first.usage.output_tokens_details.reasoning_tokens > 0
    output = {"type": "function_call_output", "call_id": call.call_id, "output": FILES}

    def again(items):
        return oai.responses.create(input=[{"role": "user", "content": TASK}, *items, output], **ask)

    assert "agent.py" in again(dumped(first.output)).output_text
    kept = dumped(first.output)
    without = [{k: v for k, v in kept[0].items() if k != "encrypted_content"}, kept[1]]
    with pytest.raises(openai.NotFoundError) as info:
        again(without)
    assert info.value.body["message"] == (
        f"Item with id '{reasoning.id}' not found. Items are not persisted when `store` is set to false. "
        "Try again with `store` set to true, or remove this item from your input.")
    tampered = [{**kept[0], "encrypted_content": "A" + kept[0]["encrypted_content"][1:]}, kept[1]]
    with pytest.raises(openai.BadRequestError) as info:
        again(tampered)
    assert info.value.body["code"] == "invalid_encrypted_content"
    assert info.value.body["message"].endswith("could not be verified.")
    with pytest.raises(openai.BadRequestError) as info:  # 推理条目后面少了它带出来的调用
        oai.responses.create(input=[{"role": "user", "content": TASK}, kept[0]], **ask)
    assert info.value.body["message"] == (
        f"Item '{reasoning.id}' of type 'reasoning' was provided without its required following item.")


def test_responses_reasoning_summary_streams_as_its_own_events(oai):
    with oai.responses.stream(model=MODEL, input="你好", reasoning={"effort": "low", "summary": "auto"}) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    summary = final.output[0].summary[0].text
    assert final.output[0].type == "reasoning" and summary
    assert "response.reasoning_summary_text.delta" in kinds and "response.reasoning_summary_part.done" in kinds


def test_previous_response_id_replaces_the_history_when_stored(oai):
    first = oai.responses.create(model=MODEL, input=TASK, tools=FLAT_TOOLS)
    output = {"type": "function_call_output", "call_id": first.output[0].call_id, "output": FILES}
    chained = oai.responses.create(model=MODEL, previous_response_id=first.id, input=[output], tools=FLAT_TOOLS)
    full = oai.responses.create(model=MODEL, tools=FLAT_TOOLS,
                                input=[{"role": "user", "content": TASK}, *dumped(first.output), output])
    assert chained.output_text == full.output_text and "agent.py" in chained.output_text
    assert chained.previous_response_id == first.id
    unstored = oai.responses.create(model=MODEL, input=TASK, tools=FLAT_TOOLS, store=False)
    with pytest.raises(openai.BadRequestError) as info:
        oai.responses.create(model=MODEL, previous_response_id=unstored.id, input=[output], tools=FLAT_TOOLS)
    assert info.value.body["message"] == f"Previous response with id '{unstored.id}' not found."
    assert info.value.body["code"] == "previous_response_not_found"


def test_chat_shaped_scripts_drive_the_responses_api():
    client = FakeClient(script=[
        {**tool_reply(scripted_call("bash", {"command": "pwd"})), "reasoning_content": "先看看在哪个目录。"},
        "完成了。", api_error(429, "Rate limit reached", code="rate_limit_exceeded")])
    first = client.responses.create(model=MODEL, input="在哪？", tools=FLAT_TOOLS)
    reasoning, call = first.output
    assert reasoning.type == "reasoning" and reasoning.summary == []  # 没要摘要
    assert (call.name, json.loads(call.arguments)) == ("bash", {"command": "pwd"})
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "/tmp"}
    assert client.responses.create(model=MODEL, previous_response_id=first.id, input=[output]).output_text == "完成了。"
    with pytest.raises(openai.RateLimitError):
        client.responses.create(model=MODEL, input="再来")
    assert client.script_remaining == 0


def test_the_client_bridge_round_trips_through_the_fake_responses_endpoint(oai):
    """`models.bridge`（客户端那一头：Chat → Responses → Chat）和这里的 Responses 线路方向相反：同一段 Chat 记录
    绕一圈（加密的推理条目也带回去），回答和直接用 Chat Completions 问同一个大脑的一样。"""
    chat = {"model": MODEL, "messages": [{"role": "user", "content": TASK}], "tools": [BASH_TOOL],
            "reasoning_effort": "low"}
    first = chat_completion(oai.responses.create(**responses_request(chat)).model_dump())
    message = first["choices"][0]["message"]
    assert first["choices"][0]["finish_reason"] == "tool_calls" and message[REASONING_FIELD][0]["encrypted_content"]
    [call] = message["tool_calls"]
    later = [*chat["messages"], message, {"role": "tool", "tool_call_id": call["id"], "content": FILES}]
    final = chat_completion(oai.responses.create(**responses_request({**chat, "messages": later})).model_dump())
    direct = FakeClient().chat.completions.create(model=MODEL, messages=without_reasoning_items(later),
                                                  tools=[BASH_TOOL])
    assert final["choices"][0]["message"]["content"] == direct.choices[0].message.content
    assert "agent.py" in direct.choices[0].message.content


# ---- Anthropic Messages ----

def test_messages_tool_round_trip(claude):
    first = claude.messages.create(model=MODEL, max_tokens=1024, tools=ANTHROPIC_TOOLS,
                                   messages=[{"role": "user", "content": TASK}])
    assert first.type == "message" and first.role == "assistant" and first.stop_reason == "tool_use"
    [use] = first.content
    assert use.type == "tool_use" and use.id.startswith("toolu_") and use.input == {"command": LIST_PY}
    history = [{"role": "user", "content": TASK}, {"role": "assistant", "content": dumped(first.content)},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": FILES}]}]
    final = claude.messages.create(model=MODEL, max_tokens=1024, tools=ANTHROPIC_TOOLS, messages=history,
                                   system="你是一个命令行助手。")
    assert final.stop_reason == "end_turn" and final.content[0].type == "text"
    assert "agent.py" in final.content[0].text
    assert final.usage.input_tokens > first.usage.input_tokens > 0 and final.usage.output_tokens > 0


@pytest.mark.parametrize("change, words", [
    ("no_result", "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_001. "
                  "Each `tool_use` block must have a corresponding `tool_result` block in the next message."),
    ("wrong_id", "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_999. "
                 "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."),
])
def test_messages_pairing_rejected_in_anthropic_words(claude, change, words):
    result = {"type": "tool_result", "tool_use_id": "toolu_001", "content": FILES}
    last = [result, {**result, "tool_use_id": "toolu_999"}] if change == "wrong_id" else \
        [{"type": "text", "text": "结果呢？"}]
    history = [{"role": "user", "content": TASK},
               {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_001", "name": "bash",
                                                  "input": {"command": "ls"}}]},
               {"role": "user", "content": last}]
    with pytest.raises(anthropic.BadRequestError) as info:
        claude.messages.create(model=MODEL, max_tokens=1024, tools=ANTHROPIC_TOOLS, messages=history)
    assert info.value.status_code == 400
    assert info.value.body == {"type": "error", "error": {"type": "invalid_request_error", "message": words}}


def test_messages_without_max_tokens_is_rejected(claude):
    # SDK 的 create() 要求 max_tokens，所以用它公开的 post() 发一个不带 max_tokens 的请求
    with pytest.raises(anthropic.BadRequestError) as info:
        claude.post("/v1/messages", cast_to=anthropic.types.Message,
                    body={"model": MODEL, "messages": [{"role": "user", "content": "你好"}]})
    assert info.value.body["error"]["message"] == "max_tokens: Field required"


def test_messages_stream_is_assembled_by_the_sdk_helper(claude):
    ask = {"model": MODEL, "max_tokens": 2048, "tools": ANTHROPIC_TOOLS, "thinking": THINKING,
           "messages": [{"role": "user", "content": TASK}]}
    plain = claude.messages.create(**ask)
    with claude.messages.stream(**ask) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_message()
    assert dumped(final.content) == dumped(plain.content) and final.stop_reason == "tool_use"
    assert final.usage.output_tokens == plain.usage.output_tokens
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop" and "message_delta" in kinds
    assert {"thinking", "signature", "input_json", "content_block_stop"} <= set(kinds)
    with claude.messages.stream(model=MODEL, max_tokens=1024, messages=[{"role": "user", "content": "你好"}]) as s:
        text = "".join(s.text_stream)
    assert text == s.get_final_message().content[0].text and len(text) > 6


def test_messages_max_tokens_cuts_the_answer(claude):
    whole = claude.messages.create(model=MODEL, max_tokens=1024, messages=[{"role": "user", "content": "随便说点什么"}])
    cut = claude.messages.create(model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "随便说点什么"}])
    assert whole.stop_reason == "end_turn" and cut.stop_reason == "max_tokens"
    assert cut.usage.output_tokens == 5
    assert whole.content[0].text.startswith(cut.content[0].text) and len(cut.content[0].text) < 20


def test_thinking_signature_round_trip(claude):
    ask = {"model": MODEL, "max_tokens": 2048, "tools": ANTHROPIC_TOOLS, "thinking": THINKING}
    first = claude.messages.create(messages=[{"role": "user", "content": TASK}], **ask)
    thought, use = first.content
    assert thought.type == "thinking" and thought.signature and thought.thinking
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": FILES}]}

    def again(content):
        return claude.messages.create(messages=[{"role": "user", "content": TASK},
                                                {"role": "assistant", "content": content}, result], **ask)

    answer = again(dumped(first.content))
    assert answer.content[0].type == "thinking" and "agent.py" in answer.content[1].text
    with pytest.raises(anthropic.BadRequestError) as info:  # 丢了 thinking 块
        again(dumped(first.content)[1:])
    assert info.value.body["error"]["message"].startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. "
        "When `thinking` is enabled, a final `assistant` message must start with a thinking block")
    for forged in ({"signature": sign("别的思考")}, {"thinking": thought.thinking + "（改过）"}):
        with pytest.raises(anthropic.BadRequestError) as info:
            again([{**dumped(first.content)[0], **forged}, dumped(first.content)[1]])
        assert info.value.body["error"]["message"] == "messages.1.content.0: Invalid `signature` in `thinking` block"
    without = {k: v for k, v in dumped(first.content)[0].items() if k != "signature"}
    with pytest.raises(anthropic.BadRequestError) as info:
        again([without, dumped(first.content)[1]])
    assert info.value.body["error"]["message"] == "messages.1.content.0.thinking.signature: Field required"


def test_thinking_budget_must_fit_under_max_tokens(claude):
    with pytest.raises(anthropic.BadRequestError) as info:
        claude.messages.create(model=MODEL, max_tokens=1024, thinking=THINKING,
                               messages=[{"role": "user", "content": "你好"}])
    assert info.value.body["error"]["message"].startswith(
        "`max_tokens` must be greater than `thinking.budget_tokens`.")


def test_chat_shaped_scripts_drive_the_messages_api():
    client = FakeAnthropic(script=[
        {**tool_reply(scripted_call("bash", {"command": "pwd"}), content="我先看看。"), "reasoning_content": "先看目录。"},
        "完成了。", api_error(429, "Rate limit reached", headers={"retry-after": "3"})])
    first = client.messages.create(model=MODEL, max_tokens=2048, thinking=THINKING, tools=ANTHROPIC_TOOLS,
                                   messages=[{"role": "user", "content": "在哪？"}])
    assert [b.type for b in first.content] == ["thinking", "text", "tool_use"]
    assert first.content[0].thinking == "先看目录。" and first.content[2].input == {"command": "pwd"}
    assert client.last_request["thinking"] == THINKING  # 发出的原样，不是译给大脑的 Chat 请求
    second = client.with_options(timeout=5).messages.create(model=MODEL, max_tokens=1024, messages=[
        {"role": "user", "content": "在哪？"}, {"role": "assistant", "content": dumped(first.content)},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": first.content[2].id, "content": "/tmp"}]}])
    assert second.content[0].text == "完成了。" and client.script_remaining == 1  # 副本共用同一个假模型
    with pytest.raises(anthropic.RateLimitError) as info:
        client.messages.create(model=MODEL, max_tokens=1024, messages=[{"role": "user", "content": "再来"}])
    assert info.value.body["error"] == {"type": "rate_limit_error", "message": "Rate limit reached"}
    assert info.value.response.headers["retry-after"] == "3"
    assert trusted(client) and "FakeAnthropic" in repr(client)


# ---- 本机端点的密钥和模型名 ----

def raw_post(port, path, body, headers):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json", **headers})
        response = conn.getresponse()
        return response.status, json.loads(response.read().decode("utf-8"))
    finally:
        conn.close()


def test_local_endpoint_key_check_takes_x_api_key_and_never_echoes_it():
    secret, wrong = "sk-right-key-123", "sk-wrong-key-456"
    ask = {"model": MODEL, "max_tokens": 1024, "messages": [{"role": "user", "content": "你好"}]}
    with start_server(api_key=secret) as locked:
        with anthropic.Anthropic(base_url=locked.origin, api_key=wrong, max_retries=0) as c:
            with pytest.raises(anthropic.AuthenticationError) as info:
                c.messages.create(**ask)
        assert info.value.body == {"type": "error", "error": {"type": "authentication_error",
                                                              "message": "invalid x-api-key"}}
        assert wrong not in info.value.response.text and secret not in info.value.response.text
        status, body = raw_post(locked.port, "/v1/messages", ask, {})
        assert status == 401 and body["error"]["message"] == "x-api-key header is required"
        with anthropic.Anthropic(base_url=locked.origin, api_key=secret, max_retries=0) as c:
            assert c.messages.create(**ask).content[0].text
        with openai.OpenAI(base_url=locked.base_url, api_key=secret, max_retries=0) as c:
            assert c.responses.create(model=MODEL, input="你好").output_text
        status, body = raw_post(locked.port, "/v1/responses", {"model": MODEL, "input": "你好"},
                                {"x-api-key": secret})
        assert status == 200 and body["object"] == "response"


def test_local_endpoint_answers_unknown_models_in_each_format(server):
    with anthropic.Anthropic(base_url=server.origin, api_key="x", max_retries=0) as c:
        with pytest.raises(anthropic.NotFoundError) as info:
            c.messages.create(model="claude-nope", max_tokens=16, messages=[{"role": "user", "content": "你好"}])
    assert info.value.body["error"] == {"type": "not_found_error", "message": "model: claude-nope"}
    with openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0) as c:
        with pytest.raises(openai.NotFoundError) as info:
            c.responses.create(model="gpt-nope", input="你好")
    assert info.value.body["code"] == "model_not_found"
