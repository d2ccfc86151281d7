"""The warehouse's change log for tables published by their changes (``_catalog_changes``, sql/core).

A write to such a table (:data:`JOURNALED`) records, in the same transaction, the keys (first-column values) whose
rows it deleted, replaced or added (one row each in ``_catalog_change_keys``), or "all of them" (``keys`` NULL). A
publish reads the entries after the one the previous snapshot saw (:func:`changes_since`) and rewrites only the
catalog partitions holding those keys (:mod:`pipeline.steps.catalog`).

Who records: :meth:`pipeline.warehouse.Warehouse.upsert` and ``delete_where_in`` do it for every caller; a step that
writes such a table with its own SQL records what that SQL returned (``... RETURNING <key>``) or what
:func:`diffed` found. ``tests/test_catalog_changes.py`` checks that every such statement in the code does one of
them. A write that escapes the log anyway shows up as a row count the log does not explain, and the publish then
scans that table as it does the others; an update in place that escapes it would not, which is why the test above
exists. ``paperkb publish --full`` scans every table regardless.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone

# tables whose every writer records its changes here (their key, the first column, is text). Not here:
# paper_metrics and powerlaw_fits (written whole by every graph run); s2_dataset_citations is not published.
JOURNALED = frozenset({
    "papers", "authors", "paper_authors", "versions", "works", "citations", "s2_authors", "work_authors",
    "s2_unresolved", "fulltext_docs", "chunks", "figures", "paper_references", "related", "related_incoming",
    "reference_links", "interests",
})
KEEP = 20_000  # entries kept: a snapshot older than that many writes is published by a full scan
KEYS_TABLE = "_catalog_change_keys"  # the keys of each entry, a row each (sql/core/074_catalog_changes.sql)
MOST = 4  # a write of more than 1/MOST of a table's rows is logged as "all of them" (a full scan is as cheap)


def record(con, table: str, keys: Iterable[str | None] | None) -> None:
    """Record that ``keys`` of ``table`` changed (``None``: every row), in the caller's transaction. Nothing for a
    table that is not :data:`JOURNALED`, or a warehouse without the log, or no keys."""
    if table not in JOURNALED or not _has_log(con, None):
        return
    if keys is not None:
        keys = sorted({k for k in keys if k is not None})
        if not keys:
            return
        if len(keys) > 1000 and len(keys) * MOST > _rows(con, table):
            keys = None
    # every result fetched whole: DuckDB refuses other work on a connection with a result pending (unregister)
    seq = con.execute("SELECT coalesce(max(seq), 0) + 1 FROM _catalog_changes").fetchall()[0][0]
    by_row = _has_table(con, None, KEYS_TABLE)  # else a warehouse no writer of this version has opened: keys inline
    inline = None if keys is None else ([] if by_row else keys)
    con.execute("INSERT INTO _catalog_changes VALUES (?, ?, ?, ?)", [seq, table, inline, datetime.now(timezone.utc)]).fetchall()
    if keys is not None and by_row:
        con.execute(f"INSERT INTO {KEYS_TABLE} SELECT ?, unnest(?::VARCHAR[])", [seq, keys]).fetchall()
    if seq > KEEP:
        con.execute("DELETE FROM _catalog_changes WHERE seq <= ?", [seq - KEEP]).fetchall()
        if by_row:
            con.execute(f"DELETE FROM {KEYS_TABLE} WHERE seq <= ?", [seq - KEEP]).fetchall()


def returning(con, table: str, sql: str, params: list | None = None) -> int:
    """Run ``sql``, a write to ``table`` ending in ``RETURNING <its key>``; record the keys it returned and return
    how many rows it wrote."""
    rows = con.execute(sql, params or []).fetchall()
    record(con, table, (r[0] for r in rows))
    return len(rows)


@contextmanager
def diffed(con, table: str, where: str, params: list | None = None) -> Iterator[None]:
    """Record the keys of ``table`` whose rows among those ``where`` keeps differ after the block from before it
    (a step that replaces a whole subset, e.g. the PDF citations, rewrites mostly identical rows: those are not
    changes). Reads that subset twice."""
    if table not in JOURNALED:
        yield
        return
    key = first_column(con, table)
    snapshot = f"SELECT {key} AS k, hash(t) AS h FROM {table} t WHERE {where}"
    before = f"_diff_before_{table}"
    con.execute(f"CREATE OR REPLACE TEMP TABLE {before} AS {snapshot}", params or []).fetchall()
    try:
        yield
        keys = con.execute(f"""
            SELECT DISTINCT k FROM (
                (SELECT k, h FROM {before} EXCEPT ALL {snapshot})
                UNION ALL
                ({snapshot} EXCEPT ALL SELECT k, h FROM {before}))""", (params or []) * 2).fetchall()
        record(con, table, (r[0] for r in keys))
    finally:
        con.execute(f"DROP TABLE IF EXISTS {before}").fetchall()


def first_column(con, table: str) -> str:
    """The key of ``table`` as the catalog cuts it: its first column (quoted)."""
    rows = con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = ? AND schema_name = 'main' "
                       "AND database_name = current_database() ORDER BY column_index LIMIT 1", [table]).fetchall()
    if not rows:
        raise ValueError(f"no table {table}")
    return '"' + rows[0][0].replace('"', '""') + '"'


def _rows(con, table: str) -> int:
    return int(con.execute(f'SELECT count(*) FROM "{table}"').fetchall()[0][0])


def _has_log(con, db: str | None) -> bool:
    return _has_table(con, db, "_catalog_changes")


def _has_table(con, db: str | None, name: str) -> bool:
    where = "database_name = current_database()" if db is None else "database_name = ?"
    return bool(con.execute(f"SELECT count(*) FROM duckdb_tables() WHERE {where} AND schema_name = 'main' "
                            "AND table_name = ?", ([] if db is None else [db]) + [name]).fetchall()[0][0])


def position(con, db: str) -> list | None:
    """``[seq, at]`` of the last entry (``[0, None]`` when there is none): what a publish saw. None: a warehouse
    without the log (made by an older version)."""
    if not _has_log(con, db):
        return None
    row = con.execute(f"SELECT seq, CAST(changed_at AS VARCHAR) FROM {db}._catalog_changes ORDER BY seq DESC LIMIT 1").fetchone()
    return [int(row[0]), row[1]] if row else [0, None]


def unchanged_since(con, tables: Iterable[str], seq: int, db: str) -> bool:
    """True when the log shows no write to any of ``tables`` after its entry ``seq`` (False also when it cannot
    tell: entries after ``seq`` pruned, or no log)."""
    if not _has_log(con, db):
        return False
    lo, hi = con.execute(f"SELECT min(seq), max(seq) FROM {db}._catalog_changes").fetchall()[0]
    if lo is None:
        return seq == 0
    if lo > seq + 1 or hi < seq:  # pruned past it, or another log (a new warehouse)
        return False
    tables = list(tables)
    return not con.execute(f"SELECT count(*) FROM {db}._catalog_changes WHERE seq > ? AND table_name IN "
                           f"({', '.join('?' * len(tables))})", [seq, *tables]).fetchall()[0][0]


def since(con, table: str, seen: list | None, db: str) -> set[str] | None:
    """The keys of ``table`` (in the attached database ``db``) changed after the entry ``seen`` (a :func:`position`),
    or None when they are not known (nothing seen, that entry no longer in the log, or a change of every row)."""
    return changes_since(con, {table: seen}, db)[table]


def _still_logged(con, db: str, seq: int, at: str | None) -> bool:
    """Whether the log still holds its entry ``seq`` recorded ``at`` (else pruned, or another log: a new warehouse), or
    for ``seq`` 0 (an empty log then) still holds its first entries."""
    if seq:
        row = con.execute(f"SELECT CAST(changed_at AS VARCHAR) FROM {db}._catalog_changes WHERE seq = ?", [seq]).fetchone()
        return row is not None and row[0] == at
    return (con.execute(f"SELECT min(seq) FROM {db}._catalog_changes").fetchone() or (None,))[0] in (None, 1)


def changes_since(con, seen: dict[str, list | None], db: str) -> dict[str, set[str] | None]:
    """:func:`since` of each table of ``seen`` (table -> the entry it saw), in a few queries for them all."""
    out: dict[str, set[str] | None] = {t: None for t in seen}
    if not any(isinstance(s, list) and len(s) == 2 for s in seen.values()) or not _has_log(con, db):
        return out
    starts: dict[str, int] = {}
    known: dict[tuple, bool] = {}  # (seq, at) -> whether the log still holds that entry (tables mostly saw the same)
    for table, entry in seen.items():
        if not isinstance(entry, list) or len(entry) != 2:
            continue
        seq, at = entry
        if (seq, at) not in known:
            known[(seq, at)] = _still_logged(con, db, seq, at)
        if known[(seq, at)]:
            starts[table] = int(seq)
    if not starts:
        return out
    entries = con.execute(f"SELECT table_name, seq, keys IS NULL, len(keys) FROM {db}._catalog_changes "
                          "WHERE seq > ? AND table_name = ANY(?) ORDER BY seq", [min(starts.values()), list(starts)]
                          ).fetchall()
    mine = [(t, s, every, n) for t, s, every, n in entries if s > starts[t]]
    every_row = {t for t, _, every, _ in mine if every}
    changed: dict[str, set[str]] = {t: set() for t in starts if t not in every_row}
    of = {s: t for t, s, _, _ in mine if t in changed}
    inline = [s for t, s, _, n in mine if n and t in changed]  # logged by an older paperkb, not moved yet (read-only)
    if inline:
        for s, k in con.execute(f"SELECT seq, unnest(keys) FROM {db}._catalog_changes WHERE seq = ANY(?)",
                                [inline]).fetchall():
            changed[of[s]].add(k)
    by_row = [s for t, s, _, n in mine if not n and t in changed]
    if by_row and _has_table(con, db, KEYS_TABLE):  # the seq range first: DuckDB skips the older entries' rows
        for s, k in con.execute(f"SELECT seq, key FROM {db}.{KEYS_TABLE} WHERE seq BETWEEN ? AND ? AND seq = ANY(?)",
                                [by_row[0], by_row[-1], by_row]).fetchall():
            changed[of[s]].add(k)
    out.update(changed)
    return out
