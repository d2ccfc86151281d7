"""
# paperkb nightly refresh

Crawls arXiv (OAI-PMH) for the run's **data interval**, enriches the papers from Semantic Scholar,
extracts full text from the PDFs, computes citation-graph metrics, embeds everything into LanceDB and
publishes an immutable snapshot that downstream DAGs and apps read.

```
coalesce -> harvest -> enrich -> plan_fulltext       -> [fetch_batch -> extract_batch][*] -> merge_fulltext
                               -> plan_raw_extraction -> extract_raw_batch[*] ---------------->
         -> graph -> plan_embed -> embed_shard[*] -> merge_embeddings -> publish -> feeds
```

* **Backfills** cost what their days cost: `airflow backfill create --dag-id paperkb_nightly
  --from-date 2026-11-01 --to-date 2026-11-07 --max-active-runs 1`. A run whose neighbouring run
  (the next logical date, or the previous one for `--run-backwards`) is already queued only records its
  harvest window in the warehouse table `deferred_windows` (`coalesce`) and skips everything else; the
  last run harvests its own day plus every deferred day in one OAI-PMH list, then enriches, extracts,
  embeds and publishes once. Every step upserts on natural keys, so rerunning a day changes nothing.
* **Fan-out**: per full-text batch to download, `fetch_batch` downloads the PDFs into the raw zone
  (pool `arxiv_pool`) and `extract_batch` extracts them (no pool: batches extract in parallel while the
  next batch downloads); batches whose PDFs are already in the raw zone (imported, fetched before,
  replays) go straight to `extract_raw_batch` on every free worker; `embed_shard` is mapped too. Outputs go to staging Parquet, and a single merge task
  writes DuckDB / LanceDB.
* **One writer**: tasks that write the warehouse (harvest, enrich, the merges, graph, publish) take its
  writer lock and wait for it (`PAPERKB_LOCK_WAIT_S`, logged) while a CLI step or another run holds
  it; the mapped tasks only read DuckDB and write staging files, so they take no lock.
* **Politeness**: tasks that talk to arXiv run in the pool `arxiv_pool`, tasks that talk to Semantic
  Scholar in `s2_pool` (one slot each; created by `make run` and by the compose `airflow-init` job
  from `dags/pools.json`). Raise `arxiv_pool` only for a mirror that allows parallel downloads.
* **Retries**: each task retries with exponential backoff (`PAPERKB_AIRFLOW_RETRIES`,
  `PAPERKB_AIRFLOW_RETRY_DELAY_S`); a failed task reruns alone. A service that cannot be reached at
  all (its host does not resolve, or refuses) fails the task at once, without retries.
* **Assets**: each step declares the warehouse tables it writes; `publish` emits `paperkb_snapshot`
  with the snapshot id in the event's extra (see `paperkb_consumer_example`); `feeds` emits
  `paperkb_feeds` with the new matching papers per saved interest (and mails the digest if configured).
* **Params**: `replay=true` re-parses arXiv/S2 from the raw zone instead of the network (a raw zone
  with no arXiv responses fails `harvest` at once: nothing to replay);
  `from`/`until` (YYYY-MM-DD, empty by default) replace the data interval's harvest window, e.g. one run
  over a whole week.

Settings come from the environment (`PAPERKB_WAREHOUSE`, `PAPERKB_ARXIV_OAI_URL`, `S2_API_KEY`, ...).
The DAG only wires calls to the steps in `pipeline.steps` (and `pipeline.feeds.mail`); all logic lives in the
`pipeline` package.
"""

from __future__ import annotations

import functools
import inspect
from datetime import datetime, timedelta

from airflow.sdk import Asset, CronDataIntervalTimetable, Param, chain, dag, task, task_group
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from pipeline.errors import ServiceUnreachable
from pipeline.settings import Settings
from pipeline.steps.windows import NothingToReplay

_cfg = Settings()  # parse-time: schedule and retry policy only (cheap, no I/O)

ARXIV_POOL = "arxiv_pool"
S2_POOL = "s2_pool"


def _table(name: str) -> Asset:
    return Asset(name=f"paperkb.warehouse.{name}", uri=f"x-paperkb://warehouse/{name}", group="paperkb-warehouse")


