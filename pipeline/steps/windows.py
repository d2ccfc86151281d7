"""Harvest windows: which OAI-PMH days a run harvests, and how a backfill's runs coalesce.

A DAG run's window is its data interval's days (or its ``from``/``until`` params). ``coalesce`` (the
DAG's first task) lets a run that sees the next run of a backfill already queued record its window in
``deferred_windows`` and skip the rest; the run that goes through harvests its own window plus the
deferred ones (:func:`harvest_windows`), in the fewest OAI-PMH lists, and does the whole-corpus work
(enrich .. publish) once.

No heavy imports at module level: the DAG's parse-time tests use the interval helpers.
"""

from __future__ import annotations

import logging
from datetime import date, datetime, timedelta, timezone
from typing import Any, Callable, Iterable, Mapping

from pipeline.dates import parse_day
from pipeline.errors import UserError
from pipeline.settings import Settings
from pipeline.writer_lock import writes

Window = tuple[date, date]  # inclusive OAI-PMH days (from, until)

log = logging.getLogger(__name__)


# ---- the data interval -> the harvest window ----------------------------------------------------------------
def harvest_window(interval_start: datetime | date | None, interval_end: datetime | date | None) -> tuple[date, date]:
    """Inclusive OAI-PMH ``from``/``until`` days for an Airflow data interval ``[start, end)``.

    A nightly run over ``[2026-11-20 00:00, 2026-11-21 00:00)`` harvests the day 2026-11-20; a run whose
    interval spans a week harvests those seven days. OAI-PMH dates are inclusive days, so the end is
    exclusive by one microsecond. An empty interval (manual runs of a trigger timetable, where start ==
    end) means the day before it.
    """
    if interval_start is None or interval_end is None:
        raise ValueError("a data interval needs a start and an end")
    start = _as_datetime(interval_start)
    end = _as_datetime(interval_end)
    if end < start:
        raise ValueError(f"data interval ends before it starts: {start} > {end}")
    if end == start:
        day = (start - timedelta(days=1)).date()
        return day, day
    return start.date(), (end - timedelta(microseconds=1)).date()


def _as_datetime(value: datetime | date) -> datetime:
    if isinstance(value, datetime):
        return value
    return datetime(value.year, value.month, value.day)


def run_window(interval_start, interval_end, from_param: str | date | None = None,
               until_param: str | date | None = None) -> Window:
    """The harvest window of a DAG run: its data interval's days, or the ``from``/``until`` params.

    Either param alone overrides that end of the window only; both empty (the default) leaves the data
    interval's window as it is. ``from`` after ``until`` is a ``UserError``. A run with no data interval
    (an Airflow 3 manual trigger without a logical date) harvests the params' window, else yesterday (UTC)."""
    f, u = parse_day(from_param, "from"), parse_day(until_param, "until")
    if interval_start is None or interval_end is None:
        now = datetime.now(timezone.utc)
        interval_start = interval_end = now  # an empty interval: the day before it
    from_day, until_day = harvest_window(interval_start, interval_end)
    from_day, until_day = f or from_day, u or until_day
    if until_day < from_day:
        from pipeline.errors import UserError

        raise UserError(f"the window's until {until_day} is before its from {from_day}")
    return from_day, until_day


def merge_windows(windows: Iterable[Window]) -> list[Window]:
    """Inclusive day windows -> the fewest ranges covering the same days, oldest first (overlapping or
    adjacent windows join: 11-01..11-01 and 11-02..11-03 is one list, 11-01..11-03)."""
    out: list[list[date]] = []
    for f, u in sorted((min(a, b), max(a, b)) for a, b in windows):
        if out and f <= out[-1][1] + timedelta(days=1):
            out[-1][1] = max(out[-1][1], u)
        else:
            out.append([f, u])
    return [(f, u) for f, u in out]


# ---- coalescing backfills: a run with a later run queued defers its window to it ---------------------------------
def neighbour_logical_dates(logical_date: datetime | None, interval_start, interval_end) -> list[datetime]:
    """Logical dates of the runs just after and just before this one on the DAG's timetable: the next day
    of a forward backfill and the previous day of a ``--run-backwards`` one. Both are one data interval
    away from this run's logical date (for a scheduled or backfill run that is the interval start; for a
    manual run with a logical date, its end). No logical date (an Airflow 3 manual run): none."""
    if logical_date is None or interval_start is None or interval_end is None:
        return []
    step = _as_datetime(interval_end) - _as_datetime(interval_start)
    if step <= timedelta(0):
        return []
    return [logical_date + step, logical_date - step]


