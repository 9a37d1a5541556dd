"""离线假模型 harness_lib.models.fake 的单元测试：默认策略、脚本模式、请求检查、流式输出。"""

import json
import os

import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessage
from openai.types.chat.chat_completion_message_function_tool_call import (
    ChatCompletionMessageFunctionToolCall,
)

from harness_lib.models.fake import (
    FakeClient,

    ScriptExhaustedError,
    check_request,
    text_reply,
    scripted_call,
    tool_reply,
)

from harness_lib.safety.runner import BASH_TOOL  # noqa: E402

MODEL = "fake-agent-1"
TOOLS = [BASH_TOOL]  # 与笔记本用的是同一个工具定义
TASK = "列出当前目录中的 Python 文件"
WINDOWS = os.name == "nt"
LIST_PY = "dir /b *.py" if WINDOWS else "ls *.py"


def ask(client, messages, **kwargs):
    kwargs.setdefault("tools", TOOLS)
    return client.chat.completions.create(model=MODEL, messages=messages, **kwargs)


def command_of(response):
    calls = response.choices[0].message.tool_calls
    assert calls, f"期望一个工具调用，实际回复：{response.choices[0].message.content!r}"
    assert len(calls) == 1
    assert calls[0].function.name == "bash"
    return json.loads(calls[0].function.arguments)["command"]


