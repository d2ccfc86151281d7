import { esc, getJSON, plural, showSnapshot, examples, paperItem, pager } from "/static/common.js";
import { seedButtons, showBasket, wireSeedButtons } from "/static/basket.js";

const $ = (id) => document.getElementById(id);
const FIELDS = ["sort", "author", "category", "year_from", "year_to"];
const PAGE = 20;
let offset = 0;

async function load() {
  const p = new URLSearchParams();
  for (const f of FIELDS) if ($(f).value.trim()) p.set(f, $(f).value.trim());
  if (offset) p.set("offset", String(offset));
  history.replaceState(null, "", "/papers?" + p.toString());
  p.set("limit", String(PAGE));
  $("status").textContent = "Loading…";
  try {
    const d = await getJSON("/api/papers?" + p.toString());
    $("status").textContent = d.total ? `${plural(d.total, "paper")}` : "No papers match.";
    $("papers").start = d.offset + 1;
    $("papers").innerHTML = d.items.map((r) => `<li>${paperItem(r, "", seedButtons(r.paper_id, r.title))}</li>`).join("");
    pager($("pager"), { offset: d.offset, limit: d.limit, total: d.total, shown: d.items.length }, (o) => { offset = o; load(); window.scrollTo(0, 0); });
  } catch (e) { $("papers").innerHTML = ""; $("pager").innerHTML = ""; $("status").innerHTML = `<span class="error">${esc(e.message)}</span>`; }
}

const init = new URLSearchParams(location.search);
for (const f of FIELDS) if (init.get(f)) $(f).value = init.get(f);
offset = Math.max(0, parseInt(init.get("offset") || "0", 10) || 0);
$("filters").addEventListener("submit", (ev) => { ev.preventDefault(); offset = 0; load(); });
$("sort").addEventListener("change", () => { offset = 0; load(); });
examples().then((ex) => {
  if (ex.author) $("author").placeholder = `e.g. ${ex.author}`;
  if (ex.category) $("category").placeholder = `e.g. ${ex.category}`;
  if (ex.year_min) $("year_from").placeholder = String(ex.year_min);
  if (ex.year_max) $("year_to").placeholder = String(ex.year_max);

});
load();
wireSeedButtons($("papers"));
showBasket();
showSnapshot();
