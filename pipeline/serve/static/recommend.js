// The recommendations page: the seed basket (basket.js) sent to /api/recommend, each paper shown with why
// it was recommended (nearest seed and cosine, shared references and citers per seed) and export links.
// /recommend?pos=A,B&neg=C opens with those seeds (they replace the basket); the address always shows them.
import { esc, getJSON, fmtScore, showSnapshot, exportLinks, examples } from "/static/common.js";
import { loadSeeds, saveSeeds, seedButtons, showBasket, toggleSeed, wireSeedButtons } from "/static/basket.js";

const $ = (id) => document.getElementById(id);
let pending = 0; // the answer to the latest request wins

function seedTitle(id) {
  const s = loadSeeds();
  const hit = s.pos.concat(s.neg).find((x) => x.id === id);
  return hit && hit.title ? hit.title : id;
}

function renderSeeds(seeds) {
  const item = (s) => `<li data-id="${esc(s.id)}"><a href="/paper?id=${encodeURIComponent(s.id)}">${esc(s.title || s.id)}</a>
    <span class="meta">${esc(s.id)}</span> ${seedButtons(s.id, s.title)}</li>`;
  $("pos").innerHTML = seeds.pos.map(item).join("") || '<li class="meta">none yet</li>';
  $("neg").innerHTML = seeds.neg.map(item).join("") || '<li class="meta">none</li>';
}

// The graph evidence with one seed, in words: "cacm:1 (liked): CCBC 0.21 · 2 shared references (...) · cites it"
function linkText(ln) {
  const parts = [`CCBC ${fmtScore(ln.ccbc_weighted)}`];
  const ids = (xs) => (xs.length ? ` (${xs.map(esc).join(", ")})` : "");
  if (ln.shared_references) parts.push(`${ln.shared_references} shared reference${ln.shared_references > 1 ? "s" : ""}${ids(ln.reference_ids)}`);
  if (ln.shared_citers) parts.push(`${ln.shared_citers} shared citer${ln.shared_citers > 1 ? "s" : ""}${ids(ln.citer_ids)}`);
  if (ln.cites) parts.push("cites it");
  if (ln.cited_by) parts.push("cited by it");
  return `<li class="link link-${esc(ln.polarity)}" data-seed="${esc(ln.seed)}"><span class="seedname">${esc(seedTitle(ln.seed))}</span>
    <span class="meta">(${ln.polarity === "pos" ? "liked" : "unliked"} ${esc(ln.seed)})</span>: ${parts.join(" · ")}</li>`;
}

function render(data) {
  const ids = data.results.map((r) => r.paper_id);
  $("status").innerHTML = `${ids.length} papers like ${data.positives.map(esc).join(", ")}` +
    (data.negatives.length ? `, away from ${data.negatives.map(esc).join(", ")}` : "") + ` · snapshot ${esc(data.snapshot_id)} ` +
    exportLinks(ids, "Export these recommendations");
  $("recs").innerHTML = data.results.map((r) => `<li class="result rec" data-id="${esc(r.paper_id)}">
      <a class="title" href="/paper?id=${encodeURIComponent(r.paper_id)}">${esc(r.title || r.paper_id)}</a> ${seedButtons(r.paper_id, r.title)}
      <div class="meta">${r.year ? esc(r.year) + " · " : ""}${esc(r.external_id ?? r.paper_id)}</div>
      <div class="signals"><span class="score">score ${fmtScore(r.score)}</span><span>semantic ${fmtScore(r.semantic)}</span><span>graph ${fmtScore(r.graph)}</span>${r.negative ? `<span>negative ${fmtScore(r.negative)}</span>` : ""}</div>
      <p class="why"><strong>why:</strong> <span class="whytext">${esc(r.why)}</span></p>
      ${r.nearest_seed ? `<div class="nearest meta" data-seed="${esc(r.nearest_seed)}" data-similarity="${r.nearest_similarity}">nearest liked paper:
        <a href="/paper?id=${encodeURIComponent(r.nearest_seed)}">${esc(seedTitle(r.nearest_seed))}</a> (cosine ${fmtScore(r.nearest_similarity)})</div>` : ""}
      ${(r.links || []).length ? `<ul class="links">${r.links.map(linkText).join("")}</ul>` : ""}
    </li>`).join("");
}

async function run() {
  const seeds = loadSeeds();
  renderSeeds(seeds);
  const q = new URLSearchParams();
  if (seeds.pos.length) q.set("pos", seeds.pos.map((s) => s.id).join(","));
  if (seeds.neg.length) q.set("neg", seeds.neg.map((s) => s.id).join(","));
  history.replaceState(null, "", "/recommend" + (q.toString() ? "?" + q.toString() : ""));
  const mine = ++pending;
  if (!seeds.pos.length && !seeds.neg.length) {
    $("recs").innerHTML = "";
    $("status").textContent = "No seeds yet: press + like on search results or on a paper page.";
    return;
  }
  q.set("k", $("k").value || "20");
  $("status").textContent = "Recommending…";
  try {
    const data = await getJSON("/api/recommend?" + q.toString());
    if (mine === pending) render(data);
  } catch (e) {
    if (mine !== pending) return;
    $("recs").innerHTML = "";
    $("status").innerHTML = `<span class="error">${esc(e.message)}</span>`;
  }
}

// Seeds added by id or from a shared link have no title yet: ask the API for it (an unknown id stays an id;
// the recommendation request says what is wrong with it)
async function fillTitles() {
  const seeds = loadSeeds();
  let changed = false;
  for (const s of seeds.pos.concat(seeds.neg)) {
    if (s.title) continue;
    try { s.title = (await getJSON(`/api/papers/${encodeURIComponent(s.id)}`)).title || ""; changed = changed || !!s.title; } catch { /* unknown */ }
  }
  if (changed) { saveSeeds(seeds); renderSeeds(seeds); }
}

const init = new URLSearchParams(location.search);
if (init.has("pos") || init.has("neg")) {
  const ids = (name) => [...new Set(init.getAll(name).flatMap((v) => v.split(",")).map((v) => v.trim()).filter(Boolean))];
  const old = loadSeeds(), known = new Map(old.pos.concat(old.neg).map((s) => [s.id, s.title]));
  const neg = ids("neg");
  saveSeeds({ pos: ids("pos").filter((i) => !neg.includes(i)).map((id) => ({ id, title: known.get(id) || "" })),
    neg: neg.map((id) => ({ id, title: known.get(id) || "" })) });
}
wireSeedButtons(document.querySelector("main"), run);
$("addseed").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const id = $("seed_id").value.trim();
  if (!id) return;
  const pol = $("seed_polarity").value;
  if (!loadSeeds()[pol].some((x) => x.id === id)) toggleSeed(id, "", pol); // already there: pressing again would remove it
  $("seed_id").value = "";
  run().then(fillTitles);
});
$("clear").addEventListener("click", () => { saveSeeds({ pos: [], neg: [] }); run(); });
$("k").addEventListener("change", run);
showBasket();
showSnapshot();
examples().then((ex) => { if (ex.paper_id) $("seed_id").placeholder = `e.g. ${ex.paper_id}`; });
run().then(fillTitles);
