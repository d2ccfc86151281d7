"""Vectors held in memory (pipeline.query.resident) give the same answers as reading LanceDB per query.

On the real CISI snapshot (no ANN index: LanceDB scans every vector, as the in-memory path does).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipeline.query import Searcher, open_snapshot
from pipeline.query.filters import Filters
from pipeline.evaluation.qrels import read_queries

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def searchers(cisi_snapshot):
    in_memory = Searcher(open_snapshot(cisi_snapshot), cisi_snapshot).warm()
    per_query = Searcher(open_snapshot(cisi_snapshot), cisi_snapshot.model_copy(update={"query_resident_mb": 0})).warm()
    return in_memory, per_query


@pytest.fixture(scope="module")
def cisi_queries(shared_data):
    qs = read_queries(shared_data / "collections" / "cisi" / "CISI.QRY")
    texts = list(qs.values()) if isinstance(qs, dict) else [t for _, t in qs]
    return [" ".join(t.split())[:600] for t in texts[:25]]


def test_budget_decides_what_is_held(searchers):
    in_memory, per_query = searchers
    papers, figures, flat = in_memory._resident
    assert papers is not None and flat is not None
    assert papers.doc.shape == (in_memory.meta.num_rows, in_memory.dim)
    assert flat.vectors.shape == (in_memory.chunks.count_rows(), in_memory.dim)
    assert per_query._resident == (None, None, None)


def test_flat_search_matches_lancedb_scan(searchers, cisi_queries):
    in_memory, per_query = searchers
    for q in cisi_queries:
        v = in_memory.encode([q])[0]
        ours, ours_vecs = in_memory.dense(v, 50, None)
        theirs, theirs_vecs = per_query.dense(v, 50, None)
        assert ours["chunk_id"].to_pylist() == theirs["chunk_id"].to_pylist()
        np.testing.assert_allclose(ours["_distance"].to_numpy(), theirs["_distance"].to_numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(ours_vecs, theirs_vecs)


def test_sparse_rows_come_from_memory_unchanged(searchers, cisi_queries):
    in_memory, per_query = searchers
    for q in cisi_queries[:10]:
        ours, ours_vecs = in_memory.sparse(q, 50, None)
        theirs, theirs_vecs = per_query.sparse(q, 50, None)
        assert ours["_score"].to_pylist() == pytest.approx(theirs["_score"].to_pylist(), rel=1e-6)
        # the same rows in the same order, up to the order of exactly tied scores
        key = lambda t, i: (-round(t["_score"][i].as_py(), 4), t["chunk_id"][i].as_py())  # noqa: E731
        a = sorted(range(ours.num_rows), key=lambda i: key(ours, i))
        b = sorted(range(theirs.num_rows), key=lambda i: key(theirs, i))
        last = round(ours["_score"][ours.num_rows - 1].as_py(), 4)  # a tie at the cut may keep different rows
        for i, j in zip(a, b):
            if round(ours["_score"][i].as_py(), 4) == last:
                continue
            for col in ("chunk_id", "paper_id", "text", "section", "page_start"):
                assert ours[col][i].as_py() == theirs[col][j].as_py(), col
            np.testing.assert_array_equal(ours_vecs[i], theirs_vecs[j])


@pytest.mark.parametrize("expand", ["off", "rm3"])
def test_search_results_identical_either_way(searchers, cisi_queries, expand):
    in_memory, per_query = searchers
    for q in cisi_queries[:12]:
        a = in_memory.search(q, k=10, expand=expand)
        b = per_query.search(q, k=10, expand=expand)
        assert [r.paper_id for r in a.results] == [r.paper_id for r in b.results]
        for ra, rb in zip(a.results, b.results):
            assert ra.score == pytest.approx(rb.score, abs=1e-5)
            assert ra.signals == pytest.approx(rb.signals, abs=1e-5)


def test_filters_apply_in_the_flat_scan(searchers, cisi_queries):
    in_memory, _ = searchers
    allowed = set(in_memory.meta["paper_id"].to_pylist()[:200])
    v = in_memory.encode([cisi_queries[0]])[0]
    rows, vecs = in_memory.dense(v, 50, None, allowed)
    assert rows.num_rows == len(vecs) == 50
    assert set(rows["paper_id"].to_pylist()) <= allowed
    # the same nearest neighbours as scanning only the allowed papers' chunks by hand
    flat = in_memory._resident[2]
    keep = np.isin(flat.rows["paper_id"].to_numpy(zero_copy_only=False), list(allowed))
    d = ((flat.vectors[keep] - v) ** 2).sum(axis=1)
    expect = flat.rows.filter(keep)["chunk_id"].to_numpy(zero_copy_only=False)[np.argsort(d, kind="stable")[:50]]
    assert set(rows["chunk_id"].to_pylist()) == set(expect.tolist())
    # a filtered search through the public API only returns allowed papers
    years = [y for y in in_memory.meta["year"].to_pylist() if y]
    if years:
        y = sorted(years)[len(years) // 2]
        resp = in_memory.search(cisi_queries[0], k=10, filters=Filters(year_from=y, year_to=y), expand="off")
        assert all(r.year == y for r in resp.results)


def test_full_text_inside_a_running_event_loop_gives_the_same_results(searchers, cisi_queries):
    """A notebook or async app calls the searcher with a loop running: the synchronous LanceDB path is used."""
    import asyncio

    in_memory, per_query = searchers
    q = cisi_queries[3]
    plain = [(r.paper_id, round(r.score, 6)) for r in per_query.search(q, k=10).results]

    async def inside():
        return [(r.paper_id, round(r.score, 6)) for r in per_query.search(q, k=10).results]

    assert asyncio.run(inside()) == plain
    # and the per-thread loops agree with LanceDB's synchronous API on raw scores
    t_async = per_query.fts.query(q, ["chunk_id", "_score"], 20)
    t_sync = per_query.chunks.search(q, query_type="fts").select(["chunk_id", "_score"]).limit(20).to_arrow()
    assert t_async["chunk_id"].to_pylist() == t_sync["chunk_id"].to_pylist()
    assert t_async["_score"].to_pylist() == pytest.approx(t_sync["_score"].to_pylist())


def test_bf16_query_encoding_stays_within_float32_noise(cisi_snapshot_as_before, cisi_queries):
    """``query_bf16``: the same query vectors as float32 up to rounding, so the same rankings. It applies where
    sentence-transformers encodes the queries (a snapshot without its own query encoder)."""
    from pipeline.embedding.encoders import bf16_wanted

    assert bf16_wanted(True) and not bf16_wanted(False)
    snap = open_snapshot(cisi_snapshot_as_before)
    f32 = Searcher(snap, cisi_snapshot_as_before.model_copy(update={"query_bf16": False}))
    b16 = Searcher(snap, cisi_snapshot_as_before.model_copy(update={"query_bf16": True}))
    qs = cisi_queries[:8]
    a, b = f32.encode(qs), b16.encode(qs)
    assert a.dtype == b.dtype == np.float32
    assert not np.array_equal(a, b)  # bfloat16 really ran
    assert (a * b).sum(axis=1).min() > 0.9995
    for q in qs[:4]:
        ra = [r.paper_id for r in f32.search(q, k=10).results]
        rb = [r.paper_id for r in b16.search(q, k=10).results]
        assert len(set(ra) & set(rb)) >= 9


def test_bf16_setting_leaves_the_snapshot_encoder_alone(cisi_snapshot, cisi_queries):
    """The snapshot's own query encoder runs at the precision its documents were embedded with."""
    snap = open_snapshot(cisi_snapshot)
    a = Searcher(snap, cisi_snapshot.model_copy(update={"query_bf16": False})).encode(cisi_queries[:4])
    b = Searcher(snap, cisi_snapshot.model_copy(update={"query_bf16": True})).encode(cisi_queries[:4])
    assert np.array_equal(a, b)


