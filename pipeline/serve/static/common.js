// Shared helpers for the search page and the paper page (no framework, no network beyond this server).
export function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
export async function getJSON(url) {
  const r = await fetch(url);
  const body = await r.json().catch(() => ({}));
  if (!r.ok) {
    const d = body.detail;
    throw new Error(typeof d === "string" ? d : Array.isArray(d) ? d.map((x) => x.msg).join("; ") : `HTTP ${r.status}`);
  }
  return body;
}
export function fmt(x) { return typeof x === "number" ? x.toFixed(3) : esc(x); }
export async function showSnapshot() {
  try { const h = await getJSON("/api/health"); document.querySelector(".snap").textContent = `snapshot ${h.snapshot_id}`; }
  catch (e) { document.querySelector(".snap").textContent = e.message; }
}
export const EXPORT_FORMATS = [["bibtex", "BibTeX"], ["ris", "RIS"], ["csl-json", "CSL-JSON"]];
// Download links for a reference manager: the listed papers through /api/export
export function exportLinks(ids, label = "Export") {
  if (!ids.length) return "";
  const q = ids.map((i) => "id=" + encodeURIComponent(i)).join("&");
  return `<span class="exports">${esc(label)}: ${EXPORT_FORMATS.map(([f, name]) =>
    `<a class="export" data-format="${f}" href="/api/export?${q}&format=${f}" download>${name}</a>`).join(" ")}</span>`;
}
