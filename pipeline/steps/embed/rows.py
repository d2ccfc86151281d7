"""The LanceDB rows: the tables ``chunks``, ``papers`` and ``figures`` built from mart rows and their vectors, the
model stamped in a table's schema metadata, and the names of the tables a LanceDB holds."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa

from pipeline.steps.embed_changes import ROW_HASH
from pipeline.vectors import l2_normalise


META_PREFIX = "paperkb."
TABLES = ("chunks", "papers", "figures")
ABS_SUFFIX = "#abs"
# values a night moves for many papers: never in the LanceDB rows (the catalog's paper_ranks, pipeline.query.ranks)
RANK_COLUMNS = ("citation_count", "pagerank", "weight")


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


def table_names(db) -> list[str]:
    res = db.list_tables()
    return list(getattr(res, "tables", res))
