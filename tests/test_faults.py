"""端点故障：本机故障服务器 + 真正的 openai.OpenAI 客户端 + agent_loop，不用替身。

每种故障都走真实的 HTTP：agent_loop 抛出正确类别的 EndpointError，原始异常在 `.original`，
messages 一个字都不变，说明是中文且不含密钥；换成好的客户端后，同一份 messages 接着跑。
"""

import copy
import logging
import time

import openai
import pytest

from harness_lib import (BudgetExceeded, FakeClient, agent_loop, check_request, text_reply, scripted_call, tool_reply,
                         within_budget)
from harness_lib.models.call import call_model
from harness_lib.models.errors import EndpointError, explain_error
from harness_lib.models.streaming import collect_stream
from harness_lib.models.fake import api_error
from harness_lib.models.faults import (CONTEXT_LIMIT, FAULTS, MODELS, PROVIDER_BODIES, REASONING_TOKENS,
                                        closed_port_url, start_fault_server)
from harness_lib.models.net import free_port
from harness_lib.lesson.loop import TOOLS

SENTINEL = "SENTINEL-key-8f3a9c27d1e5"  # 假密钥：任何输出里都不许出现它
MODEL = "fake-agent-1"


def _client(fault_server, fault, *, retries=0, timeout=0.5, key=SENTINEL):
    return openai.OpenAI(base_url=fault_server.url(fault), api_key=key, max_retries=retries, timeout=timeout)


def _conversation():
    """已经完整跑完一轮的对话，再加一个新问题：失败时它不能被动一下。"""
    return [
        {"role": "user", "content": "你好"},
        {"role": "assistant", "content": "你好！"},
        {"role": "user", "content": "列出当前目录中的 Python 文件"},
    ]


def _quiet_handlers():
    seen = []
    return seen, {"bash": lambda args: seen.append(args["command"]) or f"执行了 {args['command']}"}


def _assert_clean(err):
    """说明是中文，密钥（及其长片段）不出现在 str、repr、IPython 的简短调用栈里。"""
    rendered = "\n".join(err._render_traceback_())
    for text in (str(err), repr(err), rendered, err.explanation):
        assert SENTINEL not in text
        assert SENTINEL[:8] not in text and SENTINEL[-6:] not in text
    assert any("\u4e00" <= ch <= "\u9fff" for ch in err.explanation)
    assert rendered.startswith(f"EndpointError（{err.kind}）")


CASES = [
    # 故障名, 类别, 原始异常类型（None 表示 SDK 没有抛异常，是我们看出来的）, 收到的请求数
    ("auth", "auth", openai.AuthenticationError, 1),
    ("permission", "permission", openai.PermissionDeniedError, 1),
    ("not_found", "not_found", openai.NotFoundError, 1),
    ("rate_limit", "rate_limit", openai.RateLimitError, 1),
    ("quota", "balance", openai.RateLimitError, 1),
    ("server", "server", openai.InternalServerError, 1),
    ("unavailable", "server", openai.InternalServerError, 1),
    ("timeout", "timeout", openai.APITimeoutError, 1),
    ("connection", "connection", openai.APIConnectionError, 0),
    ("html", "bad_response", None, 1),
    ("not_json", "bad_response", ValueError, 1),
    ("no_choices", "no_choices", None, 1),
]


def test_every_fault_has_a_case():
    assert {c[0] for c in CASES} | {"ok", "stream_cut", "flaky", "unknown_model", "context_length", "thinking",
                                   "keepalive"} \
        == set(FAULTS)


def test_flaky_fails_every_third_request_and_the_sdk_retry_hides_it(fault_server):
    fault_server.reset()
    bare = _client(fault_server, "flaky")
    outcomes = []
    for _ in range(6):
        try:
            bare.chat.completions.create(model=MODEL, messages=_conversation())
            outcomes.append("ok")
        except openai.InternalServerError as exc:
            assert exc.status_code == 503
            outcomes.append(503)
    assert outcomes == ["ok", "ok", 503, "ok", "ok", 503]
    # 带重试的客户端：第三个请求失败一次，SDK 重试一次就成功
    fault_server.reset()
    retried = _client(fault_server, "flaky", retries=2)
    for _ in range(3):
        retried.chat.completions.create(model=MODEL, messages=_conversation())
    assert fault_server.hits["flaky"] == 4
    assert [row["第几次尝试"] for row in fault_server.log] == [1, 1, 1, 2]


