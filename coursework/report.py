"""给老师的结果：成绩表 grades.csv、每本笔记本一行的 notebooks.csv 和相似提交表 similar.csv。

三张表都用带 BOM 的 UTF-8（`utf-8-sig`）写：Excel 和 WPS 双击打开时中文不乱码。
写表时先写临时文件再换名，评分中途随时打开看到的都是完整的表。
学生能控制的文字（学号来自文件夹名）以 `=`、`+`、`-`、`@` 开头时前面加一个 `'`，
免得表格软件把它当公式执行。

grades.csv 的列：学号、状态、总分、满分、迟交、缺少的笔记本，然后每道题一列
（`03-ex1 (2分)`，顺序和笔记本里一样），最后是原因。没交的笔记本每题记 0 分（“缺少的笔记本”一列写明是哪几本）；
还没评到的学生（状态“评分中”）分数留空，和得了 0 分区分开。

相似提交：把每个学生答案格里的代码规范化（去掉注释、文档字符串，统一空白和格式），
切成连续 5 个词的片段，同一道题里的片段才算相同。两个学生共有的片段占较少一方的比例就是相似度。
全班超过一半人都写了的片段（和题目给的函数签名一样，人人都有）不算；没作答的答案格
（只有 `raise NotImplementedError()`）不算。相似只是提醒，要老师自己打开两份笔记本看。
"""

from __future__ import annotations

import ast
import csv
import io
import json
import os
import re
import tempfile
import tokenize
from collections import Counter, defaultdict
from itertools import combinations
from pathlib import Path

import nbformat

SHINGLE = 5             # 片段的长度（词数）
THRESHOLD = 0.8         # 相似度达到多少才列出来
MIN_COMMON = 40         # 至少共有多少个片段：一两行的短答案人人写得一样，不算
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def exercises(instructor: list[Path]) -> list[tuple[str, str, float]]:
    """每个计分的格子：(笔记本名, grade_id, 分值)，按笔记本的顺序、格子在笔记本里的顺序。"""
    out = []
    for path in instructor:
        nb = nbformat.read(Path(path), as_version=4)
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade"):
                out.append((Path(path).stem, meta["grade_id"], float(meta.get("points", 0))))
    return out


def _number(x) -> str:
    if x is None or x == "":
        return ""
    x = float(x)
    return str(int(x)) if x.is_integer() else f"{x:g}"


def _text(x) -> str:
    """学生能控制的文字：防止表格软件当成公式。"""
    text = "" if x is None else str(x)
    return "'" + text if text.startswith(FORMULA_START) else text


def exercise_header(grade_id: str, points: float) -> str:
    """一道题在成绩表里的列名，例如 `03-ex1 (2分)`。"""
    name = re.sub(r"[-_]tests?$", "", grade_id)
    return f"{name} ({_number(points)}分)"


def _atomic_write(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=".csv", dir=path.parent)
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8-sig") as f:
            write(csv.writer(f))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_grades(rows: list[dict], out: Path, exercise_list) -> None:
    """写 out/grades.csv：每个学生一行，列见模块说明。

    rows 的每一项：{"student", "status", "reason", "total", "max_total", "late", "missing",
    "scores": {grade_id: 分数}}；missing 可以是笔记本名的列表，也可以是写好的文字。
    """
    exercise_list = list(exercise_list)
    headers = [exercise_header(gid, pts) for _, gid, pts in exercise_list]
    if len(set(headers)) < len(headers):   # 不同笔记本里有同名的 grade_id：列名前加笔记本名
        headers = [f"{stem}/{h}" for (stem, _, _), h in zip(exercise_list, headers)]

    def write(w):
        w.writerow(["学号", "状态", "总分", "满分", "迟交", "缺少的笔记本", *headers, "原因"])
        for row in sorted(rows, key=lambda r: str(r.get("student", ""))):
            missing = row.get("missing") or []
            missing = missing if isinstance(missing, str) else "、".join(missing)
            scores = row.get("scores") or {}
            w.writerow([
                _text(row.get("student")), _text(row.get("status")),
                _number(row.get("total")), _number(row.get("max_total")),
                "是" if row.get("late") else "否", _text(missing),
                *(_number(scores.get(gid)) for _, gid, _ in exercise_list),
                _text(row.get("reason")),
            ])

    _atomic_write(Path(out) / "grades.csv", write)


def write_notebook_table(rows: list[dict], exercise_list, out: Path) -> None:
    """写 out/notebooks.csv：每个学生每本笔记本一行（student、notebook、score、max_score、status、reason）。"""
    exercise_list = list(exercise_list)

    def write(w):
        w.writerow(["student", "notebook", "score", "max_score", "status", "reason"])
        for row in rows:
            for stem in dict.fromkeys(s for s, _, _ in exercise_list):
                score = sum(row["scores"].get(g, 0) for s, g, _ in exercise_list if s == stem)
                points = sum(p for s, _, p in exercise_list if s == stem)
                status, why = row["notebooks"].get(stem, ("完成", ""))
                w.writerow([_text(row["student"]), stem, _number(score), _number(points), _text(status), _text(why)])

    _atomic_write(Path(out) / "notebooks.csv", write)


def _raw_id(cell: str) -> str:
    """成绩表里的学号还原成原样（去掉 `_text` 为防公式加的 `'`），排序和 write_grades 一致。"""
    return cell[1:] if cell.startswith("'") and cell[1:].startswith(FORMULA_START) else cell


