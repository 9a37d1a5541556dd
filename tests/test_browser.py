"""在真实浏览器里打开 JupyterLab，像学习者一样运行笔记本（`make test-browser`）。

nbclient 的无头执行（test_notebooks.py）看不到前端：小部件画没画出来、按钮点了有没有用、
消息表是原地刷新还是越堆越多、浏览器控制台有没有报错。这里用无头 Chromium 检查这些：

- 00：菜单 Run → Run All Cells 全部跑通；切换器显示出“假模型（离线）/真实端点”，默认选中假模型，
  `switch.test_connection()` 给出 ✓；在下拉框里选“本项目的本地端点”，点“测试连接”按钮看到 ✓ 连接成功，
  重新运行取客户端的那一格（`client, MODEL = switch.current()`），输出从 FakeClient 变成 OpenAI；
  第一次调用经 HTTP 再做一遍；点回“假模型（离线）”，又变回 FakeClient。
- 03：一段一段地运行。每张消息表都是它那一格的快照：第一步建的表停在 1 行；后面每个调用
  `view.update()` 的格子输出自己的一张表，行数等于格子里打印的消息条数；每格最多一张表，不会越堆越多。
  `simple_loop` 运行时，运行循环的那一格里的表逐轮原地刷新，比第四步手工做出的表多一行最后的回答；
  用切换器换成本地端点后，同一个循环经 HTTP 再跑一遍。
- 两本都检查：没有报错输出，浏览器控制台没有错误。

截图存到 `artifacts/browser/`（不进 git）；README 用的那张是从这里挑出来、复制到 `docs/screenshots/` 的。
截图里的中文和 ✓ 需要系统装有中文字体和彩色表情字体（.ci/run 会装 fonts-wqy-microhei、fonts-noto-color-emoji）。
"""

from __future__ import annotations

import os
import re

import pytest

from browser_helpers import CHROMIUM, LabServer, NotebookPage, fresh_folder, launch_browser, screenshot_on_failure
from conftest import NOTEBOOKS, ROOT

pytestmark = pytest.mark.browser

ARTIFACTS = ROOT / "artifacts" / "browser"

# 浏览器控制台里可以忽略的错误：只收能说清来历的。目前没有。
# （要加的话写清楚是哪条消息、为什么无害，并用尽量窄的正则。）
IGNORED_CONSOLE_ERRORS: list[re.Pattern] = []
# Notebook 7.6 自己在页面加载时（还没运行任何格子）就报这一条：它的核心代码读一个没有加载的插件的设置 schema。
# 公开报告过（gilad-rubin/hypster 的 issue #108，Notebook 7.6.0）；与本项目的代码无关，只在 Notebook 7 界面里忽略。
NOTEBOOK7_KNOWN_ERRORS = [re.compile(r"Cannot read properties of undefined \(reading 'schema'\)")]

FAKE_LABEL = "假模型（离线）"
REAL_LABEL = "真实端点"
LOCAL_PRESET = "本项目的本地端点"  # harness_lib.ui.clients 里 key 为 "local" 的预设


# ---------------------------------------------------------------------------
# 夹具：一个 JupyterLab、一个浏览器，整个模块共用
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def artifacts():
    return fresh_folder(ARTIFACTS)


def _server(tmp_path_factory, artifacts, name):
    """在临时副本上起一个 Jupyter 服务器，用完关掉；日志写到 artifacts/<name>.log。"""
    server = LabServer(NOTEBOOKS, tmp_path_factory.mktemp(name), artifacts / f"{name}.log")
    assert ROOT not in server.root.parents, "必须服务临时副本，不能是仓库里的笔记本"
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def lab(tmp_path_factory, artifacts):
    yield from _server(tmp_path_factory, artifacts, "jupyterlab")


@pytest.fixture(scope="module")
def notebook7_server(tmp_path_factory, artifacts):
    """给 Notebook 7 单独起一个服务器：自己的配置和工作区目录，不继承 JupyterLab 页面存下的布局。"""
    yield from _server(tmp_path_factory, artifacts, "notebook7")


