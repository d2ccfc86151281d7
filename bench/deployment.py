"""The real Celery deployment (tests/celery_cluster.py: the built wheel in a fresh venv, PostgreSQL, Redis,
api-server, scheduler, dag-processor, triggerer, Celery workers) on the recorded data.

    .venv/bin/python -m bench.deployment [--only fanout|backfill] [--days 7]

fanout: the same DAG run (one day, the recorded OAI page plus the 10 recorded PDFs imported as a local
library, one PDF per extraction batch, 8 embedding shards) with 1 Celery worker, then with 2, each worker
pinned to its own core (``taskset``), as workers on separate one-core hosts would be. Reported: the
makespan of each mapped task and of each fan-out group (full text: fetch_batch, extract_batch,
extract_raw_batch; encoding: embed_shard), first task start -> last task end, and the speedup of 2
workers over 1 (``speedup``: of the two groups' makespans summed).

backfill: a backfill of N days against one run over the same N days (DAG params ``from``/``until``),
side by side on the same deployment shape (2 workers), each on a fresh warehouse (``--repeat``: each
twice, alternating). Reported: wall time from the first run's creation (queued) to the last run's end,
and the ratio (of the better of each pair with ``--repeat``).

Results: bench/out/deployment.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))

import celery_cluster  # noqa: E402  (the deployment harness lives with the tests)

from devtools.replay_server import ReplayServer, service_env  # noqa: E402

OUT = REPO_ROOT / "bench" / "out" / "deployment.json"
DAG_ID = "paperkb_nightly"


def _env(server_url: str) -> dict[str, str]:
    env = service_env(server_url)
    env.update({"PAPERKB_CATEGORIES": '["*"]', "PAPERKB_ARXIV_DELAY_S": "0", "PAPERKB_S2_DELAY_S": "0",
                "PAPERKB_AIRFLOW_RETRY_DELAY_S": "2", "PAPERKB_FULLTEXT_BATCH_SIZE": "1",
                "PAPERKB_EMBED_SHARDS": "8"})
    return env


def _wait_runs(c: celery_cluster.Cluster, run_filter: str, params: tuple, n: int, timeout_s: float = 3600) -> list:
    deadline = time.monotonic() + timeout_s
    while True:
        runs = c.postgres.query(f"SELECT run_id, state, queued_at, end_date FROM dag_run WHERE dag_id = %s AND {run_filter}",
                                (DAG_ID, *params))
        if len(runs) >= n and all(r[1] in ("success", "failed") for r in runs):
            return runs
        if time.monotonic() > deadline:
            raise TimeoutError(f"runs not done: {runs}")
        time.sleep(1)


GROUPS = {"fulltext": ("fetch_batch", "extract_batch", "extract_raw_batch"), "embed": ("embed_shard",)}


def _stages(c: celery_cluster.Cluster) -> dict[str, dict]:
    """Makespan (first start -> last end) of each mapped task and of each fan-out group of them."""
    rows = c.postgres.query("SELECT task_id, hostname, start_date, end_date FROM task_instance "
                            "WHERE dag_id = %s AND map_index >= 0 AND start_date IS NOT NULL", (DAG_ID,))
    out: dict[str, dict] = {}
    for task_id, host, start, end in rows:
        keys = [task_id] + [f"group:{g}" for g, members in GROUPS.items() if task_id in members]
        for key in keys:
            s = out.setdefault(key, {"tasks": 0, "hosts": set(), "start": start, "end": end})
            s["tasks"] += 1
            s["hosts"].add(host)
            s["start"], s["end"] = min(s["start"], start), max(s["end"], end)
    return {k: {"tasks": v["tasks"], "hosts": sorted(v["hosts"]),
                "makespan_s": round((v["end"] - v["start"]).total_seconds(), 2)} for k, v in sorted(out.items())}


def fanout(wheel: Path, venv: Path, root: Path, data: Path, server_url: str) -> dict:
    day = datetime.now(timezone.utc).date() - timedelta(days=1)
    result: dict[str, Any] = {}
    for n in (1, 2):
        with celery_cluster.deployment(root / f"fanout-{n}", wheel, _env(server_url), venv=venv) as c:
            c.paperkb("import-pdfs", str(data / "arxiv" / "pdf"))
            c.start_services({f"worker-{i + 1}": str(i) for i in range(n)})
            c.wait_for_dag(DAG_ID)
            t0 = time.monotonic()
            c.airflow("backfill", "create", "--dag-id", DAG_ID, "--from-date", day.isoformat(), "--to-date",
                      day.isoformat(), "--max-active-runs", "1")
            c.airflow("dags", "unpause", DAG_ID)  # after: else the scheduler creates that day's run itself
            runs = _wait_runs(c, "run_type = 'backfill'", (), 1)
            stages = _stages(c)
            result[f"{n}_workers"] = {"run_state": runs[0][1], "run_wall_s": round(time.monotonic() - t0, 1),
                                      "stages": stages,
                                      "fanout_s": round(sum(s["makespan_s"] for k, s in stages.items()
                                                            if k.startswith("group:")), 2)}
            print(json.dumps(result[f"{n}_workers"]), flush=True)
    result["speedup"] = round(result["1_workers"]["fanout_s"] / result["2_workers"]["fanout_s"], 3)
    one, two = result["1_workers"]["stages"], result["2_workers"]["stages"]
    result["speedup_by_stage"] = {k: round(one[k]["makespan_s"] / two[k]["makespan_s"], 3)
                                  for k in one if k in two and two[k]["makespan_s"] > 0}
    result["speedup_whole_run"] = round(result["1_workers"]["run_wall_s"] / result["2_workers"]["run_wall_s"], 3)
    return result


def backfill(wheel: Path, venv: Path, root: Path, data: Path, server_url: str, days: int, repeat: bool) -> dict:
    last = datetime.now(timezone.utc).date() - timedelta(days=1)
    first = last - timedelta(days=days - 1)
    result: dict[str, Any] = {"days": days, "from": first.isoformat(), "until": last.isoformat()}
    modes = ("one_run", "backfill", "one_run_again", "backfill_again")[: 4 if repeat else 2]
    for mode in modes:
        base = mode.replace("_again", "")
        env = _env(server_url)
        if base == "one_run":  # no scheduled run beside the manual one: the DAG starts today
            env["PAPERKB_AIRFLOW_START_DATE"] = datetime.now(timezone.utc).date().isoformat()
        with celery_cluster.deployment(root / mode, wheel, env, venv=venv) as c:
            c.paperkb("import-pdfs", str(data / "arxiv" / "pdf"))
            c.start_services({"worker-1": None, "worker-2": None})
            c.wait_for_dag(DAG_ID)
            if base == "backfill":
                c.airflow("backfill", "create", "--dag-id", DAG_ID, "--from-date", first.isoformat(), "--to-date",
                          last.isoformat(), "--max-active-runs", "1")
                c.airflow("dags", "unpause", DAG_ID)
                runs = _wait_runs(c, "run_type = 'backfill'", (), days)
            else:
                c.airflow("dags", "unpause", DAG_ID)
                conf = json.dumps({"from": first.isoformat(), "until": last.isoformat()})
                c.airflow("dags", "trigger", DAG_ID, "--conf", conf)
                runs = _wait_runs(c, "run_type = 'manual'", (), 1)
            wall = (max(r[3] for r in runs) - min(r[2] for r in runs)).total_seconds()  # first queued -> last end
            executed = c.postgres.query("SELECT count(*) FROM task_instance WHERE dag_id = %s AND state = 'success'",
                                        (DAG_ID,))[0][0]
            result[mode] = {"wall_s": round(wall, 1), "runs": len(runs), "states": sorted({r[1] for r in runs}),
                            "tasks_executed": executed}
            print(mode, json.dumps(result[mode]), flush=True)
    one = min(result[m]["wall_s"] for m in modes if m.startswith("one_run"))
    bf = min(result[m]["wall_s"] for m in modes if m.startswith("backfill"))
    result["ratio_backfill_over_one_run"] = round(bf / one, 3)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(REPO_ROOT.parent / "shared" / "data"))
    ap.add_argument("--only", choices=("fanout", "backfill"))
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--repeat", action="store_true", help="measure each backfill mode twice, alternating")
    ap.add_argument("--work", default="/tmp/paperkb-bench-deployment")
    args = ap.parse_args(argv)
    missing = celery_cluster.missing_tools()
    if missing:
        print(f"bench.deployment: needs {', '.join(missing)}", file=sys.stderr)
        return 2
    root = Path(args.work)
    root.mkdir(parents=True, exist_ok=True)
    wheel = celery_cluster.build_wheel(root / "dist")
    venv = root / "venv"
    if not (venv / "bin" / "airflow").exists():
        celery_cluster.fresh_venv(venv, wheel, "airflow")
    else:  # reuse the environment, with this checkout's wheel
        celery_cluster.reinstall(venv, wheel)
    server = ReplayServer(args.data).start()
    out: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                       "load_before": os.getloadavg()}, "command": "python -m bench.deployment " + " ".join(argv or sys.argv[1:])}
    try:
        if args.only in (None, "fanout"):
            out["fanout"] = fanout(wheel, venv, root, Path(args.data), server.url)
        if args.only in (None, "backfill"):
            out["backfill"] = backfill(wheel, venv, root, Path(args.data), server.url, args.days, args.repeat)
    finally:
        server.stop()
    out["machine"]["load_after"] = os.getloadavg()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2, default=str))
    print(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
