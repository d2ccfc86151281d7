"""What the embed step reads from the warehouse (the marts passages, figure_legends, paper_meta) and what the
encoder sees of it: model inputs, their content hashes, and the shard a hash falls in."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pyarrow as pa

from pipeline.embedding.encoders import Encoder
from pipeline.errors import UserError
from pipeline.settings import Settings
from pipeline.steps.embed_changes import read_mart


def input_hash(model_input: Any) -> str:
    """sha256 of exactly what the encoder sees (a string, or a [title, text] pair)."""
    raw = model_input if isinstance(model_input, str) else json.dumps(model_input, ensure_ascii=False)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def shard_of(content_hash: str, count: int) -> int:
    return int(content_hash[:8], 16) % count


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
