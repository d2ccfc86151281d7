"""Write a snapshot's catalog as Parquet partitions, linking those the previous snapshot already holds.

Layout (inside a snapshot folder, see :mod:`pipeline.snapshots`)::

    catalog.duckdb                      views only: ``CREATE VIEW t AS SELECT * FROM read_parquet('catalog/t/*.parquet')``
                                        for each table, then the warehouse's own views (over those)
    catalog/<table>/<fingerprint>.parquet   one file per partition of the table

Partitions are content-defined, so that a night's new rows touch few of them: rows are ordered by the
table's first column (its key: ``paper_id``, ``chunk_id``, ``citing_work_id``...), and a new partition
starts at every key whose hash is a multiple of the table's partition size (:func:`part_rows`: about a
sixty-fourth of the table's distinct keys, a power of two from 128 to 65,536, kept from the previous snapshot
until the table has doubled or halved, see :func:`partition_size`; the boundaries depend on the keys alone, so
inserting or deleting rows moves no boundary elsewhere), and a run of keys between two such boundaries is cut every
twice that many keys from its start (:data:`MAX_PART_FACTOR`: no partition far larger than the others; inserting a
key moves only its own run's cuts), the table's last run every quarter of that size (:data:`TAIL_SPLIT`: new increasing
keys land there, and a night rewrites its last piece). Each
partition is named by a fingerprint of its content (the table's column names and types, its row count,
and the sum and xor of DuckDB's 64-bit ``hash`` of each row: order-independent, computed in one grouped
scan). A partition whose file the previous snapshot holds under the same name is hard-linked from it; the
others are written in one ``COPY ... PARTITION_BY``. Keys that arrive in increasing
order (arXiv ids, new chunks of new papers, new citations) land in the last partitions. The tables every graph run
rewrites whole (:data:`WHOLE`: ``paper_metrics``, whose PageRank values all move, and ``powerlaw_fits``) are one
file each, named by the same fingerprint of the whole table.

Finding which partitions changed would mean a scan of the table. A table whose every writer logs the keys it
changed (:data:`pipeline.catalog_changes.JOURNALED`: every published table with a text key except ``paper_metrics``
and ``powerlaw_fits``, which each graph run writes whole) is published by its changes instead
(:func:`_write_changed`): only the key ranges of the previous snapshot's partitions that hold a changed key are read
(whole runs; the last run from its last piece on when the changes only added keys there, :func:`_appended_tail`) and
numbered again, the other partitions are linked unread, and the result is the same files as a full scan. The
table is scanned as above when the log cannot say (no previous snapshot, its position pruned from the log, a write of
most of the table, other columns, a row count the log does not explain) or ``paperkb publish --full`` asks.

DuckDB resolves the views' relative paths against its ``file_search_path``: readers open the catalog with
:func:`pipeline.snapshots.open_catalog`, which sets it to the snapshot folder (the folder may be renamed or
moved: no absolute path is written).
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import os
import shutil
from pathlib import Path

from pipeline import catalog_changes
from pipeline import snapshots as snap
from pipeline.catalog_changes import JOURNALED
from pipeline.errors import UserError
from pipeline.settings import SQL_DIR, Settings
from pipeline.warehouse import scalar

log = logging.getLogger(__name__)

FOLDER = "catalog"
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
# tables every graph run rewrites whole (it moves every PageRank value): one file each, named by the same fingerprint of
# the whole table; partitions would all change every night, and finding them costs a sort of the table
WHOLE = frozenset({"paper_metrics", "powerlaw_fits"})
# threads writing tables at once: the largest table's write keeps DuckDB's threads busy, the other tables' short
# queries (a few ms each, ~20 tables) fill the gaps beside it (more would only queue on a small machine's cores)
WRITERS = 2
# tables published a second time under another name, each partition's rows in the order of another column, for readers
# that look rows up by a column the table is not keyed by: which papers cite a work (`citations` by `cited_work_id`),
# how the corpus's reference lists print a work (`reference_links`, keyed by entry, by `cited_work_id`: every card of a
# work outside the corpus reads it).
# A lookup by a column the partitions are not cut by reads that column of every row (54 ms at 2M citations, 176 ms at
# 8M); in a copy whose partitions are the table's own (the same files by name, so a night writes only the partitions it
# wrote of the table) with each file sorted by that column in row groups of REORDERED_ROW_GROUP rows (DuckDB's
# smallest), each file's statistics leave about one row group to read (24 ms at 2M, 48 ms at 8M: BENCHMARKS.md).
# name -> (table, column)
REORDERED = {"cited_by": ("citations", "cited_work_id"),
             "reference_links_by_cited": ("reference_links", "cited_work_id")}
REORDERED_ROW_GROUP = 2048
RANKS_SQL = "marts/094_paper_ranks.sql"  # the view readers take citation counts, PageRank and weights from
# tables that describe runs of the pipeline rather than papers: not copied into a snapshot. s2_dataset_citations is
# the S2 Datasets' edge ledger (citation id -> edge), which only a later diff's delete files need; no reader opens it,
# and as one row per loaded edge (tens of millions at arXiv's size) a publish would scan it every night: 6 s at 10M
# rows unchanged (BENCHMARKS.md). The edges themselves are in `citations`.
OPERATIONAL_TABLES = {"run_log", "rejects", "watermarks", "harvest_checkpoints", "deferred_windows", "feed_deliveries",
                      "s2_dataset_citations"}


def published_tables(con, db: str = "wh") -> list[str]:
    """The warehouse tables a snapshot carries (not the operational ones, nor ``_*`` / ``stg_*``)."""
    names = [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main' ORDER BY table_name",
        [db]).fetchall()]
    return [t for t in names if t not in OPERATIONAL_TABLES and not t.startswith(("_", "stg_"))]


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


def _fingerprint_and_write(con, table: str, source: str, key: str, columns: str, out: Path, previous: Path | None,
                           sizing: dict, where: str = "TRUE", params: list | None = None,
                           folder: Path | None = None, tail: bool = True,
                           tail_from: tuple[str, int] | None = None) -> dict:
    """Number the keys of the rows ``where`` keeps (:func:`number_keys`; ``tail``: they reach the end of the table;
    ``tail_from``: its last run is read from a piece on), fingerprint their partitions and link or write them
    (:func:`_write_parts`)."""
    number_keys(con, source, key, sizing["part_rows"], where, params, tail, tail_from)
    try:
        rows = _keyed_rows(source, key, where)
        parts = partition_fingerprints(con, columns, f"(SELECT p.part, hash(s) AS h, p.k FROM {rows})", params)
        return _write_parts(con, table, source, columns, out, previous, sizing, parts,
                            (key, where, params or [], f"SELECT s.*, p.part AS _part FROM {rows}"), folder=folder)
    finally:
        con.execute(f"DROP TABLE IF EXISTS {KEYS}")


def _digest(columns: str, rows: int, total: str, xor: str) -> str:
    """The name of a partition: its columns, row count, and the sum and xor of its rows' hashes."""
    return hashlib.sha256(f"{columns}|{rows}|{total}|{xor}".encode()).hexdigest()[:32]


