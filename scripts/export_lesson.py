"""从笔记本生成课程层：把标了 `# harness_lib: save <模块>` 的格子拼成 harness_lib/lesson/<模块>.py。

做法学的是 nbdev 的 `nbdev_export`：笔记本是源头，模块是生成物，每段代码前面用一行
`# %%` 注释写明它来自哪本笔记本的第几格（格号从 0 数起）。

    python scripts/export_lesson.py            # 重新生成全部课程层模块（即 make lesson）
    python scripts/export_lesson.py --check    # 只比较：有差异就打印 unified diff，退出码为 1

规则：

- 同一个模块的格子，先按笔记本文件名排序，再按格子在笔记本里的顺序排；
- 格子的代码原样照抄，只去掉第一行的标记，另有两处例外，原处各留一行注释：
  - 格子最后一个表达式在笔记本里只用来显示结果，模块里略去；
  - 从本模块导入的语句（例如 05 里的 `from harness_lib.lesson.loop import ...`）略去，
    因为这些名字就定义在本模块的上文；上文没有就报错；
- 标记格子里只能从具体模块导入（`harness_lib.support.<模块>` 或 `harness_lib.lesson.<模块>`）：
  包的根 `harness_lib` 自己就导入课程层，从它导入会形成循环，所以直接拒绝；
- 同一个名字只能由一个格子定义；课程层目录里不能有没人生成的模块。

只用标准库，不依赖 nbdev。出错时打印中文说明，退出码为 2。
"""

import argparse
import ast
import difflib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"
LESSON_DIR = Path("harness_lib") / "lesson"
MARK = re.compile(r"^#\s*harness_lib:\s*save\s+([A-Za-z_][A-Za-z0-9_]*)\s*$")
LOOKS_LIKE_MARK = re.compile(r"^\s*#\s*harness_lib\s*:")
PRECISE_IMPORT = re.compile(r"^harness_lib\.(support|lesson)\.[A-Za-z_][A-Za-z0-9_]*$")
DISPLAY_NOTE = "# （笔记本里这一格最后的表达式只用来显示结果，模块里略去）"


class ExportError(Exception):
    """标记格子不能导出：说明写明是哪本笔记本的哪一格、该怎么改。"""


def notebook_paths(root):
    """按文件名顺序列出 root/notebooks 里的教学笔记本。"""
    return sorted((Path(root) / "notebooks").glob(NOTEBOOK_GLOB))


def notebook_title(nb, name):
    """笔记本第一格的 H1 标题（不带 `# `），它写明了对应原文哪一节。"""
    cells = nb.get("cells") or []
    first = "".join(cells[0]["source"]).splitlines() if cells else []
    if not first or not first[0].startswith("# "):
        raise ExportError(f"{name}：第一格应当以 H1 标题（`# `）开头，生成的模块说明要引用它")
    return first[0][2:].strip()


def defined_names(node):
    """一条顶层语句定义的名字（函数、类、赋值目标；复合语句看里面）。导入不算定义。"""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    names = []
    for field in ("body", "orelse", "finalbody", "handlers"):
        for child in getattr(node, field, None) or []:
            names.extend(defined_names(child))
    return names


class MarkedCell:
    """一个标记格子：来自哪里、存进哪个模块、去掉标记后的代码和它的语法树。"""

    def __init__(self, notebook, title, index, module, code):
        self.notebook = notebook  # 文件名，例如 05_limits.ipynb
        self.stem = notebook.rsplit(".", 1)[0]
        self.title = title
        self.index = index
        self.module = module
        self.code = code
        self.where = f"{notebook} 第 {index} 格"
        try:
            self.tree = ast.parse(code)
        except SyntaxError as exc:
            raise ExportError(f"{self.where}：代码有语法错误（第 {exc.lineno} 行）：{exc.msg}") from None
        self.names = [name for node in self.tree.body for name in defined_names(node)]


def read_marked_cells(root):
    """root 下全部笔记本里的标记格子，按笔记本文件名、再按格子顺序。"""
    cells = []
    for path in notebook_paths(root):
        nb = json.loads(path.read_text(encoding="utf-8"))
        title = None
        for index, cell in enumerate(nb.get("cells") or []):
            if cell.get("cell_type") != "code":
                continue
            source = "".join(cell.get("source") or []).replace("\r\n", "\n")
            lines = source.split("\n")
            for number, line in enumerate(lines[1:], start=2):
                if LOOKS_LIKE_MARK.match(line):
                    raise ExportError(f"{path.name} 第 {index} 格：标记只能写在格子的第一行，这里写在了第 {number} 行")
            if not LOOKS_LIKE_MARK.match(lines[0]):
                continue
            mark = MARK.match(lines[0])
            if not mark or mark.group(1) == "__init__":
                raise ExportError(
                    f"{path.name} 第 {index} 格：标记 {lines[0]!r} 写得不对，应当是 `# harness_lib: save <模块名>`"
                )
            if title is None:
                title = notebook_title(nb, path.name)
            code = "\n".join(lines[1:]).strip("\n")
            cells.append(MarkedCell(path.name, title, index, mark.group(1), code))
    return cells


