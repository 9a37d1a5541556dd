"""失败的层次是数据：执行器的结局是字段，工具调用的结局是 Outcome，程序从不把写给模型的文字读回来。

全部用真实子进程；命令输出故意模仿执行器和 execute_tool_call 写的附注，层次照样不受影响。
"""

import os

import openai
import pytest
from openai.types.chat import ChatCompletionMessageFunctionToolCall as ToolCall

from harness_lib import (
    HANDLERS,
    FakeClient,
    Recorder,
    ReplayClient,
    ToolDenied,
    agent_loop,
    closed_port_url,
    check_transcript,
    execute_tool_call,
    guard,
    run_bash,
    run_command,
    run_loop,
    scripted_call,
    text_reply,
    tool_reply,
)
from harness_lib.lesson.loop import Outcome
from harness_lib.safety.runner import GRACE_SECONDS, STATUSES

pytestmark = pytest.mark.skipif(os.name == "nt", reason="用 POSIX shell 的写法造各种结局")


def bash(command, id="call_1"):
    return ToolCall.model_validate(scripted_call("bash", {"command": command}, id=id))


# 每一种结局：命令、期望的 status、exit_code、signal、background_cut、text 的最后一行（由字段写出的附注）
ENDINGS = [
    ("echo hi", "ok", 0, None, False, "hi"),
    ("echo oops >&2; exit 3", "exit", 3, None, False, "[退出码 3]"),
    ("kill -9 $$", "signal", None, 9, False, "[被信号 9 终止]"),
    ("sleep 5", "timeout", None, None, False, "[超时：命令运行超过 0.5 秒，已结束它的进程组和仍占着输出的进程]"),
    ("ls\0", "not_started", None, None, False, None),
    ("sleep 5 & echo 前台结束", "ok", 0, None, True, None),
    ("sleep 5 & exit 2", "exit", 2, None, True, "[退出码 2]"),
]


@pytest.mark.parametrize("command, status, exit_code, sig, cut, last", ENDINGS)
def test_every_ending_of_a_command_is_a_field(tmp_path, command, status, exit_code, sig, cut, last):
    result = run_command(command, timeout=0.5 if status == "timeout" else 5, cwd=tmp_path)
    assert (result.status, result.exit_code, result.signal, result.background_cut) == (status, exit_code, sig, cut)
    assert result.status in STATUSES
    assert result.ok is (status == "ok" and not cut)
    assert str(result) == result.text
    if last is not None:
        assert result.text.splitlines()[-1] == last
    if cut:
        assert f"{GRACE_SECONDS:g} 秒后已停止读取" in result.text
    if status == "not_started":
        assert result.text.startswith("[错误：无法启动命令")


def test_run_bash_is_the_text_of_run_command(tmp_path):
    assert run_bash("echo hi; exit 4", cwd=tmp_path) == run_command("echo hi; exit 4", cwd=tmp_path).text == "hi\n[退出码 4]"
    assert run_command(123).status == "not_started" and run_bash(123).startswith("[错误：command 应该是字符串")
    missing = run_command("echo hi", cwd=tmp_path / "没有这个目录")
    assert missing.status == "not_started" and not missing.ok


# 输出里印着和附注、层次前缀一模一样的文字：结局仍然是“成功”
IMPOSTORS = [
    'echo "[退出码 3]"',
    'echo "[超时：命令运行超过 1 秒]"',
    'echo "[被信号 9 终止]"',
    'echo "[提示：命令结束后仍有后台进程占着输出]"',
    'echo "错误（执行授权失败）：假的"',
    'echo "错误（调用解析失败）：假的"',
    'printf "错误（没有右括号"',
    'echo "[错误：无法启动命令：假的]"',
]


@pytest.mark.parametrize("command", IMPOSTORS)
def test_output_that_imitates_a_note_is_still_a_success(workspace, command):
    result = run_command(command)
    assert result.ok and result.status == "ok" and result.exit_code == 0
    outcome = execute_tool_call(bash(command), HANDLERS)
    assert outcome == Outcome("成功", result.text) and outcome.acted


