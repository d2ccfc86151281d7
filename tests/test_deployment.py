"""The real deployment, without Docker, by the deployment guide's own commands: docs/deployment.md, "Celery deployment on
several hosts" is the script (tests/readme_deploy.py runs its ``bash deploy=NAME`` blocks; the test sets
only the variables they read). The built wheel in a fresh virtualenv, PostgreSQL and Redis from Debian's
packages, CeleryExecutor, Airflow's own processes (api-server, scheduler, dag-processor, triggerer, two
Celery workers on "different hosts"), the recorded data through ``paperkb replay-server``, backfilling
three days.

One scenario (module fixture), several checks:
- the guide's deploy blocks all run (but ``packages``: apt-get and systemd), in the guide's order;
- every run of the backfill succeeds;
- the mapped fan-out tasks ran on both workers and overlapped in time;
- CURRENT holds every paper of the three days (the recorded OAI page and the 10 recorded PDFs, imported
  as a local library before the backfill);
- a worker killed with SIGKILL while a mapped task runs on it: the task is retried on the other worker,
  the run completes, no row is duplicated;
- the same backfill again (``--reprocess-behavior completed``) writes 0 rows.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest

import celery_cluster
import readme_deploy

pytestmark = pytest.mark.slow

DAG_ID = "paperkb_nightly"
WORKERS = ("worker-1", "worker-2")  # the guide's deploy=workers block: -H worker-1@%h, -H worker-2@%h
# the guide's blocks in the order the scenario runs them (deployment() runs the first ones)
RUN = ["variables", "postgres", "redis", "install", "settings", "recorded-data", "migrate", "control-host", "login",
       "workers", "runs"]
NOT_RUN = {"packages": "apt-get and systemctl: the machine has the packages (missing_tools), the test starts its own instances"}
VICTIM = WORKERS[1]
CORE_KEYS = {  # table -> natural key
    "papers": "paper_id", "versions": "paper_id, version", "paper_authors": "paper_id, position",
    "works": "work_id", "citations": "citing_work_id, cited_work_id", "chunks": "chunk_id",
    "figures": "figure_id", "fulltext_docs": "paper_id", "paper_metrics": "work_id",
    "related": "paper_id, rank",
}


@dataclass
class Scenario:
    cluster: celery_cluster.Cluster
    days: list[date]
    first_runs: list[tuple[str, str]] = field(default_factory=list)
    first_tis: list[tuple] = field(default_factory=list)
    killed: tuple | None = None
    killed_tries: list[tuple] = field(default_factory=list)
    fingerprint_after_first: dict = field(default_factory=dict)
    second_runs: list[tuple[str, str]] = field(default_factory=list)
    fingerprint_after_second: dict = field(default_factory=dict)
    snapshots_after_first: list[str] = field(default_factory=list)


def _backfill(c: celery_cluster.Cluster, days: list[date], *extra: str) -> int:
    c.airflow("backfill", "create", "--dag-id", DAG_ID, "--from-date", days[0].isoformat(), "--to-date",
              days[-1].isoformat(), "--max-active-runs", "1", *extra)
    return c.postgres.query("SELECT max(id) FROM backfill")[0][0]


def _runs(c: celery_cluster.Cluster, backfill_id: int) -> list[tuple[str, str]]:
    return c.postgres.query(
        "SELECT dr.run_id, dr.state FROM backfill_dag_run b JOIN dag_run dr ON dr.id = b.dag_run_id "
        "WHERE b.backfill_id = %s ORDER BY dr.logical_date", (backfill_id,))


def _backfill_done(c: celery_cluster.Cluster, backfill_id: int) -> bool:
    runs = _runs(c, backfill_id)
    finished = c.postgres.query("SELECT completed_at IS NOT NULL FROM backfill WHERE id = %s", (backfill_id,))[0][0]
    return finished and bool(runs) and all(state in ("success", "failed") for _, state in runs)


def _mapped(c: celery_cluster.Cluster) -> list[tuple]:
    """Every try of every mapped task instance (earlier tries live in task_instance_history)."""
    cols = "task_id, map_index, hostname, start_date, end_date, state, try_number, run_id"
    where = "WHERE dag_id = %s AND map_index >= 0 AND start_date IS NOT NULL"
    return c.postgres.query(f"SELECT {cols} FROM task_instance {where} UNION ALL "
                            f"SELECT {cols} FROM task_instance_history {where}", (DAG_ID, DAG_ID))


def overlapping_hosts(tis: list[tuple]) -> bool:
    """Two mapped task instances on different hosts whose [start, end] intervals overlap."""
    now = datetime.now(timezone.utc)
    spans = [(host, start, end or now) for _, _, host, start, end, *_ in tis if host]
    return any(h1 != h2 and s1 < e2 and s2 < e1 for i, (h1, s1, e1) in enumerate(spans) for h2, s2, e2 in spans[i + 1:])


def _fingerprint(warehouse: Path) -> dict:
    """Row count and an order-free hash of the content of each core table, leaving out bookkeeping
    columns (run ids, fetch/extract times), as tests/test_airflow_e2e.py compares a rerun."""
    import duckdb

    con = duckdb.connect(str(warehouse / "warehouse.duckdb"), read_only=True)
    try:
        out = {}
        for table in CORE_KEYS:
            cols = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()]
            keep = ", ".join(c for c in cols if c != "run_id" and not c.endswith("_at"))
            out[table] = con.execute(f"SELECT count(*), coalesce(sum(hash({keep})), 0) FROM {table}").fetchone()
        return out
    finally:
        con.close()


def _wait(predicate, what: str, timeout_s: float, on_tick=None):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if on_tick is not None:
            on_tick()
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.5)


@pytest.fixture(scope="module")
def scenario(shared_data, tmp_path_factory, request):
    missing = celery_cluster.missing_tools()
    if missing:
        pytest.skip(f"the deployment test needs {', '.join(missing)} (the guide's deploy=packages block installs them)")
    root = tmp_path_factory.mktemp("deployment") / "cluster"
    wheel = request.getfixturevalue("paperkb_wheel")  # built once per run (tests/conftest.py)
    env = {  # the test's values of settings the guide names (it gives these values too)
        "PAPERKB_ARXIV_DELAY_S": "0", "PAPERKB_S2_DELAY_S": "0",
        "PAPERKB_AIRFLOW_RETRY_DELAY_S": "2",
        "PAPERKB_FULLTEXT_BATCH_SIZE": "2",  # 10 PDFs -> 5 mapped batches
        "PAPERKB_EMBED_SHARDS": "4",
    }
    # the last three complete days: no scheduled run competes with the backfill once it is unpaused
    today = datetime.now(timezone.utc).date()
    days = [today - timedelta(days=n) for n in (3, 2, 1)]
    with celery_cluster.deployment(root, wheel, env, recorded_data=shared_data) as c:
        sc = Scenario(cluster=c, days=days)
        c.start_services()
        c.wait_for_dag(DAG_ID)
        # the guide's runs: the backfill, then unpause (unpausing first would create the latest day's run)
        c.block("runs", FROM_DAY=days[0].isoformat(), TO_DAY=days[-1].isoformat())
        first = c.postgres.query("SELECT max(id) FROM backfill")[0][0]

        def kill_when_ready():
            if sc.killed is not None:
                return
            tis = _mapped(c)
            if not overlapping_hosts(tis):
                return
            done_there = [t for t in tis if t[5] == "success" and t[2] == VICTIM]
            running = [t for t in tis if t[5] == "running" and t[2] == VICTIM]
            if done_there and running:  # it has done work already, and is in the middle of more
                c.kill(f"worker-{VICTIM}")
                sc.killed = running[0]

        _wait(lambda: _backfill_done(c, first), "first backfill", 900, kill_when_ready)
        sc.first_runs = _runs(c, first)
        sc.first_tis = _mapped(c)
        if sc.killed is not None:
            task_id, map_index, *_, run_id = sc.killed
            sc.killed_tries = c.postgres.query(
                "SELECT hostname, state, try_number FROM task_instance_history WHERE dag_id = %s AND run_id = %s "
                "AND task_id = %s AND map_index = %s UNION ALL SELECT hostname, state, try_number FROM "
                "task_instance WHERE dag_id = %s AND run_id = %s AND task_id = %s AND map_index = %s",
                (DAG_ID, run_id, task_id, map_index) * 2)
        sc.fingerprint_after_first = _fingerprint(c.warehouse)
        sc.snapshots_after_first = sorted(p.name for p in (c.warehouse / "snapshots").iterdir())

        second = _backfill(c, days, "--reprocess-behavior", "completed")
        _wait(lambda: _backfill_done(c, second), "second backfill", 900)
        sc.second_runs = _runs(c, second)
        sc.fingerprint_after_second = _fingerprint(c.warehouse)
        yield sc


def test_the_readme_blocks_are_the_script():
    """Every deploy block of the guide is run by the scenario (or named here with the reason it is not),
    in the guide's order; a block added to the guide without a place in the test fails here."""
    names = list(readme_deploy.blocks())
    assert sorted(names) == sorted([*RUN, *NOT_RUN]), names
    assert [n for n in names if n in RUN] == RUN


