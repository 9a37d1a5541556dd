"""给一个小班评分：有作弊的、捣乱的、交得乱七八糟的，外加一份诚实的满分和一份空白。

真的用 nbgrader、真的在 bubblewrap 沙盒里跑。检查：每个人的分数都对；反馈里没有隐藏测试、没有密钥；
整批跑完、每个人都有成绩；没有请求出网；项目和老师的文件一字未变；评分结束后没有留下任何进程。
"""

import csv
import hashlib
import json
import os
import shutil
import socket
import subprocess
import threading

from pathlib import Path

import nbformat
import pytest

from conftest import ROOT

pytest.importorskip("nbgrader", reason="课程作业需要 pip install -e .[teach]")

from coursework import course, feedback  # noqa: E402

_NO_SANDBOX = course.sandbox.available()
if _NO_SANDBOX:
    pytest.skip(f"没有沙盒：{_NO_SANDBOX}", allow_module_level=True)

NB = "00_setup"
PEEK = """import os
try:
    open(f'/proc/{os.getppid()}/mem', 'rb').close()
    print('SERVER memory opened')
except OSError as e:
    print('SERVER memory', type(e).__name__)
import subprocess
subprocess.run(['umount', '-l', %r], capture_output=True)
print('TEACHER', os.path.exists(%r))"""
MARK = f"hostile-{os.getpid()}"
PLANTED = {"DASHSCOPE_API_KEY": "sk-planted-dash-7f3a9c21e8b04d6f", "HF_TOKEN": "hf_plantedTokenValue0123456789",
           "AWS_SECRET_ACCESS_KEY": "planted/aws/secret/KEY0123456789abcdef"}


DISK = """import os
def _fill(folder):
    total = 0
    for i in range(40):
        try:
            with open(os.path.join(folder, f'fill{i}.bin'), 'wb') as f:
                for _ in range(64):
                    f.write(b'x' * (1 << 20))
                    f.flush()
                    total += 1
        except OSError:
            break
    for i in range(40):
        try:
            os.remove(os.path.join(folder, f'fill{i}.bin'))
        except OSError:
            pass
    return total
def _writable(folder):
    try:
        open(os.path.join(folder, 'planted.txt'), 'w').close()
        return True
    except OSError:
        return False
print('DISK', _fill('.'), _fill('/tmp'))
print('WRITABLE', [d for d in ('/root', '/home', '/var/tmp', %r, %r, %r) if os.path.isdir(d) and _writable(d)])
"""


def _solutions(stem):
    nb = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution")}


def _student(release, stem, answers=None, extra=None, edit=None):
    """学生版的一本笔记本，按 answers 填答案；extra 是接在第一道题答案后面的代码。"""
    nb = nbformat.read(release / f"{stem}.ipynb", as_version=4)
    solutions = _solutions(stem)
    first = True
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if gid in solutions:
            if answers is not None and gid in answers:
                cell.source = answers[gid]
            elif answers is None:
                cell.source = solutions[gid]
            if first and extra:
                cell.source += "\n" + extra
            first = False
    if edit:
        edit(nb)
    return nb


class _Listener:
    """沙盒外面的一个 TCP 服务：记下有没有人连进来（学生的代码试着往这里发请求）。"""

    def __init__(self, path=None):
        """path：改成在这个路径上听的 Unix 套接字（宿主机 /run 里的 docker.sock、D-Bus 那样的）。"""
        self.sock = socket.socket(socket.AF_UNIX) if path else socket.socket()
        self.sock.bind(str(path) if path else ("127.0.0.1", 0))
        self.sock.listen()
        self.path, self.port, self.connections = path, (None if path else self.sock.getsockname()[1]), 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()


