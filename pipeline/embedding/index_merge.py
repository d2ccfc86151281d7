"""When to merge a LanceDB index's deltas (pure; the embed step reads the segments and applies the plan).

Each embed indexes its new rows as a small *delta* beside the index's base segment, so a night writes
no old index file again and a publish hard-links them all. Deltas cost search time (each is searched),
so they are merged now and then. Merging everything into one segment rewrites the base index: at 1M
passages 100-200 MB on one night (issue 31: 9.7% of that night's snapshot, against a 5% budget). So
merges are tiered:

* **tier merge**: once ``fan_in`` deltas of about one night's size have gathered, tonight's rows and
  the newest deltas become one delta (Lance's ``num_indices_to_merge=N`` merges the new rows with the
  newest N segments). What it writes is bounded by tonight's own rows: at most
  ``TOLERANCE * fan_in`` times them, so the base, and deltas that were merged before, are never rewritten;
* **full merge**: only when an index would pass ``max_deltas`` deltas: all segments (the base too)
  into one, after compacting the data files. At a steady ``fan_in`` of 4 and 20 deltas that is every
  ~70 nights instead of every 21.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

# A night a little smaller than the ones before it still merges them (nights vary by a few percent)
TOLERANCE = 1.25


@dataclass(frozen=True)
class MergePlan:
    full: bool          # merge every segment, the base index too (and compact the data files first)
    merge_newest: int   # else: how many of the newest existing segments to merge with the new rows (0 = a new delta)


def plan_merge(delta_rows: Sequence[int], new_rows: int, max_deltas: int, fan_in: int) -> MergePlan:
    """The plan for one index: ``delta_rows`` are the rows of its deltas, oldest first (the base
    segment not included), ``new_rows`` the rows no segment covers yet."""
    if len(delta_rows) >= max_deltas:  # one more delta would pass the limit
        return MergePlan(full=True, merge_newest=0)
    if fan_in < 2 or new_rows <= 0:
        return MergePlan(full=False, merge_newest=0)
    budget, total, n = TOLERANCE * fan_in * new_rows, new_rows, 0
    for rows in reversed(delta_rows):
        if total + rows > budget:
            break
        total, n = total + rows, n + 1
    return MergePlan(full=False, merge_newest=n if n + 1 >= fan_in else 0)
