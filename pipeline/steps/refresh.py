"""The nightly refresh in one process: every step in the order the Airflow DAG runs it.

``paperkb refresh`` runs the steps one after the other here; ``dags/paperkb_nightly.py`` calls the very
same step functions as Airflow tasks, fanning fulltext and embed out over mapped tasks::

    [coalesce ->] harvest -> enrich -> fulltext (plan, per batch: download then extract, merge) -> graph
            -> embed (plan, one task per shard, merge) -> publish -> feeds

(``coalesce`` and the deferred harvest windows exist only in the DAG: :mod:`pipeline.steps.windows`.)
Every step is idempotent: a rerun of the same window upserts the same rows, a staging part is named
after its content, and merges absorb whatever parts exist.
"""

from __future__ import annotations

import logging
import time
from datetime import date
from typing import Any, Callable

from pipeline import progress
from pipeline.settings import Settings
from pipeline.writer_lock import writes

log = logging.getLogger(__name__)

STEP_ORDER = ("harvest", "enrich", "fulltext", "graph", "embed", "publish")


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
    from pipeline.steps import embed, enrich, fulltext, graph, harvest, publish

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
        plan = fulltext.plan_fulltext_batches(settings, replay=replay)
        batches = plan["download"] + plan["in_raw"]
        t0 = time.perf_counter()
        totals: dict[str, Any] = {"papers": sum(len(b["paper_ids"]) for b in batches), "batches": len(batches)}
        with progress.task("fulltext: PDFs", total=totals["papers"], unit="papers") as bar:
            for b in batches:
                part = fulltext.fetch_extract_batch(settings, b["paper_ids"], b["part"], replay=replay, bar=bar)
                for key in ("downloaded", "from_raw", "extracted", "rejected", "retry_later", "pages", "chunks",
                            "figures", "references"):
                    totals[key] = totals.get(key, 0) + int(part.get(key, 0))
        merged = fulltext.merge_fulltext(settings)
        return {**totals, "merge": merged, "seconds": round(time.perf_counter() - t0, 2)}  # as run_fulltext's

    timed("fulltext", _fulltext)
    timed("graph", lambda: graph.run_graph(settings))

    empty = publish.empty_warehouse_reason(settings, replay=replay)
    if empty is not None:  # nothing to search: keep CURRENT (and the working LanceDB) as they are; the CLI warns
        return {"steps": steps, "seconds": seconds, "snapshot_id": None, "not_published": empty}

    def _embed() -> dict:
        shards = embed.plan_shards(settings, settings.embed_shards)
        t0 = time.perf_counter()
        encoded = sum(int(embed.embed_shard(settings, shard).get("encoded", 0)) for shard in shards)
        merged = embed.merge_embeddings(settings)  # the shape of run_embed's summary, over every shard
        return {**merged, "shards": len(shards), "encoded": encoded + int(merged.get("encoded", 0)),
                "seconds": round(time.perf_counter() - t0, 2)}

    timed("embed", _embed)
    timed("publish", lambda: publish.run_publish(settings))
    return {"steps": steps, "seconds": seconds, "snapshot_id": steps["publish"].get("snapshot_id")}


def one_line(summary: dict, limit: int = 160) -> str:
    """A compact ``key=value`` line of a step's top-level scalars, for logs and the CLI."""
    parts = [f"{k}={v}" for k, v in summary.items() if isinstance(v, (int, float, str, bool)) or v is None]
    line = " ".join(parts)
    return line if len(line) <= limit else line[: limit - 3] + "..."
