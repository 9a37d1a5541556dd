"""harness_lib.models.record：录下一次真实 HTTP 运行，离线回放出同样的对话记录；文件里没有密钥。"""

import json

import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from harness_lib import FakeClient, agent_loop, model_switch, start_server, text_reply, scripted_call, tool_reply
from harness_lib.safety.runner import BASH_TOOL
from harness_lib.models.errors import EndpointError, explain_error
from harness_lib.models.wire import api_error, api_timeout
from harness_lib.models.record import (
    Recorder,
    ReplayClient,
    ReplayExhaustedError,
    ReplayMismatchError,
    load_calls,

)
from harness_lib.lesson.stream import agent_loop_stream
from harness_lib.models.fake import CutStreamClient
from harness_lib.safety.secrets import NO_KEY, env_secrets, redact
from harness_lib.models.streaming import stream_turn

MODEL = "fake-agent-1"
SENTINEL = "sk-record-SENTINEL-7d1e20b4"
TASK = "列出当前目录中的 Python 文件"


@pytest.fixture()
def recorded(workspace, tmp_path):
    """对本地端点（要求密钥）跑一次普通循环和一次流式循环，录下来存成 JSONL。"""
    with start_server(api_key=SENTINEL) as server:
        with openai.OpenAI(base_url=server.base_url, api_key=SENTINEL, max_retries=0) as client:
            recorder = Recorder(client)
            plain = [{"role": "user", "content": TASK}]
            agent_loop(plain, client=recorder, model=MODEL)
            live = [{"role": "user", "content": TASK}]
            agent_loop_stream(live, client=recorder, model=MODEL)
            path = recorder.save(tmp_path / "runs" / "run.jsonl")
    return path, plain, live