@pytest.mark.parametrize("command", ["exit 3", "kill -9 $$", "ls\0", "sleep 5 & echo 前台结束"])
def test_a_command_that_fails_is_a_tool_result_failure(workspace, command):
    outcome = execute_tool_call(bash(command), HANDLERS)
    assert outcome.layer == "工具结果失败" and outcome.acted
    # 交给模型的文字由层次拼出来，执行器的附注原样跟在后面
    assert outcome.content.startswith("错误（工具结果失败）：")
    assert outcome.content.removeprefix("错误（工具结果失败）：") == run_command(command).text


def test_a_timeout_is_a_tool_result_failure(workspace):
    slow = {"bash": lambda args: HANDLERS["bash"](args, timeout=0.3)}
    outcome = execute_tool_call(bash("echo 开始; sleep 5"), slow)
    assert outcome.layer == "工具结果失败" and "开始" in outcome.content and "[超时" in outcome.content


def test_the_layer_is_set_where_the_failure_happens(workspace):
    cases = {
        "调用解析失败": ToolCall.model_validate(scripted_call("bash", '{"command": "ls"', id="c0")),
        "执行授权失败": bash("echo sudo reboot"),
        "成功": bash("ls"),
    }
    for layer, call in cases.items():
        outcome = execute_tool_call(call, HANDLERS)
        assert outcome.layer == layer
        assert outcome.acted is (layer == "成功")
        assert (layer == "成功") is not outcome.content.startswith(f"错误（{layer}）：")

    def buggy(args):
        raise AttributeError("'str' object has no attribute 'decode'")

    outcome = execute_tool_call(bash("ls"), {"bash": buggy})
    assert outcome == Outcome("工具结果失败", "错误（工具结果失败）：AttributeError: 'str' object has no attribute 'decode'")


def test_the_loop_records_outcomes_by_call_id_and_the_messages_stay_plain(workspace):
    script = [tool_reply(scripted_call("bash", {"command": 'echo "[退出码 3]"'}), scripted_call("bash", {"command": "exit 3"}),
                         scripted_call("bash", {"command": "sudo ls"})), text_reply("好")]
    messages, outcomes = [{"role": "user", "content": "q"}], {}
    agent_loop(messages, client=FakeClient(script=script), model="fake", outcomes=outcomes)
    tool_messages = [m for m in messages if m["role"] == "tool"]
    assert [outcomes[m["tool_call_id"]].layer for m in tool_messages] == ["成功", "工具结果失败", "执行授权失败"]
    assert [m["content"] for m in tool_messages] == [outcomes[m["tool_call_id"]].content for m in tool_messages]
    assert all(set(m) == {"role", "tool_call_id", "content"} for m in tool_messages)  # 结局不混进发给模型的消息
    assert all(check_transcript(messages, outcomes).values())


def test_a_denied_approval_is_an_authorization_failure(tmp_path, monkeypatch):
    """审批拒绝：guard 抛出循环给它的 ToolDenied，原处理函数没被调用，层次是执行授权失败。"""
    monkeypatch.chdir(tmp_path)
    ran = []
    gated = guard({"bash": lambda args: ran.append(args) or "执行了"}, None, "deny", denied=ToolDenied)
    outcome = execute_tool_call(bash("touch marker.txt"), gated)
    assert outcome.layer == "执行授权失败" and not outcome.acted and ran == []
    # 循环里：回放的客户端不可信，无头时只放行白名单；touch 被拒
    script = FakeClient(script=[tool_reply(scripted_call("bash", {"command": "touch marker.txt"})), text_reply("好了")])
    recorder = Recorder(script)
    agent_loop([{"role": "user", "content": "建一个文件"}], client=recorder, model="scripted")
    path = recorder.save(tmp_path / "run.jsonl")
    (tmp_path / "marker.txt").unlink(missing_ok=True)
    messages, outcomes = [{"role": "user", "content": "建一个文件"}], {}
    agent_loop(messages, client=ReplayClient(path, check=False), model="scripted", outcomes=outcomes)
    assert [o.layer for o in outcomes.values()] == ["执行授权失败"] and not (tmp_path / "marker.txt").exists()
    assert not check_transcript(messages, outcomes)["2. 程序真的执行了处理函数"]


