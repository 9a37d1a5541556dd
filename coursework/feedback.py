"""学生拿到的反馈：nbgrader 生成反馈网页时用的预处理器。

- `HideHiddenTests`（`--feedback safe`，默认）：隐藏测试的代码、输出和回溯都不给看，没通过的只给出断言里写的说明；
- `ScrubOutputs` / `ScrubFullOutputs`：学生自己的输出截短、去掉密钥一样的字符串和评分机器上的路径；
- `StderrIsNotFailure`：评分时打印到标准错误不算这一格出错。
"""

import functools

from harness_lib.safety.secrets import redact

from . import NEEDS_NBGRADER, instructor_notebooks

try:
    import nbformat
    from nbgrader.preprocessors import ClearHiddenTests
    from nbgrader.preprocessors.base import NbGraderPreprocessor
    from traitlets import Unicode
except ImportError as exc:
    raise SystemExit(NEEDS_NBGRADER) from exc


class HideHiddenTests(ClearHiddenTests):
    """给学生看的反馈里藏起隐藏测试，只留下没通过的那条断言的说明。

    在 nbgrader 的 ClearHiddenTests 上加两件事：被删掉的隐藏测试区换成一行占位注释，
    让学生知道这里还有测试；含隐藏测试的格子只保留错误的类型和说明。
    回溯会把出错那一行连同前后几行代码一起打印出来，打印和表格也可能来自隐藏测试，所以都不保留。
    """

    placeholder = Unicode(
        "# ……这里还有隐藏测试：批改时运行，代码不公开；没通过时下面只给出那条断言的说明",
        help="隐藏测试区被删掉后留下的一行",
    ).tag(config=True)

    def _remove_hidden_test_region(self, cell):
        kept, inside, removed = [], False, False
        for line in cell.source.split("\n"):
            if self.begin_test_delimeter in line:
                if inside:
                    continue  # 区里又写了一次开始标记：还在区里
                inside = removed = True
                indent = line[: len(line) - len(line.lstrip())]
                kept.append(indent + self.placeholder)
            elif self.end_test_delimeter in line:
                inside = False
            elif not inside:
                kept.append(line)
        cell.source = "\n".join(kept)  # 没有结束标记：从开始标记往后全当隐藏测试，一行不留
        return removed

    def preprocess_cell(self, cell, resources, cell_index):
        # 只看测试格：学生在自己的格子里写了这行标记（哪怕是注释），不关隐藏测试的事，也不能让批改停下
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
            return cell, resources
        had_hidden = self.begin_test_delimeter in cell.source
        if had_hidden and self._remove_hidden_test_region(cell):
            cell.outputs = [_message_only(o) for o in cell.outputs if o.output_type == "error"]
        return cell, resources


def _message_only(error):
    """一个错误输出只留类型和说明：`AssertionError: 说明`。"""
    message = error.evalue
    if not message and error.ename == "AssertionError":
        message = "（这条断言没有附说明）"
    line = f"\x1b[31m{error.ename}\x1b[39m" + (f": {message}" if message else "")
    error.traceback = [line]
    return error


@functools.lru_cache(maxsize=None)
def hidden_lines(notebooks: tuple) -> frozenset:
    """隐藏测试里才有的代码行（去掉首尾空白、至少 12 个字符）：学生的输出里出现了就要删掉。

    评分时每本反馈都要用它：同一组教师版笔记本只读一次。"""
    found = set()
    for path in notebooks:
        hidden, outside = set(), []
        for cell in nbformat.read(path, as_version=4).cells:
            inside = False
            for line in cell.source.splitlines():
                if "BEGIN HIDDEN TESTS" in line or "END HIDDEN TESTS" in line:
                    inside = "BEGIN" in line
                elif inside and len(line.strip()) >= 12:
                    hidden.add(line.strip())
                elif not inside:
                    outside.append(line)
        # 折行后的隐藏测试常有一截和看得见的代码一样（如 `assert count_roles(`）：那一截不是秘密
        found.update(h for h in hidden if not any(h in line for line in outside))
    return frozenset(found)


OUTPUT_LIMIT = 20_000  # 反馈里每个输出最多保留的字符数：整本反馈因此不会大到几 MB
TIMEOUT_NAMES = ("CellTimeoutError", "KeyboardInterrupt")


class ScrubOutputs(NbGraderPreprocessor):
    """反馈里学生能控制的文字（每一格的输出和回溯）：删掉含隐藏测试代码的行、抹掉密钥、截短过长的输出，
    超时换成一句中文说明。两种反馈方式都做。"""

    keep_hidden = False  # full 方式：隐藏测试本来就全部可见，只抹密钥、截短、说明超时

    def preprocess(self, nb, resources):
        self._hidden = frozenset() if self.keep_hidden else hidden_lines(tuple(instructor_notebooks()))
        return super().preprocess(nb, resources)

    def _clean(self, text: str) -> str:
        present = [h for h in self._hidden if h in text]  # 先在整段里找：大多数输出一行隐藏测试也没有
        if present:
            text = "\n".join(line for line in text.split("\n") if not any(h in line for h in present))
        text = redact(text)
        if len(text) > OUTPUT_LIMIT:
            text = text[:OUTPUT_LIMIT] + f"\n……（输出太长，反馈里只保留了前 {OUTPUT_LIMIT} 个字符）"
        return text

    def preprocess_cell(self, cell, resources, index):
        for out in cell.get("outputs", []):
            if out.output_type == "error" and out.ename in TIMEOUT_NAMES:
                out.ename, out.evalue = "超时", "这一格运行太久，被评分程序停下了（常见原因：死循环、等待输入、sleep 太久）"
                out.traceback = [f"{out.ename}：{out.evalue}"]
            elif out.output_type == "error":
                out.evalue = self._clean(out.evalue)
                out.traceback = [self._clean(line) for line in out.traceback][-20:]
            elif out.output_type == "stream":
                out.text = self._clean(out.text)
            for mime, value in list(out.get("data", {}).items()):
                if isinstance(value, str):
                    out.data[mime] = self._clean(value)
        return cell, resources


class StderrIsNotFailure(NbGraderPreprocessor):
    """测试格里的标准错误输出（调试用的 print(..., file=sys.stderr)、警告）不算没通过：
    nbgrader 见到 stderr 就给 0 分，这里在记分之前把它换成普通输出，前面注明来自标准错误。"""

    def preprocess_cell(self, cell, resources, index):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            for out in cell.get("outputs", []):
                if out.output_type == "stream" and out.name == "stderr":
                    out.name, out.text = "stdout", "（标准错误，不影响得分）" + out.text
        return cell, resources


class ScrubFullOutputs(ScrubOutputs):
    keep_hidden = True
