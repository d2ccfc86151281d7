// The served snapshot's feeds: per saved interest, the new papers that match it, with why.
import { esc, getJSON, showSnapshot, exportLinks } from "/static/common.js";

const FORMATS = [["json", "JSON Feed"], ["atom", "Atom"], ["md", "Markdown"], ["html", "HTML digest"]];

function feedSection(name, info, feed) {
  const items = feed.items || [];
  const links = FORMATS.map(([f, label]) =>
    `<a class="feedlink" data-format="${f}" href="/api/feeds/${encodeURIComponent(name)}?format=${f}">${label}</a>`).join(" ");
  const notes = (info.notes || []).map((n) => `<p class="meta note">${esc(n)}</p>`).join("");
  const list = items.map((it) => {
    const p = it._paperkb || {};
    const title = esc(it.title || p.paper_id);
    return `<li class="feeditem" data-paper="${esc(p.paper_id)}">
      <a href="/paper?id=${encodeURIComponent(p.paper_id)}">${title}</a>
      <span class="meta">${esc(p.paper_id)}${p.year ? ", " + esc(p.year) : ""} · similarity ${Number(p.similarity).toFixed(2)}</span>
      <div class="why">why: ${esc(p.why)}</div>
      ${p.passage ? `<blockquote class="meta">${esc(p.passage.slice(0, 300))}</blockquote>` : ""}
    </li>`;
  }).join("");
  return `<section class="feed" id="${esc(name)}" data-feed="${esc(name)}">
    <h2>${esc(name)} <span class="meta">${info.matched} matching · ${esc(info.description)}</span></h2>
    <div class="meta">${links} ${exportLinks(items.map((it) => (it._paperkb || {}).paper_id), "Export")}</div>
    ${notes}
    ${items.length ? `<ol class="results">${list}</ol>` : `<p class="meta">No new paper matches in this snapshot.</p>`}
  </section>`;
}

function failedSection(name, err) {
  return `<section class="feed failed" id="${esc(name)}" data-feed="${esc(name)}">
    <h2>${esc(name)}</h2>
    <p class="meta error">This feed could not be loaded: ${esc((err && err.message) || String(err))}</p>
  </section>`;
}

async function main() {
  showSnapshot();
  const out = document.getElementById("feeds");
  const summary = document.getElementById("summary");
  try {
    const index = await getJSON("/api/feeds");
    const names = Object.keys(index.feeds || {});
    if (!names.length) {
      summary.textContent = `Snapshot ${index.snapshot_id} has no feeds: save an interest with \`paperkb interests add\`; feeds appear from the next publish on.`;
      return;
    }
    const since = index.previous_snapshot_id ? `since snapshot ${index.previous_snapshot_id}` : "(first snapshot: nothing is new yet)";
    summary.textContent = `${index.new_papers} new paper(s) in snapshot ${index.snapshot_id} ${since}.`;
    // each feed on its own: one that does not load says so in its section, the others are shown
    const feeds = await Promise.allSettled(names.map((n) => getJSON(`/api/feeds/${encodeURIComponent(n)}?format=json`)));
    out.innerHTML = names.map((n, i) => feeds[i].status === "fulfilled"
      ? feedSection(n, index.feeds[n], feeds[i].value) : failedSection(n, feeds[i].reason)).join("");
  } catch (e) {
    summary.textContent = e.message;
    summary.classList.add("error");
  }
}
main();
