'''老实的学生：每道练习两份照题目写的、风格不同的正确答案，一份有一处看似合理、却违背题目的错。

只看学生版（题目和看得见的测试）写成，没有看参考答案和隐藏测试。`tests/test_honest_students.py`
通过真实的沙盒评分批改它们。
'''

ANSWERS = {}

# ---------------------------------------------------------------- 00

ANSWERS["00-ex1-solution"] = {
    "style_a": '''
def count_roles(messages):
    counts = {}
    for m in messages:
        role = m["role"] if isinstance(m, dict) else m.role
        counts[role] = counts.get(role, 0) + 1
    return counts
''',
    "style_b": '''
from collections import Counter


def _role_of(message):
    return message.get("role") if isinstance(message, dict) else getattr(message, "role")


def count_roles(messages):
    return dict(Counter(_role_of(m) for m in messages))
''',
    # bug: only dicts work; SDK message objects (which the statement names) crash
    "bug": '''
def count_roles(messages):
    counts = {}
    for m in messages:
        counts[m["role"]] = counts.get(m["role"], 0) + 1
    return counts
''',
}

ANSWERS["00-ex2-solution"] = {
    "style_a": '''
def last_reply(messages):
    for m in reversed(list(messages)):
        role = m.get("role") if isinstance(m, dict) else getattr(m, "role", None)
        content = m.get("content") if isinstance(m, dict) else getattr(m, "content", None)
        if role == "assistant" and isinstance(content, str) and content.strip():
            return content
    return None
''',
    "style_b": '''
def _field(msg, name):
    if isinstance(msg, dict):
        return msg.get(name)
    return getattr(msg, name, None)


def last_reply(messages):
    found = None
    for msg in messages:
        text = _field(msg, "content")
        if _field(msg, "role") != "assistant" or not isinstance(text, str):
            continue
        if text.strip() != "":
            found = text
    return found
''',
    # bug: whitespace-only content counts as text
    "bug": '''
def last_reply(messages):
    for m in reversed(list(messages)):
        role = m.get("role") if isinstance(m, dict) else getattr(m, "role", None)
        content = m.get("content") if isinstance(m, dict) else getattr(m, "content", None)
        if role == "assistant" and isinstance(content, str) and content:
            return content
    return None
''',
}

# ---------------------------------------------------------------- 01

ANSWERS["01-ex1-solution"] = {
    "style_a": '''
def who_carried(messages):
    proposed = set()
    for m in messages:
        if m.get("role") == "tool" and m.get("tool_call_id") in proposed:
            return "执行框架"
        for call in m.get("tool_calls") or []:
            proposed.add(call.get("id"))
    seen_assistant = False
    for m in messages:
        if m.get("role") == "assistant":
            seen_assistant = True
        elif m.get("role") == "user" and seen_assistant:
            return "你"
    return "没有人"
''',
    "style_b": '''
def _harness_ran(msgs):
    for i, msg in enumerate(msgs):
        if msg.get("role") != "tool":
            continue
        earlier_ids = {c.get("id") for prev in msgs[:i] for c in (prev.get("tool_calls") or [])}
        if msg.get("tool_call_id") in earlier_ids:
            return True
    return False


def _user_pasted(msgs):
    roles = [msg.get("role") for msg in msgs]
    if "assistant" not in roles:
        return False
    return "user" in roles[roles.index("assistant") + 1:]


def who_carried(messages):
    msgs = list(messages)
    if _harness_ran(msgs):
        return "执行框架"
    return "你" if _user_pasted(msgs) else "没有人"
''',
    # bug: any tool message counts, without checking that its id matches an earlier call
    "bug": '''
def who_carried(messages):
    if any(m.get("role") == "tool" for m in messages):
        return "执行框架"
    seen_assistant = False
    for m in messages:
        if m.get("role") == "assistant":
            seen_assistant = True
        elif m.get("role") == "user" and seen_assistant:
            return "你"
    return "没有人"
''',
}

ANSWERS["01-ex2-solution"] = {
    "style_a": '''
def needs_harness(response):
    if isinstance(response, dict):
        choices = response.get("choices") or []
        if not choices:
            return False
        message = choices[0].get("message") or {}
        return bool(message.get("tool_calls"))
    choices = response.choices or []
    if not choices:
        return False
    return bool(choices[0].message.tool_calls)
''',
    "style_b": '''
def _get(obj, key):
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def needs_harness(response):
    try:
        message = _get(_get(response, "choices")[0], "message")
    except (IndexError, TypeError):
        return False
    calls = _get(message, "tool_calls") if message is not None else None
    return calls is not None and len(calls) > 0
''',
    # bug: trusts finish_reason, which the statement says is unreliable
    "bug": '''
def needs_harness(response):
    choices = response.get("choices") if isinstance(response, dict) else response.choices
    if not choices:
        return False
    first = choices[0]
    reason = first.get("finish_reason") if isinstance(first, dict) else first.finish_reason
    return reason == "tool_calls"
''',
}

# ---------------------------------------------------------------- 02

ANSWERS["02-ex1-solution"] = {
    "style_a": '''
def _g(m, key):
    return m.get(key) if isinstance(m, dict) else getattr(m, key, None)


def _call_id(call):
    return call.get("id") if isinstance(call, dict) else call.id


def next_step(messages):
    messages = list(messages)
    last_with_calls = None
    for i, m in enumerate(messages):
        if _g(m, "role") == "assistant" and _g(m, "tool_calls"):
            last_with_calls = i
    if last_with_calls is not None:
        wanted = [_call_id(c) for c in _g(messages[last_with_calls], "tool_calls")]
        answered = {_g(m, "tool_call_id") for m in messages[last_with_calls + 1:] if _g(m, "role") == "tool"}
        if any(cid not in answered for cid in wanted):
            return "执行工具"
    if messages and _g(messages[-1], "role") == "assistant" and not _g(messages[-1], "tool_calls"):
        return "结束"
    return "调用模型"
''',
    "style_b": '''
def next_step(messages):
    def field(m, key):
        if isinstance(m, dict):
            return m.get(key)
        return getattr(m, key, None)

    replies = set()
    # walk backwards: tool replies are collected until we meet the last assistant message with calls
    for m in reversed(messages):
        if field(m, "role") == "tool":
            replies.add(field(m, "tool_call_id"))
            continue
        calls = field(m, "tool_calls") if field(m, "role") == "assistant" else None
        if calls:
            ids = {c["id"] if isinstance(c, dict) else c.id for c in calls}
            if not ids <= replies:
                return "执行工具"
            break
    if not messages:
        return "调用模型"
    last = messages[-1]
    if field(last, "role") == "assistant" and not field(last, "tool_calls"):
        return "结束"
    return "调用模型"
''',
    # bug: only looks at the very last message, so a partly answered turn asks the model again
    "bug": '''
def next_step(messages):
    if not messages:
        return "调用模型"
    last = messages[-1]
    role = last.get("role") if isinstance(last, dict) else last.role
    calls = last.get("tool_calls") if isinstance(last, dict) else getattr(last, "tool_calls", None)
    if role == "assistant" and calls:
        return "执行工具"
    if role == "assistant":
        return "结束"
    return "调用模型"
''',
}

