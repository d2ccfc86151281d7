import { esc, getJSON, fmt, showSnapshot, exportLinks } from "/static/common.js";
import { drawGraph } from "/static/graph.js";
import { seedButtons, showBasket, wireSeedButtons } from "/static/basket.js";

const $ = (id) => document.getElementById(id);
const id = new URLSearchParams(location.search).get("id");

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
  $("paper").innerHTML = `
    <h1>${esc(p.title || id)}</h1>
    <div class="meta">${esc((p.authors || []).join(", "))}${p.year ? " · " + esc(p.year) : ""} · ${esc(p.external_id ?? id)}</div>
    <div class="meta">${exportLinks([p.paper_id || id], "Cite")} ${seedButtons(p.paper_id || id, p.title)}</div>
    <h2>Abstract</h2><p>${esc(p.abstract || "(no abstract)")}</p>
    <h2>Metrics</h2><table class="metrics">${Object.entries(metrics).map(([k, v]) => `<tr><td>${esc(k)}</td><td>${fmt(v)}</td></tr>`).join("")}</table>
    <h2>Figure legends (${figs.length})</h2>
    <ul class="figures">${figs.map((f) => `<li>${legend(f)}${f.page ? ` <span class="meta">(p. ${esc(f.page)})</span>` : ""}</li>`).join("") || "<li class=meta>none</li>"}</ul>`;
}

async function main() {
  if (!id) { $("status").innerHTML = '<span class="error">No paper id given.</span>'; return; }
  try {
    const data = await getJSON(`/api/papers/${encodeURIComponent(id)}/related?k=20`);
    renderPaper(data.paper);
    $("status").textContent = `${data.related.length} connected papers`;
    $("related").innerHTML = data.related.map((r) => `<li><a href="/paper?id=${encodeURIComponent(r.paper_id || r.work_id)}">${esc(r.title || r.paper_id || r.work_id)}</a>
      <span class="meta">${r.year ? esc(r.year) + " · " : ""}ccbc ${fmt(r.ccbc_weighted ?? 0)} · score ${fmt(r.score ?? 0)}</span>
      ${r.paper_id ? seedButtons(r.paper_id, r.title) : ""}</li>`).join("");
    $("relexport").innerHTML = exportLinks(data.related.map((r) => r.paper_id || r.work_id), "Export connected papers");
    drawGraph($("graph"), data.paper, data.related, data.edges, data.layout);
  } catch (e) { $("status").innerHTML = `<span class="error">${esc(e.message)}</span>`; }
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
      ${h.paper_id ? `<a href="/paper?id=${encodeURIComponent(h.paper_id)}">${esc(h.title || h.paper_id)}</a>` : esc(h.title || h.work_id)}
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

wireSeedButtons(document.querySelector("main"));
main();
showBasket();
showSnapshot();
// Back to the results page the user came from (its query is in the URL); a plain link to / otherwise.
// A listener, not a javascript: URL, which the Content-Security-Policy (script-src 'self') blocks.
document.getElementById("back").addEventListener("click", (ev) => {
  if (document.referrer.startsWith(location.origin + "/") && history.length > 1) { ev.preventDefault(); history.back(); }
});
