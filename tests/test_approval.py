"""审批（`harness_lib/safety/approval.py`）与白名单的测试：谁可信、guard 包住分发表、三种选择、无头退回、环境变量策略。

命令都是真实子进程，文件工具用的是 `make_file_tools` 的真处理函数，都在 tmp_path 里运行；
“有没有启动进程”“文件有没有变”都在磁盘上检查。
"""

import builtins
import json
from types import SimpleNamespace

import nbformat
import openai
import pytest
from IPython.core.error import StdinNotImplementedError
from nbclient import NotebookClient

from harness_lib import (
    DENIED_PREFIX,
    HANDLERS,
    FakeClient,
    Recorder,
    ReplayClient,
    agent_loop,
    check_allowlist,
    decide,
    describe,
    execute_tool_call,
    guard,
    make_file_tools,
    model_switch,
    parse_answer,
    policy_from_env,
    run_bash,
    start_server,
    text_reply,
    scripted_call,
    tool_reply,
    trusted,
)
from harness_lib.safety.allowlist import Verdict
from harness_lib.ui.clients import client_from_env
from harness_lib.safety import approval
from harness_lib.safety import runner
from harness_lib.safety.approval import Guarded
from harness_lib.safety.secrets import learner_environment

NOWHERE = "http://127.0.0.1:9/v1"  # discard 端口：没有任何服务，也不会真的发请求
REAL_ENV = {"HARNESS_MODE": "real", "OPENAI_API_KEY": "sk-test-0123456789", "HARNESS_MODEL": "qwen-plus",
            "OPENAI_BASE_URL": "https://dashscope.aliyuncs.com/compatible-mode/v1"}


