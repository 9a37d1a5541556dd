"""端点故障：项目自己的异常类型，在 Jupyter 里只显示几行中文，而不是几十行调用栈。

这里不是课程内容本身。真实端点会遇到假模型从不出现的问题：密钥不对、被限流、服务器出错、
返回的不是 JSON、流式回复中途断掉……`EndpointError` 把这些统一成一句“原因 + 怎么办”，
SDK 抛出的原始异常保存在 `original`（也是 `__cause__`），需要细节时还能找到。
"""


class EndpointError(Exception):
    """调用模型端点失败。`kind` 是简短的类别名，`explanation` 是给学习者看的中文说明。

    类别：auth、permission、not_found、rate_limit、server、timeout、connection、
    bad_response、no_choices、stream_cut、bad_request、other。
    """

    def __init__(self, kind, explanation, *, original=None):
        super().__init__(explanation)
        self.kind = kind
        self.explanation = explanation
        self.original = original
        if original is not None:
            self.__cause__ = original

    def __str__(self):
        return f"[{self.kind}] {self.explanation}"

    def _render_traceback_(self):
        """IPython 用这个方法代替完整的调用栈：只显示类别、说明和原始异常的类型。"""
        lines = [f"EndpointError（{self.kind}）：{self.explanation}"]
        if self.original is not None:
            lines.append(f"    原始异常：{type(self.original).__name__}（保存在 .original 里）")
        lines.append("    agent_loop 遇到这种错误时不会改动 messages：修好原因后重新运行这一格，就能接着跑。")
        return lines
