"""`harness_lib/lesson/tools.py` 的测试：真实文件放在 tmp_path 里，bash 用真实子进程。

工作区放在 tmp_path/ws，工作区外面的东西放在 tmp_path/outside，
每个逃逸测试都检查外面的文件没有被读到、也没有被写出来。
"""

import json
import os

import pytest
from openai.types.chat import ChatCompletionMessageFunctionToolCall

from harness_lib import FakeClient, text_reply, scripted_call, tool_reply
from harness_lib.lesson.loop import (
    TOOLS,
    ToolDenied,
    ToolInputError,
    agent_loop,
    Outcome,
    check_transcript,
    execute_tool_call,
)
from harness_lib.lesson.tools import (
    MAX_READ_CHARS,
    ToolFailed,
    ToolRegistry,
    Workspace,
    make_file_tools,
    string_arg,
)

FIVE = ["bash", "read_file", "write_file", "edit_file", "glob"]


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    (root / "data").mkdir(parents=True)
    (root / "app.py").write_text('print("hi")\n', encoding="utf-8")
    (root / "utils.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    (root / "data" / "notes.txt").write_text("第一行\n第二行\n", encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("不该被读到", encoding="utf-8")
    return root, outside


@pytest.fixture
def tools(ws):
    return make_file_tools(ws[0]).handlers


def _symlink(link, target, target_is_directory=False):
    try:
        os.symlink(target, link, target_is_directory=target_is_directory)
    except (OSError, NotImplementedError) as exc:  # Windows 上没有权限建符号链接
        pytest.skip(f"不能创建符号链接：{exc}")


def _call(handlers, name, **args):
    """像循环那样执行一个调用：构造真正的 SDK 工具调用对象，交给 execute_tool_call。"""
    tc = ChatCompletionMessageFunctionToolCall.model_validate(scripted_call(name, args, id="call_t"))
    return execute_tool_call(tc, handlers)


# ---------------------------------------------------------------------------
# 注册表
# ---------------------------------------------------------------------------


def test_registry_produces_tools_and_handlers_from_one_place():
    reg = ToolRegistry()
    params = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}

    @reg.register("echo", "原样返回 x", params)
    def echo(args):
        return args["x"]

    assert echo({"x": "a"}) == "a", "装饰器应当原样返回函数"
    assert reg.tools == [{"type": "function",
                          "function": {"name": "echo", "description": "原样返回 x", "parameters": params}}]
    assert reg.handlers == {"echo": echo}
    assert len(reg) == 1 and "echo" in reg and "nope" not in reg


def test_registry_refuses_duplicate_and_bad_names():
    reg = ToolRegistry()
    reg.register("a", "d", {"type": "object", "properties": {}})(lambda args: "")
    with pytest.raises(ValueError):
        reg.register("a", "d", {"type": "object", "properties": {}})
    for bad in ["", "has space", "点", "x" * 65, "a.b"]:
        with pytest.raises(ValueError):
            reg.register(bad, "d", {"type": "object", "properties": {}})


def test_five_tools_in_order_with_valid_schemas(ws):
    reg = make_file_tools(ws[0])
    assert [t["function"]["name"] for t in reg.tools] == FIVE
    assert list(reg.handlers) == FIVE
    for t in reg.tools:
        fn = t["function"]
        assert t["type"] == "function" and fn["description"]
        params = fn["parameters"]
        assert params["type"] == "object"
        assert set(params["required"]) <= set(params["properties"])
        for prop in params["properties"].values():
            assert prop["type"] == "string" and prop["description"]


def test_schemas_are_accepted_by_fake_client_requests(ws):
    reg = make_file_tools(ws[0])
    client = FakeClient(script=[text_reply("好")])
    response = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "你好"}], tools=reg.tools
    )
    assert response.choices[0].message.content == "好"
    assert client.last_request["tools"] == reg.tools
    # 默认策略的假模型也接受，并且照样选 bash
    response = FakeClient().chat.completions.create(
        model="m", messages=[{"role": "user", "content": "列出当前目录中的 Python 文件"}],
        tools=reg.tools,
    )
    assert response.choices[0].message.tool_calls[0].function.name == "bash"


