"""README 和 docs/screenshots/ 里的网站截图：在真实的 Chromium 里打开 `make site` 建好的网站，按手机（375 px）和
桌面（1280 px）两种宽度各截一张 03 里行数最多的那张消息表（循环跑完的那张），再截一张手机上打开菜单（☰）的样子。

    make site && .venv/bin/python scripts/screenshots.py [网站目录，默认 _build/site]

要 `pip install -e ".[browser]"` 和 Debian 的 chromium。JupyterLab 里的那张（03_live_table.png）由
`make test-browser`（tests/test_browser.py）截在 artifacts/browser/，从那里复制过来。
"""

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "screenshots"
CHROMIUM = "/usr/bin/chromium"


def main(site: Path) -> None:
    page_file = site / "notebooks" / "03_one_request.html"
    if not page_file.exists():
        raise SystemExit(f"找不到 {page_file}：先运行 make site")
    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        for width, name in [(375, "03_table_375.png"), (1280, "03_table_1280.png")]:
            page = browser.new_page(viewport={"width": width, "height": 900}, locale="zh-CN")
            page.goto(page_file.as_uri())
            rows = page.eval_on_selector_all(".messages-view", "views => views.map(v => v.querySelectorAll('tbody tr').length)")
            table = page.locator(".messages-view").nth(rows.index(max(rows)))
            table.scroll_into_view_if_needed()
            table.screenshot(path=str(OUT / name))
            print(OUT / name)
            page.close()
        page = browser.new_page(viewport={"width": 375, "height": 760}, locale="zh-CN")
        page.goto((site / "index.html").as_uri())
        page.locator(".primary-toggle:visible").first.click()
        page.wait_for_timeout(500)
        page.screenshot(path=str(OUT / "site_menu_375.png"))
        print(OUT / "site_menu_375.png")
        browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "_build" / "site")
