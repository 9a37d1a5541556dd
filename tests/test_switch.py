"""模型切换器（harness_lib.ui.switch）和建客户端（harness_lib.ui.clients）：
默认假模型、预设、密钥不外泄、测试连接、按环境变量选模型。

测试连接用的是真实的本地端点（harness_lib.models.server），不是 mock。
错误说明和打码的测试在 test_errors.py。
"""

import json

import openai
import pytest

from conftest import key_leaks
from harness_lib.ui.clients import (
    FAKE_MODEL,
    PRESETS,
    PRESETS_BY_KEY,
    SwitchConfigError,
    client_from_env,
    needs_key,
)
from harness_lib.ui.clients import (PRESETS_CHECKED, PresetClient, check_model, closest_models, preset_for,
                                    real_client)
from harness_lib.models.server import ensure_local_server, serve, start_server
from harness_lib.models.call import RETRY_POLICY, call_model
from harness_lib.models.fake import DEFAULT_MODEL, FakeClient, FakeHandler, FakeModel
from harness_lib.models.net import free_port, is_loopback
from harness_lib.ui.switch import ModelSwitch, model_switch, presets_table
from harness_lib.models.wire import Rejected, json_response
from harness_lib.lesson.loop import TOOLS

KEY = "sk-test-7Hq2Lm9Xv4Rt8Np3Zc6Wb1"


def leaks(text, key=KEY):
    """text 里出现了密钥的哪些 6 字符片段。"""
    return key_leaks(text, key)


def all_widgets(widget):
    found = [widget]
    for child in getattr(widget, "children", ()):
        found += all_widgets(child)
    return found


def widget_state_text(switch):
    parts = []
    for w in all_widgets(switch.widget):
        parts.append(json.dumps(w.get_state(), ensure_ascii=False, default=str))
        for name in ("layout", "style"):
            sub = getattr(w, name, None)
            if sub is not None and hasattr(sub, "get_state"):
                parts.append(json.dumps(sub.get_state(), ensure_ascii=False, default=str))
    return "\n".join(parts)


def type_key(switch, key):
    """模拟学习者在密码框里输入：和前端同步过来的更新走同一条路（set_state）。"""
    switch.key_password.set_state({"value": key})


@pytest.fixture
def server():
    srv = start_server(api_key="right-key-0123456789")
    yield srv
    srv.close()


def use_endpoint(switch, base_url, model="fake-agent-1"):
    switch.preset_dropdown.value = "custom"
    switch.mode_buttons.value = "real"
    switch.base_url_text.value = base_url
    switch.model_text.value = model


def connect_with_right_key(server, model="fake-agent-1"):
    """学习者选好本地端点、填对密钥、点「测试连接」：返回状态行的文字。"""
    sw = model_switch(environ={})
    use_endpoint(sw, server.base_url, model=model)
    type_key(sw, "right-key-0123456789")
    return sw.test_connection()


# ---------------------------------------------------------------------------
# 默认状态与预设
# ---------------------------------------------------------------------------


def test_default_is_fake():
    sw = model_switch(environ={})
    assert isinstance(sw, ModelSwitch)
    assert sw.mode == "fake"
    client, model = sw.current()
    assert isinstance(client, FakeClient) and model == "fake-agent-1"
    assert sw.current()[0] is client  # 设置不变，client 也不变
    assert "假模型" in sw.status


def test_widgets_are_there():
    sw = model_switch(environ={})
    labels = [label for label, _ in sw.mode_buttons.options]
    assert labels == ["假模型（离线）", "真实端点"]
    keys = [key for _, key in sw.preset_dropdown.options]
    assert keys == [p.key for p in PRESETS]
    assert sw.test_button.description == "测试连接"
    bundle = sw._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"] == repr(sw)


@pytest.mark.parametrize("key,base_url,model", [
    ("dashscope", "https://dashscope.aliyuncs.com/compatible-mode/v1", "qwen-plus"),
    ("deepseek", "https://api.deepseek.com", "deepseek-flash"),
    ("openai", "https://api.openai.com/v1", "gpt-6-luna"),
    ("moonshot", "https://api.moonshot.cn/v1", "kimi-k2.6"),
    ("zhipu", "https://open.bigmodel.cn/api/paas/v4/", "glm-4-flash-250414"),
    ("siliconflow", "https://api.siliconflow.cn/v1", "Qwen/Qwen2.5-7B-Instruct"),
    ("ollama", "http://localhost:11434/v1", "qwen2.5:7b"),
    ("vllm", "http://localhost:8000/v1", ""),
    ("llamacpp", "http://localhost:8080/v1", ""),
])
def test_preset_fills_base_url_and_model(key, base_url, model):
    sw = model_switch(environ={})
    if key == sw.preset_dropdown.value:
        sw.preset_dropdown.value = "deepseek" if key != "deepseek" else "openai"
    sw.preset_dropdown.value = key
    assert sw.base_url_text.value == base_url
    assert sw.model_text.value == model
    assert sw.mode == "real", "选了服务商预设就切到真实端点"


def test_local_preset_gives_real_client_for_local_server():
    sw = model_switch(environ={})
    sw.preset_dropdown.value = "local"
    client, model = sw.current()
    assert isinstance(client, openai.OpenAI)
    assert str(client.base_url).rstrip("/") == ensure_local_server().rstrip("/")
    assert model == "fake-agent-1"
    assert sw.test_connection().startswith("✓")
    reply = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "你好"}])
    assert reply.model == "fake-agent-1"


def test_keyless_presets_use_placeholder_key():
    sw = model_switch(environ={})
    sw.preset_dropdown.value = "ollama"
    client, model = sw.current()
    assert client.api_key == "not-needed" and model == "qwen2.5:7b"
    assert client.max_retries == 2


# ---------------------------------------------------------------------------
# 密钥不外泄
# ---------------------------------------------------------------------------


def test_typed_key_is_moved_out_of_the_widget(monkeypatch):
    sw = model_switch(environ={})
    sent = []
    for w in all_widgets(sw.widget):
        monkeypatch.setattr(w, "_send", lambda msg, buffers=None, _s=sent: _s.append(msg))
    sw.preset_dropdown.value = "deepseek"
    type_key(sw, KEY)
    assert sw.key_password.value == ""
    assert sw.key_password.placeholder == "已设置密钥（不会显示或保存）"
    assert sw._typed_key == KEY
    assert not leaks(widget_state_text(sw))
    assert not leaks(json.dumps(sent, ensure_ascii=False, default=str)), "发往前端的消息里不能有密钥"
    assert {"value": ""} in [m.get("state") for m in sent], "清空密码框的更新要发给前端"
    for text in (repr(sw), str(sw), sw.status, sw.status_html.value,
                 json.dumps(sw._repr_mimebundle_(), ensure_ascii=False)):
        assert not leaks(text)
    client, _ = sw.current()
    assert client.api_key == KEY  # 密钥确实在用


def test_env_key_is_used_but_never_copied_into_widgets():
    env = {"HARNESS_MODE": "real", "OPENAI_API_KEY": KEY, "HARNESS_MODEL": "deepseek-chat",
           "OPENAI_BASE_URL": "https://api.deepseek.com/v1"}  # 旧写法（多了 /v1）：按主机名照样认出 DeepSeek
    sw = model_switch(environ=env)
    assert sw.mode == "real" and sw.preset_dropdown.value == "deepseek"
    assert sw.model_text.value == "deepseek-chat"
    assert sw.base_url_text.value == "https://api.deepseek.com/v1", "环境变量里的地址原样保留"
    assert not leaks(widget_state_text(sw))
    assert "来自环境变量 OPENAI_API_KEY" in sw.status
    client, model = sw.current()
    assert client.api_key == KEY and model == "deepseek-chat"
    assert not leaks(repr(sw)) and not leaks(sw.status)


