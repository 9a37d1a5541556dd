"""harness_lib.ui.probe：对假模型、本地端点（真实 HTTP）和几种“不太一致”的端点跑兼容性探针。"""


import json

import openai
import pandas as pd
import pytest

from harness_lib import FakeClient, start_server, text_reply
from harness_lib.models.server import serve
from harness_lib.safety.runner import BASH_TOOL
from harness_lib.models.fake import FakeHandler, FakeModel, api_error
from harness_lib.ui.probe import (CHECKS, ERROR_HINT, HINTS, IMPACT, NO_CONTENT_HINT, TIMEOUT_HINT, AS_IS,
                                  probe, probe_verdict)
from harness_lib.models.wire import sse_response
from harness_lib.models.quirks import QuirkClient, start_quirk_server

MODEL = "fake-agent-1"
SENTINEL = "sk-probe-sentinel-5f3a9c"



def results(df):
    return dict(zip(df["check"], df["result"]))


def assert_all_pass(df):
    assert list(df.columns) == ["check", "result", "detail", "hint"]
    assert list(df["check"]) == [name for name, _ in CHECKS]
    for check, result, detail, hint in df.itertuples(index=False):
        assert result in ("✓", "ℹ"), f"{check}: {result} {detail}"
        assert detail and hint == ""


def test_every_check_has_an_impact_note_and_a_hint():
    assert set(IMPACT) == set(HINTS) == {name for name, _ in CHECKS}
    for name, hint in HINTS.items():
        assert any("\u4e00" <= ch <= "\u9fff" for ch in hint), name


def test_fake_client_passes_every_check():
    df = probe(FakeClient(), MODEL)
    assert isinstance(df, pd.DataFrame) and len(df) == len(CHECKS)
    assert_all_pass(df)


def test_local_endpoint_over_http_passes_every_check():
    with start_server(api_key=SENTINEL) as server:
        with openai.OpenAI(base_url=server.base_url, api_key=SENTINEL, max_retries=0) as client:
            df = probe(client, MODEL, timeout=10)
    assert_all_pass(df)
    assert results(df) == results(probe(FakeClient(), MODEL)), "走 HTTP 和直接调用假模型，结果应当一样"


def test_requests_are_bounded():
    timeouts = []

    class Timed(FakeClient):
        """记下每个 HTTP 请求上 SDK 设的读超时（超时是传输层的设置，不在请求体里）。"""

        def _make_handler(self):
            inner = super()._make_handler()

            def handler(request):
                timeouts.append(request.extensions["timeout"]["read"])
                return inner(request)

            handler.responder = self
            return handler

    fake = Timed()
    probe(fake, MODEL, timeout=7, max_tokens=300)
    assert timeouts and set(timeouts) == {7}
    assert fake.last_request["max_tokens"] == 300


def test_a_talk_only_endpoint_fails_the_tool_checks_without_raising():
    fake = FakeClient(script=[text_reply("好的，我来看看。")] * 30)
    got = results(probe(fake, MODEL))
    assert got["普通对话"] == "✓"
    for name in ("提供工具后返回 tool_calls", "arguments 是合法 JSON",
                 'tool_choice="required"', "流式输出里的工具调用增量"):
        assert got[name] == "✗", name


def test_a_dead_endpoint_gives_a_row_per_check_and_never_the_key():
    with start_server(api_key="the-right-key-000") as server:
        with openai.OpenAI(base_url=server.base_url, api_key=SENTINEL, max_retries=0) as client:
            df = probe(client, MODEL, timeout=5)
    assert (df["result"] != "✓").all() and (df["result"] == "✗").sum() == len(CHECKS) - 1  # 往返那项无从检查：ℹ
    text = df.to_string()
    assert SENTINEL not in text
    assert "401" in df["detail"][0]
    assert "同第 1 项" in df["detail"][2], "同样的错误不必每行重复一长段"
    assert (df[df["result"] == "✗"]["hint"] != "").all(), "每个 ✗ 都写着怎么办"


class _NoStream(FakeClient):
    def respond(self, request):
        if request.get("stream"):
            raise api_error(400, "Streaming is not supported for this model.")
        return super().respond(request)


