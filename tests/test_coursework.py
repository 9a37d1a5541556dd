"""课程作业：nbgrader 学生版与自动评分，用真实的 nbgrader 跑一遍。"""

import csv
import html.parser
import json
import re
import shutil
import subprocess
import sys

import nbformat

import pytest

from conftest import ROOT, notebook_paths

pytest.importorskip("nbgrader", reason="课程作业需要 pip install -e .[teach]")

from coursework import course  # noqa: E402

MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")


def _cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _nbg(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def _between(src, begin, end):
    """取出两行标记之间的代码行（去掉空白行和太短的行）。"""
    out, inside = [], False
    for line in src.splitlines():
        if begin in line:
            inside = True
        elif end in line:
            inside = False
        elif inside and len(line.strip()) > 12:
            out.append(line.strip())
    return out


def _hidden_regions_removed(src):
    return re.sub(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", "", src, flags=re.S)


def _secret_lines(path):
    """只在隐藏测试里出现的代码行：教师版去掉隐藏测试区以后，别处（包括参考答案）都没有这一行。"""
    cells = _cells(path)
    elsewhere = "\n".join(_hidden_regions_removed("".join(c["source"])) for c in cells)
    lines = [line for c in cells
             for line in _between("".join(c["source"]), "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")]
    return [line for line in lines if line not in elsewhere]


class _PageText(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.parts = []

    def handle_data(self, data):
        self.parts.append(data)


def _page_text(path):
    """网页上读者看到的文字：去掉标签（代码高亮把一行拆成很多 span），实体还原成字符。"""
    parser = _PageText()
    parser.feed(path.read_text(encoding="utf-8"))
    return "".join(parser.parts)


def _notebook_text(path):
    """笔记本里读者能看到的全部文字：每格的代码和每个输出（包括回溯）。"""
    parts = []
    for cell in nbformat.read(path, as_version=4).cells:
        parts.append(cell.source)
        for out in cell.get("outputs", []):
            parts += [out.get("text", ""), out.get("evalue", ""), *out.get("traceback", [])]
            parts += [v if isinstance(v, str) else json.dumps(v) for v in out.get("data", {}).values()]
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(parts))


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_exercises_are_in_nbgrader_format(path):
    cells = _cells(path)
    solutions = [c for c in cells if _nbg(c).get("solution")]
    tests = [c for c in cells if _nbg(c).get("grade")]
    assert len(solutions) >= 2, "每本笔记本至少两道练习"
    ids = [_nbg(c)["grade_id"] for c in cells if _nbg(c)]
    assert len(ids) == len(set(ids)), "grade_id 必须唯一"
    assert all(_nbg(c).get("points", 0) > 0 for c in tests)
    assert any("BEGIN HIDDEN TESTS" in "".join(c["source"]) for c in tests), "要有隐藏测试"
    for c in cells:
        src = "".join(c["source"])
        for marker in MARKERS:
            if marker in src:
                # nbgrader 在所有格子里找这些标记：写在说明文字里会让生成学生版失败
                owner = _nbg(c).get("solution") if "SOLUTION" in marker else _nbg(c).get("grade")
                assert c["cell_type"] == "code" and owner, f"{marker} 出现在不该出现的格子里"
    heading = next(i for i, c in enumerate(cells) if "## 练习" in "".join(c["source"]))
    first_exercise = min(i for i, c in enumerate(cells) if _nbg(c))
    assert first_exercise > heading, "练习格要放在 ## 练习 之后"


def _strip_regions(src):
    """去掉答案区和隐藏测试区，剩下学生本来就能看到的部分。"""
    src = re.sub(r"### BEGIN SOLUTION.*?### END SOLUTION", "", src, flags=re.S)
    return re.sub(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", "", src, flags=re.S)


def test_release_has_no_solutions_and_no_hidden_tests(release_dir):
    for path in notebook_paths():
        cells = _cells(path)
        released_cells = {_nbg(c).get("grade_id"): "".join(c["source"])
                          for c in _cells(release_dir / path.name) if _nbg(c)}
        released = (release_dir / path.name).read_text(encoding="utf-8")
        public = "\n".join(_strip_regions("".join(c["source"])) for c in cells)
        for cell in cells:
            src = "".join(cell["source"])
            secret = (_between(src, "BEGIN SOLUTION", "END SOLUTION")
                      + _between(src, "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"))
            gid = _nbg(cell).get("grade_id")
            visible = _strip_regions(src)
            for line in secret:
                # 对应的格子里一行都不能剩（可见部分本来就有的同一行除外）
                if line not in visible:
                    assert line not in released_cells.get(gid, ""), f"{path.name}:{gid} 学生版里还有：{line}"
                # 只在答案或隐藏测试里出现过的行，整本学生版里都不能有
                if line not in public:
                    assert line not in released, f"{path.name} 学生版里还有：{line}"
        assert "NotImplementedError" in released
        for marker in MARKERS:
            assert marker not in released


def _fill(student_nb, instructor_nb, grade_ids):
    """把教师版里指定答案格的代码抄进学生版（模拟学生做对了这几题）。"""
    answers = {_nbg(c)["grade_id"]: c["source"] for c in _cells(instructor_nb) if _nbg(c).get("solution")}
    nb = json.loads(student_nb.read_text(encoding="utf-8"))
    for c in nb["cells"]:
        gid = _nbg(c).get("grade_id")
        if gid in grade_ids:
            src = "".join(answers[gid])
            c["source"] = re.sub(r"^\s*### (BEGIN|END) SOLUTION\s*\n", "", src, flags=re.M)
    student_nb.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")


def _points(path):
    return {_nbg(c)["grade_id"]: _nbg(c)["points"] for c in _cells(path) if _nbg(c).get("grade")}


@pytest.fixture(scope="module")
def graded(release_dir, prepared_course, tmp_path_factory):
    subs = tmp_path_factory.mktemp("submitted")
    paths = notebook_paths()
    (subs / "teacher").mkdir()
    for p in paths:
        shutil.copy2(p, subs / "teacher" / p.name)
    shutil.copytree(release_dir, subs / "blank")
    # 部分作答：只交了两本，第一本做对第一题，最后一本做对全部；没交的几本记 0 分、状态写“缺少”
    expected = {}
    first, last = paths[0], paths[-1]
    (subs / "partial").mkdir()
    for path in (first, last):
        shutil.copy2(release_dir / path.name, subs / "partial" / path.name)
    first_ids = sorted(g for g in _points(first))
    sol = first_ids[0].replace("tests", "solution")
    _fill(subs / "partial" / first.name, first, {sol})
    expected[first.stem] = _points(first)[first_ids[0]]
    last_solutions = {g.replace("tests", "solution") for g in _points(last)}
    _fill(subs / "partial" / last.name, last, last_solutions)
    expected[last.stem] = sum(_points(last).values())
    out = tmp_path_factory.mktemp("grades")
    shutil.copytree(prepared_course, out / "course")
    rows = course.autograde(subs, out, jobs=2)
    return rows, out, expected


def _notebook_rows(out):
    with (out / "notebooks.csv").open(encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))


def _scores_in(out, student):
    return {r["notebook"]: (float(r["score"]), float(r["max_score"])) for r in _notebook_rows(out)
            if r["student"] == student}


def test_instructor_notebooks_score_full_marks(graded):
    _, out, _ = graded
    for nb, (score, max_score) in _scores_in(out, "teacher").items():
        assert max_score > 0 and score == max_score, f"{nb}: {score}/{max_score}"


def test_untouched_release_scores_zero(graded):
    _, out, _ = graded
    scores = _scores_in(out, "blank")
    assert len(scores) == len(notebook_paths())
    assert all(score == 0 for score, _ in scores.values())


def test_partial_submission_gets_exactly_its_points(graded):
    _, out, expected = graded
    for nb, (score, _) in _scores_in(out, "partial").items():
        assert score == expected.get(nb, 0), f"{nb}: {score} != {expected.get(nb, 0)}"


def test_grade_tables_and_feedback_are_written(graded):
    rows, out, _ = graded
    assert len(_notebook_rows(out)) == 3 * len(notebook_paths())
    assert (out / "grades.csv").read_bytes().startswith(b"\xef\xbb\xbf"), "带 BOM，表格软件认得是 UTF-8"
    with (out / "grades.csv").open(encoding="utf-8-sig") as f:
        table = {r["学号"]: r for r in csv.DictReader(f)}
    assert float(table["teacher"]["总分"]) == float(table["teacher"]["满分"]) > 0
    assert len([c for c in next(iter(table.values())) if "分)" in c]) == len(course.report.exercises(notebook_paths()))
    assert (out / "course" / "gradebook.db").exists(), "成绩库留着：formgrader、nbgrader export 都要用它"
    for student in ("teacher", "blank", "partial"):
        assert list((out / "feedback" / student).glob("*.html")), f"{student} 没有反馈"
        assert list((out / "feedback" / student).glob("*.ipynb")), f"{student} 没有评分后的笔记本"


def test_default_feedback_shows_no_hidden_test_in_any_notebook(graded):
    """默认方式下，发回给学生的文件夹里（网页和笔记本）找不到任何一行隐藏测试，每个测试格仍有得分。"""
    _, out, _ = graded
    for path in notebook_paths():
        secret = _secret_lines(path)
        assert secret, f"{path.name} 应当有只在隐藏测试里出现的代码行"
        grade_ids = list(_points(path))
        for student in ("teacher", "blank", "partial"):
            if student == "partial" and not (out / "feedback" / student / f"{path.stem}.html").exists():
                continue  # 这本没交
            page = _page_text(out / "feedback" / student / f"{path.stem}.html")
            notebook = _notebook_text(out / "feedback" / student / path.name)
            for text, kind in ((page, "网页"), (notebook, "笔记本")):
                assert "BEGIN HIDDEN TESTS" not in text, f"{student}/{path.name} {kind}"
                for line in secret:
                    assert line not in text, f"{student}/{path.name} 的{kind}里有隐藏测试：{line}"
            for gid in grade_ids:
                assert re.search(re.escape(gid) + r"\s*Score: \d", page), f"{student}/{path.name} 缺 {gid} 的得分"


def test_identical_answers_are_listed_in_similar_csv(graded):
    """partial 交的答案都是 teacher 也交了的参考答案：similar.csv 里要有这一对。
    （整理好的作业放在评分用的临时目录里，要在它被删掉之前比较，不然表永远是空的。）"""
    _, out, _ = graded
    with (out / "similar.csv").open(encoding="utf-8-sig") as f:
        pairs = {(r["学号甲"], r["学号乙"]) for r in csv.DictReader(f)}
    assert ("partial", "teacher") in pairs


# 一份只交了 00 的作业：第一题做对；第二题用一个粗心的解法，公开测试都能过，隐藏测试里的一条过不了
HIDDEN_FAILURE_NOTEBOOK = "00_setup"
CARELESS = {
    "00-ex2-solution": (
        "def last_reply(messages):\n"
        "    for m in reversed(messages):\n"
        "        if m[\"role\"] == \"assistant\":\n"
        "            return m[\"content\"]\n"
        "    return None\n"
    ),
}
FAILED_CELL = "00-ex2-tests"
FAILED_MESSAGE = "None 或空的助手消息要跳过"
FAILED_LINE = 'assert last_reply(transcript) == "第一次回答", "None 或空的助手消息要跳过"'


@pytest.fixture(scope="module")
def hidden_failure(release_dir, prepared_course, tmp_path_factory):
    """同一份作业各用两种反馈方式批改一次，返回 {方式: 输出目录}。"""
    instructor = ROOT / "notebooks" / f"{HIDDEN_FAILURE_NOTEBOOK}.ipynb"
    cell = next(c for c in _cells(instructor) if _nbg(c).get("grade_id") == FAILED_CELL)
    hidden = "\n".join(_between("".join(cell["source"]), "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"))
    assert FAILED_LINE in hidden, "这个测试依赖 00 第二题的一条隐藏测试，教师版改了就要跟着改"
    subs = tmp_path_factory.mktemp("one-submission")
    (subs / "s").mkdir()
    submitted = subs / "s" / instructor.name
    shutil.copy2(release_dir / instructor.name, submitted)
    _fill(submitted, instructor, {"00-ex1-solution"})
    nb = json.loads(submitted.read_text(encoding="utf-8"))
    for c in nb["cells"]:
        if _nbg(c).get("grade_id") in CARELESS:
            c["source"] = CARELESS[_nbg(c)["grade_id"]]
    submitted.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    outs = {"safe": tmp_path_factory.mktemp("grades-safe"), "full": tmp_path_factory.mktemp("grades-full")}
    # 上一次（比如用 full）留下的文件：这次评分的学生的要清掉，没参加这次评分的学生的不动
    (outs["safe"] / "feedback" / "s").mkdir(parents=True)
    (outs["safe"] / "feedback" / "s" / "old.html").write_text("BEGIN HIDDEN TESTS", encoding="utf-8")
    (outs["safe"] / "feedback" / "other").mkdir()
    (outs["safe"] / "feedback" / "other" / "kept.html").write_text("别人的反馈", encoding="utf-8")
    for out in outs.values():
        shutil.copytree(prepared_course, out / "course")
    course.autograde(subs, outs["safe"])  # 不传 feedback：默认方式
    course.autograde(subs, outs["full"], feedback="full")
    return outs


def _feedback(out, kind):
    path = out / "feedback" / "s" / f"{HIDDEN_FAILURE_NOTEBOOK}{kind}"
    return _page_text(path) if kind == ".html" else _notebook_text(path)


def _failed_cell_outputs(out):
    nb = nbformat.read(out / "feedback" / "s" / f"{HIDDEN_FAILURE_NOTEBOOK}.ipynb", as_version=4)
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == FAILED_CELL).outputs


def test_default_feedback_keeps_score_visible_tests_and_the_failed_message(hidden_failure):
    out = hidden_failure["safe"]
    instructor = ROOT / "notebooks" / f"{HIDDEN_FAILURE_NOTEBOOK}.ipynb"
    cell = next(c for c in _cells(instructor) if _nbg(c).get("grade_id") == FAILED_CELL)
    visible = [line.strip() for line in _hidden_regions_removed("".join(cell["source"])).splitlines() if line.strip()]
    page = _page_text(out / "feedback" / "s" / f"{HIDDEN_FAILURE_NOTEBOOK}.html")
    assert re.search(r"Score: 1\.0 / 3\.0", page), "整本的得分"
    assert re.search(re.escape(FAILED_CELL) + r"\s*Score: 0\.0 / 2\.0", page), "没通过的测试格的得分"
    for kind in (".html", ".ipynb"):
        text = _feedback(out, kind)
        assert FAILED_MESSAGE in text, kind
        assert all(line in text for line in visible), f"{kind} 里要有公开测试"
        for line in _secret_lines(instructor):
            assert line not in text, f"{kind} 里有隐藏测试：{line}"
    # 这条说明来自隐藏测试（公开测试都过了），回溯只剩类型和说明
    (error,) = _failed_cell_outputs(out)
    assert (error.ename, error.evalue) == ("AssertionError", FAILED_MESSAGE)
    assert len(error.traceback) == 1
    # 上一次留下的文件：这次评分的学生的被清掉，别的学生的还在
    assert not (out / "feedback" / "s" / "old.html").exists()
    assert (out / "feedback" / "other" / "kept.html").exists()


def test_full_feedback_keeps_every_hidden_test(hidden_failure):
    out = hidden_failure["full"]
    instructor = ROOT / "notebooks" / f"{HIDDEN_FAILURE_NOTEBOOK}.ipynb"
    hidden = [line for c in _cells(instructor)
              for line in _between("".join(c["source"]), "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")]
    for kind in (".html", ".ipynb"):
        text = _feedback(out, kind)
        assert "BEGIN HIDDEN TESTS" in text, kind
        missing = [line for line in hidden if line not in text]
        assert not missing, f"{kind} 里少了隐藏测试：{missing}"
    (error,) = _failed_cell_outputs(out)
    assert error.evalue == FAILED_MESSAGE
    assert FAILED_LINE in re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(error.traceback)), "回溯里有出错的那一行"


