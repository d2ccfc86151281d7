// TeX in titles, abstracts and passages (arXiv's "$^{11}$Be", "$\alpha_s$", "$\mathcal{N}=4$") typeset by KaTeX, as
// arXiv's own pages do with MathJax. KaTeX is vendored (static/vendor/katex, no CDN) and loaded only once a page shows
// text that holds TeX: a corpus without math never downloads it. Every page imports this through common.js; a
// MutationObserver typesets what the pages' scripts add, so no renderer has to call it. TeX that KaTeX cannot parse
// stays as it was written. Copying typeset math copies its TeX (KaTeX's copy-tex).
//
// Text nodes are split here rather than by KaTeX's auto-render, which takes any two dollar signs for math: older
// abstracts (CISI, CACM) write prices ("at $12,732; for female professionals at $10,044"). Pandoc's rule tells them
// apart: an inline "$...$" opens before a non-space, closes after a non-space, and is not followed by a digit.
// The scan is linear in the text's length: no delimited span holds its own opening delimiter ("\(" within "\(...\)",
// "$" within "$...$"), so a search from one opener stops at the next; with "[\s\S]+?" every unclosed "\(" searched to
// the text's end (30,000 of them, 60,000 characters: 0.5-1 s).
const TEX = new RegExp([
  String.raw`\$\$(?<display>[^$]+?)\$\$`,
  String.raw`\\\[(?<bracket>(?:[^\\]|\\(?!\[))+?)\\\]`,
  String.raw`\\\((?<paren>(?:[^\\]|\\(?!\())+?)\\\)`,
  String.raw`(?<!\\)\$(?=\S)(?<inline>(?:\\.|[^$\\])+?)(?<=\S)\$(?!\d)`,
].join("|"), "g");

// The spans of ``text`` that are TeX, in order: each a RegExp match whose groups say which delimiters it had.
export function texMatches(text) {
  return [...text.matchAll(TEX)];
}

// where text is code, typed by the user, drawn in SVG (graph labels) or already typeset
const SKIP = "script, style, textarea, pre, code, option, svg, .katex, .no-math";
const BASE = "/static/vendor/katex/";
let katex = null;

// KaTeX's minified builds (classic scripts: its ES module build is unminified, twice the bytes)
function script(src) {
  return new Promise((resolve, reject) => {
    const el = document.createElement("script");
    el.src = src;
    el.onload = resolve;
    el.onerror = () => reject(new Error(`${src} did not load`));
    document.head.appendChild(el);
  });
}

function load() {
  if (!katex) {
    const css = document.createElement("link");
    css.rel = "stylesheet";
    css.href = `${BASE}katex.min.css`;
    document.head.appendChild(css);
    katex = Promise.all([script(`${BASE}katex.min.js`), script(`${BASE}contrib/copy-tex.min.js`)]).then(() => window.katex);
  }
  return katex;
}

function holdsTex(n) {
  TEX.lastIndex = 0;
  return TEX.test(n.data);
}

// The text nodes of ``root`` (an element, or a text node) that hold TeX, outside SKIP.
function texNodes(root) {
  if (root.nodeType === Node.TEXT_NODE) return root.parentElement?.closest(SKIP) || !holdsTex(root) ? [] : [root];
  if (root.nodeType !== Node.ELEMENT_NODE || root.closest(SKIP)) return [];
  const found = [];
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!n.parentElement.closest(SKIP) && holdsTex(n)) found.push(n);
  }
  return found;
}

function typesetNode(k, node) {
  const text = node.data, out = document.createDocumentFragment();
  let at = 0;
  for (const m of texMatches(text)) {
    const g = m.groups, tex = g.display ?? g.bracket ?? g.paren ?? g.inline;
    const span = document.createElement("span");
    try {
      k.render(tex, span, { displayMode: g.inline === undefined && g.paren === undefined, throwOnError: true, strict: "ignore" });
    } catch {
      continue;  // not TeX KaTeX knows: the text stays as written
    }
    out.append(text.slice(at, m.index), span);
    at = m.index + m[0].length;
  }
  if (at === 0) return;
  out.append(text.slice(at));
  node.replaceWith(out);
}

export function typeset(root) {
  const nodes = texNodes(root);
  if (!nodes.length) return;
  load().then((k) => nodes.forEach((n) => n.isConnected && typesetNode(k, n)))
    .catch((e) => console.warn("math left as TeX:", e));
}

new MutationObserver((records) => {
  for (const r of records) r.addedNodes.forEach(typeset);
}).observe(document.body, { childList: true, subtree: true });
typeset(document.body);
