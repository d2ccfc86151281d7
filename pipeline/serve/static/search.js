import { esc, getJSON, fmt, plural, showSnapshot, exportLinks, examples, authorLinks, linkChips, queryStems, highlight,
  SIGNAL_HELP, signalChip, pager, slashFocuses, paperHref, workHref, paperItem } from "/static/common.js";
import { seedButtons, showBasket, wireSeedButtons } from "/static/basket.js";

const $ = (id) => document.getElementById(id);
const SIGNALS = ["ck", "doc", "abs", "fig", "pr"];
const PAGE = 10;
let offset = 0;

function params() {
  const p = new URLSearchParams({ q: $("q").value.trim(), k: String(PAGE), fusion: $("fusion").value });
  for (const id of ["year_from", "year_to", "category", "author"]) if ($(id).value.trim()) p.set(id, $(id).value.trim());
  if ($("expand").value) p.set("expand", $("expand").value);
  if ($("title_boost").checked) p.set("title_boost", "true");
  if ($("rerank").checked) p.set("rerank", "true");
  if ($("sort").value !== "relevance") p.set("sort", $("sort").value);
  if (offset) p.set("offset", String(offset));
  return p;
}

function where(r) {  // the page and section of the passage, and which part of the paper it is from
  const bits = [];
  if (r.page) bits.push(`p. ${esc(r.page)}`);
  if (r.section && r.role !== "abstract") bits.push(`§ ${esc(r.section)}`);
  if (r.role === "abstract") bits.push("abstract");
  else if (r.role && r.role !== "body") bits.push(`<span class="role" title="the part of the paper this passage is from">${esc(r.role)}</span>`);
  return bits.length ? `<span class="where" title="where this passage is in the paper">${bits.join(" · ")}</span>` : "";
}

function render(data) {
  const n = data.results.length;
  const from = data.offset + 1, to = data.offset + n;
  $("status").innerHTML = (n ? `Papers ${fmt(from)}–${fmt(to)}${data.more ? "" : " (all found)"}` : "No papers found") +
    ` · queries used: ${data.queries.map((q) => `<q>${esc(q)}</q>`).join(", ")} ` +
    exportLinks(data.results.map((r) => r.paper_id), "Export these") +
    (data.notes.length ? `<div class="notes">${data.notes.map(esc).join("<br>")}</div>` : "");
  const stems = queryStems(data.queries);
  $("results").innerHTML = data.results.map((r) => {
    const sig = r.signals || {};
    const keys = SIGNALS.concat(Object.keys(sig).filter((k) => !SIGNALS.includes(k)));
    // the abstract passage is indexed as "title. abstract": the title is shown above it already
    // the passage from its sentence that holds most of the query (pipeline/query/excerpt.py)
    let text = r.excerpt || r.passage || "";
    let cites = r.citations || [];
    if (r.role === "abstract" && r.title && text.startsWith(r.title)) { text = text.slice(r.title.length).replace(/^[.:\s]+/, ""); cites = []; }
    const cut = text.length > 480;
    if (cut) text = text.slice(0, 480);
    // several indexes searched as one: each result names its own (the paper pages read the first one)
    const index = r.index ? `<span class="index" title="the index this paper is from${r.also_in && r.also_in.length ? "; also in " + esc(r.also_in.join(", ")) : ""}">${esc([r.index].concat(r.also_in || []).join(" + "))}</span>` : "";
    const linked = !r.index || (data.indexes && data.indexes[0].index === r.index);
    const meta = [index, authorLinks(r.authors, 6), r.year ? `<span class="year">${esc(r.year)}</span>` : "", r.venue ? `<i>${esc(r.venue)}</i>` : "",
      r.citation_count != null ? plural(r.citation_count, "citation") : ""].filter(Boolean).join(" · ");
    return `<li class="result">
      ${linked ? `<a class="title" href="/paper?id=${encodeURIComponent(r.paper_id)}">${highlight(r.title || r.paper_id, stems)}</a> ${seedButtons(r.paper_id, r.title)}`
        : `<span class="title">${highlight(r.title || r.paper_id, stems)}</span> <span class="meta">${esc(r.paper_id)}</span>`}
      <div class="meta">${meta} ${linkChips(r.links)}</div>
      <p class="passage">${where(r)} ${withCitations(text, cites.filter((c) => c.end <= text.length), stems)}${cut ? "…" : ""}</p>
      <div class="signals">${signalChip("score", r.score, "score")}${keys.filter((k) => k in sig).map((k) => signalChip(k, sig[k])).join("")}</div>
    </li>`;
  }).join("");
  // works outside the corpus whose title the query names, among those the results cite: each has its page
  const named = data.cited_works || [];
  $("named").hidden = !named.length;
  // (a work only reference lists name counts the papers here as its citations: said once)
  $("named-list").innerHTML = named.map((w) => `<li>${paperItem(w.citation_count === w.cited_here ? { ...w, citation_count: null } : w,
    `<span class="count" title="corpus papers citing it; ${esc(plural(w.cited_by_results, "result"))} of this search among them">cited by ${esc(plural(w.cited_here, "paper"))} here</span>`)}</li>`).join("");
  pager($("pager"), { offset: data.offset, limit: PAGE, more: data.more, shown: n }, (o) => { offset = o; run(); window.scrollTo(0, 0); });
  $("legend").hidden = !n;
}

