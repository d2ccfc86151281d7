"""Embed passages, papers and figure legends into the working LanceDB (``warehouse/lancedb``).

Flow (also the fan-out for Airflow mapped tasks)::

    plan_shards(settings, n)      -> [{"index": i, "count": n, "part": ...}, ...]
    embed_shard(settings, shard)  -> encodes the shard's texts whose hash is not cached yet and writes
                                     staging/embed/<model key>/<part>.parquet (no LanceDB writes); the texts are
                                     read a batch at a time and spilled to a temporary file, so a first embed
                                     holds a window of them, not the collection's
    merge_embeddings(settings)    -> moves staged vectors into the vector cache, then syncs the LanceDB
                                     tables chunks, papers, figures with the warehouse + indexes
    run_embed(settings)           -> all of it in one process

Incremental by content: a vector is cached under (model key, sha256 of exactly what the encoder
sees), so a rerun over unchanged data encodes nothing and a changed chunk re-encodes only itself.
LanceDB rows carry a ``row_hash``, the md5 of the warehouse row they were built from; the step compares those of
the papers the change log names since its last sync (:mod:`pipeline.steps.embed_changes`) and reads, encodes and
writes only rows whose hash changed (LanceDB ``merge_insert``; the ``papers`` rows hold only what is embedded or
shown with a paper, never a value the graph run or enrich moves for many papers, so a night rewrites only its new
and changed papers' rows), deletes rows of chunks/papers that left the warehouse (withdrawn, re-chunked) and inserts
new ones. Tables are stamped with the model (name, dimension, key) in their schema metadata; a
different model drops and rebuilds them, so a table never mixes vector spaces.

Crash safety. ``run_embed`` and ``merge_embeddings`` hold the warehouse writer lock
(``pipeline.writer_lock``), so one process at a time syncs LanceDB; ``embed_shard`` takes no lock (it
only reads DuckDB and writes its own staging parts). Encoded vectors are staged every
``embed_checkpoint_texts`` texts, so a killed embed resumes where it stopped. Every LanceDB write is one
atomic commit (a new table version), so a sync killed at any point leaves each table at its old or its
new version; before syncing, ``repair_table`` checks each table (opens, reads, one row per key) and
rebuilds a damaged one from the vector cache. Running ``embed`` again always converges.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import uuid
import warnings
from datetime import timedelta
from pathlib import Path
from itertools import chain
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline import progress
from pipeline.embedding.encoders import Encoder, get_encoder
from pipeline.errors import UserError
from pipeline.query.bm25 import index_config as bm25_index_config
from pipeline.settings import Settings
from pipeline.steps.embed_changes import (KEYS, ROW_HASH, SYNCED, Stale, changed_papers, marts_digest, read_batches,
                                          read_mart, record_synced, source_hashes, sql_list, stale, synced_position)
from pipeline.vectors import l2_normalise
from pipeline.writer_lock import writes

log = logging.getLogger(__name__)

META_PREFIX = "paperkb."
TABLES = ("chunks", "papers", "figures")
ABS_SUFFIX = "#abs"
# values a night moves for many papers: never in the LanceDB rows (the catalog's paper_ranks, pipeline.query.ranks)
RANK_COLUMNS = ("citation_count", "pagerank", "weight")


# ---- small pure helpers ---------------------------------------------------------------------------
def input_hash(model_input: Any) -> str:
    """sha256 of exactly what the encoder sees (a string, or a [title, text] pair)."""
    raw = model_input if isinstance(model_input, str) else json.dumps(model_input, ensure_ascii=False)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def shard_of(content_hash: str, count: int) -> int:
    return int(content_hash[:8], 16) % count


def group_mean(keys: np.ndarray, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique keys and the L2-normalised mean vector of each key's rows (vectorised, no Python loop)."""
    if len(keys) == 0:
        return keys, vectors
    order = np.argsort(keys, kind="stable")
    k, v = keys[order], vectors[order]
    uniq, starts = np.unique(k, return_index=True)
    sums = np.add.reduceat(v, starts, axis=0)
    return uniq, l2_normalise(sums, dtype=sums.dtype.type).astype(np.float32)