def test_file_has_one_line_per_call_and_no_key(recorded):
    path, plain, live = recorded
    text = path.read_text(encoding="utf-8")
    assert SENTINEL not in text
    for word in ("Authorization", "Bearer", "api_key", "extra_headers"):
        assert word not in text
    lines = text.splitlines()
    assert len(lines) == 4  # 两次循环，各两轮
    calls = [json.loads(line) for line in lines]
    assert [c["call"] for c in calls] == [1, 2, 3, 4]
    assert [c["stream"] for c in calls] == [False, False, True, True]
    first = calls[0]
    assert first["request"]["model"] == MODEL
    assert first["request"]["messages"][-1] == {"role": "user", "content": TASK}
    assert first["request"]["tools"][0]["function"]["name"] == "bash"
    assert first["response"]["object"] == "chat.completion"
    assert first["response"]["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "bash"
    assert calls[2]["ended"] is True
    assert calls[2]["chunks"][0]["object"] == "chat.completion.chunk"
    assert "include_usage" in json.dumps(calls[2]["request"])
    assert "中文" in text or "Python 文件" in text, "中文原样保存，不转义"
    assert load_calls(path) == calls


def test_replay_offline_gives_the_same_transcript(recorded):
    path, plain, live = recorded  # 端点已经关闭：回放完全离线
    client = ReplayClient(path)
    assert client.model == MODEL and client.remaining == 4
    again = [{"role": "user", "content": TASK}]
    agent_loop(again, client=client, model=client.model)
    assert again == plain
    again_live = [{"role": "user", "content": TASK}]
    agent_loop_stream(again_live, client=client, model=client.model)
    assert again_live == live
    assert client.remaining == 0
    with pytest.raises(ReplayExhaustedError, match="已经全部回放完"):
        client.chat.completions.create(model=MODEL, messages=again)


def test_replay_returns_real_sdk_objects(recorded):
    path, _, _ = recorded
    client = ReplayClient(path, check=False)
    response = client.chat.completions.create(model=MODEL, messages=[])
    assert isinstance(response, ChatCompletion)
    assert response.choices[0].message.tool_calls[0].function.name == "bash"
    client.chat.completions.create(model=MODEL, messages=[])
    chunks = list(client.chat.completions.create(model=MODEL, messages=[], stream=True))
    assert all(isinstance(c, ChatCompletionChunk) for c in chunks)


def test_a_diverging_request_is_reported_in_chinese(recorded):
    path, _, _ = recorded
    with pytest.raises(ReplayMismatchError) as info:
        agent_loop([{"role": "user", "content": "当前目录是哪里"}], client=ReplayClient(path), model=MODEL)
    text = str(info.value)
    assert "第 1 次调用" in text and "messages[1].content" in text and "check=False" in text
    # 工具换了也能发现
    with pytest.raises(ReplayMismatchError, match="tools"):
        ReplayClient(path).chat.completions.create(
            model=MODEL, messages=load_calls(path)[0]["request"]["messages"], tools=None)
    # 不检查：照样按顺序回放
    loose = [{"role": "user", "content": "当前目录是哪里"}]
    agent_loop(loose, client=ReplayClient(path, check=False), model=MODEL)
    assert loose[1]["tool_calls"]


def test_sdk_message_objects_in_the_request_are_recorded_as_dicts(workspace, tmp_path):
    recorder = Recorder(FakeClient())
    messages = [{"role": "user", "content": TASK}]
    reply = recorder.chat.completions.create(model=MODEL, messages=messages, tools=[BASH_TOOL])
    message = reply.choices[0].message  # 不转成 dict，直接放回去
    messages += [message, {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "app.py"}]
    recorder.chat.completions.create(model=MODEL, messages=iter(messages), tools=[BASH_TOOL])
    path = recorder.save(tmp_path / "objects.jsonl")
    second = load_calls(path)[1]["request"]["messages"]
    # 录像里是 SDK 真正发出去的样子：解析时出现过的字段都在，包括值为 null 的 content
    assert second[1] == message.model_dump(mode="json", exclude_unset=True)
    assert {k: v for k, v in second[1].items() if v is not None} == message.model_dump(mode="json", exclude_none=True)
    # 回放时用 dict 或 SDK 对象都对得上
    client = ReplayClient(path)
    client.chat.completions.create(model=MODEL, messages=messages[:1], tools=[BASH_TOOL])
    client.chat.completions.create(model=MODEL, messages=messages, tools=[BASH_TOOL])


def test_a_key_typed_into_the_conversation_is_scrubbed(tmp_path):
    recorder = Recorder(FakeClient(api_key=SENTINEL), secrets=["another-secret-123"])
    recorder.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": f"我的密钥是 {SENTINEL}，还有 another-secret-123"}])
    text = recorder.save(tmp_path / "k.jsonl").read_text(encoding="utf-8")
    assert SENTINEL not in text and "another-secret-123" not in text
    assert text.count("[已隐去的密钥]") == 2


def test_errors_are_recorded_and_replayed(tmp_path):
    fake = FakeClient(script=[api_error(429, "Rate limit reached.", type="requests", code="rate_limit"),
                              text_reply("好了")])
    recorder = Recorder(fake)
    messages = [{"role": "user", "content": "你好"}]
    with pytest.raises(openai.RateLimitError):
        recorder.chat.completions.create(model=MODEL, messages=messages)
    recorder.chat.completions.create(model=MODEL, messages=messages)
    path = recorder.save(tmp_path / "errors.jsonl")
    assert load_calls(path)[0]["error"]["status"] == 429
    client = ReplayClient(path)
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model=MODEL, messages=messages)
    assert info.value.status_code == 429 and "Rate limit reached." in str(info.value)
    assert client.chat.completions.create(model=MODEL, messages=messages).choices[0].message.content == "好了"


def test_a_cut_stream_is_recorded_as_incomplete_and_replays_as_cut(tmp_path):
    recorder = Recorder(CutStreamClient(FakeClient(), after=3))
    messages = [{"role": "user", "content": TASK}]
    with pytest.raises(EndpointError):
        stream_turn(recorder, MODEL, messages, [BASH_TOOL])
    path = recorder.save(tmp_path / "cut.jsonl")
    entry = load_calls(path)[0]
    # 录制器只看到流读完了；块里没有 finish_reason，这正是回放时要被发现的
    assert entry["ended"] is True and len(entry["chunks"]) == 3
    assert all(c["choices"][0]["finish_reason"] is None for c in entry["chunks"])
    with pytest.raises(EndpointError) as info:
        stream_turn(ReplayClient(path), MODEL, messages, [BASH_TOOL])
    assert info.value.kind == "stream_cut"


