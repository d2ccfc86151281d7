"""bench.related_staleness: what a longer related refresh cycle costs in list quality (issue 31, item 1), on CACM's
real citations, and what reading each list with the newer lists that name its paper gives back."""

from __future__ import annotations

import pytest

from bench.related_staleness import compare, cover, cycle_settings, merged, moved, rescored, reranked, run_cycle, top


def test_a_cycle_is_runs_or_a_share_of_the_graphs_change():
    assert cycle_settings(7) == ("7", 7, 1.0)  # by runs alone: the sweep by change off
    assert cycle_settings("7%") == ("7%", 0, pytest.approx(0.07))  # by change, no bound in runs
    with pytest.raises(ValueError):
        cycle_settings("0%")
    with pytest.raises(ValueError):
        cycle_settings("weekly")


def test_top_orders_by_weighted_then_naive_then_id():
    entries = {f"W{i:02d}": (1.0, 0.5) for i in range(12)} | {"Wz": (2.0, 0.1), "Wy": (1.0, 0.9)}
    assert top(entries) == {"Wz", "Wy"} | {f"W{i:02d}" for i in range(8)}


def test_compare_counts_recall_same_lists_and_missed_new_papers():
    exact = {"p1": {"A", "B"}, "p2": {"C", "N"}}
    got = compare({"p1": {"A", "B"}, "p2": {"C", "D"}}, exact, recent={"N"})
    assert got == {"papers": 2, "recall10": 0.75, "same10": 0.5, "new_in_exact": 1, "new_missed": 1.0}


def test_a_newer_list_that_names_a_paper_enters_its_older_list_with_the_newer_score():
    work_of = {"p1": "W1", "p2": "W2", "p3": "W3"}
    lists = {  # p1's list is the oldest; p3 (new) scores the pair (p3, p1) above p1's stored entries
        "p1": ("graph-1", {"W2": (0.2, 0.2)}, ["p2"]),
        "p2": ("graph-1", {"W1": (0.2, 0.2)}, ["p1"]),
        "p3": ("graph-2", {"W1": (0.9, 0.5)}, ["p1"]),
    }
    got = merged(lists, work_of)
    assert got["p1"] == {"W2", "W3"}  # p3 joined p1's list from p3's newer one
    assert got["p2"] == {"W1"} and got["p3"] == {"W1"}  # no newer list names them
    older = dict(lists, p3=("graph-0", *lists["p3"][1:]))  # an older list never overrides a newer one
    assert merged(older, work_of)["p1"] == {"W2"}
    assert merged(lists, work_of, only={"p3"})["p1"] == {"W2", "W3"}  # the new paper's list alone
    assert merged(lists, work_of, only={"p2"})["p1"] == {"W2"}  # p2's list is not newer; p3's is not read


def test_cover_counts_every_stored_work_and_the_new_papers_lists_as_candidates():
    work_of = {"p1": "W1", "p2": "W2", "p3": "W3"}
    lists = {  # p1's top 10 is the ten Ts; its 11th stored work (A) and p3's newer list (W3) are candidates too
        "p1": ("graph-1", {**{f"T{i}": (1.0, 0.5) for i in range(10)}, "A": (0.1, 0.1), "W2": (0.05, 0.05)}, ["p2"]),
        "p2": ("graph-1", {"W1": (0.2, 0.2)}, ["p1"]),
        "p3": ("graph-2", {"W1": (0.9, 0.5)}, ["p1"]),
    }
    exact = {"p1": {"A", "W3", "T0", "Z"}, "p2": {"W1", "W9"}}
    assert cover(lists, work_of, exact) == round((3 / 4 + 1 / 2) / 2, 4)  # Z and W9 were never candidates
    assert cover(lists, work_of, exact, only=set()) == round((2 / 4 + 1 / 2) / 2, 4)  # without p3's newer list


def test_moved_is_the_share_of_papers_in_both_nights_whose_exact_top_changed():
    assert moved({"p1": {"A"}, "p2": {"B"}}, {"p1": {"A"}, "p2": {"C"}, "p3": {"D"}}) == 0.5  # p3 is new: not counted
    assert moved({}, {"p1": {"A"}}) is None


