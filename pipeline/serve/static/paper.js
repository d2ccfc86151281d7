import { esc, getJSON, fmt, fmtScore, plural, showSnapshot, exportLinks, examples, authorHref, linkChips, tags, paperItem,
  paperHref, workHref } from "/static/common.js";
import { drawGraph } from "/static/graph.js";
import { linkList } from "/static/links.js";
import { seedButtons, showBasket, wireSeedButtons } from "/static/basket.js";

const $ = (id) => document.getElementById(id);
const id = new URLSearchParams(location.search).get("id");
const METRIC_HELP = {
  citation_count: "papers citing it (Semantic Scholar's count, else the citation graph's)",
  pagerank: "its PageRank in the citation graph: how central it is",
  weight: "its power-law weight: 1 for rarely cited papers, smaller for highly cited ones (used by CCBC)",
};

// the PDF the passages were read from (the CLI's `paperkb show` says the same: pipeline/cli/paper_views.py)
function fullText(ft) {
  if (!ft) return "";
  const version = ft.arxiv_version ? `arXiv v${esc(ft.arxiv_version)}` : "the PDF";
  if (ft.status !== "ok") return `<span title="the newest PDF could not be used">full text: ${version} not used: ${esc(ft.why || ft.reason || ft.status)}</span>`;
  return `<span title="the PDF its passages were read from${ft.read_at ? ", on " + esc(ft.read_at) : ""}">full text: ${ft.pages ? esc(ft.pages) + " pages of " : ""}${version}</span>`;
}

function renderPaper(p) {
  document.title = `${p.title || id} · paperkb`;
  const metrics = p.metrics || {};
  const figs = p.figures || [];
  // a legend is stored as printed, label included ("Figure 1: The Transformer ..."): the label is bold, not repeated
  const legend = (f) => {
    const text = f.text || "", label = f.label || "";
    return label && text.startsWith(label)
      ? `<strong>${esc(label)}</strong>${esc(text.slice(label.length))}`
      : `<strong>${esc(label)}</strong> ${esc(text)}`;
  };
  const bylines = (p.bylines && p.bylines.length ? p.bylines : (p.authors || []).map((name) => ({ name })))
    .map((b) => `<a class="author" href="${authorHref(b.name)}"${b.affiliation ? ` title="${esc(b.affiliation)}"` : ""}>${esc(b.name)}</a>`).join(", ");
  const facts = [p.year ? esc(p.year) : "", p.venue ? `<i>${esc(p.venue)}</i>` : "", p.published && (p.source === "arxiv" || !p.venue) ? `published ${esc(p.published)}` : "",
    `<span title="the paper's id in this snapshot">id ${esc(p.paper_id ?? id)}</span>`,
    metrics.citation_count != null ? plural(metrics.citation_count, "citation") : "", fullText(p.full_text)].filter(Boolean).join(" · ");
  const sections = p.sections || [];
  const pages = (s) => s.page_start ? (s.page_end && s.page_end !== s.page_start ? `pp. ${s.page_start}–${s.page_end}` : `p. ${s.page_start}`) : "";
  $("paper").innerHTML = `
    <h1>${esc(p.title || id)}</h1>
    <div class="authors">${bylines || '<span class="meta">(no authors known)</span>'}</div>
    <div class="meta">${facts}</div>
    <div class="actions">${linkChips(p.links)} ${exportLinks([p.paper_id || id], "Cite")} ${seedButtons(p.paper_id || id, p.title)}</div>
    ${(p.categories || []).length ? `<div class="tags" aria-label="categories">${tags(p.categories)}</div>` : ""}
    <h2>Abstract</h2><p>${esc(p.abstract || "(no abstract)")}</p>
    ${sections.length ? `<details class="contents"${sections.length <= 8 ? " open" : ""}><summary><h2>Contents (${sections.length} sections)</h2></summary>
      <ol class="sections">${sections.map((s) => `<li><span>${esc(s.section || "(untitled)")}</span>
      <span class="meta">${[pages(s), s.role !== "body" ? esc(s.role) : "", plural(s.passages, "passage")].filter(Boolean).join(" · ")}</span></li>`).join("")}</ol></details>` : ""}
    <h2>Metrics</h2><table class="metrics">${Object.entries(metrics).map(([k, v]) => `<tr><td title="${esc(METRIC_HELP[k] || "")}">${esc(k.replace("_", " "))}</td><td>${v == null ? "–" : fmt(v)}</td><td class="meta">${esc(METRIC_HELP[k] || "")}</td></tr>`).join("")}</table>
    ${figs.length ? `<h2>Figure legends (${figs.length})</h2>
    <ul class="figures">${figs.map((f) => `<li>${legend(f)}${f.page ? ` <span class="meta">(p. ${esc(f.page)})</span>` : ""}</li>`).join("")}</ul>` : ""}`;
  $("refs-title").textContent = `References (${fmt(p.reference_count ?? 0)})`;
  $("cites-title").textContent = `Cited by (${fmt(p.cited_by_count ?? 0)})`;
}

