"""收作业与成绩表：用真实的笔记本和 `course.py release` 生成的学生版，做出各种乱的提交，看整理结果。"""

import copy
import csv
import json
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile
from datetime import datetime, timedelta, timezone

import pytest

from conftest import ROOT, notebook_paths

pytest.importorskip("nbgrader", reason="课程作业需要 pip install -e .[teach]")
import nbformat  # noqa: E402
from nbgrader.apps import NbGraderAPI  # noqa: E402
from nbgrader.coursedir import CourseDirectory  # noqa: E402
from nbgrader.nbgraderformat import MetadataValidator  # noqa: E402
from traitlets.config import Config  # noqa: E402


from coursework import collect, report  # noqa: E402

INSTRUCTOR = notebook_paths()
STEMS = [p.stem for p in INSTRUCTOR]
KEY_FIELDS = ("grade_id", "grade", "solution", "locked", "task", "points", "schema_version")


@pytest.fixture(scope="module")
def released(release_dir):
    """学生版（conftest 里整个测试会话共用的那一份）。"""
    assert sorted(p.stem for p in release_dir.glob("*.ipynb")) == STEMS
    return release_dir


def _read(path):
    return json.loads(path.read_text(encoding="utf-8"))


def _write(nb, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def _src(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _gid(cell):
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _find(nb, gid):
    return next(i for i, c in enumerate(nb["cells"]) if _gid(c) == gid)


def _student(released, stem):
    return copy.deepcopy(_read(released / f"{stem}.ipynb"))


def _answer(nb, gid, source):
    nb["cells"][_find(nb, gid)]["source"] = source
    return nb


def _tracked(nb):
    return [c for c in nb["cells"] if _gid(c)]


def _run(tmp_path, due=None):
    return {s.student: s for s in collect.collect(tmp_path / "subs", INSTRUCTOR, tmp_path / "work", due=due)}


def assert_clean(path, released):
    """整理后的笔记本：被追踪的格子和学生版一一对应（顺序、id、标记），测试格是学生版的代码，nbgrader 认它。"""
    got, want = _read(path), _read(released / path.name)
    g, w = _tracked(got), _tracked(want)
    assert [_gid(c) for c in g] == [_gid(c) for c in w]
    for a, b in zip(g, w):
        assert a["id"] == b["id"]
        assert {k: a["metadata"]["nbgrader"].get(k) for k in KEY_FIELDS} == \
            {k: b["metadata"]["nbgrader"].get(k) for k in KEY_FIELDS}
        if not b["metadata"]["nbgrader"]["solution"]:
            assert _src(a) == _src(b)
    ids = [c["id"] for c in got["cells"]]
    assert len(ids) == len(set(ids)), "格子 id 有重复"
    assert all(c.get("outputs", []) == [] for c in got["cells"])
    for c in got["cells"]:
        if not _gid(c):
            assert "nbgrader" not in c["metadata"], "没被追踪的格子不能留 nbgrader 标记（会 SchemaTooOld）"
    text = path.read_text(encoding="utf-8")
    assert "BEGIN HIDDEN TESTS" not in text and "BEGIN SOLUTION" not in text
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    MetadataValidator().validate_nb(nb)
    return got


# ---------------------------------------------------------------- 版式


def test_plain_folder_is_copied_as_is(tmp_path, released):
    for stem in STEMS:
        nb = _student(released, stem)
        if stem == "03_one_request":
            _answer(nb, "03-ex1-solution", "def pairing_report(messages):\n    return {'unanswered': [], 'orphans': []}  # 我的答案")
            first_code = next(c for c in nb["cells"] if c["cell_type"] == "code")
            first_code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "学生运行过的输出\n"}]
            first_code["execution_count"] = 1
        _write(nb, tmp_path / "subs" / "2021001" / f"{stem}.ipynb")
    sub = _run(tmp_path)["2021001"]
    assert sorted(sub.notebooks) == STEMS and sub.missing == [] and sub.extra == [] and sub.notes == []
    for stem, path in sub.notebooks.items():
        assert path == tmp_path / "work" / "2021001" / f"{stem}.ipynb"
        assert_clean(path, released)
    got = _read(sub.notebooks["03_one_request"])
    assert _src(got["cells"][_find(got, "03-ex1-solution")]).endswith("# 我的答案"), "答案原样保留"


