// The seed basket: papers the reader liked (+) or did not (−), kept in this browser's localStorage and
// sent to /api/recommend by the recommendations page (/recommend). No cookie, nothing stored on the server.
import { esc } from "/static/common.js";

const KEY = "paperkb.seeds";

export function loadSeeds() {
  try {
    const s = JSON.parse(localStorage.getItem(KEY) || "{}");
    const ok = (xs) => (Array.isArray(xs) ? xs.filter((x) => x && typeof x.id === "string") : []);
    return { pos: ok(s.pos), neg: ok(s.neg) };
  } catch { return { pos: [], neg: [] }; }
}

export function saveSeeds(seeds) {
  localStorage.setItem(KEY, JSON.stringify({ pos: seeds.pos, neg: seeds.neg }));
  showBasket();
}

export function polarityOf(id, seeds = loadSeeds()) {
  return seeds.pos.some((s) => s.id === id) ? "pos" : seeds.neg.some((s) => s.id === id) ? "neg" : null;
}

// Put a paper on one side (taking it off the other); pressing the same side again takes it off.
export function toggleSeed(id, title, polarity) {
  const seeds = loadSeeds();
  const was = polarityOf(id, seeds);
  seeds.pos = seeds.pos.filter((s) => s.id !== id);
  seeds.neg = seeds.neg.filter((s) => s.id !== id);
  if (was !== polarity) seeds[polarity].push({ id, title: title || "" });
  saveSeeds(seeds);
  return was === polarity ? null : polarity;
}

// "+ like" / "− unlike" buttons for one paper (wired by wireSeedButtons, no inline handler: the CSP forbids them)
export function seedButtons(id, title) {
  const p = polarityOf(id);
  const b = (pol, text, label) => `<button type="button" class="seed seed-${pol}" data-seed="${esc(id)}" data-title="${esc(title || "")}"
    data-polarity="${pol}" aria-pressed="${p === pol}" title="${label}">${text}</button>`;
  return `<span class="seedbuttons">${b("pos", "+ like", "Recommend papers like this one")}${b("neg", "− unlike", "Recommend papers unlike this one")}</span>`;
}

function refreshButtons(root) {
  const seeds = loadSeeds();
  root.querySelectorAll("button.seed").forEach((btn) => btn.setAttribute("aria-pressed", String(polarityOf(btn.dataset.seed, seeds) === btn.dataset.polarity)));
}

// One listener for every seed button under root (present and future); onChange after each press
export function wireSeedButtons(root, onChange) {
  root.addEventListener("click", (ev) => {
    const btn = ev.target.closest("button.seed");
    if (!btn || !root.contains(btn)) return;
    toggleSeed(btn.dataset.seed, btn.dataset.title, btn.dataset.polarity);
    refreshButtons(document);
    if (onChange) onChange();
  });
}

// The header's link to the recommendations page, with the basket's size
export function showBasket() {
  const a = document.getElementById("basket");
  if (!a) return;
  const s = loadSeeds();
  a.textContent = `Recommend (${s.pos.length} liked${s.neg.length ? `, ${s.neg.length} unliked` : ""})`;
}