def test_recorder_passes_other_attributes_through():
    recorder = Recorder(FakeClient())
    assert recorder.models.list().data[0].id == MODEL
    assert "已录 0 次" in repr(recorder)
    script = FakeClient(script=[tool_reply(scripted_call("bash", {"command": "ls"}))])
    assert Recorder(script).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "x"}], tools=[BASH_TOOL]).choices[0].message.tool_calls


# ---------------------------------------------------------------------------
# 打码：录像、错误说明、切换器和执行器用同一个 secrets.redact
# ---------------------------------------------------------------------------


def test_environment_secrets_and_their_fragments_never_reach_a_recording(tmp_path, monkeypatch):
    """环境里别家的密钥：工具打印出来的、401 报错里回显的半截，都不会留在 JSONL 里。"""
    dashscope = "sk-dashscope-" + "a1b2c3d4e5f6a7b8c9d0"
    hf = "hf_" + "QwErTyUiOpAsDfGhJkLz"
    monkeypatch.setenv("DASHSCOPE_API_KEY", dashscope)
    monkeypatch.setenv("HF_TOKEN", hf)
    echoed = f"Incorrect API key provided: {dashscope[:14]}****{dashscope[-4:]}"
    fake = FakeClient(script=[tool_reply(scripted_call("bash", {"command": "env"})), api_error(401, echoed),
                              text_reply("好了")])
    recorder = Recorder(fake)
    messages = [{"role": "user", "content": "看看环境"}]
    first = recorder.chat.completions.create(model=MODEL, messages=messages, tools=[BASH_TOOL]).choices[0].message
    messages += [first.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": first.tool_calls[0].id,
                  "content": f"HF_TOKEN={hf}\nPART={hf[3:13]}\nDASHSCOPE_API_KEY={dashscope}"}]
    with pytest.raises(openai.AuthenticationError):
        recorder.chat.completions.create(model=MODEL, messages=messages, tools=[BASH_TOOL])
    recorder.chat.completions.create(model=MODEL, messages=messages, tools=[BASH_TOOL])
    text = recorder.save(tmp_path / "env.jsonl").read_text(encoding="utf-8")
    for secret in (dashscope, hf):
        grams = {secret[i:i + 8] for i in range(len(secret) - 7)}
        assert not [g for g in grams if g in text], secret
    assert "HF_TOKEN=[已隐去的密钥]" in text and "PART=[已隐去的密钥]" in text
    assert "Incorrect API key provided: [已隐去的密钥]" in text


def test_redact_covers_explicit_keys_and_the_environment(monkeypatch):
    token = "ghp_" + "Zx9Yw8Vu7Ts6Rq5Po4Nm"
    monkeypatch.setenv("GITHUB_TOKEN", token)
    monkeypatch.setenv("HF_TOKEN_PATH", "/home/learner/.cache/huggingface/token")  # 位置，不是秘密
    monkeypatch.setenv("HARNESS_MODEL", "qwen-plus-latest")  # 设置，不是秘密
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/ssh-XXXXabcd/agent.12345")  # 套接字的位置，不是秘密
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # 太短，不当作秘密
    assert token in env_secrets()
    assert redact(f"x {token} y") == "x *** y"
    assert redact(f"x {token[2:10]} y") == "x *** y"  # 8 个字符的片段
    assert redact(f"x {token[2:9]} y") == f"x {token[2:9]} y"  # 7 个字符的片段不算
    plain = "path /home/learner/.cache/huggingface/token model qwen-plus-latest abc /tmp/ssh-XXXXabcd/agent.12345"
    assert redact(plain) == plain
    assert redact("key=sk-explicit-123456", "sk-explicit-123456") == "key=***"
    assert redact(f"api_key={NO_KEY}", NO_KEY) == f"api_key={NO_KEY}"
    assert redact(f"[{token}]", mask="[已隐去的密钥]") == "[[已隐去的密钥]]"