ANSWERS["02-ex2-solution"] = {
    "style_a": '''
def split_turns(messages):
    turns = []
    current = None
    for m in messages:
        role = m["role"] if isinstance(m, dict) else m.role
        if role == "assistant":
            current = [m]
            turns.append(current)
        elif role == "tool" and current is not None:
            current.append(m)
        else:
            current = None
    return turns
''',
    "style_b": '''
def _role(message):
    return message.get("role") if isinstance(message, dict) else getattr(message, "role", None)


def split_turns(messages):
    out = []
    i, n = 0, len(messages)
    while i < n:
        if _role(messages[i]) != "assistant":
            i += 1
            continue
        j = i + 1
        while j < n and _role(messages[j]) == "tool":
            j += 1
        out.append(list(messages[i:j]))
        i = j
    return out
''',
    # bug: a user/system message does not close the turn, so later tool messages join the previous turn
    "bug": '''
def split_turns(messages):
    turns = []
    for m in messages:
        role = m["role"] if isinstance(m, dict) else m.role
        if role == "assistant":
            turns.append([m])
        elif role == "tool" and turns:
            turns[-1].append(m)
    return turns
''',
}

ANSWERS["02-ex3-solution"] = {
    "style_a": '''
import json

from harness_lib import DENIED_PREFIX


def execute_if_allowed(tool_call, check, handler):
    try:
        args = json.loads(tool_call.function.arguments)
    except Exception as exc:
        return f"错误（调用解析失败）：arguments 不是合法的 JSON：{exc}"
    if not isinstance(args, dict):
        return "错误（调用解析失败）：arguments 应当是 JSON 对象"
    command = args.get("command")
    if not isinstance(command, str):
        return "错误（调用解析失败）：缺少字符串参数 command"
    try:
        verdict = check(command)
    except Exception as exc:
        return f"{DENIED_PREFIX}检查出错，按拒绝处理：{type(exc).__name__}: {exc}"
    if verdict is not None:
        return verdict
    try:
        return handler(command)
    except Exception as exc:
        return f"错误（工具结果失败）：{type(exc).__name__}: {exc}"
''',
    "style_b": '''
import json

from harness_lib import DENIED_PREFIX

PARSE = "错误（调用解析失败）："
FAILED = "错误（工具结果失败）："


class _Stop(Exception):
    pass


def _command_of(raw):
    try:
        value = json.loads(raw)
    except (TypeError, ValueError, RecursionError) as exc:
        raise _Stop(PARSE + f"无法解析：{exc}")
    if type(value) is not dict or type(value.get("command")) is not str:
        raise _Stop(PARSE + "需要一个带字符串 command 的 JSON 对象")
    return value["command"]


def _refusal(check, command):
    try:
        return check(command)
    except Exception as exc:
        return DENIED_PREFIX + "检查本身出错：" + repr(exc)


def execute_if_allowed(tool_call, check, handler):
    try:
        command = _command_of(tool_call.function.arguments)
    except _Stop as stop:
        return str(stop)
    refusal = _refusal(check, command)
    if refusal is None:
        try:
            result = handler(command)
        except Exception as exc:
            result = FAILED + repr(exc)
        return result
    return refusal
''',
    # bug: check and handler share one try, so a crashing check is reported as a tool failure
    "bug": '''
import json

from harness_lib import DENIED_PREFIX


def execute_if_allowed(tool_call, check, handler):
    try:
        args = json.loads(tool_call.function.arguments)
    except Exception as exc:
        return f"错误（调用解析失败）：{exc}"
    if not isinstance(args, dict) or not isinstance(args.get("command"), str):
        return "错误（调用解析失败）：缺少字符串参数 command"
    command = args["command"]
    try:
        verdict = check(command)
        if verdict is not None:
            return verdict
        return handler(command)
    except Exception as exc:
        return f"错误（工具结果失败）：{exc}"
''',
}

# ---------------------------------------------------------------- 03

ANSWERS["03-ex1-solution"] = {
    "style_a": '''
def _get(obj, key):
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def pairing_report(messages):
    messages = list(messages)
    unanswered, orphans, proposed = [], [], set()
    for i, m in enumerate(messages):
        if _get(m, "role") == "tool":
            if _get(m, "tool_call_id") not in proposed:
                orphans.append(_get(m, "tool_call_id"))
            continue
        for call in _get(m, "tool_calls") or []:
            cid = _get(call, "id")
            proposed.add(cid)
            later = [_get(x, "tool_call_id") for x in messages[i + 1:] if _get(x, "role") == "tool"]
            if cid not in later:
                unanswered.append(cid)
    return {"unanswered": unanswered, "orphans": orphans}
''',
    "style_b": '''
def pairing_report(messages):
    def attr(obj, key):
        if isinstance(obj, dict):
            return obj.get(key)
        return getattr(obj, key, None)

    waiting = {}        # call id -> order of proposal, still without a reply
    ever_proposed = set()
    orphans = []
    for n, msg in enumerate(messages):
        if attr(msg, "role") == "tool":
            cid = attr(msg, "tool_call_id")
            if cid in ever_proposed:
                waiting.pop(cid, None)
            else:
                orphans.append(cid)
        else:
            for k, call in enumerate(attr(msg, "tool_calls") or ()):
                cid = attr(call, "id")
                ever_proposed.add(cid)
                waiting[cid] = (n, k)
    return {"unanswered": sorted(waiting, key=waiting.get), "orphans": orphans}
''',
    # bug: ignores order: a reply anywhere (even before the call) counts, and a tool message whose call comes later
    # is not an orphan
    "bug": '''
def pairing_report(messages):
    def attr(obj, key):
        return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)

    calls = [attr(c, "id") for m in messages for c in (attr(m, "tool_calls") or [])]
    replies = [attr(m, "tool_call_id") for m in messages if attr(m, "role") == "tool"]
    return {"unanswered": [c for c in calls if c not in replies],
            "orphans": [r for r in replies if r not in calls]}
''',
}

ANSWERS["03-ex2-solution"] = {
    "style_a": '''
import json


def dispatch(tool_call, handlers):
    name = tool_call.function.name
    handler = handlers.get(name)
    if handler is None:
        return f"错误：没有名为 {name} 的工具"
    args = json.loads(tool_call.function.arguments)
    return handler(args)
''',
    "style_b": '''
import json


def _unknown(name, handlers):
    return "错误：未知工具 " + repr(name) + "，可用的有：" + "、".join(handlers)


def dispatch(tool_call, handlers):
    fn = tool_call.function
    if fn.name not in handlers:
        return _unknown(fn.name, handlers)
    parsed = json.loads(fn.arguments or "{}")
    out = handlers[fn.name](parsed)
    return out
''',
    # bug: parses the arguments before looking up the tool, so an unknown tool with bad JSON raises
    "bug": '''
import json


def dispatch(tool_call, handlers):
    name = tool_call.function.name
    args = json.loads(tool_call.function.arguments)
    if name not in handlers:
        return f"错误：没有名为 {name} 的工具"
    return handlers[name](args)
''',
}

ANSWERS["03-ex3-solution"] = {
    "style_a": '''
def record_turn(messages, response, outputs):
    message = response.choices[0].message
    new = list(messages)
    saved = message.model_dump(exclude_none=True)
    if saved.get("tool_calls") == []:
        del saved["tool_calls"]
    new.append(saved)
    for call in message.tool_calls or []:
        if call.id in outputs:
            text = outputs[call.id]
        else:
            text = "错误：这个调用没有执行结果"
        new.append({"role": "tool", "tool_call_id": call.id, "content": text})
    return new
''',
    "style_b": '''
import copy


def _without_none(value):
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def record_turn(messages, response, outputs):
    assistant = response.choices[0].message
    saved = {key: value for key, value in _without_none(assistant.to_dict()).items()
             if not (key == "tool_calls" and not value)}
    answers = [
        {"role": "tool", "tool_call_id": call.id,
         "content": outputs[call.id] if call.id in outputs else "错误：没有拿到这个调用的输出"}
        for call in (assistant.tool_calls or ())
    ]
    return copy.deepcopy(list(messages)) + [saved] + answers
''',
    # bug: rebuilds the assistant message by hand from role, content and tool_calls, so a thinking model's
    # reasoning_content is dropped and the next request is refused
    "bug": '''
def record_turn(messages, response, outputs):
    message = response.choices[0].message
    assistant = {"role": "assistant"}
    if message.content is not None:
        assistant["content"] = message.content
    if message.tool_calls:
        assistant["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in message.tool_calls
        ]
    replies = [{"role": "tool", "tool_call_id": c.id, "content": outputs.get(c.id, "错误：没有结果")}
               for c in message.tool_calls or []]
    return [*messages, assistant, *replies]
''',
}