def test_reranked_orders_a_stored_list_by_its_rescored_pairs(monkeypatch):
    work_of = {"p1": "W1"}
    lists = {"p1": ("graph-1", {"A": (0.30, 0.1), "B": (0.29, 0.1)}, [])}
    # A's score is its citers term (1/3 * 1 * 1 * 1/3 = 0.111) and a coupling of 0.189; B's is its coupling alone
    parts = {"p1": {"A": (1, False, False, 0.30 - 1 / 9), "B": (0, False, False, 0.29)}}
    then = {"W1": (1.0, 2), "A": (1.0, 2), "B": (1.0, 2)}
    now = {"W1": (0.2, 10), "A": (0.2, 10), "B": (1.0, 2)}  # A and the paper gained citers since
    monkeypatch.setattr("bench.related_staleness.TOP", 1)
    assert rescored(lists, parts, then, work_of)["p1"][1]["A"][0] == pytest.approx(0.30)  # the same graph: as stored
    assert reranked(lists, parts, then, work_of)["p1"] == {"A"}
    assert reranked(lists, parts, now, work_of)["p1"] == {"B"}  # A's Jaccard term shrank
    no_coupling = {"p1": {"A": (1, False, False, None), "B": (0, False, False, None)}}  # lists stored before the column
    assert reranked(lists, no_coupling, now, work_of)["p1"] == {"A"}


@pytest.mark.slow
def test_on_cacm_every_night_refresh_is_exact_and_the_newer_lists_win_back_what_a_cycle_misses(shared_data, tmp_path,
                                                                                                   monkeypatch):
    monkeypatch.setattr("bench.related_staleness.SHARED", shared_data)
    exact = run_cycle(tmp_path, refresh=1, nights=3, start=0.5, grow=0.01)
    assert all(r["recall10"] == 1.0 and r["same10"] == 1.0 for r in exact["nights_detail"])  # the control
    cycle = run_cycle(tmp_path, refresh=3, nights=5, start=0.5, grow=0.01)
    steady = [r for r in cycle["nights_detail"] if r["night"] > 3]
    assert steady and all(r["papers"] > 500 for r in steady)
    assert all(r["recomputed"] < 0.6 for r in steady)  # a third of the lists and the new papers', not all
    assert all(r["recall10"] < 1.0 for r in steady)  # older lists miss what the graph gained since
    assert all(min(r["recall10_merged"], r["recall10_new_lists"]) >= r["recall10"] for r in steady)
    assert all(r["new_missed_merged"] <= r["new_missed"] for r in steady if r["new_missed"] is not None)
    # the stored candidates hold at least what their top 10 shows; the exact lists' own night-to-night change is the
    # same whichever cycle stored the lists
    assert all(r["recall10_new_lists"] <= r["cover_new_lists"] <= 1.0 for r in steady)
    assert [r["exact_moved"] for r in cycle["nights_detail"][1:4]] == [r["exact_moved"] for r in exact["nights_detail"][1:4]]
    assert all(0.0 < r["exact_moved"] < 1.0 for r in steady)
    # re-ranked by the current graph: a stored list's own candidates, so never above what they hold; exact lists stay so
    assert all(0.0 < r["recall10_reranked"] <= r["cover_new_lists"] for r in steady)
    assert all(r["recall10_reranked"] == 1.0 for r in exact["nights_detail"])


@pytest.mark.slow
def test_the_synthetic_graph_replays_nights_of_new_papers_and_its_control_is_exact(tmp_path):
    """The second graph (--collection synthetic): each night brings its share of new papers with their citations; the
    every-night cycle matches a full recomputation, and a longer cycle recomputes about its share of the lists."""
    from bench.related_staleness import synthetic_nights

    exact = run_cycle(tmp_path / "r1", refresh=1, nights=2, start=0.0, grow=0.05, load=synthetic_nights(400, 0.05))
    assert [r["papers"] for r in exact["nights_detail"]] == [400, 420, 440]
    assert all(r["recall10"] == 1.0 and r["same10"] == 1.0 and r["with_list"] > 350 for r in exact["nights_detail"])
    cycle = run_cycle(tmp_path / "r4", refresh=4, nights=2, start=0.0, grow=0.05, load=synthetic_nights(400, 0.05))
    assert all(0.2 < r["recomputed"] < 0.5 for r in cycle["nights_detail"][1:])  # a quarter and the new papers' lists
