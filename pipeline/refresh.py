"""The nightly refresh: every step in the order the Airflow DAG runs it.

``paperkb refresh`` runs the steps one after the other in this process; ``dags/paperkb_nightly.py`` runs
the very same functions as Airflow tasks, fanning fulltext and embed out over mapped tasks::

    harvest -> enrich -> fulltext (plan, one task per batch, merge) -> graph
            -> embed (plan, one task per shard, merge) -> publish

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
from datetime import date, datetime, timedelta
from typing import Any, Callable

from pipeline.settings import Settings

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


# ---- fan-out helpers ---------------------------------------------------------------------------------------
def part_name(paper_ids: list[str]) -> str:
    """A staging part named after its content, so a retried batch overwrites its own file."""
    digest = hashlib.sha1("\n".join(sorted(paper_ids)).encode()).hexdigest()[:12]
    return f"ft-{digest}"


def plan_fulltext_batches(settings: Settings, replay: bool = False) -> list[dict]:
    """One dict per mapped fulltext task: ``{"part": ..., "paper_ids": [...]}``."""
    from pipeline import fulltext

    batches = fulltext.plan_batches(settings, batch_size=settings.fulltext_batch_size, replay=replay)
    return [{"part": part_name(list(ids)), "paper_ids": list(ids)} for ids in batches if ids]


# ---- what each Airflow task calls --------------------------------------------------------------------------
def harvest_task(settings: Settings, interval_start, interval_end, replay: bool = False) -> dict:
    from pipeline import harvest

    from_day, until_day = harvest_window(interval_start, interval_end)
    log.info("harvest window %s .. %s (inclusive)%s", from_day, until_day, " from the raw zone" if replay else "")
    summary = harvest.run_harvest(settings, from_date=from_day, until_date=until_day, replay=replay)
    return _with_window(summary, from_day, until_day)


def enrich_task(settings: Settings, replay: bool = False) -> dict:
    from pipeline import enrich

    return enrich.run_enrich(settings, replay=replay)


def fulltext_batch_task(settings: Settings, batch: dict, replay: bool = False) -> dict:
    from pipeline import fulltext

    return fulltext.fetch_extract_batch(settings, batch["paper_ids"], batch["part"], replay=replay)


def merge_fulltext_task(settings: Settings) -> dict:
    from pipeline import fulltext

    return fulltext.merge_fulltext(settings)


def graph_task(settings: Settings) -> dict:
    from pipeline import graph

    return graph.run_graph(settings)


def plan_embed_shards(settings: Settings) -> list[dict]:
    from pipeline import embed

    return embed.plan_shards(settings, settings.embed_shards)


def embed_shard_task(settings: Settings, shard: dict) -> dict:
    from pipeline import embed

    return embed.embed_shard(settings, shard)


def merge_embeddings_task(settings: Settings) -> dict:
    from pipeline import embed

    return embed.merge_embeddings(settings)


def publish_task(settings: Settings) -> dict:
    from pipeline import publish

    return publish.run_publish(settings)


def _with_window(summary: Any, from_day: date, until_day: date) -> dict:
    out = dict(summary) if isinstance(summary, dict) else {"result": summary}
    out.setdefault("from_date", from_day.isoformat())
    out.setdefault("until_date", until_day.isoformat())
    return out


# ---- the single-process refresh ---------------------------------------------------------------------------
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
        batches = plan_fulltext_batches(settings, replay=replay)
        parts = [fulltext.fetch_extract_batch(settings, b["paper_ids"], b["part"], replay=replay) for b in batches]
        merged = fulltext.merge_fulltext(settings)
        return {"batches": len(batches), "batch_summaries": parts, "merge": merged}

    timed("fulltext", _fulltext)
    timed("graph", lambda: graph.run_graph(settings))

    def _embed() -> dict:
        shards = embed.plan_shards(settings, settings.embed_shards)
        parts = [embed.embed_shard(settings, shard) for shard in shards]
        merged = embed.merge_embeddings(settings)
        return {"shards": len(shards), "encoded_in_shards": sum(int(p.get("encoded", 0)) for p in parts), "merge": merged}

    timed("embed", _embed)
    timed("publish", lambda: publish.run_publish(settings))
    return {"steps": steps, "seconds": seconds, "snapshot_id": steps["publish"].get("snapshot_id")}


def one_line(summary: dict, limit: int = 160) -> str:
    """A compact ``key=value`` line of a step's top-level scalars, for logs and the CLI."""
    parts = [f"{k}={v}" for k, v in summary.items() if isinstance(v, (int, float, str, bool)) or v is None]
    line = " ".join(parts)
    return line if len(line) <= limit else line[: limit - 3] + "..."
