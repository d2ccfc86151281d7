"""Tool-call latency of `paperkb mcp` over stdio, side by side with the same search over `/api/search`.

Builds (once) the CISI snapshot of bench.serve (bench/out/cisi), then, round by round and alternating who
goes first: starts `paperkb mcp` as an agent host does (a subprocess, spoken to over its stdin/stdout by
the official SDK's client) and `paperkb serve` on loopback (a keep-alive requests session), warms each
with every CISI query once, and times one agent's calls in sequence: the 112 CISI queries (cut to 300
characters), k=10, the server's default search (rm3), each query ``--repeat`` times. Reports p50/p95/mean
per side, the ratio, each server's CPU per call (user + system from psutil: comparable when the machine is
busy), the client's (this process: the MCP client validates every answer against the tool's output
schema) and the load average. Results: bench/out/mcp.json.

    .venv/bin/python -m bench.mcp [--rounds 3] [--repeat 2] [--cold]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import numpy as np
import requests

from bench.serve import DATA, OUT, ROOT, build_cisi, server_cpu_s


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONPATH=str(ROOT))
    return env


def _summary(side: str, lat_s: list[float], cpu_s: float, client_cpu_s: float, load_before, load_after) -> dict:
    ms = np.array(lat_s) * 1000
    res = {"side": side, "calls": len(ms), "p50_ms": round(float(np.percentile(ms, 50)), 1),
           "p95_ms": round(float(np.percentile(ms, 95)), 1), "mean_ms": round(float(ms.mean()), 1),
           "cpu_ms_per_call": round(cpu_s / max(len(ms), 1) * 1000, 2),
           "client_cpu_ms_per_call": round(client_cpu_s / max(len(ms), 1) * 1000, 2),
           "load_avg_before": [round(x, 2) for x in load_before], "load_avg_after": [round(x, 2) for x in load_after]}
    print(f"  {side:>13}: p50 {res['p50_ms']:.1f} ms  p95 {res['p95_ms']:.1f} ms  mean {res['mean_ms']:.1f} ms  "
          f"server CPU {res['cpu_ms_per_call']:.1f} ms/call  client CPU {res['client_cpu_ms_per_call']:.1f} ms/call  "
          f"({len(ms)} calls, load average "
          f"{load_before[0]:.1f} -> {load_after[0]:.1f})", flush=True)
    return res


def mcp_once(root: Path, queries: list[str], warm: list[str], repeat: int) -> dict:
    """`paperkb mcp` over stdio: the SDK's client starts it, warms it, then calls `search` once per query in turn."""
    import psutil
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    cmd = [sys.executable, "-m", "pipeline.cli", "--warehouse", str(root.resolve()), "mcp"]
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=_env(), cwd=str(ROOT))

    async def run() -> dict:
        with open(os.devnull, "w") as devnull:
            # the server's log lines and progress bars on stderr would cost the client terminal time
            async with Client(stdio_client(params, errlog=devnull)) as c:
                server = _server_process(psutil.Process(os.getpid()))
                for q in warm:
                    r = await c.call_tool("search", {"query": q, "k": 10})
                    assert not r.is_error, r.content
                load_before, cpu0, client0 = os.getloadavg(), server_cpu_s(server.pid), time.process_time()
                lat = []
                for _ in range(repeat):
                    for q in queries:
                        t0 = time.perf_counter()
                        r = await c.call_tool("search", {"query": q, "k": 10})
                        lat.append(time.perf_counter() - t0)
                        assert not r.is_error and len(r.structured_content["results"]) == 10, r.content
                client = time.process_time() - client0
                cpu = server_cpu_s(server.pid) - cpu0
                return _summary("mcp (stdio)", lat, cpu, client, load_before, os.getloadavg())

    return anyio.run(run)


def _server_process(me):
    """The `paperkb mcp` child of this process (started by stdio_client)."""
    for child in me.children(recursive=True):
        if "pipeline.cli" in " ".join(child.cmdline()):
            return child
    raise RuntimeError("paperkb mcp is not running")


def serve_once(root: Path, queries: list[str], warm: list[str], repeat: int) -> dict:
    """`paperkb serve` on loopback: one keep-alive session calls /api/search once per query in turn."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "pipeline.cli", "--warehouse", str(root.resolve()), "serve", "--port", str(port)]
    server = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
    base = f"http://127.0.0.1:{port}"
    try:
        session = requests.Session()
        for _ in range(3000):
            try:
                if session.get(base + "/api/health", timeout=60).ok:
                    break
            except requests.ConnectionError:
                time.sleep(0.2)
        for q in warm:
            session.get(base + "/api/search", params={"q": q, "k": "10"}, timeout=60).raise_for_status()
        load_before, cpu0, client0 = os.getloadavg(), server_cpu_s(server.pid), time.process_time()
        lat = []
        for _ in range(repeat):
            for q in queries:
                t0 = time.perf_counter()
                r = session.get(base + "/api/search", params={"q": q, "k": "10"}, timeout=60)
                body = r.json()
                lat.append(time.perf_counter() - t0)
                assert r.ok and len(body["results"]) == 10, r.text[:200]
        client = time.process_time() - client0
        cpu = server_cpu_s(server.pid) - cpu0
        return _summary("/api/search", lat, cpu, client, load_before, os.getloadavg())
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3, help="runs per side, alternating who goes first")
    ap.add_argument("--repeat", type=int, default=2, help="times each of the 112 queries is timed per run")
    ap.add_argument("--cold", action="store_true", help="warm up with 20 queries only (the others pay the query encoder once)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    root = OUT / "cisi"
    build_cisi(root)

    from pipeline.evaluation.qrels import read_queries

    queries = [q[:300] for q in read_queries(DATA / "collections" / "cisi" / "CISI.QRY", "smart").values()]
    warm = queries[:20] if args.cold else queries
    machine = f"{platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}"
    command = f"python -m bench.mcp --rounds {args.rounds} --repeat {args.repeat}" + (" --cold" if args.cold else "")
    print(f"machine: {machine}, load average {os.getloadavg()[0]:.1f}\ncommand: {command}", flush=True)
    runs: list[dict] = []
    for i in range(args.rounds):
        print(f"round {i + 1}/{args.rounds}", flush=True)
        sides = [("mcp", mcp_once), ("serve", serve_once)]
        for _, fn in (sides if i % 2 == 0 else sides[::-1]):
            runs.append({"round": i + 1, **fn(root, queries, warm, args.repeat)})

    def median(side: str, key: str) -> float:
        return float(np.median([r[key] for r in runs if r["side"] == side]))

    summary = {k: {"mcp": median("mcp (stdio)", k), "serve": median("/api/search", k)}
               for k in ("p50_ms", "p95_ms", "mean_ms", "cpu_ms_per_call", "client_cpu_ms_per_call")}
    for v in summary.values():
        v["ratio"] = round(v["mcp"] / v["serve"], 2) if v["serve"] else float("nan")
    print("medians over rounds (mcp / serve = ratio): " + ", ".join(
        f"{k} {v['mcp']:.1f} / {v['serve']:.1f} = {v['ratio']:.2f}x" for k, v in summary.items()), flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "mcp.json").write_text(json.dumps({"machine": machine, "command": command, "queries": len(queries),
                                              "runs": runs, "medians": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
