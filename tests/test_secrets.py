"""密钥不外泄：API 密钥不出现在单元格输出、保存的控件状态、对话记录、异常文字、repr 或写出的文件里。

做法：每次运行随机生成一把“哨兵密钥”`SENTINEL`，用它启动本项目的本地端点（要求请求带这把密钥），
再在真实模式（`HARNESS_MODE=real`）下无头执行每一本笔记本。内核的 HOME、TMPDIR、IPYTHONDIR、
JUPYTER_RUNTIME_DIR 都指向这次测试自己的临时文件夹，笔记本也在临时副本里运行，所以内核写下的每个文件都在那里。
执行完以后，在序列化的笔记本（输出和元数据，包括保存下来的控件状态）和临时文件夹里的每个文件中
搜索整把密钥和它的片段：任何 10 个字符的子串，以及随机部分任何 8 个字符的子串；
文件按字节搜索，同时查 UTF-8、UTF-16 和 base64 的写法。

另有几个单元级检查：切换器与 `client_from_env` 给出的客户端的 repr/str、401 的中文说明、
经过 `agent_loop` 抛出的异常（以及有 `harness_lib.models.errors.from_sdk` 时转换出的 `EndpointError`）、
对话记录本身，和模型让执行框架跑 `env` 时返回的工具结果。
"""

import base64
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import traceback
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import openai
import pytest
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

from conftest import NOTEBOOKS, ROOT, notebook_paths, printed_base_url, stop_process
from harness_lib import (FakeClient, agent_loop, model_switch, run_bash, text_reply, scripted_call,
                         tool_reply)
from harness_lib.ui.clients import client_from_env
from harness_lib.ui.view import messages_frame
from harness_lib.models.server import start_server
from harness_lib.models.errors import explain_error
from harness_lib.safety.secrets import learner_environment

PATHS = notebook_paths()
MODEL = "fake-agent-1"
PREFIX = "sk-sentinel-"
# 每次运行都不一样的密钥；随机部分 48 个十六进制字符，任何 8 个字符的片段都足够独特
SENTINEL = PREFIX + uuid.uuid4().hex + uuid.uuid4().hex[:16]
# 另一把（错误的）密钥：服务器不认它，用来制造 401
WRONG = PREFIX + uuid.uuid4().hex + uuid.uuid4().hex[:16]


# ---------------------------------------------------------------------------
# 找片段
# ---------------------------------------------------------------------------


def fragments(key):
    """整把密钥的所有 10 字符子串，加上随机部分的所有 8 字符子串。"""
    grams = {key[i:i + 10] for i in range(len(key) - 9)}
    rand = key[len(PREFIX):] if key.startswith(PREFIX) else key
    grams |= {rand[i:i + 8] for i in range(len(rand) - 7)}
    return sorted(grams)


def leaks(text, keys=(SENTINEL,)):
    """`text` 里出现了哪些密钥片段（空列表表示干净）。"""
    text = "" if text is None else str(text)
    return [g for key in keys for g in fragments(key) if g in text]


def _byte_patterns(key):
    """在字节里要找的写法：各片段的 UTF-8 与 UTF-16 编码，以及整把密钥在三种对齐下的 base64。"""
    patterns = {}
    for gram in fragments(key):
        for enc in ("utf-8", "utf-16-le", "utf-16-be"):
            patterns[gram.encode(enc)] = f"{gram!r}（{enc}）"
    for offset in range(3):
        raw = key[offset:].encode()
        for name, encode in (("base64", base64.b64encode), ("urlsafe base64", base64.urlsafe_b64encode)):
            # 去掉最后 4 个字符：那一组受密钥后面的字节影响
            patterns[encode(raw)[:-4]] = f"{name}（对齐 {offset}）"
    return patterns


BYTE_PATTERNS = _byte_patterns(SENTINEL)


def where(text, gram, width=60):
    """片段第一次出现的位置附近的文字，出错时帮人找到是哪里漏的。"""
    i = text.find(gram)
    return text[max(0, i - width):i + len(gram) + width]


