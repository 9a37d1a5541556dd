"""`harness_lib/safety/runner.py` 的测试：全部用真实子进程。

只有“找不到 shell”一项把 shell 路径换成不存在的文件，其余都不替换任何东西；
测内存峰值的子进程只导入执行器模块，量到的才是执行器本身的开销。
"""

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness_lib.safety import runner as bash
from harness_lib.safety.allowlist import check_allowlist
from harness_lib.safety.secrets import command_env, hidden_from_commands

BASH_PY = Path(bash.__file__)
run_bash = bash.run_bash

# 测试里的命令都是 POSIX shell 写法；Windows 分支在这里没有测试。
pytestmark = pytest.mark.skipif(os.name == "nt", reason="测试命令是 POSIX shell 写法")
linux_only = pytest.mark.skipif(not os.path.isdir("/proc"), reason="需要 /proc")

# 每次运行用不同的 sleep 时长做标记，之前残留的进程不会干扰这一次
MARK = f"1234.{os.getpid()}"
CUT = re.compile(r"…\[中间省略 (\d+) 个字节\]…")


def alive_with(marker: str) -> list[int]:
    """命令行里带有 marker 的活进程（僵尸进程的 cmdline 为空，不算）。"""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline.split(b"\0"):
                pids.append(int(name))
    return pids


def gone(marker: str, wait: float = 1.0) -> bool:
    """等至多 wait 秒，看带 marker 的进程是否都已消失。"""
    end = time.monotonic() + wait
    while alive_with(marker):
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def appears(marker: str, wait: float = 1.0) -> bool:
    """等至多 wait 秒，看带 marker 的进程是否出现（fork 之后 exec 之前还没有新命令行）。"""
    end = time.monotonic() + wait
    while not alive_with(marker):
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def child_argv(code: str) -> list[str]:
    """新 Python 进程的命令行：导入执行器模块（名为 b），再执行 code。"""
    prelude = textwrap.dedent("""
        from harness_lib.safety import runner as b
    """)
    return [sys.executable, "-c", prelude + textwrap.dedent(code)]


# ---- 工具描述和演示目录 ----

def test_schema_shape():
    tool = bash.BASH_TOOL
    assert tool["type"] == "function"
    fn = tool["function"]
    assert fn["name"] == "bash"
    assert isinstance(fn["description"], str) and fn["description"]
    assert fn["description"] != "运行一条 Shell 命令。"  # 不照抄原文
    params = fn["parameters"]
    assert params["type"] == "object"
    assert params["required"] == ["command"]
    assert params["properties"]["command"]["type"] == "string"
    assert params["properties"]["command"]["description"]


def test_demo_workspace_is_fresh_and_listable():
    first, second = bash.demo_workspace(), bash.demo_workspace(prefix="demo-x-")
    assert first != second and second.name.startswith("demo-x-")
    for rel in ("app.py", "utils.py", "README.md", "data/notes.txt"):
        assert (first / rel).is_file(), rel
    listing = run_bash(bash.list_py_command(), cwd=first)
    assert listing.split() == ["app.py", "utils.py"]
    assert "你好" in run_bash(f'"{sys.executable}" app.py', cwd=first)


def test_list_py_command_without_python_files(tmp_path):
    out = run_bash(bash.list_py_command(), cwd=tmp_path)
    assert "*.py" in out and re.search(r"\[退出码 [1-9]\d*\]$", out)


# ---- 基本输出格式 ----

def test_plain_output_and_order():
    assert run_bash("echo hi") == "hi\n"
    assert run_bash("echo a; echo b >&2; echo c") == "a\nb\nc\n"


def test_exit_code_and_empty_output():
    assert run_bash("exit 2") == "(没有输出)\n[退出码 2]"
    assert run_bash("true") == "(没有输出)"
    assert run_bash("echo oops >&2; exit 3") == "oops\n[退出码 3]"
    assert run_bash("printf x; exit 4") == "x\n[退出码 4]"


def test_killed_by_signal():
    assert run_bash("kill -9 $$") == "(没有输出)\n[被信号 9 终止]"


