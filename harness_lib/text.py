"""截短文字的唯一一处：`shorten` 留下前 `limit` 个字符，截断处加 …，需要时注明原来有多长。

消息表、错误说明、审批提示、录像摘要、假模型的脚本说明都用它；各处只在它之前决定要截什么
（压成一行、只取第一行、换行显示成 ⏎、先转成 repr），截法只有这一种。
"""


def shorten(text: str, limit: int, *, total: bool = False) -> str:
    """`text` 不长于 `limit` 个字符就原样返回；否则前 `limit` 个字符加 …，`total` 时再注明原来共多少个字符。"""
    if len(text) <= limit:
        return text
    return text[:limit] + "…" + (f"（共 {len(text)} 个字符，只摘录了前 {limit} 个）" if total else "")


def one_line(text) -> str:
    """所有空白（换行、制表符、连续的空格）压成一个空格。"""
    return " ".join(str(text or "").split())
