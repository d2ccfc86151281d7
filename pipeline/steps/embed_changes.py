"""Which LanceDB rows an embed merge writes: the warehouse rows whose source changed since the table was synced.

Each LanceDB row carries ``row_hash``: the md5 of the warehouse mart row it is built from, as JSON (``passages`` for
``chunks``, ``figure_legends`` for ``figures``, and for ``papers`` its ``paper_meta`` row followed by the hashes of its
passages in order, so a paper whose passages changed is rewritten too: its doc vector is their mean). DuckDB computes
them in one scan of each mart (:func:`source_hashes`); the merge compares them with the table's own ``(key,
row_hash)`` columns (:func:`stale`) and then reads, looks up the vectors of, builds and writes only the rows that
differ, and deletes the keys the warehouse no longer has. A night's merge thus holds its own new and changed rows and
their vectors, not every vector of the collection (at 100,000 papers / 1M passages a merge with nothing new took 37 s
and 5.8 GB when every row was built to be compared, BENCHMARKS.md).

A table is built whole (every row; the sync still writes only rows whose hash differs) when it is missing, was
embedded with another model, or when most of its rows would be written anyway (:data:`WHOLE_SHARE`: a first merge
after an upgrade that changed what the hash covers, a re-chunking of everything). Whole or not, rows are read from
DuckDB, built and written a batch at a time (:func:`read_batches`, :data:`BATCH_ROWS`), so a merge holds one batch's
texts and vectors whatever the table's size.

Which rows to hash: every row, unless the warehouse's change log (:mod:`pipeline.catalog_changes`) can say which
papers the tables the marts read (:data:`SOURCES`) changed since the tables were last synced. After each sync the
embed records the log's position and the tables' LanceDB versions (:data:`SYNCED`, beside the warehouse); the next one
hashes and compares only the rows of the papers written since (:func:`changed_papers`). Anything the record cannot
vouch for (no record, another model, a table whose version moved since, log entries pruned or logged as "every row")
means every row again, as do row counts that disagree with the warehouse's (a write outside the log added or removed
rows) and ``paperkb embed --full`` (for rows edited in place outside paperkb's steps, which the log cannot see).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from pipeline import catalog_changes
from pipeline.errors import UserError

KEYS = {"chunks": "chunk_id", "papers": "paper_id", "figures": "figure_id"}
MARTS = {"chunks": "passages", "papers": "paper_meta", "figures": "figure_legends"}
WHOLE_SHARE = 0.5  # more of a table's rows than this to write: build it whole (the same rows written, one read)
# mart rows a merge reads, builds and writes at a time: what it holds at once is one batch's texts, inputs and vectors,
# not the table's (a whole build of 1M passages peaked at 9.3 GB when it held them all, at 1.6 GB in batches of 50,000,
# BENCHMARKS.md). `papers` rows are read PAPERS_PER_BATCH at a time: each brings its passages' vectors from the synced
# `chunks` table in one filter
BATCH_ROWS = 50_000
PAPERS_PER_BATCH = 2_000
ROW_HASH = "_row_hash"  # the column :func:`read_batches` adds: each row's source hash
SOURCES = ("papers", "paper_authors", "chunks", "figures")  # the warehouse tables the three marts read
SYNCED = "lancedb_synced.json"  # beside the warehouse: the change log's position the LanceDB tables reflect


@dataclass(frozen=True)
class Stale:
    """What a merge writes to one table: ``write`` the keys of rows to build and write (None: every row, the table
    built whole), ``delete`` the keys to remove (with ``write`` None, the sync removes every key it was not given)."""

    write: pa.Array | None
    delete: list[str]
    added: int = 0  # of ``write``, the keys the table lacks

    @property
    def whole(self) -> bool:
        return self.write is None


def read_mart(con, sql: str) -> pa.Table:
    """``sql`` over the warehouse marts as Arrow (a one-line user error when a table or view is missing)."""
    import duckdb

    try:
        return con.sql(sql).to_arrow_table()
    except duckdb.CatalogException as exc:
        raise _schema_error(exc) from None


def _schema_error(exc: Exception) -> UserError:
    """A warehouse no write step of this version has opened yet (a mart or table missing)."""
    return UserError(f"the warehouse lacks a table or view this version reads ({str(exc).splitlines()[0]}): "
                     "run `paperkb harvest` or `paperkb import-collection` first, which brings its schema up to date")


def source_hashes(con, tables: tuple[str, ...] = ("chunks", "papers", "figures"),
                  scope: set[str] | None = None) -> dict[str, pa.Table]:
    """``{table: (key, row_hash)}`` of every row each LanceDB table of ``tables`` should hold, from the warehouse
    marts (of the papers ``scope`` only, when given)."""
    out: dict[str, pa.Table] = {}
    only = ""
    if scope is not None:
        con.register("_paperkb_scope", pa.table({"k": pa.array(sorted(scope), pa.string())}))
        only = "WHERE m.paper_id IN (SELECT k FROM _paperkb_scope)"
    try:
        if "chunks" in tables or "papers" in tables:
            chunks = read_mart(con, f"SELECT chunk_id, paper_id, ordinal, md5(to_json(m)) AS row_hash FROM passages m {only}")
            out["chunks"] = chunks.select(["chunk_id", "row_hash"])
        if "papers" in tables:
            con.register("_paperkb_chunk_hashes", chunks)
            try:
                out["papers"] = read_mart(con, f"""
                    SELECT m.paper_id, md5(to_json(m) || c.h) AS row_hash
                    FROM paper_meta m
                    JOIN (SELECT paper_id, string_agg(row_hash, '' ORDER BY ordinal, chunk_id) AS h
                          FROM _paperkb_chunk_hashes GROUP BY paper_id) c USING (paper_id) {only}""")
            finally:
                con.unregister("_paperkb_chunk_hashes")
        if "figures" in tables:
            out["figures"] = read_mart(con, f"SELECT figure_id, md5(to_json(m)) AS row_hash FROM figure_legends m {only}")
    finally:
        if scope is not None:
            con.unregister("_paperkb_scope")
    return {t: out[t] for t in tables}


def marts_digest(con) -> str:
    """A digest of the three marts' definitions: a record made under other definitions (an upgrade that changed what
    a row holds) vouches for nothing."""
    views = con.execute("SELECT view_name, sql FROM duckdb_views() WHERE database_name = current_database() "
                        "AND view_name = ANY(?) ORDER BY view_name", [sorted(MARTS.values())]).fetchall()
    return hashlib.sha256(repr(views).encode()).hexdigest()[:16]


def synced_position(path: Path, model_key: str, versions: dict[str, int]) -> list | None:
    """The change log's position (:func:`pipeline.catalog_changes.position`) the LanceDB tables reflect, from the
    record ``path`` (:data:`SYNCED`), when it is for this ``model_key`` (the model's and :func:`marts_digest`) and the
    tables are still at the ``versions`` it names; else None (every row is compared)."""
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or rec.get("model_key") != model_key or rec.get("versions") != versions:
        return None
    journal = rec.get("journal")
    return journal if isinstance(journal, list) and len(journal) == 2 else None


def record_synced(path: Path, journal: list | None, model_key: str, versions: dict[str, int]) -> None:
    """Write the record :func:`synced_position` reads (atomically); none when the warehouse has no change log."""
    if journal is None:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({"journal": journal, "model_key": model_key, "versions": versions}))
    os.replace(tmp, path)


def changed_papers(con, seen: list, lance_paper_of) -> set[str] | None:
    """The papers whose marts' rows may have changed since the change log's entry ``seen``: those whose row in
    ``papers`` or ``paper_authors`` was written, and those of written ``chunks`` and ``figures`` (their paper from the
    warehouse, or for a removed one ``lance_paper_of(table, keys)``, the LanceDB rows' own). None when the log
    cannot tell."""
    db = con.execute("SELECT current_database()").fetchall()[0][0]
    logged = catalog_changes.changes_since(con, {t: seen for t in SOURCES}, db)
    changed = {t: keys for t, keys in logged.items() if keys is not None}
    if len(changed) < len(SOURCES):
        return None
    papers = changed["papers"] | changed["paper_authors"]
    for table, key in (("chunks", "chunk_id"), ("figures", "figure_id")):
        keys = sorted(changed[table])
        if not keys:
            continue
        found = dict(con.execute(f"SELECT {key}, paper_id FROM {table} WHERE {key} = ANY(?)", [keys]).fetchall())
        papers.update(found.values())
        gone = [k for k in keys if k not in found]
        if gone:
            papers.update(lance_paper_of(table, gone))
    return papers


def stale(con, want: pa.Table, have: pa.Table | None, rows: int | None = None) -> Stale:
    """Compare a table's wanted ``(key, row_hash)`` rows with those it ``have``s (None: it cannot be synced row by
    row, see :func:`pipeline.steps.embed.table_hashes`); ``rows``: the rows the table holds, when ``want`` and
    ``have`` are those of some papers only."""
    if have is None:
        return Stale(None, [])
    key = want.column_names[0]
    con.register("_paperkb_want", want)
    con.register("_paperkb_have", have.select([key, "row_hash"]))
    try:
        write = con.sql(f"""SELECT w.{key} FROM _paperkb_want w
                            ANTI JOIN _paperkb_have h ON h.{key} = w.{key} AND h.row_hash = w.row_hash""").to_arrow_table()
        delete = [r[0] for r in con.sql(f"""SELECT h.{key} FROM _paperkb_have h
                                            ANTI JOIN _paperkb_want w ON w.{key} = h.{key}""").fetchall()]
        added = con.sql(f"SELECT count(*) FROM _paperkb_want w ANTI JOIN _paperkb_have h ON h.{key} = w.{key}").fetchall()[0][0]
    finally:
        con.unregister("_paperkb_want")
        con.unregister("_paperkb_have")
    keys = write.column(0).combine_chunks() if write.num_rows else pa.array([], pa.string())
    total = want.num_rows if rows is None else max(rows, want.num_rows)
    if len(keys) + len(delete) > WHOLE_SHARE * max(total, 1) and total > 0:
        return Stale(None, [])
    return Stale(keys, delete, int(added))


def _rows_sql(table: str, keys: bool) -> str:
    """The mart rows of LanceDB table ``table``, each with its source hash as :data:`ROW_HASH`, of the keys in
    ``_paperkb_keys`` only when ``keys``. A passage's or legend's hash is computed here as :func:`source_hashes` does
    (a join to those hashes made DuckDB hold every passage's text in its hash table: 1.3 GB at 1M passages); a
    paper's, which covers its passages, comes from ``_paperkb_want``. In no particular order: a sort would hold every
    row too."""
    mart, key = MARTS[table], KEYS[table]
    only = f"SEMI JOIN _paperkb_keys k ON k.k = m.{key}" if keys else ""
    if table == "papers":
        return f"SELECT m.*, w.row_hash AS {ROW_HASH} FROM {mart} m JOIN _paperkb_want w ON w.{key} = m.{key} {only}"
    return f"SELECT m.*, md5(to_json(m)) AS {ROW_HASH} FROM {mart} m {only}"


def read_batches(con, table: str, want: pa.Table, keys: pa.Array | None = None, rows: int | None = None
                 ) -> Iterator[pa.Table]:
    """The mart rows of LanceDB table ``table`` (all of them, or those of ``keys``), each with its source hash as
    :data:`ROW_HASH` (for ``papers`` from ``want``, :func:`source_hashes`; the others' computed alike), in batches of
    at most ``rows`` rows (:data:`BATCH_ROWS`, for ``papers`` :data:`PAPERS_PER_BATCH`) streamed from DuckDB on a
    cursor of its own, in no particular order; at least one batch (empty when there are no rows), so that the caller
    always has the columns."""
    import duckdb

    size = rows or (PAPERS_PER_BATCH if table == "papers" else BATCH_ROWS)
    cur = con.cursor()
    try:
        cur.register("_paperkb_want", want)
        if keys is not None:
            cur.register("_paperkb_keys", pa.table({"k": keys}))
        try:
            reader = cur.sql(_rows_sql(table, keys is not None)).to_arrow_reader(size)
        except duckdb.CatalogException as exc:
            raise _schema_error(exc) from None
        empty = True
        for batch in reader:
            if batch.num_rows:
                empty = False
                yield pa.Table.from_batches([batch])
        if empty:
            yield reader.schema.empty_table()
    finally:
        cur.close()


def sql_list(values: list[str]) -> str:
    """``'a', 'b'``: string literals for a LanceDB filter."""
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)
