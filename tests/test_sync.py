"""课程层与笔记本同步：标了 `# harness_lib: save <模块>` 的格子是 harness_lib/lesson/<模块>.py 的源头。

- `scripts/export_lesson.py --check` 通过：模块与笔记本现在生成的结果逐字一致；
- 两个方向各自再查一遍（不借用导出脚本的代码）：模块里的每个顶层定义和导入都来自标记格子，
  标记格子里的每个定义都在模块里，比较的是 `ast.dump`；
- 在临时副本上证明检查真的会失败：模块里多了没标记的定义、标记格子改了一处、
  标记格子从包的根导入。真实的笔记本和模块一律不动。
"""

import ast
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, notebook_paths

SCRIPT = ROOT / "scripts" / "export_lesson.py"
MARK = re.compile(r"^#\s*harness_lib:\s*save\s+(\w+)\s*$")


def _defined_names(node):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def marked_cells(root):
    """(笔记本文件名, 格号, 模块名, 语法树) 的列表，按笔记本和格子的顺序。"""
    found = []
    for path in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for index, cell in enumerate(nb["cells"]):
            src = "".join(cell["source"])
            m = MARK.match(src.split("\n", 1)[0]) if cell["cell_type"] == "code" else None
            if m:
                found.append((path.name, index, m.group(1), ast.parse(src)))
    return found


def marked_definitions(root):
    """(笔记本文件名, 模块名, 定义名, 语法树节点) 的列表。"""
    return [
        (notebook, module, name, node)
        for notebook, _, module, tree in marked_cells(root)
        for node in tree.body
        for name in _defined_names(node)
    ]


def sync_problems(root):
    """两个方向逐条比较课程层模块和标记格子，返回问题清单（中文）；一致时为空。"""
    problems = []
    lesson = root / "harness_lib" / "lesson"
    cells = marked_cells(root)
    modules = sorted({module for _, _, module, _ in cells})
    statements = {m: {ast.dump(n) for _, _, mod, t in cells if mod == m for n in t.body} for m in modules}
    marked = {(module, name): (notebook, node) for notebook, module, name, node in marked_definitions(root)}

    for path in sorted(lesson.glob("*.py")):
        module = path.stem
        tree = ast.parse(path.read_text(encoding="utf-8"))
        body = tree.body[1:] if ast.get_docstring(tree) is not None else tree.body
        if module == "__init__":
            problems += [f"lesson/__init__.py 第 {n.lineno} 行：这里只该有包说明" for n in body]
            continue
        if module not in modules:
            problems.append(f"lesson/{module}.py：没有任何标记格子保存到这个模块")
            continue
        # 方向一：模块 → 标记格子
        for node in body:
            names = _defined_names(node)
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if ast.dump(node) not in statements[module]:
                    problems.append(f"lesson/{module}.py 第 {node.lineno} 行：这条导入不在任何标记格子里")
            elif not names:
                problems.append(f"lesson/{module}.py 第 {node.lineno} 行：不是来自标记格子的定义")
            for name in names:
                if (module, name) not in marked:
                    problems.append(f"lesson/{module}.py 里的 {name} 不来自任何标记格子")
                elif ast.dump(marked[module, name][1]) != ast.dump(node):
                    problems.append(f"lesson/{module}.py 里的 {name} 与 {marked[module, name][0]} 里的定义不一致")
    # 方向二：标记格子 → 模块
    for (module, name), (notebook, node) in marked.items():
        path = lesson / f"{module}.py"
        if not path.exists():
            problems.append(f"{notebook} 保存到 lesson/{module}.py，但这个文件不存在")
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        table = {n: stmt for stmt in tree.body for n in _defined_names(stmt)}
        if name not in table:
            problems.append(f"{notebook} 定义的 {name} 不在 lesson/{module}.py 里")
        elif ast.dump(table[name]) != ast.dump(node):
            problems.append(f"{notebook} 定义的 {name} 与 lesson/{module}.py 里的不一致")
        stem = notebook.rsplit(".", 1)[0]
        lines = (ast.get_docstring(tree) or "").splitlines()
        if not any(f"`{name}`" in line and stem in line for line in lines):
            problems.append(f"lesson/{module}.py 的模块说明没有写明 {name} 来自 {stem}")
    return problems


