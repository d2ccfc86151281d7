"""The LanceDB sync: bring the tables ``chunks``, ``papers`` and ``figures`` in line with the warehouse marts, writing
only the rows whose source changed (``merge_insert``) and deleting those that left, or building a table whole."""

from __future__ import annotations

import functools
import logging
import time
from itertools import chain
from typing import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.settings import Settings
from pipeline.steps.embed.compare import PAPERS_PER_FILTER, _read_lance, compare_tables, db_of
from pipeline.steps.embed.indexes import _btree, _index_names
from pipeline.steps.embed.inputs import _open_read, input_hash
from pipeline.steps.embed.repair import _remove_table, repair_table, table_problem
from pipeline.steps.embed.rows import (_stamp, build_chunks_table, build_figures_table, build_papers_table, table_model,
                                       table_names)
from pipeline.steps.embed_changes import KEYS, Stale, marts_digest, read_batches, source_hashes, sql_list

log = logging.getLogger(__name__)


def sync_lancedb(settings: Settings, facts: dict, dim: int, inputs: Callable[[str, pa.Table], list],
                 vectors: Callable[[list[str], list], np.ndarray], full: bool = False) -> dict:
    """Bring the LanceDB tables ``chunks``, ``papers`` and ``figures`` in line with the warehouse marts: repair a
    damaged table, compare each row's source hash with the table's, and build and write only the rows that differ
    (every row when a table is built whole), deleting rows whose key left the warehouse. Rows are read, built and
    written a batch at a time (:data:`pipeline.steps.embed_changes.BATCH_ROWS`), so a whole build holds one batch's
    texts and vectors, not the table's. ``inputs(table, rows)``: the model inputs of ``passages`` (``chunks``) or
    ``figure_legends`` (``figures``) rows; ``vectors(hashes, inputs)``: their vectors. Papers' vectors are the means
    of their passages' (taken from the synced ``chunks`` table). ``full``: compare every row, whatever the change log
    says (:func:`compare_tables`).
    Returns the changes per table, the rows each table holds, the texts read, and the seconds comparing, building
    and writing."""
    t0 = time.perf_counter()
    db = db_of(settings)
    repaired = {name: repair_table(db, settings.lancedb_dir, name, key) for name, key in KEYS.items()}
    con = _open_read(settings)
    clock = {"build": 0.0, "read": 0}
    changes: dict[str, dict] = {}
    try:
        from pipeline import catalog_changes

        cur = con.cursor()  # (position leaves a result pending: not on the connection that registers tables next)
        try:
            journal = catalog_changes.position(cur, cur.execute("SELECT current_database()").fetchall()[0][0])
        finally:
            cur.close()
        marts = marts_digest(con)
        want, plans, totals, compared = compare_tables(settings, con, db, facts, full=full)
        t_compare = time.perf_counter()
        # the rows are read on a connection of their own: DuckDB's buffers from the compare's scans are let go rather
        # than held while LanceDB writes (~150 MB at 1M passages)
        con.close()
        con = _open_read(settings)
        for name in ("chunks", "figures", "papers"):
            plan = plans[name]
            if name == "papers" and (plan.write is None or len(plan.write) > PAPERS_PER_FILTER):
                _index_paper_ids(db)

            def batches(name: str = name, rows: pa.Table = want[name], keys: pa.Array | None = plan.write
                        ) -> Iterator[pa.Table]:
                return _built(db, name, read_batches(con, name, rows, keys), dim, inputs, vectors, clock)

            done = sync_table(db, name, batches, KEYS[name], facts, None if plan.whole else plan, expected=totals[name])
            if done is None:  # another model or columns than the table's, or a count that does not add up: whole
                plan = Stale(None, [])
                whole = source_hashes(con, (name,))[name] if name != "papers" else source_hashes(con)["papers"]
                totals[name] = whole.num_rows
                done = sync_table(db, name, functools.partial(batches, rows=whole, keys=None), KEYS[name], facts)
            assert done is not None  # (a whole sync always completes)
            changes[name] = done
            if repaired[name]:
                done["repaired"] = repaired[name]
            log.info("embed: LanceDB %s: %s", name, "built whole" if plan.write is None else
                     f"{len(plan.write)} row(s) changed, {len(plan.delete)} removed, of {totals[name]}")
    finally:
        con.close()
    return {"changes": changes, "rows": totals, "compared": compared, "journal": journal, "marts": marts,
            "read": clock["read"], "compare_s": round(t_compare - t0, 2), "build_s": round(clock["build"], 2),
            "sync_s": round(time.perf_counter() - t_compare - clock["build"], 2)}


