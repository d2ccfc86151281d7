"""Benchmark: replay a raw zone of synthetic OAI-PMH records into the warehouse.

The records are the real arXivRaw records of ../shared/data/arxiv/oai/saelim2015_ListRecordsResponse.xml,
re-numbered (2501.00000, 2501.00001, ...) and written as ListRecords pages of 1,000 records (the
page size arXiv uses) through the raw zone API, so the replay reads exactly what a harvest stores.

Each replay runs in a fresh child process so its peak RSS (ru_maxrss) is its own. Reports
records/s and peak memory at two sizes (memory must stay flat: the parse streams and the merge
works in parts of ``harvest_batch_records``), then replays the large zone again and checks that the
second replay writes 0 rows.

    .venv/bin/python -m bench.harvest                 # 25,000 and 100,000 records
    .venv/bin/python -m bench.harvest --sizes 5000 20000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("PAPERKB_SHARED_DATA", REPO.parent / "shared" / "data"))
TEMPLATE = SHARED / "arxiv" / "oai" / "saelim2015_ListRecordsResponse.xml"
PAGE_SIZE = 1000


def build_raw_zone(root: Path, n_records: int) -> int:
    """Write ``n_records`` re-numbered real records as OAI pages under ``root/raw``; returns bytes written."""
    from pipeline.raw import RawZone

    text = TEMPLATE.read_text(encoding="utf-8")
    head = text[: text.index("<record>")]
    records = re.findall(r"<record>.*?</record>\n", text, flags=re.S)
    ids = [re.search(r"<id>(.*?)</id>", r).group(1) for r in records]
    rz = RawZone(root / "raw")
    total = 0
    for p, start in enumerate(range(0, n_records, PAGE_SIZE), start=1):
        parts = [head]
        for k in range(start, min(start + PAGE_SIZE, n_records)):
            rec, old = records[k % len(records)], ids[k % len(ids)]
            new = f"2501.{k:05d}" if k < 100_000 else f"2502.{k - 100_000:05d}"
            parts.append(rec.replace(f"oai:arXiv.org:{old}<", f"oai:arXiv.org:{new}<").replace(f"<id>{old}</id>", f"<id>{new}</id>"))
        last = start + PAGE_SIZE >= n_records
        token = "" if last else f"bench|{start + PAGE_SIZE}"
        parts.append(f'<resumptionToken cursor="{start}" completeListSize="{n_records}">{token}</resumptionToken>\n'
                     "</ListRecords>\n</OAI-PMH>\n")
        body = "".join(parts).encode("utf-8")
        total += len(body)
        rz.write("arxiv", f"oai/bench/page-{p:05d}.xml", body, url="https://oaipmh.arxiv.org/oai",
                 params={"verb": "ListRecords", "resumptionToken": f"bench|{start}"} if start else
                 {"verb": "ListRecords", "metadataPrefix": "arXivRaw", "set": "cs"})
    return total


def child(warehouse: str, commit_records: int = 0, workers: int = 1) -> None:
    """Run one replay and print its numbers as JSON (peak RSS is this process's own)."""
    t0 = time.perf_counter()
    from pipeline.harvest import run_harvest
    from pipeline.settings import Settings

    settings = Settings.load(warehouse=Path(warehouse), categories=["*"], harvest_commit_records=commit_records,
                             harvest_parse_workers=workers)
    t1, c1 = time.perf_counter(), time.process_time()
    summary = run_harvest(settings, replay=True)
    t2, c2 = time.perf_counter(), time.process_time()
    print(json.dumps({
        "records_in": summary["records_in"], "papers_written": summary["papers_written"],
        "authors_new": summary["authors_new"], "versions_written": summary["versions_written"],
        "paper_authors_written": summary["paper_authors_written"], "rejected": summary["rejected"],
        "import_s": t1 - t0, "replay_s": t2 - t1,
        "cpu_s": c2 - c1,  # CPU time of all threads (DuckDB's too)
        "workers_cpu_s": sum(getattr(resource.getrusage(resource.RUSAGE_CHILDREN), f) for f in ("ru_utime", "ru_stime")),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "workers_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,  # largest worker
    }))


def baseline() -> None:
    """Peak RSS of a process that only imports the harvest and opens an empty warehouse."""
    from pipeline.settings import Settings
    from pipeline.warehouse import Warehouse

    with tempfile.TemporaryDirectory() as d:
        Warehouse(Settings.load(warehouse=Path(d))).init().close()
    print(json.dumps({"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def _run_child(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "bench.harvest", *args], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[25_000, 100_000])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--commit-records", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--chunked", type=int, default=10_000,
                    help="also replay in big-replay mode: harvest_commit_records=N and --big-workers parse "
                         "processes (0: skip); the default run is one transaction, one process")
    ap.add_argument("--big-workers", type=int, default=2, help="harvest_parse_workers in big-replay mode")
    ap.add_argument("--baseline", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", type=Path, default=None, help="where to build the raw zones (default: a temp dir)")
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.commit_records, args.workers)
        return 0
    if args.baseline:
        baseline()
        return 0
    if not TEMPLATE.exists():
        print(f"skipped: {TEMPLATE} not found (../shared/data beside the checkout)")
        return 0

    work = Path(args.workdir or tempfile.mkdtemp(prefix="paperkb-bench-harvest-"))
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, python {platform.python_version()}")
    base = _run_child("--baseline")
    print(f"baseline (imports + empty warehouse): peak RSS {base['peak_rss_mb']:.0f} MB")
    results, chunked = [], []
    for n in args.sizes:
        wh = work / f"wh-{n}"
        t = time.perf_counter()
        size = build_raw_zone(wh, n)
        build_s = time.perf_counter() - t
        if args.chunked:  # on a copy of the raw zone's warehouse-less folder: fresh DuckDB file
            r = _run_child("--child", str(wh), "--commit-records", str(args.chunked), "--workers", str(args.big_workers))
            r.update(n=n, load_avg=os.getloadavg()[0])
            chunked.append(r)
            print(f"{n:>7} records, big-replay mode (commit every {args.chunked:,}, {args.big_workers} parse workers): "
                  f"{r['replay_s']:.1f} s wall = {r['records_in'] / r['replay_s']:,.0f} records/s; main process "
                  f"{r['cpu_s']:.1f} s CPU + parse workers {r['workers_cpu_s']:.1f} s CPU = "
                  f"{r['records_in'] / (r['cpu_s'] + r['workers_cpu_s']):,.0f} records per CPU-second; peak RSS main process {r['peak_rss_mb']:.0f} MB, "
                  f"largest worker {r['workers_peak_rss_mb']:.0f} MB "
                  f"(load average {r['load_avg']:.1f})")
            for f in wh.glob("warehouse.duckdb*"):
                f.unlink()
        r = _run_child("--child", str(wh))
        r.update(n=n, raw_mb=size / 1e6, build_s=build_s)
        results.append(r)
        r["load_avg"] = os.getloadavg()[0]
        print(f"{n:>7} records ({r['raw_mb']:.0f} MB raw XML): replay {r['replay_s']:.1f} s wall = "
              f"{r['records_in'] / r['replay_s']:,.0f} records/s; {r['cpu_s']:.1f} s CPU = "
              f"{r['records_in'] / r['cpu_s']:,.0f} records per CPU-second; peak RSS {r['peak_rss_mb']:.0f} MB; "
              f"papers written {r['papers_written']:,}, rejected {r['rejected']} (load average {r['load_avg']:.1f})")
    big = work / f"wh-{args.sizes[-1]}"
    again = _run_child("--child", str(big))
    again["load_avg"] = os.getloadavg()[0]
    print(f"second identical replay of {args.sizes[-1]:,}: {again['replay_s']:.1f} s wall, "
          f"{again['records_in'] / again['replay_s']:,.0f} records/s; {again['records_in'] / again['cpu_s']:,.0f} "
          f"records per CPU-second; peak RSS {again['peak_rss_mb']:.0f} MB, "
          f"papers written {again['papers_written']}, authors new {again['authors_new']}, "
          f"versions written {again['versions_written']}, paper_authors written {again['paper_authors_written']}")
    if len(results) > 1:
        a, b = results[0], results[-1]
        print(f"memory growth {a['n']:,} -> {b['n']:,} records: {b['peak_rss_mb'] - a['peak_rss_mb']:+.0f} MB "
              f"({b['peak_rss_mb'] / a['peak_rss_mb']:.2f}x for {b['n'] / a['n']:.0f}x the records)")
    print(json.dumps({"baseline": base, "runs": results, "chunked_runs": chunked, "second_replay": again}))
    if not args.workdir:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    # the target is judged on CPU time: on a shared machine wall time mostly measures the neighbours
    ok = all(r["records_in"] / r["cpu_s"] >= 5000 for r in results) and again["papers_written"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
