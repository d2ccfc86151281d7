import { esc, getJSON, fmt, plural, showSnapshot, authorHref, paperItem } from "/static/common.js";
import { showBasket } from "/static/basket.js";

const $ = (id) => document.getElementById(id);
const name = new URLSearchParams(location.search).get("name");

// Years between two labels of the papers-per-year axis: at most 10 four-digit labels (the panel is ~340 px wide).
function yearStep(span) {
  return [1, 2, 5, 10, 20, 50, 100].find((step) => Math.ceil(span / step) <= 10) || 100;
}

function render(a) {
  document.title = `${a.name} · paperkb`;
  $("name").textContent = a.name;
  if (a.asked) $("name").title = `the only author "${a.asked}" names`;
  $("aka").textContent = a.names.length > 1 ? `also printed as ${a.names.slice(1).join("; ")}` : "";
  const span = a.first_year ? (a.first_year === a.last_year ? String(a.first_year) : `${a.first_year}–${a.last_year}`) : "–";
  $("stats").innerHTML = [["papers", fmt(a.paper_count), "papers in this snapshot"], ["citations", fmt(a.citation_count), "citations of these papers, summed"],
    ["h-index", fmt(a.h_index), "h of these papers have at least h citations each"], ["years", esc(span), "first and last year of a paper"]]
    .map(([k, v, help]) => `<div title="${esc(help)}"><dt>${k}</dt><dd>${v}</dd></div>`).join("");
  $("papers-title").textContent = `Papers (${fmt(a.paper_count)})`;
  $("papers-note").innerHTML = `Most cited first${a.paper_count > a.papers.length ? `; the first ${a.papers.length} of ${fmt(a.paper_count)}` : ""} ·
    <a href="/papers?author=${encodeURIComponent(a.name)}&sort=date">all, newest first</a>`;
  $("papers").innerHTML = a.papers.map((p) => `<li>${paperItem(p)}</li>`).join("");
  // papers per year: one bar per year from the first to the last (empty years included)
  const counts = new Map(a.years.map((y) => [y.year, y.count]));
  const most = Math.max(1, ...a.years.map((y) => y.count));
  // the axis names years in full (1959, not 59), every `step` years so that the labels never overlap
  const step = yearStep(a.first_year ? a.last_year - a.first_year + 1 : 0);
  const bars = [];
  for (let y = a.first_year; a.first_year && y <= a.last_year; y++) {
    const n = counts.get(y) || 0;
    const label = y % step === 0 ? y : "";
    bars.push(`<div class="bar" title="${y}: ${plural(n, "paper")}"><small>${n ? n : ""}</small><span style="height:${Math.round((100 * n) / most)}%"></span><i>${label}</i></div>`);
  }
  $("years").innerHTML = bars.join("");
  $("years").setAttribute("aria-label", a.years.map((y) => `${y.year}: ${y.count}`).join(", "));
  $("coauthors").innerHTML = a.coauthors.map((c) => `<li><a class="author" href="${authorHref(c.name)}">${esc(c.name)}</a>
    <span class="meta">${plural(c.count, "paper")} together</span></li>`).join("") || '<li class="meta">none</li>';
}

async function main() {
  if (!name) { $("status").innerHTML = '<span class="error">No author name given.</span>'; return; }
  try {
    render(await getJSON(`/api/authors/${encodeURIComponent(name)}?limit=100`));
    $("status").textContent = "";
  } catch (e) {
    $("profile").hidden = true;  // nothing to show but the message
    if (Array.isArray(e.candidates) && e.candidates.length) {  // a surname several authors share: choose one
      document.title = `${name} · paperkb`;
      $("status").textContent = "";
      $("asked").textContent = name;
      $("candidates").innerHTML = e.candidates.map((c) => `<li><a class="author" href="${authorHref(c.name)}">${esc(c.name)}</a>
        <span class="meta">${plural(c.paper_count, "paper")}</span></li>`).join("");
      $("choose").hidden = false;
    } else {
      $("status").innerHTML = `<span class="error">${esc(e.message)}</span>`;
    }
  }
}
main();
showBasket();
showSnapshot();
