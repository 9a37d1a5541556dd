"""智能体循环教学笔记本的共享辅助库。

这里只做再导出，外加一件事：在 Jupyter 里导入时，让没被接住的 openai SDK 异常先显示一句中文说明
（`harness_lib.support.errors.explain_uncaught_errors`），原来的调用栈照样显示在下面。
每个模块的文档字符串说明它放的是什么、由哪一本笔记本讲过。
"""

from .support.runner import BASH_TOOL, run_bash
from .support.fake import CutStreamClient, FakeClient, check_request, text_reply, tool_call, tool_reply
from .support.view import MessagesView, messages_frame, show_messages
from .support.switch import ModelSwitch, model_switch
from .support.clients import client_from_env
from .support.endpoint import start_server
from .lesson.loop import (
    HANDLERS,
    SYSTEM,
    TOOLS,
    ToolDenied,
    ToolInputError,
    agent_loop,
    bash_handler,
    check_transcript,
    execute_tool_call,
    parse_arguments,
)
from .lesson.tools import ToolFailed, ToolRegistry, Workspace, make_file_tools
from .support.errors import EndpointError, call_model, from_sdk
from .support.step import MAX_TOKENS, ask_model, run_loop
from .support.streaming import accumulate, collect_stream, live_preview, stream_turn
from .lesson.stream import agent_loop_stream
from .support.probe import probe
from .support.record import Recorder, ReplayClient, ReplayMismatchError
from .support import approval
from .support.approval import Verdict, check_allowlist, decide, gate, guard, trusted

__all__ = [
    "BASH_TOOL",
    "run_bash",
    "FakeClient",
    "check_request",
    "text_reply",
    "tool_call",
    "tool_reply",
    "MessagesView",
    "messages_frame",
    "show_messages",
    "ModelSwitch",
    "client_from_env",
    "model_switch",
    "start_server",
    "HANDLERS",
    "SYSTEM",
    "TOOLS",
    "ToolDenied",
    "ToolInputError",
    "agent_loop",
    "bash_handler",
    "check_transcript",
    "execute_tool_call",
    "parse_arguments",
    "ToolFailed",
    "ToolRegistry",
    "Workspace",
    "make_file_tools",
    "EndpointError",
    "MAX_TOKENS",
    "ask_model",
    "run_loop",
    "call_model",
    "collect_stream",
    "from_sdk",
    "CutStreamClient",
    "accumulate",
    "agent_loop_stream",
    "live_preview",
    "stream_turn",
    "probe",
    "Recorder",
    "ReplayClient",
    "ReplayMismatchError",
    "approval",
    "Verdict",
    "check_allowlist",
    "decide",
    "gate",
    "guard",
    "trusted",
]

from .support.errors import explain_uncaught_errors as _explain_uncaught_errors

_explain_uncaught_errors()