def _index_paper_ids(db) -> None:
    """The B-tree on ``chunks.paper_id`` that :func:`ensure_indexes` makes, made now when missing: the ``papers`` rows
    take their passages' vectors from ``chunks`` by paper id, one filter per batch, and unindexed each filter scans
    the whole column (at 1M passages, 109,000 papers built whole: 8.2 s of filters)."""
    if "chunks" not in table_names(db):
        return
    t = db.open_table("chunks")
    if "paper_id" not in _index_names(t) and t.count_rows():
        _btree(t, "paper_id")


def _built(db, name: str, batches: Iterator[pa.Table], dim: int, inputs: Callable[[str, pa.Table], list],
           vectors: Callable[[list[str], list], np.ndarray], clock: dict) -> Iterator[pa.Table]:
    """The LanceDB rows of table ``name`` built from each batch of its mart rows (``clock``: adds the seconds spent
    building, and the passages and legends read)."""
    for rows in batches:
        t0 = time.perf_counter()
        if name != "papers":
            clock["read"] += rows.num_rows
        built = _rows(db, name, rows, dim, inputs, vectors)
        clock["build"] += time.perf_counter() - t0
        yield built


def _rows(db, name: str, rows: pa.Table, dim: int, inputs: Callable[[str, pa.Table], list],
          vectors: Callable[[list[str], list], np.ndarray]) -> pa.Table:
    """The LanceDB rows of table ``name`` built from its mart ``rows`` (see :func:`sync_lancedb`)."""
    if name == "papers":
        return _papers_rows(db, rows, dim)
    x = inputs(name, rows)
    hashes = [input_hash(v) for v in x]
    build = build_chunks_table if name == "chunks" else build_figures_table
    return build(rows, hashes, vectors(hashes, x), dim)


def _papers_rows(db, papers: pa.Table, dim: int) -> pa.Table:
    """The ``papers`` rows of the meta rows ``papers``, their vectors from the synced ``chunks`` table: the doc
    vector the normalised mean of the paper's passages' vectors, the abstract's vector, in passage order."""
    cols = ["chunk_id", "paper_id", "ordinal", "content_hash", "vector"]
    passages = _read_lance(db.open_table("chunks"), cols, papers.column("paper_id").to_pylist())
    passages = passages.sort_by([("paper_id", "ascending"), ("ordinal", "ascending"), ("chunk_id", "ascending")])
    vec = passages.column("vector").combine_chunks()
    m = vec.values.to_numpy(zero_copy_only=False).reshape(-1, dim) if len(vec) else np.zeros((0, dim), np.float32)
    return build_papers_table(papers, passages, passages.column("content_hash").to_pylist(), m, dim)