def _check_imports(cell, defined_before):
    """检查一个格子的导入；返回要略去的自导入语句（本模块上文已经定义了它们导入的名字）。"""
    own = f"harness_lib.lesson.{cell.module}"
    skipped = []
    for node in cell.tree.body:
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                raise ExportError(f"{cell.where}：不能用相对导入，请写完整的 `harness_lib.support.<模块>`")
            if module == own:
                missing = [a.name for a in node.names if a.name not in defined_before]
                if missing or any(a.asname for a in node.names):
                    raise ExportError(
                        f"{cell.where}：从本模块 {own} 导入的 {'、'.join(missing) or '名字'} "
                        "在前面的标记格子里还没有定义（或者用了 as 改名），生成的模块里找不到它"
                    )
                skipped.append(node)
            elif module == "harness_lib" or (module.startswith("harness_lib.") and not PRECISE_IMPORT.match(module)):
                names = "、".join(a.name for a in node.names)
                raise ExportError(
                    f"{cell.where}：标记格子不能写 `from {module} import {names}`。"
                    "包的根 harness_lib 会导入课程层，从它导入会形成循环；"
                    "请从具体的模块导入，例如 `from harness_lib.support.runner import ...`"
                )
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == own:
                    raise ExportError(f"{cell.where}：模块不能导入它自己（{own}）")
                if alias.name == "harness_lib" or (
                    alias.name.startswith("harness_lib.") and not PRECISE_IMPORT.match(alias.name)
                ):
                    raise ExportError(
                        f"{cell.where}：标记格子不能写 `import {alias.name}`。"
                        "包的根 harness_lib 会导入课程层，从它导入会形成循环；"
                        "请从具体的模块导入，例如 `from harness_lib.support.runner import ...`"
                    )
    return skipped


def _replace_statements(cell, replacements):
    """把 (语句, 注释) 里每条语句占的行换成一行注释；语句必须独占这些行。"""
    lines = cell.code.split("\n")
    for node, note in sorted(replacements, key=lambda item: item[0].lineno, reverse=True):
        first, last = node.lineno - 1, node.end_lineno - 1
        others = [n for n in cell.tree.body if n is not node and n.lineno - 1 <= last and n.end_lineno - 1 >= first]
        if others or lines[first][: node.col_offset].strip():
            raise ExportError(f"{cell.where}：第 {node.lineno} 行的语句要和别的语句分开写，才能导出")
        lines[first:last + 1] = [note]
    return "\n".join(lines).strip("\n")


def export_code(cell, defined_before):
    """一个格子导出到模块里的代码：去掉显示用的最后一个表达式和自导入，其余原样。"""
    replacements = []
    for node in _check_imports(cell, defined_before):
        names = "、".join(a.name for a in node.names)
        replacements.append((node, f"# （笔记本里在这里从 {node.module} 导入 {names}；它们就定义在本模块上文）"))
    body = cell.tree.body
    if body and isinstance(body[-1], ast.Expr) and not (
        isinstance(body[-1].value, ast.Constant) and isinstance(body[-1].value.value, str)
    ):
        replacements.append((body[-1], DISPLAY_NOTE))
    return _replace_statements(cell, replacements) if replacements else cell.code


def group_by_module(cells):
    """{模块名: [格子, ...]}，模块按名字排序；同一模块里同一个名字出现两次就报错。"""
    modules = {}
    for cell in cells:
        modules.setdefault(cell.module, []).append(cell)
    for module, group in modules.items():
        seen = {}
        for cell in group:
            for name in cell.names:
                if name in seen and seen[name] is not cell:
                    raise ExportError(
                        f"{module}.{name} 在 {seen[name].where} 和 {cell.where} 里都有定义；"
                        "一个名字只能由一个标记格子定义"
                    )
                seen[name] = cell
    return dict(sorted(modules.items()))


def module_docstring(module, group):
    """生成的模块说明：每个名字由哪本笔记本（连同它的标题）定义，以及不要手改的提醒。"""
    by_notebook = {}
    for cell in group:
        by_notebook.setdefault((cell.stem, cell.title), []).extend(cell.names)
    lines = [
        f"课程层 `{module}`：笔记本里标了 `# harness_lib: save {module}` 的格子，按笔记本和格子的顺序拼在一起。",
        "",
        "每个名字由哪本笔记本定义：",
        "",
    ]
    items = [
        f"- {'、'.join(f'`{n}`' for n in names) or '（只有导入）'}：{stem}《{title}》"
        for (stem, title), names in by_notebook.items()
    ]
    lines += [item + ("；" if i < len(items) - 1 else "。") for i, item in enumerate(items)]
    lines += [
        "",
        "每段代码前的 `# %%` 注释写明它来自哪本笔记本的第几格（从 0 数起）。",
        "本文件由 `make lesson`（`python scripts/export_lesson.py`）从这些标记格子生成，不要手改：",
        "要改就改笔记本里的格子，再重新生成。",
    ]
    text = "\n".join(lines)
    if '"""' in text or "\\" in text:
        raise ExportError(f"{module}：笔记本标题里有 \"\"\" 或反斜杠，放不进模块说明")
    return f'"""{text}\n"""\n'