def test_wrong_key_reports_401_without_the_key(server):
    sw = model_switch(environ={})
    use_endpoint(sw, server.base_url)
    type_key(sw, KEY)
    text = sw.test_connection()
    assert text.startswith("✗") and "密钥不对" in text and "401" in text
    assert not leaks(text) and not leaks(sw.status_html.value)


def test_right_key_reports_ok_with_model(server):
    text = connect_with_right_key(server)
    assert text.startswith("✓") and "fake-agent-1" in text
    assert not leaks(text, "right-key-0123456789")


def test_unknown_model_reports_404_and_suggests_listed_models(server):
    text = connect_with_right_key(server, model="no-such-model")
    assert text.startswith("✗") and "找不到这个模型（HTTP 404）" in text and "no-such-model" in text
    assert "相近的有：fake-agent-1" in text, "从 /v1/models 的名单里建议最像的名字"
    assert not leaks(text, "right-key-0123456789")


def test_connection_says_the_model_is_listed(server):
    text = connect_with_right_key(server, model="fake-agent-1")
    assert text.startswith("✓") and "模型 fake-agent-1 在服务商列出的 3 个模型里" in text
    assert "模型 fake-talk-only 在服务商列出的 3 个模型里" in connect_with_right_key(server, model="fake-talk-only")


def test_connection_notes_a_working_name_that_is_not_listed(server):
    """本地端点接受任何 fake 开头的名字，/v1/models 却只列三个：请求成功，说明里讲清楚。"""
    text = connect_with_right_key(server, model="fake-renamed")
    assert text.startswith("✓") and "没有 fake-renamed" in text and "列表以外的名字" in text


def _no_models_handler(request):
    """一个没有 /models 接口的服务（有的 OpenAI 兼容服务就是这样）：GET /v1/models 回 404，对话照常。"""
    if request.method == "GET":
        return Rejected(404, f"Invalid URL ({request.method} {request.url.path})").response()
    return _FAKE(request)


_FAKE = FakeHandler(FakeModel())


def test_provider_without_models_endpoint_is_not_an_error():
    srv = serve(_no_models_handler)
    try:
        sw = model_switch(environ={})
        use_endpoint(sw, srv.base_url, model="fake-agent-1")
        text = sw.test_connection()
        assert text.startswith("✓") and "没有模型列表接口" in text and "不算错" in text
        check = check_model(sw.current()[0], "fake-agent-1")
        assert check.listed is None and check.error is None
    finally:
        srv.close()


def test_wrong_key_on_models_list_does_not_hide_the_chat_error(server):
    check = check_model(openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0), "fake-agent-1", key=KEY)
    assert check.listed is None and isinstance(check.error, openai.AuthenticationError)
    assert "没能取到模型列表" in check.text and "密钥不对" in check.text and not leaks(check.text)


def test_retired_deepseek_name_over_the_fault_server(fault_server):
    """DeepSeek 现在的说法（HTTP 400 “The supported API model names are …”）经真正的 HTTP：说明是模型名的问题，
    并建议名单里的名字。"""
    from harness_lib.models.faults import FAULTS

    if "unknown_model" not in FAULTS:
        pytest.skip("故障服务器还没有 unknown_model 这个故障")
    sw = model_switch(environ={})
    use_endpoint(sw, fault_server.url("unknown_model"), model="deepseek-chat")
    type_key(sw, KEY)
    text = sw.test_connection()
    assert text.startswith("✗") and "找不到这个模型（HTTP 400）" in text and "but you passed deepseek-chat" in text
    assert "相近的有：" in text and not leaks(text)


def test_closest_models_puts_the_nearest_names_first():
    available = ["gpt-5.4", "deepseek-v4-pro", "deepseek-flash", "deepseek-v4-flash", "qwen-plus", "glm-4.7"]
    assert closest_models("deepseek-chat", available)[0].startswith("deepseek")
    assert closest_models("deepseek-v4-flash-x", available)[0] == "deepseek-v4-flash"
    assert closest_models("Qwen-Plus", available)[0] == "qwen-plus", "不分大小写"
    assert len(closest_models("x", available * 3, n=5)) == 5
    assert closest_models("x", []) == []


def test_unreachable_port():
    sw = model_switch(environ={})
    use_endpoint(sw, f"http://127.0.0.1:{free_port()}/v1")
    text = sw.test_connection()
    assert "无法连接" in text


def test_fake_test_connection():
    sw = model_switch(environ={})
    text = sw.test_connection()
    assert text.startswith("✓") and "fake-agent-1" in text and "离线" in text


def test_missing_key_says_where_to_set_it():
    sw = model_switch(environ={})
    sw.preset_dropdown.value = "deepseek"
    text = sw.test_connection()
    assert "还没有 API 密钥" in text and "OPENAI_API_KEY" in text and "DeepSeek" in text
    assert "还没有设置" in repr(sw)


def test_empty_base_url_and_model():
    sw = model_switch(environ={})
    use_endpoint(sw, "", model="m")
    assert "base_url 是空的" in sw.test_connection()
    use_endpoint(sw, "http://127.0.0.1:1/v1", model="")
    assert "模型名是空的" in sw.test_connection()


# ---------------------------------------------------------------------------
# client_from_env
# ---------------------------------------------------------------------------


def test_client_from_env_fake_by_default():
    client, model = client_from_env({})
    assert isinstance(client, FakeClient) and model == "fake-agent-1"
    client, model = client_from_env({"HARNESS_MODE": "fake", "HARNESS_MODEL": "qwen-plus"})
    assert isinstance(client, FakeClient) and model == "fake-agent-1"


def test_client_from_env_real():
    env = {"HARNESS_MODE": "real", "OPENAI_API_KEY": KEY, "HARNESS_MODEL": "qwen-plus",
           "OPENAI_BASE_URL": "https://dashscope.aliyuncs.com/compatible-mode/v1"}
    client, model = client_from_env(env)
    assert isinstance(client, openai.OpenAI) and model == "qwen-plus"
    assert str(client.base_url).startswith("https://dashscope.aliyuncs.com/compatible-mode/v1")
    assert client.api_key == KEY and client.max_retries == 2
    # 不设 OPENAI_BASE_URL 时用 SDK 的默认地址
    client, _ = client_from_env({k: v for k, v in env.items() if k != "OPENAI_BASE_URL"})
    assert str(client.base_url).startswith("https://api.openai.com/v1")


def test_client_from_env_real_needs_model_and_key():
    with pytest.raises(SwitchConfigError, match="HARNESS_MODEL"):
        client_from_env({"HARNESS_MODE": "real", "OPENAI_API_KEY": KEY})
    with pytest.raises(SwitchConfigError, match="OPENAI_API_KEY"):
        client_from_env({"HARNESS_MODE": "real", "HARNESS_MODEL": "m"})
    # 本机服务不需要密钥
    client, _ = client_from_env({"HARNESS_MODE": "real", "HARNESS_MODEL": "m",
                                 "OPENAI_BASE_URL": "http://localhost:11434/v1"})
    assert client.api_key == "not-needed"


def test_client_from_env_local():
    client, model = client_from_env({"HARNESS_MODE": "local"})
    assert isinstance(client, openai.OpenAI) and model == "fake-agent-1"
    assert str(client.base_url).rstrip("/") == ensure_local_server().rstrip("/")
    reply = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "你好"}])
    assert reply.choices[0].message.role == "assistant"