PAPERS, AUTHORS, PAPER_AUTHORS, VERSIONS = (_table(t) for t in ("papers", "authors", "paper_authors", "versions"))
WORKS, CITATIONS = _table("works"), _table("citations")
CHUNKS, FIGURES, FULLTEXT_DOCS = _table("chunks"), _table("figures"), _table("fulltext_docs")
PAPER_METRICS, RELATED, POWERLAW_FITS = _table("paper_metrics"), _table("related"), _table("powerlaw_fits")
LANCEDB = Asset(name="paperkb.lancedb", uri="x-paperkb://warehouse/lancedb", group="paperkb-warehouse")
SNAPSHOT = Asset(name="paperkb_snapshot", uri="x-paperkb://snapshots/current", group="paperkb")
FEEDS = Asset(name="paperkb_feeds", uri="x-paperkb://snapshots/current/feeds", group="paperkb")


def _settings() -> Settings:
    """The environment's settings; a task queues behind another writer instead of failing at once."""
    return Settings.load(lock_queue=True)


def step(**task_kwargs):
    """``@task`` whose docstring becomes the task doc in the UI (dedented: Airflow renders it as Markdown).
    A service that cannot be reached at all (``ServiceUnreachable``), or a replay with nothing to replay
    (``NothingToReplay``), fails the task without retries."""

    def wrap(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except (ServiceUnreachable, NothingToReplay) as exc:
                raise AirflowFailException(str(exc)) from exc

        return task(doc_md=inspect.cleandoc(fn.__doc__ or ""), **task_kwargs)(run)

    return wrap


def gate(**task_kwargs):
    """``@task.short_circuit`` documented like ``step``: returning False skips every later task of the run."""

    def wrap(fn):
        return task.short_circuit(doc_md=inspect.cleandoc(fn.__doc__ or ""), **task_kwargs)(fn)

    return wrap


DAY = r"^(\d{4}-\d{2}-\d{2})?$"


@dag(
    dag_id="paperkb_nightly",
    schedule=CronDataIntervalTimetable(_cfg.airflow_schedule, timezone="UTC"),
    start_date=datetime.fromisoformat(_cfg.airflow_start_date),
    catchup=False,
    max_active_runs=1,  # DuckDB has a single writer: one run at a time (backfills: --max-active-runs 1, their own limit)
    default_args={
        "owner": "paperkb",
        "retries": _cfg.airflow_retries,
        "retry_delay": timedelta(seconds=_cfg.airflow_retry_delay_s),
        "retry_exponential_backoff": 2.0,
        "max_retry_delay": timedelta(seconds=_cfg.airflow_max_retry_delay_s),
    },
    params={
        "replay": Param(False, type="boolean", description="re-parse arXiv/S2 from the raw zone, no network"),
        "from": Param("", type="string", pattern=DAY,
                      description="harvest from this day (YYYY-MM-DD) instead of the data interval's first; empty: the interval's"),
        "until": Param("", type="string", pattern=DAY,
                       description="harvest until this day (inclusive) instead of the data interval's last; empty: the interval's"),
    },
    tags=["paperkb"],
    doc_md=__doc__,
)
def paperkb_nightly():
    @gate()
    def coalesce(params=None, logical_date=None, data_interval_start=None, data_interval_end=None, run_id=None,
                 ti=None) -> bool:
        """
        ### coalesce
        Asks Airflow (Task SDK `get_dr_count`) whether the neighbouring run of this DAG (next logical
        date; previous one for backwards backfills) is already queued. If so, this run records its
        harvest window in `deferred_windows` and skips all its other tasks: the queued run harvests it.
        Otherwise (nightly runs, the last day of a backfill, replays, or when Airflow cannot be asked)
        the run goes on. The decision is in this task's log and in its XCom `decision`.
        """
        from pipeline.steps import windows

        decision = windows.coalesce(
            _settings(), logical_date=logical_date, interval_start=data_interval_start, interval_end=data_interval_end,
            params=params, dag_run_id=run_id, count_queued=windows.airflow_queued_counter(ti))
        ti.xcom_push(key="decision", value=decision)
        return not decision["defer"]

    @step(pool=ARXIV_POOL, outlets=[PAPERS, AUTHORS, PAPER_AUTHORS, VERSIONS])
    def harvest(params=None, data_interval_start=None, data_interval_end=None) -> dict:
        """
        ### harvest
        Lists the arXiv OAI-PMH records whose datestamp falls in this run's window (the data
        interval's days, or the `from`/`until` params) plus every window earlier runs deferred to it
        (one list per contiguous range), lands every response in `raw/arxiv/` and upserts `papers`,
        `authors`, `paper_authors`, `versions`. Pool `arxiv_pool`: one client talks to arXiv at a time.
        """
        from pipeline.steps import windows

        return windows.harvest_windows(_settings(), data_interval_start, data_interval_end, replay=bool(params["replay"]),
                                       from_param=params.get("from"), until_param=params.get("until"))

    @step(pool=S2_POOL, outlets=[WORKS, CITATIONS, PAPERS])
    def enrich(params=None) -> dict:
        """
        ### enrich
        Asks Semantic Scholar for ids, counts, references and citations of papers not enriched
        recently (`PAPERKB_S2_MODE`: `/paper/batch` with the edge lists by default; `datasets` applies
        the S2 Datasets diffs since the loaded release first); lands everything in `raw/s2/` and upserts
        `works`, `citations` and the S2 columns of `papers`. Pool `s2_pool`.
        """
        from pipeline.steps import enrich

        return enrich.run_enrich(_settings(), replay=bool(params["replay"]))

    @step()
    def plan_fulltext(params=None) -> list[dict]:
        """
        ### plan_fulltext
        Lists papers that need full text and whose PDF is not in the raw zone yet, in batches
        (`PAPERKB_FULLTEXT_BATCH_SIZE`); each batch is one `fetch_batch` and one `extract_batch` task.
        No batches: the mapped tasks are skipped and the merge still runs.
        """
        from pipeline.steps import fulltext

        return fulltext.plan_fulltext_batches(_settings(), replay=bool(params["replay"]))["download"]

    @step()
    def plan_raw_extraction(params=None) -> list[dict]:
        """
        ### plan_raw_extraction
        Lists papers that need full text and whose PDF is already in the raw zone (imported, fetched
        by an earlier run, or every paper of a replay), in batches; each batch is one
        `extract_raw_batch` task: no download, no pool, on every free worker.
        """
        from pipeline.steps import fulltext

        return fulltext.plan_fulltext_batches(_settings(), replay=bool(params["replay"]))["in_raw"]

    @step(pool=ARXIV_POOL, map_index_template="{{ task.op_kwargs['batch']['part'] }}")
    def fetch_batch(batch: dict, params=None) -> dict:
        """
        ### fetch_batch (mapped)
        Downloads the batch's PDFs into `raw/pdf/` (papers already there are skipped) and returns
        which ones failed and why. Network only: no extraction, no DuckDB or staging writes. Pool
        `arxiv_pool`: one download client at a time across all batches and runs.
        """
        from pipeline.steps import fulltext

        return fulltext.fetch_batch(_settings(), batch["paper_ids"], batch["part"], replay=bool(params["replay"]))

    @step(map_index_template="{{ task.op_kwargs['fetched']['part'] }}")
    def extract_batch(fetched: dict, params=None) -> dict:
        """
        ### extract_batch (mapped)
        Extracts sections, chunks and figure legends of the batch's PDFs from the raw zone and writes
        one staging Parquet part named after the batch's content (a retry overwrites it). No pool and
        no network: batches extract in parallel, each as soon as its own download is done.
        """
        from pipeline.steps import fulltext

        return fulltext.extract_fetched(_settings(), fetched, replay=bool(params["replay"]))

    @task_group(group_id="fulltext", prefix_group_id=False)
    def fulltext(batch: dict):
        """One full-text batch to download: download (arxiv_pool), then extract (no pool)."""
        return extract_batch(fetched=fetch_batch(batch=batch))  # by keyword: the map index templates read op_kwargs

    @step(map_index_template="{{ task.op_kwargs['fetched']['part'] }}")
    def extract_raw_batch(fetched: dict, params=None) -> dict:
        """
        ### extract_raw_batch (mapped)
        `extract_batch` for a batch whose PDFs are already in the raw zone: nothing to download, so it
        does not wait for `arxiv_pool`; batches extract on every free worker at once.
        """
        from pipeline.steps import fulltext

        return fulltext.extract_fetched(_settings(), fetched, replay=bool(params["replay"]))

    @step(trigger_rule="none_failed", outlets=[CHUNKS, FIGURES, FULLTEXT_DOCS])
    def merge_fulltext() -> dict:
        """
        ### merge_fulltext
        Upserts every staging part into `chunks`, `figures`, `fulltext_docs` (idempotent). Runs also
        when there was nothing to fetch.
        """
        from pipeline.steps import fulltext

        return fulltext.merge_fulltext(_settings())

    @step(outlets=[PAPER_METRICS, RELATED, POWERLAW_FITS])
    def graph() -> dict:
        """
        ### graph
        Builds the citation graph with igraph: PageRank, the power-law fit of citation counts and its
        survival weights, and the co-citation / coupling neighbours in `related`.
        """
        from pipeline.steps import graph

        return graph.run_graph(_settings())

    @step()
    def plan_embed() -> list[dict]:
        """
        ### plan_embed
        Splits the texts to embed into `PAPERKB_EMBED_SHARDS` shards by content hash.
        """
        from pipeline.steps import embed

        settings = _settings()
        return embed.plan_shards(settings, settings.embed_shards)

    @step(map_index_template="shard {{ shard['index'] }}")
    def embed_shard(shard: dict) -> dict:
        """
        ### embed_shard (mapped)
        Encodes the shard's new texts (unchanged content hashes are cached) and stages the vectors as
        Parquet. Reads DuckDB read-only; no LanceDB writes.
        """
        from pipeline.steps import embed

        return embed.embed_shard(_settings(), shard)

    @step(trigger_rule="none_failed", outlets=[LANCEDB])
    def merge_embeddings() -> dict:
        """
        ### merge_embeddings
        Absorbs the staged vectors and syncs the LanceDB tables `chunks`, `papers`, `figures` and
        their vector and full-text indexes (the single LanceDB writer).
        """
        from pipeline.steps import embed

        return embed.merge_embeddings(_settings())

    @step(outlets=[SNAPSHOT])
    def publish(*, outlet_events=None) -> dict:
        """
        ### publish
        Writes `snapshots/<id>.tmp/`, verifies it, renames it and swaps `snapshots/CURRENT`. Emits the
        `paperkb_snapshot` asset event with the snapshot id and path, which schedules downstream DAGs.
        A warehouse with no papers is not published (the task is skipped, CURRENT stays).
        """
        from pipeline.steps import publish

        summary = publish.publish_unless_empty(_settings())
        if "skipped" in summary:  # an empty warehouse: no snapshot, no asset event, CURRENT unchanged
            raise AirflowSkipException(summary["skipped"])
        outlet_events[SNAPSHOT].extra = {k: str(summary[k]) for k in ("snapshot_id", "path") if k in summary}
        return summary

    @step(outlets=[FEEDS])
    def feeds(published: dict, *, outlet_events=None) -> dict:
        """
        ### feeds
        The snapshot holds, per saved interest (`paperkb interests add`), a feed of its new papers that match
        (Atom, JSON Feed, Markdown and HTML under `snapshots/<id>/feeds/`). This task mails the digest when
        `PAPERKB_FEED_SMTP_HOST` and `PAPERKB_FEED_MAIL_TO` are set (each recipient once per snapshot) and
        emits the `paperkb_feeds` asset event with the snapshot id and the matches per feed, so downstream
        DAGs can send their own notifications.
        """
        from pipeline.feeds import mail

        out = mail.deliver(_settings(), published.get("snapshot_id"))
        outlet_events[FEEDS].extra = {"snapshot_id": out["snapshot_id"], "feeds": out["feeds"]}
        return out

    plans = [plan_fulltext(), plan_raw_extraction()]
    shards = plan_embed()
    extractions = [fulltext.expand(batch=plans[0]), extract_raw_batch.expand(fetched=plans[1])]
    chain(coalesce(), harvest(), enrich(), plans)
    plans[1] >> extractions[0].operator.task_group  # both plans see the raw zone before this run downloads into it
    plans[0] >> extractions[1]
    published = publish()
    chain(extractions, merge_fulltext(), graph(), shards, embed_shard.expand(shard=shards), merge_embeddings(), published)
    feeds(published)


paperkb_nightly()