@pytest.fixture(autouse=True)
def clean_state(monkeypatch, tmp_path):
    """每个测试从干净的状态开始：没有 HARNESS_APPROVAL，在 tmp_path 里运行。"""
    monkeypatch.delenv("HARNESS_APPROVAL", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def plain_client():
    """自己建的 openai.OpenAI：不是假模型，也不指向本进程的假模型端点。"""
    return openai.OpenAI(base_url=NOWHERE, api_key="x")


@pytest.fixture
def files(tmp_path):
    """06 的五个工具（真处理函数），工作区是 tmp_path，里面有一个 app.py。"""
    (tmp_path / "app.py").write_bytes(b"print('hi')\n")
    return make_file_tools(tmp_path).handlers


def tool_text(tool_call, handlers, *rest):
    """交给模型的那段文字（execute_tool_call 交回的 Outcome 的 content）。"""
    return execute_tool_call(tool_call, handlers, *rest).content


def answers(*replies):
    """按顺序给出答复的 ask 函数；记下每次被问到的说明。"""
    queue = list(replies)

    def ask(text):
        ask.asked.append(text)
        return queue.pop(0)

    ask.asked = []
    return ask


def nobody_may_ask(text):
    raise AssertionError(f"这里不应该询问：{text!r}")


def as_call(name, args, id="call_x"):
    """构造一个像 SDK 返回的 tool_call 对象（只要 id 和 function.name/arguments）。"""
    raw = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return SimpleNamespace(id=id, function=SimpleNamespace(name=name, arguments=raw))


def bash_call(command, id="call_x"):
    return as_call("bash", {"command": command}, id)


class CountingPopen(runner.subprocess.Popen):
    """真正的 Popen，只是数一数被启动了几次。"""

    started = 0

    def __init__(self, *args, **kwargs):
        type(self).started += 1
        super().__init__(*args, **kwargs)


@pytest.fixture
def popen_count(monkeypatch):
    CountingPopen.started = 0
    monkeypatch.setattr(runner.subprocess, "Popen", CountingPopen)
    return CountingPopen


# ---------------------------------------------------------------------------
# 谁可信：只看传进来的客户端
# ---------------------------------------------------------------------------


def test_the_offline_fake_is_trusted():
    class Scripted(FakeClient):
        """假模型的子类：回复仍由本项目的代码决定。"""

    assert trusted(FakeClient()) and trusted(FakeClient(script=[text_reply("好")])) and trusted(Scripted())


def test_a_client_of_the_fake_endpoint_is_trusted_until_it_closes():
    server = start_server()
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    try:
        reply = client.chat.completions.create(model="fake-agent-1", messages=[{"role": "user", "content": "你好"}])
        assert reply.choices[0].message is not None  # 确实是那个假模型在回答
        assert trusted(client)
        assert trusted(openai.OpenAI(base_url=server.base_url + "/", api_key="x"))
    finally:
        server.close()
    assert not trusted(client)  # 端口关了，以后谁占了这个端口都不知道


def test_everything_else_is_untrusted():
    class Weird:
        @property
        def base_url(self):
            raise RuntimeError("坏了")

    for client in [None, object(), Weird(), SimpleNamespace(base_url=None),
                   SimpleNamespace(base_url="http://127.0.0.1:8000/v1"),  # 像本地端点，但不是本进程启动的
                   openai.OpenAI(base_url="https://api.deepseek.com/v1", api_key="x"),
                   openai.OpenAI(base_url="http://localhost:11434/v1", api_key="x")]:  # 本机的 Ollama
        assert not trusted(client), client


def test_clients_from_the_switch():
    assert not trusted(client_from_env(REAL_ENV)[0])
    assert trusted(client_from_env({})[0])  # 默认：离线假模型
    assert trusted(client_from_env({"HARNESS_MODE": "local"})[0])  # 本进程按需启动的本地端点
    assert not trusted(model_switch(environ=REAL_ENV).current()[0])


def test_a_replay_is_untrusted(tmp_path):
    """回放不知道录像是谁录的：即使录的是假模型，也按不可信处理。"""
    recorder = Recorder(FakeClient())
    recorder.chat.completions.create(model="fake-agent-1", messages=[{"role": "user", "content": "你好"}])
    replay = ReplayClient(recorder.save(tmp_path / "run.jsonl"))
    assert not trusted(replay)
    assert not trusted(recorder)  # 录制器包着的客户端也不看：它不是假模型本身


# ---------------------------------------------------------------------------
# guard：按客户端决定要不要审批
# ---------------------------------------------------------------------------


def test_guard_leaves_the_fake_alone_under_every_policy(tmp_path, files):
    """策略管的是不可信的客户端：假模型提出的调用是笔记本作者写的，照常运行、从不询问。"""
    for policy in (None, "ask", "allowlist", "deny"):
        assert guard(files, FakeClient(), policy, ask=nobody_may_ask) is files
    with start_server() as server:
        assert guard(files, openai.OpenAI(base_url=server.base_url, api_key="x"), ask=nobody_may_ask) is files
    client_from_env(REAL_ENV)  # 交出一个真实端点的客户端，不改变别处的判断
    script = FakeClient(script=[tool_reply(scripted_call("bash", {"command": "touch marker.txt"})), text_reply("好了")])
    agent_loop([{"role": "user", "content": "建一个文件"}], client=script, model="scripted",
               handlers=guard(HANDLERS, script, "deny", ask=nobody_may_ask))
    assert (tmp_path / "marker.txt").exists()
    assert run_bash("touch plain.txt") == "(没有输出)" and (tmp_path / "plain.txt").exists()  # run_bash 自己不审批


def test_guard_asks_for_a_plain_openai_client(tmp_path, files, plain_client, popen_count):
    ask = answers("n 不要建文件", "y")
    gated = guard(files, plain_client, ask=ask)
    assert isinstance(gated, Guarded) and gated is not files and gated.client is plain_client
    assert tool_text(bash_call("touch marker.txt"), gated) == DENIED_PREFIX + "用户拒绝执行：不要建文件"
    assert not (tmp_path / "marker.txt").exists() and popen_count.started == 0
    assert tool_text(bash_call("touch marker.txt"), gated) == "(没有输出)"
    assert (tmp_path / "marker.txt").exists() and popen_count.started == 1
    assert ask.asked == ["touch marker.txt", "touch marker.txt"]


def test_guard_asks_once_the_fake_endpoint_is_closed(tmp_path, files):
    server = start_server()
    client = openai.OpenAI(base_url=server.base_url, api_key="x")
    assert guard(files, client, ask=nobody_may_ask) is files
    server.close()
    ask = answers("n 端点已经关了")
    gated = guard(files, client, ask=ask)
    assert isinstance(gated, Guarded)
    assert tool_text(bash_call("touch marker.txt"), gated).startswith(DENIED_PREFIX)
    assert ask.asked == ["touch marker.txt"] and not (tmp_path / "marker.txt").exists()


def test_headless_untrusted_runs_only_the_read_only_allowlist(tmp_path, files, plain_client, capsys):
    gated = guard(files, plain_client)  # 没有 ask：用 ask_stdin，pytest 下没有终端，无人可问
    assert "app.py" in tool_text(bash_call("ls"), gated)
    denied = tool_text(bash_call("touch marker.txt"), gated)
    assert denied.startswith(DENIED_PREFIX) and "touch" in denied
    assert not (tmp_path / "marker.txt").exists()
    shown = capsys.readouterr().out
    assert "touch marker.txt" in shown and NOWHERE in shown and "无法询问" in shown  # 先给人看了说明
    # 只读的文件工具不审批，原样保留
    assert gated["read_file"] is files["read_file"] and gated["glob"] is files["glob"]
    assert tool_text(as_call("read_file", {"path": "app.py"}), gated) == "print('hi')\n"
    assert tool_text(as_call("glob", {"pattern": "*.py"}), gated) == "app.py"


def test_file_tools_are_denied_headless_for_untrusted_clients(tmp_path, files, plain_client):
    before = (tmp_path / "app.py").read_bytes()
    gated = guard(files, plain_client)
    calls = [
        as_call("write_file", {"path": "app.py", "content": "import os\nos.remove('x')\n"}),
        as_call("write_file", {"path": "new.py", "content": "x = 1\n"}),
        as_call("edit_file", {"path": "app.py", "old_string": "hi", "new_string": "bye"}),
    ]
    for call in calls:
        text = tool_text(call, gated)
        assert text.startswith(DENIED_PREFIX) and "会改动文件" in text, text
    assert (tmp_path / "app.py").read_bytes() == before
    assert not (tmp_path / "new.py").exists()
    # 同样的调用，换成假模型：照常执行（说明上面的调用本身是能改文件的）
    trusted_table = guard(files, FakeClient())
    assert tool_text(calls[2], trusted_table).startswith("已修改")
    assert (tmp_path / "app.py").read_bytes() == b"print('bye')\n"


def test_a_denied_command_never_starts_a_process(tmp_path, files, plain_client, popen_count):
    """真实子进程：这条命令一旦启动就会建出文件；被拒绝时文件不在，Popen 一次也没被调用。"""
    command = "python3 -c \"open('started.txt', 'w').close()\" || touch started.txt"
    for gated in (guard(files, plain_client), guard(files, plain_client, "deny"),
                  guard(files, plain_client, ask=answers("n 不行")), guard(files, None, "allowlist")):
        assert tool_text(bash_call(command), gated).startswith(DENIED_PREFIX)
    assert popen_count.started == 0 and not (tmp_path / "started.txt").exists()
    tool_text(bash_call(command), guard(files, plain_client, ask=answers("y")))
    assert popen_count.started == 1 and (tmp_path / "started.txt").exists()


def test_what_the_person_is_shown(files, plain_client):
    """每个要审批的工具都给人一句说明：bash 是命令；write_file 是路径和大小；edit_file 是路径和原文（截短）。"""
    ask = answers("n", "n", "n", "n")
    gated = guard(files, plain_client, ask=ask)
    long_old = "print('hi')" * 20
    tool_text(bash_call("rm -r data"), gated)
    tool_text(as_call("write_file", {"path": "notes/todo.txt", "content": "第一行\n第二行\n"}), gated)
    tool_text(as_call("edit_file", {"path": "app.py", "old_string": long_old, "new_string": "pass"}), gated)
    tool_text(as_call("edit_file", {"path": "app.py", "old_string": "hi", "new_string": "bye"}), gated)
    bash, write, edit_long, edit = ask.asked
    assert bash == "rm -r data"
    assert "write_file" in write and "'notes/todo.txt'" in write and "8 个字符" in write
    assert "'app.py'" in edit_long and f"共 {len(long_old)} 个字符" in edit_long and long_old not in edit_long
    assert edit == "edit_file：在 'app.py' 里把 'hi' 换成 'bye'"
    assert describe("bash", {"command": "ls\nrm x"}) == "ls\nrm x"  # 命令从不截短


def test_a_misspelt_env_policy_denies_untrusted_clients_but_not_the_fake(monkeypatch, files, plain_client):
    monkeypatch.setenv("HARNESS_APPROVAL", "alow")
    assert guard(files, FakeClient(), ask=nobody_may_ask) is files
    gated = guard(files, plain_client, ask=nobody_may_ask)
    assert isinstance(gated, Guarded) and gated.policy is None
    text = tool_text(bash_call("echo hi"), gated)
    assert text.startswith(DENIED_PREFIX) and "HARNESS_APPROVAL" in text


def test_env_policy_is_read_when_guard_is_called(monkeypatch, files, plain_client):
    monkeypatch.setenv("HARNESS_APPROVAL", "allow")
    gated = guard(files, plain_client, ask=nobody_may_ask)
    monkeypatch.setenv("HARNESS_APPROVAL", "deny")
    assert tool_text(bash_call("echo 放行"), gated).strip() == "放行"
    assert gated.policy == "allow"


def test_memory_belongs_to_one_guarded_table(tmp_path, files, plain_client):
    ask = answers("a", "n 另一张表", "y")
    first = guard(files, plain_client, ask=ask)
    second = guard(files, plain_client, ask=ask)
    assert tool_text(bash_call("touch a.txt"), first) == "(没有输出)"
    assert tool_text(bash_call("touch a.txt"), first) == "(没有输出)"  # 记住了：不问
    assert first.always_allowed() == {"touch a.txt"} and second.always_allowed() == frozenset()
    assert tool_text(bash_call("touch a.txt"), second).endswith("另一张表")
    first.forget()
    assert first.always_allowed() == frozenset()
    tool_text(bash_call("touch a.txt"), first)  # 忘了：又问
    assert ask.asked == ["touch a.txt"] * 3


def test_always_allow_remembers_exact_arguments(tmp_path, files, plain_client):
    ask = answers("a", "n 内容不一样")
    gated = guard(files, plain_client, ask=ask)
    write = {"path": "a.txt", "content": "一"}
    assert tool_text(as_call("write_file", write), gated).startswith("已写入")
    assert tool_text(as_call("write_file", write), gated).startswith("已写入")
    other = tool_text(as_call("write_file", {"path": "a.txt", "content": "二"}), gated)
    assert other.endswith("内容不一样") and (tmp_path / "a.txt").read_text(encoding="utf-8") == "一"
    assert len(ask.asked) == 2


def test_unknown_tools_are_gated_and_read_only_tools_are_not(plain_client):
    ran = []

    def deploy(args):
        ran.append(args)
        return "已部署"

    def read_file(args):
        return "内容"

    read_file.read_only = True  # 处理函数自己声明只读
    handlers = {**HANDLERS, "read_file": read_file, "deploy": deploy}
    gated = guard(handlers, plain_client)
    assert gated["read_file"] is read_file
    assert gated["deploy"].__wrapped__ is deploy and gated["bash"].__wrapped__ is HANDLERS["bash"]
    text = tool_text(as_call("deploy", {"target": "prod"}), gated)
    assert text.startswith(DENIED_PREFIX) and "deploy" in text and ran == []
    assert "deploy（先审批）" in repr(gated) and "read_file（" not in repr(gated)


def test_guarded_table_cannot_be_changed(files, plain_client):
    gated = guard(files, plain_client)
    with pytest.raises(TypeError):
        gated["bash"] = files["bash"]  # 后加进来的处理函数会绕过审批
    assert set(gated) == set(files) and len(gated) == len(files)
    assert dict(gated)["bash"] is gated["bash"]


def test_bad_arguments_are_not_run_without_approval(tmp_path, plain_client):
    bad = as_call("bash", {"cmd": "touch x.txt"})
    # execute_tool_call 在调用（包好的）处理函数之前按工具定义校验参数（04）：不问人，也不执行
    for policy in (None, "allow", "deny"):
        text = tool_text(bad, guard(HANDLERS, plain_client, policy, ask=lambda text: "y"))
        assert text.startswith("错误（调用解析失败）：缺少必填参数 command"), text
    assert not (tmp_path / "x.txt").exists()


def test_explicit_bad_policy_is_a_programming_error(plain_client):
    with pytest.raises(ValueError):
        decide("ls", policy="sometimes")
    with pytest.raises(ValueError):
        guard(HANDLERS, plain_client, "sometimes")
    with pytest.raises(ValueError):
        guard(HANDLERS, None, "sometimes")


def test_guarding_a_guarded_table_returns_it_unchanged(files, plain_client):
    gated = guard(files, plain_client, "allowlist")
    assert guard(gated, plain_client) is gated and guard(gated, FakeClient()) is gated
    assert guard(gated, None, "allow") is gated  # 策略在第一次包的时候就定下了


def _recorded_run(tmp_path):
    """录一次脚本假模型的运行（模型要建 marker.txt），返回录像文件。"""
    script = FakeClient(script=[tool_reply(scripted_call("bash", {"command": "touch marker.txt"})), text_reply("好了")])
    recorder = Recorder(script)
    agent_loop([{"role": "user", "content": "建一个文件"}], client=recorder, model="scripted")
    return recorder.save(tmp_path / "run.jsonl")


def test_agent_loop_guards_a_replay_and_asks_only_once(tmp_path):
    """回放的客户端不可信：循环自己调用 guard；传进去的 Guarded 不会再包一层，同一次调用只问一遍。"""
    path = _recorded_run(tmp_path)
    (tmp_path / "marker.txt").unlink(missing_ok=True)
    messages = [{"role": "user", "content": "建一个文件"}]
    agent_loop(messages, client=ReplayClient(path, check=False), model="scripted")  # 无头：只放行白名单
    assert messages[2]["content"].startswith(DENIED_PREFIX) and not (tmp_path / "marker.txt").exists()
    replay = ReplayClient(path, check=False)
    ask = answers("y")
    agent_loop([{"role": "user", "content": "建一个文件"}], client=replay, model="scripted",
               handlers=guard(HANDLERS, replay, ask=ask))
    assert ask.asked == ["touch marker.txt"] and (tmp_path / "marker.txt").exists()


# ---------------------------------------------------------------------------
# guard(handlers, None, ...)：不看客户端，一律按不可信处理
# ---------------------------------------------------------------------------


def test_gate_is_guard_without_a_client(tmp_path):
    gated = guard(HANDLERS, None, "ask", ask=answers("n 不要建文件"))
    assert isinstance(gated, Guarded) and gated.client is None
    text = tool_text(bash_call("touch marker.txt"), gated)
    assert text == "错误（执行授权失败）：用户拒绝执行：不要建文件"
    assert not (tmp_path / "marker.txt").exists()
    assert HANDLERS["bash"]({"command": "echo 原样"}).strip() == "原样"  # 原来的分发表没有变


def test_gate_with_the_handler_blacklist_still_in_place():
    gated = guard(HANDLERS, None, "allow")
    assert tool_text(bash_call("sudo ls"), gated).startswith("错误（执行授权失败）：命令里有被禁止的片段")


def _scripted():
    return FakeClient(script=[
        tool_reply(scripted_call("bash", {"command": "echo 你好"})),
        tool_reply(scripted_call("bash", {"command": "touch marker.txt"})),
        text_reply("没有得到授权，文件没有创建。"),
    ])


def test_denial_reaches_the_model_and_the_loop_goes_on(tmp_path):
    client = _scripted()
    ask = answers("y", "n 不要建文件")
    messages = [{"role": "user", "content": "打个招呼，再建一个文件"}]
    answer = agent_loop(messages, client=client, model="scripted", handlers=guard(HANDLERS, None, "ask", ask=ask))
    assert answer == "没有得到授权，文件没有创建。"
    tools = [m for m in messages if m["role"] == "tool"]
    assert tools[0]["content"].strip() == "你好"
    assert tools[1]["content"] == "错误（执行授权失败）：用户拒绝执行：不要建文件"
    assert tools[1]["tool_call_id"] == messages[3]["tool_calls"][0]["id"]
    seen = [m for m in client.last_request["messages"] if m.get("role") == "tool"]
    assert seen[-1]["content"].startswith(DENIED_PREFIX)  # 模型在第三次请求里看到了拒绝
    assert not (tmp_path / "marker.txt").exists()


# ---------------------------------------------------------------------------
# 三种选择（decide：单独判断一条命令，提出它的一方按不可信处理，没有记忆）
# ---------------------------------------------------------------------------


def test_decide_y_n_a_without_memory():
    ask = answers("y", "n 不要删文件", "n", "a", "n")
    approved = decide("touch a.txt", policy="ask", ask=ask)
    assert approved.allowed and approved.by == "人工"
    denied = decide("rm a.txt", policy="ask", ask=ask)
    assert not denied and denied.message == DENIED_PREFIX + "用户拒绝执行：不要删文件"
    assert "没有说明原因" in decide("rm a.txt", policy="ask", ask=ask).reason
    assert decide("touch a.txt", policy="ask", ask=ask).allowed
    assert not decide("touch a.txt", policy="ask", ask=ask).allowed  # decide 没有记忆：答过 a 也又问了
    assert ask.asked == ["touch a.txt", "rm a.txt", "rm a.txt", "touch a.txt", "touch a.txt"]
    assert decide("touch a.txt", ask=answers("n 不行")).by == "人工"  # 默认 auto：按不可信处理，问人


def test_unclear_answers_are_asked_again_then_denied():
    ask = answers("嗯", "maybe", "?")
    verdict = decide("touch a.txt", policy="ask", ask=ask)
    assert not verdict and len(ask.asked) == approval.MAX_TRIES
    assert decide("touch a.txt", policy="ask", ask=answers("好吧", "y")).allowed


def test_parse_answer():
    cases = {"Y": ("y", ""), "批准": ("y", ""), "n 不要删文件": ("n", "不要删文件"), "n不要删": ("n", "不要删"),
             "拒绝：太危险": ("n", "太危险"), "no, 不行": ("n", "不行"), "always": ("a", ""), "总是": ("a", ""),
             "nope": (None, ""), "ok": (None, ""), "": (None, ""), None: (None, "")}
    for text, expected in cases.items():
        assert parse_answer(text) == expected, text


def test_verdict():
    assert Verdict(True, "x", "白名单") and not Verdict(False, "x", "白名单")
    assert Verdict(False, "原因", "人工").message == DENIED_PREFIX + "原因"


# ---------------------------------------------------------------------------
# 白名单
# ---------------------------------------------------------------------------


def test_allowlist_allows_read_only_commands():
    for command in ["ls -la", "ls *.py", "cat README.md | wc -l", "ls | grep py | wc -l", "grep -rn greet .",
                    "find . -name '*.py'", "date +%s", "date -u", "whoami", "tail -f app.py",
                    "echo 'a; rm -rf x'", 'echo "a|b"', "grep '#include' a.c", "l\\s", '"ls" -la']:
        verdict = check_allowlist(command, windows=False)
        assert verdict.allowed, (command, verdict.reason)


def denied(cases):
    for command, why in cases:
        verdict = check_allowlist(command, windows=False)
        assert not verdict.allowed and verdict.by == "白名单", command
        assert why in verdict.reason, (command, verdict.reason)


def test_allowlist_denies_what_makes_the_shell_do_more():
    denied([("rm -rf x", "rm"), ("\\rm x", "rm"), ("/bin/ls", "/bin/ls"), ("PAGER=less git log", "PAGER"),
            ("ls; rm x", ";"), ("ls && rm x", "&"), ("ls || rm x", "||"), ("ls |& cat", "|&"),
            ("ls | sh", "sh"), ("ls |", "两边"), ("echo hi > out.txt", ">"), ("cat < /etc/hostname", "<"),
            ("cat <(ls)", "<"), ("echo $(rm x)", "$"), ('echo "$(rm x)"', "$"), ('echo "`rm x`"', "反引号"),
            ("echo $HOME", "$"), ("ls\nrm x", "换行"), ("ls\x00", "控制字符"), ("(ls)", "括号"),
            ("echo {a,b}", "花括号"), ("ls # rm", "#"), ("echo 'x", "引号"), ("ls \\", "反斜杠"), ("   ", "空命令")])


def test_allowlist_denies_arguments_that_change_things():
    denied([("find . -delete", "-delete"), ("find . '-delete'", "-delete"), ("find . -exec rm x", "-exec"),
            ("find . -fprint out", "-fprint"), ("find . -name *.py", "通配符"),
            # GNU getopt：长选项无歧义的前缀就是那个选项，`--s` 就是 `--set`
            ("date --s=2020-01-01", "--set"), ("date -s 2020-01-01", "设置系统时间"), ("date 0101", "设置系统时间"),
            # git 读仓库的配置，配置可以点名程序：一律先问人
            ("git status", "core.fsmonitor"), ("git log -p", "textconv")])


def test_allowlist_denies_other_processes_secrets_and_credentials():
    denied([("cat /proc/self/environ", "proc"), ("cat ../../../../../proc/1/environ", "proc"),
            ("cat //proc/./self/environ", "proc"), ("cat /pro\\c/self/environ", "proc"),
            ("cat /pr?c/1/environ", "proc"), ("cat /*/self/environ", "proc"),
            ("grep -a KEY /proc/*/environ", "proc"),
            ("grep -f/proc/self/environ x", "proc"), ("grep --file=/proc/self/environ x", "proc"),
            ("cat /dev/mem", "内存设备"), ("cat ~/.ssh/id_rsa", ".ssh"), ("cat .env", ".env"),
            # 递归的 grep 不能走出工作目录（/ 下面就有 /proc）
            ("grep -r KEY /", "递归"), ("grep -rn KEY ..", "递归"), ("grep -r KEY ~", "递归"),
            ("grep --rec KEY /", "递归"), ("grep -d recurse KEY /", "递归"), ("grep -R KEY .", "-R")])
    # 理由说的是那一类路径的风险：/proc 和内存设备是别的进程，.env、.ssh 是凭据
    for command, risk in [("cat /proc/self/environ", "别的进程"), ("cat /dev/mem", "别的进程"),
                          ("cat .env", "凭据位置"), ("cat ~/.ssh/id_rsa", "凭据位置")]:
        reason = check_allowlist(command, windows=False).reason
        assert risk in reason and ("凭据" in reason) == (risk == "凭据位置"), (command, reason)


def test_allowlist_on_windows_is_stricter():
    assert check_allowlist("dir /b *.py", windows=True).allowed
    assert check_allowlist("type app.py", windows=True).allowed
    # 工作目录外面的读先问人：盘符、绝对路径、..、~
    for command in ["type C:\\Users\\me\\notes.txt", "type ..\\other\\.env.local", "dir \\", "dir D:",
                    "findstr token ~\\x.txt", "type data/../../x.txt"]:
        verdict = check_allowlist(command, windows=True)
        assert not verdict.allowed and "工作目录外面" in verdict.reason, command
    for command in ["dir & calc", 'type "a & calc"', "dir | more", "echo %PATH%", "del app.py", "ls"]:
        assert not check_allowlist(command, windows=True).allowed, command
    assert not check_allowlist(["ls"]).allowed


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
    assert "rm a.txt" in out and "无法询问" in out and "按不可信处理" in out


def test_ask_stdin_in_a_kernel_without_stdin(monkeypatch, capsys):
    """nbclient 无头运行：内核里的 input() 抛 StdinNotImplementedError。"""
    monkeypatch.setattr(approval, "_can_ask", lambda: True)

    def no_stdin(prompt=""):
        raise StdinNotImplementedError("raw_input was called, but this frontend does not support input requests.")

    monkeypatch.setattr(builtins, "input", no_stdin)
    assert approval.ask_stdin("ls") is None


def test_ask_stdin_uses_input_when_available(monkeypatch, capsys, tmp_path, plain_client):
    monkeypatch.setattr(approval, "_can_ask", lambda: True)
    prompts = []
    monkeypatch.setattr(builtins, "input", lambda prompt="": prompts.append(prompt) or "n 不行")
    gated = guard(HANDLERS, plain_client)
    assert tool_text(bash_call("rm a.txt"), gated) == DENIED_PREFIX + "用户拒绝执行：不行"
    assert prompts == [approval.PROMPT]
    out = capsys.readouterr().out
    assert "rm a.txt" in out and NOWHERE in out and "不可信" in out  # 先把命令和客户端打印出来


def test_headless_falls_back_to_the_allowlist():
    ok = decide("ls", policy="ask")
    no = decide("rm a.txt", policy="ask")
    assert ok.allowed and ok.by == "白名单（无法询问）"
    assert not no.allowed and no.by == "白名单（无法询问）" and "rm" in no.reason


def test_headless_kernel_really_has_no_stdin(tmp_path):
    """在真正的内核里用 nbclient 跑一格：input() 拿不到标准输入，ask_stdin 返回 None，不会卡住。"""
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(
        "from harness_lib.safety import approval\n"
        "print('答复是', approval.ask_stdin('rm a.txt'))\n"
        "print(approval.decide('rm a.txt', policy='ask').by)"
    ))
    env = learner_environment()
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


