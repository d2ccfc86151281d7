"""The connected-papers graph of the paper page: edges among a paper's related papers and a layout.

A paper's related papers are linked to each other, not only to the paper (a star says nothing about
which neighbours belong together):

- ``ccbc``: the pair's weighted co-citation / bibliographic coupling from the snapshot's ``related``
  table (each corpus paper's top 50 by weighted CCBC, read in both directions);
- ``cosine``: the cosine between the two papers' doc vectors (abstract vectors when a paper has no
  full text), kept when it is at least ``COSINE_THRESHOLD``. With all-MiniLM-L6-v2 (measured on 400
  random CACM papers) the median random pair is at 0.15, the 90th percentile at 0.33 and the 99th at
  0.50, while a paper's 20 related papers are at 0.3-0.6 from it: 0.5 keeps pairs that share a topic.
  In a one-topic collection (CISI) most related pairs pass it, so a pair also has to be among the
  ``COSINE_EDGES_PER_PAPER`` (3) most similar related papers of one of the two (a k-nearest-neighbour
  graph): at most 3 cosine edges start from each paper.

Every edge has a ``weight`` in [0, 1], its strength for the layout and the drawing: the larger of the
CCBC over the largest CCBC among the drawn papers and ``(cosine - threshold) / (1 - threshold)``.

The layout is computed here, server-side, so that every client draws the same picture. igraph has
Fruchterman-Reingold, but igraph is in the ``[pipeline]`` extra and the server runs from the base
install; the graph is at most 101 nodes, so a few lines of numpy do (``force_layout``, a pure function).
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

COSINE_THRESHOLD = 0.5
"""Neighbours whose doc vectors are at least this similar are linked (kind ``cosine``) ..."""
COSINE_EDGES_PER_PAPER = 3
"""... when the pair is among the 3 most similar related papers of one of the two."""


def force_layout(n: int, edges: Iterable[tuple[int, int, float]], *, fixed: int | None = 0,
                 iterations: int = 300, seed: int = 0) -> np.ndarray:
    """Fruchterman-Reingold positions of ``n`` nodes, as an (n, 2) array scaled into [-1, 1].

    ``edges``: (i, j, weight) with weight in [0, 1]; a stronger edge pulls harder (weight 0: no pull).
    Every pair repels (k^2 / d), every edge attracts (weight * d^2 / k), a weak gravity keeps
    unconnected nodes in the picture, and the step size cools linearly to zero. ``fixed``: the node
    kept at the origin (the paper itself), or None. Deterministic for a given ``seed``."""
    if n <= 0:
        return np.zeros((0, 2))
    rng = np.random.default_rng(seed)
    angle = 2 * np.pi * np.arange(n) / n
    pos = np.c_[np.cos(angle), np.sin(angle)] + rng.normal(scale=0.05, size=(n, 2))
    e = [(int(i), int(j), float(w)) for i, j, w in edges if i != j and w > 0 and 0 <= i < n and 0 <= j < n]
    ei = np.array([i for i, _, _ in e], dtype=int)
    ej = np.array([j for _, j, _ in e], dtype=int)
    ew = np.array([w for _, _, w in e], dtype=float)
    if fixed is not None:
        pos[fixed] = 0.0
    k = np.sqrt(4.0 / n)  # the ideal distance in a 2 x 2 square
    temp = 0.2
    for step in range(iterations):
        delta = pos[:, None, :] - pos[None, :, :]
        dist = np.maximum(np.linalg.norm(delta, axis=2), 1e-3)
        disp = ((k * k / dist**2)[:, :, None] * delta).sum(axis=1)  # repulsion: k^2/d along the unit vector
        if len(e):
            d = pos[ei] - pos[ej]
            dl = np.maximum(np.linalg.norm(d, axis=1), 1e-3)
            f = (ew * dl / k)[:, None] * d  # attraction: w d^2/k along the unit vector
            np.add.at(disp, ei, -f)
            np.add.at(disp, ej, f)
        disp -= 0.1 * pos / k  # gravity towards the origin
        length = np.maximum(np.linalg.norm(disp, axis=1), 1e-9)
        cap = temp * (1 - step / iterations)
        pos += disp / length[:, None] * np.minimum(length, cap)[:, None]
        if fixed is not None:
            pos[fixed] = 0.0
    scale = np.abs(pos).max()
    return pos / scale if scale > 0 else pos


def unit_vectors(searcher, ids: list[str]) -> dict[str, np.ndarray]:
    """id -> unit doc vector (the abstract's when there is no doc vector) of the corpus papers among ``ids``."""
    corpus = [i for i in dict.fromkeys(ids) if i in searcher.paper_row]
    if not corpus:
        return {}
    doc, abstract = searcher.paper_vectors(corpus)
    v = np.where(np.linalg.norm(doc, axis=1, keepdims=True) > 0, doc, abstract)
    norm = np.linalg.norm(v, axis=1)
    return {i: v[r] / norm[r] for r, i in enumerate(corpus) if norm[r] > 0}


def connected_graph(center_id: str, items: list[dict[str, Any]], ccbc_pairs: Iterable[tuple[str, str, float]],
                    vectors: dict[str, np.ndarray], *, threshold: float = COSINE_THRESHOLD,
                    per_paper: int = COSINE_EDGES_PER_PAPER) -> dict[str, Any]:
    """Edges among the paper and its related papers, and their layout.

    ``items``: the related papers (``paper_id`` or ``work_id``, ``ccbc_weighted``, ``semantic``);
    ``ccbc_pairs``: (a, b, ccbc_weighted) among the related papers, either direction, repeats allowed;
    ``vectors``: id -> unit-length vector for the related papers that have one.
    Returns ``{"edges": [...], "layout": {id: [x, y]}}``: an edge is ``source``, ``target``, ``kind``
    (``related``: the paper to one of its related papers; ``ccbc``, ``cosine`` or ``ccbc+cosine``:
    between two related papers), ``ccbc`` and ``cosine`` (null when unknown) and ``weight`` in [0, 1]."""
    ids = [it.get("paper_id") or it.get("work_id") for it in items]
    ids = [i for i in dict.fromkeys(ids) if i and i != center_id]
    known = set(ids)
    by_id = {(it.get("paper_id") or it.get("work_id")): it for it in items}
    pairs: dict[tuple[str, str], dict[str, float]] = {}
    for a, b, w in ccbc_pairs:
        if a in known and b in known and a != b and (w or 0) > 0:
            p = pairs.setdefault((min(a, b), max(a, b)), {})
            p["ccbc"] = max(p.get("ccbc", 0.0), float(w))
    with_vec = [i for i in ids if i in vectors]
    if len(with_vec) > 1:
        m = np.stack([np.asarray(vectors[i], dtype=float) for i in with_vec])
        cos = m @ m.T
        np.fill_diagonal(cos, -np.inf)
        # a pair counts when it is among the per_paper most similar of either paper: in a one-topic
        # corpus (CISI) nearly every pair passes the threshold, and the graph would be a hairball
        order = np.argsort(-cos, axis=1, kind="stable")[:, :per_paper]
        top_of = np.zeros(cos.shape, dtype=bool)
        np.put_along_axis(top_of, order, True, axis=1)
        for x in range(len(with_vec)):
            for y in range(x + 1, len(with_vec)):
                if cos[x, y] >= threshold and (top_of[x, y] or top_of[y, x]):
                    a, b = with_vec[x], with_vec[y]
                    pairs.setdefault((min(a, b), max(a, b)), {})["cosine"] = float(min(1.0, cos[x, y]))
    center_ccbc = {i: float(by_id[i].get("ccbc_weighted") or 0.0) for i in ids}
    top = max([*center_ccbc.values(), *(p.get("ccbc", 0.0) for p in pairs.values()), 0.0])

    def strength(ccbc: float | None, cosine: float | None) -> float:
        s = (ccbc or 0.0) / top if top > 0 else 0.0
        if cosine is not None and cosine >= threshold:
            s = max(s, (cosine - threshold) / (1 - threshold))
        return float(min(1.0, max(0.0, s)))

    edges: list[dict[str, Any]] = []
    for i in ids:
        sem = by_id[i].get("semantic")
        ccbc = center_ccbc[i]
        edges.append({"source": center_id, "target": i, "kind": "related", "ccbc": ccbc,
                      "cosine": None if sem is None else float(sem), "weight": strength(ccbc, sem)})
    for (a, b), p in sorted(pairs.items()):
        kind = "+".join(x for x in ("ccbc", "cosine") if x in p)
        edges.append({"source": a, "target": b, "kind": kind, "ccbc": p.get("ccbc"), "cosine": p.get("cosine"),
                      "weight": strength(p.get("ccbc"), p.get("cosine"))})
    nodes = [center_id, *ids]
    index = {x: n for n, x in enumerate(nodes)}
    # the paper's own edges pull at half strength: the picture clusters by the neighbours' links,
    # not by how close each is to the paper (a star again)
    # (and never less than 0.1, so that a neighbour linked to nothing else still stays near the paper)
    pos = force_layout(len(nodes), [(index[e["source"]], index[e["target"]],
                                     0.1 + 0.4 * e["weight"] if e["kind"] == "related" else e["weight"]) for e in edges],
                       fixed=0)
    layout = {x: [round(float(pos[n, 0]), 4), round(float(pos[n, 1]), 4)] for x, n in index.items()}
    return {"edges": edges, "layout": layout}