// The passage with the query's words marked and each in-text citation its reference list resolves ("[1]",
// "Cho et al. (2014a)") linked to the work it cites, the work's title in its tooltip
function withCitations(text, cites, stems) {
  let out = "", last = 0;
  for (const c of cites) {
    const w = c.works[0] || {};
    const href = w.paper_id ? paperHref(w.paper_id) : w.work_id ? workHref(w.work_id) : null;
    const tip = c.works.map((x) => `${x.title || x.raw}${x.year ? " (" + x.year + ")" : ""}`).join("; ");
    const marker = esc(text.slice(c.start, c.end));
    out += highlight(text.slice(last, c.start), stems)
      + (href ? `<a class="cite" href="${href}" title="${esc(tip)}">${marker}</a>` : `<span class="cite" title="${esc(tip)}">${marker}</span>`);
    last = c.end;
  }
  return out + highlight(text.slice(last), stems);
}

async function run(push = true) {
  const q = $("q").value.trim();
  if (!q) { $("status").innerHTML = '<span class="error">Type a query first.</span>'; return; }
  const p = params();
  if (push) history.replaceState(null, "", "/?" + p.toString());
  $("status").textContent = "Searching…";
  try { render(await getJSON("/api/search?" + p.toString())); }
  catch (e) { $("results").innerHTML = ""; $("pager").innerHTML = ""; $("named").hidden = true; $("status").innerHTML = `<span class="error">${esc(e.message)}</span>`; }
}

$("legend-list").innerHTML = Object.entries(SIGNAL_HELP).map(([k, v]) => `<dt>${esc(k)}</dt><dd>${esc(v)}</dd>`).join("");
$("legend").hidden = true;
$("search").addEventListener("submit", (ev) => { ev.preventDefault(); offset = 0; run(); });
$("sort").addEventListener("change", () => { offset = 0; if ($("q").value.trim()) run(); });
slashFocuses($("q"));

// Example queries, and filter placeholders, from the served snapshot itself
examples().then((ex) => {
  const qs = ex.queries || [];
  if (qs.length) {
    $("q").placeholder = `e.g. ${qs[0]}`;
    $("examples").innerHTML = `Try: ${qs.map((q) => `<a href="/?q=${encodeURIComponent(q)}" class="example">${esc(q)}</a>`).join(" · ")}` +
      (ex.papers ? ` · or <a href="/papers">browse all ${fmt(ex.papers)} papers</a>` : "");
    $("examples").querySelectorAll("a.example").forEach((a) => a.addEventListener("click", (ev) => {
      ev.preventDefault(); $("q").value = a.textContent; offset = 0; run();
    }));
  }
  if (ex.category) $("category").placeholder = `e.g. ${ex.category}`;
  if (ex.author) $("author").placeholder = `e.g. ${ex.author}`;
  if (ex.year_min) $("year_from").placeholder = String(ex.year_min);
  if (ex.year_max) $("year_to").placeholder = String(ex.year_max);
});

const init = new URLSearchParams(location.search);
for (const id of ["year_from", "year_to", "category", "author"]) if (init.get(id)) $(id).value = init.get(id);
for (const id of ["fusion", "expand", "sort"]) if (init.get(id)) $(id).value = init.get(id);
for (const id of ["title_boost", "rerank"]) if (init.get(id) === "true") $(id).checked = true;
offset = Math.max(0, parseInt(init.get("offset") || "0", 10) || 0);
if (init.get("q")) { $("q").value = init.get("q"); run(false); }
$("q").focus();
wireSeedButtons($("results"));
showBasket();
showSnapshot();
