"""Which papers' related lists a graph run computes: all of them, or only those the night changed (pure).

Weighted CCBC moves with every citation count: a night of 1% new papers changes the counts of thousands of
references, and through their weights the exact score of nearly every pair. Recomputing every list every night
costs time that grows with the collection (at 6M works, 70% of the graph run) and rewrites the whole ``related``
table, so the night's snapshot carries it anew.

So a run computes every list (a *full* refresh) when the last full one is ``full_days`` days old or more, when
``top_k`` changed since, when there is none on record, or when most papers need one anyway; other runs compute
only the papers that are new, whose own references changed (their out-degree), or that had no link before and
have one now, and drop the lists of papers that left the corpus. A list computed on an incremental night is
exact for that night's graph; older lists keep the scores of the night they were computed, so a new paper enters
an older paper's list at the next full refresh. ``full_days = 0`` makes every run a full one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np

FULL_WHEN_SHARE = 0.5  # more papers than this share to compute: compute them all (about the same cost, exact)


@dataclass(frozen=True)
class Previous:
    """What the last run left: each corpus paper's (in-degree, out-degree) then, and its last full refresh."""

    degrees: dict[str, tuple[int, int]]
    last_full: datetime | None  # when the last full refresh with the same top_k ran (None: none on record)


@dataclass(frozen=True)
class RelatedPlan:
    full: bool
    reason: str  # why a full refresh ("" when incremental)
    rows: np.ndarray  # vertex rows to compute (every corpus row when full)
    replace: list[str]  # paper ids whose stored lists go: recomputed, or no longer corpus papers (incremental only)


def plan_related(paper_ids: list[str | None], corpus_rows: np.ndarray, in_degree: np.ndarray, out_degree: np.ndarray,
                 previous: Previous | None, now: datetime, full_days: int, force_full: bool = False) -> RelatedPlan:
    """The plan for one run. ``paper_ids[v]`` is vertex ``v``'s paper id (None: not a corpus paper); the degrees
    are this run's, per vertex."""
    corpus_rows = np.asarray(corpus_rows, dtype=np.int64)

    def full(reason: str) -> RelatedPlan:
        return RelatedPlan(True, reason, corpus_rows, [])

    if force_full:
        return full("asked for")
    if full_days <= 0:
        return full("every run (graph_related_full_days = 0)")
    if previous is None or previous.last_full is None:
        return full("no full refresh on record")
    age_days = (now - previous.last_full).total_seconds() / 86400
    if age_days >= full_days:
        return full(f"the last one is {age_days:.1f} days old (graph_related_full_days = {full_days})")
    todo: list[int] = []
    for v in corpus_rows.tolist():
        before = previous.degrees.get(paper_ids[v])
        if before is None:  # a new paper
            todo.append(v)
        elif int(out_degree[v]) != before[1]:  # its own references changed
            todo.append(v)
        elif sum(before) == 0 and int(in_degree[v]) + int(out_degree[v]) > 0:  # had no list; has a link now
            todo.append(v)
    if len(todo) > FULL_WHEN_SHARE * max(len(corpus_rows), 1):
        return full(f"{len(todo)} of {len(corpus_rows)} papers changed")
    rows = np.asarray(todo, dtype=np.int64)
    in_corpus = {paper_ids[v] for v in corpus_rows.tolist()}
    gone = sorted(p for p in previous.degrees if p not in in_corpus)
    return RelatedPlan(False, "", rows, sorted({paper_ids[v] for v in todo} | set(gone)))  # type: ignore[arg-type]
