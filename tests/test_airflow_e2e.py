"""The nightly DAG end to end through Airflow (``dag.test()``) against a local replay of the recorded
arXiv/S2 data, with the 10 real PDFs imported first as ``make run REPLAY=1`` does: it publishes a
snapshot with their passages and figure legends, a second run of the same interval changes nothing, a
task that fails is retried alone, and a task process killed mid-run is retried by Airflow and finishes
correctly.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import _airflow_env
import pytest

pytestmark = pytest.mark.slow

LOGICAL = datetime(2026, 11, 21, tzinfo=timezone.utc)  # data interval [11-20, 11-21): harvests 2026-11-20
CORE_TABLES = ("papers", "authors", "paper_authors", "versions", "works", "citations", "chunks", "figures",
               "fulltext_docs", "paper_metrics", "related")
HISTORY_TABLES = {"powerlaw_fits", "run_log", "rejects"}  # append one row per run by design


# ---- the replay server (pytest-httpserver) and the environment the tasks see ---------------------------------
class FlakyS2:
    """Makes the next ``n`` Semantic Scholar requests fail with HTTP 503, as an overloaded S2 does."""

    def __init__(self):
        self.remaining = 0
        self.failed = 0


@pytest.fixture(scope="module")
def flaky_s2():
    return FlakyS2()


@pytest.fixture(scope="module")
def replay(shared_data, flaky_s2):
    from pytest_httpserver import HTTPServer
    from werkzeug import Response

    from devtools.replay_server import RecordedServices

    services = RecordedServices.load(shared_data)

    def handler(request):
        if request.path.startswith("/s2/") and flaky_s2.remaining > 0:
            flaky_s2.remaining -= 1
            flaky_s2.failed += 1
            return Response('{"message": "Internal Server Error"}', status=503, content_type="application/json")
        reply = services.respond(request.method, request.path, request.query_string.decode(), request.get_data())
        return Response(reply.body, status=reply.status, content_type=reply.content_type)

    server = HTTPServer(host="127.0.0.1", port=0)
    server.expect_request(re.compile(r"/.*")).respond_with_handler(handler)
    server.start()
    yield server
    server.clear()
    if server.is_running():
        server.stop()


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory, replay):
    from devtools.replay_server import service_env

    wh = tmp_path_factory.mktemp("airflow-e2e") / "warehouse"
    env = {
        **service_env(replay.url_for("/").rstrip("/")),
        "PAPERKB_WAREHOUSE": str(wh),
        "PAPERKB_CATEGORIES": '["*"]',  # the recorded OAI page is physics and maths
        "PAPERKB_ARXIV_DELAY_S": "0",
        "PAPERKB_S2_DELAY_S": "0",
        "PAPERKB_RETRY_MAX_ATTEMPTS": "2",
        "PAPERKB_RETRY_MAX_BACKOFF_S": "0.05",
        "PAPERKB_AIRFLOW_RETRIES": "2",
        "PAPERKB_AIRFLOW_RETRY_DELAY_S": "1",
        "PAPERKB_AIRFLOW_MAX_RETRY_DELAY_S": "2",
    }
    mp = pytest.MonkeyPatch()
    for key in [k for k in os.environ if k.startswith("PAPERKB_") and k != "PAPERKB_SHARED_DATA"]:
        mp.delenv(key)
    mp.delenv("S2_API_KEY", raising=False)
    for k, v in env.items():
        mp.setenv(k, v)
    yield wh
    mp.undo()


@pytest.fixture(scope="module")
def nightly(warehouse):
    """The DAG parsed after the environment is set (retry delays are read at parse time)."""
    _airflow_env.migrated()
    bag = _airflow_env.dagbag()
    assert bag.import_errors == {}
    return bag.dags["paperkb_nightly"]


# ---- helpers ---------------------------------------------------------------------------------------------------
def recorded_pdf_ids(shared_data: Path) -> list[str]:
    """The arXiv ids of the recorded PDFs (their file names)."""
    return sorted(p.stem for p in (shared_data / "arxiv" / "pdf").glob("*.pdf"))


def import_recorded_pdfs(warehouse: Path, shared_data: Path) -> dict:
    """What ``make run REPLAY=1`` does before the DAG runs: ``paperkb import-pdfs DATA/arxiv/pdf``."""
    from pipeline.library.pdf_folder import import_pdfs
    from pipeline.settings import Settings

    return import_pdfs(Settings.load(warehouse=warehouse), shared_data / "arxiv" / "pdf")


def recorded_record_ids(shared_data: Path) -> list[str]:
    """The arXiv ids in the recorded arXivRaw ListRecords page (what a harvest of it must load)."""
    page = (shared_data / "arxiv/oai/saelim2015_ListRecordsResponse.xml").read_text()
    return re.findall(r"<identifier>oai:arXiv.org:([^<]+)</identifier>", page)


def fingerprint(db_path: Path) -> dict[str, str]:
    """Content of the core tables, leaving out bookkeeping columns (run ids, fetch/extract times)."""
    import hashlib

    import duckdb

    con = duckdb.connect(str(db_path), read_only=True)
    try:
        have = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        out = {}
        for table in CORE_TABLES:
            if table not in have:
                continue
            cols = [r[0] for r in con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
                [table]).fetchall()]
            keep = [c for c in cols if c != "run_id" and not c.endswith("_at")]
            rows = con.execute(f"SELECT {', '.join(keep)} FROM {table}").fetchall()
            out[table] = f"{len(rows)}:" + hashlib.sha256("\n".join(sorted(map(repr, rows))).encode()).hexdigest()
        return out
    finally:
        con.close()


def task_states(dr) -> dict[str, list[tuple[int, str, int]]]:
    out: dict[str, list] = {}
    for ti in dr.get_task_instances():
        out.setdefault(ti.task_id, []).append((ti.map_index, str(ti.state), ti.try_number))
    return out


def xcom(dr, task_id: str, key: str = "return_value"):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(XComModel.get_many(run_id=dr.run_id, dag_ids=dr.dag_id, task_ids=task_id,
                                                 key=key)).first()
        return XComModel.deserialize_value(row) if row is not None else None


def data_counts(manifest: dict) -> dict:
    """Row counts of the snapshot's data tables; powerlaw_fits is a history (one fit per graph run)."""
    return {k: v for k, v in manifest["counts"].items() if k not in HISTORY_TABLES}


