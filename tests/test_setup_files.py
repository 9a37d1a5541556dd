"""安装：锁文件与 pyproject 的范围同步，environment.yml 和 Binder 的 postBuild 装锁文件，make test 的步骤，以及装进全新 venv 的 wheel。"""

import re
import sys
from pathlib import Path

from conftest import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _env_pip_list():
    """读出 environment.yml 里 `- pip:` 下面的条目（不依赖 PyYAML）。"""
    lines = (ROOT / "environment.yml").read_text(encoding="utf-8").splitlines()
    items, inside = [], False
    for line in lines:
        if re.match(r"^\s*-\s*pip:\s*$", line):
            inside = True
            continue
        m = re.match(r"^\s*-\s+(.+?)\s*$", line)
        if inside and m:
            items.append(m.group(1))
    return items


LOCKS = ROOT / "requirements"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")


def _lock_sets():
    """Makefile 的 LOCKS 里列的各组（make lab / test / test-real / test-browser / site 装的那些）。"""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return re.search(r"^LOCKS\s*:=\s*(.+)$", text, re.M).group(1).split()


def _pins(name):
    """锁文件里的 `(包, 版本, 标记)`，以及每个包下面有几行哈希。"""
    pins, hashes, current = [], {}, None
    for line in (LOCKS / f"{name}.txt").read_text(encoding="utf-8").splitlines():
        m = PIN.match(line)
        if m:
            current = (m.group(1).lower().replace("_", "-"), m.group(2), m.group(3) or "")
            pins.append(current)
            hashes[current] = 0
        elif line.strip().startswith("--hash=sha256:") and current:
            hashes[current] += 1
    return pins, hashes


def test_environment_yml_installs_the_lock():
    # conda 和 Binder 装的就是 make lab 装的那一份锁文件；本项目由 postBuild 不带依赖地装上
    assert _env_pip_list() == ["-r requirements/dev.txt"]
    assert "--no-deps" in (ROOT / "postBuild").read_text(encoding="utf-8")


def test_every_lock_is_made_by_uv_with_hashes_on_one_recorded_date():
    dates = set()
    for name in ["all", "tools", *_lock_sets()]:
        header = (LOCKS / f"{name}.txt").read_text(encoding="utf-8").splitlines()[1]
        assert "uv pip compile" in header and "--generate-hashes" in header, f"{name}.txt 不是 make lock 生成的"
        dates.add(re.search(r"--exclude-newer (\d{4}-\d{2}-\d{2})", header).group(1))
        pins, hashes = _pins(name)
        assert pins and all(hashes[pin] >= 1 for pin in pins), f"{name}.txt 里有没带哈希的版本"
    assert len(dates) == 1, f"锁文件应当在同一天一起生成（make lock），现在是 {sorted(dates)}"


def test_every_lock_pins_each_range_of_pyproject_inside_that_range():
    """pyproject.toml 改了范围却忘了 make lock：锁文件里缺了这个包，或者版本落在范围外面。"""
    from packaging.requirements import Requirement

    project = _pyproject()["project"]
    for name in _lock_sets():
        wanted = list(project["dependencies"])
        for extra in name.split("-"):
            wanted += project["optional-dependencies"][extra]
        pinned = {}
        for package, version, _marker in _pins(name)[0]:
            pinned.setdefault(package, []).append(version)
        for line in wanted:
            req = Requirement(line)
            versions = pinned.get(req.name.lower().replace("_", "-"))
            assert versions, f"requirements/{name}.txt 里没有 {req.name}：先 make lock"
            outside = [v for v in versions if v not in req.specifier]
            assert not outside, f"requirements/{name}.txt 的 {req.name} {outside} 不在 {req.specifier} 里：先 make lock"


def test_a_package_has_the_same_version_in_every_lock():
    # 各组以 all.txt 为约束：先装 dev-teach 再装 dev-real，同一个 venv 里的包不会被换掉
    seen = {}
    for name in ["all", *_lock_sets()]:
        for package, version, marker in _pins(name)[0]:
            first = seen.setdefault((package, marker), (version, name))
            assert first[0] == version, (
                f"{package}（{marker or '所有环境'}）：{first[1]}.txt 是 {first[0]}，{name}.txt 是 {version}")


