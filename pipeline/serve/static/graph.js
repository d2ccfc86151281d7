// The connected-papers graph drawn in SVG. The server lays it out (pipeline/serve/connected.py: the
// related papers linked to each other by CCBC and by vector cosine, placed so that similar papers
// cluster); this file scales the layout into the box, draws it, labels the nodes without overlap and
// shows a card on hover. Hand-written on purpose: the page must work offline with no CDN, and these
// few lines are simpler to audit than a graph library.
import { esc, paperHref, plural, workHref } from "/static/common.js";

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

// "Vaswani, 2017" as Connected Papers labels a node: the first author's family name ("Perlis, A. J." and
// "Ashish Vaswani" both give it) and the year; the title's first words when there is no author
export function nodeLabel(n) {
  const first = (n.authors || [])[0];
  const family = first ? (first.includes(",") ? first.split(",")[0] : first.trim().split(/\s+/).pop()) : "";
  const who = family || (n.title || n.id || "").split(/\s+/).slice(0, 3).join(" ");
  return n.year ? `${who}, ${n.year}` : who;
}

const overlaps = (a, b) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

// Place each label beside its node where it overlaps no other label and no node, trying eight places
// around it (right, left, below, above, then the corners); a label that fits nowhere is not drawn (the
// node's hover card names it). `order`: most important first (the paper itself, then by citations).
export function placeLabels(nodes, order, measure, W, H) {
  const placed = [];
  const circles = nodes.map((n) => ({ x: n.x - n.r, y: n.y - n.r, w: 2 * n.r, h: 2 * n.r }));
  for (const i of order) {
    const n = nodes[i];
    const { w, h } = measure(n);
    const g = 3;
    const spots = [[n.x + n.r + g, n.y - h / 2], [n.x - n.r - g - w, n.y - h / 2], [n.x - w / 2, n.y + n.r + g], [n.x - w / 2, n.y - n.r - g - h],
      [n.x + n.r * 0.7, n.y + n.r * 0.7], [n.x - n.r * 0.7 - w, n.y + n.r * 0.7], [n.x + n.r * 0.7, n.y - n.r * 0.7 - h], [n.x - n.r * 0.7 - w, n.y - n.r * 0.7 - h]];
    for (const [x, y] of spots) {
      const box = { x, y, w, h };
      if (x < 1 || y < 1 || x + w > W - 1 || y + h > H - 1) continue;
      if (placed.some((p) => overlaps(p.box, box)) || circles.some((c, j) => j !== i && overlaps(c, box))) continue;
      placed.push({ i, box });
      break;
    }
  }
  return placed;
}

function showCard(card, n, svg) {
  const authors = (n.authors || []);
  card.innerHTML = `<strong>${esc(n.title || n.id)}</strong>
    <div>${esc(authors.slice(0, 4).join(", "))}${authors.length > 4 ? `, +${authors.length - 4} more` : ""}</div>
    <div class="meta">${[n.year ? esc(n.year) : "", plural(n.cites || 0, "citation"), n.center ? "this paper" : ""].filter(Boolean).join(" · ")}</div>`;
  card.hidden = false;
  const box = svg.getBoundingClientRect(), host = card.offsetParent ? card.offsetParent.getBoundingClientRect() : box;
  const left = box.left - host.left + n.x + n.r + 8, top = box.top - host.top + n.y + n.r + 4;
  card.style.left = `${Math.max(0, Math.min(left, box.width - card.offsetWidth))}px`;
  card.style.top = `${top + card.offsetHeight > box.height ? Math.max(0, box.top - host.top + n.y - n.r - 8 - card.offsetHeight) : top}px`;
}