def test_grade_tables_do_not_depend_on_feedback_mode(hidden_failure):
    for name in ("grades.csv", "notebooks.csv"):
        safe, full = (hidden_failure[mode] / name for mode in ("safe", "full"))
        assert safe.read_bytes() == full.read_bytes(), name
    row = next(r for r in _notebook_rows(hidden_failure["safe"]) if r["notebook"] == HIDDEN_FAILURE_NOTEBOOK)
    assert float(row["score"]) == 1.0 and float(row["max_score"]) == 3.0


def test_unknown_feedback_mode_is_refused_before_grading(tmp_path):
    (tmp_path / "s").mkdir()
    with pytest.raises(ValueError):
        course.autograde(tmp_path, tmp_path / "out", feedback="none")
    assert not (tmp_path / "out").exists()


def test_hide_hidden_tests_keeps_code_around_each_region():
    """隐藏测试区在格子中间、一格里有两段时，只删掉区里的行，每段留一行占位；别的格子不动。"""
    source = "\n".join([
        "visible_before = 1",
        "### BEGIN HIDDEN TESTS",
        "secret_one = 2",
        "### END HIDDEN TESTS",
        "visible_between = 3",
        "    ### BEGIN HIDDEN TESTS",
        "    secret_two = 4",
        "    ### END HIDDEN TESTS",
        "visible_after = 5",
    ])
    meta = {"nbgrader": {"grade": True, "grade_id": "t", "points": 1, "solution": False,
                         "locked": True, "schema_version": 3}}
    error = nbformat.v4.new_output("error", ename="AssertionError", evalue="",
                                   traceback=["secret_one = 2", "AssertionError: "])
    printed = nbformat.v4.new_output("stream", name="stdout", text="secret_two\n")
    test_cell = nbformat.v4.new_code_cell(source, metadata=meta, outputs=[printed, error])
    other = nbformat.v4.new_code_cell("print(1)", outputs=[printed])
    nb = nbformat.v4.new_notebook(cells=[test_cell, other])
    nb, _ = course.HideHiddenTests().preprocess(nb, {})
    lines = nb.cells[0].source.split("\n")
    placeholder = course.HideHiddenTests().placeholder
    assert lines == ["visible_before = 1", placeholder, "visible_between = 3",
                     "    " + placeholder, "visible_after = 5"]
    (out,) = nb.cells[0].outputs
    assert out.traceback == ["\x1b[31mAssertionError\x1b[39m: （这条断言没有附说明）"]
    assert nb.cells[1].outputs == [printed]


