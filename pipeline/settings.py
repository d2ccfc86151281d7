"""All settings in one place.

Environment variables use the prefix ``PAPERKB_`` (``PAPERKB_WAREHOUSE``, ``PAPERKB_ARXIV_OAI_URL``...);
``S2_API_KEY`` is read without prefix as Semantic Scholar users expect. CLI flags override both.
"""

from __future__ import annotations

import json
import os
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PACKAGE_DIR = Path(__file__).resolve().parent
# The top-level sql/ and dags/ folders ship inside the package (pipeline/sql and pipeline/dags are links
# to them in the checkout; the wheel holds real copies), so an installed paperkb never reads a checkout.
SQL_DIR = PACKAGE_DIR / "sql"
DAGS_DIR = PACKAGE_DIR / "dags"
STATIC_DIR = PACKAGE_DIR / "serve" / "static"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PAPERKB_", extra="ignore")

    # --- data root ---------------------------------------------------------------------------
    warehouse: Path = Field(default=Path("warehouse"), description="data root (raw zone, DuckDB, LanceDB, snapshots)")

    # --- services (settings so tests and mirrors can point elsewhere) -------------------------
    arxiv_oai_url: str = "https://oaipmh.arxiv.org/oai"
    arxiv_api_url: str = "https://export.arxiv.org/api/query"
    arxiv_pdf_url: str = "https://arxiv.org/pdf"
    s2_api_url: str = "https://api.semanticscholar.org/graph/v1"
    s2_api_key: str | None = Field(default=None, validation_alias=AliasChoices("S2_API_KEY", "PAPERKB_S2_API_KEY"))

    # --- politeness and retries ---------------------------------------------------------------
    categories: list[str] = Field(
        default_factory=lambda: ["cs.AI"],
        description="arXiv categories to keep: 'cs.AI' exact, 'cs' or 'cs.*' a whole archive, '*' everything")
    oai_set: str = "cs"
    oai_metadata_prefix: str = "arXivRaw"
    arxiv_delay_s: float = 3.0
    s2_delay_s: float = 1.0
    http_timeout_s: float = 60.0
    retry_max_attempts: int = 5
    retry_max_backoff_s: float = 120.0
    http_retry_after_max_s: float = Field(
        default=600.0, ge=0, description="the longest wait a server's Retry-After is honoured for (arXiv, Semantic "
        "Scholar, PDF hosts alike); a longer ask is cut to this and logged")
    max_consecutive_failures: int = 5
    user_agent: str = "paperkb/0.1 (+https://github.com/paperkb/paperkb)"

    # --- harvest (issue 2) --------------------------------------------------------------------
    # categories (above): '*' keeps every category (replays of non-cs data), 'cs' or 'cs.*' an archive
    harvest_batch_records: int = Field(
        default=5_000, ge=1, description="records per staging Parquet part (bounds memory of parse and merge)")
    harvest_commit_records: int = Field(
        default=10_000, ge=0,
        description="commit (and checkpoint) the merge after about every N records, so memory stays flat however many "
        "records a run brings (DuckDB keeps uncommitted rows in memory). The records of one paper (paper, versions, "
        "authors) always land in the same commit; the watermark and the list checkpoint move only in the last one, so "
        "a killed run leaves whole earlier batches, which the rerun skips as unchanged. 0: the whole run in one "
        "transaction (a killed run leaves the tables as they were; memory grows with the run)")
    harvest_memory_limit: str = Field(
        default="1GB", description="DuckDB memory_limit of the harvest's connection (its buffer pool and query memory; "
        "bigger work spills to DuckDB's temp directory beside the database file); '' = DuckDB's default, 80% of RAM")
    harvest_parse_workers: int = Field(
        default=1, ge=1, description="processes that parse OAI pages into staging Parquet (big replays/backfills); "
        "the DuckDB merge stays in one process")
    oai_max_restarts: int = Field(
        default=2, ge=0, description="times a list is restarted from the watermark after badResumptionToken")
    arxiv_api_batch: int = Field(default=100, ge=1, le=2000, description="ids per arXiv API id_list request")

    # --- enrich (issue 3) ---------------------------------------------------------------------
    s2_batch_size: int = Field(default=500, ge=1, le=500, description="ids per POST /paper/batch (S2 allows at most 500)")
    s2_page_size: int = Field(default=1000, ge=1, le=1000, description="limit per /references or /citations page (S2 max 1000)")
    s2_paper_fields: str = Field(
        default="paperId,externalIds,title,year,publicationDate,publicationTypes,venue,citationCount,"
        "influentialCitationCount,referenceCount,openAccessPdf,"
        "authors.authorId,authors.name,authors.citationCount,authors.paperCount,authors.hIndex",
        description="fields asked from /paper/batch")
    s2_edge_fields: str = Field(
        default="paperId,externalIds,title,year,citationCount,referenceCount,isInfluential,intents",
        description="fields asked from /paper/{id}/references and /citations (the edge plus the other paper)")
    s2_mode: Literal["batch", "per-paper", "datasets"] = Field(
        default="batch",
        description="how enrich gets the citation graph: 'batch' = /paper/batch with the citations and references "
        "lists (paging only lists longer than s2_batch_edge_cap), 'per-paper' = page /references and /citations of "
        "every paper, 'datasets' = the S2 Datasets API (bulk files, then diffs; needs S2_API_KEY)")
    s2_batch_edge_cap: int = Field(
        default=1000, ge=1, description="batch mode: a citations/references list of a /paper/batch record this long "
        "(and shorter than the paper's count) is taken as cut off and paged instead")
    s2_datasets_release: str = Field(
        default="latest", description="datasets mode: the release id of the first load ('latest' = the newest)")
    s2_fetch_references: bool = True
    s2_fetch_citations: bool = True
    s2_max_edges_per_paper: int | None = Field(
        default=None, description="stop paging a paper's references/citations after this many (None = all)")
    s2_refresh_days: float = Field(
        default=30.0, description="re-fetch S2 data of a paper (counts, edges) when older than this many days")

    # --- fulltext (issue 4) -------------------------------------------------------------------
    chunk_max_tokens: int = Field(
        default=256, ge=16, description="chunk window in the embedding model's tokens, [CLS]/[SEP] included")
    chunk_overlap_tokens: int = Field(
        default=32, ge=0, description="tokens shared by consecutive chunks of one section")
    chunk_min_tokens: int = Field(
        default=24, ge=0, description="a section shorter than this is joined to the next one (e.g. a bare heading)")
    chunk_tokenizer: str | None = Field(
        default=None, description="tokenizer name or path for chunking (None = the embed_model, else bundled all-MiniLM-L6-v2)")
    fulltext_batch_size: int = Field(default=50, ge=1, description="papers per fetch/extract batch (one staging part each)")
    pdf_max_bytes: int = Field(default=100_000_000, description="larger downloads are rejected (reason too_large)")
    pdf_timeout_s: float = Field(
        default=120.0, ge=0, description="the time one PDF may take to read (import-pdfs, fulltext, extract), in a "
        "worker process; past it the file is rejected (reason timeout) and the next one read; 0 = no budget, read in "
        "the step's own process")

    # --- graph (issue 5) ----------------------------------------------------------------------
    graph_damping: float = Field(default=0.85, gt=0, lt=1, description="PageRank damping factor")
    graph_top_k: int = Field(default=50, ge=1, description="related works kept per corpus paper (by weighted CCBC)")
    graph_powerlaw_discrete: bool = Field(default=False, description="discrete (integer) power-law estimator; slower")
    graph_powerlaw_min_n: int = Field(default=50, ge=3, description="fewer positive citation counts -> no fit, weights 1")
    graph_powerlaw_xmin: float | None = Field(default=None, description="fixed xmin instead of the KS search")
    graph_block_nnz: int = Field(default=10_000_000, ge=1000, description="CCBC block budget (candidate pairs); bounds memory")
    graph_pagerank_process_edges: int = Field(default=2_000_000, ge=0, description="graphs with at least this many citations rank in a child process while CCBC runs (igraph holds the GIL); a very large number keeps PageRank in the graph step's process")
    graph_related_refresh_change: float = Field(default=0.07, gt=0, le=1, description="every related list is recomputed before the citation graph has changed by this share since its run (links added or removed, over all links): a run computes the lists of new papers and of papers whose references changed, and, in turn, a sweep in paper id order of the others, change/N of them a run (a night that adds 1% of the papers: a seventh; one that changes nothing: none); related papers show a new paper in older lists at once, through the new papers' own lists, and the older lists' other scores move when their turn comes")
    graph_related_incoming_rows: int = Field(default=1_000_000, ge=0, description="also recompute a related list before the lists computed after it for new papers hold this many entries (related_incoming: what related papers read beside an older list), and sweep at least (the run's new and changed lists x graph_top_k) / N of the lists a run; 0 = no bound")
    graph_related_refresh_runs: int = Field(default=0, ge=0, description="also recompute every related list at least every this many graph runs, whatever the change: at least 1/N of the lists a run; 0 = no bound in runs; 1 = every run recomputes every list (exact every night)")
    graph_hub_citers: int | None = Field(default=300, ge=1, description="references with more citers are 'hubs': their sharing is bounded, then added exactly (same result, much faster); None = enumerate all")

    # --- embed / publish (issue 6) ------------------------------------------------------------
    embed_model: str | None = Field(
        default=None, description="sentence-transformers model name or path for documents (None = bundled all-MiniLM-L6-v2)")
    embed_query_model: str | None = Field(
        default=None, description="separate query encoder for asymmetric models such as MedCPT (None = embed_model)")
    embed_doc_format: str = Field(
        default="text", description="'text' (title + abstract / chunk text as one string) or 'title_text_pair' ([title, text] pairs)")
    embed_truncate_dim: int | None = Field(default=None, description="Matryoshka truncation of the vectors (None = full dimension)")
    embed_max_seq_length: int | None = Field(default=None, description="override the model's max tokens per text")
    embed_batch_size: int = 64
    embed_checkpoint_texts: int = Field(
        default=2048, ge=1,
        description="texts encoded between two checkpoints into the vector cache: a killed embed resumes from the last one")
    embed_cache_dir: Path | None = Field(
        default=None, description="vector cache by (model, content hash); None = <warehouse>/vector_cache. Safe to share")
    model_cache_dir: Path | None = Field(
        default=None, description="exported and quantized models (ONNX, OpenVINO IR, the snapshots' query encoders), made "
        "once per model + backend + precision and shared by every warehouse and process on the host; None = "
        "$XDG_CACHE_HOME/paperkb/models (~/.cache/paperkb/models), or a temporary folder when that is not writable")
    embed_device: str = Field(default="cpu", description="torch device: cpu, cuda, cuda:1, mps")
    embed_backend: str | None = Field(
        default=None, description="where the model runs: torch | onnx | openvino (None = auto: openvino on a CPU, fp32 or bf16 "
        "where the CPU has native bfloat16, the fastest measured to hold quality; torch fp16 on a GPU); openvino with embed_precision int8 costs 1.5-3x less CPU than torch fp32 on CPUs with VNNI/AMX (with AMX no less than bf16) for up to 0.01 less nDCG@10 (BENCHMARKS.md). Part of the vector space's identity, recorded in the snapshot: queries use the same")
    embed_precision: str | None = Field(
        default=None, description="fp32 | bf16 | fp16 | int8 (None = auto: "
        "fp16 for torch on CUDA; bf16 for openvino on a CPU with native bfloat16; else fp32). torch: fp32, bf16, fp16 (CUDA); onnx: fp32, int8 (dynamic quantization); openvino: fp32, bf16, int8 "
        "(static, NNCF). Part of the vector space's identity")
    embed_vector_index_min_rows: int = Field(default=100_000, description="build an ANN index on a vector column past this many rows")
    embed_index_max_deltas: int = Field(
        default=20, ge=0, description="each embed indexes its new rows as small index deltas (no existing file is "
        "rewritten, so a publish adds only the new files); past this many deltas in an index, the embed compacts the "
        "table and merges all of an index's segments, the base too (optimize). 0 = merge after every embed")
    embed_index_merge_fan_in: int = Field(
        default=4, ge=0, description="merge an index's deltas in tiers: once this many deltas of about one "
        "night's size have gathered, the night's rows and them become one delta (the base index is not "
        "rewritten, so a night writes at most ~this many nights of index). 0 or 1 = no tier merges, only "
        "the full merge past embed_index_max_deltas")
    embed_vector_index_type: str = Field(default="IVF_PQ", description="LanceDB index type: IVF_PQ (cheapest to build), IVF_HNSW_SQ (better recall), IVF_FLAT...")
    embed_vector_index_partitions: int | None = Field(default=None, description="IVF partitions (None = LanceDB default, ~sqrt(rows))")
    embed_vector_index_sub_vectors: int | None = Field(default=None, description="PQ sub-vectors for IVF_PQ (None = LanceDB default)")
    snapshot_keep: int = Field(default=5, ge=1, description="published snapshots to keep (CURRENT is always kept)")
    snapshot_min_age_h: float = Field(
        default=24.0, ge=0, description="never delete a snapshot published less than this many hours ago, even beyond "
        "snapshot_keep: readers get a day to move to a newer one (0 = snapshot_keep alone decides)")
    snapshot_store: str | None = Field(
        default=None, description="S3-compatible store that `paperkb publish` also uploads each snapshot to, "
        "s3://bucket/prefix (docs/object-storage.md); the endpoint and credentials are boto3's own settings "
        "(AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_PROFILE...). Readers open s3://bucket/prefix[@id] wherever a "
        "snapshot is asked for")
    snapshot_store_lease_s: float = Field(
        default=900.0, gt=0, description="lease of a reader's pin in the store (renewed every third of it while "
        "the reader lives); also the age an unreferenced object, or an incomplete multipart upload, must reach before the "
        "store's retention deletes it")
    snapshot_store_poll_s: float = Field(
        default=30.0, ge=0, description="how often `paperkb serve` asks the store which snapshot CURRENT names")
    snapshot_cache: Path | None = Field(
        default=None, description="local cache of snapshots read from the store (content-addressed); "
        "None = $XDG_CACHE_HOME/paperkb/snapshots (~/.cache/paperkb/snapshots)")

    # --- query (issue 7) ----------------------------------------------------------------------
    query_config: str = Field(default="default", description="named scoring configuration: 'default', 'hybrid' (the default without the nbr score regularisation), 'seed' (the design's five-signal formula), or the single-signal ablations 'bm25', 'dense', 'fusion'")
    query_weights: dict[str, float] | None = Field(
        default=None, description="override the chosen configuration's signal weights, e.g. {\"ck\": 0.5, \"bm25\": 0.4}")
    query_fusion: str = Field(default="blend", description="candidate fusion: blend | interleave | rrf")
    query_blend_sparse_weight: float = Field(default=0.5, ge=0.0, le=1.0, description="BM25 share of the blend (dense gets the rest)")
    query_k_sparse: int = Field(default=50, ge=1, description="BM25 candidates per (sub-)query (K_SPARSE)")
    query_k_dense: int = Field(default=50, ge=1, description="vector candidates per (sub-)query (K_DENSE)")
    query_k_merge: int = Field(default=100, ge=1, description="fused candidates kept per (sub-)query (K_MERGE)")
    query_rrf_k: int = Field(default=60, ge=1, description="reciprocal rank fusion constant")
    query_max_chars: int = Field(default=1000, ge=1, description="longest accepted query")
    query_torch_threads: int | None = Field(
        default=1, ge=1, description="threads while encoding a query: ONNX Runtime's (the snapshot's query encoder) or torch's intra-op "
                                     "threads (process-wide; 1 is 10x+ faster on a busy CPU; None = leave them alone)")
    query_bf16: bool | None = Field(
        default=None, description="encode queries under bfloat16 autocast with sentence-transformers (snapshots without their own query "
                                  "encoder; 1.6x less CPU per query here; vectors within 2e-5 cosine of float32); None = when the CPU "
                                  "computes bfloat16 natively (AVX512-BF16/AMX), elsewhere it is slower")
    query_blas_threads: int | None = Field(
        default=1, ge=1, description="BLAS (numpy) threads in a searching process (process-wide; per-query matrix products are small, "
                                     "and idle BLAS threads spinning next to LanceDB's cost 3-10x on this 2-core machine; None = leave numpy alone)")
    query_expand: str | None = Field(
        default=None, description="default expansion: off | prf | rm3 | llm | auto (None = llm when an LLM is configured, else rm3; auto = llm, else prf)")
    query_prf_docs: int = Field(default=10, ge=1, description="feedback passages for PRF expansion")
    query_prf_terms: int = Field(default=10, ge=1, description="terms PRF adds to the query")
    query_rm3_docs: int = Field(default=3, ge=1, description="first-pass (hybrid) passages RM3 feedback learns its terms from")
    query_rm3_terms: int = Field(default=30, ge=1, description="feedback terms RM3 scores with BM25 as the rm3 signal")
    query_nbr_k: int = Field(default=20, ge=1, description="candidate passages (of other papers) whose mean score is the nbr signal (score regularisation)")
    llm_base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1")
    llm_model: str | None = Field(default=None, description="chat model used for query expansion")
    llm_api_key: str | None = Field(default=None, validation_alias=AliasChoices("PAPERKB_LLM_API_KEY", "OPENAI_API_KEY"))
    llm_subqueries: int = Field(default=3, ge=1, le=10, description="sub-queries the LLM writes besides the original")
    llm_timeout_s: float = Field(default=8.0, gt=0, description="seconds, wall clock, the whole LLM exchange of a query "
                                                                 "expansion may take before the offline expander is used")
    llm_answer_timeout_s: float = Field(default=60.0, gt=0, description="paperkb ask: seconds, wall clock, the whole LLM "
                                                                        "exchange may take before the evidence alone is given")
    llm_answer_tokens: int = Field(default=200, ge=16, le=4096, description="paperkb ask: the most tokens the LLM's answer may take")
    llm_answer_max_chars: int = Field(default=20_000, ge=100, description="paperkb ask: the LLM's answer is cut to this many "
                                                                          "characters before it is checked (the answer says so)")
    llm_response_max_bytes: int = Field(default=1_048_576, ge=1024, description="the most bytes read of an LLM endpoint's "
                                                                                "answer (expansion and ask); a longer one fails")
    query_rerank_model: str | None = Field(default=None, description="sentence-transformers CrossEncoder name or path for --rerank")
    query_rerank_top: int = Field(default=50, ge=1, description="papers the cross-encoder re-scores")
    query_resident_mb: float = Field(
        default=1024, ge=0,
        description="memory a searcher may use to hold the snapshot's paper, figure and (on tables without an ANN index) "
                    "chunk vectors, instead of reading them from LanceDB per query; 0 reads everything per query")
    query_title_boost: bool = Field(default=False, description="apply title-match boosts by default")
    query_title_boost_scale: float = Field(default=0.01, ge=0.0, description="score added per title-boost point (+20 points = +0.2)")
    query_related_semantic_weight: float = Field(default=0.5, ge=0.0, le=1.0, description="semantic share of related-paper fusion (CCBC gets the rest)")
    query_related_quality_weight: float = Field(default=0.2, ge=0.0, le=1.0, description="share of confidence quality in the related ranking")

    # --- serve (issue 9) ----------------------------------------------------------------------
    serve_concurrency: int = Field(
        default=0, ge=0,
        description="searches computed at once by `paperkb serve` (0 = one per CPU core); more requests wait in line")
    serve_snapshots: str | None = Field(
        default=None,
        description="several indexes searched as one by `paperkb serve` (/api/search and the page): comma-separated "
                    "[NAME=]WHERE, WHERE a snapshot folder (pinned), a warehouse (its CURRENT, followed) or a snapshot id "
                    "of this warehouse (pinned); the first one also answers the paper pages")
    serve_allowed_hosts: list[str] = Field(
        default=["localhost", "127.0.0.1", "::1"],
        description="Host header values `paperkb serve` answers (others get 400; guards against DNS rebinding): add the "
                    "names the server is reached by when serving beyond loopback; '*.example.com' a domain, '*' any")

    # --- interests and feeds (issue 15) -------------------------------------------------------
    feed_query_threshold: float = Field(
        default=0.50, ge=-1.0, le=1.0,
        description="a new paper matches a saved query when the query's vector is at least this cosine from its abstract "
                    "or one of its passages (per interest: `interests add --threshold`)")
    feed_seed_threshold: float = Field(
        default=0.75, ge=-1.0, le=1.0,
        description="a new paper matches a seed set when its vector is at least this cosine from a seed's (or it cites "
                    "or is cited by a seed)")
    feed_max_items: int = Field(default=100, ge=1, description="papers listed per feed and snapshot (the most similar first)")
    feed_base_url: str | None = Field(
        default=None, description="public URL of `paperkb serve` (e.g. https://papers.example.org): feeds then carry self links")
    feed_smtp_host: str | None = Field(default=None, description="SMTP server that mails the feed digest after each publish (None = no mail)")
    feed_smtp_port: int = Field(default=587, ge=1, le=65535, description="SMTP port")
    feed_smtp_starttls: bool = Field(default=True, description="upgrade the SMTP connection with STARTTLS before logging in")
    feed_smtp_user: str | None = Field(default=None, description="SMTP login (None = no login)")
    feed_smtp_password: str | None = Field(default=None, description="SMTP password")
    feed_mail_from: str = Field(default="paperkb@localhost", description="sender address of the digest")
    feed_mail_to: list[str] = Field(default=[], description='recipients of the digest, e.g. ["me@example.org"]')

    # --- refresh / airflow (issue 8) ---------------------------------------------------------
    embed_shards: int = Field(default=4, ge=1, description="mapped embed tasks per refresh (Airflow fans them out)")
    airflow_schedule: str = Field(
        default="0 0 * * *",
        description="cron of the nightly DAG (UTC); each run harvests its data interval, midnight to midnight")
    airflow_start_date: str = Field(default="2026-01-01", description="first data interval of the nightly DAG (backfills start here at the earliest)")
    airflow_retries: int = Field(default=3, ge=0, description="retries per Airflow task")
    airflow_retry_delay_s: float = Field(default=60.0, ge=0, description="first retry delay; doubles on each retry")
    airflow_max_retry_delay_s: float = Field(default=1800.0, ge=0, description="cap on the retry delay")
    lock_queue: bool = Field(
        default=False, description="wait for the warehouse writer lock (up to lock_wait_s) instead of refusing at once; "
        "the Airflow DAG sets it for its tasks")
    lock_wait_s: float = Field(
        default=3600.0, description="how long an Airflow task waits for the warehouse writer lock held by another "
        "step before it fails (and is retried); 0 = no limit. The CLI never waits: it refuses at once")

    @field_validator("snapshot_store")
    @classmethod
    def _store_url(cls, value: str | None) -> str | None:
        """``s3://bucket/prefix``: the store publish writes to (a URL naming one snapshot is a reader's)."""
        if value is None or not value.strip():
            return None
        from pipeline.errors import UserError
        from pipeline.store.url import parse_store_url

        try:
            url = parse_store_url(value)
        except UserError as exc:
            raise ValueError(str(exc)) from None
        if url.snapshot_id:
            raise ValueError(f"{value!r} names a snapshot (@{url.snapshot_id}): give s3://bucket/prefix")
        return url.root

    @field_validator("feed_mail_from", "feed_mail_to")
    @classmethod
    def _one_address_per_line(cls, value: Any) -> Any:
        """A line break in an address would add mail headers (and the mail library refuses it at send time)."""
        for address in [value] if isinstance(value, str) else value:
            if not address.strip():
                raise ValueError("an address is empty")
            if any(ord(c) < 32 or ord(c) == 127 for c in address):
                raise ValueError(f"the address {address!r} contains a line break or another control character")
        return value

    # --- derived paths ------------------------------------------------------------------------
    @property
    def raw_dir(self) -> Path:
        return self.warehouse / "raw"

    @property
    def db_path(self) -> Path:
        return self.warehouse / "warehouse.duckdb"

    @property
    def staging_dir(self) -> Path:
        return self.warehouse / "staging"

    @property
    def snapshots_dir(self) -> Path:
        return self.warehouse / "snapshots"

    @property
    def lancedb_dir(self) -> Path:
        return self.warehouse / "lancedb"

    @classmethod
    def load(cls, **overrides) -> "Settings":
        """Environment first, then explicit overrides (CLI flags); ``None`` overrides are ignored.

        An invalid value raises :class:`pipeline.errors.InvalidSetting`: one line naming the environment
        variable and what it expects."""
        given = {k: v for k, v in overrides.items() if v is not None}
        try:
            return cls(**given)
        except ValueError as exc:  # pydantic's ValidationError, pydantic-settings' SettingsError (not JSON)
            invalid = invalid_setting(exc, set(given))
            if invalid is None:
                raise
            raise invalid from None


