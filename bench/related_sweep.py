"""Rows of ``related`` a night's publish writes per row the graph run recomputed, with the rolling slice ended where a
published partition starts or not (issue 31, item 1).

Replays the planner (:func:`pipeline.steps.related_plan.plan_related`) night after night over keys shaped like the
nightly benchmark's (``p00000000``...: arXiv-like ids that increase with time, ``--grow`` new papers a night) and
cuts them into partitions with the catalog's own numbering (:func:`pipeline.steps.catalog.number_keys`: DuckDB's
hash boundaries, runs cut at twice the partition size). A publish writes each partition that holds a recomputed or
new key, whole; the rest are linked. No graph is built: each list is ``--top-k`` rows, and what the lists hold does
not change which partitions are written. The two variants start from the same state (seven slices computed by
seven runs, unaligned) and report the nights after the first cycle.

    .venv/bin/python -m bench.related_sweep [--papers 100000] [--nights 30] [--grow 0.01] [--refresh-runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"


def partition_starts(con, keys: list[str], size: int) -> tuple[list[str], dict[str, int]]:
    """(first key of each partition but the first, partition of each key) of ``keys`` as the catalog numbers them."""
    import pyarrow as pa

    from pipeline.steps.catalog import KEYS, number_keys

    con.register("_sweep_keys", pa.table({"paper_id": pa.array(keys, pa.string())}))
    try:
        number_keys(con, "_sweep_keys", "paper_id", size)
        part = dict(con.execute(f"SELECT k, part FROM {KEYS}").fetchall())
        firsts = [r[0] for r in con.execute(f"SELECT min(k) FROM {KEYS} GROUP BY part ORDER BY 1").fetchall()]
    finally:
        con.execute(f"DROP TABLE IF EXISTS {KEYS}")
        con.unregister("_sweep_keys")
    return firsts[1:], part


def replay(papers: int, nights: int, grow: float, refresh_runs: int, top_k: int, aligned: bool) -> dict:
    import duckdb

    from pipeline.steps.catalog import part_rows
    from pipeline.steps.related_plan import Previous, plan_related

    con = duckdb.connect()
    keys = [f"p{i:08d}" for i in range(papers)]
    per = -(-papers // refresh_runs)
    computed = {k: f"graph-{i // per:04d}" for i, k in enumerate(keys)}  # a sweep under way: slice j by run j
    size = part_rows(papers)
    starts, _ = partition_starts(con, keys, size)
    new_a_night = max(1, int(papers * grow))
    ratios, recomputed_lists, seconds = [], [], []
    for night in range(nights):
        new = [f"p{i:08d}" for i in range(len(keys), len(keys) + new_a_night)]
        ids: list[str | None] = [*keys, *new]
        degrees = {k: (1, 1) for k in keys}
        ones = np.ones(len(ids), dtype=np.int64)
        t0 = time.perf_counter()
        plan = plan_related(ids, np.arange(len(ids)), ones, ones,
                            Previous(degrees, dict(computed), top_k, starts if aligned else None), top_k, refresh_runs)
        seconds.append(time.perf_counter() - t0)
        keys = keys + new
        run = f"graph-{refresh_runs + night:04d}"
        done = [keys[v] for v in plan.rows.tolist()]
        for k in done:
            computed[k] = run
        starts, part = partition_starts(con, keys, size)  # this night's snapshot: the next night's starts
        written_parts = {part[k] for k in done}
        sizes: dict[int, int] = {}
        for p in part.values():
            sizes[p] = sizes.get(p, 0) + 1
        written = sum(sizes[p] for p in written_parts)
        if night >= refresh_runs:  # after one cycle: the state the variant leads to
            ratios.append(written / len(done))
            recomputed_lists.append(len(done))
    r = np.asarray(ratios)
    return {"aligned": aligned, "nights_reported": len(r), "partition_keys": size,
            "rows_written_per_row_recomputed": {"mean": round(float(r.mean()), 3),
                                                "p90": round(float(np.quantile(r, 0.9)), 3),
                                                "max": round(float(r.max()), 3)},
            "rows_written_a_night_mean": int(np.mean(r * np.asarray(recomputed_lists)) * top_k),
            "rows_recomputed_a_night_mean": int(np.mean(recomputed_lists) * top_k),
            "plan_seconds_mean": round(float(np.mean(seconds)), 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--papers", type=int, default=100_000)
    ap.add_argument("--nights", type=int, default=30)
    ap.add_argument("--grow", type=float, default=0.01)
    ap.add_argument("--refresh-runs", type=int, default=7)
    ap.add_argument("--top-k", type=int, default=50)
    ap.add_argument("--out", type=Path, default=OUT / "related_sweep.json")
    a = ap.parse_args()
    res = {"machine": f"{platform.machine()}, {os.cpu_count()} cores", "papers": a.papers, "nights": a.nights,
           "grow": a.grow, "refresh_runs": a.refresh_runs, "top_k": a.top_k,
           "runs": [replay(a.papers, a.nights, a.grow, a.refresh_runs, a.top_k, aligned) for aligned in (False, True)]}
    for r in res["runs"]:
        w = r["rows_written_per_row_recomputed"]
        print(f"{'aligned' if r['aligned'] else 'not aligned'}: rows written per row recomputed mean {w['mean']}, "
              f"p90 {w['p90']}, max {w['max']}; a night recomputes {r['rows_recomputed_a_night_mean']:,} rows and "
              f"writes {r['rows_written_a_night_mean']:,}", flush=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