def test_nbgrader_collect_layout_with_timestamp(tmp_path, released):
    folder = tmp_path / "subs" / "2021002" / "agent_loop"
    _write(_student(released, "03_one_request"), folder / "03_one_request.ipynb")
    (folder / "timestamp.txt").write_text("2024-06-01 10:00:00.000000 UTC", encoding="utf-8")
    sub = _run(tmp_path, due=datetime(2024, 6, 1, 9, 0, tzinfo=timezone.utc))["2021002"]
    assert sub.submitted_at == datetime(2024, 6, 1, 10, 0, tzinfo=timezone.utc)
    assert sub.late and "迟交 1 小时" in sub.notes
    assert list(sub.notebooks) == ["03_one_request"]
    assert sub.missing == [s for s in STEMS if s != "03_one_request"]
    assert_clean(sub.notebooks["03_one_request"], released)
    on_time = _run(tmp_path, due=datetime(2024, 6, 1, 18, 0, tzinfo=timezone(timedelta(hours=8))))["2021002"]
    assert not on_time.late and not any("迟交" in n for n in on_time.notes)


def test_file_time_is_used_without_timestamp(tmp_path, released):
    path = _write(_student(released, "03_one_request"), tmp_path / "subs" / "2021003" / "03_one_request.ipynb")
    stamp = datetime(2024, 6, 2, 12, 0, tzinfo=timezone.utc)
    os.utime(path, (stamp.timestamp(), stamp.timestamp()))
    sub = _run(tmp_path, due=datetime(2024, 6, 1, 12, 0, tzinfo=timezone.utc))["2021003"]
    assert sub.submitted_at == stamp and sub.late
    assert any(n.startswith("迟交 1 天") and "只作参考" in n for n in sub.notes)
    no_due = _run(tmp_path)["2021003"]
    assert not no_due.late


def test_zip_per_student_and_a_broken_zip(tmp_path, released):
    subs = tmp_path / "subs"
    subs.mkdir()
    with zipfile.ZipFile(subs / "2021004.zip", "w") as zf:
        for stem in ("03_one_request", "04_failure_paths"):
            info = zipfile.ZipInfo(f"作业/{stem}.ipynb", date_time=(2024, 6, 1, 8, 30, 0))
            zf.writestr(info, json.dumps(_student(released, stem), ensure_ascii=False))
        zf.writestr("作业/.ipynb_checkpoints/03_one_request-checkpoint.ipynb", "{}")
        zf.writestr("__MACOSX/作业/._03_one_request.ipynb", b"\x00\x05")
        zf.writestr("作业/说明.txt", "老师好")
    (subs / "2021005.zip").write_bytes(b"PK\x03\x04 this is not really a zip")
    subs_by_id = _run(tmp_path)
    sub = subs_by_id["2021004"]
    assert sorted(sub.notebooks) == ["03_one_request", "04_failure_paths"] and sub.extra == []
    assert sub.submitted_at == datetime(2024, 6, 1, 8, 30).astimezone()
    assert any("说明.txt" in n for n in sub.notes)
    for path in sub.notebooks.values():
        assert_clean(path, released)
    broken = subs_by_id["2021005"]
    assert broken.notebooks == {} and broken.missing == STEMS
    assert any("2021005.zip" in n and "压缩包打不开" in n for n in broken.notes)