def _link_previous(previous: Path | None, table: str, name: str, folder: Path) -> bool:
    """Hard-link (else copy) ``previous``'s partition ``catalog/<table>/<name>`` (``<digest>.parquet``, or its
    pieces ``<digest>.<i>.parquet``) into ``folder``; False if it has none."""
    if previous is None:
        return False
    src = previous / FOLDER / table
    digest = name.removesuffix(".parquet")
    found = [src / name] if (src / name).is_file() else sorted(src.glob(f"{digest}.*.parquet"))
    for prev in found:
        try:
            os.link(prev, folder / prev.name)
        except OSError:  # another filesystem
            shutil.copy2(prev, folder / prev.name)
    return bool(found)


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


def write_table(con, table: str, out: Path, previous: Path | None, before: dict | None = None,
                changed: set[str] | None = None) -> dict:
    """Write ``wh.table`` under ``out/catalog/<table>/``: partitions the ``previous`` snapshot holds are
    hard-linked (copied across filesystems), the others written; ``before`` is that snapshot's manifest entry
    for the table (its partition size, and its partitions for a table published by its changes). ``changed``: the
    keys changed since (``pipeline.catalog_changes``), for such a table; None scans the whole table. Returns counts
    of rows, files linked, written, the partition size, and for such a table its partitions."""
    source = f"wh.main.{_ident(table)}"
    key, columns = _columns(con, source)
    if table in WHOLE:
        return _write_whole(con, table, source, key, columns, out, previous)
    parts = PARTS_PER_TABLE_OF.get(table, PARTS_PER_TABLE)
    size, sized_at = partition_size(con, source, key, before, parts)  # boundaries fall on keys
    sizing: dict = {"part_rows": size, "sized_at_rows": sized_at, "part_max": size * MAX_PART_FACTOR,
                    "tail_max": tail_piece(size)}
    if parts != PARTS_PER_TABLE:  # recorded, so that the next publish keeps this size only for as many parts
        sizing["parts_per_table"] = parts
    if changed is not None:
        done = _write_changed(con, table, source, key, columns, out, previous, before or {}, sizing, changed)
        if done is not None:
            return done
    done = _fingerprint_and_write(con, table, source, key, columns, out, previous, sizing)
    if table in JOURNALED:
        done["parts"] = done.pop("_parts")
        done["columns"] = columns_digest(columns)
    else:
        done.pop("_parts")
    return done