def test_env_policies_for_an_untrusted_client(monkeypatch, tmp_path, plain_client):
    table = {None: (True, False),  # 默认 auto：不可信、无头时退回白名单
             "auto": (True, False), "ask": (True, False), "allowlist": (True, False), "allow": (True, True),
             "deny": (False, False), "alow": (False, False)}  # 写错了：不当成放行
    for policy, (ls_ok, rm_ok) in table.items():
        if policy is not None:
            monkeypatch.setenv("HARNESS_APPROVAL", policy)
        (tmp_path / "a.txt").write_text("x")
        assert decide("ls").allowed is ls_ok and decide("rm a.txt").allowed is rm_ok, policy
        text = tool_text(bash_call("rm a.txt"), guard(HANDLERS, plain_client))
        assert text.startswith(DENIED_PREFIX) is not rm_ok, policy
        assert (tmp_path / "a.txt").exists() is not rm_ok, policy
    assert "HARNESS_APPROVAL" in decide("ls").reason  # 最后一个是写错的 alow：理由里说明可选的值


def test_allowlist_policy_never_asks(plain_client, files):
    gated = guard(files, plain_client, "allowlist", ask=nobody_may_ask)
    assert not decide("touch a.txt", policy="allowlist", ask=nobody_may_ask).allowed
    assert decide("ls", policy="allowlist", ask=nobody_may_ask).allowed
    assert "app.py" in tool_text(bash_call("ls"), gated)
    assert tool_text(as_call("write_file", {"path": "b.txt", "content": ""}), gated).startswith(DENIED_PREFIX)