function counted(items, n, verb) {
  return items.map((w) => `<li>${paperItem(w, `<span class="count" title="${verb} ${w.count} of the ${n} papers in the graph">${verb} ${w.count} of ${n}</span>`)}</li>`).join("")
    || '<li class="meta">none (no paper is linked to two or more of the graph\'s papers)</li>';
}

async function main() {
  if (!id) { $("status").innerHTML = '<span class="error">No paper id given.</span>'; return; }
  try {
    const [p, data] = await Promise.all([getJSON(`/api/papers/${encodeURIComponent(id)}`), getJSON(`/api/papers/${encodeURIComponent(id)}/related?k=20`)]);
    renderPaper(p);
    linkList(id, "references", "refs")();
    linkList(id, "cited-by", "cites")();
    $("status").textContent = "";
    $("connected-title").textContent = `Connected papers (${fmt(data.related.length)})`;
    const n = data.related.length + 1;
    $("related").innerHTML = data.related.map((r) => `<li>${paperItem(r, `<span class="meta" title="weighted co-citation and coupling (CCBC) with this paper, and the overall score">ccbc ${fmtScore(r.ccbc_weighted ?? 0)} · score ${fmtScore(r.score ?? 0)}</span>`,
      r.paper_id ? seedButtons(r.paper_id, r.title) : "")}</li>`).join("");
    $("prior").innerHTML = counted(data.prior_works || [], n, "cited by");
    $("derivative").innerHTML = counted(data.derivative_works || [], n, "cites");
    $("relexport").innerHTML = exportLinks(data.related.map((r) => r.paper_id || r.work_id), "Export connected papers");
    drawGraph($("graph"), { ...data.paper, metrics: p.metrics }, data.related, data.edges, data.layout, $("hovercard"));
  } catch (e) {
    // a work the corpus papers cite, outside the corpus (its id from a reference, or its arXiv id or DOI): its own page
    if (e.status === 404 && await isCitedWork(id)) { location.replace(workHref(id)); return; }
    $("status").innerHTML = `<span class="error">${esc(e.message)}</span>`;
  }
}
async function isCitedWork(anId) {
  try { return (await getJSON(`/api/works/${encodeURIComponent(anId)}`)).in_corpus === false; } catch { return false; }
}
// Citation paths from this paper to another: each shortest path drawn as a chain of hops
function renderPaths(d) {
  if (d.length === null) {
    $("pathstatus").textContent = `No citation path of at most ${d.max_length} hops.`;
    $("paths").innerHTML = "";
    return;
  }
  $("pathstatus").textContent = `${d.count} shortest path(s) of ${d.length} hop(s)` + (d.truncated ? " (more not shown)" : "");
  $("paths").innerHTML = d.paths.map((p) => `<li><ol class="chain">${p.map((h) => `<li class="hop">
      ${h.link ? `<span class="link">${h.link === "cites" ? "↓ cites" : "↑ cited by"}</span>` : ""}
      <a href="${h.paper_id ? paperHref(h.paper_id) : workHref(h.work_id)}">${esc(h.title || h.paper_id || h.work_id)}</a>
      <span class="meta">${h.year ? esc(h.year) + " · " : ""}${esc(h.paper_id || h.work_id)}</span></li>`).join("")}</ol></li>`).join("");
}

$("pathform").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const to = $("path_to").value.trim();
  if (!to || !id) return;
  $("pathstatus").textContent = "Searching…";
  const q = new URLSearchParams({ from: id, to, max_length: $("path_max").value || "4" });
  try { renderPaths(await getJSON("/api/path?" + q.toString())); }
  catch (e) { $("paths").innerHTML = ""; $("pathstatus").innerHTML = `<span class="error">${esc(e.message)}</span>`; }
});
examples().then((ex) => { if (ex.paper_id && ex.paper_id !== id) $("path_to").placeholder = `e.g. ${ex.paper_id}`; });

wireSeedButtons(document.querySelector("main"));
main();
showBasket();
showSnapshot();
// Back to the results page the user came from (its query is in the URL); a plain link to / otherwise.
// A listener, not a javascript: URL, which the Content-Security-Policy (script-src 'self') blocks.
document.getElementById("back").addEventListener("click", (ev) => {
  if (document.referrer.startsWith(location.origin + "/") && history.length > 1) { ev.preventDefault(); history.back(); }
});
