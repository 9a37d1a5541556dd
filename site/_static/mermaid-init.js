// 网站上的 Mermaid：用本地的 mermaid.min.js（npm 包 mermaid）把 <pre class="mermaid"> 画成 SVG。
// 图都是从上往下画的窄图（原宽不超过约 440 像素）：手机上按屏宽缩一点，不用横向滚动。
// 用普通脚本而不是 ES 模块：从磁盘直接打开网页（file://）时，浏览器不许加载模块脚本。
(function () {
  "use strict";
  function render() {
    mermaid.initialize({
      startOnLoad: false,
      theme: "default",
      securityLevel: "strict",
      fontFamily: getComputedStyle(document.body).fontFamily,
    });
    mermaid.run({ querySelector: "pre.mermaid" }).catch(function (err) {
      console.error("Mermaid 图没能画出来：", err);
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", render);
  } else {
    render();
  }
})();
