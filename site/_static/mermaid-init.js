// 网站上的 Mermaid：用本地的 mermaid.min.js（npm 包 mermaid）把 <pre class="mermaid"> 画成 SVG。
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
    mermaid.run({ querySelector: "pre.mermaid" }).then(keepReadable).catch(function (err) {
      console.error("Mermaid 图没能画出来：", err);
    });
  }
  // 手机上宽的图不要缩得太小：最窄 600 像素（原图更窄就按原图），放不下时在图里横向滚动
  function keepReadable() {
    document.querySelectorAll("pre.mermaid svg").forEach(function (svg) {
      var natural = parseFloat(svg.style.maxWidth);
      if (natural) {
        svg.style.minWidth = Math.min(natural, 600) + "px";
      }
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", render);
  } else {
    render();
  }
})();
