"""收作业的第一步：读提交文件夹（和里面嵌套的压缩包），认出每个学生和他交的文件，读出提交时间。

只读文件，不执行任何东西；认学生的规则写在 collect.py 的说明里。
"""

from __future__ import annotations

import io
import os
import re
import unicodedata
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Callable

from . import NEEDS_NBGRADER

try:
    from nbgrader.utils import parse_utc
except ImportError as exc:
    raise SystemExit(NEEDS_NBGRADER) from exc

MAX_ZIP_BYTES = 200 * 1024 * 1024       # 嵌套压缩包展开前的上限
MAX_ZIP_MEMBERS = 2000
MAX_ZIP_DEPTH = 3
SKIP_DIRS = {"__MACOSX", ".ipynb_checkpoints", "__pycache__", ".git"}
MOODLE = re.compile(r"^(?P<name>.+?)_(?P<id>\d+)_assignsubmission_[A-Za-z]+_?(?P<rest>.*)$")
CANVAS = re.compile(r"^(?P<name>[^_]*[^\W\d_][^_]*?)(?P<late>_LATE)?_(?P<uid>\d+)_(?P<sub>\d+)_(?P<rest>.+)$")
LEADING_ID = re.compile(r"^(?P<id>\d{4,})(?:[ _\-]+(?P<rest>.+))?\.ipynb$", re.I)



# ---------------------------------------------------------------- 虚拟文件树：文件夹和压缩包一样看待


@dataclass
class _Entry:
    parts: tuple[str, ...]            # 相对 submissions 的路径，压缩包算一层文件夹（名字带 .zip）
    mtime: datetime | None
    read: Callable[[], bytes] | None  # 不需要读的文件是 None
    size: int = 0
    problem: str = ""                 # 读不了的原因（符号链接、压缩包坏了……）


def _skip(name: str) -> bool:
    return name in SKIP_DIRS or name.startswith(".")


def _wanted(name: str) -> bool:
    low = name.lower()
    return low.endswith((".ipynb", ".zip")) or low == "timestamp.txt"


def _walk_folder(root: Path) -> list[_Entry]:
    entries = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not _skip(d))
        rel = Path(folder).relative_to(root).parts
        for d in dirs:
            if (Path(folder) / d).is_symlink():
                entries.append(_Entry(rel + (d,), None, None, problem="是符号链接，没有读"))
        dirs[:] = [d for d in dirs if not (Path(folder) / d).is_symlink()]
        for name in sorted(files):
            if _skip(name):
                continue
            path = Path(folder) / name
            if path.is_symlink():
                entries.append(_Entry(rel + (name,), None, None, problem="是符号链接，没有读"))
                continue
            try:
                st = path.stat()
            except OSError as exc:
                entries.append(_Entry(rel + (name,), None, None, problem=f"读不了（{exc.strerror}）"))
                continue
            mtime = datetime.fromtimestamp(st.st_mtime, timezone.utc).astimezone()
            entries.append(_Entry(rel + (name,), mtime, (lambda p=path: p.read_bytes()) if _wanted(name) else None,
                                  st.st_size))
    return entries


def _zip_name(info: zipfile.ZipInfo) -> str:
    """压缩包里的文件名。中文 Windows 的压缩工具常用 GBK 存名字又不做标记，Python 会按 cp437 读成乱码。"""
    name = info.filename
    if not info.flag_bits & 0x800:
        try:
            raw = name.encode("cp437")
        except UnicodeEncodeError:
            return name
        for enc in ("utf-8", "gb18030"):
            try:
                return raw.decode(enc)
            except UnicodeDecodeError:
                pass
    return name


def _zip_entries(data: bytes, prefix: tuple[str, ...], depth: int) -> list[_Entry]:
    """压缩包的内容：只在内存里读，不解压到磁盘，`..` 和绝对路径都当作普通的名字处理。"""
    zf = zipfile.ZipFile(io.BytesIO(data))
    infos = [i for i in zf.infolist() if not i.is_dir()]
    if len(infos) > MAX_ZIP_MEMBERS:
        raise zipfile.BadZipFile(f"里面有 {len(infos)} 个文件，太多了")
    entries = []
    for info in infos:
        parts = tuple(p for p in PurePosixPath(_zip_name(info).replace("\\", "/")).parts
                      if p not in ("", "/", ".", ".."))
        if not parts or any(_skip(p) for p in parts):
            continue
        try:
            mtime = datetime(*info.date_time).astimezone()
        except ValueError:
            mtime = None
        reader = (lambda i=info: zf.read(i)) if _wanted(parts[-1]) else None
        entries.append(_Entry(prefix + parts, mtime, reader, info.file_size))
    return _expand_zips(entries, depth + 1)


def _expand_zips(entries: list[_Entry], depth: int = 0) -> list[_Entry]:
    """把压缩包换成它里面的文件（路径里压缩包算一层文件夹）；坏的压缩包留一条带原因的记录。"""
    out = []
    for e in entries:
        if e.read is None or not e.parts[-1].lower().endswith(".zip"):
            out.append(e)
            continue
        if depth >= MAX_ZIP_DEPTH or e.size > MAX_ZIP_BYTES:
            out.append(_Entry(e.parts, e.mtime, None, e.size, problem="压缩包套得太深或太大，没有打开"))
            continue
        try:
            out.extend(_zip_entries(e.read(), e.parts, depth))
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
            out.append(_Entry(e.parts, e.mtime, None, e.size, problem=f"压缩包打不开（{exc}）"))
    return out