def test_the_offline_placeholder_key_is_not_a_secret(tmp_path):
    recorder = Recorder(FakeClient(script=[text_reply("offline 模式下也能回答")]))
    recorder.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "offline？"}])
    text = recorder.save(tmp_path / "o.jsonl").read_text(encoding="utf-8")
    assert "offline 模式下也能回答" in text and "offline？" in text


def test_explanations_use_the_same_redaction(monkeypatch):
    """错误说明也用 secrets.redact：服务器回显的别家密钥片段（环境里的）不会出现在中文说明里。"""
    deepseek = "sk-deepseek-" + "0f1e2d3c4b5a69788796"
    monkeypatch.setenv("DEEPSEEK_API_KEY", deepseek)
    fake = FakeClient(script=[api_error(401, f"Incorrect API key provided: {deepseek[3:15]}…{deepseek[-4:]}",
                                        code="invalid_api_key")])
    with pytest.raises(openai.AuthenticationError) as info:
        fake.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "你好"}])
    text = explain_error(info.value)
    assert "Incorrect API key provided" in text and deepseek[3:15] not in text
    assert not [deepseek[i:i + 8] for i in range(len(deepseek) - 7) if deepseek[i:i + 8] in text]


def test_the_switch_status_uses_the_same_redaction(monkeypatch):
    """切换器的状态行也用 secrets.redact：环境里别家的密钥（连同片段）不会显示出来。"""
    token = "hf_" + "Mn8Bv7Cx6Zl5Kj4Hg3Fd"
    monkeypatch.setenv("HF_TOKEN", token)
    switch = model_switch()
    shown = switch._set_status(f"调试信息：{token}，片段 {token[4:14]}")
    assert token[4:12] not in shown and token[4:12] not in switch.status_html.value
    assert shown == "调试信息：***，片段 ***"


def test_a_call_the_sdk_retried_is_recorded_once_and_replays_offline(workspace, tmp_path, fault_server):
    """时好时坏的端点（每三个请求坏一个）：SDK 重试成功的调用，录像里只有成功的那次尝试。"""
    fault_server.reset()
    with openai.OpenAI(base_url=fault_server.url("flaky"), api_key=SENTINEL, max_retries=2) as client:
        recorder = Recorder(client)
        plain = [{"role": "user", "content": TASK}]
        agent_loop(plain, client=recorder, model=MODEL)  # 第 1、2 个请求
        live = [{"role": "user", "content": TASK}]
        agent_loop_stream(live, client=recorder, model=MODEL)  # 第 3 个请求 503，重试成功；然后第 5 个
        path = recorder.save(tmp_path / "flaky.jsonl")
    assert fault_server.hits["flaky"] == 5, "四次调用，其中一次重试了一回"
    calls = load_calls(path)
    assert [c["call"] for c in calls] == [1, 2, 3, 4]
    assert not any("error" in c for c in calls), "重试前那次失败的尝试不留在录像里"
    assert [c.get("attempts", 1) for c in calls] == [1, 1, 2, 1]
    assert calls[2]["stream"] and calls[2]["chunks"]
    # 课堂上离线回放：不需要网络，也不会卡在录制时的 503 上
    replayed = [{"role": "user", "content": TASK}]
    agent_loop(replayed, client=ReplayClient(path), model=MODEL)
    assert replayed == plain


_ONCE = {
    "429": lambda: api_error(429, "Rate limit reached.", type="requests", code="rate_limit_exceeded",
                             headers={"retry-after-ms": "10"}),
    "500": lambda: api_error(500, "The server had an error while processing your request.", type="server_error",
                             headers={"retry-after-ms": "10"}),
    "timeout": api_timeout,  # 假模型遇到它时让传输层超时，由 SDK 自己重试
}