def test_every_run_of_the_backfill_succeeds(scenario):
    assert len(scenario.first_runs) == 3
    assert [state for _, state in scenario.first_runs] == ["success"] * 3, scenario.first_runs
    assert [state for _, state in scenario.second_runs] == ["success"] * 3, scenario.second_runs


def test_mapped_tasks_ran_on_both_workers_and_overlapped(scenario):
    hosts = {host for _, _, host, *_ in scenario.first_tis}
    assert set(WORKERS) <= hosts, scenario.first_tis
    assert overlapping_hosts(scenario.first_tis)


def test_current_holds_every_paper_of_the_days(scenario, shared_data):
    from devtools.replay_server import RecordedServices
    from pipeline.snapshots import open_catalog

    snapshots = scenario.cluster.warehouse / "snapshots"
    current = snapshots / (snapshots / "CURRENT").read_text().strip()
    con = open_catalog(current)
    papers = {r[0] for r in con.execute("SELECT paper_id FROM papers").fetchall()}
    with_chunks = {r[0] for r in con.execute("SELECT DISTINCT paper_id FROM chunks").fetchall()}
    con.close()
    listed = RecordedServices.load(shared_data).respond("GET", "/oai", "verb=ListRecords&metadataPrefix=arXivRaw", b"")
    import re

    harvested = set(re.findall(rb"<id>([^<]+)</id>", listed.body))
    assert harvested and {h.decode() for h in harvested} <= papers
    pdfs = {p.stem for p in (shared_data / "arxiv" / "pdf").glob("*.pdf")}
    assert pdfs <= papers and pdfs <= with_chunks  # full text of the 10 recorded PDFs
    manifest = json.loads((current / "manifest.json").read_text())
    assert manifest["counts"]["papers"] == len(papers)


