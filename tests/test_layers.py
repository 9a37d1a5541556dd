"""分层约定：`lint-imports`（import-linter）按 pyproject.toml 里的合同检查 harness_lib 的导入方向。

按用途分层：lesson 和 ui 在上，models 居中，safety 在下；函数里的导入同样算数。
第二个测试在临时副本里故意加一条往上的导入，确认检查真的会失败。
课程层的格子从包的根导入（用到才加载），静态检查看不见那一步，所以第三个测试在新进程里
真的导入 `harness_lib.lesson.loop`，看它加载了哪些模块。
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

LINT = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT), "--config", str(root / "pyproject.toml"), "--no-cache"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_layer_contracts_are_kept():
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.fixture()
def copy_of_project(tmp_path):
    shutil.copytree(ROOT / "harness_lib", tmp_path / "harness_lib",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@pytest.mark.parametrize("module,line", [
    # 支撑层的执行器往上导入课程层
    ("safety/runner.py", "from harness_lib.lesson import loop as _upward\n"),
    # 藏在函数里的往上导入也要抓到
    ("models/fake.py", "def _hidden():\n    from harness_lib.ui.switch import ModelSwitch\n    return ModelSwitch\n"),
    # 替身带进 pandas
    ("models/wire.py", "import pandas as _pd\n"),
])
def test_an_upward_import_breaks_the_contract(copy_of_project, module, line):
    path = copy_of_project / "harness_lib" / module
    path.write_text(path.read_text(encoding="utf-8") + "\n\n" + line, encoding="utf-8")
    result = _lint(copy_of_project)
    assert result.returncode != 0, "往上的导入应当让 lint-imports 失败"
    assert "BROKEN" in result.stdout
    # 确认检查的是副本，不是项目本身
    assert _lint(ROOT).returncode == 0


def test_importing_the_loop_loads_only_what_it_teaches():
    """`import harness_lib.lesson.loop` 不加载 IPython、pandas、ipywidgets，也不加载假模型、本机端点和界面。"""
    code = ("import sys, json; import harness_lib.lesson.loop; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('harness_lib', 'IPython', 'pandas', 'ipywidgets'))))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    loaded = set(json.loads(result.stdout))
    assert "harness_lib.lesson.loop" in loaded
    heavy = {m for m in loaded if m.split(".")[0] in ("IPython", "pandas", "ipywidgets")}
    assert not heavy, f"循环带进了界面的包：{sorted(heavy)[:5]}"
    unwanted = {m for m in loaded if m.startswith(("harness_lib.ui", "harness_lib.models.fake",
                                                   "harness_lib.models.server", "harness_lib.lesson.tools"))}
    assert not unwanted, f"循环带进了它没有讲的模块：{sorted(unwanted)}"
    # 只有 README“读代码的顺序”那五个文件，加上它们用到的错误说明、截止时间、白名单、密钥打码和截短文字
    modules = {m for m in loaded if m.startswith("harness_lib.")} - {
        "harness_lib.lesson", "harness_lib.models", "harness_lib.safety"}
    assert modules == {"harness_lib.lesson.loop", "harness_lib.models.call", "harness_lib.safety.runner",
                       "harness_lib.safety.approval", "harness_lib.safety.trust", "harness_lib.models.errors",
                       "harness_lib.models.net", "harness_lib.safety.allowlist", "harness_lib.safety.secrets",
                       "harness_lib.text"}, sorted(modules)
