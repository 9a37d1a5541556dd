"""GitHub Classroom：一个学生评完之后，写出 Classroom 认得的分数和给学生看的摘要。

`python -m coursework.course grade-one` 评完一个学生后调用 `write`，在 `--out` 里写出：

- `classroom.env`：每道题一行 `<ID>_RESULTS=<base64>`，工作流把它追加进 `$GITHUB_ENV`；
- `runners.txt`：这些 ID，用逗号连起来，交给报告步骤的 `runners`；
- `summary.md`：每本笔记本的得分和没拿到分的题的说明，工作流把它追加进 `$GITHUB_STEP_SUMMARY`。
  说明取自 `feedback/<学号>/` 里评分后的笔记本，和发回给学生的反馈是同一份：默认的 safe 方式下没有隐藏测试，
  没通过的测试格只留错误类型和断言里写的那句话（`feedback.py`）。

格式依据（2026-12-06 核对）：classroom-resources/autograding-grading-reporter，
工作流用的是它的 v1 标签（提交 d13b5912，2024-11-13），main 分支到 2025-09-02（提交 43c2d9f5）这几处没有变：

- `src/main.js`：对 `runners` 里的每个 ID，读环境变量 `<ID 的大写>_RESULTS`，按 base64 解码成 JSON；
- JSON 的样子和官方的 classroom-resources/autograding-command-grader 写出的一样（它的 `generateResult`）：
  `{"version": 1, "status": "pass"|"fail"|"error", "max_score": 分值, "tests": [{"name", "status", "score",
  "message", "test_code", "filename", "line_no", "duration"}]}`；
- `src/notify-classroom.js`：交给 Classroom 的得分是各 runner 里每个测试的 `score` 之和，满分是各 runner 的
  `max_score` 之和，写成一条标题为 “Autograding complete” 的注释 `Points 得分/满分`；
- `src/aggregate-results.js`：日志里的表格另按“通过的测试数 / 测试数 × max_score”算每个 runner 的分。
  所以这里每道题一个 runner、每个 runner 一个测试：两种算法得到同一个数。

分数来自成绩库（`course.py` 的成绩行），和 `make autograde` 写进 `grades.csv` 的是同一个数。
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import nbformat

from .report import exercise_header

MESSAGE_LIMIT = 1000  # 摘要里每条说明最多保留的字符数
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def runner_id(grade_id: str, taken: set) -> str:
    """一道题在 Classroom 报告里的 ID：只有字母和数字（报告步骤的 runners 只认这种），如 `nb03ex1`。"""
    name = re.sub(r"[-_]tests?$", "", grade_id)
    base = "nb" + re.sub(r"[^A-Za-z0-9]", "", name)
    rid, n = base, 1
    while rid.lower() in taken:
        n += 1
        rid = f"{base}n{n}"
    taken.add(rid.lower())
    return rid


def _number(x: float):
    return int(x) if float(x).is_integer() else round(float(x), 4)


def failure_messages(feedback_dir: Path, stem: str, grade_id: str) -> list[str]:
    """学生反馈里这道题的测试格没通过时留下的说明（`错误类型: 说明`），一条一行。"""
    path = feedback_dir / f"{stem}.ipynb"
    if not path.exists():
        return []
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001  读不了反馈就只给分数
        return []
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") != grade_id:
            continue
        messages = []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                text = ANSI.sub("", f"{out.get('ename', '')}: {out.get('evalue', '')}".strip(": "))
                messages.append(text[:MESSAGE_LIMIT])
        return messages
    return []


def results(row: dict, exercise_list, feedback_dir: Path) -> dict:
    """每道题一个 runner：{runner ID: Classroom 的结果 JSON}，顺序和成绩表的列一样。"""
    out, taken = {}, set()
    notebooks = row.get("notebooks") or {}
    for stem, grade_id, points in exercise_list:
        score = float((row.get("scores") or {}).get(grade_id, 0) or 0)
        status_word, reason = (list(notebooks.get(stem) or ("完成", "")) + [""])[:2]
        if score >= points:
            status, message = "pass", ""
        elif status_word not in ("完成", ""):
            status, message = "error", f"{stem}：{status_word}。{reason}".rstrip("。")
        else:
            status = "fail"
            message = "\n".join(failure_messages(feedback_dir, stem, grade_id)) or "没有通过"
        name = exercise_header(grade_id, points)
        out[runner_id(grade_id, taken)] = {
            "version": 1, "status": status, "max_score": _number(points),
            "tests": [{"name": name, "status": status, "score": _number(score), "message": message,
                       "test_code": "", "filename": f"{stem}.ipynb", "line_no": 0, "duration": 0}],
        }
    return out


def env_lines(runner_results: dict) -> list[str]:
    """`$GITHUB_ENV` 的行：`<ID 的大写>_RESULTS=<base64 的 JSON>`。"""
    return [f"{rid.upper()}_RESULTS=" + base64.b64encode(json.dumps(res, ensure_ascii=False).encode()).decode()
            for rid, res in runner_results.items()]


def _cell(text) -> str:
    """表格里的一格：不换行，竖线和尖括号转义（学生能影响的文字不能变成表格或网页标记）。"""
    text = " ".join(str(text).split())
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _fenced(text: str) -> str:
    """原样显示的一段文字：围栏比文字里最长的一串反引号还长，学生的文字跑不出代码块。"""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def summary(row: dict, exercise_list, feedback_dir: Path) -> str:
    """给学生看的摘要（Markdown）：总分、每本笔记本的得分和情况、没拿到满分的题的说明。"""
    runs = results(row, exercise_list, feedback_dir)
    total, max_total = row.get("total", 0), row.get("max_total", 0)
    lines = [f"## 自动评分：{_number(total)} / {_number(max_total)} 分", "",
             "和老师批改全班时（`make autograde`）用的是同一套测试、同一个沙盒，分数相同。", "",
             "| 笔记本 | 得分 | 情况 |", "| --- | --- | --- |"]
    notebooks = row.get("notebooks") or {}
    for stem in dict.fromkeys(s for s, _, _ in exercise_list):
        got = sum(float((row.get("scores") or {}).get(g, 0) or 0) for s, g, _ in exercise_list if s == stem)
        full = sum(p for s, _, p in exercise_list if s == stem)
        word, reason = (list(notebooks.get(stem) or ("完成", "")) + [""])[:2]
        state = word + (f"：{reason}" if reason else "")
        lines.append(f"| `{stem}` | {_number(got)} / {_number(full)} | {_cell(state)} |")
    # 没交、没评完的笔记本，原因已经在上表里：下面只列评完了却没拿到满分的题
    missed = [(res["tests"][0], res["max_score"]) for res in runs.values() if res["status"] == "fail"]
    if missed:
        lines += ["", "### 没拿到满分的题", ""]
        for test, points in missed:
            lines += [f"**{_cell(test['name'])}**：得 {test['score']} 分，满分 {points} 分", "", _fenced(test["message"]), ""]
        lines += ["隐藏测试的代码不公开：没通过时只给出断言里写的那句说明。",
                  "用公开测试或自己的例子在笔记本里重现它，改好了再推送一次。"]
    elif all(res["status"] == "pass" for res in runs.values()):
        lines += ["", "每道题都拿到了满分。"]
    lines += ["", "每本笔记本的逐题反馈（网页和评分后的笔记本）在这次运行的附件 `feedback` 里。", ""]
    return "\n".join(lines)


def write(row: dict, exercise_list, out: Path) -> dict:
    """在 out 里写 `classroom.env`、`runners.txt`、`summary.md`（见模块说明），返回每道题的结果。"""
    out = Path(out)
    feedback_dir = out / "feedback" / row["student"]
    runs = results(row, exercise_list, feedback_dir)
    (out / "classroom.env").write_text("\n".join(env_lines(runs)) + "\n", encoding="utf-8")
    (out / "runners.txt").write_text(",".join(runs) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(summary(row, exercise_list, feedback_dir), encoding="utf-8")
    return runs
