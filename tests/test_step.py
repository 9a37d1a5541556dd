"""ask_model 和 run_loop：不管端点回来什么（包括什么都没回来），都返回一个能接着用的结果。

端点出错用真正的 HTTP：本机的故障服务器（503、超时）和没人监听的端口；
模型走别的路用假模型的 `fake-talk-only`、`fake-other-commands`，以及脚本里的坏 JSON。
"""

import json
import os

import openai
import pytest

from harness_lib import (MAX_TOKENS, TOOLS, FakeClient, agent_loop, api_error, run_loop, text_reply, scripted_call,
                         tool_reply)
from harness_lib.ui.step import ask_model
from harness_lib.models.net import closed_port_url
from harness_lib.safety.runner import list_py_command
from harness_lib.safety.side_effects import disk_snapshot, watch_processes

ASK = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
KEY = "sk-step-test-" + "0123456789abcdef" * 2


def real(base_url, retries=0):
    return openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=retries, timeout=2)


def test_a_usable_reply_is_kept_and_described(capsys):
    client = FakeClient()
    step = ask_model(client, want="bash", model=client.model, messages=ASK, tools=TOOLS)
    assert not step.scripted and step.client is client and step.error is None
    assert step.message is step.live and step.tool_calls[0].function.name == "bash"
    assert client.last_request["max_tokens"] == MAX_TOKENS, "没写 max_tokens 时补上"
    assert f"这次：模型请求了 1 个工具调用：bash '{list_py_command()}'" in capsys.readouterr().out


def test_max_tokens_given_is_left_alone():
    client = FakeClient()
    ask_model(client, model=client.model, messages=ASK, max_tokens=7, quiet=True)
    assert client.last_request["max_tokens"] == 7


def test_a_text_reply_when_a_tool_call_is_wanted_goes_on_scripted(capsys):
    talk = FakeClient(model="fake-talk-only")
    script = [tool_reply(scripted_call("bash", {"command": "ls"})), text_reply("有 app.py。")]
    step = ask_model(talk, want="bash", script=script, model="fake-talk-only", messages=ASK, tools=TOOLS)
    out = capsys.readouterr().out
    assert step.scripted and step.live is not None and step.live.tool_calls is None
    assert "这次：模型没有请求工具，只回了文字" in out and "【脚本示范】" in out
    assert json.loads(step.message.tool_calls[0].function.arguments) == {"command": "ls"}
    # 后面的步骤接着用同一个脚本
    after = step.client.chat.completions.create(model=step.model, messages=ASK)
    assert after.choices[0].message.content == "有 app.py。"


def test_other_commands_satisfy_bash_but_not_a_predicate():
    other = FakeClient(model="fake-other-commands")
    step = ask_model(other, want="bash", model="fake-other-commands", messages=ASK, tools=TOOLS, quiet=True)
    assert not step.scripted and len(step.tool_calls) == 2

    def lists_py(message):
        """列出 .py 文件的调用"""
        return any("*.py" in c.function.arguments for c in message.tool_calls or [])

    step = ask_model(other, want=lists_py, model="fake-other-commands", messages=ASK, tools=TOOLS, quiet=True)
    assert step.scripted and "这一步要的是列出 .py 文件的调用" in step.said[1]


def test_bad_json_is_not_a_usable_bash_call():
    broken = FakeClient(script=[tool_reply(scripted_call("bash", '{"command": "ls"'))])
    step = ask_model(broken, want="bash", model=broken.model, messages=ASK, tools=TOOLS, quiet=True)
    assert step.scripted and step.live.tool_calls[0].function.arguments == '{"command": "ls"'


@pytest.mark.parametrize("fault", ["unavailable", "timeout"])
def test_an_endpoint_that_fails_is_explained_never_called_a_text_reply(fault, fault_server, capsys):
    step = ask_model(real(fault_server.url(fault)), want=None, model="m", messages=ASK)
    out = capsys.readouterr().out
    assert step.scripted and step.live is None and step.error is not None
    assert step.error.kind == {"unavailable": "server", "timeout": "timeout"}[fault]
    assert "这次：端点没有给出回复" in out and "没有请求工具" not in out.split("【脚本示范】")[0]
    assert step.message is not None and step.response.choices[0].message is step.message
    assert KEY not in out and KEY[:12] not in out


def test_refused_connection(capsys):
    step = ask_model(real(closed_port_url()), model="m", messages=ASK, tools=TOOLS)
    assert step.error.kind == "connection" and step.scripted
    assert "连不上" in capsys.readouterr().out