def current_manifest(warehouse: Path) -> dict:
    from pipeline import snapshots

    return snapshots.read_manifest(snapshots.resolve(warehouse / "snapshots"))


# ---- the tests ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def first_run(nightly, warehouse, shared_data):
    assert import_recorded_pdfs(warehouse, shared_data)["papers"] == len(recorded_pdf_ids(shared_data))
    dr = nightly.test(logical_date=LOGICAL)
    return dr


def test_dag_test_runs_the_whole_dag_and_publishes_a_snapshot(first_run, warehouse, shared_data):
    states = task_states(first_run)
    assert str(first_run.state) == "success", states
    assert set(states) == {t for t in ("coalesce", "harvest", "enrich", "plan_fulltext", "fetch_batch", "extract_batch",
                                       "plan_raw_extraction", "extract_raw_batch",
                                       "merge_fulltext", "graph", "plan_embed", "embed_shard", "merge_embeddings",
                                       "publish", "feeds")}
    assert all(s in ("success", "skipped") for tis in states.values() for _, s, _ in tis), states
    assert len(states["embed_shard"]) == 4  # PAPERKB_EMBED_SHARDS default: four mapped tasks

    harvest = xcom(first_run, "harvest")
    assert (harvest["from_date"], harvest["until_date"]) == ("2026-11-20", "2026-11-20")  # the data interval
    assert harvest["lists"] == [["2026-11-20", "2026-11-20"]] and harvest["deferred_windows"] == []
    assert xcom(first_run, "coalesce", "decision")["defer"] is False  # nothing queued after it: a nightly run
    feeds = xcom(first_run, "feeds")  # no interest saved: nothing to list or mail (tests/test_feeds.py has them)
    assert feeds["snapshot_id"] == xcom(first_run, "publish")["snapshot_id"] and feeds["sent_to"] == []
    assert feeds["skipped"] == "no interests (see `paperkb interests add`)"

    ids = recorded_record_ids(shared_data) + recorded_pdf_ids(shared_data)
    manifest = current_manifest(warehouse)
    publish = xcom(first_run, "publish")
    assert manifest["snapshot_id"] == publish["snapshot_id"]
    assert manifest["counts"]["papers"] == len(ids)

    import duckdb

    con = duckdb.connect(str(warehouse / "warehouse.duckdb"), read_only=True)
    try:
        assert sorted(r[0] for r in con.execute("SELECT paper_id FROM papers").fetchall()) == sorted(ids)
    finally:
        con.close()


