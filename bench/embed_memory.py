"""Benchmark: the embed's wall time and peak memory, a whole build and a night, side by side with another checkout.

A whole build is what a first embed, a model change or a re-chunking of everything runs: every LanceDB row read,
built and written. It takes the warehouse of ``bench.publish_night``'s synthetic papers (``--work DIR/new``, from
``bench.publish_night synthetic --papers 100000 --nights 1 --layout new --keep DIR``), removes its LanceDB tables and
builds them again with the product's sync and index policy and synthetic vectors (``bench.publish_night``'s
``synthetic_embed``), once per checkout per round, each in a fresh process (peak RSS: the child's ``ru_maxrss``). Then
it adds one night of ``--grow`` new papers, keeps the synced tables aside (hard links) and runs that night's embed from
them with each checkout. Before the night, each checkout's encoding step reads every text for the real default model
(``_shard_blocks``: read, hashed, looked up in the cache, handed out a window at a time; nothing encoded). The working
warehouse keeps the night's papers and the tables of the last run. Without
``--work``, ``--papers`` synthetic papers are built first in a temporary folder (removed after).

    .venv/bin/python -m bench.embed_memory [--work DIR/new | --papers 20000] [--old-code DIR] [--rounds 1] [--night-rounds 2]

Results: ``bench/out/embed_memory.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"


def _child(code: str, work: str) -> None:
    """One embed of ``work`` with the checkout ``code`` first on the path; prints seconds, peak RSS and rows written."""
    sys.path.insert(0, code)
    os.environ["HF_HUB_OFFLINE"] = "1"
    from bench import publish_night as pn
    from bench import publish_replay as pr

    t0 = time.perf_counter()
    written = pn.synthetic_embed(pr.settings_of(Path(work)), pn.SyntheticVectors())
    print(json.dumps({"seconds": round(time.perf_counter() - t0, 2), "written": written,
                      "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))


def _child_read(code: str, work: str) -> None:
    """The encoding step's read (``embed_shard`` without the encoding) of every text of ``work`` for the real default
    model, whose vectors the synthetic warehouse's cache does not hold: texts read, hashed, looked up and handed out
    a window at a time. Prints seconds, peak RSS and the texts handed out."""
    sys.path.insert(0, code)
    os.environ["HF_HUB_OFFLINE"] = "1"
    from bench import publish_replay as pr
    from pipeline.embedding.encoders import get_encoder
    from pipeline.steps import embed as E

    settings = pr.settings_of(Path(work))
    encoder = get_encoder(settings)
    t0 = time.perf_counter()
    texts = sum(len(h) for h, _ in E._shard_blocks(settings, encoder, None, settings.embed_checkpoint_texts * 4))
    print(json.dumps({"seconds": round(time.perf_counter() - t0, 2), "texts": texts,
                      "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))


def _run(code: Path, work: Path, child: str = "_child") -> dict:
    out = subprocess.run([sys.executable, "-m", "bench.embed_memory", child, str(code), str(work)], cwd=ROOT,
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"bench.embed_memory: the embed with {code} failed:\n{out.stderr[-3000:]}")
    return {"code": str(code), **json.loads(out.stdout.strip().splitlines()[-1])}


def _put_back(wh: Path, kept: Path) -> None:
    """The LanceDB tables and sync record as ``kept`` holds them (hard links: Lance never rewrites a file)."""
    shutil.rmtree(wh / "lancedb", ignore_errors=True)
    subprocess.run(["cp", "-al", str(kept / "lancedb"), str(wh / "lancedb")], check=True)
    shutil.copy2(kept / "lancedb_synced.json", wh / "lancedb_synced.json")


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["_child"]:
        _child(argv[1], argv[2])
        return 0
    if argv[:1] == ["_child_read"]:
        _child_read(argv[1], argv[2])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, help="the `new` folder of bench.publish_night synthetic --keep DIR; default: a "
                                              "temporary one built with --papers")
    ap.add_argument("--papers", type=int, default=20_000, help="without --work: synthetic papers to build first")
    ap.add_argument("--old-code", type=Path, help="another checkout (git worktree add DIR REF), measured side by side")
    ap.add_argument("--rounds", type=int, default=1, help="whole builds per checkout")
    ap.add_argument("--night-rounds", type=int, default=2, help="night embeds per checkout")
    ap.add_argument("--grow", type=float, default=0.01, help="the night's new papers, a share of the papers")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if a.work is not None:
        return _measure(a, a.work)
    from bench.publish_replay import build

    tmp = Path(tempfile.mkdtemp(prefix="bench-embed-memory-"))
    try:
        build(tmp, a.papers)
        return _measure(a, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _measure(a: argparse.Namespace, work: Path) -> int:
    import duckdb

    from bench.publish_night import add_papers
    from bench.publish_replay import settings_of

    settings = settings_of(work)
    wh = settings.warehouse
    if not settings.db_path.is_file():
        raise SystemExit(f"bench.embed_memory: no warehouse under {work}: build one with bench.publish_night "
                         "synthetic --keep DIR --layout new (then --work DIR/new)")
    codes = ([a.old_code.resolve()] if a.old_code else []) + [ROOT]
    load_before = os.getloadavg()[0]
    whole = []
    for r in range(a.rounds):
        for code in codes:
            shutil.rmtree(wh / "lancedb", ignore_errors=True)
            (wh / "lancedb_synced.json").unlink(missing_ok=True)
            whole.append(_run(code, work))
            print("whole build", whole[-1], flush=True)
    read = []
    for code in codes:  # before the night below: the texts are those the whole builds embedded
        read.append(_run(code, work, "_child_read"))
        print("encoding's read", read[-1], flush=True)
    con = duckdb.connect(str(settings.db_path), read_only=True)
    n = int((con.execute("SELECT count(*) FROM papers").fetchone() or (0,))[0])
    con.close()
    add_papers(settings.db_path, n, n + max(1, round(n * a.grow)))
    kept = work / "embed_memory.kept"
    shutil.rmtree(kept, ignore_errors=True)
    kept.mkdir()
    subprocess.run(["cp", "-al", str(wh / "lancedb"), str(kept / "lancedb")], check=True)
    shutil.copy2(wh / "lancedb_synced.json", kept / "lancedb_synced.json")
    night = []
    try:
        for r in range(a.night_rounds):
            for code in codes:
                _put_back(wh, kept)
                night.append(_run(code, work))
                print("night", night[-1], flush=True)
    finally:
        shutil.rmtree(kept, ignore_errors=True)
    result = {"work": str(work), "papers": n, "night_papers": max(1, round(n * a.grow)), "whole": whole,
              "encoding_read": read, "night": night, "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "load_before": load_before,
              "load_after": os.getloadavg()[0]}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "embed_memory.json").write_text(json.dumps(result, indent=2))
    print(f"results: {OUT / 'embed_memory.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