# ---------------------------------------------------------------- 04

ANSWERS["04-ex1-solution"] = {
    "style_a": '''
def patch_unanswered(messages):
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    out = []
    pending = []
    for m in messages:
        if pending and m.get("role") != "tool":
            out.extend(pending)
            pending = []
        out.append(dict(m))
        if m.get("role") == "assistant":
            for call in m.get("tool_calls") or []:
                if call["id"] not in answered:
                    pending.append({"role": "tool", "tool_call_id": call["id"],
                                    "content": "错误（执行授权失败）：执行框架决定不补跑这个调用，它没有执行。"})
    out.extend(pending)
    return out
''',
    "style_b": '''
import copy

_LABEL = "错误（执行授权失败）："


def _placeholder(call_id):
    return {"role": "tool", "tool_call_id": call_id,
            "content": _LABEL + "上次运行在这里中断，这个调用没有执行；执行框架不会补跑它。"}


def patch_unanswered(messages):
    src = copy.deepcopy(list(messages))
    result = []
    i = 0
    while i < len(src):
        msg = src[i]
        result.append(msg)
        i += 1
        if msg.get("role") != "assistant" or not msg.get("tool_calls"):
            continue
        replied = set()
        while i < len(src) and src[i].get("role") == "tool":
            replied.add(src[i].get("tool_call_id"))
            result.append(src[i])
            i += 1
        result.extend(_placeholder(c["id"]) for c in msg["tool_calls"] if c["id"] not in replied)
    return result
''',
    # bug: placeholders go right after the assistant message, before the tool messages it already has
    "bug": '''
def patch_unanswered(messages):
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    out = []
    for m in messages:
        out.append(dict(m))
        for call in m.get("tool_calls") or []:
            if call["id"] not in answered:
                out.append({"role": "tool", "tool_call_id": call["id"],
                            "content": "错误（执行授权失败）：这个调用没有执行。"})
    return out
''',
}

ANSWERS["04-ex2-solution"] = {
    "style_a": '''
TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
         "array": (list,), "object": (dict,), "null": (type(None),)}


def validate_args(args, schema):
    if not isinstance(args, dict):
        return [f"参数应当是对象（dict），实际是 {type(args).__name__}"]
    errors = []
    for field in schema.get("required") or []:
        if field not in args:
            errors.append(f"缺少必填字段 {field}")
    for field, spec in (schema.get("properties") or {}).items():
        if field not in args or "type" not in spec or spec["type"] not in TYPES:
            continue
        value = args[field]
        ok = isinstance(value, TYPES[spec["type"]])
        if isinstance(value, bool) and spec["type"] != "boolean":
            ok = False
        if not ok:
            errors.append(f"字段 {field} 应当是 {spec['type']}，实际是 {type(value).__name__}")
    return errors
''',
    "style_b": '''
def _matches(kind, value):
    if kind == "string":
        return type(value) is str
    if kind == "integer":
        return type(value) is int
    if kind == "number":
        return type(value) in (int, float)
    if kind == "boolean":
        return type(value) is bool
    if kind == "array":
        return type(value) is list
    if kind == "object":
        return type(value) is dict
    if kind == "null":
        return value is None
    return True


def validate_args(args, schema):
    if type(args) is not dict:
        return ["整个参数必须是 JSON 对象"]
    missing = [f"{name}：必填但没有给出" for name in schema.get("required", []) if name not in args]
    props = schema.get("properties", {})
    wrong = [f"{name}：类型应为 {props[name]['type']}"
             for name in args
             if name in props and "type" in props[name] and not _matches(props[name]["type"], args[name])]
    return missing + wrong
''',
    # bug: forgets that True is also an int, so booleans pass as integer/number
    "bug": '''
TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
         "array": list, "object": dict, "null": type(None)}


def validate_args(args, schema):
    if not isinstance(args, dict):
        return ["参数应当是对象"]
    errors = [f"缺少必填字段 {f}" for f in schema.get("required", []) if f not in args]
    for field, spec in schema.get("properties", {}).items():
        if field in args and spec.get("type") in TYPES and not isinstance(args[field], TYPES[spec["type"]]):
            errors.append(f"字段 {field} 的类型应当是 {spec['type']}")
    return errors
''',
}

ANSWERS["04-ex3-solution"] = {
    "style_a": '''
def run_turn(tool_calls, handlers):
    messages = []
    interrupted = False
    for call in tool_calls:
        if interrupted:
            content = "错误（执行授权失败）：前面的调用被中断，这个调用没有执行。"
        else:
            try:
                content = execute_tool_call(call, handlers).content
            except BaseException as exc:
                interrupted = True
                content = f"错误（工具结果失败）：处理函数被中断（{type(exc).__name__}），可能已经做了一部分。"
        messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
    return messages
''',
    "style_b": '''
def _msg(call, text):
    return {"role": "tool", "tool_call_id": call.id, "content": text}


def run_turn(tool_calls, handlers):
    calls = list(tool_calls)
    out = []
    for i, call in enumerate(calls):
        try:
            outcome = execute_tool_call(call, handlers)
        except Exception as exc:  # execute_tool_call should not raise these; be safe anyway
            out.append(_msg(call, "错误（工具结果失败）：" + repr(exc)))
            continue
        except BaseException as stop:
            out.append(_msg(call, "错误（工具结果失败）：执行时被中断：" + type(stop).__name__))
            out.extend(_msg(rest, "错误（执行授权失败）：这一轮已被中断，没有执行。") for rest in calls[i + 1:])
            break
        out.append(_msg(call, outcome.content))
    return out
''',
    # bug: only KeyboardInterrupt is caught; SystemExit (a BaseException the statement names) escapes
    "bug": '''
def run_turn(tool_calls, handlers):
    messages = []
    stopped = False
    for call in tool_calls:
        if stopped:
            content = "错误（执行授权失败）：中断之后没有执行。"
        else:
            try:
                content = execute_tool_call(call, handlers).content
            except KeyboardInterrupt:
                stopped = True
                content = "错误（工具结果失败）：处理函数被中断。"
        messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
    return messages
''',
}

# ---------------------------------------------------------------- 05

ANSWERS["05-ex1-solution"] = {
    "style_a": '''
import os
import signal
import subprocess


def run_with_group_kill(command, timeout):
    proc = subprocess.Popen(command, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        try:
            out, _ = proc.communicate(timeout=1)
        except subprocess.TimeoutExpired as exc:
            out = exc.output or b""
            proc.kill()
        timed_out = True
    text = out.decode("utf-8", errors="replace")
    if timed_out:
        if text and not text.endswith("\\n"):
            text += "\\n"
        text += "[超时]"
    return text
''',
    "style_b": '''
import os
import signal
import subprocess
import tempfile


def _kill_group(pid):
    try:
        os.killpg(os.getpgid(pid), signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_with_group_kill(command, timeout):
    with tempfile.TemporaryFile() as sink:
        child = subprocess.Popen(command, shell=True, stdout=sink, stderr=sink, start_new_session=True)
        expired = False
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            expired = True
            _kill_group(child.pid)
            child.wait()
        sink.seek(0)
        output = sink.read().decode("utf-8", "replace")
    return output + "\\n[超时]" if expired else output
''',
    # bug: on timeout only the shell itself is killed, not its process group
    "bug": '''
import os
import signal
import subprocess
import tempfile


def run_with_group_kill(command, timeout):
    with tempfile.TemporaryFile() as sink:
        child = subprocess.Popen(command, shell=True, stdout=sink, stderr=sink, start_new_session=True)
        expired = False
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            expired = True
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
        sink.seek(0)
        output = sink.read().decode("utf-8", "replace")
    return output + "\\n[超时]" if expired else output
''',
}

