"""The fan-out: shards by content hash, each shard's new texts read a batch at a time and spilled to a temporary file,
then encoded and staged (:func:`embed_shard`: reads DuckDB read-only, writes no LanceDB)."""

from __future__ import annotations

import logging
import tempfile
import time
import uuid
from typing import Callable

import pyarrow as pa

from pipeline import progress
from pipeline.embedding.encoders import Encoder, get_encoder
from pipeline.settings import Settings
from pipeline.steps.embed.cache import VectorCache, _cache_key, _model_dim
from pipeline.steps.embed.compare import compare_tables
from pipeline.steps.embed.encoding import encode_checkpointed, prefetch
from pipeline.steps.embed.inputs import _open_read, figure_inputs, input_hash, passage_inputs, shard_of
from pipeline.steps.embed_changes import Stale, read_batches, source_hashes

log = logging.getLogger(__name__)


def plan_shards(settings: Settings, n_shards: int = 1, full: bool = False) -> list[dict]:
    """Shards by content hash, so each worker gets about the same number of texts (``full``: each compares every
    row, see :func:`compare_tables`)."""
    n = max(1, int(n_shards))
    run = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    return [{"index": i, "count": n, "part": f"{run}-{i:03d}", **({"full": True} if full else {})} for i in range(n)]


# a shard is sorted by length in windows of this many checkpoints: reading and hashing the next window
# overlaps with encoding this one, and within a window the batches are of similar length
SORT_WINDOW_CHECKPOINTS = 4


def _shard_blocks(settings: Settings, encoder: Encoder, shard: dict | None, block: int,
                  on_total: Callable[[int], None] | None = None):
    """This shard's texts that are not cached or staged yet, deduplicated, as (hashes, inputs) blocks of at most
    ``block``: the rows whose source changed since the LanceDB tables were synced (every row of a table that is
    missing or of another model, :mod:`pipeline.steps.embed_changes`). They are read, hashed and looked up in the
    cache a batch at a time and the new ones written to an anonymous temporary file, and only then, with the
    warehouse closed (encoding can take hours, and its writers must not wait on a reader), handed out block by block
    from that file (``on_total`` is told how many there are first: the progress bar's total). What is held at once
    is a batch or a block of texts, and the hashes of the new ones, whatever the collection's size."""
    cache = VectorCache(settings, _cache_key(encoder))
    settings.staging_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=settings.staging_dir, prefix=".embed-texts-") as spill:
        total = _spill_new_texts(settings, encoder, cache, shard, spill)
        if on_total is not None:
            on_total(total)
        if not total:
            return
        spill.seek(0)
        hashes: list[str] = []
        inputs: list = []
        for batch in pa.ipc.open_stream(spill):
            hashes += batch.column("content_hash").to_pylist()
            inputs += batch.column("input").to_pylist()
            while len(hashes) >= block:
                yield hashes[:block], inputs[:block]
                hashes, inputs = hashes[block:], inputs[block:]
        if hashes:
            yield hashes, inputs


def _spill_new_texts(settings: Settings, encoder: Encoder, cache: "VectorCache", shard: dict | None, spill) -> int:
    """Write this shard's new (content hash, model input) pairs to ``spill`` as an Arrow stream, reading the
    warehouse a batch at a time (see :func:`_shard_blocks`); returns how many."""
    seen: set[str] = set()
    writer = None
    con = _open_read(settings)
    try:
        # the rows the LanceDB tables lack or hold from another source (all of them for a table of another model):
        # a text the tables hold already has its vector
        if settings.lancedb_dir.is_dir():
            import lancedb

            db = lancedb.connect(str(settings.lancedb_dir))
            facts = {"key": _cache_key(encoder), "dim": _model_dim(settings, encoder)}
            want, plans, _, _ = compare_tables(settings, con, db, facts, ("chunks", "figures"),
                                               full=bool(shard and shard.get("full")))
        else:
            want = source_hashes(con, ("chunks", "figures"))
            plans = {name: Stale(None, []) for name in want}
        for name in ("chunks", "figures"):
            for rows in read_batches(con, name, want[name], plans[name].write):
                inputs = passage_inputs(encoder, rows) if name == "chunks" else figure_inputs(encoder, rows)
                hashes = [input_hash(x) for x in inputs]
                mine = [i for i, h in enumerate(hashes) if h not in seen
                        and (shard is None or shard_of(h, shard["count"]) == shard["index"])]
                known = set(cache.held([hashes[i] for i in mine]))
                new: list[int] = []
                for i in mine:
                    if hashes[i] not in known and hashes[i] not in seen:
                        seen.add(hashes[i])
                        new.append(i)
                if new:
                    batch = pa.record_batch({"content_hash": pa.array([hashes[i] for i in new], pa.string()),
                                             "input": pa.array([inputs[i] for i in new])})
                    if writer is None:
                        writer = pa.ipc.new_stream(spill, batch.schema)
                    writer.write_batch(batch)
    finally:
        con.close()
        if writer is not None:
            writer.close()
    return len(seen)


def _shard_work(settings: Settings, encoder: Encoder, shard: dict | None) -> tuple[list[str], list]:
    """(hashes, inputs) of this shard's texts that are not cached or staged yet, deduplicated."""
    hashes: list[str] = []
    inputs: list = []
    for h, x in _shard_blocks(settings, encoder, shard, block=1 << 62):
        hashes += h
        inputs += x
    return hashes, inputs


def embed_shard(settings: Settings, shard: dict) -> dict:
    """Encode this shard's new texts and stage their vectors. Reads DuckDB read-only; no LanceDB writes.

    Three stages overlap: a reader thread reads the warehouse, hashes the texts and hands them over window
    by window (``SORT_WINDOW_CHECKPOINTS`` checkpoints each), this thread encodes a window longest text first
    while the next window waits, and a writer thread stages each checkpoint's vectors. Progress: one task
    over the new texts (:mod:`pipeline.progress`)."""
    encoder = get_encoder(settings)
    cache = VectorCache(settings, _cache_key(encoder))
    window = max(1, int(settings.embed_checkpoint_texts)) * SORT_WINDOW_CHECKPOINTS
    encoded = 0
    name = f"embed: encoding (shard {shard['index'] + 1}/{shard['count']})" if shard["count"] > 1 else "embed: encoding"
    with progress.task(name, unit="texts") as bar:
        blocks = _shard_blocks(settings, encoder, shard, window, on_total=lambda n: bar.update(total=n))
        for j, (hashes, inputs) in enumerate(prefetch(blocks)):
            part = shard["part"] if j == 0 else f"{shard['part']}-w{j:05d}"
            encoded += encode_checkpointed(settings, encoder, cache, part, hashes, inputs, advance=bar.advance)
    summary = {"shard": shard["index"], "encoded": encoded}
    log.info("embed shard %d/%d: encoded %d new texts", shard["index"] + 1, shard["count"], encoded)
    return summary
