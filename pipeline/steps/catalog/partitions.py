"""How a table is cut into partitions and how a partition is named: the partition size (a power of two, kept until
the table doubles or halves), the keys numbered into runs between hash boundaries and pieces of runs, and each
partition's fingerprint (columns, row count, sum and xor of its rows' hashes)."""

from __future__ import annotations

import hashlib

from pipeline import snapshots as snap
from pipeline.warehouse import scalar


# About keys / PARTS_PER_TABLE distinct keys a partition, rounded up to a power of two between MIN_PART_ROWS and
# MAX_PART_ROWS (the boundary test is a modulo). It changes only when a table doubles (or halves): that night the
# table's partitions are all written anew, once.
PARTS_PER_TABLE = 64  # a night rewrites the last partition (new keys land there): ~1.5% of the table, not ~6%
# tables a night appends a large share of: ``related_incoming`` holds the entries of the last few graph runs and each
# night adds one run's (a third of it at 100,000 papers), at the end of its key order (run id first). A sixty-fourth
# of it a partition made a night write 10-27 files of 1,600-4,000 rows (27 files: 0.17 s of CPU, 27 objects to
# upload); an eighth makes it 2-3 (0.02-0.04 s), its first one also holding the end of the run before (BENCHMARKS.md)
PARTS_PER_TABLE_OF = {"related_incoming": 8}
MIN_PART_ROWS = 128
MAX_PART_ROWS = 65_536
# a run of keys between two boundaries is cut every MAX_PART_FACTOR x the partition size: the distance between hash
# boundaries is geometric, so without a cap one partition in seven holds over twice the mean (at 100,000 papers a
# `related` partition of 9,853 keys, 490,000 rows, beside a mean of 2,048), and a night that touches it rewrites it all
MAX_PART_FACTOR = 2
# the last run of a table (no boundary after it: where new keys arrive when they increase, arXiv ids, new chunks, new
# lists) is cut every part_rows / TAIL_SPLIT keys instead, at least TAIL_MIN_PIECE (never more than elsewhere): a night
# rewrites its last piece, and a piece of 2 x part_rows keys made a night rewrite ~1/64 of each table whatever it added
# (at 300,000 papers, 660,000 `related` rows for 91 new papers' 4,550). When a boundary arrives among new keys, the run
# it closes is cut as the others again: once per part_rows new keys on average, so that rewrite grows with the change too
TAIL_SPLIT = 4
TAIL_MIN_PIECE = 512


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def part_rows(keys: int, parts: int = PARTS_PER_TABLE) -> int:
    """The partition size, in keys, of a table of ``keys`` distinct keys cut in about ``parts`` partitions (a power of
    two; see the module doc)."""
    size = MIN_PART_ROWS
    while size < MAX_PART_ROWS and size * parts < keys:
        size *= 2
    return size


KEYS = "_catalog_keys"  # temp table: (key, partition) of the rows of the table being written
SUBS = 2 ** 32  # a partition's number: its natural run's * SUBS + its piece of that run


def _natural(k: str, size: int) -> str:
    """SQL: whether the key ``k`` is a natural boundary (its hash a multiple of ``size``; never a NULL key)."""
    return f"({k} IS NOT NULL AND hash({k}) % {size} = 0)"


