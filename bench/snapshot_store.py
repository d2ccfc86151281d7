"""Benchmark for snapshots on object storage (issue 31, item 2): what a night uploads, and search from the store.

A real CISI warehouse (the first 99% of CISI.ALL, then the last 1% as a second night) is imported, its graph
computed, embedded and published with ``PAPERKB_SNAPSHOT_STORE`` pointing at an S3-compatible server on
loopback (moto's server mode; ``--endpoint URL`` for another one, with the AWS settings from the environment).
Reported:

- per night: objects and bytes uploaded (of the snapshot's total) and the HTTP requests the store received
  (counted by the client: every LIST, GET, PUT, DELETE, retries included), for the upload alone and with the
  store's retention;
- a reader's first materialisation (cold cache) and the second night's (only the new objects);
- search p50/p95 over the CISI queries on the local snapshot and on the same snapshot opened from the store
  (materialised into the local cache), interleaved query by query in one process.

    .venv/bin/python -m bench.snapshot_store [--papers 1460] [--grow 0.01] [--queries 76] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
DATA = Path(os.environ.get("PAPERKB_SHARED_DATA", ROOT.parent / "shared" / "data"))


def _pct(xs: list[float], p: float) -> float:
    return round(float(np.percentile(xs, p)), 1) if xs else float("nan")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def store_bucket(endpoint: str | None, prefix: str = "nightly"):
    """A fresh bucket on ``endpoint`` (None: moto's S3 server started on loopback, with its own credentials):
    (the moto server or None, ``s3://bucket/prefix``). Sets ``AWS_ENDPOINT_URL`` for this process and its children."""
    import logging

    server = None
    if endpoint is None:
        from moto.server import ThreadedMotoServer

        port = _free_port()
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        endpoint = f"http://127.0.0.1:{port}"
        os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    import boto3

    bucket = f"paperkb-bench-{uuid.uuid4().hex[:8]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    return server, f"s3://{bucket}/{prefix}"


def _night(settings, n: int) -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    from embed_helpers import import_cisi_subset

    from pipeline.steps.embed import run_embed
    from pipeline.steps.graph import run_graph
    from pipeline.steps.publish import run_publish

    import_cisi_subset(settings, DATA, n)
    run_graph(settings)
    run_embed(settings)
    t0 = time.perf_counter()
    r = run_publish(settings)
    r["publish_s"] = round(time.perf_counter() - t0, 2)
    return r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--papers", type=int, default=1460, help="CISI papers after the second night (CISI has 1460)")
    ap.add_argument("--grow", type=float, default=0.01, help="share of the papers that the second night adds")
    ap.add_argument("--queries", type=int, default=76, help="CISI queries searched (76 judged)")
    ap.add_argument("--rounds", type=int, default=3, help="times each query is searched on each side")
    ap.add_argument("--endpoint", default=None, help="an S3-compatible endpoint instead of moto on loopback")
    ap.add_argument("--workdir", type=Path, default=None, help="keep the warehouse here (default: a temp folder)")
    args = ap.parse_args(argv)
    load_start = os.getloadavg()

    import logging

    logging.basicConfig(level=logging.WARNING)
    server, url = store_bucket(args.endpoint)
    args.endpoint = os.environ["AWS_ENDPOINT_URL"]

    from pipeline.evaluation.qrels import read_queries
    from pipeline.query import Searcher, open_snapshot
    from pipeline.settings import Settings
    from pipeline.store.materialise import materialise
    from pipeline.store.s3 import S3Store

    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-store-"))
    cache = OUT / "snapshot_store" / "vector_cache"
    cache.mkdir(parents=True, exist_ok=True)
    settings = Settings(warehouse=work / "warehouse", embed_cache_dir=cache, snapshot_store=url, snapshot_keep=5,
                        snapshot_min_age_h=0, snapshot_cache=work / "reader-cache")
    first = args.papers - max(1, round(args.papers * args.grow))
    nights = []
    for n in (first, args.papers):
        r = _night(settings, n)
        st = r["store"]
        nights.append({"papers": n, "snapshot_id": r["snapshot_id"], "publish_s": r["publish_s"],
                       "objects": st["objects"], "objects_uploaded": st["objects_uploaded"],
                       "bytes_total": st["bytes_total"], "bytes_uploaded": st["bytes_uploaded"],
                       "upload_share": round(st["bytes_uploaded"] / st["bytes_total"], 4),
                       "requests_upload": st["requests"], "requests_by_operation": st["requests_by_operation"],
                       "requests_with_retention": st["requests_total"],
                       "store_s": st["seconds"]})
        print(f"night {len(nights)}: {n} papers, uploaded {st['objects_uploaded']}/{st['objects']} objects, "
              f"{st['bytes_uploaded'] / 1e6:.2f}/{st['bytes_total'] / 1e6:.2f} MB, {st['requests']} requests "
              f"({st['requests_total']} with retention), {st['seconds']} s", flush=True)
    store = S3Store(url)
    reader_cache = work / "cold-reader"
    t0 = time.perf_counter()
    _, cold = materialise(store, nights[0]["snapshot_id"], reader_cache)
    cold["seconds"] = round(time.perf_counter() - t0, 2)
    _, warm = materialise(store, nights[1]["snapshot_id"], reader_cache)
    print(f"reader: night 1 materialised cold {cold}, night 2 after it {warm}", flush=True)

    queries = [q[:300] for q in read_queries(DATA / "collections" / "cisi" / "CISI.QRY", "smart").values()][: args.queries]
    local = Searcher(open_snapshot(settings), settings).warm()
    t0 = time.perf_counter()
    remote_snap = open_snapshot(settings, url)
    open_s = time.perf_counter() - t0
    remote = Searcher(remote_snap, settings).warm()
    same = all([r.paper_id for r in local.search(q).results] == [r.paper_id for r in remote.search(q).results]
               for q in queries[:10])
    times: dict[str, list[float]] = {"local": [], "store": []}
    for _ in range(args.rounds):
        for q in queries:
            for name, s in (("local", local), ("store", remote)) if len(times["local"]) % 2 else (("store", remote), ("local", local)):
                t = time.perf_counter()
                s.search(q)
                times[name].append((time.perf_counter() - t) * 1000)
    search: dict[str, Any] = {name: {"p50_ms": _pct(v, 50), "p95_ms": _pct(v, 95), "n": len(v)} for name, v in times.items()}
    search["store_open_s"] = round(open_s, 2)
    search["same_rankings_first_10_queries"] = same
    remote_snap.close()
    local.snap.close()
    print(f"search: local p50 {search['local']['p50_ms']} ms p95 {search['local']['p95_ms']} ms; from the store "
          f"p50 {search['store']['p50_ms']} ms p95 {search['store']['p95_ms']} ms; same rankings: {same}", flush=True)
    res = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                       "loadavg_start": load_start, "loadavg_end": os.getloadavg()},
           "endpoint": "moto server on loopback" if server is not None else args.endpoint,
           "nights": nights, "reader": {"cold": cold, "second_night": warm}, "search": search}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "snapshot_store.json").write_text(json.dumps(res, indent=1))
    print(f"wrote {OUT / 'snapshot_store.json'}")
    if server is not None:
        server.stop()
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
