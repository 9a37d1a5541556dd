// 主题的两段脚本（pydata-sphinx-theme 0.20、sphinx-book-theme 1.4）都把点击绑在页面上第一个 .primary-toggle /
// .secondary-toggle 上，那是导航栏里一个藏起来的图标；页首真正看得见的 ☰ 和“本页内容”按钮没人管，点了没反应。
// 这里把其余同类按钮的点击转给第一个：手机上打开抽屉，桌面上收起或展开侧栏，和主题本来想做的一样。
document.addEventListener("DOMContentLoaded", () => {
  for (const kind of [".primary-toggle", ".secondary-toggle"]) {
    const [first, ...others] = document.querySelectorAll(kind);
    for (const button of others) {
      button.addEventListener("click", (event) => {
        event.preventDefault();
        event.stopPropagation();
        first.click();
      });
    }
  }
});