def _digest(*folders):
    h = hashlib.sha256()
    for folder in folders:
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            h.update(str(path).encode() + path.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def graded(tmp_path_factory, release_dir, prepared_course):
    release = release_dir
    subs = tmp_path_factory.mktemp("subs")
    listener = _Listener()
    run = Path("/run") if os.access("/run", os.W_OK) else tmp_path_factory.mktemp("run")
    unix = _Listener(run / f"hostile-{os.getpid()}.sock")
    s = _solutions(NB)
    ex1, ex2 = "00-ex1-solution", "00-ex2-solution"
    blank = {ex1: "raise NotImplementedError()", ex2: "raise NotImplementedError()"}
    cases = {
        # 诚实的和空白的
        "honest": (None, None, 3),
        "blank": (blank, None, 0),
        # 作弊：都应当只拿到诚实的分数（这里都没写答案，所以是 0）
        "transformer": (blank, "get_ipython().input_transformers_cleanup.append(lambda lines: ['pass\\n'])", 0),
        "custom_exc": (blank, "get_ipython().set_custom_exc((Exception,), lambda *a, **k: None)", 0),
        "always_equal": ({ex1: "class _E:\n    def __eq__(self, o): return True\n\ndef count_roles(m): return _E()",
                          ex2: "def last_reply(m): return count_roles(m)"}, None, 0),
        "patch_own_work": ({ex1: "import harness_lib\nfrom harness_lib.models.messages import as_dict\nimport harness_lib.safety.own_work as _g\n"
                                 "_g.assert_own_work = lambda *a: None\nharness_lib.assert_own_work = lambda *a: None\n"
                                 "from collections import Counter\n"
                                 "def count_roles(m): return dict(Counter(as_dict(x)['role'] for x in m))",
                            ex2: blank[ex2]}, None, 0),
        "gradebook": (blank, "import glob\nfor _p in glob.glob('/tmp/**/gradebook.db', recursive=True) + "
                             "glob.glob('../../../**/gradebook.db', recursive=True):\n    open(_p, 'w').write('x')", 0),
        "own_work_py": (blank, "import harness_lib.safety.own_work as _g\ntry:\n    open(_g.__file__, 'a').write("
                              "'\\ndef assert_own_work(*a): pass\\n')\nexcept OSError as e:\n    print(e)", 0),
        "detached": (blank, f"import subprocess\nsubprocess.Popen(['setsid', 'sh', '-c', 'sleep 30 # {MARK}'])", 0),
        "network": (blank, f"import os, socket\nos.environ.update(HARNESS_MODE='real', OPENAI_API_KEY='x', "
                           f"OPENAI_BASE_URL='http://127.0.0.1:{listener.port}/v1')\n"
                           f"try:\n    socket.create_connection(('127.0.0.1', {listener.port}), timeout=2)\n"
                           "except OSError as e:\n    print('连不上', e)\n"
                           f"try:\n    socket.socket(socket.AF_UNIX).connect({str(unix.sock.getsockname())!r})\n"
                           "except OSError as e:\n    print('连不上', e)", 0),
        # 暂停内核工厂、留下进程，想让下一本落到自己手里：下一本换一个新沙盒，照常评分
        "hijack": (None, f"import os, signal, subprocess\nsubprocess.Popen(['setsid', 'sh', '-c', 'sleep 60 # {MARK}'])\n"
                         "os.kill(os.getppid(), signal.SIGSTOP)", 3),
        "env": (blank, "import os\nprint(dict(os.environ))", 0),
        "read_teacher": (blank, f"print(open({str(ROOT / 'notebooks' / (NB + '.ipynb'))!r}).read())", 0),
        "history_leak": ({ex1: "def count_roles(m):\n    raise AssertionError('\\n'.join(get_ipython().user_ns['In']))",
                          ex2: blank[ex2]}, None, 0),
        # 捣乱，但答案是对的：照样满分
        "rmtree": (None, "import shutil\nshutil.rmtree('../../..', ignore_errors=True)", 3),
        "marker_comment": (None, "# 我的笔记：### BEGIN HIDDEN TESTS 是什么意思？", 3),
        # 上限：进程数、磁盘（当前目录和 /tmp 是有大小的内存盘，别处都不能写）
        "processes": (None, f"import subprocess\n_ps = []\ntry:\n    for _ in range(3000):\n"
                            f"        _ps.append(subprocess.Popen(['sh', '-c', 'sleep 60 # {MARK}']))\n"
                            "except OSError as e:\n    pass\nprint('PROCESSES', len(_ps))\n"
                            "for _p in _ps:\n    _p.kill()", 3),
        "peek": (None, PEEK % (str(ROOT), str(ROOT / "notebooks" / f"{NB}.ipynb")), 3),
        "disk": (None, DISK % (str(ROOT), str(ROOT / "harness_lib"), ".."), 3),
        "stderr": ({ex1: s[ex1].replace("def count_roles(messages):",
                                        "import sys\n\ndef count_roles(messages):\n    print('调试', file=sys.stderr)"),
                    ex2: s[ex2]}, None, 3),
    }
    for sid, (answers, extra, _) in cases.items():
        (subs / sid).mkdir()
        nbformat.write(_student(release, NB, answers, extra), subs / sid / f"{NB}.ipynb")
    # os._exit 只毁掉它自己那一本：01 照样评
    (subs / "exit").mkdir()
    nbformat.write(_student(release, NB, None, "import os\nos._exit(1)"), subs / "exit" / f"{NB}.ipynb")
    nbformat.write(_student(release, "01_model_only_proposes"), subs / "exit" / "01_model_only_proposes.ipynb")
    # 改不了沙盒里的内核工厂（读不了它的内存），杀掉它也只毁掉自己这一本
    (subs / "server").mkdir()
    kill = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"
    nbformat.write(_student(release, NB, None, kill), subs / "server" / f"{NB}.ipynb")
    nbformat.write(_student(release, "01_model_only_proposes"), subs / "server" / "01_model_only_proposes.ipynb")
    nbformat.write(_student(release, "01_model_only_proposes"), subs / "hijack" / "01_model_only_proposes.ipynb")
    # 交得乱：改了名、删了元数据、测试格重复了一份、nbgrader collect 的目录结构
    (subs / "renamed").mkdir()
    nbformat.write(_student(release, NB), subs / "renamed" / f"{NB} (1).ipynb")

    def strip(nb):
        for cell in nb.cells:
            cell.metadata = {}

    def duplicate(nb):
        test = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "00-ex1-tests")
        nb.cells.insert(test + 1, nbformat.from_dict(json.loads(json.dumps(nb.cells[test]))))
        nb.cells[test + 1].id = "copied-test"

    for sid, edit in (("stripped", strip), ("duplicated", duplicate)):
        (subs / sid).mkdir()
        nbformat.write(_student(release, NB, edit=edit), subs / sid / f"{NB}.ipynb")
    (subs / "collected" / course.ASSIGNMENT).mkdir(parents=True)
    nbformat.write(_student(release, NB), subs / "collected" / course.ASSIGNMENT / f"{NB}.ipynb")

    watched = [ROOT / "notebooks", ROOT / "harness_lib", ROOT / "coursework", subs]
    before = _digest(*watched)
    out = tmp_path_factory.mktemp("grades")
    shutil.copytree(prepared_course, out / "course")
    saved = dict(os.environ)
    os.environ.update(PLANTED)
    try:
        course.autograde(subs, out, jobs=2, timeout=30)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    listener.sock.close()
    unix.sock.close()
    unix.path.unlink(missing_ok=True)
    expected = {sid: total for sid, (_, _, total) in cases.items()}
    expected.update(exit=4, server=4, hijack=7, renamed=3, stripped=3, duplicated=3, collected=3)
    return out, expected, (listener, unix), before == _digest(*watched)