@pytest.mark.parametrize("fault, kind, original, hits", CASES, ids=[c[0] for c in CASES])
def test_fault_raises_endpoint_error_and_leaves_messages(fault_server, fault, kind, original, hits):
    messages = _conversation()
    before = copy.deepcopy(messages)
    fault_server.reset()
    started = time.monotonic()
    with pytest.raises(EndpointError) as info:
        agent_loop(messages, client=_client(fault_server, fault), model=MODEL)
    err = info.value
    assert err.kind == kind
    if original is None:
        assert err.original is None
    else:
        assert isinstance(err.original, original)
        assert err.__cause__ is err.original
    assert messages == before, "失败的调用不能改动 messages"
    assert fault_server.hits[fault] == hits
    assert time.monotonic() - started < 3, "短超时、不重试时应当很快失败"
    _assert_clean(err)

    # 修好以后（换成好的客户端），同一份 messages 接着跑
    seen, handlers = _quiet_handlers()
    fixed = FakeClient(script=[tool_reply(scripted_call("bash", {"command": "ls *.py"})), text_reply("有 app.py")])
    answer = agent_loop(messages, client=fixed, model=MODEL, handlers=handlers)
    assert answer == "有 app.py"
    assert messages[:3] == before and [m["role"] for m in messages[3:]] == ["assistant", "tool", "assistant"]
    assert seen == ["ls *.py"]
    check_request(messages, TOOLS)


def test_rerun_against_a_good_http_endpoint_continues(fault_server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "app.py").write_text("print(1)\n", encoding="utf-8")
    messages = _conversation()
    with pytest.raises(EndpointError):
        agent_loop(messages, client=_client(fault_server, "unavailable"), model=MODEL)
    answer = agent_loop(messages, client=_client(fault_server, "ok"), model=MODEL)
    assert "app.py" in answer
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "tool", "assistant"]


@pytest.mark.parametrize("fault", ["rate_limit", "server", "unavailable"])
def test_retryable_faults_are_retried_visibly(fault_server, fault, caplog):
    fault_server.reset()
    caplog.set_level(logging.INFO, logger="openai")
    messages = _conversation()
    with pytest.raises(EndpointError) as info:
        agent_loop(messages, client=_client(fault_server, fault, retries=2), model=MODEL)
    assert fault_server.hits[fault] == 3, "max_retries=2：一次请求加两次重试"
    assert [row["第几次尝试"] for row in fault_server.log] == [1, 2, 3]
    retry_lines = [r.getMessage() for r in caplog.records if r.name.startswith("openai") and "Retrying" in r.getMessage()]
    assert len(retry_lines) == 2 and "retry 2 of 2" in retry_lines[-1]
    assert "重试了 2 次" in info.value.explanation
    assert messages == _conversation()


@pytest.mark.parametrize("fault", ["auth", "permission", "not_found"])
def test_client_errors_are_not_retried(fault_server, fault):
    fault_server.reset()
    with pytest.raises(EndpointError) as info:
        call_model(_client(fault_server, fault, retries=2), model=MODEL, messages=_conversation())
    assert fault_server.hits[fault] == 1
    assert "重试" not in info.value.explanation


def test_retry_after_header_is_sent(fault_server):
    import httpx2

    response = httpx2.post(fault_server.url("rate_limit") + "/chat/completions", json={"model": MODEL})
    assert response.status_code == 429
    assert response.headers["retry-after"] == "0" and int(response.headers["retry-after-ms"]) > 0


def test_auth_error_echo_is_redacted(fault_server):
    with pytest.raises(EndpointError) as info:
        call_model(_client(fault_server, "auth"), model=MODEL, messages=_conversation())
    # 服务器的原话回显了密钥的开头和结尾，原始异常里有；我们的说明里没有
    assert SENTINEL[:8] in str(info.value.original)
    assert "服务器原话" in info.value.explanation
    _assert_clean(info.value)


