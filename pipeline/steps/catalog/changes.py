"""A table published by its changes (:data:`pipeline.catalog_changes.JOURNALED`): only the key ranges of the previous
snapshot's partitions that hold a changed key are read and numbered again, the other partitions linked unread."""

from __future__ import annotations

import bisect
import logging
import shutil
from pathlib import Path

from pipeline.steps.catalog.files import FOLDER, _fingerprint_and_write, _link_previous
from pipeline.steps.catalog.partitions import _digest, _ident, _natural, columns_digest, tail_piece
from pipeline.warehouse import scalar

log = logging.getLogger(__name__)


def _run_starts(con, parts: list[list], size: int) -> list[bool]:
    """Whether each of the partitions ``parts`` starts a natural run (partition 0, or a first key that is a boundary)
    rather than a piece a run was cut into."""
    firsts = [p[0] for p in parts if isinstance(p[0], str)]
    natural = dict(con.execute(f"SELECT x, {_natural('x', size)} FROM unnest(?::VARCHAR[]) t(x)", [firsts]).fetchall())
    return [i == 0 or p[0] is None or bool(natural.get(p[0], True)) for i, p in enumerate(parts)]


def changed_ranges(parts: list[list], changed: set[str], starts: list[bool] | None = None
                   ) -> tuple[list[tuple[str | None, str | None]], set[int]] | None:
    """The key ranges ``[lo, hi)`` (None: unbounded) of the partitions ``parts`` (``[first key, digest, rows]`` in key
    order; the first key of partition 0 is None) that hold a ``changed`` key, widened back over any partition whose
    first key changed (its rows may be gone, joining the partition to the one before) and to whole runs (``starts``:
    whether each partition starts one, :func:`_run_starts`; None: each does), and the indexes of those partitions in
    ``parts``. None when that is most of the table, or the keys are not text."""
    bounds = [p[0] for p in parts]
    lead = 1 if bounds and bounds[0] is not None else 0  # no partition 0: keys before the first boundary land in one
    bounds = [None] * lead + bounds
    starts = [True] * (lead + 1) + list(starts or [True] * len(parts))[1:]
    firsts = bounds[1:]
    if any(not isinstance(b, str) for b in firsts):
        return None
    hit: set[int] = set()
    for k in changed:
        i = bisect.bisect_right(firsts, k)  # partition i holds k: bounds[i] <= k < bounds[i + 1]
        while i > 0 and bounds[i] in changed:
            hit.add(i)
            i -= 1
        hit.add(i)
    for i in list(hit):  # a run's pieces are numbered from its start: read the whole run again
        j = i
        while not starts[j]:
            j -= 1
            hit.add(j)
        j = i + 1
        while j < len(bounds) and not starts[j]:
            hit.add(j)
            j += 1
    if len(hit) * 2 > len(bounds):
        return None
    ranges: list[tuple[str | None, str | None]] = []
    for i in sorted(hit):
        hi = bounds[i + 1] if i + 1 < len(bounds) else None
        if ranges and ranges[-1][1] is not None and ranges[-1][1] == bounds[i]:
            ranges[-1] = (ranges[-1][0], hi)
        else:
            ranges.append((bounds[i], hi))
    return ranges, {i - lead for i in hit if i - lead >= 0}


def _in_ranges(key: str, ranges: list[tuple[str | None, str | None]]) -> tuple[str, list]:
    """SQL keeping the rows whose ``key`` lies in one of ``ranges``, with its parameters."""
    terms, params = [], []
    for lo, hi in ranges:
        cond = []
        if lo is not None:
            cond.append(f"{_ident(key)} >= ?")
            params.append(lo)
        if hi is not None:
            cond.append(f"{_ident(key)} < ?")
            params.append(hi)
        term = " AND ".join(cond) or "TRUE"
        terms.append(f"({term} OR {_ident(key)} IS NULL)" if lo is None else f"({term})")
    return " OR ".join(terms) or "FALSE", params


