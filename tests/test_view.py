"""消息表（harness_lib.ui.view）：数据表的列与取值（表就是从它画的）、HTML 里的配对与警告、原地刷新。"""

import json
import re

import pytest
from IPython.core.displaypub import CapturingDisplayPublisher
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import display
from openai.types.chat import ChatCompletionMessage

from harness_lib.ui.view import (
    _WARN,
    COLUMNS,
    FULL_TEXT_CAP,
    SHOWN_CHARS,
    TABLE_COLUMNS,
    MessagesView,
    messages_frame,
    messages_html,
    show_messages,
    table_frame,
)


def call(cid, command="ls"):
    return {"id": cid, "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})}}


def one_turn():
    """一轮完整的对话：用户提问、助手调用工具、工具回应、助手回答。"""
    return [
        {"role": "system", "content": "你是助手"},
        {"role": "user", "content": "列出当前目录中的 Python 文件"},
        {"role": "assistant", "content": None, "tool_calls": [call("call_001", "ls *.py")]},
        {"role": "tool", "tool_call_id": "call_001", "content": "a.py\nb.py\n"},
        {"role": "assistant", "content": "有两个：a.py 和 b.py。"},
    ]


def rows_of(html):
    """按 <tr style=...> 切出表体的各行（表头行没有 style）。"""
    return html.split("<tr style=")[1:]


@pytest.fixture
def shell():
    """一个真实的 IPython shell，显示发布器换成会记录输出的那一种。"""
    existed = InteractiveShell.initialized()
    sh = InteractiveShell.instance()
    old = sh.display_pub
    pub = CapturingDisplayPublisher()
    sh.display_pub = pub
    yield sh, pub
    sh.display_pub = old
    if not existed:
        InteractiveShell.clear_instance()


# ---------------------------------------------------------------------------
# messages_frame
# ---------------------------------------------------------------------------


def test_frame_columns_and_values_for_dicts():
    df = messages_frame(one_turn())
    assert df.index.name == "pos" and list(df.reset_index().columns) == list(TABLE_COLUMNS)
    assert df.index.tolist() == [0, 1, 2, 3, 4]
    assert df["role"].tolist() == ["system", "user", "assistant", "tool", "assistant"]
    assert df.loc[2, "content"] == ""  # None 是空文字
    assert df.loc[2, "calls"] == ["call_001"] and df.loc[2, "tools"] == ["bash"]
    assert df.loc[2, "arguments"] == ['{"command": "ls *.py"}'] and df.loc[2, "answered_by"] == [3]
    assert df.loc[3, "content"] == "a.py\nb.py\n"  # 数据里是全文
    assert df.loc[3, "answers"] == ["call_001"] and df.loc[3, "answers_pos"] == 2
    assert df.loc[1, "answers"] == [] and df.loc[1, "calls"] == []
    # 表头还是五列：表是从这张 DataFrame 画出来的
    assert COLUMNS == ["pos", "role", "content", "tool_calls", "tool_call_id"]
    html = messages_html(one_turn())
    assert all(f">{h}</th>" in html for h in COLUMNS)


def test_messages_frame_is_the_frame_the_table_draws():
    import pandas as pd

    messages = one_turn()
    pd.testing.assert_frame_equal(messages_frame(messages), table_frame(messages))
    pd.testing.assert_frame_equal(messages_frame(messages), MessagesView(messages).frame)


def test_frame_display_is_capped_but_the_data_is_whole():
    df = messages_frame([{"role": "tool", "tool_call_id": "x", "content": "字" * 500}])
    assert df.loc[0, "content"] == "字" * 500
    shown = df._repr_html_()
    assert "字" * (SHOWN_CHARS - 10) in shown and "字" * (SHOWN_CHARS + 1) not in shown
    assert "字" * (SHOWN_CHARS + 1) not in repr(df)


def test_frame_shows_whole_cells_without_touching_global_options():
    import pandas as pd

    calls = [call(f"call_{i:03d}", "ls -1 *.py") for i in (1, 2)]
    frame = messages_frame([{"role": "assistant", "content": None, "tool_calls": calls}])
    assert isinstance(frame, pd.DataFrame)
    assert frame.loc[0, "calls"] == ["call_001", "call_002"]
    cell = "[" + ", ".join(frame.loc[0, "arguments"]) + "]"  # pandas 这样显示一格里的列表
    assert len(cell) > 50 and cell in repr(frame)
    # 两个调用只差在最后的 id：显示出来必须看得到
    assert "call_002" in frame._repr_html_() and "call_002" in repr(frame)
    assert pd.get_option("display.max_colwidth") == 50, "不应改动全局的 pandas 选项"
    assert isinstance(frame[frame["role"] == "assistant"], type(frame)), "筛选之后仍是同一种表"


def test_frame_accepts_sdk_objects():
    sdk = ChatCompletionMessage.model_validate({
        "role": "assistant",
        "content": None,
        "tool_calls": [call("call_a", "pwd"), call("call_b", "ls")],
    })
    msgs = [{"role": "user", "content": "你在哪个目录？"}, sdk,
            {"role": "tool", "tool_call_id": "call_a", "content": "/tmp"},
            {"role": "tool", "tool_call_id": "call_b", "content": ""}]
    df = messages_frame(msgs)
    assert df.loc[1, "role"] == "assistant"
    assert df.loc[1, "content"] == ""
    assert df.loc[1, "calls"] == ["call_a", "call_b"] and df.loc[1, "answered_by"] == [2, 3]
    assert df.loc[1, "arguments"] == ['{"command": "pwd"}', '{"command": "ls"}']
    html = messages_html(msgs)
    assert "⚠" not in html  # 两个调用都有回应


def test_frame_content_parts():
    msgs = [{"role": "user", "content": [{"type": "text", "text": "看图"},
                                         {"type": "image_url", "image_url": {"url": "data:"}}]}]
    assert messages_frame(msgs).loc[0, "content"] == "看图"


def test_frame_rejects_other_types():
    with pytest.raises(TypeError, match="第 0 条"):
        messages_frame([42])


# ---------------------------------------------------------------------------
# HTML：配对、警告、转义、大小
# ---------------------------------------------------------------------------


def test_pairing_is_shown_in_both_rows():
    html = messages_html(one_turn())
    rows = rows_of(html)
    assert len(rows) == 5
    assert "messages-view" in html
    chip = re.search(r'<span style="[^"]*">call_001</span>', rows[2]).group(0)
    assert chip in rows[3], "同一个 id 在助手行和工具行用同一个小标签"
    assert "→ 由 pos 3 回应" in rows[2]
    assert "↩ 回应 pos 2" in rows[3]
    assert "等回应" not in html and "找不到对应的调用" not in html
    # 角色计数与图例
    assert "共 5 条消息" in html and "assistant 2" in html and "tool 1" in html


def test_different_ids_get_different_colours():
    msgs = [{"role": "assistant", "tool_calls": [call("call_1"), call("call_2")]},
            {"role": "tool", "tool_call_id": "call_1", "content": "x"},
            {"role": "tool", "tool_call_id": "call_2", "content": "y"}]
    html = messages_html(msgs)
    c1 = re.search(r'<span style="([^"]*)">call_1</span>', html).group(1)
    c2 = re.search(r'<span style="([^"]*)">call_2</span>', html).group(1)
    assert c1 != c2


def test_unanswered_call_is_flagged():
    msgs = one_turn()[:3]
    html = messages_html(msgs)
    assert "等回应" in rows_of(html)[2] and _WARN not in rows_of(html)[2], "还没回应是一轮中间的正常状态，不标成错误"
    assert "有 1 个工具调用还没有回应" in html
    assert "有 1 个工具调用还没有回应" in repr(MessagesView(msgs))


def test_orphan_tool_message_is_flagged():
    msgs = one_turn()
    msgs.insert(4, {"role": "tool", "tool_call_id": "call_999", "content": "?"})
    html = messages_html(msgs)
    assert "⚠ 找不到对应的调用" in rows_of(html)[4]
    assert "有 1 条工具消息找不到对应的调用" in html


def test_html_is_escaped():
    evil = '<script>alert("x")</script>'
    msgs = [{"role": "user", "content": evil},
            {"role": "assistant", "tool_calls": [call("<b>id</b>", evil)]},
            {"role": "tool", "tool_call_id": "<b>id</b>", "content": evil * 5}]
    html = messages_html(msgs, title=evil)
    assert "<script" not in html and "<b>id</b>" not in html
    assert "&lt;script&gt;" in html


def test_300_messages_scroll_and_sticky_header():
    msgs = []
    for i in range(100):
        msgs += [{"role": "assistant", "tool_calls": [call(f"call_{i:03d}")]},
                 {"role": "tool", "tool_call_id": f"call_{i:03d}", "content": "行\n" * 50},
                 {"role": "user", "content": "继续"}]
    html = messages_html(msgs)
    assert len(rows_of(html)) == 300
    assert "max-height:420px;overflow:auto" in html
    assert "position:sticky;top:0" in html
    assert "<details><summary" in html and "<pre " in html
    # 表框底边的提示：框里还有行时看得见；行少的表没有它
    assert "position:sticky;bottom:0" in html and "↕ 共 300 条消息" in html
    assert "↕" not in messages_html(msgs[:3])


def test_full_text_is_capped():
    big = "x" * (FULL_TEXT_CAP + 30_000)
    msgs = [{"role": "tool", "tool_call_id": "c", "content": big}] * 300
    html = messages_html(msgs)
    assert "还有 30000 个字符没有嵌入" in html
    assert "全文在 messages[299] 里" in html
    assert len(html) < 1_500_000, "300 条大输出的表仍然要轻"
    # 预算先给最新的消息：最后一行嵌入了全文，第一行只有提示
    rows = rows_of(html)
    assert "x" * FULL_TEXT_CAP in rows[-1]
    assert "x" * FULL_TEXT_CAP not in rows[0]


def test_empty_list():
    assert "还没有消息" in messages_html([])
    assert messages_frame([]).shape == (0, len(TABLE_COLUMNS) - 1)
    assert "还没有消息" in repr(MessagesView([]))


def test_1000_messages_render():
    msgs = []
    for i in range(250):
        msgs += [{"role": "user", "content": f"第 {i} 问"},
                 {"role": "assistant", "tool_calls": [call(f"call_{i}")]},
                 {"role": "tool", "tool_call_id": f"call_{i}", "content": "out\n" * 100},
                 {"role": "assistant", "content": f"第 {i} 答"}]
    view = MessagesView(msgs)
    html = view._repr_html_()
    assert len(rows_of(html)) == 1000
    assert "共 1000 条消息" in html and "⚠" not in html
    assert messages_frame(msgs).shape == (1000, len(TABLE_COLUMNS) - 1)
    assert "共 1000 条消息" in repr(view)


# ---------------------------------------------------------------------------
# 原地刷新与全文
# ---------------------------------------------------------------------------


def test_update_reuses_one_display_id(shell):
    sh, pub = shell
    msgs = one_turn()[:2]
    view = show_messages(msgs, title="第一轮")
    assert len(pub.outputs) == 1
    first = pub.outputs[0]
    display_id = first["transient"]["display_id"]
    assert display_id == view.display_id and first["update"] is False
    assert "text/html" in first["data"] and "text/plain" in first["data"]
    assert "第一轮" in first["data"]["text/html"]

    msgs.extend(one_turn()[2:])  # 同一个列表往后追加
    view.update()
    view.update()
    assert len(pub.outputs) == 3
    for out in pub.outputs[1:]:
        assert out["transient"]["display_id"] == display_id
        assert out["update"] is True
    assert len(rows_of(pub.outputs[-1]["data"]["text/html"])) == 5

    # 同一格里再显示一次（比如 show_messages 写在最后一行）：只原地刷新，不多出一张
    display(view)
    assert pub.outputs[-1]["update"] is True
    assert pub.outputs[-1]["transient"]["display_id"] == display_id

    # 在后面的格子里显示：那里出现一张新的活表
    sh.execution_count += 1
    display(view)
    assert pub.outputs[-1]["update"] is False
    assert view.display_id != display_id


def test_a_table_is_a_snapshot_of_its_own_cell(shell):
    sh, pub = shell
    msgs = one_turn()[:2]
    view = show_messages(msgs)  # 第 N 格：两条消息
    first_id = view.display_id
    shown = len(pub.outputs)

    sh.execution_count += 1  # 第 N+1 格：循环往同一个列表追加，再刷新
    msgs.extend(one_turn()[2:])
    view.update()
    view.update()
    new_outputs = pub.outputs[shown:]
    # 前一格那张表一次也没有被改写
    assert all(out["transient"]["display_id"] != first_id for out in new_outputs)
    assert new_outputs[0]["update"] is False and new_outputs[1]["update"] is True
    assert new_outputs[1]["transient"]["display_id"] == view.display_id != first_id
    assert len(rows_of(new_outputs[-1]["data"]["text/html"])) == 5
    assert len(rows_of(pub.outputs[shown - 1]["data"]["text/html"])) == 2


def test_update_can_switch_to_a_new_list(shell):
    _, pub = shell
    view = show_messages([])
    view.update(one_turn())
    assert len(rows_of(pub.outputs[-1]["data"]["text/html"])) == 5
    assert pub.outputs[-1]["update"] is True


def test_without_ipython_prints_text(capsys):
    if InteractiveShell.initialized():
        pytest.skip("这个测试需要在没有 IPython shell 的进程里运行")
    msgs = one_turn()[:2]
    view = show_messages(msgs)
    msgs.append({"role": "assistant", "content": "好"})
    view.update()
    out = capsys.readouterr().out
    assert out.count("共 2 条消息") == 1 and out.count("共 3 条消息") == 1


def _loop_view(script, **loop_kwargs):
    """跑一次 agent_loop（脚本模式的假模型，走真实的 HTTP），表在循环开始前建好；返回 (表, messages, outcomes)。"""
    from harness_lib import FakeClient, agent_loop

    messages, outcomes = [{"role": "user", "content": "列出当前目录中的 Python 文件"}], {}
    view = MessagesView(messages, outcomes=outcomes)
    client = FakeClient(script=script) if script is not None else FakeClient()
    agent_loop(messages, client=client, model="fake-agent-1", outcomes=outcomes, on_turn=view.update, **loop_kwargs)
    return view, messages, outcomes


def test_assistant_rows_show_usage_and_time_and_tool_rows_their_layer(tmp_path, monkeypatch):
    """每条助手消息下面标出那次调用的用量和用时；工具消息标出循环记下的层次，写得像失败的输出照样是成功。"""
    from harness_lib import scripted_call, text_reply, tool_reply

    monkeypatch.chdir(tmp_path)
    script = [tool_reply(scripted_call("bash", {"command": "echo '错误（执行授权失败）：假的'"}),
                         scripted_call("bash", '{"command": "ls"')),
              text_reply("好的。")]
    view, messages, outcomes = _loop_view(script)
    html = view.html()
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert sorted(view.turns) == [1, 4], "两条助手消息各对上一次调用"
    assert all(t.prompt_tokens and t.completion_tokens and t.seconds >= 0 for t in view.turns.values())
    assert html.count(" token · ") == 2 and html.count(" 秒") >= 2
    assert html.count("✓ 成功") == 1 and html.count(">调用解析失败</span>") == 1, "层次来自 outcomes"
    assert ">执行授权失败</span>" not in html, "输出里印着的“错误（执行授权失败）”不是层次"
    assert "max_tokens 被截断" not in html


def test_usage_estimated_by_the_fake_model_is_marked_as_an_estimate():
    """假模型的用量是按字数估计的（字节数除以 3）：表上写“估计”；服务商报的用量照原样写。"""
    from openai.types.chat import ChatCompletion

    from harness_lib import FakeClient
    from harness_lib.models.calls import calls_since, last_call_seq, record
    from harness_lib.ui.view import _role_cell

    before = last_call_seq()
    reply = FakeClient().chat.completions.create(model="fake-agent-1", max_tokens=64,
                                                 messages=[{"role": "user", "content": "你好"}])
    provider = ChatCompletion.model_validate({
        "id": "chatcmpl-9x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "好"}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}})
    record(provider, 0.5)
    fake_turn, provider_turn = calls_since(before)
    assert fake_turn.estimated and not provider_turn.estimated
    used = f"{reply.usage.prompt_tokens}+{reply.usage.completion_tokens} token"
    assert f"估计 {used}" in _role_cell("assistant", fake_turn)
    assert "9+2 token" in _role_cell("assistant", provider_turn) and "估计" not in _role_cell("assistant", provider_turn)


def test_a_reply_cut_at_max_tokens_is_marked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    view, messages, _ = _loop_view(None, max_tokens=5, max_turns=2)
    assert "⚠ 写到 max_tokens 被截断" in view.html()
    assert [t.finish_reason for t in view.turns.values()][-1] == "length"


def test_a_table_opened_after_the_calls_marks_nothing(tmp_path, monkeypatch):
    """表建好之前的调用不算它的：宁可空着，也不把用量标到别的消息上。"""
    from harness_lib import scripted_call, text_reply, tool_reply

    monkeypatch.chdir(tmp_path)
    _, messages, outcomes = _loop_view([tool_reply(scripted_call("bash", {"command": "echo 好"})), text_reply("好的。")])
    later = MessagesView(messages)
    assert later.turns == {} and " token · " not in later.html()
    assert "✓ 成功" not in later.html(), "没传 outcomes 就不标层次"
    assert "✓ 成功" in MessagesView(messages, outcomes=outcomes).html()


def test_a_rolled_back_reply_keeps_no_usage_for_the_row_that_replaces_it(tmp_path, monkeypatch):
    """run_loop 退回记录、换【脚本示范】重跑：新的助手消息对上新的调用，不沿用被退回的那一条的用量。"""
    from harness_lib import FakeClient, agent_loop, run_loop, text_reply
    from harness_lib.models.calls import last_call_seq

    monkeypatch.chdir(tmp_path)
    messages, outcomes = [{"role": "user", "content": "列出当前目录中的 Python 文件"}], {}
    view = MessagesView(messages, outcomes=outcomes)
    before = last_call_seq()
    talker = FakeClient(script=[text_reply("你可以运行 ls *.py 看看。")])
    run = run_loop(agent_loop, messages, client=talker, model="m", want="tools", outcomes=outcomes,
                   on_turn=view.update, quiet=True)
    assert run.scripted
    assistants = [pos for pos, m in enumerate(messages) if m["role"] == "assistant"]
    view.html()
    assert sorted(view.turns) == assistants, "假模型那一遍的每条助手消息都对上了自己的调用"
    assert [view.turns[p].seq for p in assistants] == [before + 2 + i for i in range(len(assistants))], \
        "第 1 次调用是被退回的那一条，不标在任何一行上"


def test_a_direct_sdk_call_on_the_series_clients_is_marked_too():
    """03 的 simple_loop 直接调 client.chat.completions.create：假模型和切换器的客户端自己记下用量，表照样标出。"""
    from harness_lib import TOOLS, FakeClient

    messages = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
    view = MessagesView(messages)
    client = FakeClient()
    reply = client.chat.completions.create(model="fake-agent-1", messages=messages, tools=TOOLS, max_tokens=512)
    messages.append(reply.choices[0].message.model_dump(exclude_none=True))
    view.update()
    (turn,) = view.turns.values()
    assert (turn.prompt_tokens, turn.completion_tokens) == (reply.usage.prompt_tokens, reply.usage.completion_tokens)
    assert turn.finish_reason == reply.choices[0].finish_reason


# ---------------------------------------------------------------------------
# 标题说回复来自谁：所选模型，还是【脚本示范】
# ---------------------------------------------------------------------------


def test_a_loop_table_says_whose_replies_it_shows(tmp_path, monkeypatch):
    """run_loop 换【脚本示范】重跑时，表的标题和每条假模型的助手消息都标出来；下一格所选模型自己跑通，标题说是它。"""
    from harness_lib import FakeClient, agent_loop, run_loop

    monkeypatch.chdir(tmp_path)
    talker = FakeClient(model="fake-talk-only")
    messages = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
    view = MessagesView(messages, title="循环")
    run = run_loop(agent_loop, messages, client=talker, model="fake-talk-only", want="tools",
                   on_turn=view.update, quiet=True)
    assert run.scripted
    assistants = [pos for pos, m in enumerate(messages) if m["role"] == "assistant"]
    assert view.scripted_positions() == assistants
    html = view.html()
    assert "循环 · 回复来自【脚本示范】的假模型（所选模型 fake-talk-only 没给出要的回复）" in html
    assert html.count("【脚本示范】</span>") == len(assistants), "每条假模型的助手消息都标出来"
    assert "回复来自【脚本示范】" in repr(view)

    again = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
    own = MessagesView(again)
    run = run_loop(agent_loop, again, client=FakeClient(), model="fake-agent-1", want="tools",
                   on_turn=own.update, quiet=True)
    assert not run.scripted and own.scripted_positions() == []
    assert "<b>回复来自所选模型 fake-agent-1</b> · 共 4 条消息" in own.html() and "【脚本示范】" not in own.html()


def test_a_chat_table_names_the_positions_the_script_answered():
    """Chat 的一步走了【脚本示范】、下一步所选模型自己答了：同一张表的标题说哪几条来自【脚本示范】。"""
    from harness_lib import TOOLS, Chat, FakeClient

    talker = FakeClient(model="fake-talk-only")
    chat = Chat(talker, "fake-talk-only")
    messages = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
    view = MessagesView(messages, chat=chat)
    assert view.whose() == "回复来自所选模型 fake-talk-only"
    reply = chat.ask(messages, want="bash", tools=TOOLS, quiet=True).choices[0].message
    messages += [reply.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": reply.tool_calls[0].id, "content": "app.py"}]
    assert view.whose().startswith("回复来自【脚本示范】")
    messages.append(chat.ask(messages, want="text", tools=TOOLS, quiet=True).choices[0].message)
    assert view.scripted_positions() == [1]
    assert view.whose() == "回复来自所选模型 fake-talk-only，pos 1 来自【脚本示范】"
    assert MessagesView(messages).whose() is None, "不知道所选模型的表不说"


def test_a_loop_on_a_scripted_fake_names_no_chosen_model(tmp_path, monkeypatch):
    """笔记本自己写的脚本不是谁选的模型：表的标题不说“所选模型”。"""
    from harness_lib import FakeClient, agent_loop, run_loop, text_reply

    monkeypatch.chdir(tmp_path)
    messages = [{"role": "user", "content": "你好"}]
    view = MessagesView(messages, title="脚本")
    run_loop(agent_loop, messages, client=FakeClient(script=[text_reply("好。")]), model="m", on_turn=view.update,
             quiet=True)
    assert view.whose() is None and "所选模型" not in view.html()


# ---------------------------------------------------------------------------
# 另外两种线路格式：Responses 的输入条目、Anthropic 的消息
# ---------------------------------------------------------------------------


def fc(cid, command="ls"):
    return {"type": "function_call", "call_id": cid, "name": "bash", "arguments": json.dumps({"command": command})}


def responses_turn():
    """Responses API 的一轮：用户条目、推理条目、两个调用、两条输出（倒着回应）、助手的回答。"""
    return [
        {"role": "user", "content": "列出当前目录中的 Python 文件"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "先看看有哪些文件"}],
         "encrypted_content": "gAAAAB" + "x" * 200},
        fc("call_a", "ls *.py"), fc("call_b", "pwd"),
        {"type": "function_call_output", "call_id": "call_b", "output": "/tmp/work"},
        {"type": "function_call_output", "call_id": "call_a", "output": "a.py\nb.py\n"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "有 a.py 和 b.py。"}]},
    ]