def _write_whole(con, table: str, source: str, key: str, columns: str, out: Path, previous: Path | None) -> dict:
    """Write ``table`` (one of :data:`WHOLE`) as one file named by its fingerprint, or link the ``previous``
    snapshot's file of that name (a publish with no graph run since)."""
    n, total, xor = con.execute(f"""
        SELECT count(*), CAST(coalesce(sum(CAST(hash(s) AS HUGEINT)), 0) AS VARCHAR),
               CAST(coalesce(bit_xor(hash(s)), 0) AS VARCHAR) FROM {source} s""").fetchall()[0]
    folder = out / FOLDER / table
    folder.mkdir(parents=True)
    name = f"{_digest(columns, int(n), total, xor)}.parquet"
    if _link_previous(previous, table, name, folder):
        return {"rows": int(n), "linked": 1, "written": 0}
    # in the table's own order: the graph step inserts paper_metrics in work id order (its vertices') and
    # powerlaw_fits a row per run, so the file is in key order without a sort (a third of the write's CPU at 200,000
    # works); the name does not depend on the order
    con.execute(f"COPY (SELECT * FROM {source}) TO '{snap.sql_quote(str(folder / name))}' (FORMAT parquet)")
    return {"rows": int(n), "linked": 0, "written": 1}


def columns_digest(columns: str) -> str:
    """A short digest of a table's ``name type, ...`` (a table published by its changes keeps its partitions only
    while its columns are the same)."""
    return hashlib.sha256(columns.encode()).hexdigest()[:16]


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