def coalesce_decision(queued_neighbours: int | None, *, replay: bool = False) -> bool:
    """True = defer this run to a queued neighbour. Fails safe: unknown (``None``, Airflow could not be
    asked) or none queued runs everything; a replay run never defers (it re-parses the raw zone, and a
    deferred window must be harvested from the network)."""
    return bool(not replay and queued_neighbours is not None and queued_neighbours > 0)


def airflow_queued_counter(ti: Any) -> Callable[[list[datetime]], int]:
    """Counts this DAG's runs in state ``queued`` at the given logical dates, through the Task SDK
    (``RuntimeTaskInstance.get_dr_count``: the execution API, never the metadata DB)."""

    def count(logical_dates: list[datetime]) -> int:
        return int(ti.get_dr_count(dag_id=ti.dag_id, logical_dates=logical_dates, states=["queued"]))

    return count


def coalesce(settings: Settings, *, logical_date: datetime | None, interval_start, interval_end,
                  params: Mapping[str, Any] | None = None, dag_run_id: str | None = None,
                  count_queued: Callable[[list[datetime]], int] | None = None) -> dict:
    """The DAG's first task: decide whether this run defers to a queued neighbour (see ``coalesce_decision``).

    Deferring records the run's harvest window in ``deferred_windows`` (and a ``coalesce`` row in
    ``run_log``); the DAG then skips every task of this run. Any error while asking Airflow means "run"."""
    params = params or {}
    replay = bool(params.get("replay"))
    window = run_window(interval_start, interval_end, params.get("from"), params.get("until"))
    dates = neighbour_logical_dates(logical_date, interval_start, interval_end)
    queued: int | None = None
    why = ""
    if replay:
        why = "replay runs never defer"
    elif count_queued is None:
        why = "no way to ask Airflow"
    elif not dates:
        why = "no logical date to find the neighbouring runs by"
    else:
        try:
            queued = count_queued(dates)
        except Exception as exc:  # noqa: BLE001 - fail safe: a run that cannot ask does everything
            why = f"could not ask Airflow ({type(exc).__name__}: {exc})"
            log.warning("coalesce: %s; running everything", why)
    defer = coalesce_decision(queued, replay=replay)
    decision = {"defer": defer, "queued_neighbours": queued, "neighbours": [d.isoformat() for d in dates],
                "from_date": window[0].isoformat(), "until_date": window[1].isoformat(),
                "reason": why or (f"{queued} neighbouring run(s) queued: the next one harvests this window"
                                  if defer else "no neighbouring run queued")}
    if defer:
        defer_window(settings, window, dag_run_id=dag_run_id, message=str(decision["reason"]))
    log.info("coalesce: %s %s .. %s (%s)", "deferring" if defer else "running", window[0], window[1], decision["reason"])
    return decision


@writes("coalesce")
def defer_window(settings: Settings, window: Window, *, dag_run_id: str | None = None, message: str = "") -> None:
    """Record a deferred window (idempotent: the same window twice is one row) and a ``coalesce`` run_log row."""
    from pipeline.warehouse import Warehouse

    with Warehouse(settings) as wh:
        wh.init()
        with wh.run("coalesce", interval=(window[0].isoformat(), window[1].isoformat())) as run:
            with wh.transaction():
                wh.con.execute(
                    "INSERT INTO deferred_windows (from_date, until_date, dag_run_id, deferred_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (from_date, until_date) DO UPDATE SET dag_run_id = excluded.dag_run_id, "
                    "deferred_at = excluded.deferred_at",
                    [window[0], window[1], dag_run_id, datetime.now(timezone.utc)])
            run.count("deferred", 1)
            run.message = f"deferred {window[0]} .. {window[1]}: {message}" if message else f"deferred {window[0]} .. {window[1]}"


def deferred_windows(settings: Settings) -> list[Window]:
    """The windows deferred so far, oldest first (none without a warehouse)."""
    from pipeline.warehouse import Warehouse

    if not settings.db_path.exists():
        return []
    with Warehouse(settings) as wh:
        wh.init()
        rows = wh.con.execute("SELECT from_date, until_date FROM deferred_windows ORDER BY from_date, until_date").fetchall()
    return [(f, u) for f, u in rows]