def test_responses_items_pair_by_call_id():
    html = messages_html(responses_turn(), api="responses")
    rows = rows_of(html)
    assert len(rows) == 7 and "共 7 个条目" in html
    assert "<th" in html and ">call_id</th>" in html and ">type · role</th>" in html
    assert "同色小标签 = 同一个 call_id" in html
    chip_a = re.search(r'<span style="[^"]*">call_a</span>', rows[2]).group(0)
    assert chip_a in rows[5] and chip_a not in rows[4], "同一个 call_id 同一个小标签"
    assert "→ 由 pos 5 回应" in rows[2] and "↩ 回应 pos 2" in rows[5]
    assert "→ 由 pos 4 回应" in rows[3] and "↩ 回应 pos 3" in rows[4]
    assert "等回应" not in html and "找不到对应的调用" not in html
    assert "function_call 2" in html and "function_call_output 2" in html and "reasoning 1" in html


def test_responses_reasoning_item_shows_summary_and_a_preview_of_the_encrypted_content():
    row = rows_of(messages_html(responses_turn(), api="responses"))[1]
    assert "<b>reasoning</b>" in row and "先看看有哪些文件" in row
    assert "encrypted_content" in row and "gAAAABxxxxxxxxxx…（共 206 个字符，原样带回）" in row
    assert "x" * 100 not in row, "加密内容只给开头"


