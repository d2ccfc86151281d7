"""The warehouse's change log for tables published by their changes (``_catalog_changes``, sql/core).

A step that writes such a table records, in the same transaction, the keys (first-column values) whose rows it
deleted, replaced or added, or ``None`` for "all of them". A publish reads the entries after the one the previous
snapshot saw (:func:`since`) and rewrites only the catalog partitions holding those keys
(:mod:`pipeline.steps.catalog`). The graph step is the only writer of the one such table, ``related``
(:data:`JOURNALED`); any other write to it shows up as a row count the log does not explain, and the publish then
scans the table as it does every other one.
"""

from __future__ import annotations

from datetime import datetime, timezone

JOURNALED = frozenset({"related"})  # tables whose every writer records its changes here
KEEP = 1000  # entries kept: a snapshot older than that many changes is published by a full scan


def record(con, table: str, keys: list[str] | None) -> None:
    """Record that ``keys`` of ``table`` changed (``None``: every row), in the caller's transaction."""
    if table not in JOURNALED:
        raise ValueError(f"{table} is not published by its changes")
    seq = (con.execute("SELECT coalesce(max(seq), 0) + 1 FROM _catalog_changes").fetchone() or (1,))[0]
    con.execute("INSERT INTO _catalog_changes VALUES (?, ?, ?, ?)", [seq, table, keys, datetime.now(timezone.utc)])
    con.execute("DELETE FROM _catalog_changes WHERE seq <= ?", [seq - KEEP])


def _has_log(con, db: str) -> bool:
    return bool((con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main' "
                             "AND table_name = '_catalog_changes'", [db]).fetchone() or (0,))[0])


def position(con, db: str) -> list | None:
    """``[seq, at]`` of the last entry (``[0, None]`` when there is none): what a publish saw. None: a warehouse
    without the log (made by an older version)."""
    if not _has_log(con, db):
        return None
    row = con.execute(f"SELECT seq, CAST(changed_at AS VARCHAR) FROM {db}._catalog_changes ORDER BY seq DESC LIMIT 1").fetchone()
    return [int(row[0]), row[1]] if row else [0, None]


def since(con, table: str, seen: list | None, db: str) -> set[str] | None:
    """The keys of ``table`` (in the attached database ``db``) changed after the entry ``seen`` (a :func:`position`), or None when they are not known
    (nothing seen, that entry no longer in the log, or a change of every row)."""
    if not isinstance(seen, list) or len(seen) != 2 or not _has_log(con, db):
        return None
    seq, at = seen
    if seq:
        row = con.execute(f"SELECT CAST(changed_at AS VARCHAR) FROM {db}._catalog_changes WHERE seq = ?", [seq]).fetchone()
        if row is None or row[0] != at:  # pruned, or another log (a new warehouse)
            return None
    elif (con.execute(f"SELECT min(seq) FROM {db}._catalog_changes").fetchone() or (None,))[0] not in (None, 1):
        return None  # the log was empty then, and its first entries are pruned now
    changed: set[str] = set()
    for (keys,) in con.execute(f"SELECT keys FROM {db}._catalog_changes WHERE table_name = ? AND seq > ? ORDER BY seq",
                               [table, seq]).fetchall():
        if keys is None:
            return None
        changed.update(keys)
    return changed