@pytest.fixture(scope="module")
def playwright(tmp_path_factory):
    sync_api = pytest.importorskip("playwright.sync_api", reason="需要 pip install -e '.[browser]'")
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"找不到 {CHROMIUM}：请先安装 Chromium（Debian/Ubuntu：apt-get install -y chromium）")
    # 2 核的 CI 机器上，内核响应小部件事件可能要好几秒；等待时间都放宽
    sync_api.expect.set_options(timeout=60_000)
    with sync_api.sync_playwright() as p:
        yield p


def _context(playwright, tmp_path_factory):
    """一个新的浏览器用户目录里的无头 Chromium，用完关掉。"""
    context = launch_browser(playwright, tmp_path_factory.mktemp("chromium-profile"))
    context.set_default_timeout(60_000)
    try:
        yield context
    finally:
        context.close()


@pytest.fixture(scope="module")
def browser(playwright, tmp_path_factory):
    yield from _context(playwright, tmp_path_factory)


@pytest.fixture
def fresh_browser(playwright, tmp_path_factory):
    """一个全新的浏览器用户目录：Notebook 7 不继承 JupyterLab 页面留下的本地存储和 Cookie。"""
    yield from _context(playwright, tmp_path_factory)


@pytest.fixture
def open_notebook(request, browser, artifacts):
    pages = []

    def _open(name: str, ui: str = "lab") -> NotebookPage:
        if ui == "lab":
            server, context = request.getfixturevalue("lab"), browser
        else:
            server, context = request.getfixturevalue("notebook7_server"), request.getfixturevalue("fresh_browser")
        page = context.new_page()
        pages.append(page)
        nb = NotebookPage(page, server, name, artifacts, ui=ui)
        nb.open()
        return nb

    yield _open
    for page in pages:
        page.close()


# ---------------------------------------------------------------------------
# 小工具
# ---------------------------------------------------------------------------


def expect(locator):
    from playwright.sync_api import expect as _expect

    return _expect(locator)


def assert_console_clean(nb: NotebookPage) -> None:
    ignored = IGNORED_CONSOLE_ERRORS + (NOTEBOOK7_KNOWN_ERRORS if nb.ui == "notebook" else [])
    errors = [e for e in nb.console_errors if not any(p.search(e) for p in ignored)]
    assert not errors, f"{nb.name}：浏览器控制台有错误：\n" + "\n".join(errors)


def switch_parts(nb: NotebookPage, cell: int) -> dict:
    out = nb.cell(cell).locator(".jp-Cell-outputArea")
    return {
        "fake": out.locator("button.widget-toggle-button", has_text=FAKE_LABEL),
        "real": out.locator("button.widget-toggle-button", has_text=REAL_LABEL),
        "active": out.locator("button.widget-toggle-button.mod-active"),
        "preset": out.locator(".widget-dropdown select"),
        "test": out.get_by_role("button", name="测试连接"),
        "status": out.locator(".widget-html").last,  # 第一个 .widget-html 只放 pandas 表的样式
    }


def check_switch_renders(nb: NotebookPage, cell: int) -> dict:
    """切换器画出来了：两个模式按钮都看得见，默认选中假模型。"""
    sw = switch_parts(nb, cell)
    expect(sw["fake"]).to_be_visible()
    expect(sw["real"]).to_be_visible()
    expect(sw["active"]).to_have_text(FAKE_LABEL)
    expect(sw["preset"]).to_be_hidden()  # 假模型用不到真实端点的几栏
    expect(sw["test"]).to_be_hidden()
    return sw


def choose_local_endpoint(nb: NotebookPage, cell: int) -> None:
    """在下拉框里选“本项目的本地端点”，模式随之切到真实端点；点“测试连接”，等到 ✓。"""
    sw = switch_parts(nb, cell)
    sw["real"].click()
    expect(sw["preset"]).to_be_visible()  # 选了真实端点，那几栏才出现
    sw["preset"].select_option(label=LOCAL_PRESET)
    expect(sw["active"]).to_have_text(REAL_LABEL)
    expect(sw["status"]).to_contain_text(re.compile(r"真实端点 http://127\.0\.0\.1:\d+/v1"))
    sw["test"].click()
    expect(sw["status"]).to_contain_text("✓ 连接成功", timeout=90_000)
    expect(sw["status"]).to_contain_text("fake-agent-1")