def test_each_registry_is_bound_to_its_own_root(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "only_a.txt").write_text("A", encoding="utf-8")
    ha, hb = make_file_tools(a).handlers, make_file_tools(b).handlers
    assert ha["read_file"]({"path": "only_a.txt"}) == "A"
    with pytest.raises(ToolFailed):
        hb["read_file"]({"path": "only_a.txt"})


# ---------------------------------------------------------------------------
# 每个工具的正常行为
# ---------------------------------------------------------------------------


def test_read_file(tools):
    assert tools["read_file"]({"path": "app.py"}) == 'print("hi")\n'
    assert tools["read_file"]({"path": "data/notes.txt"}) == "第一行\n第二行\n"
    assert tools["read_file"]({"path": "./data/../app.py"}) == 'print("hi")\n'


def test_read_file_absolute_path_inside_is_fine(ws, tools):
    assert tools["read_file"]({"path": str(ws[0] / "app.py")}) == 'print("hi")\n'


def test_read_file_empty_long_and_binary(ws, tools):
    root = ws[0]
    (root / "empty.txt").write_bytes(b"")
    assert tools["read_file"]({"path": "empty.txt"}) == "（空文件）"
    (root / "long.txt").write_text("x" * (MAX_READ_CHARS + 10), encoding="utf-8")
    out = tools["read_file"]({"path": "long.txt"})
    assert out.startswith("x" * MAX_READ_CHARS) and "只返回了前" in out
    # 工具定义照实告诉模型：不总是全文
    (read_file,) = [t for t in make_file_tools(root).tools if t["function"]["name"] == "read_file"]
    assert str(MAX_READ_CHARS) in read_file["function"]["description"]
    (root / "bin.dat").write_bytes(b"\xff\xfeok")
    assert "ok" in tools["read_file"]({"path": "bin.dat"})


def test_read_file_failures(tools):
    with pytest.raises(ToolFailed):
        tools["read_file"]({"path": "nope.txt"})
    with pytest.raises(ToolFailed):
        tools["read_file"]({"path": "data"})
    with pytest.raises(ToolInputError):
        tools["read_file"]({})
    with pytest.raises(ToolInputError):
        tools["read_file"]({"path": 3})
    with pytest.raises(ToolInputError):
        tools["read_file"]({"path": ""})
    with pytest.raises(ToolInputError):
        tools["read_file"]({"path": "a\x00b"})


def test_write_file_creates_parents_and_overwrites(ws, tools):
    root = ws[0]
    assert tools["write_file"]({"path": "new/deep/todo.txt", "content": "一\r\n二"}) == (
        "已写入 new/deep/todo.txt：4 个字符"
    )
    assert (root / "new/deep/todo.txt").read_bytes() == "一\r\n二".encode("utf-8")
    tools["write_file"]({"path": "app.py", "content": ""})
    assert (root / "app.py").read_bytes() == b""


def test_write_file_failures(tools):
    with pytest.raises(ToolInputError):
        tools["write_file"]({"path": "x.txt"})
    with pytest.raises(ToolInputError):
        tools["write_file"]({"path": "x.txt", "content": 5})
    with pytest.raises(ToolFailed):
        tools["write_file"]({"path": "data", "content": "x"})


def test_edit_file_replaces_exactly_once(ws, tools):
    root = ws[0]
    assert tools["edit_file"]({"path": "utils.py", "old_string": "return 1", "new_string": "return 2"}) == (
        "已修改 utils.py：替换了 1 处"
    )
    assert (root / "utils.py").read_text(encoding="utf-8") == "def f():\n    return 2\n"
    # new_string 可以为空：删除
    tools["edit_file"]({"path": "data/notes.txt", "old_string": "第二行\n", "new_string": ""})
    assert (root / "data/notes.txt").read_text(encoding="utf-8") == "第一行\n"


def test_edit_file_keeps_crlf(ws, tools):
    root = ws[0]
    (root / "win.txt").write_bytes(b"a\r\nb\r\n")
    tools["edit_file"]({"path": "win.txt", "old_string": "b", "new_string": "c"})
    assert (root / "win.txt").read_bytes() == b"a\r\nc\r\n"


def test_edit_file_missing_old_string(ws, tools):
    before = (ws[0] / "app.py").read_bytes()
    with pytest.raises(ToolFailed, match="找不到"):
        tools["edit_file"]({"path": "app.py", "old_string": "print('hi')", "new_string": "x"})
    assert (ws[0] / "app.py").read_bytes() == before


