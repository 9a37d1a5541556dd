"""密钥的处理：抹掉文字里的密钥，以及不校验密钥时用的占位值。

- `redact(text, key)`：从文字里抹掉密钥以及密钥中任何 6 个字符以上的片段。
- `NO_KEY`：不校验密钥的本地服务也要求请求里带一个值，就用这个占位；它不是秘密，不打码。
"""

from __future__ import annotations

import re

__all__ = ["NO_KEY", "redact"]

NO_KEY = "not-needed"  # 不校验密钥的本地服务也要求请求里带一个值，就用这个占位

_KEYLIKE = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}|(?i:bearer)\s+[A-Za-z0-9_\-.]{8,}")


def redact(text, key) -> str:
    """从 `text` 里抹掉密钥：整把密钥，以及密钥中任何连续 6 个字符以上的片段都换成 `***`。

    `key` 可以是一个字符串、若干字符串组成的列表，或 None。服务商常在报错里回显密钥的
    开头结尾（如 `sk-abc***xyz`），所以只抹整把密钥不够。另外把形如 `sk-…`、`Bearer …`
    的长串也一并抹掉。
    """
    text = "" if text is None else str(text)
    keys = [key] if isinstance(key, str) else [k for k in (key or []) if k]
    mask = bytearray(len(text))
    for k in keys:
        if not k or k == NO_KEY:
            continue
        if len(k) < 6:
            start = text.find(k)
            while start != -1:
                mask[start:start + len(k)] = b"\x01" * len(k)
                start = text.find(k, start + 1)
            continue
        # 任何 ≥6 个字符的片段都是若干 6 字符片段的并集，所以标出所有 6 字符片段即可
        for i in range(len(k) - 5):
            gram = k[i:i + 6]
            start = text.find(gram)
            while start != -1:
                mask[start:start + 6] = b"\x01" * 6
                start = text.find(gram, start + 1)
    if any(mask):
        out, i = [], 0
        while i < len(text):
            if mask[i]:
                while i < len(text) and mask[i]:
                    i += 1
                out.append("***")
            else:
                out.append(text[i])
                i += 1
        text = "".join(out)
    return _KEYLIKE.sub("***", text)
