"""参考循环 harness_lib.agent_loop：对着离线假模型 FakeClient（真正的 openai SDK 在它前面）和真实的子进程跑，命令不是模拟的。"""

import os

import openai
import pytest

from harness_lib import (
    FakeClient,
    agent_loop,
    check_transcript,
    execute_tool_call,
    text_reply,
    scripted_call,
    tool_reply,
    ToolInputError,
)
from harness_lib.lesson.loop import Outcome, parse_arguments


def _tool_messages(messages):
    return [m for m in messages if m["role"] == "tool"]


def test_default_fake_model_lists_the_python_files(workspace):
    messages, outcomes = [{"role": "user", "content": "列出当前目录中的 Python 文件"}], {}
    answer = agent_loop(messages, client=FakeClient(), model="fake-agent-1", outcomes=outcomes)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert [o.layer for o in outcomes.values()] == ["成功"] and list(outcomes) == [messages[2]["tool_call_id"]]
    assert messages[2]["tool_call_id"] == messages[1]["tool_calls"][0]["id"]
    # 工具消息里是真实命令的输出：demo_workspace 里确实有的 .py 文件
    real = sorted(p.name for p in workspace.glob("*.py"))
    for name in real:
        assert name in messages[2]["content"]
        assert name in answer
    assert all(check_transcript(messages, outcomes).values())


def test_loop_grows_the_same_list_and_calls_on_turn(workspace):
    messages = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
    same = messages
    seen = []
    agent_loop(messages, client=FakeClient(), model="fake-agent-1",
               on_turn=lambda m: seen.append(len(m)))
    assert same is messages
    assert seen == [3, 4]


@pytest.mark.parametrize(
    "raw, layer",
    [
        ('{"command": "ls"', "调用解析失败"),
        ("", "调用解析失败"),
        ("{}", "调用解析失败"),
        ('{"command": 42}', "调用解析失败"),
        ('["ls"]', "调用解析失败"),
        ('{"command": "sudo ls"}', "执行授权失败"),
    ],
)
def test_every_failure_becomes_a_tool_message(workspace, raw, layer):
    marker = workspace / "should_not_exist.txt"
    client = FakeClient(script=[tool_reply(scripted_call("bash", raw)), text_reply("好的")])
    messages = [{"role": "user", "content": "试试"}]
    answer = agent_loop(messages, client=client, model="fake-agent-1")
    assert answer == "好的"
    (tool,) = _tool_messages(messages)
    assert layer in tool["content"]
    assert not marker.exists()


def test_unknown_tool_and_handler_error_are_answered(workspace):
    def broken(args):
        raise RuntimeError("磁盘坏了")

    client = FakeClient(script=[
        tool_reply(scripted_call("no_such_tool", {"x": 1}), scripted_call("bash", {"command": "echo hi"})),
        text_reply("完"),
    ])
    messages = [{"role": "user", "content": "两件事"}]
    agent_loop(messages, client=client, model="fake-agent-1", handlers={"bash": broken})
    first, second = _tool_messages(messages)
    assert "调用解析失败" in first["content"] and "no_such_tool" in first["content"]
    assert "工具结果失败" in second["content"] and "磁盘坏了" in second["content"]
    ids = [tc["id"] for tc in messages[1]["tool_calls"]]
    assert [first["tool_call_id"], second["tool_call_id"]] == ids


def test_real_subprocess_output_reaches_the_model(workspace):
    client = FakeClient(script=[tool_reply(scripted_call("bash", {"command": "echo 你好 && exit 3"})), text_reply("ok")])
    messages = [{"role": "user", "content": "x"}]
    agent_loop(messages, client=client, model="fake-agent-1")
    (tool,) = _tool_messages(messages)
    assert "你好" in tool["content"] and "3" in tool["content"]


def test_max_turns_stops_with_a_valid_transcript(workspace):
    script = [tool_reply(scripted_call("bash", {"command": "echo again"})) for _ in range(5)]
    client = FakeClient(script=script + [text_reply("终于停了")])
    messages = [{"role": "user", "content": "一直跑"}]
    answer = agent_loop(messages, client=client, model="fake-agent-1", max_turns=3)
    assert "3" in answer
    assert len(_tool_messages(messages)) == 3
    assert messages[-1]["role"] == "tool"
    # 记录仍然完整：接着跑，提供方不会拒绝
    answer = agent_loop(messages, client=client, model="fake-agent-1", max_turns=5)
    assert answer == "终于停了"


def test_failed_model_call_leaves_messages_untouched(workspace):
    client = FakeClient(script=[tool_reply(scripted_call("bash", {"command": "echo 1"}))])
    messages = [{"role": "user", "content": "x"}]
    with pytest.raises(RuntimeError):
        agent_loop(messages, client=client, model="fake-agent-1")  # 脚本用完，第二次调用失败
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    before = list(messages)
    broken = [{"role": "user", "content": "x"}, {"role": "assistant", "content": None,
               "tool_calls": [{"id": "call_9", "type": "function",
                               "function": {"name": "bash", "arguments": "{}"}}]}]
    with pytest.raises(openai.BadRequestError):
        agent_loop(broken, client=FakeClient(), model="fake-agent-1")
    assert len(broken) == 2 and messages == before


def test_parse_arguments():
    assert parse_arguments('{"command": "ls"}') == {"command": "ls"}
    for bad in ['{"command": "ls"', "", None, "[1]", "3", "[" * 100_000]:
        with pytest.raises(ToolInputError):
            parse_arguments(bad)