def test_edit_file_ambiguous_old_string(ws, tools):
    root = ws[0]
    (root / "twice.py").write_text("x = 1\nx = 1\n", encoding="utf-8")
    with pytest.raises(ToolFailed, match="不止一次"):
        tools["edit_file"]({"path": "twice.py", "old_string": "x = 1", "new_string": "x = 2"})
    assert (root / "twice.py").read_text(encoding="utf-8") == "x = 1\nx = 1\n"
    # 带上下文之后就唯一了
    tools["edit_file"]({"path": "twice.py", "old_string": "1\nx = 1", "new_string": "1\nx = 2"})
    assert (root / "twice.py").read_text(encoding="utf-8") == "x = 1\nx = 2\n"


def test_edit_file_overlapping_occurrences_are_ambiguous(ws, tools):
    (ws[0] / "aaa.txt").write_text("aaa", encoding="utf-8")
    # str.count 只数出 1 处不重叠的 "aa"，但它其实出现在两个位置
    with pytest.raises(ToolFailed, match="不止一次"):
        tools["edit_file"]({"path": "aaa.txt", "old_string": "aa", "new_string": "b"})


def test_edit_file_bad_arguments(ws, tools):
    with pytest.raises(ToolInputError):
        tools["edit_file"]({"path": "app.py", "old_string": "", "new_string": "x"})
    with pytest.raises(ToolInputError):
        tools["edit_file"]({"path": "app.py", "old_string": "hi", "new_string": "hi"})
    with pytest.raises(ToolInputError):
        tools["edit_file"]({"path": "app.py", "old_string": "hi"})
    with pytest.raises(ToolFailed):
        tools["edit_file"]({"path": "nope.py", "old_string": "a", "new_string": "b"})
    (ws[0] / "bin.dat").write_bytes(b"\xff\xfe")
    with pytest.raises(ToolFailed, match="UTF-8"):
        tools["edit_file"]({"path": "bin.dat", "old_string": "a", "new_string": "b"})


def test_glob_results_are_relative_to_root(ws, tools):
    assert tools["glob"]({"pattern": "*.py"}).splitlines() == ["app.py", "utils.py"]
    assert tools["glob"]({"pattern": "**/*.txt"}).splitlines() == ["data/notes.txt"]
    assert tools["glob"]({"pattern": "*"}).splitlines() == ["app.py", "data/", "utils.py"]
    assert tools["glob"]({"pattern": "*.rs"}) == "（没有匹配的文件）"
    assert str(ws[0]) not in tools["glob"]({"pattern": "**/*"})


def test_glob_bad_patterns(tools):
    with pytest.raises(ToolInputError):
        tools["glob"]({"pattern": ""})
    with pytest.raises(ToolInputError):
        tools["glob"]({"pattern": "**a"})
    with pytest.raises(ToolInputError):
        tools["glob"]({})


def test_bash_runs_in_the_workspace(ws, tools, tmp_path, monkeypatch):
    if os.name == "nt":
        pytest.skip("命令是 POSIX shell 写法")
    monkeypatch.chdir(tmp_path)  # 当前目录不是工作区，bash 也应当在工作区里跑
    assert tools["bash"]({"command": "ls *.py"}).split() == ["app.py", "utils.py"]
    # 黑名单在处理函数之前由 execute_tool_call 查（04），处理函数本身只管执行
    denied = _call(tools, "bash", command="sudo ls")
    assert denied.layer == "执行授权失败" and denied.content.startswith("错误（执行授权失败）：命令里有被禁止的片段")
    failed = _call(tools, "bash", command="ls 没有这个文件")
    assert failed.layer == "工具结果失败" and failed.content.endswith("[退出码 2]")
    with pytest.raises(ToolInputError):
        tools["bash"]({"command": ["ls"]})


# ---------------------------------------------------------------------------
# 逃出工作区：一律拒绝，外面什么也没被读到或写出
# ---------------------------------------------------------------------------

ESCAPES = ["../outside/secret.txt", "data/../../outside/secret.txt", "./../ws/../outside/secret.txt"]