def test_responses_unanswered_and_orphan_items_are_flagged():
    items = responses_turn()[:4] + [{"type": "function_call_output", "call_id": "call_zzz", "output": "?"}]
    html = messages_html(items, api="responses")
    rows = rows_of(html)
    assert "等回应" in rows[2] and "等回应" in rows[3]
    assert "有 2 个工具调用还没有回应" in html
    assert "⚠ 找不到对应的调用" in rows[4]
    assert "⚠ 有 1 个 function_call_output 条目找不到对应的调用：call_zzz（pos 4）" in html
    missing = messages_html([{"type": "function_call_output", "output": "?"}], api="responses")
    assert "⚠ 缺少 call_id" in missing
    text = repr(MessagesView(items, api="responses"))
    assert "共 5 个条目：user → reasoning → function_call → function_call → function_call_output" in text
    assert "有 2 个工具调用还没有回应" in text and "找不到对应的调用" in text


def test_responses_sdk_output_items_are_read_like_dicts():
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage

    call_item = ResponseFunctionToolCall(type="function_call", call_id="call_x", name="bash",
                                         arguments='{"command": "ls"}', id="fc_1", status="completed")
    said = ResponseOutputMessage.model_validate({"id": "msg_1", "type": "message", "role": "assistant",
                                                 "status": "completed", "content": [
                                                     {"type": "output_text", "text": "好的", "annotations": []}]})
    items = [{"role": "user", "content": "?"}, call_item,
             {"type": "function_call_output", "call_id": "call_x", "output": "a.py"}, said]
    html = messages_html(items, api="responses")
    assert "↩ 回应 pos 1" in html and "好的" in html and "⚠" not in html


