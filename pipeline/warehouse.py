"""Parquet + DuckDB: schema from ``sql/``, idempotent upserts, run log, rejects, watermarks.

DuckDB allows one writing process. Steps that fan out (Airflow mapped tasks) write Parquet under
``staging/`` and a single merge step upserts it here.
"""

from __future__ import annotations

import json
import logging
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import catalog_changes
from pipeline.settings import SQL_DIR, Settings

log = logging.getLogger(__name__)


def scalar(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> Any:
    """The first value of the one row ``sql`` answers (a count, a setting, a DELETE's row count)."""
    row = con.execute(sql, params or []).fetchone()
    if row is None:
        raise RuntimeError(f"expected one row from: {sql[:120]}")
    return row[0]


@dataclass
class UpsertStats:
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0

    @property
    def written(self) -> int:
        return self.inserted + self.updated

    def __add__(self, other: "UpsertStats") -> "UpsertStats":
        return UpsertStats(self.inserted + other.inserted, self.updated + other.updated, self.unchanged + other.unchanged)


@dataclass
class RunLog:
    run_id: str
    step: str
    counts: dict[str, int] = field(default_factory=dict)
    message: str = ""

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + int(n)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Warehouse:
    """One DuckDB database file plus the SQL that defines it."""

    def __init__(self, settings: Settings, *, read_only: bool = False):
        self.settings = settings
        self.path = settings.db_path
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.con = duckdb.connect(str(self.path), read_only=read_only)
        self._in_tx = False

    # -- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "Warehouse":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def init(self) -> "Warehouse":
        """Create every core table (sql/core, in file-name order) and mart (sql/marts: views, macros). Idempotent."""
        for folder in ("core", "marts"):
            for f in sorted((SQL_DIR / folder).glob("*.sql")):
                self.con.execute(f.read_text(encoding="utf-8"))
        return self

    def sql_file(self, relpath: str, params: dict[str, Any] | list[Any] | None = None):
        """Run a file under sql/ (e.g. ``core/merge/s2_update_papers.sql``) with bound parameters."""
        text = (SQL_DIR / relpath).read_text(encoding="utf-8")
        return self.con.execute(text, params) if params is not None else self.con.execute(text)

    def sql_file_returning(self, table: str, relpath: str, params: dict[str, Any] | list[Any] | None = None) -> int:
        """Run a file under sql/ whose (last) statement writes ``table`` and ends in ``RETURNING <its key>``: log the
        keys it returned (``pipeline.catalog_changes``) and return how many rows it wrote."""
        with self.transaction():
            rows = self.sql_file(relpath, params).fetchall()
            catalog_changes.record(self.con, table, (r[0] for r in rows))
        return len(rows)

    @contextmanager
    def transaction(self) -> Iterator["Warehouse"]:
        if self._in_tx:  # nested: the outer transaction decides
            yield self
            return
        self.con.execute("BEGIN TRANSACTION")
        self._in_tx = True
        try:
            yield self
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        else:
            self.con.execute("COMMIT")
        finally:
            self._in_tx = False

    # -- upsert ----------------------------------------------------------------------------------
    def upsert(self, table: str, data: pa.Table | str | Path, keys: Iterable[str]) -> UpsertStats:
        """Merge ``data`` into ``table`` on ``keys``.

        New keys are inserted; existing keys whose values differ are updated (only the columns
        present in ``data``); identical rows are left alone, so a rerun over the same input
        reports 0 inserted and 0 updated. Within ``data`` the last row per key wins.
        """
        keys = list(keys)
        if isinstance(data, (str, Path)):
            data = pq.read_table(data)
        if data.num_rows == 0:
            return UpsertStats()
        cols = [c for c in data.column_names]
        missing = [k for k in keys if k not in cols]
        if missing:
            raise ValueError(f"upsert into {table}: key columns {missing} not in data")
        data = data.append_column("__ord", pa.array(range(data.num_rows), pa.int64()))
        name = f"_incoming_{uuid.uuid4().hex[:8]}"
        self.con.register(name, data)
        t = _q(table)
        key_join = " AND ".join(f"t.{_q(k)} = i.{_q(k)}" for k in keys)
        value_cols = [c for c in cols if c not in keys]
        col_list = ", ".join(_q(c) for c in cols)
        part = ", ".join(_q(k) for k in keys)
        # Temp tables hold row numbers only (never the rows): inside a caller's long transaction
        # DuckDB keeps dropped temp data until COMMIT, so copying rows here would grow memory
        # with every batch. The incoming rows are read in place from the registered Arrow table.
        win = f"(SELECT * FROM {name} WHERE __ord IN (SELECT __ord FROM _win))"
        try:
            with self.transaction():
                self.con.execute(
                    f"CREATE OR REPLACE TEMP TABLE _win AS SELECT __ord FROM {name} "
                    f"QUALIFY row_number() OVER (PARTITION BY {part} ORDER BY __ord DESC) = 1"
                ).fetchall()
                total = self.con.execute("SELECT count(*) FROM _win").fetchall()[0][0]
                new = self.con.execute(
                    f"SELECT count(*) FROM {win} i WHERE NOT EXISTS (SELECT 1 FROM {t} t WHERE {key_join})"
                ).fetchall()[0][0]
                if value_cols and new < total:  # (all new: nothing to compare)
                    differs = " OR ".join(f"t.{_q(c)} IS DISTINCT FROM i.{_q(c)}" for c in value_cols)
                    self.con.execute(
                        f"CREATE OR REPLACE TEMP TABLE _changed AS SELECT i.__ord FROM {win} i JOIN {t} t ON {key_join} WHERE {differs}"
                    ).fetchall()
                    changed = self.con.execute("SELECT count(*) FROM _changed").fetchall()[0][0]
                    if changed:
                        sets = ", ".join(f"{_q(c)} = i.{_q(c)}" for c in value_cols)
                        self.con.execute(
                            f"UPDATE {t} AS t SET {sets} FROM (SELECT * FROM {name} WHERE __ord IN (SELECT __ord FROM _changed)) i "
                            f"WHERE {key_join}"
                        ).fetchall()
                else:
                    changed = 0
                if (new or changed) and table in catalog_changes.JOURNALED:
                    self._record_upsert(table, name, win, key_join, cols, changed)
                if new:
                    self.con.execute(
                        f"INSERT INTO {t} ({col_list}) SELECT {col_list} FROM {win} i "
                        f"WHERE NOT EXISTS (SELECT 1 FROM {t} t WHERE {key_join})"
                    ).fetchall()  # consume the result: DuckDB 2 refuses unregister() while one is pending
        finally:
            self.con.unregister(name)
            self.con.execute("DROP TABLE IF EXISTS _win")
            self.con.execute("DROP TABLE IF EXISTS _changed")
        return UpsertStats(inserted=new, updated=changed, unchanged=total - new - changed)

    def _record_upsert(self, table: str, name: str, win: str, key_join: str, cols: list[str], changed: int) -> None:
        """Log the keys an upsert is about to insert or update (``pipeline.catalog_changes``): before the insert,
        while "new" still means "not in the table"."""
        key = catalog_changes.first_column(self.con, table)
        if key.strip('"') not in cols:  # the rows' keys are not in the data: every row may have changed
            catalog_changes.record(self.con, table, None)
            return
        rows = self.con.execute(
            f"SELECT i.{key} FROM {win} i WHERE NOT EXISTS (SELECT 1 FROM {_q(table)} t WHERE {key_join})"
            + (f" UNION SELECT {key} FROM {name} WHERE __ord IN (SELECT __ord FROM _changed)" if changed else "")
        ).fetchall()
        catalog_changes.record(self.con, table, (r[0] for r in rows))

    def delete_where_in(self, table: str, column: str, values: list[Any]) -> int:
        """Delete rows whose ``column`` is in ``values`` (e.g. replace a paper's chunks)."""
        if not values:
            return 0
        name = f"_del_{uuid.uuid4().hex[:8]}"
        self.con.register(name, pa.table({"v": values}))
        try:
            with self.transaction():
                key = catalog_changes.first_column(self.con, table) if table in catalog_changes.JOURNALED else "NULL"
                return catalog_changes.returning(
                    self.con, table, f"DELETE FROM {_q(table)} WHERE {_q(column)} IN (SELECT v FROM {name}) RETURNING {key}")
        finally:
            self.con.unregister(name)

    # -- run log, rejects, watermarks -------------------------------------------------------------
    @contextmanager
    def run(self, step: str, *, interval: tuple[str | None, str | None] = (None, None)) -> Iterator[RunLog]:
        """Record a step run: status ok/failed, counts, message. The row is written even on failure."""
        # run ids sort by time, to the microsecond (the related lists' sweep takes the oldest list by its run id: two
        # runs in one second, ordered by their random suffix, swapped the sweep's order); an older id without the
        # microseconds sorts before any new id of its second
        run = RunLog(run_id=f"{step}-{datetime.now(timezone.utc):%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:6]}", step=step)
        started = datetime.now(timezone.utc)
        status, message = "ok", ""
        try:
            yield run
        except BaseException as exc:  # noqa: BLE001 - recorded, then re-raised
            status, message = "failed", f"{type(exc).__name__}: {exc}"[:2000]
            raise
        finally:
            self.con.execute(
                "INSERT INTO run_log (run_id, step, started_at, finished_at, status, counts, message, interval_start, interval_end) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [run.run_id, step, started, datetime.now(timezone.utc), status, json.dumps(run.counts),
                 run.message or message, interval[0], interval[1]],
            )

    def add_rejects(self, step: str, rows: Iterable[dict[str, Any]], run_id: str | None = None) -> int:
        """Record records that could not be used: raw_path, record_key, reason, detail."""
        now = datetime.now(timezone.utc)
        n = 0
        for r in rows:
            self.con.execute(
                "INSERT INTO rejects (reject_id, run_id, step, raw_path, record_key, reason, detail, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [uuid.uuid4().hex, run_id, step, r.get("raw_path"), r.get("record_key"), r.get("reason", "unknown"),
                 (r.get("detail") or "")[:4000], now],
            )
            n += 1
        return n

    def get_watermark(self, source: str) -> str | None:
        row = self.con.execute("SELECT value FROM watermarks WHERE source = ?", [source]).fetchone()
        return row[0] if row else None

    def set_watermark(self, source: str, value: str, run_id: str | None = None) -> None:
        self.con.execute(
            "INSERT INTO watermarks (source, value, updated_at, run_id) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (source) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at, run_id = excluded.run_id",
            [source, value, datetime.now(timezone.utc), run_id],
        )

    def count(self, table: str) -> int:
        return scalar(self.con, f"SELECT count(*) FROM {_q(table)}")


def write_staging(settings: Settings, name: str, table: pa.Table, part: str) -> Path:
    """Write one staging Parquet file ``staging/<name>/<part>.parquet`` atomically."""
    out = settings.staging_dir / name / f"{part}.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    pq.write_table(table, tmp)
    tmp.replace(out)
    return out
