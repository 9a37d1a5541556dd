"""第 3 项：执行框架每一轮的开销。

两种接法，各自把“循环的一轮”和“只调用一次 create()”并排测：

- 假模型直连：`agent_loop` + 脚本模式的 `FakeClient`（每次 20 轮工具调用再加一条回答），
  处理函数是什么都不做的 `{"bash": lambda args: "ok"}`，所以量到的只有循环和假模型本身；
- 本地 HTTP 端点：真正的 `openai.OpenAI(base_url=..., max_retries=0)` 连到
  `harness_lib.models.server.start_server()`，默认策略下一次循环正好两轮。

“单独 create()”用循环实际发出的同一串请求重放一遍，所以
执行框架自己的那部分 = 循环每轮用时 − 单独 create() 每次用时。
循环和重放交替进行，各取中位数；差值取每一对（循环、重放）之差的中位数。
"""

from __future__ import annotations

import http.client
import json
import contextlib
import os
import time

from .common import Figure, lib_module, median

GROUP = "loop 每轮开销"


class _Recorder:
    """包在客户端外面，记下循环发出的每一个请求（messages 列表复制一份）。"""

    def __init__(self, client):
        self.inner = client
        self.requests: list[dict] = []
        self.chat = self
        self.completions = self

    def create(self, **request):
        self.requests.append({**request, "messages": list(request["messages"])})
        return self.inner.chat.completions.create(**request)


@contextlib.contextmanager
def _approval_off():
    """录请求的那一趟循环由 `_Recorder` 包着客户端，审批会把它当作不可信的客户端；
    这里测的是速度，不是审批，所以明确写 `HARNESS_APPROVAL=allow`，跑完恢复原样。"""
    before = os.environ.get("HARNESS_APPROVAL")
    os.environ["HARNESS_APPROVAL"] = "allow"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("HARNESS_APPROVAL", None)
        else:
            os.environ["HARNESS_APPROVAL"] = before


def _noop_handlers():
    return {"bash": lambda args: "ok"}


def _fake_loop(fake, loop, turns: int, reps: int) -> tuple[float, float, float]:
    """脚本模式的假模型跑 `turns` 轮工具调用再加一条回答：返回（每轮用时、单独 create、差值），毫秒。"""
    script = [fake.tool_reply(fake.scripted_call("bash", {"command": f"echo {i}"}))
              for i in range(turns)] + [fake.text_reply("做完了。")]
    question = [{"role": "user", "content": f"把 0 到 {turns - 1} 依次 echo 一遍"}]

    def run_loop(client):
        messages = list(question)
        start = time.perf_counter()
        loop.agent_loop(messages, client=client, model=fake.DEFAULT_MODEL,
                        handlers=_noop_handlers(), max_turns=turns + 1)
        return (time.perf_counter() - start) / (turns + 1)

    recorder = _Recorder(fake.FakeClient(script))
    with _approval_off():
        run_loop(recorder)
    requests = recorder.requests
    assert len(requests) == turns + 1

    def replay():
        client = fake.FakeClient(script)
        create = client.chat.completions.create
        start = time.perf_counter()
        for request in requests:
            create(**request)
        return (time.perf_counter() - start) / len(requests)

    for _ in range(3):  # 预热
        run_loop(fake.FakeClient(script))
        replay()
    per_turn, bare = [], []
    for _ in range(reps):
        per_turn.append(run_loop(fake.FakeClient(script)))
        bare.append(replay())
    diff = median(a - b for a, b in zip(per_turn, bare))
    return median(per_turn) * 1000, median(bare) * 1000, diff * 1000


def fake_direct(quick: bool) -> list[Figure]:
    fake = lib_module("models.fake")
    loop = lib_module("lesson.loop")
    reps = 10 if quick else 60
    short_loop, short_bare, short_diff = _fake_loop(fake, loop, 1, reps * 4)
    long_loop, long_bare, long_diff = _fake_loop(fake, loop, 20, reps)
    sdk = ("假模型在 openai SDK 背后作答（进程内的 HTTP 传输层）：每次请求都经过 SDK 组装请求参数、"
           "解析响应，这部分随 messages 的条数线性增长")
    return [
        Figure(GROUP, "假模型：循环每轮用时（笔记本规模）", short_loop, "ms", ("<=", 1),
               note=f"1 轮工具调用 + 1 条回答，{reps * 4} 次取中位数；{sdk}", digits=3),
        Figure(GROUP, "假模型：执行框架部分（笔记本规模）", short_diff, "ms",
               note="每次循环减去紧随其后的重放：组装请求、model_dump、分发处理函数、追加消息", digits=3),
        Figure(GROUP, "假模型：循环每轮用时（20 轮）", long_loop, "ms",
               note=f"20 轮工具调用 + 1 条回答（最后一次请求带 41 条消息），{reps} 次的每轮平均取中位数", digits=3),
        Figure(GROUP, "假模型：单独 create() 每次用时（20 轮）", long_bare, "ms",
               note="重放循环发出的同一串请求：几乎全是 SDK 组装请求的开销", digits=3),
        Figure(GROUP, "假模型：执行框架部分（20 轮）", long_diff, "ms",
               note="循环自己的部分，与历史长短关系不大", digits=3),
    ]


