"""make site：把整套笔记本执行一遍，渲染成一个静态网站，放在 `_build/site/`（根上是 `index.html`）。

网页由 Sphinx + myst-nb + sphinx-book-theme 生成（配置在 `site/conf.py`），这个脚本只做它们做不了的几件事：

1. 取前端脚本：用 npm 按固定版本取 `mermaid` 和 `@jupyter-widgets/html-manager` 的包，核对包的 sha512，
   把要用的文件放进网站的 `_static/vendor/`。网页里的脚本和字体都来自这些包和主题本身，打开网页时不连外网。
2. 准备源文件（`_build/site-src/`）：
   - 笔记本用学生版（`python -m coursework.course release`，和发给学生的一样：没有参考答案和隐藏测试）；
     练习格标上 nbclient 认得的 `skip-execution`，只显示、不运行；
   - 09 有真实模型的录像（`site/recordings/09_run.jsonl`）时，在它录制的那一格后面加一格，把录像里的对话
     和假模型那一遍并排显示；
   - 首页用 `site/index.md`，中间的笔记本表从 README 里原样取出，只把文件名换成链接；再加上术语表。
   内容没变的文件不重写，Sphinx 就不会重读它们；笔记本、`coursework/course.py` 和录像都没变时，也不再生成学生版。
3. 调用 sphinx-build。myst-nb 的 `cache` 模式用 jupyter-cache 执行笔记本：笔记本的代码没变就直接用上次的输出。
   `harness_lib/` 或 `pyproject.toml` 变了，缓存整个作废，全部重跑；`site/conf.py` 变了，每一页重读（执行缓存照用）。
   执行用的是测试（tests/test_notebooks.py）那样的环境：nbclient、每格 120 秒，
   去掉所有 `HARNESS_*`、`OPENAI_*` 变量，也就是离线的假模型。

    python scripts/build_site.py            # make site
    python scripts/build_site.py --fresh    # 先清掉缓存和上次的网页，全部重跑
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import nbformat

from harness_lib.safety.secrets import learner_environment
from harness_lib.series import notebooks


ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "site"
BUILD = ROOT / "_build"
SRC = BUILD / "site-src"
OUT = BUILD / "site"
CACHE = BUILD / "jupyter_cache"
DOCTREES = BUILD / "doctrees"
DOWNLOADS = BUILD / "npm"
VENDOR = BUILD / "vendor" / "static" / "vendor"
RECORDING = SITE / "recordings" / "09_run.jsonl"

# npm 包：版本和 sha512 都固定（npm view <包>@<版本> dist.integrity）。取出哪些文件、放到 vendor/ 下哪里。
NPM_PACKAGES = {
    "mermaid": {
        "version": "11.12.1",
        "integrity": "sha512-UlIZrRariB11TY1RtTgUWp65tphtBv4CSq7vyS2ZZ2TgoMjs2nloq+wFqxiwcxlhHUvs7DPGgMjs2aeQxz5h9g==",
        "files": {"package/dist/mermaid.min.js": "mermaid/mermaid.min.js", "package/LICENSE": "mermaid/LICENSE"},
    },
    # 不用 RequireJS 的那一份 embed.js：只画 ipywidgets 自带的控件（切换器只用这些），字体文件放在它旁边
    "@jupyter-widgets/html-manager": {
        "version": "1.0.15",
        "integrity": "sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA==",
        "files": {"package/dist/embed.js": "html-manager/embed.js",
                  "package/dist/embed.js.LICENSE.txt": "html-manager/embed.js.LICENSE.txt"},
        "font_files": "package/dist/",
        "dest": "html-manager/",
    },
}
FONT_SUFFIXES = (".eot", ".svg", ".ttf", ".woff", ".woff2")

EXECUTION_NOTE = "练习只留题目：和学生版一样，网站上这些格子没有运行。"
# 09 里录制一次运行的那一格（认这一行）；加的那一格放在紧接着的 describe 表格后面
RECORD_CELL = 'recorders[-1].save(record_dir / "run.jsonl")'


def say(text: str) -> None:
    print(f"[make site] {text}", flush=True)


def write_if_changed(path: Path, text: str) -> bool:
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True


# ---------------------------------------------------------------------------
# 1. 前端脚本（npm）
# ---------------------------------------------------------------------------


def _integrity(path: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def npm_tarball(name: str, spec: dict) -> Path:
    """`npm pack <包>@<版本>` 下载的 .tgz（已有就不再下载），核对 sha512。"""
    DOWNLOADS.mkdir(parents=True, exist_ok=True)
    tgz = DOWNLOADS / f"{name.lstrip('@').replace('/', '-')}-{spec['version']}.tgz"
    if not tgz.exists():
        npm = shutil.which("npm")
        if not npm:
            raise SystemExit("make site 需要 npm（Node.js）来取 mermaid 和 ipywidgets 的前端包：Debian 上 apt-get install -y npm")
        say(f"npm pack {name}@{spec['version']}")
        subprocess.run([npm, "pack", "--silent", f"{name}@{spec['version']}", "--pack-destination", str(DOWNLOADS)],
                       check=True, stdout=subprocess.DEVNULL)
    if _integrity(tgz) != spec["integrity"]:
        tgz.unlink()
        raise SystemExit(f"{name}@{spec['version']} 的 sha512 对不上，已删除下载的文件；再运行一次 make site")
    return tgz


def vendor() -> None:
    for name, spec in NPM_PACKAGES.items():
        tgz = npm_tarball(name, spec)
        with tarfile.open(tgz) as tar:
            wanted = dict(spec["files"])
            if "font_files" in spec:
                for member in tar.getnames():
                    if member.startswith(spec["font_files"]) and member.endswith(FONT_SUFFIXES):
                        wanted[member] = spec["dest"] + member.rsplit("/", 1)[1]
            for member, dest in wanted.items():
                target = VENDOR / dest
                data = tar.extractfile(member).read()
                if not target.exists() or target.read_bytes() != data:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(data)


# ---------------------------------------------------------------------------
# 2. 源文件
# ---------------------------------------------------------------------------


def student_notebooks(into: Path) -> list[Path]:
    """学生版：和 make release 同一条命令（nbgrader 去掉参考答案和隐藏测试）。"""
    subprocess.run([sys.executable, "-m", "coursework.course", "release", "--out", str(into)],
                   check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    found = notebooks(into)
    if not found:
        raise SystemExit("学生版里没有笔记本：python -m coursework.course release 没有生成任何文件")
    return found


def mark_exercises(nb) -> None:
    """练习格（nbgrader 的答案格和测试格）标上 skip-execution：学生版里答案是空的，运行只会报错。"""
    for cell in nb.cells:
        if cell.cell_type == "code" and "nbgrader" in cell.metadata:
            tags = cell.metadata.setdefault("tags", [])
            if "skip-execution" not in tags:
                tags.append("skip-execution")


def recording_cells(nb) -> None:
    """09：录制那一格的 describe 表后面加一格，把真实模型的录像和假模型那一遍并排显示。"""
    hits = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and RECORD_CELL in c.source]
    if len(hits) != 1:
        raise SystemExit(f"09 里应当正好有一格含有 {RECORD_CELL!r}，找到 {len(hits)} 格：scripts/build_site.py 要跟着改")
    meta_path = RECORDING.with_suffix(".json")
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.exists() else {}
    at = hits[0] + 1
    if at < len(nb.cells) and "describe(" in nb.cells[at].source:
        at += 1  # 放在录像的 describe 表后面，describe 也能用来读真实的录像
    # 录像的路径：第一格会切换到临时的工作目录，所以先在开头记下（这一格在网页上不显示）。
    # 执行缓存只认代码：把录像的 sha256 写进这一格，换了录像，09 就会重新执行
    digest = hashlib.sha256(RECORDING.read_bytes()).hexdigest()
    setup = nbformat.v4.new_code_cell(
        f"# 录像的 sha256：{digest}\n"
        "from pathlib import Path\n"
        f"SITE_RECORDING = Path({str(RECORDING.relative_to(SITE))!r}).resolve()",
        metadata={"tags": ["remove-cell"]},
    )
    model = meta.get("model", "真实模型")
    intro = nbformat.v4.new_markdown_cell(
        f"**【网站附加】同一格换成真实模型**。这一段只在网站上有，笔记本里没有。第二张表是 {meta.get('recorded', '')} 在真实端点上录的一次运行"
        f"（模型 `{model}`，{meta.get('server', '')}），用的就是上面录制那一格的做法；录像是 "
        "`site/recordings/09_run.jsonl`，这里只读文件，不联网、不执行命令。第一张是假模型刚录的那一遍。\n\n"
        f"{meta.get('notes', '')}".rstrip() + "\n"
    )
    compare = nbformat.v4.new_code_cell(
        "# 【网站附加】读真实模型的录像：最后一次调用的请求就是之前的全部消息，再接上它的回复\n"
        "from IPython.display import HTML\n"
        "from harness_lib import MessagesView\n"
        "\n"
        "real_calls = load_calls(SITE_RECORDING)\n"
        "display(describe(real_calls))\n"
        "last = real_calls[-1]\n"
        "real_messages = [m for m in last[\"request\"][\"messages\"] if m[\"role\"] != \"system\"]\n"
        "if \"response\" in last:\n"
        "    real_messages.append(last[\"response\"][\"choices\"][0][\"message\"])\n"
        f"tables = [MessagesView(messages, title=\"假模型（上面录制的那一遍）\"),\n"
        f"          MessagesView(real_messages, title={('真实模型 ' + model + '（录像）')!r})]\n"
        "HTML('<div style=\"display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start\">'\n"
        "     + ''.join(f'<div style=\"flex:1 1 560px;min-width:0\">{t.html()}</div>' for t in tables)\n"
        "     + '</div>')"
    )
    nb.cells[at:at] = [intro, compare]
    nb.cells.insert(0, setup)


def notebook_table() -> str:
    """README 里“## 笔记本”下面的表格和它后面那段话，文件名换成指向网页的链接。"""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^## 笔记本\s*\n(.*?)(?=^## |\Z)", readme, re.S | re.M)
    if not match:
        raise SystemExit("README.md 里没有“## 笔记本”一节")
    lines = []
    for line in match.group(1).strip().splitlines():
        if line.startswith("- "):
            break  # 表格后面的链接列表（术语表、教师指南……）指向仓库里的文件，网站上不放
        lines.append(re.sub(r"`(\d\d_\w+)\.ipynb`", r"[`\1`](notebooks/\1.ipynb)", line))
    return "\n".join(lines).strip() + "\n"