def test_client_from_env_rejects_unknown_mode():
    with pytest.raises(SwitchConfigError, match="fake、real 或 local"):
        client_from_env({"HARNESS_MODE": "cloud"})


def test_switch_follows_env_local_and_bad_mode():
    sw = model_switch(environ={"HARNESS_MODE": "local"})
    assert sw.mode == "real" and sw.preset_dropdown.value == "local"
    assert sw.base_url_text.value == ensure_local_server()
    sw = model_switch(environ={"HARNESS_MODE": "cloud"})
    assert sw.mode == "fake" and "HARNESS_MODE" in sw.status


# ---------------------------------------------------------------------------
# 本机地址与环境变量里的密钥
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("host,destination,listening", [
    ("localhost", True, True),
    ("127.0.0.1", True, True),
    ("127.1", True, True),  # inet_aton 认得的简写
    ("::1", True, True),
    ("[::1]", True, True),
    ("::ffff:127.0.0.1", True, True),
    ("0.0.0.0", True, False),  # 连过去是本机；监听在它上面却是所有网卡
    ("http://localhost:11434/v1", True, True),
    ("http://0.0.0.0:8000/v1", True, False),
    ("10.0.0.1", False, False),
    ("localhost.example.com", False, False),
    ("127.0.0.1 evil.com", False, False),
    ("https://api.deepseek.com/v1", False, False),
    ("", False, False),
])
def test_is_loopback(host, destination, listening):
    assert is_loopback(host) is destination
    assert is_loopback(host, listening=True) is listening


def test_local_base_urls_need_no_key_and_fake_model_name_is_shared():
    assert not needs_key("http://127.1:8080/v1") and not needs_key("http://[::1]:11434/v1")
    assert needs_key("https://api.openai.com/v1") and needs_key("not a url")
    assert FAKE_MODEL == DEFAULT_MODEL == PRESETS_BY_KEY["local"].model


def test_real_clients_use_the_retry_policy():
    client, _ = client_from_env({"HARNESS_MODE": "real", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
                                 "OPENAI_API_KEY": KEY, "HARNESS_MODEL": "m"})
    assert client.max_retries == RETRY_POLICY["max_retries"] and client.timeout == RETRY_POLICY["timeout"]
    sw = model_switch(environ={})
    sw.preset_dropdown.value = "ollama"
    client, _ = sw.current()
    assert client.max_retries == RETRY_POLICY["max_retries"] and client.timeout == RETRY_POLICY["timeout"]


def test_env_key_goes_to_the_env_base_url_even_on_loopback():
    """OPENAI_BASE_URL 指向一个要密钥的本地服务时，切换器要把环境里的密钥发给它。"""
    with start_server(api_key="local-secret") as server:
        env = {"HARNESS_MODE": "real", "OPENAI_BASE_URL": server.base_url,
               "OPENAI_API_KEY": "local-secret", "HARNESS_MODEL": "fake-agent-1"}
        switch = ModelSwitch(environ=env)
        assert switch.test_connection().startswith("✓")
        # 换成另一个本地地址：环境里的密钥不该被发过去
        switch.base_url_text.value = "http://127.0.0.1:9/v1"
        assert switch.current()[0].api_key != "local-secret"


# ---------------------------------------------------------------------------
# 预设的出处、停用日期、思考模式
# ---------------------------------------------------------------------------

CLOUD = [p for p in PRESETS if p.needs_key and p.base_url]


def test_every_cloud_preset_names_its_source_and_check_date():
    assert {p.key for p in CLOUD} == {"dashscope", "deepseek", "openai", "moonshot", "zhipu", "siliconflow"}
    for p in CLOUD:
        assert p.source.startswith("https://") and p.checked >= PRESETS_CHECKED, p  # 单独再核对过的可以更新
        assert p.model in p.facts() and p.checked in p.facts() and p.source in p.facts()
    assert PRESETS_CHECKED == "2026-12-02"


def test_retired_deepseek_names_are_not_presets():
    """deepseek-chat、deepseek-reasoner 2026-07-24 起不能用（出处见 clients.py）：预设和 README 都不再用它们。"""
    from conftest import ROOT

    names = {p.model for p in PRESETS}
    assert not names & {"deepseek-chat", "deepseek-reasoner"}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    example = next(line for line in readme.splitlines() if line.startswith("| `HARNESS_MODEL`"))
    assert "deepseek-chat" not in example and "deepseek-flash" in example
    assert all(p.model in readme for p in CLOUD), "README 列出每个预设现在的模型名"


def test_retirement_dates_are_shown_and_checked():
    from datetime import date

    from dataclasses import replace

    old_openai = replace(PRESETS_BY_KEY["openai"], model="gpt-4o-mini", retires="2027-01-14")  # 换掉之前的样子
    assert "2027-01-14 停用" in old_openai.facts()
    assert not old_openai.retired_on(date(2026, 12, 1)) and old_openai.retired_on(date(2027, 1, 14))
    assert not PRESETS_BY_KEY["deepseek"].retired_on(date(2030, 1, 1)), "没有公布停用日期就不算停用"


def test_switch_status_shows_the_preset_facts():
    sw = model_switch(environ={})
    sw.preset_dropdown.value = "deepseek"
    assert "deepseek-flash 出自 https://api-docs.deepseek.com" in sw.status and "核对于 2026-12-02" in sw.status
    assert "thinking" in sw.status and "disabled" in sw.status
    sw.model_text.value = "deepseek-v4-pro"  # 自己换了名字：不再说“出自”，但思考模式照样关
    assert "出自" not in sw.status and "disabled" in sw.status


def test_presets_table_lists_every_cloud_preset():
    table = presets_table()
    assert list(table.columns) == ["预设", "服务商", "base_url", "模型名", "出处", "核对日期", "停用日期",
                                   "每次请求带上", "思考模式"]
    assert set(table["预设"]) >= {p.key for p in CLOUD} and table.attrs["checked"] == PRESETS_CHECKED
    assert table.set_index("预设").loc["deepseek", "模型名"] == "deepseek-flash"


def test_thinking_presets_turn_thinking_off_on_every_request():
    """DeepSeek V4 默认开着思考模式（思维链算在 max_tokens 里）；百炼的开源 Qwen3 默认也开着：预设照文档关掉。"""
    assert PRESETS_BY_KEY["deepseek"].extra_body == {"thinking": {"type": "disabled"}}
    assert PRESETS_BY_KEY["dashscope"].extra_body == {"enable_thinking": False}
    sw = model_switch(environ={})
    sw.preset_dropdown.value = "deepseek"
    type_key(sw, KEY)
    client, model = sw.current()
    assert isinstance(client, PresetClient) and client.preset_body == {"thinking": {"type": "disabled"}}
    assert isinstance(client.with_options(max_retries=0), PresetClient), "副本照样带着"
    assert client.max_retries == RETRY_POLICY["max_retries"]
    env_client, _ = client_from_env({"HARNESS_MODE": "real", "OPENAI_API_KEY": KEY, "HARNESS_MODEL": "deepseek-flash",
                                     "OPENAI_BASE_URL": "https://api.deepseek.com/v1"})
    assert isinstance(env_client, PresetClient), "无头运行按地址认出 DeepSeek，同样关掉思考"
    plain, _ = client_from_env({"HARNESS_MODE": "real", "OPENAI_API_KEY": KEY, "HARNESS_MODEL": "m",
                                "OPENAI_BASE_URL": "https://api.siliconflow.cn/v1"})
    assert isinstance(plain, openai.OpenAI) and plain.preset_body == {} and plain.completion_tokens_prefixes == ()
    assert preset_for("https://API.DeepSeek.com/v1").key == "deepseek" and preset_for("http://127.0.0.1:9/v1") is None


