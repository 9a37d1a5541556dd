"""一条消息的小工具，全项目只有这一处：转成字典、取出文字、估计 token 数、列出工具调用。

消息可能是字典，也可能是 SDK 的 pydantic 对象（`ChatCompletionMessage`）；内容可能是字符串，也可能是片段列表。
"""

from __future__ import annotations

import json
from typing import Any


def as_dict(item: Any) -> Any:
    """SDK 的 pydantic 对象用 `model_dump(exclude_none=True)` 转成字典；字典原样返回；别的留给调用者报错。"""
    if type(item) is dict:
        return item
    if hasattr(item, "model_dump"):
        return item.model_dump(exclude_none=True)
    return dict(item) if hasattr(item, "keys") else item


def text_of(content: Any) -> str:
    """消息内容可能是字符串，也可能是内容片段的列表；统一取出文字。"""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, (list, tuple)):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else p for p in content
                       if isinstance(p, (dict, str)))
    return str(content)


def token_count(text: str) -> int:
    """一段文字的 token 数，粗略估计：UTF-8 字节数除以 3（一个汉字约一个 token）。假模型的用量都按它算。"""
    return (len(text.encode("utf-8")) + 2) // 3


def calls_of(message: Any) -> list[tuple[str, str, str]]:
    """一条消息（dict 或 SDK 对象）里的工具调用，每个是 (id, name, arguments 的原文)。"""
    out = []
    for call in map(as_dict, as_dict(message).get("tool_calls") or []):
        function = as_dict(call.get("function") or {})
        args = function.get("arguments", "")
        out.append((str(call.get("id") or ""), str(function.get("name") or "?"),
                    args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, default=str)))
    return out