def loop_once(client, question, output):
    """走一轮：问题 → 工具调用 → 填入给定的工具输出 → 最终回答。"""
    messages = [{"role": "user", "content": question}]
    first = ask(client, messages)
    message = first.choices[0].message
    messages.append(message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": output})
    final = ask(client, messages)
    assert final.choices[0].finish_reason == "stop"
    assert final.choices[0].message.tool_calls is None
    return final.choices[0].message.content


# ---- 默认策略 ----

@pytest.mark.parametrize("question", [
    TASK,
    "帮我看看当前目录里有哪些 Python 文件",
    "当前文件夹下有什么 .py 文件？",
    "list the python files in the current directory",
    "Which .py files are here?",
])
def test_python_files_task_calls_bash(question):
    response = ask(FakeClient(), [{"role": "user", "content": question}])
    assert isinstance(response, ChatCompletion)
    assert response.choices[0].finish_reason == "tool_calls"
    assert response.choices[0].message.content is None
    assert command_of(response) == LIST_PY


def test_content_parts_are_read_too():
    content = [{"type": "text", "text": "帮我看看"}, {"type": "text", "text": "当前目录里有哪些 Python 文件"}]
    response = ask(FakeClient(), [{"role": "system", "content": "你是助手。"},
                                  {"role": "user", "content": content}])
    assert command_of(response) == LIST_PY


def test_command_comes_from_bash_module_when_available():
    bash = pytest.importorskip("harness_lib.safety.runner")
    response = ask(FakeClient(), [{"role": "user", "content": TASK}])
    assert command_of(response) == bash.list_py_command()


def test_final_answer_names_the_files_found():
    answer = loop_once(FakeClient(), TASK, "app.py\nutils.py\n")
    assert "app.py" in answer and "utils.py" in answer
    assert "2 个" in answer


def test_final_answer_ignores_other_names():
    answer = loop_once(FakeClient(), TASK, "./main.py\nnotes.txt\nsetup.py\n")
    assert "main.py" in answer and "setup.py" in answer
    assert "notes.txt" not in answer


@pytest.mark.parametrize("output", ["", "(没有输出)"])
def test_final_answer_when_there_are_none(output):
    answer = loop_once(FakeClient(), TASK, output)
    assert "没有 Python 文件" in answer
    assert "没有输出" in answer


def test_final_answer_when_command_failed():
    error = "ls: cannot access '*.py': No such file or directory"
    answer = loop_once(FakeClient(), TASK, error)
    assert "没有找到 Python 文件" in answer
    assert "No such file" in answer
    assert "个 Python 文件" not in answer  # 不把报错里的通配符当成文件名


def test_without_tools_the_model_only_proposes():
    response = FakeClient().chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": TASK}])
    message = response.choices[0].message
    assert message.tool_calls is None
    assert response.choices[0].finish_reason == "stop"
    assert LIST_PY in message.content
    assert "没法执行" in message.content


def test_tool_choice_none_gives_text_and_required_gives_call():
    client = FakeClient()
    text = ask(client, [{"role": "user", "content": TASK}], tool_choice="none")
    assert text.choices[0].message.tool_calls is None
    assert LIST_PY in text.choices[0].message.content
    forced = ask(client, [{"role": "user", "content": "讲个笑话"}], tool_choice="required")
    assert command_of(forced) == ("dir /b" if WINDOWS else "ls")
    named = ask(client, [{"role": "user", "content": TASK}],
                tool_choice={"type": "function", "function": {"name": "bash"}})
    assert command_of(named) == LIST_PY


@pytest.mark.parametrize("question, posix, windows, output, expected", [
    ("当前目录是哪里？", "pwd", "cd", "/tmp/demo\n", "/tmp/demo"),
    ("where am I? pwd", "pwd", "cd", "/tmp/demo\n", "/tmp/demo"),
    ("当前目录里有哪些文件", "ls", "dir /b", "README.md\napp.py\n", "README.md"),
    ("list files", "ls", "dir /b", "README.md\napp.py\n", "2 项"),
    ("今天日期是多少", "date", "date /t", "Thu Jan  1 00:00:00 UTC 2026\n", "2026"),
    ("统计 Python 文件行数", "wc -l *.py", 'find /c /v "" *.py', "  3 app.py\n  2 utils.py\n  5 total\n", "5 total"),
])
def test_other_simple_requests(question, posix, windows, output, expected):
    client = FakeClient()
    response = ask(client, [{"role": "user", "content": question}])
    assert command_of(response) == (windows if WINDOWS else posix)
    answer = loop_once(client, question, output)
    assert expected in answer


def test_greeting_is_plain_text():
    response = ask(FakeClient(), [{"role": "user", "content": "你好"}])
    assert response.choices[0].message.tool_calls is None
    assert "你好" in response.choices[0].message.content


def test_long_tool_output_is_quoted_truncated():
    answer = loop_once(FakeClient(), "当前目录是哪里", "/" + "x" * 5000)
    assert len(answer) < 400
    assert "截" in answer or "摘录" in answer


def test_unknown_request_gets_honest_fallback():
    response = ask(FakeClient(), [{"role": "user", "content": "帮我写一首关于春天的诗"}])
    content = response.choices[0].message.content
    assert response.choices[0].message.tool_calls is None
    assert "离线假模型" in content
    assert "Python 文件" in content  # 列出它能处理的请求
    assert "切换" in content  # 指向模型切换器


def test_policy_is_stateless_and_deterministic():
    messages = [{"role": "user", "content": TASK}]
    a = ask(FakeClient(), messages).choices[0].message
    b = ask(FakeClient(), messages).choices[0].message
    assert a == b
    response = ask(FakeClient(), messages)
    assert response.id == "chatcmpl-fake-0001"
    assert response.model == MODEL
    assert response.usage.total_tokens == response.usage.prompt_tokens + response.usage.completion_tokens
    assert response.usage.prompt_tokens > 0 and response.usage.completion_tokens > 0


def test_tool_call_ids_continue_from_the_transcript():
    client = FakeClient()
    messages = [{"role": "user", "content": TASK}]
    first = ask(client, messages).choices[0].message
    assert first.tool_calls[0].id == "call_001"
    messages.append(first.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": "call_001", "content": "app.py"})
    messages.append(ask(client, messages).choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "user", "content": "当前目录是哪里"})
    second = ask(client, messages)
    assert second.choices[0].message.tool_calls[0].id == "call_002"
    assert second.id == "chatcmpl-fake-0003"  # 每个客户端的响应 id 依次编号


def test_other_arguments_are_accepted_and_ignored():
    response = ask(FakeClient(), [{"role": "user", "content": TASK}],
                   temperature=0.2, max_tokens=8000, timeout=5, extra_headers={"x": "y"},
                   parallel_tool_calls=False)
    assert command_of(response) == LIST_PY


def test_not_given_tools_are_treated_as_absent():
    response = FakeClient().chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": TASK}],
        tools=openai.NOT_GIVEN, tool_choice=openai.omit)
    assert response.choices[0].message.tool_calls is None


def test_small_max_tokens_truncates_like_a_real_model():
    response = ask(FakeClient(), [{"role": "user", "content": TASK}], max_tokens=3)
    choice = response.choices[0]
    assert choice.finish_reason == "length"
    assert response.usage.completion_tokens == 3
    arguments = choice.message.tool_calls[0].function.arguments
    with pytest.raises(json.JSONDecodeError):
        json.loads(arguments)