def test_lms_bulk_download_names(tmp_path, released):
    subs = tmp_path / "subs"
    # Canvas：<姓名>_<用户号>_<提交号>_<原文件名>，迟交的多一段 _LATE
    _write(_student(released, "03_one_request"), subs / "zhangsan_12345_67890_03_one_request.ipynb")
    _write(_student(released, "04_failure_paths"), subs / "zhangsan_12345_67891_04_failure_paths.ipynb")
    _write(_student(released, "03_one_request"), subs / "lisi_LATE_22222_33333_03_one_request-1.ipynb")
    # Moodle：每人一个文件夹，文件和在线文本各一个
    _write(_student(released, "05_limits"), subs / "Zhang San_123_assignsubmission_file_" / "05_limits.ipynb")
    (subs / "Zhang San_123_assignsubmission_onlinetext_").mkdir()
    (subs / "Zhang San_123_assignsubmission_onlinetext_" / "onlinetext.html").write_text("<p>交了</p>")
    # 学号开头的散放文件
    _write(_student(released, "06_five_tools"), subs / "2021006_06_five_tools.ipynb")
    # 认不出是谁的
    _write(_student(released, "07_endpoint_faults"), subs / "07_endpoint_faults.ipynb")

    students, strays = collect.find_students(subs)
    assert sorted(students) == ["2021006", "Zhang_San_123", "lisi_22222", "zhangsan_12345"]
    assert strays == ["07_endpoint_faults.ipynb"]
    got = _run(tmp_path)
    assert sorted(got) == sorted(students)
    assert sorted(got["zhangsan_12345"].notebooks) == ["03_one_request", "04_failure_paths"]
    assert not got["zhangsan_12345"].late
    lisi = got["lisi_22222"]
    assert list(lisi.notebooks) == ["03_one_request"] and lisi.late
    assert any("Canvas" in n for n in lisi.notes)
    assert list(got["Zhang_San_123"].notebooks) == ["05_limits"]
    assert any("2 份来源" in n for n in got["Zhang_San_123"].notes)
    assert list(got["2021006"].notebooks) == ["06_five_tools"]
    for sub in got.values():
        for path in sub.notebooks.values():
            assert_clean(path, released)


def test_whole_bulk_zip_and_student_id_cleaning(tmp_path, released):
    bulk = tmp_path / "bulk.zip"
    with zipfile.ZipFile(bulk, "w") as zf:
        zf.writestr(" 2021 010 /03_one_request.ipynb", json.dumps(_student(released, "03_one_request")))
    got = {s.student: s for s in collect.collect(bulk, INSTRUCTOR, tmp_path / "work")}
    assert list(got) == ["2021_010"]
    assert any("整理成 `2021_010`" in n for n in got["2021_010"].notes)
    assert (tmp_path / "work" / "2021_010" / "03_one_request.ipynb").is_file()


# ---------------------------------------------------------------- 认出笔记本


def _strip_and_renumber(nb):
    """像把格子复制进一本新笔记本：nbgrader 标记没了，格子 id 全是新的。"""
    for i, cell in enumerate(nb["cells"]):
        cell["metadata"].pop("nbgrader", None)
        cell["id"] = f"new-{i}"
    return nb


