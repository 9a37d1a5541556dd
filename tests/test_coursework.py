"""课程作业：nbgrader 学生版与自动评分，用真实的 nbgrader 跑一遍。"""

import csv
import importlib.util
import json
import re
import shutil

import pytest

from conftest import ROOT, notebook_paths

pytest.importorskip("nbgrader", reason="课程作业需要 pip install -e .[teach]")

spec = importlib.util.spec_from_file_location("course", ROOT / "coursework" / "course.py")
course = importlib.util.module_from_spec(spec)
spec.loader.exec_module(course)

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


@pytest.fixture(scope="module")
def release_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("release")
    written = course.release(out)
    assert sorted(p.name for p in written) == sorted(p.name for p in notebook_paths())
    return out


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
def graded(release_dir, tmp_path_factory):
    subs = tmp_path_factory.mktemp("submitted")
    paths = notebook_paths()
    (subs / "teacher").mkdir()
    for p in paths:
        shutil.copy2(p, subs / "teacher" / p.name)
    shutil.copytree(release_dir, subs / "blank")
    shutil.copytree(release_dir, subs / "partial")
    # 部分作答：第一本有练习的笔记本做对第一题，最后一本做对全部
    expected = {}
    first, last = paths[0], paths[-1]
    first_ids = sorted(g for g in _points(first))
    sol = first_ids[0].replace("tests", "solution")
    _fill(subs / "partial" / first.name, first, {sol})
    expected[first.stem] = _points(first)[first_ids[0]]
    last_solutions = {g.replace("tests", "solution") for g in _points(last)}
    _fill(subs / "partial" / last.name, last, last_solutions)
    expected[last.stem] = sum(_points(last).values())
    out = tmp_path_factory.mktemp("grades")
    rows = course.autograde(subs, out, jobs=2)
    return rows, out, expected


def _scores(rows, student):
    return {r["notebook"]: (r["score"], r["max_score"]) for r in rows if r["student"] == student}


def test_instructor_notebooks_score_full_marks(graded):
    rows, _, _ = graded
    for nb, (score, max_score) in _scores(rows, "teacher").items():
        assert max_score > 0 and score == max_score, f"{nb}: {score}/{max_score}"


def test_untouched_release_scores_zero(graded):
    rows, _, _ = graded
    scores = _scores(rows, "blank")
    assert len(scores) == len(notebook_paths())
    assert all(score == 0 for score, _ in scores.values())


def test_partial_submission_gets_exactly_its_points(graded):
    rows, _, expected = graded
    for nb, (score, _) in _scores(rows, "partial").items():
        assert score == expected.get(nb, 0), f"{nb}: {score} != {expected.get(nb, 0)}"


def test_grade_tables_and_feedback_are_written(graded):
    rows, out, _ = graded
    with (out / "grades.csv").open(encoding="utf-8") as f:
        assert len(list(csv.DictReader(f))) == len(rows) == 3 * len(notebook_paths())
    with (out / "summary.csv").open(encoding="utf-8") as f:
        summary = {r["student"]: r for r in csv.DictReader(f)}
    assert float(summary["teacher"]["total"]) == float(summary["teacher"]["max_total"])
    for student in ("teacher", "blank", "partial"):
        assert list((out / "feedback" / student).glob("*.html")), f"{student} 没有反馈"