def test_the_snapshot_holds_the_pdfs_passages_and_figure_legends(first_run, warehouse, shared_data):
    """The imported PDFs went through fulltext -> embed -> publish: passages with pages, every figure
    legend SOURCES.md counts, and a search whose best passages show their page and the five signals."""
    from fulltext_sources import read_pdf_table

    from pipeline import snapshots
    from pipeline.query import Searcher, open_snapshot
    from pipeline.settings import Settings

    facts = {f.paper_id: f.figures for f in read_pdf_table(shared_data / "arxiv" / "SOURCES.md")}
    counts = current_manifest(warehouse)["counts"]
    assert counts["figures"] == counts["lancedb.figures"] == sum(facts.values())
    assert counts["chunks"] > 10 * len(facts)  # ~700 body passages
    path = snapshots.resolve(warehouse / "snapshots")
    con = snapshots.open_catalog(path)
    try:
        per_paper = dict(con.execute("SELECT paper_id, count(*) FROM chunks WHERE page_start IS NOT NULL GROUP BY ALL").fetchall())
        figures = dict(con.execute("SELECT paper_id, count(*) FROM figures GROUP BY ALL").fetchall())
    finally:
        con.close()
    assert set(per_paper) == set(facts) and min(per_paper.values()) > 0
    assert figures == facts

    settings = Settings.load(warehouse=warehouse)
    resp = Searcher(open_snapshot(settings), settings).search("attention mechanism for neural machine translation",
                                                              k=5, expand="off")
    top = [r.paper_id for r in resp.results]
    assert {"1409.0473", "1508.04025"} & set(top[:3]), top  # Bahdanau et al. or Luong et al. near the top
    assert all({"ck", "doc", "abs", "fig", "pr"} <= set(r.signals) for r in resp.results)
    body = [r for r in resp.results if r.chunk_id and not r.chunk_id.endswith("#abs")]
    assert body and all(r.page is not None and r.section for r in body), [(r.chunk_id, r.page) for r in resp.results]


def test_publish_emits_the_snapshot_asset_and_the_consumer_dag_reads_it(first_run, warehouse):
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        extras = session.scalars(select(AssetEvent.extra).join(AssetModel, AssetEvent.asset_id == AssetModel.id)
                                 .where(AssetModel.name == "paperkb_snapshot")).all()
    publish = xcom(first_run, "publish")
    assert any(e.get("snapshot_id") == publish["snapshot_id"] for e in extras), extras

    consumer = _airflow_env.dagbag().dags["paperkb_consumer_example"]
    dr = consumer.test(logical_date=LOGICAL)
    assert str(dr.state) == "success", task_states(dr)
    assert xcom(dr, "snapshot_manifest")["snapshot_id"] == publish["snapshot_id"]
    assert isinstance(xcom(dr, "smoke_search"), list)


