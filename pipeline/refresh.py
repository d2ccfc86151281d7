"""The nightly refresh: every step in the order the Airflow DAG runs it.

``paperkb refresh`` runs the steps one after the other in this process; ``dags/paperkb_nightly.py`` runs
the very same functions as Airflow tasks, fanning fulltext and embed out over mapped tasks::

    [coalesce ->] harvest -> enrich -> fulltext (plan, per batch: download then extract, merge) -> graph
            -> embed (plan, one task per shard, merge) -> publish

``coalesce`` exists only in the DAG: a run that sees the next run of a backfill already queued records
its harvest window in ``deferred_windows`` and skips the rest; the run that goes through harvests its
own window plus the deferred ones, and does the whole-corpus work (enrich .. publish) once.

Each ``*_task`` function below is what one Airflow task calls (the DAG file only wires them), so the
CLI and the DAG cannot drift apart. Every step is idempotent: a rerun of the same window upserts the
same rows, a staging part is named after its content, and merges absorb whatever parts exist.

No heavy imports at module level: the DAG file imports this module inside its tasks only, but the
helpers for the data interval are also used at parse time by tests.
"""

from __future__ import annotations

import hashlib
import logging
import time
from datetime import date, datetime, timedelta, timezone
from typing import Any, Callable, Iterable, Mapping

from pipeline.settings import Settings
from pipeline.writer_lock import task_lock, writes

Window = tuple[date, date]  # inclusive OAI-PMH days (from, until)

log = logging.getLogger(__name__)

STEP_ORDER = ("harvest", "enrich", "fulltext", "graph", "embed", "publish")


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


def parse_day(text: str | None) -> date | None:
    """``YYYY-MM-DD`` -> date (``None`` stays ``None``); a clear UserError otherwise."""
    if text is None or text == "":
        return None
    from pipeline.errors import UserError

    try:
        return date.fromisoformat(text)
    except ValueError:
        raise UserError(f"not a date (expected YYYY-MM-DD): {text!r}") from None


def run_window(interval_start, interval_end, from_param: str | date | None = None,
               until_param: str | date | None = None) -> Window:
    """The harvest window of a DAG run: its data interval's days, or the ``from``/``until`` params.

    Either param alone overrides that end of the window only; both empty (the default) leaves the data
    interval's window as it is. ``from`` after ``until`` is a ``UserError``. A run with no data interval
    (an Airflow 3 manual trigger without a logical date) harvests the params' window, else yesterday (UTC)."""
    f = from_param if isinstance(from_param, date) else parse_day(from_param)
    u = until_param if isinstance(until_param, date) else parse_day(until_param)
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


