"""Benchmark for `paperkb enrich`: 1,000 papers replayed from a local S2 stand-in.

The 1,000 papers are the 1,000 recorded citing papers in ../shared/data/s2/Paper.json (real S2
records: arXiv ids where S2 has one, else the DOI, else the CorpusId). A local HTTP server answers
``POST /paper/batch`` with those recorded records (null for ids it does not know), every
``/references`` with one page holding the recorded references of Paper.json, and every
``/citations`` with the recorded empty page. Measured, in one process:

1. fetch run: HTTP calls by kind (batch calls must be ceil(N/500)), wall time, time slept by the rate
   limiter, time inside HTTP, and the rest (processing: raw-zone writes, parsing, DuckDB upserts);
2. rerun: nothing pending -> 0 calls;
3. lost warehouse: the DuckDB file deleted, papers re-seeded, a normal (not --replay) run -> 0 calls,
   every answer is taken from the raw zone;
4. a small run at the default rate (s2_delay_s=1.0), to show the wall time follows the rate.

    .venv/bin/python -m bench.s2 [--papers 1000] [--delay 0.02] [--real-rate-papers 20]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("PAPERKB_SHARED_DATA", ROOT.parent / "shared" / "data"))
OUT = ROOT / "bench" / "out"


def lookup_of(rec: dict) -> tuple[dict, str]:
    ext = rec.get("externalIds") or {}
    if ext.get("ArXiv"):
        return {"source": "arxiv", "external_id": ext["ArXiv"], "doi": None}, f"arXiv:{ext['ArXiv']}"
    if ext.get("DOI"):
        return {"source": "bench", "external_id": f"doc-{rec['corpusId']}", "doi": ext["DOI"]}, ext["DOI"]
    return {"source": "bench", "external_id": f"CorpusId:{rec['corpusId']}", "doi": None}, f"CorpusId:{rec['corpusId']}"


def start_server(records: dict[str, bytes], references_page: bytes, empty_page: bytes):
    from pytest_httpserver import HTTPServer
    from werkzeug import Response
    import re

    server = HTTPServer(host="127.0.0.1", port=0)
    counts: dict[str, int] = {}

    def handle(request):
        path = request.path
        if path.endswith("/paper/batch"):
            counts["batch"] = counts.get("batch", 0) + 1
            ids = json.loads(request.get_data())["ids"]
            body = b"[" + b", ".join(records.get(i, b"null") for i in ids) + b"]"
            return Response(body, content_type="application/json")
        for kind, page in (("references", references_page), ("citations", empty_page)):
            if path.endswith(f"/{kind}"):
                counts[kind] = counts.get(kind, 0) + 1
                return Response(page, content_type="application/json")
        return Response(b'{"error":"unexpected"}', status=404, content_type="application/json")

    server.expect_request(re.compile(".*")).respond_with_handler(handle)
    server.start()
    return server, counts


def seed(settings, rows) -> None:
    from pipeline.warehouse import Warehouse

    with Warehouse(settings) as wh:
        wh.init()
        import pyarrow as pa

        wh.con.register("_bench_rows", pa.Table.from_pylist(
            [{k: r[k] for k in ("paper_id", "source", "external_id", "doi")} for r in rows]))
        wh.con.execute("INSERT INTO papers (paper_id, source, external_id, doi) "
                       "SELECT paper_id, source, external_id, doi FROM _bench_rows")


def timed_run(settings, counts, **kw):
    from pipeline.enrich import run_enrich

    before = dict(counts)
    t0 = time.perf_counter()
    out = run_enrich(settings, **kw)
    wall = time.perf_counter() - t0
    calls = {k: counts.get(k, 0) - before.get(k, 0) for k in set(counts) | set(before)}
    processing = wall - out["rate_wait_s"] - out["backoff_wait_s"] - out["http_s"]
    return {"wall_s": round(wall, 2), "server_calls": calls, "client_calls": out["calls"], "http_calls": out["http_calls"],
            "rate_wait_s": out["rate_wait_s"], "http_s": out["http_s"], "processing_s": round(processing, 2),
            "from_raw": out["from_raw"], "resolved": out["resolved"], "edges": out["edges"],
            "works_inserted": out["tables"]["works"]["inserted"], "papers": out["papers"]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--papers", type=int, default=1000)
    ap.add_argument("--delay", type=float, default=0.02, help="s2_delay_s for the big run (default rate is 1.0)")
    ap.add_argument("--real-rate-papers", type=int, default=20, help="papers for the run at s2_delay_s=1.0 (0 = skip)")
    args = ap.parse_args()

    import logging

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log per request
    from pipeline.settings import Settings

    paper = json.loads((DATA / "s2" / "Paper.json").read_bytes())
    recs = paper["citations"][: args.papers]
    if len(recs) < args.papers:
        raise SystemExit(f"only {len(recs)} recorded papers available")
    records, rows = {}, []
    for i, rec in enumerate(recs):
        row, lookup = lookup_of(rec)
        records[lookup] = json.dumps(rec).encode("utf-8")
        rows.append({"paper_id": row["external_id"] if row["source"] == "arxiv" else f"bench:{i}", **row})
    references_page = json.dumps({"offset": 0, "data": [{"citedPaper": r} for r in paper["references"]]}).encode()
    import yaml

    empty = yaml.safe_load((DATA / "s2" / "test_empty_paginated_results.yaml").read_text())["interactions"][0]["response"]["body"]["string"].encode()
    server, counts = start_server(records, references_page, empty)
    tmp = Path(tempfile.mkdtemp(prefix="bench-s2-"))
    results: dict = {"machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpu, python {platform.python_version()}",
                     "papers": args.papers, "delay_s": args.delay}
    try:
        base = dict(s2_api_url=server.url_for("/graph/v1").rstrip("/"), retry_max_backoff_s=1.0)
        s = Settings.load(warehouse=tmp / "wh", s2_delay_s=args.delay, **base)
        seed(s, rows)
        results["fetch"] = timed_run(s, counts)
        results["fetch"]["expected_batch_calls"] = math.ceil(args.papers / s.s2_batch_size)
        results["rerun"] = timed_run(s, counts)
        s.db_path.unlink()
        seed(s, rows)
        results["lost_warehouse_rerun"] = timed_run(s, counts)
        if args.real_rate_papers:
            s1 = Settings.load(warehouse=tmp / "wh1", s2_delay_s=1.0, **base)
            seed(s1, rows[: args.real_rate_papers])
            results["default_rate"] = {"papers": args.real_rate_papers, **timed_run(s1, counts)}
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "s2.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    f = results["fetch"]
    ok = (f["server_calls"].get("batch") == f["expected_batch_calls"]
          and results["rerun"]["http_calls"] == 0 and results["lost_warehouse_rerun"]["http_calls"] == 0)
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
