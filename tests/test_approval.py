"""`harness_lib/support/approval.py` 的测试：三种选择、白名单、无头退回、环境变量策略、run_bash 的安全网。

命令都是真实子进程，在 tmp_path 里运行；“有没有启动进程”用标记文件检查。
"""

import builtins
import os
import subprocess

import nbformat
import pytest
from IPython.core.error import StdinNotImplementedError
from nbclient import NotebookClient

from harness_lib import (
    HANDLERS,
    FakeClient,
    ToolDenied,
    agent_loop,
    client_from_env,
    execute_tool_call,
    model_switch,
    run_bash,
    text_reply,
    tool_call,
    tool_reply,
)
from harness_lib.support import approval
from harness_lib.support import runner as bash_module
from harness_lib.support.approval import (
    DENIED_PREFIX,
    Verdict,
    check,
    check_allowlist,
    decide,
    gate,
    parse_answer,
    policy_from_env,
    requires_approval,
    using_endpoint,
)
from harness_lib.support.endpoint import ensure_local_server

REMOTE = ("https://api.example.com/v1", "some-model")


@pytest.fixture(autouse=True)
def clean_state(monkeypatch, tmp_path):
    """每个测试从干净的状态开始：假模型、没有“总是允许”、没有 HARNESS_APPROVAL，在 tmp_path 里运行。"""
    monkeypatch.delenv("HARNESS_APPROVAL", raising=False)
    monkeypatch.chdir(tmp_path)
    before = approval.active_endpoint()
    approval.note_endpoint(None)
    approval.forget()
    yield
    approval.forget()
    if before is None:
        approval.note_endpoint(None)
    else:
        approval.note_endpoint(*before)


def answers(*replies):
    """按顺序给出答复的 ask 函数；记下每次被问到的命令。"""
    queue = list(replies)

    def ask(command):
        ask.asked.append(command)
        return queue.pop(0)

    ask.asked = []
    return ask


def nobody_may_ask(command):
    raise AssertionError(f"这里不应该询问：{command!r}")


def fake_tool_call(command, id="call_x"):
    """构造一个像 SDK 返回的 tool_call 对象（只要 id 和 function.name/arguments）。"""
    import json
    from types import SimpleNamespace

    args = command if isinstance(command, str) and command.startswith("{") else json.dumps({"command": command})
    return SimpleNamespace(id=id, function=SimpleNamespace(name="bash", arguments=args))


# ---------------------------------------------------------------------------
# 三种选择
# ---------------------------------------------------------------------------


def test_approve():
    ask = answers("y")
    verdict = decide("touch a.txt", policy="ask", ask=ask)
    assert verdict.allowed and verdict.by == "人工"
    assert ask.asked == ["touch a.txt"]
    assert approval.always_allowed() == frozenset()  # y 只批准这一次


def test_deny_with_reason_and_without():
    verdict = decide("rm a.txt", policy="ask", ask=answers("n 不要删文件"))
    assert not verdict and verdict.message == "错误（执行授权失败）：用户拒绝执行：不要删文件"
    verdict = decide("rm a.txt", policy="ask", ask=answers("n"))
    assert not verdict and "没有说明原因" in verdict.reason


def test_always_allow_is_for_the_exact_command_only():
    ask = answers("a", "y", "y")
    assert decide("touch a.txt", policy="ask", ask=ask).allowed
    second = decide("touch a.txt", policy="ask", ask=ask)
    assert second.allowed and second.by == "会话记忆"
    assert ask.asked == ["touch a.txt"]  # 同一条命令不再询问
    decide("touch a.txt ", policy="ask", ask=ask)  # 多一个空格就是另一条命令
    decide("touch b.txt", policy="ask", ask=ask)
    assert ask.asked == ["touch a.txt", "touch a.txt ", "touch b.txt"]
    assert approval.always_allowed() == {"touch a.txt"}
    approval.forget()
    assert approval.always_allowed() == frozenset()


