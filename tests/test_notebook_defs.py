"""笔记本里定义、不进 harness_lib 的小函数：按格子的 id 取出它的定义，单独测。

笔记本整本执行只走一条路；这里补上那条路之外的输入（换行接着的第二条命令、列表形式的 command）。
"""

import ast
import json

from openai.types.chat import ChatCompletionMessageFunctionToolCall

from conftest import NOTEBOOKS
from harness_lib import DENIED_PREFIX, scripted_call


def defined_in(notebook, cell_id, name, namespace):
    """执行 `notebook` 里 id 为 `cell_id` 的格子中 `def name` 那一段（只执行定义，不执行格子里别的代码），返回函数。"""
    cells = json.loads((NOTEBOOKS / notebook).read_text(encoding="utf-8"))["cells"]
    source = "".join(next(c for c in cells if c.get("id") == cell_id)["source"])
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    exec(compile(ast.Module([node], type_ignores=[]), f"{notebook}:{cell_id}", "exec"), namespace)
    return namespace[name]


def _ran(command):
    raise AssertionError(f"不该执行：{command!r}")


def _02():
    namespace = {"json": json, "DENIED_PREFIX": DENIED_PREFIX, "run_bash": _ran}
    check_command = defined_in("02_each_turn.ipynb", "02each-018", "check_command", namespace)
    run_tool = defined_in("02_each_turn.ipynb", "02each-036", "run_tool", namespace)
    return check_command, run_tool


def test_02_check_command_refuses_a_second_command_after_a_newline():
    """bash -c 把换行当成分号：`ls` 后面换一行接的命令也会运行，所以换行和连接符一样拒绝。"""
    check_command, _ = _02()
    assert check_command("ls -l") is None
    for command in ("ls\nrm made_by_model.txt", "ls\r\nrm made_by_model.txt", "ls; rm x", "ls && rm x"):
        assert check_command(command).startswith(DENIED_PREFIX), command


def test_02_run_tool_answers_a_command_that_is_not_a_string():
    """`command` 是列表、数字或 null：调用解析失败，不抛异常，也不执行。"""
    _, run_tool = _02()
    for arguments in ({"command": ["ls"]}, {"command": 42}, {"command": None}, '["ls"]', '{"command": "ls"', {}):
        call = ChatCompletionMessageFunctionToolCall.model_validate(scripted_call("bash", arguments, id="c1"))
        assert run_tool(call).startswith("错误（调用解析失败）："), arguments