def sync_table(db, name: str, batches: Callable[[], Iterator[pa.Table]], key: str, facts: dict,
               plan: Stale | None = None, expected: int | None = None) -> dict | None:
    """Make LanceDB table ``name`` hold the rows ``batches()`` gives (a fresh iterator of Arrow tables at each call,
    at least one, written one at a time): rows with a new row_hash are rewritten, rows not given are deleted,
    identical rows are left alone. A model change rebuilds the table (one commit, streamed from the batches). With
    ``plan`` (a merge of the changed rows alone, :func:`pipeline.steps.embed_changes.stale`), the batches hold only
    the rows to write and ``plan.delete`` the keys to remove; ``expected`` the rows the table then holds. Returns None
    when such a merge cannot be done (another model or columns, or a count that differs after it): the caller builds
    the table whole."""
    def stamped() -> Iterator[pa.Table]:
        return (t.replace_schema_metadata(_stamp(t.schema, facts).metadata) for t in batches())

    if name in table_names(db):
        existing = db.open_table(name)
        m = table_model(existing)
        same_model = m["key"] == facts["key"] and m["dim"] == facts["dim"]
        rows = stamped()
        first = next(rows)
        same_schema = existing.schema.names == first.schema.names
        if plan is not None:
            return _sync_changes(existing, name, chain([first], rows), key, plan, expected) \
                if same_model and same_schema else None
        if same_model and same_schema:
            out = _merge_all(existing, chain([first], rows), key)
            problem = table_problem(existing, key, expected=out.pop("given"))
            if problem is None:
                return out
            # should not happen under the writer lock; rebuild rather than leave a table that fails every later run
            log.warning("LanceDB table %s after the sync: %s: rebuilding it from the vector cache", name, problem)
        else:
            reason = "model changed" if not same_model else "schema changed"
            log.info("LanceDB table %s: %s (%s -> %s): rebuilding", name, reason, m["name"], facts["name"])
    elif plan is not None:
        return None
    _remove_table(db, name)
    rows = stamped()
    first = next(rows)
    written = [0]

    def record_batches() -> Iterator[pa.RecordBatch]:
        for t in chain([first], rows):
            written[0] += t.num_rows
            yield from t.to_batches()

    # one commit: a create killed half-way leaves a folder LanceDB does not list, removed by the next repair_table
    db.create_table(name, data=pa.RecordBatchReader.from_batches(first.schema, record_batches()), schema=first.schema)
    return {"inserted": written[0], "updated": 0, "deleted": 0, "rebuilt": True}


DELETE_BATCH = 1_000  # keys per LanceDB delete filter


def _merge(existing, table: pa.Table, key: str, out: dict) -> None:
    """Merge the built rows ``table`` into ``existing`` (rows whose row_hash differs rewritten, new keys inserted),
    adding to ``out``'s counts."""
    if not table.num_rows:
        return
    res = (existing.merge_insert(key)
           .when_matched_update_all(where="target.row_hash != source.row_hash")
           .when_not_matched_insert_all()
           .execute(table))
    out["inserted"] += int(res.num_inserted_rows)
    out["updated"] += int(res.num_updated_rows)


def _delete_keys(existing, key: str, keys: list[str], out: dict) -> None:
    for i in range(0, len(keys), DELETE_BATCH):
        batch = keys[i:i + DELETE_BATCH]
        existing.delete(f"{key} IN ({sql_list(batch)})")
        out["deleted"] += len(batch)


def _merge_all(existing, tables: Iterable[pa.Table], key: str) -> dict:
    """Sync ``existing`` to exactly the rows ``tables`` give (each merged as it comes, then the keys none gave
    deleted); ``given``: how many rows that was. Each merge and delete is an atomic commit: a sync killed between them
    leaves rows of both states, and the next one (which then compares every row) converges."""
    out = {"inserted": 0, "updated": 0, "deleted": 0, "rebuilt": False}
    given: list[pa.Array] = []
    for t in tables:
        given.append(t.column(key).combine_chunks() if t.num_rows else pa.array([], pa.string()))
        _merge(existing, t, key, out)
    keys = pa.chunked_array(given, pa.string())
    held = existing.search().select([key]).limit(None).to_arrow().column(key)
    gone = pc.filter(held, pc.invert(pc.is_in(held, value_set=keys))).to_pylist()
    if gone and len(keys) == 0:
        existing.delete("true")
        out["deleted"] += len(gone)
    else:
        _delete_keys(existing, key, gone, out)
    out["given"] = len(keys)
    return out


def _sync_changes(existing, name: str, tables: Iterable[pa.Table], key: str, plan: Stale, expected: int | None
                  ) -> dict | None:
    """:func:`sync_table` of the changed rows ``tables`` and the removed keys ``plan.delete`` (each an atomic commit: a
    merge killed between them converges on the next one)."""
    out = {"inserted": 0, "updated": 0, "deleted": 0, "rebuilt": False}
    for t in tables:
        _merge(existing, t, key, out)
    _delete_keys(existing, key, plan.delete, out)
    problem = table_problem(existing, key, expected=expected)
    if problem is None:
        return out
    log.warning("LanceDB table %s after the sync: %s: rebuilding it from the vector cache", name, problem)
    return None