def _vector_type(dim: int) -> pa.DataType:
    return pa.list_(pa.float32(), dim)


def _vector_array(m: np.ndarray, dim: int) -> pa.FixedSizeListArray:
    m = np.ascontiguousarray(m, dtype=np.float32).reshape(-1, dim)
    return pa.FixedSizeListArray.from_arrays(pa.array(m.ravel(), pa.float32()), dim)


# ---- reading the warehouse ---------------------------------------------------------------------------
# The embed step reads three marts (sql/marts): passages, figure_legends and paper_meta.
def _open_read(settings: Settings):
    import duckdb

    if not settings.db_path.exists():
        raise UserError(f"no warehouse at {settings.db_path}: run `paperkb harvest` or `paperkb import-collection` first")
    return duckdb.connect(str(settings.db_path), read_only=True)


def read_passages(con) -> pa.Table:
    return read_mart(con, "SELECT * FROM passages ORDER BY paper_id, ordinal")


def read_figures(con) -> pa.Table:
    return read_mart(con, "SELECT * FROM figure_legends ORDER BY figure_id")


def read_paper_meta(con) -> pa.Table:
    """Paper rows for the LanceDB papers table: ids, title, abstract, authors, year, categories (no value a night
    moves for many papers: citation counts, PageRank and weights are in the catalog, see pipeline.query.ranks)."""
    return read_mart(con, "SELECT * FROM paper_meta ORDER BY paper_id")


# ---- model inputs -------------------------------------------------------------------------------------
def passage_inputs(encoder: Encoder, passages: pa.Table) -> list:
    titles = passages.column("title").to_pylist()
    bodies = passages.column("body").to_pylist()
    texts = passages.column("text").to_pylist()
    kinds = passages.column("kind").to_pylist()
    out = []
    for t, b, x, k in zip(titles, bodies, texts, kinds):
        if k == "abstract" and encoder.spec.doc_format == "text":
            out.append(x or "")
        else:
            out.append(encoder.doc_input(t, b, None))
    return out


def figure_inputs(encoder: Encoder, figures: pa.Table) -> list:
    if figures.num_rows == 0:
        return []
    return [encoder.doc_input(t, x, None) for t, x in zip(figures.column("title").to_pylist(),
                                                           figures.column("text").to_pylist())]


# ---- the vector cache -----------------------------------------------------------------------------------
CACHE_ROW_GROUP = 65_536  # vectors per row group of a compacted cache part: what a lookup of one vector reads


