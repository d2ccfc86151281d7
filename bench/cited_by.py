"""Benchmark: which papers cite a work, from ``citations`` and from ``cited_by``, as the citation graph grows.

A snapshot's ``citations`` is cut into partitions by the citing work, so a lookup by the work cited reads that column of
every citation, and its time grows with the graph. ``cited_by`` (:data:`pipeline.steps.catalog.REORDERED`) holds the
same rows in the same partitions, each file sorted by the work cited in small row groups, so a lookup reads about one
row group a file. For each size this builds a warehouse of synthetic citations (``--edges`` of them: 20 references a
citing work, cited works drawn with a long tail, as real ones are), publishes the table with the product's own
``write_table`` and ``write_reordered``, and times, side by side in one process (interleaved, median of ``--lookups``
works: one cited once, one cited often, ...), ``SELECT citing_work_id ... WHERE cited_work_id = ?`` through each view
of a catalog opened as readers open it (:func:`pipeline.snapshots.open_catalog`'s settings), and each write's CPU.

    .venv/bin/python -m bench.cited_by [--edges 2000000,8000000] [--lookups 40]

``--publish WAREHOUSE`` times full publishes of a warehouse (``bench.publish_night``'s: no previous snapshot, as a
first publish) with and without ``cited_by``, ``--rounds`` of each, interleaved; the warehouse's snapshots are put back
after.

``--snapshot DIR`` instead times what a paper page reads (``pipeline.query.reading``: a paper's facts, its citing
papers, Connected Papers' prior and derivative works) for ``--papers`` of a published snapshot with ``cited_by``,
side by side with a copy of its catalog without that view (as published before it: lookups by cited work read
``citations``), each with and without DuckDB's Parquet metadata cache, rounds interleaved.

Results: ``bench/out/cited_by.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
REFS = 20  # references a citing work


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def build(work: Path, edges: int):
    """A warehouse holding ``edges`` synthetic citations (``REFS`` a citing work; the work cited: an earlier work,
    squared towards the oldest, so a few are cited thousands of times and most a few times)."""
    from pipeline.settings import Settings
    from pipeline.warehouse import Warehouse, scalar

    settings = Settings(warehouse=work / "warehouse")
    with Warehouse(settings) as wh:
        wh.init()
    import duckdb

    citing = edges // REFS
    with duckdb.connect(str(settings.db_path)) as con:
        con.execute(f"""
            INSERT INTO citations
            SELECT DISTINCT ON (citing, cited) citing, cited, hash(citing, cited) % 7 = 0, NULL, 's2', NULL
            FROM (SELECT printf('W%09d', c) AS citing,
                         printf('W%09d', CAST(floor(pow(hash(c, r) % 1000000 / 1000000.0, 2) * greatest(c, 1)) AS BIGINT))
                             AS cited
                  FROM range({citing}) a(c), range({REFS}) b(r))""")
        n = scalar(con, "SELECT count(*) FROM citations")
    return settings, n


def publish(settings, out: Path) -> dict:
    """``citations`` and ``cited_by`` written as a publish writes them (no previous snapshot), with the CPU of each."""
    import duckdb

    from pipeline import snapshots as snap
    from pipeline.steps import catalog

    con = duckdb.connect()
    con.execute(f"ATTACH '{snap.sql_quote(str(settings.db_path))}' AS wh (READ_ONLY)")
    c0, t0 = _cpu(), time.perf_counter()
    written = catalog.write_table(con, "citations", out, None)
    c1, t1 = _cpu(), time.perf_counter()
    again = catalog.write_reordered(con, "cited_by", "citations", "cited_work_id", out, None, written)
    c2, t2 = _cpu(), time.perf_counter()
    con.close()
    with duckdb.connect(str(out / snap.CATALOG)) as views:
        views.execute(f"SET file_search_path = '{snap.sql_quote(str(out))}'")
        for t in ("citations", "cited_by"):
            views.execute(catalog.view_sql(t))

    def size(t: str) -> int:
        return sum(f.stat().st_size for f in (out / catalog.FOLDER / t).iterdir())

    return {"files": written["written"], "citations_write_s": round(t1 - t0, 2), "citations_write_cpu_s": round(c1 - c0, 2),
            "cited_by_write_s": round(t2 - t1, 2), "cited_by_write_cpu_s": round(c2 - c1, 2), "files_cited_by": again["written"],
            "citations_mb": round(size("citations") / 1e6, 1), "cited_by_mb": round(size("cited_by") / 1e6, 1)}


def lookups(folder: Path, n: int) -> dict:
    """Median ms of a lookup by cited work through each view, interleaved, over ``n`` works spread over how often
    they are cited."""
    from pipeline import snapshots as snap

    con = snap.open_catalog(folder)
    try:
        works = [r[0] for r in con.execute(f"""
            SELECT min(cited_work_id) FROM (
                SELECT cited_work_id, ntile({n}) OVER (ORDER BY count(*), cited_work_id) AS tile
                FROM citations GROUP BY 1)
            GROUP BY tile ORDER BY tile""").fetchall()]
        times: dict[str, list[float]] = {"citations": [], "cited_by": []}
        for table in times:  # warm: footers cached, pages read once
            con.execute(f"SELECT count(*) FROM {table} WHERE cited_work_id = ?", [works[0]]).fetchall()
        for w in works:
            found = {}
            for table in times:
                t = time.perf_counter()
                found[table] = sorted(r[0] for r in con.execute(
                    f"SELECT citing_work_id FROM {table} WHERE cited_work_id = ?", [w]).fetchall())
                times[table].append((time.perf_counter() - t) * 1000)
            assert found["citations"] == found["cited_by"], w  # the same papers either way
        return {"works": len(works), **{f"{t}_ms_median": round(statistics.median(v), 2) for t, v in times.items()},
                **{f"{t}_ms_p90": round(statistics.quantiles(v, n=10)[-1], 2) for t, v in times.items()}}
    finally:
        con.close()


def page_reads(folder: Path, papers: list[str], rounds: int) -> dict:
    """Median ms of each page read for ``papers`` in the snapshot ``folder``, four ways (see the module doc)."""
    import duckdb

    from pipeline import snapshots as snap
    from pipeline.query import reading

    work = Path(tempfile.mkdtemp(prefix="bench-cited-by-page-"))
    try:
        ways = {}
        for name in ("cited_by", "citations"):
            for cache in (True, False):
                # a copy each (the files hard-linked): DuckDB shares one database, and its settings, per path
                where = work / f"{name}-{cache}" / folder.name
                shutil.copytree(folder / "catalog", where / "catalog", copy_function=os.link)
                shutil.copy(folder / snap.CATALOG, where / snap.CATALOG)
                if name == "citations":
                    with duckdb.connect(str(where / snap.CATALOG)) as con:
                        con.execute("DROP VIEW cited_by")
                con = snap.open_catalog(where)
                con.execute(f"SET GLOBAL parquet_metadata_cache = {'true' if cache else 'false'}")
                ways[f"{name}, metadata cache {'on' if cache else 'off'}"] = con
        reads = {"paper_facts": lambda con, p: reading.paper_facts(con, p),
                 "cited_by": lambda con, p: reading.cited_by(con, p),
                 "prior_and_derivative": lambda con, p: reading.prior_and_derivative(
                     con, [p, *[r[0] for r in con.execute("SELECT related_work_id FROM related WHERE paper_id = ? "
                                                           "ORDER BY rank LIMIT 20", [p]).fetchall()]], exclude=[p])}
        times: dict[str, dict[str, list[float]]] = {w: {r: [] for r in reads} for w in ways}
        answers: dict[tuple, Any] = {}
        for rnd in range(rounds + 1):  # the first round warms each way (pages read, footers cached)
            for p in papers:
                for read, fn in reads.items():
                    for way, con in ways.items():
                        t = time.perf_counter()
                        got = fn(con, p)
                        if rnd:
                            times[way][read].append((time.perf_counter() - t) * 1000)
                        assert answers.setdefault((read, p), got) == got, (read, p, way)  # the same answer every way
        for con in ways.values():
            con.close()
        return {way: {read: round(statistics.median(v), 1) for read, v in by.items()} for way, by in times.items()}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def full_publishes(warehouse: Path, rounds: int) -> dict:
    """Seconds and CPU of full publishes of ``warehouse`` with and without ``cited_by`` (see the module doc)."""
    from bench.publish_night import publish_from_scratch
    from pipeline.settings import Settings
    from pipeline.steps import catalog
    from pipeline.steps.publish import run_publish

    settings = Settings(warehouse=warehouse, snapshot_keep=1_000, snapshot_min_age_h=0)
    reordered = dict(catalog.REORDERED)
    got: dict[str, list[tuple[float, float]]] = {"with cited_by": [], "without": []}
    try:
        for _ in range(rounds):
            for way in got:
                catalog.REORDERED = reordered if way == "with cited_by" else {}
                c0 = _cpu()
                seconds = publish_from_scratch(settings, run_publish)
                got[way].append((seconds, round(_cpu() - c0, 2)))
                print(json.dumps({"way": way, "seconds": seconds, "cpu_s": got[way][-1][1]}), flush=True)
    finally:
        catalog.REORDERED = reordered
    return {way: {"seconds": [s for s, _ in v], "cpu_s": [c for _, c in v]} for way, v in got.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--edges", default="2000000,8000000", help="citation counts to build, comma-separated")
    ap.add_argument("--lookups", type=int, default=40)
    ap.add_argument("--snapshot", type=Path, help="a published snapshot folder: time a paper page's reads instead")
    ap.add_argument("--papers", default="", help="with --snapshot: paper ids, comma-separated (default: 5 of them)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--publish", type=Path, help="a warehouse folder: time full publishes with and without cited_by")
    args = ap.parse_args(argv)
    if args.publish:
        result = {"warehouse": str(args.publish), "load_avg": os.getloadavg(), "rounds": full_publishes(args.publish, args.rounds)}
        print(json.dumps(result, indent=1))
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "cited_by_publish.json").write_text(json.dumps(result, indent=1))
        return 0
    if args.snapshot:
        from pipeline import snapshots as snap

        con = snap.open_catalog(args.snapshot)
        papers = [p for p in args.papers.split(",") if p] or [r[0] for r in con.execute(
            "SELECT paper_id FROM paper_metrics WHERE paper_id IS NOT NULL ORDER BY hash(paper_id) LIMIT 5").fetchall()]
        con.close()
        result = {"snapshot": str(args.snapshot), "papers": papers, "load_avg": os.getloadavg(),
                  "median_ms": page_reads(args.snapshot, papers, args.rounds)}
        print(json.dumps(result, indent=1))
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "cited_by_page.json").write_text(json.dumps(result, indent=1))
        return 0
    rows = []
    for edges in [int(x) for x in args.edges.split(",")]:
        work = Path(tempfile.mkdtemp(prefix="bench-cited-by-"))
        try:
            settings, n = build(work, edges)
            out = work / "snap"
            out.mkdir()
            row = {"edges": n, **publish(settings, out), **lookups(out, args.lookups)}
            rows.append(row)
            print(json.dumps(row), flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    result = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "load_avg": os.getloadavg(),
              "python": sys.version.split()[0], "sizes": rows}
    (OUT / "cited_by.json").write_text(json.dumps(result, indent=1))
    print(f"results: {OUT / 'cited_by.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
