"""接真实端点时，读到的就发出去了：工作目录外面的东西，没人说“可以”就一个字节也不读。

一个只提出“读”的模型站在真正的 HTTP 端点后面（`serve`，不是本项目信任的假模型端点），每次运行提出一条读命令；
学习者的主目录换成 tmp 里的一个假主目录，真实工具放秘密的地方都放着哨兵字符串。默认策略、无头（没人可问），
经切换器那样的客户端和自己建的 `openai.OpenAI` 各跑一遍：哨兵一次也不能出现在 messages 里，
拒绝的理由说出是哪个路径。工作目录里的读照常不问。
"""

import json
from types import SimpleNamespace

import openai
import pytest

from harness_lib import (
    DENIED_PREFIX,
    FakeClient,
    agent_loop,
    check_allowlist,
    execute_tool_call,
    guard,
    make_file_tools,
    run_bash,
    scripted_call,
    text_reply,
    tool_reply,
)
from harness_lib.lesson.loop import ToolDenied
from harness_lib.models.server import serve
from harness_lib.ui.clients import real_client

SENTINEL = "SENTINEL-不该离开这台电脑"
SECRETS = {  # 相对假主目录：这些工具真把秘密放在这里
    ".config/gh/hosts.yml": "github.com:\n  oauth_token: gho_" + SENTINEL,
    ".config/keys/server.pem": "-----BEGIN PRIVATE KEY-----\n" + SENTINEL,
    "other-project/.env.local": "DATABASE_URL=postgres://u:" + SENTINEL,
    "notes/passwords.txt": "银行：" + SENTINEL,
    ".jupyter/jupyter_server_config.json": json.dumps({"IdentityProvider": {"token": SENTINEL}}),
    ".ssh/id_ed25519": SENTINEL,
    ".npmrc": "//registry.npmjs.org/:_authToken=" + SENTINEL,
    ".docker/config.json": json.dumps({"auths": {"x": {"auth": SENTINEL}}}),
}
READS = [
    "cat ~/.config/gh/hosts.yml",
    "cat ~/.config/keys/server.pem",
    "cat ~/other-project/.env.local",
    "cat ~/notes/passwords.txt",
    "head -c 2000 ~/.jupyter/jupyter_server_config.json",
    "cat ../../../../../..{home}/notes/passwords.txt",
    "cat ../notes/passwords.txt",
    "cat {home}/notes/passwords.txt",
    "tail -n 5 ~/.npmrc",
    "wc -c ~/.ssh/id_ed25519",
    "grep -r token ~/.config",
    "grep -h oauth ~/.config/gh/hosts.yml",
    "cat ~/*/passwords.txt",
    "cat ../*/.env.local",
    "cat linked-notes/passwords.txt",
    "cat linked-home/notes/passwords.txt",
    "cat ./*/passwords.txt",
    "find ~ -name '*.pem'",
    "find .. -name passwords.txt",
    "find -L . -name '*.txt'",
    "ls -la ~",
    "ls ~/.ssh ~/.config",
    "ls -RL .",
    "ls linked-notes",
    "cat /etc/passwd",
    "wc --files0-from=list.txt",
]


@pytest.fixture
def home(tmp_path, monkeypatch):
    """假主目录：秘密放在各处，工作目录是其中的 project/，里面有两个指出去的符号链接。"""
    root = tmp_path / "home"
    for rel, text in SECRETS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    project = root / "project"
    project.mkdir()
    (project / "app.py").write_text("print('hi')\n", encoding="utf-8")
    (project / "list.txt").write_text(str(root / "notes" / "passwords.txt") + "\0", encoding="utf-8")
    (project / "linked-notes").symlink_to(root / "notes", target_is_directory=True)
    (project / "linked-home").symlink_to(root, target_is_directory=True)
    monkeypatch.setenv("HOME", str(root))
    monkeypatch.delenv("HARNESS_APPROVAL", raising=False)  # 默认策略 auto
    monkeypatch.chdir(project)
    return root


def _reader(command):
    """只会提出一条读命令的模型，站在一个本项目不信任的 HTTP 端点后面。"""
    model = FakeClient(script=[tool_reply(scripted_call("bash", {"command": command})), text_reply("读完了。")])
    return serve(model.handler)


CLIENTS = {
    "切换器那样的客户端": lambda url: real_client(url, "sk-test-not-a-real-key"),
    "自己建的 openai.OpenAI": lambda url: openai.OpenAI(base_url=url, api_key="sk-test-not-a-real-key",
                                                        max_retries=0),
}


