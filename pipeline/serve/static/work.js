// The page of a work the corpus papers cite that is not in the corpus (/api/works/{id}): what the citing papers'
// reference lists and the citation data say of it, the papers citing it here, and the works cited together with it.
import { esc, getJSON, fmt, plural, showSnapshot, exportLinks, linkChips, paperItem, paperHref } from "/static/common.js";
import { linkList } from "/static/links.js";
import { showBasket } from "/static/basket.js";

const $ = (id) => document.getElementById(id);
const id = new URLSearchParams(location.search).get("id");
const TOP = 10;

function render(d) {
  const w = d.work;
  document.title = `${w.title || w.work_id} · paperkb`;
  const facts = [w.year ? esc(w.year) : "", w.venue ? `<i>${esc(w.venue)}</i>` : "",
    `<span title="its id in this snapshot's citation graph">id ${esc(w.work_id)}</span>`,
    w.citation_count != null ? `<span title="Semantic Scholar's count when it knows the work, else the papers citing it here">${plural(w.citation_count, "citation")}</span>` : ""]
    .filter(Boolean).join(" · ");
  const search = w.title ? `<a class="ext ext-search" href="/?q=${encodeURIComponent(w.title)}" title="search this snapshot's passages for its title">Search its title</a>` : "";
  $("work").innerHTML = `
    <h1>${esc(w.title || w.work_id)}</h1>
    <div class="authors">${w.authors.length ? w.authors.map(esc).join(", ") : '<span class="meta">(no authors known)</span>'}</div>
    <div class="meta">${facts} <span class="outside" title="not in this corpus">not in corpus</span></div>
    <div class="actions">${linkChips(w.links)} ${search} ${exportLinks([w.work_id], "Cite")}</div>
    <p class="note">Not in this snapshot's corpus, so no abstract, passages or metrics here: this is what the papers citing
      it print of it, and the citation data.</p>`;
  $("printed-title").textContent = `As printed (${fmt(d.printed.total)})`;
  $("printed-note").textContent = d.printed.total
    ? `How the reference lists of the papers citing it print it${d.printed.total > d.printed.items.length ? `: the first ${d.printed.items.length}, most cited citing paper first` : ""}.`
    : "No corpus paper's reference list names it: it comes from the citation data.";
  $("printed").innerHTML = d.printed.items.map((e) => `<li><div class="raw">${esc(e.raw)}</div>
    <div class="meta">in <a href="${paperHref(e.paper_id)}">${esc(e.title || e.paper_id)}</a>${e.page ? `, p. ${esc(e.page)}` : ""}</div></li>`).join("");
  $("cites-title").textContent = `Cited by (${fmt(d.cited_by_count)})`;
  if (d.reference_count) {
    $("refs-section").hidden = false;
    $("refs-title").textContent = `References (${fmt(d.reference_count)})`;
    linkList(w.work_id, "references", "refs")();
  }
  linkList(w.work_id, "cited-by", "cites")();
  const n = d.cited_with.citing;
  $("with-title").textContent = `Cited together with (${fmt(d.cited_with.items.length)})`;
  $("with-note").textContent = n < 2 ? "None: fewer than two papers here cite it."
    : d.cited_with.items.length ? `The works most of the ${n} papers citing it also cite (co-citation): often its field's other key works.`
      : `None: no other work is cited by two of the ${n} papers citing it.`;
  $("with").innerHTML = d.cited_with.items.map((c) => `<li>${paperItem(c,
    `<span class="count" title="cited together with it by ${c.count} of the ${n} papers citing it">cited with it by ${c.count} of ${n}</span>`)}</li>`).join("");
}

async function main() {
  if (!id) { $("status").innerHTML = '<span class="error">No work id given.</span>'; return; }
  try {
    const d = await getJSON(`/api/works/${encodeURIComponent(id)}?top=${TOP}`);
    if (d.in_corpus) { location.replace(paperHref(d.paper_id)); return; }  // a corpus paper has its own page
    render(d);
    $("page").hidden = false;
    $("status").textContent = "";
  } catch (e) { $("status").innerHTML = `<span class="error">${esc(e.message)}</span>`; }
}

main();
showBasket();
showSnapshot();
document.getElementById("back").addEventListener("click", (ev) => {
  if (document.referrer.startsWith(location.origin + "/") && history.length > 1) { ev.preventDefault(); history.back(); }
});
