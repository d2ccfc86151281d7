"""Backfills that cost what their days cost: the pure parts of the DAG's ``coalesce`` gate and of the
harvest that absorbs deferred windows (no Airflow here: the count of queued runs is a fake)."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import duckdb
import pytest

from pipeline.errors import UserError
from pipeline.steps import windows
from pipeline.steps.windows import (coalesce, coalesce_decision, deferred_windows, merge_windows,
                                    neighbour_logical_dates, run_window)

D = date.fromisoformat
NOV = [date(2026, 11, d) for d in range(1, 31)]


def utc(day: str) -> datetime:
    return datetime.fromisoformat(day).replace(tzinfo=timezone.utc)


# ---- windows -------------------------------------------------------------------------------------------------
def test_merge_windows_joins_overlapping_and_adjacent_days_oldest_first():
    week = [(d, d) for d in NOV[:7]]
    assert merge_windows(reversed(week)) == [(NOV[0], NOV[6])]  # a backfill's days: one list
    assert merge_windows([(D("2026-11-05"), D("2026-11-09")), (D("2026-11-01"), D("2026-11-02")),
                          (D("2026-11-03"), D("2026-11-03")), (D("2026-11-08"), D("2026-11-12")),
                          (D("2026-11-20"), D("2026-11-20"))]) == \
        [(D("2026-11-01"), D("2026-11-03")), (D("2026-11-05"), D("2026-11-12")), (D("2026-11-20"), D("2026-11-20"))]
    assert merge_windows([(NOV[0], NOV[0]), (NOV[2], NOV[2])]) == [(NOV[0], NOV[0]), (NOV[2], NOV[2])]  # a gap
    assert merge_windows([(NOV[3], NOV[3]), (NOV[3], NOV[3])]) == [(NOV[3], NOV[3])]  # the same day twice
    assert merge_windows([]) == []


def test_run_window_is_the_data_interval_unless_the_params_say_otherwise():
    start, end = utc("2026-11-20"), utc("2026-11-21")
    assert run_window(start, end) == (D("2026-11-20"), D("2026-11-20"))
    assert run_window(start, end, "", "") == (D("2026-11-20"), D("2026-11-20"))  # the params' defaults
    assert run_window(start, end, "2026-11-01", "2026-11-07") == (D("2026-11-01"), D("2026-11-07"))
    assert run_window(start, end, "2026-11-01", None) == (D("2026-11-01"), D("2026-11-20"))
    with pytest.raises(UserError, match="before its from"):
        run_window(start, end, "2026-11-21", "")
    with pytest.raises(UserError, match="not a date"):
        run_window(start, end, "2026-13-01", "")


# ---- the gate's decision -------------------------------------------------------------------------------------
def test_neighbours_are_one_interval_either_side_of_the_logical_date():
    start = utc("2026-11-03")
    # a backfill / scheduled run: logical date = interval start; its next run starts at the interval end
    assert neighbour_logical_dates(start, start, start + timedelta(days=1)) == [utc("2026-11-04"), utc("2026-11-02")]
    # a manual run (dag.test, dags trigger) has logical date = interval end
    assert neighbour_logical_dates(utc("2026-11-04"), start, utc("2026-11-04")) == [utc("2026-11-05"), utc("2026-11-03")]
    assert neighbour_logical_dates(None, start, utc("2026-11-04")) == []  # Airflow 3 manual run without a date
    assert neighbour_logical_dates(start, start, start) == []


@pytest.mark.parametrize("queued, replay, defer", [
    (None, False, False),  # Airflow could not be asked: run everything (fail safe)
    (0, False, False),  # nightly: nothing queued after it
    (1, False, True),  # a backfill day with the next day queued
    (2, False, True),
    (1, True, False),  # a replay never defers
])
def test_coalesce_decision(queued, replay, defer):
    assert coalesce_decision(queued, replay=replay) is defer


# ---- the gate task, with a fake Airflow --------------------------------------------------------------------------
def _deferred_rows(settings):
    con = duckdb.connect(str(settings.db_path), read_only=True)
    try:
        return con.execute("SELECT from_date, until_date, dag_run_id FROM deferred_windows ORDER BY 1").fetchall()
    finally:
        con.close()


def _gate(settings, day: str, count_queued, **params):
    start = utc(day)
    return coalesce(settings, logical_date=start, interval_start=start, interval_end=start + timedelta(days=1),
                         params={"replay": False, "from": "", "until": "", **params}, dag_run_id=f"backfill__{day}",
                         count_queued=count_queued)


def test_a_backfill_day_with_the_next_one_queued_defers_its_window(settings):
    asked = []

    def queued(dates):
        asked.append(dates)
        return 1

    decision = _gate(settings, "2026-11-03", queued)
    assert decision["defer"] is True and decision["queued_neighbours"] == 1
    assert asked == [[utc("2026-11-04"), utc("2026-11-02")]]
    assert _deferred_rows(settings) == [(D("2026-11-03"), D("2026-11-03"), "backfill__2026-11-03")]
    _gate(settings, "2026-11-03", queued)  # the same backfill again: still one row
    assert deferred_windows(settings) == [(D("2026-11-03"), D("2026-11-03"))]
    con = duckdb.connect(str(settings.db_path), read_only=True)
    try:
        assert con.execute("SELECT count(*), min(status) FROM run_log WHERE step = 'coalesce'").fetchone() == (2, "ok")
    finally:
        con.close()


@pytest.mark.parametrize("count_queued", [
    None,  # paperkb refresh / no Task SDK
    lambda dates: 0,  # the nightly run: nothing queued
    lambda dates: (_ for _ in ()).throw(RuntimeError("no supervisor comms")),  # cannot ask Airflow
])
def test_the_gate_runs_everything_when_nothing_is_queued_or_it_cannot_ask(settings, count_queued):
    decision = _gate(settings, "2026-11-03", count_queued)
    assert decision["defer"] is False
    assert not settings.db_path.exists()  # a run that goes on writes nothing at the gate


def test_a_replay_run_never_defers(settings):
    assert _gate(settings, "2026-11-03", lambda dates: 1, replay=True)["defer"] is False


def test_the_window_of_a_ranged_run_is_what_it_defers(settings):
    decision = _gate(settings, "2026-11-20", lambda dates: 1, **{"from": "2026-11-01", "until": "2026-11-07"})
    assert (decision["from_date"], decision["until_date"]) == ("2026-11-01", "2026-11-07")
    assert deferred_windows(settings) == [(D("2026-11-01"), D("2026-11-07"))]


# ---- the run that goes through harvests the deferred windows too --------------------------------------------------
@pytest.fixture
def harvests(monkeypatch):
    from pipeline.steps import harvest

    calls = []

    def fake(settings, from_date=None, until_date=None, replay=False):
        calls.append((from_date, until_date, replay))
        return {"step": "harvest", "papers_new": 1, "papers_updated": 0, "run_id": f"h{len(calls)}"}

    monkeypatch.setattr(harvest, "run_harvest", fake)
    return calls


def test_the_last_run_of_a_backfill_harvests_every_deferred_day_in_one_list_then_clears_them(settings, harvests):
    for day in ("2026-11-01", "2026-11-02", "2026-11-03", "2026-11-05"):
        _gate(settings, day, lambda dates: 1)
    start = utc("2026-11-06")
    out = windows.harvest_windows(settings, start, start + timedelta(days=1))
    assert harvests == [(D("2026-11-01"), D("2026-11-03"), False), (D("2026-11-05"), D("2026-11-06"), False)]
    assert (out["from_date"], out["until_date"]) == ("2026-11-06", "2026-11-06")  # the run's own window
    assert out["lists"] == [["2026-11-01", "2026-11-03"], ["2026-11-05", "2026-11-06"]]
    assert len(out["deferred_windows"]) == 4 and out["papers_new"] == 2  # the lists' counts add up
    assert deferred_windows(settings) == []


def test_a_failed_list_keeps_its_deferred_windows_for_the_retry(settings, harvests, monkeypatch):
    from pipeline.steps import harvest

    for day in ("2026-11-01", "2026-11-03"):
        _gate(settings, day, lambda dates: 1)

    def second_fails(settings, from_date=None, until_date=None, replay=False):
        if from_date == D("2026-11-03"):
            raise RuntimeError("arXiv is down")
        harvests.append((from_date, until_date, replay))
        return {"papers_new": 0}

    monkeypatch.setattr(harvest, "run_harvest", second_fails)
    start = utc("2026-11-04")
    with pytest.raises(RuntimeError):
        windows.harvest_windows(settings, start, start + timedelta(days=1))
    assert deferred_windows(settings) == [(D("2026-11-03"), D("2026-11-03"))]  # 11-01's list was merged


def test_a_nightly_run_harvests_its_own_day_alone(settings, harvests):
    start = utc("2026-11-20")
    out = windows.harvest_windows(settings, start, start + timedelta(days=1))
    assert harvests == [(D("2026-11-20"), D("2026-11-20"), False)]
    assert out["deferred_windows"] == [] and out["papers_new"] == 1


def test_a_replay_run_leaves_deferred_windows_for_the_next_network_run(settings, harvests):
    from pipeline.raw import RawZone

    RawZone(settings.raw_dir).write("arxiv", "oai/2026-11-01/page-00001.xml", b"<OAI-PMH/>", url="http://oai")
    _gate(settings, "2026-11-01", lambda dates: 1)
    start = utc("2026-11-20")
    windows.harvest_windows(settings, start, start + timedelta(days=1), replay=True)
    assert harvests == [(None, None, True)]
    assert deferred_windows(settings) == [(D("2026-11-01"), D("2026-11-01"))]


def test_a_manual_run_without_a_data_interval_harvests_its_params_or_yesterday():
    from pipeline.steps.windows import run_window

    assert run_window(None, None, "2026-11-01", "2026-11-07") == (date(2026, 11, 1), date(2026, 11, 7))
    yesterday = datetime.now(timezone.utc).date() - timedelta(days=1)
    assert run_window(None, None) == (yesterday, yesterday)
    assert run_window(None, None, "2026-11-01") == (date(2026, 11, 1), yesterday)


def test_a_replay_run_over_a_raw_zone_without_arxiv_responses_fails_in_one_line(settings, harvests):
    """``--conf '{"replay": true}'`` over an empty raw zone would re-read nothing and succeed: it fails at
    once (the DAG turns ``NothingToReplay`` into a failure without retries), saying where it looked and
    what to do instead."""
    start = utc("2026-11-20")
    with pytest.raises(windows.NothingToReplay) as err:
        windows.harvest_windows(settings, start, start + timedelta(days=1), replay=True)
    assert harvests == []
    msg = str(err.value)
    assert "\n" not in msg and str(settings.raw_dir) in msg and "paperkb replay-server" in msg
