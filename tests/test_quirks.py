"""服务商怪脾气（harness_lib.models.quirks）：每一条都走真正的 HTTP。

对每一条怪脾气：朴素写法在哪一步坏掉（照原样复现），本项目的循环要么挺住，要么给出说得清的中文说明。
服务器是本机端口上的假模型，模型名选怪脾气：`fake-agent-1@<怪脾气>`。
"""

import json

import openai
import pytest

from harness_lib.lesson.loop import BudgetExceeded, agent_loop, within_budget
from harness_lib.lesson.stream import agent_loop_stream, streaming
from harness_lib.models.errors import EndpointError, classify, explain_error
from harness_lib.safety.runner import BASH_TOOL
from harness_lib.ui.clients import quirk_table
from harness_lib.models.quirks import (
    AS_OF,
    CURRENT,
    FIXED,
    FLAGGED,
    PARTLY_FIXED,
    QUIRKS,
    STATUS_COLUMN,
    QuirkClient,
    QuirkHandler,
    naive_loop,
    naive_stream,
    start_quirk_server,
)
from harness_lib.models.streaming import accumulate, stream_turn

PARALLEL = "请同时做两件互不相关的事：查看当前工作目录（pwd），以及查看今天的日期（date）。"
LIST_PY = "列出当前目录中的 Python 文件"
GREETING = "你好！请用一句话介绍你自己。"
TOOLS = [BASH_TOOL]


@pytest.fixture(scope="module")
def server():
    with start_quirk_server() as running:
        yield running


@pytest.fixture
def client(server):
    with openai.OpenAI(base_url=server.base_url, api_key="sk-quirk-local-key", max_retries=0) as c:
        yield c


def model(quirk):
    return f"fake-agent-1@{quirk}"


def user(text):
    return [{"role": "user", "content": text}]


def roles(messages):
    return [m["role"] for m in messages]


# ---------------------------------------------------------------------------
# 表本身
# ---------------------------------------------------------------------------


def test_every_quirk_has_a_provider_a_source_and_both_outcomes():
    assert len(QUIRKS) >= 10
    for name, quirk in QUIRKS.items():
        assert quirk.name == name
        assert quirk.source.startswith("https://"), quirk
        assert any("\u4e00" <= ch <= "\u9fff" for ch in quirk.behaviour), name
    table = quirk_table()
    assert list(table["怪脾气"]) == list(QUIRKS)


def chinese(text):
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def test_every_quirk_is_dated_with_versions_status_and_sources():
    assert AS_OF == "2026-12-02"
    for name, quirk in QUIRKS.items():
        assert quirk.versions and chinese(quirk.versions), f"{name} 没写版本范围"
        assert quirk.status in (CURRENT, PARTLY_FIXED, FIXED), name
        assert isinstance(quirk.refs, tuple), name
        for url in (quirk.source, *quirk.refs):
            assert url.startswith("https://"), (name, url)
        if quirk.status == CURRENT:
            assert not quirk.fixed_in and not quirk.why_keep, f"{name} 是现存的，不该写修复版本"
        else:
            assert any(ch.isdigit() for ch in quirk.fixed_in), f"{name} 的修复版本和日期没写"
            assert chinese(quirk.why_keep), f"{name} 没说为什么防御代码还要留着"


def test_the_table_shows_the_as_of_date_and_the_status():
    table = quirk_table()
    assert AS_OF in STATUS_COLUMN and STATUS_COLUMN in table.columns
    assert table.attrs["as_of"] == AS_OF
    assert list(table[STATUS_COLUMN]) == [q.status for q in QUIRKS.values()]
    for column in ("版本范围", "修复于", "为什么还要防", "出处"):
        assert column in table.columns
    assert AS_OF in table.to_string() or AS_OF in " ".join(table.columns), "日期显示在表上"


def test_quirks_fixed_upstream_are_labelled_history():
    """issue 18 点名的几条：llama.cpp 的 content 500 与 --jinja 已修复；Ollama 的 index 0 只修了一部分。"""
    content = QUIRKS["llamacpp_content"]
    assert content.status == FIXED and "13477" in content.fixed_in and "2025" in content.fixed_in
    assert any("12293" in url for url in content.refs)
    jinja = QUIRKS["llamacpp_no_jinja"]
    assert jinja.status == FIXED and "17524" in jinja.fixed_in and "2025-11" in jinja.fixed_in
    ollama = QUIRKS["ollama_parallel_index0"]
    assert ollama.status == PARTLY_FIXED and "v0.20.6" in ollama.fixed_in and "2026-04" in ollama.fixed_in
    assert any("15467" in url for url in ollama.refs) and any("15497" in url for url in ollama.refs)
    for name in ("llamacpp_python", "deepseek_thinking", "deepseek_balance"):
        assert QUIRKS[name].status == CURRENT, name


