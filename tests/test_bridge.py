"""Chat Completions ↔ Responses 的转换（`models.bridge`）：切换器的客户端替只在 /v1/responses 上调用工具的模型
改写请求、拼回回答。这里测纯转换；走真实 SDK 和 HTTP 的往返在 test_switch.py。"""

import json

from openai.types.chat import ChatCompletion

from harness_lib import BASH_TOOL
from harness_lib.models.bridge import REASONING_FIELD, chat_completion, responses_request, without_reasoning_items

CALL = {"id": "call_7", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA-opaque"}


def test_a_chat_transcript_becomes_input_items_in_order():
    body = {"model": "m", "max_tokens": 64, "tools": [BASH_TOOL], "tool_choice": "auto", "reasoning_effort": "low",
            "messages": [{"role": "system", "content": "你是助手"}, {"role": "user", "content": "列出文件"},
                         {"role": "assistant", "content": None, "tool_calls": [CALL], REASONING_FIELD: [REASONING]},
                         {"role": "tool", "tool_call_id": "call_7", "content": "app.py"}]}
    request = responses_request(body)
    assert [i.get("type") or i["role"] for i in request["input"]] == [
        "system", "user", "reasoning", "function_call", "function_call_output"]
    assert request["input"][2] == REASONING, "思考条目原样放回它所在的位置（在它那一轮的调用之前）"
    call, output = request["input"][3], request["input"][4]
    assert (call["call_id"], call["name"], json.loads(call["arguments"])) == ("call_7", "bash", {"command": "ls"})
    assert (output["call_id"], output["output"]) == ("call_7", "app.py")
    assert request["tools"] == [{"type": "function", "name": "bash", **{k: v for k, v in BASH_TOOL["function"].items()
                                                                      if k != "name"}}]
    assert "max_tokens" not in request and request["max_output_tokens"] == 64
    assert request["reasoning"] == {"effort": "low"} and request["store"] is False
    assert request["include"] == ["reasoning.encrypted_content"] and "messages" not in request


def test_a_named_tool_choice_is_flattened_too():
    body = {"model": "m", "messages": [], "tool_choice": {"type": "function", "function": {"name": "bash"}}}
    assert responses_request(body)["tool_choice"] == {"type": "function", "name": "bash"}


def _response(output, status="completed", reason=None):
    return {"id": "resp_1", "object": "response", "created_at": 1767225600, "model": "m", "status": status,
            "incomplete_details": {"reason": reason} if reason else None, "output": output,
            "usage": {"input_tokens": 30, "output_tokens": 12, "total_tokens": 42}}


def test_a_response_with_a_call_becomes_a_chat_completion_the_sdk_accepts():
    output = [REASONING, {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "bash",
                          "arguments": "{\"command\": \"pwd\"}", "status": "completed"}]
    completion = ChatCompletion.model_validate(chat_completion(_response(output)))
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls[0].id == "call_9" and choice.message.tool_calls[0].function.name == "bash"
    dumped = choice.message.model_dump()
    assert dumped[REASONING_FIELD] == [REASONING], "思考条目跟着助手消息走，model_dump 保留它"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens, completion.usage.total_tokens) == (30, 12, 42)
    again = responses_request({"model": "m", "messages": [dumped]})
    assert [i.get("type") for i in again["input"]] == ["reasoning", "function_call"], "下一次请求原样带回"


def test_text_and_a_cut_reply_keep_their_finish_reason():
    text = [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "有 2 个", "annotations": []},
                         {"type": "output_text", "text": " 文件。", "annotations": []}]}]
    done = chat_completion(_response(text))["choices"][0]
    assert done["message"]["content"] == "有 2 个 文件。" and done["finish_reason"] == "stop"
    cut = chat_completion(_response(text, "incomplete", "max_output_tokens"))["choices"][0]
    assert cut["finish_reason"] == "length"


def test_chat_requests_drop_the_responses_only_field():
    messages = [{"role": "assistant", "content": "好", REASONING_FIELD: [REASONING]}, {"role": "user", "content": "再来"}]
    assert without_reasoning_items(messages) == [{"role": "assistant", "content": "好"}, messages[1]]
    assert messages[0][REASONING_FIELD], "调用方的 messages 不被改动"


def test_streamed_events_become_chunks_that_add_up_to_the_same_reply():
    """Responses 的流式事件一个个转成 Chat 的块；SDK 自己的 ChatCompletionStreamState 把块拼回来，和整段转换一样
    （思考条目除外：流式的助手消息不带它）。"""
    import pytest
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    from harness_lib.models.bridge import StreamFailed, chat_chunks
    from harness_lib.models.responses_api import stream_events

    output = [REASONING, {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                          "content": [{"type": "output_text", "text": "先看看目录里的文件。", "annotations": []}]},
              {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "bash",
               "arguments": "{\"command\": \"ls -la\"}", "status": "completed"}]
    events = stream_events(_response(output))
    chunks = list(chat_chunks(events, usage=True))
    state = ChatCompletionStreamState()
    for chunk in chunks:
        state.handle_chunk(ChatCompletionChunk.model_validate(chunk))
    whole = ChatCompletion.model_validate(chat_completion(_response(output)))
    final = state.get_final_completion()
    assert final.choices[0].message.content == whole.choices[0].message.content == "先看看目录里的文件。"
    from harness_lib.models.streaming import accumulate

    rebuilt = accumulate(ChatCompletionChunk.model_validate(c) for c in chunks)["message"]
    assert rebuilt[REASONING_FIELD] == [REASONING], "流式拼好的助手消息也带着思考条目，下一次原样带回"
    again = responses_request({"model": "m", "messages": [rebuilt]})["input"]
    assert [i.get("type") or i["role"] for i in again] == ["reasoning", "assistant", "function_call"]
    assert [(c.id, c.function.name, c.function.arguments) for c in final.choices[0].message.tool_calls] == \
        [(c.id, c.function.name, c.function.arguments) for c in whole.choices[0].message.tool_calls]
    assert final.choices[0].finish_reason == "tool_calls" and final.usage.total_tokens == 42
    assert sum(1 for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")) > 1, "文字分几块到"

    cut = list(chat_chunks(events[:-1]))
    assert cut and all(c["choices"][0]["finish_reason"] is None for c in cut), "没有结束事件就没有最后一块"
    failing = events[:3] + [{"type": "error", "code": "server_error", "message": "The server had an error"}]
    with pytest.raises(StreamFailed, match="The server had an error"):
        list(chat_chunks(failing))
