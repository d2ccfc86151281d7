"""What a night's index maintenance adds to a LanceDB table, tiered merges vs the full merge (issue 31, item 1).

A chunks-shaped table (384-d unit vectors, passage text, ``paper_id``, ``kind``) with the embed's own indexes
(``ensure_indexes``: IVF_PQ on the vector, BM25 full text, B-trees), then ``--nights`` nights that each add
``--grow`` of the table's rows and run ``ensure_indexes`` again (its ``maintain_indexes``), once per
``embed_index_merge_fan_in`` given (0 = the code before tiers: a new delta a night, every segment merged once past ``embed_index_max_deltas``). Bytes a
night adds = the sizes of the files the table did not hold before (Lance never rewrites a file in place),
which is what the night's snapshot adds for this table. Each configuration builds its own table from the
same seed, in turn.

    .venv/bin/python -m bench.index_merge [--rows 100000] [--nights 30] [--grow 0.01] [--fan-in 4,0]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"


def _batch(rng: np.random.Generator, words: np.ndarray, start: int, n: int) -> pa.Table:
    v = rng.standard_normal((n, 384)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    ids = np.arange(start, start + n)
    return pa.table({
        "chunk_id": pa.array([f"c{i}" for i in ids]), "paper_id": pa.array([f"p{i // 10}" for i in ids]),
        "kind": pa.array(["body"] * n), "text": pa.array([" ".join(rng.choice(words, 80)) for _ in range(n)]),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(v.ravel()), 384)})


def _files(table_dir: Path) -> dict[str, int]:
    return {str(p.relative_to(table_dir)): p.stat().st_size for p in table_dir.rglob("*")
            if p.is_file() and p.relative_to(table_dir).parts[0] in ("data", "_indices", "_deletions")}


def run(fan_in: int, rows: int, nights: int, grow: float, max_deltas: int, work: Path) -> dict:
    import lancedb

    from pipeline.settings import Settings
    from pipeline.steps.embed import ensure_indexes, index_deltas

    settings = Settings(warehouse=work / "warehouse", embed_index_merge_fan_in=fan_in, embed_index_max_deltas=max_deltas,
                        embed_vector_index_min_rows=0)
    rng = np.random.default_rng(7)
    words = np.array([f"term{i}" for i in range(20_000)])
    db = lancedb.connect(str(work / "lancedb"))
    t = db.create_table("chunks", _batch(rng, words, 0, rows))
    ensure_indexes(db, settings)  # the embed's own indexes: IVF_PQ, BM25 full text, B-trees
    t = db.open_table("chunks")
    table_dir = work / "lancedb" / "chunks.lance"
    before = _files(table_dir)
    nights_out: list[dict[str, Any]] = []
    out: dict[str, Any] = {"fan_in": fan_in, "first_bytes": sum(before.values()), "nights": nights_out}
    total = rows
    for night in range(1, nights + 1):
        n = int(round(total * grow))
        t.add(_batch(rng, words, total, n))
        total += n
        t0 = time.perf_counter()
        done = " ".join(ensure_indexes(db, settings)["chunks"])  # what the embed runs after its sync
        secs = time.perf_counter() - t0
        t = db.open_table("chunks")  # ensure_indexes pruned the version this handle read
        now = _files(table_dir)
        added = sum(size for name, size in now.items() if name not in before)
        deltas = {name: len(d) for name, (d, _) in index_deltas(t.to_lance()).items()}
        nights_out.append({"night": night, "rows": n, "added_bytes": added, "table_bytes": sum(now.values()),
                              "added_pct_of_table": round(100 * added / sum(now.values()), 2),
                              "deltas": max(deltas.values()), "done": done, "maintain_s": round(secs, 2)})
        print(f"fan-in {fan_in} night {night:2d}: +{n} rows, adds {added / 1e6:7.2f} MB "
              f"({nights_out[-1]['added_pct_of_table']:5.2f}% of {sum(now.values()) / 1e6:.0f} MB), "
              f"{max(deltas.values())} deltas, {secs:.1f} s: {done}", flush=True)
        before = now
    pct = [x["added_pct_of_table"] for x in nights_out]
    out.update(max_added_pct=max(pct), mean_added_pct=round(sum(pct) / len(pct), 2),
               full_merges=sum("compacted" in (x["done"] or "") for x in nights_out))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000, help="rows before the first night")
    ap.add_argument("--nights", type=int, default=30)
    ap.add_argument("--grow", type=float, default=0.01, help="new rows a night, as a share of the table")
    ap.add_argument("--fan-in", default="4,0", help="embed_index_merge_fan_in values to compare (0 = no tiers)")
    ap.add_argument("--max-deltas", type=int, default=20)
    ap.add_argument("--out", type=Path, default=OUT / "index_merge.json")
    a = ap.parse_args()
    res: dict = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_before": os.getloadavg()},
                 "command": f"--rows {a.rows} --nights {a.nights} --grow {a.grow} --fan-in {a.fan_in} --max-deltas {a.max_deltas}",
                 "runs": []}
    for fan_in in [int(x) for x in a.fan_in.split(",") if x.strip()]:
        work = Path(tempfile.mkdtemp(prefix=f"bench-index-merge-{fan_in}-"))
        try:
            res["runs"].append(run(fan_in, a.rows, a.nights, a.grow, a.max_deltas, work))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    res["machine"]["load_after"] = os.getloadavg()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1))
    for r in res["runs"]:
        print(f"fan-in {r['fan_in']}: a night adds at most {r['max_added_pct']}% of the table (mean {r['mean_added_pct']}%), "
              f"{r['full_merges']} full merges in {a.nights} nights")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