def test_runtime_dependencies_are_the_named_packages():
    # openai、anthropic、Jupyter 的两种界面（JupyterLab 和 Notebook 7）、ipywidgets、pandas，别的都不装进学习者的环境
    names = {re.split(r"[<>=!;\[ ]", d)[0].lower() for d in _pyproject()["project"]["dependencies"]}
    assert names == {"openai", "anthropic", "jupyterlab", "notebook", "ipywidgets", "pandas"}


def test_openai_sdk_is_the_3x_line():
    deps = _pyproject()["project"]["dependencies"]
    openai = next(d for d in deps if d.startswith("openai"))
    assert ">=3" in openai and "<4" in openai
    import openai as sdk

    assert sdk.__version__.split(".")[0] == "3"


def test_anthropic_sdk_is_the_2x_line_on_httpx2():
    # 2.x 和 openai 3.x 用同一个 httpx2：FakeAnthropic 和 FakeClient 共用一条离线线路（wire.OfflineHTTP）
    deps = _pyproject()["project"]["dependencies"]
    anthropic = next(d for d in deps if d.startswith("anthropic"))
    assert ">=2" in anthropic and "<3" in anthropic
    import anthropic as sdk
    import httpx2

    assert sdk.__version__.split(".")[0] == "2"
    with httpx2.Client() as http:  # 用 httpx 的版本会拒绝 httpx2 的客户端（TypeError）
        sdk.Anthropic(api_key="unused", http_client=http).close()


def test_postbuild_installs_the_project_and_stops_at_the_first_failure(tmp_path):
    """Binder 跑 postBuild：它要装上本项目；哪一步失败就停下（set -e），不带着半装好的环境继续。"""
    import subprocess

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "pip.log"
    fake_pip = bin_dir / "pip"
    fake_pip.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexit "${{PIP_EXIT:-0}}"\n', encoding="utf-8")
    fake_pip.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    done = subprocess.run(["bash", str(ROOT / "postBuild")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "install" in log.read_text() and "-e ." in log.read_text()
    failing = subprocess.run(["bash", "-c", f"cat {ROOT / 'postBuild'}; echo still-running"], capture_output=True,
                             text=True).stdout
    done = subprocess.run(["bash", "-c", failing], cwd=ROOT, env={**env, "PIP_EXIT": "1"},
                          capture_output=True, text=True)
    assert done.returncode != 0 and "still-running" not in done.stdout, "pip 失败后 postBuild 应当停下"
    assert not (ROOT / "binder").exists(), "binder/ 目录会让 repo2docker 忽略根目录的文件"


def test_make_test_builds_its_own_venv_and_runs_the_offline_tests(tmp_path):
    """`make -n test`（只打印、不执行）：在一个不存在的 venv 上，make test 先建 venv、装包，再跑离线的测试。"""
    import subprocess

    venv = tmp_path / "venv"
    done = subprocess.run(["make", "-n", "test", f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    plan = done.stdout
    assert plan.index("-m venv") < plan.index("--require-hashes -r requirements/dev-teach.txt") < plan.index("-m pytest")
    assert '-m "not browser and not real"' in plan


def _build(tmp_path):
    """用 PyPA 的 build 按 pyproject.toml 建 sdist，再从 sdist 建 wheel。

    构建后端 setuptools 用开发环境里装好的那一份（dev 依赖里有它），不再每次另建隔离环境、重新下载。
    """
    import subprocess

    command = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path), str(ROOT)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]
    return next(tmp_path.glob("*.whl")), next(tmp_path.glob("*.tar.gz"))


def test_a_wheel_installed_into_a_fresh_venv_runs_a_notebook(tmp_path):
    """`pip install .` 和 `pip install git+…` 装的是 wheel：wheel 和 sdist 里要有每个子包；
    把 wheel（不是 -e）装进一个全新的 venv，用那个 venv 的内核从头执行一本笔记本。

    新 venv 的依赖（openai、jupyter……）借用开发 venv 里已经装好的，免得每次从网上下载几百 MB：
    一个 .pth 把开发 venv 的 site-packages 接在后面。那里的 harness_lib 是可编辑安装的钩子，
    放在 .pth 指向的目录里不会生效，所以导入的一定是新 venv 里从 wheel 装上的那一份（下面也查了）。
    """
    import subprocess
    import sysconfig
    import tarfile
    import zipfile

    wheel, sdist = _build(tmp_path / "dist")
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    in_sdist = {name.split("/", 1)[1] for name in tarfile.open(sdist).getnames() if "/" in name}
    for package in ["harness_lib", "harness_lib/lesson", "harness_lib/models", "harness_lib/safety", "harness_lib/ui"]:
        assert f"{package}/__init__.py" in in_wheel, f"wheel 里缺少 {package}"
        assert f"{package}/__init__.py" in in_sdist, f"sdist 里缺少 {package}"
    for readme in ["harness_lib/models/README.md", "harness_lib/safety/README.md", "harness_lib/ui/README.md"]:
        assert readme in in_sdist and readme in in_wheel, f"sdist 或 wheel 里缺少 {readme}"

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "dev-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", str(wheel)],
                   check=True, cwd=tmp_path)
    script = tmp_path / "run.py"
    script.write_text(
        "import sys, harness_lib, nbformat\n"
        "from nbclient import NotebookClient\n"
        "assert harness_lib.__file__.startswith(sys.prefix), harness_lib.__file__\n"
        "nb = nbformat.read(sys.argv[1], as_version=4)\n"
        "NotebookClient(nb, timeout=120, kernel_name='python3', shutdown_kernel='immediate',\n"
        "               resources={'metadata': {'path': sys.argv[2]}}).execute()\n"
        "print('cells', len(nb.cells), harness_lib.__file__)\n", encoding="utf-8")
    done = subprocess.run([str(python), str(script), str(ROOT / "notebooks" / "04_failure_paths.ipynb"), str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "HARNESS_MODE": "fake"})
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert str(venv) in done.stdout, "导入的应当是新 venv 里装上的 harness_lib"


