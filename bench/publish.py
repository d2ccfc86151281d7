"""Benchmark for zero-copy publishing and the nightly index policy (issue 14 item 1).

A synthetic LanceDB ``chunks`` table (synthetic texts from a Zipf vocabulary, random unit 384-d vectors:
the bytes and index sizes of real chunks, not their meaning) is built and kept by the product's own code:
``pipeline.steps.embed.sync_table`` (the merge step's upsert) and ``ensure_indexes`` (BM25, B-tree,
IVF_PQ, and the nightly optimize policy). Then, each night, 1% new chunks are synced and a snapshot of
the LanceDB is published with the product's ``link_tree`` and ``write_manifest`` (hard links for Lance's
immutable files, checksums reused for shared inodes). Reported side by side in one run:

- full publish: what publish did before (``shutil.copytree`` of the LanceDB, every file checksummed);
- the first zero-copy publish (links, every file checksummed once);
- each nightly publish after +1%: wall time and the bytes it adds (files whose inode no earlier snapshot
  holds), as a share of the full publish;
- the disk of all nightly snapshots together (``du``: a hard-linked file counts once) vs as many full copies.

Only the LanceDB part of a publish is measured: the catalog copy and the probe queries of ``run_publish``
do not grow with the vectors (the catalog is a plain DuckDB copy, small next to the vectors).

    .venv/bin/python -m bench.publish [--chunks 1000000] [--nights 30] [--grow 0.01] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
DIM = 384
QUERIES = ["w3 w17", "w120", "w5 w900 w41", "w2000", "w7 w8"]
FACTS = {"name": "synthetic-384", "query_model": "synthetic-384", "dim": DIM, "key": "synthetic-384",
         "doc_format": "{text}", "path": "", "query_path": "", "truncate_dim": None, "max_seq_length": None}


def chunk_rows(start: int, stop: int, seed: int = 7) -> pa.Table:
    """Chunks start..stop-1, each the same whatever the night (seeded by its number)."""
    n = stop - start
    rng = np.random.default_rng([seed, start, stop])
    vocab = np.array([f"w{i}" for i in range(50_000)])
    words = vocab[np.minimum(rng.zipf(1.3, size=(n, 60)) - 1, len(vocab) - 1)]
    texts = [" ".join(r) for r in words]
    vec = rng.standard_normal((n, DIM)).astype(np.float32)
    vec /= np.linalg.norm(vec, axis=1, keepdims=True)
    ids = np.arange(start, stop)
    return pa.table({
        "chunk_id": pa.array([f"c{i}" for i in ids]),
        "paper_id": pa.array([f"p{i // 10}" for i in ids]),
        "kind": pa.array(["body"] * n),
        "text": pa.array(texts),
        "row_hash": pa.array([f"h{i}" for i in ids]),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vec.ravel()), DIM),
    })


def grow_to(db, settings, current: pa.Table | None, n_to: int, batch: int = 200_000) -> tuple[pa.Table, dict]:
    """Sync the table to chunks 0..n_to-1 with the product's merge (sync_table), then its index policy.
    Returns the table as synced (kept in memory: the next night only generates its new rows)."""
    from pipeline.steps.embed import ensure_indexes, sync_table

    t0 = time.perf_counter()
    if current is None:  # the first embed: one table created from every row, as sync_table does
        whole = pa.concat_tables([chunk_rows(s, min(s + batch, n_to)) for s in range(0, n_to, batch)])
        sync_table(db, "chunks", lambda: (pa.Table.from_batches([b]) for b in whole.to_batches(batch)), "chunk_id", FACTS)
    else:  # a night: the merge step upserts the whole table (only the new rows are written)
        whole = pa.concat_tables([current, chunk_rows(current.num_rows, n_to)])
        sync_table(db, "chunks", lambda: (pa.Table.from_batches([b]) for b in whole.to_batches(batch)), "chunk_id", FACTS)
    sync_s = time.perf_counter() - t0
    made = ensure_indexes(db, settings)
    return whole, {"sync_s": round(sync_s, 1), "index_s": round(time.perf_counter() - t0 - sync_s, 1),
                   "made": made.get("chunks", [])}


def fts_ms(db, queries: list[str]) -> float:
    """Median wall time of full-text searches on the working table (unindexed rows are scanned)."""
    t = db.open_table("chunks")
    times = []
    for q in queries:
        t0 = time.perf_counter()
        t.search(q, query_type="fts").limit(100).to_arrow()
        times.append(time.perf_counter() - t0)
    return round(1000 * float(np.median(times)), 1)


def inodes(folder: Path) -> dict[int, int]:
    return {st.st_ino: st.st_size for st in (p.stat() for p in folder.rglob("*") if p.is_file())}


def du_bytes(folder: Path) -> int:
    return int(subprocess.run(["du", "-sb", str(folder)], capture_output=True, text=True, check=True).stdout.split()[0])


def publish(src: Path, out: Path, previous: Path | None, copy: bool = False) -> float:
    from pipeline.steps.publish import link_tree, write_manifest

    t0 = time.perf_counter()
    out.mkdir(parents=True)
    if copy:
        shutil.copytree(src, out / "lancedb")
    else:
        link_tree(src, out / "lancedb")
    write_manifest(out, {"snapshot_id": out.name}, previous)
    os.sync()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=1_000_000)
    ap.add_argument("--nights", type=int, default=30)
    ap.add_argument("--grow", type=float, default=0.01, help="new chunks per night, as a share of the first build")
    ap.add_argument("--keep", type=Path, default=None, help="work folder (default: a temp dir, deleted)")
    args = ap.parse_args(argv)

    import lancedb

    from pipeline.settings import Settings

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-publish-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    settings = Settings(warehouse=work / "warehouse")
    src = settings.lancedb_dir
    snaps = work / "snapshots"
    db = lancedb.connect(str(src))
    load = os.getloadavg()
    print(f"building {args.chunks:,} chunks ...", flush=True)
    current, built = grow_to(db, settings, None, args.chunks)
    table_bytes = du_bytes(src)
    built["fts_ms"] = fts_ms(db, QUERIES)
    print(f"built in {built['sync_s'] + built['index_s']:.0f}s ({built}), {table_bytes / 1e9:.2f} GB", flush=True)

    full_s = publish(src, work / "full-copy", None, copy=True)
    full_bytes = du_bytes(work / "full-copy")
    shutil.rmtree(work / "full-copy")
    first_s = publish(src, snaps / "night-00", None)
    print(f"full publish (copy) {full_s:.1f}s {full_bytes / 1e9:.2f} GB; first zero-copy publish {first_s:.1f}s", flush=True)

    nights = []
    n = args.chunks
    seen = inodes(snaps / "night-00")
    prev = snaps / "night-00"
    for k in range(1, args.nights + 1):
        n_new = n + int(args.chunks * args.grow)
        current, embed = grow_to(db, settings, current, n_new)
        out = snaps / f"night-{k:02d}"
        wall = publish(src, out, prev)
        here = inodes(out)
        added = sum(size for ino, size in here.items() if ino not in seen)
        seen.update(here)
        embed["fts_ms"] = fts_ms(db, QUERIES)
        nights.append({"night": k, "chunks": n_new, "publish_s": round(wall, 2), "added_bytes": added,
                       "wall_share": round(wall / full_s, 4), "disk_share": round(added / full_bytes, 4),
                       "embed": embed})
        print(f"night {k:2d}: {n_new:,} chunks, publish {wall:.2f}s ({wall / full_s:.1%} of full), adds "
              f"{added / 1e6:.1f} MB ({added / full_bytes:.1%}); embed {embed}", flush=True)
        prev, n = out, n_new

    total = du_bytes(snaps)
    result = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "command": "python -m bench.publish " + " ".join(sys.argv[1:] if argv is None else argv),
        "load_before": [round(x, 2) for x in load], "load_after": [round(x, 2) for x in os.getloadavg()],
        "chunks": args.chunks, "table_bytes": table_bytes, "build": built, "full_publish_s": round(full_s, 2),
        "full_publish_bytes": full_bytes, "first_zero_copy_publish_s": round(first_s, 2), "nights": nights,
        "snapshots_disk_bytes": total, "full_copies_bytes": full_bytes * (args.nights + 1),
        "worst_night_wall_share": max(x["wall_share"] for x in nights) if nights else None,
        "worst_night_disk_share": max(x["disk_share"] for x in nights) if nights else None,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "publish.json").write_text(json.dumps(result, indent=1))
    print(f"{args.nights + 1} snapshots: {total / 1e9:.2f} GB on disk vs {result['full_copies_bytes'] / 1e9:.1f} GB "
          f"as full copies; worst night: wall {result['worst_night_wall_share']:.1%}, disk "
          f"{result['worst_night_disk_share']:.1%} of a full publish", flush=True)
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