def test_quirk_is_read_from_the_model_name():
    client = QuirkClient()  # 不指定怪脾气：按模型名选
    for name in ("deepseek_balance", "fake-agent-1@deepseek_balance"):
        with pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(model=name, messages=[{"role": "user", "content": "你好"}])
        assert info.value.status_code == 402 and "Insufficient Balance" in str(info.value)
    reply = client.chat.completions.create(model="fake-agent-1", messages=[{"role": "user", "content": "你好"}])
    assert reply.choices[0].message.content.startswith("你好")
    with pytest.raises(ValueError):
        QuirkHandler("no_such_quirk")
    with pytest.raises(ValueError):
        QuirkClient("no_such_quirk")


def test_without_a_quirk_the_server_is_the_plain_fake(client):
    reply = client.chat.completions.create(model="fake-agent-1", messages=user(LIST_PY), tools=TOOLS)
    assert reply.choices[0].message.tool_calls


def test_the_offline_client_and_the_server_answer_alike(client):
    offline = QuirkClient("ollama_parallel_index0")
    online = naive_stream(client, model("ollama_parallel_index0"), PARALLEL, TOOLS)
    assert naive_stream(offline, "fake-agent-1", PARALLEL, TOOLS) == online
    assert offline.requests[-1]["stream"] is True


# ---------------------------------------------------------------------------
# 流式：Ollama 的 index 0、月之暗面的用量、空 choices 的第一块
# ---------------------------------------------------------------------------