@pytest.mark.parametrize("fault", sorted(_ONCE))
def test_a_fault_once_while_recording_replays_offline(workspace, tmp_path, fault):
    """录制时第一次调用先遇到一次 429 / 500 / 超时，SDK 重试成功：录像里是一次成功的调用，离线回放照样跑完。"""
    fake = FakeClient(max_retries=2, script=[
        _ONCE[fault](), tool_reply(scripted_call("bash", {"command": "ls *.py"})), text_reply("有 app.py 和 utils.py。")])
    recorder = Recorder(fake)
    recorded_run = [{"role": "user", "content": TASK}]
    agent_loop(recorded_run, client=recorder, model=MODEL)
    path = recorder.save(tmp_path / f"{fault}.jsonl")
    calls = load_calls(path)
    assert [c["call"] for c in calls] == [1, 2]
    assert [c.get("attempts", 1) for c in calls] == [2, 1], "第一次调用试了两次，录像里只记次数"
    assert not any("error" in c for c in calls), "重试前那次失败的尝试不留在录像里"
    assert calls[0]["response"]["choices"][0]["message"]["tool_calls"]
    player = ReplayClient(path)
    assert player.max_retries == 0  # 回放不重试：录像里也没有要重试的东西
    replayed = [{"role": "user", "content": TASK}]
    agent_loop(replayed, client=player, model=player.model)
    assert replayed == recorded_run and player.remaining == 0


@pytest.mark.parametrize("fault", sorted(_ONCE))
def test_a_fault_in_a_later_call_replays_offline_too(workspace, tmp_path, fault):
    """第二次调用（请求里已经有工具消息）才遇到故障：重试发的是同一个请求，录像照样对得上。"""
    fake = FakeClient(max_retries=1, script=[
        tool_reply(scripted_call("bash", {"command": "ls *.py"})), _ONCE[fault](), text_reply("有 app.py 和 utils.py。")])
    recorder = Recorder(fake)
    recorded_run = [{"role": "user", "content": TASK}]
    agent_loop(recorded_run, client=recorder, model=MODEL)
    calls = load_calls(recorder.save(tmp_path / "later.jsonl"))
    assert [c.get("attempts", 1) for c in calls] == [1, 2]
    assert len(calls[1]["request"]["messages"]) == 4, "重试的是第二轮的完整请求"
    replayed = [{"role": "user", "content": TASK}]
    agent_loop(replayed, client=ReplayClient(tmp_path / "later.jsonl"), model=MODEL)
    assert replayed == recorded_run


@pytest.mark.parametrize("fault", sorted(_ONCE))
def test_a_call_whose_retries_all_failed_is_one_error_that_replays_as_the_same_error(tmp_path, fault):
    """重试也都失败了：录像里是一次出错的调用（attempts 是总次数），回放时同样出错，而且不会卡住。"""
    fake = FakeClient(max_retries=2, script=[_ONCE[fault]() for _ in range(3)])
    recorder = Recorder(fake)
    messages = [{"role": "user", "content": "你好"}]
    expected = openai.APITimeoutError if fault == "timeout" else openai.APIStatusError
    with pytest.raises(expected):
        recorder.chat.completions.create(model=MODEL, messages=messages)
    calls = load_calls(recorder.save(tmp_path / "failed.jsonl"))
    assert len(calls) == 1 and calls[0]["attempts"] == 3 and "error" in calls[0]
    with pytest.raises(expected) as info:
        ReplayClient(tmp_path / "failed.jsonl").chat.completions.create(model=MODEL, messages=messages)
    if fault != "timeout":
        assert info.value.status_code == int(fault)


# ---------------------------------------------------------------------------
# 经过切换器的客户端录制：预设的字段和学到的规矩照样生效，录像离线回放
# ---------------------------------------------------------------------------

# 预设 → 它的服务商替身（怪脾气）和模型名；百炼那一行是只会思考、只收流式调用的模型
STAND_INS = {"deepseek": ("deepseek_thinking", None), "openai": ("openai_tools_reasoning", None),
             "dashscope": ("dashscope_thinking_only", "qwen3-235b-a22b-thinking-2507")}