class VectorCache:
    """Vectors by content hash for one model: ``warehouse/vector_cache/<model key>/*.parquet``.

    Append-only Parquet parts (each an atomic rename of a staged shard), deduplicated on read.
    Plain Parquet rather than a LanceDB table: shards written by parallel workers become cache
    parts by a rename, with no concurrent writers on one dataset."""

    def __init__(self, settings: Settings, key: str):
        self.dir = vector_cache_root(settings) / key
        self.staging = settings.staging_dir / "embed" / key

    def parts(self) -> list[Path]:
        return sorted(self.dir.glob("*.parquet")) if self.dir.is_dir() else []

    def staged(self) -> list[Path]:
        return sorted(self.staging.glob("*.parquet")) if self.staging.is_dir() else []

    def held(self, hashes: list[str], include_staged: bool = True) -> list[str]:
        """Those of ``hashes`` the cache (and its staged parts) holds a vector for."""
        files = self.parts() + (self.staged() if include_staged else [])
        want = pa.array(sorted(set(hashes)), pa.string())
        held: set[str] = set()
        for f in files:
            if len(held) == len(want):
                break
            try:
                have = pq.read_table(f, columns=["content_hash"]).column("content_hash")
            except FileNotFoundError:  # compacted by another process meanwhile: its rows are in the new part
                continue
            held.update(pc.filter(want, pc.is_in(want, value_set=have)).to_pylist())
        return [h for h in hashes if h in held]

    def write_staged(self, part: str, hashes: list[str], vectors: np.ndarray, dim: int) -> Path:
        self.staging.mkdir(parents=True, exist_ok=True)
        out = self.staging / f"{part}.parquet"
        tmp = out.with_name(f".{out.name}.{uuid.uuid4().hex[:6]}.tmp")
        pq.write_table(pa.table({"content_hash": pa.array(hashes, pa.string()),
                                 "vector": _vector_array(vectors, dim)}), tmp)
        os.replace(tmp, out)
        return out

    def absorb_staged(self) -> int:
        """Move staged shard files into the cache (rename: atomic, idempotent)."""
        files = self.staged()
        if files:
            self.dir.mkdir(parents=True, exist_ok=True)
        for f in files:
            os.replace(f, self.dir / f"{time.strftime('%Y%m%dT%H%M%S')}-{f.name}")
        return len(files)

    def lookup(self, hashes: list[str], dim: int) -> tuple[np.ndarray, list[int]]:
        """The vectors of ``hashes`` (float32[len(hashes), dim], rows in that order) and the positions of those the
        cache lacks (their rows are zeros). Parts are read newest first (a night's texts are in the night's parts),
        only until every hash is found, and of a part only the row groups holding one."""
        out = np.zeros((len(hashes), dim), np.float32)
        want: dict[str, list[int]] = {}
        for i, h in enumerate(hashes):
            want.setdefault(h, []).append(i)
        for f in reversed(self.parts()):
            if not want:
                break
            try:
                pf = pq.ParquetFile(f)
                held = pf.read(columns=["content_hash"]).column("content_hash")
            except FileNotFoundError:  # compacted by another process meanwhile: its rows are in the new part
                continue
            rows = np.flatnonzero(pc.is_in(held, value_set=pa.array(list(want), pa.string())).to_numpy(
                zero_copy_only=False))
            if not rows.size:
                continue
            starts = np.cumsum([0] + [pf.metadata.row_group(g).num_rows for g in range(pf.num_row_groups)])
            groups = np.unique(np.searchsorted(starts, rows, side="right") - 1).tolist()
            got = pf.read_row_groups(groups, columns=["content_hash", "vector"])
            vec = got.column("vector").combine_chunks()
            if vec.type.list_size != dim:
                raise UserError(f"vector cache {self.dir} holds {vec.type.list_size}-d vectors, the model gives {dim}-d")
            m = vec.values.to_numpy(zero_copy_only=False).reshape(-1, dim)
            for j, h in enumerate(got.column("content_hash").to_pylist()):
                at = want.pop(h, None)
                if at is not None:
                    out[at] = m[j]
        return out, sorted(i for at in want.values() for i in at)

    def compact_if_many(self) -> bool:
        """Past 64 parts, rewrite them as one (deduplicated; row groups of :data:`CACHE_ROW_GROUP` vectors, so that
        :meth:`lookup` reads few). Reads every part: about once every 64 merges."""
        files = self.parts()
        if len(files) <= 64:
            return False
        self.compact(pa.concat_tables([pq.read_table(f) for f in files if f.exists()]))
        return True

    def compact(self, t: pa.Table) -> None:
        hashes = t.column("content_hash").to_pylist()
        keep = sorted({h: i for i, h in enumerate(hashes)}.values())
        out = self.dir / f"{time.strftime('%Y%m%dT%H%M%S')}-compact-{uuid.uuid4().hex[:6]}.parquet"
        tmp = out.with_name("." + out.name + ".tmp")
        old = self.parts()
        pq.write_table(t.take(pa.array(keep)), tmp, row_group_size=CACHE_ROW_GROUP)
        os.replace(tmp, out)
        for f in old:
            f.unlink()


def vector_cache_root(settings: Settings) -> Path:
    """The vector cache (``<model key>/`` folders) and the exported models (``models/``)."""
    from pipeline.embedding.encoders import cache_root

    return cache_root(settings)


def _cache_meta_path(settings: Settings, key: str) -> Path:
    return vector_cache_root(settings) / key / "model.json"


def _model_dim(settings: Settings, encoder: Encoder) -> int:
    """The model's dimension, from the cache's model.json when present (so a no-op rerun loads no model)."""
    meta = _cache_meta_path(settings, encoder.spec.key())
    if meta.exists():
        return int(json.loads(meta.read_text())["dim"])
    dim = encoder.dim
    meta.parent.mkdir(parents=True, exist_ok=True)
    tmp = meta.with_name(f".model.{uuid.uuid4().hex[:6]}.tmp")
    tmp.write_text(json.dumps(encoder.describe(), indent=1))
    os.replace(tmp, meta)  # a cache dir may be shared by concurrent runs
    return dim


