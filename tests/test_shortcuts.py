"""两条把活交出去的捷径，经过真实的沙盒评分（`course.autograde`）都要丢掉那道题的分。

- 08 练习 2：一行 `from harness_lib.models.streaming import _Message`，让库里拼消息的私有类替自己拼；
- 06 练习 1：在运行时从注册表里取出 `make_file_tools` 登记的 `read_file` 处理函数，借它读文件再数行数。

两份捷径除了这一处都是对的（看得见的和隐藏的测试都过），所以丢分只能是因为 `assert_own_work`：
测试也查测试格的报错里写着“用到了现成的”。另一位学生用了同样的名字，却是自己的东西：
自己写的 `_Message` 类、自己的 `handlers` 字典，查一查自己登记的 `count_lines`。她应当满分。
每本笔记本里别的练习都填参考答案，也都应当满分。
"""

import json
import shutil

import pytest

from conftest import ROOT

pytest.importorskip("nbgrader", reason="课程作业需要 pip install -e .[teach]")

from coursework import course  # noqa: E402

_NO_SANDBOX = course.sandbox.available()
if _NO_SANDBOX:
    pytest.skip(f"没有沙盒：{_NO_SANDBOX}", allow_module_level=True)

NOTEBOOKS = ("06_five_tools", "08_streaming")

SHORTCUTS = {
    "06-ex1-solution": '''
def add_count_lines(registry, workspace):
    @registry.register(
        "count_lines",
        "数一个文本文件有几行。",
        {"type": "object",
         "properties": {"path": {"type": "string", "description": "相对工作区的路径"}},
         "required": ["path"]},
    )
    def count_lines(args):
        target = workspace.resolve(string_arg(args, "path"))
        if not target.is_file():
            raise ToolFailed(f"{args['path']} 不存在或不是文件")
        if target.stat().st_size == 0:
            return "0"
        text = registry.handlers["read_file"](args)  # 库里现成的 read_file 替我读
        return str(len(text.splitlines()))

    return count_lines
''',
    "08-ex2-solution": '''
from harness_lib.models.streaming import _Message


def rebuild_message(chunks):
    message = _Message()
    for chunk in chunks:
        for choice in chunk.model_dump()["choices"]:
            if choice["index"] == 0:
                message.apply(choice["delta"] or {})
    return message.as_dict()
''',
}

OWN_NAMES = {
    "06-ex1-solution": '''
handlers = {"count": lambda text: str(len(text.splitlines()))}


def add_count_lines(registry, workspace):
    @registry.register(
        "count_lines",
        "数一个文本文件有几行。",
        {"type": "object",
         "properties": {"path": {"type": "string", "description": "相对工作区的路径"}},
         "required": ["path"]},
    )
    def count_lines(args):
        assert "count_lines" in registry.handlers  # 查的是自己登记的那一个
        target = workspace.resolve(string_arg(args, "path"))
        if not target.is_file():
            raise ToolFailed(f"{args['path']} 不存在或不是文件")
        return handlers["count"](target.read_bytes().decode("utf-8", "replace"))

    return count_lines
''',
    "08-ex2-solution": '''
class _Message:
    """自己的拼接器：名字和库里的私有类一样，代码是自己写的。"""

    def __init__(self):
        self.fields, self.calls, self.slot_of = {"role": "assistant"}, [], {}

    def apply(self, delta):
        for key, value in delta.items():
            if key == "tool_calls" or value is None:
                continue
            if key != "role" and isinstance(value, str):
                self.fields[key] = self.fields.get(key, "") + value
            else:
                self.fields[key] = value
        for part in delta.get("tool_calls") or []:
            slot = self.slot_of.get(part["index"])
            if slot is None or (part.get("id") and slot["id"] and part["id"] != slot["id"]):
                slot = {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
                self.slot_of[part["index"]] = slot
                self.calls.append((part["index"], slot))
            slot["id"] = slot["id"] or part.get("id")
            function = part.get("function") or {}
            if function.get("name") and not slot["function"]["name"]:
                slot["function"]["name"] = function["name"]
            slot["function"]["arguments"] += function.get("arguments") or ""

    def as_dict(self):
        out = dict(self.fields)
        if self.calls:
            out["tool_calls"] = [slot for _, slot in sorted(self.calls, key=lambda pair: pair[0])]
        return out


def rebuild_message(chunks):
    message = _Message()
    for chunk in chunks:
        for choice in chunk.model_dump()["choices"]:
            if choice["index"] == 0:
                message.apply(choice["delta"] or {})
    return message.as_dict()
''',
}

STUDENTS = {"shortcuts": SHORTCUTS, "own_names": OWN_NAMES}


def _nbg(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def _fill(release, stem, answers, target):
    """学生版的一本笔记本：answers 里有的题用它，别的题填参考答案。"""
    reference = {_nbg(c)["grade_id"]: c["source"]
                 for c in json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))["cells"]
                 if _nbg(c).get("solution")}
    nb = json.loads((release / f"{stem}.ipynb").read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        gid = _nbg(cell).get("grade_id")
        if gid in reference:
            cell["source"] = answers.get(gid, reference[gid])
    target.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")


@pytest.fixture(scope="module")
def graded(release_dir, prepared_course, tmp_path_factory):
    subs = tmp_path_factory.mktemp("shortcuts")
    for student, answers in STUDENTS.items():
        (subs / student).mkdir()
        for stem in NOTEBOOKS:
            _fill(release_dir, stem, answers, subs / student / f"{stem}.ipynb")
    out = tmp_path_factory.mktemp("shortcut-grades")
    shutil.copytree(prepared_course, out / "course")
    rows = course.autograde(subs, out, jobs=2)
    return out, {row["student"]: row["scores"] for row in rows}


def _exercises():
    for stem in NOTEBOOKS:
        for cell in json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))["cells"]:
            if _nbg(cell).get("grade") and not _nbg(cell).get("solution"):
                yield stem, _nbg(cell)["grade_id"], _nbg(cell)["points"]


def _error(out, student, stem, grade_id):
    """评分后的笔记本里，这道题测试格的报错。"""
    path = out / "course" / "autograded" / student / course.ASSIGNMENT / f"{stem}.ipynb"
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if _nbg(cell).get("grade_id") == grade_id:
            return " ".join(o.get("evalue", "") for o in cell.get("outputs", []) if o.get("output_type") == "error")
    raise AssertionError(f"{path} 里没有 {grade_id}")


def test_each_shortcut_loses_its_exercise_and_only_that(graded):
    out, scores = graded
    cut = {gid.replace("solution", "tests") for gid in SHORTCUTS}
    for stem, grade_id, points in _exercises():
        got = scores["shortcuts"][grade_id]
        if grade_id in cut:
            assert got == 0, f"{grade_id} 走了捷径还得了 {got} 分"
            assert "用到了现成的" in _error(out, "shortcuts", stem, grade_id), (
                f"{grade_id} 应当是因为把活交给了库里的定义而丢分")
        else:
            assert got == points, f"{grade_id} 填的是参考答案，应当满分 {points}：{got}"


def test_own_definitions_with_the_same_names_keep_full_marks(graded):
    _, scores = graded
    wrong = {gid: scores["own_names"][gid] for _, gid, points in _exercises() if scores["own_names"][gid] != points}
    assert not wrong, f"自己写的 _Message、自己的 handlers 被冤枉了：{wrong}"