@pytest.mark.parametrize("path", ESCAPES)
def test_dotdot_escapes_are_denied(path, tools, ws):
    with pytest.raises(ToolDenied):
        tools["read_file"]({"path": path})
    with pytest.raises(ToolDenied):
        tools["write_file"]({"path": path.replace("secret", "new"), "content": "x"})
    with pytest.raises(ToolDenied):
        tools["edit_file"]({"path": path, "old_string": "不该", "new_string": "x"})
    assert sorted(p.name for p in ws[1].iterdir()) == ["secret.txt"]
    assert (ws[1] / "secret.txt").read_text(encoding="utf-8") == "不该被读到"


def test_absolute_path_outside_is_denied(ws, tools):
    outside = ws[1]
    with pytest.raises(ToolDenied):
        tools["read_file"]({"path": str(outside / "secret.txt")})
    with pytest.raises(ToolDenied):
        tools["write_file"]({"path": str(outside / "new.txt"), "content": "x"})
    assert not (outside / "new.txt").exists()


def test_prefix_sibling_is_outside(tmp_path):
    # /x/ws 与 /x/ws2：字符串前缀相同，却是两个目录
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws2").mkdir()
    (tmp_path / "ws2" / "f.txt").write_text("x", encoding="utf-8")
    h = make_file_tools(tmp_path / "ws").handlers
    with pytest.raises(ToolDenied):
        h["read_file"]({"path": "../ws2/f.txt"})
    with pytest.raises(ToolDenied):
        h["read_file"]({"path": str(tmp_path / "ws2" / "f.txt")})


def test_symlinked_dir_pointing_outside_is_denied(ws, tools):
    root, outside = ws
    _symlink(root / "link", outside, target_is_directory=True)
    with pytest.raises(ToolDenied):
        tools["read_file"]({"path": "link/secret.txt"})
    with pytest.raises(ToolDenied):
        tools["write_file"]({"path": "link/new.txt", "content": "x"})
    with pytest.raises(ToolDenied):
        tools["edit_file"]({"path": "link/secret.txt", "old_string": "不该", "new_string": "x"})
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_dangling_symlink_pointing_outside_is_denied(ws, tools):
    root, outside = ws
    _symlink(root / "later.txt", outside / "created.txt")
    with pytest.raises(ToolDenied):
        tools["write_file"]({"path": "later.txt", "content": "x"})
    assert not (outside / "created.txt").exists()


def test_symlink_inside_the_workspace_is_fine(ws, tools):
    root = ws[0]
    _symlink(root / "alias.py", root / "app.py")
    assert tools["read_file"]({"path": "alias.py"}) == 'print("hi")\n'


def test_root_given_through_a_symlink(ws, tmp_path):
    root = ws[0]
    _symlink(tmp_path / "via", root, target_is_directory=True)
    h = make_file_tools(tmp_path / "via").handlers
    assert h["read_file"]({"path": "app.py"}) == 'print("hi")\n'
    assert Workspace(tmp_path / "via").root == root.resolve()


def test_glob_refuses_escaping_patterns(ws, tools):
    for pattern in ["../*", "data/../../*", "../outside/*", str(ws[1] / "*"), "/*"]:
        with pytest.raises(ToolDenied):
            tools["glob"]({"pattern": pattern})


def test_glob_does_not_leak_through_symlinks(ws, tools):
    root, outside = ws
    _symlink(root / "link", outside, target_is_directory=True)
    out = tools["glob"]({"pattern": "link/*"})
    assert "secret" not in out and "略去" in out
    everything = tools["glob"]({"pattern": "**/*"})
    assert "secret" not in everything and "link" not in everything.splitlines()


def test_workspace_resolve_and_relative(ws):
    root = ws[0]
    w = Workspace(root)
    assert w.resolve(".") == root.resolve()
    assert w.resolve("data/notes.txt") == (root / "data/notes.txt").resolve()
    assert w.relative(w.resolve("data/notes.txt")) == "data/notes.txt"
    with pytest.raises(ToolDenied):
        w.resolve("..")


def test_string_arg():
    assert string_arg({"a": "x"}, "a") == "x"
    assert string_arg({"a": ""}, "a", allow_empty=True) == ""
    for args in [{}, {"a": 1}, {"a": None}, {"a": ""}]:
        with pytest.raises(ToolInputError):
            string_arg(args, "a")