def test_preset_body_goes_out_on_the_wire():
    """PresetClient 经真正的 HTTP 发出的请求体里带着预设的字段；调用里自己写了同名字段时以调用为准。"""
    import json

    bodies = []

    def recording(request):
        if request.method == "POST":
            bodies.append(json.loads(request.content))
        return _FAKE(request)

    srv = serve(recording)
    try:
        client = real_client(srv.base_url, "x", {"thinking": {"type": "disabled"}})
        call_model(client, model="fake-agent-1", messages=[{"role": "user", "content": "你好"}], max_tokens=32)
        client.with_options(max_retries=0).chat.completions.create(
            model="fake-agent-1", messages=[{"role": "user", "content": "你好"}],
            extra_body={"thinking": {"type": "enabled"}})
    finally:
        srv.close()
    assert bodies[0]["thinking"] == {"type": "disabled"} and bodies[0]["max_tokens"] == 32
    assert bodies[1]["thinking"] == {"type": "enabled"}


def test_thinking_model_keeps_reasoning_content_through_the_loop(tmp_path, monkeypatch):
    """思考模式 + 工具调用：DeepSeek 要求之后每次请求都带回那一轮的 reasoning_content，否则 400
    （https://api-docs.deepseek.com/guides/thinking_mode ，核对于 2026-12-01）。
    循环用 model_dump 追加整条消息，所以带得回去：离线的 QuirkClient("deepseek_thinking") 会检查这一点。"""
    from harness_lib.lesson.loop import agent_loop
    from harness_lib.models.quirks import QuirkClient

    monkeypatch.chdir(tmp_path)
    (tmp_path / "app.py").write_text("print('hi')\n", encoding="utf-8")
    client = QuirkClient("deepseek_thinking")
    messages = [{"role": "user", "content": "当前目录下有哪些 Python 文件？"}]
    answer = agent_loop(messages, client=client, model="fake-agent-1")
    assert answer and len(client.requests) >= 2
    sent = [m for m in client.requests[-1]["messages"] if m.get("role") == "assistant" and m.get("tool_calls")]
    assert sent and all(m.get("reasoning_content") for m in sent), "带工具调用的那轮助手消息原样带着 reasoning_content"


def test_server_errors_get_no_model_name_advice(fault_server):
    """503 不是模型名的问题：不要在说明后面建议别的模型名。"""
    sw = model_switch(environ={})
    use_endpoint(sw, fault_server.url("unavailable"), model="no-such-model")
    type_key(sw, KEY)
    text = sw.test_connection()
    assert text.startswith("✗") and "503" in text and "相近的有" not in text


def test_gpt5_family_gets_max_completion_tokens_over_http(capsys):
    """OpenAI 的 GPT-5 系列、o 系列不收 max_tokens（离线的替身按 OpenAI 的原话回 400）：
    OpenAI 地址上一开始就改发 max_completion_tokens；别的地址上第一次碰到这种 400 时说明一次、记下、重发。"""
    from harness_lib.models.quirks import start_quirk_server
    from harness_lib.ui.clients import COMPLETION_TOKENS_PREFIXES

    server = start_quirk_server("openai_max_completion_tokens")
    bodies = server.handler.requests  # 服务器收到的请求体
    try:
        client = real_client(server.base_url, "x")
        ask = [{"role": "user", "content": "你好"}]
        first = call_model(client, model="gpt-5-mini", messages=ask, max_tokens=32)
        assert first.choices[0].message.content
        said = capsys.readouterr().out
        assert "模型 gpt-5-mini 被拒" in said and "换成 max_completion_tokens" in said and "结果：成功" in said
        assert "Use 'max_completion_tokens' instead" in said, "说的是服务器的原话"
        call_model(client.with_options(max_retries=0), model="gpt-5-mini", messages=ask, max_tokens=32)
        assert capsys.readouterr().out == "", "只说明一次：副本也记得"
        assert [("max_tokens" in b, b.get("max_completion_tokens")) for b in bodies[:3]] == [
            (True, None), (False, 32), (False, 32)], "第一次被拒，换名字重发；以后直接发 max_completion_tokens"
        # 别的 400 原样抛出，不重发
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model="gpt-5-mini", messages="不是列表")
    finally:
        server.close()
    assert "gpt-5" in COMPLETION_TOKENS_PREFIXES
    openai_client = real_client("https://api.openai.com/v1", "x")
    assert openai_client.uses_completion_tokens("gpt-5-mini") and openai_client.uses_completion_tokens("o4-mini")
    assert not openai_client.uses_completion_tokens("gpt-4o-mini")
    assert not real_client("https://api.deepseek.com", "x").uses_completion_tokens("o1-like-name")


def test_a_thinking_only_model_works_through_streaming_under_the_hood(capsys):
    """百炼只会思考的模型不收 enable_thinking=False，思考时又只收流式调用（离线替身照百炼的原话回 400）：客户端各说明一次、
    记下，以后这个模型的非流式请求在底下流式发出、拼回完整的回复，工具调用和思维链都在；调用方自己要流式的照旧。"""
    from harness_lib.models.errors import explain_error
    from harness_lib.models.quirks import start_quirk_server

    server = start_quirk_server("dashscope_thinking_only")
    bodies = server.handler.requests
    try:
        client = real_client(server.base_url, "x", PRESETS_BY_KEY["dashscope"].extra_body)
        ask = dict(model="qwen3-235b-a22b-thinking-2507", messages=[{"role": "user", "content": "列出当前目录中的 Python 文件"}],
                   tools=TOOLS, max_tokens=512)
        reply = call_model(client, **ask)
        said = capsys.readouterr().out
        assert "去掉预设的 enable_thinking（这个模型总在思考）。结果：成功" in said and "改成流式调用" in said
        assert "restricted to True" in said and "non-streaming calls" in said, "说的是服务器的原话"
        message = reply.choices[0].message
        assert message.tool_calls and message.tool_calls[0].function.name == "bash"
        assert message.model_dump()["reasoning_content"], "思维链拼回来了"
        assert reply.choices[0].finish_reason == "tool_calls" and reply.usage is not None
        from harness_lib.models.calls import calls_since, last_call_seq
        assert calls_since(last_call_seq() - 1)[0].completion_tokens == reply.usage.completion_tokens, \
            "在底下流式的调用也记下用量，消息表照样标出"
        assert [(b.get("enable_thinking"), bool(b.get("stream"))) for b in bodies] == [
            (False, False), (None, False), (None, True)], "先去掉 enable_thinking，再改成流式"
        again = call_model(client.with_options(max_retries=0), **ask)  # 副本也记得：直接流式，不再碰 400
        assert again.choices[0].message.tool_calls and bool(bodies[-1].get("stream")) and len(bodies) == 4
        assert capsys.readouterr().out == ""
        chunks = list(client.chat.completions.create(**ask, stream=True))
        assert chunks and len(bodies) == 5
        with pytest.raises(openai.BadRequestError) as info:  # 没有这个客户端时，说明讲对原因
            openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0).chat.completions.create(**ask)
        assert "只能流式调用" in explain_error(info.value) and "non-streaming" in explain_error(info.value)
    finally:
        server.close()