def anthropic_turn():
    """Anthropic Messages API 的一轮：助手一条消息里有思考块、文字和两个 tool_use，用户一条消息里两个 tool_result。"""
    return [
        {"role": "user", "content": "列出当前目录中的 Python 文件，再看看在哪个目录"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "要跑两条命令", "signature": "EqQBCkYIBRgCKkA" + "s" * 100},
            {"type": "text", "text": "我来看看。"},
            {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls *.py"}},
            {"type": "tool_use", "id": "toolu_2", "name": "bash", "input": {"command": "pwd"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "/tmp/work"},
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "错误：没有匹配的文件", "is_error": True}]},
        {"role": "assistant", "content": [{"type": "text", "text": "当前目录里没有 Python 文件。"}]},
    ]


def test_anthropic_tool_use_pairs_with_tool_results_in_one_user_message():
    html = messages_html(anthropic_turn(), api="messages")
    rows = rows_of(html)
    assert len(rows) == 4 and "共 4 条消息" in html and ">tool_use_id</th>" in html and ">tool_use</th>" in html
    assert "同色小标签 = 同一个 tool_use_id" in html
    chip_1 = re.search(r'<span style="[^"]*">toolu_1</span>', rows[1]).group(0)
    chip_2 = re.search(r'<span style="[^"]*">toolu_2</span>', rows[1]).group(0)
    assert chip_1 != chip_2 and chip_1 in rows[2] and chip_2 in rows[2], "一条用户消息回应两个调用"
    assert rows[1].count("→ 由 pos 2 回应") == 2 and rows[2].count("↩ 回应 pos 1") == 2
    assert rows[1].count("{&quot;command&quot;") == 2, "input 是对象，写成 JSON"
    assert ">is_error</span>" in rows[2] and rows[2].index("toolu_2") < rows[2].index("is_error"), \
        "is_error 标在它自己那个回应上"
    assert "⚠" not in html and "等回应" not in html
    assert "tool_result" in rows[2] and "/tmp/work" in rows[2]
    assert "background:#fff5dc" in rows[2], "只装着 tool_result 的用户消息用工具的底色"