def render_module(module, group):
    """一个课程层模块的完整文本。"""
    parts = [module_docstring(module, group)]
    defined = set()
    for cell in group:
        code = export_code(cell, defined)
        parts.append(f"\n\n# %% notebooks/{cell.notebook} 第 {cell.index} 格\n{code}\n")
        defined.update(cell.names)
    text = "".join(parts)
    try:
        compile(text, f"harness_lib/lesson/{module}.py", "exec")
    except SyntaxError as exc:
        raise ExportError(f"生成的 harness_lib/lesson/{module}.py 无法编译（第 {exc.lineno} 行）：{exc.msg}") from None
    return text


def _lesson_imports(group):
    """一个模块的格子从哪些别的课程层模块导入。"""
    found = set()
    for cell in group:
        for node in cell.tree.body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("harness_lib.lesson."):
                found.add(node.module.rsplit(".", 1)[1])
            elif isinstance(node, ast.Import):
                found.update(a.name.rsplit(".", 1)[1] for a in node.names if a.name.startswith("harness_lib.lesson."))
    found.discard(group[0].module)
    return found


def _check_no_cycles(modules):
    """课程层模块之间的导入不能成环。"""
    graph = {module: _lesson_imports(group) for module, group in modules.items()}
    for module, targets in graph.items():
        for target in targets:
            if target not in graph:
                raise ExportError(f"{module} 的格子从 harness_lib.lesson.{target} 导入，但没有格子生成这个模块")
    state = {}

    def visit(module, path):
        state[module] = "visiting"
        for target in sorted(graph[module]):
            if state.get(target) == "visiting":
                cycle = " → ".join([*path[path.index(target):], target])
                raise ExportError(f"课程层模块之间的导入成了环：{cycle}")
            if target not in state:
                visit(target, [*path, target])
        state[module] = "done"

    for module in graph:
        if module not in state:
            visit(module, [module])


def generate(root=ROOT):
    """{相对路径: 文本}：笔记本现在应当生成的全部课程层模块。"""
    modules = group_by_module(read_marked_cells(root))
    if not modules:
        raise ExportError("笔记本里没有任何标记格子，课程层无从生成")
    _check_no_cycles(modules)
    return {(LESSON_DIR / f"{module}.py").as_posix(): render_module(module, group) for module, group in modules.items()}


def stale_modules(root, expected):
    """课程层目录里有、但没有任何标记格子生成的模块（__init__.py 除外）。"""
    folder = Path(root) / LESSON_DIR
    return sorted(
        (LESSON_DIR / p.name).as_posix()
        for p in folder.glob("*.py")
        if p.name != "__init__.py" and (LESSON_DIR / p.name).as_posix() not in expected
    )


def check(root, out):
    """比较生成结果和磁盘上的文件；一致返回 True，否则把 unified diff 写到 out。"""
    expected = generate(root)
    same = True
    for rel, text in expected.items():
        path = Path(root) / rel
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != text:
            same = False
            out.writelines(difflib.unified_diff(
                current.splitlines(keepends=True), text.splitlines(keepends=True),
                fromfile=f"{rel}（现在）", tofile=f"{rel}（由笔记本生成）",
            ))
    for rel in stale_modules(root, expected):
        same = False
        out.write(f"{rel}：没有任何标记格子生成它；把定义移进笔记本的标记格子，或者删掉这个文件\n")
    return same


def write(root, out):
    """把生成结果写进课程层目录；返回改动了的文件。"""
    expected = generate(root)
    stale = stale_modules(root, expected)
    if stale:
        raise ExportError(f"{'、'.join(stale)}：没有任何标记格子生成它；把定义移进笔记本的标记格子，或者删掉这个文件")
    changed = []
    for rel, text in expected.items():
        path = Path(root) / rel
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8", newline="\n")
            changed.append(rel)
    out.write(f"已重新生成：{'、'.join(changed)}\n" if changed else "课程层已是最新，没有改动\n")
    return changed


def main(argv=None):
    parser = argparse.ArgumentParser(description="从笔记本的标记格子生成 harness_lib/lesson/ 里的课程层模块")
    parser.add_argument("--check", action="store_true", help="只比较，有差异就打印 diff 并以 1 退出")
    parser.add_argument("--root", type=Path, default=ROOT, help="项目根目录（默认是本脚本的上一级目录）")
    args = parser.parse_args(argv)
    try:
        if args.check:
            if not check(args.root, sys.stdout):
                print("\n课程层与笔记本不一致：运行 `make lesson` 重新生成，再提交。", file=sys.stderr)
                return 1
            print("课程层与笔记本一致")
            return 0
        write(args.root, sys.stdout)
        return 0
    except ExportError as exc:
        print(f"错误：{exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
