"""在无头 Chromium 里打开 `make site` 建好的网站（`_build/site/`），每一页都看一遍（`make test-browser`）。

网站由本机的一个 HTTP 服务器（127.0.0.1）提供；浏览器的每个请求都经过路由：本机和 file:// 放行，
其余一律拦下并记下来。检查：

- 每一页：控制台没有错误，没有发往外面的请求，375 像素宽时整页不能横向滚动；
- 每本笔记本都有一页：页首写着执行的时间和方式、怎样自己运行；用了消息表的笔记本，页面上有消息表，
  带着角色底色和配对的小标签；练习和学生版一样，没有参考答案和隐藏测试；
- 笔记本里有 Mermaid 图的页面，图都画成了 SVG；从磁盘直接打开（file://）也一样；
- 切换器从保存的小部件状态画出来，旁边有说明；
- 09：有真实模型的录像时，它的消息表和假模型那一遍并排；
- 中文用真正的中文字体画出来：Chromium 报告的实际用到的字体是系统里的中文字体（fc-list :lang=zh）。

截图存到 `artifacts/site/`（不进 git）。
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

import pytest

from browser_helpers import CHROMIUM, fresh_folder, launch_browser
from conftest import ROOT, notebook_paths

pytestmark = pytest.mark.browser

SITE = ROOT / "_build" / "site"
ARTIFACTS = ROOT / "artifacts" / "site"
RECORDING = ROOT / "site" / "recordings" / "09_run.jsonl"
PHONE = {"width": 375, "height": 812}
DESKTOP = {"width": 1280, "height": 860}
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}
NOTEBOOKS = notebook_paths()
# 消息表里调用 ID 的小标签（harness_lib 的消息表只用行内样式画它）
CHIPS = ".messages-view span[style*=\"border-radius:9px\"][style*=\"font-family:monospace\"]"


def _source(path) -> tuple[str, str]:
    """(所有代码格的源码, 所有 markdown 格的源码)"""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    markdown = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return code, markdown


def _secret_lines(path) -> list[str]:
    """参考答案和隐藏测试里的代码行：学生版里没有它们，网页上也不能有（只取够长、别处没出现过的行）。"""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    secret, public = [], []
    for cell in cells:
        inside = False
        for line in "".join(cell["source"]).splitlines():
            if re.search(r"### BEGIN (SOLUTION|HIDDEN TESTS)", line):
                inside = True
            elif re.search(r"### END (SOLUTION|HIDDEN TESTS)", line):
                inside = False
            else:
                (secret if inside else public).append(line.strip())
    shown = set(public)
    return [line for line in secret if len(line) >= 25 and line not in shown]


# ---------------------------------------------------------------------------
# 夹具
# ---------------------------------------------------------------------------


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # 不往测试输出里写访问日志
        pass


@pytest.fixture(scope="module")
def site():
    if not (SITE / "index.html").exists():
        pytest.fail(f"没有找到 {SITE / 'index.html'}：先运行 make site")
    return SITE


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def artifacts():
    return fresh_folder(ARTIFACTS)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    sync_api = pytest.importorskip("playwright.sync_api", reason="需要 pip install -e '.[browser]'")
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"找不到 {CHROMIUM}：请先安装 Chromium（Debian/Ubuntu：apt-get install -y chromium）")
    with sync_api.sync_playwright() as p:
        context = launch_browser(p, tmp_path_factory.mktemp("chromium-site"))
        context.set_default_timeout(30_000)
        try:
            yield context
        finally:
            context.close()


class Visit:
    """打开一页，记下控制台错误和被拦下的外部请求。"""

    def __init__(self, context, url: str, viewport=DESKTOP):
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.page = context.new_page()
        self.page.set_viewport_size(viewport)
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(f"console.error: {m.text}"))
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.route("**/*", self._route)
        self.page.goto(url, wait_until="load")
        # 等 Mermaid 画完（没有图的页面立即满足）
        try:
            self.page.wait_for_function(
                "() => [...document.querySelectorAll('pre.mermaid')].every(p => p.querySelector('svg'))",
                timeout=30_000)
        except Exception:  # noqa: BLE001  超时也照常往下查，报告里说清楚
            self.errors.append("Mermaid 图 30 秒内没有全部画成 SVG")

    def _route(self, route):
        url = urlparse(route.request.url)
        if url.scheme in ("file", "data", "blob") or url.hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            self.outside.append(route.request.url)
            route.abort()

    def assert_clean(self, name: str) -> None:
        assert not self.outside, f"{name}：网页向外面发了请求：{self.outside}"
        assert not self.errors, f"{name}：浏览器控制台有错误：\n" + "\n".join(self.errors)

    def close(self) -> None:
        self.page.close()


def _pages(site) -> list[str]:
    return sorted(str(p.relative_to(site)) for p in site.rglob("*.html")
                  if "_static" not in p.parts and "_sources" not in p.parts and "reports" not in p.parts)


# ---------------------------------------------------------------------------
# 每一页
# ---------------------------------------------------------------------------


def test_every_page_is_clean_and_fits_a_phone(site, server, browser, artifacts):
    pages = _pages(site)
    assert "index.html" in pages
    problems = []
    for rel in pages:
        for viewport in (DESKTOP, PHONE):
            visit = Visit(browser, f"{server}/{rel}", viewport)
            try:
                visit.assert_clean(f"{rel}（{viewport['width']} 像素）")
                if viewport is PHONE:
                    widths = visit.page.evaluate(
                        "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
                    if widths[0] > widths[1] + 1:
                        wide = visit.page.evaluate("""(limit) => [...document.querySelectorAll('body *')]
                            .filter(e => e.getBoundingClientRect().right > limit + 1)
                            .slice(0, 5).map(e => e.tagName + '.' + [...e.classList].join('.'))""", widths[1])
                        problems.append(f"{rel}：375 像素宽时整页能横向滚动（{widths[0]} > {widths[1]}），超出的元素：{wide}")
                    if rel in ("index.html", "notebooks/03_one_request.html", "notebooks/00_setup.html"):
                        visit.page.screenshot(path=str(artifacts / f"{rel.replace('/', '_')}_375.png"))
                elif rel in ("index.html", "notebooks/03_one_request.html", "notebooks/00_setup.html",
                             "notebooks/09_probe_and_replay.html"):
                    visit.page.screenshot(path=str(artifacts / f"{rel.replace('/', '_')}.png"))
            finally:
                visit.close()
    assert not problems, "\n".join(problems)


# 图在手机上缩放后的最小比例：原宽约 440 像素的图缩到 343 像素，字还有约 12 像素高
MIN_DIAGRAM_SCALE = 0.75


def test_diagrams_fit_a_phone_without_shrinking_too_far(site, server, browser):
    """每张 Mermaid 图在 375 像素宽时整张都在版面里（不用横向滚动），缩放比例不小于 MIN_DIAGRAM_SCALE。"""
    problems, seen = [], 0
    for rel in _pages(site):
        if not rel.startswith("notebooks/"):
            continue
        visit = Visit(browser, f"{server}/{rel}", PHONE)
        try:
            for box, shown, natural in visit.page.evaluate("""() => [...document.querySelectorAll('pre.mermaid')]
                    .map(p => [p.clientWidth, p.querySelector('svg').getBoundingClientRect().width,
                               p.querySelector('svg').viewBox.baseVal.width])"""):
                seen += 1
                if shown > box + 1 or shown / natural < MIN_DIAGRAM_SCALE:
                    problems.append(f"{rel}：图宽 {natural:.0f}，画成 {shown:.0f}，版面 {box}")
        finally:
            visit.close()
    assert seen >= 5, f"只找到 {seen} 张图"
    assert not problems, "\n".join(problems)


def test_start_page_has_the_readme_table_and_chinese_navigation(server, browser):
    visit = Visit(browser, f"{server}/index.html")
    try:
        page = visit.page
        links = page.locator("article table a").evaluate_all("as => as.map(a => a.getAttribute('href'))")
        expected = [f"notebooks/{p.stem}.html" for p in NOTEBOOKS]
        assert links == expected, f"首页的笔记本表应当按顺序链到每一本：{links}"
        captions = page.locator(".bd-sidebar-primary p.caption").all_inner_texts()
        assert any("主线" in c for c in captions) and any("选学" in c for c in captions), captions
        nav = page.locator(".bd-sidebar-primary nav").inner_text()
        assert "跟着一次请求" in nav or "原文第三节" in nav, "侧栏的导航应当是笔记本的中文标题"
    finally:
        visit.close()


# ---------------------------------------------------------------------------
# 笔记本的页面
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_page(path, site, server, browser):
    assert (site / "notebooks" / f"{path.stem}.html").exists(), f"{path.name} 没有对应的网页"
    code, markdown = _source(path)
    visit = Visit(browser, f"{server}/notebooks/{path.stem}.html")
    try:
        page = visit.page
        visit.assert_clean(path.stem)
        text = page.locator("article").inner_text()

        note = page.locator(".series-run-note")
        assert note.count() == 1, "页首应当有一段说明：什么时候、怎样执行的"
        note_text = note.inner_text()
        assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", note_text) and "假模型" in note_text and "make lab" in note_text
        assert note.locator("a[href^='https://mybinder.org/v2/gh/']").count() == 1

        if "show_messages" in code:
            views = page.locator(".messages-view")
            assert views.count() >= 1, "这本笔记本用了消息表，网页上应当看得到"
            # 和 JupyterLab 里一样：行按角色上色
            colours = views.first.locator("tbody tr").evaluate_all(
                "rs => rs.map(r => getComputedStyle(r).backgroundColor)")
            assert colours and all(c not in ("rgba(0, 0, 0, 0)", "transparent") for c in colours), colours
            # 表里有工具调用时（第 4 列 tool_calls 有字），调用 ID 画成配对的小标签：助手行一个，工具行一个
            with_calls = page.evaluate("""() => [...document.querySelectorAll('.messages-view tbody td:nth-child(4)')]
                .filter(td => td.innerText.trim()).length""")
            if with_calls:
                assert page.locator(CHIPS).count() >= 2, "消息表里有工具调用，应当有调用 ID 的小标签"

        mermaid_blocks = markdown.count("```mermaid")
        drawn = page.locator("pre.mermaid svg").count()
        assert drawn == mermaid_blocks, f"笔记本里有 {mermaid_blocks} 张 Mermaid 图，网页上画出了 {drawn} 张"

        if "## 练习" in markdown:
            assert page.locator(".series-exercise-note").count() == 1
            assert "NotImplementedError" in text, "练习应当和学生版一样，答案格里是 raise NotImplementedError()"
            for leak in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "HIDDEN TESTS"):
                assert leak not in text, f"网页上不应当出现 {leak}"
            secret = _secret_lines(path)
            assert secret, "教师版里应当有参考答案"
            inputs = {line.strip() for block in page.locator(".cell_input pre").all_inner_texts()
                      for line in block.splitlines()}
            leaked = [line for line in secret if line in inputs]
            assert not leaked, f"网页上出现了参考答案或隐藏测试的代码：{leaked[:3]}"

        if "model_switch()" in code:
            widget = page.locator(".widget-toggle-buttons, .jupyter-widgets .widget-toggle-button")
            assert widget.count() >= 1, "切换器应当从保存的小部件状态画出来"
            assert "假模型（离线）" in page.locator(".jupyter-widgets").first.inner_text()
            assert page.locator(".series-widget-note").count() >= 1
            assert page.locator("button.widget-toggle-button[disabled]").count() >= 2, "网页上的切换器点不了"
            assert page.locator("input[type=password]:visible").count() == 0, "网页上没有填密钥的框"
    finally:
        visit.close()


def test_folded_long_content_and_pair_chips_look_as_in_jupyterlab(server, browser):
    visit = Visit(browser, f"{server}/notebooks/03_one_request.html")
    try:
        page = visit.page
        folded = page.locator(".messages-view details")
        assert folded.count() >= 1, "长内容应当折叠成 <details>"
        summary = folded.first.locator("summary")
        assert folded.first.evaluate("d => !d.open")
        summary.click()
        assert folded.first.evaluate("d => d.open"), "点摘要应当展开全文"
        chip = page.locator(CHIPS).first
        style = chip.evaluate("s => [getComputedStyle(s).backgroundColor, getComputedStyle(s).borderTopColor]")
        assert "rgba(0, 0, 0, 0)" not in style, f"小标签应当有底色和边框色：{style}"
    finally:
        visit.close()


@pytest.mark.skipif(not RECORDING.exists(), reason="没有真实模型的录像（site/recordings/09_run.jsonl）")
def test_recorded_real_run_beside_the_fake_one(server, browser):
    visit = Visit(browser, f"{server}/notebooks/09_probe_and_replay.html")
    try:
        pair = visit.page.locator("div[style*='flex-wrap']:has(> div > .messages-view)")
        assert pair.count() == 1, "录像的消息表应当和假模型那一遍放在同一行"
        titles = pair.locator(".messages-view > div:first-child b").all_inner_texts()
        assert len(titles) == 2 and "假模型" in titles[0] and "真实模型" in titles[1], titles
        model = json.loads(RECORDING.read_text(encoding="utf-8").splitlines()[0])["request"]["model"]
        assert model in titles[1]
        # 版面放不下两张整表时上下排：两张表的列都看得见，不藏在横向滚动的框里
        hidden = pair.evaluate("""p => [...p.querySelectorAll('.messages-view div')]
            .filter(d => d.scrollWidth > d.clientWidth + 1).length""")
        assert hidden == 0, f"{hidden} 个框要横向滚动才看得到整张表"
    finally:
        visit.close()


# ---------------------------------------------------------------------------
# 中文字体、从磁盘打开
# ---------------------------------------------------------------------------


def _chinese_font_families() -> set[str]:
    out = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True).stdout
    return {name.strip() for line in out.splitlines() for name in line.split(",") if name.strip()}


def test_chinese_text_uses_a_real_chinese_font(server, browser):
    families = _chinese_font_families()
    assert families, "系统里没有中文字体（Debian：apt-get install -y fonts-wqy-microhei）"
    visit = Visit(browser, f"{server}/notebooks/03_one_request.html")
    try:
        page = visit.page
        cdp = page.context.new_cdp_session(page)
        cdp.send("DOM.enable")
        cdp.send("CSS.enable")
        root = cdp.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
        for selector in ("article h1", "article p", ".messages-view td", ".bd-sidebar-primary nav a"):
            node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
            assert node, f"页面上没有 {selector}"
            fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
            used = {f["familyName"] for f in fonts if f["glyphCount"] > 0}
            assert used & families, f"{selector} 的文字没有用中文字体画：用到的是 {used}，系统的中文字体有 {families}"
        # 中文是方块字：每个字差不多一样宽，约一个字号（缺字时的方框或退回的西文字体不是这样）
        widths = page.evaluate("""() => {
            const s = document.createElement('span');
            s.style.fontSize = '20px';
            document.querySelector('article').appendChild(s);
            const w = t => { s.textContent = t; return s.getBoundingClientRect().width; };
            const out = [w('执'), w('执行框架'), w('消息')];
            s.remove();
            return out;
        }""")
        assert 16 <= widths[0] <= 24 and abs(widths[1] - 4 * widths[0]) < 2 and abs(widths[2] - 2 * widths[0]) < 2, widths
    finally:
        visit.close()


def test_opened_from_disk_draws_diagrams_without_outside_requests(site, browser):
    path = site / "notebooks" / "04_failure_paths.html"  # 04 有一张 Mermaid 图（四个层次）
    visit = Visit(browser, path.as_uri())
    try:
        visit.assert_clean("file://…/04_failure_paths.html")
        assert visit.page.locator("pre.mermaid svg").count() >= 1
    finally:
        visit.close()


def test_the_menu_buttons_open_on_a_phone_and_on_the_desktop(server, browser):
    """页首看得见的 ☰ 和“本页内容”按钮：手机上点开抽屉（对话框打开），桌面上 ☰ 收起、再点展开左边的侧栏。"""
    visit = Visit(browser, f"{server}/notebooks/04_failure_paths.html", PHONE)
    try:
        page = visit.page
        for kind, dialog in ((".primary-toggle", "#pst-primary-sidebar-modal"),
                             (".secondary-toggle", "#pst-secondary-sidebar-modal")):
            button = page.locator(f"{kind}:visible").first
            button.click()
            page.wait_for_function(f"() => document.querySelector('{dialog}').open", timeout=5_000)
            assert page.locator(f"{dialog} a").count() > 0, f"{dialog} 打开了，里面却没有链接"
            page.keyboard.press("Escape")
            page.wait_for_function(f"() => !document.querySelector('{dialog}').open", timeout=5_000)
        visit.assert_clean("04_failure_paths.html（375 像素）")
    finally:
        visit.close()
    visit = Visit(browser, f"{server}/notebooks/04_failure_paths.html", DESKTOP)
    try:
        page, hidden = visit.page, "() => document.querySelector('#pst-primary-sidebar').classList.contains('pst-sidebar-hidden')"
        assert not page.evaluate(hidden)
        page.locator(".primary-toggle:visible").first.click()
        assert page.evaluate(hidden), "桌面上点 ☰ 应当收起左边的侧栏"
        page.locator(".primary-toggle:visible").first.click()
        assert not page.evaluate(hidden), "再点一次应当展开"
        visit.assert_clean("04_failure_paths.html（桌面）")
    finally:
        visit.close()


def test_on_a_phone_the_table_keeps_the_pairing_in_view_and_prints_wrap(server, browser):
    """375 像素宽：消息表每条消息一张卡片，tool_call_id 那一格在屏幕里，前面写着列名；打印的长句换行，不出右边界。"""
    visit = Visit(browser, f"{server}/notebooks/04_failure_paths.html", PHONE)
    try:
        page = visit.page
        ids = page.locator('.messages-view td[data-label="tool_call_id"]:has-text("call_")')
        assert ids.count() > 0
        cell = ids.first
        box = page.locator(".messages-view > div[style*='overflow']").first
        assert page.evaluate("e => e.scrollWidth <= e.clientWidth + 1", box.element_handle()), \
            "消息表的框在手机上不该需要横向滚动：tool_call_id 会藏在框外"
        assert page.evaluate("e => getComputedStyle(e, '::before').content", cell.element_handle()).startswith('"tool_call_id')
        pre = page.locator("div.cell_output .output.stream pre").first
        assert page.evaluate("e => e.scrollWidth <= e.clientWidth + 1", pre.element_handle()), "打印的文字应当换行"
    finally:
        visit.close()


def test_prints_stay_next_to_the_table_they_belong_to(server, browser):
    """07 里那一格先画表、打印、再画表、再打印：网页上也是这个顺序，不把一格的打印合到第一块里。"""
    visit = Visit(browser, f"{server}/notebooks/07_endpoint_faults.html", DESKTOP)
    try:
        order = visit.page.evaluate("""() => {
            const cell = [...document.querySelectorAll('div.cell')].find(c => c.textContent.includes('half_way = '));
            return [...cell.querySelectorAll('.messages-view, .output.stream')].map(e =>
                e.classList.contains('messages-view') ? 'table' : 'text');
        }""")
        assert order == ["table", "text", "table", "text"], order
    finally:
        visit.close()


def test_the_start_page_table_fits_a_phone(server, browser):
    """首页的笔记本表格在 375 像素宽时不横向溢出，“内容”一列至少有几个字宽。"""
    visit = Visit(browser, f"{server}/index.html", PHONE)
    try:
        table = visit.page.locator("article table.table").first
        assert visit.page.evaluate("t => t.getBoundingClientRect().right <= window.innerWidth + 1", table.element_handle())
        widths = table.locator("thead th").evaluate_all("ths => ths.map(t => t.getBoundingClientRect().width)")
        assert len(widths) == 3 and min(widths) >= 60, widths
    finally:
        visit.close()


def test_long_code_lines_wrap_instead_of_hiding_their_ends(server, browser):
    """03 的代码格在桌面宽度下没有一格要横向滚动：长行折回，行末的注释看得见。"""
    visit = Visit(browser, f"{server}/notebooks/03_one_request.html", DESKTOP)
    try:
        wide = visit.page.evaluate("""() => [...document.querySelectorAll('div.cell_input pre')]
            .filter(p => p.scrollWidth > p.clientWidth + 1).length""")
        assert wide == 0, f"{wide} 个代码格要横向滚动"
    finally:
        visit.close()