def coalesce_task(settings: Settings, *, logical_date: datetime | None, interval_start, interval_end,
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
        with task_lock(settings, "coalesce"):
            defer_window(settings, window, dag_run_id=dag_run_id, message=decision["reason"])
    log.info("coalesce: %s %s .. %s (%s)", "deferring" if defer else "running", window[0], window[1], decision["reason"])
    return decision


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


# ---- fan-out helpers ---------------------------------------------------------------------------------------
def part_name(paper_ids: list[str]) -> str:
    """A staging part named after its content, so a retried batch overwrites its own file."""
    digest = hashlib.sha1("\n".join(sorted(paper_ids)).encode()).hexdigest()[:12]
    return f"ft-{digest}"


def plan_fulltext_batches(settings: Settings, replay: bool = False) -> dict[str, list[dict]]:
    """The mapped full-text tasks: ``{"download": [batch, ...], "in_raw": [batch, ...]}``, each batch
    ``{"part": ..., "paper_ids": [...]}``.

    Papers whose PDF is already in the raw zone (imported with ``paperkb import-pdfs``, fetched by an
    earlier run, or every paper in ``replay``) are batched apart from those still to download: their
    batches go straight to extraction, on every free worker, instead of queueing behind the downloads'
    one-slot politeness pool.
    """
    from pipeline import fulltext

    ids = [pid for batch in fulltext.plan_batches(settings, batch_size=settings.fulltext_batch_size, replay=replay)
           for pid in batch]
    stored = set(ids) if replay else set(fulltext.in_raw_zone(settings, ids))
    size = settings.fulltext_batch_size

    def batches(group: list[str]) -> list[dict]:
        return [{"part": part_name(group[i:i + size]), "paper_ids": group[i:i + size]} for i in range(0, len(group), size)]

    return {"download": batches([p for p in ids if p not in stored]), "in_raw": batches([p for p in ids if p in stored])}


# ---- what each Airflow task calls --------------------------------------------------------------------------
def harvest_task(settings: Settings, interval_start, interval_end, replay: bool = False,
                 from_param: str | None = None, until_param: str | None = None) -> dict:
    """The run's window (data interval, or the ``from``/``until`` params) plus every deferred window,
    joined into the fewest OAI-PMH lists; each list's deferred windows are cleared once it is merged.
    ``replay`` re-parses the raw zone and leaves deferred windows for the next network run."""
    with task_lock(settings, "harvest"):
        return _harvest_task(settings, interval_start, interval_end, replay, from_param, until_param)


def _harvest_task(settings: Settings, interval_start, interval_end, replay: bool, from_param: str | None,
                  until_param: str | None) -> dict:
    from pipeline import harvest

    own = run_window(interval_start, interval_end, from_param, until_param)
    if replay:
        log.info("harvest: re-parsing the raw zone (window %s .. %s not fetched)", *own)
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


def enrich_task(settings: Settings, replay: bool = False) -> dict:
    from pipeline import enrich

    with task_lock(settings, "enrich"):  # Airflow: queue behind another writer
        return enrich.run_enrich(settings, replay=replay)


def fetch_batch_task(settings: Settings, batch: dict, replay: bool = False) -> dict:
    """The download half of a batch (Airflow: in ``arxiv_pool``): PDFs into the raw zone only."""
    from pipeline import fulltext

    return fulltext.fetch_batch(settings, batch["paper_ids"], batch["part"], replay=replay)


def extract_batch_task(settings: Settings, fetched: dict, replay: bool = False) -> dict:
    """The extraction half (Airflow: no pool): raw zone -> the batch's staging part."""
    from pipeline import fulltext

    stats = fulltext.extract_batch(settings, fetched["paper_ids"], fetched["part"], failures=fetched.get("failures"),
                                   replay=replay)
    stats.update(downloaded=fetched.get("downloaded", 0), from_raw=fetched.get("from_raw", 0))
    return stats


def fulltext_batch_task(settings: Settings, batch: dict, replay: bool = False) -> dict:
    """Both halves of one batch in this process."""
    from pipeline import fulltext

    return fulltext.fetch_extract_batch(settings, batch["paper_ids"], batch["part"], replay=replay)


def merge_fulltext_task(settings: Settings) -> dict:
    from pipeline import fulltext

    with task_lock(settings, "fulltext"):  # Airflow: queue behind another writer
        return fulltext.merge_fulltext(settings)


def graph_task(settings: Settings) -> dict:
    from pipeline import graph

    with task_lock(settings, "graph"):  # Airflow: queue behind another writer
        return graph.run_graph(settings)


def plan_embed_shards(settings: Settings) -> list[dict]:
    from pipeline import embed

    return embed.plan_shards(settings, settings.embed_shards)


def embed_shard_task(settings: Settings, shard: dict) -> dict:
    from pipeline import embed

    return embed.embed_shard(settings, shard)


def merge_embeddings_task(settings: Settings) -> dict:
    from pipeline import embed

    with task_lock(settings, "embed"):  # Airflow: queue behind another writer
        return embed.merge_embeddings(settings)


def publish_task(settings: Settings) -> dict:
    """Publish (Airflow: queued behind another writer), unless the warehouse holds no papers: then
    ``{"skipped": reason}`` and CURRENT stays as it is (the DAG marks the task skipped)."""
    from pipeline import publish

    with task_lock(settings, "publish"):  # Airflow: queue behind another writer
        empty = empty_warehouse_reason(settings)
        if empty is not None:
            log.warning("%s", empty)
            return {"skipped": empty}
        return publish.run_publish(settings)


def feeds_task(settings: Settings, snapshot_id: str | None = None) -> dict:
    """After publish: mail the snapshot's feed digest when mail is configured (once per recipient) and say
    how many new papers each feed lists (the DAG puts that on the ``paperkb_feeds`` asset event)."""
    from pipeline.feed_mail import deliver

    with task_lock(settings, "feeds"):  # it records deliveries in the warehouse
        return deliver(settings, snapshot_id)


def _with_window(summary: Any, from_day: date, until_day: date) -> dict:
    out = dict(summary) if isinstance(summary, dict) else {"result": summary}
    out.setdefault("from_date", from_day.isoformat())
    out.setdefault("until_date", until_day.isoformat())
    return out


# ---- the single-process refresh ---------------------------------------------------------------------------
@writes("refresh")
def run_refresh(
    settings: Settings,
    from_date: date | None = None,
    until_date: date | None = None,
    replay: bool = False,
    on_step: Callable[[str, dict, float], None] | None = None,
) -> dict:
    """All steps in order, in this process, exactly as the DAG runs them (batches and shards one by one).

    ``from_date``/``until_date`` default to the harvest watermark (incremental); ``replay`` rebuilds the
    sources from the raw zone without the network. Returns ``{"steps": {step: summary}, "seconds": ...}``.
    """
    from pipeline import embed, enrich, fulltext, graph, harvest, publish

    steps: dict[str, dict] = {}
    seconds: dict[str, float] = {}

    def timed(name: str, fn: Callable[[], Any]) -> dict:
        t0 = time.perf_counter()
        result = fn()
        took = round(time.perf_counter() - t0, 2)
        summary = result if isinstance(result, dict) else {"result": result}
        steps[name], seconds[name] = summary, took
        if on_step is not None:
            on_step(name, summary, took)
        return summary

    timed("harvest", lambda: harvest.run_harvest(settings, from_date=from_date, until_date=until_date, replay=replay))
    timed("enrich", lambda: enrich.run_enrich(settings, replay=replay))

    def _fulltext() -> dict:
        plan = plan_fulltext_batches(settings, replay=replay)
        batches = plan["download"] + plan["in_raw"]
        parts = [fulltext.fetch_extract_batch(settings, b["paper_ids"], b["part"], replay=replay) for b in batches]
        merged = fulltext.merge_fulltext(settings)
        return {"batches": len(batches), "batch_summaries": parts, "merge": merged}

    timed("fulltext", _fulltext)
    timed("graph", lambda: graph.run_graph(settings))

    empty = empty_warehouse_reason(settings, replay=replay)
    if empty is not None:  # nothing to search: keep CURRENT (and the working LanceDB) as they are; the CLI warns
        return {"steps": steps, "seconds": seconds, "snapshot_id": None, "not_published": empty}

    def _embed() -> dict:
        shards = embed.plan_shards(settings, settings.embed_shards)
        parts = [embed.embed_shard(settings, shard) for shard in shards]
        merged = embed.merge_embeddings(settings)
        return {"shards": len(shards), "encoded_in_shards": sum(int(p.get("encoded", 0)) for p in parts), "merge": merged}

    timed("embed", _embed)
    timed("publish", lambda: publish.run_publish(settings))
    return {"steps": steps, "seconds": seconds, "snapshot_id": steps["publish"].get("snapshot_id")}


def warehouse_papers(settings: Settings) -> int:
    """Papers in the working warehouse (0 when it has no database yet)."""
    if not settings.db_path.is_file():
        return 0
    import duckdb

    con = duckdb.connect(str(settings.db_path), read_only=True)
    try:
        return int(con.execute("SELECT count(*) FROM papers").fetchone()[0])
    except duckdb.CatalogException:  # no papers table yet
        return 0
    finally:
        con.close()


def empty_warehouse_reason(settings: Settings, replay: bool = False) -> str | None:
    """Why a refresh must not publish (the warehouse holds no paper after its steps), or ``None``.

    A snapshot of 0 papers would replace a good CURRENT with one that finds nothing; an empty source
    (an empty raw zone under ``--replay``, a window with nothing harvested into an empty warehouse,
    a wrong ``--warehouse``) is far likelier a mistake than the intent."""
    if warehouse_papers(settings) > 0:
        return None
    from pipeline import snapshots

    source = "the raw zone holds nothing to replay" if replay else "nothing was harvested or imported"
    current = snapshots.current_id(settings)
    keep = f"; CURRENT stays {current}" if current else ""
    return (f"the warehouse {settings.warehouse} holds no papers ({source}): not embedding or publishing an empty "
            f"snapshot{keep}")


def one_line(summary: dict, limit: int = 160) -> str:
    """A compact ``key=value`` line of a step's top-level scalars, for logs and the CLI."""
    parts = [f"{k}={v}" for k, v in summary.items() if isinstance(v, (int, float, str, bool)) or v is None]
    line = " ".join(parts)
    return line if len(line) <= limit else line[: limit - 3] + "..."