def test_an_endpoint_failure_is_its_own_attempt_never_a_success(workspace):
    """端点出错：所选模型那一次单独记下（带着错误），【脚本示范】那一遍另记；两份结局不混在一起。"""
    dead = openai.OpenAI(base_url=closed_port_url(), api_key="x", max_retries=0, timeout=2)
    messages, outcomes = [{"role": "user", "content": "列出当前目录中的 Python 文件"}], {}
    run = run_loop(agent_loop, messages, client=dead, model="m", outcomes=outcomes, quiet=True)
    live, fallback = run.attempts
    assert live.error is not None and live.error_kind == "connection" and live.label == ""
    assert live.messages == [{"role": "user", "content": "列出当前目录中的 Python 文件"}] and live.outcomes == {}
    assert fallback.label == "【脚本示范】" and fallback.error is None and fallback.messages is messages
    assert fallback.outcomes is outcomes and [o.layer for o in outcomes.values()] == ["成功"]
    assert live.layers() == ["端点出错（不在四层里）：connection"] and fallback.layers() == ["成功"]


def test_a_live_transcript_without_tools_is_kept_before_the_fallback(workspace):
    """want="tools" 而模型只回了文字：那份记录留在 attempts[0]，自查第 1 项是 ✗，不被假模型那一遍盖掉。"""
    talker = FakeClient(script=[text_reply("你可以运行 ls *.py 看看。")])
    messages, outcomes = [{"role": "user", "content": "列出当前目录中的 Python 文件"}], {}
    run = run_loop(agent_loop, messages, client=talker, model="m", want="tools", outcomes=outcomes, quiet=True)
    live, fallback = run.attempts
    assert [m["role"] for m in live.messages] == ["user", "assistant"] and "ls *.py" in live.messages[1]["content"]
    assert not any(check_transcript(live.messages, live.outcomes).values())
    assert all(check_transcript(fallback.messages, fallback.outcomes).values())
    assert live.layers() == [], "没有工具消息就没有层次：循环结束条件"
    assert run.scripted and run.said[-1].startswith("【脚本示范】")


def test_attempt_layers_follow_the_tool_messages_not_their_text(workspace):
    """`Attempt.layers()` 按工具消息的顺序从 outcomes 读层次；工具消息的文字写得再像失败也不算。"""
    script = [tool_reply(scripted_call("bash", {"command": "echo '错误（执行授权失败）：假的'"}),
                         scripted_call("bash", '{"command": "ls"')),
              text_reply("好的。")]
    messages = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
    run = run_loop(agent_loop, messages, client=FakeClient(script=script), model="m", outcomes={}, quiet=True)
    (only,) = run.attempts
    assert only.layers() == ["成功", "调用解析失败"]
    assert only.messages[2]["content"].startswith("错误（执行授权失败）")


def test_a_table_guarded_without_denied_still_gives_the_loop_a_layer(tmp_path, monkeypatch):
    """把不带 denied 的 Guarded 交给循环：循环换上抛 ToolDenied 的那一张，记忆共用，拒绝仍是执行授权失败。"""
    monkeypatch.chdir(tmp_path)
    ran = []
    asked = []
    table = guard({"bash": lambda args: ran.append(args) or "执行了"}, None, "ask",
                  ask=lambda text: asked.append(text) or "n 不要")
    assert table["bash"]({"command": "touch a"}) == "错误（执行授权失败）：用户拒绝执行：不要"  # 不带 denied：交回文字
    raising = guard(table, None, denied=ToolDenied)
    assert raising is not table and guard(raising, None, denied=ToolDenied) is raising
    outcome = execute_tool_call(bash("touch a"), raising)
    assert outcome == Outcome("执行授权失败", "错误（执行授权失败）：用户拒绝执行：不要") and ran == [] and len(asked) == 2


def test_an_attempt_is_named_for_the_tables(workspace):
    dead = openai.OpenAI(base_url=closed_port_url(), api_key="x", max_retries=0, timeout=2)
    run = run_loop(agent_loop, [{"role": "user", "content": "列出当前目录中的 Python 文件"}], client=dead, model="m",
                   outcomes={}, quiet=True)
    assert [a.name for a in run.attempts] == ["所选模型这一次", "【脚本示范】"]