def _table(out):
    with (out / "grades.csv").open(encoding="utf-8-sig") as f:
        return {r["学号"]: r for r in csv.DictReader(f)}


def test_every_student_is_graded_and_every_grade_is_right(graded):
    out, expected, _, _ = graded
    table = _table(out)
    assert set(table) == set(expected), "每个学生都要有一行"
    wrong = {sid: (table[sid]["总分"], total) for sid, total in expected.items() if float(table[sid]["总分"]) != total}
    assert not wrong, f"分数不对（得到，应得）：{wrong}"


def test_a_crashed_notebook_is_explained_and_only_costs_itself(graded):
    out, _, _, _ = graded
    rows = {(r["student"], r["notebook"]): r for r in csv.DictReader(open(out / "notebooks.csv", encoding="utf-8-sig"))}
    crashed = rows["exit", NB]
    assert crashed["status"] == "内核退出" and "os._exit" in crashed["reason"]
    assert rows["exit", "01_model_only_proposes"]["status"] == "完成"
    assert "内核退出" in _table(out)["exit"]["原因"]


def test_no_hidden_test_and_no_planted_secret_reaches_any_feedback(graded):
    out, _, _, _ = graded
    hidden = feedback.hidden_lines((ROOT / "notebooks" / f"{NB}.ipynb",))
    assert hidden
    for path in (out / "feedback").rglob("*"):
        if path.suffix not in (".html", ".ipynb"):
            continue
        text = path.read_text(encoding="utf-8")
        for line in hidden:
            assert line not in text and json.dumps(line, ensure_ascii=False)[1:-1] not in text, f"{path}：{line}"
        for value in PLANTED.values():
            assert value[:12] not in text, f"{path} 里有密钥"