def _write_parts(con, table: str, source: str, columns: str, out: Path, previous: Path | None,
                 sizing: dict, parts: dict[int, tuple[str, int, object]], rows: tuple[str, str, list, str],
                 folder: Path | None = None) -> dict:
    """Link or write the partitions ``parts`` under ``out/catalog/<table>/``; ``rows``: (the key, the condition and
    its parameters keeping the rows of ``source`` they hold, and the query giving those rows each with its partition
    as ``_part``)."""
    if folder is None:
        folder = out / FOLDER / table
        folder.mkdir(parents=True)
    done = {"rows": sum(n for _, n, _ in parts.values()), "linked": 0, "written": 0, **sizing,
            "_parts": [[first, digest, n] for digest, n, first in parts.values()]}
    if not parts and not any(folder.iterdir()):  # an empty table: one empty file keeps its columns
        name = f"{_digest(columns, 0, '0', '0')}.parquet"
        if _link_previous(previous, table, name, folder):
            done["linked"] += 1
        else:
            con.execute(f"COPY (SELECT * FROM {source} LIMIT 0) TO '{snap.sql_quote(str(folder / name))}' (FORMAT parquet)")
            done["written"] += 1
        return done
    todo = []
    for part, (digest, _n, _first) in parts.items():
        if _link_previous(previous, table, f"{digest}.parquet", folder):
            done["linked"] += 1
        else:
            todo.append(part)
    order = sorted(parts)
    if len(todo) > RANGED_WRITES or any(parts[p][2] is None for p in order[1:]):  # (a piece of NULL keys: no range)
        done["written"] += _write_partitioned(con, table, out, folder, parts, todo, rows[3], rows[2])
    elif todo:
        _write_ranges(con, source, folder, parts, todo, *rows[:3])
        done["written"] += len(todo)
    return done


# partitions to write up to which each is one COPY of its key range (a night's: a few), rather than one COPY ...
# PARTITION_BY of them all (a full scan: a COPY per partition would scan the table once each). Measured on a night's
# `related` at 143,000 papers (10 partitions, 1.1M rows): 1.0 s of CPU in two threads instead of 1.5 s
RANGED_WRITES = 16


def _write_partitioned(con, table: str, out: Path, folder: Path, parts: dict[int, tuple[str, int, object]],
                       todo: list[int], numbered: str, params: list) -> int:
    """Write the partitions ``todo`` of ``parts`` in one ``COPY ... PARTITION_BY`` of ``numbered`` (the rows, each with
    its partition as ``_part``); returns the files written."""
    stage = out / FOLDER / f".{table}.staging"
    # the rows of the partitions to write, each with its number, in the table's order: a partition's keys are one
    # range (each file's statistics prune it), and a sort by key cost ~30% of the write
    con.execute(f"""
        COPY (
            SELECT * FROM ({numbered}) WHERE _part IN ({", ".join(str(p) for p in todo)})
        ) TO '{snap.sql_quote(str(stage))}' (FORMAT parquet, PARTITION_BY (_part), FILENAME_PATTERN 'f{{i}}')""",
                params)
    written = 0
    for part in todo:
        files = sorted((stage / f"_part={part}").glob("*.parquet"))
        if len(files) == 1:
            os.replace(files[0], folder / f"{parts[part][0]}.parquet")
        else:  # DuckDB closed and reopened the partition's file (many partitions open at once)
            for i, f in enumerate(files):
                os.replace(f, folder / f"{parts[part][0]}.{i}.parquet")
        written += len(files)
    shutil.rmtree(stage)
    return written


def _write_ranges(con, source: str, folder: Path, parts: dict[int, tuple[str, int, object]], todo: list[int],
                  key: str, where: str, params: list) -> None:
    """Write each of the partitions ``todo`` of ``parts`` with a COPY of the rows of ``source`` that ``where`` keeps
    whose key lies from its first key to the next partition's (keys are numbered in order: a partition is the keys of
    one range; the first one's holds the NULL keys too), two at a time."""
    from concurrent.futures import ThreadPoolExecutor

    order = sorted(parts)
    at = {part: i for i, part in enumerate(order)}
    k = _ident(key)

    def one(part: int) -> None:
        i = at[part]
        cond, args = [f"({where})"], list(params)
        if i > 0:
            cond.append(f"{k} >= ?")
            args.append(parts[part][2])
        if i + 1 < len(order):
            cond.append(f"({k} < ?{f' OR {k} IS NULL' if i == 0 else ''})")
            args.append(parts[order[i + 1]][2])
        dest = folder / f"{parts[part][0]}.parquet"
        cur = con.cursor()
        try:
            cur.execute(f"COPY (SELECT * FROM {source} WHERE {' AND '.join(cond)}) TO '{snap.sql_quote(str(dest))}' "
                        "(FORMAT parquet)", args)
        finally:
            cur.close()

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"catalog-{folder.name}") as pool:
        list(pool.map(one, todo))