def run_export(*args, root=None):
    """以子进程运行导出脚本，返回 CompletedProcess（stdout、stderr 都是文本）。"""
    command = [sys.executable, str(SCRIPT), *args]
    if root is not None:
        command += ["--root", str(root)]
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    return subprocess.run(command, capture_output=True, text=True, encoding="utf-8", env=env, timeout=60)


@pytest.fixture
def project_copy(tmp_path):
    """笔记本和课程层模块的临时副本；测试只改副本。"""
    (tmp_path / "notebooks").mkdir()
    for path in notebook_paths():
        shutil.copy2(path, tmp_path / "notebooks" / path.name)
    shutil.copytree(ROOT / "harness_lib" / "lesson", tmp_path / "harness_lib" / "lesson",
                    ignore=shutil.ignore_patterns("__pycache__"))
    assert run_export("--check", root=tmp_path).returncode == 0, "副本在改动之前应当是一致的"
    assert sync_problems(tmp_path) == []
    return tmp_path


def edit_marked_cell(root, notebook, old, new):
    """在副本笔记本里找到含 old 的那个标记格子，把 old 换成 new；返回格号。"""
    path = root / "notebooks" / notebook
    nb = json.loads(path.read_text(encoding="utf-8"))
    hits = [
        i for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "code" and MARK.match("".join(c["source"]).split("\n", 1)[0])
        and old in "".join(c["source"])
    ]
    assert len(hits) == 1, f"{notebook} 里含 {old!r} 的标记格子应当恰好一个"
    cell = nb["cells"][hits[0]]
    cell["source"] = "".join(cell["source"]).replace(old, new, 1).splitlines(keepends=True)
    path.write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return hits[0]


MARKED = marked_definitions(ROOT)


def test_lesson_modules_are_what_the_notebooks_generate():
    result = run_export("--check")
    assert result.returncode == 0, f"课程层与笔记本不一致，运行 make lesson：\n{result.stdout}{result.stderr}"


def test_some_definitions_are_marked_for_every_lesson_module():
    assert len(MARKED) >= 3, "笔记本里应当有标记为 harness_lib: save 的定义"
    modules = {module for _, module, _, _ in MARKED}
    files = {p.stem for p in (ROOT / "harness_lib" / "lesson").glob("*.py")} - {"__init__"}
    assert modules == files, "每个课程层模块都应当由标记格子生成，每个标记的模块都应当有文件"


def test_both_directions_hold():
    assert sync_problems(ROOT) == []


@pytest.mark.parametrize(
    "notebook,module,name,node", MARKED, ids=[f"{n}:{m}.{x}" for n, m, x, _ in MARKED]
)
def test_marked_definition_is_in_its_module(notebook, module, name, node):
    tree = ast.parse((ROOT / "harness_lib" / "lesson" / f"{module}.py").read_text(encoding="utf-8"))
    table = {n: stmt for stmt in tree.body for n in _defined_names(stmt)}
    assert name in table, f"{notebook} 定义的 {name} 不在 harness_lib/lesson/{module}.py 里"
    assert ast.dump(node) == ast.dump(table[name]), f"{name}：{notebook} 与 harness_lib/lesson/{module}.py 不一致"


def test_each_name_is_defined_by_one_notebook_only():
    seen = {}
    for notebook, module, name, _ in MARKED:
        assert seen.setdefault(name, notebook) == notebook, (
            f"{name} 同时在 {seen[name]} 和 {notebook} 里被标记保存"
        )


