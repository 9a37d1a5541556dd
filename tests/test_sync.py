"""笔记本里标了 `# harness_lib: save <模块>` 的定义，必须与 harness_lib 里的同名定义一致。

比较的是 `ast.dump`：注释和排版不同没关系，代码本身不同就失败，并指出是哪个名字。
"""

import ast
import json
import re

import pytest

from conftest import ROOT, notebook_paths

MARK = re.compile(r"^#\s*harness_lib:\s*save\s+(\w+)\s*$")


def _top_level_names(node):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def marked_definitions():
    """(笔记本名, 模块名, 定义名, AST 节点) 的列表。"""
    found = []
    for path in notebook_paths():
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            src = "".join(cell["source"])
            first = src.splitlines()[0] if src else ""
            m = MARK.match(first)
            if not m:
                continue
            for node in ast.parse(src).body:
                for name in _top_level_names(node):
                    found.append((path.name, m.group(1), name, node))
    return found


def _module_definitions(module):
    tree = ast.parse((ROOT / "harness_lib" / "lesson" / f"{module}.py").read_text(encoding="utf-8"))
    table = {}
    for node in tree.body:
        for name in _top_level_names(node):
            table[name] = node
    return tree, table


MARKED = marked_definitions()


def test_some_definitions_are_marked():
    assert len(MARKED) >= 3, "笔记本里应当有标记为 harness_lib: save 的定义"


@pytest.mark.parametrize(
    "notebook,module,name,node", MARKED, ids=[f"{n}:{m}.{x}" for n, m, x, _ in MARKED]
)
def test_marked_definition_matches_library(notebook, module, name, node):
    path = ROOT / "harness_lib" / "lesson" / f"{module}.py"
    assert path.exists(), f"{notebook} 标记保存到 harness_lib/lesson/{module}.py，但该文件不存在"
    tree, table = _module_definitions(module)
    assert name in table, f"{notebook} 定义的 {name} 不在 harness_lib/lesson/{module}.py 里"
    assert ast.dump(node) == ast.dump(table[name]), (
        f"{name}：{notebook} 里的定义与 harness_lib/lesson/{module}.py 不一致，请同步两处"
    )
    doc = ast.get_docstring(tree) or ""
    assert notebook.split(".")[0] in doc, (
        f"harness_lib/lesson/{module}.py 的模块说明应写明 {name} 来自 {notebook}"
    )


def test_each_name_is_defined_by_one_notebook_only():
    seen = {}
    for notebook, module, name, _ in MARKED:
        key = (module, name)
        assert key not in seen or seen[key] == notebook, (
            f"{module}.{name} 同时在 {seen.get(key)} 和 {notebook} 里被标记保存"
        )
        seen[key] = notebook
