// MathJax 3 for pymdownx.arithmatex (generic mode): typeset only what arithmatex marked.
// The MathJax build itself is served from the site (docs/hooks/build.py), never from a CDN.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
  svg: { fontCache: "global" },
};
