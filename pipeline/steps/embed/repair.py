"""A LanceDB table's health (opens, reads, one row per key) and its repair: a damaged table is removed, so the sync
rebuilds it from the vector cache."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pyarrow.compute as pc

from pipeline.steps.embed.rows import table_names

log = logging.getLogger(__name__)


def table_problem(table, key: str, expected: int | None = None) -> str | None:
    """What is wrong with an opened LanceDB table, or None: every data file readable (the key column
    is scanned), one row per key, and ``expected`` rows when given."""
    n = table.count_rows()
    ids = table.search().select([key]).limit(None).to_arrow().column(key)
    distinct = len(pc.unique(ids))
    if len(ids) != n:
        return f"{n} rows counted but {len(ids)} read"
    if distinct != n:
        return f"{n} rows for {distinct} {key}s (duplicates from an interrupted or concurrent sync)"
    if expected is not None and n != expected:
        return f"{n} rows, the warehouse has {expected}"
    return None


def repair_table(db, root: Path, name: str, key: str) -> str | None:
    """Before a sync: make sure table ``name`` opens, reads and has one row per key. A damaged table (an
    older paperkb's concurrent embeds, a data file gone, a create killed half-way) is removed, so the
    sync rebuilds it from the vector cache: nothing is re-encoded. Returns what was repaired, or None."""
    path = Path(root) / f"{name}.lance"
    if name not in table_names(db):
        if path.exists():  # a create or drop killed half-way: a folder LanceDB does not list as a table
            shutil.rmtree(path, ignore_errors=True)
            log.warning("LanceDB table %s: removed the leftovers of an interrupted create", name)
            return "leftovers removed"
        return None
    try:
        problem = table_problem(db.open_table(name), key)
    except Exception as exc:  # noqa: BLE001 - any failure to open or read means: rebuild it
        problem = f"unreadable ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    if problem is None:
        return None
    log.warning("LanceDB table %s is damaged: %s: rebuilding it from the vector cache", name, problem)
    _remove_table(db, name, path)
    return problem


def _remove_table(db, name: str, path: Path | None = None) -> None:
    try:
        if name in table_names(db):
            db.drop_table(name)
    except Exception as exc:  # noqa: BLE001 - a damaged table may not drop cleanly: remove its folder
        log.debug("drop_table(%s) failed (%s): removing its folder", name, exc)
    if path is None:
        uri = getattr(db, "uri", None)
        path = Path(str(uri)) / f"{name}.lance" if uri else None
    if path is not None and path.exists():
        shutil.rmtree(path, ignore_errors=True)