def test_renamed_notebooks_are_matched_by_content(tmp_path, released):
    folder = tmp_path / "subs" / "2021007"
    nb03 = _answer(_student(released, "03_one_request"), "03-ex2-solution", "def dispatch(tool_call, handlers):\n    return '派发'")
    _write(nb03, folder / "03_one_request (1).ipynb")
    nb04 = _answer(_student(released, "04_failure_paths"), "04-ex2-solution",
                   "def validate_args(args, schema):\n    return []  # 学生写的")
    _write(_strip_and_renumber(nb04), folder / "作业04.ipynb")
    _write(_student(released, "06_five_tools"), folder / "05_limits.ipynb")   # 名字是 05，内容是 06
    _write({"cells": [{"cell_type": "code", "source": "print(1)", "metadata": {}, "outputs": [],
                       "execution_count": None}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
           folder / "scratch.ipynb")
    sub = _run(tmp_path)["2021007"]
    assert sorted(sub.notebooks) == ["03_one_request", "04_failure_paths", "06_five_tools"]
    assert sub.extra == ["scratch.ipynb"]
    assert "05_limits" in sub.missing
    assert "`03_one_request (1).ipynb` 按 grade_id 认作 03_one_request" in sub.notes
    assert "`作业04.ipynb` 按测试格的代码认作 04_failure_paths" in sub.notes
    assert "`05_limits.ipynb` 按 grade_id 认作 06_five_tools" in sub.notes
    for path in sub.notebooks.values():
        assert_clean(path, released)
    got04 = _read(sub.notebooks["04_failure_paths"])
    assert _src(got04["cells"][_find(got04, "04-ex2-solution")]).endswith("# 学生写的")
    assert any(n.startswith("04_failure_paths：恢复了 6 格") for n in sub.notes)


def test_two_copies_of_one_notebook_use_the_newest(tmp_path, released):
    folder = tmp_path / "subs" / "2021008"
    old = _write(_answer(_student(released, "03_one_request"), "03-ex1-solution", "def pairing_report(m):\n    return '旧'"),
                 folder / "03_one_request.ipynb")
    new = _write(_answer(_student(released, "03_one_request"), "03-ex1-solution", "def pairing_report(m):\n    return '新'"),
                 folder / "03_one_request (1).ipynb")
    os.utime(old, (1_700_000_000, 1_700_000_000))
    os.utime(new, (1_700_000_100, 1_700_000_100))
    sub = _run(tmp_path)["2021008"]
    got = _read(sub.notebooks["03_one_request"])
    assert _src(got["cells"][_find(got, "03-ex1-solution")]).endswith("'新'")
    assert sub.extra == ["03_one_request.ipynb"]
    assert any("交了 2 份" in n and "最新的 `03_one_request (1).ipynb`" in n for n in sub.notes)


# ---------------------------------------------------------------- 修格子


@pytest.mark.parametrize("damage", ["removed", "empty", "old_format"])
def test_stripped_metadata_is_restored(tmp_path, released, damage):
    nb = _answer(_student(released, "03_one_request"), "03-ex2-solution", "def dispatch(tool_call, handlers):\n    return 2")
    for cell in nb["cells"]:
        if damage == "removed":
            cell["metadata"].pop("nbgrader", None)
        elif damage == "empty" and "nbgrader" in cell["metadata"]:
            cell["metadata"]["nbgrader"] = {}          # nbgrader 会报 SchemaTooOld
    if damage == "old_format":                          # nbformat 4.4：没有格子 id，标记还在
        nb["nbformat_minor"] = 4
        for cell in nb["cells"]:
            cell.pop("id")
    _write(nb, tmp_path / "subs" / "2021009" / "03_one_request.ipynb")
    sub = _run(tmp_path)["2021009"]
    got = assert_clean(sub.notebooks["03_one_request"], released)
    assert _src(got["cells"][_find(got, "03-ex2-solution")]) == "def dispatch(tool_call, handlers):\n    return 2"
    if damage == "old_format":
        assert sub.notes == []
    else:
        assert "03_one_request：恢复了 6 格的 nbgrader 标记" in sub.notes


def test_stripped_metadata_and_new_ids_fall_back_to_the_test_source(tmp_path, released):
    nb = _strip_and_renumber(_answer(_student(released, "03_one_request"), "03-ex3-solution",
                                     "def record_turn(messages, response, outputs):\n    return list(messages)"))
    _write(nb, tmp_path / "subs" / "2021010" / "03_one_request.ipynb")
    sub = _run(tmp_path)["2021010"]
    got = assert_clean(sub.notebooks["03_one_request"], released)
    assert _src(got["cells"][_find(got, "03-ex3-solution")]) == "def record_turn(messages, response, outputs):\n    return list(messages)"
    assert len(got["cells"]) == len(nb["cells"])


def test_duplicated_deleted_and_edited_cells(tmp_path, released):
    nb = _student(released, "03_one_request")
    t1 = _find(nb, "03-ex1-tests")
    twin = copy.deepcopy(nb["cells"][t1])
    twin["id"] = "pasted-1"
    nb["cells"].insert(t1 + 1, twin)                               # 测试格复制了一份
    s2 = _find(nb, "03-ex2-solution")
    draft = copy.deepcopy(nb["cells"][s2])
    draft["id"] = "pasted-2"
    nb["cells"][s2]["source"] = "def dispatch(tool_call, handlers):\n    return '草稿'"
    draft["source"] = "def dispatch(tool_call, handlers):\n    return '定稿'"
    nb["cells"].insert(s2 + 1, draft)                              # 答案格复制了一份，在下面改定稿
    del nb["cells"][_find(nb, "03-ex2-tests")]                     # 测试格删掉了
    nb["cells"][_find(nb, "03-ex3-tests")]["source"] = "pass  # 测试太难，先跳过"   # 测试格被改了
    _write(nb, tmp_path / "subs" / "2021011" / "03_one_request.ipynb")
    sub = _run(tmp_path)["2021011"]
    got = assert_clean(sub.notebooks["03_one_request"], released)
    sources = [_src(c) for c in got["cells"]]
    graded = _find(got, "03-ex2-solution")
    assert sources[graded].endswith("'定稿'"), "重复的答案格用最后一格评分"
    assert sources[graded - 1].endswith("'草稿'") and not _gid(got["cells"][graded - 1]), "前面的照常保留，去掉标记"
    assert _gid(got["cells"][graded + 1]) == "03-ex2-tests", "补回的测试格紧跟在答案格后面"
    assert "pass  # 测试太难，先跳过" not in sources
    for note in ("测试格 03-ex1-tests 出现 2 次，只留一次", "答案格 03-ex2-solution 有 2 格，用最后一格评分，其余照常运行",
                 "补回了被删掉的测试格 03-ex2-tests", "测试格 03-ex3-tests 被改过，换回原样"):
        assert f"03_one_request：{note}" in sub.notes


def test_deleted_and_swapped_answer_cells(tmp_path, released):
    nb = _student(released, "04_failure_paths")
    del nb["cells"][_find(nb, "04-ex1-solution")]
    s3, t3 = _find(nb, "04-ex3-solution"), _find(nb, "04-ex3-tests")
    nb["cells"][s3], nb["cells"][t3] = nb["cells"][t3], nb["cells"][s3]
    _write(nb, tmp_path / "subs" / "2021012" / "04_failure_paths.ipynb")
    sub = _run(tmp_path)["2021012"]
    got = assert_clean(sub.notebooks["04_failure_paths"], released)
    assert _gid(got["cells"][_find(got, "04-ex1-solution") + 1]) == "04-ex1-tests"
    assert "04_failure_paths：答案格 04-ex1-solution 不见了，补了空白的答案格（这题按没做算）" in sub.notes
    assert "04_failure_paths：格子的顺序被调过，按教师版的顺序放回" in sub.notes


# ---------------------------------------------------------------- 坏文件


def test_unreadable_notebooks_are_noted_and_missing(tmp_path, released):
    folder = tmp_path / "subs" / "2021013"
    folder.mkdir(parents=True)
    (folder / "03_one_request.ipynb").write_text('{"cells": [', encoding="utf-8")
    (folder / "04_failure_paths.ipynb").write_bytes(b"")
    (folder / "05_limits.ipynb").write_text("[1, 2, 3]", encoding="utf-8")
    (folder / "06_five_tools.ipynb").write_bytes(bytes(range(256)) * 4)
    _write(_student(released, "07_endpoint_faults"), folder / "07_endpoint_faults.ipynb")
    (tmp_path / "subs" / "2021014").mkdir()                          # 空文件夹
    got = _run(tmp_path)
    sub = got["2021013"]
    assert list(sub.notebooks) == ["07_endpoint_faults"]
    assert {"03_one_request", "04_failure_paths", "05_limits", "06_five_tools"} <= set(sub.missing)
    for name, why in [("03_one_request", "不是合法的 JSON"), ("04_failure_paths", "是空文件"),
                      ("05_limits", "不是 Jupyter 笔记本"), ("06_five_tools", "不是文本文件")]:
        assert any(n.startswith(f"`{name}.ipynb` 打不开：{why}") for n in sub.notes), name
    empty = got["2021014"]
    assert empty.notebooks == {} and empty.missing == STEMS and empty.notes == ["没有找到任何笔记本"]
    assert empty.submitted_at is None and not empty.late


# ---------------------------------------------------------------- 成绩表与相似提交


def test_exercises_come_from_the_nbgrader_metadata():
    ex = report.exercises(INSTRUCTOR)
    assert len(ex) == 32 and sum(p for _, _, p in ex) == 73
    assert ex[0] == ("00_setup", "00-ex1-tests", 1.0) and ex[-1] == ("11_two_more_apis", "11-ex3-tests", 3.0)
    assert [stem for stem, _, _ in ex] == sorted(stem for stem, _, _ in ex)


def test_grades_csv_has_a_bom_and_one_column_per_exercise(tmp_path):
    ex = report.exercises(INSTRUCTOR)
    rows = [
        {"student": "2021002", "status": "已评分", "reason": "", "total": 7.0, "max_total": 65.0, "late": True,
         "missing": ["04_failure_paths", "05_limits"], "scores": {"03-ex1-tests": 2.0, "03-ex2-tests": 1.5}},
        {"student": "=HYPERLINK(\"x\")", "status": "评分中", "reason": "", "total": None, "max_total": None,
         "late": False, "missing": [], "scores": {}},
    ]
    report.write_grades(rows, tmp_path, ex)
    raw = (tmp_path / "grades.csv").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")
    with open(tmp_path / "grades.csv", encoding="utf-8-sig", newline="") as f:
        table = list(csv.reader(f))
    header = table[0]
    assert header[:6] == ["学号", "状态", "总分", "满分", "迟交", "缺少的笔记本"] and header[-1] == "原因"
    assert len(header) == 6 + 32 + 1
    assert header[6] == "00-ex1 (1分)" and "03-ex1 (2分)" in header and header[-2] == "11-ex3 (3分)"
    by = {r[0]: dict(zip(header, r)) for r in table[1:]}
    ok = by["2021002"]
    assert ok["总分"] == "7" and ok["满分"] == "65" and ok["迟交"] == "是"
    assert ok["缺少的笔记本"] == "04_failure_paths、05_limits"
    assert ok["03-ex1 (2分)"] == "2" and ok["03-ex2 (2分)"] == "1.5" and ok["03-ex3 (3分)"] == ""
    bad = by["'=HYPERLINK(\"x\")"]
    assert bad["状态"] == "评分中" and bad["原因"] == "" and bad["总分"] == "" and bad["03-ex1 (2分)"] == ""
    assert list(tmp_path.iterdir()) == [tmp_path / "grades.csv"], "不留临时文件"


def test_the_notebook_table_is_written_like_the_grades(tmp_path):
    """notebooks.csv 和 grades.csv 用同一种写法：带 BOM，先写临时文件再换名，学生能控制的文字防公式。"""
    ex = report.exercises(INSTRUCTOR)
    rows = [{"student": "@SUM(1)", "scores": {g: 1.0 for _, g, _ in ex},
             "notebooks": {"03_one_request": ("超时", "=1+1")}}]
    report.write_notebook_table(rows, ex, tmp_path)
    assert (tmp_path / "notebooks.csv").read_bytes().startswith(b"\xef\xbb\xbf")
    with open(tmp_path / "notebooks.csv", encoding="utf-8-sig", newline="") as f:
        table = list(csv.DictReader(f))
    assert len(table) == len({s for s, _, _ in ex}) and all(r["student"] == "'@SUM(1)" for r in table)
    slow = next(r for r in table if r["notebook"] == "03_one_request")
    assert slow["status"] == "超时" and slow["reason"] == "'=1+1"
    assert list(tmp_path.iterdir()) == [tmp_path / "notebooks.csv"], "不留临时文件"


def _reference_answers(stem):
    """教师版参考答案格的代码（带 BEGIN SOLUTION 注释行）。"""
    nb = _read(ROOT / "notebooks" / f"{stem}.ipynb")
    return {_gid(c): _src(c) for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution")}


def test_similar_submissions_find_copies_and_ignore_blanks(tmp_path, released):
    subs = tmp_path / "subs"
    for stem in ("03_one_request", "04_failure_paths"):
        answers = _reference_answers(stem)
        a, b = _student(released, stem), _student(released, stem)
        for gid, source in answers.items():
            _answer(a, gid, source)
            # 抄的人加了注释、空行，改了文档字符串的写法
            lines = ["# 我自己想的"] + [line + "  " for line in source.splitlines()] + ["", "# 完"]
            _answer(b, gid, "\n".join(lines).replace('"""', "'''"))
        _write(a, subs / "2021101" / f"{stem}.ipynb")
        _write(b, subs / "2021102" / f"{stem}.ipynb")
        _write(_student(released, stem), subs / "2021103" / f"{stem}.ipynb")   # 两个都没作答
        _write(_student(released, stem), subs / "2021104" / f"{stem}.ipynb")
    c = _student(released, "03_one_request")
    _answer(c, "03-ex1-solution", "def pairing_report(messages):\n    asked, answered = set(), set()\n"
                                  "    for m in messages:\n        for call in m.get('tool_calls') or []:\n"
                                  "            asked.add(call['id'])\n        if m.get('role') == 'tool':\n"
                                  "            answered.add(m['tool_call_id'])\n"
                                  "    return {'unanswered': sorted(asked - answered), 'orphans': sorted(answered - asked)}")
    _write(c, subs / "2021105" / "03_one_request.ipynb")
    collected = collect.collect(subs, INSTRUCTOR, tmp_path / "work")
    pairs = report.similar_submissions(collected)
    assert pairs == [("2021101", "2021102", 1.0)]
    report.write_similarity(pairs, tmp_path / "out")
    raw = (tmp_path / "out" / "similar.csv").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")
    with open(tmp_path / "out" / "similar.csv", encoding="utf-8-sig", newline="") as f:
        assert list(csv.reader(f)) == [["学号甲", "学号乙", "相似度"], ["2021101", "2021102", "100%"]]


def test_unanswered_solutions_are_recognised(released):
    for stem in STEMS:
        for cell in _read(released / f"{stem}.ipynb")["cells"]:
            if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
                assert not report.answered(_src(cell)), f"{stem} {_gid(cell)} 的占位被当成了作答"
        for gid, source in _reference_answers(stem).items():
            assert report.answered(source), f"{stem} {gid} 的参考答案被当成了没作答"


# ---------------------------------------------------------------- 笔记本告诉学生分值


def test_every_exercise_section_states_hidden_tests_and_points():
    points = {}
    for stem, _, pts in report.exercises(INSTRUCTOR):
        points.setdefault(stem, []).append(pts)
    for path in INSTRUCTOR:
        cells = _read(path)["cells"]
        markdown = [_src(c) for c in cells if c["cell_type"] == "markdown"]
        [section] = [s for s in markdown if s.startswith("## 练习")]
        listing = "，".join(f"练习 {i} 占 {p:g} 分" for i, p in enumerate(points[path.stem], 1))
        assert f"批改时还会运行隐藏测试；分值：{listing}。" in section, path.name
        assert sum(s.count("批改时还会运行隐藏测试") for s in markdown) == 1, f"{path.name} 说了不止一次"


# ---------------------------------------------------------------- 真的交给 nbgrader 评分


def _without_markers(source):
    return "\n".join(line for line in source.split("\n") if "BEGIN SOLUTION" not in line and "END SOLUTION" not in line)


@pytest.mark.filterwarnings("ignore:Object of type:Warning")   # nbgrader 自己的 SQLAlchemy 用法引起的
def test_messy_notebooks_are_graded_right_by_nbgrader(tmp_path, released, monkeypatch):
    """整理后的笔记本交给真的 nbgrader：改名、标记被删、测试格重复或被删的完整答案拿满分，改掉测试格的空白答案拿 0 分。"""
    for key in list(os.environ):
        if key.upper().startswith(("HARNESS_", "OPENAI_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HARNESS_MODE", "fake")
    monkeypatch.setenv("PATH", str(pathlib.Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))

    honest = _student(released, "03_one_request")
    for gid, source in _reference_answers("03_one_request").items():
        _answer(honest, gid, _without_markers(source))
    t1 = _find(honest, "03-ex1-tests")
    twin = copy.deepcopy(honest["cells"][t1])
    twin["id"] = "pasted"
    honest["cells"].insert(t1 + 1, twin)
    del honest["cells"][_find(honest, "03-ex2-tests")]
    for cell in honest["cells"]:
        cell["metadata"].pop("nbgrader", None)
    _write(honest, tmp_path / "subs" / "honest" / "03_one_request (1).ipynb")
    cheat = _student(released, "03_one_request")
    for gid in ("03-ex1-tests", "03-ex2-tests", "03-ex3-tests"):
        _answer(cheat, gid, "pass")
    _write(cheat, tmp_path / "subs" / "cheat" / "作业03.ipynb")

    instructor = [ROOT / "notebooks" / "03_one_request.ipynb"]
    collected = collect.collect(tmp_path / "subs", instructor, tmp_path / "work")
    course = tmp_path / "course"
    (course / "source" / "hw").mkdir(parents=True)
    shutil.copy2(instructor[0], course / "source" / "hw")
    config = Config()
    config.CourseDirectory.root = str(course)
    config.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
    config.CourseDirectory.course_id = "hw"
    config.Execute.timeout = 120
    config.Execute.allow_errors = True
    api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    assert api.generate_assignment("hw", force=True, create=True)["success"]
    for sub in collected:
        target = course / "submitted" / sub.student / "hw"
        target.mkdir(parents=True)
        shutil.copy2(sub.notebooks["03_one_request"], target)
        result = api.autograde("hw", sub.student, force=True, create=True)
        assert result["success"], result.get("error")
    with api.gradebook as gb:
        scores = {sub.student: gb.find_submission_notebook("03_one_request", "hw", sub.student).score
                  for sub in collected}
    assert scores == {"cheat": 0.0, "honest": 7.0}