def test_unclear_answers_are_asked_again_then_denied():
    ask = answers("嗯", "maybe", "?")
    verdict = decide("touch a.txt", policy="ask", ask=ask)
    assert not verdict and len(ask.asked) == approval.MAX_TRIES
    assert decide("touch a.txt", policy="ask", ask=answers("好吧", "y")).allowed


@pytest.mark.parametrize("text,expected", [
    ("y", ("y", "")), ("Y", ("y", "")), ("yes", ("y", "")), ("批准", ("y", "")),
    ("n 不要删文件", ("n", "不要删文件")), ("n不要删", ("n", "不要删")), ("拒绝：太危险", ("n", "太危险")),
    ("no, 不行", ("n", "不行")), ("a", ("a", "")), ("always", ("a", "")), ("总是", ("a", "")),
    ("nope", (None, "")), ("", (None, "")), (None, (None, "")), ("ok", (None, "")),
])
def test_parse_answer(text, expected):
    assert parse_answer(text) == expected


def test_verdict():
    assert Verdict(True, "x", "白名单") and not Verdict(False, "x", "白名单")
    assert Verdict(False, "原因", "人工").message == DENIED_PREFIX + "原因"


# ---------------------------------------------------------------------------
# 白名单
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", [
    "ls", "ls -la", "ls *.py", "cat README.md", "head -n 3 app.py", "tail -n 2 data/notes.txt", "wc -l app.py",
    "pwd", "echo 你好", "grep -rn greet .", "find . -name '*.py'", "find . -type f", "date", "date +%s",
    "whoami", "git status", "git log --oneline -5", "git diff HEAD", "git show HEAD",
    "ls | grep py | wc -l", "echo 'a; rm -rf x'", "echo '$(rm x)'", 'echo "a|b"', "grep '#include' a.c",
    "l\\s", '"ls" -la',
])
def test_allowlist_allows_read_only_commands(command):
    verdict = check_allowlist(command, windows=False)
    assert verdict.allowed, verdict.reason


@pytest.mark.parametrize("command,why", [
    ("rm -rf x", "rm"), ("sudo ls", "sudo"), ("python app.py", "python"), ("/bin/ls", "/bin/ls"),
    ("\\rm x", "rm"), ("PAGER=less git log", "PAGER"),
    ("ls; rm x", ";"), ("ls && rm x", "&"), ("ls || rm x", "||"), ("ls &", "&"), ("ls |& cat", "|&"),
    ("ls | sh", "sh"), ("cat app.py | python", "python"), ("ls |", "两边"), ("| ls", "两边"),
    ("echo hi > out.txt", ">"), ("echo hi >> out.txt", ">"), ("cat < /etc/hostname", "<"),
    ("cat <(ls)", "<"), ("echo $(rm x)", "$"), ('echo "$(rm x)"', "$"), ("echo `rm x`", "反引号"),
    ('echo "`rm x`"', "反引号"), ("echo $HOME", "$"), ("ls ${IFS}", "$"), ("ls\nrm x", "换行"),
    ("ls\rrm x", "换行"), ("ls\x00", "控制字符"), ("(ls)", "括号"), ("{ ls; }", "花括号"), ("echo {a,b}", "花括号"),
    ("ls # rm", "#"), ("echo 'x", "引号"), ("ls \\", "反斜杠"), ("", "空命令"), ("   ", "空命令"),
    ("find . -delete", "-delete"), ("find . '-delete'", "-delete"), ("find . -exec rm {} +", "花括号"),
    ("find . -exec rm x", "-exec"), ("find . -execdir ls", "-execdir"), ("find . -fprint out", "-fprint"),
    ("find * -name x", "通配符"), ("find . -name *.py", "通配符"),
    ("git push", "push"), ("git", "没有子命令"), ("git -c core.pager=x log", "-c"), ("git commit -m x", "commit"),
    ("git log --output=x", "--output"), ("git diff --ext-diff", "--ext-diff"), ("git diff *", "通配符"),
    ("date -s 2020-01-01", "-s"), ("date --set=now", "-s"),
])
def test_allowlist_denies_tricky_commands(command, why):
    verdict = check_allowlist(command, windows=False)
    assert not verdict.allowed, command
    assert why in verdict.reason, verdict.reason
    assert verdict.by == "白名单"


