"""The Airflow DAGs parse fast and are wired as designed; the data interval drives the harvest window."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date, datetime, timedelta, timezone

import _airflow_env  # noqa: F401  (sets AIRFLOW_HOME before airflow is imported)
import pytest

from pipeline.steps.fulltext import part_name
from pipeline.steps.windows import harvest_window

PARSE_BUDGET_S = 2.0  # per DAG file, as measured by the DagBag (the dag-processor's own number)
HEAVY = ("torch", "sentence_transformers", "lancedb", "duckdb", "igraph", "fitz", "pymupdf", "powerlaw",
         "pipeline.steps.harvest", "pipeline.steps.enrich", "pipeline.steps.fulltext", "pipeline.steps.graph", "pipeline.steps.embed",
         "pipeline.steps.publish", "pipeline.query")

EXPECTED_UPSTREAM = {
    "coalesce": set(),
    "harvest": {"coalesce"},
    "enrich": {"harvest"},
    "plan_fulltext": {"enrich"},
    "plan_raw_extraction": {"enrich"},
    # both plans see the raw zone before this run downloads anything into it
    "fetch_batch": {"plan_fulltext", "plan_raw_extraction"},
    "extract_batch": {"fetch_batch"},  # extract_batch[i] waits for fetch_batch[i] only
    "extract_raw_batch": {"plan_raw_extraction", "plan_fulltext"},  # PDFs in the raw zone: no download, no pool
    "merge_fulltext": {"extract_batch", "extract_raw_batch"},
    "graph": {"merge_fulltext"},
    "plan_embed": {"graph"},
    "embed_shard": {"plan_embed"},
    "merge_embeddings": {"embed_shard"},
    "publish": {"merge_embeddings"},
    "feeds": {"publish"},
}


@pytest.fixture(scope="module")
def bag():
    return _airflow_env.dagbag()


@pytest.fixture(scope="module")
def nightly(bag):
    return bag.dags["paperkb_nightly"]


def test_dagbag_has_no_import_errors_and_parses_within_budget(bag):
    assert bag.import_errors == {}
    assert {"paperkb_nightly", "paperkb_consumer_example"} <= set(bag.dags)
    for stat in bag.dagbag_stats:
        assert stat.duration.total_seconds() < PARSE_BUDGET_S, stat


def test_parsing_the_dag_files_imports_nothing_heavy():
    """The dag-processor re-parses often: heavy libraries load inside tasks only."""
    code = (
        "import sys, runpy, airflow.sdk\n"
        "for f in sys.argv[1:]: runpy.run_path(f)\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    files = [str(p) for p in sorted(_airflow_env.DAGS.glob("*.py"))]
    out = subprocess.run([sys.executable, "-c", code, *files], capture_output=True, text=True, check=True,
                         cwd=_airflow_env.REPO_ROOT)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_tasks_and_dependencies_are_as_designed(nightly):
    assert {t.task_id: set(t.upstream_task_ids) for t in nightly.tasks} == EXPECTED_UPSTREAM
    assert nightly.max_active_runs == 1  # DuckDB: one writer, so one run (one backfill day) at a time
    assert nightly.catchup is False
    assert type(nightly.timetable).__name__ == "CronDataIntervalTimetable"
    assert nightly.params["replay"] is False
    assert nightly.params["from"] == "" and nightly.params["until"] == ""  # empty: the data interval's window


def test_the_coalesce_gate_can_skip_the_whole_run(nightly):
    """A short-circuit first: when it returns False every other task of the run is skipped, the merges
    (trigger rule none_failed) included."""
    gate = nightly.get_task("coalesce")
    assert type(gate).__name__ == "_ShortCircuitDecoratedOperator"
    assert gate.ignore_downstream_trigger_rules is True
    assert gate.get_flat_relative_ids(upstream=False) == {t.task_id for t in nightly.tasks} - {"coalesce"}
    assert gate.pool == "default_pool"  # it asks Airflow, not arXiv


def test_fulltext_and_embed_fan_out_as_mapped_tasks(nightly):
    mapped = {t.task_id for t in nightly.tasks if type(t).__name__ == "DecoratedMappedOperator"}
    assert mapped == {"embed_shard", "extract_raw_batch"}
    # a full-text batch is a mapped task group: extract_batch[i] waits for fetch_batch[i] only, so one
    # batch extracts while the next downloads
    group = nightly.get_task("fetch_batch").task_group
    assert type(group).__name__ == "MappedTaskGroup" and group is nightly.get_task("extract_batch").task_group
    assert {t.task_id for t in group} == {"fetch_batch", "extract_batch"}
    # the merges run when a plan had nothing to map (mapped task skipped), never after a failure
    for tid in ("merge_fulltext", "merge_embeddings"):
        assert nightly.get_task(tid).trigger_rule == "none_failed"


def test_pools_keep_arxiv_and_s2_polite(nightly):
    pools = json.loads(_airflow_env.POOLS_FILE.read_text())
    assert {name: p["slots"] for name, p in pools.items()} == {"arxiv_pool": 1, "s2_pool": 1}
    by_task = {t.task_id: (t.partial_kwargs.get("pool") if hasattr(t, "partial_kwargs") else None) or t.pool
               for t in nightly.tasks}
    assert by_task["harvest"] == "arxiv_pool"
    assert by_task["fetch_batch"] == "arxiv_pool"
    assert by_task["enrich"] == "s2_pool"
    # only network calls sit in pools: extraction and embedding fan out over every free worker slot
    assert {t for t, p in by_task.items() if p != "default_pool"} == {"harvest", "fetch_batch", "enrich"}
    assert set(by_task.values()) <= set(pools) | {"default_pool"}


def test_every_task_retries_with_exponential_backoff_and_has_docs(nightly):
    for t in nightly.tasks:
        kw = getattr(t, "partial_kwargs", {})
        retries = kw.get("retries", t.retries)
        assert retries >= 1, t.task_id
        assert kw.get("retry_exponential_backoff", t.retry_exponential_backoff) > 1, t.task_id
        assert kw.get("max_retry_delay", t.max_retry_delay) is not None, t.task_id
        doc = kw.get("doc_md") or t.doc_md
        assert doc and f"### {t.task_id}" in doc, t.task_id
    assert nightly.doc_md and "backfill" in nightly.doc_md


def test_assets_tables_per_step_and_snapshot_on_publish(nightly, bag):
    outlets = {t.task_id: {a.name for a in t.outlets} for t in nightly.tasks}
    assert outlets["publish"] == {"paperkb_snapshot"}
    assert outlets["feeds"] == {"paperkb_feeds"}  # downstream DAGs mail their own alerts from it
    assert {"paperkb.warehouse.papers", "paperkb.warehouse.authors"} <= outlets["harvest"]
    assert {"paperkb.warehouse.works", "paperkb.warehouse.citations"} <= outlets["enrich"]
    assert {"paperkb.warehouse.chunks", "paperkb.warehouse.figures"} <= outlets["merge_fulltext"]
    assert {"paperkb.warehouse.paper_metrics", "paperkb.warehouse.related"} <= outlets["graph"]
    snapshot = next(iter(nightly.get_task("publish").outlets))
    consumer = bag.dags["paperkb_consumer_example"]
    assert type(consumer.timetable).__name__ == "AssetTriggeredTimetable"
    condition = consumer.timetable.asset_condition
    assets = list(getattr(condition, "objects", [condition]))
    assert [(a.name, a.uri) for a in assets] == [(snapshot.name, snapshot.uri)]


# ---- the data interval -> the harvest window ---------------------------------------------------------------
def test_harvest_window_of_a_nightly_interval_is_its_day():
    start = datetime(2026, 11, 20, tzinfo=timezone.utc)
    assert harvest_window(start, start + timedelta(days=1)) == (date(2026, 11, 20), date(2026, 11, 20))
    assert harvest_window(start, start + timedelta(days=7)) == (date(2026, 11, 20), date(2026, 11, 26))
    assert harvest_window(start, start) == (date(2026, 11, 19), date(2026, 11, 19))  # empty interval: day before
    with pytest.raises(ValueError):
        harvest_window(start, start - timedelta(days=1))


def test_a_week_of_backfill_runs_harvests_each_day_exactly_once(nightly):
    """The DAG's own timetable makes 7 consecutive intervals; their windows tile the week."""
    from airflow.serialization.encoders import coerce_to_core_timetable
    from airflow.timetables.base import TimeRestriction

    tt = coerce_to_core_timetable(nightly.timetable)
    first = datetime(2026, 11, 1, tzinfo=timezone.utc)
    restriction = TimeRestriction(earliest=first, latest=None, catchup=True)
    days, last = [], None
    for _ in range(7):
        info = tt.next_dagrun_info(last_automated_data_interval=last, restriction=restriction)
        last = info.data_interval
        from_day, until_day = harvest_window(last.start, last.end)
        assert from_day == until_day
        days.append(from_day)
    assert days == [date(2026, 11, 1) + timedelta(days=i) for i in range(7)]