def test_non_ascii_key_is_explained_without_the_key(fault_server):
    bad_key = "sk-密钥" + SENTINEL
    messages = _conversation()
    with pytest.raises(EndpointError) as info:
        agent_loop(messages, client=_client(fault_server, "ok", key=bad_key), model=MODEL)
    assert info.value.kind == "auth" and isinstance(info.value.original, UnicodeEncodeError)
    assert "非 ASCII" in info.value.explanation
    _assert_clean(info.value)
    assert messages == _conversation()


def test_bad_request_passes_through_unchanged(fault_server):
    """400 说明是我们自己的请求不合格：原样抛出 openai.BadRequestError（03、04 教过怎样读它）。"""
    broken = [{"role": "tool", "tool_call_id": "call_1", "content": "x"}]
    with pytest.raises(openai.BadRequestError):
        agent_loop(broken, client=_client(fault_server, "ok"), model=MODEL)


def test_mid_run_failure_keeps_complete_turns():
    """脚本模式：第一轮正常（工具调用 + 结果），第二次调模型时被限流。"""
    seen, handlers = _quiet_handlers()
    client = FakeClient(script=[tool_reply(scripted_call("bash", {"command": "ls"})), api_error(429, "slow down")])
    messages = [{"role": "user", "content": "看看目录"}]
    turns = []
    with pytest.raises(EndpointError) as info:
        agent_loop(messages, client=client, model=MODEL, handlers=handlers, on_turn=lambda m: turns.append(len(m)))
    assert info.value.kind == "rate_limit"
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"] and turns == [3]
    check_request(messages, TOOLS)
    answer = agent_loop(messages, client=FakeClient(script=[text_reply("目录里有 app.py")]), model=MODEL,
                        handlers=handlers)
    assert answer == "目录里有 app.py" and len(messages) == 4


def _endless(n=10):
    return FakeClient(script=[tool_reply(scripted_call("bash", {"command": f"echo {i}"})) for i in range(n)])


def test_token_budget_stops_between_turns():
    seen, handlers = _quiet_handlers()
    client = _endless()
    messages = [{"role": "user", "content": "一直检查"}]
    with pytest.raises(BudgetExceeded, match="250"):
        agent_loop(messages, client=client, model=MODEL, handlers=handlers, call=within_budget(max_tokens_total=250))
    assert messages[-1]["role"] == "tool" and 1 <= len(seen) < 10
    assert client.script_remaining == 10 - len(seen)
    check_request(messages, TOOLS)
    # 预算按一次运行计：接着跑，又有新的预算
    before = len(seen)
    agent_loop(messages, client=client, model=MODEL, handlers=handlers, max_turns=1)
    assert len(seen) == before + 1