export function drawGraph(svg, center, related, edges, layout, card = null) {
  const W = svg.clientWidth || 460, H = svg.clientHeight || 440, pad = 28;
  const cid = center.paper_id;
  const nodes = [{ id: cid, title: center.title, year: center.year, authors: center.authors,
    cites: (center.metrics || {}).citation_count ?? center.citation_count ?? 0, center: true }]
    .concat(related.map((r) => ({ id: r.paper_id || r.work_id, title: r.title, year: r.year, authors: r.authors, cites: r.citation_count ?? 0,
      inCorpus: !!r.paper_id })));
  const byId = new Map(nodes.map((n, i) => [n.id, i]));
  const links = (edges || []).filter((e) => byId.has(e.source) && byId.has(e.target))
    .map((e) => ({ s: byId.get(e.source), t: byId.get(e.target), w: e.weight || 0, kind: e.kind || "related" }));
  const years = nodes.map((n) => n.year).filter(Boolean);
  const lo = Math.min(...years), hi = Math.max(...years);
  nodes.forEach((n, i) => {                      // the server's layout (the paper itself at 0, 0), or a circle
    [n.lx, n.ly] = (layout || {})[n.id] || (n.center ? [0, 0] : [Math.cos((2 * Math.PI * i) / nodes.length), Math.sin((2 * Math.PI * i) / nodes.length)]);
    n.r = 5 + 2.5 * Math.sqrt(Math.log1p(n.cites || 0)) * 2;
    n.label = nodeLabel(n);
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
  svg.innerHTML = "";
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  // weakest first, so that strong edges are drawn on top
  for (const l of [...links].sort((a, b) => a.w - b.w)) {
    svg.appendChild(el("line", { x1: nodes[l.s].x, y1: nodes[l.s].y, x2: nodes[l.t].x, y2: nodes[l.t].y,
      stroke: EDGE_COLOUR[l.kind] || EDGE_COLOUR.related, "stroke-opacity": 0.25 + 0.6 * l.w, "stroke-width": 0.5 + 3.5 * l.w,
      class: `edge edge-${l.kind.replace("+", "-")}`, "data-source": nodes[l.s].id, "data-target": nodes[l.t].id,
      "data-kind": l.kind, "data-weight": l.w }));
  }
  for (const n of nodes) {
    const a = el("a", { href: n.inCorpus === false ? workHref(n.id) : paperHref(n.id) });
    a.setAttribute("aria-label", `${n.title || n.id}${n.year ? ", " + n.year : ""}`);
    const c = el("circle", { cx: n.x, cy: n.y, r: n.r, fill: yearColour(n.year, lo, hi), stroke: n.center ? "#1d232a" : "white",
      "stroke-width": n.center ? 3 : 1, class: n.center ? "node center" : "node", "data-id": n.id });
    a.appendChild(c); svg.appendChild(a);
    if (card) {
      const show = () => showCard(card, n, svg), hide = () => { card.hidden = true; };
      a.addEventListener("mouseenter", show); a.addEventListener("focus", show);
      a.addEventListener("mouseleave", hide); a.addEventListener("blur", hide);
    } else {
      const t = document.createElementNS(NS, "title"); t.textContent = `${n.title || n.id}${n.year ? " (" + n.year + ")" : ""} · ${plural(n.cites || 0, "citation")}`; c.appendChild(t);
    }
  }
  // labels: measured in the SVG's own font, placed where they overlap nothing, the most cited first
  const probe = el("text", { class: "label", x: 0, y: 0 });
  svg.appendChild(probe);
  const measure = (n) => {  // the label's box in its own weight (the paper's own label is bold)
    probe.setAttribute("class", n.center ? "label center" : "label");
    probe.textContent = n.label;
    const b = probe.getBBox();
    n.ascent = -b.y;
    return { w: b.width + 2, h: b.height };
  };
  const order = nodes.map((_, i) => i).sort((a, b) => (nodes[b].center - nodes[a].center) || (nodes[b].cites - nodes[a].cites) || a - b);
  const placed = placeLabels(nodes, order, measure, W, H);
  probe.remove();
  for (const { i, box } of placed) {
    const n = nodes[i];
    const lab = el("text", { x: box.x + 1, y: box.y + n.ascent, class: n.center ? "label center" : "label", "data-id": n.id });
    lab.textContent = n.label;
    svg.appendChild(lab);
  }
  if (card) card.hidden = true;
}