@pytest.mark.parametrize("kind", sorted(CLIENTS))
@pytest.mark.parametrize("template", READS)
def test_a_read_outside_the_workspace_never_reaches_the_model(home, template, kind):
    command = template.format(home=home)
    with _reader(command) as server:
        client = CLIENTS[kind](server.base_url)
        messages = [{"role": "user", "content": "帮我看看这台电脑"}]
        agent_loop(messages, client=client, model="reader")
    dumped = json.dumps(messages, ensure_ascii=False)
    assert SENTINEL not in dumped, f"{command} 读出了工作目录外面的秘密"
    tool = next(m for m in messages if m["role"] == "tool")
    assert tool["content"].startswith(DENIED_PREFIX), (command, tool["content"])


def test_the_refusal_names_the_path(home):
    verdict = check_allowlist("cat ~/notes/passwords.txt")
    assert not verdict and str(home / "notes" / "passwords.txt") in verdict.reason
    assert "工作目录外面" in verdict.reason


@pytest.mark.parametrize("command", ["ls", "ls -la", "cat app.py", "cat *.py | wc -l", "grep -rn hi .",
                                     "find . -name '*.py'", "head -n 1 app.py"])
def test_reads_inside_the_workspace_still_run_without_asking(home, command):
    def nobody(text):
        raise AssertionError(f"工作目录里的读不该询问：{text}")

    table = guard({"bash": _bash}, openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="x"), "auto",
                  ask=nobody)
    assert not table["bash"]({"command": command}).startswith(DENIED_PREFIX)


def _bash(args):
    return run_bash(args["command"])


def test_a_person_can_still_say_yes(home):
    """外面的读不是禁止，是先问：人答 y 就执行。"""
    table = guard({"bash": _bash}, None, "auto", ask=lambda text: "y")
    assert SENTINEL in table["bash"]({"command": "cat ~/notes/passwords.txt"})


def test_the_working_dir_is_the_handlers_own(home, tmp_path):
    """06 的 bash 在它的工作区里执行（handler.cwd）：白名单按那里判断，不按笔记本的当前目录。"""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("在工作区里\n", encoding="utf-8")
    tools = make_file_tools(workspace).handlers
    table = guard(tools, None, "auto", ask=lambda text: None)
    assert tools["bash"].cwd == workspace.resolve()
    assert table["bash"]({"command": "cat a.txt"}) == "在工作区里\n"
    refused = table["bash"]({"command": "cat ../home/notes/passwords.txt"})
    assert refused.startswith(DENIED_PREFIX) and SENTINEL not in refused
    # 当前目录（project/）里的 app.py 不在工作区里：按工作区判断，这一条要问
    assert table["bash"]({"command": f"cat {home / 'project' / 'app.py'}"}).startswith(DENIED_PREFIX)


FILE_FORMS = ["~/notes/passwords.txt", "../notes/passwords.txt", "{home}/notes/passwords.txt",
              "linked-notes/passwords.txt", "linked-home/.ssh/id_ed25519", "./../other-project/.env.local"]


@pytest.mark.parametrize("form", FILE_FORMS)
def test_read_file_stays_in_its_workspace(home, form):
    """06 的 read_file 标了只读、不审批：它自己就只读工作区里的文件，每种路径写法都一样。"""
    tools = make_file_tools(home / "project").handlers
    table = guard(tools, None, "auto", ask=lambda text: None, denied=ToolDenied)
    call = _call("read_file", {"path": form.format(home=home)})
    outcome = execute_tool_call(call, table)
    assert SENTINEL not in outcome.content
    assert outcome.layer in ("执行授权失败", "工具结果失败"), (form, outcome)


@pytest.mark.parametrize("pattern", ["~/*", "../*/*", "linked-notes/*", "linked-home/**/*", "**/*",
                                     "{home}/*", "*/passwords.txt"])
def test_glob_lists_nothing_outside_its_workspace(home, pattern):
    tools = make_file_tools(home / "project").handlers
    table = guard(tools, None, "auto", ask=lambda text: None, denied=ToolDenied)
    outcome = execute_tool_call(_call("glob", {"pattern": pattern.format(home=home)}), table)
    listed = outcome.content.splitlines()
    assert not any("passwords" in line or ".env" in line or "id_ed25519" in line for line in listed), listed


def _call(name, args):
    return SimpleNamespace(id="call_r", function=SimpleNamespace(name=name, arguments=json.dumps(args)))