def choose_fake_model(nb: NotebookPage, cell: int) -> None:
    """点“假模型（离线）”按钮，状态行随之改成假模型。"""
    sw = switch_parts(nb, cell)
    sw["fake"].click()
    expect(sw["active"]).to_have_text(FAKE_LABEL)
    expect(sw["status"]).to_contain_text("当前：假模型")


def client_kind(nb: NotebookPage, cell: int) -> str:
    """`client, MODEL = switch.current()` 那一格打印出来的客户端类型。"""
    text = nb.output_text(cell)
    kinds = [k for k in ("FakeClient", "OpenAI", "PresetClient") if re.search(rf"\b{k}\b", text)]
    assert len(kinds) == 1, f"{nb.name} 第 {cell} 格应当打印出一种客户端，实际输出：{text!r}"
    return "OpenAI" if kinds[0] == "PresetClient" else kinds[0]  # 真实端点的客户端是 openai.OpenAI 的子类


def header_count(nb: NotebookPage, cell: int) -> int:
    """消息表表头“共 N 条消息”里的 N。"""
    text = nb.views_in(cell).first.inner_text()
    m = re.search(r"共 (\d+) 条消息", text)
    assert m, f"{nb.name} 第 {cell} 格的消息表没有表头计数：{text[:200]!r}"
    return int(m.group(1))


def roles_in(nb: NotebookPage, cell: int) -> list[str]:
    """消息表里每一行的 role（角色格的第一行；助手消息下面还有一行用量和用时）。"""
    cells = nb.views_in(cell).first.locator("tbody > tr > td:nth-child(2)").all_inner_texts()
    return [(text.strip().splitlines() or [""])[0] for text in cells]


def turn_ends(roles: list[str]) -> list[int]:
    """每一轮结束时消息的条数：一条助手消息，加上紧跟着它的工具消息。"""
    ends = []
    for i, role in enumerate(roles):
        if role.strip() == "assistant":
            end = i + 1
            while end < len(roles) and roles[end].strip() == "tool":
                end += 1
            ends.append(end)
    return ends


def view_cells(nb: NotebookPage) -> list[int]:
    """建消息表的格子：有一行形如 `xxx_view = show_messages(...)` 或 `view = show_messages(...)`。"""
    pattern = re.compile(r"^\w*view = show_messages\(", re.M)
    return [i for i, c in enumerate(nb.cells) if c["cell_type"] == "code" and pattern.search("".join(c["source"]))]


def update_cells(nb: NotebookPage, after: int) -> list[int]:
    """第 after 格之后、单独一行写着 `view.update()` 的格子（刷新第一步那张表的地方）。"""
    return [
        i for i, c in enumerate(nb.cells)
        if i > after and c["cell_type"] == "code"
        and any(ln.strip() == "view.update()" for ln in "".join(c["source"]).splitlines())
    ]


# 在一个输出区上挂一个 MutationObserver：每次变化都记下（表的张数，第一张表的行数）
WATCH_JS = """(area) => {
  area.__seen = [];
  if (area.__watching) return;  // 已经在盯着了：只清空记录
  area.__watching = true;
  const rows = v => [...v.querySelectorAll('tbody > tr')].filter(r => !r.querySelector('td[colspan]')).length;
  const note = () => {
    const views = area.querySelectorAll('.messages-view');
    const last = area.__seen[area.__seen.length - 1];
    const now = [views.length, views.length ? rows(views[0]) : 0];
    if (!last || last[0] !== now[0] || last[1] !== now[1]) area.__seen.push(now);
  };
  new MutationObserver(note).observe(area, {childList: true, subtree: true, characterData: true});
}"""