def test_the_newcomer_reading_path_is_under_a_thousand_lines():
    """README 的“读代码的顺序”开头那几个文件（编号的列表）都在，合起来不到 1,000 行。"""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### 读代码的顺序", 1)[1].split("再往下", 1)[0]
    files = re.findall(r"^\d+\. `(harness_lib/[\w/]+\.py)`", section, re.M)
    assert len(files) >= 4, files
    lines = sum(len((ROOT / f).read_text(encoding="utf-8").splitlines()) for f in files)
    assert lines < 1000, f"读代码的路径有 {lines} 行：{files}"


def test_the_readme_lists_every_public_name_with_its_module():
    """README 的“公开的名字”表和 `harness_lib.__all__` 一致：名字一个不多、一个不少，模块写对。"""
    import harness_lib

    section = (ROOT / "README.md").read_text(encoding="utf-8").split("### 公开的名字", 1)[1].split("\n## ", 1)[0]
    listed = {}
    for row in section.splitlines():
        if row.startswith("| `"):
            cells = row.split("|")
            module = cells[2].strip().strip("`")
            for name in re.findall(r"`([A-Za-z_]\w*)`", cells[1]):
                listed[name] = module
    assert sorted(listed) == sorted(harness_lib.__all__)
    wrong = {n: (m, harness_lib._PUBLIC[n]) for n, m in listed.items() if harness_lib._PUBLIC[n] != m}
    assert not wrong, f"README 写错了模块：{wrong}"


def test_the_readme_presets_table_is_generated_from_the_presets():
    """README 的预设表和 `PRESETS` 是同一份数据：改了预设忘了重新生成，这里失败。"""
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_presets", ROOT / "scripts" / "readme_presets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert module.rendered(readme) == readme, "README 的预设表过时了：运行 .venv/bin/python scripts/readme_presets.py"
    from harness_lib.ui.clients import PRESETS_BY_KEY

    assert f"`{PRESETS_BY_KEY['openai'].model}`" in module.table() and "qwen-plus" in module.table()