ANSWERS["05-ex2-solution"] = {
    "style_a": '''
import shlex

CONTROL = set(";&<>()")


def allowlisted(command, allowed):
    if "\\n" in command or "\\r" in command:
        return False
    pieces = [""]
    quote = None
    for ch in command:
        if quote == "'":
            if ch == "'":
                quote = None
        elif ch in ("$", "`", "\\\\"):
            return False
        elif quote == '"':
            if ch == '"':
                quote = None
        elif ch in ("'", '"'):
            quote = ch
        elif ch == "|":
            pieces.append("")
            continue
        elif ch in CONTROL:
            return False
        elif ch == "#":
            before = pieces[-1]
            if before == "" or before[-1] in (" ", "\\t"):
                return False
        pieces[-1] += ch
    if quote is not None:
        return False
    for piece in pieces:
        words = shlex.split(piece)
        if len(words) == 0 or words[0] not in allowed:
            return False
    return True
''',
    "style_b": '''
import re
import shlex

_CHUNK = re.compile(r"'[^']*'|\\"[^\\"]*\\"|[^'\\"]+|['\\"]")


def _segments(command):
    segments, current = [], ""
    for chunk in _CHUNK.findall(command):
        if chunk in ("'", '"'):
            return None  # a quote that never closes
        if chunk.startswith("'"):
            current += chunk
            continue
        if re.search(r"[$`\\\\\\\\]", chunk):
            return None
        if chunk.startswith('"'):
            current += chunk
            continue
        for ch in chunk:
            if ch == "|":
                segments.append(current)
                current = ""
            elif ch in ";&<>()":
                return None
            elif ch == "#" and (current == "" or current[-1] in " \\t"):
                return None
            else:
                current += ch
    return segments + [current]


def allowlisted(command, allowed):
    if re.search(r"[\\r\\n]", command):
        return False
    segments = _segments(command)
    if segments is None:
        return False
    firsts = [shlex.split(s)[:1] for s in segments]
    return all(first and first[0] in allowed for first in firsts)
''',
    # bug: a # is always an ordinary character, so a comment at the start of a word is let through
    "bug": '''
import shlex


def allowlisted(command, allowed):
    if "\\n" in command or "\\r" in command:
        return False
    segments, current, quote = [], "", None
    for ch in command:
        if quote == "'":
            quote = None if ch == "'" else quote
        elif ch in "$`\\\\":
            return False
        elif quote == '"':
            quote = None if ch == '"' else quote
        elif ch in "'\\"":
            quote = ch
        elif ch == "|":
            segments.append(current)
            current = ""
            continue
        elif ch in ";&<>()":
            return False
        current += ch
    if quote:
        return False
    for segment in segments + [current]:
        words = shlex.split(segment)
        if not words or words[0] not in allowed:
            return False
    return True
''',
}

ANSWERS["05-ex3-solution"] = {
    "style_a": '''
from harness_lib import TOOLS, execute_tool_call
from harness_lib import DENIED_PREFIX
from harness_lib import MAX_TOKENS


def loop_with_budget(messages, *, client, model, handlers, max_tool_calls, tools=TOOLS, on_turn=None):
    used = 0
    while True:
        response = client.chat.completions.create(model=model, messages=messages, tools=tools,
                                                  max_tokens=MAX_TOKENS)
        message = response.choices[0].message
        turn = [message.model_dump(exclude_none=True)]
        over = False
        for call in message.tool_calls or []:
            if used < max_tool_calls:
                used += 1
                content = execute_tool_call(call, handlers, tools).content
            else:
                over = True
                content = f"{DENIED_PREFIX}工具调用的预算（{max_tool_calls} 次）已经用完，这个调用没有执行"
            turn.append({"role": "tool", "tool_call_id": call.id, "content": content})
        messages.extend(turn)
        if on_turn is not None:
            on_turn(messages)
        if not message.tool_calls:
            return message.content
        if over:
            return f"[工具调用的预算 {max_tool_calls} 次已经用完，循环停止]"
''',
    "style_b": '''
from harness_lib import TOOLS, execute_tool_call
from harness_lib import DENIED_PREFIX
from harness_lib import MAX_TOKENS


class _Budget:
    def __init__(self, total):
        self.left = total

    def take(self):
        if self.left <= 0:
            return False
        self.left -= 1
        return True


def _answer(call, handlers, tools, budget):
    if budget.take():
        return execute_tool_call(call, handlers, tools).content, True
    return DENIED_PREFIX + "超出预算，没有执行。", False


def loop_with_budget(messages, *, client, model, handlers, max_tool_calls, tools=TOOLS, on_turn=None):
    budget = _Budget(max_tool_calls)
    stopped = False
    while not stopped:
        reply = client.chat.completions.create(model=model, messages=list(messages), tools=tools,
                                               max_tokens=MAX_TOKENS).choices[0].message
        messages.append(reply.model_dump(exclude_none=True))
        for call in reply.tool_calls or ():
            text, ran = _answer(call, handlers, tools, budget)
            stopped = stopped or not ran
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        if on_turn:
            on_turn(messages)
        if not reply.tool_calls:
            return reply.content
    return "预算用完了：有工具调用没有执行。"
''',
    # bug: the budget is counted per turn, not over all turns
    "bug": '''
from harness_lib import TOOLS, execute_tool_call
from harness_lib import DENIED_PREFIX
from harness_lib import MAX_TOKENS


def loop_with_budget(messages, *, client, model, handlers, max_tool_calls, tools=TOOLS, on_turn=None):
    while True:
        response = client.chat.completions.create(model=model, messages=messages, tools=tools,
                                                  max_tokens=MAX_TOKENS)
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        used, over = 0, False
        for call in message.tool_calls or []:
            if used < max_tool_calls:
                used += 1
                content = execute_tool_call(call, handlers, tools).content
            else:
                over = True
                content = f"{DENIED_PREFIX}超出预算，没有执行"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        if on_turn is not None:
            on_turn(messages)
        if not message.tool_calls:
            return message.content
        if over:
            return "预算用完了"
''',
}

# ---------------------------------------------------------------- 06

