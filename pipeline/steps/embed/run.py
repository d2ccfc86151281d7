"""The step: ``merge_embeddings`` (absorb the staged vectors, sync LanceDB, index; the single LanceDB writer),
``run_embed`` (plan, encode, merge in one process) and the run's row in ``run_log``."""

from __future__ import annotations

import logging
import time
import uuid

import numpy as np
import pyarrow as pa

from pipeline import progress
from pipeline.embedding.encoders import get_encoder
from pipeline.settings import Settings
from pipeline.steps.embed.cache import VectorCache, _cache_key, _model_dim, model_facts
from pipeline.steps.embed.compare import db_of, mark_synced
from pipeline.steps.embed.encoding import encode_checkpointed
from pipeline.steps.embed.indexes import ensure_indexes
from pipeline.steps.embed.inputs import figure_inputs, passage_inputs
from pipeline.steps.embed.shards import embed_shard, plan_shards
from pipeline.steps.embed.sync import sync_lancedb
from pipeline.writer_lock import writes

log = logging.getLogger(__name__)


@writes("embed")
def merge_embeddings(settings: Settings, full: bool = False) -> dict:
    """Absorb staged vectors and bring the LanceDB tables in line with the warehouse (single writer): only the rows
    whose source changed are read, looked up in the vector cache and written (:mod:`pipeline.steps.embed_changes`);
    ``full``: compare every row, not only those of the papers the change log names."""
    t0 = time.perf_counter()
    encoder = get_encoder(settings)
    cache = VectorCache(settings, _cache_key(encoder))
    cache.absorb_staged()
    cache.compact_if_many()
    dim = _model_dim(settings, encoder)
    encoded = 0

    def inputs(kind: str, rows: pa.Table) -> list:
        return passage_inputs(encoder, rows) if kind == "chunks" else figure_inputs(encoder, rows)

    def vectors(hashes: list[str], texts: list) -> np.ndarray:
        nonlocal encoded
        found, missing = cache.lookup(hashes, dim)
        if missing:  # texts that appeared after the shards ran: encode them here rather than fail
            todo = {hashes[i]: texts[i] for i in missing}
            encoded += encode_checkpointed(settings, encoder, cache, "merge-" + uuid.uuid4().hex[:8], list(todo),
                                           list(todo.values()))
            cache.absorb_staged()
            again, still = cache.lookup([hashes[i] for i in missing], dim)
            if still:
                raise RuntimeError(f"{len(still)} vectors missing from the cache right after encoding them")
            found[missing] = again
        return found

    facts = model_facts(settings, encoder)
    with progress.task("embed: writing the LanceDB tables") as bar:
        out = sync_lancedb(settings, facts, dim, inputs, vectors, full=full)
        bar.stage("embed: indexing the LanceDB tables")
        t_sync = time.perf_counter()
        indexes = ensure_indexes(db_of(settings), settings)
        mark_synced(settings, out, facts)
        t_index = time.perf_counter()

    rows = out["rows"]
    summary = {
        "model": facts["name"], "dim": dim, "encoded": encoded, "runtime": encoder.spec.runtime.label(),
        "read": out["read"], "compared": out["compared"],
        "passages": rows["chunks"], "papers": rows["papers"], "figures": rows["figures"],
        "changes": out["changes"], "indexes_built": indexes, "seconds": round(time.perf_counter() - t0, 2),
        "timings": {"compare_s": out["compare_s"], "build_s": out["build_s"], "sync_s": out["sync_s"],
                    "index_s": round(t_index - t_sync, 2)},
    }
    record_embed_run(settings, rows, read=out["read"], encoded=encoded)
    return summary


def record_embed_run(settings: Settings, rows: dict[str, int], *, read: int, encoded: int) -> None:
    """The embed run's row in ``run_log``: what it read and wrote, the rows of each LanceDB table it left, the rows
    of the warehouse tables of the same names, and the warehouse's change-log position (``journal_seq``) those rows
    reflect. A publish that finds no change to the passages' tables after it takes its counts instead of counting
    the passages again (:func:`pipeline.steps.publish.embedded_counts`)."""
    from pipeline import catalog_changes
    from pipeline.warehouse import Warehouse

    with Warehouse(settings) as wh, wh.run("embed") as run:
        run.count("in", read)
        run.count("out", sum(rows.values()))
        run.count("encoded", encoded)
        run.count("rejected", 0)
        for name, n in rows.items():
            run.count(f"lancedb_{name}", n)
            run.count(f"warehouse_{name}", wh.count(name))  # a write the log missed changes these (mostly)
        journal = catalog_changes.position(wh.con, wh.con.execute("SELECT current_database()").fetchall()[0][0])
        if journal is not None:
            run.count("journal_seq", journal[0])


@writes("embed")
def run_embed(settings: Settings, full: bool = False) -> dict:
    """Plan one shard, encode what is new, merge: the whole step in this process (``full``: every row compared, see
    :func:`compare_tables`)."""
    t0 = time.perf_counter()
    encoded = 0
    for shard in plan_shards(settings, 1, full=full):
        encoded += embed_shard(settings, shard)["encoded"]
    summary = merge_embeddings(settings, full=full)
    summary["encoded"] = encoded + summary["encoded"]
    summary["seconds"] = round(time.perf_counter() - t0, 2)
    ch = summary["changes"]
    log.info("embed: %d passages, %d papers, %d figures in; %d passages or legends changed since the last embed; "
             "%d texts encoded; rows written %d, deleted %d; 0 rejected",
             summary["passages"], summary["papers"], summary["figures"], summary["read"], summary["encoded"],
             sum(c["inserted"] + c["updated"] for c in ch.values()), sum(c["deleted"] for c in ch.values()))
    return summary
