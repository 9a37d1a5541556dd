"""在老师已经在用的地方评分：GitHub Classroom 的模板和按推送评分的工作流、评分镜像，和 make autograde 给出同一个分数。

一个小班，每人一个“作业仓库”（`python -m coursework.course classroom` 生成的模板，填上自己的答案）：
老实的学生（`honest_students.py` 的 style_a，交了全部笔记本）、有错的学生（同一文件的 bug，交了主线的前四本，
每题一处错）、几个捣乱的学生（`test_hostile_class.py` 里的做法，分数已知）。这个班先用 `course.autograde`（make autograde 的路）评一遍，
再走两条路，分数必须一样：

- 工作流：从模板的 `.github/workflows/classroom.yml` 里原样取出“评分”那一步的脚本，用 bash 运行
  （`$GITHUB_ENV`、`$GITHUB_OUTPUT`、`$GITHUB_STEP_SUMMARY` 换成临时文件），再按 GitHub Classroom 报告步骤的算法
  从 `<ID>_RESULTS` 算出交给 Classroom 的分数（算法见 coursework/classroom.py 的说明）；
- 评分镜像：Dockerfile 的 ENTRYPOINT 和 CMD 原样在本机运行（不需要 Docker），路径换成临时目录。

工作流文件还要通过 GitHub 工作流的 JSON Schema（SchemaStore 的，见 tests/schemas/README.md）。
"""

import base64
import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

from conftest import ROOT, notebook_paths
from honest_students import ANSWERS

pytest.importorskip("nbgrader", reason="课程作业需要 pip install -e .[teach]")

from coursework import classroom, course, feedback, report  # noqa: E402

WORKFLOW = ROOT / "coursework" / "template" / ".github" / "workflows" / "classroom.yml"
DOCKERFILE = ROOT / "coursework" / "Dockerfile"
SCHEMA = ROOT / "tests" / "schemas" / "github-workflow.json"
REPORTER = "classroom-resources/autograding-grading-reporter@d13b5912daf5042ac1b71bc38bdb4a6bcd61d8ca"
JOB = "run-autograding-tests"
NO_SANDBOX = course.sandbox.available()
needs_sandbox = pytest.mark.skipif(bool(NO_SANDBOX), reason=f"没有沙盒：{NO_SANDBOX}")


class _Loader(yaml.SafeLoader):
    """按 YAML 1.2 读：布尔值只有 true / false。GitHub 读工作流也是这样，`on` 是一个普通的键，不是 True。"""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                              list("tTfF"))


def _workflow():
    return yaml.load(WORKFLOW.read_text(encoding="utf-8"), Loader=_Loader)


def _step(step_id):
    return next(s for s in _workflow()["jobs"][JOB]["steps"] if s.get("id") == step_id)


def _named(fragment):
    return next(s for s in _workflow()["jobs"][JOB]["steps"] if fragment in s.get("name", "") + s.get("uses", ""))


# ---------------------------------------------------------------- 工作流文件：GitHub 的 schema 和它的接线


def _validator():
    import jsonschema

    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    return jsonschema.Draft7Validator(schema)


