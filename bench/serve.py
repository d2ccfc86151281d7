"""Load benchmark for `paperkb serve`: 20 concurrent clients search the CISI snapshot for 30 s.

Builds (once) a CISI warehouse under bench/out/cisi with the real pipeline steps, starts
`paperkb serve` on loopback in a subprocess, and drives it with a bounded Python load generator
(threads with keep-alive sessions). Reports requests/s, p50/p95 latency and errors.

    .venv/bin/python -m bench.serve [--clients 20] [--seconds 30]
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=30.0)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    root = OUT / "cisi"
    build_cisi(root)

    from pipeline.qrels import read_queries

    queries = list(read_queries(DATA / "collections" / "cisi" / "CISI.QRY", "smart").values())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "--warehouse", str(root), "serve", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if requests.get(base + "/api/health", timeout=2).ok:
                    break
            except requests.ConnectionError:
                time.sleep(0.2)
        for q in queries[:10]:  # warm-up: model loaded, caches filled
            requests.get(base + "/api/search", params={"q": q[:300], "k": 10}, timeout=60)

        lat: list[float] = []
        errors = 0
        lock = threading.Lock()
        stop_at = time.perf_counter() + args.seconds

        def client(i: int) -> None:
            nonlocal errors
            sess = requests.Session()
            j = i
            while time.perf_counter() < stop_at:
                q = queries[j % len(queries)][:300]
                j += args.clients
                t0 = time.perf_counter()
                try:
                    ok = sess.get(base + "/api/search", params={"q": q, "k": 10}, timeout=30).status_code == 200
                except requests.RequestException:
                    ok = False
                dt = time.perf_counter() - t0
                with lock:
                    lat.append(dt)
                    errors += 0 if ok else 1

        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
    finally:
        server.terminate()
        server.wait(timeout=30)
    a = np.array(lat) * 1000
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}")
    print(f"command: python -m bench.serve --clients {args.clients} --seconds {args.seconds:g}")
    print(f"requests: {len(lat)}  errors: {errors}  wall: {wall:.1f}s")
    print(f"throughput: {len(lat) / wall:.1f} req/s   p50: {np.percentile(a, 50):.0f} ms   p95: {np.percentile(a, 95):.0f} ms")
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