# ---------------------------------------------------------------- 认出学生


def clean_student_id(raw: str) -> str:
    """学号整理干净：去掉首尾空白，空白换成 `_`，只留文字、数字和 `._-`。"""
    text = unicodedata.normalize("NFKC", raw).strip()
    text = re.sub(r"\s+", "_", text)
    text = re.sub(r"[^\w.\-]", "", text)
    text = re.sub(r"_+", "_", text).lstrip(".-_").rstrip("._")
    return text[:64] or "unknown"


@dataclass
class Student:
    entries: list[_Entry] = field(default_factory=list)   # parts 已去掉学生那一层
    sources: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    canvas_late: bool = False


def _who(entry: _Entry) -> tuple[str | None, tuple[str, ...], str, bool]:
    """一项属于谁：(原始学号, 学生文件夹里的路径, 来源种类, Canvas 是否标了迟交)；认不出时学号是 None。

    来源种类是 "folder"（文件夹或压缩包，名字就是学号）、"lms-folder" 或 "lms-file"。
    """
    top, rest = entry.parts[0], entry.parts[1:]
    is_zip = top.lower().endswith(".zip")
    is_folder = bool(rest) or is_zip          # 打不开的压缩包也算这个学生的，原因记在他名下
    name = top[:-4] if is_zip else top
    rest = rest or (top,)
    m = MOODLE.match(name)
    if m and (is_folder or m["rest"]):
        return f"{m['name']}_{m['id']}", rest if is_folder else (m["rest"],), \
            "lms-folder" if is_folder else "lms-file", False
    m = CANVAS.match(name)
    if m:
        return f"{m['name']}_{m['uid']}", rest if is_folder else (m["rest"],), \
            "lms-folder" if is_folder else "lms-file", bool(m["late"])
    if is_folder:
        return name, rest, "folder", False
    m = LEADING_ID.match(top)
    if m:
        return m["id"], (m["rest"] + top[-6:] if m["rest"] else top,), "lms-file", False
    return None, entry.parts, "", False


def find_students(submissions: Path) -> tuple[dict[str, Student], list[str]]:
    """按模块说明里的规则把提交文件分给学生。返回 ({学号: 这个学生的文件}, 认不出是谁的文件名)。"""
    submissions = Path(submissions)
    if submissions.is_file() and submissions.suffix.lower() == ".zip":
        entries = _zip_entries(submissions.read_bytes(), (), 0)
    elif submissions.is_dir():
        entries = _expand_zips(_walk_folder(submissions))
    else:
        raise FileNotFoundError(f"找不到提交文件夹（或压缩包）：{submissions}")
    students: dict[str, Student] = {}
    strays = []
    for e in entries:
        raw, rest, kind, late = _who(e)
        if raw is None:
            if e.parts[-1].lower().endswith(".ipynb") or e.problem:
                strays.append("/".join(e.parts))
            continue
        sid = clean_student_id(raw)
        st = students.setdefault(sid, Student())
        top = e.parts[0]
        if kind != "lms-file" and top not in st.sources:
            st.sources.add(top)
            shown = top[:-4] if top.lower().endswith(".zip") else top
            if kind == "folder" and shown != sid:
                st.notes.append(f"学号从 `{shown}` 整理成 `{sid}`")
        st.canvas_late |= late
        st.entries.append(_Entry(rest, e.mtime, e.read, e.size, e.problem))
    if submissions.is_dir():   # 空的学生文件夹也是一个学生：什么都没交
        for d in submissions.iterdir():
            if d.is_dir() and not d.is_symlink() and not _skip(d.name):
                raw, _, kind, _ = _who(_Entry((d.name, "-"), None, None))
                sid = clean_student_id(raw)
                if sid not in students:
                    students[sid] = Student(sources={d.name})
                    if kind == "folder" and d.name != sid:
                        students[sid].notes.append(f"学号从 `{d.name}` 整理成 `{sid}`")
    for st in students.values():
        if len(st.sources) > 1:
            st.notes.append(f"同一个学号有 {len(st.sources)} 份来源，合在一起：{'、'.join(sorted(st.sources))}")
    return students, strays


# ---------------------------------------------------------------- 提交时间


def parse_timestamp(text: str) -> datetime | None:
    """nbgrader 的 timestamp.txt（`2024-06-01 10:00:00.000000 UTC`），也接受 ISO 格式。"""
    text = text.strip()
    if not text:
        return None
    try:
        ts = datetime.fromisoformat(text)
        return ts if ts.tzinfo else ts.astimezone()
    except ValueError:
        pass
    try:
        return parse_utc(text).replace(tzinfo=timezone.utc)
    except (ValueError, OverflowError, TypeError):
        return None


def aware(dt: datetime) -> datetime:
    return dt if dt.tzinfo else dt.astimezone()


def duration(delta) -> str:
    minutes = int(delta.total_seconds() // 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    parts = [f"{days} 天"] * bool(days) + [f"{hours} 小时"] * bool(hours) + [f"{mins} 分钟"] * (not days and bool(mins))
    return "".join(parts) or "不到 1 分钟"