# ---------------------------------------------------------------------------
# 经过 execute_tool_call：失败写明属于哪一层
# ---------------------------------------------------------------------------


def test_execute_tool_call_reports_the_layer(ws, tools):
    assert _call(tools, "read_file", path="app.py") == Outcome("成功", 'print("hi")\n')
    cases = [("执行授权失败", {"path": "../outside/secret.txt"}), ("调用解析失败", {}),
             ("工具结果失败", {"path": "nope.txt"})]
    for layer, args in cases:
        outcome = _call(tools, "read_file", **args)
        assert outcome.layer == layer and outcome.content.startswith(f"错误（{layer}）："), (layer, outcome)
    assert _call(tools, "read_file", path="nope.txt").content == "错误（工具结果失败）：nope.txt 不存在或不是文件"
    assert _call(tools, "delete_file", path="app.py").layer == "调用解析失败"


# ---------------------------------------------------------------------------
# 整个循环：同一个 agent_loop，只换 tools 和 handlers
# ---------------------------------------------------------------------------


def test_full_agent_loop_with_the_five_tools(ws):
    root, outside = ws
    reg = make_file_tools(root)
    script = [
        tool_reply(scripted_call("glob", {"pattern": "*.py"})),
        tool_reply(scripted_call("read_file", {"path": "utils.py"})),
        tool_reply(scripted_call("edit_file", {"path": "utils.py", "old_string": "return 1",
                                           "new_string": "return 42"})),
        tool_reply(scripted_call("read_file", {"path": "utils.py"}),
                   scripted_call("write_file", {"path": "../outside/x.txt", "content": "x"})),
        tool_reply(scripted_call("write_file", {"path": "NOTES.md", "content": "改好了\n"}),
                   scripted_call("bash", {"command": "cat NOTES.md" if os.name != "nt" else "type NOTES.md"})),
        text_reply("改好了：f() 现在返回 42。"),
    ]
    client = FakeClient(script=script)
    messages, outcomes = [{"role": "user", "content": "把 utils.py 里的返回值改成 42"}], {}
    turns = []
    answer = agent_loop(messages, client=client, model="fake", tools=reg.tools, outcomes=outcomes,
                        handlers=reg.handlers, on_turn=lambda m: turns.append(len(m)))
    assert answer == "改好了：f() 现在返回 42。"
    assert turns == [3, 5, 7, 10, 13, 14]
    assert client.last_request["tools"] == reg.tools
    tool_msgs = [m for m in messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == [f"call_{i:03d}" for i in range(1, 8)]
    contents = [m["content"] for m in tool_msgs]
    assert contents[0] == "app.py\nutils.py"
    assert contents[1] == "def f():\n    return 1\n"
    assert contents[2] == "已修改 utils.py：替换了 1 处"
    assert contents[3] == "def f():\n    return 42\n"
    assert contents[4].startswith("错误（执行授权失败）")
    assert contents[6].strip() == "改好了"
    assert (root / "utils.py").read_text(encoding="utf-8") == "def f():\n    return 42\n"
    assert not (outside / "x.txt").exists()
    assert [o.layer for o in outcomes.values()] == ["成功"] * 4 + ["执行授权失败"] + ["成功"] * 2
    assert all(check_transcript(messages, outcomes).values())


def test_default_fake_model_with_five_tools_answers_the_article_task(ws, monkeypatch):
    root = ws[0]
    monkeypatch.chdir(root)
    reg = make_file_tools(root)
    messages, outcomes = [{"role": "user", "content": "帮我看看当前目录里有哪些 Python 文件。"}], {}
    answer = agent_loop(messages, client=FakeClient(), model="fake", tools=reg.tools,
                        handlers=reg.handlers, outcomes=outcomes)
    assert "app.py" in answer and "utils.py" in answer
    assert all(check_transcript(messages, outcomes).values())
    # 默认参数仍然是只有 bash 的那一份：换工具靠传参，循环没改
    assert [t["function"]["name"] for t in TOOLS] == ["bash"]


def test_registry_tools_are_plain_json(ws):
    reg = make_file_tools(ws[0])
    assert json.loads(json.dumps(reg.tools, ensure_ascii=False)) == reg.tools
