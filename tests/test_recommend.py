"""Recommendations (issue 15, item 2) on CACM's real citations: the scoring functions, the reasons
checked against the catalog (shared references and citers really are shared, the CCBC weight is the
stored one, the nearest seed is the nearest), negatives pushing away, the benchmark's recall computed
from real seed sets, and the CLI / HTTP answers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipeline.errors import UnknownPaper, UserError
from pipeline.query.recommend import combine, graph_scores, semantic_scores


# ---- pure scoring ---------------------------------------------------------------------------------
def test_semantic_scores_nearest_seed_and_negatives():
    pos = np.array([[1.0, 0, 0], [0, 1.0, 0]])
    neg = np.array([[0, 0, 1.0]])
    cands = np.array([[1.0, 0.1, 0], [0.1, 1.0, 0], [0, 0.2, 1.0], [0, 0, 0]])
    s = semantic_scores(cands, pos, neg)
    assert list(s["nearest"][:2]) == [0, 1]
    assert s["nearest_sim"][0] == pytest.approx(1 / np.sqrt(1.01))
    assert s["neg_sim"][2] > 0.9 and s["neg_nearest"][2] == 0
    assert s["semantic"][3] == 0.0  # a zero vector is similar to nothing
    none = semantic_scores(cands, pos, None)
    assert (none["neg_sim"] == 0).all() and (none["neg_nearest"] == -1).all()


def test_graph_scores_normalise_per_seed_and_average():
    edges = {"p1": {"a": 2.0, "b": 1.0}, "p2": {"b": 0.5}}
    g = graph_scores(edges, ["p1", "p2"], ["a", "b", "c"])
    assert g == pytest.approx([0.5, (0.5 + 1.0) / 2, 0.0])
    assert graph_scores(edges, [], ["a"]) == pytest.approx([0.0])


def test_combine_negatives_only_lower():
    sem, graph = np.array([0.5, 0.5]), np.array([0.2, 0.2])
    score, negative = combine(sem, graph, np.array([0.0, 0.8]), np.array([0.0, 0.0]), a=0.5)
    assert score[0] == pytest.approx(0.35) and score[1] < score[0] and negative[1] == pytest.approx(0.4)


def test_a_catalog_without_a_citation_graph_gives_no_graph_reasons():
    import duckdb

    from pipeline.query.recommend import related_edges, shared_evidence
    from pipeline.settings import SQL_DIR

    con = duckdb.connect()  # the catalog of a corpus with no graph run: every table there, none filled
    for folder in ("core", "marts"):
        for f in sorted((SQL_DIR / folder).glob("*.sql")):
            con.execute(f.read_text())
    assert related_edges(con, ["a"]) == {}
    assert shared_evidence(con, [("a", "b")]) == {("a", "b"): {"references": [], "citers": [], "cites": False, "cited_by": False}}


# ---- on the CACM snapshot -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def cacm(cacm_snapshot):
    from pipeline.query import Searcher, open_snapshot

    s = Searcher(open_snapshot(cacm_snapshot), cacm_snapshot)
    con = s.snap.catalog()
    yield s, con
    con.close()
    s.close()


def _refs_and_citers(con):
    edges = con.execute("""SELECT a.paper_id, b.paper_id FROM citations c
                           JOIN works a ON a.work_id = c.citing_work_id JOIN works b ON b.work_id = c.cited_work_id""").fetchall()
    refs: dict[str, set] = {}
    citers: dict[str, set] = {}
    for a, b in edges:
        refs.setdefault(a, set()).add(b)
        citers.setdefault(b, set()).add(a)
    return set(edges), refs, citers


def test_reasons_are_consistent_with_the_catalog(cacm):
    from bench.recommend import seed_sets

    s, con = cacm
    edges, refs, citers = _refs_and_citers(con)
    stored = {(p, r): w for p, r, w in con.execute("SELECT paper_id, related_paper_id, ccbc_weighted FROM related").fetchall()}
    papers = {r[0] for r in con.execute("SELECT paper_id FROM papers").fetchall()}
    checked_refs = checked_citers = 0
    for st in seed_sets(con, limit=6, seed=3):
        pos = st["positives"]
        resp = s.recommend(pos, k=15)
        assert resp.positives == pos and 1 <= len(resp.results) <= 15
        assert [r.rank for r in resp.results] == list(range(1, len(resp.results) + 1))
        assert all(a.score >= b.score for a, b in zip(resp.results, resp.results[1:]))
        pv = s.paper_vectors(pos)[0]
        for r in resp.results:
            assert r.paper_id in papers and r.paper_id not in pos
            # the nearest seed is the nearest positive, by an independent cosine
            cv = s.paper_vectors([r.paper_id])[0][0]
            cos = [float(cv @ v / (np.linalg.norm(cv) * np.linalg.norm(v))) for v in pv]
            assert r.nearest_seed == pos[int(np.argmax(cos))]
            assert r.nearest_similarity == pytest.approx(max(cos), abs=1e-4)
            for ln in r.links:
                assert ln.seed in pos and ln.polarity == "pos"
                shared_r = refs.get(r.paper_id, set()) & refs.get(ln.seed, set())
                shared_c = citers.get(r.paper_id, set()) & citers.get(ln.seed, set())
                assert ln.shared_references == len(shared_r) and set(ln.reference_ids) <= shared_r
                assert ln.shared_citers == len(shared_c) and set(ln.citer_ids) <= shared_c
                assert len(ln.reference_ids) == min(5, len(shared_r)) and len(ln.citer_ids) == min(5, len(shared_c))
                assert ln.cites == ((r.paper_id, ln.seed) in edges) and ln.cited_by == ((ln.seed, r.paper_id) in edges)
                assert ln.ccbc_weighted == pytest.approx(stored.get((ln.seed, r.paper_id), 0.0))
                checked_refs += ln.shared_references
                checked_citers += ln.shared_citers
            # a positive the result shares evidence with is listed
            for p in pos:
                if (refs.get(r.paper_id, set()) & refs.get(p, set())) or (r.paper_id, p) in edges or (p, r.paper_id) in edges:
                    assert p in {ln.seed for ln in r.links}
            d = r.to_dict()
            assert d["why"] == r.why() and d["why"].startswith(f"near {r.nearest_seed}")
    assert checked_refs + checked_citers > 0  # the sample did exercise shared references or citers


def test_negatives_push_away(cacm):
    s, _ = cacm
    pos = ["cacm:1785"]
    plain = {r.paper_id: r for r in s.recommend(pos, k=30).results}
    neg = [r.paper_id for r in list(plain.values())[:2]]  # the two best become negatives
    pushed = s.recommend(pos, neg, k=30)
    assert not {r.paper_id for r in pushed.results} & set(neg)
    assert pushed.negatives == neg
    lowered = 0
    for r in pushed.results:
        assert r.nearest_negative in neg and r.negative_similarity is not None
        if r.paper_id in plain:
            assert r.score <= plain[r.paper_id].score + 1e-9
            lowered += r.score < plain[r.paper_id].score - 1e-9
    assert lowered > 0


def test_bad_input(cacm):
    s, _ = cacm
    with pytest.raises(UnknownPaper, match="unknown paper id 'cacm:999999'"):
        s.recommend(["cacm:1785", "cacm:999999"])
    with pytest.raises(UserError, match="both a positive and a negative"):
        s.recommend(["cacm:1785"], ["cacm:1785"])
    with pytest.raises(UserError, match="at least one positive"):
        s.recommend([])
    with pytest.raises(UserError, match="k must be"):
        s.recommend(["cacm:1785"], k=0)


def test_benchmark_recall_from_real_seed_sets(cacm):
    from bench.recommend import METHODS, beyond_citing, evaluate, run_methods, seed_sets

    s, con = cacm
    edges, refs, citers = _refs_and_citers(con)
    sets = seed_sets(con, limit=5, seed=0)
    assert len(sets) == 5
    for st in sets:  # each set is a real paper's in-corpus references, one hidden
        assert set(st["positives"]) | {st["hidden"]} == refs[st["paper"]] - {st["paper"]}
        assert len(st["positives"]) >= 2 and st["hidden"] not in st["positives"]
    beyond_citing(con, sets)
    for st in sets:  # linked to a positive other than through P: a shared reference, another citer, a citation
        h, p = st["hidden"], st["paper"]
        linked = any(refs.get(h, set()) & refs.get(q, set()) or q in refs.get(h, set()) or h in refs.get(q, set())
                     or any(h in refs[c] and q in refs[c] for c in refs if c != p) for q in st["positives"])
        assert st["graph_beyond_citing"] == bool(linked)
    res = evaluate(s, sets, k=20)
    subsets = res["subsets"]
    assert sum(v["sets"] for v in subsets.values()) == 5
    assert res["sets"] == 5 and set(res["recall@20"]) == set(METHODS)
    for m in METHODS:
        hits = sum(1 for p in res["per_set"] if p["rank"][m] is not None)
        assert res["hits"][m] == hits and res["recall@20"][m] == pytest.approx(hits / 5)
        assert all(p["rank"][m] is None or 1 <= p["rank"][m] <= 20 for p in res["per_set"])
    # the rank recorded is the hidden paper's place in the method's own list
    st = res["per_set"][0]
    lists = run_methods(s, st, 20, {})
    for m in METHODS:
        assert st["paper"] not in lists[m] and not set(st["positives"]) & set(lists[m])
        assert st["rank"][m] == (lists[m].index(st["hidden"]) + 1 if st["hidden"] in lists[m] else None)

    # leak-free: the same sets with the graph as if P did not exist (bench/leak_free.py; its equality with a
    # full recompute is tests/test_recommend_leak_free.py)
    from bench.leak_free import LeakFreeGraph
    from bench.recommend import check_stored

    lf = LeakFreeGraph(con, s.settings)
    check_stored(con, lf, sets)  # nothing removed: the snapshot's own related rows
    free = evaluate(s, sets, k=20, leak_free=lf)
    assert free["sets"] == 5 and set(free["recall@20"]) == set(METHODS)
    for m in METHODS:
        hits = sum(1 for p in free["per_set"] if p["rank"][m] is not None)
        assert free["hits"][m] == hits and free["recall@20"][m] == pytest.approx(hits / 5)
    for st in free["per_set"]:
        ev = lf.evidence(st["paper"], st["positives"])
        lists = run_methods(s, st, 20, {}, ev)
        for m in METHODS:
            assert st["rank"][m] == (lists[m].index(st["hidden"]) + 1 if st["hidden"] in lists[m] else None)
        # no trace of P: it cites nothing, and where P was the hidden paper's only link it is no related paper
        assert all(r["paper_id"] != st["paper"] for rows in ev.related.values() for r in rows)
        if not st["graph_beyond_citing"]:
            assert all(r["paper_id"] != st["hidden"] for rows in ev.related.values() for r in rows)
        assert ev.citation_counts[st["hidden"]] == len(citers.get(st["hidden"], set()) - {st["paper"]})


def test_cli_and_http(cacm_snapshot, capsys):
    from fastapi.testclient import TestClient

    from pipeline.cli import main
    from pipeline.serve import create_app

    wh = ["--warehouse", str(cacm_snapshot.warehouse)]
    assert main([*wh, "recommend", "--pos", "cacm:1785,cacm:1", "--neg", "cacm:12", "-k", "5", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["positives"] == ["cacm:1785", "cacm:1"] and d["negatives"] == ["cacm:12"] and len(d["results"]) == 5
    assert all(r["why"] and r["nearest_seed"] in d["positives"] for r in d["results"])
    assert main([*wh, "recommend", "--pos", "cacm:1785", "--pos", "cacm:1", "-k", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("recommend: 3 paper(s) like cacm:1785, cacm:1") and out.count("why: near ") == 3
    assert main([*wh, "recommend", "--pos", "cacm:1785", "-k", "3", "--format", "bibtex"]) == 0
    assert capsys.readouterr().out.count("@") == 3
    assert main([*wh, "recommend", "--pos", "cacm:1785", "--pos", "cacm:999999"]) == 2
    err = capsys.readouterr().err
    assert "unknown paper id 'cacm:999999'" in err and err.strip().count("\n") == 0
    assert main([*wh, "recommend", "--pos", "cacm:1", "--neg", "cacm:1"]) == 2
    assert "both a positive and a negative" in capsys.readouterr().err

    # the fixture's settings answer the loopback names only (not TestClient's default 'testserver')
    with TestClient(create_app(cacm_snapshot), base_url="http://localhost") as c:
        r = c.get("/api/recommend", params={"pos": "cacm:1785,cacm:1", "neg": "cacm:12", "k": 5})
        assert r.status_code == 200, r.text
        assert [x["paper_id"] for x in r.json()["results"]] == [x["paper_id"] for x in d["results"]]
        r = c.get("/api/recommend", params=[("pos", "cacm:1785"), ("pos", "cacm:1"), ("k", 3), ("format", "ris")])
        assert r.status_code == 200 and r.text.count("ER  -") == 3
        r = c.get("/api/recommend", params={"pos": "cacm:999999"})
        assert r.status_code == 404 and "unknown paper id" in r.json()["detail"] and "\n" not in r.json()["detail"]
        assert c.get("/api/recommend", params={"pos": "cacm:1", "neg": "cacm:1"}).status_code == 400
        assert c.get("/api/recommend", params={"pos": " , "}).status_code == 422  # the schema forbids it (issue 28)
        assert c.get("/api/recommend", params={"pos": "cacm:1", "k": 0}).status_code == 422
        assert c.get("/api/recommend").status_code == 422
        op = c.get("/openapi.json").json()["paths"]["/api/recommend"]["get"]
        assert {"400", "404", "422", "503"} <= set(op["responses"])
        assert {p["name"] for p in op["parameters"]} >= {"pos", "neg", "k", "format"}
