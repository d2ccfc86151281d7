"""The catalog of a snapshot: every published table written (:func:`write_table`, two at a time), the tables published
a second time in another column's order (:data:`REORDERED`), and ``catalog.duckdb``'s views."""

from __future__ import annotations

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
from pipeline.steps.catalog.changes import _write_changed
from pipeline.steps.catalog.files import FOLDER, _fingerprint_and_write, _link_previous, _previous_entries, _write_whole
from pipeline.steps.catalog.partitions import (MAX_PART_FACTOR, PARTS_PER_TABLE, PARTS_PER_TABLE_OF, _columns, _ident,
                                               columns_digest, partition_size, tail_piece)
from pipeline.warehouse import scalar

log = logging.getLogger(__name__)


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
