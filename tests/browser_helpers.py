"""浏览器测试的辅助工具：启动一个隔离的 Jupyter 服务器，用无头 Chromium 在 JupyterLab 或 Notebook 7 里
打开笔记本、运行格子、读页面。同一个服务器两种界面都提供：`/lab/tree/…` 是 JupyterLab，`/notebooks/…` 是 Notebook 7。

只被 `tests/test_browser.py` 使用（`make test-browser`）。这里不在模块顶层导入 playwright，
这样 `make test` 在没有装 playwright 的环境里收集测试时也不会出错。

隔离的做法：
- 服务的是笔记本文件夹的临时副本，仓库里的笔记本不会被写进任何输出；也从不点“保存”，并关掉自动保存；
- `HOME`、`JUPYTER_CONFIG_DIR`、`JUPYTER_DATA_DIR`、`JUPYTER_RUNTIME_DIR`、`IPYTHONDIR` 都指向临时目录；
  虚拟环境自己的 `share/jupyter`（ipywidgets 的前端扩展、python3 内核说明）仍在搜索路径里；
- 去掉所有 `HARNESS_*`、`OPENAI_*` 环境变量，内核看到的是全新学习者的环境（默认假模型）；
- 令牌随机生成，经环境变量 `JUPYTER_TOKEN` 传入，不出现在命令行里。
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from harness_lib.safety.secrets import learner_environment
from harness_lib.models.net import free_port

CHROMIUM = "/usr/bin/chromium"
# Debian 的 Chromium；--disable-background-networking 等几项关掉它自己的后台联网（更新、同步、组件下载），
# 否则在没有外网的机器上会反复尝试连接并被拒绝。
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
VIEWPORT = {"width": 1280, "height": 860}
KERNEL_NAME = "Python 3 (ipykernel)"

# 写进临时配置目录的 JupyterLab 用户设置（只影响这次测试启动的 JupyterLab）
LAB_SETTINGS = {
    # 不弹“要不要接收 Jupyter 新闻”的提示，也不去检查新版本（没有外网）
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    # 关掉自动保存：输出只留在页面和临时副本里
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    # 所有格子都留在页面里（不按滚动位置增删），按位置找格子才可靠；看起来与默认设置相同
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}
# 写进临时配置目录的 labconfig/page_config.json。学习者按 README 安装（只有 dev 依赖）时没有 nbgrader，
# CI 为了课程作业的测试装了它；关掉它的前端扩展，页面才和学习者看到的一样（少了 Nbgrader 菜单等）。
PAGE_CONFIG = {"disabledExtensions": {"@jupyter/nbgrader": True}}

PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
CELLS = f"{PANEL} .jp-Notebook .jp-WindowedPanel-viewport > .jp-Cell"


def lab_env(home: Path) -> dict:
    """JupyterLab 进程（以及它启动的内核）的环境变量：隔离的目录，没有模型相关的变量。"""
    env = learner_environment()
    for name in ("JUPYTER_PATH", "JUPYTER_CONFIG_PATH", "JUPYTER_PLATFORM_DIRS", "JUPYTER_TOKEN"):
        env.pop(name, None)
    dirs = {
        "HOME": home,
        "JUPYTER_CONFIG_DIR": home / "jupyter-config",
        "JUPYTER_DATA_DIR": home / "jupyter-data",
        "JUPYTER_RUNTIME_DIR": home / "jupyter-runtime",
        "IPYTHONDIR": home / "ipython",
    }
    for name, path in dirs.items():
        path.mkdir(parents=True, exist_ok=True)
        env[name] = str(path)
    return env


class LabServer:
    """一个只为测试启动的 JupyterLab：临时副本、随机令牌、空闲端口、独立的进程组。"""

    def __init__(self, notebooks: Path, workdir: Path, log_path: Path):
        self.workdir = workdir
        self.root = workdir / "notebooks"
        shutil.copytree(notebooks, self.root, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        self.env = lab_env(workdir / "home")
        settings = Path(self.env["JUPYTER_CONFIG_DIR"]) / "lab" / "user-settings"
        for rel, value in LAB_SETTINGS.items():
            path = settings / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(value), encoding="utf-8")
        page_config = Path(self.env["JUPYTER_CONFIG_DIR"]) / "labconfig" / "page_config.json"
        page_config.parent.mkdir(parents=True, exist_ok=True)
        page_config.write_text(json.dumps(PAGE_CONFIG), encoding="utf-8")
        self.token = secrets.token_hex(24)
        self.env["JUPYTER_TOKEN"] = self.token
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.proc = None

    def start(self, timeout: float = 120) -> "LabServer":
        cmd = [
            sys.executable, "-m", "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={self.root}",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            cmd, cwd=self.root, env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab 启动失败（退出码 {self.proc.returncode}），日志：{self.log_path}")
            try:
                with self.api("GET", "/api/status", timeout=5) as resp:
                    if resp.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.5)
        raise RuntimeError(f"JupyterLab 在 {timeout} 秒内没有就绪，日志：{self.log_path}")

    def api(self, method: str, path: str, timeout: float = 10):
        req = urllib.request.Request(
            self.base + path, method=method, headers={"Authorization": f"token {self.token}"}
        )
        return urllib.request.urlopen(req, timeout=timeout)

    def url(self, notebook: str, ui: str = "lab") -> str:
        """打开一本笔记本的地址。JupyterLab 加 `reset`，清掉上一次页面留下的布局，只打开这一本；
        `ui="notebook"` 是 Notebook 7 的单本笔记本页面。"""
        if ui == "notebook":
            return f"{self.base}/notebooks/{notebook}?token={self.token}"
        return f"{self.base}/lab/tree/{notebook}?token={self.token}&reset"

    def stop(self) -> None:
        """先请服务器自己关掉（连同所有内核），再结束整个进程组，最后兜底强杀。"""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self.api("POST", "/api/shutdown", timeout=10).close()
            except Exception:
                pass
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            try:
                self.proc.wait(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue
        self._log.close()


def fresh_folder(path: Path) -> Path:
    """清空并重建一个存放截图和日志的文件夹（每个浏览器测试模块一个）。"""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def launch_browser(playwright, user_data_dir: Path):
    """无头 Chromium，用一个全新的空用户目录。"""
    return playwright.chromium.launch_persistent_context(
        str(user_data_dir),
        executable_path=CHROMIUM,
        headless=True,
        args=CHROMIUM_ARGS,
        viewport=VIEWPORT,
        locale="zh-CN",
    )


def find_cell(cells: list[dict], line: str) -> int:
    """找到唯一一格：它有一行（去掉首尾空白后）以 `line` 开头。返回格子的位置。"""
    hits = [
        i for i, c in enumerate(cells)
        if c["cell_type"] == "code"
        and any(ln.strip().startswith(line) for ln in "".join(c["source"]).splitlines())
    ]
    assert len(hits) == 1, f"应当正好有一格以 {line!r} 开头，找到 {hits}"
    return hits[0]


# 页面里读所有格子的状态：类型、执行序号（None 表示没跑过，"*" 表示正在跑或在排队）、有没有报错输出
_CELL_STATE_JS = """(sel) => [...document.querySelectorAll(sel)].map(c => {
  const p = c.querySelector('.jp-InputArea .jp-InputPrompt');
  const m = p ? p.innerText.match(/\\[(.*)\\]/) : null;
  const mark = m ? m[1].trim() : '';
  const bad = c.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"],'
                                 + '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]');
  return {
    code: c.classList.contains('jp-CodeCell'),
    count: mark === '*' ? '*' : (/^\\d+$/.test(mark) ? parseInt(mark, 10) : null),
    errors: [...bad].map(e => e.innerText.slice(-1500)),
  };
})"""

# 一张消息表的行数（不算“还没有消息”的占位行）
ROWS_JS = """(view) => [...view.querySelectorAll('tbody > tr')].filter(r => !r.querySelector('td[colspan]')).length"""


class NotebookPage:
    """在浏览器里打开的一本笔记本。格子按位置找，位置来自临时副本里的 .ipynb。"""

    def __init__(self, page, lab: LabServer, name: str, artifacts: Path, ui: str = "lab"):
        self.page = page
        self.lab = lab
        self.name = name
        self.ui = ui
        self.artifacts = artifacts
        self.cells = json.loads((lab.root / name).read_text(encoding="utf-8"))["cells"]
        self.console_errors: list[str] = []
        self.console_log: list[str] = []
        page.on("console", self._on_console)
        page.on("pageerror", lambda exc: self.console_errors.append(f"pageerror: {exc}"))
        page.on("response", lambda r: r.status >= 400 and self.console_log.append(f"[http {r.status}] {r.request.method} {r.url.split('?')[0]}"))

    def _on_console(self, msg) -> None:
        self.console_log.append(f"[{msg.type}] {msg.text}")
        if msg.type == "error":
            self.console_errors.append(f"console.error: {msg.text}")

    # -- 打开与内核 ----------------------------------------------------------

    def open(self, timeout_ms: int = 180_000) -> None:
        """打开笔记本并等内核真正就绪。

        只看执行指示器不够：页面有时指示器已是 idle，工具栏却还写着 “No Kernel”。
        所以同时等三样：工具栏的内核名、执行指示器为 idle、状态栏写着 “Python 3 (ipykernel) | Idle”。
        Notebook 7 没有状态栏，只等前两样。
        """
        self.page.goto(self.lab.url(self.name, self.ui), timeout=timeout_ms)
        self.page.wait_for_selector(CELLS, timeout=timeout_ms)
        self.page.wait_for_function(
            """([panel, kernel, withBar]) => {
                const p = document.querySelector(panel);
                if (!p) return false;
                const name = p.querySelector('.jp-Toolbar-kernelName');
                const ind = p.querySelector('.jp-Notebook-ExecutionIndicator');
                const bar = document.querySelector('#jp-main-statusbar');
                return !!name && name.innerText.trim() === kernel
                    && !!ind && ind.dataset.status === 'idle'
                    && (!withBar || (!!bar && bar.innerText.includes(kernel + ' | Idle')));
            }""",
            arg=[PANEL, KERNEL_NAME, self.ui == "lab"],
            timeout=timeout_ms,
        )
        shown = self.page.locator(CELLS).count()
        assert shown == len(self.cells), f"页面上有 {shown} 格，{self.name} 里有 {len(self.cells)} 格"

    # -- 格子 ---------------------------------------------------------------

    def cell(self, i: int):
        return self.page.locator(CELLS).nth(i)

    def find(self, line: str) -> int:
        return find_cell(self.cells, line)

    def output_text(self, i: int) -> str:
        return self.cell(i).locator(".jp-Cell-outputArea").inner_text()

    def state(self) -> list[dict]:
        return self.page.evaluate(_CELL_STATE_JS, CELLS)

    def last_count(self) -> int:
        return max([c["count"] for c in self.state() if isinstance(c["count"], int)], default=0)

    def _menu(self, command: str) -> None:
        """点菜单栏的 Run，再点其中的一项（按命令名找）。"""
        self.page.locator(".lm-MenuBar").get_by_role("menuitem", name="Run", exact=True).click()
        self.page.locator(f'.lm-Menu li[data-command="{command}"]').click()

    def select(self, first: int, last: int | None = None) -> None:
        """点格子左边的提示区选中第 first 格（命令模式）；给了 last 就按住 Shift 选到第 last 格。"""
        self.cell(first).locator(".jp-InputPrompt").first.click()
        if last is not None and last != first:
            self.cell(last).locator(".jp-InputPrompt").first.click(modifiers=["Shift"])

    def run_all(self, timeout_s: float = 300) -> None:
        """菜单 Run → Run All Cells，等全部代码格跑完。"""
        base = self.last_count()
        self._menu("runmenu:run-all")
        self.wait_done(range(len(self.cells)), base, timeout_s)

    def run_cells(self, first: int, last: int | None = None, timeout_s: float = 180) -> None:
        """选中第 first～last 格，菜单 Run → Run Selected Cell and Do not Advance，等它们跑完。"""
        last = first if last is None else last
        base = self.last_count()
        self.select(first, last)
        self._menu("notebook:run-cell")
        self.wait_done(range(first, last + 1), base, timeout_s)

    def run_from(self, first: int, timeout_s: float = 300) -> None:
        """选中第 first 格，菜单 Run → Run Selected Cell and All Below，等到最后一格跑完。"""
        base = self.last_count()
        self.select(first)
        self._menu("notebook:run-all-below")
        self.wait_done(range(first, len(self.cells)), base, timeout_s)

    def wait_done(self, indices, base: int, timeout_s: float) -> None:
        """等 indices 里的代码格都有了比 base 新的执行序号、且没有格子在跑；出现报错就提前停下并失败。"""
        # 空的代码格运行后不会得到执行序号，不等它们
        wanted = [
            i for i in indices
            if self.cells[i]["cell_type"] == "code" and "".join(self.cells[i]["source"]).strip()
        ]
        deadline = time.monotonic() + timeout_s
        while True:
            st = self.state()
            running = any(c["count"] == "*" for c in st)
            errors = [(i, e) for i in wanted for e in st[i]["errors"]]
            finished = all(isinstance(st[i]["count"], int) and st[i]["count"] > base for i in wanted)
            if not running and (finished or errors):
                break
            if time.monotonic() > deadline:
                pending = [i for i in wanted if not (isinstance(st[i]["count"], int) and st[i]["count"] > base)]
                raise AssertionError(f"{self.name}：{timeout_s} 秒后还有格子没跑完：{pending[:10]}")
            time.sleep(0.25)
        self.assert_no_error_outputs()
        counts = [st[i]["count"] for i in wanted]
        assert counts == sorted(counts), f"{self.name}：执行序号应当按格子顺序递增，实际 {counts}"

    def assert_no_error_outputs(self) -> None:
        problems = [(i, e) for i, c in enumerate(self.state()) for e in c["errors"]]
        assert not problems, "\n\n".join(f"{self.name} 第 {i} 格有报错输出：\n{e}" for i, e in problems)

    # -- 消息表 --------------------------------------------------------------

    def views_in(self, i: int):
        return self.cell(i).locator(".jp-Cell-outputArea .messages-view")

    def rows_in(self, i: int) -> int:
        """第 i 格输出里那张消息表的行数；先确认那里正好只有一张表。"""
        views = self.views_in(i)
        assert views.count() == 1, f"{self.name} 第 {i} 格的输出里应当正好有一张消息表，实际 {views.count()} 张"
        return views.first.evaluate(ROWS_JS)

    def total_views(self) -> int:
        return self.page.locator(f"{CELLS} .messages-view").count()

    # -- 截图与日志 ----------------------------------------------------------

    def hide_sidebars(self) -> None:
        """收起左右两侧的边栏，截图时把宽度留给笔记本。"""
        for side in ("left", "right"):
            tab = self.page.locator(f".jp-SideBar.jp-mod-{side} .lm-TabBar-tab.lm-mod-current")
            if tab.count():
                tab.first.click()

    def shot(self, name: str, scroll_to: int | None = None, until: int | None = None) -> Path:
        """截取当前视口；给了 scroll_to 就先把那一格滚到视口顶端，给了 until 就只截到那一格的底边。"""
        if scroll_to is not None:
            self.cell(scroll_to).evaluate("c => c.scrollIntoView({block: 'start'})")
        self.page.mouse.move(0, VIEWPORT["height"] - 1)  # 鼠标移开，免得悬停提示挡住内容
        self.page.wait_for_timeout(300)
        clip = None
        if until is not None:
            box = self.cell(until).bounding_box()
            if box:
                bottom = min(VIEWPORT["height"], box["y"] + box["height"] + 12)
                clip = {"x": 0, "y": 0, "width": VIEWPORT["width"], "height": bottom}
        path = self.artifacts / f"{name}.png"
        self.page.screenshot(path=str(path), clip=clip)
        return path

    def save_logs(self) -> None:
        (self.artifacts / f"{Path(self.name).stem}_console.log").write_text(
            "\n".join(self.console_log), encoding="utf-8"
        )


@contextmanager
def screenshot_on_failure(nb: NotebookPage, name: str):
    """块里出错时先截一张图、存下浏览器控制台日志，再把错误原样抛出。"""
    try:
        yield
    except BaseException:
        try:
            nb.page.screenshot(path=str(nb.artifacts / f"FAILED_{name}.png"))
        except Exception:
            pass
        raise
    finally:
        nb.save_logs()
