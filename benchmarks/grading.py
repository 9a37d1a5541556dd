"""第 6 项：给一个班评分（nbgrader + 评分沙盒），每个学生要多久，换算成 200 人。

学生都交教师版的全部 11 本笔记本（满分答案：每一格都真的跑完），用 `--jobs 4` 评分
（2 核机器上命令的默认值：每核两个评分进程），沙盒在内：每个学生一个沙盒，每本笔记本从沙盒里的内核工厂 fork 一个内核。目标是 200 人在 2 核机器上 1 小时以内，
也就是每个学生（几个评分进程一起算）不超过 18 秒。
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from .common import ROOT, Figure

GROUP = "grading 课程作业评分"
JOBS = 4  # 评分进程数：笔记本里有 sleep 和超时演示要等，2 核机器上开 4 个（约 12.5 s）比 2 个（约 17 s）快


def _course():
    from coursework import course

    return course


def run(quick: bool = False) -> list[Figure]:
    course = _course()
    reason = course.sandbox.available()
    students = 2 if quick else 8
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        tmp = Path(tmp)
        for i in range(students):
            folder = tmp / "subs" / f"s{i}"
            folder.mkdir(parents=True)
            for path in course.instructor_notebooks():
                shutil.copy2(path, folder / path.name)
        start = time.monotonic()
        course.autograde(tmp / "subs", tmp / "out", jobs=JOBS, unsandboxed=reason is not None)
        per_student = (time.monotonic() - start) / students
    note = "沙盒里" if reason is None else f"没有沙盒（{reason}）"
    return [
        Figure(GROUP, f"每个学生（11 本，--jobs {JOBS}，{note}）", per_student, "s", ("<=", 18.0)),
        Figure(GROUP, "200 个学生（按上一行换算）", per_student * 200 / 60, "min", ("<=", 60.0)),
    ]
