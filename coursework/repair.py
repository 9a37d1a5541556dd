"""收作业的第二步：读一本学生的笔记本，认出每一格是教师版的哪一格，再按教师版整理好。

整理：恢复丢掉的 nbgrader 标记，去掉重复的测试格，按教师版的顺序放回，补回删掉的格子，
最后用 nbformat 和 nbgrader 自己的检查过一遍。只改 JSON，不执行任何东西。
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from . import NEEDS_NBGRADER

import nbformat

try:
    from nbgrader.nbgraderformat import MetadataValidator
    from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions
except ImportError as exc:
    raise SystemExit(NEEDS_NBGRADER) from exc

MAX_NOTEBOOK_BYTES = 50 * 1024 * 1024   # 再大的笔记本多半是把大输出存了进去，不读
COPY_SUFFIX = re.compile(r"(\s*\(\d+\)|\s*-\s*\d+|\s*[-_ ]?副本\d*|\s*[-_ ]?copy\d*|^copy of\s+)", re.I)
KEY_FIELDS = ("grade_id", "grade", "solution", "locked", "task", "points", "schema_version")
CELL_ID = re.compile(r"^[a-zA-Z0-9-_]{1,64}$")



# ---------------------------------------------------------------- 教师版


@dataclass
class _Cell:
    cell_type: str
    source: str
    metadata: dict
    id: str | None
    attachments: dict | None = None

    @property
    def nbgrader(self) -> dict:
        meta = self.metadata.get("nbgrader")
        return meta if isinstance(meta, dict) else {}


def _tracked(meta: dict) -> bool:
    """nbgrader 自己会追踪的格子：答案格、测试格、只读格、任务格。"""
    return bool(meta.get("grade_id")) and any(meta.get(k) for k in ("grade", "solution", "locked", "task"))


def _norm(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.splitlines() if line.strip())


def _defined_names(source: str) -> set[str]:
    return set(re.findall(r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", source, re.M))


@dataclass
class Template:
    stem: str
    cells: list[_Cell]                 # 学生版：参考答案换成占位，隐藏测试删掉
    metadata: dict
    tracked: list[str]                 # 按教师版顺序的 grade_id
    by_gid: dict[str, int]             # grade_id → 在 cells 里的位置
    id_to_gid: dict[str, str]          # 格子 id → grade_id（只有被追踪的格子）
    ids: set[str]                      # 全部格子 id
    test_sources: dict[str, str]       # 测试格/只读格的 grade_id → 整理过空白的代码
    solution_names: dict[str, set[str]]  # 答案格的 grade_id → 它定义的函数名

    def kind(self, gid: str) -> str:
        meta = self.cells[self.by_gid[gid]].nbgrader
        return "solution" if meta.get("solution") else "fixed"


def template(path: Path) -> Template:
    nb = nbformat.read(path, as_version=4)
    nb, _ = ClearSolutions().preprocess(nb, {})
    nb, _ = ClearHiddenTests().preprocess(nb, {})
    cells = [_Cell(c.cell_type, c.source, _plain(c.metadata), c.get("id"), _plain(c.get("attachments")))
             for c in nb.cells]
    tracked, by_gid, id_to_gid, tests, names = [], {}, {}, {}, {}
    for i, c in enumerate(cells):
        meta = c.nbgrader
        if not _tracked(meta):
            continue
        gid = meta["grade_id"]
        tracked.append(gid)
        by_gid[gid] = i
        if c.id:
            id_to_gid[c.id] = gid
        if meta.get("solution"):
            names[gid] = _defined_names(c.source)
        elif _norm(c.source):
            tests[gid] = _norm(c.source)
    return Template(path.stem, cells, _plain(nb.metadata), tracked, by_gid, id_to_gid,
                     {c.id for c in cells if c.id}, tests, names)


def _plain(obj):
    """NotebookNode 换成普通的 dict/list，方便深拷贝和比较。"""
    return json.loads(json.dumps(obj)) if obj is not None else None


# ---------------------------------------------------------------- 读学生的笔记本


def parse(data: bytes) -> tuple[list[_Cell] | None, list[str], str]:
    """读一份笔记本：(格子, 说明, 读不了的原因)。宽容地读：格式不全的笔记本也尽量取出格子。"""
    notes = []
    if len(data) > MAX_NOTEBOOK_BYTES:
        return None, notes, f"文件太大（{len(data) // 2**20} MB），没有读"
    if not data.strip():
        return None, notes, "是空文件"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        try:
            text = data.decode("gb18030")
            notes.append("不是 UTF-8 编码，按 GBK 读的")
        except UnicodeDecodeError:
            return None, notes, "不是文本文件"
    try:
        doc = json.loads(text)
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        return None, notes, "不是合法的 JSON" + (f"（第 {line} 行）" if line else "")
    if not isinstance(doc, dict) or not isinstance(doc.get("cells", doc.get("worksheets")), list):
        return None, notes, "不是 Jupyter 笔记本（没有 cells）"
    if doc.get("nbformat", 4) != 4 or "worksheets" in doc:
        try:
            doc = _plain(nbformat.reads(text, as_version=4))
            notes.append("是旧版笔记本格式，转换成了第 4 版")
        except Exception as exc:  # nbformat 对坏文件抛的异常种类很多
            return None, notes, f"旧版笔记本转换失败（{type(exc).__name__}）"
    cells, dropped = [], 0
    for raw in doc.get("cells") or []:
        if not isinstance(raw, dict) or raw.get("cell_type") not in ("code", "markdown", "raw"):
            dropped += 1
            continue
        source = raw.get("source", "")
        if isinstance(source, list):
            source = "".join(s for s in source if isinstance(s, str))
        elif not isinstance(source, str):
            source = ""
        metadata = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
        cid = raw.get("id") if isinstance(raw.get("id"), str) else None
        attachments = raw.get("attachments") if isinstance(raw.get("attachments"), dict) else None
        cells.append(_Cell(raw["cell_type"], source, metadata, cid, attachments))
    if dropped:
        notes.append(f"有 {dropped} 格格式不对，去掉了")
    return cells, notes, ""


def answered(cells: list[_Cell], tpl: Template) -> int:
    """大概答了几题：答案格里不再是占位的格数，用来在重复提交里挑一份。"""
    stubs = {_norm(tpl.cells[tpl.by_gid[g]].source) for g in tpl.tracked if tpl.kind(g) == "solution"}
    return sum(1 for c in cells if c.nbgrader.get("solution") and _norm(c.source) not in stubs)


def _similar(a: str, b: str) -> bool:
    if a == b:
        return True
    return len(a) > 40 and difflib.SequenceMatcher(None, a, b, autojunk=False).quick_ratio() > 0.9 and \
        difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() > 0.9


def evidence(cells: list[_Cell], tpl: Template) -> tuple[int, str]:
    """一份学生笔记本和一本教师版有多少共同点：(分数, 主要凭据)。"""
    gids = {c.nbgrader.get("grade_id") for c in cells} & set(tpl.tracked)
    ids = {c.id for c in cells if c.id} & tpl.ids
    sources = {_norm(c.source) for c in cells if c.cell_type == "code"}
    tests = [g for g, s in tpl.test_sources.items() if s in sources]
    defined = set().union(*(_defined_names(c.source) for c in cells if c.cell_type == "code"))
    answers = [g for g, want in tpl.solution_names.items() if want and want <= defined]
    score = 3 * len(gids) + len(ids) + 2 * len(tests) + len(answers)
    if gids:
        return score, " grade_id "
    if ids:
        return score, "格子 id "
    if tests:
        return score, "测试格的代码"
    if answers:
        return score, "答案里的函数名"
    return 0, ""


def name_match(filename: str, templates: list[Template]) -> Template | None:
    stem = filename.rsplit("/", 1)[-1]
    stem = stem[:-6] if stem.lower().endswith(".ipynb") else stem
    stem = COPY_SUFFIX.sub("", stem).strip()
    for tpl in templates:
        if stem.lower() == tpl.stem.lower():
            return tpl
    numbers = {int(n) for n in re.findall(r"\d+", stem)}
    if len(numbers) == 1:
        (n,) = numbers
        hits = [t for t in templates if t.stem[:2].isdigit() and int(t.stem[:2]) == n]
        if len(hits) == 1:
            return hits[0]
    return None


# ---------------------------------------------------------------- 整理一本笔记本


def _identify(cells: list[_Cell], tpl: Template) -> list[tuple[str | None, str]]:
    """每个学生格子对应教师版哪个被追踪的格子：[(grade_id 或 None, 怎么认出来的)]。"""
    found = []
    for c in cells:
        gid = c.nbgrader.get("grade_id")
        if gid in tpl.by_gid and _tracked(c.nbgrader):
            found.append((gid, "metadata"))
        elif c.id in tpl.id_to_gid:
            found.append((tpl.id_to_gid[c.id], "id"))
        else:
            found.append((None, ""))
    taken = {g for g, _ in found if g}
    # 标记和格子 id 都没了：测试格看代码，答案格看定义的函数名（取最后一格：答案写在讲解之后）。
    # 格子 id 还是教师版讲解格的那些格子不算
    free = [i for i, c in enumerate(cells)
            if not found[i][0] and c.cell_type == "code" and c.id not in tpl.ids]
    for i in free:   # 测试格的副本也认出来：之后只留一格
        norm = _norm(cells[i].source)
        for gid, src in tpl.test_sources.items():
            if _similar(norm, src):
                found[i] = (gid, "source")
                taken.add(gid)
                break
    for gid, want in tpl.solution_names.items():
        if gid in taken or not want:
            continue
        hits = [i for i in free if not found[i][0] and want <= _defined_names(cells[i].source)]
        if hits:
            found[hits[-1]] = (gid, "source")
            taken.add(gid)
    return found


def _fresh_id(used: set[str], hint: str) -> str:
    n = len(used)
    while True:
        candidate = f"{hint[:50]}-{n}"
        if candidate not in used:
            return candidate
        n += 1


def _make_cell(cell_type: str, source: str, metadata: dict, cid: str, attachments=None) -> dict:
    """新的一格：代码格没有输出、没有执行序号。整本笔记本最后一起检查格式。"""
    cell = {"cell_type": cell_type, "id": cid, "metadata": copy.deepcopy(metadata), "source": source}
    if cell_type == "code":
        cell.update(execution_count=None, outputs=[])
    elif attachments and cell_type == "markdown":
        cell["attachments"] = copy.deepcopy(attachments)
    return cell


def _fixed_metadata(tpl_cell: _Cell) -> dict:
    meta = copy.deepcopy(tpl_cell.metadata)
    meta.pop("nbgrader", None)
    meta["nbgrader"] = copy.deepcopy(tpl_cell.nbgrader)
    meta["deletable"] = False
    if tpl_cell.nbgrader.get("locked"):
        meta["editable"] = False
    return meta


def _kept(cells: list[_Cell], found: list, tpl: Template, notes: list[str]) -> dict[str, int]:
    """每个 grade_id 留哪一格：测试格留格子 id 没变的那格（没有就第一格），答案格留最后一格。"""
    places: dict[str, list[int]] = {}
    for i, (gid, _) in enumerate(found):
        if gid:
            places.setdefault(gid, []).append(i)
    keep = {}
    for gid, idx in places.items():
        if tpl.kind(gid) == "solution":
            strong = [i for i in idx if found[i][1] != "source"] or idx
            keep[gid] = strong[-1]
            if len(idx) > 1:
                notes.append(f"答案格 {gid} 有 {len(idx)} 格，用最后一格评分，其余照常运行")
        else:
            same_id = [i for i in idx if cells[i].id == tpl.cells[tpl.by_gid[gid]].id]
            keep[gid] = (same_id or idx)[0]
            if len(idx) > 1:
                notes.append(f"测试格 {gid} 出现 {len(idx)} 次，只留一次")
    return keep


def _items(cells: list[_Cell], found: list, keep: dict[str, int], tpl: Template, notes: list[str]) -> list:
    """(grade_id, 学生的格子, 位置) 的列表：留下的被追踪格子带着 grade_id，多余的测试格去掉或当草稿留着。"""
    kept_at = {i: g for g, i in keep.items()}
    restored = 0
    items: list[tuple[str | None, _Cell | None, int]] = []
    for i, c in enumerate(cells):
        gid = found[i][0]
        if i in kept_at:
            items.append((gid, c, i))
            want = {k: tpl.cells[tpl.by_gid[gid]].nbgrader.get(k) for k in KEY_FIELDS}
            have = {k: c.nbgrader.get(k) for k in KEY_FIELDS}
            restored += want != have
        elif gid and tpl.kind(gid) != "solution":
            # 多出来的测试格：原样的副本直接去掉；改过的可能是学生的草稿，去掉标记留着
            if _norm(c.source) != tpl.test_sources.get(gid, ""):
                items.append((None, c, i))
        else:
            items.append((None, c, i))
    if restored:
        notes.append(f"恢复了 {restored} 格的 nbgrader 标记")
    return items


def _in_teacher_order(items: list, tpl: Template, notes: list[str]) -> None:
    """被追踪的格子按教师版的顺序放回原来的这些位置（就地改 items）。"""
    slots = [k for k, (gid, _, _) in enumerate(items) if gid]
    present = [gid for gid, _, _ in items if gid]
    ordered = sorted(present, key=tpl.tracked.index)
    if ordered != present:
        by = {items[k][0]: items[k] for k in slots}
        for k, gid in zip(slots, ordered):
            items[k] = by[gid]
        notes.append("格子的顺序被调过，按教师版的顺序放回")


def _rebuilt(gid: str | None, c: _Cell, tpl: Template, used: set[str], notes: list[str]) -> dict:
    """一格的整理结果：答案格留学生的代码、换上教师版的标记；测试格和只读格换回原样；别的格子原样留着。"""
    if gid is None:
        meta = {k: v for k, v in c.metadata.items() if k != "nbgrader"}
        cid = c.id if c.id and CELL_ID.match(c.id) and c.id not in used and c.id not in tpl.id_to_gid else None
        return _make_cell(c.cell_type, c.source, meta, cid or "", c.attachments)
    t = tpl.cells[tpl.by_gid[gid]]
    if tpl.kind(gid) == "solution":
        meta = {k: v for k, v in c.metadata.items() if k != "nbgrader"}
        meta.update(_fixed_metadata(t))
        if c.cell_type != t.cell_type:
            notes.append(f"答案格 {gid} 被改成了 {c.cell_type} 格，改回 {t.cell_type}")
        return _make_cell(t.cell_type, c.source, meta, t.id, c.attachments)
    if _norm(c.source) != tpl.test_sources.get(gid, _norm(t.source)):
        notes.append(f"{'测试格' if t.nbgrader.get('grade') else '只读格'} {gid} 被改过，换回原样")
    return _make_cell(t.cell_type, t.source, _fixed_metadata(t), t.id, t.attachments)


def _restore_deleted(out: list, keep: dict[str, int], tpl: Template, notes: list[str]) -> None:
    """删掉的被追踪格子从学生版补回来：放在教师版里它前面那一格（学生笔记本里还在的）后面。"""
    for gid in tpl.tracked:
        if gid in keep:
            continue
        k = tpl.by_gid[gid]
        t = tpl.cells[k]
        if tpl.kind(gid) == "solution":
            notes.append(f"答案格 {gid} 不见了，补了空白的答案格（这题按没做算）")
        else:
            notes.append(f"补回了被删掉的{'测试格' if t.nbgrader.get('grade') else '只读格'} {gid}")
        new = _make_cell(t.cell_type, t.source, _fixed_metadata(t), t.id, t.attachments)
        where = {cell["id"]: j for j, (_, cell) in enumerate(out)}
        position = next((where[c.id] + 1 for c in reversed(tpl.cells[:k]) if c.id in where), None)
        if position is None:   # 前面的格子都不在了：放在教师版里排在它后面的第一个被追踪的格子前面
            later = set(tpl.tracked[tpl.tracked.index(gid) + 1:])
            position = next((j for j, (g, _) in enumerate(out) if g in later), len(out))
        out.insert(position, (gid, new))


def clean(cells: list[_Cell], tpl: Template) -> tuple[dict, list[str]]:
    """按教师版整理一本学生笔记本，返回 (nbformat 笔记本, 说明)。"""
    notes: list[str] = []
    found = _identify(cells, tpl)
    keep = _kept(cells, found, tpl, notes)
    items = _items(cells, found, keep, tpl, notes)
    _in_teacher_order(items, tpl, notes)
    out, used = [], set()
    for gid, c, _ in items:
        cell = _rebuilt(gid, c, tpl, used, notes)
        out.append((gid, cell))
        if cell["id"]:
            used.add(cell["id"])
    for _, cell in out:  # 没有可用 id 的格子最后统一取新的，不和任何已有的 id 重复
        if not cell["id"]:
            cell["id"] = _fresh_id(used | tpl.ids, "cell")
            used.add(cell["id"])
    _restore_deleted(out, keep, tpl, notes)
    nb = {"cells": [c for _, c in out], "metadata": copy.deepcopy(tpl.metadata), "nbformat": 4, "nbformat_minor": 5}
    return nb, notes


def validate(nb) -> str:
    """整理好的笔记本先用 nbformat 和 nbgrader 自己的检查过一遍：有问题返回原因。"""
    try:
        nbformat.validate(nb)
        MetadataValidator().validate_nb(nbformat.from_dict(nb))
    except Exception as exc:  # 两个检查器抛的异常种类不同，原因都写给老师
        return f"{type(exc).__name__}: {str(exc)[:200]}"
    return ""