def test_gpt6_family_calls_tools_with_reasoning_effort_none_over_http(capsys):
    """GPT-5.6、GPT-6 系列默认会思考，Chat Completions 带工具就回 400（离线替身照 OpenAI 的原话）：OpenAI 地址上一开始
    就写明 reasoning_effort="none" 并改发 max_completion_tokens；别的地址上碰到一次就说明、记下、重发。不带工具的请求不动。"""
    from harness_lib.models.errors import explain_error
    from harness_lib.models.quirks import start_quirk_server
    from harness_lib.ui.clients import COMPLETION_TOKENS_PREFIXES, TOOLS_WITHOUT_REASONING_PREFIXES, PresetClient

    server = start_quirk_server("openai_tools_reasoning")
    bodies = server.handler.requests
    ask = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
    try:
        learned = real_client(server.base_url, "x")
        reply = call_model(learned, model="gpt-6-luna", messages=ask, tools=TOOLS, max_tokens=64)
        assert reply.choices[0].message.tool_calls, "补好以后，工具调用照常回来"
        said = capsys.readouterr().out
        assert said.count("模型 gpt-6-luna 被拒") == 2 and said.count("结果：成功") == 2
        assert 'reasoning_effort="none"' in said and "set reasoning_effort to 'none'" in said
        assert [(b.get("max_completion_tokens"), b.get("reasoning_effort")) for b in bodies] == [
            (None, None), (64, None), (64, "none")], "两条规矩各碰一次 400，各重发一次"
        call_model(learned, model="gpt-6-luna", messages=ask, tools=TOOLS, max_tokens=64)
        call_model(learned, model="gpt-6-luna", messages=ask, max_tokens=64)  # 不带工具：不替它写 reasoning_effort
        assert capsys.readouterr().out == ""
        assert [b.get("reasoning_effort") for b in bodies[3:]] == ["none", None]

        del bodies[:]  # OpenAI 地址上的规矩：一开始就发对，一次 400 也没有
        upfront = PresetClient(api_key="x", base_url=server.base_url, max_retries=0,
                               completion_tokens_prefixes=COMPLETION_TOKENS_PREFIXES,
                               no_reasoning_prefixes=TOOLS_WITHOUT_REASONING_PREFIXES)
        assert call_model(upfront, model="gpt-6-luna", messages=ask, tools=TOOLS, max_tokens=64).choices[0].message.tool_calls
        assert len(bodies) == 1 and bodies[0]["reasoning_effort"] == "none" and "max_tokens" not in bodies[0]
        assert capsys.readouterr().out == ""

        with pytest.raises(openai.BadRequestError) as info:  # 调用方自己写了别的强度：不替它改，说明讲清楚
            openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0).chat.completions.create(
                model="gpt-6-luna", messages=ask, tools=TOOLS, max_completion_tokens=64, reasoning_effort="low")
        assert 'reasoning_effort="none"' in explain_error(info.value)
    finally:
        server.close()
    on_openai = real_client("https://api.openai.com/v1", "x")
    assert on_openai.tools_need_no_reasoning("gpt-6-luna") and on_openai.tools_need_no_reasoning("gpt-5.6-terra")
    assert not on_openai.tools_need_no_reasoning("gpt-5-mini")
    assert not real_client("https://api.deepseek.com", "x").tools_need_no_reasoning("gpt-6-luna")
    assert PRESETS_BY_KEY["openai"].model == "gpt-6-luna" and on_openai.uses_completion_tokens("gpt-6-luna")


class ChatOnly:
    """处理函数的包装：像只转发 Chat Completions 的代理，POST /v1/responses 回 404（OpenAI 的措辞）。"""

    def __init__(self, inner):
        self.inner, self.requests = inner, inner.requests

    def __call__(self, request):
        if request.method == "POST" and request.url.path.endswith("/responses"):
            return Rejected(404, f"Invalid URL (POST {request.url.path})").response()
        return self.inner(request)


def test_a_model_that_calls_tools_only_on_responses_gets_them_there(capsys):
    """gpt-6.1-sol 这样的模型（替身照 OpenAI 的原话）：带工具的 Chat 请求回 400、只给 /v1/responses 这条路。
    客户端照原话改走 Responses API：请求在底下改写过去，回答拼回 ChatCompletion，循环照常；每处改动在结果出来以后
    说一行“成功”，以后直接走 Responses，不再碰 400。"""
    from harness_lib.models.quirks import start_quirk_server

    server = start_quirk_server("openai_tools_responses_only")
    bodies = server.handler.requests  # 只记 Chat 的请求体
    paths = []
    inner = server.handler

    def counting(request):
        paths.append(request.url.path)
        return inner(request)

    ask = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
    try:
        with serve(counting) as srv:
            client = real_client(srv.base_url, "x")
            first = call_model(client, model="gpt-6.1-sol", messages=ask, tools=TOOLS, max_tokens=64)
            said = capsys.readouterr().out
            assert said.count("提示：") == 2 and said.count("结果：成功") == 2, said
            assert "Please use /v1/responses instead" in said and "改走 Responses API" in said, "原话照录，改动照实说"
            assert "none" not in said, "服务器没给 none 这条路：不建议它"
            assert [b.get("reasoning_effort") for b in bodies] == [None, None], "没有替它写上它不收的 none"
            assert [p.rsplit("/", 1)[-1] for p in paths] == ["completions", "completions", "responses"]
            message = first.choices[0].message
            assert first.choices[0].finish_reason == "tool_calls" and message.tool_calls[0].function.name == "bash"
            loop = [*ask, message.model_dump(exclude_none=True),
                    {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "app.py\nutils.py"}]
            final = call_model(client.with_options(max_retries=0), model="gpt-6.1-sol", messages=loop, tools=TOOLS,
                               max_tokens=64)
            assert final.choices[0].finish_reason == "stop" and final.choices[0].message.content
            assert paths[-1].endswith("/responses") and len(bodies) == 2, "学到了：直接走 Responses"
            assert capsys.readouterr().out == ""
            chunks = list(call_model(client, model="gpt-6.1-sol", messages=ask, tools=TOOLS, max_tokens=64,
                                     stream=True))
            assert any(c.choices and c.choices[0].finish_reason == "tool_calls" for c in chunks), "要流式的也拿到块"
    finally:
        server.close()


def test_a_model_without_tools_here_is_told_once_and_truly(capsys):
    """同一个模型，端点却只转发 Chat Completions（/v1/responses 回 404）：客户端说清在这里带不了工具、能用什么；
    以后带工具的请求不再发出去碰同一个 400；从没说过一句没发生的改动。"""
    from harness_lib.models.errors import EndpointError
    from harness_lib.models.quirks import start_quirk_server

    quirk = start_quirk_server("openai_tools_responses_only")
    bodies = quirk.handler.requests
    ask = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
    try:
        with serve(ChatOnly(quirk.handler)) as server:
            client = real_client(server.base_url, "x")
            with pytest.raises(EndpointError) as info:
                call_model(client, model="gpt-6.1-sol", messages=ask, tools=TOOLS, max_tokens=64)
            said = capsys.readouterr().out
            assert info.value.kind == "no_chat_tools"
            text = info.value.explanation
            assert "gpt-6.1-sol" in text and "/v1/responses" in text and "离线假模型" in text and "gpt-6-luna" in text
            assert "Please use /v1/responses instead" in text, "原话照录"
            assert said.count("提示：") == 2 and said.count("仍不行：这个端点没有 /v1/responses") == 2
            assert "结果：成功" not in said
            sent = len(bodies)
            with pytest.raises(EndpointError):  # 学到了：不再发出去
                call_model(client.with_options(max_retries=0), model="gpt-6.1-sol", messages=ask, tools=TOOLS,
                           max_tokens=64)
            assert len(bodies) == sent and capsys.readouterr().out == ""
            plain = call_model(client, model="gpt-6.1-sol", messages=ask, max_tokens=64)  # 不带工具的请求照常
            assert plain.choices[0].message and len(bodies) == sent + 1

            # 名单猜错时（以为它收 none），第一个 400 纠正：记下它不收 none、去掉重发，下一句原话再指路
            from harness_lib.ui.clients import PresetClient
            guessed = PresetClient(api_key="x", base_url=server.base_url, max_retries=0,
                                   completion_tokens_prefixes=("gpt-6",), no_reasoning_prefixes=("gpt-6",))
            del bodies[:]
            with pytest.raises(EndpointError):
                call_model(guessed, model="gpt-6.1-sol", messages=ask, tools=TOOLS, max_tokens=64)
            assert [b.get("reasoning_effort") for b in bodies] == ["none", None]
            assert "'xhigh'" in capsys.readouterr().out and not guessed.tools_need_no_reasoning("gpt-6.1-sol")
    finally:
        quirk.close()


