"""The connected-papers graph (pipeline/serve/connected.py): pure functions, no snapshot."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pipeline.serve.connected import COSINE_THRESHOLD, connected_graph, force_layout


def _mean_distances(pos, edges, n, nodes=None):
    nodes = range(n) if nodes is None else nodes
    linked = {frozenset((i, j)) for i, j, _ in edges}
    d = lambda i, j: float(np.linalg.norm(pos[i] - pos[j]))  # noqa: E731
    near = [d(i, j) for i, j, _ in edges]
    far = [d(i, j) for i, j in itertools.combinations(nodes, 2) if frozenset((i, j)) not in linked]
    return np.mean(near), np.mean(far)


def test_force_layout_puts_connected_nodes_closer():
    # two 4-cliques (1-4 and 5-8) with no edge between them, node 0 fixed in the middle, node 9 alone
    edges = [(i, j, 1.0) for grp in ((1, 2, 3, 4), (5, 6, 7, 8)) for i, j in itertools.combinations(grp, 2)]
    edges += [(0, i, 0.1) for i in range(1, 10)]
    pos = force_layout(10, edges, fixed=0)
    assert pos.shape == (10, 2) and np.abs(pos).max() <= 1.0 + 1e-9
    assert np.allclose(pos[0], 0.0)
    inner = [e for e in edges if e[0] != 0]
    near, far = _mean_distances(pos, inner, 10, nodes=range(1, 10))
    assert near < 0.5 * far, (near, far)
    # the two cliques are apart: their centres further from each other than any member from its centre
    a, b = pos[1:5].mean(axis=0), pos[5:9].mean(axis=0)
    spread = max(np.linalg.norm(pos[1:5] - a, axis=1).max(), np.linalg.norm(pos[5:9] - b, axis=1).max())
    assert np.linalg.norm(a - b) > 2 * spread


def test_force_layout_is_deterministic_and_handles_small_graphs():
    edges = [(0, 1, 0.5), (1, 2, 1.0)]
    assert np.array_equal(force_layout(3, edges), force_layout(3, edges))
    assert force_layout(0, []).shape == (0, 2)
    assert np.allclose(force_layout(1, []), 0.0)
    two = force_layout(2, [(0, 1, 1.0), (0, 0, 1.0), (0, 7, 1.0)])  # self loops and unknown nodes ignored
    assert np.isfinite(two).all() and np.linalg.norm(two[1]) > 0
    free = force_layout(4, [], fixed=None)
    assert np.isfinite(free).all() and np.abs(free).max() == 1.0


def _unit(v):
    v = np.asarray(v, dtype=float)
    return v / np.linalg.norm(v)


def test_connected_graph_edges_kinds_weights_and_layout():
    items = [{"paper_id": "p1", "work_id": "p1", "ccbc_weighted": 0.4, "semantic": 0.6},
             {"paper_id": "p2", "work_id": "p2", "ccbc_weighted": 0.1, "semantic": 0.3},
             {"paper_id": "p3", "work_id": "p3", "ccbc_weighted": 0.0, "semantic": 0.55},
             {"paper_id": None, "work_id": "W9", "ccbc_weighted": 0.2, "semantic": 0.0}]
    pairs = [("p1", "p2", 0.2), ("p2", "p1", 0.2), ("p1", "W9", 0.05), ("p1", "zz", 0.9), ("c", "p1", 0.4),
             ("p2", "p3", 0.0)]
    vectors = {"p1": _unit([1, 0, 0]), "p2": _unit([0.9, 0.1, 0]), "p3": _unit([0, 1, 0])}
    g = connected_graph("c", items, pairs, vectors)
    nodes = {"c", "p1", "p2", "p3", "W9"}
    assert set(g["layout"]) == nodes and g["layout"]["c"] == [0.0, 0.0]
    assert all(-1 <= x <= 1 for xy in g["layout"].values() for x in xy)
    by_pair = {frozenset((e["source"], e["target"])): e for e in g["edges"]}
    assert len(by_pair) == len(g["edges"])  # one edge per pair
    assert all(e["source"] in nodes and e["target"] in nodes for e in g["edges"])
    assert all(0.0 <= e["weight"] <= 1.0 for e in g["edges"])
    assert [e["target"] for e in g["edges"] if e["kind"] == "related"] == ["p1", "p2", "p3", "W9"]
    assert all(e["source"] == "c" for e in g["edges"] if e["kind"] == "related")
    assert by_pair[frozenset(("p1", "p2"))]["kind"] == "ccbc+cosine"
    assert by_pair[frozenset(("p1", "W9"))]["kind"] == "ccbc"
    assert frozenset(("p2", "p3")) not in by_pair  # CCBC 0 and cosine below the threshold
    assert frozenset(("p1", "p3")) not in by_pair
    assert by_pair[frozenset(("c", "p1"))]["weight"] == 1.0  # the largest CCBC
    # cosine alone links two papers at or above the threshold
    c = COSINE_THRESHOLD + 1e-6
    close = {"p1": _unit([1, 0, 0]), "p3": _unit([c, np.sqrt(1 - c**2), 0])}
    g2 = connected_graph("c", items, [], close)
    e13 = [e for e in g2["edges"] if {e["source"], e["target"]} == {"p1", "p3"}]
    assert len(e13) == 1 and e13[0]["kind"] == "cosine" and e13[0]["ccbc"] is None
    assert abs(e13[0]["cosine"] - c) < 1e-9 and e13[0]["weight"] < 1e-5


@pytest.mark.slow
def test_related_api_returns_the_graph_among_the_related_papers(cacm_snapshot):
    from fastapi.testclient import TestClient

    from pipeline.serve import create_app

    # the cacm_snapshot fixture drops PAPERKB_SERVE_ALLOWED_HOSTS: answer TestClient's Host here
    app = create_app(cacm_snapshot.model_copy(update={"serve_allowed_hosts": ["testserver"]}))
    with TestClient(app) as c:
        for pid, k in (("cacm:1785", 20), ("cacm:1", 5), ("cacm:2000", 50)):
            r = c.get(f"/api/papers/{pid}/related", params={"k": k})
            assert r.status_code == 200, r.text
            d = r.json()
            assert d["cosine_threshold"] == COSINE_THRESHOLD
            ids = [x["paper_id"] or x["work_id"] for x in d["related"]]
            nodes = {pid, *ids}
            assert set(d["layout"]) == nodes and d["layout"][pid] == [0.0, 0.0]
            assert all(len(xy) == 2 and all(-1.0 <= v <= 1.0 for v in xy) for xy in d["layout"].values())
            edges = d["edges"]
            # edges only among the returned papers, one per pair, weights and similarities in range
            assert all(e["source"] in nodes and e["target"] in nodes and e["source"] != e["target"] for e in edges)
            assert len({frozenset((e["source"], e["target"])) for e in edges}) == len(edges)
            assert all(0.0 <= e["weight"] <= 1.0 for e in edges)
            related = [e for e in edges if e["kind"] == "related"]
            assert sorted(e["target"] for e in related) == sorted(ids) and all(e["source"] == pid for e in related)
            inner = [e for e in edges if e["kind"] != "related"]
            assert all(pid not in (e["source"], e["target"]) for e in inner)
            assert all(e["kind"] in ("ccbc", "cosine", "ccbc+cosine") for e in inner)
            for e in inner:
                assert ("ccbc" in e["kind"]) == (e["ccbc"] is not None and e["ccbc"] > 0)
                assert ("cosine" in e["kind"]) == (e["cosine"] is not None and COSINE_THRESHOLD <= e["cosine"] <= 1.0)
            if pid == "cacm:1785":  # real citations: the related papers are linked to each other both ways
                kinds = {e["kind"] for e in inner}
                assert {"ccbc", "cosine"} <= kinds, kinds
        # the CCBC edges are those of the snapshot's related table, whichever side lists the pair
        from pipeline.snapshots import open_catalog

        d = c.get("/api/papers/cacm:1785/related", params={"k": 20}).json()
        ids = [x["paper_id"] for x in d["related"] if x["paper_id"]]
        con = open_catalog(cacm_snapshot.snapshots_dir / d["snapshot_id"])
        rows = con.execute("SELECT paper_id, related_paper_id, ccbc_weighted FROM related WHERE paper_id IN (SELECT unnest(?)) "
                           "AND related_paper_id IN (SELECT unnest(?)) AND ccbc_weighted > 0", [ids, ids]).fetchall()
        con.close()
        want = {frozenset((a, b)) for a, b, _ in rows}
        got = {frozenset((e["source"], e["target"])) for e in d["edges"] if "ccbc" in e["kind"] and e["kind"] != "related"}
        assert got == want and want


def test_cosine_edges_are_capped_per_paper():
    # twelve papers all alike (one topic): every pair is above the threshold, yet each paper starts
    # at most COSINE_EDGES_PER_PAPER cosine edges (its most similar ones)
    from pipeline.serve.connected import COSINE_EDGES_PER_PAPER

    rng = np.random.default_rng(3)
    base = _unit(rng.normal(size=16))
    vectors = {f"p{i}": _unit(base + 0.1 * rng.normal(size=16)) for i in range(12)}
    items = [{"paper_id": p, "work_id": p, "ccbc_weighted": 0.0, "semantic": 0.9} for p in vectors]
    edges = [e for e in connected_graph("c", items, [], vectors)["edges"] if e["kind"] == "cosine"]
    assert edges and len(edges) <= 12 * COSINE_EDGES_PER_PAPER
    m = np.stack(list(vectors.values()))
    assert (m @ m.T).min() >= COSINE_THRESHOLD
    assert len(edges) < 12 * 11 // 2
    # each kept pair is among the 3 most similar of one side
    names = list(vectors)
    cos = m @ m.T
    np.fill_diagonal(cos, -1)
    top = {n: {names[j] for j in np.argsort(-cos[i])[:COSINE_EDGES_PER_PAPER]} for i, n in enumerate(names)}
    assert all(e["target"] in top[e["source"]] or e["source"] in top[e["target"]] for e in edges)