def tail_piece(size: int) -> int:
    """The keys of a piece of a table's last run (:data:`TAIL_SPLIT`), for the partition size ``size``."""
    return min(size * MAX_PART_FACTOR, max(size // TAIL_SPLIT, TAIL_MIN_PIECE))


def number_keys(con, source: str, key: str, size: int, where: str = "TRUE", params: list | None = None,
                tail: bool = True, tail_from: tuple[str, int] | None = None) -> None:
    """Fill the temp table :data:`KEYS` with each distinct ``key`` of the rows of ``source`` that ``where`` keeps and
    its partition: a natural run starts at every boundary key (the keys before the first one are run 0), and a run
    is cut every :data:`MAX_PART_FACTOR` x ``size`` keys from its start, the table's last run every
    :func:`tail_piece` keys (``tail``: the rows ``where`` keeps reach the end of the table, so their last run is the
    table's). Numbered over the keys alone (one sort of the distinct keys); the fingerprints and the write join the
    rows to it. ``where`` must keep whole runs (see :func:`changed_ranges`), so that each is numbered as a scan of
    the whole table numbers it, except the table's last run, which it may keep from a piece on: ``tail_from`` (that
    piece's first key, and how many keys of its run come before it, :func:`_appended_tail`)."""
    piece = f"CASE WHEN nat = max(nat) OVER () THEN {tail_piece(size)} ELSE {size * MAX_PART_FACTOR} END" if tail \
        else str(size * MAX_PART_FACTOR)
    # the last run read from a piece on: its keys are a run of their own here, numbered on from the keys before them
    late, skipped = ("FALSE", 0) if tail_from is None else (f"k >= '{snap.sql_quote(tail_from[0])}'", tail_from[1])
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE {KEYS} AS
        SELECT k, nat * {SUBS} + (row_number() OVER (PARTITION BY nat ORDER BY k NULLS FIRST) - 1
                                  + CASE WHEN {late} THEN {skipped} ELSE 0 END) // ({piece}) AS part
        FROM (SELECT k, coalesce(sum(CASE WHEN {_natural("k", size)} THEN 1 ELSE 0 END)
                                 OVER (ORDER BY k NULLS FIRST), 0) + CASE WHEN {late} THEN 1 ELSE 0 END AS nat
              FROM (SELECT DISTINCT {_ident(key)} AS k FROM {source} WHERE ({where})))""", params or [])


def _keyed_rows(source: str, key: str, where: str) -> str:
    """SQL ``FROM``: the rows of ``source`` that ``where`` keeps (as ``s``), each with its key's partition (``p.part``)."""
    return f"{source} s JOIN {KEYS} p ON s.{_ident(key)} IS NOT DISTINCT FROM p.k WHERE ({where})"


def partition_fingerprints(con, columns: str, numbered: str, params: list | None = None
                           ) -> dict[int, tuple[str, int, object]]:
    """``{partition: (fingerprint, rows, first key)}`` of the rows ``numbered`` gives as (``part``, ``h``: row hash,
    ``k``: key) (the first key of partition 0, the keys before the first boundary, is None)."""
    rows = con.execute(f"""
        SELECT part, count(*), CAST(sum(CAST(h AS HUGEINT)) AS VARCHAR), CAST(bit_xor(h) AS VARCHAR), min(k)
        FROM {numbered} GROUP BY ALL ORDER BY 1""", params or []).fetchall()
    return {int(part): (_digest(columns, int(n), total, xor), int(n), None if part == 0 else first)
            for part, n, total, xor, first in rows}


def _digest(columns: str, rows: int, total: str, xor: str) -> str:
    """The name of a partition: its columns, row count, and the sum and xor of its rows' hashes."""
    return hashlib.sha256(f"{columns}|{rows}|{total}|{xor}".encode()).hexdigest()[:32]


def _columns(con, source: str) -> tuple[str, str]:
    """(first column, ``name type, ...`` of every column) of ``source``."""
    cols = con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
    return cols[0][0], ", ".join(f"{c[0]} {c[1]}" for c in cols)


def partition_size(con, source: str, key: str, before: dict | None, parts: int = PARTS_PER_TABLE) -> tuple[int, int]:
    """(partition size, rows when it was chosen) for ``source``: the ``before`` snapshot's size (its
    ``catalog_files`` entry) while the table holds between half and twice the rows it held when that size was
    chosen, for as many ``parts``, else :func:`part_rows` of its distinct keys now (a full count, so only when the
    table has doubled or halved, or ``parts`` changed)."""
    rows = scalar(con, f"SELECT count(*) FROM {source}")
    before = before or {}
    size, sized_at = before.get("part_rows"), before.get("sized_at_rows")
    if isinstance(size, int) and isinstance(sized_at, int) and sized_at // 2 < rows < 2 * max(sized_at, 1) \
            and before.get("parts_per_table", PARTS_PER_TABLE) == parts:
        return size, sized_at
    return part_rows(scalar(con, f"SELECT count(DISTINCT {_ident(key)}) FROM {source}"), parts), rows


def columns_digest(columns: str) -> str:
    """A short digest of a table's ``name type, ...`` (a table published by its changes keeps its partitions only
    while its columns are the same)."""
    return hashlib.sha256(columns.encode()).hexdigest()[:16]