def _http_timers(server, client, loop, model, question):
    """三个计时函数，各返回每轮的秒数：整个循环、只重放同样的 create()、不经 SDK 用 http.client 发同样的 JSON。
    同时返回每次循环的轮数和 http.client 的那条长连接（用完要关）。"""
    recorder = _Recorder(client)
    with _approval_off():
        loop.agent_loop(list(question), client=recorder, model=model, handlers=_noop_handlers())
    requests = recorder.requests  # messages 里都是 dict（循环存的是 model_dump 的结果）
    turns = len(requests)
    create = client.chat.completions.create
    bodies = [json.dumps(r, ensure_ascii=False).encode() for r in requests]
    conn = http.client.HTTPConnection(server.host, server.port)
    path = server.base_url.split(str(server.port), 1)[1] + "/chat/completions"
    headers = {"Content-Type": "application/json", "Authorization": "Bearer x"}

    def run_loop():
        start = time.perf_counter()
        loop.agent_loop(list(question), client=client, model=model, handlers=_noop_handlers())
        return (time.perf_counter() - start) / turns

    def replay():
        start = time.perf_counter()
        for request in requests:
            create(**request)
        return (time.perf_counter() - start) / turns

    def raw():
        start = time.perf_counter()
        for body in bodies:
            conn.request("POST", path, body=body, headers=headers)
            json.loads(conn.getresponse().read())
        return (time.perf_counter() - start) / turns

    return turns, (run_loop, replay, raw), conn


def _http_figures(per_turn, bare, raw_times, turns, reps, connections) -> list[Figure]:
    t_loop, t_bare = median(per_turn) * 1000, median(bare) * 1000
    t_diff = median(a - b for a, b in zip(per_turn, bare)) * 1000
    return [
        Figure(GROUP, "本地 HTTP：循环每轮用时", t_loop, "ms", ("<=", 3),
               note=f"openai SDK → 127.0.0.1 上的本地端点；每次循环 {turns} 轮，{reps} 次取中位数；"
                    f"服务端一共只接受了 {connections} 个 TCP 连接（SDK 与下面的 http.client 各一条长连接）",
               digits=3),
        Figure(GROUP, "本地 HTTP：单独 create() 每次用时", t_bare, "ms",
               note="同一客户端、同一端点，重放同样的请求", digits=3),
        Figure(GROUP, "本地 HTTP：执行框架部分（差值）", t_diff, "ms",
               note="每次循环减去紧随其后的重放，再取中位数", digits=3),
        Figure(GROUP, "参考：同样的请求用 http.client 直接 POST", median(raw_times) * 1000, "ms",
               note="不经过 openai SDK：HTTP 往返加服务端假模型；与上面单独 create() 的差就是 SDK 自己的开销",
               digits=3),
    ]


def over_http(quick: bool) -> list[Figure]:
    import openai

    fake = lib_module("models.fake")
    reps = 30 if quick else 300
    question = [{"role": "user", "content": "列出当前目录中的 Python 文件"}]
    server = lib_module("models.server").start_server("127.0.0.1", port=0)
    try:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        turns, timers, conn = _http_timers(server, client, lib_module("lesson.loop"), fake.DEFAULT_MODEL, question)
        for _ in range(10):  # 预热：建立连接、SDK 的延迟导入
            for timer in timers:
                timer()
        times = [[], [], []]  # 循环、重放、http.client，轮流各跑一次
        for _ in range(reps):
            for timer, found in zip(timers, times):
                found.append(timer())
        conn.close()
        connections = server.connections
    finally:
        server.close()
    return _http_figures(*times, turns, reps, connections)


def run(quick: bool) -> list[Figure]:
    return fake_direct(quick) + over_http(quick)
