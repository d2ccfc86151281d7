"""Citation paths on CACM's real citation links, checked against a plain breadth-first search over the
whole edge list: the length, every hop's link and direction, and the number of shortest paths."""

from __future__ import annotations

import json
import random
from collections import deque

import duckdb
import pytest

from pipeline.errors import UnknownPaper, UserError
from pipeline.query.paths import shortest_paths


@pytest.fixture(scope="module")
def cacm(cacm_warehouse):
    con = duckdb.connect(str(cacm_warehouse.db_path), read_only=True)
    edges = set(con.execute("SELECT citing_work_id, cited_work_id FROM citations").fetchall())
    yield con, edges
    con.close()


def _bfs(edges, src):
    """dist and number of shortest paths from src, citations followed either way."""
    adj: dict[str, set[str]] = {}
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    dist, count = {src: 0}, {src: 1}
    q = deque([src])
    while q:
        u = q.popleft()
        for v in adj.get(u, ()):
            if v not in dist:
                dist[v], count[v] = dist[u] + 1, 0
                q.append(v)
            if dist[v] == dist[u] + 1:
                count[v] += count[u]
    return dist, count


def _check_path(path, edges, src, dst):
    assert path[0].work_id == src and path[-1].work_id == dst and path[0].link is None
    for prev, hop in zip(path, path[1:]):
        if hop.link == "cites":
            assert (prev.work_id, hop.work_id) in edges
        else:
            assert hop.link == "cited_by" and (hop.work_id, prev.work_id) in edges
        assert hop.paper_id == hop.work_id and hop.title  # CACM: every work is a corpus paper


def test_paths_match_a_plain_bfs_on_cacm(cacm):
    con, edges = cacm
    nodes = sorted({n for e in edges for n in e})
    rng = random.Random(15)
    checked = found = 0
    for src in rng.sample(nodes, 6):
        dist, count = _bfs(edges, src)
        near = sorted(n for n, d in dist.items() if 1 <= d <= 5)
        for dst in rng.sample(nodes, 4) + rng.sample(near, min(4, len(near))):
            res = shortest_paths(con, src, dst, max_length=5, limit=200)
            want = dist.get(dst)
            if want is None or want > 5:
                assert res.length is None and res.paths == []
            else:
                found += 1
                assert res.length == want
                assert all(len(p) == want + 1 for p in res.paths)
                assert len({tuple(h.work_id for h in p) for p in res.paths}) == len(res.paths)
                assert len(res.paths) == min(count[dst], 200) and res.truncated == (count[dst] > 200)
                for p in res.paths:
                    _check_path(p, edges, src, dst)
            checked += 1
    assert checked >= 40 and found >= 20


def test_direct_links_limits_and_bad_input(cacm):
    con, edges = cacm
    a, b = sorted(edges)[0]
    res = shortest_paths(con, b, a)
    assert res.length == 1 and [[h.link for h in p] for p in res.paths] == [[None, "cited_by"]]
    assert shortest_paths(con, "cacm:1785", "1785").length == 0  # a docno names the same paper
    many = shortest_paths(con, "cacm:1785", "cacm:1", max_length=6, limit=1)
    assert len(many.paths) == 1 and many.truncated
    assert shortest_paths(con, "cacm:1785", "cacm:1", max_length=2).length is None
    with pytest.raises(UnknownPaper, match="cacm:999999"):
        shortest_paths(con, "cacm:1", "cacm:999999")
    with pytest.raises(UserError, match="max length"):
        shortest_paths(con, "cacm:1", "cacm:2", max_length=0)
    with pytest.raises(UserError, match="empty"):
        shortest_paths(con, " ", "cacm:2")


@pytest.mark.slow
def test_cli_and_http_on_the_cacm_snapshot(cacm_snapshot, capsys):
    from fastapi.testclient import TestClient

    from pipeline.cli import main
    from pipeline.serve import create_app

    wh = ["--warehouse", str(cacm_snapshot.warehouse)]
    assert main([*wh, "path", "cacm:1785", "cacm:1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["length"] == 4 and d["count"] == len(d["paths"]) >= 1
    assert all(p[0]["paper_id"] == "cacm:1785" and p[-1]["paper_id"] == "cacm:1" for p in d["paths"])
    assert main([*wh, "path", "cacm:1785", "cacm:1"]) == 0
    out = capsys.readouterr().out
    assert "of 4 hop(s)" in out and "Scatter Storage Techniques" in out
    assert main([*wh, "path", "cacm:1785", "cacm:1", "--max-length", "2"]) == 0
    assert "no citation path of at most 2 hops" in capsys.readouterr().out
    assert main([*wh, "path", "cacm:1785", "cacm:999999"]) == 2
    err = capsys.readouterr().err
    assert "unknown paper id 'cacm:999999'" in err and err.strip().count("\n") == 0

    with TestClient(create_app(cacm_snapshot)) as c:
        r = c.get("/api/path", params={"from": "cacm:1785", "to": "cacm:1"})
        assert r.status_code == 200 and r.json()["paths"] == d["paths"]
        assert c.get("/api/path", params={"from": "cacm:1785", "to": "nope"}).status_code == 404
        assert c.get("/api/path", params={"from": "cacm:1785", "to": "cacm:1", "max_length": 9}).status_code == 422
        assert c.get("/api/path", params={"from": "cacm:1785"}).status_code == 422
        assert "/api/path" in c.get("/openapi.json").json()["paths"]
