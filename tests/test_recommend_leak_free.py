"""The leak-free recommendation benchmark's graph (bench/leak_free.py): the citation graph evidence of a
seed set computed as if the citing paper P did not exist equals what `import-collection` + `graph` store
for the real CACM collection with P's record (and every link to it) taken out."""

from __future__ import annotations

import re

import duckdb
import numpy as np
import pytest
import scipy.sparse as sp
from conftest import isolated_settings

from bench.leak_free import LeakFreeGraph, graph_without
from bench.recommend import beyond_citing, seed_sets


def test_graph_without_cuts_the_vertex_out():
    # 0 cites 1 and 2; 3 cites 0 and 1; 1 cites 2
    a = sp.csr_matrix((np.ones(5), ([0, 0, 3, 3, 1], [1, 2, 0, 1, 2])), shape=(4, 4))
    reported = np.array([1, 2, 2, 0])
    b, rep = graph_without(a, reported, 0)
    assert sorted(zip(*b.nonzero())) == [(1, 2), (3, 1)]
    assert rep.tolist() == [0, 1, 1, 0]  # 0's references lose one citer, 0 has none
    assert a.nnz == 5 and reported.tolist() == [1, 2, 2, 0]  # inputs untouched


def _cacm_without(src, dst, paper_docno: str) -> None:
    """CACM's SMART file with record ``paper_docno`` dropped and every .X line naming it."""
    text = src.read_text(encoding="latin-1")
    records = re.split(r"(?m)^(?=\.I )", text)
    out = []
    for rec in records:
        if re.match(rf"\.I {paper_docno}\s*\n", rec):
            continue
        out.append("".join(line for line in rec.splitlines(keepends=True)
                           if not re.match(rf"{paper_docno}\t\d+\t\d+\s*$", line)))
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text("".join(out), encoding="latin-1")


def _graph(settings, collection) -> None:
    from pipeline.sources.local_corpus import import_collection
    from pipeline.steps.graph import run_graph

    import_collection(settings, collection)
    run_graph(settings)


def test_equals_a_full_recompute_without_the_citing_paper(shared_data, cacm_snapshot, tmp_path):
    pytest.importorskip("pipeline.steps.graph")
    full = cacm_snapshot  # the whole of CACM imported and its graph computed (built once per run): read only
    with duckdb.connect(str(full.db_path), read_only=True) as con:
        sets = seed_sets(con)
        beyond_citing(con, sets)
        lf = LeakFreeGraph(con, full)
        stored = {(p, r): w for p, r, w in con.execute(
            "SELECT paper_id, related_paper_id, ccbc_weighted FROM related").fetchall()}
        stored_counts = dict(con.execute("SELECT paper_id, citation_count FROM paper_metrics").fetchall())
    # a set where P is the only link between the hidden paper and the positives (the stored graph leaks
    # it), and one where they are linked otherwise too
    leaky = next(s for s in sets if not s["graph_beyond_citing"] and any((q, s["hidden"]) in stored for q in s["positives"]))
    linked = next(s for s in sets if s["graph_beyond_citing"] and len(s["positives"]) >= 4)
    for n, st in enumerate((leaky, linked)):
        seeds = st["positives"] + [st["hidden"]]
        ev = lf.evidence(st["paper"], seeds)
        without = isolated_settings(tmp_path / f"without{n}")
        _cacm_without(shared_data / "collections" / "cacm" / "cacm.all", tmp_path / f"c{n}" / "cacm" / "cacm.all",
                      st["paper"].split(":")[1])
        _graph(without, tmp_path / f"c{n}" / "cacm")
        rows = 0
        with duckdb.connect(str(without.db_path), read_only=True) as con:
            assert con.execute("SELECT count(*) FROM papers WHERE paper_id = ?", [st["paper"]]).fetchone()[0] == 0
            cols = "related_work_id, related_paper_id, ccbc_weighted, ccbc_naive, shared_references, shared_citers, cites, cited_by"
            for seed in seeds:
                want = con.execute(f"SELECT {cols} FROM related WHERE paper_id = ? ORDER BY rank", [seed]).fetchall()
                got = [(r["work_id"], r["paper_id"], r["ccbc_weighted"], r["ccbc_naive"], r["shared_references"],
                        r["shared_citers"], r["cites"], r["cited_by"]) for r in ev.related[seed]]
                assert [g[:2] + g[4:] for g in got] == [w[:2] + w[4:] for w in want], seed
                assert np.allclose([g[2:4] for g in got], [w[2:4] for w in want], rtol=0, atol=1e-12) if want else not got
                rows += len(want)
            counts = dict(con.execute("SELECT paper_id, citation_count FROM paper_metrics").fetchall())
        assert rows >= len(seeds)
        assert ev.citation_counts == counts
        # what changed: P's references lost a citation
        assert {p for p in counts if counts[p] != stored_counts[p]} == set(st["positives"]) | {st["hidden"]}
    # and the hidden paper is no longer a related paper of the positives where P was the only link
    assert any((q, leaky["hidden"]) in stored for q in leaky["positives"])
    ev = lf.evidence(leaky["paper"], leaky["positives"])
    assert not any(r["paper_id"] == leaky["hidden"] for rows in ev.related.values() for r in rows)
