"""A table's partition files: those the previous snapshot holds hard-linked from it, the others written (one ``COPY ...
PARTITION_BY``, or a ``COPY`` per key range for a few), a table the graph rewrites whole as one file, and the rows and
partition starts the previous snapshot recorded."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pipeline import snapshots as snap
from pipeline.errors import UserError
from pipeline.settings import Settings
from pipeline.steps.catalog.partitions import (KEYS, _digest, _ident, _keyed_rows, number_keys,
                                               partition_fingerprints)


FOLDER = "catalog"


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