def clear_deferred_windows(settings: Settings, windows: Iterable[Window]) -> int:
    """Delete deferred windows once harvested; returns how many rows went."""
    from pipeline.warehouse import Warehouse

    windows = list(windows)
    if not windows:
        return 0
    with Warehouse(settings) as wh:
        wh.init()
        n = 0
        with wh.transaction():
            for f, u in windows:
                n += len(wh.con.execute("DELETE FROM deferred_windows WHERE from_date = ? AND until_date = ? "
                                        "RETURNING from_date", [f, u]).fetchall())
    return n


# ---- the harvest step of a DAG run ----------------------------------------------------------------------------
class NothingToReplay(UserError):
    """A replay run (``--conf '{"replay": true}'``) over a raw zone that holds no arXiv responses: it would
    re-parse nothing and publish nothing new, so the DAG fails its ``harvest`` task at once (no retries)."""


def check_replay_source(settings: Settings) -> int:
    """How many arXiv responses (OAI pages, API feeds) a replay would re-parse; none: :class:`NothingToReplay`."""
    from pipeline.raw import RawZone

    n = sum(1 for e in RawZone(settings.raw_dir).entries("arxiv") if e.path.startswith(("arxiv/oai/", "arxiv/api/")))
    if n == 0:
        raise NothingToReplay(
            f"nothing to replay: the raw zone {settings.raw_dir} holds no arXiv responses. A replay run re-parses what "
            f"earlier runs fetched into this warehouse (PAPERKB_WAREHOUSE={settings.warehouse}); it does not fetch. "
            "Check PAPERKB_WAREHOUSE on every worker, or run without replay: for the recorded data, start "
            "`paperkb replay-server DATA_DIR` and export the PAPERKB_*_URL lines it prints (docs/deployment.md)")
    return n


@writes("harvest")
def harvest_windows(settings: Settings, interval_start, interval_end, replay: bool = False,
                    from_param: str | None = None, until_param: str | None = None) -> dict:
    """The run's window (data interval, or the ``from``/``until`` params) plus every deferred window,
    joined into the fewest OAI-PMH lists; each list's deferred windows are cleared once it is merged.
    ``replay`` re-parses the raw zone and leaves deferred windows for the next network run."""
    from pipeline.steps import harvest

    own = run_window(interval_start, interval_end, from_param, until_param)
    if replay:
        n = check_replay_source(settings)
        log.info("harvest: re-parsing the %d arXiv responses of the raw zone (window %s .. %s not fetched)", n, *own)
        return _with_window(harvest.run_harvest(settings, replay=True), *own)
    deferred = deferred_windows(settings)
    ranges = merge_windows([own, *deferred])
    log.info("harvest window %s .. %s (inclusive)%s", own[0], own[1],
             f" plus {len(deferred)} deferred window(s): lists {', '.join(f'{f}..{u}' for f, u in ranges)}" if deferred else "")
    summaries = []
    for f, u in ranges:
        summaries.append(harvest.run_harvest(settings, from_date=f, until_date=u))
        clear_deferred_windows(settings, [w for w in deferred if f <= w[0] and w[1] <= u])
    out = summaries[0] if len(summaries) == 1 else _sum_summaries(summaries)
    out = _with_window(out, *own)
    out["deferred_windows"] = [[f.isoformat(), u.isoformat()] for f, u in deferred]
    out["lists"] = [[f.isoformat(), u.isoformat()] for f, u in ranges]
    return out


def _sum_summaries(summaries: list[dict]) -> dict:
    """Several harvest summaries as one: numbers add up, anything else is the last list's."""
    out: dict = {}
    for s in summaries:
        for k, v in s.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and isinstance(out.get(k, 0), (int, float)):
                out[k] = out.get(k, 0) + v
            else:
                out[k] = v
    return out


def _with_window(summary: Any, from_day: date, until_day: date) -> dict:
    out = dict(summary) if isinstance(summary, dict) else {"result": summary}
    out.setdefault("from_date", from_day.isoformat())
    out.setdefault("until_date", until_day.isoformat())
    return out