def test_token_budget_counts_usage_over_http(fault_server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    messages = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
    with pytest.raises(BudgetExceeded, match="预算"):
        agent_loop(messages, client=_client(fault_server, "ok"), model=MODEL, call=within_budget(max_tokens_total=1))
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    check_request(messages, TOOLS)


def test_time_budget_is_checked_before_each_call():
    def slow(args):
        time.sleep(0.1)
        return "好了"

    client = _endless()
    messages = [{"role": "user", "content": "慢慢检查"}]
    with pytest.raises(BudgetExceeded, match="秒"):
        agent_loop(messages, client=client, model=MODEL, handlers={"bash": slow}, call=within_budget(max_seconds=0.25))
    calls = 10 - client.script_remaining
    assert 2 <= calls <= 4
    assert messages[-1]["role"] == "tool" and sum(m["role"] == "tool" for m in messages) == calls
    check_request(messages, TOOLS)

    untouched = [{"role": "user", "content": "x"}]
    fresh = _endless()
    with pytest.raises(BudgetExceeded):
        agent_loop(untouched, client=fresh, model=MODEL, call=within_budget(max_seconds=-1))
    assert untouched == [{"role": "user", "content": "x"}] and fresh.script_remaining == 10


def test_stream_cut_is_silent_in_the_sdk_but_caught_by_collect_stream(fault_server):
    client = _client(fault_server, "stream_cut")
    chunks = list(client.chat.completions.create(model=MODEL, messages=_conversation(), stream=True))
    assert chunks and all(c.choices[0].finish_reason is None for c in chunks), "SDK 读完了，也没报错"
    stream = call_model(client, model=MODEL, messages=_conversation(), stream=True)
    with pytest.raises(EndpointError) as info:
        collect_stream(stream)
    assert info.value.kind == "stream_cut" and "finish_reason" in info.value.explanation
    _assert_clean(info.value)


def test_collect_stream_rebuilds_text_and_tool_calls(fault_server):
    stream = call_model(_client(fault_server, "ok"), model=MODEL, messages=[{"role": "user", "content": "你好"}],
                        stream=True)
    message, finish = collect_stream(stream)
    assert finish == "stop" and message["role"] == "assistant" and "你好" in message["content"]

    fake = FakeClient(script=[tool_reply(scripted_call("bash", {"command": "ls"}), scripted_call("bash", {"command": "pwd"}))])
    stream = fake.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], stream=True,
                                          stream_options={"include_usage": True})
    message, finish = collect_stream(stream)
    assert finish == "tool_calls" and "content" not in message
    assert [c["function"]["arguments"] for c in message["tool_calls"]] == ['{"command": "ls"}', '{"command": "pwd"}']
    assert [c["id"] for c in message["tool_calls"]] == ["call_001", "call_002"]
    check_request([{"role": "user", "content": "x"}, message,
                   {"role": "tool", "tool_call_id": "call_001", "content": "a"},
                   {"role": "tool", "tool_call_id": "call_002", "content": "b"}])


def test_server_is_loopback_only_bounded_and_self_stopping():
    with pytest.raises(ValueError):
        start_fault_server(host="0.0.0.0")
    with pytest.raises(ValueError):
        start_fault_server("no_such_fault")
    srv = start_fault_server("auth", lifetime=0.2)
    assert srv.base_url.endswith("/auth/v1") and srv.base_url.startswith("http://127.0.0.1:")
    deadline = time.monotonic() + 5
    while not srv.closed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.closed, "lifetime 到了应当自己停下"


def test_a_notebook_server_lives_as_long_as_its_kernel_and_no_longer():
    """默认不过期：读得慢的学习者过了十分钟，服务器还在；进程（内核）一退出，端口就没人听了。"""
    import socket
    import subprocess
    import sys

    code = ("import sys, time\nfrom harness_lib import start_fault_server\n"
            "s = start_fault_server()\nprint(s.base_url, flush=True)\nassert s._timer is None\nsys.stdin.read()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        port = int(url.split(":")[2].split("/")[0])
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # 还开着
    finally:
        proc.stdin.close()
        proc.wait(10)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_timeout_fault_lets_go_when_closed():
    srv = start_fault_server(delay=30)
    client = openai.OpenAI(base_url=srv.url("timeout"), api_key="x", max_retries=0, timeout=0.3)
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model=MODEL, messages=_conversation())
    started = time.monotonic()
    srv.close()
    assert time.monotonic() - started < 3


def test_closed_port_helpers():
    port = free_port()
    assert 0 < port < 65536
    assert closed_port_url().startswith("http://127.0.0.1:")


# ---- 拿到真密钥以后的排错：07 第五节用的几种故障 ----


def test_models_list_is_served_on_every_fault_path(fault_server):
    assert [m.id for m in _client(fault_server, "ok").models.list()] == [MODEL]
    assert [m.id for m in _client(fault_server, "unknown_model").models.list()] == MODELS["unknown_model"]
    with pytest.raises(openai.AuthenticationError):
        _client(fault_server, "auth").models.list()


def test_unknown_model_answers_like_deepseek_and_listed_names_work(fault_server):
    client = _client(fault_server, "unknown_model")
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="deepseek-chat", messages=_conversation())
    assert info.value.status_code == 400
    said = "The supported API model names are deepseek-flash, deepseek-v4-pro, but you passed deepseek-chat."
    assert info.value.body == {**PROVIDER_BODIES["unknown_model"], "message": said}  # DeepSeek 的原话，不是 404
    assert said in explain_error(info.value) and "找不到这个模型" in explain_error(info.value)
    listed = MODELS["unknown_model"][0]
    assert client.chat.completions.create(model=listed, messages=_conversation()).choices[0].message is not None


