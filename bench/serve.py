"""Load benchmark for `paperkb serve`: 20 concurrent clients search the CISI snapshot for 30 s.

Builds (once) a CISI warehouse under bench/out/cisi with the real pipeline steps, starts
`paperkb serve` on loopback in a subprocess, and drives it with `wrk` (Debian package; 20
connections cycling through the CISI queries, a Lua script reports p50/p95 and errors) or, when wrk
is absent or --python is given, a bounded Python load generator (threads with keep-alive sessions,
which itself costs CPU on this 2-core machine). Reports requests/s, p50/p95 latency, errors, and the server's CPU time per request (user + system,
workers included: the number that stays comparable when the machine is busy).

    .venv/bin/python -m bench.serve [--clients 20] [--seconds 30] [--workers N] [--expand off|rm3] [--python]
"""

from __future__ import annotations

import argparse
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
    from pipeline.collections import import_collection
    from pipeline.embed import run_embed
    from pipeline.graph import run_graph
    from pipeline.publish import run_publish

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
                ok = sess.get(base + "/api/search", params={"q": q, "k": 10}, timeout=30).status_code == 200
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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--python", action="store_true", help="use the Python load generator even when wrk is installed")
    ap.add_argument("--workers", type=int, default=None, help="server processes (paperkb serve --workers; default: its own default)")
    ap.add_argument("--cold", action="store_true", help="warm up with 20 queries only: the run's first request of each other query encodes it")
    ap.add_argument("--expand", default=None, help="query expansion the server uses (PAPERKB_QUERY_EXPAND; default: the product default)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    root = OUT / "cisi"
    build_cisi(root)

    from pipeline.qrels import read_queries

    queries = list(read_queries(DATA / "collections" / "cisi" / "CISI.QRY", "smart").values())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ)
    if args.expand:
        env["PAPERKB_QUERY_EXPAND"] = args.expand
    cmd = [sys.executable, "-m", "pipeline.cli", "--warehouse", str(root), "serve", "--port", str(port)]
    if args.workers is not None:
        cmd += ["--workers", str(args.workers)]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
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
            requests.get(base + "/api/search", params={"q": q[:300], "k": 10}, timeout=60)
        cpu0 = server_cpu_s(server.pid)
        if shutil.which("wrk") and not args.python:
            n, errors, dur, p50, p95 = run_wrk(base, queries, args.clients, args.seconds)
            load = f"wrk -t2 -c{args.clients}"
        else:
            n, errors, dur, p50, p95 = python_load(base, queries, args.clients, args.seconds)
            load = f"{args.clients} Python client threads"
        cpu = server_cpu_s(server.pid) - cpu0
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}")
    print(f"command: python -m bench.serve --clients {args.clients} --seconds {args.seconds:g}"
          + (f" --workers {args.workers}" if args.workers is not None else "") + (f" --expand {args.expand}" if args.expand else "")
          + (" --cold" if args.cold else "")
          + f"  (load: {load})")
    print(f"requests: {n}  errors: {errors}  wall: {dur:.1f}s")
    print(f"throughput: {n / dur:.1f} req/s   p50: {p50:.0f} ms   p95: {p95:.0f} ms   server CPU: {cpu / max(n, 1) * 1000:.1f} ms/request")
    return 0 if errors == 0 else 1


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
