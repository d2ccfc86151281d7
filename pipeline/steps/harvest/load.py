"""Records into the warehouse: raw arXiv responses parsed into staging Parquet parts (by worker processes for many
OAI pages), then merged part by part into ``papers``, ``authors``, ``paper_authors`` and ``versions``, committing
every ~``harvest_commit_records`` records; and the harvest's DuckDB connection."""

from __future__ import annotations

import logging
import shutil
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.sources.arxiv.records import (
    API_PAPER_COLUMNS,
    OAI_PAPER_COLUMNS,
    ApiErrorFeed,
    MalformedResponse,
    author_key,
    category_matcher,
    read_atom_feed,
    read_oai_page,
)
from pipeline.errors import UserError
from pipeline.raw import RawZone
from pipeline.settings import Settings
from pipeline.warehouse import RunLog, Warehouse, scalar, write_staging

log = logging.getLogger(__name__)


PAPERS_SCHEMA = pa.schema([
    ("paper_id", pa.string()), ("source", pa.string()), ("external_id", pa.string()),
    ("title", pa.string()), ("abstract", pa.string()), ("categories", pa.list_(pa.string())),
    ("primary_category", pa.string()), ("published", pa.date32()), ("updated", pa.date32()),
    ("year", pa.int32()), ("doi", pa.string()), ("dois", pa.list_(pa.string())), ("journal_ref", pa.string()),
    ("comments", pa.string()), ("license", pa.string()), ("submitter", pa.string()), ("report_no", pa.string()),
    ("msc_class", pa.string()), ("acm_class", pa.string()), ("latest_version", pa.int32()),
    ("oai_datestamp", pa.date32()), ("metadata_source", pa.string()),
])
AUTHORS_SCHEMA = pa.schema([("author_id", pa.string()), ("name", pa.string()), ("keyname", pa.string()),
                            ("forenames", pa.string())])
PAPER_AUTHORS_SCHEMA = pa.schema([("paper_id", pa.string()), ("position", pa.int32()), ("author_id", pa.string()),
                                  ("name", pa.string()), ("affiliation", pa.string())])
VERSIONS_SCHEMA = pa.schema([("paper_id", pa.string()), ("version", pa.int32()),
                             ("submitted_at", pa.timestamp("us", tz="UTC")), ("size", pa.string()),
                             ("source_type", pa.string())])
_COLUMNS = {"oai": OAI_PAPER_COLUMNS, "api": API_PAPER_COLUMNS}


@dataclass
class _Part:
    index: int
    kind: str  # "oai" | "api"
    paths: dict[str, Path]
    n_records: int = 0


@dataclass
class LoadStats:
    pages: int = 0
    error_pages: int = 0
    records_in: int = 0
    deleted: int = 0
    skipped_category: int = 0
    rejected: int = 0
    rejected_pages: int = 0
    papers_new: int = 0
    papers_updated: int = 0
    authors_new: int = 0
    paper_authors_written: int = 0
    versions_written: int = 0
    paper_ids: list[str] = field(default_factory=list)  # only collected for lookups

    @property
    def papers_written(self) -> int:
        return self.papers_new + self.papers_updated


OAI_PAGE_RECORDS = 1000  # records per ListRecords page at arXiv


def build_tables(recs: list[dict[str, Any]], kind: str) -> dict[str, pa.Table]:
    """The four staging tables of a batch of records (one record per paper)."""
    cols = _COLUMNS[kind]
    papers = {c: [r.get(c) for r in recs] for c in cols}
    authors: dict[str, dict[str, Any]] = {}
    pa_rows: dict[str, list] = {c: [] for c in PAPER_AUTHORS_SCHEMA.names}
    ver_rows: dict[str, list] = {c: [] for c in VERSIONS_SCHEMA.names}
    for rec in recs:
        pid = rec["paper_id"]
        for pos, a in enumerate(rec["authors"], start=1):
            aid = author_key(a["name"])
            if aid not in authors:
                authors[aid] = {"author_id": aid, "name": a["name"], "keyname": a.get("keyname"),
                                "forenames": a.get("forenames")}
            pa_rows["paper_id"].append(pid)
            pa_rows["position"].append(pos)
            pa_rows["author_id"].append(aid)
            pa_rows["name"].append(a["name"])
            pa_rows["affiliation"].append(a.get("affiliation"))
        for v in rec["versions"]:
            ver_rows["paper_id"].append(pid)
            ver_rows["version"].append(v["version"])
            ver_rows["submitted_at"].append(v["submitted_at"])
            ver_rows["size"].append(v["size"])
            ver_rows["source_type"].append(v["source_type"])
    return {
        "papers": pa.table(papers, schema=pa.schema([PAPERS_SCHEMA.field(c) for c in cols])),
        "authors": pa.Table.from_pylist(list(authors.values()), schema=AUTHORS_SCHEMA),
        "paper_authors": pa.table(pa_rows, schema=PAPER_AUTHORS_SCHEMA),
        "versions": pa.table(ver_rows, schema=VERSIONS_SCHEMA),
    }