def test_kimi_k3_on_the_moonshot_preset_learns_that_it_always_thinks(capsys):
    """月之暗面的预设每次传 thinking={"type": "disabled"}；kimi-k3 总在思考，不收它（替身照月之暗面的原话回 400）。
    客户端只去掉这个字段重发一次，说一行“成功”，记下；以后不再传，思维链留在回复里，下一轮原样带回去也收。"""
    from harness_lib.models.quirks import start_quirk_server

    server = start_quirk_server("moonshot_always_thinks")
    bodies = server.handler.requests
    try:
        client = real_client(server.base_url, "x", PRESETS_BY_KEY["moonshot"].extra_body)
        messages = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
        first = call_model(client, model="kimi-k3", messages=messages, tools=TOOLS, max_tokens=512)
        said = capsys.readouterr().out
        assert "only type=enabled is allowed" in said and "去掉预设的 thinking" in said and "结果：成功" in said
        assert [b.get("thinking") for b in bodies] == [{"type": "disabled"}, None]
        message = first.choices[0].message
        assert message.tool_calls and message.model_dump()["reasoning_content"]
        messages += [message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "app.py"}]
        final = call_model(client.with_options(max_retries=0), model="kimi-k3", messages=messages, tools=TOOLS,
                           max_tokens=512)
        assert final.choices[0].message.content and "thinking" not in bodies[-1] and len(bodies) == 3
        assert capsys.readouterr().out == "", "学到的只说一次"
        with pytest.raises(openai.BadRequestError) as info:  # 两个都写：替身照原话拒绝
            client.chat.completions.create(model="kimi-k3", messages=messages[:1], reasoning_effort="high",
                                           extra_body={"thinking": {"type": "enabled"}})
        assert "cannot specify both 'thinking' and 'reasoning_effort'" in str(info.value)
        from harness_lib.models.errors import explain_error
        assert "只能写一个" in explain_error(info.value)
        with pytest.raises(openai.BadRequestError) as info:  # 没有这个客户端时，说明讲对原因
            openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0).chat.completions.create(
                model="kimi-k3", messages=messages[:1], extra_body={"thinking": {"type": "disabled"}})
        assert "总在思考" in explain_error(info.value) and '{"type": "disabled"}' in explain_error(info.value)
    finally:
        server.close()


# 每个云服务商预设对着一个离线替身：替身照这家服务商的参数规矩拒绝请求（原话见 QUIRKS 的出处）
PRESET_STAND_INS = {"dashscope": "dashscope_tool_rule", "deepseek": "deepseek_thinking",
                    "openai": "openai_tools_reasoning", "moonshot": "moonshot_thinking",
                    "zhipu": "zhipu_tool_choice", "siliconflow": "siliconflow_params"}


def test_stand_ins_refuse_what_their_provider_refuses():
    """替身真的守着服务商的规矩：不守的请求被拒（所以上面的往返成功说明预设守了规矩），原话、错误体的形状照出处。"""
    from harness_lib.models.quirks import start_quirk_server

    ask = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
    call = {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
                                                                 "function": {"name": "bash", "arguments": "{}"}}]}
    loop = [*ask, call, {"role": "tool", "tool_call_id": "call_1", "content": "app.py"}]
    cases = [("moonshot_thinking", {"messages": loop}, "reasoning_content is missing in assistant tool call message at index 1"),
             ("deepseek_thinking", {"messages": loop}, "must be passed back to the API"),
             ("siliconflow_params", {"messages": ask, "extra_body": {"enable_thinking": False}},
              "does not support parameter `enable_thinking`"),
             ("siliconflow_params", {"messages": ask, "tool_choice": "required"}, "not yet supported")]
    for quirk, request, words in cases:
        server = start_quirk_server(quirk)
        try:
            plain = openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0)
            with pytest.raises(openai.BadRequestError) as info:
                plain.chat.completions.create(model="fake-agent-1", tools=TOOLS, max_tokens=64, **request)
            assert words in str(info.value), (quirk, str(info.value))
            if quirk == "siliconflow_params":
                assert info.value.body.get("code") == 20015 if isinstance(info.value.body, dict) else False
            elif quirk.endswith("_thinking"):  # 关掉思考，同一份记录就收下
                plain.chat.completions.create(model="fake-agent-1", tools=TOOLS, max_tokens=64, messages=loop,
                                              extra_body={"thinking": {"type": "disabled"}})
        finally:
            server.close()


def test_the_switch_says_before_any_call_which_openai_models_cannot_use_tools():
    """gpt-6-astra 在 Chat Completions 里不能带工具：选它时状态行先说明，不用等第一次调用的 400。"""
    sw = model_switch(environ={})
    sw.mode_buttons.value = "real"
    sw.preset_dropdown.value = "openai"
    assert "不能带工具" not in sw.status
    sw.model_text.value = "gpt-6-astra"
    assert "gpt-6-astra 在 Chat Completions 里不能带工具" in sw.status and "直接替它走 /v1/responses" in sw.status
    on_openai = real_client("https://api.openai.com/v1", "x")
    assert not on_openai.tools_need_no_reasoning("gpt-6-astra"), "不替它写它不收的 none"
    assert on_openai.uses_responses("gpt-6.1-sol") and not on_openai.uses_responses("gpt-6-luna")
    assert not real_client("https://api.deepseek.com", "x").uses_responses("gpt-6.1-sol"), "名单只在 OpenAI 的地址上用"


@pytest.mark.parametrize("key", sorted(PRESET_STAND_INS))
def test_each_preset_runs_a_tool_round_trip_against_its_stand_in(key, capsys):
    """预设的模型名和请求体（extra_body）走真实的 HTTP，到替身那里：两轮都成功（提出调用、读到结果后回答），
    中途被拒的只有客户端能自己学会的那几种 400，而且每种都说明过。"""
    from harness_lib.models.quirks import start_quirk_server

    preset = PRESETS_BY_KEY[key]
    server = start_quirk_server(PRESET_STAND_INS[key])
    try:
        client = real_client(server.base_url, "x", preset.extra_body)
        messages = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
        first = call_model(client, model=preset.model, messages=messages, tools=TOOLS, max_tokens=512).choices[0].message
        assert first.tool_calls, f"{key}：第一轮应当提出工具调用"
        messages += [first.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "app.py\nutils.py"}]
        second = call_model(client, model=preset.model, messages=messages, tools=TOOLS, max_tokens=512).choices[0].message
        assert second.content and not second.tool_calls, f"{key}：读到结果后应当回答"
        for body in server.handler.requests:
            for field, value in (preset.extra_body or {}).items():
                assert body.get(field) == value, f"{key}：每个请求都带着预设的 {field}"
        retried = len(server.handler.requests) - 2
        assert retried == capsys.readouterr().out.count("提示：模型"), f"{key}：每次重发都有一行说明"
    finally:
        server.close()