def test_workflow_validates_against_githubs_schema():
    errors = sorted(_validator().iter_errors(_workflow()), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


@pytest.mark.parametrize("break_it", [
    lambda wf: wf["jobs"][JOB].pop("runs-on"),
    lambda wf: wf["jobs"][JOB]["steps"][0].update({"uses": "actions/checkout@v5"}),  # 一步里既有 run 又有 uses
    lambda wf: wf["jobs"][JOB].update({"timeout-minute": 30}),
    lambda wf: wf.pop("on"),
], ids=["no-runs-on", "run-and-uses", "misspelt-key", "no-on"])
def test_the_schema_check_catches_a_broken_workflow(break_it):
    wf = _workflow()
    break_it(wf)
    assert list(_validator().iter_errors(wf)), "改坏的工作流也通过了：这个检查什么都查不出来"


def test_the_vendored_schema_is_the_recorded_file():
    import hashlib

    recorded = re.search(r"sha256：`([0-9a-f]{64})`", (SCHEMA.parent / "README.md").read_text(encoding="utf-8")).group(1)
    assert hashlib.sha256(SCHEMA.read_bytes()).hexdigest() == recorded
    assert json.loads(SCHEMA.read_text(encoding="utf-8"))["$id"] == "https://json.schemastore.org/github-workflow.json"


def test_workflow_is_wired_the_way_classroom_and_the_grader_expect():
    wf = _workflow()
    assert wf["name"] == "Autograding Tests" and list(wf["jobs"]) == [JOB]
    assert "push" in wf["on"]
    job = wf["jobs"][JOB]
    assert "github-classroom[bot]" in job["if"]
    # 学生的代码看不到任何凭据：两次 checkout 都不把令牌留在磁盘上，读课程仓库的 secret 只在那一步
    checkouts = [s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@")]
    assert len(checkouts) == 2 and all(s["with"]["persist-credentials"] is False for s in checkouts)
    course_checkout = next(s for s in checkouts if "repository" in s["with"])
    assert "secrets.COURSE_TOKEN" in course_checkout["with"]["token"]
    assert [s for s in job["steps"] if "secrets." in json.dumps(s)] == [course_checkout]
    assert course_checkout["with"]["path"] == "course" and job["env"]["COURSE"].endswith("/course")
    # 装的是 make autograde 用的那份锁文件，带哈希；沙盒是 bubblewrap
    install = _named("装上评分沙盒").get("run", "")
    autograde_lock = re.search(r"^autograde: \$\(VENV\)/\.installed-(\S+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert f"--require-hashes -r requirements/{autograde_lock}.txt" in install
    assert "--require-hashes -r requirements/tools.txt" in install and "bubblewrap" in install
    # 评分这一步产出 runners，报告步骤（钉在 v1 的提交上）用它
    grade = _step("grade")
    assert "coursework.course grade-one" in grade["run"] and grade["working-directory"] == "course"
    reporter = _named("autograding-grading-reporter")
    assert reporter["uses"] == REPORTER
    assert reporter["with"]["runners"] == "${{ steps.grade.outputs.runners }}"
    # 传给学生的只有反馈：grades/course/ 里有隐藏测试
    upload = _named("upload-artifact")
    assert upload["with"]["path"].rstrip("/") == "grades/feedback" and job["env"]["GRADES"].endswith("/grades")


def test_dockerfile_installs_the_lock_and_enters_the_grading_command():
    text = DOCKERFILE.read_text(encoding="utf-8")
    autograde_lock = re.search(r"^autograde: \$\(VENV\)/\.installed-(\S+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert f"--require-hashes -r requirements/{autograde_lock}.txt" in text
    assert "--require-hashes -r requirements/tools.txt" in text and "bubblewrap" in text
    for source in re.findall(r"^COPY (\S+) ", text, re.M):
        assert (ROOT / source).exists(), f"Dockerfile 复制的 {source} 不存在"
    workdir = re.search(r"^WORKDIR (\S+)", text, re.M).group(1)
    entry = json.loads(re.search(r"^ENTRYPOINT (.+)$", text, re.M).group(1))
    assert entry == [f"{workdir}/.venv/bin/python", "-m", "coursework.course"]
    assert re.search(r"^USER (?!root)\S+", text, re.M), "用普通用户评分：进程数上限只对普通用户起作用"
    assert not (ROOT / "Dockerfile").exists(), "根目录的 Dockerfile 会让 Binder（repo2docker）不再读 environment.yml"


def _yaml_blocks(path):
    return [yaml.load(block, Loader=_Loader)
            for block in re.findall(r"```yaml\n(.*?)```", path.read_text(encoding="utf-8"), re.S)]


def test_the_kubernetes_job_in_the_teaching_guide_runs_grade_one_in_a_usable_sandbox():
    jobs = [doc for doc in _yaml_blocks(ROOT / "docs" / "teaching.md") if isinstance(doc, dict) and doc.get("kind") == "Job"]
    assert len(jobs) == 1, "教师指南里应当有一个 Kubernetes Job"
    pod = jobs[0]["spec"]["template"]["spec"]
    assert jobs[0]["spec"]["completionMode"] == "Indexed"
    assert pod["hostUsers"] is False  # procMount: Unmasked 要求 Pod 有自己的用户命名空间
    (grader,) = pod["containers"]
    command = " ".join(grader.get("command", []) + grader.get("args", []))
    assert "coursework.course grade-one" in command and "--student" in command
    # 输出目录是结果卷里这个 Pod 自己的一格：沙盒只藏得住输出目录本身，藏不住同一个卷里别的学生
    out = re.search(r"--out (\S+)", command).group(1)
    (mount,) = [m for m in grader["volumeMounts"] if m["mountPath"] == out]
    assert mount.get("subPathExpr") == "$(JOB_COMPLETION_INDEX)", "评分容器只能挂上结果卷里自己的那一格"
    assert all(m["mountPath"] != out and not out.startswith(m["mountPath"] + "/") for m in grader["volumeMounts"]
               if m is not mount), "结果卷的别处也挂进了评分容器"
    context = {**pod.get("securityContext", {}), **grader.get("securityContext", {})}
    assert context["seccompProfile"]["type"] == "Unconfined" and context["appArmorProfile"]["type"] == "Unconfined"
    assert context["procMount"] == "Unmasked" and context["runAsNonRoot"] is True
    assert not context.get("privileged"), "privileged 的 Pod 一旦被逃出沙盒就是整个节点"
    # 每个容器用的都是同一个评分镜像
    images = {c["image"] for c in pod["containers"] + pod.get("initContainers", [])}
    assert len(images) == 1


# ---------------------------------------------------------------- 模板仓库


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    out = tmp_path_factory.mktemp("classroom-template")
    subprocess.run([sys.executable, "-m", "coursework.course", "classroom", "--out", str(out)],
                   check=True, capture_output=True, cwd=ROOT)
    return out


def test_template_is_the_release_plus_the_workflow_and_holds_no_hidden_test(template):
    files = sorted(str(p.relative_to(template)) for p in template.rglob("*") if p.is_file())
    assert files == sorted([*(p.name for p in notebook_paths()), ".github/workflows/classroom.yml", "README.md", ".gitignore"])
    assert (template / ".github/workflows/classroom.yml").read_bytes() == WORKFLOW.read_bytes()
    for path in template.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            assert "BEGIN HIDDEN TESTS" not in text and "BEGIN SOLUTION" not in text, path
    for path in notebook_paths():  # 只在这本的隐藏测试里出现的行（别的笔记本里公开的 import 之类不算）
        text = (template / path.name).read_text(encoding="utf-8")
        leaked = [line for line in feedback.hidden_lines((path,)) if line in text]
        assert not leaked, f"模板的 {path.name} 里有隐藏测试：{leaked[:3]}"


# ---------------------------------------------------------------- 一个小班，三条路


def _hostile():
    """几个捣乱的学生（做法取自 test_hostile_class.py，它们在那里的分数是已知的）：
    ({学号: (答案, 接在第一题后面的代码, 应得总分)}, 按这些做出一本学生笔记本的函数)。"""
    from test_hostile_class import _student

    ex1, ex2 = "00-ex1-solution", "00-ex2-solution"
    blank = {ex1: "raise NotImplementedError()", ex2: "raise NotImplementedError()"}
    cases = {
        "always_equal": ({ex1: "class _E:\n    def __eq__(self, o): return True\n\ndef count_roles(m): return _E()",
                          ex2: "def last_reply(m): return count_roles(m)"}, None, 0),
        "transformer": (blank, "get_ipython().input_transformers_cleanup.append(lambda lines: ['pass\\n'])", 0),
        "history_leak": ({ex1: "def count_roles(m):\n    raise AssertionError('\\n'.join(get_ipython().user_ns['In']))",
                          ex2: blank[ex2]}, None, 0),
        "rmtree": (None, "import shutil\nshutil.rmtree('../../..', ignore_errors=True)", 3),
    }
    return cases, _student


BUG_NOTEBOOKS = ("00_setup", "01_model_only_proposes", "02_each_turn", "03_one_request")


def _fill_honest(nb, style):
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in ANSWERS:
            cell.source = ANSWERS[gid][style]
    return nb


@pytest.fixture(scope="module")
def repos(template, tmp_path_factory):
    """每个学生一个作业仓库（模板 + 自己的答案）：{学号: 路径}，以及每人应得的总分（知道的话）。"""
    root = tmp_path_factory.mktemp("repos")
    expected = {}
    # 老实的学生交了全部笔记本；有错的学生交了主线的前四本（每题一处错，省一半评分时间）
    for sid, style, stems in (("honest", "style_a", None), ("bug", "bug", BUG_NOTEBOOKS)):
        shutil.copytree(template, root / sid)
        for path in notebook_paths():
            if stems is not None and path.stem not in stems:
                (root / sid / path.name).unlink()
                continue
            nbformat.write(_fill_honest(nbformat.read(template / path.name, as_version=4), style), root / sid / path.name)
    expected["honest"] = sum(p for _, _, p in report.exercises(notebook_paths()))
    cases, student = _hostile()
    for sid, (answers, extra, total) in cases.items():
        shutil.copytree(template, root / sid)
        for path in notebook_paths():  # 只交了 00：别的笔记本删掉
            (root / sid / path.name).unlink()
        nbformat.write(student(template, "00_setup", answers, extra), root / sid / "00_setup.ipynb")
        expected[sid] = total
    # os._exit 只毁掉它自己那一本（0 分、写明原因）：01 照样满分
    shutil.copytree(template, root / "exit")
    for path in notebook_paths():
        if path.stem not in ("00_setup", "01_model_only_proposes"):
            (root / "exit" / path.name).unlink()
    nbformat.write(student(template, "00_setup", None, "import os\nos._exit(1)"), root / "exit" / "00_setup.ipynb")
    nbformat.write(student(template, "01_model_only_proposes"), root / "exit" / "01_model_only_proposes.ipynb")
    expected["exit"] = 4
    return {p.name: p for p in sorted(root.iterdir())}, expected


@pytest.fixture(scope="module")
def by_autograde(repos, prepared_course, tmp_path_factory):
    """make autograde 的路：整个班放进一个 SUBMISSIONS，一次评完。"""
    if NO_SANDBOX:
        pytest.skip(f"没有沙盒：{NO_SANDBOX}")
    paths, _ = repos
    subs = tmp_path_factory.mktemp("class")
    for sid, path in paths.items():
        shutil.copytree(path, subs / sid)
    out = tmp_path_factory.mktemp("autograde")
    shutil.copytree(prepared_course, out / "course")
    course.autograde(subs, out, jobs=2)
    return out


def _run_grade_step(repo: Path, workspace: Path) -> subprocess.Popen:
    """像运行器那样运行工作流里“评分”那一步：同样的脚本、同样的任务环境变量名，工作目录是课程仓库（这里就是本项目）。"""
    job_env = _workflow()["jobs"][JOB]["env"]
    workspace.mkdir(parents=True, exist_ok=True)
    for name in ("env", "output", "summary"):
        (workspace / name).touch()
    values = {"STUDENT": repo, "COURSE": ROOT, "GRADES": workspace / "grades"}
    assert set(job_env) == set(values), "工作流的任务环境变量变了：这里也要跟着改"
    env = {**os.environ, **{k: str(v) for k, v in values.items()},
           "GITHUB_REPOSITORY": f"my-class/{repo.name}", "GITHUB_ENV": str(workspace / "env"),
           "GITHUB_OUTPUT": str(workspace / "output"), "GITHUB_STEP_SUMMARY": str(workspace / "summary"),
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    script = workspace / "step.sh"
    script.write_text(_step("grade")["run"], encoding="utf-8")
    with open(workspace / "log.txt", "w") as log:  # 子进程有自己的一份文件描述符
        return subprocess.Popen(["bash", "-e", str(script)], cwd=values["COURSE"], env=env, stdout=log,
                                stderr=subprocess.STDOUT)


def _classroom_points(workspace: Path) -> dict:
    """GitHub Classroom 报告步骤看到的分数：按它的代码（见 coursework/classroom.py 的说明）从 $GITHUB_ENV 里的
    <ID>_RESULTS 算出总分和满分，外加日志表格里的算法、每个测试的名字和得分。"""
    env = dict(line.split("=", 1) for line in (workspace / "env").read_text().splitlines() if "=" in line)
    output = dict(line.split("=", 1) for line in (workspace / "output").read_text().splitlines() if "=" in line)
    total = maximum = table = 0
    tests = {}
    for runner in output["runners"].split(","):
        assert re.fullmatch(r"[a-zA-Z0-9]+", runner), f"报告步骤只认字母和数字的 runner：{runner!r}"
        results = json.loads(base64.b64decode(env[f"{runner.strip().upper()}_RESULTS"]).decode("utf-8"))
        assert results["version"] == 1 and results["status"] in ("pass", "fail", "error")
        if results["max_score"]:
            maximum += results["max_score"]
            total += sum(t["score"] for t in results["tests"])
        passed = sum(t["status"] == "pass" for t in results["tests"])
        table += passed / len(results["tests"]) * results["max_score"]
        tests.update({t["name"]: t["score"] for t in results["tests"]})
    return {"total": total, "max": maximum, "table": table, "tests": tests}


@pytest.fixture(scope="module")
def by_workflow(repos, by_autograde, prepared_course, tmp_path_factory):
    """工作流的路：每个仓库各跑一次“评分”那一步（两个同时跑），返回 {学号: 工作目录}。

    为了省时间，输出目录里先放一份准备好的课程目录（和 make autograde 重用 `--out` 时一样，省掉每次约 8 秒的
    generate_assignment）；从零开始的 grade-one 由下面评分镜像的测试跑。"""
    paths, _ = repos
    root = tmp_path_factory.mktemp("runners")
    done, waiting = {}, list(paths.items())
    running = []
    while waiting or running:
        while waiting and len(running) < 2:
            sid, path = waiting.pop(0)
            shutil.copytree(prepared_course, root / sid / "grades" / "course")
            running.append((sid, _run_grade_step(path, root / sid)))
        sid, proc = running.pop(0)
        assert proc.wait(timeout=900) == 0, (root / sid / "log.txt").read_text()
        done[sid] = root / sid
    return done


def _autograde_table(out, name="grades.csv"):
    with (out / name).open(encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))


@needs_sandbox
def test_classroom_gets_the_same_points_as_make_autograde(repos, by_autograde, by_workflow):
    _, expected = repos
    table = {r["学号"]: r for r in _autograde_table(by_autograde)}
    assert set(table) == set(by_workflow)
    for sid, workspace in by_workflow.items():
        points = _classroom_points(workspace)
        row = table[sid]
        assert points["total"] == float(row["总分"]) and points["max"] == float(row["满分"]), sid
        assert points["table"] == points["total"], "日志里的表格和交给 Classroom 的分数不一样"
        per_exercise = {name: float(row[name]) for name in row if name.endswith("分)")}
        assert points["tests"] == per_exercise, sid
        if sid in expected:
            assert points["total"] == expected[sid], f"{sid} 应得 {expected[sid]} 分，Classroom 拿到 {points['total']}"
    assert _classroom_points(by_workflow["bug"])["total"] < expected["honest"]


@needs_sandbox
def test_the_run_summary_is_the_safe_feedback(by_workflow):
    hidden = feedback.hidden_lines(tuple(notebook_paths()))
    for sid, workspace in by_workflow.items():
        text = (workspace / "summary").read_text(encoding="utf-8")
        points = _classroom_points(workspace)
        assert f"## 自动评分：{points['total']:g} / {points['max']:g} 分" in text, sid
        assert "BEGIN HIDDEN TESTS" not in text
        assert not [line for line in hidden if line in text], f"{sid} 的摘要里有隐藏测试"
    # 有错的学生看到没通过的断言说明；毁掉内核的那本写明原因
    assert "AssertionError" in (by_workflow["bug"] / "summary").read_text(encoding="utf-8")
    assert "内核退出" in (by_workflow["exit"] / "summary").read_text(encoding="utf-8")


@needs_sandbox
def test_the_uploaded_feedback_holds_no_hidden_test(by_workflow):
    instructor = {p.stem: p for p in notebook_paths()}
    upload = _named("upload-artifact")["with"]["path"]
    for sid, workspace in by_workflow.items():
        uploaded = workspace / upload
        files = [p for p in uploaded.rglob("*") if p.is_file()]
        assert files, f"{sid} 没有反馈"
        for path in files:
            if path.suffix not in (".html", ".ipynb"):
                continue  # nbgrader 的 timestamp.txt
            text = path.read_text(encoding="utf-8")
            assert "BEGIN HIDDEN TESTS" not in text, path
            hidden = feedback.hidden_lines((instructor[path.stem],))  # 这本的隐藏测试里才有的行
            leaked = [h for h in hidden if h in text or json.dumps(h, ensure_ascii=False)[1:-1] in text]
            assert not leaked, f"{path} 里有隐藏测试：{leaked[:3]}"


@needs_sandbox
def test_gathering_the_per_student_results_gives_the_class_tables(by_autograde, by_workflow, tmp_path):
    out = tmp_path / "gathered"
    students = course.gather([ws / "grades" for ws in by_workflow.values()], out)
    assert sorted(students) == sorted(by_workflow)
    for name in ("grades.csv", "notebooks.csv", "similar.csv"):
        assert (out / name).read_bytes() == (by_autograde / name).read_bytes(), name
    # exit 和 rmtree 的 00 交的都是参考答案：两条路都要把这一对列出来（不是两张空表碰巧相等）
    pairs = {(r["学号甲"], r["学号乙"]) for r in _autograde_table(by_autograde, "similar.csv")}
    assert ("exit", "rmtree") in pairs
    assert sorted(p.name for p in (out / "feedback").iterdir()) == sorted(by_workflow)


@needs_sandbox
def test_the_image_entry_point_grades_one_student_on_the_host(repos, by_autograde, tmp_path):
    """Dockerfile 的 ENTRYPOINT 加 CMD，原样在本机运行：镜像里的路径换成这台机器上的（WORKDIR 是本项目，
    /student 是一个学生的仓库，/out 是临时目录），得到的这一行和 make autograde 的一样。"""
    text = DOCKERFILE.read_text(encoding="utf-8")
    workdir = re.search(r"^WORKDIR (\S+)", text, re.M).group(1)
    command = (json.loads(re.search(r"^ENTRYPOINT (.+)$", text, re.M).group(1))
               + json.loads(re.search(r"^CMD (.+)$", text, re.M).group(1)))
    paths, _ = repos
    sid = "always_equal"
    mapped = {f"{workdir}/.venv/bin/python": sys.executable, "/student": str(paths[sid]), "/out": str(tmp_path / "out")}
    assert set(mapped) <= set(command), f"镜像的命令变了：{command}"
    command = [mapped.get(part, part) for part in command] + ["--student", sid]
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
    (mine,) = _autograde_table(tmp_path / "out")
    theirs = next(r for r in _autograde_table(by_autograde) if r["学号"] == sid)
    assert mine == theirs


# ---------------------------------------------------------------- 小件


def test_runner_ids_are_letters_and_digits_and_distinct():
    taken = set()
    ids = [classroom.runner_id(g, taken) for g in ("00-ex1-tests", "00_ex1_tests", "03-ex2-tests")]
    assert ids[0] == "nb00ex1" and ids[2] == "nb03ex2"
    assert len({i.lower() for i in ids}) == 3 and all(re.fullmatch(r"[a-zA-Z0-9]+", i) for i in ids)


def test_a_notebook_that_did_not_finish_is_an_error_with_its_reason(tmp_path):
    exercise_list = [("00_setup", "00-ex1-tests", 1.0), ("00_setup", "00-ex2-tests", 2.0),
                     ("01_model_only_proposes", "01-ex1-tests", 2.0)]
    row = {"student": "s", "scores": {"00-ex1-tests": 0.0, "00-ex2-tests": 0.0, "01-ex1-tests": 2.0},
           "notebooks": {"00_setup": ["内核退出", "运行中内核退出了"], "01_model_only_proposes": ["完成", ""]},
           "total": 2.0, "max_total": 5.0}
    runs = classroom.results(row, exercise_list, tmp_path)
    assert [r["status"] for r in runs.values()] == ["error", "error", "pass"]
    assert "内核退出" in runs["nb00ex1"]["tests"][0]["message"]
    text = classroom.summary(row, exercise_list, tmp_path)
    assert "## 自动评分：2 / 5 分" in text and "运行中内核退出了" in text


def test_student_text_cannot_break_out_of_the_summary(tmp_path):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("pass", metadata={"nbgrader": {"grade": True, "grade_id": "00-ex1-tests"}})
    cell.outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue="```\n<img src=x>\n| a |",
                                           traceback=[])]
    nb.cells.append(cell)
    nbformat.write(nb, tmp_path / "00_setup.ipynb")
    row = {"student": "s", "scores": {"00-ex1-tests": 0.0}, "notebooks": {"00_setup": ["完成", ""]},
           "total": 0.0, "max_total": 1.0}
    text = classroom.summary(row, [("00_setup", "00-ex1-tests", 1.0)], tmp_path)
    block = re.search(r"^(`{4,})text\n(.*?)\n\1$", text, re.S | re.M)
    assert block and "<img src=x>" in block.group(2), "学生的文字应当整段留在代码块里"


def test_gather_refuses_the_same_student_twice_and_different_notebooks(tmp_path):
    def folder(name, header, sid):
        path = tmp_path / name
        path.mkdir()
        for table in ("grades.csv", "notebooks.csv"):
            (path / table).write_text(f"学号,{header}\n{sid},1\n", encoding="utf-8-sig")
        return path

    a, b, c = folder("a", "00-ex1 (1分)", "s1"), folder("b", "00-ex1 (1分)", "s1"), folder("c", "00-ex1 (2分)", "s2")
    with pytest.raises(SystemExit, match="s1"):
        report.merge_tables([a, b], tmp_path / "out")
    with pytest.raises(SystemExit, match="表头"):
        report.merge_tables([a, c], tmp_path / "out")


@needs_sandbox
def test_a_container_that_masks_proc_is_refused_with_the_reason():
    """Docker 和 Kubernetes 默认盖住 /proc 里的几处，评分沙盒就挂不上新的 /proc。这里用一层 bwrap 盖住
    /proc/cmdline 模拟这样的容器：沙盒检查要在评分之前说出原因，而不是每本笔记本各出一次错。"""
    outer = ["bwrap", "--unshare-all", "--dev-bind", "/", "/", "--proc", "/proc", "--ro-bind", "/dev/null", "/proc/cmdline"]
    if subprocess.run([*outer, "true"], capture_output=True).returncode != 0:
        pytest.skip("这台机器上模拟不了这样的容器")
    code = "from coursework import sandbox; print(sandbox.available())"
    inside = subprocess.run([*outer, sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert "/proc" in inside.stdout and "systempaths=unconfined" in inside.stdout, inside.stdout + inside.stderr
    outside = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert outside.stdout.strip() == "None"
