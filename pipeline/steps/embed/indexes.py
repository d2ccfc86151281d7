"""The LanceDB indexes: BM25 on the passages' text, B-trees on filter columns, ANN indexes past a size, and the nightly
maintenance that adds new rows as index deltas and merges them in tiers."""

from __future__ import annotations

import warnings
from datetime import timedelta
from typing import Any

from pipeline.query.bm25 import index_config as bm25_index_config
from pipeline.settings import Settings
from pipeline.steps.embed.rows import table_names


def _btree(t, col: str) -> None:
    """A B-tree index on ``col`` of LanceDB table ``t``."""
    with warnings.catch_warnings():  # deprecated alias of create_index(config=BTree()), same index
        warnings.simplefilter("ignore")
        t.create_scalar_index(col, index_type="BTREE")


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