def test_filtered_bm25_from_memory_matches_lancedbs_prefilter(searchers, cisi_queries):
    """With filters, the in-memory index answers with the allowed rows (as LanceDB's prefiltered full-text
    query does, with the whole table's statistics): a filtered search needs no LanceDB call."""
    from pipeline.query.filters import in_clause

    in_memory, per_query = searchers
    allowed = set(in_memory.meta["paper_id"].to_pylist()[::3])
    where = in_clause("paper_id", sorted(allowed))
    flat = in_memory._resident[2]
    for q in cisi_queries[:8]:
        pos, scores = in_memory._sparse_positions(flat, q, 50, where, None, allowed)
        theirs, _ = per_query.sparse(q, 50, where)  # LanceDB's prefiltered full-text query, scored by paperkb's BM25
        ours = flat.rows.take(pos)["chunk_id"].to_pylist()
        assert set(flat.rows.take(pos)["paper_id"].to_pylist()) <= allowed
        assert scores.tolist() == pytest.approx(theirs["_score"].to_pylist(), rel=1e-6)
        cut = round(float(scores[-1]), 4)  # a tie at the cut may keep different rows
        assert {c for c, s in zip(ours, scores) if round(float(s), 4) != cut} == \
            {c for c, s in zip(theirs["chunk_id"].to_pylist(), theirs["_score"].to_pylist()) if round(s, 4) != cut}
        # and LanceDB's own prefiltered answer finds the same passages (its _score is not the same number on every CPU)
        raw = per_query.fts.query(q, ["chunk_id", "_score"], 1_000_000, where)
        rids, _ = in_memory._all_scores(q, where, flat.allowed_mask(allowed))
        assert set(raw["_rowid"].to_pylist()) == set(rids.tolist())
    authors = [a for names in in_memory.meta["authors"].to_pylist() for a in (names or [])]
    name = max(set(authors), key=authors.count).split(",")[0].split()[-1]
    f = Filters(authors=[name])
    for q in cisi_queries[:4]:
        a, b = in_memory.search(q, k=10, filters=f), per_query.search(q, k=10, filters=f)
        assert a.results and [r.paper_id for r in a.results] == [r.paper_id for r in b.results]
        assert [r.score for r in a.results] == pytest.approx([r.score for r in b.results], abs=1e-5)


def test_a_fresh_process_reading_vectors_from_lancedb_searches(cisi_snapshot):
    """The first search of a process that reads chunk vectors from LanceDB (as on every snapshot whose chunks have an
    ANN index) ran its BM25 and vector stages side by side, each importing part of LanceDB, and failed with an
    ImportError ("partially initialized module 'lancedb.query'"); a fresh process, so that nothing imported it before."""
    import os
    import subprocess
    import sys

    from conftest import REPO_ROOT

    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1", PAPERKB_QUERY_RESIDENT_MB="0")
    for _ in range(2):
        out = subprocess.run([sys.executable, "-m", "pipeline.cli", "--warehouse", str(cisi_snapshot.warehouse), "search",
                              "the use of citation indexes in information retrieval", "-k", "3", "--json"],
                             capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=300)
        assert out.returncode == 0 and out.stderr == "", out.stderr
        assert len(json.loads(out.stdout)["results"]) == 3