def test_real_endpoint_fields_show_only_for_a_real_endpoint():
    """假模型用不到服务商、base_url、密钥那几栏：选了真实端点才出现。"""
    sw = model_switch(environ={})
    assert sw.mode == "fake" and sw.real_fields.layout.display == "none"
    sw.mode_buttons.value = "real"
    assert sw.real_fields.layout.display == ""
    sw.mode_buttons.value = "fake"
    assert sw.real_fields.layout.display == "none"
    real = model_switch(environ={"HARNESS_MODE": "real", "HARNESS_MODEL": "qwen-plus",
                                 "OPENAI_BASE_URL": "https://dashscope.aliyuncs.com/compatible-mode/v1"})
    assert real.real_fields.layout.display == ""


def test_on_the_site_the_switch_cannot_be_used():
    """make site 执行笔记本时（HARNESS_SITE=1）：每个控件都点不了，填密钥的框不画出来。"""
    sw = model_switch(environ={"HARNESS_SITE": "1"})
    assert sw.mode_buttons.disabled and sw.preset_dropdown.disabled and sw.test_button.disabled
    assert sw.key_password.layout.display == "none"
    assert not model_switch(environ={}).mode_buttons.disabled


def test_a_vllm_started_without_tool_calling_is_explained_as_a_server_setting():
    """vLLM 没开工具调用时，带 tools 的请求回 400（离线替身照 vLLM 的原话）：说明讲清楚改的是服务的启动参数，不是代码。"""
    from harness_lib.models.errors import EndpointError, explain_error
    from harness_lib.models.quirks import start_quirk_server

    server = start_quirk_server("vllm_no_tool_parser")
    try:
        client = real_client(server.base_url, "x")
        with pytest.raises((openai.BadRequestError, EndpointError)) as info:
            call_model(client, model="Qwen/Qwen2.5-7B-Instruct", messages=[{"role": "user", "content": "你好"}],
                       tools=TOOLS, max_tokens=32)
        text = explain_error(info.value)
        assert "--enable-auto-tool-choice" in text and "代码不用改" in text
        assert call_model(client, model="Qwen/Qwen2.5-7B-Instruct", messages=[{"role": "user", "content": "你好"}],
                          max_tokens=32).choices[0].message.content, "不带 tools 的请求照常回答"
    finally:
        server.close()


def test_connection_also_tries_one_tool_call(server):
    """「测试连接」也发一次带工具的小请求：本系列的循环每一轮都带工具，在 00 就该知道行不行。"""
    text = connect_with_right_key(server, model="fake-agent-1")
    assert "✓ 带工具的请求也成功了：模型提出了工具调用" in text
    talker = connect_with_right_key(server, model="fake-talk-only")
    assert "只回了文字，没有提出工具调用" in talker


def test_connection_says_when_a_model_calls_tools_only_on_responses(capsys):
    """gpt-6.1-sol 的替身：普通对话成功，带工具的 Chat 请求被拒、指向 /v1/responses。客户端改走那里，状态行照实说。
    端点只转发 Chat（/v1/responses 回 404）时，状态行说工具不行，也说能用什么。"""
    from harness_lib.models.quirks import start_quirk_server

    quirk = start_quirk_server("openai_tools_responses_only")
    try:
        sw = model_switch(environ={})
        use_endpoint(sw, quirk.base_url, model="gpt-6.1-sol")
        text = sw.test_connection()
        assert text.startswith("✓ 连接成功") and "✓ 带工具的请求改走 Responses API 成功了" in text, text
        said = capsys.readouterr().out
        assert said.count("提示：") == 1 and "改走 Responses API" in said and "结果：成功" in said
        assert [sorted(k for k in b if k != "messages") for b in quirk.handler.requests] == [
            ["model"], ["model", "tools"]], "试连接不写 max_tokens：被拒的只有带工具的那一次"
        with serve(ChatOnly(quirk.handler)) as chat_only:
            sw = model_switch(environ={})
            use_endpoint(sw, chat_only.base_url, model="gpt-6.1-sol")
            text = sw.test_connection()
    finally:
        quirk.close()
    assert text.startswith("✓ 连接成功")
    assert "✗ 带工具的请求不行" in text and "/v1/responses" in text and "离线假模型" in text
    assert sw.status_html.value.count(_COLOR_ERROR) == 1, "整行标成出错的颜色"
    assert "仍不行" in capsys.readouterr().out


_COLOR_ERROR = "#b42318"


def _models_with_shutdown(date_text):
    listing = {"object": "list", "data": [{"id": "gpt-5", "object": "model", "created": 0, "owned_by": "openai",
                                           "shutdown_date": date_text}]}

    def handler(request):
        if request.method == "GET":
            return json_response(200, listing)
        return _FAKE(request)

    return handler


@pytest.mark.parametrize("date_text, says", [("2099-01-01", "将于 2099-01-01 停用"),
                                             ("2020-01-01", "已于 2020-01-01 停用"),
                                             (str(4070908800), "将于 2099-01-01 停用")])
def test_check_model_reads_the_shutdown_date_the_listing_gives(date_text, says):
    with serve(_models_with_shutdown(date_text)) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
        result = check_model(client, "gpt-5")
    assert result.listed is True and says in result.text and "shutdown_date" in result.text


def test_a_model_missing_from_the_listing_is_not_called_wrong():
    """不在 /models 里不等于写错了：有的服务商只列一部分，下面那次请求说了算。"""
    with serve(_models_with_shutdown("2099-01-01")) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
        result = check_model(client, "glm-4-flash-250414")
    assert result.listed is False and "只列出一部分模型" in result.text and "下面那次请求说了算" in result.text


# ---------------------------------------------------------------------------
# 学到的规矩记在缓存文件夹里：下一本笔记本的客户端一开始就知道
# ---------------------------------------------------------------------------


@pytest.fixture
def memory_file(tmp_path, monkeypatch):
    path = tmp_path / "cache" / "learned.json"
    monkeypatch.setenv("HARNESS_MEMORY", str(path))
    return path


def test_what_one_notebook_learned_the_next_one_knows(memory_file, capsys):
    from harness_lib.models.quirks import start_quirk_server

    server = start_quirk_server("openai_tools_reasoning")
    bodies = server.handler.requests
    ask = dict(model="gpt-6-luna", messages=[{"role": "user", "content": "列出文件"}], tools=TOOLS, max_tokens=64)
    try:
        first = model_switch(environ={})  # 第一本笔记本：碰两次 400，各说一次
        use_endpoint(first, server.base_url, model="gpt-6-luna")
        call_model(first.current()[0], **ask)
        assert capsys.readouterr().out.count("结果：成功") == 2 and len(bodies) == 3
        second = model_switch(environ={})  # 下一本：一开始就发对，一句说明也没有
        use_endpoint(second, server.base_url, model="gpt-6-luna")
        assert "记得：gpt-6-luna：max_tokens 改发 max_completion_tokens" in second.status
        call_model(second.current()[0], **ask)
        assert capsys.readouterr().out == "" and len(bodies) == 4
        assert bodies[-1]["reasoning_effort"] == "none" and "max_tokens" not in bodies[-1]
        assert "已忘掉" in second.forget_learned() and "记得" not in (second._refresh_status() or second.status)
        call_model(second.current()[0], **ask)  # 忘掉以后从头学
        assert capsys.readouterr().out.count("结果：成功") == 2
    finally:
        server.close()
    saved = json.loads(memory_file.read_text(encoding="utf-8"))
    assert set(saved[server.base_url.rstrip("/")]["gpt-6-luna"]) == {"completion_tokens", "no_reasoning", "learned_on"}


