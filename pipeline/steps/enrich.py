"""Semantic Scholar enrichment: S2 ids and counts, the citation graph, authors (issue 3).

``run_enrich`` does, in order:

1. select corpus papers never enriched, or enriched more than ``s2_refresh_days`` ago
   (the macro ``s2_pending`` in ``sql/marts/031_s2_pending.sql``; the id asked for comes from the view ``s2_paper_lookup``);
2. fetch what the raw zone does not already hold fresh: ``POST /paper/batch`` for the ids (at most
   ``s2_batch_size`` per call), then every page of ``/references`` and ``/citations`` of each paper S2
   resolved (``pipeline.sources.s2.client`` does the HTTP and writes the raw zone);
3. parse from the raw zone only, into Arrow tables (the staging layer);
4. upsert ``works``, ``citations``, ``s2_authors``, ``work_authors``, ``s2_unresolved``, then copy
   ids and counts onto ``papers`` (``sql/core/merge/s2_update_papers.sql``) for papers whose edges are
   complete.

When S2 keeps failing (``max_consecutive_failures``), the step loads everything fetched so far, then
raises :class:`~pipeline.errors.StepFailed`; when S2 cannot be reached at all (the host does not resolve
or refuses), it does the same at once, without retries, and raises
:class:`~pipeline.errors.ServiceUnreachable`. Either way the watermark does not move. Papers whose edges are
incomplete are not marked enriched, so the next run resumes them from the raw zone, without asking
S2 again for pages it already has. ``replay=True`` rebuilds all of it from the raw zone, no network.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, Iterable

import pyarrow as pa

from pipeline import catalog_changes, progress
from pipeline.dates import date_of
from pipeline.errors import ServiceUnreachable, StepFailed
from pipeline.raw import RawEntry, RawZone
from pipeline.settings import Settings
from pipeline.sources.s2.client import (EDGE_KINDS, MAX_EDGE_OFFSET, SOURCE, S2Client, S2NotFound, batch_fields,
                                  list_needs_paging)
from pipeline.warehouse import UpsertStats, Warehouse
from pipeline.writer_lock import writes

log = logging.getLogger(__name__)

STEP = "enrich"
WATERMARK = "s2"
EDGE_PARTNER = {"references": "citedPaper", "citations": "citingPaper"}

# -- staging schemas (Arrow) -------------------------------------------------------------------------
TS = pa.timestamp("us", tz="UTC")
WORK_COLUMNS: dict[str, pa.DataType] = {
    "work_id": pa.string(), "paper_id": pa.string(), "corpus_id": pa.int64(), "arxiv_id": pa.string(),
    "doi": pa.string(), "title": pa.string(), "year": pa.int32(), "publication_date": pa.date32(),
    "publication_types": pa.list_(pa.string()), "venue": pa.string(), "citation_count": pa.int32(),
    "influential_citation_count": pa.int32(), "reference_count": pa.int32(), "open_access_pdf_url": pa.string(),
    "detail": pa.string(), "fetched_at": TS, "raw_path": pa.string(),
}
# what a references/citations edge brings about the other paper (s2_edge_fields)
EDGE_WORK_COLUMNS = ["work_id", "corpus_id", "arxiv_id", "doi", "title", "year", "citation_count", "reference_count",
                     "detail", "fetched_at", "raw_path"]
CITATION_SCHEMA = pa.schema([("citing_work_id", pa.string()), ("cited_work_id", pa.string()),
                             ("is_influential", pa.bool_()), ("intents", pa.list_(pa.string())),
                             ("source", pa.string()), ("fetched_at", TS)])
AUTHOR_SCHEMA = pa.schema([("author_id", pa.string()), ("name", pa.string()), ("citation_count", pa.int32()),
                           ("paper_count", pa.int32()), ("h_index", pa.int32()), ("fetched_at", TS)])
WORK_AUTHOR_SCHEMA = pa.schema([("work_id", pa.string()), ("position", pa.int32()), ("author_id", pa.string()),
                                ("name", pa.string())])
UNRESOLVED_SCHEMA = pa.schema([("lookup_id", pa.string()), ("paper_id", pa.string()), ("reason", pa.string()),
                               ("raw_path", pa.string()), ("checked_at", TS)])


# -- the raw zone, indexed -------------------------------------------------------------------------
def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value)


class RawIndex:
    """What ``raw/s2`` already holds: the latest batch answer per id, the latest page per
    (kind, paperId, offset). Built from the manifest, so it costs no body reads."""

    def __init__(self, raw: RawZone):
        self.raw = raw
        self.batch: dict[str, tuple[RawEntry, int]] = {}
        self.pages: dict[tuple[str, str, int], RawEntry] = {}
        for entry in raw.entries(SOURCE):
            self.add(entry)
        self._json = lru_cache(maxsize=64)(self._load_json)

    def add(self, entry: RawEntry) -> None:
        kind = entry.params.get("kind")
        if kind == "batch" and entry.status == 200:
            for pos, lookup in enumerate(entry.params.get("ids") or []):
                self.batch[lookup] = (entry, pos)
        elif kind in EDGE_KINDS:
            self.pages[(kind, entry.params["paper_id"], int(entry.params["offset"]))] = entry

    @staticmethod
    def fresh(entry: RawEntry, cutoff: datetime | None) -> bool:
        return cutoff is None or _ts(entry.fetched_at) >= cutoff

    def batch_hit(self, lookup: str, cutoff: datetime | None) -> tuple[RawEntry, int] | None:
        hit = self.batch.get(lookup)
        return hit if hit and self.fresh(hit[0], cutoff) else None

    def page(self, kind: str, paper_id: str, offset: int, cutoff: datetime | None) -> RawEntry | None:
        entry = self.pages.get((kind, paper_id, offset))
        return entry if entry and self.fresh(entry, cutoff) else None

    def _load_json(self, path: str) -> Any:
        return json.loads(self.raw.read(path))

    def body(self, entry: RawEntry) -> Any:
        return self._json(entry.path)


# -- parsing (pure functions over parsed JSON) -------------------------------------------------------
def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def work_row(rec: dict[str, Any], *, paper_id: str | None, detail: str, fetched_at: datetime, raw_path: str) -> dict[str, Any]:
    """One ``works`` row from an S2 paper record (batch entry or the partner paper of an edge)."""
    ext = rec.get("externalIds") or {}
    oa = rec.get("openAccessPdf") or {}
    types = rec.get("publicationTypes")
    return {
        "work_id": rec["paperId"], "paper_id": paper_id,
        "corpus_id": _int(rec.get("corpusId")) if rec.get("corpusId") is not None else _int(ext.get("CorpusId")),
        "arxiv_id": ext.get("ArXiv") or None, "doi": ext.get("DOI") or None,
        "title": rec.get("title"), "year": _int(rec.get("year")),
        "publication_date": date_of(rec.get("publicationDate")),
        "publication_types": list(types) if isinstance(types, list) else None,
        "venue": rec.get("venue") or None,
        "citation_count": _int(rec.get("citationCount")),
        "influential_citation_count": _int(rec.get("influentialCitationCount")),
        "reference_count": _int(rec.get("referenceCount")),
        "open_access_pdf_url": (oa.get("url") or None) if isinstance(oa, dict) else None,
        "detail": detail, "fetched_at": fetched_at, "raw_path": raw_path,
    }


def author_rows(rec: dict[str, Any], fetched_at: datetime) -> tuple[list[dict], list[dict]]:
    """``s2_authors`` rows (authors with an id) and ``work_authors`` rows (byline) of a batch record."""
    authors, byline = [], []
    for pos, a in enumerate(rec.get("authors") or []):
        if not isinstance(a, dict):
            continue
        aid = a.get("authorId")
        byline.append({"work_id": rec["paperId"], "position": pos, "author_id": aid, "name": a.get("name")})
        if aid:
            authors.append({"author_id": aid, "name": a.get("name"), "citation_count": _int(a.get("citationCount")),
                            "paper_count": _int(a.get("paperCount")), "h_index": _int(a.get("hIndex")),
                            "fetched_at": fetched_at})
    return authors, byline


def edge_rows(kind: str, paper_id: str, item: dict[str, Any], fetched_at: datetime) -> tuple[dict | None, dict | None]:
    """(citations row, partner record) for one item of a references/citations page; the citations row is
    None when S2 could not link the partner to a paper (paperId null)."""
    partner = item.get(EDGE_PARTNER[kind]) or {}
    pid = partner.get("paperId")
    if not pid:
        return None, None
    citing, cited = (paper_id, pid) if kind == "references" else (pid, paper_id)
    intents = item.get("intents")
    return ({"citing_work_id": citing, "cited_work_id": cited, "is_influential": item.get("isInfluential"),
             "intents": list(intents) if isinstance(intents, list) else None, "source": "s2",
             "fetched_at": fetched_at}, partner)


# -- one run ---------------------------------------------------------------------------------------
@dataclass
class Staged:
    corpus_works: dict[str, dict] = field(default_factory=dict)
    edge_works: dict[str, dict] = field(default_factory=dict)
    citations: dict[tuple[str, str], dict] = field(default_factory=dict)
    authors: dict[str, dict] = field(default_factory=dict)
    work_authors: list[dict] = field(default_factory=list)
    unresolved: dict[str, dict] = field(default_factory=dict)
    records: dict[str, tuple[dict, datetime, str]] = field(default_factory=dict)  # work_id -> batch record
    resolved_lookups: set[str] = field(default_factory=set)
    done_papers: set[str] = field(default_factory=set)
    unlinked_edges: int = 0
    rejects: list[dict] = field(default_factory=list)


class _Enricher:
    def __init__(self, settings: Settings, raw: RawZone, *, cutoff: datetime | None):
        self.s = settings
        self.raw = raw
        self.index = RawIndex(raw)
        self.cutoff = cutoff  # None in replay: any raw answer counts
        self.client: S2Client | None = None
        self.from_raw = 0  # answers reused from the raw zone instead of asking S2
        # batch mode: /paper/batch brings the citations and references lists; only longer ones are paged
        self.batch_mode = settings.s2_mode in ("batch", "datasets")
        kinds = [k for k in EDGE_KINDS if getattr(settings, f"s2_fetch_{k}")]
        self.fields = (batch_fields(settings.s2_paper_fields, settings.s2_edge_fields, kinds) if self.batch_mode
                       else settings.s2_paper_fields)
        self.over_cap = 0  # batch mode: papers with a list S2 cut off, paged through /references or /citations

    # fetching ----------------------------------------------------------------------------------
    def _s2(self) -> S2Client:
        if self.client is None:
            raise RuntimeError("fetching needs an S2 client: run_enrich sets one unless it replays the raw zone")
        return self.client

    def fetch(self, lookups: list[str], kinds: list[str]) -> None:
        """Everything the raw zone lacks for ``lookups``: batch answers, then every edge page."""
        with progress.task("enrich: Semantic Scholar papers", unit="papers") as bar:
            self.fetch_batches(lookups, bar)
            resolved: dict[str, dict] = {}
            for lookup in lookups:
                hit = self.index.batch_hit(lookup, self.cutoff)
                body = self.index.body(hit[0]) if hit else None
                rec = body[hit[1]] if hit and isinstance(body, list) and hit[1] < len(body) else None
                if isinstance(rec, dict) and rec.get("paperId"):
                    resolved.setdefault(rec["paperId"], rec)
            cap = self.s.s2_batch_edge_cap
            bar.stage("enrich: Semantic Scholar references/citations", total=len(resolved), unit="papers")
            for work_id, rec in resolved.items():
                to_page = [k for k in kinds if not self.batch_mode or list_needs_paging(rec, k, cap)]
                self.over_cap += 1 if self.batch_mode and to_page else 0
                for kind in to_page:
                    pages, _ = self.edge_chain(kind, work_id, fetch=True)
                    if pages and pages[-1].status == 404:
                        break  # S2 does not know the paper: no point asking for its other edges
                bar.advance()

    def fetch_batches(self, lookups: list[str], bar: progress.Task | None = None) -> None:
        missing = [x for x in dict.fromkeys(lookups) if self.index.batch_hit(x, self.cutoff) is None]
        self.from_raw += len(set(lookups)) - len(missing)
        size = self.s.s2_batch_size
        if bar is not None:
            bar.update(total=len(missing))
        for i in range(0, len(missing), size):
            self.index.add(self._s2().fetch_batch(missing[i:i + size], fields=self.fields))
            if bar is not None:
                bar.advance(len(missing[i:i + size]))

    def edge_chain(self, kind: str, work_id: str, *, fetch: bool) -> tuple[list[RawEntry], bool]:
        """Pages of one paper's references or citations, from the raw zone first, S2 for the rest.
        Returns (pages, complete)."""
        pages: list[RawEntry] = []
        offset, seen = 0, 0
        while True:
            entry = self.index.page(kind, work_id, offset, self.cutoff)
            if entry is not None:
                self.from_raw += 1 if fetch else 0
            elif fetch:
                try:
                    entry = self._s2().fetch_edges(kind, work_id, offset)
                except S2NotFound as exc:
                    if exc.entry is None:
                        raise
                    entry = exc.entry
                self.index.add(entry)
            else:
                return pages, False
            pages.append(entry)
            if entry.status == 404:
                return pages, True
            body = self.index.body(entry)
            seen += len(body.get("data") or []) if isinstance(body, dict) else 0
            nxt = body.get("next") if isinstance(body, dict) else None
            cap = self.s.s2_max_edges_per_paper
            if nxt is None or nxt <= offset or nxt >= MAX_EDGE_OFFSET or (cap is not None and seen >= cap):
                return pages, True
            offset = int(nxt)

    # parsing -----------------------------------------------------------------------------------
    def stage_batch(self, st: Staged, lookups: Iterable[str], lookup_map: dict[str, str], arxiv_map: dict[str, str]) -> list[str]:
        """Parse the batch answers for ``lookups``; return the S2 paperIds resolved."""
        resolved: list[str] = []
        for lookup in lookups:
            hit = self.index.batch_hit(lookup, self.cutoff)
            if hit is None:
                continue
            entry, pos = hit
            fetched = _ts(entry.fetched_at)
            body = self.index.body(entry)
            if not isinstance(body, list) or pos >= len(body):
                st.rejects.append({"raw_path": entry.path, "record_key": lookup, "reason": "s2_batch_not_a_list",
                                   "detail": f"expected a JSON list with an entry at {pos}"})
                continue
            rec = body[pos]
            if rec is None:
                st.unresolved[lookup] = {"lookup_id": lookup, "paper_id": lookup_map.get(lookup), "reason": "null_in_batch",
                                         "raw_path": entry.path, "checked_at": fetched}
                continue
            if not isinstance(rec, dict) or not rec.get("paperId"):
                st.rejects.append({"raw_path": entry.path, "record_key": lookup, "reason": "s2_record_without_paperId",
                                   "detail": json.dumps(rec)[:500]})
                continue
            arxiv = (rec.get("externalIds") or {}).get("ArXiv")
            paper_id = lookup_map.get(lookup) or lookup_map.get(rec["paperId"]) or (arxiv_map.get(arxiv) if arxiv else None)
            st.corpus_works[rec["paperId"]] = work_row(rec, paper_id=paper_id, detail="paper", fetched_at=fetched,
                                                       raw_path=entry.path)
            st.records[rec["paperId"]] = (rec, fetched, entry.path)
            authors, byline = author_rows(rec, fetched)
            for a in authors:
                st.authors[a["author_id"]] = a
            st.work_authors.extend(byline)
            st.resolved_lookups.add(lookup)
            resolved.append(rec["paperId"])
        return resolved

    def stage_edges(self, st: Staged, kind: str, work_id: str, pages: list[RawEntry]) -> None:
        for entry in pages:
            fetched = _ts(entry.fetched_at)
            if entry.status == 404:
                paper_id = st.corpus_works.get(work_id, {}).get("paper_id")
                st.unresolved[work_id] = {"lookup_id": work_id, "paper_id": paper_id, "reason": "not_found",
                                          "raw_path": entry.path, "checked_at": fetched}
                continue
            body = self.index.body(entry)
            items = body.get("data") if isinstance(body, dict) else None
            if not isinstance(items, list):
                st.rejects.append({"raw_path": entry.path, "record_key": f"{kind}:{work_id}",
                                   "reason": "s2_page_without_data", "detail": str(body)[:500]})
                continue
            for item in items:
                edge, partner = edge_rows(kind, work_id, item if isinstance(item, dict) else {}, fetched)
                if edge is None or partner is None:
                    st.unlinked_edges += 1
                    continue
                st.citations[(edge["citing_work_id"], edge["cited_work_id"])] = edge
                st.edge_works[partner["paperId"]] = work_row(partner, paper_id=None, detail="edge", fetched_at=fetched,
                                                             raw_path=entry.path)

    def stage_list(self, st: Staged, kind: str, work_id: str, items: list, fetched: datetime, raw_path: str) -> None:
        """Edges from the ``citations``/``references`` list of a /paper/batch record (batch mode): the
        other paper's record as a page item would carry it, without isInfluential/intents (S2 gives
        those on the edge pages only)."""
        partner_key = EDGE_PARTNER[kind]
        for item in items:
            edge, partner = edge_rows(kind, work_id, {partner_key: item if isinstance(item, dict) else {}}, fetched)
            if edge is None or partner is None:
                st.unlinked_edges += 1
                continue
            st.citations[(edge["citing_work_id"], edge["cited_work_id"])] = edge
            st.edge_works[partner["paperId"]] = work_row(partner, paper_id=None, detail="edge", fetched_at=fetched,
                                                         raw_path=raw_path)

    def stage_paper_edges(self, st: Staged, work_id: str, kinds: list[str]) -> bool:
        """Stage one paper's references and citations: the pages in the raw zone when they are complete
        (they carry isInfluential/intents), else the batch record's list when S2 gave it whole.
        Returns whether every kind is complete."""
        complete = True
        rec, fetched, raw_path = st.records.get(work_id, ({}, None, ""))
        for kind in kinds:
            pages, ok = self.edge_chain(kind, work_id, fetch=False)
            if not ok and rec and fetched is not None and not list_needs_paging(rec, kind, self.s.s2_batch_edge_cap):
                self.stage_list(st, kind, work_id, rec[kind], fetched, raw_path)
                continue
            self.stage_edges(st, kind, work_id, pages)
            complete = complete and ok
            if pages and pages[-1].status == 404:
                break
        return complete

    # loading -----------------------------------------------------------------------------------
    def load(self, wh: Warehouse, st: Staged, arxiv_map: dict[str, str]) -> dict[str, UpsertStats]:
        out: dict[str, UpsertStats] = {}
        full_ids = {r[0] for r in wh.con.execute("SELECT work_id FROM works WHERE detail = 'paper'").fetchall()}
        full_ids |= set(st.corpus_works)
        s2_ids = dict(wh.con.execute("SELECT s2_paper_id, paper_id FROM papers WHERE s2_paper_id IS NOT NULL").fetchall())
        plain, matched = [], []
        for wid, row in st.edge_works.items():
            if wid in full_ids:
                continue  # never let the short edge record overwrite a full /paper/batch record
            pid = s2_ids.get(wid) or (arxiv_map.get(row["arxiv_id"]) if row["arxiv_id"] else None)
            if pid:
                matched.append({**{c: row[c] for c in EDGE_WORK_COLUMNS}, "paper_id": pid})
            else:
                plain.append({c: row[c] for c in EDGE_WORK_COLUMNS})
        with wh.transaction():
            works = UpsertStats()
            works += wh.upsert("works", _table(plain, {c: WORK_COLUMNS[c] for c in EDGE_WORK_COLUMNS}), ["work_id"])
            works += wh.upsert("works", _table(matched, {**{c: WORK_COLUMNS[c] for c in EDGE_WORK_COLUMNS},
                                                         "paper_id": pa.string()}), ["work_id"])
            works += wh.upsert("works", _table(list(st.corpus_works.values()), WORK_COLUMNS), ["work_id"])
            out["works"] = works
            out["citations"] = wh.upsert("citations", pa.Table.from_pylist(list(st.citations.values()), CITATION_SCHEMA),
                                         ["citing_work_id", "cited_work_id"])
            out["s2_authors"] = wh.upsert("s2_authors", pa.Table.from_pylist(list(st.authors.values()), AUTHOR_SCHEMA),
                                          ["author_id"])
            if st.work_authors:
                wa = pa.Table.from_pylist(st.work_authors, WORK_AUTHOR_SCHEMA)
                out["work_authors"] = wh.upsert("work_authors", wa, ["work_id", "position"])
                # an author list that got shorter leaves no stale tail behind
                wh.con.register("_s2_bylines", pa.table({"work_id": list({r["work_id"] for r in st.work_authors})}))
                lens: dict[str, int] = {}
                for r in st.work_authors:
                    lens[r["work_id"]] = max(lens.get(r["work_id"], -1), r["position"])
                wh.con.register("_s2_bylen", pa.table({"work_id": list(lens), "last": list(lens.values())}))
                catalog_changes.returning(
                    wh.con, "work_authors",
                    "DELETE FROM work_authors w USING _s2_bylen b WHERE w.work_id = b.work_id AND w.position > b.last "
                    "RETURNING w.work_id")
                wh.con.unregister("_s2_bylines")
                wh.con.unregister("_s2_bylen")
            else:
                out["work_authors"] = UpsertStats()
            out["s2_unresolved"] = wh.upsert("s2_unresolved", pa.Table.from_pylist(list(st.unresolved.values()), UNRESOLVED_SCHEMA),
                                             ["lookup_id"])
            wh.delete_where_in("s2_unresolved", "lookup_id", sorted(st.resolved_lookups - set(st.unresolved)))
            wh.con.register("s2_done", pa.table({"paper_id": pa.array(sorted(st.done_papers), pa.string())}))
            try:
                n = wh.sql_file_returning("papers", "core/merge/s2_update_papers.sql")
                out["papers"] = UpsertStats(updated=n)
            finally:
                wh.con.unregister("s2_done")
            if st.rejects:
                wh.add_rejects(STEP, st.rejects)
        return out


def _table(rows: list[dict], columns: dict[str, pa.DataType]) -> pa.Table:
    schema = pa.schema(list(columns.items()))
    return pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in rows], schema)


def _maps(wh: Warehouse) -> tuple[dict[str, str], dict[str, str]]:
    """lookup id -> paper_id (every S2-resolvable id of each paper) and arXiv id -> paper_id."""
    lookup = dict(wh.con.execute("SELECT lookup_id, min(paper_id) FROM s2_paper_lookup GROUP BY lookup_id").fetchall())
    arxiv = dict(wh.con.execute("SELECT external_id, paper_id FROM papers WHERE source = 'arxiv'").fetchall())
    return lookup, arxiv


@writes("enrich")
def run_enrich(settings: Settings, replay: bool = False, limit: int | None = None) -> dict[str, Any]:
    """Enrich corpus papers from Semantic Scholar (or rebuild from the raw zone with ``replay``).

    DuckDB is opened briefly to pick the papers, left closed while S2 is asked (hours at 1 request/s
    must not lock the warehouse for other steps), then opened again to load. Returns a JSON-able
    summary; when S2 keeps failing, loads what was fetched, then raises StepFailed."""
    started = datetime.now(timezone.utc).replace(microsecond=0)
    cutoff = None if replay else started - timedelta(days=settings.s2_refresh_days)
    raw = RawZone(settings.raw_dir)
    summary: dict[str, Any] = {"step": STEP, "mode": "replay" if replay else "fetch"}
    if settings.s2_mode == "datasets":  # the bulk files first; the Graph API for what they lack
        from pipeline.steps.enrich_datasets import replay_datasets, sync_datasets

        summary["datasets"] = replay_datasets(settings, raw) if replay else sync_datasets(settings, raw)
    en = _Enricher(settings, raw, cutoff=cutoff)
    with Warehouse(settings) as wh:
        wh.init()
        lookup_map, arxiv_map = _maps(wh)
        if replay:
            pending = [(lookup_map.get(x), x) for x in en.index.batch]
        else:
            pending = [tuple(r) for r in wh.con.execute("SELECT * FROM s2_pending(?::TIMESTAMPTZ) LIMIT ?",
                                                            [cutoff, limit]).fetchall()]
    lookups = [lookup for _, lookup in pending]
    summary["papers"] = len(pending)
    kinds = [k for k in EDGE_KINDS if getattr(settings, f"s2_fetch_{k}")]

    failure: StepFailed | ServiceUnreachable | None = None
    if not replay and lookups:
        en.client = S2Client(settings, raw)
        try:
            en.fetch(lookups, kinds)
        except (StepFailed, ServiceUnreachable) as exc:  # keep going: load what we have, then report the failure
            failure = exc
        except BaseException:
            with Warehouse(settings) as wh, wh.run(STEP):  # a failed run_log row, then the error
                raise

    # staging: parse from the raw zone only
    st = Staged()
    resolved = en.stage_batch(st, lookups, lookup_map, arxiv_map)
    if replay:  # edge pages of works no batch answer covers (none in normal use)
        resolved += [pid for (_, pid, off) in en.index.pages if off == 0 and pid not in st.corpus_works]
    for work_id in dict.fromkeys(resolved):
        complete = en.stage_paper_edges(st, work_id, kinds)
        pid = st.corpus_works.get(work_id, {}).get("paper_id")
        if complete and pid:
            st.done_papers.add(pid)

    with Warehouse(settings) as wh:
        with wh.run(STEP) as run:
            stats = en.load(wh, st, arxiv_map)
            http = en.client.stats_dict() if en.client else {"http_calls": 0, "calls": {}, "retries": 0,
                                                              "rate_wait_s": 0.0, "backoff_wait_s": 0.0, "http_s": 0.0}
            summary.update({
                "run_id": run.run_id,
                "resolved": len(st.corpus_works), "unresolved": len(st.unresolved), "complete": len(st.done_papers),
                "edges": len(st.citations), "edges_unlinked": st.unlinked_edges, "rejected": len(st.rejects),
                "from_raw": en.from_raw, "s2_mode": settings.s2_mode, "over_cap": en.over_cap, **http,
                "tables": {k: {"inserted": v.inserted, "updated": v.updated, "unchanged": v.unchanged} for k, v in stats.items()},
                "status": "failed" if failure else "ok",
            })
            for key in ("papers", "resolved", "unresolved", "edges", "edges_unlinked", "rejected", "http_calls", "from_raw"):
                run.count(key, summary[key])
            if failure is not None:
                summary["error"] = str(failure)
            run.message = one_line(summary)
            if failure is not None:  # unreachable: one line says it all (the summary is in run_log)
                (log.debug if isinstance(failure, ServiceUnreachable) else log.warning)("%s", run.message)
                raise failure
            wh.set_watermark(WATERMARK, started.isoformat(), run.run_id)
    summary["watermark"] = started.isoformat()
    log.info("%s: %s", summary["run_id"], one_line(summary))
    return summary


def one_line(s: dict[str, Any]) -> str:
    t = s.get("tables", {})

    def ch(name: str) -> str:
        v = t.get(name, {})
        return f"+{v.get('inserted', 0)} ~{v.get('updated', 0)}"

    ds = s.get("datasets")
    return ((f"{_ds_line(ds)}; " if ds else "") + f"enrich ({s.get('mode')}, {s.get('s2_mode', 'batch')}): {s.get('papers', 0)} papers in, {s.get('resolved', 0)} resolved, "
            f"{s.get('unresolved', 0)} unresolved, {s.get('rejected', 0)} rejected; works {ch('works')}, "
            f"citations {ch('citations')}, authors {ch('s2_authors')}, papers ~{t.get('papers', {}).get('updated', 0)}; "
            f"{s.get('http_calls', 0)} HTTP calls ({s.get('calls', {}).get('batch', 0)} batch), "
            f"{s.get('from_raw', 0)} answers reused from the raw zone, "
            f"{s.get('rate_wait_s', 0.0):.1f}s rate-limit wait, {s.get('backoff_wait_s', 0.0):.1f}s backoff"
            + (f" [FAILED: {s.get('error')}]" if s.get("status") == "failed" and s.get("error") else ""))


def _ds_line(ds: dict[str, Any]) -> str:
    from pipeline.steps.enrich_datasets import one_line as ds_one_line

    return ds_one_line(ds)
