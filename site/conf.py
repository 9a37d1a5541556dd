"""网站的 Sphinx 配置（make site → scripts/build_site.py → sphinx-build -c site）。

Sphinx + myst-nb 执行并渲染笔记本，主题是 sphinx-book-theme。这里另外做四件小事：
- Mermaid：sphinxcontrib-mermaid 把 ```mermaid 代码块变成 `<pre class="mermaid">`；它自带的脚本从 CDN 以 ES 模块
  加载 mermaid，这里换成本地的 `mermaid.min.js`（npm 包 mermaid）加一段普通脚本，从磁盘直接打开网页也能画；
- 切换器：myst-nb 用执行时保存的小部件状态画出切换器，脚本是本地的 `embed.js`（npm 包 @jupyter-widgets/html-manager），
  旁边加一句说明：网页上没有内核，点它不会换模型；
- 每本笔记本的页首：什么时候、怎样执行的，自己怎样运行；
- 练习一节的开头：说明这里是学生版，练习格没有运行；
- 页首的两个菜单按钮：主题把点击绑错了按钮，`_static/toggles.js` 把它们接上。
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

from docutils import nodes

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BUILD = ROOT / "_build"
# GitHub Pages 的工作流设置 SITE_REPOSITORY=owner/name；本地构建时链接里是占位的 OWNER/REPO（和 README 的徽章一样）
REPOSITORY = os.environ.get("SITE_REPOSITORY") or "OWNER/REPO"
BINDER = "https://mybinder.org/v2/gh/{repo}/HEAD?labpath={path}"

project = "智能体循环：一格一格搭起来"
author = "agent-loop-zh"
copyright = "本项目作者"
language = "zh_CN"

extensions = ["myst_nb", "sphinxcontrib.mermaid", "sphinx.ext.githubpages"]  # githubpages：写出 .nojekyll
exclude_patterns = ["_build", "**.ipynb_checkpoints", "_notebook_table.md"]
suppress_warnings = ["myst.header"]

# -- MyST 与 myst-nb ---------------------------------------------------------
myst_fence_as_directive = ["mermaid"]  # 笔记本里的 ```mermaid 代码块交给 sphinxcontrib-mermaid
myst_heading_anchors = 3

nb_execution_mode = "cache"  # jupyter-cache：代码没变的笔记本不再执行
nb_execution_cache_path = str(BUILD / "jupyter_cache")
nb_execution_timeout = 120  # 每格的时限，和 tests/test_notebooks.py 一样
nb_execution_in_temp = False  # 在笔记本所在的目录里执行，和测试一样
# 哪一格出错（除了带 raises-exception 标签的）都记成警告，报错写进 _build/site/reports/；
# sphinx-build 带着 -W --keep-going，所以别的笔记本照样执行完，最后构建失败
nb_execution_raise_on_error = False
nb_execution_show_tb = True
nb_merge_streams = False  # 打印和表格按它们出现的先后排，不把一格里的打印合到第一块
# 有小部件的页面用本地的 embed.js 画出保存下来的状态（myst-nb 默认从 CDN 加载 RequireJS 和 embed-amd.js）
nb_ipywidgets_js = {"vendor/html-manager/embed.js": {}}

# -- HTML --------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_title = project
html_static_path = [str(HERE / "_static"), str(BUILD / "vendor" / "static")]
html_css_files = ["site.css"]
html_js_files = ["toggles.js"]  # 页首的 ☰ 和“本页内容”按钮（见文件里的说明）
html_show_sourcelink = False
html_copy_source = False  # 不附带源文件：网站用的是加了标签的学生版，要运行请用仓库里的笔记本
html_last_updated_fmt = None
html_context = {"default_mode": "light"}  # 消息表的颜色是按浅色背景配的
html_theme_options = {
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "use_repository_button": REPOSITORY != "OWNER/REPO",
    "repository_url": f"https://github.com/{REPOSITORY}",
    "path_to_docs": "",
    "toc_title": "本页内容",
    "search_bar_text": "搜索……",
}

MERMAID_JS = ["vendor/mermaid/mermaid.min.js", "mermaid-init.js"]


# -- 页面上的说明 --------------------------------------------------------------


def _para(*parts) -> nodes.paragraph:
    """一段文字：str 是普通文字，("code", 文字) 是行内代码，("link", 文字, 地址) 是链接。"""
    para = nodes.paragraph()
    for part in parts:
        if isinstance(part, str):
            para += nodes.Text(part)
        elif part[0] == "code":
            para += nodes.literal(part[1], part[1])
        else:
            para += nodes.reference(part[1], part[1], refuri=part[2])
    return para


def _note(title: str, *paragraphs, classes=()) -> nodes.admonition:
    box = nodes.admonition(classes=["note", *classes])
    box += nodes.title(title, title)
    for para in paragraphs:
        box += para
    return box


def _run_note(app, docname: str) -> nodes.admonition:
    from myst_nb.sphinx_ import NbMetadataCollector

    name = docname.split("/")[-1] + ".ipynb"
    data = NbMetadataCollector.get_exec_data(app.env, docname) or {}
    if data.get("mtime"):
        moment = datetime.fromtimestamp(data["mtime"]).astimezone()
        when = moment.strftime("%Y-%m-%d %H:%M") + f"（UTC{moment.isoformat()[-6:]}）"
    else:
        when = "（没有执行记录）"
    took = f"，用时 {data['runtime']:.1f} 秒" if data.get("runtime") else ""
    binder = BINDER.format(repo=REPOSITORY, path=quote(f"notebooks/{name}", safe=""))
    return _note(
        "本页的输出从哪里来",
        _para(f"{when} 由 ", ("code", "make site"), " 在无头内核里执行（nbclient，和测试一样），"
              "用的是离线的假模型：没有密钥，不联网", took, "。笔记本和 ", ("code", "harness_lib"),
              " 都没改时，再次构建直接用这次的输出。"),
        _para("自己运行：在仓库里执行 ", ("code", "make lab"), "，打开 ", ("code", f"notebooks/{name}"),
              "；不想安装就 ", ("link", "在 Binder 上打开", binder), "。"),
        classes=["series-run-note"],
    )


def _widget_note() -> nodes.admonition:
    return _note(
        "网页上的切换器",
        _para("下面是执行时保存下来的切换器，只是样子，按钮都点不了：网页上没有内核，本页的输出都来自假模型（离线）。"
              "要换成真实端点，用 ", ("code", "make lab"), " 或 Binder 打开这本笔记本。"),
        classes=["series-widget-note"],
    )


def _exercise_note() -> nodes.admonition:
    return _note(
        "学生版",
        _para("这里和发给学生的版本一样：答案格里只有 ", ("code", "raise NotImplementedError()"),
              "，看不到参考答案和隐藏测试；练习格在网站上没有运行。打开笔记本自己写，再运行下面的测试格。"),
        classes=["series-exercise-note"],
    )


def add_page_notes(app, doctree) -> None:
    docname = app.env.docname
    if not docname.startswith("notebooks/"):
        return
    section = doctree.next_node(nodes.section)
    if section is not None:
        title = section.next_node(nodes.title)
        section.insert(section.index(title) + 1, _run_note(app, docname))
    for raw in list(doctree.findall(nodes.raw)):
        if "application/vnd.jupyter.widget-view+json" in raw.astext():
            raw.parent.insert(raw.parent.index(raw), _widget_note())  # 说明在切换器前面
    for sec in doctree.findall(nodes.section):
        title = sec.next_node(nodes.title)
        if title is not None and title.astext().strip() == "练习":
            sec.insert(sec.index(title) + 1, _exercise_note())


def add_mermaid_js(app, pagename, templatename, context, doctree) -> None:
    from sphinxcontrib.mermaid import mermaid

    if doctree is not None and doctree.next_node(mermaid) is not None:
        for path in MERMAID_JS:
            app.add_js_file(path)


def setup(app):
    from sphinxcontrib.mermaid import install_js

    # 不用 sphinxcontrib-mermaid 自己的页面脚本（ES 模块，默认从 CDN 加载）
    for listener in list(app.events.listeners.get("html-page-context", [])):
        if listener.handler is install_js:
            app.disconnect(listener.id)
    app.connect("html-page-context", add_mermaid_js)
    app.connect("doctree-read", add_page_notes)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
