"""Readers score stored related entries with the snapshot's current graph (pipeline/query/ccbc_now.py): each entry keeps
its coupling term and shared citers from the run that computed it, and takes the two works' weights and in-degrees
from today's ``paper_metrics``. On real CACM citation links, a night after the first graph run."""

from __future__ import annotations

import shutil

import duckdb
import pytest

from conftest import isolated_settings
from embed_helpers import cacm_without_last

from pipeline.query.ccbc_now import rescore, score


def test_score_is_eq3_from_its_terms():
    # 2 shared citers, the paper cites the work; weights 0.5 / 0.4, in-degrees 4 / 6; coupling term 0.3
    assert score(0.3, 2, True, False, (0.5, 4), (0.4, 6)) == pytest.approx(0.4 / 6 + 0.3 + 0.5 * 0.4 * (2 / 8) / 3)
    # the work cites the paper too: w(paper) / 6 more
    assert score(0.3, 2, True, True, (0.5, 4), (0.4, 6)) == pytest.approx(0.4 / 6 + 0.5 / 6 + 0.3 + 0.5 * 0.4 * (2 / 8) / 3)
    assert score(0.1, 0, False, False, (0.0, 0), (0.0, 0)) == 0.1  # no citers at all: no Jaccard term (no 0 / 0)


def _rows(con, run_id: str | None = None) -> list[tuple]:
    where = "WHERE r.run_id = ?" if run_id else ""
    return con.execute(f"""
        SELECT r.paper_id, r.related_work_id, r.ccbc_weighted, r.coupling, r.shared_citers, r.cites, r.cited_by,
               ma.weight, ma.in_degree, mb.weight, mb.in_degree
        FROM related r JOIN paper_metrics ma ON ma.paper_id = r.paper_id JOIN paper_metrics mb ON mb.work_id = r.related_work_id
        {where}""", [run_id] if run_id else []).fetchall()


@pytest.fixture(scope="module")
def night(shared_data, tmp_path_factory):
    """CACM without its last 64 papers through a full graph run, then all of it through a night's run (new papers'
    lists and a seventh of the others recomputed), and beside it the exact lists of the same graph (``graph --full``
    on a copy)."""
    from pipeline.sources.local_corpus import import_collection
    from pipeline.steps.graph import run_graph

    tmp = tmp_path_factory.mktemp("ccbc_now")
    # the weekly sweep by runs: 64 new CACM papers add ~7% to its links, so the sweep by change would recompute
    # nearly every list, and this is about the lists a night keeps
    settings = isolated_settings(tmp / "warehouse").model_copy(
        update={"graph_related_refresh_runs": 7, "graph_related_refresh_change": 1.0})
    import_collection(settings, cacm_without_last(shared_data, tmp / "head", 64), fmt="smart", name="cacm")
    first = run_graph(settings, full=True)
    import_collection(settings, shared_data / "collections" / "cacm", fmt="smart", name="cacm")
    second = run_graph(settings)
    exact = settings.model_copy(update={"warehouse": tmp / "exact"})
    exact.warehouse.mkdir()
    shutil.copy2(settings.db_path, exact.db_path)
    run_graph(exact, full=True)
    return settings, exact, first, second


def test_the_stored_coupling_term_gives_each_run_its_own_scores_back(night):
    settings, _exact, _first, second = night
    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        rows = _rows(con, second["run_id"])
        assert len(rows) > 1000
        for _p, _w, weighted, coupling, sc, cites, cited_by, wa, ia, wb, ib in rows:
            assert 0.0 <= coupling <= weighted + 1e-15
            assert score(coupling, sc, cites, cited_by, (wa, ia), (wb, ib)) == pytest.approx(weighted, rel=1e-12, abs=1e-15)
        assert not con.execute("SELECT count(*) FROM related WHERE coupling IS NULL").fetchone()[0]
        assert not con.execute("SELECT count(*) FROM related_incoming WHERE coupling IS NULL").fetchone()[0]