def glossary() -> str:
    text = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    # 仓库里的相对链接在网站上不存在：只留文字
    return re.sub(r"\[([^\]]+)\]\((?!https?://)[^)]+\)", r"\1", text)


def _inputs_fingerprint() -> str:
    """学生版笔记本由这些文件决定：都没变就不再调用 nbgrader（它要十来秒）。"""
    digest = hashlib.sha256()
    files = notebooks(ROOT / "notebooks") + [
        ROOT / "coursework" / "course.py", Path(__file__).resolve(), RECORDING, RECORDING.with_suffix(".json")]
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes() if path.exists() else b"-")
    return digest.hexdigest()


def stage() -> None:
    write_if_changed(SRC / "index.md", (SITE / "index.md").read_text(encoding="utf-8"))
    write_if_changed(SRC / "_notebook_table.md", notebook_table())
    write_if_changed(SRC / "glossary.md", glossary())
    notebooks_dir = SRC / "notebooks"
    stamp = SRC / ".notebooks.sha256"
    fingerprint = _inputs_fingerprint()
    if stamp.exists() and stamp.read_text().strip() == fingerprint and any(notebooks_dir.glob("*.ipynb")):
        return
    say("生成学生版（nbgrader）")
    with tempfile.TemporaryDirectory(prefix="site-release-") as tmp:
        released = student_notebooks(Path(tmp))
        names = set()
        for path in released:
            nb = nbformat.read(path, as_version=4)
            mark_exercises(nb)
            if path.name.startswith("09_") and RECORDING.exists():
                recording_cells(nb)
            names.add(path.name)
            write_if_changed(notebooks_dir / path.name, nbformat.writes(nb) + "\n")
    for old in notebooks_dir.glob("*.ipynb"):
        if old.name not in names:
            old.unlink()
    if RECORDING.exists():
        target = notebooks_dir / "recordings" / RECORDING.name
        write_if_changed(target, RECORDING.read_text(encoding="utf-8"))
    stamp.write_text(fingerprint + "\n")