@pytest.mark.parametrize("key", sorted(STAND_INS))
def test_a_recording_through_the_switch_client_carries_its_fixes_and_replays(key, workspace, tmp_path, capsys):
    """录制走切换器的客户端（`real_client`）本身：预设的 extra_body 在每个请求里，客户端从 400 里学到的规矩
    录制时照样生效；被它改好重发的那次拒绝不单占一行。录像离线回放，得到同样的对话记录。"""
    from harness_lib.models.quirks import start_quirk_server
    from harness_lib.ui.clients import PRESETS_BY_KEY, real_client

    preset = PRESETS_BY_KEY[key]
    quirk, model = STAND_INS[key]
    model = model or preset.model
    server = start_quirk_server(quirk)
    try:
        recorder = Recorder(real_client(server.base_url, SENTINEL, preset.extra_body))
        recorded = [{"role": "user", "content": TASK}]
        answer = agent_loop(recorded, client=recorder, model=model)
        path = recorder.save(tmp_path / f"{key}.jsonl")
        sent = list(server.handler.requests)
    finally:
        server.close()
    assert [m["role"] for m in recorded] == ["user", "assistant", "tool", "assistant"] and answer
    calls = load_calls(path)
    assert [c["call"] for c in calls] == [1, 2], "一次 create() 一行：改好重发的只留最后一次"
    assert all("error" not in c and c["stream"] is False for c in calls)
    for field, value in (preset.extra_body or {}).items():
        if key != "dashscope":  # 只会思考的模型：客户端学会了不再替它传 enable_thinking
            assert all(c["request"].get(field) == value for c in calls), f"录下的请求带着预设的 {field}"
    if key == "openai":
        assert all("max_tokens" not in c["request"] and c["request"]["max_completion_tokens"] == 512
                   and c["request"]["reasoning_effort"] == "none" for c in calls)
        assert [e["param"] for e in calls[0]["fixed_by_client"]] == ["max_tokens", "reasoning_effort"]
        assert len(sent) == 4 and "fixed_by_client" not in calls[1], "学到的规矩第二次一开始就用上"
    if key == "dashscope":
        assert all(c.get("streamed_by_client") and "enable_thinking" not in c["request"] for c in calls)
        assert len(calls[0]["fixed_by_client"]) == 2 and all(b.get("stream") for b in sent[2:])
        assert recorded[1]["reasoning_content"], "在底下流式拼回的回复带着思维链"
    if key == "deepseek":
        assert len(sent) == 2 and "reasoning_content" not in json.dumps(calls)
    assert SENTINEL not in path.read_text(encoding="utf-8")
    out = capsys.readouterr().out
    replay = ReplayClient(path)
    again = [{"role": "user", "content": TASK}]
    assert agent_loop(again, client=replay, model=replay.model) == answer
    assert again == recorded and replay.remaining == 0, "回放完全离线，记录和录制时一样"
    assert capsys.readouterr().out == "", "回放时没有重发，也没有提示"
    if key != "deepseek":
        assert "结果：成功" in out, "录制时客户端照常说明它改了什么"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_recording_through_the_responses_bridge_replays_as_chat(stream, workspace, tmp_path, capsys):
    """gpt-6.1-sol 的替身只在 /v1/responses 上调用工具：切换器的客户端在底下改走那里。录像里记的是循环看到的
    Chat 调用和交回的 ChatCompletion（或流式块），标着 bridged_by_client；回放完全离线，对话记录和录制时一样。"""
    from harness_lib.lesson.stream import streaming
    from harness_lib.models.quirks import start_quirk_server
    from harness_lib.ui.clients import real_client

    call = {"call": streaming()} if stream else {}
    server = start_quirk_server("openai_tools_responses_only")
    try:
        recorder = Recorder(real_client(server.base_url, SENTINEL))
        recorded = [{"role": "user", "content": TASK}]
        answer = agent_loop(recorded, client=recorder, model="gpt-6.1-sol", **call)
        path = recorder.save(tmp_path / "sol.jsonl")
    finally:
        server.close()
    assert [m["role"] for m in recorded] == ["user", "assistant", "tool", "assistant"] and answer
    calls = load_calls(path)
    assert [c["call"] for c in calls] == [1, 2] and all(c.get("bridged_by_client") for c in calls)
    assert all("messages" in c["request"] and c["stream"] is stream for c in calls), "记的是 Chat 的请求"
    assert [e["param"] for e in calls[0]["fixed_by_client"]] == ["max_tokens", "tools"]
    assert "fixed_by_client" not in calls[1], "学到的规矩第二次一开始就用上"
    assert "结果：成功" in capsys.readouterr().out
    replay = ReplayClient(path)
    again = [{"role": "user", "content": TASK}]
    assert agent_loop(again, client=replay, model=replay.model, **call) == answer
    assert again == recorded and replay.remaining == 0, "回放完全离线，记录和录制时一样"