def test_ollama_parallel_calls_at_index_0(client):
    q = model("ollama_parallel_index0")
    naive = naive_stream(client, q, PARALLEL, TOOLS)
    assert list(naive["tool_calls"]) == [0], "朴素写法把两个调用拼成了一个"
    merged = naive["tool_calls"][0]["arguments"]
    assert "}{" in merged
    with pytest.raises(ValueError):
        json.loads(merged)

    stream = client.chat.completions.create(model=q, messages=user(PARALLEL), tools=TOOLS, stream=True)
    calls = accumulate(stream)["message"]["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"command": "pwd"}, {"command": "date"}]
    assert len({c["id"] for c in calls}) == 2

    messages = user(PARALLEL)
    agent_loop_stream(messages, client=client, model=q)
    assert roles(messages) == ["user", "assistant", "tool", "tool", "assistant"]


def test_moonshot_usage_inside_the_choice(client):
    q = model("moonshot_usage_in_choice")
    assert naive_stream(client, q, LIST_PY, TOOLS)["usage"] is None, "朴素写法只看 chunk.usage"
    reply = stream_turn(client, q, user(LIST_PY), TOOLS)
    assert reply.usage is not None and reply.usage.total_tokens > 0
    messages = user(LIST_PY)
    with pytest.raises(BudgetExceeded):
        agent_loop(messages, client=client, model=q, call=within_budget(streaming(), max_tokens_total=1))
    assert roles(messages) == ["user", "assistant", "tool"]


def test_empty_choices_in_the_first_chunk(client):
    q = model("empty_choices_first")
    with pytest.raises(IndexError):
        naive_stream(client, q, LIST_PY, TOOLS)
    messages = user(LIST_PY)
    agent_loop_stream(messages, client=client, model=q)
    assert roles(messages) == ["user", "assistant", "tool", "assistant"]


def test_empty_choices_anywhere_are_skipped():
    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    empty = {**base, "choices": []}

    def chunk(delta, finish=None):
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [empty, chunk({"role": "assistant", "content": "你"}), empty, chunk({"content": "好"}),
              empty, chunk({}, "stop"), {**empty, "usage": {"total_tokens": 3}}, empty]
    result = accumulate(chunks)
    assert result["message"] == {"role": "assistant", "content": "你好"}
    assert result["usage"] == {"total_tokens": 3}


def test_a_reused_index_with_the_same_id_is_still_one_call():
    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}

    def part(**fields):
        return {**base, "choices": [{"index": 0, "delta": {"tool_calls": [fields]}, "finish_reason": None}]}

    chunks = [part(index=0, id="a", type="function", function={"name": "bash", "arguments": '{"comm'}),
              part(index=0, id="a", function={"arguments": 'and": "ls"}'}),
              {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    calls = accumulate(chunks)["message"]["tool_calls"]
    assert len(calls) == 1 and calls[0]["function"]["arguments"] == '{"command": "ls"}'


# ---------------------------------------------------------------------------
# DeepSeek：思考模式与余额
# ---------------------------------------------------------------------------


def test_deepseek_thinking_wants_reasoning_content_back(client):
    q = model("deepseek_thinking")
    with pytest.raises(openai.BadRequestError) as info:
        naive_loop(client, q, LIST_PY, TOOLS)
    assert "reasoning_content" in str(info.value)
    assert "reasoning_content" in explain_error(info.value) and "model_dump" in explain_error(info.value)

    for loop in (agent_loop, agent_loop_stream):
        messages = user(LIST_PY)
        loop(messages, client=client, model=q)
        assert roles(messages) == ["user", "assistant", "tool", "assistant"], loop.__name__
        assert messages[1]["reasoning_content"], "带工具调用的那一轮保留了 reasoning_content"


def test_deepseek_insufficient_balance(client):
    q = model("deepseek_balance")
    with pytest.raises(openai.APIStatusError) as info:
        naive_loop(client, q, LIST_PY, TOOLS)
    assert info.value.status_code == 402
    for loop in (agent_loop, agent_loop_stream):
        messages = user(LIST_PY)
        with pytest.raises(EndpointError) as err:
            loop(messages, client=client, model=q)
        assert err.value.kind == "balance" and "充值" in err.value.explanation
        assert messages == user(LIST_PY)


# ---------------------------------------------------------------------------
# 阿里云百炼：工具消息的规则、输入审核、输出审核
# ---------------------------------------------------------------------------


def test_dashscope_tool_message_rule(client):
    q = model("dashscope_tool_rule")
    with pytest.raises(openai.BadRequestError) as info:
        naive_loop(client, q, PARALLEL, TOOLS)
    assert "InternalError.Algo.InvalidParameter" in str(info.value)
    assert "没有配对" in explain_error(info.value)
    orphan = [{"role": "tool", "tool_call_id": "call_1", "content": "x"}, *user("继续")]
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=q, messages=orphan)
    assert 'role "tool"' in str(info.value) and "没有配对" in explain_error(info.value)

    messages = user(PARALLEL)
    agent_loop(messages, client=client, model=q)
    assert roles(messages) == ["user", "assistant", "tool", "tool", "assistant"]


def test_dashscope_input_inspection(client):
    q = model("dashscope_inspection")
    prompt = f"{LIST_PY}{FLAGGED}"
    with pytest.raises(openai.BadRequestError) as info:
        naive_loop(client, q, prompt, TOOLS)
    assert info.value.body["code"] == "data_inspection_failed"
    for loop in (agent_loop, agent_loop_stream):
        messages = user(prompt)
        with pytest.raises(EndpointError) as err:
            loop(messages, client=client, model=q)
        assert err.value.kind == "content_filter" and "审核" in err.value.explanation
        assert messages == user(prompt)
    messages = user(LIST_PY)
    agent_loop(messages, client=client, model=q)  # 没有那段内容就照常
    assert roles(messages) == ["user", "assistant", "tool", "assistant"]


def test_dashscope_output_inspection_mid_stream(client):
    q = model("dashscope_output_inspection")
    stream = client.chat.completions.create(model=q, messages=user(GREETING), stream=True)
    with pytest.raises(openai.APIError) as info:
        list(stream)
    assert type(info.value) is openai.APIError  # SDK 只说流里出错了
    messages = user(GREETING)
    with pytest.raises(EndpointError) as err:
        agent_loop_stream(messages, client=client, model=q)
    assert err.value.kind == "content_filter"
    assert "Output data may contain inappropriate content" in err.value.explanation
    assert "断" not in err.value.explanation.split("。")[0], "不是笼统的断流"
    assert messages == user(GREETING)


def test_stream_error_event_in_recorded_chunks():
    chunks = [{"id": "c", "choices": [{"index": 0, "delta": {"content": "半"}, "finish_reason": None}]},
              {"error": {"message": "model overloaded mid-stream", "type": "server_error"}}]
    with pytest.raises(EndpointError) as err:
        accumulate(chunks)
    assert err.value.kind == "stream_error" and "model overloaded mid-stream" in err.value.explanation


# ---------------------------------------------------------------------------
# llama.cpp：没有 content 的助手消息、没开 jinja
# ---------------------------------------------------------------------------


def test_llamacpp_assistant_message_without_content(client):
    q = model("llamacpp_content")
    with pytest.raises(openai.InternalServerError) as info:
        naive_loop(client, q, LIST_PY, TOOLS)
    assert "Expected 'content'" in str(info.value)
    for loop in (agent_loop, agent_loop_stream):
        messages = user(LIST_PY)
        with pytest.raises(EndpointError) as err:
            loop(messages, client=client, model=q)  # model_dump(exclude_none=True) 去掉了 content=None
        assert err.value.kind == "request_shape"
        assert "content" in err.value.explanation and "不是你的代码" not in err.value.explanation
        assert roles(messages) == ["user", "assistant", "tool"], "第一轮完整保留，第二轮没有进来"
    messages = user(LIST_PY)
    messages.append({"role": "assistant", "content": "", "tool_calls": [{
        "id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]})
    messages.append({"role": "tool", "tool_call_id": "call_1", "content": "app.py"})
    client.chat.completions.create(model=q, messages=messages)  # 照说明补上 content 就行


def test_llamacpp_without_jinja_rejects_tools(client):
    """历史：PR #17524（2025-11）以前的 llama-server 不加 --jinja 就拒绝带工具的请求。"""
    q = model("llamacpp_no_jinja")
    with pytest.raises(openai.InternalServerError) as info:
        naive_loop(client, q, LIST_PY, TOOLS)
    assert "requires --jinja" in str(info.value)
    reply = client.chat.completions.create(model=q, messages=user(GREETING))
    assert reply.choices[0].message.content, "不带工具的对话照常"
    with pytest.raises(EndpointError):
        agent_loop(user(LIST_PY), client=client, model=q)


# ---------------------------------------------------------------------------
# Ollama 小模型：不调用工具
# ---------------------------------------------------------------------------


def test_ollama_small_model_never_calls_tools(client):
    q = model("ollama_no_tools")
    messages = naive_loop(client, q, LIST_PY, TOOLS)
    assert roles(messages) == ["user", "assistant"]
    assert json.loads(messages[-1]["content"])["name"] == "bash", "调用被写成了文字"
    loop_messages = user(LIST_PY)
    answer = agent_loop(loop_messages, client=client, model=q)
    assert roles(loop_messages) == ["user", "assistant"] and answer == messages[-1]["content"]


def test_llamacpp_python_as_measured(client):
    """本项目 make test-real 用的 llama-cpp-python 服务器（chatml-function-calling）上量到的样子。"""
    q = model("llamacpp_python")
    plain = client.chat.completions.create(model=q, messages=user(LIST_PY), tools=TOOLS)
    assert not plain.choices[0].message.tool_calls, "不写 tool_choice：不调用工具"
    auto = client.chat.completions.create(model=q, messages=user(LIST_PY), tools=TOOLS, tool_choice="auto")
    assert auto.choices[0].message.tool_calls
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model=q, messages=user(GREETING), tools=TOOLS, tool_choice="required")
    stream = client.chat.completions.create(model=q, messages=user(LIST_PY), tools=TOOLS, tool_choice="auto",
                                            stream=True)
    assert list(stream) == [], "写明 auto 的流式请求：一块都没有"
    with pytest.raises(EndpointError) as err:
        stream_turn(client, q, user(LIST_PY), TOOLS, tool_choice="auto")
    assert err.value.kind == "stream_cut"
    turn = auto.choices[0].message.model_dump(exclude_none=True)
    assert "content" not in turn
    with pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(model=q, messages=[*user(LIST_PY), turn, {
            "role": "tool", "tool_call_id": turn["tool_calls"][0]["id"], "content": "app.py"}])
    assert classify(info.value).kind == "request_shape"
    assert stream_turn(client, q, user(GREETING)).usage is None, "流式不报用量"
    messages = user(LIST_PY)
    agent_loop(messages, client=client, model=q)
    assert roles(messages) == ["user", "assistant"], "循环不写 tool_choice，模型只回了文字"


def test_an_empty_tool_calls_from_vllm_is_not_written_so_the_next_question_goes_through(client, workspace):
    """vLLM 的文字回答带着 "tool_calls": []：照原样存进历史，下一个问题的请求就被拒（“empty array”）；
    agent_loop 不写空的 tool_calls，同一段对话接着问也成功。"""
    q = model("vllm_empty_tool_calls")
    raw = client.chat.completions.create(model=q, messages=user(GREETING), tools=TOOLS)
    assert raw.choices[0].message.tool_calls == [] and raw.choices[0].finish_reason == "stop"
    naive = [*user(GREETING), raw.choices[0].message.model_dump(exclude_none=True), *user(LIST_PY)]
    with pytest.raises(openai.BadRequestError, match="empty array"):
        client.chat.completions.create(model=q, messages=naive, tools=TOOLS)

    messages = user(LIST_PY)
    agent_loop(messages, client=client, model=q)
    assert all(m.get("tool_calls") != [] for m in messages)
    messages += user(GREETING)
    assert agent_loop(messages, client=client, model=q)
    assert roles(messages) == ["user", "assistant", "tool", "assistant", "user", "assistant"]