def test_allowlist_non_string():
    assert not check_allowlist(["ls"]).allowed


def test_allowlist_on_windows_is_stricter():
    assert check_allowlist("dir /b *.py", windows=True).allowed
    assert check_allowlist("type README.md", windows=True).allowed
    for command in ["dir & calc", "type 'a & calc'", 'type "a & calc"', "dir | more", "echo %PATH%",
                    "del app.py", "ls"]:
        assert not check_allowlist(command, windows=True).allowed, command


def test_allowlist_verdicts_match_what_the_shell_does(tmp_path):
    """放行的命令真的只读：在一个文件夹里跑一遍，前后文件一模一样。"""
    (tmp_path / "app.py").write_text("print(1)\n", encoding="utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())
    for command in ["ls *.py", "cat app.py | wc -l", "find . -name '*.py'", "echo 'a; touch x'"]:
        assert check_allowlist(command, windows=False).allowed
        run_bash(command, cwd=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


# ---------------------------------------------------------------------------
# 拿不到标准输入时退回白名单
# ---------------------------------------------------------------------------


def test_ask_stdin_without_terminal_returns_none(capsys):
    assert approval.ask_stdin("rm a.txt") is None  # pytest 下的标准输入不是终端
    out = capsys.readouterr().out
    assert "rm a.txt" in out and "无法询问" in out


def test_ask_stdin_in_a_kernel_without_stdin(monkeypatch, capsys):
    """nbclient 无头运行：内核里的 input() 抛 StdinNotImplementedError。"""
    monkeypatch.setattr(approval, "_in_kernel", lambda: True)

    def no_stdin(prompt=""):
        raise StdinNotImplementedError("raw_input was called, but this frontend does not support input requests.")

    monkeypatch.setattr(builtins, "input", no_stdin)
    assert approval.ask_stdin("ls") is None


def test_ask_stdin_uses_input_when_available(monkeypatch, capsys):
    monkeypatch.setattr(approval, "_in_kernel", lambda: True)
    prompts = []
    monkeypatch.setattr(builtins, "input", lambda prompt="": prompts.append(prompt) or "n 不行")
    with using_endpoint(*REMOTE):
        verdict = decide("rm a.txt", policy="ask")
    assert verdict.message == DENIED_PREFIX + "用户拒绝执行：不行"
    assert prompts == [approval.PROMPT]
    out = capsys.readouterr().out
    assert "rm a.txt" in out and REMOTE[0] in out  # 先把命令和端点打印出来


def test_headless_falls_back_to_the_allowlist():
    with using_endpoint(*REMOTE):
        ok = decide("ls", policy="ask")
        no = decide("rm a.txt", policy="ask")
    assert ok.allowed and ok.by == "白名单（无法询问）"
    assert not no.allowed and no.by == "白名单（无法询问）" and "rm" in no.reason


def test_headless_kernel_really_has_no_stdin(tmp_path):
    """在真正的内核里用 nbclient 跑一格：input() 拿不到标准输入，ask_stdin 返回 None，不会卡住。"""
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(
        "from harness_lib.support import approval\n"
        "print('答复是', approval.ask_stdin('rm a.txt'))\n"
        "print(approval.decide('rm a.txt', policy='ask').by)"
    ))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESS_", "OPENAI_"))}
    NotebookClient(nb, timeout=60, kernel_name="python3").execute(env=env, cwd=str(tmp_path))
    text = "".join(out.get("text", "") for out in nb.cells[0].outputs)
    assert "答复是 None" in text and "白名单（无法询问）" in text


# ---------------------------------------------------------------------------
# 环境变量策略
# ---------------------------------------------------------------------------


def test_policy_from_env():
    assert policy_from_env({}) == "auto"
    assert policy_from_env({"HARNESS_APPROVAL": " AllowList "}) == "allowlist"
    with pytest.raises(ValueError, match="HARNESS_APPROVAL"):
        policy_from_env({"HARNESS_APPROVAL": "alow"})


@pytest.mark.parametrize("policy,ls_ok,rm_ok", [
    (None, True, False),  # 默认 auto：无头时退回白名单
    ("auto", True, False),
    ("ask", True, False),
    ("allowlist", True, False),
    ("allow", True, True),
    ("deny", False, False),
    ("alow", False, False),  # 写错了：不当成放行
])
def test_env_policies_with_a_real_endpoint(monkeypatch, policy, ls_ok, rm_ok):
    if policy is not None:
        monkeypatch.setenv("HARNESS_APPROVAL", policy)
    with using_endpoint(*REMOTE):
        assert decide("ls").allowed is ls_ok
        assert decide("rm a.txt").allowed is rm_ok
        assert check("rm a.txt").allowed is rm_ok
    if policy == "alow":
        assert "HARNESS_APPROVAL" in decide("ls").reason


def test_allowlist_policy_never_asks(monkeypatch):
    monkeypatch.setattr(approval, "ask_stdin", nobody_may_ask)
    with using_endpoint(*REMOTE):
        assert not decide("touch a.txt", policy="allowlist").allowed
        assert decide("ls", policy="allowlist").allowed


def test_auto_does_not_ask_for_the_fake_model(monkeypatch):
    monkeypatch.setattr(approval, "ask_stdin", nobody_may_ask)
    verdict = decide("touch a.txt")
    assert verdict.allowed and verdict.by == "无需审批"
    # 明确选 ask 时，即使是假模型也问
    assert not decide("touch a.txt", policy="ask", ask=answers("n")).allowed


def test_explicit_bad_policy_is_a_programming_error():
    with pytest.raises(ValueError):
        decide("ls", policy="sometimes")
    with pytest.raises(ValueError):
        gate(HANDLERS, "sometimes")


# ---------------------------------------------------------------------------
# 哪些端点需要审批；切换器告诉 approval 现在用的是谁
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint,needed", [
    (None, False),
    (("http://127.0.0.1:8000/v1", "fake-agent-1"), False),  # 本项目的本地端点
    (("http://127.1:8000/v1/", "fake-agent-1"), False),
    (("http://localhost:8000/v1", "fake-agent-1"), False),
    (("http://[::1]:8000/v1", "fake-agent-1"), False),
    (("http://localhost:11434/v1", "qwen2.5:7b"), True),  # 本机的 Ollama：模型照样会提出命令
    (("http://127.0.0.1:8000/v1", "qwen2.5:7b"), True),
    (("https://api.deepseek.com/v1", "deepseek-chat"), True),
    (("https://fake.example.com/v1", "fake-agent-1"), True),  # 名字像假模型，但不在本机
    ("https://api.deepseek.com/v1", True),
    ("http://127.0.0.1:8000/v1", True),  # 不知道模型名：保守起见要审批
])
def test_requires_approval(endpoint, needed):
    assert requires_approval(endpoint) is needed