def test_a_streamed_recording_after_the_client_learned_the_bridge_keeps_chat_chunks(workspace, tmp_path):
    """客户端先学会了改走 /v1/responses（09 里探针先跑），再录一次流式的循环：录像里是 Chat 的块，不是 Responses
    的事件，回放读到 finish_reason。"""
    from harness_lib.models.quirks import start_quirk_server
    from harness_lib.ui.clients import real_client
    from harness_lib.ui.probe import probe

    server = start_quirk_server("openai_tools_responses_only")
    try:
        client = real_client(server.base_url, SENTINEL)
        probe(client, "gpt-6.1-sol")  # 和 09 一样先跑探针：客户端学会改走 Responses
        recorder = Recorder(client)
        recorded = [{"role": "user", "content": TASK}]
        answer = agent_loop_stream(recorded, client=recorder, model="gpt-6.1-sol")
        path = recorder.save(tmp_path / "sol-stream.jsonl")
    finally:
        server.close()
    calls = load_calls(path)
    assert len(calls) == 2 and all(c["stream"] and c.get("bridged_by_client") for c in calls)
    assert {chunk["object"] for c in calls for chunk in c["chunks"]} == {"chat.completion.chunk"}
    replay = ReplayClient(path)
    again = [{"role": "user", "content": TASK}]
    assert agent_loop_stream(again, client=replay, model=replay.model) == answer and again == recorded


def test_a_failed_call_through_the_responses_bridge_is_recorded_as_chat_and_fails_again_on_replay(tmp_path):
    """桥接的调用被拒（这里是一个没有回应的调用）：录像里记的仍是循环发的 Chat 请求和服务器的错误，回放时原样失败。"""
    from harness_lib.models.quirks import start_quirk_server
    from harness_lib.ui.clients import real_client

    server = start_quirk_server("openai_tools_responses_only")
    unanswered = [{"role": "user", "content": TASK}, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
                  {"role": "user", "content": "接着说"}]
    try:
        recorder = Recorder(real_client(server.base_url, SENTINEL))
        first = [{"role": "user", "content": TASK}]
        recorder.chat.completions.create(model="gpt-6.1-sol", messages=first, tools=[BASH_TOOL])
        with pytest.raises(openai.BadRequestError) as recorded:
            recorder.chat.completions.create(model="gpt-6.1-sol", messages=unanswered, tools=[BASH_TOOL])
        path = recorder.save(tmp_path / "sol.jsonl")
    finally:
        server.close()
    calls = load_calls(path)
    assert [c.get("bridged_by_client") for c in calls] == [True, True]
    assert calls[1]["request"]["messages"] == unanswered and "error" in calls[1] and "responses" not in calls[1]
    replay = ReplayClient(path)
    replay.chat.completions.create(model="gpt-6.1-sol", messages=first, tools=[BASH_TOOL])
    with pytest.raises(openai.BadRequestError) as again:
        replay.chat.completions.create(model="gpt-6.1-sol", messages=unanswered, tools=[BASH_TOOL])
    assert again.value.message == recorded.value.message and replay.remaining == 0


def test_a_recorder_on_a_scripted_fake_keeps_its_script_and_trust():
    """离线的假模型：录制经过它自己的副本，脚本是同一份，副本和原来的一样可信。"""
    from harness_lib.safety.trust import trusted

    fake = FakeClient(script=[text_reply("一"), text_reply("二")])
    recorder = Recorder(fake)
    assert recorder.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}]
                                            ).choices[0].message.content == "一"
    assert fake.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}]
                                        ).choices[0].message.content == "二"
    assert trusted(recorder.client) and len(recorder.calls) == 1
