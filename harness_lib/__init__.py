"""智能体循环教学笔记本的共享辅助库。笔记本只从这里（和 `harness_lib.lesson`）导入。

两层：
- 课程层 `harness_lib.lesson`：笔记本里一格一格搭出来的循环和工具，由标了 `# harness_lib: save` 的格子生成；
- 支撑层，按用途分三个文件夹，各有一页 README：
  - `models`：模型的替身和线路（HTTP 接缝、假模型、故障、怪脾气、录制回放、本机端点、错误说明、流式拼接）；
  - `safety`：保护学习者的部分（执行命令、密钥打码、只读白名单、审批、可信的客户端、作业检查）；
  - `ui`：笔记本里看得见的部分（模型切换器、服务商预设、消息表、端点探测、每一步的模型调用）。
- `text.py`：截短文字的唯一一处（`shorten`），各层都用它。

下面的名字用到时才导入它所在的模块（PEP 562 的模块级 `__getattr__`）：`import harness_lib.lesson.loop`
只加载循环真正用到的几个模块，不会带进 IPython、pandas、ipywidgets、假模型或本机端点。
"""

from importlib import import_module

# 公开的名字 → 定义它的模块（相对 harness_lib）
_PUBLIC = {
    # 课程层（03–06、08 搭出来的）
    **dict.fromkeys(["SYSTEM", "TOOLS", "HANDLERS", "BLOCKED_SNIPPETS", "ToolInputError", "ToolDenied",
                     "ToolFailed", "bash_handler", "execute_tool_call",
                     "agent_loop", "check_transcript", "BudgetExceeded", "within_budget"], "lesson.loop"),
    **dict.fromkeys(["ToolRegistry", "Workspace", "make_file_tools", "string_arg"], "lesson.tools"),
    "agent_loop_stream": "lesson.stream",
    # models：替身、线路与错误
    **dict.fromkeys(["FakeClient", "CutStreamClient", "ScriptExhaustedError"], "models.fake"),
    "FakeAnthropic": "models.fake_anthropic",
    **dict.fromkeys(["text_reply", "tool_reply", "scripted_call"], "models.script"),
    "check_request": "models.checks",
    **dict.fromkeys(["api_error", "api_timeout"], "models.wire"),
    **dict.fromkeys(["start_server", "start_tls_server"], "models.server"),
    **dict.fromkeys(["MAX_TOKENS", "ATTEMPT_DEADLINE", "STREAM_SILENCE", "CALL_CEILING", "RETRY_POLICY",
                     "call_model"], "models.call"),
    **dict.fromkeys(["EndpointError", "ERROR_TABLE", "classify", "explain_error", "from_sdk"], "models.errors"),
    **dict.fromkeys(["accumulate", "collect_stream", "live_preview", "stream_turn"], "models.streaming"),
    **dict.fromkeys(["CONTEXT_LIMIT", "FAULTS", "closed_port_url", "start_fault_server"], "models.faults"),
    **dict.fromkeys(["QUIRKS", "FLAGGED", "QuirkClient", "naive_loop", "naive_stream",
                     "start_quirk_server"], "models.quirks"),
    **dict.fromkeys(["Recorder", "ReplayClient", "ReplayMismatchError", "load_calls"], "models.record"),
    # safety：执行、审批、作业检查
    **dict.fromkeys(["BASH_TOOL", "run_bash", "run_command", "demo_workspace", "list_py_command"],
                    "safety.runner"),
    **dict.fromkeys(["disk_snapshot", "watch_processes"], "safety.side_effects"),
    **dict.fromkeys(["DENIED_PREFIX", "READ_ONLY_PROGRAMS", "check_allowlist"], "safety.allowlist"),
    **dict.fromkeys(["guard", "decide", "describe", "parse_answer", "policy_from_env"], "safety.approval"),
    "trusted": "safety.trust",
    **dict.fromkeys(["assert_own_work", "delegations"], "safety.own_work"),
    # ui：看得见的部分
    **dict.fromkeys(["model_switch", "explain_uncaught_errors"], "ui.switch"),
    **dict.fromkeys(["quirk_table", "real_client"], "ui.clients"),
    **dict.fromkeys(["MessagesView", "show_items", "show_messages"], "ui.view"),
    **dict.fromkeys(["IMPACT", "probe", "probe_verdict"], "ui.probe"),
    **dict.fromkeys(["Chat", "run_loop"], "ui.step"),
    **dict.fromkeys(["anatomy", "other_apis"], "ui.apis"),
}
_ROLES = ("lesson", "models", "safety", "ui")

__all__ = sorted(_PUBLIC)


def __getattr__(name):
    if name in _ROLES:
        return import_module(f".{name}", __name__)
    if name not in _PUBLIC:
        raise AttributeError(f"harness_lib 里没有 {name!r}；公开的名字见 harness_lib.__all__")
    value = getattr(import_module(f".{_PUBLIC[name]}", __name__), name)
    globals()[name] = value  # 第二次直接取，不再查表
    return value


def __dir__():
    return sorted({*globals(), *_PUBLIC, *_ROLES})