def test_context_length_fails_only_once_the_prompt_and_max_tokens_overflow(fault_server):
    client = _client(fault_server, "context_length")
    short = [{"role": "user", "content": "你好"}]
    assert call_model(client, model=MODEL, messages=short, max_tokens=64).choices
    grow = list(short)
    errors = []
    for turn in range(10):
        try:
            call_model(client, model=MODEL, messages=grow, max_tokens=512)
        except EndpointError as exc:
            errors.append(exc)
            break
        grow += [{"role": "assistant", "content": "日志" * 80}]
    assert errors and errors[0].kind == "context_length", "越跑越长的对话迟早撞上上下文长度"
    err = errors[0]
    assert isinstance(err.original, openai.BadRequestError) and err.original.body["code"] == "invalid_request_error"
    assert f"maximum context length is {CONTEXT_LIMIT} tokens" in err.explanation
    assert "512 in the completion" in err.explanation, "max_tokens 也算进上下文"
    assert fault_server.log[-1]["状态码"] == 400


def test_thinking_uses_up_max_tokens_unless_switched_off(fault_server):
    client = _client(fault_server, "thinking")
    question = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
    cut = client.chat.completions.create(model=MODEL, messages=question, tools=TOOLS, max_tokens=512)
    assert cut.choices[0].finish_reason == "length" and not cut.choices[0].message.tool_calls
    assert cut.choices[0].message.content == ""
    assert cut.usage.completion_tokens == 512 and cut.usage.completion_tokens_details.reasoning_tokens == 512
    roomy = client.chat.completions.create(model=MODEL, messages=question, tools=TOOLS, max_tokens=2048)
    assert roomy.choices[0].finish_reason == "tool_calls"
    assert roomy.usage.completion_tokens_details.reasoning_tokens == REASONING_TOKENS
    assert roomy.choices[0].message.reasoning_content
    off = client.chat.completions.create(model=MODEL, messages=question, tools=TOOLS, max_tokens=512,
                                         extra_body={"thinking": {"type": "disabled"}})
    assert off.choices[0].finish_reason == "tool_calls" and not getattr(off.choices[0].message, "reasoning_content",
                                                                         None)
    assert off.usage.completion_tokens < 512