# ---- invalid settings as one line ----------------------------------------------------------------------
_SECRET = re.compile(r"password|api_key|secret|token", re.I)


def env_name(field: str) -> str:
    """The environment variable of a setting: ``snapshot_keep`` -> ``PAPERKB_SNAPSHOT_KEEP``
    (``s2_api_key`` -> ``S2_API_KEY or PAPERKB_S2_API_KEY``)."""
    info = Settings.model_fields.get(field)
    alias = info.validation_alias if info is not None else None
    if isinstance(alias, AliasChoices):
        return " or ".join(a for a in alias.choices if isinstance(a, str))
    if isinstance(alias, str):
        return alias
    return f"PAPERKB_{field.upper()}"


def _field_of(name: str) -> str | None:
    """A field name from an error location, which may be an alias (``S2_API_KEY``)."""
    if name in Settings.model_fields:
        return name
    for field, info in Settings.model_fields.items():
        alias = info.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
        if any(isinstance(a, str) and a.lower() == name.lower() for a in choices):
            return field
    return None


def _kind(annotation: Any) -> str:
    """What a type expects, in words: ``int`` -> ``an integer``, ``list[str]`` -> ``a JSON list of text``."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _kind(args[0])
    if origin is list:
        return 'a JSON list of ' + {"str": 'text, e.g. ["a", "b"]'}.get(getattr(args[0], "__name__", ""), "values")
    if origin is dict:
        return 'a JSON object of numbers, e.g. {"bm25": 0.4}'
    return {int: "an integer", float: "a number", bool: "true or false", str: "text", Path: "a path"}.get(
        annotation, "a valid value")


def _expected(field: str) -> str:
    info = Settings.model_fields[field]
    words = _kind(info.annotation)
    default = info.get_default(call_default_factory=True)
    if isinstance(default, list) and default and all(isinstance(x, str) for x in default):
        words = words.split(", e.g.")[0] + f", e.g. {json.dumps(default)}"
    bounds = []
    for m in info.metadata:
        for attr, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if getattr(m, attr, None) is not None:
                bounds.append(f"{op} {getattr(m, attr):g}")
    return words + (" " + " and ".join(bounds) if bounds else "")


def _env_value(field: str) -> str | None:
    names = {n.lower() for n in env_name(field).split(" or ")}
    return next((v for k, v in os.environ.items() if k.lower() in names), None)


def invalid_setting(exc: BaseException, overridden: frozenset[str] | set[str] = frozenset()) -> Exception | None:
    """One :class:`~pipeline.errors.InvalidSetting` for pydantic's errors about :class:`Settings` (a value
    out of range, of the wrong type, or an environment value that is not JSON), or None for other errors."""
    from pipeline.errors import InvalidSetting

    problems: list[tuple[str, Any, str | None]] = []  # (field, given value, the validator's own words)
    if hasattr(exc, "errors") and getattr(exc, "title", None) == Settings.__name__:
        for err in exc.errors(include_url=False):
            field = _field_of(str(err["loc"][0])) if err.get("loc") else None
            if field is None:
                continue
            own = str(err.get("msg", "")).removeprefix("Value error, ") if err.get("type") == "value_error" else None
            problems.append((field, err.get("input"), own))
    else:
        m = re.match(r'error parsing value for field "(\w+)" from source', str(exc))
        if m is None or m.group(1) not in Settings.model_fields:
            return None
        problems.append((m.group(1), _env_value(m.group(1)), None))
    if not problems:
        return None
    parts = []
    for field, value, own in problems:
        where = f"setting {env_name(field)}" + (" (given on the command line)" if field in overridden else "")
        if own is None and value is not None and not _SECRET.search(field) and not isinstance(value, (list, dict)):
            text = str(value)
            parts.append(f"{where} is {text[:60] + '...' if len(text) > 60 else text!r}: expected {_expected(field)}")
        else:
            parts.append(f"{where} is invalid: {own or 'expected ' + _expected(field)}")
    names = list(dict.fromkeys(env_name(f) for f, _, _ in problems))
    return InvalidSetting("; ".join(parts), names)
