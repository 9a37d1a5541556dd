"""笔记本卫生：提交时干净、结构统一、面向学习者的文字是简体中文。"""

import ast
import json
import re
import unicodedata

import pytest

from conftest import ROOT, notebook_paths

CJK = re.compile(r"[\u4e00-\u9fff]")
NOTEBOOKS = notebook_paths()


def _load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_there_are_notebooks():
    assert NOTEBOOKS and NOTEBOOKS[0].name == "00_setup.ipynb"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_clean(path):
    nb = _load(path)
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [], f"{path.name} 第 {i} 格带着输出"
            assert cell.get("execution_count") is None, f"{path.name} 第 {i} 格有执行序号"
    assert "widgets" not in nb.get("metadata", {}), f"{path.name} 保存了 widget 状态"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_structure(path):
    nb = _load(path)
    first = "".join(nb["cells"][0]["source"])
    assert first.startswith("# "), "第一格必须是 H1 标题"
    assert re.match(r"# \d\d ", first), "标题以两位编号开头"
    if path.name != "00_setup.ipynb":
        assert "原文" in first.splitlines()[0], "标题要写明对应原文哪一节"
    headings = [
        line.strip()
        for c in nb["cells"]
        if c["cell_type"] == "markdown"
        for line in "".join(c["source"]).splitlines()
        if line.startswith("## ")
    ]
    assert "## 小结" in headings and "## 练习" in headings
    assert headings.index("## 练习") > headings.index("## 小结")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_prose_is_chinese(path):
    nb = _load(path)
    for i, cell in enumerate(nb["cells"]):
        src = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            text = re.sub(r"```.*?```|`[^`]*`|\$[^$]*\$|<[^>]+>|https?://\S+", "", src, flags=re.S)
            letters = re.findall(r"[A-Za-z]", text)
            cjk = CJK.findall(text)
            assert len(cjk) >= len(letters) / 3, f"{path.name} 第 {i} 格的说明看起来不是中文"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_code_comments_are_chinese(path):
    nb = _load(path)
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        for line in "".join(cell["source"]).splitlines():
            m = re.match(r"\s*#\s*(.+)", line)
            if not m or m.group(1).startswith(("harness_lib:", "%%", "noqa", "type:")):
                continue
            words = re.findall(r"[A-Za-z]{4,}", m.group(1))
            if len(words) >= 4:
                assert CJK.search(m.group(1)), f"{path.name} 第 {i} 格的注释不是中文：{line!r}"


CODE_COLUMNS = 80


def columns(line):
    """等宽字体里一行占几列：汉字和全角符号（East Asian Width 为 W、F）占两列。"""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in line)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_code_fits_80_columns(path):
    """JupyterLab 的代码格不折行：超过 80 列，行尾的注释和参数就要左右滚动才看得见。"""
    nb = _load(path)
    wide = [(i, line) for i, cell in enumerate(nb["cells"]) if cell["cell_type"] == "code"
            for line in "".join(cell["source"]).splitlines() if columns(line) > CODE_COLUMNS]
    assert not wide, f"{path.name}：{len(wide)} 行超过 {CODE_COLUMNS} 列，第一行在第 {wide[0][0]} 格：{wide[0][1]!r}"


def test_columns_count_chinese_as_two():
    assert columns("print(1)") == 8 and columns("打印") == 4 and columns("，") == 2


def test_library_docstrings_are_chinese():
    for path in sorted((ROOT / "harness_lib").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        doc = ast.get_docstring(tree)
        assert doc and CJK.search(doc), f"{path.name} 缺少中文模块说明"
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                d = ast.get_docstring(node)
                if d:
                    assert CJK.search(d), f"{path.name}:{node.name} 的文档字符串不是中文"


def test_every_hidden_assertion_has_a_chinese_message():
    """学生在反馈里只看得到隐藏测试的断言说明（见 coursework/course.py），所以每条断言都要带一句中文说明。"""
    import textwrap

    missing = []
    for path in notebook_paths():
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            source = "".join(cell["source"])
            for block in re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", source, re.S):
                for node in ast.walk(ast.parse(textwrap.dedent(block))):
                    if isinstance(node, ast.Assert) and not (
                        node.msg is not None and CJK.search(ast.unparse(node.msg))
                    ):
                        missing.append(f"{path.name} {cell.get('id')}: {ast.unparse(node)[:70]}")
    assert not missing, "这些隐藏断言没有中文说明：\n" + "\n".join(missing)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_main_line_does_not_refuse_windows(path):
    """主线在 Windows 上也要能跑：只有选读和练习可以要求 POSIX（比如 05 的进程组）。
    主线的格子里不能有“os.name 是 nt 就抛异常”这样的拒绝。"""
    from test_reading import main_line

    for cell in main_line(path.stem):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "os.name" in ast.unparse(node.test):
                assert not any(isinstance(n, ast.Raise) for b in node.body for n in ast.walk(b)), (
                    f"{path.name} 的主线格子 {cell.get('id')} 在 Windows 上拒绝运行")
