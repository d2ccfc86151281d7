"""One-shot CLI search (issue 29): ``paperkb search QUERY -k 5`` as a person runs it, one process per search,
from start to the printed table, on the CISI and CACM snapshots, side by side with the code before.

For each collection the warehouse is built once with this checkout (import, graph, embed) and copied; the
copy is published with the code before (``--before DIR``, a checkout, or ``--baseline-ref REF``, extracted
with ``git archive``; default 752d632) and the original with this checkout, so each code searches the
snapshot it publishes. Then the two commands alternate, ``--runs`` times each, with the same queries (a
fixed list per collection, rotating), stdout to /dev/null; each run's wall time and CPU time (user +
system, from ``getrusage`` of the child) are recorded. ``--old-snapshot`` adds a third column: this
checkout's code on the snapshot the code before published (no query encoder, no stored statistics: the
fallback path). One more run of this checkout with ``-v`` gives the breakdown of the time (its ``timings:``
line).

    .venv/bin/python -m bench.cli_search [--runs 20] [--before /tmp/before-fastcli | --baseline-ref 752d632]
                                         [--collections cisi,cacm] [--old-snapshot] [--workdir bench/out/cli_search]

Results: bench/out/cli_search.json (every run, medians, p90s, ratios, load averages, the machine).
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

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("PAPERKB_SHARED_DATA", ROOT.parent / "shared" / "data"))
OUT = ROOT / "bench" / "out"

QUERIES = {
    "cisi": ["information retrieval evaluation", "citation analysis of scientific journals", "automatic indexing",
             "library catalog use by students", "relevance judgments"],
    "cacm": ["parallel sorting algorithms", "compiler optimization of loops", "time sharing operating systems",
             "numerical solution of differential equations", "garbage collection in list processing"],
}


def cli(*args: str) -> list[str]:
    """The paperkb command line (the code is the one on PYTHONPATH: see env_for)."""
    return [sys.executable, "-c", "import sys; from pipeline.cli import main; sys.exit(main())", *args]


def env_for(code: Path, cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_")}
    env.update(PYTHONPATH=str(code), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PAPERKB_EMBED_CACHE_DIR=str(cache), COLUMNS="100")
    return env


def build(name: str, work: Path, before: Path, cache: Path) -> tuple[Path, Path]:
    """(warehouse published by this checkout, its copy published by the code before), built once."""
    after_wh, before_wh = work / name / "after", work / name / "before"
    if (after_wh / "snapshots" / "CURRENT").exists() and (before_wh / "snapshots" / "CURRENT").exists():
        return after_wh, before_wh
    shutil.rmtree(work / name, ignore_errors=True)
    env = env_for(ROOT, cache)
    for step in (["import-collection", str(DATA / "collections" / name)], ["graph"], ["embed"]):
        subprocess.run(cli("--warehouse", str(after_wh), *step), env=env, cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
    shutil.copytree(after_wh, before_wh)
    subprocess.run(cli("--warehouse", str(before_wh), "publish"), env=env_for(before, cache), cwd=before,
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(cli("--warehouse", str(after_wh), "publish"), env=env, cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    return after_wh, before_wh


def one(code: Path, warehouse: Path, query: str, cache: Path, verbose: bool = False) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cli("--warehouse", str(warehouse), *(["-v"] if verbose else []), "search", query, "-k", "5"),
                       env=env_for(code, cache), cwd=code, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise SystemExit(f"search failed ({code}): {p.stderr.strip().splitlines()[-1:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out: dict = {"wall_s": round(wall, 4), "cpu_s": round(cpu, 4), "stderr_lines": len(p.stderr.splitlines())}
    if verbose:
        out["timings"] = next((ln for ln in p.stderr.splitlines() if ln.startswith("timings: ")), None)
    return out


def stats(runs: list[dict], key: str) -> dict:
    v = np.array([r[key] for r in runs])
    return {"median": round(float(np.median(v)), 3), "p90": round(float(np.percentile(v, 90)), 3),
            "min": round(float(v.min()), 3), "max": round(float(v.max()), 3)}


def machine() -> dict:
    model = ""
    try:
        model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                      if ln.startswith("model name")), "")
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu": model, "python": platform.python_version(), "platform": platform.platform()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20, help="one-shot searches per side and collection")
    ap.add_argument("--before", type=Path, default=None, help="a checkout of the code before (e.g. a git worktree)")
    ap.add_argument("--baseline-ref", default="752d632", help="else: this commit, extracted with git archive")
    ap.add_argument("--collections", default="cisi,cacm")
    ap.add_argument("--old-snapshot", action="store_true", help="also this checkout on the snapshot the code before published")
    ap.add_argument("--workdir", type=Path, default=OUT / "cli_search")
    args = ap.parse_args(argv)
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    cache = work / "vector_cache"
    tmp = None
    before = args.before
    if before is None:
        tmp = Path(tempfile.mkdtemp(prefix="bench-cli-before-"))
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline_ref], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        before = tmp
    before = before.resolve()
    result: dict = {"command": " ".join(["python -m bench.cli_search", *(argv if argv is not None else sys.argv[1:])]),
                    "machine": machine(), "before": str(before), "runs": args.runs, "collections": {}}
    try:
        for name in [c.strip() for c in args.collections.split(",") if c.strip()]:
            after_wh, before_wh = build(name, work, before, cache)
            sides = {"before": (before, before_wh), "after": (ROOT, after_wh)}
            if args.old_snapshot:
                sides["after, old snapshot"] = (ROOT, before_wh)
            for code, wh in sides.values():  # a first run each: files in the page cache, as for a person's second search
                one(code, wh, QUERIES[name][0], cache)
            load_before = os.getloadavg()
            runs: dict[str, list[dict]] = {s: [] for s in sides}
            for i in range(args.runs):
                q = QUERIES[name][i % len(QUERIES[name])]
                order = list(sides) if i % 2 == 0 else list(reversed(sides))  # who goes first alternates
                for side in order:
                    code, wh = sides[side]
                    runs[side].append({"query": q, **one(code, wh, q, cache)})
            load_after = os.getloadavg()
            verbose = one(ROOT, after_wh, QUERIES[name][0], cache, verbose=True)
            res: dict = {s: {"wall_s": stats(r, "wall_s"), "cpu_s": stats(r, "cpu_s"), "runs": r} for s, r in runs.items()}
            res["ratio_wall_median"] = round(res["before"]["wall_s"]["median"] / res["after"]["wall_s"]["median"], 2)
            res["ratio_wall_p90"] = round(res["before"]["wall_s"]["p90"] / res["after"]["wall_s"]["p90"], 2)
            res["ratio_cpu_median"] = round(res["before"]["cpu_s"]["median"] / res["after"]["cpu_s"]["median"], 2)
            res["loadavg_before"], res["loadavg_after"] = [round(x, 2) for x in load_before], [round(x, 2) for x in load_after]
            res["after_verbose"] = verbose
            result["collections"][name] = res
            line = "  ".join(f"{s}: wall median {res[s]['wall_s']['median']:.2f} s p90 {res[s]['wall_s']['p90']:.2f} s, "
                             f"CPU median {res[s]['cpu_s']['median']:.2f} s" for s in runs)
            print(f"{name}: {line}; before/after {res['ratio_wall_median']}x (median), {res['ratio_wall_p90']}x (p90); "
                  f"load {load_before[0]:.2f} -> {load_after[0]:.2f}", flush=True)
            print(f"{name}: {verbose.get('timings')}", flush=True)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "cli_search.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
