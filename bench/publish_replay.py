"""Benchmark: one night's publish, replayed stage by stage (issue 31, item 1: where a night's publish spends its time).

``bench.publish_night`` times whole nights; this times one prepared night's publish again and again, so stages can be
compared side by side and a change measured on the same data. It takes a warehouse of ``bench.publish_night``'s
synthetic papers (``--work DIR``: the ``new`` folder of ``bench.publish_night synthetic --keep DIR --layout new``;
without it, ``--papers`` synthetic papers are built and published first in a temporary folder), adds one night of new
papers (``--grow`` of them, with their passages and references), runs the real ``graph`` and the synthetic embed, and
then publishes ``--rounds`` times. Before each round the night's snapshot is removed and CURRENT and the BM25 terms
kept for the next publish are put back, so every round publishes the same night against the same previous snapshot.
``--floor N`` then publishes N times with nothing new (the fixed cost of a night), and those snapshots are removed too.

Reported per round: the publish's seconds and CPU seconds (this process: DuckDB's and LanceDB's threads included),
the wall time of each stage of ``pipeline.steps.publish`` (the LanceDB side runs beside the catalog, in a thread, so
stages overlap), and the wall time of each catalog table's write (two tables at a time). The working warehouse keeps
the night's papers: a second ``--work`` run adds another night.

    .venv/bin/python -m bench.publish_replay [--work DIR] [--papers 20000] [--grow 0.01] [--rounds 3] [--floor 2]

Results: ``bench/out/publish_replay.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
# the stages of a publish timed by name (functions of pipeline.steps.publish; `verify` is pipeline.snapshots')
STAGES = ("lancedb_model", "build_catalog", "_lancedb_side", "copy_lancedb", "check_lancedb", "lance_indexes",
          "write_reader_files", "last_embed", "verify_contents", "write_snapshot_feeds", "write_manifest",
          "apply_retention", "_record_run")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class StageClock:
    """While open, the publish's stage functions (and each catalog table's write) add up their wall time; closing it
    puts the functions back."""

    def __init__(self) -> None:
        self.stages: dict[str, float] = {}
        self.tables: dict[str, float] = {}
        self._patched: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> StageClock:
        import pipeline.steps.catalog.build as catalog  # where build_catalog looks its table writers up
        import pipeline.steps.publish as publish

        for name in STAGES:
            self._wrap(publish, name, self.stages, lambda *a, **k: None)
        self._wrap(publish.snap, "verify", self.stages, lambda *a, **k: None)
        self._wrap(catalog, "write_table", self.tables, lambda con, table, *a, **k: table)
        self._wrap(catalog, "write_reordered", self.tables, lambda con, name, *a, **k: name)  # (after the tables)
        return self

    def __exit__(self, *exc: object) -> None:
        for module, name, fn in reversed(self._patched):
            setattr(module, name, fn)
        self._patched.clear()

    def _wrap(self, module, name: str, into: dict[str, float], key) -> None:
        fn = getattr(module, name)

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                k = key(*args, **kwargs) or name
                into[k] = into.get(k, 0.0) + time.perf_counter() - t0

        self._patched.append((module, name, fn))
        setattr(module, name, timed)

    def reset(self) -> None:
        self.stages.clear()
        self.tables.clear()


def build(work: Path, papers: int) -> None:
    """``papers`` synthetic papers through graph, embed and a first publish (``bench.publish_night``'s night 0)."""
    from bench.publish_night import run_synthetic

    run_synthetic(work, papers, 0, 0.0)


def settings_of(work: Path):
    from pipeline.settings import Settings

    return Settings(warehouse=work / "warehouse", snapshot_keep=1_000, snapshot_min_age_h=0)


def prepare(work: Path, grow: float) -> dict:
    """Add one night to the warehouse in ``work`` (new papers, graph, embed); keep CURRENT and the BM25 terms so that
    each round can put them back. Returns the night's facts."""
    import duckdb

    from bench.publish_night import SyntheticVectors, add_papers, synthetic_embed
    from pipeline import snapshots as snap
    from pipeline.query.bm25_stats import terms_cache
    from pipeline.steps.graph import run_graph

    settings = settings_of(work)
    current = snap.current_id(settings.snapshots_dir)
    if current is None:
        raise SystemExit(f"bench.publish_replay: no published snapshot under {settings.snapshots_dir}: "
                         "build one with bench.publish_night synthetic --keep DIR --layout new (then --work DIR/new)")
    con = duckdb.connect(str(settings.db_path), read_only=True)
    try:
        n = int((con.execute("SELECT count(*) FROM papers").fetchone() or (0,))[0])
    finally:
        con.close()
    add = max(1, round(n * grow))
    add_papers(settings.db_path, n, n + add)
    graph = run_graph(settings)
    synthetic_embed(settings, SyntheticVectors())
    keep = work / "replay"
    keep.mkdir(exist_ok=True)
    cache = terms_cache(settings.warehouse)
    if cache.is_file():
        shutil.copy2(cache, keep / cache.name)
    return {"papers_before": n, "papers_added": add, "current": current, "related_lists": graph.get("related_papers")}


def _restore(settings, current: str, made: list[str], keep: Path) -> None:
    from pipeline import snapshots as snap
    from pipeline.query.bm25_stats import terms_cache

    for sid in made:
        shutil.rmtree(settings.snapshots_dir / sid, ignore_errors=True)
    snap.write_current(settings.snapshots_dir, current)
    cache = terms_cache(settings.warehouse)
    if (keep / cache.name).is_file():
        shutil.copy2(keep / cache.name, cache)


def replay(work: Path, current: str, rounds: int, floor: int) -> list[dict]:
    """``rounds`` publishes of the prepared night, then ``floor`` publishes with nothing new; CURRENT put back after."""
    settings = settings_of(work)
    out: list[dict] = []
    with StageClock() as clock:
        _rounds(settings, clock, current, rounds, floor, work / "replay", out)
    return out


def _rounds(settings, clock: StageClock, current: str, rounds: int, floor: int, keep: Path, out: list[dict]) -> None:
    from pipeline.steps.publish import run_publish

    def one(kind: str, made: list[str]) -> None:
        clock.reset()
        cpu = _cpu()
        res = run_publish(settings)
        made.append(res["snapshot_id"])
        out.append({"kind": kind, "seconds": res["seconds"], "cpu_s": round(_cpu() - cpu, 2),
                    "bytes_new": res.get("bytes_new"), "load": round(os.getloadavg()[0], 2),
                    "stages": {k: round(v, 3) for k, v in sorted(clock.stages.items(), key=lambda kv: -kv[1])},
                    "tables": {k: round(v, 3) for k, v in sorted(clock.tables.items(), key=lambda kv: -kv[1])}})
        print(json.dumps({k: out[-1][k] for k in ("kind", "seconds", "cpu_s", "bytes_new", "load")}), flush=True)

    for _ in range(rounds):
        made: list[str] = []
        try:
            one("night", made)
        finally:
            _restore(settings, current, made, keep)
    made = []
    try:
        if floor:
            one("night, kept", made)
        for _ in range(floor):
            one("nothing new", made)
    finally:
        _restore(settings, current, made, keep)


def summary(rows: list[dict]) -> dict:
    """Medians of the rounds of each kind."""
    def median(xs: list[float]) -> float:
        xs = sorted(xs)
        return xs[len(xs) // 2] if len(xs) % 2 else round((xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2, 3)

    out: dict[str, Any] = {}
    for kind in ("night", "nothing new"):
        got = [r for r in rows if r["kind"] == kind]
        if got:
            out[kind] = {"rounds": len(got), "seconds_median": median([r["seconds"] for r in got]),
                         "seconds_range": [min(r["seconds"] for r in got), max(r["seconds"] for r in got)],
                         "cpu_s_median": median([r["cpu_s"] for r in got])}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, help="bench.publish_night's kept folder (its `new` subfolder); "
                                              "default: a temporary one built with --papers")
    ap.add_argument("--papers", type=int, default=20_000, help="without --work: synthetic papers to build first")
    ap.add_argument("--grow", type=float, default=0.01, help="the night's new papers, as a share of the papers")
    ap.add_argument("--rounds", type=int, default=3, help="publishes of the prepared night")
    ap.add_argument("--floor", type=int, default=2, help="publishes with nothing new after them")
    args = ap.parse_args(argv)
    if args.work is not None and not (args.work / "warehouse").is_dir():
        print(f"bench.publish_replay: no warehouse in {args.work} (give bench.publish_night's kept folder's `new`)",
              file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    load = os.getloadavg()
    tmp = None if args.work is not None else Path(tempfile.mkdtemp(prefix="bench-replay-"))
    work = args.work or tmp
    assert work is not None
    try:
        t0 = time.perf_counter()
        if tmp is not None:
            build(tmp, args.papers)
        night = prepare(work, args.grow)
        rows = replay(work, night["current"], args.rounds, args.floor)
        res: dict[str, Any] = {
            "machine": f"{platform.node()} ({os.cpu_count()} CPUs, {platform.machine()})",
            "command": "python -m bench.publish_replay " + " ".join(argv if argv is not None else sys.argv[1:]),
            "load_before": load, "night": night, "summary": summary(rows), "rounds": rows,
            "wall_s": round(time.perf_counter() - t0, 1)}
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "publish_replay.json").write_text(json.dumps(res, indent=1), encoding="utf-8")
    for kind, s in res["summary"].items():
        print(f"{kind}: {s['rounds']} publish(es), median {s['seconds_median']} s "
              f"({s['seconds_range'][0]}-{s['seconds_range'][1]}), CPU {s['cpu_s_median']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