def _write_part(settings: Settings, stage_rel: str, index: int, tables: dict[str, pa.Table]) -> dict[str, Path]:
    return {name: write_staging(settings, f"{stage_rel}/{name}", t, f"part-{index:05d}") for name, t in tables.items()}


def _parse_oai_group(settings: Settings, stage_rel: str, index: int, raw_root: str, relpaths: list[str],
                     categories: list[str]) -> dict[str, Any]:
    """Worker: parse a group of OAI pages into one staging part (runs in a child process)."""
    raw = RawZone(raw_root)
    keep = category_matcher(categories)
    res: dict[str, Any] = {"index": index, "pages": 0, "error_pages": 0, "records_in": 0, "deleted": 0,
                           "skipped_category": 0, "rejected_pages": 0, "rejects": [], "ids": [], "paths": None}
    batch: dict[str, dict[str, Any]] = {}
    for rel in relpaths:
        res["pages"] += 1
        try:
            page = read_oai_page(raw.path(rel))
        except (MalformedResponse, OSError) as exc:
            res["rejected_pages"] += 1
            res["rejects"].append({"raw_path": rel, "record_key": None, "reason": "malformed OAI-PMH response",
                                   "detail": str(exc)})
            continue
        if page.error_code:
            res["error_pages"] += 1
            continue
        res["deleted"] += page.deleted
        res["rejects"].extend({"raw_path": rel, "record_key": rj.record_key, "reason": rj.reason, "detail": rj.detail}
                              for rj in page.rejects)
        for rec in page.records:
            res["records_in"] += 1
            if not keep(rec["categories"]):
                res["skipped_category"] += 1
                continue
            batch.pop(rec["paper_id"], None)
            batch[rec["paper_id"]] = rec
    if batch:
        res["ids"] = list(batch)
        res["paths"] = {k: str(v) for k, v in _write_part(settings, stage_rel, index, build_tables(list(batch.values()), "oai")).items()}
    return res


