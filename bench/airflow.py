"""Mapped embed over 4 shards through Airflow's LocalExecutor: 2 parallel task slots vs 1, same data.

    .venv/bin/python -m bench.airflow [--docs N] [--shards 4]

Data: the CISI collection (../shared/data/collections/cisi, 1,460 abstracts), imported and graphed once
into a pristine warehouse, then copied for each configuration so both start with an empty vector cache.
The DAG is the nightly DAG's embed fan-out (plan_embed -> embed_shard x4 -> merge_embeddings), the
very same step calls (``pipeline.steps.embed``), written to a temporary dags folder. Each configuration runs
``airflow dags test --use-executor`` with the LocalExecutor at ``[core] parallelism`` 1 and 2 (each task
a real supervised process reporting to an ``airflow api-server``), one torch thread per task, in the same
process run of this script, one after the other.

Reported (results in bench/out/airflow.json):
- fan-out makespan: first embed_shard start to last embed_shard end; speedup = 1 slot / 2 slots;
- per-task overhead: task instance wall time (queued -> end) minus the seconds the step function itself
  took (measured inside the task) = scheduling + process start + imports + execution API round trips.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from devtools.airflow_local import airflow_bin, airflow_env, api_server, free_port, prepare
from pipeline.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[1]

OUT = REPO_ROOT / "bench" / "out" / "airflow.json"
DAG_ID = "paperkb_bench_embed"

BENCH_DAG = '''
from datetime import datetime
from airflow.sdk import dag, task


def _timed(fn, *args):
    import time
    from pipeline.settings import Settings
    t0 = time.perf_counter()
    out = fn(Settings.load(lock_queue=True), *args)
    return {"work_s": time.perf_counter() - t0, "summary": out}


@dag(dag_id="paperkb_bench_embed", schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def bench():
    @task
    def plan_embed():
        from pipeline.settings import Settings
        from pipeline.steps import embed

        settings = Settings.load()
        return embed.plan_shards(settings, settings.embed_shards)

    @task
    def embed_shard(shard):
        from pipeline.steps import embed

        return _timed(embed.embed_shard, shard)

    @task(trigger_rule="none_failed")
    def merge_embeddings():
        from pipeline.steps import embed

        return _timed(embed.merge_embeddings)

    shards = plan_embed()
    embed_shard.expand(shard=shards) >> merge_embeddings()


bench()
'''


def build_pristine(root: Path, data: Path, docs: int | None) -> Path:
    """CISI imported and graphed (no vectors yet): the data both configurations embed."""
    from pipeline.sources.local_corpus import import_collection
    from pipeline.steps.graph import run_graph

    wh = root / "pristine"
    settings = Settings.load(warehouse=wh)
    src = data / "collections" / "cisi"
    if docs:  # a smaller honest scale: the first N records of the real file
        text = (src / "CISI.ALL").read_text(errors="replace")
        parts = text.split("\n.I ")
        cut = root / "cisi-sub"
        cut.mkdir(exist_ok=True)
        (cut / "CISI.ALL").write_text("\n.I ".join(parts[:docs]) + "\n")
        src = cut / "CISI.ALL"
    import_collection(settings, src, fmt="smart", name="cisi")
    run_graph(settings)
    return wh


def run_config(root: Path, pristine: Path, slots: int, port: int, env_base: dict, day: str) -> dict:
    wh = root / f"wh-{slots}"
    shutil.copytree(pristine, wh)
    env = dict(env_base)
    env.update({"PAPERKB_WAREHOUSE": str(wh), "AIRFLOW__CORE__PARALLELISM": str(slots)})
    t0 = time.perf_counter()
    out = subprocess.run([airflow_bin(), "dags", "test", DAG_ID, day, "--use-executor"], env=env,
                         capture_output=True, text=True)
    wall = time.perf_counter() - t0
    (root / f"dags-test-{slots}.log").write_text(out.stdout + out.stderr)
    if out.returncode != 0:
        raise SystemExit(f"dags test failed for {slots} slot(s); see {root}/dags-test-{slots}.log")
    con = sqlite3.connect(Path(env["AIRFLOW_HOME"]) / "airflow.db")
    run_id = con.execute("SELECT run_id FROM dag_run WHERE dag_id = ? AND logical_date LIKE ?",
                         [DAG_ID, day + "%"]).fetchone()[0]
    rows = con.execute(
        "SELECT ti.task_id, ti.map_index, ti.queued_dttm, ti.start_date, ti.end_date, x.value FROM task_instance ti "
        "LEFT JOIN xcom x ON x.dag_id = ti.dag_id AND x.run_id = ti.run_id AND x.task_id = ti.task_id "
        "AND x.map_index = ti.map_index AND x.key = 'return_value' "
        "WHERE ti.dag_id = ? AND ti.run_id = ?", [DAG_ID, run_id]).fetchall()
    con.close()

    def ts(v):
        return datetime.fromisoformat(v).timestamp() if v else None

    tasks = []
    for task_id, map_index, queued, start, end, value in rows:
        work = None
        if value:
            try:
                work = json.loads(value).get("work_s")
            except (ValueError, AttributeError):
                work = None
        q, s, e = ts(queued), ts(start), ts(end)
        tasks.append({"task": task_id, "map_index": map_index, "queued_to_start_s": (s - q) if q and s else None,
                      "run_s": (e - s) if s and e else None, "queued_to_end_s": (e - q) if q and e else None,
                      "work_s": work})
    shards = [t for t in tasks if t["task"] == "embed_shard"]
    starts = [ts(r[3]) for r in rows if r[0] == "embed_shard"]
    ends = [ts(r[4]) for r in rows if r[0] == "embed_shard"]
    plan_end = max(ts(r[4]) for r in rows if r[0] == "plan_embed")
    merge_start = max(ts(r[3]) for r in rows if r[0] == "merge_embeddings")
    # inside a task process but outside the step function: process start, imports, execution API calls
    in_task = [t["run_s"] - t["work_s"] for t in tasks if t["work_s"] is not None and t["run_s"] is not None]
    # from an upstream's end to the start of a task that had a free slot: the dag.test scheduling loop,
    # the executor queue and the supervisor's fork
    dispatch = [min(starts) - plan_end, merge_start - max(ends)]
    return {
        "slots": slots, "dags_test_wall_s": round(wall, 2),
        "fanout_makespan_s": round(max(ends) - min(starts), 2),
        "shard_work_s": [round(t["work_s"], 2) for t in shards if t["work_s"] is not None],
        "in_task_overhead_s": {"median": round(statistics.median(in_task), 2), "max": round(max(in_task), 2),
                               "n": len(in_task)},
        "dispatch_latency_s": [round(x, 2) for x in dispatch],
        "overhead_per_task_s": round(statistics.median(in_task) + statistics.mean(dispatch), 2),
        "tasks": tasks,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.airflow", description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(REPO_ROOT.parent / "shared" / "data"))
    ap.add_argument("--docs", type=int, default=None, help="use only the first N CISI records (default: all 1,460)")
    ap.add_argument("--shards", type=int, default=4)
    args = ap.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="paperkb-bench-airflow-"))
    dags = root / "dags"
    dags.mkdir()
    (dags / "bench_embed.py").write_text(BENCH_DAG)
    home = root / "airflow"
    port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_")}
    env = airflow_env(home, executor="LocalExecutor", api_port=port, base=base)
    env.update({"AIRFLOW__CORE__DAGS_FOLDER": str(dags), "PAPERKB_EMBED_SHARDS": str(args.shards),
                "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                "PYTHONPATH": str(REPO_ROOT)})
    print(f"bench.airflow: preparing CISI in {root}", flush=True)
    t0 = time.perf_counter()
    pristine = build_pristine(root, Path(args.data), args.docs)
    prep_s = time.perf_counter() - t0
    prepare(env)
    results = []
    with api_server(env, port, root / "api-server.log"):
        for i, slots in enumerate((1, 2)):
            print(f"bench.airflow: {args.shards} shards, {slots} slot(s)", flush=True)
            results.append(run_config(root, pristine, slots, port, env, f"2026-01-0{i + 1}"))
    one, two = results
    report = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "loadavg_at_end": os.getloadavg()},
        "command": "python -m bench.airflow" + (f" --docs {args.docs}" if args.docs else ""),
        "data": f"CISI, {args.docs or 1460} records", "shards": args.shards, "prep_s": round(prep_s, 1),
        "results": results,
        "speedup_fanout": round(one["fanout_makespan_s"] / two["fanout_makespan_s"], 2),
        "speedup_dag": round(one["dags_test_wall_s"] / two["dags_test_wall_s"], 2),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2))
    for r in results:
        print(f"  {r['slots']} slot(s): fan-out {r['fanout_makespan_s']}s, dags test {r['dags_test_wall_s']}s, "
              f"overhead/task {r['overhead_per_task_s']}s (in task {r['in_task_overhead_s']['median']}s + dispatch "
              f"{r['dispatch_latency_s']}), shard work {r['shard_work_s']}")
    print(f"  speedup (fan-out makespan) {report['speedup_fanout']}x; whole DAG run {report['speedup_dag']}x")
    print(f"bench.airflow: wrote {OUT}")
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
