"""Benchmark: replay a raw zone of synthetic OAI-PMH records into the warehouse.

The records are the real arXivRaw records of ../shared/data/arxiv/oai/saelim2015_ListRecordsResponse.xml,
re-numbered (2501.00000, 2501.00001, ...) and written as ListRecords pages of 1,000 records (the
page size arXiv uses) through the raw zone API, so the replay reads exactly what a harvest stores.

Each replay runs in a fresh child process so its peak RSS (ru_maxrss) is its own. Reports
records/s (wall and per CPU-second) and peak memory at two sizes, first in the default settings
(commit + checkpoint every ``harvest_commit_records`` = 10,000 records, one parse process): memory
must stay flat as the record count grows. Then, for comparison, the whole run in one transaction
(``harvest_commit_records=0``) and the default with 2 parse processes; finally it replays the large
zone again and checks that the second replay writes 0 rows.

    .venv/bin/python -m bench.harvest                 # 25,000 and 100,000 records
    .venv/bin/python -m bench.harvest --sizes 5000 20000 --one-transaction 0 --workers 0
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
    ids = [m.group(1) for m in (re.search(r"<id>(.*?)</id>", r) for r in records) if m]
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


def child(warehouse: str, commit_records: int = -1, workers: int = 1) -> None:
    """Run one replay and print its numbers as JSON (peak RSS is this process's own).

    ``commit_records`` -1: the setting's default."""
    t0 = time.perf_counter()
    from pipeline.steps.harvest import run_harvest
    from pipeline.settings import Settings

    over = {"harvest_commit_records": commit_records} if commit_records >= 0 else {}
    settings = Settings.load(warehouse=Path(warehouse), categories=["*"], harvest_parse_workers=workers, **over)
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
        "commit_records": settings.harvest_commit_records, "workers": workers,
        "memory_limit": settings.harvest_memory_limit,
    }))


def baseline() -> None:
    """Peak RSS of a process that only imports the harvest and opens an empty warehouse."""
    from pipeline.settings import Settings
    from pipeline.warehouse import Warehouse

    with tempfile.TemporaryDirectory() as d:
        Warehouse(Settings.load(warehouse=Path(d))).init().close()
    print(json.dumps({"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def _run_child(*args: str) -> dict:
    load_before = os.getloadavg()[0]
    out = subprocess.run([sys.executable, "-m", "bench.harvest", *args], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["load_avg"] = (load_before, os.getloadavg()[0])  # 1-minute load average before / after (ours included)
    return r


def _line(label: str, r: dict) -> str:
    cpu = r["cpu_s"] + r["workers_cpu_s"]
    workers = f", largest parse worker {r['workers_peak_rss_mb']:.0f} MB" if r["workers"] > 1 else ""
    return (f"{r['n']:>7} records, {label}: {r['replay_s']:.1f} s wall = {r['records_in'] / r['replay_s']:,.0f} "
            f"records/s; {cpu:.1f} s CPU = {r['records_in'] / cpu:,.0f} records per CPU-second; peak RSS "
            f"{r['peak_rss_mb']:.0f} MB{workers}; papers written {r['papers_written']:,}, rejected {r['rejected']} "
            f"(load average {r['load_avg'][0]:.1f} -> {r['load_avg'][1]:.1f})")


def _fresh(wh: Path) -> None:
    for f in wh.glob("warehouse.duckdb*"):
        f.unlink()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[25_000, 100_000])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--commit-records", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--workers", type=int, default=2,
                    help="also replay with the default commits and this many parse processes (0: skip)")
    ap.add_argument("--one-transaction", type=int, default=1,
                    help="1: also replay with harvest_commit_records=0, the whole run in one transaction (0: skip)")
    ap.add_argument("--baseline", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", type=Path, default=None, help="where to build the raw zones (default: a temp dir)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "harvest.json",
                    help="write the numbers as JSON here")
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
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, python {platform.python_version()}, "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    base = _run_child("--baseline")
    print(f"baseline (imports + empty warehouse): peak RSS {base['peak_rss_mb']:.0f} MB")
    modes: dict[str, list] = {"default": []}
    if args.one_transaction:
        modes["one_transaction"] = []
    if args.workers > 1:
        modes["workers"] = []
    for n in args.sizes:
        wh = work / f"wh-{n}"
        t = time.perf_counter()
        size = build_raw_zone(wh, n)
        build_s = time.perf_counter() - t
        for mode in modes:  # each on a fresh DuckDB file beside the same raw zone
            _fresh(wh)
            extra = {"default": [], "one_transaction": ["--commit-records", "0"],
                     "workers": ["--workers", str(args.workers)]}[mode]
            r = _run_child("--child", str(wh), *extra, *([] if mode == "workers" else ["--workers", "1"]))
            r.update(n=n, raw_mb=size / 1e6, build_s=build_s, mode=mode)
            modes[mode].append(r)
            label = {"default": f"default (commit every {r['commit_records']:,}, 1 parse process, "
                                f"memory_limit {r['memory_limit'] or 'DuckDB default'})",
                     "one_transaction": "one transaction (harvest_commit_records=0)",
                     "workers": f"default commits, {args.workers} parse processes"}[mode]
            print(_line(label, r))
    # the large zone's warehouse holds the last mode's result: rebuild it in the default mode, then again
    big = work / f"wh-{args.sizes[-1]}"
    _fresh(big)
    _run_child("--child", str(big), "--workers", "1")
    again = _run_child("--child", str(big), "--workers", "1")
    again.update(n=args.sizes[-1])
    print(f"second identical replay of {args.sizes[-1]:,} (default): {again['replay_s']:.1f} s wall, "
          f"{again['records_in'] / again['replay_s']:,.0f} records/s; {again['records_in'] / again['cpu_s']:,.0f} "
          f"records per CPU-second; peak RSS {again['peak_rss_mb']:.0f} MB, "
          f"papers written {again['papers_written']}, authors new {again['authors_new']}, "
          f"versions written {again['versions_written']}, paper_authors written {again['paper_authors_written']}")
    ratios = {}
    for mode, rs in modes.items():
        if len(rs) > 1:
            a, b = rs[0], rs[-1]
            ratios[mode] = b["peak_rss_mb"] / a["peak_rss_mb"]
            print(f"memory {mode}: {a['n']:,} -> {b['n']:,} records: {a['peak_rss_mb']:.0f} -> {b['peak_rss_mb']:.0f} MB "
                  f"({b['peak_rss_mb'] - a['peak_rss_mb']:+.0f} MB, {ratios[mode]:.2f}x for {b['n'] / a['n']:.0f}x the records)")
    result = {"baseline": base, "modes": modes, "second_replay": again, "ratios": ratios,
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version()}}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result))
    if not args.workdir:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    # judged on the default mode; speed per CPU-second, as wall time on a shared machine mostly measures the neighbours
    default = modes["default"]
    ok = (all(r["records_in"] / (r["cpu_s"] + r["workers_cpu_s"]) >= 5000 for r in default)
          and again["papers_written"] == 0 and ratios.get("default", 1.0) <= 1.15)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