def test_one_failing_check_does_not_abort_the_rest():
    got = results(probe(_NoStream(), MODEL))
    assert got["流式输出里的工具调用增量"] == "✗"
    assert got["报告用量（usage）"] == "✗"
    assert got["普通对话"] == got["接受工具结果"] == got['tool_choice="required"'] == "✓"


class _Extras(FakeClient):
    """在响应里加上服务商自己的字段。"""

    def respond(self, request):
        result = super().respond(request)
        if isinstance(result, list):
            for c in result:
                for choice in c["choices"]:
                    choice["delta"]["reasoning_content"] = "想"
            return result
        result["choices"][0]["message"]["reasoning_content"] = "先想一想"
        result["usage"]["prompt_cache_hit_tokens"] = 0
        return result


def test_extra_fields_are_listed_as_information():
    df = probe(_Extras(), MODEL)
    row = df[df["check"] == "响应里的扩展字段"].iloc[0]
    assert row["result"] == "ℹ"
    assert "choices.message.reasoning_content" in row["detail"]
    assert "usage.prompt_cache_hit_tokens" in row["detail"]
    assert "chunk.choices.delta.reasoning_content" in row["detail"]


# ---------------------------------------------------------------------------
# 发的是循环会发的东西；不重试；遇到服务商的怪脾气时说清楚
# ---------------------------------------------------------------------------


def test_tool_result_check_sends_what_the_loop_sends():
    fake = QuirkClient("deepseek_thinking")
    got = results(probe(fake, MODEL))
    assert got["接受工具结果"] == got["reasoning_content 的往返"] == "✓"
    second_turns = [r for r in fake.requests if len(r["messages"]) == 3]
    assistant = second_turns[0]["messages"][1]
    assert assistant["reasoning_content"], "真实回复里的扩展字段原样发回"
    assert "content" in assistant and assistant["content"] == "", "和 model_dump(exclude_none=True) 一样"


def test_probe_does_not_wait_for_sdk_retries(fault_server):
    fault_server.reset()
    client = openai.OpenAI(base_url=fault_server.url("rate_limit"), api_key=SENTINEL, max_retries=2)
    df = probe(client, MODEL, timeout=5)
    assert (df["result"] != "✓").all()
    sent = fault_server.hits["rate_limit"]
    assert all(row["第几次尝试"] == 1 for row in fault_server.log), "每个请求只发一次"
    assert sent <= len(CHECKS)


@pytest.fixture(scope="module")
def quirk_server():
    with start_quirk_server() as running:
        yield running


def quirk_probe(server, quirk):
    with openai.OpenAI(base_url=server.base_url, api_key=SENTINEL, max_retries=0) as client:
        return probe(client, f"fake-agent-1@{quirk}", timeout=10)


def row(df, name):
    return df[df["check"] == name].iloc[0]


def test_probe_names_the_quirks_over_http(quirk_server):
    no_tools = quirk_probe(quirk_server, "ollama_no_tools")
    offered = row(no_tools, "提供工具后返回 tool_calls")
    assert offered["result"] == "✗" and "模型" in offered["hint"]

    thinking = row(quirk_probe(quirk_server, "deepseek_thinking"), "reasoning_content 的往返")
    assert thinking["result"] == "✓" and "去掉它就被拒绝" in thinking["detail"]

    content = quirk_probe(quirk_server, "llamacpp_content")
    assert row(content, "接受工具结果")["result"] == "✗"
    assert row(content, "接受工具结果")["hint"] == NO_CONTENT_HINT and '"content": ""' in NO_CONTENT_HINT

    usage = row(quirk_probe(quirk_server, "moonshot_usage_in_choice"), "报告用量（usage）")
    assert usage["result"] == "✓" and "choices[0].usage" in usage["detail"]

    parallel = row(quirk_probe(quirk_server, "ollama_parallel_index0"), "流式输出里的工具调用增量")
    assert parallel["result"] == "✓", "同一个 index 换了 id 的流，accumulate 照样拼对"


