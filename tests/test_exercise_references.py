"""安全题的参考答案，对照真实的 bash 和 harness_lib 里做同一件事的代码。

隐藏测试写的是题目点名的那些写法；这里再用真实的 bash 跑一遍白名单放行的命令，
并查参考答案和库在同一类输入上是否一致：库拒绝的，参考答案也不放行。
"""

import errno
import os
import random
import shlex
import subprocess
from pathlib import Path

import pytest

from harness_lib import ToolDenied, ToolFailed, Workspace, check_allowlist
from harness_lib.safety.approval import parse_answer
from test_notebook_defs import defined_in

posix_only = pytest.mark.skipif(os.name == "nt", reason="要用真实的 bash 和符号链接")


def _allowlisted():
    return defined_in("05_limits.ipynb", "05limi-073", "allowlisted", {"shlex": shlex})


# 每一条都是 bash 真会多做事的写法：词中间的 #、$'…' 里的 \'、从词中间开始的引号、反斜杠
BYPASSES = [
    "aa -r a .#&& zz", "aa -la#; zz", "aa a#|zz", "aa $'\\'' ; zz #'", 'aa a"b "; zz; aa "c"',
    'aa "a\\" "; zz #"', "aa \\'; zz; aa \\'", "aa $(zz)", 'aa "$(zz)"', "aa `zz`", "aa\nzz",
    "aa || zz", "aa |& zz", "aa > made", "aa 2>made", "(zz)", "aa <(zz)", "X=1 zz", "aa # 注释",
]
TOKENS = ["aa", "bb", "zz", " ", " ", " ", "x", ";", "&", "&&", "|", "||", "#", "'", '"', "\\", "$", "`",
          "(", ")", "<", ">", "$'\\''", "a#", "\t", "{", "}", "=", "!", "*", "~", "$(zz)", "\\'", "\"'\"",
          "'\"'", "';'", '"#"', "a'#'"]


@pytest.fixture
def stubs(tmp_path):
    """PATH 里只有三个小程序：aa、bb（白名单里的）和 zz（不在白名单里的），运行时把名字记进日志。"""
    log = tmp_path / "ran.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("aa", "bb", "zz"):
        program = bin_dir / name
        program.write_text(f"#!/bin/sh\necho {name} >> '{log}'\n", encoding="utf-8")
        program.chmod(0o755)
    return bin_dir, log


def _run_in_bash(command, stubs, where):
    """在只有这三个小程序的 PATH 里用 bash 运行，返回运行了哪些程序、当前目录里多出了哪些文件。"""
    bin_dir, log = stubs
    log.unlink(missing_ok=True)
    where.mkdir()
    subprocess.run(["/bin/bash", "--norc", "--noprofile", "-c", command], cwd=where, env={"PATH": str(bin_dir)},
                   capture_output=True, timeout=10)
    ran = log.read_text(encoding="utf-8").split() if log.exists() else []
    return ran, sorted(os.listdir(where))


@posix_only
def test_the_allowlist_reference_lets_bash_run_only_allowed_programs(stubs, tmp_path):
    """参考答案放行的每一条命令，bash 真的只运行白名单里的程序、不写文件；题目点名的写法都被拒绝。"""
    allowlisted = _allowlisted()
    for command in BYPASSES:
        assert not allowlisted(command, {"aa", "bb"}), command
    rng = random.Random(41)
    commands = [rng.choice(["aa ", "bb ", "aa", ""]) + "".join(rng.choice(TOKENS) for _ in range(rng.randint(1, 8)))
                for _ in range(3000)]
    accepted = [c for c in commands if allowlisted(c, {"aa", "bb"})]
    assert len(accepted) > 150, "（测试自己的前提）要有足够多的命令被放行"
    for i, command in enumerate(accepted):
        ran, made = _run_in_bash(command, stubs, tmp_path / f"w{i}")
        assert set(ran) <= {"aa", "bb"} and not made, (command, ran, made)


# 引号和注释：参考答案和库的 check_allowlist 读法相同（库另外还查路径，所以只用不带路径的 echo）
SAME_READING = {
    "echo ';'": True, "echo 'a && b' \"(x) < y\"": True, "echo a#b": True, "echo 'a # b' \"#\"": True,
    "echo 'a$'": True, "ls -la#; echo x": False, "echo -r a .#&& echo x": False, "echo # x": False,
    "echo |# x": False, "echo $'\\'' ; echo x #'": False, 'echo a"b "; echo x; echo "c"': False,
    "echo $HOME": False, "echo x; echo y": False, "echo x | echo y": True,
}


@pytest.mark.parametrize("command", sorted(SAME_READING))
def test_the_allowlist_reference_reads_quotes_and_comments_as_the_library_does(command, tmp_path):
    allowlisted = _allowlisted()
    assert allowlisted(command, {"echo", "ls"}) is SAME_READING[command]
    assert bool(check_allowlist(command, windows=False, cwd=tmp_path)) is SAME_READING[command]


ANSWERS = ["y", "Y", " y ", "a", "A", "n", "n 不要删", "", "abort", "Absolutely not", "Yikes, no", "apple", "nope",
           "ok", "嗯", "yes", "always", "是", "y，好", "a: 好", "n不行"]


@pytest.mark.parametrize("answer", ANSWERS)
def test_the_approval_reference_runs_nothing_the_library_would_refuse(answer):
    """10 练习 3 的 ask_first：库的 parse_answer 读不懂或读成 n 的答复，参考答案也不执行。"""
    ask_first = defined_in("10_approval.ipynb", "10appr-057", "ask_first", {"ToolDenied": ToolDenied})
    ran = []
    try:
        ask_first(lambda args: ran.append(args["command"]), lambda command: answer)({"command": "rm a"})
    except ToolDenied:
        pass
    if parse_answer(answer)[0] in (None, "n"):
        assert ran == [], f"库不放行 {answer!r}，参考答案却执行了"


@posix_only
def test_the_link_audit_lists_exactly_the_links_the_workspace_refuses(tmp_path):
    """06 练习 2 的 escaping_links：列出的链接，正是 Workspace.resolve 不放行的那些（指到外面、绕成圈）。"""
    escaping_links = defined_in("06_five_tools.ipynb", "06five-121", "escaping_links",
                                {"errno": errno, "os": os, "Path": Path})
    base = tmp_path.resolve()
    root = base / "ws"
    (root / "data").mkdir(parents=True)
    (base / "ws2").mkdir()
    (base / "secret.txt").write_text("外面\n", encoding="utf-8")
    (root / "app.py").write_text("print(1)\n", encoding="utf-8")
    links = {
        "alias.py": root / "app.py", "data/leak.txt": base / "secret.txt", "up": base, "sibling": base / "ws2",
        "hop": root / "data" / "leak.txt", "dangling-out": base / "later.txt",
        "data/dangling-in": root / "data" / "later.txt", "data/self": Path("."), "data/back": Path(".."),
        "data/out": Path("../.."), "ring-a": root / "ring-b", "ring-b": root / "ring-a",
        "data/to-ring": root / "ring-a", "data/chain": root / "hop",
    }
    for name, target in links.items():
        os.symlink(target, root / name)
    workspace = Workspace(root)
    refused = set()
    for name in links:
        try:
            workspace.resolve(name)
        except (ToolDenied, ToolFailed):
            refused.add(name)
    assert refused >= {"data/leak.txt", "up", "ring-a"}, "（测试自己的前提）"
    assert set(escaping_links(root)) == refused
