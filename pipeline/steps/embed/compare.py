"""What the LanceDB tables lack: each row's source hash compared with the table's, for the papers the change log names
since the last sync (:mod:`pipeline.steps.embed_changes`) or for every row, and the sync's position recorded."""

from __future__ import annotations

import logging

import pyarrow as pa

from pipeline.settings import Settings
from pipeline.steps.embed.rows import table_model, table_names
from pipeline.steps.embed_changes import (KEYS, SYNCED, Stale, changed_papers, marts_digest, record_synced, source_hashes,
                                          sql_list, stale, synced_position)

log = logging.getLogger(__name__)


def db_of(settings: Settings):
    """The working LanceDB (``warehouse/lancedb``), made if missing."""
    import lancedb

    settings.lancedb_dir.mkdir(parents=True, exist_ok=True)
    return lancedb.connect(str(settings.lancedb_dir))


def table_hashes(db, name: str, facts: dict, scope: set[str] | None = None) -> pa.Table | None:
    """``(key, row_hash)`` of every row of LanceDB table ``name`` (of the papers ``scope`` only, when given), or None
    when it must be built whole: missing, or embedded with another model."""
    t = _opened(db, name)
    if t is None:
        return None
    m = table_model(t)
    if m["key"] != facts["key"] or m["dim"] != facts["dim"] or "row_hash" not in t.schema.names:
        return None
    return _read_lance(t, [KEYS[name], "row_hash"], scope)


PAPERS_PER_FILTER = 2_000  # paper ids per LanceDB filter


def _read_lance(t, cols: list[str], papers: set[str] | list[str] | None, column: str = "paper_id") -> pa.Table:
    """Columns ``cols`` of LanceDB table ``t``: every row, or those whose ``column`` is one of ``papers``."""
    if papers is None:
        return t.search().select(cols).limit(None).to_arrow()
    ids = sorted(papers)
    return pa.concat_tables(
        [t.search().where(f"{column} IN ({sql_list(ids[i:i + PAPERS_PER_FILTER])})").select(cols).limit(None).to_arrow()
         for i in range(0, len(ids), PAPERS_PER_FILTER)]
        or [pa.schema([t.schema.field(c) for c in cols]).empty_table()])


def _opened(db, name: str):
    """LanceDB table ``name``, or None when there is none or it does not open (a create killed half-way can leave a
    listed table without a version: the sync's :func:`repair_table` removes it; a reader before it, such as the
    encoding step's compare, takes the table as missing)."""
    if name not in table_names(db):
        return None
    try:
        return db.open_table(name)
    except Exception as exc:  # noqa: BLE001 - as repair_table: any failure to open means rebuild it
        log.info("LanceDB table %s does not open (%s): taken as missing", name, type(exc).__name__)
        return None


def lance_versions(db) -> dict[str, int]:
    """The current version of each LanceDB table there is (one that does not open is not)."""
    tables = {name: _opened(db, name) for name in KEYS}
    return {name: int(t.version) for name, t in tables.items() if t is not None}


def _scope(settings: Settings, con, db, model_key: str) -> set[str] | None:
    """The papers whose rows the embed compares: those the change log says were written since the last sync, or None
    (all of them) when it cannot say (:mod:`pipeline.steps.embed_changes`)."""
    seen = synced_position(settings.warehouse / SYNCED, f"{model_key}|{marts_digest(con)}", lance_versions(db))
    if seen is None:
        return None

    def paper_of(table: str, keys: list[str]) -> list[str]:  # removed chunks' and figures' papers, as LanceDB has them
        if table not in table_names(db):
            return []
        key = KEYS[table]
        return _read_lance(db.open_table(table), [key, "paper_id"], keys, column=key).column("paper_id").to_pylist()

    return changed_papers(con, seen, paper_of)


def _compare(con, db, facts: dict, scope: set[str] | None, tables: tuple[str, ...] = tuple(KEYS)
             ) -> tuple[dict[str, pa.Table], dict[str, Stale], dict[str, int]]:
    """For each of ``tables``: the wanted ``(key, row_hash)`` rows (of the papers ``scope``, or all), what to write
    and delete, and the rows the table holds after that."""
    want = source_hashes(con, tables, scope)
    plans, rows = {}, {}
    for name in tables:
        have = table_hashes(db, name, facts, scope)
        held = db.open_table(name).count_rows() if scope is not None and have is not None else None
        plans[name] = stale(con, want[name], have, held)
        rows[name] = want[name].num_rows if held is None else held + plans[name].added - len(plans[name].delete)
    return want, plans, rows


def compare_tables(settings: Settings, con, db, facts: dict, tables: tuple[str, ...] = tuple(KEYS), full: bool = False
                   ) -> tuple[dict[str, pa.Table], dict[str, Stale], dict[str, int], int]:
    """:func:`_compare` of the papers written since the last sync, or of every row when the change log cannot say
    which, when so many changed that a table is built whole, or when ``full`` asks (a write to the warehouse that
    escaped the change log: ``paperkb embed --full``). Also returns how many rows were hashed."""
    scope = None if full else _scope(settings, con, db, facts["key"])
    want, plans, rows = _compare(con, db, facts, scope, tables)
    if scope is not None and (any(p.whole for p in plans.values()) or rows != warehouse_rows(con, tables)):
        # most of a table changed, or the tables would not hold the warehouse's rows (a write that escaped the change
        # log added or removed some): hash every row
        want, plans, rows = _compare(con, db, facts, None, tables)
    return want, plans, rows, sum(w.num_rows for w in want.values())


def warehouse_rows(con, tables: tuple[str, ...] = tuple(KEYS)) -> dict[str, int]:
    """The rows each LanceDB table of ``tables`` should hold, counted in the warehouse marts."""
    sql = {"chunks": "SELECT count(*) FROM passages",
           "papers": "SELECT count(*) FROM paper_meta WHERE paper_id IN (SELECT paper_id FROM passages)",
           "figures": "SELECT count(*) FROM figure_legends"}
    return {name: int(con.execute(sql[name]).fetchall()[0][0]) for name in tables}


def mark_synced(settings: Settings, synced: dict, facts: dict) -> None:
    """Record that the LanceDB tables (as they are now, indexes maintained) reflect the change log at the position
    :func:`sync_lancedb` returned (``synced``), for this model and these marts."""
    record_synced(settings.warehouse / SYNCED, synced["journal"], f"{facts['key']}|{synced['marts']}",
                  lance_versions(db_of(settings)))
