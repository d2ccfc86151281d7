"""Full text: PDFs -> body text, chunks, figure legends, abstract; fan-out API for Airflow.

``extract_pdf(bytes)`` is the whole extraction for one paper (what ``paperkb extract`` prints):
``pdftext`` lays pages out (reading order, noise removed), ``figures`` finds the legends,
``pdftext.assign_kinds`` marks headings/abstract/front matter, the remaining blocks become the
body text (paragraphs joined by a blank line) and ``chunking`` cuts it into token windows.

Fan-out (contracts.md): ``plan_batches`` -> per batch ``fetch_batch`` (PDFs into the raw zone: the only
network part) then ``extract_batch`` (raw zone -> staging Parquet; CPU only) -> ``merge_fulltext`` (the
single writer). Neither batch half writes DuckDB, so batches run in parallel; ``fetch_extract_batch``
runs both halves of one batch, and ``run_fulltext`` does the whole step in one process.

Staging layout: ``staging/fulltext/{chunks,figures,rejects,docs}/<part>.parquet``; the docs file is
written last, so a part is complete when it exists. Merge replaces each paper's chunks and figures
as a set (only when they changed), upserts ``fulltext_docs``, records rejects once, then removes
the merged part files.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.embedding.chunking import Segment, chunk_records, content_hash
from pipeline.sources.pdf.figures import FigureLegend, find_figures
from pipeline.sources.pdf.references import RefString, parse_reference, reference_entries
from pipeline.sources.pdf.text import PdfRejected, abstract_text, assign_kinds, layout, open_pdf
from pipeline.sources.pdf.worker import PdfWorker
from pipeline import catalog_changes, progress
from pipeline.settings import Settings
from pipeline.warehouse import scalar
from pipeline.writer_lock import writes

log = logging.getLogger(__name__)

STEP = "fulltext"
KINDS = ("chunks", "figures", "references", "rejects", "docs")

CHUNK_SCHEMA = pa.schema([
    ("chunk_id", pa.string()), ("paper_id", pa.string()), ("ordinal", pa.int32()), ("section", pa.string()),
    ("role", pa.string()), ("page_start", pa.int32()), ("page_end", pa.int32()), ("char_start", pa.int64()), ("char_end", pa.int64()),
    ("text", pa.string()), ("n_tokens", pa.int32()), ("content_hash", pa.string()),
])
FIGURE_SCHEMA = pa.schema([
    ("figure_id", pa.string()), ("paper_id", pa.string()), ("label", pa.string()), ("number", pa.int32()),
    ("page", pa.int32()), ("text", pa.string()), ("content_hash", pa.string()),
])
REFERENCE_SCHEMA = pa.schema([
    ("reference_id", pa.string()), ("paper_id", pa.string()), ("ordinal", pa.int32()), ("page", pa.int32()),
    ("raw", pa.string()), ("authors", pa.list_(pa.string())), ("title", pa.string()), ("year", pa.int32()),
    ("venue", pa.string()), ("arxiv_id", pa.string()), ("doi", pa.string()), ("url", pa.string()),
    ("content_hash", pa.string()),
])
DOC_SCHEMA = pa.schema([
    ("paper_id", pa.string()), ("status", pa.string()), ("reason", pa.string()), ("raw_path", pa.string()),
    ("raw_sha256", pa.string()), ("n_pages", pa.int32()), ("n_chars", pa.int64()), ("n_chunks", pa.int32()),
    ("n_figures", pa.int32()), ("abstract_text", pa.string()), ("pdf_version", pa.int32()),
])
REJECT_SCHEMA = pa.schema([
    ("paper_id", pa.string()), ("raw_path", pa.string()), ("reason", pa.string()), ("detail", pa.string()),
])


# ================================================================================================
# one PDF


@dataclass
class Extraction:
    paper_id: str
    n_pages: int
    body: str
    abstract: str | None
    pages: list[dict]
    sections: list[dict]
    chunks: list[dict]
    figures: list[FigureLegend]
    dropped: dict = field(default_factory=dict)
    references: list[dict] = field(default_factory=list)  # paper_references rows

    def figure_rows(self) -> list[dict]:
        return [{"figure_id": f"{self.paper_id}#fig{f.number}", "paper_id": self.paper_id, "label": f.label,
                 "number": f.number, "page": f.page, "text": f.text, "content_hash": content_hash(f.text)}
                for f in self.figures]

    def to_dict(self) -> dict:
        """What ``paperkb extract --json`` prints."""
        return {
            "paper_id": self.paper_id, "n_pages": self.n_pages, "n_chars": len(self.body),
            "abstract": self.abstract, "pages": self.pages, "sections": self.sections,
            "figures": [dict(f.to_dict(), figure_id=f"{self.paper_id}#fig{f.number}") for f in self.figures],
            "chunks": self.chunks, "references": self.references, "dropped": self.dropped,
        }


def extract_pdf(data: bytes, paper_id: str, settings: Settings, *, chunk: bool = True) -> Extraction:
    """Extract one PDF. Raises ``PdfRejected`` (reason: empty, not_pdf, truncated, encrypted, corrupt, no_text).

    ``chunk=False`` skips the tokenizer (the benchmark uses it to time text extraction alone)."""
    doc = open_pdf(data)
    try:
        laid = layout(doc)
        figures = find_figures(doc, laid)
        assign_kinds(laid)
        entries = reference_entries(laid, doc)  # the bibliography; the blocks' roles made to agree with it
    except PdfRejected:
        raise
    except Exception as exc:  # noqa: BLE001 - a broken content stream surfaces here, not at open
        raise PdfRejected("corrupt", f"{type(exc).__name__}: {exc}") from exc
    finally:
        doc.close()

    parts: list[str] = []
    pos = 0
    segments: list[Segment] = []
    marks: list[int] = []  # body offset where each block starts
    mark_pages: list[int] = []
    page_ranges: dict[int, list[int]] = {}
    sections: list[dict] = []
    for b in laid.blocks():
        if b.kind in ("caption", "abstract"):
            continue
        text = b.text.strip()
        if not text:
            continue
        if parts:
            pos += 2  # "\n\n" between paragraphs
        start = pos
        parts.append(text)
        pos += len(text)
        marks.append(start)
        mark_pages.append(b.page)
        rng = page_ranges.setdefault(b.page, [start, pos])
        rng[1] = pos
        if b.kind == "heading":
            sections.append({"title": b.section, "page": b.page, "char_start": start, "role": b.role})
        if segments and b.kind != "heading" and segments[-1].section == b.section and segments[-1].role == b.role:
            segments[-1].end = pos
        else:
            segments.append(Segment(start, pos, b.section, b.role))
    body = "\n\n".join(parts)
    if not body.strip():
        raise PdfRejected("no_text", f"{laid.n_pages} pages without extractable text (scanned?)")

    def pages_of(start: int, end: int) -> tuple[int, int]:
        """First and last page of the blocks a body range touches (a carried footnote can make a
        range go back a page, so min/max rather than first/last)."""
        lo = max(0, bisect.bisect_right(marks, start) - 1)
        hi = max(lo + 1, bisect.bisect_left(marks, end))
        span = mark_pages[lo:hi]
        return min(span), max(span)

    chunks = chunk_records(paper_id, body, segments, pages_of, settings) if chunk else []
    pages = []
    for p in laid.pages:
        chars = page_ranges.get(p.number)
        pages.append({"page": p.number, "n_blocks": len(p.blocks),
                      "char_start": chars[0] if chars else None, "char_end": chars[1] if chars else None,
                      "figures": [f.label for f in figures if f.page == p.number]})
    return Extraction(paper_id=paper_id, n_pages=laid.n_pages, body=body, abstract=abstract_text(list(laid.blocks())),
                      pages=pages, sections=sections, chunks=chunks, figures=figures, dropped=laid.n_dropped,
                      references=reference_rows(paper_id, entries))


def pdf_worker(settings: Settings) -> PdfWorker:
    """The worker process that reads each PDF within ``PAPERKB_PDF_TIMEOUT_S`` (:mod:`pipeline.sources.pdf.worker`)."""
    from pipeline.sources.pdf.worker import for_extraction

    return for_extraction(settings)


def reference_rows(paper_id: str, entries: list[RefString]) -> list[dict]:
    """``paper_references`` rows: each bibliography entry parsed into fields."""
    rows = []
    for ordinal, entry in enumerate(entries):
        ref = parse_reference(entry.text)
        rows.append({"reference_id": f"{paper_id}#ref{ordinal}", "paper_id": paper_id, "ordinal": ordinal,
                     "page": entry.page, "raw": ref.raw, "authors": list(ref.authors), "title": ref.title,
                     "year": ref.year, "venue": ref.venue, "arxiv_id": ref.arxiv_id, "doi": ref.doi, "url": ref.url,
                     "content_hash": content_hash(ref.raw)})
    return rows


# ================================================================================================
# fan-out API


def _pending_ids(con) -> list[str]:
    """Papers with a PDF source and no full text yet (the mart ``fulltext_pending``)."""
    return [r[0] for r in con.execute("SELECT paper_id FROM fulltext_pending ORDER BY paper_id").fetchall()]


def _versions(con, paper_ids: list[str]) -> dict[str, tuple[int, bool]]:
    """paper_id -> (the arXiv version to fetch: the latest known, whether the paper's PDF was read before: an older
    version's, as ``fulltext_pending`` names revised papers) for the arXiv papers of ``paper_ids`` whose latest
    version is known."""
    if not paper_ids:
        return {}
    rows = con.execute(
        "SELECT p.paper_id, p.latest_version, d.paper_id IS NOT NULL FROM papers p LEFT JOIN fulltext_docs d USING (paper_id) "
        "WHERE p.paper_id IN (SELECT unnest(?)) AND p.source = 'arxiv' AND p.latest_version IS NOT NULL",
        [paper_ids]).fetchall()
    return {pid: (int(version), bool(again)) for pid, version, again in rows}


def _targets(con, paper_ids: list[str], settings: Settings,
             versions: dict[str, tuple[int, bool]] | None = None) -> dict[str, str]:
    """paper_id -> PDF URL: arXiv's for arXiv papers (exactly the version ``versions`` names, when known), else S2's
    openAccessPdf."""
    from pipeline.sources.pdf.client import arxiv_pdf_url

    if not paper_ids:
        return {}
    rows = con.execute(
        "SELECT paper_id, source, external_id, open_access_pdf_url FROM papers WHERE paper_id IN (SELECT unnest(?))",
        [paper_ids]).fetchall()
    out = {}
    for pid, source, ext, oa_url in rows:
        if source == "arxiv":
            out[pid] = arxiv_pdf_url(settings, ext or pid, (versions or {}).get(pid, (None, False))[0])
        elif oa_url:
            out[pid] = oa_url
    return out


def _raw_ids(settings: Settings) -> list[str]:
    """Papers whose PDF is in the raw zone (the replay plan), from the manifest."""
    from pipeline.raw import RawZone

    ids = []
    for e in RawZone(settings.raw_dir).entries("pdf"):
        pid = e.params.get("paper_id") if isinstance(e.params, dict) else None
        if pid:
            ids.append(pid)
    return sorted(set(ids))


def in_raw_zone(settings: Settings, paper_ids: list[str], versions: dict[str, tuple[int, bool]] | None = None) -> list[str]:
    """Those of ``paper_ids`` whose PDF is already in the raw zone (nothing to download): the version ``versions``
    names (:func:`_versions`) or a later one; for a paper not read before also a PDF whose version its name does not
    say (an imported one, or an older fetch)."""
    from pipeline.raw import RawZone
    from pipeline.sources.pdf.client import stored_pdf

    raw = RawZone(settings.raw_dir)
    versions = versions or {}

    def held(pid: str) -> bool:
        want, again = versions.get(pid, (None, False))
        found = stored_pdf(raw, pid, want)
        if found is None or want is None:
            return found is not None
        return found[1] >= want if found[1] is not None else not again

    return [pid for pid in paper_ids if held(pid)]


def _versions_now(settings: Settings, paper_ids: list[str]) -> dict[str, tuple[int, bool]]:
    """:func:`_versions` from a read-only look at the warehouse."""
    from pipeline.warehouse import Warehouse

    if not paper_ids:
        return {}
    with Warehouse(settings, read_only=True) as wh:
        return _versions(wh.con, paper_ids)


def plan_batches(settings: Settings, batch_size: int | None = None, *, replay: bool = False, con=None) -> list[list[str]]:
    """Paper ids needing full text, in batches (``replay``: every paper with a PDF in the raw zone)."""
    size = batch_size or settings.fulltext_batch_size
    if replay:
        ids = _raw_ids(settings)
    elif con is not None:
        ids = _pending_ids(con)
    else:
        from pipeline.warehouse import Warehouse

        if not settings.db_path.exists():
            return []
        with Warehouse(settings, read_only=True) as wh:
            ids = _pending_ids(wh.con)
    return [ids[i:i + size] for i in range(0, len(ids), size)]


def fetch_batch(settings: Settings, paper_ids: list[str], part: str, *, replay: bool = False,
                targets: dict[str, str] | None = None, versions: dict[str, tuple[int, bool]] | None = None,
                bar: progress.Task | None = None) -> dict:
    """Land the batch's PDFs in the raw zone (the network half of a batch; papers already there are skipped).

    No DuckDB writes and no staging: URLs come from ``targets`` and the arXiv versions to fetch from ``versions``
    (:func:`_versions`), or a read-only look-up in ``papers``. Returns ``{"part", "paper_ids", "failures",
    counts}``; ``failures`` (paper_id, reason, detail, permanent, version) is what :func:`extract_batch` needs to record
    the papers it cannot extract. ``replay`` downloads nothing. ``bar``: a progress task, told which download is under
    way.
    """
    from pipeline.raw import RawZone
    from pipeline.sources.pdf.client import PdfFetcher

    t0 = time.perf_counter()
    raw = RawZone(settings.raw_dir)
    out: dict[str, Any] = {"part": part, "paper_ids": list(paper_ids), "failures": [], "papers": len(paper_ids), "downloaded": 0,
           "from_raw": 0, "failed": 0}
    if versions is None:
        versions = {} if replay else _versions_now(settings, paper_ids)
    # what extract_batch reads the newest PDF up to (a dict of ints: the DAG passes it on as JSON)
    out["versions"] = {pid: versions[pid][0] for pid in paper_ids if pid in versions}
    stored = set(in_raw_zone(settings, paper_ids, versions))
    missing = [pid for pid in paper_ids if pid not in stored]
    out["from_raw"] = len(paper_ids) - len(missing)
    if replay or not missing:
        out["seconds"] = round(time.perf_counter() - t0, 3)
        return out
    if targets is None:
        from pipeline.warehouse import Warehouse

        with Warehouse(settings, read_only=True) as wh:
            targets = _targets(wh.con, missing, settings, versions)
    fetcher: PdfFetcher | None = None
    try:
        for n, pid in enumerate(missing, start=1):
            if bar is not None:
                bar.update(description=f"fulltext: downloading {n}/{len(missing)}")
            url = targets.get(pid)
            version = versions.get(pid, (None, False))[0]
            if not url:
                out["failures"].append({"paper_id": pid, "reason": "no_pdf_url", "detail": "", "permanent": True,
                                        "version": version})
                continue
            fetcher = fetcher or PdfFetcher(settings, raw)
            res = fetcher.fetch(pid, url, version)
            if res.reason:
                out["failures"].append({"paper_id": pid, "reason": res.reason, "detail": res.detail,
                                        "permanent": bool(res.permanent), "version": version})
                continue
            out["downloaded"] += 1
    finally:
        if fetcher is not None:
            fetcher.close()
    out["failed"] = len(out["failures"])
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


def extract_batch(settings: Settings, paper_ids: list[str], part: str, *, failures: list[dict] | None = None,
                  replay: bool = False, versions: dict[str, int] | None = None, bar: progress.Task | None = None,
                  worker: PdfWorker | None = None) -> dict:
    """Extract the batch's PDFs from the raw zone into one staging Parquet part (the CPU half of a batch).

    Reads only the raw zone (no network, no DuckDB): each paper's newest PDF there, up to its latest version
    ``versions`` names (:func:`stored_pdf`: a version fetched again is read, not the one before it). ``failures`` come from :func:`fetch_batch`: a permanent one is
    recorded as rejected (for a newer version: the text of the version before stays, the row says why the new one
    could not be used), any other as to retry next run; a paper whose PDF is not in the raw zone (and did not fail)
    is retried next run too. ``bar``: a progress task, advanced per paper. Each PDF is read in ``worker`` (one for
    this batch when None) within ``PAPERKB_PDF_TIMEOUT_S``: one it cannot read in time is rejected (``timeout``).
    """
    if worker is None:
        with pdf_worker(settings) as own:
            return extract_batch(settings, paper_ids, part, failures=failures, replay=replay, versions=versions, bar=bar,
                                 worker=own)
    from pipeline.raw import RawZone
    from pipeline.sources.pdf.client import stored_pdf
    from pipeline.warehouse import write_staging

    t0 = time.perf_counter()
    raw = RawZone(settings.raw_dir)
    failed = {f["paper_id"]: f for f in failures or []}
    chunks: list[dict] = []
    figures: list[dict] = []
    references: list[dict] = []
    docs: list[dict] = []
    rejects: list[dict] = []
    stats: dict[str, Any] = {"part": part, "papers": len(paper_ids), "extracted": 0, "rejected": 0, "retry_later": 0, "pages": 0,
             "chunks": 0, "figures": 0, "references": 0}
    if bar is not None:
        bar.update(description="fulltext: extracting")
    for pid in _each(paper_ids, bar):
        f = failed.get(pid)
        found = stored_pdf(raw, pid, (versions or {}).get(pid)) if f is None else None  # (a newer version that failed:
        # not the one before it)
        if found is None:
            if f is None:
                rejects.append({"paper_id": pid, "raw_path": None, "reason": "not_in_raw_zone",
                                "detail": "replay" if replay else "not downloaded"})
                stats["retry_later"] += 1
            elif f.get("permanent"):
                rejects.append({"paper_id": pid, "raw_path": None, "reason": f["reason"], "detail": f.get("detail") or ""})
                docs.append(_doc_row(pid, "rejected", f["reason"], pdf_version=f.get("version")))
                stats["rejected"] += 1
            else:
                rejects.append({"paper_id": pid, "raw_path": None, "reason": f["reason"], "detail": f.get("detail") or ""})
                stats["retry_later"] += 1
            continue
        rel, version = found
        raw_path = f"pdf/{rel}"
        data = raw.read(raw_path)  # parse only from the raw zone
        sha = hashlib.sha256(data).hexdigest()
        try:
            ex = worker.call(extract_pdf, data, pid, settings)
        except PdfRejected as rej:
            rejects.append({"paper_id": pid, "raw_path": raw_path, "reason": rej.reason, "detail": rej.detail})
            docs.append(_doc_row(pid, "rejected", rej.reason, raw_path=raw_path, raw_sha256=sha, pdf_version=version))
            stats["rejected"] += 1
            continue
        except Exception as exc:  # noqa: BLE001 - one odd PDF must not stop the batch; kept for a rerun
            log.exception("fulltext: extracting %s failed", pid)
            rejects.append({"paper_id": pid, "raw_path": raw_path, "reason": "extract_error",
                            "detail": f"{type(exc).__name__}: {exc}"})
            stats["retry_later"] += 1
            continue
        chunks.extend(ex.chunks)
        references.extend(ex.references)
        stats["references"] += len(ex.references)
        fig_rows = ex.figure_rows()
        figures.extend(fig_rows)
        docs.append(_doc_row(pid, "ok", None, raw_path=raw_path, raw_sha256=sha, n_pages=ex.n_pages,
                             n_chars=len(ex.body), n_chunks=len(ex.chunks), n_figures=len(fig_rows),
                             abstract_text=ex.abstract, pdf_version=version))
        stats["extracted"] += 1
        stats["pages"] += ex.n_pages
        stats["chunks"] += len(ex.chunks)
        stats["figures"] += len(fig_rows)
    write_staging(settings, "fulltext/chunks", pa.Table.from_pylist(chunks, schema=CHUNK_SCHEMA), part)
    write_staging(settings, "fulltext/figures", pa.Table.from_pylist(figures, schema=FIGURE_SCHEMA), part)
    write_staging(settings, "fulltext/references", pa.Table.from_pylist(references, schema=REFERENCE_SCHEMA), part)
    write_staging(settings, "fulltext/rejects", pa.Table.from_pylist(rejects, schema=REJECT_SCHEMA), part)
    write_staging(settings, "fulltext/docs", pa.Table.from_pylist(docs, schema=DOC_SCHEMA), part)  # last: part complete
    stats["seconds"] = round(time.perf_counter() - t0, 3)
    return stats


def _each(items: list[str], bar: progress.Task | None):
    """``items``, advancing ``bar`` by one as each is done (when the loop asks for the next)."""
    for item in items:
        yield item
        if bar is not None:
            bar.advance()


def fetch_extract_batch(settings: Settings, paper_ids: list[str], part: str, *, replay: bool = False,
                        targets: dict[str, str] | None = None, versions: dict[str, tuple[int, bool]] | None = None,
                        bar: progress.Task | None = None, worker: PdfWorker | None = None) -> dict:
    """:func:`fetch_batch` then :func:`extract_batch`: download (unless in the raw zone already, or
    ``replay``), extract (in ``worker``), write staging Parquet. No DuckDB writes. ``bar`` advances one per paper."""
    fetched = fetch_batch(settings, paper_ids, part, replay=replay, targets=targets, versions=versions, bar=bar)
    stats = extract_batch(settings, paper_ids, part, failures=fetched["failures"], replay=replay,
                          versions=fetched["versions"], bar=bar, worker=worker)
    stats.update(downloaded=fetched["downloaded"], from_raw=fetched["from_raw"],
                 seconds=round(fetched["seconds"] + stats["seconds"], 3))
    return stats


def _doc_row(paper_id: str, status: str, reason: str | None, **kw: Any) -> dict:
    row = {"paper_id": paper_id, "status": status, "reason": reason, "raw_path": None, "raw_sha256": None,
           "n_pages": None, "n_chars": None, "n_chunks": None, "n_figures": None, "abstract_text": None,
           "pdf_version": None}
    row.update(kw)
    return row


def _fingerprints(rows: list[dict], cols: list[str]) -> dict[str, str]:
    """paper_id -> hash over its rows (ordered by the first column): equal sets hash equal."""
    by_paper: dict[str, list] = {}
    for r in rows:
        by_paper.setdefault(r["paper_id"], []).append(tuple(r.get(c) for c in cols))
    return {pid: hashlib.sha256(json.dumps(sorted(v, key=lambda t: str(t[0])), default=str).encode()).hexdigest()
            for pid, v in by_paper.items()}


def _complete_parts(settings: Settings) -> list[str]:
    d = settings.staging_dir / "fulltext" / "docs"
    return sorted(p.stem for p in d.glob("*.parquet")) if d.is_dir() else []


@writes("fulltext")
def merge_fulltext(settings: Settings, wh=None, run_id: str | None = None) -> dict:
    """Upsert every complete staging part into chunks / figures / fulltext_docs / rejects. Idempotent:
    a paper's chunks (and figures) are replaced as a set, and only when they differ."""
    from pipeline.warehouse import Warehouse

    own = wh is None
    wh = wh or Warehouse(settings)
    stats = {"parts": 0, "papers": 0, "papers_changed": 0, "chunks_written": 0, "chunks_deleted": 0,
             "figures_written": 0, "figures_deleted": 0, "paper_references_written": 0, "paper_references_deleted": 0, "docs_inserted": 0, "docs_updated": 0, "rejects": 0}
    try:
        wh.init()
        parts = _complete_parts(settings)
        if not parts:
            return stats
        base = settings.staging_dir / "fulltext"
        schemas = {"chunks": CHUNK_SCHEMA, "figures": FIGURE_SCHEMA, "references": REFERENCE_SCHEMA,
                   "rejects": REJECT_SCHEMA, "docs": DOC_SCHEMA}
        # a part staged by a version without references has no references file: read as none
        tables = {k: pa.concat_tables([_conform(pq.read_table(base / k / f"{p}.parquet"), schemas[k])
                                       if (base / k / f"{p}.parquet").exists() else schemas[k].empty_table()
                                       for p in parts]) for k in KINDS}
        docs = _last_per_paper(tables["docs"].to_pylist())
        ok_ids = [d["paper_id"] for d in docs if d["status"] == "ok"]
        chunk_rows = [r for r in tables["chunks"].to_pylist() if r["paper_id"] in set(ok_ids)]
        fig_rows = [r for r in tables["figures"].to_pylist() if r["paper_id"] in set(ok_ids)]
        ref_rows = [r for r in tables["references"].to_pylist() if r["paper_id"] in set(ok_ids)]
        with wh.transaction():
            changed: set[str] = set()
            for table, rows, schema in (("chunks", chunk_rows, CHUNK_SCHEMA), ("figures", fig_rows, FIGURE_SCHEMA),
                                        ("paper_references", ref_rows, REFERENCE_SCHEMA)):
                cols = schema.names
                new_fp = _fingerprints(rows, cols)
                old_rows = _rows(wh.con, f"SELECT {', '.join(cols)} FROM {table} WHERE paper_id IN (SELECT unnest(?))",
                                 [ok_ids]) if ok_ids else []
                old_fp = _fingerprints(old_rows, cols)
                # a paper whose set differs (or that now has none, having had some) is replaced
                replace = [pid for pid in ok_ids if new_fp.get(pid) != old_fp.get(pid)]
                changed.update(replace)
                if replace:
                    stats[f"{table}_deleted"] += wh.delete_where_in(table, "paper_id", replace)
                    keep = set(replace)
                    new = pa.Table.from_pylist([r for r in rows if r["paper_id"] in keep], schema=schema)
                    if new.num_rows:
                        wh.upsert(table, new, keys=[cols[0]])
                    stats[f"{table}_written"] += new.num_rows
            doc_ids = [d["paper_id"] for d in docs]
            old_docs = _rows(wh.con, f"SELECT {', '.join(DOC_SCHEMA.names)} FROM fulltext_docs "
                             "WHERE paper_id IN (SELECT unnest(?))", [doc_ids])
            old_doc_fp = _fingerprints(old_docs, DOC_SCHEMA.names)
            new_doc_fp = _fingerprints(docs, DOC_SCHEMA.names)
            up = wh.upsert("fulltext_docs", pa.Table.from_pylist(docs, schema=DOC_SCHEMA), keys=["paper_id"])
            stats["docs_inserted"], stats["docs_updated"] = up.inserted, up.updated
            # extracted_at = when the stored extraction last changed (a rerun with equal output keeps it)
            touched = changed | {pid for pid in doc_ids if new_doc_fp.get(pid) != old_doc_fp.get(pid)}
            if touched:
                catalog_changes.returning(
                    wh.con, "fulltext_docs",
                    "UPDATE fulltext_docs SET extracted_at = ? WHERE paper_id IN (SELECT unnest(?)) RETURNING paper_id",
                    [datetime.now(timezone.utc), sorted(touched)])
            stats["rejects"] = _add_rejects(wh, tables["rejects"].to_pylist(), run_id)
        stats["parts"] = len(parts)
        stats["papers"] = len(docs)
        stats["papers_changed"] = len(changed)
        for p in parts:  # merged: the parts are done (the raw zone keeps the PDFs for replay)
            for k in KINDS:
                (base / k / f"{p}.parquet").unlink(missing_ok=True)
        return stats
    finally:
        if own:
            wh.close()


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A staging part in ``schema``: a column a part staged by an older version lacks (``pdf_version``) as nulls."""
    for name in schema.names:
        if name not in table.column_names:
            table = table.append_column(schema.field(name), pa.nulls(table.num_rows, schema.field(name).type))
    return table.select(schema.names).cast(schema)


def _rows(con, sql: str, params: list) -> list[dict]:
    cur = con.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def _last_per_paper(rows: list[dict]) -> list[dict]:
    out: dict[str, dict] = {}
    for r in rows:
        out[r["paper_id"]] = r
    return list(out.values())


def _add_rejects(wh, rows: list[dict], run_id: str | None) -> int:
    """Insert rejects once: the id is a hash of (step, paper, reason, raw path, detail)."""
    now = datetime.now(timezone.utc)
    n = 0
    for r in rows:
        rid = hashlib.sha256(json.dumps([STEP, r["paper_id"], r["reason"], r["raw_path"], r["detail"]]).encode()).hexdigest()[:32]
        exists = scalar(wh.con, "SELECT count(*) FROM rejects WHERE reject_id = ?", [rid])
        if exists:
            continue
        wh.con.execute(
            "INSERT INTO rejects (reject_id, run_id, step, raw_path, record_key, reason, detail, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [rid, run_id, STEP, r["raw_path"], r["paper_id"], r["reason"], (r["detail"] or "")[:4000], now],
        )
        n += 1
    return n


@writes("fulltext")
def run_fulltext(settings: Settings, replay: bool = False, batch_size: int | None = None) -> dict:
    """Plan, fetch+extract every batch, merge: the whole step in one process."""
    from pipeline.warehouse import Warehouse

    t0 = time.perf_counter()
    with contextlib.ExitStack() as stack, Warehouse(settings) as wh:
        wh.init()
        with wh.run(STEP) as run:
            batches = plan_batches(settings, batch_size, replay=replay, con=wh.con)
            ids = [pid for b in batches for pid in b]
            # the worker that reads the PDFs (when there are any) starts while the first batch downloads
            worker = stack.enter_context(pdf_worker(settings)) if ids else None
            versions = _versions(wh.con, ids)  # (a replay reads each paper's newest PDF up to its latest version)
            targets = {} if replay else _targets(wh.con, ids, settings, versions)
            totals: dict[str, Any] = {"papers": len(ids), "batches": len(batches),
                                      "revised": 0 if replay else sum(1 for _, again in versions.values() if again)}
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
            with progress.task("fulltext: PDFs", total=len(ids), unit="papers") as bar:
                for k, batch in enumerate(batches):
                    s = fetch_extract_batch(settings, batch, f"{stamp}-{os.getpid()}-{k:05d}", replay=replay, targets=targets,
                                            versions=versions, bar=bar, worker=worker)
                    for key in ("downloaded", "from_raw", "extracted", "rejected", "retry_later", "pages", "chunks", "figures",
                                "references"):
                        totals[key] = totals.get(key, 0) + s[key]
            merged = merge_fulltext(settings, wh=wh, run_id=run.run_id)
            totals["merge"] = merged
            run.count("in", len(ids))
            run.count("out", totals.get("extracted", 0))
            run.count("rejected", totals.get("rejected", 0) + totals.get("retry_later", 0))
            run.count("chunks_written", merged["chunks_written"])
            totals["run_id"] = run.run_id
    totals["seconds"] = round(time.perf_counter() - t0, 2)
    log.info("fulltext: %d papers in, %d extracted (%d chunks, %d figures), %d rejected, %d to retry; %d papers changed",
             len(ids), totals.get("extracted", 0), totals.get("chunks", 0), totals.get("figures", 0),
             totals.get("rejected", 0), totals.get("retry_later", 0), merged["papers_changed"])
    return totals


def extract_file(settings: Settings, path: Path | str, paper_id: str | None = None,
                 worker: PdfWorker | None = None) -> Extraction:
    """``paperkb extract``: one local PDF, read in ``worker`` (:func:`pdf_worker` when None); a missing or unusable
    file (one not read within ``PAPERKB_PDF_TIMEOUT_S`` too) is a ``UserError``."""
    if worker is None:
        with pdf_worker(settings) as own:
            return extract_file(settings, path, paper_id, worker=own)
    from pipeline.errors import UserError

    from pipeline.library.pdf_folder import read_limited

    p = Path(path)
    if not p.is_file():
        raise UserError(f"no such PDF file: {p}")
    try:
        return worker.call(extract_pdf, read_limited(p, settings.pdf_max_bytes), paper_id or p.stem, settings)
    except PdfRejected as rej:
        raise UserError(f"{p} cannot be used: {rej}") from rej


def summary_line(s: dict) -> str:
    """One line for the CLI: counts in, out, rejected."""
    m = s.get("merge", {})
    revised = f" ({s['revised']} revised since read: a newer arXiv version)" if s.get("revised") else ""
    return (f"fulltext: {s.get('papers', 0)} papers in{revised}, {s.get('extracted', 0)} extracted "
            f"({s.get('pages', 0)} pages, {s.get('chunks', 0)} chunks, {s.get('figures', 0)} figures, "
            f"{s.get('references', 0)} references), "
            f"{s.get('rejected', 0)} rejected, {s.get('retry_later', 0)} to retry next run; "
            f"{m.get('papers_changed', 0)} papers changed in the warehouse [{s.get('seconds', 0)}s]")


# ---- batches for the DAG's mapped tasks ---------------------------------------------------------------------------------------
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
    ids = [pid for batch in plan_batches(settings, batch_size=settings.fulltext_batch_size, replay=replay)
           for pid in batch]
    versions = _versions_now(settings, ids)
    stored = set(ids) if replay else set(in_raw_zone(settings, ids, versions))
    size = settings.fulltext_batch_size

    def batches(group: list[str]) -> list[dict]:
        # "versions": what extract_fetched reads an in-raw batch's newest PDFs up to (it is their `fetched`)
        return [{"part": part_name(ids_), "paper_ids": ids_,
                 "versions": {pid: versions[pid][0] for pid in ids_ if pid in versions}}
                for ids_ in (group[i:i + size] for i in range(0, len(group), size))]

    return {"download": batches([p for p in ids if p not in stored]), "in_raw": batches([p for p in ids if p in stored])}




def extract_fetched(settings: Settings, fetched: dict, replay: bool = False) -> dict:
    """The extraction half of a batch after :func:`fetch_batch` (its result is ``fetched``): raw zone -> the
    batch's staging part; the summary carries the download counts too."""
    stats = extract_batch(settings, fetched["paper_ids"], fetched["part"], failures=fetched.get("failures"),
                          replay=replay, versions=fetched.get("versions"))
    stats.update(downloaded=fetched.get("downloaded", 0), from_raw=fetched.get("from_raw", 0))
    return stats
