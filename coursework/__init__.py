"""课程作业：发作业、收作业、沙盒评分、给老师的表。各模块做什么见同一目录的 README.md。

命令行入口是 `python -m coursework.course`（`make release`、`make autograde`）。
"""