ANSWERS["06-ex1-solution"] = {
    "style_a": '''
def add_count_lines(registry, workspace):
    @registry.register(
        "count_lines",
        "数一个文本文件有几行（相对工作区的路径）。",
        {"type": "object",
         "properties": {"path": {"type": "string", "description": "相对工作区的文件路径"}},
         "required": ["path"]},
    )
    def count_lines(args):
        target = workspace.resolve(string_arg(args, "path"))
        if not target.is_file():
            raise ToolFailed(f"{args['path']} 不存在或不是文件")
        text = target.read_text(encoding="utf-8", errors="replace")
        return str(len(text.splitlines()))

    return count_lines
''',
    "style_b": '''
from harness_lib import ToolFailed as _Failed
from harness_lib import string_arg as _string_arg

_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "文件路径，相对工作区"}},
    "required": ["path"],
}


def add_count_lines(registry, workspace):
    def handler(args):
        path = workspace.resolve(_string_arg(args, "path"))
        if not path.exists() or path.is_dir():
            raise _Failed("找不到文件，或者它是目录：" + str(args["path"]))
        data = path.read_bytes().decode("utf-8", "replace")
        lines = 0
        for _ in data.splitlines():
            lines += 1
        return f"{lines}"

    registry.register("count_lines", "返回文件的行数", _SCHEMA)(handler)
    return handler
''',
    # bug: counts newline characters, so a last line without a newline is missed
    "bug": '''
def add_count_lines(registry, workspace):
    @registry.register(
        "count_lines",
        "数一个文本文件有几行。",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    )
    def count_lines(args):
        target = workspace.resolve(string_arg(args, "path"))
        if not target.is_file():
            raise ToolFailed(f"{args['path']} 不存在或不是文件")
        return str(target.read_text(encoding="utf-8", errors="replace").count("\\n"))

    return count_lines
''',
}

ANSWERS["06-ex2-solution"] = {
    "style_a": '''
import errno
import os
from pathlib import Path


def _fail(err):
    raise err


def escaping_links(root):
    base = Path(root).resolve()
    out = []
    for folder, dirs, files in os.walk(base, onerror=_fail):
        for name in [*dirs, *files]:
            p = Path(folder, name)
            if not p.is_symlink():
                continue
            try:
                target = Path(os.path.realpath(p, strict=True))
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    out.append(p.relative_to(base).as_posix())
                    continue
                target = p.resolve()
            if target != base and base not in target.parents:
                out.append(p.relative_to(base).as_posix())
    out.sort()
    return out
''',
    "style_b": '''
import errno
import os


def _loops(path):
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def _walk(folder, base, found):
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_symlink():
                rel = os.path.relpath(entry.path, base).replace(os.sep, "/")
                if _loops(entry.path):
                    found.append(rel)
                    continue
                real = os.path.realpath(entry.path)
                if os.path.commonpath([real, base]) != base:
                    found.append(rel)
            elif entry.is_dir():
                _walk(entry.path, base, found)


def escaping_links(root):
    base = os.path.realpath(root)
    found = []
    _walk(base, base, found)
    return sorted(found)
''',
    # bug: compares string prefixes, so a sibling folder ws2 counts as inside ws
    "bug": '''
import os


def escaping_links(root):
    base = os.path.realpath(root)
    result = []
    for folder, dirs, files in os.walk(base):
        for name in dirs + files:
            path = os.path.join(folder, name)
            if os.path.islink(path) and not os.path.realpath(path).startswith(base):
                result.append(os.path.relpath(path, base).replace(os.sep, "/"))
    return sorted(result)
''',
}

ANSWERS["06-ex3-solution"] = {
    "style_a": '''
def registry_problems(tools, handlers):
    problems = set()
    names = []
    for tool in tools:
        fn = tool.get("function", {})
        name = fn.get("name")
        if name in names:
            problems.add((name, "重复定义"))
        names.append(name)
        params = fn.get("parameters") or {}
        props = params.get("properties") or {}
        for req in params.get("required") or []:
            if req not in props:
                problems.add((name, "必填参数未声明"))
        if name not in handlers:
            problems.add((name, "缺处理函数"))
    for name, handler in handlers.items():
        if name not in names:
            problems.add((name, "缺工具定义"))
        if not callable(handler):
            problems.add((name, "处理函数不可调用"))
    return problems
''',
    "style_b": '''
from collections import Counter


def _fn(tool):
    return tool["function"]


def registry_problems(tools, handlers):
    counts = Counter(_fn(t)["name"] for t in tools)
    out = {(n, "重复定义") for n, k in counts.items() if k > 1}
    out |= {(n, "缺处理函数") for n in counts if n not in handlers}
    out |= {(n, "缺工具定义") for n in handlers if n not in counts}
    out |= {(n, "处理函数不可调用") for n, h in handlers.items() if not callable(h)}
    for t in tools:
        params = _fn(t).get("parameters") or {}
        declared = set(params.get("properties") or {})
        if set(params.get("required") or []) - declared:
            out.add((_fn(t)["name"], "必填参数未声明"))
    return out
''',
    # bug: forgets duplicate definitions
    "bug": '''
def registry_problems(tools, handlers):
    problems = set()
    names = {t["function"]["name"] for t in tools}
    for tool in tools:
        fn = tool["function"]
        params = fn.get("parameters") or {}
        if any(r not in (params.get("properties") or {}) for r in params.get("required") or []):
            problems.add((fn["name"], "必填参数未声明"))
    problems |= {(n, "缺处理函数") for n in names if n not in handlers}
    problems |= {(n, "缺工具定义") for n in handlers if n not in names}
    problems |= {(n, "处理函数不可调用") for n, h in handlers.items() if not callable(h)}
    return problems
''',
}

# ---------------------------------------------------------------- 07

ANSWERS["07-ex1-solution"] = {
    "style_a": '''
import openai


def should_retry(exc):
    if isinstance(exc, EndpointError):
        exc = getattr(exc, "original", None)
        if exc is None:
            return False
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        code = exc.status_code
        return code in (408, 409, 429) or code >= 500
    return False
''',
    "style_b": '''
from openai import APIConnectionError, APIStatusError


def _status(error):
    return getattr(error, "status_code", None) if isinstance(error, APIStatusError) else None


def should_retry(exc):
    original = exc.original if isinstance(exc, EndpointError) else exc
    if original is None:
        return False
    if isinstance(original, APIConnectionError):  # APITimeoutError is a subclass
        return True
    status = _status(original)
    if status is None:
        return False
    return status == 429 or 500 <= status < 600
''',
    # bug: forgets timeouts and connection errors, which the statement says also retry
    "bug": '''
import openai


def should_retry(exc):
    if isinstance(exc, EndpointError):
        exc = exc.original
        if exc is None:
            return False
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False
''',
}

ANSWERS["07-ex2-solution"] = {
    "style_a": '''
def within_calls(max_calls, call=call_model):
    count = [0]

    def limited(client, **request):
        if count[0] == max_calls:
            raise BudgetExceeded(f"调模型的次数到了上限 {max_calls}，不再调用")
        count[0] += 1
        return call(client, **request)

    return limited
''',
    "style_b": '''
class _CallBudget:
    def __init__(self, limit, call):
        self.limit = limit
        self.call = call
        self.used = 0

    def __call__(self, client, **request):
        if self.used >= self.limit:
            raise BudgetExceeded("超过了调用次数的预算：最多 %d 次" % self.limit)
        self.used += 1
        return self.call(client, **request)


def within_calls(max_calls, call=call_model):
    return _CallBudget(max_calls, call)
''',
    # bug: one counter for the whole notebook, so a second budget starts with the first one's calls used
    "bug": '''
_calls_so_far = 0


def within_calls(max_calls, call=call_model):
    def limited(client, **request):
        global _calls_so_far
        if _calls_so_far >= max_calls:
            raise BudgetExceeded(f"已经调了 {_calls_so_far} 次模型，上限是 {max_calls} 次")
        _calls_so_far += 1
        return call(client, **request)

    return limited
''',
}