def test_second_run_of_the_same_interval_changes_nothing(first_run, nightly, warehouse):
    before = fingerprint(warehouse / "warehouse.duckdb")
    data_counts_before = data_counts(current_manifest(warehouse))
    dr = nightly.test(logical_date=LOGICAL)
    assert str(dr.state) == "success", task_states(dr)
    assert fingerprint(warehouse / "warehouse.duckdb") == before
    harvest = xcom(dr, "harvest")
    assert harvest["papers_new"] == 0 and harvest["papers_updated"] == 0
    assert data_counts(current_manifest(warehouse)) == data_counts_before


def test_a_failed_task_is_retried_alone(first_run, nightly, warehouse, flaky_s2, monkeypatch):
    """S2 answers 503 until the enrich step gives up; Airflow retries enrich, not harvest."""
    monkeypatch.setenv("PAPERKB_S2_REFRESH_DAYS", "0")  # every paper is due for S2 again: enrich must call S2
    flaky_s2.remaining, flaky_s2.failed = 2, 0  # = PAPERKB_RETRY_MAX_ATTEMPTS: the first attempt fails
    dr = nightly.test(logical_date=LOGICAL)
    states = task_states(dr)
    assert flaky_s2.failed == 2
    assert str(dr.state) == "success", states
    assert states["harvest"] == [(-1, "success", 1)]
    assert states["enrich"] == [(-1, "success", 2)]


def deferred_rows(warehouse: Path) -> list[tuple]:
    import duckdb

    con = duckdb.connect(str(warehouse / "warehouse.duckdb"), read_only=True)
    try:
        return con.execute("SELECT from_date::VARCHAR, until_date::VARCHAR FROM deferred_windows ORDER BY 1").fetchall()
    finally:
        con.close()


def test_a_run_with_the_next_run_queued_defers_and_the_next_run_harvests_both(first_run, nightly, warehouse):
    """Two consecutive runs, the second already queued (as `airflow backfill create` leaves them): the first
    asks Airflow (Task SDK get_dr_count, for real), records its day in deferred_windows and skips the rest;
    the second harvests both days in one OAI-PMH list, does the whole-corpus work once and clears the table."""
    from datetime import timedelta

    from pipeline import snapshots

    before = fingerprint(warehouse / "warehouse.duckdb")
    snaps_before = [s["snapshot_id"] for s in snapshots.list_snapshots(warehouse / "snapshots")]
    nxt = LOGICAL + timedelta(days=1)
    _airflow_env.airflow_cli("dags", "trigger", "paperkb_nightly", "--logical-date", nxt.isoformat())  # queued

    dr = nightly.test(logical_date=LOGICAL)
    states = task_states(dr)
    assert str(dr.state) == "success", states
    assert states.pop("coalesce") == [(-1, "success", 1)]
    assert {s for tis in states.values() for _, s, _ in tis} == {"skipped"}, states
    decision = xcom(dr, "coalesce", "decision")
    assert decision["defer"] is True and decision["queued_neighbours"] == 1, decision
    assert deferred_rows(warehouse) == [("2026-11-20", "2026-11-20")]
    assert fingerprint(warehouse / "warehouse.duckdb") == before
    assert [s["snapshot_id"] for s in snapshots.list_snapshots(warehouse / "snapshots")] == snaps_before

    dr2 = nightly.test(logical_date=nxt)  # the queued run (dag.test replaces it and runs it)
    assert str(dr2.state) == "success", task_states(dr2)
    assert xcom(dr2, "coalesce", "decision")["defer"] is False
    harvest = xcom(dr2, "harvest")
    assert (harvest["from_date"], harvest["until_date"]) == ("2026-11-21", "2026-11-21")
    assert harvest["deferred_windows"] == [["2026-11-20", "2026-11-20"]]
    assert harvest["lists"] == [["2026-11-20", "2026-11-21"]]  # one list for both days
    assert deferred_rows(warehouse) == []
    assert xcom(dr2, "publish")["snapshot_id"] not in snaps_before
    assert fingerprint(warehouse / "warehouse.duckdb") == before  # the recorded data again: nothing new