# ---------------------------------------------------------------------------
# 00：切换器、测试连接、换客户端、第一次调用的消息表
# ---------------------------------------------------------------------------


def test_setup_notebook_switch_and_table(open_notebook):
    nb = open_notebook("00_setup.ipynb")
    with screenshot_on_failure(nb, "00_setup"):
        nb.hide_sidebars()
        nb.run_all()

        switch = nb.find("switch = model_switch()")
        probe = nb.find("print(switch.test_connection())")
        client_cell = nb.find("client, MODEL = switch.current()")
        call = nb.find("response = chat.ask(messages")
        assert switch < probe < client_cell < call

        # 默认：假模型
        sw = check_switch_renders(nb, switch)
        assert "✓ 假模型可用" in nb.output_text(probe)
        expect(sw["status"]).to_contain_text("✓ 假模型可用")
        assert client_kind(nb, client_cell) == "FakeClient"
        # 调一次模型的那一格：一张表，先画用户消息，回复到了原地刷新成 2 行
        assert nb.rows_in(call) == 2 == header_count(nb, call)
        assert nb.total_views() == 1
        nb.shot("00_after_run_all", scroll_to=switch)
        # pandas 的表（版本表）表头靠左、按内容分列宽：JupyterLab 默认靠右、五列等宽，样式随切换器一起来
        versions = nb.cell(nb.find("versions = pd.DataFrame(rows)")).locator("table.dataframe")
        looks = versions.evaluate("""t => [getComputedStyle(t).tableLayout,
            ...[...t.querySelectorAll('thead th')].map(th => getComputedStyle(th).textAlign)]""")
        assert looks[0] == "auto" and set(looks[1:]) == {"left"}, f"版本表的样式：{looks}"

        # 换成本项目的本地端点：测试连接 ✓，重新取 client，变成 openai.OpenAI
        choose_local_endpoint(nb, switch)
        nb.run_cells(client_cell)
        assert client_kind(nb, client_cell) == "OpenAI"
        assert "fake-agent-1" in nb.output_text(client_cell)

        # 经 HTTP 再调一次：还是那一格里的一张表，2 行
        nb.run_cells(call)
        assert nb.rows_in(call) == 2 == header_count(nb, call)
        assert "ChatCompletion" in nb.output_text(call)
        assert nb.total_views() == 1
        nb.shot("00_local_endpoint", scroll_to=switch)

        # 换回假模型
        choose_fake_model(nb, switch)
        nb.run_cells(client_cell)
        assert client_kind(nb, client_cell) == "FakeClient"

        nb.assert_no_error_outputs()
        assert_console_clean(nb)


# ---------------------------------------------------------------------------
# 03：消息表原地刷新、循环逐轮刷新、换端点后循环照跑
# ---------------------------------------------------------------------------


