"""智能体循环教学笔记本的共享辅助库。

这里只做再导出。每个模块的文档字符串说明它放的是什么、由哪一本笔记本讲过。
"""

from .bash import BASH_TOOL, run_bash
from .fake import FakeClient, check_request, text_reply, tool_call, tool_reply
from .view import MessagesView, messages_frame, show_messages
from .switch import ModelSwitch, client_from_env, model_switch
from .server import start_server
from .loop import (
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
from .tools import ToolFailed, ToolRegistry, Workspace, make_file_tools
from .errors import EndpointError, call_model, collect_stream, from_sdk
from .stream import CutStreamClient, accumulate, agent_loop_stream, live_preview, stream_turn
from .probe import probe
from .record import Recorder, ReplayClient, ReplayMismatchError
from . import approval
from .approval import Verdict, check_allowlist, decide, gate

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
]