# ---------------------------------------------------------------------------
# 3. 执行与渲染
# ---------------------------------------------------------------------------


def library_fingerprint() -> str:
    """笔记本的输出取决于 harness_lib 和依赖：它们变了，缓存里的输出就不能再用。"""
    digest = hashlib.sha256()
    files = sorted((ROOT / "harness_lib").rglob("*.py")) + [ROOT / "pyproject.toml"]
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def check_cache() -> None:
    stamp = CACHE / "harness_lib.sha256"
    fingerprint = library_fingerprint()
    if CACHE.exists() and (not stamp.exists() or stamp.read_text().strip() != fingerprint):
        say("harness_lib 或 pyproject.toml 变了：清掉执行缓存，全部重跑")
        shutil.rmtree(CACHE)
        shutil.rmtree(DOCTREES, ignore_errors=True)  # Sphinx 也要重读每一页，不然没改的页面不会重新执行
    CACHE.mkdir(parents=True, exist_ok=True)
    stamp.write_text(fingerprint + "\n")
    # 页首的说明是 site/conf.py 在读页面时加的：它变了，Sphinx 要重读每一页（执行缓存照用）
    conf_stamp = DOCTREES / "conf.sha256"
    conf = hashlib.sha256((SITE / "conf.py").read_bytes()).hexdigest()
    if conf_stamp.exists() and conf_stamp.read_text().strip() != conf:
        shutil.rmtree(DOCTREES)
    DOCTREES.mkdir(parents=True, exist_ok=True)
    conf_stamp.write_text(conf + "\n")