def test_auto_runs_read_only_commands_of_an_untrusted_client_without_asking(tmp_path):
    """auto：不可信的客户端提出只读白名单里的命令，不打扰人；别的命令才问。"""
    asked = []

    def person(text):
        asked.append(text)
        return "n 不要"

    remote = openai.OpenAI(base_url=NOWHERE, api_key="x")
    handlers = guard({"bash": lambda args: run_bash(args["command"], cwd=tmp_path)}, remote, "auto", ask=person)
    (tmp_path / "seen.txt").write_text("x")
    assert handlers["bash"]({"command": "ls"}).strip() == "seen.txt"  # 真的运行了
    assert asked == []
    out = handlers["bash"]({"command": "touch made.txt"})
    assert out.startswith(DENIED_PREFIX) and "不要" in out
    assert asked == ["touch made.txt"] and not (tmp_path / "made.txt").exists()


def test_allowlist_follows_symlinks_in_the_current_folder(tmp_path, monkeypatch):
    """工作目录里的符号链接：白名单按当前目录解析，看它最后指到哪里。"""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ok.txt").write_text("hi\n", encoding="utf-8")
    (tmp_path / "notes.txt").symlink_to("/proc/self/environ")
    (tmp_path / "everything").symlink_to("/")
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "deep.txt").symlink_to("/dev/mem")
    for command in ["cat notes.txt", "head -c 100 notes.txt", "cat *.txt", "grep -a KEY *", "cat inner/*",
                    "grep -r KEY everything", "grep -R KEY .", "grep --dereference-recursive KEY ."]:
        verdict = check_allowlist(command, windows=False)
        assert not verdict.allowed, command
        assert "符号链接" in verdict.reason, verdict.reason
    for command in ["cat ok.txt", "grep -r KEY .", "grep -rn hi ok.txt", "ls -la", "cat missing.txt"]:
        assert check_allowlist(command, windows=False).allowed, command


def test_read_only_is_what_a_handler_declares_not_its_name(tmp_path, monkeypatch):
    """只读看处理函数自己的标记：叫 read_file 却没标只读的照样审批；06 的 read_file、glob 标了，原样保留。"""
    monkeypatch.chdir(tmp_path)
    ran = []

    def impostor(args):
        ran.append(args)
        return "写了文件"

    files = make_file_tools(tmp_path).handlers
    gated = guard({"read_file": impostor, "glob": files["glob"], "read_real": files["read_file"]}, None, "deny")
    assert gated["glob"] is files["glob"] and gated["read_real"] is files["read_file"], "标了只读：原样保留"
    assert gated["read_file"] is not impostor, "名字叫 read_file，没标只读：要审批"
    assert tool_text(as_call("read_file", {"path": "x"}), gated).startswith(DENIED_PREFIX) and ran == []
    assert "read_file（先审批）" in repr(gated) and "glob（先审批）" not in repr(gated)