def test_client_from_env_tells_approval():
    client_from_env({"HARNESS_MODE": "real", "OPENAI_API_KEY": "sk-test-0123456789", "HARNESS_MODEL": "qwen-plus",
                     "OPENAI_BASE_URL": "https://dashscope.aliyuncs.com/compatible-mode/v1"})
    assert approval.active_endpoint()[1] == "qwen-plus" and requires_approval()
    client_from_env({})
    assert approval.active_endpoint() is None and not requires_approval()
    client_from_env({"HARNESS_MODE": "local"})
    assert approval.active_endpoint()[0].startswith(ensure_local_server().rstrip("/"))
    assert not requires_approval()


def test_switch_tells_approval_even_when_the_client_is_cached():
    sw = model_switch(environ={"HARNESS_MODE": "real", "OPENAI_API_KEY": "sk-test-0123456789",
                               "HARNESS_MODEL": "deepseek-chat", "OPENAI_BASE_URL": "https://api.deepseek.com/v1"})
    sw.current()
    assert requires_approval()
    client_from_env({})  # 别处交出了假模型
    assert not requires_approval()
    sw.current()  # 切换器的客户端没变（缓存），仍然要告诉 approval
    assert requires_approval()
    sw.mode_buttons.value = "fake"
    sw.current()
    assert not requires_approval()
    sw.preset_dropdown.value = "local"  # 选“本项目的本地端点”
    sw.current()
    assert approval.active_endpoint() is not None and not requires_approval()


