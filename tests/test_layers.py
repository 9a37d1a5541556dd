"""分层约定：`lint-imports`（import-linter）按 pyproject.toml 里的合同检查 harness_lib 的导入方向。

课程层只能往下导入支撑层，支撑层内部也分层；函数里的导入同样算数。
第二个测试在临时副本里故意加一条往上的导入，确认检查真的会失败。
"""

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
    ("support/runner.py", "from harness_lib.lesson import loop as _upward\n"),
    # 藏在函数里的往上导入也要抓到
    ("support/fake.py", "def _hidden():\n    from harness_lib.support.switch import ModelSwitch\n    return ModelSwitch\n"),
])
def test_an_upward_import_breaks_the_contract(copy_of_project, module, line):
    path = copy_of_project / "harness_lib" / module
    path.write_text(path.read_text(encoding="utf-8") + "\n\n" + line, encoding="utf-8")
    result = _lint(copy_of_project)
    assert result.returncode != 0, "往上的导入应当让 lint-imports 失败"
    assert "BROKEN" in result.stdout
    # 确认检查的是副本，不是项目本身
    assert _lint(ROOT).returncode == 0