ANSWERS["07-ex3-solution"] = {
    "style_a": '''
import ssl


def _causes(exc):
    while exc is not None:
        yield exc
        exc = exc.__cause__ if exc.__cause__ is not None else exc.__context__


def what_to_check(exc):
    if isinstance(exc, EndpointError):
        exc = exc.original
        if exc is None:
            return None
    if isinstance(exc, openai.APIConnectionError):
        if any(isinstance(e, ssl.SSLCertVerificationError) for e in _causes(exc)):
            return "证书"
        return "代理或网络"
    if not isinstance(exc, openai.APIStatusError):
        return None
    code = exc.status_code
    said = (exc.message or "").lower()
    if code == 401:
        return "密钥"
    if code in (400, 404) and "model" in said:
        return "模型名"
    if code == 404:
        return "base_url"
    return None
''',
    "style_b": '''
import ssl

import openai


def _cert_problem(error):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, ssl.SSLCertVerificationError):
            return True
        error = error.__cause__ or error.__context__
    return False


def what_to_check(exc):
    original = getattr(exc, "original", exc) if isinstance(exc, EndpointError) else exc
    if isinstance(original, openai.APIConnectionError):
        return "证书" if _cert_problem(original) else "代理或网络"
    status = getattr(original, "status_code", None) if isinstance(original, openai.APIStatusError) else None
    if status == 401:
        return "密钥"
    if status in (400, 404):
        if "MODEL" in str(original.message).upper():
            return "模型名"
        if status == 404:
            return "base_url"
    return None
''',
    # bug: looks only one step down the cause chain, so a certificate failure wrapped twice reads as a network problem
    "bug": '''
import ssl


def what_to_check(exc):
    if isinstance(exc, EndpointError):
        exc = exc.original
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, ssl.SSLCertVerificationError):
            return "证书"
        return "代理或网络"
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code == 401:
            return "密钥"
        if exc.status_code in (400, 404) and "model" in exc.message.lower():
            return "模型名"
        if exc.status_code == 404:
            return "base_url"
    return None
''',
}

# ---------------------------------------------------------------- 08

ANSWERS["08-ex1-solution"] = {
    "style_a": '''
from harness_lib import EndpointError


def finish_or_cut(chunks):
    for chunk in chunks:
        if chunk.choices and chunk.choices[0].finish_reason:
            return chunk.choices[0].finish_reason
    raise EndpointError("stream_cut", "流结束了，却没有一块带 finish_reason：回复在半路被截断了")
''',
    "style_b": '''
def finish_or_cut(chunks):
    reason = None
    count = 0
    for count, chunk in enumerate(chunks, 1):
        choices = getattr(chunk, "choices", None) or []
        first = choices[0] if choices else None
        if reason is None and first is not None and first.finish_reason is not None:
            reason = first.finish_reason
    if reason is None:
        raise EndpointError("stream_cut", f"收到 {count} 块，没有 finish_reason，流断了")
    return reason
''',
    # bug: walks the chunks twice, which loses everything when they come from a one-shot iterator
    "bug": '''
def finish_or_cut(chunks):
    if not any(c.choices and c.choices[0].finish_reason for c in chunks):
        raise EndpointError("stream_cut", "流断了：没有 finish_reason")
    for c in chunks:
        if c.choices and c.choices[0].finish_reason:
            return c.choices[0].finish_reason
    raise EndpointError("stream_cut", "流断了：没有 finish_reason")
''',
}

ANSWERS["08-ex2-solution"] = {
    "style_a": '''
def rebuild_message(chunks):
    message = {}
    calls = []          # (index, call dict) in arrival order
    by_index = {}       # index -> the call currently being built at that index
    for chunk in chunks:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta is None:
            continue
        if delta.role:
            message["role"] = delta.role
        if delta.content is not None:
            message["content"] = message.get("content", "") + delta.content
        for key, value in (delta.model_extra or {}).items():
            if isinstance(value, str):
                message[key] = message.get(key, "") + value
            elif value is not None:
                message[key] = value
        for part in delta.tool_calls or []:
            current = by_index.get(part.index)
            if current is None or (part.id and current["id"] and part.id != current["id"]):
                current = {"id": part.id, "type": part.type or "function",
                           "function": {"name": "", "arguments": ""}}
                by_index[part.index] = current
                calls.append((part.index, current))
            if part.id and not current["id"]:
                current["id"] = part.id
            if part.function is not None:
                if part.function.name and not current["function"]["name"]:
                    current["function"]["name"] = part.function.name
                if part.function.arguments:
                    current["function"]["arguments"] += part.function.arguments
    message.setdefault("role", "assistant")
    if calls:
        message["tool_calls"] = [call for _, call in sorted(calls, key=lambda pair: pair[0])]
    return message
''',
    "style_b": '''
def _deltas(chunks):
    for chunk in chunks:
        data = chunk.model_dump() if hasattr(chunk, "model_dump") else dict(chunk)
        for choice in data.get("choices") or []:
            if choice.get("index", 0) == 0 and choice.get("delta") is not None:
                yield choice["delta"]


def rebuild_message(chunks):
    role, texts, extras, calls = "assistant", {}, {}, []
    for delta in _deltas(chunks):
        for key, value in delta.items():
            if key == "role":
                role = value or role
            elif key == "tool_calls":
                for part in value or []:
                    fn = part.get("function") or {}
                    starts_new = (not calls or calls[-1]["_index"] != part.get("index")
                                  or (part.get("id") and calls[-1]["id"] and part.get("id") != calls[-1]["id"]))
                    if starts_new:
                        same = [c for c in calls if c["_index"] == part.get("index")]
                        if same and not (part.get("id") and same[-1]["id"] != part.get("id")):
                            target = same[-1]
                        else:
                            target = {"_index": part.get("index"), "id": part.get("id"),
                                      "type": part.get("type") or "function", "name": "", "arguments": ""}
                            calls.append(target)
                    else:
                        target = calls[-1]
                    target["id"] = target["id"] or part.get("id")
                    target["name"] = target["name"] or fn.get("name") or ""
                    target["arguments"] += fn.get("arguments") or ""
            elif isinstance(value, str):
                texts[key] = texts.get(key, "") + value
            elif value is not None:
                extras[key] = value
    out = {"role": role, **texts, **extras}
    if calls:
        out["tool_calls"] = [{"id": c["id"], "type": c["type"],
                              "function": {"name": c["name"], "arguments": c["arguments"]}}
                             for c in sorted(calls, key=lambda c: c["_index"])]
    return out
''',
    # bug: empty-string text pieces are dropped, so a reply whose text is "" loses its content key
    "bug": '''
def rebuild_message(chunks):
    message = {"role": "assistant"}
    calls, by_index = [], {}
    for chunk in chunks:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content:
            message["content"] = message.get("content", "") + delta.content
        for key, value in (delta.model_extra or {}).items():
            if isinstance(value, str):
                message[key] = message.get(key, "") + value
        for part in delta.tool_calls or []:
            current = by_index.get(part.index)
            if current is None or (part.id and part.id != current["id"]):
                current = {"_index": part.index, "id": part.id, "type": part.type or "function",
                           "function": {"name": "", "arguments": ""}}
                by_index[part.index] = current
                calls.append(current)
            if part.function is not None:
                current["function"]["name"] = current["function"]["name"] or part.function.name or ""
                current["function"]["arguments"] += part.function.arguments or ""
    if calls:
        message["tool_calls"] = sorted(calls, key=lambda c: c["_index"])
        for c in calls:
            del c["_index"]
    return message
''',
}

# ---------------------------------------------------------------- 09