def test_model_list_and_repr():
    client = FakeClient()
    assert client.models.list().data[0].id == MODEL
    assert FakeClient(model="fake-x").models.list().data[0].id == "fake-x"
    assert repr(client) == "FakeClient(model='fake-agent-1', 默认策略)"
    assert "剩 2 条" in repr(FakeClient(script=["a", "b"]))


# ---- 脚本模式 ----

def test_script_replies_in_order():
    client = FakeClient(script=[
        scripted_call("bash", {"command": "ls *.py"}),
        text_reply("完成了。"),
    ])
    assert client.script_remaining == 2
    messages = [{"role": "user", "content": "随便什么"}]
    first = ask(client, messages)
    assert first.choices[0].finish_reason == "tool_calls"
    call = first.choices[0].message.tool_calls[0]
    assert call.id == "call_001"
    assert call.function.arguments == '{"command": "ls *.py"}'
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "app.py"}]
    second = ask(client, messages)
    assert second.choices[0].message.content == "完成了。"
    assert second.choices[0].finish_reason == "stop"
    assert client.script_remaining == 0


@pytest.mark.parametrize("raw", ['{"command": "ls"', "", "{}", '{"command": 42}'])
def test_script_raw_arguments_pass_through(raw):
    client = FakeClient(script=[scripted_call("bash", raw)])
    call = ask(client, [{"role": "user", "content": "x"}]).choices[0].message.tool_calls[0]
    assert call.function.arguments == raw


def test_script_unknown_tool_name_and_non_ascii_arguments():
    client = FakeClient(script=[scripted_call("rm_everything", {"路径": "文件.txt"})])
    call = ask(client, [{"role": "user", "content": "x"}]).choices[0].message.tool_calls[0]
    assert call.function.name == "rm_everything"
    assert call.function.arguments == '{"路径": "文件.txt"}'


def test_script_several_calls_in_one_message():
    client = FakeClient(script=[tool_reply(
        scripted_call("bash", {"command": "pwd"}),
        scripted_call("bash", {"command": "ls"}),
        scripted_call("bash", {"command": "date"}, id="call_custom"),
        content="我先看三件事。",
    )])
    messages = [{"role": "user", "content": "x"}]
    message = ask(client, messages).choices[0].message
    assert message.content == "我先看三件事。"
    assert [c.id for c in message.tool_calls] == ["call_001", "call_002", "call_custom"]
    assert [json.loads(c.function.arguments)["command"] for c in message.tool_calls] == ["pwd", "ls", "date"]
    # 每个 id 都回应之后，请求合法
    messages.append(message.model_dump(exclude_none=True))
    for c in message.tool_calls:
        messages.append({"role": "tool", "tool_call_id": c.id, "content": "ok"})
    check_request(messages, TOOLS)


def test_script_exhaustion_is_a_clear_error():
    client = FakeClient(script=[text_reply("一"), text_reply("二")])
    messages = [{"role": "user", "content": "x"}]
    ask(client, messages)
    ask(client, messages)
    with pytest.raises(ScriptExhaustedError) as info:
        ask(client, messages)
    assert isinstance(info.value, RuntimeError)
    assert "2 条" in str(info.value)


def test_bad_request_does_not_consume_the_script():
    client = FakeClient(script=[text_reply("一")])
    with pytest.raises(openai.BadRequestError):
        ask(client, [{"role": "robot", "content": "x"}])
    assert client.script_remaining == 1
    assert ask(client, [{"role": "user", "content": "x"}]).choices[0].message.content == "一"


def test_script_can_raise_an_api_error():
    from harness_lib.models.fake import api_error
    client = FakeClient(script=[api_error(429, "Rate limit reached", type="requests", code="rate_limit_exceeded")])
    with pytest.raises(openai.RateLimitError) as info:
        ask(client, [{"role": "user", "content": "x"}])
    assert info.value.status_code == 429


def test_bad_script_item_is_rejected_early():
    with pytest.raises(TypeError):
        FakeClient(script=[42])
    with pytest.raises(ValueError):
        tool_reply()


# ---- 请求检查 ----

