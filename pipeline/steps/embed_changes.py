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
after an upgrade that changed what the hash covers, a re-chunking of everything).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from pipeline.errors import UserError

KEYS = {"chunks": "chunk_id", "papers": "paper_id", "figures": "figure_id"}
MARTS = {"chunks": "passages", "papers": "paper_meta", "figures": "figure_legends"}
ORDER = {"chunks": "m.paper_id, m.ordinal, m.chunk_id", "papers": "m.paper_id", "figures": "m.figure_id"}
WHOLE_SHARE = 0.5  # more of a table's rows than this to write: build it whole (the same rows written, one read)
ROW_HASH = "_row_hash"  # the column :func:`read_rows` adds: each row's source hash


@dataclass(frozen=True)
class Stale:
    """What a merge writes to one table: ``write`` the keys of rows to build and write (None: every row, the table
    built whole), ``delete`` the keys to remove (with ``write`` None, the sync removes every key it was not given)."""

    write: pa.Array | None
    delete: list[str]

    @property
    def whole(self) -> bool:
        return self.write is None


def _sql(con, sql: str) -> pa.Table:
    import duckdb

    try:
        return con.sql(sql).to_arrow_table()
    except duckdb.CatalogException as exc:  # a warehouse no write step of this version has opened yet
        raise UserError(f"the warehouse lacks a table or view this version reads ({str(exc).splitlines()[0]}): "
                        "run `paperkb harvest` or `paperkb import-collection` first, which brings its schema up to date"
                        ) from None


def source_hashes(con, tables: tuple[str, ...] = ("chunks", "papers", "figures")) -> dict[str, pa.Table]:
    """``{table: (key, row_hash)}`` of every row each LanceDB table of ``tables`` should hold, from the warehouse
    marts."""
    out: dict[str, pa.Table] = {}
    if "chunks" in tables or "papers" in tables:
        chunks = _sql(con, "SELECT chunk_id, paper_id, ordinal, md5(to_json(m)) AS row_hash FROM passages m")
        out["chunks"] = chunks.select(["chunk_id", "row_hash"])
    if "papers" in tables:
        con.register("_paperkb_chunk_hashes", chunks)
        try:
            out["papers"] = _sql(con, """
                SELECT m.paper_id, md5(to_json(m) || c.h) AS row_hash
                FROM paper_meta m
                JOIN (SELECT paper_id, string_agg(row_hash, '' ORDER BY ordinal, chunk_id) AS h
                      FROM _paperkb_chunk_hashes GROUP BY paper_id) c USING (paper_id)""")
        finally:
            con.unregister("_paperkb_chunk_hashes")
    if "figures" in tables:
        out["figures"] = _sql(con, "SELECT figure_id, md5(to_json(m)) AS row_hash FROM figure_legends m")
    return {t: out[t] for t in tables}


def stale(con, want: pa.Table, have: pa.Table | None) -> Stale:
    """Compare a table's wanted ``(key, row_hash)`` rows with those it ``have``s (None: it cannot be synced row by
    row, see :func:`pipeline.steps.embed.table_hashes`)."""
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
    finally:
        con.unregister("_paperkb_want")
        con.unregister("_paperkb_have")
    keys = write.column(0).combine_chunks() if write.num_rows else pa.array([], pa.string())
    if len(keys) + len(delete) > WHOLE_SHARE * max(want.num_rows, 1) and want.num_rows > 0:
        return Stale(None, [])
    return Stale(keys, delete)


def read_rows(con, table: str, want: pa.Table, keys: pa.Array | None = None) -> pa.Table:
    """The mart rows of LanceDB table ``table`` (all of them, or those of ``keys``), each with its source hash as
    :data:`ROW_HASH` (from ``want``, :func:`source_hashes`), in the table's order."""
    mart, key = MARTS[table], KEYS[table]
    con.register("_paperkb_want", want)
    if keys is not None:
        con.register("_paperkb_keys", pa.table({"k": keys}))
    try:
        only = "SEMI JOIN _paperkb_keys k ON k.k = m.{key}".format(key=key) if keys is not None else ""
        return _sql(con, f"""SELECT m.*, w.row_hash AS {ROW_HASH} FROM {mart} m
                             JOIN _paperkb_want w ON w.{key} = m.{key} {only} ORDER BY {ORDER[table]}""")
    finally:
        con.unregister("_paperkb_want")
        if keys is not None:
            con.unregister("_paperkb_keys")


def sql_list(values: list[str]) -> str:
    """``'a', 'b'``: string literals for a LanceDB filter."""
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)