def test_anthropic_thinking_block_shows_text_and_a_preview_of_the_signature():
    row = rows_of(messages_html(anthropic_turn(), api="messages"))[1]
    assert "thinking" in row and "要跑两条命令" in row and "我来看看。" in row
    assert "signature" in row and "EqQBCkYIBRgCKkAs…（共 115 个字符，原样带回）" in row


def test_anthropic_unanswered_and_orphan_results_are_flagged():
    msgs = anthropic_turn()[:2] + [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"},
        {"type": "tool_result", "tool_use_id": "toolu_9", "content": "?"}]}]
    html = messages_html(msgs, api="messages")
    rows = rows_of(html)
    assert "等回应" in rows[1] and "有 1 个工具调用还没有回应" in html and "补齐）：toolu_2（pos 1）" in html
    assert "↩ 回应 pos 1" in rows[2] and "⚠ 找不到对应的调用" in rows[2]
    assert "⚠ 有 1 个 tool_result 块找不到对应的调用：toolu_9（pos 2）" in html


def test_an_unknown_api_is_refused_in_chinese():
    with pytest.raises(ValueError, match="api 只能是"):
        messages_html([], api="completions")
    assert "还没有条目" in messages_html([], api="responses")


def test_show_items_is_a_live_table(shell):
    from harness_lib import show_items

    _, pub = shell
    items = responses_turn()[:3]
    view = show_items(items, title="Responses")
    assert "Responses" in pub.outputs[-1]["data"]["text/html"] and "等回应" in pub.outputs[-1]["data"]["text/html"]
    items.extend(responses_turn()[3:])
    view.update()
    assert pub.outputs[-1]["update"] is True and len(rows_of(pub.outputs[-1]["data"]["text/html"])) == 7
    assert "共 7 个条目" in pub.outputs[-1]["data"]["text/plain"]
    messages = show_items(anthropic_turn(), api="messages")
    assert messages.api == "messages" and "共 4 条消息" in pub.outputs[-1]["data"]["text/html"]