def test_run_loop_keeps_a_good_run(workspace, capsys):
    messages = list(ASK)
    run = run_loop(agent_loop, messages, client=FakeClient(), model="fake-agent-1", want="tools")
    assert not run.scripted and [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert "一共请求了 1 个工具调用" in capsys.readouterr().out


def test_run_loop_rewinds_after_a_failure_midway_and_goes_on_scripted(workspace, fault_server, capsys):
    """第一轮成功、第二轮 503：messages 退回开始时的样子，再由假模型完整跑一遍。"""

    class SecondCallFails:
        def __init__(self):
            self.good, self.bad, self.calls = FakeClient(), real(fault_server.url("unavailable")), 0
            self.api_key = KEY

        @property
        def chat(self):
            self.calls += 1
            return (self.good if self.calls == 1 else self.bad).chat

    messages = [{"role": "user", "content": "开始前就有的一条"}, *ASK]
    run = run_loop(agent_loop, messages, client=SecondCallFails(), model="fake-agent-1")
    out = capsys.readouterr().out
    assert run.scripted and run.error is not None
    assert "循环中途停了" in out and "messages 退回到这一格开始时的 2 条" in out
    assert [m["role"] for m in messages] == ["user", "user", "assistant", "tool", "assistant"]


def test_run_loop_says_when_the_very_first_request_failed(workspace, capsys):
    """第一次调模型就出错：说“还没追加任何消息就停了”，不说“中途停了”。"""
    dead = real(closed_port_url())
    run_loop(agent_loop, list(ASK), client=dead, model="m")
    out = capsys.readouterr().out
    assert "这次：循环还没追加任何消息就停了。" in out and "中途" not in out


def test_the_error_kind_of_an_attempt_is_a_kind_not_a_class_name(workspace):
    """循环原样抛出的 SDK 异常（我们自己的请求不合格的 400）也按错误表归类，不报类名 BadRequestError。"""
    refuses = FakeClient(script=[api_error(400, "Invalid value for 'tools'.", param="tools")])
    run = run_loop(agent_loop, list(ASK), client=refuses, model="m", quiet=True)
    assert isinstance(run.attempts[0].error, openai.BadRequestError)
    assert run.attempts[0].error_kind == "bad_request"


def test_run_loop_survives_a_loop_that_crashes_on_bad_json(workspace, capsys):
    def article_loop(messages, *, client, model):
        while True:
            message = client.chat.completions.create(model=model, messages=messages, tools=TOOLS).choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return message.content
            for call in message.tool_calls:
                json.loads(call.function.arguments)

    broken = FakeClient(script=[tool_reply(scripted_call("bash", '{"command": "ls"'))])
    messages = list(ASK)
    run = run_loop(article_loop, messages, client=broken, model=broken.model,
                   script=[text_reply("【脚本示范】的回答")])
    assert run.scripted and messages[-1]["content"] == "【脚本示范】的回答"
    assert len(messages) == 2, "坏 JSON 那一轮追加的助手消息被退回了"
    assert "不是合法的 JSON" in capsys.readouterr().out


def test_run_loop_wants_tools(workspace):
    messages = list(ASK)
    run = run_loop(agent_loop, messages, client=FakeClient(model="fake-talk-only"), model="fake-talk-only",
                   want="tools", quiet=True)
    assert run.scripted and any(m.get("tool_calls") for m in messages)


def test_watch_processes_sees_real_subprocesses_only_inside_the_block(tmp_path):
    import subprocess
    import sys

    with watch_processes() as seen:
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert [e for e, _ in seen] == ["subprocess.Popen"]
    if os.name != "nt":
        with watch_processes() as seen:
            os.system("true")
        assert [e for e, _ in seen] == ["os.system"]


def test_disk_snapshot_sees_a_new_file(tmp_path):
    before = disk_snapshot(tmp_path)
    (tmp_path / "a.txt").write_text("x")
    after = disk_snapshot(tmp_path)
    assert before == {} and list(after) == ["a.txt"] and after["a.txt"][0] == 1


def test_a_step_on_a_scripted_fake_is_labelled(capsys):
    scripted = FakeClient(script=[text_reply("好")])
    step = ask_model(scripted, model=scripted.model, messages=ASK)
    assert not step.scripted and capsys.readouterr().out.startswith("【脚本示范】这次：模型没有请求工具")


def test_the_default_fake_that_stood_in_is_labelled_on_the_next_step(capsys):
    first = ask_model(FakeClient(model="fake-talk-only"), want="bash", model="fake-talk-only", messages=ASK,
                      tools=TOOLS, quiet=True)
    assert first.scripted
    ask_model(first.client, model=first.model, messages=ASK)
    assert capsys.readouterr().out.startswith("【脚本示范】这次：")
    ask_model(FakeClient(), model="fake-agent-1", messages=ASK)
    assert capsys.readouterr().out.startswith("这次："), "自己选的默认假模型不是替身"


@pytest.mark.parametrize("fault, kind", [("no_choices", "no_choices"), ("html", "bad_response")])
def test_a_reply_without_a_message_gets_the_projects_explanation(fault, kind, fault_server, capsys):
    """HTTP 200 却没有助手消息（choices 为空、回的是网页）：和 call_model 同一种说明，接着【脚本示范】。"""
    step = ask_model(real(fault_server.url(fault)), model="m", messages=ASK)
    assert step.scripted and step.live is None and step.error.kind == kind
    assert "这次：端点没有给出回复" in capsys.readouterr().out


def test_chat_falls_back_for_one_step_and_asks_the_chosen_model_again(fault_server, capsys):
    """Chat.ask 交回 ChatCompletion；【脚本示范】只替这一步：下一步照样先问所选模型（真的发出了请求），
    替补是同一个假模型，构造时给的脚本接着往下用。"""
    from harness_lib import Chat

    fault_server.reset()
    down = real(fault_server.url("unavailable"))
    script = [tool_reply(scripted_call("bash", {"command": "ls"})), text_reply("有 app.py。")]
    chat = Chat(down, "m", script=script)
    first = chat.ask(ASK, want="bash", tools=TOOLS)
    assert first.choices[0].message.tool_calls[0].function.name == "bash"
    assert chat.client is down and chat.model == "m", "所选的客户端和模型不换"
    assert chat.last.error is not None and chat.last.error.kind == "server"
    assert chat.scripted_replies == [first.choices[0].message.model_dump(exclude_none=True)]
    messages = [*ASK, first.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": first.choices[0].message.tool_calls[0].id, "content": "app.py"}]
    second = chat.ask(messages, tools=TOOLS)
    assert fault_server.hits["unavailable"] == 2, "第二步又问了一次所选模型"
    assert second.choices[0].message.content == "有 app.py。", "替补接着用同一个脚本"
    out = capsys.readouterr().out
    assert out.count("端点没有给出回复") == 2 and "下一步照样先问所选模型" in out


def test_after_a_fallback_the_next_step_is_the_chosen_models_own_reply(capsys):
    """所选模型这一步没给出要的（只回文字），【脚本示范】替它；下一步它给得出，回复就是它自己的。"""
    from harness_lib import Chat

    talker = FakeClient(model="fake-talk-only")
    chat = Chat(talker, "fake-talk-only")
    chat.ask(ASK, want="bash", tools=TOOLS, quiet=True)
    assert chat.last.scripted and len(chat.scripted_replies) == 1
    reply = chat.ask(ASK, want="text", tools=TOOLS, quiet=True)
    assert not chat.last.scripted and chat.last.client is talker
    assert "fake-talk-only" in reply.choices[0].message.content
    assert talker.last_request["max_tokens"] == MAX_TOKENS and len(chat.scripted_replies) == 1


def test_chat_keeps_the_chosen_model_while_it_answers():
    from harness_lib import Chat

    client = FakeClient()
    chat = Chat(client, client.model)
    reply = chat.ask(ASK, want="bash", tools=TOOLS, quiet=True)
    assert not chat.last.scripted and not chat.scripted_replies
    assert chat.client is client and reply is chat.last.response
    assert client.last_request["max_tokens"] == MAX_TOKENS


def test_a_loop_after_a_fallback_step_runs_on_the_chosen_model(capsys):
    """Chat 的一步走了【脚本示范】以后，用 chat.client 跑循环：跑的是所选模型，“这次”那行不标【脚本示范】。"""
    from harness_lib import Chat

    client = FakeClient()
    chat = Chat(client, client.model)
    chat.ask(ASK, want=lambda message: False, tools=TOOLS, quiet=True)
    assert chat.last.scripted and chat.client is client
    run = run_loop(agent_loop, [*ASK], client=chat.client, model=chat.model)
    assert not run.scripted and run.client is client
    assert capsys.readouterr().out.startswith("这次：模型回复了")