def test_staging_part_names_depend_on_content_only():
    assert part_name(["b", "a"]) == part_name(["a", "b"])
    assert part_name(["a"]) != part_name(["a", "b"])


# ---- paperkb refresh (the same steps without Airflow): argument errors are one line, exit 2 --------------------
@pytest.mark.parametrize("args, message", [
    (["refresh", "--from", "2026-13-01"], "not a date"),
    (["refresh", "--from", "2026-11-07", "--until", "2026-11-01"], "is after --until"),
])
def test_refresh_cli_rejects_bad_windows(args, message, capsys, tmp_path):
    from pipeline.cli import main

    assert main(["--warehouse", str(tmp_path / "wh"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_replay_run_over_an_empty_raw_zone_fails_harvest_at_once(nightly, settings, monkeypatch):
    """``--conf '{"replay": true}'`` over a raw zone with no arXiv responses: the harvest task fails without
    retries (``AirflowFailException``), with the one line that says there is nothing to replay."""
    from airflow.sdk.exceptions import AirflowFailException

    monkeypatch.setenv("PAPERKB_WAREHOUSE", str(settings.warehouse))
    start = datetime(2026, 11, 20, tzinfo=timezone.utc)
    harvest = nightly.get_task("harvest")
    with pytest.raises(AirflowFailException, match="nothing to replay: the raw zone .* holds no arXiv responses"):
        harvest.python_callable(params={"replay": True, "from": "", "until": ""}, data_interval_start=start,
                                data_interval_end=start + timedelta(days=1))
