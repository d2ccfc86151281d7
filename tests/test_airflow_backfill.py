"""Backfilling a week through Airflow creates one run per day, each harvesting exactly its own day."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone

import _airflow_env
import pytest

from pipeline.steps.windows import harvest_window

pytestmark = pytest.mark.slow


def test_backfill_a_week_plans_one_run_per_day(tmp_path):
    _airflow_env.migrated()
    _airflow_env.airflow_cli("dags", "reserialize")
    out = _airflow_env.airflow_cli("backfill", "create", "--dag-id", "paperkb_nightly", "--from-date", "2026-11-01",
                                   "--to-date", "2026-11-07", "--dry-run").stdout
    logical = sorted(set(re.findall(r"\| (2026-11-\d\d) 00:00:00\+00:00 \|", out)))
    assert logical == [(date(2026, 11, 1) + timedelta(days=i)).isoformat() for i in range(7)], out

    bag = _airflow_env.dagbag()
    from airflow.serialization.encoders import coerce_to_core_timetable

    tt = coerce_to_core_timetable(bag.dags["paperkb_nightly"].timetable)
    windows = []
    for day in logical:
        # a scheduled/backfill run's logical date is its data interval start (CronDataIntervalTimetable)
        start = datetime.fromisoformat(day).replace(tzinfo=timezone.utc)
        interval = tt.infer_manual_data_interval(run_after=start + timedelta(days=1))
        assert interval.start == start
        windows.append(harvest_window(interval.start, interval.end))
    assert windows == [(date.fromisoformat(d), date.fromisoformat(d)) for d in logical]
