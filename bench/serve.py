"""Load benchmark for `paperkb serve`: 20 concurrent clients search the CISI snapshot for 30 s.

Builds (once) a CISI warehouse under bench/out/cisi with the real pipeline steps, starts
`paperkb serve` on loopback in a subprocess, and drives it with `wrk` (Debian package; 20
connections cycling through the CISI queries, a Lua script reports p50/p95 and errors) or, when wrk
is absent or --python is given, a bounded Python load generator (threads with keep-alive sessions,
which itself costs CPU on this 2-core machine). Reports requests/s, p50/p95 latency, errors, and the server's CPU time per request (user + system,
workers included: the number that stays comparable when the machine is busy).

    .venv/bin/python -m bench.serve [--clients 20] [--seconds 30] [--workers N] [--expand off|rm3] [--python]
                                    [--baseline-ref 67fac46 [--rounds 3]]

With ``--baseline-ref REF`` the same benchmark also serves the code of commit REF (``git archive`` into a
temporary folder, imported through PYTHONPATH) on the same snapshot: the two alternate run by run (who goes
first alternates by round), so both see the same load, and the report gives each side's median and the
ratios (this code / REF). Results: bench/out/serve.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import tempfile
import urllib.parse
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import requests

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("PAPERKB_SHARED_DATA", ROOT.parent / "shared" / "data"))
OUT = ROOT / "bench" / "out"


def build_cisi(root: Path) -> None:
    from pipeline.settings import Settings

    settings = Settings.load(warehouse=root)
    if (settings.snapshots_dir / "CURRENT").exists():
        return
    from pipeline.sources.local_corpus import import_collection
    from pipeline.steps.embed import run_embed
    from pipeline.steps.graph import run_graph
    from pipeline.steps.publish import run_publish

    import_collection(settings, DATA / "collections" / "cisi", fmt="smart", name="cisi")
    run_graph(settings)
    run_embed(settings)
    run_publish(settings)


def server_cpu_s(pid: int) -> float:
    """User + system CPU seconds of the server and its worker processes so far."""
    import psutil

    procs = [psutil.Process(pid)]
    procs += procs[0].children(recursive=True)
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def python_load(base: str, queries: list[str], clients: int, seconds: float) -> tuple[int, int, float, float, float]:
    """Bounded Python load generator: ``clients`` threads with keep-alive sessions for ``seconds``."""
    lat: list[float] = []
    errors = 0
    lock = threading.Lock()
    stop_at = time.perf_counter() + seconds

    def client(i: int) -> None:
        nonlocal errors
        sess = requests.Session()
        j = i
        while time.perf_counter() < stop_at:
            q = queries[j % len(queries)][:300]
            j += clients
            t0 = time.perf_counter()
            try:
                ok = sess.get(base + "/api/search", params={"q": q, "k": "10"}, timeout=30).status_code == 200
            except requests.RequestException:
                ok = False
            dt = time.perf_counter() - t0
            with lock:
                lat.append(dt)
                errors += 0 if ok else 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    a = np.array(lat) * 1000
    return len(lat), errors, wall, float(np.percentile(a, 50)), float(np.percentile(a, 95))


def baseline_tree(ref: str, dest: Path) -> Path:
    """The code of git ``ref`` (e.g. 67fac46) extracted into ``dest`` with ``git archive`` (no worktree, no checkout)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def serve_once(code: Path, root: Path, queries: list[str], args, label: str) -> dict:
    """Start ``paperkb serve`` from the code in ``code`` on the warehouse ``root``, warm it, load it, stop it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(code)  # the server imports `pipeline` from this tree
    if args.expand:
        env["PAPERKB_QUERY_EXPAND"] = args.expand
    cmd = [sys.executable, "-m", "pipeline.cli", "--warehouse", str(root.resolve()), "serve", "--port", str(port)]
    if args.workers is not None:
        cmd += ["--workers", str(args.workers)]
    server = subprocess.Popen(cmd, cwd=code, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if requests.get(base + "/api/health", timeout=60).ok:
                    break
            except requests.ConnectionError:  # not listening yet
                time.sleep(0.2)
        # Warm-up: the model loaded and, unless --cold, every query seen once, as in steady traffic where
        # the searcher's query-vector cache (4,096 queries) answers repeated queries without the encoder.
        # With --cold only 20 are, so most first requests of the run also pay one encoder call each.
        warm = queries[:20] if args.cold else queries * max(1, args.workers or 1)
        for q in warm:
            requests.get(base + "/api/search", params={"q": q[:300], "k": "10"}, timeout=60)
        load_before = os.getloadavg()
        cpu0 = server_cpu_s(server.pid)
        if shutil.which("wrk") and not args.python:
            n, errors, dur, p50, p95 = run_wrk(base, queries, args.clients, args.seconds)
            load = f"wrk -t2 -c{args.clients}"
        else:
            n, errors, dur, p50, p95 = python_load(base, queries, args.clients, args.seconds)
            load = f"{args.clients} Python client threads"
        cpu = server_cpu_s(server.pid) - cpu0
        load_after = os.getloadavg()
    finally:
        server.terminate()
        server.wait(timeout=30)
    res = {"code": label, "requests": n, "errors": errors, "wall_s": round(dur, 2), "rps": round(n / dur, 1),
           "p50_ms": round(p50, 1), "p95_ms": round(p95, 1), "cpu_ms_per_request": round(cpu / max(n, 1) * 1000, 2),
           "load_generator": load, "load_avg_before": [round(x, 2) for x in load_before],
           "load_avg_after": [round(x, 2) for x in load_after]}
    print(f"  {label:>9}: {res['rps']:.1f} req/s  p50 {p50:.0f} ms  p95 {p95:.0f} ms  errors {errors}  "
          f"server CPU {res['cpu_ms_per_request']:.1f} ms/request  (load average {load_before[0]:.1f} -> {load_after[0]:.1f})",
          flush=True)
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--python", action="store_true", help="use the Python load generator even when wrk is installed")
    ap.add_argument("--workers", type=int, default=None, help="server processes (paperkb serve --workers; default: its own default)")
    ap.add_argument("--cold", action="store_true", help="warm up with 20 queries only: the run's first request of each other query encodes it")
    ap.add_argument("--expand", default=None, help="query expansion the server uses (PAPERKB_QUERY_EXPAND; default: the product default)")
    ap.add_argument("--baseline-ref", default=None,
                    help="also serve the code of this git commit (e.g. 67fac46, extracted with git archive into a temp dir) "
                         "on the same snapshot, alternating with this checkout's code, and report both and their ratios")
    ap.add_argument("--rounds", type=int, default=None, help="runs per side (default 1; 3 with --baseline-ref, alternating who goes first)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    root = OUT / "cisi"
    build_cisi(root)

    from pipeline.evaluation.qrels import read_queries

    queries = list(read_queries(DATA / "collections" / "cisi" / "CISI.QRY", "smart").values())
    rounds = args.rounds or (3 if args.baseline_ref else 1)
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}")
    print(f"command: python -m bench.serve --clients {args.clients} --seconds {args.seconds:g}"
          + (f" --workers {args.workers}" if args.workers is not None else "") + (f" --expand {args.expand}" if args.expand else "")
          + (" --cold" if args.cold else "") + (f" --baseline-ref {args.baseline_ref} --rounds {rounds}" if args.baseline_ref else ""),
          flush=True)
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="paperkb-baseline-") as tmp:
        sides = [("this code", ROOT)]
        if args.baseline_ref:
            sides.append((args.baseline_ref, baseline_tree(args.baseline_ref, Path(tmp))))
        for i in range(rounds):
            print(f"round {i + 1}/{rounds}", flush=True)
            for label, code in (sides if i % 2 == 0 else sides[::-1]):
                runs.append(serve_once(code, root, queries, args, label))
    summary: dict = {"command": sys.argv[1:], "runs": runs}
    for label, _ in sides:
        mine = [r for r in runs if r["code"] == label]
        summary[label] = {k: float(np.median([r[k] for r in mine])) for k in ("rps", "p50_ms", "p95_ms", "cpu_ms_per_request")}
        summary[label]["errors"] = sum(r["errors"] for r in mine)
    if args.baseline_ref:
        new, old = summary["this code"], summary[args.baseline_ref]
        summary["ratios"] = {"cpu_per_request": round(new["cpu_ms_per_request"] / old["cpu_ms_per_request"], 3),
                             "p95": round(new["p95_ms"] / old["p95_ms"], 3), "p50": round(new["p50_ms"] / old["p50_ms"], 3),
                             "rps": round(new["rps"] / old["rps"], 3)}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "serve.json").write_text(json.dumps(summary, indent=2))
    for label, _ in sides:
        m = summary[label]
        print(f"{label} (median of {rounds}): {m['rps']:.1f} req/s  p50 {m['p50_ms']:.0f} ms  p95 {m['p95_ms']:.0f} ms  "
              f"server CPU {m['cpu_ms_per_request']:.1f} ms/request  errors {m['errors']}")
    if args.baseline_ref:
        r = summary["ratios"]
        print(f"this code / {args.baseline_ref}: server CPU per request {r['cpu_per_request']:.2f}x, p95 {r['p95']:.2f}x, "
              f"p50 {r['p50']:.2f}x, requests/s {r['rps']:.2f}x")
    return 0 if all(summary[label]["errors"] == 0 for label, _ in sides) else 1


WRK_SCRIPT = """
local paths = {}
for line in io.lines("%s") do paths[#paths + 1] = line end
local i = 0
request = function()
  i = i %% #paths + 1
  return wrk.format("GET", paths[i])
end
done = function(summary, latency, requests)
  local errs = summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout
  io.write(string.format("WRK requests=%%d errors=%%d p50_ms=%%.1f p95_ms=%%.1f duration_s=%%.2f\\n",
    summary.requests, errs, latency:percentile(50) / 1000, latency:percentile(95) / 1000, summary.duration / 1e6))
end
"""


def run_wrk(base: str, queries: list[str], clients: int, seconds: float) -> tuple[int, int, float, float, float]:
    """20 keep-alive connections from wrk (C, two threads), each request the next CISI query."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = Path(tmp) / "paths.txt"
        paths.write_text("\n".join("/api/search?" + urllib.parse.urlencode({"q": q[:300], "k": 10}) for q in queries) + "\n")
        script = Path(tmp) / "search.lua"
        script.write_text(WRK_SCRIPT % paths)
        out = subprocess.run(["wrk", "-t2", f"-c{clients}", f"-d{int(seconds)}s", "--timeout", "30s", "-s", str(script), base],
                             capture_output=True, text=True, check=True).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("WRK "))
    vals = dict(kv.split("=") for kv in line.split()[1:])
    return int(vals["requests"]), int(vals["errors"]), float(vals["duration_s"]), float(vals["p50_ms"]), float(vals["p95_ms"])


if __name__ == "__main__":
    sys.exit(main())