def test_os_errors_come_back_as_text(tmp_path, monkeypatch):
    missing = run_bash("echo hi", cwd=tmp_path / "no-such-dir")
    assert missing.startswith("[错误：无法启动命令") and "no-such-dir" in missing
    assert run_bash("echo a\0b").startswith("[错误：无法启动命令")
    assert run_bash(123).startswith("[错误：command 应该是字符串")
    # 找不到 shell：让执行器去启动一个不存在的程序（真实的 Popen 失败）
    monkeypatch.setattr(bash, "_shell_args", lambda c: ["/no/such/shell", "-c", c])
    assert run_bash("echo hi").startswith("[错误：无法启动命令")


def test_uses_bash_when_available():
    assert run_bash("echo ${BASH_VERSION:+bash}") == "bash\n"


def test_plain_command_does_not_wait_for_the_grace_period():
    """正常结束的命令不该再等 0.5 s 的后台宽限期（速度本身由 benchmarks/ 测量）。"""
    def best(fn):
        times = []
        for _ in range(5):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return min(times)

    baseline = best(lambda: subprocess.run(bash._shell_args("echo hi"), capture_output=True))
    ours = best(lambda: run_bash("echo hi"))
    assert ours < baseline + 0.3, (ours, baseline)


# ---- 超时与进程树 ----

def test_timeout_returns_partial_output():
    start = time.monotonic()
    out = run_bash("echo start; sleep 30", timeout=1)
    assert time.monotonic() - start < 3
    assert out.startswith("start\n")
    assert out.endswith("[超时：命令运行超过 1 秒，已结束它的进程组和仍占着输出的进程]")


@linux_only
def test_timeout_kills_grandchildren_even_after_setsid():
    # 孙进程（同组）、不占管道的后台进程（同组，靠 killpg）、setsid 脱离的进程（靠 /proc）
    m1, m2, m3 = MARK + "1", MARK + "2", MARK + "3"
    cmd = (f"bash -c 'sleep {m1}; :' & sleep {m2} >/dev/null 2>&1 & "
           f"setsid sleep {m3} & echo start; sleep 30")
    start = time.monotonic()
    out = run_bash(cmd, timeout=1)
    assert time.monotonic() - start < 3
    assert "start" in out and "[超时" in out
    assert gone(m1) and gone(m2) and gone(m3)


# ---- 后台任务不拖住执行器 ----

@linux_only
@pytest.mark.parametrize("launch, marker", [
    ("sleep {m} &", MARK + "4"), ("setsid sleep {m} &", MARK + "5"), ("nohup sleep {m} &", MARK + "6"),
], ids=["sleep", "setsid", "nohup"])
def test_background_job_does_not_hang(launch, marker):
    start = time.monotonic()
    out = run_bash(launch.format(m=marker) + " echo done")
    assert time.monotonic() - start < 3
    assert out.startswith("done\n") and "后台进程" in out
    assert gone(marker)


def test_background_job_with_own_output_is_left_alone(tmp_path):
    """输出重定向到别处的后台任务不占管道：立即返回，也不被结束。"""
    marker = MARK + "7"
    start = time.monotonic()
    out = run_bash(f"sleep {marker} > /dev/null 2>&1 & echo $!", cwd=tmp_path)
    try:
        assert time.monotonic() - start < 0.45 and "后台进程" not in out  # 不到 0.5 s 的宽限期：没有等
        assert appears(marker)
    finally:
        for pid in alive_with(marker):
            os.kill(pid, 9)


# ---- 标准输入 ----