CALL = {"id": "call_001", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
USER = {"role": "user", "content": TASK}
ASSISTANT = {"role": "assistant", "tool_calls": [CALL]}
TOOL = {"role": "tool", "tool_call_id": "call_001", "content": "app.py"}


def with_call(**changes):
    call = json.loads(json.dumps(CALL))
    for key, value in changes.items():
        if key.startswith("function_"):
            if value is None:
                del call["function"][key[9:]]
            else:
                call["function"][key[9:]] = value
        elif value is None:
            del call[key]
        else:
            call[key] = value
    return [USER, {"role": "assistant", "tool_calls": [call]}, TOOL]


@pytest.mark.parametrize("messages, expected, param", [
    ([], "empty array", "messages"),
    ([{"role": "robot", "content": "hi"}],
     "Invalid value: 'robot'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.",
     "messages[0].role"),
    ([USER, ASSISTANT, {"role": "user", "content": "还在吗"}],
     "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
     "'tool_call_id'. The following tool_call_ids did not have response messages: call_001",
     "messages.[1].role"),
    ([USER, ASSISTANT],
     "The following tool_call_ids did not have response messages: call_001", "messages.[1].role"),
    ([USER, TOOL],
     "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
     "messages.[1].role"),
    ([USER, ASSISTANT, TOOL, {"role": "assistant", "content": "好"}, TOOL],
     "messages with role 'tool' must be a response", "messages.[4].role"),
    ([USER, ASSISTANT, {"role": "tool", "tool_call_id": "call_999", "content": "x"}],
     "'tool_call_id' of 'call_999' not found in 'tool_calls' of previous message", "messages.[2].tool_call_id"),
    ([USER, ASSISTANT, {"role": "tool", "content": "x"}],
     "Missing required parameter: 'messages[2].tool_call_id'.", "messages[2].tool_call_id"),
    (with_call(id=None), "Missing required parameter: 'messages[1].tool_calls[0].id'.", "messages[1].tool_calls[0].id"),
    (with_call(type="robot"), "Invalid value: 'robot'", "messages[1].tool_calls[0].type"),
    (with_call(function_name=None), "'messages[1].tool_calls[0].function.name'", "messages[1].tool_calls[0].function.name"),
    (with_call(function_arguments={"command": "ls"}),
     "Invalid type for 'messages[1].tool_calls[0].function.arguments': expected a string, but got object instead.",
     "messages[1].tool_calls[0].function.arguments"),
    ([{"content": "没有 role"}], "Missing required parameter: 'messages[0].role'.", "messages[0].role"),
])
def test_request_check_violations(messages, expected, param):
    client = FakeClient()
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
    err = info.value
    assert err.status_code == 400
    assert err.response.status_code == 400
    assert str(err).startswith("Error code: 400 - ")
    assert expected in err.message
    assert err.body["message"] in str(err)
    assert err.body["type"] == "invalid_request_error"
    assert err.param == param
    assert err.response.json()["error"] == err.body


def test_partial_answers_name_only_the_missing_ids():
    two = {"role": "assistant", "tool_calls": [CALL, {**CALL, "id": "call_002"}]}
    with pytest.raises(openai.BadRequestError) as info:
        check_request([USER, two, TOOL, {"role": "user", "content": "?"}])
    assert info.value.message.endswith("response messages: call_002")


def test_check_request_also_checks_tools():
    with pytest.raises(openai.BadRequestError, match="empty array"):
        check_request([USER], [])
    with pytest.raises(openai.BadRequestError, match="does not match pattern"):
        check_request([USER], [{"type": "function", "function": {"name": "bad name"}}])
    with pytest.raises(openai.BadRequestError, match="only allowed when 'tools' are specified"):
        check_request([USER], tool_choice="auto")


def test_check_request_accepts_sdk_message_objects():
    message = ChatCompletionMessage.model_validate({"role": "assistant", "content": None, "tool_calls": [CALL]})
    normalized = check_request([USER, message, TOOL], TOOLS)
    assert normalized[1] == {"role": "assistant", "tool_calls": [CALL]}
    response = ask(FakeClient(), [USER, message, TOOL])
    assert "app.py" in response.choices[0].message.content


def test_model_dump_round_trips_into_a_valid_request():
    response = ask(FakeClient(), [USER])
    dumped = response.choices[0].message.model_dump(exclude_none=True)
    assert dumped == {
        "role": "assistant",
        "tool_calls": [{"id": "call_001", "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": LIST_PY})}}],
    }
    check_request([USER, dumped, {"role": "tool", "tool_call_id": "call_001", "content": ""}], TOOLS)