class _Loader:
    """Streams records into staging parts; then merges the parts, committing between them (see ``merge``)."""

    def __init__(self, settings: Settings, run: RunLog, categories: list[str] | None, collect_ids: bool = False):
        self.settings = settings
        self.run = run
        self.categories = list(categories) if categories is not None else ["*"]
        self.keep = category_matcher(self.categories)
        self.stage_root = settings.staging_dir / "arxiv" / run.run_id
        self.stage_rel = f"arxiv/{run.run_id}"
        self.batch: dict[str, dict[str, Any]] = {}
        self.batch_kind: str | None = None
        self.parts: list[_Part] = []
        self._next_index = 0  # index of the part being filled (parts may skip an index: an empty group)
        # last part each paper was seen in, and the papers a later part supersedes, so a paper
        # fetched twice in one run is written once (the latest record wins) and reruns write 0 rows
        self.seen_part: dict[str, int] = {}
        self.superseded: dict[int, set[str]] = defaultdict(set)
        self.rejects: list[dict[str, Any]] = []
        self.stats = LoadStats()
        self.collect_ids = collect_ids

    # -- reading the raw zone ----------------------------------------------------------------------
    def add_oai_page(self, raw: RawZone, relpath: str) -> None:
        self.stats.pages += 1
        try:
            page = read_oai_page(raw.path(relpath))
        except (MalformedResponse, OSError) as exc:
            self._reject_page(relpath, "malformed OAI-PMH response", str(exc))
            return
        if page.error_code:
            self.stats.error_pages += 1  # noRecordsMatch & co: no records, nothing to reject
            return
        self.stats.deleted += page.deleted
        for rj in page.rejects:
            self._reject(relpath, rj.record_key, rj.reason, rj.detail)
        for rec in page.records:
            self._add("oai", rec)

    def add_api_feed(self, raw: RawZone, relpath: str) -> None:
        self.stats.pages += 1
        try:
            feed = read_atom_feed(raw.read(relpath))
        except ApiErrorFeed:
            self.stats.error_pages += 1
            return
        except (MalformedResponse, OSError) as exc:
            self._reject_page(relpath, "malformed arXiv API response", str(exc))
            return
        for rj in feed.rejects:
            self._reject(relpath, rj.record_key, rj.reason, rj.detail)
        for rec in feed.records:
            self._add("api", rec)

    def _reject_page(self, relpath: str, reason: str, detail: str) -> None:
        log.warning("rejected %s: %s (%s)", relpath, reason, detail)
        self.stats.rejected_pages += 1
        self._reject(relpath, None, reason, detail)

    def _reject(self, relpath: str, key: str | None, reason: str, detail: str = "") -> None:
        self.stats.rejected += 1
        self.rejects.append({"raw_path": relpath, "record_key": key, "reason": reason, "detail": detail})

    def _add(self, kind: str, rec: dict[str, Any]) -> None:
        self.stats.records_in += 1
        # OAI lists are filtered to the configured categories; API lookups were asked for by id
        if kind == "oai" and not self.keep(rec["categories"]):
            self.stats.skipped_category += 1
            return
        if self.batch_kind is not None and kind != self.batch_kind:
            self.flush()
        self.batch_kind = kind
        pid = rec["paper_id"]
        part = self._next_index
        prev = self.seen_part.get(pid)
        if prev is not None and prev != part:
            self.superseded[prev].add(pid)
        self.seen_part[pid] = part
        self.batch.pop(pid, None)  # the latest record goes last
        self.batch[pid] = rec
        if self.collect_ids:
            self.stats.paper_ids.append(pid)
        if len(self.batch) >= self.settings.harvest_batch_records:
            self.flush()

    # -- staging -------------------------------------------------------------------------------
    def flush(self) -> None:
        if not self.batch:
            return
        kind = self.batch_kind or "oai"
        index = self._next_index
        self._next_index += 1
        paths = _write_part(self.settings, self.stage_rel, index, build_tables(list(self.batch.values()), kind))
        self.parts.append(_Part(index, kind, paths, len(self.batch)))
        self.batch = {}
        self.batch_kind = None

    # -- parallel parse (big replays) ----------------------------------------------------------
    def add_oai_pages(self, raw: RawZone, relpaths: list[str]) -> None:
        """Parse OAI pages in order; with ``harvest_parse_workers`` > 1 and enough pages, groups of
        pages are parsed into staging parts by worker processes (the merge stays single-writer)."""
        workers = self.settings.harvest_parse_workers
        per_group = max(1, self.settings.harvest_batch_records // OAI_PAGE_RECORDS)
        groups = [relpaths[i:i + per_group] for i in range(0, len(relpaths), per_group)]
        if workers <= 1 or len(groups) < 2:
            for rel in relpaths:
                self.add_oai_page(raw, rel)
            return
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.flush()
        base = self._next_index
        self._next_index += len(groups)
        # spawn, not fork: the parent holds DuckDB and Arrow thread pools that must not be forked
        with ProcessPoolExecutor(max_workers=min(workers, len(groups)),
                                 mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(_parse_oai_group, self.settings, self.stage_rel, base + i, str(raw.root), g,
                                   self.categories) for i, g in enumerate(groups)]
            for fut in futures:  # in page order, so the latest record of a paper still wins
                self._absorb(fut.result())

    def _absorb(self, res: dict[str, Any]) -> None:
        st = self.stats
        for k in ("pages", "error_pages", "records_in", "deleted", "skipped_category", "rejected_pages"):
            setattr(st, k, getattr(st, k) + res[k])
        st.rejected += len(res["rejects"])
        self.rejects.extend(res["rejects"])
        index = res["index"]
        for pid in res["ids"]:
            prev = self.seen_part.get(pid)
            if prev is not None and prev != index:
                self.superseded[prev].add(pid)
            self.seen_part[pid] = index
        if res["paths"] is not None:
            self.parts.append(_Part(index, "oai", {k: Path(v) for k, v in res["paths"].items()}, len(res["ids"])))

    # -- merge ---------------------------------------------------------------------------------
    def merge(self, wh: Warehouse) -> None:
        """Upsert every part (call inside ``wh.transaction()``), committing between parts after
        about every ``harvest_commit_records`` records; what the caller adds after this
        (watermark, list checkpoint status) lands in the caller's, last, commit."""
        self.flush()
        every = self.settings.harvest_commit_records
        since = 0
        for part in self.parts:
            self._merge_part(wh, part)  # every row of the part's papers: never split across commits
            since += part.n_records
            if every and since >= every and part is not self.parts[-1]:
                # DuckDB keeps uncommitted rows in memory, and committed ones in memory until a
                # checkpoint writes them to the file: both, so neither grows with the run. The
                # caller's transaction goes on (watermark + list checkpoint land in the last commit)
                wh.con.execute("COMMIT")
                _checkpoint(wh)
                wh.con.execute("BEGIN TRANSACTION")
                since = 0
        if self.rejects:  # in the last commit, with the watermark: a killed run leaves none, its rerun records them once
            wh.add_rejects(self.run.step, self.rejects, run_id=self.run.run_id)

    def _merge_part(self, wh: Warehouse, part: _Part) -> None:
        papers = pq.read_table(part.paths["papers"])
        paper_authors = pq.read_table(part.paths["paper_authors"])
        gone = self.superseded.get(part.index)
        if gone:
            value_set = pa.array(sorted(gone), pa.string())
            papers = papers.filter(pc.invert(pc.is_in(papers["paper_id"], value_set=value_set)))
            paper_authors = paper_authors.filter(pc.invert(pc.is_in(paper_authors["paper_id"], value_set=value_set)))
        st = wh.upsert("papers", papers, keys=["paper_id"])
        self.stats.papers_new += st.inserted
        self.stats.papers_updated += st.updated

        con = wh.con
        con.register("incoming_authors", pq.read_table(part.paths["authors"]))
        try:
            self.stats.authors_new += wh.sql_file_returning("authors", "core/merge/arxiv_new_authors.sql")
        finally:
            con.unregister("incoming_authors")

        counts = pa.table({"paper_id": papers["paper_id"]}).join(
            paper_authors.group_by("paper_id").aggregate([("position", "max")]), "paper_id", join_type="left outer")
        counts = pa.table({"paper_id": counts["paper_id"],
                           "n_authors": pc.fill_null(counts["position_max"], 0).cast(pa.int32())})
        con.register("incoming_author_counts", counts)
        try:
            wh.sql_file_returning("paper_authors", "core/merge/arxiv_trim_paper_authors.sql")
        finally:
            con.unregister("incoming_author_counts")
        st = wh.upsert("paper_authors", paper_authors, keys=["paper_id", "position"])
        self.stats.paper_authors_written += st.written
        st = wh.upsert("versions", pq.read_table(part.paths["versions"]), keys=["paper_id", "version"])
        self.stats.versions_written += st.written

    def cleanup(self) -> None:
        shutil.rmtree(self.stage_root, ignore_errors=True)

    def summary(self) -> dict[str, Any]:
        s = self.stats
        return {
            "pages": s.pages, "error_pages": s.error_pages, "records_in": s.records_in, "deleted": s.deleted,
            "skipped_category": s.skipped_category, "rejected": s.rejected, "rejected_pages": s.rejected_pages,
            "papers_written": s.papers_written, "papers_new": s.papers_new, "papers_updated": s.papers_updated,
            "authors_new": s.authors_new, "paper_authors_written": s.paper_authors_written,
            "versions_written": s.versions_written,
        }


# DuckDB settings of the harvest's connection. max_vacuum_tasks=0: DuckDB's checkpoint otherwise
# merges the small row groups that batch commits leave into full ones (122,880 rows), rewriting
# them in memory, so its peak grew with the table (measured: DuckDB's in-memory table data peaked
# at 38 MB for 25k records and 124 MB for 100k; 28-38 MB at both without vacuum). Row groups stay
# as written; a later checkpoint (another step's connection) may still merge them.
_HARVEST_DUCKDB = {"max_vacuum_tasks": "0"}


def _checkpoint(wh: Warehouse) -> None:
    """Write committed rows to the database file (DuckDB keeps them in memory until then)."""
    import duckdb

    try:
        wh.con.execute("CHECKPOINT")
    except duckdb.Error as exc:  # e.g. another connection of this process has a transaction open
        log.debug("checkpoint skipped (%s); DuckDB checkpoints on its own when its WAL is large", exc)


@contextmanager
def _open(settings: Settings) -> Iterator[Warehouse]:
    import duckdb

    wh = Warehouse(settings).init()
    wanted = dict(_HARVEST_DUCKDB)
    if settings.harvest_memory_limit.strip():
        wanted["memory_limit"] = settings.harvest_memory_limit.strip()
    # these settings are global to the database instance: put back what was there when done
    before = {k: scalar(wh.con, "SELECT current_setting(?)", [k]) for k in wanted}
    try:
        for key, value in wanted.items():
            try:
                wh.con.execute(f"SET {key} = ?", [value])
            except duckdb.Error as exc:
                raise UserError(f"PAPERKB_HARVEST_{key.upper()} {value!r} is not a value DuckDB accepts "
                                f"(e.g. 1GB, 512MB): {str(exc).splitlines()[0]}") from exc
        yield wh
        _checkpoint(wh)  # still without vacuum (closing would checkpoint with it)
    finally:
        try:
            for key, value in before.items():
                wh.con.execute(f"SET {key} = ?", [value])
        except duckdb.Error:
            log.debug("could not restore DuckDB settings", exc_info=True)
        wh.close()
