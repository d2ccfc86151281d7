"""Related lists grow with the change (issue 31 part 1): a graph run computes only the lists of new papers and of
papers whose references changed, and every list at the full refresh (pipeline/steps/related_plan.py). On real
CACM citation links: the lists a night computes equal a full run's for the same papers, and the others are kept."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from embed_helpers import cacm_without_last

from pipeline.steps.related_plan import Previous, change_share, change_since, plan_related

IDS = ["a", "b", None, "c", "d"]  # vertex 2 is an outside work
CORPUS = np.array([0, 1, 3, 4])


def _plan(previous, *, indeg=(1, 1, 2, 1, 0), outdeg=(1, 1, 0, 2, 1), top_k=50, runs=7, force=False):
    return plan_related(IDS, CORPUS, np.array(indeg), np.array(outdeg), previous, top_k, runs, force_full=force)


BEFORE = {"a": (1, 1), "b": (1, 1), "c": (1, 2), "d": (0, 1), "x": (3, 3)}
LISTS = {"a": "graph-1", "b": "graph-1", "c": "graph-1", "d": "graph-1", "x": "graph-1"}


def test_a_full_refresh_when_asked_every_run_or_nothing_on_record():
    assert _plan(None).full and _plan(None).reason == "no run on record"
    assert _plan(Previous(BEFORE, LISTS, None)).full
    assert _plan(Previous(BEFORE, LISTS, 50), runs=1).full
    assert _plan(Previous(BEFORE, LISTS, 50), force=True).full
    assert _plan(Previous(BEFORE, LISTS, 20)).reason == "top_k changed (20 -> 50)"
    full = _plan(None)
    assert full.rows.tolist() == CORPUS.tolist() and full.replace == []


def test_a_night_computes_new_and_changed_papers_then_the_oldest_lists_in_turn():
    before = {"a": (1, 1), "b": (1, 0), "c": (1, 2), "d": (0, 0), "x": (3, 3)}
    lists = {"a": "graph-2", "b": "graph-2", "c": "graph-1", "x": "graph-2"}  # d had no list
    plan = _plan(Previous(before, lists, 50), indeg=(1, 1, 2, 5, 1), outdeg=(1, 1, 0, 2, 1), runs=4)
    # b: its references changed (0 -> 1); d: no link before, one now; then 1/4 of the 4 stored lists, the oldest:
    # c (graph-1); a is kept though its citers changed, and x left the corpus: its list goes
    assert not plan.full and plan.changed == 2 and plan.rows.tolist() == [1, 3, 4]
    assert plan.replace == ["b", "c", "d", "x"]
    # ties among the oldest go in paper id order, so a slice is a contiguous range of keys
    same = {p: "graph-1" for p in "abcd"}
    two = _plan(Previous({p: (1, 1) for p in "abcd"}, same, 50), indeg=(1, 1, 0, 1, 1), outdeg=(1, 1, 0, 1, 1), runs=2)
    assert two.changed == 0 and two.rows.tolist() == [0, 1] and two.replace == ["a", "b"]


def test_the_rolling_slice_sweeps_the_keys_in_order_and_no_list_waits_longer_than_refresh_runs():
    """Thirty runs of a collection that grows by new papers at the end of the key order (arXiv ids), as the nightly
    benchmark's does: each run's slice is one range of keys (two where the sweep wraps) plus one night's new papers,
    and every list is recomputed at least every ``refresh_runs`` runs."""
    runs = 7
    papers = [f"p{i:05d}" for i in range(700)]
    computed = {p: "graph-00" for p in papers}
    for run in range(1, 31):
        papers += [f"p{i:05d}" for i in range(len(papers), len(papers) + 10)]  # this night's new papers
        ids: list[str | None] = list(papers)
        corpus = np.arange(len(ids))
        degrees = {p: (1, 1) for p in computed}
        plan = plan_related(ids, corpus, np.ones(len(ids)), np.ones(len(ids)), Previous(degrees, dict(computed), 50),
                            50, runs)
        assert not plan.full and plan.changed == 10
        swept = sorted(set(plan.rows.tolist()) - set(range(len(papers) - 10, len(papers))))
        # contiguous runs of row numbers: the sweep (two pieces where it wraps) and, after the first cycle, the new
        # papers of the night ``runs`` runs ago
        pieces = 1 + sum(1 for a, b in zip(swept, swept[1:]) if b != a + 1)
        assert pieces <= 3, (run, pieces)
        for v in plan.rows.tolist():
            computed[papers[v]] = f"graph-{run:02d}"
        oldest = min(int(r.split("-")[1]) for r in computed.values())
        assert run - oldest < runs, (run, oldest)  # no list older than refresh_runs runs after this one


def test_the_slice_ends_where_a_published_partition_starts_so_the_next_one_starts_there():
    """With the first keys of the published ``related``'s partitions (the CURRENT snapshot's catalog), a run's
    slice ends at the nearest of them, so the next run's slice starts there too, and a publish rewrites the
    partitions the slice recomputed rather than a partly recomputed one at each end: fewer than half as many
    partitions recomputed in part over thirty runs. A slice is at most half a partition longer or shorter, as many
    lists as without over the runs, and no list waits longer than ``refresh_runs`` runs."""
    runs = 7
    papers = [f"p{i:05d}" for i in range(700)]
    computed = {p: "graph-00" for p in papers}
    grown, partly = 0, {"plain": 0, "aligned": 0}
    for run in range(1, 31):
        starts = [p for i, p in enumerate(papers) if i % 37 == 5]  # where the published partitions start
        part = {p: sum(1 for s in starts if s <= p) for p in papers}  # each stored list's partition
        papers += [f"p{i:05d}" for i in range(len(papers), len(papers) + 10)]
        ids: list[str | None] = list(papers)
        corpus = np.arange(len(ids))
        degrees = {p: (1, 1) for p in computed}
        ones = np.ones(len(ids))
        plain = plan_related(ids, corpus, ones, ones, Previous(degrees, dict(computed), 50), 50, runs)
        plan = plan_related(ids, corpus, ones, ones, Previous(degrees, dict(computed), 50, starts), 50, runs)
        for name, p in (("plain", plain), ("aligned", plan)):  # partitions the run recomputed in part
            done = {papers[v] for v in p.rows.tolist()}
            touched = {part[k] for k in done if k in part}
            partly[name] += sum(1 for t in touched if any(part[k] == t and k not in done for k in part))
        moved = set(plan.rows.tolist()) ^ set(plain.rows.tolist())
        assert len(moved) <= 37 // 2, (run, len(moved))  # to the nearest start: half a partition at most
        grown += len(plan.rows) - len(plain.rows)
        for v in plan.rows.tolist():
            computed[papers[v]] = f"graph-{run:02d}"
        assert run - min(int(r.split("-")[1]) for r in computed.values()) < runs
    assert abs(grown) < 37  # as many lists as without, over thirty runs
    assert partly["aligned"] * 2 < partly["plain"], partly


def _sweep_by_change(nights: list[float], *, starts_every: int | None = None, papers: int = 700, grow: int = 0,
                     change_of: float = 0.07) -> tuple[list[int], dict[str, int], list[float]]:
    """Runs of the sweep by change (no bound in runs) over ``papers`` stored lists, one run per share in ``nights``,
    ``grow`` new papers each; returns the lists each run swept (new papers aside), the run each list was last
    computed by, and how much the graph had changed since the oldest list after each run."""
    ids = [f"p{i:05d}" for i in range(papers)]
    computed = {p: 0 for p in ids}
    shares: list[tuple[str, float | None]] = [("graph-00", None)]
    owed, swept, stale = 0.0, [], []
    for run, change in enumerate(nights, start=1):
        new = [f"p{i:05d}" for i in range(len(ids), len(ids) + grow)]
        ids += new
        starts = [p for i, p in enumerate(ids) if i % starts_every == 5] if starts_every else None
        ones = np.ones(len(ids))
        prev = Previous({p: (1, 1) for p in computed}, {p: f"graph-{r:02d}" for p, r in computed.items()}, 50, starts,
                        runs=list(shares), owed=owed)
        plan = plan_related(list(ids), np.arange(len(ids)), ones, ones, prev, 50, 0, change=change,
                            refresh_change=change_of)
        assert not plan.full and plan.changed == len(new)
        swept.append(len(plan.rows) - len(new))
        for v in plan.rows.tolist():
            computed[ids[v]] = run
        shares.append((f"graph-{run:02d}", change))
        owed = plan.owed
        since = {r: sum(c for _, c in shares[i + 1:]) for i, (r, _) in enumerate(shares)}
        stale.append(max(since[f"graph-{r:02d}"] for r in computed.values()))
    return swept, computed, stale


def test_the_sweep_follows_the_graphs_change_not_the_runs():
    """The sweep covers every list once per ``refresh_change`` of change (7%): a night that changed the links by 1%
    sweeps a seventh of the lists, one of 0.25% a twenty-eighth, one that changed nothing none; no list waits past 7%
    of change, however the change is spread over the runs."""
    swept, _, stale = _sweep_by_change([0.01] * 30)
    assert swept == [100] * 30 and max(stale) < 0.07 + 1e-9
    swept, _, stale = _sweep_by_change([0.0025] * 60)
    assert sum(swept) == 60 * 25 and max(stale) < 0.07 + 1e-9
    swept, computed, _ = _sweep_by_change([0.0] * 10)
    assert swept == [0] * 10 and set(computed.values()) == {0}  # nothing changed: nothing recomputed
    # uneven nights: a burst, quiet nights, small ones; lists swept in proportion, none staler than 7%
    nights = [0.03, 0.0, 0.0, 0.001, 0.02, 0.0005, 0.0005, 0.01, 0.0, 0.02, 0.004, 0.03, 0.0]
    swept, _, stale = _sweep_by_change(nights)
    assert abs(sum(swept) - 700 * sum(nights) / 0.07) <= 1 and max(stale) < 0.07 + 1e-9
    assert [n == 0 for n in swept[1:3]] == [True, True]


def test_a_few_lists_a_night_add_up_to_a_published_partition_now_and_then():
    """At arXiv's rate (0.03% of the links a night) the sweep owes a dozen of 3,000 lists a night: with the published
    partitions' first keys, it waits until it owes half a partition and then takes one whole (the debt carried in
    ``owed``), so most nights rewrite no partition of ``related`` and, over the runs, as many lists are swept as the
    change asks. New papers' lists are due once the graph changed by 7% since them."""
    nights = [0.0003] * 240
    swept, computed, stale = _sweep_by_change(nights, starts_every=100, papers=3000, grow=1)
    assert sum(1 for n in swept if n) < len(swept) / 3  # most nights: no list of the sweep
    # else about a partition; shorter only to reach the partitions' grid: the first run, and where the sweep wraps
    assert sum(1 for n in swept if 0 < n < 100 // 2) <= 2
    want = sum((3000 + night) * change / 0.07 for night, change in enumerate(nights))  # the lists stored grow by one
    assert abs(sum(swept) - want) < 100  # as many as the change asks, within a partition
    assert max(stale) < 0.07 + 1e-9
    # overdue by change: a list computed before the graph changed by 7% is due whatever the sweep
    prev = Previous({"a": (1, 1), "b": (1, 1)}, {"a": "graph-1", "b": "graph-3"}, 50,
                    runs=[("graph-1", None), ("graph-2", 0.05), ("graph-3", 0.01)])
    plan = plan_related(["a", "b"], np.arange(2), np.ones(2), np.ones(2), prev, 50, 0, change=0.015)
    assert plan.replace == ["a"]  # a: 0.05 + 0.01 + 0.015 >= 0.07; b: 0.015
    assert change_since(prev.runs, 0.015, 0.01) == pytest.approx({"graph-3": 0.015, "graph-2": 0.025,
                                                                   "graph-1": 0.075})
    # a run an older version recorded without its change counts as a seventh of 7%: the weekly cycle of before
    legacy = Previous({"a": (1, 1)}, {"a": "graph-1"}, 50, runs=[(f"graph-{i}", None) for i in range(1, 9)])
    assert plan_related(["a"], np.arange(1), np.ones(1), np.ones(1), legacy, 50, 0, change=0.0).replace == ["a"]
    assert change_share(30, 1000) == 0.03 and change_share(0, 0) == 0.0


def test_the_entries_read_beside_an_older_list_stay_within_graph_related_incoming_rows():
    """Related papers read an older list with the new papers' entries of every run since (``related_incoming``): the
    budget ``incoming_rows`` bounds them. With no change to sweep for (arXiv's rate, a few new papers a night), the
    sweep goes as fast as the entries grow against the budget (a run's new lists x top_k / budget of the lists), a
    list is due once the runs after it hold the budget, and no reader ever reads more; a run with no new paper adds no
    entry and sweeps nothing."""
    top_k, budget, grow = 50, 20_000, 10
    ids = [f"p{i:05d}" for i in range(2000)]
    computed = {p: 0 for p in ids}
    incoming: dict[str, int] = {}
    owed, swept, read = 0.0, [], []
    for run in range(1, 121):
        new = [f"p{i:05d}" for i in range(len(ids), len(ids) + (grow if run % 10 else 0))]
        ids += new
        ones = np.ones(len(ids))
        prev = Previous({p: (1, 1) for p in computed}, {p: f"graph-{r:03d}" for p, r in computed.items()}, top_k,
                        runs=[(f"graph-{r:03d}", 0.0) for r in range(run)], owed=owed, incoming=dict(incoming))
        plan = plan_related(list(ids), np.arange(len(ids)), ones, ones, prev, top_k, 0, change=0.0,
                            incoming_rows=budget)
        assert not plan.full and plan.changed == len(new)
        swept.append(len(plan.rows) - len(new))
        for v in plan.rows.tolist():
            computed[ids[v]] = run
        owed = plan.owed
        if new:  # each new list names 40 corpus papers: its entries (what graph.update_incoming appends)
            incoming[f"graph-{run:03d}"] = 40 * len(new)
        oldest = min(computed.values())  # and the runs no newer than every stored list go
        incoming = {r: n for r, n in incoming.items() if int(r.split("-")[1]) > oldest}
        read.append(max(sum(n for r, n in incoming.items() if int(r.split("-")[1]) > c) for c in computed.values()))
    assert max(read) <= budget  # what a reader reads beside the oldest list
    assert read[-1] > budget / 2  # (the bound is what kept it there: 120 runs add 43,200 entries)
    # the sweep keeps pace: about grow x top_k / budget of the lists a run (2.5%, ~50 of 2,000+), none when no new paper
    assert [swept[i] for i in range(9, 120, 10)] == [0] * 12
    assert 40 <= np.mean([n for i, n in enumerate(swept) if (i + 1) % 10]) <= 80
    # without the budget, no list is swept: nothing changed
    prev = Previous({"a": (1, 1)}, {"a": "graph-1"}, 50, runs=[("graph-1", 0.0)], incoming={"graph-1": 10**6})
    assert plan_related(["a"], np.arange(1), np.ones(1), np.ones(1), prev, 50, 0, change=0.0).replace == []
    assert plan_related(["a"], np.arange(1), np.ones(1), np.ones(1), prev, 50, 0, change=0.0,
                        incoming_rows=10**6).replace == []  # (the list's own run's entries are not newer than it)
    newer = Previous({"a": (1, 1)}, {"a": "graph-1"}, 50, runs=[("graph-1", 0.0), ("graph-2", 0.0)],
                     incoming={"graph-2": 10**6})
    assert plan_related(["a"], np.arange(1), np.ones(1), np.ones(1), newer, 50, 0, change=0.0,
                        incoming_rows=10**6).replace == ["a"]


def test_most_papers_changed_means_a_full_refresh():
    plan = _plan(Previous({"a": (1, 1)}, {"a": "graph-1"}, 50))  # three of four papers are new
    assert plan.full and "3 of 4 papers changed" in plan.reason


# ---- real CACM citation links ------------------------------------------------------------------------------------
def _lists(settings, papers=None) -> dict[str, list[tuple]]:
    import duckdb

    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        rows = con.execute("SELECT paper_id, rank, related_work_id, related_paper_id, ccbc_weighted, ccbc_naive, "
                           "shared_references, shared_citers, cites, cited_by, run_id FROM related "
                           "ORDER BY paper_id, rank").fetchall()
    out: dict[str, list[tuple]] = {}
    for r in rows:
        if papers is None or r[0] in papers:
            out.setdefault(r[0], []).append(r[1:])
    return out


def _run_counts(settings, run_id: str) -> dict:
    import duckdb

    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        return json.loads(con.execute("SELECT counts FROM run_log WHERE run_id = ?", [run_id]).fetchone()[0])


def _no_run(lists):
    return {p: [r[:-1] for r in rows] for p, rows in lists.items()}


@pytest.fixture(scope="module")
def cacm_night(shared_data, tmp_path_factory):
    """CACM without its last 32 papers through a first graph run (its lists kept), then all of CACM imported and
    copied as it is (``exact``), the night's graph run on the warehouse, and a full run on the copy: the same graph,
    every list computed. Built once for the tests below; each runs more nights on its own copy of the warehouse
    (``exact`` is read only)."""
    from conftest import isolated_settings
    from pipeline.sources.local_corpus import import_collection
    from pipeline.steps.graph import run_graph

    tmp = tmp_path_factory.mktemp("cacm_night")
    settings = isolated_settings(tmp / "warehouse")
    import_collection(settings, cacm_without_last(shared_data, tmp / "head", 32), fmt="smart", name="cacm")
    first = run_graph(settings)
    before = _lists(settings)
    import_collection(settings, shared_data / "collections" / "cacm", fmt="smart", name="cacm")
    exact = settings.model_copy(update={"warehouse": tmp / "exact"})
    exact.warehouse.mkdir()
    shutil.copy2(settings.db_path, exact.db_path)  # the same warehouse, for a full run to compare with
    night = run_graph(settings)
    full = run_graph(exact, full=True)
    return {"warehouse": settings.warehouse, "first": first, "before": before, "night": night, "exact": exact,
            "full": full}


def _night_copy(cacm_night, settings):
    """``settings`` (a fresh warehouse) made a copy of the CACM night's warehouse."""
    shutil.rmtree(settings.warehouse, ignore_errors=True)
    shutil.copytree(cacm_night["warehouse"], settings.warehouse)
    return cacm_night["first"], cacm_night["night"], cacm_night["exact"]


def test_a_cacm_night_computes_new_lists_as_a_full_run_would_and_the_rest_in_turn(settings, cacm_night, capsys):
    from pipeline.cli import main
    from pipeline.steps.graph import run_graph

    first, night, exact = _night_copy(cacm_night, settings)  # CACM but its last 32 papers, graph, all CACM, graph
    assert first["related_full"] and first["related_papers"] == first["corpus_papers"] == 3204 - 32
    before = cacm_night["before"]  # the lists after the first run

    assert not night["related_full"] and night["corpus_papers"] == 3204
    after = _lists(settings)
    new = set(after) - set(before)
    assert new and all(p.startswith("cacm:") for p in new)
    recomputed = {p for p, rows in after.items() if rows[0][-1] == night["run_id"]}
    # the sweep follows the graph's change: the night's 32 papers add 90 links to 2,630 (3.3%), so it recomputes
    # 3.3/7 of the stored lists, the first in paper id order
    added = night["citations"] - first["citations"]
    assert added == 90 and _run_counts(settings, night["run_id"])["degrees_changed"] == 2 * added
    due = math.ceil(added / night["citations"] / 0.07 * len(before))
    assert new <= recomputed and sorted(before)[:due] == sorted(p for p in recomputed if p in before)[:due]
    assert 32 <= night["related_changed"] and night["related_papers"] - night["related_changed"] == due
    assert len(recomputed) <= night["related_papers"] < 3204 // 2
    # every other list is the one the first run stored, row for row
    kept = {p: rows for p, rows in after.items() if p not in recomputed}
    assert kept == {p: before[p] for p in kept} and len(kept) > 800
    assert night["related"] == sum(len(r) for r in after.values()) > night["related_written"]

    # the lists the night computed are exactly what a full run on the same graph gives those papers
    full = cacm_night["full"]  # run_graph(exact, full=True)
    assert full["related_full"] and full["related_papers"] == 3204
    assert _no_run(_lists(exact, recomputed)) == _no_run({p: after[p] for p in recomputed})

    # without a bound in runs, a rerun on the same graph computes no list: nothing changed; what the night's sweep
    # owes is carried over
    owed = _run_counts(settings, night["run_id"])["related_owed_milli"]
    again = run_graph(settings.model_copy(update={"graph_related_refresh_runs": 0}))
    assert not again["related_full"] and again["related_papers"] == 0 and _lists(settings) == after
    assert _run_counts(settings, again["run_id"])["related_owed_milli"] == owed
    # with a bound in runs (graph_related_refresh_runs), the next seventh in turn; within 7 runs every list is new
    weekly = settings.model_copy(update={"graph_related_refresh_runs": 7})
    again = run_graph(weekly)
    assert not again["related_full"] and again["related_changed"] == 0 and again["related_papers"] > 0
    for _ in range(6):
        run_graph(weekly)
    assert not {p for p, rows in _lists(settings).items() if rows[0][-1] in (first["run_id"], night["run_id"])}
    capsys.readouterr()
    assert main(["--warehouse", str(settings.warehouse), "graph", "--full"]) == 0
    line = capsys.readouterr().out
    assert "(all 3204 lists recomputed)" in line
    assert _no_run(_lists(settings)) == _no_run(_lists(exact))


def test_graph_related_refresh_runs_1_recomputes_every_list_every_run(settings, shared_data, tmp_path):
    from pipeline.sources.local_corpus import import_collection
    from pipeline.steps.graph import run_graph

    import_collection(settings, cacm_without_last(shared_data, tmp_path / "head", 1500), fmt="smart", name="cacm")
    run_graph(settings)
    every = settings.model_copy(update={"graph_related_refresh_runs": 1})
    s = run_graph(every)
    assert s["related_full"] and s["related_papers"] == s["corpus_papers"]
    assert {rows[0][-1] for rows in _lists(settings).values()} == {s["run_id"]}


def test_a_new_paper_enters_older_lists_the_night_it_arrives_through_related_incoming(settings, cacm_night):
    """The entries of the lists a night computed for new and changed papers, keyed by run and the paper they name
    (``related_incoming``): each scores its pair as a full run on the same graph does (CCBC is symmetric), related
    papers read them with the named paper's older list, and they go once every list is newer than their run."""
    import duckdb

    from pipeline.query.recommend import related_edges
    from pipeline.query.related import graph_neighbours
    from pipeline.steps.graph import run_graph

    # CACM but its last 32 papers, graph, all CACM, graph; and the same graph with every list (run_graph(exact, full=True))
    first, night, exact = _night_copy(cacm_night, settings)
    assert first["related_full"] and first["related_incoming"] == 0
    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        incoming = con.execute("SELECT entry_key, related_paper_id, paper_id, work_id, ccbc_weighted, cites, cited_by, "
                               "run_id FROM related_incoming ORDER BY entry_key").fetchall()
        recomputed = {p for p, in con.execute("SELECT DISTINCT paper_id FROM related WHERE run_id = ?",
                                               [night["run_id"]]).fetchall()}
        assert len(incoming) == night["related_incoming"] > 0
        assert all(k == f"{run}/{named}" and run == night["run_id"] and q in recomputed
                   for k, named, q, _w, _s, _c, _cb, run in incoming)
        with duckdb.connect(str(exact.db_path), read_only=True) as ex:
            pairs = {(p, w): (s, c, cb) for p, w, s, c, cb in ex.execute(
                "SELECT paper_id, related_work_id, ccbc_weighted, cites, cited_by FROM related").fetchall()}
        stored = {(p, w) for p, w in con.execute("SELECT paper_id, related_work_id FROM related").fetchall()}
        gained = 0
        for _k, named, q, wq, score, cites, cited_by, _run in incoming:
            if (named, wq) in pairs:  # the pair in the named paper's exact list: the same score, seen from it
                assert pairs[(named, wq)] == (pytest.approx(score, rel=1e-12), cites, cited_by)
            if (named, wq) in pairs and (named, wq) not in stored and named not in recomputed:
                shown = {r["work_id"]: r["ccbc_weighted"] for r in graph_neighbours(con, named)}
                assert shown[wq] == pytest.approx(score, rel=1e-12)  # the older list gains the new paper
                edge = related_edges(con, [named])[named][q]  # and so does recommend's graph evidence from it
                assert (edge["ccbc_weighted"], edge["cites"], edge["cited_by"]) == (pytest.approx(score, rel=1e-12),
                                                                                   cites, cited_by)
                gained += 1
        assert gained > 0
    weekly = settings.model_copy(update={"graph_related_refresh_runs": 7})
    for _ in range(7):  # within a cycle every list is newer than the night: its entries go
        again = run_graph(weekly)
    assert again["related_incoming"] == 0
    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        assert not con.execute("SELECT count(*) FROM related_incoming WHERE run_id = ?", [night["run_id"]]).fetchone()[0]
    assert run_graph(settings, full=True)["related_incoming_dropped"] >= 0
    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM related_incoming").fetchone()[0] == 0


def test_the_summary_line_says_how_much_the_links_changed():
    from pipeline.cli.steps import _lists

    s = {"related_full": False, "related_papers": 70, "related_changed": 7, "links_changed": 0.0331}
    assert _lists(s) == " (7 new or changed lists, 63 more recomputed in turn; the links changed 3.31% since the last run)"
    assert _lists({"related_full": True, "related_papers": 3204}) == " (all 3204 lists recomputed)"
