// The connected-papers graph drawn in SVG. The server lays it out (pipeline/serve/connected.py: the
// related papers linked to each other by CCBC and by vector cosine, placed so that similar papers
// cluster); this file only scales the layout into the box and draws it. Hand-written on purpose: the
// page must work offline with no CDN, and these few lines are simpler to audit than a graph library.
const NS = "http://www.w3.org/2000/svg";

function yearColour(year, lo, hi) {
  if (!year) return "#9aa5b1";
  const t = hi > lo ? (year - lo) / (hi - lo) : 0.5; // blue (old) -> orange (new)
  const mix = (a, b) => Math.round(a + (b - a) * t);
  return `rgb(${mix(52, 236)},${mix(120, 140)},${mix(200, 40)})`;
}

function el(name, attrs) {
  const e = document.createElementNS(NS, name);
  Object.entries(attrs).forEach(([k, v]) => e.setAttribute(k, v));
  return e;
}

// edge colours by kind: the paper to a related paper (grey), or between two related papers
const EDGE_COLOUR = { related: "#b4bcc8", ccbc: "#3a6fc4", cosine: "#d98a2b", "ccbc+cosine": "#6a4fb0" };

export function drawGraph(svg, center, related, edges, layout) {
  const W = svg.clientWidth || 460, H = svg.clientHeight || 440, pad = 28;
  const cid = center.paper_id;
  const nodes = [{ id: cid, title: center.title, year: center.year, cites: (center.metrics || {}).citation_count ?? center.citation_count ?? 0, center: true }]
    .concat(related.map((r) => ({ id: r.paper_id || r.work_id, title: r.title, year: r.year, cites: r.citation_count ?? 0 })));
  const byId = new Map(nodes.map((n, i) => [n.id, i]));
  const links = (edges || []).filter((e) => byId.has(e.source) && byId.has(e.target))
    .map((e) => ({ s: byId.get(e.source), t: byId.get(e.target), w: e.weight || 0, kind: e.kind || "related" }));
  const years = nodes.map((n) => n.year).filter(Boolean);
  const lo = Math.min(...years), hi = Math.max(...years);
  nodes.forEach((n, i) => {                      // the server's layout (the paper itself at 0, 0), or a circle
    [n.lx, n.ly] = (layout || {})[n.id] || (n.center ? [0, 0] : [Math.cos((2 * Math.PI * i) / nodes.length), Math.sin((2 * Math.PI * i) / nodes.length)]);
    n.r = 5 + 2.5 * Math.sqrt(Math.log1p(n.cites || 0)) * 2;
  });
  // stretch the layout's bounding box over the box
  const xs = nodes.map((n) => n.lx), ys = nodes.map((n) => n.ly);
  const x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
  nodes.forEach((n) => {
    n.x = x1 > x0 ? pad + ((n.lx - x0) / (x1 - x0)) * (W - 2 * pad) : W / 2;
    n.y = y1 > y0 ? pad + ((n.ly - y0) / (y1 - y0)) * (H - 2 * pad) : H / 2;
  });
  // circles of a tight cluster may overlap once sized by citations: push overlapping pairs apart
  for (let it = 0; it < 60; it++) {
    let moved = false;
    for (let i = 0; i < nodes.length; i++) for (let j = i + 1; j < nodes.length; j++) {
      const a = nodes[i], b = nodes[j], dx = b.x - a.x, dy = b.y - a.y, d = Math.hypot(dx, dy) || 1e-3, gap = a.r + b.r + 2 - d;
      if (gap <= 0) continue;
      const ux = dx / d, uy = dy / d; moved = true;
      a.x -= (ux * gap) / 2; a.y -= (uy * gap) / 2; b.x += (ux * gap) / 2; b.y += (uy * gap) / 2;
    }
    nodes.forEach((n) => { n.x = Math.max(n.r + 2, Math.min(W - n.r - 2, n.x)); n.y = Math.max(n.r + 2, Math.min(H - n.r - 2, n.y)); });
    if (!moved) break;
  }
  const labelled = new Set([0].concat(links.filter((l) => l.s === 0).sort((a, b) => b.w - a.w).slice(0, 6).map((l) => l.t)));
  svg.innerHTML = "";
  // weakest first, so that strong edges are drawn on top
  for (const l of [...links].sort((a, b) => a.w - b.w)) {
    svg.appendChild(el("line", { x1: nodes[l.s].x, y1: nodes[l.s].y, x2: nodes[l.t].x, y2: nodes[l.t].y,
      stroke: EDGE_COLOUR[l.kind] || EDGE_COLOUR.related, "stroke-opacity": 0.25 + 0.6 * l.w, "stroke-width": 0.5 + 3.5 * l.w,
      class: `edge edge-${l.kind.replace("+", "-")}`, "data-source": nodes[l.s].id, "data-target": nodes[l.t].id,
      "data-kind": l.kind, "data-weight": l.w }));
  }
  for (const n of nodes) {
    const a = el("a", { href: `/paper?id=${encodeURIComponent(n.id)}` });
    const c = el("circle", { cx: n.x, cy: n.y, r: n.r, fill: yearColour(n.year, lo, hi), stroke: n.center ? "#1d232a" : "white",
      "stroke-width": n.center ? 3 : 1, class: n.center ? "node center" : "node", "data-id": n.id });
    const t = document.createElementNS(NS, "title"); t.textContent = `${n.title || n.id}${n.year ? " (" + n.year + ")" : ""} · ${n.cites || 0} citations`; c.appendChild(t);
    a.appendChild(c); svg.appendChild(a);
    if (!labelled.has(nodes.indexOf(n))) continue;   // full titles are in each node's tooltip
    const left = n.x > W * 0.6;                      // labels on the right half grow leftwards, inside the box
    const lab = el("text", { x: left ? n.x - n.r - 2 : n.x + n.r + 2, y: n.y + 3, "text-anchor": left ? "end" : "start" });
    lab.textContent = (n.title || n.id).slice(0, 30); svg.appendChild(lab);
  }
}