def test_one_request_live_table_and_loop(open_notebook):
    nb = open_notebook("03_one_request.ipynb")
    with screenshot_on_failure(nb, "03_one_request"):
        nb.hide_sidebars()
        switch = nb.find("switch = model_switch()")
        client_cell = nb.find("client, MODEL = switch.current()")
        view = nb.find("view = show_messages(messages)")
        loop_run = nb.find("loop_view = show_messages(loop_messages)")
        updates = update_cells(nb, view)
        assert updates and updates[-1] < loop_run

        # 一段一段地跑：先到建表的那一格
        nb.run_cells(0, view)
        check_switch_renders(nb, switch)
        assert client_kind(nb, client_cell) == "FakeClient"
        assert nb.rows_in(view) == 1
        assert nb.total_views() == 1

        # 每次追加消息、调用 view.update() 之后：那一格输出一张此刻的表，行数 = 表头的条数；
        # 第一步那张表停在 1 行
        seen, start = [1], view + 1
        for u in updates:
            nb.run_cells(start, u)
            assert nb.rows_in(u) == header_count(nb, u) > 1
            assert nb.rows_in(view) == 1, "第一步那张表是它那一格的快照，后面的格子不应当改写它"
            seen.append(nb.rows_in(u))
            start = u + 1
        assert seen == sorted(set(seen)), f"各步的表的行数应当逐次增加，实际 {seen}"
        final_rows = seen[-1]

        # 跑完剩下的格子，同时盯着运行循环那一格的输出区
        loop_area = nb.cell(loop_run).locator(".jp-Cell-outputArea")
        loop_area.evaluate(WATCH_JS)
        nb.run_from(start)
        nb.shot("03_live_table", scroll_to=loop_run, until=loop_run + 1)

        # 每格最多一张表，不会越堆越多；建表的格子停在建表时的样子
        for i, c in enumerate(nb.cells):
            if c["cell_type"] == "code":
                assert nb.views_in(i).count() <= 1, f"第 {i} 格的输出里有不止一张消息表"
        assert nb.rows_in(view) == 1
        # JupyterLab 给渲染的表格 table-layout: fixed；消息表按内容分宽度：pos 窄，content 宽
        widths = nb.views_in(loop_run).first.locator("thead th").evaluate_all(
            "ths => ths.map(t => t.getBoundingClientRect().width)")
        assert widths[0] < widths[2] / 2, f"各列应当按内容分宽度，实际 {widths}"
        # 循环那一格的表比第四步手工做出来的多一行：最后的回答（原文的 M4）
        loop_rows = nb.rows_in(loop_run)
        assert loop_rows == final_rows + 1 == header_count(nb, loop_run)
        # 逐轮刷新：每一轮结束时（助手消息和它引出的工具消息都追加之后）表里的行数，都应当被看到过
        watched = loop_area.evaluate("a => a.__seen")
        assert max(n for n, _ in watched) == 1, f"循环那个输出区里同时出现过多张表：{watched}"
        rows = [r for n, r in watched if n == 1]
        assert rows == [1, *turn_ends(roles_in(nb, loop_run))], f"循环那张表没有逐轮刷新：{watched}"  # 先画用户那一条
        # 每条助手消息下面标着那次调用的用量和用时（假模型也报用量）
        table_text = nb.views_in(loop_run).first.inner_text()
        assert len(re.findall(r"\d+\+\d+ token · ", table_text)) == roles_in(nb, loop_run).count("assistant")
        total = nb.total_views()

        # 用切换器换成本地端点，同一个 simple_loop 经 HTTP 再跑一遍
        choose_local_endpoint(nb, switch)
        nb.run_cells(client_cell)
        assert client_kind(nb, client_cell) == "OpenAI"
        loop_area.evaluate(WATCH_JS)
        nb.run_cells(loop_run)
        assert nb.rows_in(loop_run) == header_count(nb, loop_run) == loop_rows
        rows = [r for n, r in loop_area.evaluate("a => a.__seen") if n == 1]
        assert rows == [1, *turn_ends(roles_in(nb, loop_run))], f"经 HTTP 时循环那张表没有逐轮刷新：{rows}"
        assert nb.output_text(loop_run).strip(), "循环应当打印出最后的回答"
        assert nb.total_views() == total
        nb.shot("03_loop_local_endpoint", scroll_to=loop_run)

        # 换回假模型
        choose_fake_model(nb, switch)
        nb.run_cells(client_cell)
        assert client_kind(nb, client_cell) == "FakeClient"

        nb.assert_no_error_outputs()
        assert_console_clean(nb)


# ---------------------------------------------------------------------------
# 11：另外两种接口的表（Responses 的输入条目、Anthropic 的消息）
# ---------------------------------------------------------------------------

# 一张表里某个小标签（按文字找）的背景色和边框色
CHIP_STYLE_JS = """(view, text) => [...view.querySelectorAll('span')].filter(s => s.innerText.trim() === text)
  .map(s => [getComputedStyle(s).backgroundColor, getComputedStyle(s).borderTopColor])"""