def test_probe_on_the_llamacpp_python_quirk_matches_the_real_server(quirk_server):
    """和 make test-real 的 llama-cpp-python 服务器上量到的结果一致（模型自己写的内容除外）。"""
    got = quirk_probe(quirk_server, "llamacpp_python")
    marks = results(got)
    assert marks["提供工具后返回 tool_calls"] == "✗"
    assert marks['写明 tool_choice="auto"'] == "✓" and "要写明" in row(got, '写明 tool_choice="auto"')["detail"]
    assert marks["接受工具结果"] == "✗"
    assert "'content'" in row(got, "接受工具结果")["detail"]
    assert row(got, "接受工具结果")["hint"] == NO_CONTENT_HINT, "办法说的是补上 content"
    required = row(got, 'tool_choice="required"')
    assert required["result"] == "✗" and "不支持" in required["detail"] and "不是你的代码" not in required["detail"]
    stream_row = row(got, "流式输出里的工具调用增量")
    assert stream_row["result"] == "✗" and "一块都没收到" in stream_row["detail"]
    assert marks["报告用量（usage）"] == "✗"


def test_hints_follow_what_the_probe_found(quirk_server):
    needs_auto = quirk_probe(quirk_server, "llamacpp_python")
    assert 'tool_choice="auto"' in row(needs_auto, "提供工具后返回 tool_calls")["hint"]
    talker = quirk_probe(quirk_server, "ollama_no_tools")
    assert row(talker, '写明 tool_choice="auto"')["hint"] == HINTS["提供工具后返回 tool_calls"]


# ---------------------------------------------------------------------------
# 按顺序推理：出错的行按错误本身给办法，后面的行写“先解决第 N 项”；一句话结论
# ---------------------------------------------------------------------------


def solve_first(n):
    return f"先解决第 {n} 项"


def test_a_timed_out_row_gets_a_timeout_hint_not_a_base_url_hint(fault_server):
    with openai.OpenAI(base_url=fault_server.url("timeout"), api_key=SENTINEL, max_retries=0) as client:
        df = probe(client, MODEL, timeout=0.5)
    first = df.iloc[0]
    assert first["result"] == "✗" and "超时" in first["detail"]
    assert first["hint"] == TIMEOUT_HINT.format(timeout=0.5)
    assert "base_url" not in first["hint"], "超时不是 base_url 写错了"
    for check, result, detail, hint in df.iloc[1:].itertuples(index=False):
        if result != "✓":
            assert hint.startswith(solve_first(1)), (check, hint)
    assert "跑不起来" in df.attrs["verdict"] and "第 1 项" in df.attrs["verdict"]


def test_rows_with_the_same_error_say_solve_row_n_first():
    with start_server(api_key="the-right-key-000") as server:
        with openai.OpenAI(base_url=server.base_url, api_key=SENTINEL, max_retries=0) as client:
            df = probe(client, MODEL, timeout=5)
    same = df[df["detail"] == "出错（同第 1 项）"]
    assert len(same) >= 5
    assert (same["hint"].str.startswith(solve_first(1))).all()
    auto = row(df, '写明 tool_choice="auto"')
    assert auto["detail"] == "出错（同第 1 项）"
    assert auto["hint"] != HINTS['写明 tool_choice="auto"'], "同第 1 项的错误不该猜成“不接受 tool_choice”"
    assert "密钥" in df.iloc[0]["detail"] and df.iloc[0]["hint"] == ERROR_HINT, "端点本身的错，不猜成这一项的问题"
    blocked = row(df, "arguments 是合法 JSON")
    assert blocked["hint"].startswith(solve_first(1)), "要用到第 2 项的结果，而第 2 项又是第 1 项的错误"
    assert SENTINEL not in df.to_string() + df.attrs["verdict"]