def test_check_transcript_flags_missing_halves():
    calls = [{"id": "call_001", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]
    complete = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_001", "content": "a.py"},
        {"role": "assistant", "content": "有 a.py"},
    ]
    ran = {"call_001": Outcome("成功", "a.py")}
    assert all(check_transcript(complete, ran).values())
    no_result = complete[:2] + complete[3:]
    verdict = check_transcript(no_result, ran)
    assert not verdict["3. 调用和结果成对回到了上下文"]
    # 原文的第二种“还不是闭环”：执行了，结果没有回填。第 2 问成立，第 3 问不成立
    written_back_never = check_transcript(complete[:2], ran)
    assert written_back_never["2. 程序真的执行了处理函数"]
    assert not written_back_never["3. 调用和结果成对回到了上下文"]
    assert not check_transcript(complete[:2], {})["2. 程序真的执行了处理函数"], "没有执行器：没有记录"
    text_only = [complete[0], {"role": "assistant", "content": "ls *.py"}]
    assert not any(check_transcript(text_only, {}).values())
    unfinished = complete[:3]
    assert not check_transcript(unfinished, ran)["4. 模型看到结果后继续，直到不再请求工具"]
    # 没有执行记录的调用不算执行过：第 2 问不从工具消息的文字里猜
    assert not check_transcript(complete, {})["2. 程序真的执行了处理函数"]


def test_checks_run_before_the_handler_is_called():
    """查工具名、解析、按工具定义校验、授权（原文第三节末尾的几层），都在调用处理函数之前。"""
    from openai.types.chat import ChatCompletionMessageFunctionToolCall

    from harness_lib.lesson.loop import TOOLS

    called = []

    def spy(args):
        called.append(args)
        return "执行了"

    cases = [
        ('{"command": "ls"', "错误（调用解析失败）"),
        ('{"cmd": "ls"}', "错误（调用解析失败）：缺少必填参数 command"),
        ('{"command": 42}', "错误（调用解析失败）：command 应当是字符串"),
        ('{"command": "sudo ls"}', "错误（执行授权失败）：命令里有被禁止的片段"),
    ]
    for raw, prefix in cases:
        tc = ChatCompletionMessageFunctionToolCall.model_validate(scripted_call("bash", raw, id="c1"))
        outcome = execute_tool_call(tc, {"bash": spy}, TOOLS)
        assert outcome.content.startswith(prefix) and not outcome.acted, raw
        assert outcome.layer == prefix[len("错误（"):prefix.index("）")], raw
    assert called == []
    tc = ChatCompletionMessageFunctionToolCall.model_validate(scripted_call("bash", {"command": "ls"}, id="c2"))
    assert execute_tool_call(tc, {"bash": spy}) == Outcome("成功", "执行了") and called == [{"command": "ls"}]
    # 工具定义里没有的工具：只解析，不按定义校验；黑名单只管 bash
    tc = ChatCompletionMessageFunctionToolCall.model_validate(scripted_call("note", {"text": "sudo "}, id="c3"))
    assert execute_tool_call(tc, {"note": spy}) == Outcome("成功", "执行了")


@pytest.mark.parametrize("broken", ["check_arguments", "check_permission"])
def test_a_bug_in_a_check_is_a_refusal_not_a_tool_result(monkeypatch, broken):
    """检查自己出了 bug：处理函数没有运行，结局是执行授权失败（acted 为 False），不是工具结果失败。"""
    from openai.types.chat import ChatCompletionMessageFunctionToolCall

    from harness_lib.lesson import loop

    def bug(*args):
        raise KeyError("schema")

    monkeypatch.setattr(loop, broken, bug)
    called = []
    tc = ChatCompletionMessageFunctionToolCall.model_validate(scripted_call("bash", {"command": "ls"}, id="c1"))
    outcome = loop.execute_tool_call(tc, {"bash": called.append})
    assert called == [] and outcome.layer == "执行授权失败" and not outcome.acted
    assert "KeyError" in outcome.content


def test_a_bug_in_the_handler_is_a_tool_result_failure():
    from openai.types.chat import ChatCompletionMessageFunctionToolCall

    tc = ChatCompletionMessageFunctionToolCall.model_validate(scripted_call("bash", {"command": "ls"}, id="c1"))
    outcome = execute_tool_call(tc, {"bash": lambda args: args["nope"]})
    assert outcome.layer == "工具结果失败" and outcome.acted and "KeyError" in outcome.content


@pytest.mark.parametrize("layer, acted", [
    ("调用解析失败", False), ("执行授权失败", False), ("工具结果失败", True), ("成功", True)])
def test_check_transcript_question_two_reads_the_recorded_outcome(layer, acted):
    """第 2 问只看循环记下的 Outcome：工具消息的文字是什么都不影响（这里故意写成另一层的样子）。"""
    calls = [{"id": "call_001", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]
    transcript = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_001", "content": "错误（执行授权失败）：假的" if acted else "app.py"},
        {"role": "assistant", "content": "好"},
    ]
    outcomes = {"call_001": Outcome(layer, "（文字不看）")}
    assert check_transcript(transcript, outcomes)["2. 程序真的执行了处理函数"] is acted


def test_a_reply_cut_at_max_tokens_is_reported_not_taken_as_the_answer(workspace):
    """回复写到 max_tokens 被截断（finish_reason 是 length）、又没有工具调用：循环说出来，不把半句当成回答。"""
    messages = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
    script = [text_reply("当前目录里有 app.py 和 utils.py 两个 Python 文件，另外还有")]
    answer = agent_loop(messages, client=FakeClient(), model="fake-agent-1", max_tokens=5, max_turns=2)
    assert answer.startswith("[回复写到 max_tokens=5 被截断了") and messages[-1]["role"] == "assistant"
    full = agent_loop([dict(messages[0])], client=FakeClient(script=script), model="fake-agent-1")
    assert full == script[0]["content"], "没有截断时原样返回回答"