# ---------------------------------------------------------------------------
# run_bash 里的安全网
# ---------------------------------------------------------------------------


def test_safety_net_denies_without_starting_a_process(tmp_path, monkeypatch):
    def no_popen(*args, **kwargs):
        raise AssertionError("被拒绝的命令不应该启动进程")

    with using_endpoint(*REMOTE):
        monkeypatch.setattr(bash_module.subprocess, "Popen", no_popen)
        reply = run_bash("touch marker.txt")
        monkeypatch.setattr(bash_module.subprocess, "Popen", subprocess.Popen)
    assert reply.startswith(DENIED_PREFIX) and "touch" in reply
    assert not (tmp_path / "marker.txt").exists()


def test_safety_net_marker_file(tmp_path, monkeypatch):
    with using_endpoint(*REMOTE):
        assert run_bash("touch marker.txt").startswith(DENIED_PREFIX)  # 无头：白名单
        assert not (tmp_path / "marker.txt").exists()
        assert run_bash("echo 只读").strip() == "只读"  # 白名单里的命令照常执行
        monkeypatch.setattr(approval, "ask_stdin", answers("n 先别动文件"))
        assert run_bash("touch marker.txt") == DENIED_PREFIX + "用户拒绝执行：先别动文件"
        assert not (tmp_path / "marker.txt").exists()
        monkeypatch.setattr(approval, "ask_stdin", answers("y"))
        assert run_bash("touch marker.txt") == "(没有输出)"
    assert (tmp_path / "marker.txt").exists()


def test_safety_net_leaves_fake_and_local_untouched(tmp_path, monkeypatch):
    monkeypatch.setattr(approval, "ask_stdin", nobody_may_ask)
    monkeypatch.setenv("HARNESS_APPROVAL", "deny")  # 即使选了 deny：不需要审批的端点不受影响
    assert run_bash("touch fake.txt") == "(没有输出)"
    with using_endpoint(ensure_local_server(), "fake-agent-1"):
        assert run_bash("touch local.txt") == "(没有输出)"
    assert (tmp_path / "fake.txt").exists() and (tmp_path / "local.txt").exists()


def test_session_memory_is_shared_with_the_safety_net(tmp_path, monkeypatch):
    ask = answers("a")
    with using_endpoint(*REMOTE):
        assert decide("touch marker.txt", policy="ask", ask=ask).allowed
        asked = answers(None)  # 只准问一次：问到时像无头运行一样没人回答
        monkeypatch.setattr(approval, "ask_stdin", asked)
        assert run_bash("touch marker.txt") == "(没有输出)"  # 记住了：不问
        assert run_bash("touch other.txt").startswith(DENIED_PREFIX)  # 别的命令要问；没人答，白名单拦下
        assert asked.asked == ["touch other.txt"]
    assert (tmp_path / "marker.txt").exists() and not (tmp_path / "other.txt").exists()


# ---------------------------------------------------------------------------
# gate：处理函数之前的审批
# ---------------------------------------------------------------------------


def test_gate_wraps_only_the_named_tools():
    def read_file(args):
        return "内容"

    handlers = {**HANDLERS, "read_file": read_file}
    gated = gate(handlers, "deny")
    assert gated is not handlers and gated["read_file"] is read_file
    assert gated["bash"] is not HANDLERS["bash"] and gated["bash"].__wrapped__ is HANDLERS["bash"]
    with pytest.raises(ToolDenied, match="deny"):
        gated["bash"]({"command": "ls"})
    assert HANDLERS["bash"]({"command": "echo 原样"}).strip() == "原样"  # 原来的分发表没有变


def test_gate_denial_becomes_the_authorization_failure_text(tmp_path):
    gated = gate(HANDLERS, "ask", ask=answers("n 不要建文件"))
    text = execute_tool_call(fake_tool_call("touch marker.txt"), gated)
    assert text == "错误（执行授权失败）：用户拒绝执行：不要建文件"
    assert not (tmp_path / "marker.txt").exists()


