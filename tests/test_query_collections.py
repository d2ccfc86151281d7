"""Search and related papers on real test collections: CISI (shared `cisi_snapshot` fixture) and CACM.

Relevance is checked against the collection's own judgments (CISI.REL) and links (CACM `.X`),
read from ../shared/data, not against constants.
"""

from __future__ import annotations

import json
import re

import pytest

from pipeline.query import Searcher, open_snapshot


def _cisi_judged(shared_data, n: int):
    from pipeline.evaluation.qrels import read_qrels, read_queries

    qs = read_queries(shared_data / "collections" / "cisi" / "CISI.QRY")
    qrels = read_qrels(shared_data / "collections" / "cisi" / "CISI.REL")
    judged = [q for q in qs if q in qrels and len(qrels[q]) >= 5][:n]
    return {q: qs[q] for q in judged}, qrels


def test_search_on_cisi_finds_judged_relevant_papers(cisi_snapshot, shared_data):
    s = Searcher(open_snapshot(cisi_snapshot), cisi_snapshot)
    queries, qrels = _cisi_judged(shared_data, 12)
    hits, precisions = 0, []
    for qid, text in queries.items():
        resp = s.search(text[:1000], k=10, expand="off")
        assert resp.results and all(r.paper_id.startswith("cisi:") for r in resp.results)
        rel = {d for d, g in qrels[qid].items() if g > 0}
        found = [r.external_id for r in resp.results if r.external_id in rel]
        hits += bool(found)
        precisions.append(len(found) / 10)
        # chance level: the judged share of the collection
        chance = len(rel) / 1460
        assert resp.results[0].signals["ck"] > 0
    assert hits >= 0.75 * len(queries), f"only {hits}/{len(queries)} queries found a relevant paper in the top 10"
    mean_p = sum(precisions) / len(precisions)
    assert mean_p > 5 * chance


def test_cisi_cli_json_shows_signals_and_queries(cisi_snapshot, capsys):
    from pipeline.cli import main

    assert main(["--warehouse", str(cisi_snapshot.warehouse), "search", "citation indexing of scientific literature", "--json", "--k", "5"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["queries"][0] == "citation indexing of scientific literature" and len(d["results"]) == 5
    assert set(d["results"][0]["signals"]) >= {"ck", "doc", "abs", "fig", "pr"}
    assert d["results"][0]["external_id"] == d["results"][0]["paper_id"].split(":", 1)[1]


def _cacm_links(shared_data) -> dict[str, set[str]]:
    """doc -> docs linked to it in CACM's .X field (types 4, 5, 6)."""
    links: dict[str, set[str]] = {}
    cur, in_x = None, False
    for line in (shared_data / "collections" / "cacm" / "cacm.all").read_text(errors="replace").splitlines():
        if line.startswith(".I "):
            cur, in_x = line.split()[1], False
            continue
        if line.startswith("."):
            in_x = line.startswith(".X")
            continue
        if in_x and cur:
            parts = line.split()
            if len(parts) == 3 and parts[0] != cur:
                links.setdefault(cur, set()).add(parts[0])
    return links


@pytest.mark.slow
def test_related_on_cacm(shared_data, cacm_snapshot, request):
    """CACM imported, graph computed, embedded, published (the shared ``cacm_snapshot``, built once per run):
    `related` fuses CCBC with semantic similarity."""
    pytest.importorskip("pipeline.steps.graph")
    settings = cacm_snapshot
    s = Searcher(open_snapshot(settings), settings)

    links = _cacm_links(shared_data)
    with s.snap.catalog() as con:
        top = con.execute("SELECT paper_id, count(*) n FROM related GROUP BY 1 ORDER BY n DESC, paper_id LIMIT 1").fetchone()
        assert top, "the graph step produced no related pairs for CACM"
        pid = top[0]
        ccbc = dict(con.execute("SELECT related_paper_id, ccbc_weighted FROM related WHERE paper_id = ?", [pid]).fetchall())
    docno = pid.split(":", 1)[1]
    items = s.related(pid, k=20)
    assert 0 < len(items) <= 20 and [r.rank for r in items] == list(range(1, len(items) + 1))
    assert all(a.score >= b.score for a, b in zip(items, items[1:]))
    assert all(r.paper_id != pid for r in items)
    # graph evidence: CCBC neighbours from the catalog appear with their weights, and they are CACM .X links
    graph_items = [r for r in items if r.ccbc_weighted > 0]
    assert graph_items
    for r in graph_items:
        assert r.ccbc_weighted == pytest.approx(ccbc[r.paper_id])
    linked = {f"cacm:{d}" for d in links.get(docno, set())}
    assert any(r.paper_id in linked for r in graph_items)
    # semantic evidence and quality components are shown
    assert any(r.semantic > 0.3 for r in items)
    for r in items:
        assert set(r.components) <= {"citations", "velocity", "authors", "recency"}
        assert 0.0 <= r.quality <= 1.0
        b = settings.query_related_quality_weight
        assert r.score == pytest.approx((1 - b) * r.fused + b * r.quality)
    assert any("recency" in r.components and "citations" in r.components for r in items)

    # the CLI, by external id too
    from pipeline.cli import main

    capsys = request.getfixturevalue("capsys")
    assert main(["--warehouse", str(settings.warehouse), "related", pid, "--json", "--k", "5"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["paper_id"] == pid and len(d["related"]) == 5 and "components" in d["related"][0]
    assert main(["--warehouse", str(settings.warehouse), "related", "cacm:999999"]) == 2
    assert re.search(r"unknown paper id", capsys.readouterr().err)


def test_author_records_are_each_authors_citations_over_the_whole_catalog(cacm_snapshot):
    """The ``authors`` quality component of related papers: the mean over a paper's authors of their papers' total
    citations in the catalog, counted here from the rows themselves (the query reads these papers' authors only)."""
    from collections import defaultdict

    from pipeline.query.related import author_records
    from pipeline.snapshots import open_catalog, resolve

    con = open_catalog(resolve(cacm_snapshot))
    try:
        rows = con.execute("SELECT paper_id, coalesce(author_id, name) FROM paper_authors").fetchall()
        cites = defaultdict(int)
        for pid, m, c in con.execute("""SELECT p.paper_id, m.citation_count, p.citation_count FROM papers p
                                        LEFT JOIN paper_metrics m ON m.paper_id = p.paper_id""").fetchall():
            cites[pid] += m if m is not None else (c or 0)
        total = defaultdict(int)
        for pid, who in rows:
            total[who] += cites[pid]
        ids = sorted({pid for pid, _ in rows})[::37]
        got = author_records(con, ids)
    finally:
        con.close()
    by_paper = defaultdict(list)
    for pid, who in rows:
        by_paper[pid].append(total[who])
    assert len(ids) > 50 and set(got) == set(ids)
    assert got == pytest.approx({pid: sum(by_paper[pid]) / len(by_paper[pid]) for pid in ids})
    assert max(got.values()) > 0