ANSWERS["09-ex1-solution"] = {
    "style_a": '''
def _clean(value):
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _as_dict(message):
    if isinstance(message, dict):
        return _clean(message)
    return _clean(message.model_dump(exclude_none=True))


def first_divergence(recorded, actual):
    recorded, actual = list(recorded), list(actual)
    for i in range(max(len(recorded), len(actual))):
        if i >= len(recorded) or i >= len(actual):
            return i
        if _as_dict(recorded[i]) != _as_dict(actual[i]):
            return i
    return None
''',
    "style_b": '''
def first_divergence(recorded, actual):
    def normal(m):
        d = m if isinstance(m, dict) else m.model_dump(exclude_none=True)
        return {k: v for k, v in d.items() if v is not None}

    left = [normal(m) for m in recorded]
    right = [normal(m) for m in actual]
    index = 0
    for a, b in zip(left, right):
        if a != b:
            return index
        index += 1
    return None if len(left) == len(right) else index
''',
    # bug: when one list is a prefix of the other, reports no difference
    "bug": '''
def first_divergence(recorded, actual):
    def normal(m):
        d = m if isinstance(m, dict) else m.model_dump(exclude_none=True)
        return {k: v for k, v in d.items() if v is not None}

    for i, (a, b) in enumerate(zip(recorded, actual)):
        if normal(a) != normal(b):
            return i
    return None
''',
}

ANSWERS["09-ex2-solution"] = {
    "style_a": '''
def _prompt_tokens(call):
    if "error" in call:
        return None
    if call.get("stream"):
        for chunk in reversed(call.get("chunks") or []):
            usage = chunk.get("usage") if isinstance(chunk, dict) else None
            if usage:
                return usage.get("prompt_tokens")
        return None
    usage = (call.get("response") or {}).get("usage")
    return usage.get("prompt_tokens") if usage else None


def resent_prompt_tokens(calls):
    total = 0
    for call in calls:
        retries = call.get("attempts", 1) - 1
        if retries <= 0:
            continue
        tokens = _prompt_tokens(call)
        if tokens:
            total += retries * tokens
    return total
''',
    "style_b": '''
def resent_prompt_tokens(calls):
    extra = 0
    for record in calls:
        attempts = record.get("attempts") or 1
        if attempts < 2:
            continue
        if record.get("stream"):
            chunks = record.get("chunks") or []
            last = chunks[-1] if chunks else {}
            usage = last.get("usage") or {}
        else:
            usage = (record.get("response") or {}).get("usage") or {}
        prompt = usage.get("prompt_tokens")
        if isinstance(prompt, int):
            extra += prompt * (attempts - 1)
    return extra
''',
    # bug: streaming calls are not counted (their usage is in the chunks)
    "bug": '''
def resent_prompt_tokens(calls):
    total = 0
    for call in calls:
        usage = (call.get("response") or {}).get("usage")
        if usage:
            total += (call.get("attempts", 1) - 1) * usage.get("prompt_tokens", 0)
    return total
''',
}

# ---------------------------------------------------------------- 10

ANSWERS["10-ex1-solution"] = {
    "style_a": '''
def will_run(policy, trusted, read_only, answer):
    if trusted:
        return True
    words = (answer or "").split()
    said_yes = bool(words) and words[0].lower() in ("y", "a")
    if policy == "allow":
        return True
    if policy == "allowlist":
        return bool(read_only)
    if policy == "auto":
        if read_only:
            return True
        return said_yes
    if policy == "ask":
        if answer is None:
            return bool(read_only)
        return said_yes
    return False  # "deny" and anything misspelled
''',
    "style_b": '''
import re


def _approves(answer):
    # the first word must be exactly y or a: "abort" starts with a but is not an answer
    return bool(answer) and re.match(r"\\s*[ya](\\s|$)", answer, re.IGNORECASE) is not None


_RULES = {
    "allow": lambda ro, ans: True,
    "deny": lambda ro, ans: False,
    "allowlist": lambda ro, ans: ro,
    "auto": lambda ro, ans: ro or (ans is not None and _approves(ans)),
    "ask": lambda ro, ans: ro if ans is None else _approves(ans),
}


def will_run(policy, trusted, read_only, answer):
    rule = _RULES.get(policy)
    return bool(trusted or (rule is not None and rule(bool(read_only), answer)))
''',
    # bug: with "ask" and nobody to ask, refuses instead of falling back to the allowlist
    "bug": '''
def will_run(policy, trusted, read_only, answer):
    if trusted or policy == "allow":
        return True
    words = (answer or "").split()
    yes = bool(words) and words[0].lower() in ("y", "a")
    if policy == "allowlist":
        return bool(read_only)
    if policy == "auto":
        return bool(read_only) or yes
    if policy == "ask":
        return yes
    return False
''',
}

ANSWERS["10-ex2-solution"] = {
    "style_a": '''
import json

DENIED = "错误（执行授权失败）："


def denied_commands(messages):
    arguments = {}
    found = []
    for m in messages:
        for call in m.get("tool_calls") or []:
            arguments[call["id"]] = call["function"]["arguments"]
        content = m.get("content")
        if m.get("role") != "tool" or not isinstance(content, str) or not content.startswith(DENIED):
            continue
        raw = arguments.get(m.get("tool_call_id"))
        command = raw
        try:
            parsed = json.loads(raw)
            if isinstance(parsed, dict) and "command" in parsed:
                command = parsed["command"]
        except (TypeError, ValueError, RecursionError):
            pass
        found.append((command, content[len(DENIED):]))
    return found
''',
    "style_b": '''
import json

DENIED = "错误（执行授权失败）："


def _command(raw):
    try:
        return json.loads(raw)["command"]
    except Exception:
        return raw


def _call_before(messages, index, call_id):
    for msg in reversed(messages[:index]):
        for call in msg.get("tool_calls") or ():
            if call.get("id") == call_id:
                return call
    return None


def denied_commands(messages):
    out = []
    for i, msg in enumerate(messages):
        text = msg.get("content") or ""
        if msg.get("role") == "tool" and text.startswith(DENIED):
            call = _call_before(messages, i, msg.get("tool_call_id"))
            raw = call["function"]["arguments"] if call else None
            out.append((_command(raw), text.removeprefix(DENIED)))
    return out
''',
    # bug: when the arguments cannot be read, gives None instead of the original string
    "bug": '''
import json

DENIED = "错误（执行授权失败）："


def denied_commands(messages):
    calls = {}
    out = []
    for m in messages:
        for c in m.get("tool_calls") or []:
            calls[c["id"]] = c
        text = m.get("content") or ""
        if m.get("role") == "tool" and text.startswith(DENIED):
            raw = calls[m["tool_call_id"]]["function"]["arguments"]
            try:
                command = json.loads(raw).get("command")
            except (ValueError, RecursionError):
                command = None
            out.append((command, text[len(DENIED):]))
    return out
''',
}

ANSWERS["10-ex3-solution"] = {
    "style_a": '''
from harness_lib import ToolDenied


def ask_first(handler, ask):
    always = set()

    def approved(args):
        command = args["command"]
        if command in always:
            return handler(args)
        reply = (ask(command) or "").strip()
        words = reply.split()
        first = words[0].lower() if words else ""
        if first == "y":
            return handler(args)
        if first == "a":
            always.add(command)
            return handler(args)
        if first == "n":
            reason = reply[1:].strip()
            raise ToolDenied(reason or "用户拒绝执行")
        raise ToolDenied("看不懂的答复")

    return approved
''',
    "style_b": '''
import harness_lib


class _Approver:
    def __init__(self, handler, ask):
        self.handler, self.ask, self.remembered = handler, ask, []

    def __call__(self, args):
        command = args["command"]
        if command not in self.remembered:
            parts = (self.ask(command) or "").split(None, 1)
            kind = parts[0].lower() if parts else ""
            if kind == "n":
                reason = parts[1].strip() if len(parts) > 1 else ""
                raise harness_lib.ToolDenied(reason or "用户拒绝执行")
            if kind not in ("y", "a"):
                raise harness_lib.ToolDenied("看不懂的答复")
            if kind == "a":
                self.remembered.append(command)
        return self.handler(args)


def ask_first(handler, ask):
    return _Approver(handler, ask)
''',
    # bug: the memory is shared by every approved function ask_first returns
    "bug": '''
from harness_lib import ToolDenied

_ALWAYS = set()


def ask_first(handler, ask):
    def approved(args):
        command = args["command"]
        if command in _ALWAYS:
            return handler(args)
        reply = (ask(command) or "").strip()
        first = reply.split()[0].lower() if reply else ""
        if first == "a":
            _ALWAYS.add(command)
        elif first == "n":
            raise ToolDenied(reply[1:].strip() or "用户拒绝执行")
        elif first != "y":
            raise ToolDenied("看不懂的答复")
        return handler(args)

    return approved
''',
}