def test_scripted_rows_in_an_items_table_are_the_model_output_items():
    class Stub:
        model = "some-model"
        scripted_replies = [fc("call_a", "ls *.py")]

    view = MessagesView(responses_turn(), api="responses", chat=Stub())
    assert view.scripted_positions() == [2]
    assert view.whose() == "回复来自所选模型 some-model，pos 2 来自【脚本示范】"
    assert view.turns == {}, "用量记录只对得上 chat.completions 的调用"


def test_the_live_table_is_a_dataframe_the_learner_can_query():
    """`view.frame`：表上画的配对、用量、层次都是 DataFrame 的列，可以直接查询。"""
    from harness_lib import FakeClient, agent_loop, scripted_call, text_reply, tool_reply

    messages = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
    outcomes = {}
    view = show_messages(messages, outcomes=outcomes)
    fake = FakeClient(script=[tool_reply(scripted_call("bash", {"command": "ls"}),
                                         scripted_call("bash", "{坏了")), text_reply("好了")])
    agent_loop(messages, client=fake, model="fake-agent-1", on_turn=view.update, outcomes=outcomes)
    frame = view.frame
    assert list(frame.index) == list(range(len(messages))) and list(frame.role) == [
        "user", "assistant", "tool", "tool", "assistant"]
    assert frame.loc[1, "calls"] == ["call_001", "call_002"] and frame.loc[1, "answered_by"] == [2, 3]
    assert list(frame.query("role == 'tool'").answers_pos) == [1, 1]
    assert frame.loc[3, "layer"] == "调用解析失败" and frame.loc[2, "layer"] == "成功"
    assistant = frame[frame.role == "assistant"]
    assert assistant.completion_tokens.notna().all() and assistant.estimated.all(), "假模型的用量是估计的"
    assert frame.completion_tokens.sum() == assistant.completion_tokens.sum()
    assert frame.loc[4, "content"] == "好了" and not frame.scripted.any()
