"""漂移检查：`make test-latest`、`make test-oldest` 的实现。

    .venv/bin/python scripts/drift.py latest    # pyproject.toml 的范围允许的最新版本
    .venv/bin/python scripts/drift.py oldest    # 直接依赖取范围允许的最低版本（uv 的 lowest-direct）

另建一个全新的 venv（.venv-latest、.venv-oldest），用 uv 按 pyproject.toml 的 dev、teach 两组解出版本、装上，
跑和 `make test` 同样的测试，最后打印一份短报告：哪些包的版本和锁文件 requirements/dev-teach.txt 不同，
哪些测试失败。报告也写到 _build/drift/<种类>.md（GitHub Actions 里再追加到这次运行的摘要）。
退出码就是 pytest 的退出码：有测试失败，这次检查就是红的。
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

from packaging.markers import Marker, default_environment
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "dev-teach.txt"  # make test 装的那一组
EXTRAS = ["dev", "teach"]
TESTS = ["-m", "not browser and not real", "-n", "2", "--dist", "loadfile"]  # 和 make test 一样
RESOLUTION = {"latest": [], "oldest": ["--resolution", "lowest-direct"]}
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")


def pins(text: str, environment: dict | None = None) -> dict[str, str]:
    """锁文件（uv / pip-compile 的格式）里的 `名字==版本`，只取标记（marker）在这个环境里成立的那些；
    名字按 PEP 503 规范化。"""
    found = {}
    for line in text.splitlines():
        match = PIN.match(line.strip())
        if not match:
            continue
        name, version, marker = match.groups()
        if marker and not Marker(marker).evaluate(environment):
            continue
        found[canonicalize_name(name)] = version
    return found


def differences(locked: dict[str, str], resolved: dict[str, str]) -> list[tuple[str, str, str]]:
    """`(包, 锁文件里的版本, 这次装的版本)`，只列不同的；一边没有的写成“—”。"""
    names = sorted(set(locked) | set(resolved))
    return [(name, locked.get(name, "—"), resolved.get(name, "—"))
            for name in names if locked.get(name) != resolved.get(name)]


def failures(junit: Path) -> list[str]:
    """pytest 的 JUnit XML 里失败或出错的测试，写成 `文件::测试名`。"""
    if not junit.exists():
        return []
    failed = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            path = (case.get("classname") or "").replace(".", "/")
            failed.append(f"{path}.py::{case.get('name')}")
    return failed


def report(kind: str, diff: list[tuple[str, str, str]], failed: list[str], exit_code: int,
           python: str) -> str:
    """一份 Markdown 短报告：版本和锁文件的差别、失败的测试、结论。"""
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# make test-{kind}：{when}，Python {python}", "",
             f"## 和锁文件 {LOCK.relative_to(ROOT)} 不同的包（{len(diff)} 个）", ""]
    if diff:
        lines += ["| 包 | 锁文件 | 这次 |", "|---|---|---|"]
        lines += [f"| {name} | {locked} | {now} |" for name, locked, now in diff]
    else:
        lines.append("没有：和锁文件完全一样。")
    lines += ["", f"## 失败的测试（{len(failed)} 个）", ""]
    lines += [f"- `{test}`" for test in failed] or ["没有。"]
    verdict = "通过" if exit_code == 0 else f"没通过（pytest 退出码 {exit_code}）"
    lines += ["", f"结论：{verdict}。"]
    if exit_code and diff:
        lines.append("先看上表里版本变了的包的更新说明，再按 docs/maintaining.md 处理。")
    return "\n".join(lines) + "\n"


def run(command: list[str], **kwargs) -> int:
    print("+", " ".join(command), flush=True)
    return subprocess.run(command, cwd=ROOT, **kwargs).returncode


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=sorted(RESOLUTION))
    args = parser.parse_args(argv)
    kind = args.kind
    out = ROOT / "_build" / "drift"
    out.mkdir(parents=True, exist_ok=True)
    venv = ROOT / f".venv-{kind}"
    shutil.rmtree(venv, ignore_errors=True)
    if run([sys.executable, "-m", "venv", str(venv)]):
        return 1
    python = str(venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))
    uv = str(Path(sys.executable).parent / "uv")
    resolved_file = out / f"{kind}.txt"
    extras = [arg for extra in EXTRAS for arg in ("--extra", extra)]
    if run([uv, "pip", "compile", "--quiet", "pyproject.toml", *extras, *RESOLUTION[kind],
            "--python", python, "-o", str(resolved_file)]):
        print(f"uv 解不出 pyproject.toml 的 {kind} 版本：看上面的说明，多半是某个范围的下限或上限要改。")
        return 1
    if run([uv, "pip", "install", "--quiet", "--python", python, "-r", str(resolved_file)]) or \
            run([uv, "pip", "install", "--quiet", "--python", python, "--no-deps", "--no-build-isolation",
                 "-e", "."]):
        print(f"按 {resolved_file.relative_to(ROOT)} 安装失败：看上面的说明。")
        return 1
    junit = out / f"{kind}.xml"
    junit.unlink(missing_ok=True)
    code = run([python, "-m", "pytest", *TESTS, f"--junitxml={junit}"])
    environment = {**default_environment(), **_environment_of(python)}
    diff = differences(pins(LOCK.read_text(encoding="utf-8"), environment),
                       pins(resolved_file.read_text(encoding="utf-8"), environment))
    text = report(kind, diff, failures(junit), code, environment["python_full_version"])
    (out / f"{kind}.md").write_text(text, encoding="utf-8")
    print("\n" + text)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as fh:
            fh.write(text)
    return code


def _environment_of(python: str) -> dict:
    """那个 venv 的解释器的标记环境（版本、平台），锁文件里的标记按它求值。"""
    code = ("import json, platform, sys; print(json.dumps({'python_version': '%d.%d' % sys.version_info[:2], "
            "'python_full_version': platform.python_version(), 'sys_platform': sys.platform, "
            "'platform_system': platform.system(), 'platform_machine': platform.machine()}))")
    return json.loads(subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout)


if __name__ == "__main__":
    sys.exit(main())
