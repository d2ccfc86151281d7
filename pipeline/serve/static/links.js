// The paged references and citing papers of a paper or of a cited work (/api/papers/{id}/references and /cited-by):
// the list `listId`, its note `${listId}-note`, sort `${listId}-sort` and pager `${listId}-pager`.
import { esc, getJSON, paperItem, pager, plural } from "/static/common.js";

const LIST = 10;
const $ = (id) => document.getElementById(id);

// Where the citing paper's text cites the work: its first sentence, the others (at most two more) folded away
function contextsOf(contexts, kind) {
  if (!contexts.length) return "";
  const what = kind === "references" ? "where this paper cites it" : "where it cites this paper";
  const marked = (c) => c.marker ? esc(c.text.slice(0, c.marker[0])) + `<mark>${esc(c.text.slice(c.marker[0], c.marker[1]))}</mark>` + esc(c.text.slice(c.marker[1])) : esc(c.text);
  const one = (c) => `<li><q>${marked(c)}</q>${c.page ? ` <span class="meta">p. ${esc(c.page)}${c.section ? " · " + esc(c.section) : ""}</span>` : ""}</li>`;
  const [first, ...rest] = contexts;
  return `<ul class="contexts" title="${what}">${one(first)}</ul>` + (rest.length
    ? `<details class="contexts"><summary>${rest.length} more ${rest.length === 1 ? "sentence" : "sentences"} citing it</summary><ul class="contexts">${rest.map(one).join("")}</ul></details>` : "");
}

// A function that loads the first page (and, on the sort's change or the pager's click, another)
export function linkList(id, kind, listId) {
  let offset = 0;
  const load = async () => {
    const q = new URLSearchParams({ limit: String(LIST), offset: String(offset), sort: $(`${listId}-sort`).value });
    try {
      const d = await getJSON(`/api/papers/${encodeURIComponent(id)}/${kind}?${q}`);
      const note = kind === "references"
        ? (d.items.some((r) => r.raw) ? "From the paper's own reference list, in printed order, and from the citation data." : "From the citation data.")
        : "Papers in the citation data that cite this one.";
      $(`${listId}-note`).textContent = d.total ? note : (kind === "references" ? "No references known." : "No citing papers known.");
      $(listId).start = offset + 1;
      $(listId).innerHTML = d.items.map((r) => {
        const mentions = r.mentions ? `<span class="mentions" title="${kind === "references" ? "sentences of this paper that cite it" : "sentences of its text that cite this paper"}">${plural(r.mentions, "mention")}</span>` : "";
        const where = [[r.page ? `p. ${esc(r.page)}` : "", mentions].filter(Boolean).join(" · "),
          r.is_influential ? '<span class="tag" title="Semantic Scholar: a highly influential citation">influential</span>' : "",
          (r.intents || []).map((i) => `<span class="tag">${esc(i)}</span>`).join(" ")].filter(Boolean).join(" ");
        return `<li>${paperItem(r, where)}${contextsOf(r.contexts || [], kind)}</li>`;
      }).join("");
      pager($(`${listId}-pager`), { offset: d.offset, limit: d.limit, total: d.total, shown: d.items.length }, (o) => { offset = o; load(); });
    } catch (e) { $(`${listId}-note`).innerHTML = `<span class="error">${esc(e.message)}</span>`; }
  };
  $(`${listId}-sort`).addEventListener("change", () => { offset = 0; load(); });
  return load;
}