def test_grades_are_written_while_grading_goes(tmp_path, monkeypatch, prepared_course):
    """成绩表边评边写：一个评分进程评完一个学生，另一个还在评，grades.csv 里就已经有前一个的一行。"""
    monkeypatch.setattr(course, "PROGRESS_EVERY", 0.2)
    files = [tmp_path / "fast.jsonl", tmp_path / "slow.jsonl"]
    scripts = [f"import json, time; open({str(files[0])!r}, 'a').write(json.dumps({{'student': 'a', 'notebooks': {{}}}}) + '\\n')",
               f"import json, time; time.sleep(3); open({str(files[1])!r}, 'a').write(json.dumps({{'student': 'b', 'notebooks': {{}}}}) + '\\n')"]
    for f in files:
        f.touch()
    procs = [(subprocess.Popen([sys.executable, "-c", code]), f) for code, f in zip(scripts, files)]
    out = tmp_path / "out"
    shutil.copytree(prepared_course, out / "course")
    subs = [course.collect.Submission(sid, {}, [], [], [], None, False) for sid in ("a", "b")]
    exercise_list = course.report.exercises(course.instructor_notebooks())
    seen_while_running = []

    def progress(done):
        course._write_rows(subs, done, out / "course", out, exercise_list, cache={})
        with (out / "grades.csv").open(encoding="utf-8-sig") as f:
            table = {r["学号"]: r["状态"] for r in csv.DictReader(f)}
        seen_while_running.append((table, procs[1][0].poll() is None))

    statuses = course._collect_results(procs, progress)
    assert set(statuses) == {"a", "b"}
    assert ({"a": "完成", "b": "评分中"}, True) in seen_while_running