def _write_changed(con, table: str, source: str, key: str, columns: str, out: Path, previous: Path | None,
                   before: dict, sizing: dict, changed: set[str]) -> dict | None:
    """Write ``table`` from the ``previous`` snapshot's partitions (``before["parts"]``) and the rows of the key
    ranges holding a ``changed`` key, numbered afresh; the others are linked without reading them. None (nothing
    written) when that cannot be done: no partitions on record, another partition size, a key that is not text,
    most of the table changed, or a row count the changes do not explain (a write the log missed)."""
    parts = before.get("parts")
    if previous is None or not isinstance(parts, list) or before.get("part_rows") != sizing["part_rows"] \
            or before.get("part_max") != sizing["part_max"] or before.get("tail_max") != sizing["tail_max"] \
            or before.get("columns") != columns_digest(columns) or not columns.startswith(f"{key} VARCHAR"):
        return None  # (another set of columns: every row's hash and file changed, e.g. a column added)
    if not changed:
        return _link_unchanged(con, table, source, columns, out, previous, parts, sizing)
    starts = _run_starts(con, parts, sizing["part_rows"])
    tail_from = _appended_tail(con, parts, starts, changed, sizing["part_rows"])
    if tail_from is not None:  # the last run's pieces before its last one stay as they are: read from there on
        starts = starts[:-1] + [True]
    found = changed_ranges(parts, changed, starts)
    if found is None:
        return None
    ranges, inside = found
    where, params = _in_ranges(key, ranges)
    kept = [p for i, p in enumerate(parts) if i not in inside]
    in_ranges = scalar(con, f"SELECT count(*) FROM {source} WHERE ({where})", params)
    if not _rows_explained(con, table, source, in_ranges + sum(int(p[2]) for p in kept)):
        return None
    folder = out / FOLDER / table
    if not _link_all(previous, table, [f"{digest}.parquet" for _, digest, _ in kept], folder):
        return None
    linked = len(kept)
    # the ranges' partitions, numbered afresh over their keys alone
    done = _fingerprint_and_write(con, table, source, key, columns, out, previous, sizing, where, params, folder=folder,
                                  tail=ranges[-1][1] is None,
                                  tail_from=tail_from if tail_from is not None and len(parts) - 1 in inside else None)
    done["rows"] += sum(int(p[2]) for p in kept)
    done["linked"] += linked
    done["parts"] = sorted(kept + done.pop("_parts"), key=lambda p: (p[0] is not None, p[0] or ""))
    done["columns"] = columns_digest(columns)
    log.info("publish: %s by its changes: %d of %d partition(s) read again", table, len(parts) - len(kept), len(parts))
    return done


def _appended_tail(con, parts: list[list], starts: list[bool], changed: set[str], size: int) -> tuple[str, int] | None:
    """(first key of the last partition, keys before it in the table's last run) when ``changed`` leaves every piece of
    that run but the last as it was: the run is cut in more than one piece, the changed keys in it all lie from the last
    piece's first key on, and none is a boundary (it would close the run, cut as the others then). New increasing keys
    (a night's papers, chunks, lists) do: the run's earlier pieces are then neither read nor numbered again, only the
    last one and what follows it. None otherwise (the whole run is read, :func:`changed_ranges`)."""
    last = len(parts) - 1
    run = max((i for i, s in enumerate(starts) if s), default=0)
    first = parts[last][0] if parts else None
    if last <= run or not isinstance(first, str) or first in changed:  # (its first key gone: it joins the piece before)
        return None
    start = parts[run][0]
    late = [k for k in changed if k is not None and (start is None or k >= start)]
    if any(k < first for k in late):
        return None
    if late and scalar(con, f"SELECT bool_or({_natural('x', size)}) FROM unnest(?::VARCHAR[]) t(x)", [late]):
        return None
    return first, (last - run) * tail_piece(size)


def _rows_explained(con, table: str, source: str, rows: int) -> bool:
    """Whether ``source`` holds the ``rows`` its change log explains (else a write escaped the log: warned, and the
    table is scanned)."""
    held = scalar(con, f"SELECT count(*) FROM {source}")
    if rows != held:
        log.warning("publish: %s holds %d rows, not the %d its change log explains: scanning all of it", table, held, rows)
    return rows == held


def _link_all(previous: Path, table: str, names: list[str], folder: Path) -> bool:
    """Make ``folder`` and link the ``previous`` snapshot's partitions ``names`` of ``table`` into it; False (and no
    folder) when one is missing there."""
    folder.mkdir(parents=True)
    for name in names:
        if not _link_previous(previous, table, name, folder):
            log.warning("publish: partition %s of %s is missing from the previous snapshot: scanning all of %s",
                        name, table, table)
            shutil.rmtree(folder)
            return False
    return True


def _link_unchanged(con, table: str, source: str, columns: str, out: Path, previous: Path, parts: list,
                    sizing: dict) -> dict | None:
    """``table`` with no change logged since ``previous``: every one of its partitions ``parts`` linked, unread (None
    when its row count or a file says otherwise: then it is scanned)."""
    rows = sum(int(p[2]) for p in parts)
    if not _rows_explained(con, table, source, rows):
        return None
    names = [f"{digest}.parquet" for _, digest, _ in parts] or [f"{_digest(columns, 0, '0', '0')}.parquet"]
    if not _link_all(previous, table, names, out / FOLDER / table):
        return None
    log.info("publish: %s by its changes: 0 of %d partition(s) read again", table, len(parts))
    return {"rows": rows, "linked": len(names), "written": 0, **sizing, "parts": parts, "columns": columns_digest(columns)}