def _previous_entries(previous: Path | None, *keys: str) -> list[dict]:
    """The ``previous`` snapshot's manifest entries ``keys`` (``catalog_files``, ``counts``; ``{}`` for one it lacks, or
    all when it cannot be read)."""
    manifest: dict = {}
    if previous is not None:
        try:
            manifest = snap.read_manifest(previous)
        except Exception:  # noqa: BLE001 - a damaged previous snapshot only means sizes chosen afresh, tables scanned
            pass
    entries = [manifest.get(k) for k in keys]
    return [e if isinstance(e, dict) else {} for e in entries]


def file_rows(out: Path, tables: list[str], previous: Path | None) -> dict[str, int]:
    """The rows of each of ``tables``' files under ``out/catalog/<table>/``: a file that is the same inode as the
    ``previous`` snapshot's file of that name (a partition linked from it, checked when that snapshot was published)
    counts the rows its manifest records for that partition; any other file's rows are read from its Parquet
    footer."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    recorded: dict[str, dict[str, int]] = {}
    for table, entry in _previous_entries(previous, "catalog_files")[0].items():
        parts = entry.get("parts") if isinstance(entry, dict) else None
        recorded[table] = {p[1]: int(p[2]) for p in parts or [] if isinstance(p, list) and len(p) == 3}
    rows = {}
    for table in tables:
        n = 0
        here = os.path.join(out, FOLDER, table)
        there = os.path.join(previous, FOLDER, table) if previous is not None else None
        with os.scandir(here) as files:
            for f in files:
                known = recorded.get(table, {}).get(f.name.removesuffix(".parquet"))
                if known is not None and there is not None and snap.same_inode(f.stat(), os.path.join(there, f.name)):
                    n += known
                    continue
                try:
                    n += pq.read_metadata(f.path).num_rows
                except (OSError, pa.ArrowException) as exc:
                    raise UserError(f"snapshot verification failed: catalog/{table}/{f.name} is not readable Parquet: "
                                    f"{exc}") from None
        rows[table] = n
    return rows


def part_starts(settings: Settings, table: str) -> list[str] | None:
    """The first keys of ``table``'s partitions in the CURRENT snapshot's catalog (None: no snapshot, or the table is
    not published by its changes there); partition 0's, the keys before the first boundary, is left out."""
    sid = snap.current_id(settings.snapshots_dir)
    if sid is None:
        return None
    parts = (_previous_entries(settings.snapshots_dir / sid, "catalog_files")[0].get(table) or {}).get("parts")
    if not isinstance(parts, list):
        return None
    return [p[0] for p in parts if isinstance(p, list) and p and isinstance(p[0], str)]