def _printed(out, sid, tag):
    """学生的代码在 NB 里打印的一行 `tag …`（从成绩库旁边评分后的笔记本里读）。"""
    nb = nbformat.read(out / "course" / "autograded" / sid / course.ASSIGNMENT / f"{NB}.ipynb", as_version=4)
    for cell in nb.cells:  # 一次 print 可能分成几段输出（机器忙、进程数到了上限时），先接起来
        text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("name") == "stdout")
        for line in text.splitlines():
            if line.startswith(tag + " "):
                return line[len(tag) + 1:]
    raise AssertionError(f"{sid} 没有打印 {tag}")


def test_the_sandbox_bounds_processes_and_disk(graded):
    out = graded[0]
    started = int(_printed(out, "processes", "PROCESSES"))
    assert 50 < started < course.sandbox.PROCESSES, f"开了 {started} 个进程"  # 每个 sh 下面还有一个 sleep
    here, tmp = map(int, _printed(out, "disk", "DISK").split())
    assert 0 < here <= course.sandbox.CWD_SIZE >> 20 and 0 < tmp <= course.sandbox.TMP_SIZE >> 20, (here, tmp)
    assert _printed(out, "disk", "WRITABLE") == "[]", "藏起来的目录、项目或输出目录写得进去"


def test_the_kernel_server_is_out_of_reach_and_killing_it_costs_only_that_notebook(graded):
    out = graded[0]
    assert _printed(out, "peek", "SERVER") == "memory PermissionError"
    assert _printed(out, "peek", "TEACHER") == "False", "umount 之后看得到老师的笔记本"
    with (out / "notebooks.csv").open(encoding="utf-8-sig") as f:
        rows = {(r["student"], r["notebook"]): r for r in csv.DictReader(f)}
    assert rows["server", NB]["status"] == "内核退出"
    assert rows["server", "01_model_only_proposes"]["status"] == "完成"
    assert rows["hijack", "01_model_only_proposes"]["status"] == "完成", "暂停了内核工厂，下一本就评不了"


def test_nothing_reached_the_network_and_no_file_changed(graded):
    _, _, listener, unchanged = graded
    assert [one.connections for one in listener] == [0, 0], "沙盒里的代码连上了外面的服务（TCP、Unix 套接字）"
    assert unchanged, "项目、老师的文件或学生的作业在评分后变了"


def test_no_process_outlives_grading(graded):
    found = subprocess.run(["pgrep", "-f", MARK], capture_output=True, text=True).stdout.split()
    assert not found, f"评分结束后还有学生启动的进程：{found}"


def test_grading_refuses_without_a_sandbox_unless_told(tmp_path, monkeypatch):
    monkeypatch.setattr(course.sandbox, "available", lambda: "这台机器没有 bwrap")
    (tmp_path / "s").mkdir()
    with pytest.raises(SystemExit, match="--unsandboxed"):
        course.autograde(tmp_path, tmp_path / "out")
    assert not (tmp_path / "out").exists()
