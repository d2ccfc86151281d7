// A small force-directed layout drawn in SVG. Hand-written on purpose: the page must work offline
// with no CDN, and these few lines are simpler to audit than vendoring a graph library.
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
  if (!links.some((l) => l.w > 0)) {             // no citation overlap at all: let the related score shape the picture
    const score = new Map(related.map((r) => [byId.get(r.paper_id || r.work_id), r.score || 0]));
    links.forEach((l) => { l.w = (score.get(l.t) || 0) * 1e-3; });
  }
  const years = nodes.map((n) => n.year).filter(Boolean);
  const lo = Math.min(...years), hi = Math.max(...years);
  const maxW = Math.max(1e-9, ...links.map((l) => l.w));
  nodes.forEach((n, i) => {                      // start on a circle, the paper itself in the middle
    const a = (2 * Math.PI * i) / nodes.length;
    n.x = n.center ? W / 2 : W / 2 + 0.35 * W * Math.cos(a); n.y = n.center ? H / 2 : H / 2 + 0.35 * H * Math.sin(a);
    n.r = 5 + 2.5 * Math.sqrt(Math.log1p(n.cites || 0)) * 2;
  });
  // Fruchterman-Reingold: repulsion k^2/d between all nodes, attraction d^2/k along edges, where a
  // stronger CCBC edge pulls harder; the temperature caps each step and cools to zero.
  const k = 0.9 * Math.sqrt((W * H) / nodes.length);
  for (let it = 0, T = W / 8; it < 250; it++, T *= 0.975) {
    const disp = nodes.map(() => ({ x: 0, y: 0 }));
    for (let i = 0; i < nodes.length; i++) for (let j = i + 1; j < nodes.length; j++) {
      const dx = nodes[i].x - nodes[j].x, dy = nodes[i].y - nodes[j].y, d = Math.max(1, Math.hypot(dx, dy));
      const f = (k * k) / d; disp[i].x += (dx / d) * f; disp[i].y += (dy / d) * f; disp[j].x -= (dx / d) * f; disp[j].y -= (dy / d) * f;
    }
    for (const l of links) {
      const a = nodes[l.s], b = nodes[l.t], dx = a.x - b.x, dy = a.y - b.y, d = Math.max(1, Math.hypot(dx, dy));
      const f = ((d * d) / k) * (0.5 + l.w / maxW);
      disp[l.s].x -= (dx / d) * f; disp[l.s].y -= (dy / d) * f; disp[l.t].x += (dx / d) * f; disp[l.t].y += (dy / d) * f;
    }
    nodes.forEach((n, i) => {                    // gravity keeps the picture compact around the paper
      disp[i].x -= (n.x - W / 2) * 0.08 * (k / 10); disp[i].y -= (n.y - H / 2) * 0.08 * (k / 10);
    });
    nodes.forEach((n, i) => {
      if (n.center) { n.x = W / 2; n.y = H / 2; return; }
      const d = Math.max(1e-9, Math.hypot(disp[i].x, disp[i].y)), step = Math.min(d, T);
      n.x = Math.max(n.r + 2, Math.min(W - n.r - 2, n.x + (disp[i].x / d) * step));
      n.y = Math.max(n.r + 2, Math.min(H - n.r - 2, n.y + (disp[i].y / d) * step));
    });
  }
  const labelled = new Set([0].concat(links.filter((l) => l.s === 0).sort((a, b) => b.w - a.w).slice(0, 6).map((l) => l.t)));
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
    if (!labelled.has(nodes.indexOf(n))) continue;   // full titles are in each node's tooltip
    const lab = document.createElementNS(NS, "text"); lab.setAttribute("x", n.x + n.r + 2); lab.setAttribute("y", n.y + 3);
    lab.textContent = (n.title || n.id).slice(0, 30); svg.appendChild(lab);
  }
}