# ---------------------------------------------------------------- 11

ANSWERS["11-ex1-solution"] = {
    "style_a": '''
def chat_to_items(messages):
    items = []
    for message in messages:
        m = message if isinstance(message, dict) else message.model_dump()
        role = m.get("role")
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"],
                          "output": m.get("content") or ""})
        elif role == "assistant":
            if m.get("content"):
                items.append({"role": "assistant", "content": m["content"]})
            for call in m.get("tool_calls") or []:
                items.append({"type": "function_call", "call_id": call["id"],
                              "name": call["function"]["name"], "arguments": call["function"]["arguments"]})
        else:
            items.append({"role": role, "content": m.get("content")})
    return items
''',
    "style_b": '''
def _field(message, name):
    return message.get(name) if isinstance(message, dict) else getattr(message, name, None)


def _call_items(calls):
    out = []
    for call in calls or ():
        function = _field(call, "function")
        out.append({"type": "function_call", "call_id": _field(call, "id"),
                    "name": _field(function, "name"), "arguments": _field(function, "arguments")})
    return out


def chat_to_items(messages):
    result = []
    for m in messages:
        role, text = _field(m, "role"), _field(m, "content")
        if role == "tool":
            result += [{"type": "function_call_output", "call_id": _field(m, "tool_call_id"), "output": text or ""}]
            continue
        if role != "assistant" or text:
            result += [{"role": role, "content": text}]
        result += _call_items(_field(m, "tool_calls"))
    return result
''',
    # bug: the assistant's text goes after its calls
    "bug": '''
def chat_to_items(messages):
    items = []
    for message in messages:
        m = message if isinstance(message, dict) else message.model_dump()
        if m.get("role") == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"],
                          "output": m.get("content") or ""})
            continue
        for call in m.get("tool_calls") or []:
            items.append({"type": "function_call", "call_id": call["id"],
                          "name": call["function"]["name"], "arguments": call["function"]["arguments"]})
        if m.get("role") != "assistant" or m.get("content"):
            items.append({"role": m["role"], "content": m.get("content")})
    return items
''',
}

ANSWERS["11-ex2-solution"] = {
    "style_a": '''
def unanswered(items):
    rows = [i if isinstance(i, dict) else i.model_dump() for i in items]
    missing = []
    for pos, row in enumerate(rows):
        if row.get("type") != "function_call":
            continue
        later = [r for r in rows[pos + 1:]
                 if r.get("type") == "function_call_output" and r.get("call_id") == row["call_id"]]
        if not later and row["call_id"] not in missing:
            missing.append(row["call_id"])
    return missing
''',
    "style_b": '''
def unanswered(items):
    open_calls = {}
    for item in items:
        kind = item.get("type") if isinstance(item, dict) else getattr(item, "type", None)
        cid = item.get("call_id") if isinstance(item, dict) else getattr(item, "call_id", None)
        if kind == "function_call":
            open_calls.setdefault(cid, True)
        elif kind == "function_call_output" and cid in open_calls:
            del open_calls[cid]
    return list(open_calls)
''',
    # bug: an output anywhere in the list counts, even one that came before the call
    "bug": '''
def unanswered(items):
    rows = [i if isinstance(i, dict) else i.model_dump() for i in items]
    answered = {r.get("call_id") for r in rows if r.get("type") == "function_call_output"}
    return [r["call_id"] for r in rows if r.get("type") == "function_call" and r["call_id"] not in answered]
''',
}

ANSWERS["11-ex3-solution"] = {
    "style_a": '''
import json


def _plain(block):
    return block if isinstance(block, dict) else block.model_dump()


def _text(content):
    if isinstance(content, str):
        return content
    return "".join(_plain(part).get("text", "") for part in content or [])


def messages_to_chat(messages):
    out = []
    for message in messages:
        role, content = message["role"], message["content"]
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        blocks = [_plain(b) for b in content]
        words = "".join(b["text"] for b in blocks if b["type"] == "text")
        if role == "assistant":
            entry = {"role": "assistant", "content": words or None}
            calls = [{"id": b["id"], "type": "function",
                      "function": {"name": b["name"], "arguments": json.dumps(b["input"], ensure_ascii=False)}}
                     for b in blocks if b["type"] == "tool_use"]
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
        else:
            out += [{"role": "tool", "tool_call_id": b["tool_use_id"], "content": _text(b.get("content", ""))}
                    for b in blocks if b["type"] == "tool_result"]
            if words:
                out.append({"role": "user", "content": words})
    return out
''',
    "style_b": '''
import json


def _assistant(blocks):
    text, calls = "", []
    for b in blocks:
        if b["type"] == "text":
            text += b["text"]
        elif b["type"] == "tool_use":
            calls.append({"id": b["id"], "type": "function",
                          "function": {"name": b["name"], "arguments": json.dumps(b["input"])}})
    message = {"role": "assistant", "content": text if text else None}
    if calls:
        message["tool_calls"] = calls
    return [message]


def _user(blocks):
    tools, text = [], ""
    for b in blocks:
        if b["type"] == "tool_result":
            body = b.get("content", "")
            if isinstance(body, list):
                body = "".join(part["text"] for part in body)
            tools.append({"role": "tool", "tool_call_id": b["tool_use_id"], "content": body})
        elif b["type"] == "text":
            text += b["text"]
    return tools + ([{"role": "user", "content": text}] if text else [])


def messages_to_chat(messages):
    chat = []
    for m in messages:
        if isinstance(m["content"], str):
            chat.append({"role": m["role"], "content": m["content"]})
            continue
        blocks = [b if isinstance(b, dict) else b.model_dump(exclude_none=True) for b in m["content"]]
        chat += _assistant(blocks) if m["role"] == "assistant" else _user(blocks)
    return chat
''',
    # bug: a user message's text and tool results stay in block order, so text can come before the tool messages
    "bug": '''
import json


def messages_to_chat(messages):
    chat = []
    for m in messages:
        if isinstance(m["content"], str):
            chat.append({"role": m["role"], "content": m["content"]})
            continue
        blocks = [b if isinstance(b, dict) else b.model_dump() for b in m["content"]]
        if m["role"] == "assistant":
            calls = [{"id": b["id"], "type": "function",
                      "function": {"name": b["name"], "arguments": json.dumps(b["input"])}}
                     for b in blocks if b["type"] == "tool_use"]
            text = "".join(b["text"] for b in blocks if b["type"] == "text")
            chat.append({"role": "assistant", "content": text or None, **({"tool_calls": calls} if calls else {})})
            continue
        for b in blocks:
            if b["type"] == "text":
                chat.append({"role": "user", "content": b["text"]})
            elif b["type"] == "tool_result":
                body = b.get("content", "")
                if not isinstance(body, str):
                    body = "".join(part["text"] for part in body)
                chat.append({"role": "tool", "tool_call_id": b["tool_use_id"], "content": body})
    return chat
''',
}

ANSWERS = {gid: {style: src.lstrip("\n") for style, src in styles.items()} for gid, styles in ANSWERS.items()}