def merge_tables(folders, out: Path) -> None:
    """几个评分输出目录里的 grades.csv 和 notebooks.csv 合成一份，写进 out，按学号排好（同一个学生的行保持原来的顺序）。

    表头不同（不是同一套教师版笔记本评出来的）或者同一个学号出现在两个目录里，就停下并说明。"""
    folders = [Path(f) for f in folders]
    for name in ("grades.csv", "notebooks.csv"):
        header, rows, owner = None, [], {}
        for folder in folders:
            with (folder / name).open(encoding="utf-8-sig", newline="") as f:
                table = list(csv.reader(f))
            if not table:
                continue
            if header is None:
                header = table[0]
            elif table[0] != header:
                raise SystemExit(f"{folder / name} 的表头和 {folders[0] / name} 不同：不是同一套笔记本评出来的，不能合在一起")
            for row in table[1:]:
                sid = _raw_id(row[0])
                if name == "grades.csv" and owner.setdefault(sid, folder) != folder:
                    raise SystemExit(f"学号 {sid} 在 {owner[sid]} 和 {folder} 里都有：先删掉其中一份")
                rows.append(row)
        rows.sort(key=lambda r: _raw_id(r[0]))

        def write(w, header=header, rows=rows):
            w.writerow(header or [])
            w.writerows(rows)

        _atomic_write(Path(out) / name, write)


# ---------------------------------------------------------------- 相似提交


def _is_stub(stmt: ast.stmt) -> bool:
    """没有作答的语句：导入、文档字符串、pass、`...`、`raise NotImplementedError()`。"""
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Pass)):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return True
    if isinstance(stmt, ast.Raise) and stmt.exc is not None:
        exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def answered(source: str) -> bool:
    """一个答案格是不是作答了：有函数时看有没有哪个函数写了实际的语句，没有函数时看顶层语句。"""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return bool(source.strip()) and "NotImplementedError" not in source
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if functions:
        return any(not all(_is_stub(s) for s in f.body) for f in functions)
    return not all(_is_stub(s) for s in tree.body if not isinstance(s, ast.Assign))


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def normalized(source: str) -> str:
    """规范化的代码：去掉注释和文档字符串，格式统一（`ast.unparse`）；语法不对时只去掉注释和空白。"""
    try:
        return ast.unparse(_strip_docstrings(ast.parse(source)))
    except SyntaxError:
        lines = [re.sub(r"#.*$", "", line).strip() for line in source.splitlines()]
        return "\n".join(line for line in lines if line)


def _tokens(code: str) -> list[str]:
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENCODING, tokenize.ENDMARKER}
    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type not in skip]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return re.findall(r"\w+|[^\w\s]", code)


def _answers(sub) -> dict[str, str]:
    """一个学生每个作答了的答案格：{grade_id: 规范化的代码}。"""
    out = {}
    for path in sub.notebooks.values():
        try:
            cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        for cell in cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if not meta.get("solution"):
                continue
            source = cell.get("source", "")
            source = "".join(source) if isinstance(source, list) else str(source)
            if answered(source):
                out[meta["grade_id"]] = normalized(source)
    return out


def _shingles(answers: dict[str, str]) -> set[tuple]:
    out = set()
    for gid, code in answers.items():
        tokens = _tokens(code)
        if len(tokens) < SHINGLE:
            out.add((gid, *tokens))
        for i in range(len(tokens) - SHINGLE + 1):
            out.add((gid, *tokens[i:i + SHINGLE]))
    return out


def similar_submissions(subs, *, threshold: float = THRESHOLD,
                        min_common: int = MIN_COMMON) -> list[tuple[str, str, float]]:
    """答案几乎一样的学生：[(学号甲, 学号乙, 相似度 0–1)]，相似度从高到低。

    subs 是 collect() 返回的 Submission（只用 student 和 notebooks）。两份规范化后完全相同的答案相似度是 1。
    """
    shingles = {sub.student: _shingles(_answers(sub)) for sub in subs}
    shingles = {sid: s for sid, s in shingles.items() if s}
    # 全班超过一半人都有的片段是题目给的架子，不算（人少时不做这一步）
    if len(shingles) >= 4:
        counts = Counter(x for s in shingles.values() for x in s)
        common = {x for x, n in counts.items() if n > len(shingles) / 2}
        shingles = {sid: s - common for sid, s in shingles.items()}
    # 倒排索引：只比较至少共有一个片段的两个人
    owners = defaultdict(list)
    for sid, s in shingles.items():
        for x in s:
            owners[x].append(sid)
    shared = Counter()
    for sids in owners.values():
        for pair in combinations(sorted(sids), 2):
            shared[pair] += 1
    pairs = []
    for (a, b), n in shared.items():
        smaller = min(len(shingles[a]), len(shingles[b]))
        score = n / smaller if smaller else 0.0
        if score >= threshold and n >= min_common:
            pairs.append((a, b, round(score, 3)))
    return sorted(pairs, key=lambda p: (-p[2], p[0], p[1]))


def write_similarity(pairs, out: Path) -> None:
    """写 out/similar.csv：学号甲、学号乙、相似度（百分数），最像的在最上面。"""
    def write(w):
        w.writerow(["学号甲", "学号乙", "相似度"])
        for a, b, score in pairs:
            w.writerow([_text(a), _text(b), f"{score:.0%}"])

    _atomic_write(Path(out) / "similar.csv", write)