def assert_clean(text, label, keys=(SENTINEL,)):
    found = leaks(text, keys)
    assert not found, f"{label} 里出现了密钥片段 {found[0]!r}：…{where(str(text), found[0])}…"


def files_with_key(root):
    """`root` 下所有普通文件里，含有密钥（任何写法）的文件及其写法。"""
    hits = []
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            try:
                if not stat.S_ISREG(path.lstat().st_mode):
                    continue  # 套接字、管道、符号链接不读
                data = path.read_bytes()
            except OSError:
                continue
            for pattern, label in BYTE_PATTERNS.items():
                if pattern in data:
                    hits.append(f"{path.relative_to(root)}：{label}")
                    break
    return hits


# ---------------------------------------------------------------------------
# 用哨兵密钥启动的本地端点（独立进程，和命令行用法一样）
# ---------------------------------------------------------------------------


def remote_looking(base_url):
    """把 `127.0.0.1` 换成同一地址的简写 `127.1`。

    切换器在“自定义”预设下把 `127.0.0.1`、`localhost` 当作不校验密钥的本地服务，
    发请求时用占位密钥，不带 `OPENAI_API_KEY`。换个写法，它就像对待远程服务商一样带上密钥，
    这正是我们要检查的那条路。
    """
    url = base_url.replace("://127.0.0.1:", "://127.1:")
    assert url != base_url, base_url
    return url


class Endpoint:
    def __init__(self, base_url, log_path):
        self.base_url = base_url
        self.log_path = log_path

    def log(self):
        return self.log_path.read_text(encoding="utf-8", errors="replace")


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("endpoint")
    out_path, log_path = folder / "stdout.txt", folder / "stderr.txt"
    env = learner_environment()
    env["PYTHONUNBUFFERED"] = "1"
    with open(out_path, "wb") as out, open(log_path, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "harness_lib.models.server", "--port", "0", "--api-key", SENTINEL, "--verbose"],
            stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=ROOT, env=env,
        )
    try:
        yield Endpoint(remote_looking(printed_base_url(proc, out_path, "本地端点", log_path)), log_path)
    finally:
        stop_process(proc)
    # 端点自己的输出（启动信息和请求日志）里也不能有密钥
    assert_clean(out_path.read_text(encoding="utf-8", errors="replace"), "本地端点的标准输出")
    assert_clean(log_path.read_text(encoding="utf-8", errors="replace"), "本地端点的请求日志")


# ---------------------------------------------------------------------------
# 在真实模式下执行每一本笔记本
# ---------------------------------------------------------------------------