def test_a_task_killed_mid_run_is_retried_and_finishes(first_run, warehouse, replay, tmp_path):
    """Real task processes (LocalExecutor): SIGKILL merge_embeddings while it writes LanceDB; Airflow
    marks the try failed, retries it, and the run publishes the same snapshot content."""
    from devtools.airflow_local import airflow_env, api_server, free_port, prepare

    data_counts_before = data_counts(current_manifest(warehouse))
    home = tmp_path / "airflow"
    port = free_port()
    env = airflow_env(home, executor="LocalExecutor", parallelism=2, api_port=port)
    prepare(env)
    with api_server(env, port, tmp_path / "api-server.log"):
        run = subprocess.Popen([str(_airflow_env.AIRFLOW_BIN), "dags", "test", "paperkb_nightly", LOGICAL.date().isoformat(),
                                "--use-executor"], env=env, stdout=open(tmp_path / "dags-test.log", "wb"),
                               stderr=subprocess.STDOUT, start_new_session=True)
        try:
            killed = kill_when_running(home / "airflow.db", "merge_embeddings", run, timeout_s=600)
            assert run.wait(timeout=600) == 0, (tmp_path / "dags-test.log").read_text()[-3000:]
        finally:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
    con = sqlite3.connect(home / "airflow.db")
    rows = con.execute("SELECT state, try_number FROM task_instance WHERE task_id = 'merge_embeddings'").fetchall()
    dag_state = con.execute("SELECT state FROM dag_run").fetchall()
    con.close()
    assert killed
    assert rows == [("success", 2)], rows
    assert dag_state == [("success",)]
    assert data_counts(current_manifest(warehouse)) == data_counts_before


def kill_when_running(db: Path, task_id: str, run: subprocess.Popen, timeout_s: float) -> bool:
    """Wait until ``task_id`` runs (state running, pid known) for 1 s, then SIGKILL its process."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and run.poll() is None:
        try:
            con = sqlite3.connect(db, timeout=5)
            row = con.execute("SELECT state, pid FROM task_instance WHERE task_id = ? AND try_number = 1",
                              [task_id]).fetchone()
            con.close()
        except sqlite3.OperationalError:
            row = None
        if row and row[0] == "running" and row[1]:
            time.sleep(1.0)  # mid-run: the model is loading / LanceDB is being written
            try:
                os.kill(int(row[1]), signal.SIGKILL)
            except ProcessLookupError:
                return False
            return True
        time.sleep(0.2)
    return False


def test_paperkb_refresh_runs_the_same_steps_in_one_process(first_run, warehouse, shared_data, tmp_path, capsys):
    """``paperkb refresh`` over the same window, without Airflow, publishes the same data."""
    from pipeline.cli import main

    other = tmp_path / "warehouse"
    import_recorded_pdfs(other, shared_data)
    assert main(["--warehouse", str(other), "refresh", "--from", "2026-11-20", "--until", "2026-11-20"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[1] for line in out.splitlines() if line.startswith("[")] == \
        ["harvest", "enrich", "fulltext", "graph", "embed", "publish"]
    assert data_counts(current_manifest(other)) == data_counts(current_manifest(warehouse))


def test_the_next_night_feeds_list_exactly_its_new_matching_papers(first_run, nightly, warehouse, shared_data, monkeypatch):
    """Issue 15's researcher: interests saved, the nightly DAG runs again with new papers (the other recorded
    OAI page: 3 hep-th / quant-ph records), and the `feeds` task announces the snapshot's feeds."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from pipeline.feeds import write as feeds

    from pipeline import snapshots
    from pipeline.feeds.interests import add_interest
    from pipeline.settings import Settings

    settings = Settings.load()  # the module's environment: this warehouse, the replay server
    add_interest(settings, "branes", query="thick branes in Weyl geometry")
    add_interest(settings, "translation", seeds=["1409.0473"])
    before = snapshots.current_id(settings.snapshots_dir)
    monkeypatch.setenv("PAPERKB_OAI_METADATA_PREFIX", "arXiv")
    dr = nightly.test(logical_date=LOGICAL + timedelta(days=3))
    assert str(dr.state) == "success", task_states(dr)
    sid = xcom(dr, "publish")["snapshot_id"]
    path = settings.snapshots_dir / sid
    prev = snapshots.open_catalog(settings.snapshots_dir / before)
    old = {r[0] for r in prev.execute("SELECT paper_id FROM papers").fetchall()}
    prev.close()
    con = snapshots.open_catalog(path)
    new = {r[0] for r in con.execute("SELECT paper_id FROM papers").fetchall()} - old
    titles = dict(con.execute("SELECT paper_id, title FROM papers").fetchall())
    con.close()
    assert len(new) == 3
    index = feeds.read_index(path)
    assert index["previous_snapshot_id"] == before and index["new_papers"] == 3
    branes = feeds.item_ids(feeds.read_feed(path, "branes"))
    assert len(branes) == 1 and set(branes) <= new and "thick branes" in titles[branes[0]].lower()
    assert feeds.item_ids(feeds.read_feed(path, "translation")) == []  # nothing new near a translation paper
    out = xcom(dr, "feeds")
    assert out["snapshot_id"] == sid and out["feeds"] == {"branes": 1, "translation": 0}
    with create_session() as session:
        extras = session.scalars(select(AssetEvent.extra).join(AssetModel, AssetEvent.asset_id == AssetModel.id)
                                 .where(AssetModel.name == "paperkb_feeds")).all()
    assert {"snapshot_id": sid, "feeds": {"branes": 1, "translation": 0}} in extras