def test_stdin_is_empty_even_if_ours_is_an_open_pipe():
    code = """
        import json, sys, time
        assert not sys.stdin.isatty()
        results = []
        for cmd in ["cat", "read x; echo got:$x"]:
            start = time.monotonic()
            results.append([b.run_bash(cmd, timeout=5), time.monotonic() - start])
        print(json.dumps(results))
    """
    child = subprocess.Popen(child_argv(code), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        child.wait(timeout=20)  # 我们一直不关闭 child.stdin
        (cat, t1), (read, t2) = json.loads(child.stdout.read())
    finally:
        child.kill()
        child.stdin.close()
        child.stdout.close()
    assert cat == "(没有输出)" and t1 < 1
    assert read == "got:\n" and t2 < 1


# ---- 大输出：内存有界、截断在字符边界 ----

def test_huge_output_is_bounded():
    size = 200_000_000
    proc = subprocess.run(child_argv(f"""
        import json, resource, time
        b.run_bash("true")  # 先跑一次，让导入和首次调用的开销算进基线
        base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.monotonic()
        out = b.run_bash("yes 中文abc | head -c {size}")
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base_kb
        print(json.dumps([out, peak_kb, time.monotonic() - start]))
    """), capture_output=True, timeout=60)
    out, peak_kb, seconds = json.loads(proc.stdout)
    assert len(out) <= 50_000 and len(out) > 49_000
    assert out.startswith("中文abc\n中文abc\n") and out.endswith("中文abc\n中文abc\n")
    assert "\ufffd" not in out
    (match,) = CUT.finditer(out)
    head, tail = out[: match.start()], out[match.end():]
    shown = len(head.encode()) + len(tail.encode()) - 2  # 减去说明两边的换行
    assert int(match.group(1)) + shown == size
    assert peak_kb < 32 * 1024, f"运行期间峰值内存增加了 {peak_kb} KB"
    assert seconds < 20


@pytest.mark.parametrize("max_chars", [100, 101, 102, 103])
def test_small_cap_never_splits_a_character(max_chars):
    out = run_bash("yes 中文abc | head -c 100000", max_chars=max_chars)
    assert len(out) <= max_chars
    assert "\ufffd" not in out
    assert out.startswith("中文abc") and out.endswith("中文abc\n")
    assert CUT.search(out)


def test_cap_counts_the_notes_too():
    out = run_bash("yes 中文abc | head -c 100000; exit 7", max_chars=200)
    assert len(out) <= 200 and out.endswith("\n[退出码 7]") and CUT.search(out)
    out = run_bash("seq 1 100; exit 7", max_chars=10)
    assert len(out) <= 10


def test_output_that_fits_is_unchanged():
    text = "中" * 99 + "\n"
    assert run_bash(f"printf '{text}'", max_chars=100) == text
    assert run_bash(f"printf '{text}x'", max_chars=100) != text + "x"


# ---- 编码 ----

def test_decode_falls_back_to_console_encoding():
    assert bash._decode(b"\xc4\xe3\xba\xc3", "gbk") == ("你好", "gbk")
    assert bash._decode("你好".encode(), "gbk") == ("你好", "utf-8")
    text, _ = bash._decode(b"\xff\xfe\x80abc", "utf-8")
    assert text.endswith("abc")


def test_non_utf8_output_never_raises():
    raw = b"\xc4\xe3\xba\xc3"  # GBK 编码的“你好”
    try:  # 结果取决于本机区域设置的编码：能解就是“你好”，否则是替换字符
        expected = raw.decode(bash._fallback_encoding())
    except UnicodeDecodeError:
        expected = "\ufffd" * 4
    assert run_bash(r"printf '\xc4\xe3\xba\xc3'") == expected
    junk = run_bash("head -c 3000 /dev/urandom", max_chars=500)
    assert isinstance(junk, str) and 0 < len(junk) <= 500
    assert not re.search("[\udc80-\udcff]", junk)


# ---- 分页器和编辑器 ----

def test_quiet_environment():
    out = run_bash("echo $PAGER $GIT_PAGER $GIT_EDITOR $EDITOR $VISUAL $GIT_TERMINAL_PROMPT $TERM")
    assert out == "cat cat false false false 0 dumb\n"


def test_git_log_and_bare_commit_do_not_block(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.name", "测试")
    git("config", "user.email", "test@example.com")
    git("commit", "-q", "--allow-empty", "-m", "第一次提交")
    start = time.monotonic()
    log = run_bash("git log", cwd=tmp_path, timeout=10)
    commit = run_bash("git commit --allow-empty", cwd=tmp_path, timeout=10)
    assert time.monotonic() - start < 5
    assert "第一次提交" in log and "[退出码" not in log
    assert "editor" in commit.lower() and re.search(r"\[退出码 [1-9]\d*\]$", commit)
    assert "[超时" not in commit


# ---- 命令看不到秘密 ----

SECRET_VARS = ["DASHSCOPE_API_KEY", "DEEPSEEK_API_KEY", "OPENAI_API_KEY", "HF_TOKEN", "GITHUB_TOKEN",
               "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AZURE_CLIENT_SECRET", "DB_PASSWORD",
               "MY_SERVICE_TOKEN", "HARNESS_MODE", "OPENAI_BASE_URL", "GOOGLE_APPLICATION_CREDENTIALS"]


@pytest.fixture()
def secret_env(monkeypatch):
    """环境里放上几家服务商的密钥（随机的哨兵值），以及一个普通变量。"""
    values = {}
    for name in SECRET_VARS:
        values[name] = f"sentinel-{name.lower()}-{os.urandom(8).hex()}"
        monkeypatch.setenv(name, values[name])
    monkeypatch.setenv("MY_ORDINARY_SETTING", "visible-value")
    return values


@pytest.mark.parametrize("command", ["env", "printenv", "set", "export -p", "declare -x",
                                     "cat /proc/self/environ | tr '\\0' '\\n'",
                                     "sh -c 'cat /proc/$$/environ' | tr '\\0' '\\n'"])
def test_commands_see_no_secrets(secret_env, command):
    """子进程的环境里没有像凭据的变量：连名字都没有（名字不会被打码，所以这证明的是“去掉了”）。"""
    out = run_bash(command)
    assert "MY_ORDINARY_SETTING" in out, out[:500]  # 普通变量照常传下去
    for name, value in secret_env.items():
        assert name not in out, (command, name)
        assert value[:12] not in out and value[-12:] not in out


def test_command_env_is_one_function_in_secrets():
    env = {"PATH": "/bin", "HOME": "/root", "LANG": "C.UTF-8", "TOKENIZERS_PARALLELISM": "false",
           "ANTHROPIC_API_KEY": "x", "GH_TOKEN": "x", "CI_JOB_TOKEN": "x", "SOME_SECRET_THING": "x",
           "MYSQL_PASSWORD": "x", "AWS_PROFILE": "x", "AZURE_TENANT_ID": "x", "HF_HOME": "x",
           "HARNESS_APPROVAL": "x", "OPENAI_ORG_ID": "x", "DATABASE_URL": "postgres://u:p4ssw0rd-long@h/db",
           "GOOGLE_APPLICATION_CREDENTIALS": "/k.json", "SSH_AUTH_SOCK": "/tmp/agent"}
    kept = command_env(env)
    assert sorted(kept) == ["HOME", "LANG", "PATH", "TOKENIZERS_PARALLELISM"]
    assert all(hidden_from_commands(k, v) for k, v in env.items() if k not in kept)
    assert bash.child_env()["GIT_OPTIONAL_LOCKS"] == "0"


@linux_only
def test_secrets_read_from_another_process_are_masked(secret_env, tmp_path):
    """白名单之外（人批准了、或者可信的假模型）读到父进程一类的环境：交回的文字里秘密值被抹掉。"""
    holder = subprocess.Popen(["sleep", "30"], env={"PATH": os.environ["PATH"], **secret_env})
    try:
        link = tmp_path / "innocent.txt"
        link.symlink_to(f"/proc/{holder.pid}/environ")  # 工作目录里的符号链接，指向别的进程的环境
        out = run_bash("cat innocent.txt | tr '\\0' '\\n'", cwd=tmp_path)
        assert "HF_TOKEN=***" in out and "DASHSCOPE_API_KEY=***" in out
        fragment = secret_env["GITHUB_TOKEN"][5:15]  # 10 个字符的片段也抹掉
        assert run_bash(f"echo before-{fragment}-after") == "before-***-after\n"
        for name in ["DASHSCOPE_API_KEY", "DEEPSEEK_API_KEY", "OPENAI_API_KEY", "HF_TOKEN", "GITHUB_TOKEN"]:
            assert secret_env[name][-16:] not in out
        # 地址、模型名这类不是秘密的设置不打码（它们只是不交给命令）
        assert secret_env["OPENAI_BASE_URL"][-16:] in out
    finally:
        holder.kill()
        holder.wait()


# ---- 命令里的 git 不运行配置点名的程序 ----

def hostile_repo(root: Path) -> Path:
    """一个配置里点名了程序的 git 仓库：每个程序一运行，就在 root 外面留下一个标记文件。"""
    repo = root / "repo"
    marks = root / "marks"
    marks.mkdir()
    repo.mkdir()

    def git(*args):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.name", "测试")
    git("config", "user.email", "test@example.com")
    (repo / "app.py").write_text("print(1)\n", encoding="utf-8")
    git("add", "app.py")
    git("commit", "-q", "-m", "第一次提交")
    for name in ["fsmonitor", "pager", "gpg", "hook", "external"]:
        script = root / f"evil-{name}.sh"
        script.write_text(f"#!/bin/sh\ntouch '{marks}/{name}'\n", encoding="utf-8")
        script.chmod(0o755)
    git("config", "core.fsmonitor", str(root / "evil-fsmonitor.sh"))
    git("config", "core.pager", str(root / "evil-pager.sh"))
    git("config", "pager.log", str(root / "evil-pager.sh"))
    git("config", "log.showSignature", "true")
    git("config", "gpg.program", str(root / "evil-gpg.sh"))
    git("config", "diff.external", str(root / "evil-external.sh"))
    hooks = repo / ".git" / "hooks"
    for hook in ["pre-commit", "commit-msg", "post-commit", "reference-transaction"]:
        (hooks / hook).write_text(f"#!/bin/sh\ntouch '{marks}/hook-{hook}'\n", encoding="utf-8")
        (hooks / hook).chmod(0o755)
    (repo / "app.py").write_text("print(2)\n", encoding="utf-8")  # 有改动：git status 要刷新索引
    return repo


def test_git_config_programs_are_switched_off(tmp_path):
    repo = hostile_repo(tmp_path)
    # 先证明这个仓库确实有毒：不经过执行器时，git status 会运行 fsmonitor
    subprocess.run(["git", "status"], cwd=repo, capture_output=True)
    assert (tmp_path / "marks" / "fsmonitor").exists()
    (tmp_path / "marks" / "fsmonitor").unlink()
    index = (repo / ".git" / "index").read_bytes()
    for command in ["git status", "git log", "git log --show-signature", "git show HEAD --stat", "git -p log"]:
        out = run_bash(command, cwd=repo, timeout=20)
        assert "[超时" not in out, (command, out)
    assert (repo / ".git" / "index").read_bytes() == index  # GIT_OPTIONAL_LOCKS=0：git status 不改写索引
    out = run_bash("git commit --allow-empty -m 钩子不该运行", cwd=repo, timeout=20)
    assert "[退出码" not in out, out  # 提交照常成功，只是钩子和签名程序都没运行
    assert sorted(p.name for p in (tmp_path / "marks").iterdir()) == []


def test_diff_external_is_not_switched_off_by_the_runner(tmp_path):
    """如实记录：diff.external 没法在环境里关掉（设成空值会让每次 git diff 都失败），
    所以 git 不在只读白名单里；人批准 git diff 之前要知道这一点。"""
    repo = hostile_repo(tmp_path)
    run_bash("git diff", cwd=repo, timeout=20)
    assert (tmp_path / "marks" / "external").exists()
    assert not check_allowlist("git diff", windows=False).allowed


# ---- 不会结束的命令：超时和输出上限兜底 ----

@linux_only
def test_tail_follow_is_bounded_by_the_timeout(tmp_path):
    log = tmp_path / f"follow-{MARK}.log"
    log.write_text("第一行\n", encoding="utf-8")
    start = time.monotonic()
    out = run_bash(f"tail -f {log}", timeout=1)
    assert time.monotonic() - start < 5
    assert out.startswith("第一行\n") and "[超时：命令运行超过 1 秒" in out
    assert alive_with(f"follow-{MARK}") == []  # tail 已经结束，没有留在后台


@linux_only
def test_endless_output_is_bounded_by_the_cap_and_the_timeout():
    start = time.monotonic()
    out = run_bash("cat /dev/zero", timeout=1.5, max_chars=2000)
    assert time.monotonic() - start < 6
    assert len(out) <= 2000 and "[超时" in out and CUT.search(out)
    omitted = int(CUT.search(out).group(1))
    assert omitted > 1_000_000  # 读了很多，但只留下开头和结尾