def kernel_env(base_url, box):
    """内核的环境变量：真实模式 + 哨兵密钥；所有会写文件的目录都放进 `box`。"""
    home, tmp = box / "home", box / "tmp"
    dropped = ("HARNESS_", "OPENAI_", "XDG_", "JUPYTER_", "IPYTHON", "MPLCONFIGDIR", "TMP", "TEMP")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env.update({
        "HARNESS_MODE": "real",
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": SENTINEL,
        "HARNESS_MODEL": MODEL,
        "HARNESS_APPROVAL": "allow",  # 这里测的是密钥不外泄，不是审批：端点不可信，但命令一律放行
        "HOME": str(home),
        "USERPROFILE": str(home),
        "TMPDIR": str(tmp),
        "TEMP": str(tmp),
        "TMP": str(tmp),
        "IPYTHONDIR": str(home / ".ipython"),
        "JUPYTER_RUNTIME_DIR": str(box / "runtime"),
        "JUPYTER_CONFIG_DIR": str(home / ".jupyter"),
        "JUPYTER_DATA_DIR": str(home / ".local" / "share" / "jupyter"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "MPLCONFIGDIR": str(home / ".config" / "matplotlib"),
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    for key in ("HOME", "TMPDIR", "IPYTHONDIR", "JUPYTER_RUNTIME_DIR"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    return env


def run_notebook(path, base_url, box):
    """在 `box/work` 里的笔记本副本上执行 `path`，返回执行后的笔记本（出错时原样抛出）。"""
    work = box / "work" / NOTEBOOKS.name
    shutil.copytree(NOTEBOOKS, work, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    env = kernel_env(base_url, box)
    nb = nbformat.read(work / path.name, as_version=4)
    # 连接文件由本进程写，所以直接指定到临时文件夹里
    km = AsyncKernelManager(kernel_name="python3", connection_file=str(box / "runtime" / "kernel-secrets.json"))
    client = NotebookClient(nb, km=km, timeout=120, kernel_name="python3", allow_errors=False,
                            resources={"metadata": {"path": str(work)}})
    client.execute(env=env)
    return nb


@pytest.fixture(scope="module")
def executions(request, endpoint, tmp_path_factory):
    """把本次选中的笔记本交给两个线程并行执行；返回 {文件名: (future, 临时文件夹)}。"""
    chosen = []
    for item in request.session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.module is request.module and params.get("path") in PATHS and params["path"] not in chosen:
            chosen.append(params["path"])
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="secrets-nb")
    runs = {}
    for path in chosen:
        box = tmp_path_factory.mktemp(f"box-{path.stem}")
        runs[path.name] = (pool.submit(run_notebook, path, endpoint.base_url, box), box)
    yield runs
    pool.shutdown(wait=True, cancel_futures=True)


def check_executed(nb, box):
    """执行后的笔记本和临时文件夹里都不能有密钥；用了切换器的笔记本还要确认走的是真实模式。"""
    # 1. 单元格输出（按格报告位置），再加上整本笔记本（输出 + 元数据）
    for i, cell in enumerate(nb.cells):
        outputs = cell.get("outputs", [])
        assert_clean(json.dumps(outputs, ensure_ascii=False), f"第 {i} 格的输出")
        assert_clean(json.dumps(outputs), f"第 {i} 格的输出（ASCII 转义）")
    assert_clean(nbformat.writes(nb), "序列化的笔记本")

    sources = "".join(c.source for c in nb.cells if c.cell_type == "code")
    if "model_switch(" in sources:
        # 2. 保存下来的控件状态
        widgets = nb.metadata.get("widgets")
        assert widgets, "用了切换器的笔记本应当保存控件状态"
        assert_clean(json.dumps(widgets, ensure_ascii=False), "metadata.widgets")
        models = widgets["application/vnd.jupyter.widget-state+json"]["state"].values()
        passwords = [m["state"] for m in models if m.get("model_name") == "PasswordModel"]
        assert passwords and all(s.get("value", "") == "" for s in passwords), "密码框在保存的状态里应当是空的"
        # 确实走了真实模式：切换器的模式按钮选的是“真实端点”
        modes = [m["state"] for m in models if m.get("model_name") == "ToggleButtonsModel"
                 and "真实端点" in m["state"].get("_options_labels", [])]
        assert modes and all(s["_options_labels"][s["index"]] == "真实端点" for s in modes), \
            "笔记本应当在真实模式下运行"

    # 3. 内核写下的每个文件（HOME、TMPDIR、运行目录和笔记本副本所在的文件夹）
    hits = files_with_key(box)
    assert not hits, "这些文件里有密钥：" + "；".join(hits)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_notebook_in_real_mode_never_shows_the_key(path, executions):
    future, box = executions[path.name]
    check_executed(future.result(), box)


def test_endpoint_saw_authenticated_requests(endpoint, executions):
    """笔记本真的带着哨兵密钥访问了端点：请求日志里有成功的调用，且没有 401。"""
    for future, _box in executions.values():
        future.exception()  # 等全部执行完；失败由上面的参数化测试报告
    if not executions:
        pytest.skip("本次没有选中任何笔记本")
    log = endpoint.log()
    assert re.search(r'"POST /v1/chat/completions HTTP/1\.1" 200', log), "端点没有收到成功的模型调用"
    assert '" 401 ' not in log, "有请求没带对密钥"


# ---------------------------------------------------------------------------
# 单元级检查（进程内的本地端点，同一把哨兵密钥）
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server():
    with start_server(api_key=SENTINEL) as srv:
        srv.base_url = remote_looking(srv.base_url)
        yield srv


def real_env(base_url, key=SENTINEL):
    return {"HARNESS_MODE": "real", "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": key, "HARNESS_MODEL": MODEL}


def widget_states():
    """本进程里所有控件的状态（与保存进笔记本元数据的是同一份东西）。"""
    import ipywidgets

    return json.dumps(ipywidgets.Widget.get_manager_state(drop_defaults=False), ensure_ascii=False, default=str)


def exception_texts(exc):
    """异常链上每个异常的 str、repr 和完整的调用栈文字。"""
    parts = ["".join(traceback.format_exception(type(exc), exc, exc.__traceback__))]
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        parts += [str(exc), repr(exc), json.dumps(getattr(exc, "body", None), default=str)]
        render = getattr(exc, "_render_traceback_", None)
        if callable(render):
            parts += list(render())
        exc = exc.__cause__ or exc.__context__
    return "\n".join(parts)


def test_switch_with_env_key(server):
    sw = model_switch(environ=real_env(server.base_url))
    status = sw.test_connection()
    assert status.startswith("✓"), status  # 密钥确实用上了
    client, model = sw.current()
    texts = {
        "repr(switch)": repr(sw), "str(switch)": str(sw), "状态行": sw.status,
        "状态行 HTML": sw.status_html.value,
        "显示用的 mimebundle": json.dumps(sw._repr_mimebundle_(), ensure_ascii=False),
        "repr(client)": repr(client), "str(client)": str(client), "模型名": model,
        "控件状态": widget_states(),
    }
    for label, text in texts.items():
        assert_clean(text, label)


def test_switch_with_typed_key_and_wrong_key(server):
    sw = model_switch(environ={})
    sw.preset_dropdown.value = "custom"
    sw.mode_buttons.value = "real"
    sw.base_url_text.value = server.base_url
    sw.model_text.value = MODEL

    sw.key_password.set_state({"value": WRONG})  # 和前端发来的更新走同一条路
    wrong = sw.test_connection()
    assert "401" in wrong, wrong
    sw.key_password.set_state({"value": SENTINEL})
    right = sw.test_connection()
    assert right.startswith("✓"), right
    assert sw.key_password.value == ""
    for label, text in {"401 的状态行": wrong, "成功的状态行": right, "repr(switch)": repr(sw),
                        "控件状态": widget_states(),
                        "mimebundle": json.dumps(sw._repr_mimebundle_(), ensure_ascii=False)}.items():
        assert_clean(text, label, keys=(SENTINEL, WRONG))


def test_client_from_env_repr_and_config_errors(server):
    client, model = client_from_env(real_env(server.base_url))
    assert client.api_key == SENTINEL
    for text in (repr(client), str(client), repr(client.chat.completions), model):
        assert_clean(text, "client_from_env 的结果")
    env = real_env("https://api.example.com/v1")
    env.pop("HARNESS_MODEL")
    with pytest.raises(Exception) as info:
        client_from_env(env)
    assert_clean(exception_texts(info.value), "缺模型名时的异常")
    with pytest.raises(Exception) as info:
        client_from_env({**real_env(server.base_url), "HARNESS_MODE": "REAL?"})
    assert_clean(exception_texts(info.value), "HARNESS_MODE 写错时的异常")


def test_explain_error_for_401(server):
    client = openai.OpenAI(base_url=server.base_url, api_key=WRONG, max_retries=0)
    with pytest.raises(openai.AuthenticationError) as info:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    exc = info.value
    for key in (None, WRONG, [WRONG, SENTINEL]):
        text = explain_error(exc, key)
        assert "401" in text
        assert_clean(text, f"explain_error(key={key is not None})", keys=(SENTINEL, WRONG))
    assert_clean(exception_texts(exc), "AuthenticationError", keys=(SENTINEL, WRONG))


def test_explain_error_when_provider_echoes_the_key():
    """有的服务商会在 401 的原话里回显收到的密钥；explain_error 拿到密钥时要把它抹掉。"""
    import httpx2

    url = "https://api.example.com/v1/chat/completions"
    for echoed in (SENTINEL, f"{SENTINEL[:14]}****{SENTINEL[-4:]}", SENTINEL[5:40]):
        body = {"message": f"Incorrect API key provided: {echoed}.", "type": "invalid_request_error"}
        response = httpx2.Response(401, request=httpx2.Request("POST", url), json={"error": body})
        exc = openai.AuthenticationError(f"Error code: 401 - {body}", response=response, body=body)
        assert_clean(explain_error(exc, SENTINEL), "explain_error（服务商回显密钥）")


def test_agent_loop_auth_error_and_transcript(server):
    messages = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
    client, model = client_from_env(real_env(server.base_url, key=WRONG))
    with pytest.raises(Exception) as info:
        agent_loop(messages, client=client, model=model)
    exc = info.value
    chain = []
    e = exc
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    assert any(isinstance(e, openai.AuthenticationError) for e in chain), repr(exc)
    assert_clean(exception_texts(exc), "agent_loop 抛出的异常", keys=(SENTINEL, WRONG))
    assert len(messages) == 1  # 失败的一轮不写进 messages

    from harness_lib.models import errors

    from_sdk = getattr(errors, "from_sdk", None)
    if from_sdk is not None:
        original = next(e for e in chain if isinstance(e, openai.AuthenticationError))
        wrapped = from_sdk(original)
        assert isinstance(wrapped, errors.EndpointError)
        text = "\n".join([str(wrapped), repr(wrapped), wrapped.explanation, exception_texts(wrapped)])
        assert_clean(text, "EndpointError", keys=(SENTINEL, WRONG))


def test_agent_loop_transcript_over_http(server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "app.py").write_text("print('hi')\n", encoding="utf-8")
    client, model = client_from_env(real_env(server.base_url))
    messages = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
    answer = agent_loop(messages, client=client, model=model)
    assert any(m.get("role") == "tool" for m in messages), "应当至少执行过一次工具"
    for label, text in {"回答": answer,
                        "对话记录": json.dumps(messages, ensure_ascii=False, default=str),
                        "消息表": messages_frame(messages).to_html()}.items():
        assert_clean(text, label)


def test_tool_commands_cannot_read_the_key(tmp_path, monkeypatch):
    """密钥在内核的环境变量里；模型让执行框架跑 `env` 时，它不能跟着工具结果回到对话记录。"""
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    monkeypatch.chdir(tmp_path)
    show_env = "set" if os.name == "nt" else "env"
    assert_clean(run_bash(show_env), "run_bash 的输出")
    script = FakeClient(script=[
        tool_reply(scripted_call("bash", {"command": show_env})),
        text_reply("看过环境变量了。"),
    ])
    messages = [{"role": "user", "content": "看看有哪些环境变量"}]
    agent_loop(messages, client=script, model="scripted")
    tool_output = next(m["content"] for m in messages if m.get("role") == "tool")
    assert "PATH" in tool_output.upper()  # 命令确实跑了
    assert_clean(json.dumps(messages, ensure_ascii=False), "工具结果所在的对话记录")


def test_redact_masks_a_key_the_server_echoes_without_knowing_the_key():
    """服务器回显的“头几位、一串星号、末几位”：不在环境变量里、也没传进来的钥匙，照样抹掉；Markdown 的粗体不动。"""
    from harness_lib.safety.secrets import redact

    text = redact("Incorrect API key provided: demo-key************Rt5Wp8. You can find it.", environ={})
    assert "demo-key" not in text and "Rt5Wp8" not in text and text.endswith("provided: ***. You can find it.")
    assert redact("这是 **粗体** 和 ***强调***", environ={}) == "这是 **粗体** 和 ***强调***"