TOPICAL_QUERIES = ["attention mechanism for machine translation", "residual networks for image classification",
                   "adaptive learning rates for stochastic optimization", "biomedical image segmentation",
                   "masked language model pre-training", "image patches as tokens for a transformer",
                   "external memory for neural networks", "over-squashing in graph neural networks",
                   "multi-head self-attention", "alignment between source and target words",
                   "batch normalization", "learning rate warmup schedule", "fine-tuning on the GLUE benchmark"]


def test_the_demo_has_a_citation_graph_and_shows_no_bibliography(first_run, warehouse):
    """Semantic Scholar's recordings know none of the PDFs: the graph comes from their own reference
    lists (issue 27). Searches show body text, never a bibliography or an author block."""

    from pipeline import snapshots
    from pipeline.query import Searcher, open_snapshot
    from pipeline.query.paths import shortest_paths
    from pipeline.settings import Settings

    con = snapshots.open_catalog(snapshots.resolve(warehouse / "snapshots"))
    try:
        pr = dict(con.execute("SELECT paper_id, pagerank FROM paper_metrics WHERE paper_id IS NOT NULL").fetchall())
        floor = con.execute("SELECT min(pagerank) FROM paper_metrics").fetchone()[0]
        assert all(pr[p] > floor for p in ("1409.0473", "1412.6980", "1512.03385", "1706.03762", "1810.04805"))
        assert con.execute("SELECT count(*) FROM most_central_papers").fetchone()[0] > 0
        assert con.execute("SELECT max(ccbc_weighted) FROM related WHERE paper_id = '1810.04805'").fetchone()[0] > 0
        path = shortest_paths(con, "1810.04805", "1706.03762")
        assert path.length == 1 and path.paths[0][1].paper_id == "1706.03762"
    finally:
        con.close()

    settings = Settings.load(warehouse=warehouse)
    searcher = Searcher(open_snapshot(settings), settings)
    shown = [r for q in TOPICAL_QUERIES for r in searcher.search(q, k=7, expand="rm3").results]
    assert len(shown) > 50
    bad = [(r.paper_id, r.role, r.passage[:60]) for r in shown
           if r.role not in ("abstract", "body", "acknowledgements", "appendix") or r.passage.lstrip().lower().startswith("references")]
    assert not bad, bad