def test_a_killed_worker_task_is_retried_and_nothing_is_duplicated(scenario):
    assert scenario.killed is not None, "no mapped task was seen running on the victim worker"
    tries = scenario.killed_tries
    assert any(host == VICTIM for host, _, _ in tries), tries
    final = max(tries, key=lambda t: t[2])
    assert final[1] == "success" and final[0] == WORKERS[0] and final[2] >= 2, tries
    import duckdb

    con = duckdb.connect(str(scenario.cluster.warehouse / "warehouse.duckdb"), read_only=True)
    try:
        for table, key in CORE_KEYS.items():
            total, distinct = con.execute(f"SELECT count(*), count(DISTINCT ({key})) FROM {table}").fetchone()
            assert total == distinct, (table, total, distinct)
    finally:
        con.close()
    import lancedb

    snapshots = scenario.cluster.warehouse / "snapshots"
    current = snapshots / (snapshots / "CURRENT").read_text().strip()
    db = lancedb.connect(str(current / "lancedb"))
    for name, key in (("chunks", "chunk_id"), ("papers", "paper_id"), ("figures", "figure_id")):
        ids = db.open_table(name).to_arrow().column(key).to_pylist()
        assert len(ids) == len(set(ids)) > 0, name


def test_the_same_backfill_again_writes_nothing(scenario):
    assert scenario.fingerprint_after_first["chunks"][0] > 0
    assert scenario.fingerprint_after_second == scenario.fingerprint_after_first