def test_unmarked_definition_in_a_module_fails(project_copy):
    loop = project_copy / "harness_lib" / "lesson" / "loop.py"
    loop.write_text(loop.read_text(encoding="utf-8") + "\n\ndef helper_nobody_taught():\n    return 1\n",
                    encoding="utf-8")
    result = run_export("--check", root=project_copy)
    assert result.returncode == 1
    assert "-def helper_nobody_taught():" in result.stdout
    assert any("helper_nobody_taught" in p for p in sync_problems(project_copy))


def test_unmarked_import_in_a_module_fails(project_copy):
    stream = project_copy / "harness_lib" / "lesson" / "stream.py"
    text = stream.read_text(encoding="utf-8").replace("\nimport time\n", "\nimport time\nimport os\n", 1)
    stream.write_text(text, encoding="utf-8")
    assert run_export("--check", root=project_copy).returncode == 1
    assert any("导入不在任何标记格子里" in p for p in sync_problems(project_copy))


def test_extra_lesson_module_fails(project_copy):
    extra = project_copy / "harness_lib" / "lesson" / "extra.py"
    extra.write_text('"""多出来的模块。"""\n\n\ndef extra():\n    return 1\n', encoding="utf-8")
    result = run_export("--check", root=project_copy)
    assert result.returncode == 1 and "harness_lib/lesson/extra.py" in result.stdout
    assert any("extra" in p for p in sync_problems(project_copy))
    assert run_export(root=project_copy).returncode == 2, "生成时也不能留着没人生成的模块"


def test_changed_marked_cell_fails_until_regenerated(project_copy):
    edit_marked_cell(project_copy, "04_failure_paths.ipynb", '"mkfs", ', '"mkfs", "halt", ')
    result = run_export("--check", root=project_copy)
    assert result.returncode == 1
    assert '+BLOCKED_SNIPPETS = ["rm -rf /", "sudo ", "shutdown", "reboot", "mkfs", "halt", "> /dev/sd"]' in result.stdout
    assert any("BLOCKED_SNIPPETS" in p for p in sync_problems(project_copy))
    # 一条命令重新生成之后，两种检查都恢复一致
    assert run_export(root=project_copy).returncode == 0
    assert run_export("--check", root=project_copy).returncode == 0
    assert sync_problems(project_copy) == []


def test_name_marked_in_two_notebooks_is_refused(project_copy):
    edit_marked_cell(project_copy, "05_limits.ipynb", "def check_transcript(", 'SYSTEM = "另一个"\n\n\ndef check_transcript(')
    result = run_export("--check", root=project_copy)
    assert result.returncode == 2
    assert "loop.SYSTEM" in result.stderr and "03_one_request.ipynb" in result.stderr


@pytest.mark.parametrize("line", [
    "from harness_lib import run_bash",
    "import harness_lib",
    "from harness_lib.support import runner",
])
def test_marked_cell_importing_the_package_root_is_refused(project_copy, line):
    index = edit_marked_cell(
        project_copy, "04_failure_paths.ipynb",
        "from harness_lib.support.runner import run_bash", f"{line}\nfrom harness_lib.support.runner import run_bash",
    )
    loop = project_copy / "harness_lib" / "lesson" / "loop.py"
    before = loop.read_text(encoding="utf-8")
    for args in (["--check"], []):
        result = run_export(*args, root=project_copy)
        assert result.returncode == 2
        assert f"04_failure_paths.ipynb 第 {index} 格" in result.stderr and "循环" in result.stderr
    assert loop.read_text(encoding="utf-8") == before, "被拒绝时不写任何文件"


def test_import_from_own_module_needs_the_name_defined_above(project_copy):
    edit_marked_cell(project_copy, "03_one_request.ipynb", "\nSYSTEM = ",
                     "\nfrom harness_lib.lesson.loop import HANDLERS\n\nSYSTEM = ")
    result = run_export("--check", root=project_copy)
    assert result.returncode == 2 and "HANDLERS" in result.stderr