def _cache_key(encoder: Encoder) -> str:
    return encoder.spec.key()


def model_facts(settings: Settings, encoder: Encoder | None = None) -> dict:
    encoder = encoder or get_encoder(settings)
    dim = _model_dim(settings, encoder)
    s = encoder.spec
    return {"name": s.name, "query_model": s.query_name, "doc_format": s.doc_format, "dim": dim,
            "truncate_dim": s.truncate_dim, "max_seq_length": s.max_seq_length, "key": _cache_key(encoder),
            "path": s.doc_model, "query_path": s.query_model, "backend": s.backend, "precision": s.precision}


# ---- fan-out API ------------------------------------------------------------------------------------------
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


def prefetch(items: Iterable, depth: int = 1):
    """Iterate ``items`` in a background thread, at most ``depth`` items ahead of the caller; an error
    there is raised here. Leaving early stops the thread at its next item."""
    import queue
    import threading

    q: "queue.Queue" = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()

    def put(msg) -> bool:
        while not stop.is_set():
            try:
                q.put(msg, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for it in items:
                if not put(("item", it)):
                    return
            put(("end", None))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            put(("error", exc))

    t = threading.Thread(target=run, name="paperkb-embed-reader", daemon=True)
    t.start()
    try:
        while True:
            kind, val = q.get()
            if kind == "end":
                return
            if kind == "error":
                raise val
            yield val
    finally:
        stop.set()


def length_order(inputs: list) -> np.ndarray:
    """Positions of ``inputs`` longest first (characters, a pair's parts added): batches of similar
    length pad little. Stable, so equal lengths keep their order."""
    lengths = np.array([len(x) if isinstance(x, str) else sum(len(p or "") for p in x) for x in inputs], dtype=np.int64)
    return np.argsort(-lengths, kind="stable")


def encode_in_length_order(encode, inputs: list) -> np.ndarray:
    """``encode(inputs)`` computed on the inputs sorted by length, rows returned in the original order."""
    if not inputs:
        return encode(inputs)
    order = length_order(inputs)
    vecs = encode([inputs[i] for i in order])
    out = np.empty_like(vecs)
    out[order] = vecs
    return out


def encode_checkpointed(settings: Settings, encoder: Encoder, cache: "VectorCache", part: str, hashes: list[str],
                        inputs: list, *, overlap: bool = True, advance: Callable[[int], None] | None = None) -> int:
    """Encode ``inputs`` in slices of ``embed_checkpoint_texts``, staging each slice's vectors as its own
    Parquet part as soon as it is done: a killed embed keeps every finished slice (the rerun's
    ``_shard_work`` skips staged hashes, and the merge absorbs the parts).

    The shard's texts are taken longest first (less padding per batch, the GPU's main waste); rows are
    staged by content hash, so the order does not matter downstream. With ``overlap`` a writer thread
    stages slice k (Arrow conversion, Parquet, rename) while the encoder works on slice k + 1, through a
    queue of at most 2 slices: the encoder never waits for the disk, and memory stays bounded."""
    dim = _model_dim(settings, encoder)
    step = max(1, int(settings.embed_checkpoint_texts))
    order = length_order(inputs)
    hashes = [hashes[i] for i in order]
    inputs = [inputs[i] for i in order]
    n_parts = (len(inputs) + step - 1) // step

    def stage(k: int, i: int, vecs: np.ndarray) -> None:
        name = part if n_parts == 1 else f"{part}-c{k:05d}"
        cache.write_staged(name, hashes[i:i + step], vecs, dim)
        if n_parts > 1:
            log.debug("embed: checkpoint %d/%d (%d texts) staged as %s", k + 1, n_parts, min(len(inputs), i + step), name)

    slices = [(k, i) for k, i in enumerate(range(0, len(inputs), step))]
    if not overlap or n_parts < 2:
        for k, i in slices:
            stage(k, i, encode_pieces(encoder, inputs[i:i + step], advance))
        return len(inputs)
    with StagingWriter(stage, depth=2) as writer:
        for k, i in slices:
            writer.put(k, i, encode_pieces(encoder, inputs[i:i + step], advance))
    return len(inputs)


PROGRESS_TEXTS = 256  # with a progress bar, texts are encoded in pieces of about this many (whole batches)


def encode_pieces(encoder: Encoder, inputs: list, advance: Callable[[int], None] | None = None) -> np.ndarray:
    """``encoder.encode_docs(inputs)``; with ``advance``, in pieces of whole batches (the same batches: the
    inputs come longest first), calling ``advance(n)`` after each, so a progress bar moves within a checkpoint."""
    if advance is None or not inputs:
        return encoder.encode_docs(inputs)
    batch = max(1, int(getattr(encoder, "batch_size", 64)))
    piece = batch * max(1, PROGRESS_TEXTS // batch)
    parts = []
    for j in range(0, len(inputs), piece):
        parts.append(encoder.encode_docs(inputs[j:j + piece]))
        advance(len(parts[-1]))
    return np.concatenate(parts)


class StagingWriter:
    """A writer thread fed through a bounded queue: ``put`` blocks while ``depth`` slices wait; leaving
    the ``with`` block waits for every write, and re-raises the first write error in the caller."""

    def __init__(self, write, depth: int = 2):
        import queue
        import threading

        self._write = write
        self._q: "queue.Queue" = queue.Queue(maxsize=max(1, depth))
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="paperkb-embed-writer", daemon=True)

    def __enter__(self) -> "StagingWriter":
        self._thread.start()
        return self

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            if self._error is None:
                try:
                    self._write(*item)
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    self._error = exc

    def put(self, *item) -> None:
        if self._error is not None:
            raise self._error
        self._q.put(item)

    def __exit__(self, *exc) -> None:
        self._q.put(None)
        self._thread.join()
        if self._error is not None and exc[0] is None:
            raise self._error


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


def _btree(t, col: str) -> None:
    """A B-tree index on ``col`` of LanceDB table ``t``."""
    with warnings.catch_warnings():  # deprecated alias of create_index(config=BTree()), same index
        warnings.simplefilter("ignore")
        t.create_scalar_index(col, index_type="BTREE")


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


# ---- building the LanceDB tables --------------------------------------------------------------------------
def build_chunks_table(passages: pa.Table, hashes: list[str], vectors: np.ndarray, dim: int) -> pa.Table:
    t = pa.table({
        "chunk_id": passages.column("chunk_id").cast(pa.string()),
        "paper_id": passages.column("paper_id").cast(pa.string()),
        "kind": passages.column("kind").cast(pa.string()),
        "ordinal": passages.column("ordinal").cast(pa.int32()),
        "section": passages.column("section").cast(pa.string()),
        "role": passages.column("role").cast(pa.string()),
        "page_start": passages.column("page_start").cast(pa.int32()),
        "page_end": passages.column("page_end").cast(pa.int32()),
        "text": passages.column("text").cast(pa.string()),
        "content_hash": pa.array(hashes, pa.string()),
        "row_hash": passages.column(ROW_HASH).cast(pa.string()),
    })
    return t.append_column(pa.field("vector", _vector_type(dim)), _vector_array(vectors, dim))


def build_papers_table(papers: pa.Table, passages: pa.Table, hashes: list[str], vectors: np.ndarray,
                       dim: int) -> pa.Table:
    pids = np.array(passages.column("paper_id").to_pylist(), dtype=object)
    ids = passages.column("chunk_id").to_pylist()
    # doc vector: normalised mean of all the paper's passage vectors (abstract passage included)
    uniq, means = group_mean(pids.astype(str), vectors) if len(pids) else (np.array([]), np.zeros((0, dim)))
    doc_row = {p: i for i, p in enumerate(uniq.tolist())}
    abs_row = {pid: i for i, (pid, cid) in enumerate(zip(pids, ids)) if cid.endswith(ABS_SUFFIX)}
    # the paper's input hashes decide whether its vectors changed
    per_paper: dict[str, list[str]] = {}
    for pid, h in zip(pids, hashes):
        per_paper.setdefault(pid, []).append(h)

    # values a night moves for many papers stay out of the rows that hold vectors (pipeline.query.ranks)
    row_hash = papers.column(ROW_HASH).cast(pa.string())
    papers = papers.drop_columns([c for c in RANK_COLUMNS + (ROW_HASH,) if c in papers.column_names])
    paper_ids = papers.column("paper_id").to_pylist()
    keep = [i for i, p in enumerate(paper_ids) if p in doc_row]  # papers with no text have no vectors
    papers = papers.take(pa.array(keep, pa.int64())) if len(keep) != len(paper_ids) else papers
    paper_ids = papers.column("paper_id").to_pylist()
    zeros = np.zeros(dim, np.float32)
    doc = np.stack([means[doc_row[p]] for p in paper_ids]) if paper_ids else np.zeros((0, dim), np.float32)
    abs_ = (np.stack([vectors[abs_row[p]] if p in abs_row else zeros for p in paper_ids])
            if paper_ids else np.zeros((0, dim), np.float32))
    t = papers.append_column("n_passages", pa.array([len(per_paper.get(p, [])) for p in paper_ids], pa.int32()))
    t = t.append_column("content_hash", pa.array(
        [hashlib.sha256("".join(per_paper.get(p, [])).encode()).hexdigest() for p in paper_ids], pa.string()))
    t = t.append_column("row_hash", row_hash.take(pa.array(keep, pa.int64())) if len(keep) != len(row_hash) else row_hash)
    t = t.append_column(pa.field("abs_vector", _vector_type(dim)), _vector_array(abs_, dim))
    return t.append_column(pa.field("doc_vector", _vector_type(dim)), _vector_array(doc, dim))


def build_figures_table(figures: pa.Table, hashes: list[str], vectors: np.ndarray, dim: int) -> pa.Table:
    if figures.num_rows == 0:
        figures = pa.table({"figure_id": pa.array([], pa.string()), "paper_id": pa.array([], pa.string()),
                            "label": pa.array([], pa.string()), "number": pa.array([], pa.int32()),
                            "page": pa.array([], pa.int32()), "text": pa.array([], pa.string()),
                            ROW_HASH: pa.array([], pa.string())})
    t = pa.table({
        "figure_id": figures.column("figure_id").cast(pa.string()),
        "paper_id": figures.column("paper_id").cast(pa.string()),
        "label": figures.column("label").cast(pa.string()),
        "number": figures.column("number").cast(pa.int32()),
        "page": figures.column("page").cast(pa.int32()),
        "text": figures.column("text").cast(pa.string()),
        "content_hash": pa.array(hashes, pa.string()),
        "row_hash": figures.column(ROW_HASH).cast(pa.string()),
    })
    return t.append_column(pa.field("vector", _vector_type(dim)), _vector_array(vectors, dim))


def _stamp(schema: pa.Schema, facts: dict) -> pa.Schema:
    meta = dict(schema.metadata or {})
    meta.update({f"{META_PREFIX}model".encode(): facts["name"].encode(),
                 f"{META_PREFIX}query_model".encode(): facts["query_model"].encode(),
                 f"{META_PREFIX}dim".encode(): str(facts["dim"]).encode(),
                 f"{META_PREFIX}model_key".encode(): facts["key"].encode(),
                 f"{META_PREFIX}doc_format".encode(): facts["doc_format"].encode(),
                 f"{META_PREFIX}path".encode(): str(facts["path"]).encode(),
                 f"{META_PREFIX}query_path".encode(): str(facts["query_path"]).encode(),
                 f"{META_PREFIX}truncate_dim".encode(): str(facts["truncate_dim"] or "").encode(),
                 f"{META_PREFIX}max_seq_length".encode(): str(facts["max_seq_length"] or "").encode(),
                 f"{META_PREFIX}backend".encode(): str(facts.get("backend") or "torch").encode(),
                 f"{META_PREFIX}precision".encode(): str(facts.get("precision") or "fp32").encode()})
    return schema.with_metadata(meta)


def table_model(table) -> dict:
    """The model a LanceDB table was built with (from its schema metadata)."""
    meta = table.schema.metadata or {}
    get = lambda k: (meta.get(f"{META_PREFIX}{k}".encode()) or b"").decode() or None  # noqa: E731
    dim, trunc, seq = get("dim"), get("truncate_dim"), get("max_seq_length")
    return {"name": get("model"), "query_model": get("query_model"), "dim": int(dim) if dim else None,
            "key": get("model_key"), "doc_format": get("doc_format"), "path": get("path"),
            "query_path": get("query_path"), "truncate_dim": int(trunc) if trunc else None,
            "max_seq_length": int(seq) if seq else None,
            # tables from before backends existed were embedded with torch fp32
            "backend": get("backend") or "torch", "precision": get("precision") or "fp32"}


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


def table_problem(table, key: str, expected: int | None = None) -> str | None:
    """What is wrong with an opened LanceDB table, or None: every data file readable (the key column
    is scanned), one row per key, and ``expected`` rows when given."""
    n = table.count_rows()
    ids = table.search().select([key]).limit(None).to_arrow().column(key)
    distinct = len(pc.unique(ids))
    if len(ids) != n:
        return f"{n} rows counted but {len(ids)} read"
    if distinct != n:
        return f"{n} rows for {distinct} {key}s (duplicates from an interrupted or concurrent sync)"
    if expected is not None and n != expected:
        return f"{n} rows, the warehouse has {expected}"
    return None


def repair_table(db, root: Path, name: str, key: str) -> str | None:
    """Before a sync: make sure table ``name`` opens, reads and has one row per key. A damaged table (an
    older paperkb's concurrent embeds, a data file gone, a create killed half-way) is removed, so the
    sync rebuilds it from the vector cache: nothing is re-encoded. Returns what was repaired, or None."""
    path = Path(root) / f"{name}.lance"
    if name not in table_names(db):
        if path.exists():  # a create or drop killed half-way: a folder LanceDB does not list as a table
            shutil.rmtree(path, ignore_errors=True)
            log.warning("LanceDB table %s: removed the leftovers of an interrupted create", name)
            return "leftovers removed"
        return None
    try:
        problem = table_problem(db.open_table(name), key)
    except Exception as exc:  # noqa: BLE001 - any failure to open or read means: rebuild it
        problem = f"unreadable ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    if problem is None:
        return None
    log.warning("LanceDB table %s is damaged: %s: rebuilding it from the vector cache", name, problem)
    _remove_table(db, name, path)
    return problem


def _remove_table(db, name: str, path: Path | None = None) -> None:
    try:
        if name in table_names(db):
            db.drop_table(name)
    except Exception as exc:  # noqa: BLE001 - a damaged table may not drop cleanly: remove its folder
        log.debug("drop_table(%s) failed (%s): removing its folder", name, exc)
    if path is None:
        uri = getattr(db, "uri", None)
        path = Path(str(uri)) / f"{name}.lance" if uri else None
    if path is not None and path.exists():
        shutil.rmtree(path, ignore_errors=True)


def table_names(db) -> list[str]:
    res = db.list_tables()
    return list(getattr(res, "tables", res))


def _index_names(table) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for ix in table.list_indices():
        for col in ix.columns:
            out.setdefault(col, []).append(ix.index_type)
    return out


def index_state(table) -> tuple[int, int]:
    """(rows some index does not cover yet, the most segments one index has: 1 + its deltas)."""
    stats = [table.index_stats(ix.name) for ix in table.list_indices()]
    return (max((s.num_unindexed_rows or 0 for s in stats), default=0),
            max((s.num_indices or 1 for s in stats), default=0))


def index_deltas(ds) -> dict[str, tuple[list[int], int]]:
    """Per index of a Lance dataset: (the rows of each delta, oldest first, the base segment left out;
    the rows no segment covers yet). Rows are counted from the fragments each segment covers."""
    frag_rows = {f.fragment_id: f.metadata.physical_rows for f in ds.get_fragments()}
    total = sum(frag_rows.values())
    out: dict[str, tuple[list[int], int]] = {}
    for ix in ds.describe_indices():
        rows = [sum(frag_rows.get(int(i), 0) for i in seg.fragment_ids) for seg in ix.segments]
        out[ix.name] = (rows[1:], max(total - sum(rows), 0))
    return out


def maintain_indexes(table, settings: Settings) -> str | None:
    """The nightly index policy (issues 14 and 31): new rows get small index *deltas* (Lance's
    ``optimize_indices``: LanceDB's ``optimize()`` would rewrite the full-text index), so no existing data
    or index file is rewritten and a publish hard-links all of them from the previous snapshot. Deltas
    are merged in tiers (:mod:`pipeline.embedding.index_merge`): once ``embed_index_merge_fan_in`` deltas
    of about a night's size have gathered, they and the night's rows become one delta, never touching
    the base index; only past ``embed_index_max_deltas`` deltas are the data files compacted and every
    segment merged into one. Old versions are pruned either way (kept snapshots hold their own links).
    Returns what was done, or None."""
    from pipeline.embedding.index_merge import plan_merge

    if not index_state(table)[0]:  # every row indexed: nothing to do (and no Lance dataset to open)
        return None
    ds = table.to_lance()
    every = index_deltas(ds)
    state = {name: d for name, d in every.items() if d[1]}
    if not state:
        return None
    plans = {name: plan_merge(deltas, new, settings.embed_index_max_deltas, settings.embed_index_merge_fan_in)
             for name, (deltas, new) in state.items()}
    unindexed = max(new for _, new in state.values())
    if any(p.full for p in plans.values()):
        segments = 1 + max(len(deltas) for deltas, _ in every.values())
        ds.optimize.compact_files()
        ds.optimize.optimize_indices(num_indices_to_merge=segments)  # every segment of every index into one
        done = f"compacted, {segments} index segments merged"
    else:
        by_n: dict[int, list[str]] = {}
        for name, p in plans.items():
            by_n.setdefault(p.merge_newest, []).append(name)
        for n, names in sorted(by_n.items()):
            ds.optimize.optimize_indices(num_indices_to_merge=n, index_names=names)
        merged = max(p.merge_newest for p in plans.values())
        done = (f"index delta ({unindexed} rows) merged with the {merged} newest deltas" if merged
                else f"index delta ({unindexed} rows)")
    ds.cleanup_old_versions(timedelta(0), delete_unverified=True)
    table.checkout_latest()
    return done


def ensure_indexes(db, settings: Settings) -> dict:
    """BM25 on chunk text, B-tree on filter columns, an ANN index past the size threshold.

    New rows join the indexes as deltas, merged now and then (:func:`maintain_indexes`). Returns, per
    table, the indexes made and the maintenance done."""
    done: dict[str, list[str]] = {}
    plan = {"chunks": (["paper_id", "kind"], ["vector"]), "papers": (["paper_id", "year", "source"],
            ["abs_vector", "doc_vector"]), "figures": (["paper_id"], ["vector"])}
    for name, (scalars, vectors) in plan.items():
        if name not in table_names(db):
            continue
        t = db.open_table(name)
        have = _index_names(t)
        made = []
        n = t.count_rows()
        if name == "chunks" and "text" not in have and n:
            # LanceDB native BM25 (no tantivy), analysing as the searcher's in-memory BM25 does (stop words pinned)
            t.create_index("text", config=bm25_index_config(), replace=True)
            made.append("fts:text")
        for col in scalars:
            if col not in have and n:
                _btree(t, col)
                made.append(f"btree:{col}")
        if n >= settings.embed_vector_index_min_rows:
            for col in vectors:
                if col not in have:
                    kw: dict[str, Any] = {"metric": "cosine", "vector_column_name": col,
                                          "index_type": settings.embed_vector_index_type}
                    if settings.embed_vector_index_partitions:
                        kw["num_partitions"] = settings.embed_vector_index_partitions
                    if settings.embed_vector_index_sub_vectors:
                        kw["num_sub_vectors"] = settings.embed_vector_index_sub_vectors
                    with warnings.catch_warnings():  # metric/num_partitions form: deprecated, still supported
                        warnings.simplefilter("ignore", DeprecationWarning)
                        t.create_index(**kw)
                    made.append(f"{settings.embed_vector_index_type.lower()}:{col}")
        kept = maintain_indexes(t, settings)
        if kept:
            made.append(kept)
        done[name] = made
    return done