def test_readers_score_older_lists_with_todays_graph_closer_to_the_exact_scores(night):
    """The lists the night did not recompute keep the first run's scores; readers (related papers, the page's graph
    edges, recommendations) show each entry with today's weights and in-degrees, which is nearer the exact score of the
    same pair than the stored one, and ranks the list nearer the exact order."""
    from pipeline.query.recommend import related_edges
    from pipeline.query.related import edges_among, graph_neighbours

    settings, exact, first, _second = night
    with duckdb.connect(str(exact.db_path), read_only=True) as ex:
        truth = {(p, w): s for p, w, s in ex.execute(
            "SELECT paper_id, related_work_id, ccbc_weighted FROM related").fetchall()}
        exact_top = {}
        for p, w in ex.execute("SELECT paper_id, related_work_id FROM related WHERE rank <= 10").fetchall():
            exact_top.setdefault(p, set()).add(w)
    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        older = [p for p, in con.execute("SELECT DISTINCT paper_id FROM related WHERE run_id = ? ORDER BY paper_id",
                                         [first["run_id"]]).fetchall()]
        assert len(older) > 500
        stored = {(p, w): s for p, w, s in con.execute(
            "SELECT paper_id, related_work_id, ccbc_weighted FROM related WHERE run_id = ?", [first["run_id"]]).fetchall()}
        err_stored = err_read = 0.0
        moved = hits_stored = hits_read = 0
        for p in older:
            shown = graph_neighbours(con, p)
            for r in shown:
                key = (p, r["work_id"])
                if key in truth and key in stored and r.get("coupling") is not None:
                    err_stored += abs(stored[key] - truth[key])
                    err_read += abs(float(r["ccbc_weighted"]) - truth[key])
                    moved += stored[key] != r["ccbc_weighted"]
            want = exact_top.get(p, set())
            by_stored = sorted(shown, key=lambda r: -stored.get((p, r["work_id"]), r["ccbc_weighted"]))[:10]
            hits_stored += len(want & {r["work_id"] for r in by_stored})
            hits_read += len(want & {r["work_id"] for r in shown[:10]})
        assert moved > 1000  # today's weights and in-degrees moved most scores
        assert err_read < 0.5 * err_stored  # and brought them near the exact ones
        assert hits_read > hits_stored

        # the page's edges and recommendations read the same scores
        p = next(p for p in older if sum(r["paper_id"] is not None for r in graph_neighbours(con, p)) >= 3)
        shown = {r["paper_id"]: float(r["ccbc_weighted"]) for r in graph_neighbours(con, p) if r["paper_id"]}
        ids = [p, *shown]
        edges = {(a, b): s for a, b, s in edges_among(con, ids) if a == p}
        assert edges and all(s == pytest.approx(shown[b], rel=1e-12) for (_a, b), s in edges.items())
        rec = related_edges(con, [p])[p]
        assert all(e["ccbc_weighted"] == pytest.approx(shown[q], rel=1e-12) for q, e in rec.items())


def test_entries_without_a_coupling_term_keep_their_stored_score(night):
    settings, *_ = night
    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        p, w, weighted, _c, sc, cites, cited_by, *_m = _rows(con)[0]
    entry = {"work_id": w, "ccbc_weighted": weighted, "coupling": None, "shared_citers": sc, "cites": cites,
             "cited_by": cited_by}
    missing = {**entry, "coupling": 0.0, "work_id": "no such work"}
    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        assert rescore(con, [(p, entry), (p, missing)]) == 0
    assert entry["ccbc_weighted"] == weighted and missing["ccbc_weighted"] == weighted


def test_the_related_now_view_gives_analysts_the_scores_readers_show(night):
    """``related_now`` (sql/marts/095_related_now.sql): the stored rows with today's scores and ranks, as
    :func:`pipeline.query.ccbc_now.rescore` scores them."""
    settings, _exact, first, _second = night
    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        now = {(p, w): (s, rank, stored) for p, w, s, rank, stored in con.execute(
            "SELECT paper_id, related_work_id, ccbc_weighted, rank, ccbc_weighted_stored FROM related_now").fetchall()}
        rows = con.execute("SELECT * FROM related").fetchall()
        names = [d[0] for d in con.description]
        entries = [(r["paper_id"], {**r, "work_id": r["related_work_id"]}) for r in (dict(zip(names, v)) for v in rows)]
        assert rescore(con, entries) == len(entries) == len(now)
    moved = 0
    for p, e in entries:
        score_now, _rank, stored = now[(p, e["work_id"])]
        assert score_now == pytest.approx(e["ccbc_weighted"], rel=1e-12, abs=1e-15)
        moved += e["run_id"] == first["run_id"] and score_now != stored
    assert moved > 1000
    lists: dict[str, list[tuple[int, float]]] = {}
    for (q, _w), (s, rank, _st) in now.items():
        lists.setdefault(q, []).append((rank, -s))
    for ranked in lists.values():  # ranks 1..n by today's score
        ranked.sort()
        assert [r for r, _ in ranked] == list(range(1, len(ranked) + 1))
        assert [s for _, s in ranked] == sorted(s for _, s in ranked)


def test_a_warehouse_from_before_the_column_gains_it_and_fills_it_as_lists_come_round(night, tmp_path):
    """An older warehouse (no ``coupling``): the next run adds the column, the lists it computes carry their terms, and
    readers show the others' stored scores until their turn comes."""
    from pipeline.query.related import graph_neighbours
    from pipeline.steps.graph import run_graph

    settings, *_ = night
    old = settings.model_copy(update={"warehouse": tmp_path / "old"})
    old.warehouse.mkdir()
    shutil.copy2(settings.db_path, old.db_path)
    with duckdb.connect(str(old.db_path)) as con:
        con.execute("ALTER TABLE related DROP COLUMN coupling")
        con.execute("ALTER TABLE related_incoming DROP COLUMN coupling")
    run = run_graph(old)
    with duckdb.connect(str(old.db_path), read_only=True) as con:
        assert not con.execute("SELECT count(*) FROM related WHERE run_id = ? AND coupling IS NULL",
                               [run["run_id"]]).fetchone()[0]
        kept = con.execute("SELECT paper_id, related_work_id, ccbc_weighted FROM related WHERE coupling IS NULL").fetchall()
        assert len(kept) > 1000  # the lists whose turn has not come
        p = kept[0][0]
        stored = {w: s for q, w, s in kept if q == p}
        shown = {r["work_id"]: r["ccbc_weighted"] for r in graph_neighbours(con, p)}
        assert all(shown[w] == s for w, s in stored.items() if w in shown)
        now = dict(con.execute("SELECT related_work_id, ccbc_weighted FROM related_now WHERE paper_id = ?", [p]).fetchall())
        assert now == stored
