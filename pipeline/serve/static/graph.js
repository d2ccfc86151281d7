// A small force-directed layout drawn in SVG. Hand-written on purpose: the page must work offline
// with no CDN, and ~60 lines here are simpler to audit than vendoring a graph library.
const NS = "http://www.w3.org/2000/svg";

function yearColour(year, lo, hi) {
  if (!year) return "#9aa5b1";
  const t = hi > lo ? (year - lo) / (hi - lo) : 0.5; // blue (old) -> orange (new)
  const mix = (a, b) => Math.round(a + (b - a) * t);
  return `rgb(${mix(52, 236)},${mix(120, 140)},${mix(200, 40)})`;
}

export function drawGraph(svg, center, related, edges) {
  const W = svg.clientWidth || 460, H = svg.clientHeight || 440;
  const cid = center.paper_id;
  const nodes = [{ id: cid, title: center.title, year: center.year, cites: (center.metrics || {}).citation_count ?? center.citation_count ?? 0, center: true }]
    .concat(related.map((r) => ({ id: r.paper_id || r.work_id, title: r.title, year: r.year, cites: r.citation_count ?? 0 })));
  const byId = new Map(nodes.map((n, i) => [n.id, i]));
  const links = (edges || []).filter((e) => byId.has(e.source) && byId.has(e.target))
    .map((e) => ({ s: byId.get(e.source), t: byId.get(e.target), w: e.weight || 0 }));
  const years = nodes.map((n) => n.year).filter(Boolean);
  const lo = Math.min(...years), hi = Math.max(...years);
  const maxW = Math.max(1e-9, ...links.map((l) => l.w));
  nodes.forEach((n, i) => {
    const a = (2 * Math.PI * i) / nodes.length;
    n.x = n.center ? W / 2 : W / 2 + 150 * Math.cos(a); n.y = n.center ? H / 2 : H / 2 + 150 * Math.sin(a);
    n.r = 5 + 3 * Math.sqrt(Math.log1p(n.cites || 0)) * 2;
  });
  for (let it = 0; it < 300; it++) {           // repulsion, springs (stronger for strong CCBC), gravity
    const cool = 1 - it / 300;
    for (let i = 0; i < nodes.length; i++) for (let j = i + 1; j < nodes.length; j++) {
      const a = nodes[i], b = nodes[j]; let dx = a.x - b.x, dy = a.y - b.y; const d2 = dx * dx + dy * dy + 0.01;
      const f = 900 / d2; a.x += dx * f * cool; a.y += dy * f * cool; b.x -= dx * f * cool; b.y -= dy * f * cool;
    }
    for (const l of links) {
      const a = nodes[l.s], b = nodes[l.t]; const dx = b.x - a.x, dy = b.y - a.y; const d = Math.sqrt(dx * dx + dy * dy) + 0.01;
      const f = ((d - (140 - 80 * (l.w / maxW))) / d) * 0.05 * cool; a.x += dx * f; a.y += dy * f; b.x -= dx * f; b.y -= dy * f;
    }
    for (const n of nodes) { n.x += (W / 2 - n.x) * 0.01; n.y += (H / 2 - n.y) * 0.01;
      if (n.center) { n.x = W / 2; n.y = H / 2; } n.x = Math.max(n.r, Math.min(W - n.r, n.x)); n.y = Math.max(n.r, Math.min(H - n.r, n.y)); }
  }
  svg.innerHTML = "";
  for (const l of links) {
    const e = document.createElementNS(NS, "line");
    Object.entries({ x1: nodes[l.s].x, y1: nodes[l.s].y, x2: nodes[l.t].x, y2: nodes[l.t].y, stroke: "#8895a7",
      "stroke-opacity": 0.3 + 0.6 * (l.w / maxW), "stroke-width": 0.5 + 4 * (l.w / maxW), class: "edge" }).forEach(([k, v]) => e.setAttribute(k, v));
    svg.appendChild(e);
  }
  for (const n of nodes) {
    const a = document.createElementNS(NS, "a"); a.setAttribute("href", `/paper?id=${encodeURIComponent(n.id)}`);
    const c = document.createElementNS(NS, "circle");
    Object.entries({ cx: n.x, cy: n.y, r: n.r, fill: yearColour(n.year, lo, hi), stroke: n.center ? "#1d232a" : "white", "stroke-width": n.center ? 3 : 1, class: "node" })
      .forEach(([k, v]) => c.setAttribute(k, v));
    const t = document.createElementNS(NS, "title"); t.textContent = `${n.title || n.id}${n.year ? " (" + n.year + ")" : ""} · ${n.cites || 0} citations`; c.appendChild(t);
    a.appendChild(c); svg.appendChild(a);
    const lab = document.createElementNS(NS, "text"); lab.setAttribute("x", n.x + n.r + 2); lab.setAttribute("y", n.y + 3);
    lab.textContent = (n.title || n.id).slice(0, 28); svg.appendChild(lab);
  }
}
