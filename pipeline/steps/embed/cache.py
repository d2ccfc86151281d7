"""The vector cache: vectors by content hash for one model (``warehouse/vector_cache/<model key>/``), the model's
key and dimension, and the facts a LanceDB table is stamped with."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.embedding.encoders import Encoder, get_encoder
from pipeline.errors import UserError
from pipeline.settings import Settings
from pipeline.steps.embed.rows import _vector_array


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