def write_reordered(con, name: str, table: str, column: str, out: Path, previous: Path | None, written: dict) -> dict:
    """``out/catalog/<name>/``: each partition file of ``table`` just written under ``out/catalog/<table>/`` again, its
    rows sorted by ``column`` (:data:`REORDERED`), under the same name: the ``previous`` snapshot's file of that name
    is hard-linked (the name is a fingerprint of the rows, whatever their order), the others are written from the
    table's new file, two at a time. ``written``: ``table``'s result from :func:`write_table` (its rows, and its
    partitions for a table published by its changes, which this one records too). Returns the same kind of result."""
    from concurrent.futures import ThreadPoolExecutor

    source, folder = out / FOLDER / table, out / FOLDER / name
    folder.mkdir(parents=True)
    files = sorted(f.name for f in source.iterdir() if f.name.endswith(".parquet"))
    todo = [f for f in files if not _link_previous(previous, name, f, folder)]

    def one(f: str) -> None:
        cur = con.cursor()
        try:
            cur.execute(f"COPY (SELECT * FROM read_parquet('{snap.sql_quote(str(source / f))}') ORDER BY {_ident(column)}) "
                        f"TO '{snap.sql_quote(str(folder / f))}' (FORMAT parquet, ROW_GROUP_SIZE {REORDERED_ROW_GROUP})")
        finally:
            cur.close()

    with ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix=f"catalog-{name}") as pool:
        list(pool.map(one, todo))
    log.info("publish: %s (%s by %s): %d of %d file(s) written, the others linked", name, table, column, len(todo),
             len(files))
    done = {"rows": written["rows"], "linked": len(files) - len(todo), "written": len(todo), "order": column}
    if "parts" in written:
        done["parts"] = written["parts"]
    return done


def view_sql(table: str) -> str:
    path = f"{FOLDER}/{table}/*.parquet".replace("'", "''")
    return f"CREATE VIEW main.{_ident(table)} AS SELECT * FROM read_parquet('{path}')"


def _write_tables(con, tables: list[str], out: Path, previous: Path | None, full: bool, before: dict,
                  rows_before: dict) -> dict[str, dict]:
    """:func:`write_table` for each of ``tables`` (attached as ``wh`` on ``con``), in :data:`WRITERS` threads with a
    cursor each (DuckDB runs a query without the GIL), the largest first (by the ``previous`` snapshot's counts), so
    the small tables' short queries run beside the large one's write. Returns each table's result."""
    from concurrent.futures import ThreadPoolExecutor

    journal = catalog_changes.position(con, "wh")
    logged = [t for t in tables if t in JOURNALED] if not full else []
    changes = catalog_changes.changes_since(con, {t: (before.get(t) or {}).get("journal") for t in logged}, "wh")

    def one(table: str) -> dict:
        cur = con.cursor()
        try:
            done = write_table(cur, table, out, previous, before.get(table), changes.get(table))
        finally:
            cur.close()
        if table in JOURNALED:
            done["journal"] = journal
        return done

    order = sorted(tables, key=lambda t: -int(rows_before.get(t) or 0))
    with ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="catalog") as pool:
        results = dict(zip(order, pool.map(one, order)))
    return {t: results[t] for t in tables}


def require_warehouse(settings: Settings) -> None:
    """A one-line error when there is no warehouse to publish."""
    if not settings.db_path.exists():
        raise UserError(f"no warehouse at {settings.db_path}: nothing to publish")