def test_gate_leaves_bad_arguments_to_the_handler():
    gated = gate(HANDLERS, "ask", ask=nobody_may_ask)
    assert execute_tool_call(fake_tool_call('{"cmd": "ls"}'), gated).startswith("错误（调用解析失败）")
    assert execute_tool_call(fake_tool_call('{"command": 42}'), gated).startswith("错误（调用解析失败）")


def test_gate_and_safety_net_do_not_ask_twice(tmp_path, monkeypatch):
    net_asked = answers(None)  # 安全网自己的询问：记下问了什么，像无头运行一样没人回答
    monkeypatch.setattr(approval, "ask_stdin", net_asked)
    ask = answers("y")
    with using_endpoint(*REMOTE):
        gated = gate(HANDLERS, "ask", ask=ask)
        assert execute_tool_call(fake_tool_call("touch marker.txt"), gated) == "(没有输出)"
        # 批准只管那一次调用：之后直接调 run_bash，安全网照常工作（无头：白名单）
        assert run_bash("touch again.txt").startswith(DENIED_PREFIX)
    assert ask.asked == ["touch marker.txt"]
    assert net_asked.asked == ["touch again.txt"]  # gate 批准过的那条，安全网没有再问
    assert (tmp_path / "marker.txt").exists() and not (tmp_path / "again.txt").exists()


def test_gate_with_the_handler_blacklist_still_in_place():
    gated = gate(HANDLERS, "allow")
    assert execute_tool_call(fake_tool_call("sudo ls"), gated).startswith("错误（执行授权失败）：命令里有被禁止的片段")


# ---------------------------------------------------------------------------
# 拒绝的文字经过 agent_loop 回到模型，循环继续
# ---------------------------------------------------------------------------


def _scripted():
    return FakeClient(script=[
        tool_reply(tool_call("bash", {"command": "echo 你好"})),
        tool_reply(tool_call("bash", {"command": "touch marker.txt"})),
        text_reply("没有得到授权，文件没有创建。"),
    ])


def test_denial_reaches_the_model_through_the_gate(tmp_path):
    client = _scripted()
    ask = answers("y", "n 不要建文件")
    messages = [{"role": "user", "content": "打个招呼，再建一个文件"}]
    answer = agent_loop(messages, client=client, model="scripted", handlers=gate(HANDLERS, "ask", ask=ask))
    assert answer == "没有得到授权，文件没有创建。"
    tools = [m for m in messages if m["role"] == "tool"]
    assert tools[0]["content"].strip() == "你好"
    assert tools[1]["content"] == "错误（执行授权失败）：用户拒绝执行：不要建文件"
    assert tools[1]["tool_call_id"] == messages[3]["tool_calls"][0]["id"]
    # 模型在第三次请求里看到了拒绝
    seen = [m for m in client.last_request["messages"] if m.get("role") == "tool"]
    assert seen[-1]["content"].startswith(DENIED_PREFIX)
    assert not (tmp_path / "marker.txt").exists()


def test_denial_reaches_the_model_through_the_safety_net(tmp_path):
    """没有 gate，只有 run_bash 里的安全网：真实端点、无头运行，同样的循环也拦得住。"""
    client = _scripted()
    messages = [{"role": "user", "content": "打个招呼，再建一个文件"}]
    with using_endpoint(*REMOTE):
        answer = agent_loop(messages, client=client, model="scripted")
    assert answer == "没有得到授权，文件没有创建。"
    tools = [m for m in messages if m["role"] == "tool"]
    assert tools[0]["content"].strip() == "你好"
    assert tools[1]["content"].startswith("错误（执行授权失败）：") and "touch" in tools[1]["content"]
    assert not (tmp_path / "marker.txt").exists()


def test_fake_loop_is_untouched(tmp_path, monkeypatch):
    monkeypatch.setattr(approval, "ask_stdin", nobody_may_ask)
    messages = [{"role": "user", "content": "打个招呼，再建一个文件"}]
    agent_loop(messages, client=_scripted(), model="scripted")
    assert (tmp_path / "marker.txt").exists()
