"""The graph benchmark's synthetic warehouse builder: sizes set independently, ids made by DuckDB."""

from __future__ import annotations

import numpy as np
from conftest import isolated_settings

from bench.graph import build_warehouse, synthetic_edges
from pipeline.warehouse import Warehouse


def test_build_warehouse_writes_the_generated_edges(tmp_path):
    n_works, n_corpus, n_edges, seed = 3000, 150, 20000, 7
    info = build_warehouse(tmp_path, n_works, n_corpus, n_edges, seed)
    assert (info["works"], info["corpus"], info["edges"]) == (n_works, n_corpus, n_edges)
    assert not (tmp_path / "_synthetic").exists()  # the Parquet staging files are removed

    src, dst = synthetic_edges(n_works, n_corpus, n_edges, seed=seed)
    perm = np.random.default_rng(seed + 1).permutation(n_works)
    expected = {(f"W{perm[s]:07d}", f"W{perm[d]:07d}") for s, d in zip(src, dst)}
    with Warehouse(isolated_settings(tmp_path)) as wh:
        got = set(wh.con.execute("SELECT citing_work_id, cited_work_id FROM citations").fetchall())
        works = dict(wh.con.execute("SELECT work_id, paper_id FROM works").fetchall())
    assert got == expected
    assert len(works) == n_works
    corpus = {w for w, p in works.items() if p is not None}
    assert corpus == {f"W{perm[v]:07d}" for v in range(n_corpus)}
    assert works[f"W{perm[3]:07d}"] == "P0000003"
    assert all(s in corpus or d in corpus for s, d in got)  # every edge touches the corpus
