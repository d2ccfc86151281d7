"""Which papers' related lists a graph run computes: all of them, or those the night changed plus a rolling slice
of the rest (pure).

Weighted CCBC moves with every citation count: a night of 1% new papers changes the counts of thousands of
references, and through their weights the exact score of nearly every pair. Recomputing every list every run costs
time that grows with the collection (at 6M works, 70% of the graph run) and rewrites the whole ``related`` table,
so every night's snapshot carries it anew.

So a run computes:

- the lists of the papers that are new, whose own references changed (their out-degree), or that had no link
  before and have one now;
- a rolling slice of the others, a sweep over the stored lists in paper id order: the ``1/refresh_runs`` of them
  that follow the list computed longest ago (the smallest paper id among those: where the last run's slice
  ended), and any list computed ``refresh_runs`` runs ago or more (the lists of new papers, computed when they came,
  whose turn the sweep has not reached yet). The slice is one range of keys (two where the sweep wraps) plus one
  night's new papers, whichever night it is, so a snapshot rewrites few of ``related``'s partitions (choosing the
  oldest lists alone, ties in paper id order, split the slices into more and more ranges as new papers' lists
  joined the rotation, and a night's snapshot rewrote more of ``related`` night after night). The range ends at
  the nearest key where a partition of the published ``related`` starts (the CURRENT snapshot's catalog, when there
  is one: at most half a partition more or fewer lists, as many on average), so the next night's range starts there
  too and a publish rewrites the partitions the slice covers, not a partly recomputed one at each end. Every list
  is thus recomputed at least every ``refresh_runs`` runs, and no run is a large one;

and drops the lists of papers that left the corpus. A run computes every list (a *full* refresh) when asked to,
when ``refresh_runs`` is 1, when no run with the same ``top_k`` is on record, or when most papers need a list
anyway. A list is exact for the graph of the run that computed it; a new paper enters an older paper's list when
that list's turn comes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FULL_WHEN_SHARE = 0.5  # more papers than this share to compute: compute them all (about the same cost, exact)


@dataclass(frozen=True)
class Previous:
    """What the runs before left: each corpus paper's (in-degree, out-degree) at the last run, the run that
    computed each stored list, and the ``top_k`` of the last run (None: no run on record)."""

    degrees: dict[str, tuple[int, int]]
    computed_by: dict[str, str]  # paper id -> run id of its stored list (run ids sort by time)
    top_k: int | None
    # the first keys of the published ``related`` table's partitions (the CURRENT snapshot's catalog, None: none): the
    # slice ends at the nearest, so a publish rewrites the partitions the slice recomputed and not one more at its end
    part_starts: list[str] | None = None


@dataclass(frozen=True)
class RelatedPlan:
    full: bool
    reason: str  # why a full refresh ("" when not)
    rows: np.ndarray  # vertex rows to compute (every corpus row when full)
    replace: list[str]  # paper ids whose stored lists go: recomputed, or no longer corpus papers (not full)
    changed: int = 0  # of ``rows``: new or changed papers (the rest are the rolling slice)
    changed_rows: np.ndarray | None = None  # those papers' vertex rows (not full; None: a full refresh)


def plan_related(paper_ids: list[str | None], corpus_rows: np.ndarray, in_degree: np.ndarray, out_degree: np.ndarray,
                 previous: Previous | None, top_k: int, refresh_runs: int, force_full: bool = False) -> RelatedPlan:
    """The plan for one run. ``paper_ids[v]`` is vertex ``v``'s paper id (None: not a corpus paper); the degrees
    are this run's, per vertex."""
    corpus_rows = np.asarray(corpus_rows, dtype=np.int64)

    def full(reason: str) -> RelatedPlan:
        return RelatedPlan(True, reason, corpus_rows, [], len(corpus_rows))

    if force_full:
        return full("asked for")
    if refresh_runs <= 1:
        return full("every run (graph_related_refresh_runs = 1)")
    if previous is None or previous.top_k is None:
        return full("no run on record")
    if previous.top_k != top_k:
        return full(f"top_k changed ({previous.top_k} -> {top_k})")
    changed: list[int] = []
    row_of: dict[str, int] = {}
    for v in corpus_rows.tolist():
        pid: str = paper_ids[v]  # corpus rows have a paper id
        row_of[pid] = v
        before = previous.degrees.get(pid)
        if before is None:  # a new paper
            changed.append(v)
        elif int(out_degree[v]) != before[1]:  # its own references changed
            changed.append(v)
        elif sum(before) == 0 and int(in_degree[v]) + int(out_degree[v]) > 0:  # had no list; has a link now
            changed.append(v)
    if len(changed) > FULL_WHEN_SHARE * max(len(corpus_rows), 1):
        return full(f"{len(changed)} of {len(corpus_rows)} papers changed")
    todo = set(changed)
    rest = {p: v for p, v in row_of.items() if v not in todo}
    due = [row_of[pid] for pid in _slice(previous.computed_by, rest, refresh_runs, previous.part_starts)]
    rows = np.asarray(sorted(todo | set(due)), dtype=np.int64)
    gone = {p for p in previous.computed_by if p not in row_of}
    return RelatedPlan(False, "", rows, sorted({paper_ids[v] for v in rows.tolist()} | gone), len(changed),
                       np.asarray(sorted(changed), dtype=np.int64))


def _slice(computed_by: dict[str, str], corpus: dict[str, int], refresh_runs: int,
           starts: list[str] | None = None) -> list[str]:
    """The stored lists whose turn it is (see the module doc): ``ceil(len(computed_by) / refresh_runs)`` of the corpus
    papers' stored lists in paper id order from the one computed longest ago (wrapping past the last), to the nearest
    of ``starts`` (keys where a partition of the published table starts) or the first key when given, and every list
    computed by the ``refresh_runs``-th most recent run on record or before. ``computed_by``: paper id -> the run id
    (sorting by time) of its stored list; ``corpus``: the corpus papers now, but those computed anyway."""
    keys = sorted(p for p in computed_by if p in corpus)
    if not keys:
        return []
    size = min(-(-len(computed_by) // refresh_runs), len(keys))
    oldest = min((computed_by[p], p) for p in keys)[1]
    start = keys.index(oldest)
    order = keys[start:] + keys[:start]
    if starts is not None and size < len(order):  # to the nearest key where a partition of the published table
        at = set(starts) | {keys[0]}  # starts (or the first key): on average as many lists as without
        longer, shorter = size, size
        while longer < len(order) and order[longer] not in at:
            longer += 1
        while shorter > 1 and order[shorter] not in at:
            shorter -= 1
        size = shorter if order[shorter] in at and size - shorter < longer - size else longer
    swept = order[:size]
    runs = sorted(set(computed_by.values()))
    overdue = {p for p in keys if computed_by[p] <= runs[-refresh_runs]} if len(runs) >= refresh_runs else set()
    return sorted(set(swept) | overdue)