def execution_env() -> dict:
    """和 tests/test_notebooks.py 一样：学习者的环境（去掉开发者自己的 HARNESS_*、OPENAI_*），内核只能用离线的假模型。"""
    env = learner_environment()
    env["HARNESS_MODE"] = "fake"
    env["HARNESS_SITE"] = "1"  # 切换器画成不能点的样子（网页上没有内核），也不画填密钥的框
    env["HARNESS_MEMORY"] = "off"  # 网站不读学习者记下的规矩
    env["PYTHONUNBUFFERED"] = "1"
    return env


def sphinx_build() -> None:
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-c", str(SITE), "-d", str(DOCTREES),
           "--keep-going", "-W", str(SRC), str(OUT)]
    subprocess.run(cmd, check=True, cwd=ROOT, env=execution_env())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh", action="store_true", help="先清掉执行缓存和上次的网页，全部重跑")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.fresh:
        for path in (CACHE, DOCTREES, OUT, SRC):
            shutil.rmtree(path, ignore_errors=True)
    vendor()
    stage()
    check_cache()
    try:
        sphinx_build()
    except subprocess.CalledProcessError as exc:
        print(f"sphinx-build 失败（退出码 {exc.returncode}）；执行出错的笔记本，报错在 {OUT / 'reports'}", file=sys.stderr)
        return 1
    say(f"网站在 {OUT / 'index.html'}（用时 {time.monotonic() - started:.0f} 秒）")
    return 0


if __name__ == "__main__":
    sys.exit(main())