def build_catalog(settings: Settings, out: Path, previous: Path | None = None, *, full: bool = False
                  ) -> tuple[dict[str, int], dict[str, str], dict[str, dict[str, int]], dict]:
    """Write the snapshot folder ``out``'s catalog (``catalog.duckdb`` + ``catalog/``) from the warehouse,
    linking partitions of the ``previous`` snapshot folder, and its ``catalog.duckdb`` too when the views are the
    same (:func:`views_key`, the ``catalog_views`` of its manifest). ``full``: scan every table, also those
    published by their changes, and write ``catalog.duckdb`` anew. Returns (counts, watermarks, per-table files
    linked / written, the manifest's ``catalog_views``: the views' key and whether the file was linked)."""
    import duckdb

    require_warehouse(settings)
    # the tables are written from a connection without a file: catalog.duckdb holds views alone, made (or linked)
    # once the tables are written; DuckDB spills to temp_directory, inside the folder being published
    spill = out / f".{snap.CATALOG}.tmp"
    con = duckdb.connect(config={"temp_directory": str(spill)})
    try:
        con.execute(f"ATTACH '{snap.sql_quote(str(settings.db_path))}' AS wh (READ_ONLY)")
        counts: dict[str, int] = {}
        files: dict[str, dict[str, int]] = {}
        tables = published_tables(con)
        before, rows_before, views_before = _previous_entries(previous, "catalog_files", "counts", "catalog_views")
        for t, done in _write_tables(con, tables, out, previous, full, before, rows_before).items():
            counts[t] = done.pop("rows")
            files[t] = done
        for name, (table, column) in REORDERED.items():
            if table in files:
                done = write_reordered(con, name, table, column, out, previous, {"rows": counts[table], **files[table]})
                counts[name] = done.pop("rows")
                files[name] = done
                tables.append(name)
        watermarks = {}
        if scalar(con, "SELECT count(*) FROM duckdb_tables() WHERE database_name = 'wh' AND table_name = 'watermarks'"):
            watermarks = dict(con.execute("SELECT source, value FROM wh.main.watermarks ORDER BY source").fetchall())
        views = con.execute(
            "SELECT view_name, sql FROM duckdb_views() WHERE database_name = 'wh' AND schema_name = 'main' "
            "AND NOT internal ORDER BY view_name").fetchall()
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)
    made = {"key": views_key(tables, views), "linked": False}
    if not full and previous is not None and views_before.get("key") == made["key"]:
        made["linked"] = _link_previous_catalog(previous / snap.CATALOG, out / snap.CATALOG)
    if not made["linked"]:
        _write_views(out, tables, views, counts)
    linked = sum(f["linked"] for f in files.values())
    written = sum(f["written"] for f in files.values())
    log.info("publish: catalog of %d table(s): %d partition file(s) hard-linked, %d written; its views %s",
             len(files), linked, written, "linked (unchanged)" if made["linked"] else "written")
    return counts, watermarks, files, made


SCHEMA_OF_VIEWS = 1  # raise when _write_views makes another file from the same definitions


def views_key(tables: list[str], views: list[tuple[str, str]]) -> str:
    """What ``catalog.duckdb`` is made from: each table's view (:func:`view_sql`), the warehouse's views (name and
    SQL) and the DuckDB release that writes the file, as a digest. The same key, the same file: a publish links the
    previous snapshot's when the keys match."""
    import duckdb

    made = [view_sql(t) for t in tables] + [f"{name}\n{sql}" for name, sql in views]
    return hashlib.sha256(repr((SCHEMA_OF_VIEWS, duckdb.__version__, made)).encode()).hexdigest()


def _write_views(out: Path, tables: list[str], views: list[tuple[str, str]], counts: dict[str, int]) -> None:
    """``out/catalog.duckdb``: a view over each table's partitions, then the warehouse's ``views`` (name, SQL)."""
    import duckdb

    con = duckdb.connect(str(out / snap.CATALOG))
    try:
        con.execute(f"SET file_search_path = '{snap.sql_quote(str(out.resolve()))}'")
        for t in tables:
            con.execute(view_sql(t))
        for name, sql in views:  # views keep working in the catalog: they name tables without a schema
            try:
                con.execute(sql)
            except duckdb.Error as exc:
                log.warning("view %s not copied into the snapshot: %s", name, str(exc).splitlines()[0])
        if "paper_ranks" not in {name for name, _ in views} and "papers" in counts and "paper_metrics" in counts:
            # a warehouse no step of this version has opened yet: readers take the ranks from this view
            con.execute((SQL_DIR / RANKS_SQL).read_text(encoding="utf-8"))
        # views are not counted: a count runs the view's query over the whole catalog (at 100,000 papers, 8 s for
        # passages, strongest_cocitation_pairs and related_works), every night, for a number nobody reads
        con.execute("CHECKPOINT")
    finally:
        con.close()


def _link_previous_catalog(src: Path, dest: Path) -> bool:
    """Hard-link the previous snapshot's ``catalog.duckdb`` as ``dest`` (False: it is missing, or another filesystem)."""
    try:
        os.link(src, dest)
    except OSError:
        return False
    return True
