"""客户端学到的规矩记在学习者的缓存文件夹里：01–10 开头就知道，同一句说明整套笔记本只读一次。

文件是 `<缓存文件夹>/harness-lib/learned.json`（Linux 的 `~/.cache`、macOS 的 `~/Library/Caches`、
Windows 的 `%LOCALAPPDATA%`）。按 base_url 和模型名记，每条写着学到的日期；过了 `KEEP_DAYS` 天就不再用，
服务商会变。环境变量 `HARNESS_MEMORY` 设成 `off` 就不读也不写（测试、网站、`make test-real` 都这样），
设成一个路径就用那个文件。文件坏了、写不进去，都只是不记，不影响调用。
"""

from __future__ import annotations

import json
import os
import sys
from datetime import date, timedelta
from pathlib import Path

ENV_VAR = "HARNESS_MEMORY"
KEEP_DAYS = 30
# 能记的规矩 → 给人看的一句话（学到的规矩都来自服务器的某一次 400）
RULES = {
    "completion_tokens": "max_tokens 改发 max_completion_tokens",
    "no_reasoning": "带工具时写上 reasoning_effort=\"none\"",
    "refuses_none": "reasoning_effort 不收 \"none\"",
    "no_chat_tools": "在这里的 Chat Completions 里带不了工具",
    "responses_only": "请求在底下改走 Responses API（/v1/responses，11 讲这个接口）",
    "thinking_only": "总在思考，不传预设里关掉思考的字段",
    "stream_only": "在底下改成流式调用",
}


def cache_dir(environ=os.environ) -> Path:
    """这个系统上放缓存的文件夹。"""
    if sys.platform == "win32":
        return Path(environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    return Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def memory_path(environ=None) -> Path | None:
    """记忆文件的路径；`HARNESS_MEMORY=off` 时是 None。`environ` 里没有这个变量时看进程的环境变量。"""
    setting = ((environ or {}).get(ENV_VAR) or os.environ.get(ENV_VAR) or "").strip()
    if setting.lower() == "off":
        return None
    return Path(setting) if setting else cache_dir(os.environ) / "harness-lib" / "learned.json"


class Memory:
    """一个 base_url 的记忆：`learned()`、`rules(model)` 读出还没过期的规矩，`remember(model, rule, value)` 记下一条，
    `forget()` 清空这个地址的，`describe()` 每个模型一句中文。"""

    def __init__(self, path: Path, base_url: str, *, today: date | None = None):
        self.path, self.base_url = Path(path), base_url.rstrip("/")
        self.today = today or date.today()

    @classmethod
    def for_url(cls, base_url: str, environ=None) -> "Memory | None":
        path = memory_path(environ)
        return cls(path, base_url) if path and base_url else None

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
            os.replace(tmp, self.path)  # 先写好再换上：两个内核同时写，也不会留下半个文件
        except OSError:
            pass

    def _models(self) -> dict:
        models = self._read().get(self.base_url, {})
        return models if isinstance(models, dict) else {}

    def learned(self) -> dict[str, dict]:
        """每个模型还没过期的规矩：`{模型: {规矩: 值}}`（值多是 True；no_chat_tools 是服务器的原话）。文件只读一次。"""
        return {model: rules for model, entry in self._models().items() if (rules := self._fresh(entry))}

    def rules(self, model: str) -> dict:
        """这个模型还没过期的规矩。"""
        return self._fresh(self._models().get(model))

    def _fresh(self, entry) -> dict:
        """一条记录里的规矩；记录坏了或过了保存期，是空的。"""
        if not isinstance(entry, dict):
            return {}
        try:
            learned_on = date.fromisoformat(str(entry.get("learned_on")))
        except ValueError:
            return {}
        if self.today - learned_on > timedelta(days=KEEP_DAYS):
            return {}
        return {rule: value for rule, value in entry.items() if rule in RULES and value}

    def remember(self, model: str, rule: str, value=True) -> None:
        data = self._read()
        models = data.setdefault(self.base_url, {})
        entry = models.setdefault(model, {})
        entry.update({rule: value, "learned_on": self.today.isoformat()})
        self._write(data)

    def forget(self) -> int:
        """清空这个地址记下的一切，返回清掉了几个模型。"""
        data = self._read()
        gone = len(data.pop(self.base_url, {}) or {})
        self._write(data)
        return gone

    def describe(self) -> dict[str, str]:
        """每个模型一句：记得哪些规矩、哪天学到的。"""
        lines = {}
        for model, entry in self._models().items():
            rules = self._fresh(entry)
            if rules:
                said = "；".join(RULES[rule] for rule in RULES if rule in rules)
                lines[model] = f"{model}：{said}（{entry.get('learned_on')} 学到）"
        return lines