def test_the_log_shows_tokens_per_request_and_what_a_retry_resends(fault_server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fault_server.reset()
    client = _client(fault_server, "flaky", retries=2)
    chat = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
    agent_loop(chat, client=client, model=MODEL)
    chat.append({"role": "user", "content": "你好"})
    agent_loop(chat, client=client, model=MODEL)
    log = fault_server.log
    assert [row["第几次尝试"] for row in log] == [1, 1, 1, 2]
    assert [row["状态码"] for row in log] == [200, 200, 503, 200]
    tokens = [row["请求里的 token（估算）"] for row in log]
    assert tokens[0] < tokens[1] < tokens[2], "每一轮都把整段历史重发一遍"
    assert tokens[3] == tokens[2], "重试把失败那次的整段 prompt 又发了一遍"
    assert [row["消息条数"] for row in log] == [2, 4, 6, 6]  # 算上系统提示


def test_a_dead_proxy_is_a_connection_error(fault_server):
    http = openai.DefaultHttpxClient(proxy=closed_port_url())
    client = openai.OpenAI(base_url=fault_server.url("ok"), api_key=SENTINEL, max_retries=0, timeout=2,
                           http_client=http)
    with pytest.raises(EndpointError) as info:
        call_model(client, model=MODEL, messages=_conversation())
    assert info.value.kind == "connection"
    _assert_clean(info.value)


@pytest.mark.parametrize("stream", [False, True], ids=["空行", "keep-alive 注释"])
def test_a_server_that_trickles_keep_alive_bytes_is_cut_at_the_deadline(stream):
    """排队的服务器（DeepSeek 的做法）一直发空行或 SSE 注释：读超时永远不触发，墙上时钟的上限会。
    非流式按每次尝试的截止时间断开；流式按多久没有新事件断开（注释不是事件）。"""
    from harness_lib.models.net import DeadlineHttpClient
    from harness_lib.ui.clients import real_client

    server = start_fault_server("keepalive", delay=4)
    ask = dict(model=MODEL, messages=[{"role": "user", "content": "你好"}], max_tokens=16, stream=stream)
    try:
        plain = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=0.5)
        started = time.monotonic()
        reply = plain.chat.completions.create(**ask)
        if stream:
            reply = list(reply)
        assert time.monotonic() - started > 3.5, "只有读超时的客户端等满了 4 秒：每个空行都让读超时重新计时"
        from harness_lib.models.streaming import stream_turn

        if stream:  # 切换器的客户端的沉默上限是 STREAM_SILENCE；这里换一个 0.6 秒的
            client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=1,
                                   http_client=DeadlineHttpClient(silence=0.6))
        else:
            client = real_client(server.base_url, "x", deadline=0.6).with_options(max_retries=1)
        started = time.monotonic()
        with pytest.raises(EndpointError) as info:
            if stream:  # 流已经开始：SDK 不重试，stream_turn 说明流断了
                stream_turn(client, **{k: v for k, v in ask.items() if k != "stream"})
            else:  # 还没有回复：SDK 当作超时，重试一次
                call_model(client, **ask)
        took = time.monotonic() - started
        if stream:
            assert info.value.kind == "stream_cut" and 0.5 < took < 2.0, (info.value.kind, took)
            assert server.hits["keepalive"] == 2
        else:
            assert info.value.kind == "timeout" and 1.0 < took < 3.0, (info.value.kind, took)
            assert server.hits["keepalive"] == 3, "一次没有截止时间的，加上有截止时间的两次尝试（重试一次）"
    finally:
        server.close()


def test_the_other_two_apis_fail_the_same_way(fault_server):
    """挂掉的端点在 Responses 和 Messages 上也挂着（笔记本 11 在 down 模式下要说清楚）；只对 Chat 才有意义的故障
    （比如 no_choices）对另外两种接口是 404。"""
    import anthropic

    fault_server.reset()
    responses = openai.OpenAI(base_url=fault_server.url("unavailable"), api_key="x", max_retries=0)
    with pytest.raises(openai.InternalServerError):
        responses.responses.create(model="fake-agent-1", input="你好")
    origin = fault_server.url("unavailable").removesuffix("/v1")
    with anthropic.Anthropic(base_url=origin, api_key="x", max_retries=0) as messages:
        with pytest.raises(anthropic.InternalServerError):
            messages.messages.create(model="fake-agent-1", max_tokens=16, messages=[{"role": "user", "content": "你好"}])
        ok = anthropic.Anthropic(base_url=fault_server.url("ok").removesuffix("/v1"), api_key="x", max_retries=0)
        assert ok.messages.create(model="fake-agent-1", max_tokens=64,
                                  messages=[{"role": "user", "content": "你好"}]).content[0].text
    assert fault_server.hits["unavailable"] == 2
    with pytest.raises(openai.NotFoundError):
        openai.OpenAI(base_url=fault_server.url("no_choices"), api_key="x", max_retries=0).responses.create(
            model="fake-agent-1", input="你好")


def test_the_time_budget_counts_from_the_first_call_not_from_when_it_was_made():
    """预算可以先建好、过一会儿才用：用时从第一次调模型算起（07 先建好两个预算再跑）。"""
    import time

    calls = []
    budgeted = within_budget(lambda client, **request: calls.append(request) or
                             FakeClient().chat.completions.create(**request), max_seconds=0.05)
    time.sleep(0.1)
    budgeted(None, model=MODEL, messages=[{"role": "user", "content": "x"}])
    assert len(calls) == 1, "建好以后等过的时间不算"
    time.sleep(0.1)
    with pytest.raises(BudgetExceeded):
        budgeted(None, model=MODEL, messages=[{"role": "user", "content": "x"}])