def test_a_remembered_no_tools_model_is_not_sent_again(memory_file, capsys):
    from harness_lib.models.errors import EndpointError
    from harness_lib.models.quirks import start_quirk_server
    from harness_lib.ui.memory import Memory

    quirk = start_quirk_server("openai_tools_responses_only")
    ask = dict(model="gpt-6.1-sol", messages=[{"role": "user", "content": "列出文件"}], tools=TOOLS, max_tokens=64)
    try:
        with serve(ChatOnly(quirk.handler)) as server:
            with pytest.raises(EndpointError):
                call_model(real_client(server.base_url, "x", memory=Memory.for_url(server.base_url)), **ask)
            sent = len(quirk.handler.requests)
            with pytest.raises(EndpointError) as info:
                call_model(real_client(server.base_url, "x", memory=Memory.for_url(server.base_url)), **ask)
    finally:
        quirk.close()
    assert len(quirk.handler.requests) == sent, "下一本笔记本不再发出去碰同一个 400"
    assert "没有发出去" in info.value.explanation and "忘掉" in info.value.explanation
    capsys.readouterr()


def test_memory_is_dated_ignores_a_broken_file_and_can_be_off(tmp_path, monkeypatch):
    from datetime import date, timedelta

    from harness_lib.ui.memory import KEEP_DAYS, Memory, memory_path

    path = tmp_path / "learned.json"
    old = Memory(path, "https://api.example.com/v1", today=date(2026, 1, 1))
    old.remember("m", "completion_tokens")
    assert Memory(path, "https://api.example.com/v1", today=date(2026, 1, 1) + timedelta(days=KEEP_DAYS)).rules("m")
    later = Memory(path, "https://api.example.com/v1", today=date(2026, 1, 1) + timedelta(days=KEEP_DAYS + 1))
    assert later.rules("m") == {}, "过了保存期：服务商可能已经变了，不再用"
    path.write_text("{坏了", encoding="utf-8")
    assert Memory(path, "https://api.example.com/v1").rules("m") == {}
    monkeypatch.setenv("HARNESS_MEMORY", "off")
    assert memory_path() is None and Memory.for_url("https://api.example.com/v1") is None
    monkeypatch.delenv("HARNESS_MEMORY")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert memory_path() == tmp_path / "xdg" / "harness-lib" / "learned.json"


def test_what_works_is_looked_up_once_not_at_every_step(capsys):
    """“能用什么”要问一次 /models：以后每一步再说明时用记下的，不再每步多发一个请求。"""
    from harness_lib.models.errors import EndpointError
    from harness_lib.models.quirks import start_quirk_server

    quirk = start_quirk_server("openai_tools_responses_only")
    listings = []

    chat_only = ChatOnly(quirk.handler)

    def counting(request):
        if request.method == "GET":
            listings.append(request.url.path)
        return chat_only(request)

    ask = dict(model="gpt-6.1-sol", messages=[{"role": "user", "content": "列出文件"}], tools=TOOLS, max_tokens=64)
    try:
        with serve(counting) as srv:
            client = real_client(srv.base_url, "x")
            said = []
            for _ in range(3):
                with pytest.raises(EndpointError) as info:
                    call_model(client.with_options(max_retries=0), **ask)
                said.append(info.value.explanation)
            fresh = real_client(srv.base_url, "x")  # 另一个客户端（另一本笔记本）：完整地再说一次
            with pytest.raises(EndpointError) as info:
                call_model(fresh, **ask)
            said.append(info.value.explanation)
    finally:
        quirk.close()
    assert ["能用的" in s for s in said] == [True, False, False, True], "每个客户端完整说明一次，以后只说一句"
    assert all(s.startswith("同上：模型 gpt-6.1-sol") and "没有发出去" in s for s in said[1:3])
    assert len(listings) == 2, listings
    capsys.readouterr()


def _gated_responses_server(events, gate, sent_all):
    """只会流式回 /v1/responses 的本机服务（本项目的 `serve`，每个事件立刻发出）：先发到第一个参数片段为止，
    等 `gate`，再发剩下的。"""
    from harness_lib.models.wire import sse_response

    cut = next(i for i, e in enumerate(events) if e["type"] == "response.function_call_arguments.delta") + 1

    def held_back():
        yield from events[:cut]
        gate.wait(5)
        yield from events[cut:]
        sent_all.set()

    return serve(lambda request: sse_response(held_back(), done=False, named=True))


@pytest.mark.parametrize("ending", ["completed", "error"])
def test_a_bridged_stream_hands_over_each_chunk_as_its_event_arrives(ending):
    """改走 Responses 的流式调用不是收齐再切：服务器还没发完，循环已经拿到调用的开头；流里的错误事件变成
    openai.APIError，带着服务器的原话。"""
    import threading

    from harness_lib.models.responses_api import stream_events

    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "bash",
            "arguments": json.dumps({"command": "ls -la *.py"}), "status": "completed"}
    response = {"id": "resp_1", "object": "response", "created_at": 1767225600, "model": "gated-1",
                "status": "completed", "output": [call], "incomplete_details": None,
                "usage": {"input_tokens": 9, "output_tokens": 5, "total_tokens": 14}}
    events = stream_events(response)
    if ending == "error":
        events = events[:-2] + [{"type": "error", "code": "server_error", "message": "upstream went away",
                                 "param": None, "sequence_number": 99}]
    gate, sent_all = threading.Event(), threading.Event()
    server = _gated_responses_server(events, gate, sent_all)
    try:
        client = PresetClient(api_key="k", base_url=server.base_url,
                              responses_prefixes=("gated-",), max_retries=0)
        stream = client.chat.completions.create(model="gated-1", messages=[{"role": "user", "content": "列出文件"}],
                                                tools=TOOLS, max_tokens=64, stream=True)
        chunks = iter(stream)
        first = [next(chunks) for _ in range(3)]  # 角色、调用的开头、第一个参数片段
        assert not sent_all.is_set(), "服务器还没发完，块已经到了"
        assert first[1].choices[0].delta.tool_calls[0].id == "call_1"
        gate.set()
        if ending == "error":
            with pytest.raises(openai.APIError, match="upstream went away"):
                list(chunks)
            return
        rest = list(chunks)
    finally:
        gate.set()
        server.close()
    arguments = "".join(c.choices[0].delta.tool_calls[0].function.arguments or ""
                        for c in first + rest if c.choices and c.choices[0].delta.tool_calls)
    assert json.loads(arguments) == {"command": "ls -la *.py"}
    assert rest[-1].choices[0].finish_reason == "tool_calls"


def test_a_streamed_bridged_turn_carries_its_reasoning_items_to_the_next_request():
    """流式地改走 Responses：拼好的助手消息带着思考条目（加密内容原样），下一次请求放回它所在的位置，服务器收下。"""
    from harness_lib.models.bridge import REASONING_FIELD
    from harness_lib.models.streaming import stream_turn

    with start_server() as local:
        client = PresetClient(api_key="k", base_url=local.base_url, responses_prefixes=("fake-",), max_retries=0)
        ask = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
        first = stream_turn(client, "fake-agent-1", ask, TOOLS, reasoning_effort="low", max_tokens=256)
        message = first.choices[0].message.model_dump(exclude_none=True)
        [item] = message[REASONING_FIELD]
        assert item["type"] == "reasoning" and item["encrypted_content"]
        later = [*ask, message, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "app.py"}]
        final = stream_turn(client, "fake-agent-1", later, TOOLS, reasoning_effort="low", max_tokens=256)
        sent = local.handler.last_body["input"]
        assert final.choices[0].finish_reason == "stop"
    assert [i.get("type") or i["role"] for i in sent] == ["user", "reasoning", "function_call", "function_call_output"]
    assert sent[1]["encrypted_content"] == item["encrypted_content"]