def _cut_streams(request):
    """非流式照常由假模型回答；流式只发第一块（role），没有 finish_reason，也没有 [DONE]。"""
    body = json.loads(request.content or b"{}")
    if request.method == "POST" and isinstance(body, dict) and body.get("stream"):
        chunk = {"id": "chatcmpl-cut", "object": "chat.completion.chunk", "created": 0,
                 "model": body.get("model"), "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                         "logprobs": None, "finish_reason": None}]}
        return sse_response([chunk], done=False)
    return _FAKE_HANDLER(request)


_FAKE_HANDLER = FakeHandler(FakeModel())


def test_a_stream_cut_after_one_chunk_does_not_get_the_ollama_hint():
    with serve(_cut_streams) as server:
        with openai.OpenAI(base_url=server.base_url, api_key=SENTINEL, max_retries=0) as client:
            df = probe(client, MODEL, timeout=10)
    cut = row(df, "流式输出里的工具调用增量")
    assert cut["result"] == "✗" and "断" in cut["detail"] and cut["hint"] == ERROR_HINT
    number = list(df["check"]).index("流式输出里的工具调用增量") + 1
    assert row(df, "报告用量（usage）")["hint"].startswith(solve_first(number))
    for name in ("普通对话", "提供工具后返回 tool_calls", "接受工具结果"):
        assert row(df, name)["result"] == "✓"
    verdict = df.attrs["verdict"]
    assert verdict.startswith(AS_IS) and "agent_loop_stream" in verdict


def test_the_verdict_is_one_line_and_matches_probe_verdict(quirk_server):
    fake = probe(FakeClient(), MODEL)
    assert fake.attrs["verdict"] == AS_IS == probe_verdict(fake)

    measured = quirk_probe(quirk_server, "llamacpp_python")
    verdict = measured.attrs["verdict"]
    assert verdict == probe_verdict(measured) and "\n" not in verdict
    assert verdict.startswith("结论：做这些改动后循环能跑")
    assert 'tool_choice="auto"' in verdict and '"content": ""' in verdict and "agent_loop_stream" in verdict

    content = quirk_probe(quirk_server, "llamacpp_content").attrs["verdict"]
    assert content.startswith("结论：做这些改动后循环能跑") and '"content": ""' in content

    talker = quirk_probe(quirk_server, "ollama_no_tools").attrs["verdict"]
    assert talker.startswith("结论：本系列的循环在这里跑不起来") and "换一个" in talker

    for quirk in ("ollama_parallel_index0", "deepseek_thinking", "moonshot_usage_in_choice"):
        assert quirk_probe(quirk_server, quirk).attrs["verdict"] == AS_IS, quirk


def test_an_old_llama_server_without_jinja_is_named_and_not_guessed(quirk_server):
    df = quirk_probe(quirk_server, "llamacpp_no_jinja")
    offered = row(df, "提供工具后返回 tool_calls")
    assert offered["result"] == "✗" and "--jinja" in offered["hint"] and "17524" in offered["hint"]
    assert "换一个" not in offered["hint"]
    assert row(df, 'tool_choice="required"')["hint"].startswith(solve_first(2)), "和 tool_choice 无关"
    assert row(df, "普通对话")["result"] == "✓"
    verdict = df.attrs["verdict"]
    assert "跑不起来" in verdict and "第 2 项" in verdict and "换一个" not in verdict


def test_no_hint_tells_learners_to_add_jinja_on_current_servers():
    assert "--jinja" not in HINTS["提供工具后返回 tool_calls"]
    for hint in (*HINTS.values(), ERROR_HINT, TIMEOUT_HINT, NO_CONTENT_HINT):
        assert "加 --jinja" not in hint


def test_a_check_that_needs_an_earlier_result_points_back_to_it():
    df = probe(FakeClient(script=[text_reply("好的，我来看看。")] * 30), MODEL)
    for name in ("arguments 是合法 JSON", "接受工具结果"):
        assert row(df, name)["hint"].startswith(solve_first(2)), name
    assert row(df, "reasoning_content 的往返")["result"] == "ℹ"


def test_a_service_that_never_calls_tools_points_the_tool_rows_back_to_row_2():
    """只会说话的服务：并行和流式增量没有自己的问题，办法都指回第 2 项，而不是各猜各的。"""
    fake = FakeClient(script=[text_reply("好的，我来看看。")] * 30)
    report = probe(fake, MODEL)
    for name in ("arguments 是合法 JSON", "流式输出里的工具调用增量"):
        assert row(report, name)["hint"].startswith(solve_first(2)), (name, row(report, name)["hint"])
    assert "跑不起来" in report.attrs["verdict"]


def test_a_dead_service_is_not_blamed_on_tool_choice_required(fault_server):
    """每个请求都 503：tool_choice="required" 那一行记作同一个错，不说“它不支持这个取值”。"""
    with openai.OpenAI(base_url=fault_server.url("unavailable"), api_key=SENTINEL, max_retries=0) as client:
        report = probe(client, MODEL, timeout=5)
    required = row(report, 'tool_choice="required"')
    assert required["detail"] == "出错（同第 1 项）" and required["hint"].startswith(solve_first(1))
    assert "不支持这个取值" not in required["detail"]
