// Shared helpers for the pages (no framework, no network beyond this server).
import "/static/math.js";  // TeX in titles and abstracts, typeset wherever the pages put them
export function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
export async function getJSON(url) {
  const r = await fetch(url);
  const body = await r.json().catch(() => ({}));
  if (!r.ok) {
    const d = body.detail;
    const err = new Error(typeof d === "string" ? d : Array.isArray(d) ? d.map((x) => x.msg).join("; ") : `HTTP ${r.status}`);
    err.status = r.status;
    err.candidates = body.candidates;  // an author name several authors match: each one's name and papers
    throw err;
  }
  return body;
}
// Numbers as people read them: integers as integers (1,234), scores with 3 decimals, tiny values
// (PageRank) with 3 significant digits.
export function fmt(x) {
  if (typeof x !== "number") return esc(x);
  if (Number.isInteger(x)) return x.toLocaleString("en-US");
  if (x !== 0 && Math.abs(x) < 0.01) return x.toPrecision(3);
  return x.toFixed(3);
}
// A score or signal: 3 decimals even when it is 0 or 1 (JSON does not tell 1.0 from 1), tiny ones 3 digits
export function fmtScore(x) {
  if (typeof x !== "number") return esc(x);
  return x !== 0 && Math.abs(x) < 0.01 ? x.toPrecision(3) : x.toFixed(3);
}
export function plural(n, one, many = one + "s") { return `${fmt(n)} ${n === 1 ? one : many}`; }
export async function showSnapshot() {
  try { const h = await getJSON("/api/health"); document.querySelector(".snap").textContent = `snapshot ${h.snapshot_id}`; }
  catch (e) { document.querySelector(".snap").textContent = e.message; }
}
// The served snapshot's own example queries and ids (/api/examples), fetched once per page.
let examplesPromise = null;
export function examples() {
  examplesPromise ??= getJSON("/api/examples").catch(() => ({ queries: [] }));
  return examplesPromise;
}
export const EXPORT_FORMATS = [["bibtex", "BibTeX"], ["ris", "RIS"], ["csl-json", "CSL-JSON"]];
// Download links for a reference manager: the listed papers through /api/export
export function exportLinks(ids, label = "Export") {
  if (!ids.length) return "";
  const q = ids.map((i) => "id=" + encodeURIComponent(i)).join("&");
  return `<span class="exports">${esc(label)}: ${EXPORT_FORMATS.map(([f, name]) =>
    `<a class="export" data-format="${f}" href="/api/export?${q}&format=${f}" download>${name}</a>`).join(" ")}</span>`;
}

// ---- papers --------------------------------------------------------------------------------------
export function authorHref(name) { return "/author?name=" + encodeURIComponent(name); }
// Author names, each a link to the author's page (`linked`: the paper is in the corpus, so its authors have
// a page); after `max` names, "+N more" (all names in its tooltip)
export function authorLinks(names, max = 8, linked = true) {
  const all = names || [];
  const shown = all.slice(0, max).map((n) => linked ? `<a class="author" href="${authorHref(n)}">${esc(n)}</a>` : esc(n)).join(", ");
  return all.length > max ? `${shown}, <span class="more" title="${esc(all.join(", "))}">+${all.length - max} more</span>` : shown;
}
const LINK_NAMES = [["arxiv", "arXiv", "the arXiv abstract page"], ["pdf", "PDF", "the PDF"], ["doi", "DOI", "the publisher's page (DOI)"],
  ["s2", "Semantic Scholar", "the paper on Semantic Scholar"]];
// An address a link may point at: http(s) alone (a PDF address comes from Semantic Scholar's data as it is; a
// "javascript:" or "data:" one must never become a link), as the feeds' links
export function webUrl(u) { return typeof u === "string" && /^https?:\/\/[^\s]+$/i.test(u); }
// Links to the paper elsewhere (arXiv abstract page, PDF, DOI, Semantic Scholar), those known
export function linkChips(links) {
  return LINK_NAMES.filter(([k]) => links && webUrl(links[k]))
    .map(([k, name, what]) => `<a class="ext ext-${k}" href="${esc(links[k])}" target="_blank" rel="noopener noreferrer" title="${esc(what)}">${name}</a>`)
    .join("");
}
export function tags(values) { return (values || []).map((c) => `<span class="tag">${esc(c)}</span>`).join(""); }
export function paperHref(id) { return "/paper?id=" + encodeURIComponent(id); }
// The page of a cited work outside the corpus: who cites it here, how they print it, what it is cited with
export function workHref(id) { return "/work?id=" + encodeURIComponent(id); }
// One paper in a list: title (linked to its page: a corpus paper's, else a cited work's), authors, year, venue,
// citations, links;
// `extra` is appended to the meta line. A reference that matched no known paper shows its printed text.
export function paperItem(p, extra = "", afterTitle = "") {
  const title = p.title || p.raw || p.work_id || "(untitled)";
  const head = p.paper_id ? `<a class="title" href="${paperHref(p.paper_id)}">${esc(title)}</a>`
    : p.work_id ? `<a class="title work" href="${workHref(p.work_id)}" title="not in this corpus: who cites it here, and how they print it">${esc(title)}</a>`
    : `<span class="title">${esc(title)}</span>`;
  const meta = [p.authors && p.authors.length ? authorLinks(p.authors, 4, !!p.paper_id) : "", p.year ? `<span class="year">${esc(p.year)}</span>` : "", p.venue ? `<i>${esc(p.venue)}</i>` : "",
    p.citation_count != null ? plural(p.citation_count, "citation") : ""].filter(Boolean).join(" · ");
  const printed = p.raw && !p.paper_id && p.method === "unmatched" ? `<div class="raw" title="as printed in the paper's references">${esc(p.raw)}</div>` : "";
  return `${head}${p.paper_id ? "" : ' <span class="outside" title="not in this corpus">not in corpus</span>'}${afterTitle ? " " + afterTitle : ""}
    <div class="meta">${meta}${extra ? (meta ? " · " : "") + extra : ""} ${linkChips(p.links)}</div>${printed}`;
}

