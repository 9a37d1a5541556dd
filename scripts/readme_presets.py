"""README 里的服务商预设表由 `PRESETS` 生成：README、切换器和 `presets_table()` 说的是同一份数据。

    .venv/bin/python scripts/readme_presets.py          # 改了 harness_lib/ui/clients.py 的预设之后运行
    .venv/bin/python scripts/readme_presets.py --check  # 只检查，不一致时退出码 1（tests/test_setup_files.py 也查）
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness_lib.ui.clients import PRESETS  # noqa: E402

BEGIN = "<!-- presets:begin（scripts/readme_presets.py 从 harness_lib/ui/clients.py 的 PRESETS 生成，别手改） -->"
END = "<!-- presets:end -->"


def table() -> str:
    """云服务商预设的 Markdown 表：服务商、base_url、模型名、出处、核对日期、停用日期、每次请求带上的字段。"""
    lines = ["| 服务商 | base_url | 模型名 | 出处（核对日期） | 停用日期 | 每次请求带上 |", "|---|---|---|---|---|---|"]
    for p in PRESETS:
        if not (p.base_url and p.needs_key):
            continue
        body = f"`{json.dumps(p.extra_body, ensure_ascii=False)}`" if p.extra_body else ""
        lines.append(f"| {p.label} | `{p.base_url}` | `{p.model}` | {p.source}（{p.checked}） | {p.retires} | {body} |")
    return "\n".join(lines)


def rendered(readme: str) -> str:
    """把 README 里两个标记之间的部分换成现在的表。"""
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table()}\n{END}{tail}"


def main(argv=None) -> int:
    path = ROOT / "README.md"
    readme = path.read_text(encoding="utf-8")
    fresh = rendered(readme)
    if "--check" in (argv if argv is not None else sys.argv[1:]):
        return 0 if fresh == readme else 1
    path.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
