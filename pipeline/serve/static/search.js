import { esc, getJSON, fmt, showSnapshot, exportLinks } from "/static/common.js";
import { seedButtons, showBasket, wireSeedButtons } from "/static/basket.js";

const $ = (id) => document.getElementById(id);
const SIGNALS = ["ck", "doc", "abs", "fig", "pr"];

function params() {
  const p = new URLSearchParams({ q: $("q").value, k: "20", fusion: $("fusion").value });
  for (const id of ["year_from", "year_to", "category", "author"]) if ($(id).value.trim()) p.set(id, $(id).value.trim());
  if ($("expand").value) p.set("expand", $("expand").value);
  if ($("title_boost").checked) p.set("title_boost", "true");
  if ($("rerank").checked) p.set("rerank", "true");
  return p;
}

function render(data) {
  $("status").innerHTML = `${data.results.length} papers · queries used: ${data.queries.map(esc).join(" | ")} ` +
    exportLinks(data.results.map((r) => r.paper_id), "Export these results") +
    (data.notes.length ? `<div class="notes">${data.notes.map(esc).join("<br>")}</div>` : "");
  $("results").innerHTML = data.results.map((r) => {
    const sig = r.signals || {};
    const keys = SIGNALS.concat(Object.keys(sig).filter((k) => !SIGNALS.includes(k)));
    const authors = (r.authors || []).slice(0, 6).join(", ") + ((r.authors || []).length > 6 ? ", …" : "");
    return `<li class="result">
      <a class="title" href="/paper?id=${encodeURIComponent(r.paper_id)}">${esc(r.title || r.paper_id)}</a> ${seedButtons(r.paper_id, r.title)}
      <div class="meta">${esc(authors)}${r.year ? " · " + esc(r.year) : ""} · ${esc(r.external_id ?? r.paper_id)}${r.page ? " · p. " + esc(r.page) : ""}${r.section && r.role !== "abstract" ? " · " + esc(r.section) : ""}${r.role && r.role !== "body" ? ` · <span class="role" title="the part of the paper this passage is from">${esc(r.role)}</span>` : ""}</div>
      <p class="passage">${esc((r.passage || "").slice(0, 400))}${(r.passage || "").length > 400 ? "…" : ""}</p>
      <div class="signals"><span class="score">score ${fmt(r.score)}</span>${keys.filter((k) => k in sig).map((k) => `<span class="sig-${esc(k)}">${esc(k)} ${fmt(sig[k])}</span>`).join("")}</div>
    </li>`;
  }).join("");
}

async function run(push = true) {
  const q = $("q").value.trim();
  if (!q) { $("status").innerHTML = '<span class="error">Type a query first.</span>'; return; }
  const p = params();
  if (push) history.replaceState(null, "", "/?" + p.toString());
  $("status").textContent = "Searching…";
  try { render(await getJSON("/api/search?" + p.toString())); }
  catch (e) { $("results").innerHTML = ""; $("status").innerHTML = `<span class="error">${esc(e.message)}</span>`; }
}

$("search").addEventListener("submit", (ev) => { ev.preventDefault(); run(); });
document.addEventListener("keydown", (ev) => {
  if (ev.key === "/" && document.activeElement !== $("q")) { ev.preventDefault(); $("q").focus(); $("q").select(); }
});
const init = new URLSearchParams(location.search);
if (init.get("q")) { $("q").value = init.get("q"); run(false); }
wireSeedButtons($("results"));
showBasket();
showSnapshot();
