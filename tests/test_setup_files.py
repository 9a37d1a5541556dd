"""安装与 CI 文件的一致性检查：environment.yml 与 pyproject 同步、Binder、Makefile、.ci/run。"""

import re
import sys

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
    items, inside, indent = [], False, None
    for line in lines:
        if re.match(r"^\s*-\s*pip:\s*$", line):
            inside, indent = True, None
            continue
        if inside:
            m = re.match(r"^(\s*)-\s+(.+?)\s*$", line)
            if not m or (indent is not None and len(m.group(1)) != indent):
                if line.strip() and not line.strip().startswith("#"):
                    break
                continue
            indent = len(m.group(1))
            item = m.group(2)
            if len(item) > 1 and item[0] == item[-1] and item[0] in "'\"":
                item = item[1:-1]  # 去掉整条外面的引号，不动条目内部的引号
            items.append(item)
    return items


def test_environment_yml_matches_pyproject():
    project = _pyproject()["project"]
    expected = list(project["dependencies"]) + list(project["optional-dependencies"]["dev"])
    assert _env_pip_list() == expected, (
        "environment.yml 的 pip 列表与 pyproject.toml 的 dependencies + dev 不一致"
    )


def test_runtime_dependencies_are_the_named_packages():
    # openai、Jupyter 的两种界面（JupyterLab 和 Notebook 7）、ipywidgets、pandas，别的都不装进学习者的环境
    names = {re.split(r"[<>=!;\[ ]", d)[0].lower() for d in _pyproject()["project"]["dependencies"]}
    assert names == {"openai", "jupyterlab", "notebook", "ipywidgets", "pandas"}


def test_openai_sdk_is_the_3x_line():
    deps = _pyproject()["project"]["dependencies"]
    openai = next(d for d in deps if d.startswith("openai"))
    assert ">=3" in openai and "<4" in openai
    import openai as sdk

    assert sdk.__version__.split(".")[0] == "3"


def test_binder_files():
    post = (ROOT / "postBuild").read_text(encoding="utf-8")
    assert "set -e" in post and "pip install" in post and "-e ." in post
    assert not (ROOT / "binder").exists(), "binder/ 目录会让 repo2docker 忽略根目录的文件"


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.search(r"^make test\b", ci, re.M)
    assert "make test" in readme and "make lab" in readme


def test_makefile_targets():
    mk = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("lab:", "test:", "test-browser:", "bench:"):
        assert target in mk
    assert "python3" in mk and "-m venv" in mk
    assert "--allow-root" in mk
    assert "notebooks/00_setup.ipynb" in mk


def test_a_wheel_holds_the_whole_package_and_imports_from_it(tmp_path):
    """`pip install .` 和 `pip install git+…` 用的是 wheel：里面要有课程层和支撑层，装好就能导入。"""
    import subprocess
    import zipfile

    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                    "--wheel-dir", str(tmp_path), str(ROOT)], check=True)
    wheel = next(tmp_path.glob("harness_lib-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in ["harness_lib/__init__.py", "harness_lib/lesson/loop.py", "harness_lib/lesson/tools.py",
                   "harness_lib/ui/step.py", "harness_lib/models/fake.py"]:
        assert module in names, f"wheel 里缺少 {module}"
    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    # 只从解开的 wheel 导入（它排在 sys.path 最前面），不碰源码目录
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import harness_lib, harness_lib.lesson.loop as loop; "
            "assert harness_lib.__file__.startswith(sys.argv[1]), harness_lib.__file__; print(loop.agent_loop.__name__)")
    done = subprocess.run([sys.executable, "-c", code, str(unpacked)], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "agent_loop"
