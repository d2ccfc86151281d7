"""Which papers' related lists a graph run computes: all of them, or those the night changed plus a rolling slice
of the rest, sized by how much the citation graph changed (pure).

Weighted CCBC moves with every citation count: a night of 1% new papers changes the counts of thousands of
references, and through their weights the exact score of nearly every pair. Recomputing every list every run costs
time that grows with the collection (at 6M works, 70% of the graph run) and rewrites the whole ``related`` table,
so every night's snapshot carries it anew.

So a run computes:

- the lists of the papers that are new, whose own references changed (their out-degree), or that had no link
  before and have one now;
- a rolling slice of the others, a sweep over the stored lists in paper id order that starts after the list computed
  longest ago (the smallest paper id among those: where the last run's slice ended). How far it goes follows the
  graph's change, not the calendar: a stored list goes stale as citations arrive, so the sweep covers every list
  once per ``refresh_change`` of change (:func:`change_share`: the citation links added or removed since the run
  before, as a share of all links; 7% by default, a week of nights that each add 1% of the papers). A run that adds
  1% sweeps a seventh of the lists, one that adds 0.03% (arXiv's daily share of its own corpus) a 233rd, one that
  changes nothing none. ``incoming_rows`` bounds what a reader of an older list reads beside it: the entries of the
  new papers' lists of every run since (``related_incoming``, a table that grows with the runs since the oldest list).
  A list is due once the runs after it hold that many entries, and the sweep goes at least as fast as the table grows
  against that budget (the run's new and changed lists x ``top_k`` / ``incoming_rows`` of the lists: at 100,000 papers
  and arXiv's rate, 31 new papers x 50 against 1,000,000, a 645th of the lists; at arXiv's own size, ~700 a night, a
  29th; none on a run that changed nothing). ``refresh_runs``
  (when 2 or more; off by default) bounds the age in runs the same way: at least ``1/refresh_runs`` of the lists a
  run, and every list within that many runs. The lists due add up across runs
  (``owed``, kept in the run log): a run whose share is a few lists carries them to the next. Any list that the graph
  changed by ``refresh_change`` or more since its run is due too (the lists of new papers, computed when they came,
  whose turn the sweep has not reached yet). The slice is one range of keys (two where the sweep wraps) plus those
  papers, so a snapshot rewrites few of ``related``'s partitions (choosing the oldest lists alone, ties in paper id
  order, split the slices into more and more ranges as new papers' lists joined the rotation, and a night's snapshot
  rewrote more of ``related`` night after night). The range ends at the nearest key where a partition of the published
  ``related`` starts (the CURRENT snapshot's catalog, when there is one: at most half a partition more or fewer lists,
  as many on average, the difference carried to the next run), so the next night's range starts there too and a
  publish rewrites the partitions the slice covers, not a partly recomputed one at each end;

and drops the lists of papers that left the corpus. A run computes every list (a *full* refresh) when asked to,
when ``refresh_runs`` is 1, when no run with the same ``top_k`` is on record, or when most papers need a list
anyway. A list is exact for the graph of the run that computed it; a new paper enters an older paper's list when
that list's turn comes (readers see it before, through the new paper's own list: ``related_incoming``).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

FULL_WHEN_SHARE = 0.5  # more papers than this share to compute: compute them all (about the same cost, exact)
REFRESH_CHANGE = 0.07  # the default graph_related_refresh_change: a week of nights that each add 1% of the papers
LEGACY_RUNS = 7  # a run on record without its change (an older version) counts as 1/7 of refresh_change: the weekly
# cycle that version kept


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
    # the graph runs on record in time order, each with its change share (:func:`change_share`; None: not recorded)
    runs: Sequence[tuple[str, float | None]] = ()
    owed: float = 0.0  # lists the sweep owed after the last run (negative: it went further than its share)
    # the entries ``related_incoming`` holds, by the run that computed them (a reader of a list computed by run r reads
    # those of the runs after r)
    incoming: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RelatedPlan:
    full: bool
    reason: str  # why a full refresh ("" when not)
    rows: np.ndarray  # vertex rows to compute (every corpus row when full)
    replace: list[str]  # paper ids whose stored lists go: recomputed, or no longer corpus papers (not full)
    changed: int = 0  # of ``rows``: new or changed papers (the rest are the rolling slice)
    changed_rows: np.ndarray | None = None  # those papers' vertex rows (not full; None: a full refresh)
    owed: float = 0.0  # lists the sweep owes after this run (for the next one)


def change_share(degrees_changed: int, degrees: int) -> float:
    """How much the citation graph changed since the run before: the sum over works of |change of in-degree| +
    |change of out-degree| (a link added or removed counts twice: its two ends) over the sum of all degrees now (twice
    the links). A link replaced by another from the same paper counts at least half."""
    return degrees_changed / degrees if degrees > 0 else (1.0 if degrees_changed else 0.0)


def plan_related(paper_ids: list[str | None], corpus_rows: np.ndarray, in_degree: np.ndarray, out_degree: np.ndarray,
                 previous: Previous | None, top_k: int, refresh_runs: int, force_full: bool = False, *,
                 change: float | None = None, refresh_change: float = REFRESH_CHANGE,
                 incoming_rows: int = 0) -> RelatedPlan:
    """The plan for one run. ``paper_ids[v]`` is vertex ``v``'s paper id (None: not a corpus paper); the degrees
    are this run's, per vertex. ``change``: this run's :func:`change_share` (None: unknown, then the sweep moves by
    ``refresh_runs`` alone, which must be 2 or more); ``refresh_runs`` 0: no bound in runs; ``incoming_rows`` 0: no
    bound on the newer entries a list is read with."""
    corpus_rows = np.asarray(corpus_rows, dtype=np.int64)

    def full(reason: str) -> RelatedPlan:
        return RelatedPlan(True, reason, corpus_rows, [], len(corpus_rows))

    if force_full:
        return full("asked for")
    if refresh_runs == 1:
        return full("every run (graph_related_refresh_runs = 1)")
    if change is None and refresh_runs < 2:
        raise ValueError("plan_related: without the run's change, refresh_runs must be 2 or more")
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
        elif sum(before) == 0 and int(in_degree[v]) + int(out_degree[v]) > 0:  # had no link; has a link now
            changed.append(v)
    if len(changed) > FULL_WHEN_SHARE * max(len(corpus_rows), 1):
        return full(f"{len(changed)} of {len(corpus_rows)} papers changed")
    todo = set(changed)
    rest = {p: v for p, v in row_of.items() if v not in todo}
    rate = change / refresh_change if change is not None else 0.0
    if refresh_runs >= 2:
        rate = max(rate, 1 / refresh_runs)
    tonight = len(changed) * top_k  # at most the entries this run adds to related_incoming: its new lists'
    if incoming_rows > 0:  # a cycle of 1/rate such runs adds tonight/rate entries: at most incoming_rows
        rate = max(rate, tonight / incoming_rows)
    owed = previous.owed + rate * len(previous.computed_by)
    swept, left = _slice(previous.computed_by, rest, owed, previous.part_starts)
    overdue = _overdue(previous, rest, refresh_runs, change, refresh_change)
    if incoming_rows > 0:
        overdue |= _overdue_by_entries(previous, rest, incoming_rows, tonight)
    due = [row_of[pid] for pid in sorted(set(swept) | overdue)]
    rows = np.asarray(sorted(todo | set(due)), dtype=np.int64)
    gone = {p for p in previous.computed_by if p not in row_of}
    return RelatedPlan(False, "", rows, sorted({paper_ids[v] for v in rows.tolist()} | gone), len(changed),
                       np.asarray(sorted(changed), dtype=np.int64), left)


def _slice(computed_by: dict[str, str], corpus: dict[str, int], owed: float,
           starts: list[str] | None = None) -> tuple[list[str], float]:
    """The sweep's lists (see the module doc) and what it still owes after them: about ``owed`` of the corpus
    papers' stored lists in paper id order from the one computed longest ago (wrapping past the last; none when it
    owes less than half a list), to the nearest of ``starts`` (keys where a partition of the published table starts)
    or the first key when given. ``computed_by``: paper id -> the run id (sorting by time) of its stored list;
    ``corpus``: the corpus papers now, but those computed anyway."""
    keys = sorted(p for p in computed_by if p in corpus)
    if not keys or owed < 0.5:
        return [], (0.0 if not keys else owed)
    size = min(math.ceil(owed - 1e-9), len(keys))
    oldest = min((computed_by[p], p) for p in keys)[1]
    start = keys.index(oldest)
    order = keys[start:] + keys[:start]
    if starts is not None and size < len(order):  # to the nearest key where a partition of the published table
        at = set(starts) | {keys[0]}  # starts (or the first key): on average as many lists as without
        longer, shorter = size, size
        while longer < len(order) and order[longer] not in at:
            longer += 1
        while shorter > 0 and order[shorter] not in at:
            shorter -= 1
        size = shorter if size - shorter < longer - size else longer
    if size >= len(order):
        return order, 0.0  # every list swept: nothing is owed
    return order[:size], owed - size


def _overdue(previous: Previous, corpus: dict[str, int], refresh_runs: int, change: float | None,
             refresh_change: float) -> set[str]:
    """The stored lists due whatever the sweep: computed by the ``refresh_runs``-th most recent run on record or
    before (when ``refresh_runs`` is 2 or more), or (when the run's ``change`` is known) computed before the graph
    changed by ``refresh_change`` or more (a run not on record: due)."""
    computed_by = {p: r for p, r in previous.computed_by.items() if p in corpus}
    due: set[str] = set()
    if refresh_runs >= 2:
        runs = sorted(set(previous.computed_by.values()))
        if len(runs) >= refresh_runs:
            due |= {p for p, r in computed_by.items() if r <= runs[-refresh_runs]}
    if change is not None:
        since = change_since(previous.runs, change, refresh_change / LEGACY_RUNS)
        due |= {p for p, r in computed_by.items() if since.get(r, math.inf) >= refresh_change - 1e-12}
    return due


def _overdue_by_entries(previous: Previous, corpus: dict[str, int], incoming_rows: int, tonight: float) -> set[str]:
    """The stored lists that a reader would read with ``incoming_rows`` or more newer entries: those of the runs after
    the list's own in ``previous.incoming``, and ``tonight``'s (this run's, estimated)."""
    runs = sorted(previous.incoming)
    after = np.concatenate([np.cumsum([previous.incoming[r] for r in reversed(runs)])[::-1], [0]])  # of runs[i:]
    return {p for p, r in previous.computed_by.items()
            if p in corpus and tonight + after[bisect.bisect_right(runs, r)] >= incoming_rows}


def change_since(runs: Sequence[tuple[str, float | None]], tonight: float, legacy: float) -> dict[str, float]:
    """For each run on record (in time order, each with its change share, None: ``legacy``), how much the graph has
    changed since it: the shares of the runs after it and ``tonight``'s."""
    out: dict[str, float] = {}
    total = tonight
    for run_id, share in reversed(list(runs)):
        out[run_id] = total
        total += legacy if share is None else share
    return out
