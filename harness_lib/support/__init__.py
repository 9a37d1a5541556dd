"""支撑层：笔记本用到、但不是课程内容的部分，每个模块只做一件事。

从上往下（上层可以导入下层，反过来不行；pyproject.toml 里的 import-linter 合同检查）：

- `switch`（模型切换控件）、`probe`（端点探测）；
- `clients`（服务商预设、按环境变量建客户端）、`record`（录制与回放）、`faults`（故障端点）、`approval`（审批）、
  `quirks`（各家服务商的怪脾气，离线重现）；
- `endpoint`（把处理函数放到本机 HTTP 端口上）、`streaming`（流式块的拼接）；
- `fake`（离线假模型的客户端和处理函数）、`errors`（端点故障的分类与中文说明）；
- `fake_policy`（假模型的默认策略）、`request_checks`（像服务商一样检查请求）；
- `runner`（执行命令）；
- `wire`（HTTP 这一层：所有模型替身的接缝）、`secrets`（密钥打码、子进程的环境）、`net`（本机地址）、`view`（消息表）、
  `grading`（课程作业测试格用的检查）、`allowlist`（只读白名单）。
"""