def test_two_more_apis_tables_pair_by_their_own_ids(open_notebook):
    nb = open_notebook("11_two_more_apis.ipynb")
    with screenshot_on_failure(nb, "11_two_more_apis"):
        nb.hide_sidebars()
        nb.run_all()
        first = nb.find("view = show_items(items")
        step = update_cells(nb, first)[0]  # 追加输出条目、执行调用之后的那一格
        loop = nb.find("m_run = run_loop(messages_loop")
        # 第一步那张表停在 1 行；手工做完一轮的那一格：用户、调用、输出
        assert nb.rows_in(first) == 1
        assert nb.rows_in(step) == 3
        table = nb.views_in(step).first
        heads = table.locator("thead th").all_inner_texts()
        assert heads == ["pos", "type · role", "content", "function_call", "call_id"], heads
        expect(table).to_contain_text("共 3 个条目")
        expect(table).to_contain_text("同色小标签 = 同一个 call_id")
        assert roles_in(nb, step) == ["user", "function_call", "function_call_output"]
        # 调用那一行和输出那一行的 call_001 是同一个颜色的小标签
        chips = table.evaluate(CHIP_STYLE_JS, "call_001")
        assert len(chips) == 2 and chips[0] == chips[1], f"call_001 的两个小标签：{chips}"
        expect(table).to_contain_text("↩ 回应 pos 1")
        nb.shot("11_responses_items", scroll_to=step, until=step)
        # Anthropic 的表：tool_use 在助手消息里，tool_result 在下一条用户消息里
        anthropic = nb.views_in(loop).first
        heads = anthropic.locator("thead th").all_inner_texts()
        assert heads == ["pos", "role", "content", "tool_use", "tool_use_id"], heads
        assert roles_in(nb, loop) == ["user", "assistant", "user", "assistant"]
        expect(anthropic).to_contain_text("同色小标签 = 同一个 tool_use_id")
        expect(anthropic).to_contain_text("tool_result")
        nb.shot("11_messages_table", scroll_to=loop, until=loop)
        for i, c in enumerate(nb.cells):
            if c["cell_type"] == "code":
                assert nb.views_in(i).count() <= 1, f"第 {i} 格的输出里有不止一张表"
        nb.assert_no_error_outputs()
        assert_console_clean(nb)


# ---------------------------------------------------------------------------
# Notebook 7：同样的小部件和消息表，在另一种界面里
# ---------------------------------------------------------------------------


def test_notebook7_switch_tables_and_loop(open_notebook):
    nb = open_notebook("03_one_request.ipynb", ui="notebook")
    with screenshot_on_failure(nb, "03_notebook7"):
        switch = nb.find("switch = model_switch()")
        client_cell = nb.find("client, MODEL = switch.current()")
        view = nb.find("view = show_messages(messages)")
        loop_run = nb.find("loop_view = show_messages(loop_messages)")
        updates = update_cells(nb, view)

        loop_area = nb.cell(loop_run).locator(".jp-Cell-outputArea")
        loop_area.evaluate(WATCH_JS)
        nb.run_all()
        nb.shot("03_notebook7", scroll_to=loop_run, until=loop_run + 1)

        # 小部件在 Notebook 7 里同样画出来，默认是假模型
        check_switch_renders(nb, switch)
        assert client_kind(nb, client_cell) == "FakeClient"
        # 消息表是快照：第一步那张停在 1 行，每个刷新的格子一张，每格最多一张
        assert nb.rows_in(view) == 1
        rows = [nb.rows_in(u) for u in updates]
        assert rows == sorted(set(rows)) and rows[0] > 1, f"各步的表应当逐次变长，实际 {rows}"
        for i, c in enumerate(nb.cells):
            if c["cell_type"] == "code":
                assert nb.views_in(i).count() <= 1, f"第 {i} 格的输出里有不止一张消息表"
        # 运行循环的那一格里的表逐轮刷新，最后比手工一步步做出来的多一行（最后的回答）
        assert nb.rows_in(loop_run) == rows[-1] + 1 == header_count(nb, loop_run)
        watched = [r for n, r in loop_area.evaluate("a => a.__seen") if n == 1]
        assert watched == [1, *turn_ends(roles_in(nb, loop_run))], f"循环那张表没有逐轮刷新：{watched}"

        nb.assert_no_error_outputs()
        assert_console_clean(nb)