// ---- query terms ---------------------------------------------------------------------------------
const STOP = new Set(("a an and are as at be by for from has have in into is it its of on or that the their this to was were " +
  "which with what how why when where who do does can not no we our you your").split(" "));
// The words of the queries worth marking in a passage, as stems (a crude suffix strip: "indexing",
// "indexes" and "indexed" all mark "index")
export function queryStems(queries) {
  const stems = new Set();
  for (const q of queries || []) {
    for (const w of String(q).toLowerCase().match(/[\p{L}\p{N}]+/gu) || []) {
      if (w.length < 3 || STOP.has(w)) continue;
      stems.add(w.length > 5 ? w.replace(/(ations?|ings?|ies|ers?|ed|es|s|ly|al)$/u, "") : w.replace(/s$/u, ""));
    }
  }
  return [...stems].filter((s) => s.length >= 3);
}
// `text` escaped, the words starting with one of `stems` wrapped in <mark>
export function highlight(text, stems) {
  const s = String(text ?? "");
  if (!stems.length) return esc(s);
  const alt = stems.map((x) => x.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).sort((a, b) => b.length - a.length).join("|");
  const re = new RegExp(`(?<![\\p{L}\\p{N}])(?:${alt})[\\p{L}\\p{N}]*`, "giu");
  let out = "", last = 0;
  for (const m of s.matchAll(re)) {
    out += esc(s.slice(last, m.index)) + `<mark>${esc(m[0])}</mark>`;
    last = m.index + m[0].length;
  }
  return out + esc(s.slice(last));
}

// ---- signals -------------------------------------------------------------------------------------
// What each score signal of a search result means (pipeline/query/signals.py), in words
export const SIGNAL_HELP = {
  score: "the paper's score: the weighted sum of the signals of its best passage (papers rank by it)",
  ck: "passage: cosine similarity of the query and this passage (meaning, not exact words)",
  doc: "document: cosine similarity of the query and the whole paper (the mean of its passages)",
  abs: "abstract: cosine similarity of the query and the paper's abstract",
  fig: "figures: best cosine similarity of the query and one of the paper's figure legends (0 without figures)",
  pr: "PageRank: the paper's importance in the citation graph, as log(1 + PageRank)",
  bm25: "keywords: BM25 match of the query's words in this passage, relative to the best match",
  fused: "fusion: how high the passage ranked in the keyword and vector candidate lists together",
  rm3: "feedback: BM25 match of the query expanded with words from the first results (RM3)",
  nbr: "neighbours: how well the passages most similar to this one (in other papers) score: a match in a cluster of matches gains",
  ce: "rerank: a cross-encoder's relevance of the query and this passage",
  title: "title boost: points for the query's words in the paper's title",
};
export function signalChip(name, value, cls = "") {
  const help = SIGNAL_HELP[name] || "a signal of the score";
  return `<span class="sig sig-${esc(name)}${cls ? " " + cls : ""}" title="${esc(help)}" tabindex="0" aria-label="${esc(name)} ${fmtScore(value)}: ${esc(help)}">${esc(name)} ${fmtScore(value)}</span>`;
}

// ---- paging --------------------------------------------------------------------------------------
// Previous / next buttons and "11-20 of 42" for a listing; `go(offset)` loads another page
export function pager(el, { offset, limit, total, more, shown }, go) {
  const hasNext = total != null ? offset + limit < total : !!more;
  if (offset === 0 && !hasNext) { el.innerHTML = ""; return; }
  el.innerHTML = `<button type="button" class="prev" ${offset > 0 ? "" : "disabled"}>← Previous</button>
    <span class="meta">${fmt(offset + 1)}–${fmt(offset + shown)}${total != null ? " of " + fmt(total) : ""}</span>
    <button type="button" class="next" ${hasNext ? "" : "disabled"}>Next →</button>`;
  el.querySelector(".prev").onclick = () => go(Math.max(0, offset - limit));
  el.querySelector(".next").onclick = () => go(offset + limit);
}

// `/` focuses the search box (`input`), unless the reader is typing in another field
export function slashFocuses(input) {
  document.addEventListener("keydown", (ev) => {
    const t = ev.target;
    const typing = t && (t.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(t.tagName));
    if (ev.key === "/" && !typing && !ev.ctrlKey && !ev.metaKey && !ev.altKey) { ev.preventDefault(); input.focus(); input.select(); }
  });
}