# ---- 流式输出 ----

def reassemble(chunks):
    """按真实服务商的规矩把流式块拼回一条消息。"""
    content, calls, finish, usage = None, {}, None, None
    for chunk in chunks:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content is not None:
                content = (content or "") + delta.content
            for part in delta.tool_calls or []:
                slot = calls.setdefault(part.index, {"id": None, "type": None, "name": "", "arguments": ""})
                if part.id:
                    slot["id"] = part.id
                if part.type:
                    slot["type"] = part.type
                if part.function and part.function.name:
                    slot["name"] += part.function.name
                if part.function and part.function.arguments:
                    slot["arguments"] += part.function.arguments
            if choice.finish_reason:
                finish = choice.finish_reason
    return content, [calls[i] for i in sorted(calls)], finish, usage


def test_stream_tool_call_deltas_reassemble_to_the_same_call():
    messages = [USER]
    plain = ask(FakeClient(), messages)
    stream = ask(FakeClient(), messages, stream=True, stream_options={"include_usage": True})
    assert isinstance(stream, openai.Stream)  # SDK 自己解析的 SSE 流
    chunks = list(stream)
    assert all(isinstance(c, ChatCompletionChunk) for c in chunks)
    assert {c.id for c in chunks} == {plain.id}

    deltas = [c.choices[0].delta.tool_calls[0] for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    head, pieces = deltas[0], deltas[1:]
    assert (head.index, head.id, head.type, head.function.name, head.function.arguments) == \
        (0, "call_001", "function", "bash", "")
    assert len(pieces) >= 2
    assert all(p.id is None and p.function.name is None for p in pieces)

    content, calls, finish, usage = reassemble(chunks)
    expected = plain.choices[0].message.tool_calls[0]
    assert calls == [{"id": expected.id, "type": "function", "name": expected.function.name,
                      "arguments": expected.function.arguments}]
    assert finish == "tool_calls"
    assert usage == plain.usage
    assert chunks[-1].choices == []  # 用量单独放在最后一块


def test_stream_text_deltas_and_no_usage_by_default():
    messages = [{"role": "user", "content": "讲个笑话"}]
    plain = ask(FakeClient(), messages)
    with ask(FakeClient(), messages, stream=True) as stream:
        chunks = list(stream)
    content, calls, finish, usage = reassemble(chunks)
    assert content == plain.choices[0].message.content
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 3
    assert calls == [] and finish == "stop" and usage is None


def test_stream_several_calls_keep_their_index():
    reply = tool_reply(scripted_call("bash", {"command": "pwd"}), scripted_call("bash", {"command": "ls"}))
    chunks = list(ask(FakeClient(script=[reply]), [USER], stream=True))
    _, calls, finish, _ = reassemble(chunks)
    assert [c["id"] for c in calls] == ["call_001", "call_002"]
    assert [json.loads(c["arguments"]) for c in calls] == [{"command": "pwd"}, {"command": "ls"}]
    assert finish == "tool_calls"


def test_types_are_the_real_openai_classes():
    response = ask(FakeClient(), [USER])
    assert type(response) is ChatCompletion
    assert type(response.choices[0].message) is ChatCompletionMessage
    assert type(response.choices[0].message.tool_calls[0]) is ChatCompletionMessageFunctionToolCall


def test_pasted_back_output_is_summarised_without_tools():
    """01 的“人工搬运”：模型用文字建议命令，人运行后把输出贴回来，假模型据此回答。"""
    from harness_lib import FakeClient

    client = FakeClient()
    messages = [{"role": "user", "content": "帮我看看当前目录里有哪些 Python 文件"}]
    first = client.chat.completions.create(model="fake-agent-1", messages=messages)
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "user", "content": "我运行了，输出是：\napp.py\nutils.py"})
    answer = client.chat.completions.create(model="fake-agent-1", messages=messages)
    text = answer.choices[0].message.content
    assert "app.py" in text and "utils.py" in text and "可以在终端里运行" not in text
    # 闲聊不算贴回结果
    messages[-1] = {"role": "user", "content": "谢谢，再见"}
    chat = client.chat.completions.create(model="fake-agent-1", messages=messages)
    assert "app.py" not in chat.choices[0].message.content
