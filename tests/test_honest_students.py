"""每道练习都拿几个老实的学生查一遍：两份风格不同的正确答案满分，一份有一处错的答案丢分。

答案在 `honest_students.py`，是只看题目和看得见的测试写的；这里把它们填进学生版，
通过真实的沙盒评分（`course.autograde`）一次评完，再按题读出每个学生的得分。
"""

import json
import shutil

import pytest

from conftest import ROOT, notebook_paths
from honest_students import ANSWERS

pytest.importorskip("nbgrader", reason="课程作业需要 pip install -e .[teach]")

from coursework import course  # noqa: E402

STUDENTS = ("style_a", "style_b", "bug")


def _nbg(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def _exercises():
    """每道练习：(答案格的 grade_id, 测试格的 grade_id, 分值)，按笔记本顺序。"""
    out = []
    for path in notebook_paths():
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        solutions = [_nbg(c)["grade_id"] for c in cells if _nbg(c).get("solution")]
        tests = {_nbg(c)["grade_id"]: _nbg(c)["points"] for c in cells if _nbg(c).get("grade")}
        for sol in solutions:
            test = sol.replace("solution", "tests")
            out.append((sol, test, tests[test]))
    return out


EXERCISES = _exercises()


def test_every_exercise_has_honest_students():
    assert sorted(ANSWERS) == sorted(sol for sol, _, _ in EXERCISES)
    for sol, styles in ANSWERS.items():
        assert sorted(styles) == sorted(STUDENTS), sol
        assert styles["style_a"] != styles["style_b"], sol


def _fill(path, student):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        gid = _nbg(cell).get("grade_id")
        if gid in ANSWERS:
            cell["source"] = ANSWERS[gid][student]
    path.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")


@pytest.fixture(scope="module")
def honest_scores(release_dir, prepared_course, tmp_path_factory):
    subs = tmp_path_factory.mktemp("honest")
    for student in STUDENTS:
        (subs / student).mkdir()
        for path in notebook_paths():
            target = subs / student / path.name
            shutil.copy2(release_dir / path.name, target)
            _fill(target, student)
    out = tmp_path_factory.mktemp("honest-grades")
    shutil.copytree(prepared_course, out / "course")
    rows = course.autograde(subs, out, jobs=2)
    return {row["student"]: row["scores"] for row in rows}


@pytest.mark.parametrize("solution,test,points", EXERCISES, ids=[sol.removesuffix("-solution") for sol, _, _ in EXERCISES])
def test_honest_students(honest_scores, solution, test, points):
    got = {student: honest_scores[student][test] for student in STUDENTS}
    assert got["style_a"] == points and got["style_b"] == points, f"正确的答案应当满分 {points}：{got}"
    assert got["bug"] < points, f"有错的答案应当丢分：{got}"
