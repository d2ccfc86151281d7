"""Bring your own library: a folder of local PDFs imported as papers (``paperkb import-pdfs DIR``), or the
PDFs a reference-manager library points at (``paperkb import-pdfs library.bib``; the entry's metadata
wins over the PDF's: :mod:`pipeline.library.manager_pdfs`).

Each ``*.pdf`` file under the folder (sub-folders included, hidden files skipped) becomes one paper:

- **id**: the arXiv id of the side stamp on the first page (``arXiv:1706.03762v5 [cs.CL] 6 Dec 2017``),
  else an arXiv id in the file name (``1706.03762.pdf``, ``1706.03762v5.pdf``); then ``paper_id`` is the
  arXiv id and ``source='arxiv'``, so a later OAI harvest of the same paper updates the same row and
  ``enrich`` asks Semantic Scholar for it. A file with neither gets ``local:<first 16 hex of its
  sha256>`` with ``source='local'`` (the same bytes get the same id wherever the file lives).
- **metadata from the PDF itself**: the title from the PDF's metadata when it looks like a title, else
  the first page's lines in the largest font; the abstract as the full-text step finds it, from the
  first two pages; the version and primary category from the stamp; the year from the arXiv id
  (``1706`` -> 2017: the month the first version was submitted), else from the stamp's date; the
  publication date (version 1's: the stamp's date on a v1 PDF, else the first of the id's month); a
  title printed in capitals in the case arXiv records it; the authors from the PDF metadata's author
  field when it is filled, else from the first page's author block (:mod:`pipeline.sources.pdf.front`),
  until a harvest or ``paperkb lookup`` of the paper brings arXiv's own record.
- **the bytes** go to the raw zone exactly as a download would (``raw/pdf/<id>.pdf``, manifest line
  with ``url=file://...``), so ``paperkb fulltext`` (and ``--replay``) extracts them with no network.

Rows go through the same upserts as the harvest: a rerun over the same files writes 0 rows. A paper
already loaded from arXiv metadata (harvest, lookup) keeps its row: only its PDF is added. When a
file's bytes are new to the raw zone (or differ from the PDF it holds for that paper), they are stored
and a ``fulltext_docs`` row of the paper made from other bytes or from a failed download is dropped,
so the next ``fulltext`` run extracts the imported file. Files that
cannot be used (not a PDF, empty, encrypted, truncated, corrupt, too large, a second file for the
same paper) go to ``rejects`` (step ``import-pdfs``) with the reason; the run continues. So do the
entries of a library without a PDF or whose PDF is missing.

Metadata precedence: a row from arXiv's own metadata (harvest, lookup) is never overwritten here, a row
from a library entry (``metadata_source = 'library'``) only by a library import, a row from a PDF alone
(``'pdf'``) by any import.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from pipeline.sources.arxiv.ids import parse_arxiv_id
from pipeline.sources.pdf.front import first_page_authors, title_case
from pipeline import catalog_changes, progress
from pipeline.errors import UserError
from pipeline.sources.pdf.text import PdfRejected
from pipeline.sources.pdf.worker import PdfWorker
from pipeline.settings import Settings
from pipeline.terminal import printable, storable
from pipeline.warehouse import scalar
from pipeline.writer_lock import writes

log = logging.getLogger(__name__)

STEP = "import-pdfs"
LOCAL_SOURCE = "local"
METADATA_SOURCE = "pdf"

# the side stamp arXiv prints on every page 1: "arXiv:1706.03762v5  [cs.CL]  6 Dec 2017";
# old-style ids carry no category: "arXiv:astro-ph/0601001v1  2 Jan 2006"
_STAMP = re.compile(
    r"arXiv:\s*(?P<id>(?:\d{4}\.\d{4,5}|[a-z]+(?:-[a-z]+)*(?:\.[A-Z]{2})?/\d{7})(?:v\d+)?)\s*"
    r"(?:\[\s*(?P<cat>[A-Za-z-]+(?:\.[A-Za-z-]+)?)\s*\])?\s*"
    r"(?P<date>\d{1,2}\s+[A-Z][a-z]{2}\s+\d{4})?"
)
_LETTERS = re.compile(r"[^\W\d_]{2}")
_BAD_META_TITLE = re.compile(r"(^untitled\b|^microsoft (word|powerpoint)|\.(pdf|dvi|tex|docx?|ps)$|^\s*$)", re.I)
_EMAIL_PAREN = re.compile(r"\s*[(<][^()<>]*@[^()<>]*[)>]")
_MAX_ABSTRACT_CHARS = 4000  # more than this is body text the heading detection did not stop


@dataclass
class PdfPaper:
    """What one local PDF says about itself."""

    paper_id: str
    source: str  # 'arxiv' or 'local'
    external_id: str
    title: str | None
    abstract: str | None = None
    authors: list[str] = field(default_factory=list)
    version: int | None = None
    primary_category: str | None = None
    stamp_date: date | None = None
    published: date | None = None  # version 1's date: the stamp's when it is v1, else the first of the id's month
    year: int | None = None
    id_from: str = "sha256"  # stamp | file name | sha256 | library
    title_from: str | None = None  # metadata | first page | library
    doi: str | None = None  # from a library entry only
    metadata_source: str = METADATA_SOURCE  # 'pdf', or 'library' when a library entry gave some of it


# ================================================================================================
# one PDF (pure: bytes in, PdfPaper out)


def arxiv_stamp(first_page_text: str) -> tuple[str, int | None, str | None, date | None] | None:
    """(arXiv id, version, primary category, date) of the side stamp in a first page's text, or None."""
    for m in _STAMP.finditer(first_page_text):
        if not (m.group("cat") or m.group("date")):
            continue  # a bare "arXiv:1234.5678" is a citation, not the stamp
        try:
            aid = parse_arxiv_id(m.group("id"))
        except ValueError:
            continue
        stamped = None
        if m.group("date"):
            try:
                stamped = datetime.strptime(" ".join(m.group("date").split()), "%d %b %Y").date()
            except ValueError:
                stamped = None
        return aid.paper_id, aid.version, m.group("cat"), stamped
    return None


def arxiv_id_from_name(name: str) -> tuple[str, int | None] | None:
    """arXiv id (and version) spelled by a file name: ``1706.03762.pdf``, ``1706.03762v5.pdf``,
    ``arXiv-1706.03762.pdf``, ``astro-ph_0601001.pdf``; None otherwise."""
    stem = re.sub(r"\.pdf$", "", name, flags=re.I).strip()
    stem = re.sub(r"^arxiv[-_: ]?", "", stem, flags=re.I)
    for cand in (stem, stem.replace("_", "/", 1)):
        try:
            aid = parse_arxiv_id(cand)
        except ValueError:
            continue
        return aid.paper_id, aid.version
    return None


def _looks_like_title(text: str | None) -> bool:
    if not text:
        return False
    t = " ".join(text.split())
    return 8 <= len(t) <= 400 and len(t.split()) >= 2 and bool(_LETTERS.search(t)) and not _BAD_META_TITLE.search(t)


def _span_text(spans: list[dict]) -> str:
    """A line's spans joined; a space where the next span starts a gap away (PDFs that place words
    instead of writing spaces)."""
    out, last_x1 = [], None
    for sp in spans:
        if last_x1 is not None and sp["bbox"][0] - last_x1 > 0.15 * sp["size"]:
            out.append(" ")
        out.append(sp["text"])
        last_x1 = sp["bbox"][2]
    return "".join(out)


def first_page_title(page) -> str | None:
    """The first page's lines set in the largest font (horizontal text with letters), joined: the
    title of nearly every paper. Only the first run of such lines counts (no gap wider than two lines)."""
    import pymupdf

    lines = []
    d = page.get_text("dict", flags=pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES)
    for b in d.get("blocks", []):
        for ln in b.get("lines", []):
            if abs(ln["dir"][0] - 1) > 1e-3:  # rotated: the side stamp, figure labels
                continue
            spans = [s for s in ln["spans"] if s["text"].strip()]
            if not spans:
                continue
            text = " ".join(_span_text(ln["spans"]).split())
            if not _LETTERS.search(text):
                continue
            lines.append((max(s["size"] for s in spans), ln["bbox"][1], ln["bbox"][3], text))
    if not lines:
        return None
    top = max(s for s, *_ in lines)
    big = sorted((ln for ln in lines if ln[0] >= top - 0.5), key=lambda ln: ln[1])
    out, last_bottom = [big[0][3]], big[0][2]
    for size, y0, y1, text in big[1:]:
        if y0 - last_bottom > 2 * size:
            break
        if y0 >= last_bottom - 0.5 * size:  # a new line (not a second span run on the same line)
            out.append(text)
            last_bottom = y1
    title = " ".join(out).strip()
    return title if _looks_like_title(title) else None


def _abstract(doc) -> str | None:
    """The abstract as the full-text step finds it (``pdftext``), from the first two pages only."""
    import pymupdf

    from pipeline.sources.pdf.text import abstract_text, assign_kinds, layout

    sub = pymupdf.open()
    try:
        sub.insert_pdf(doc, from_page=0, to_page=min(1, doc.page_count - 1))
        laid = layout(sub)
        assign_kinds(laid)
        text = abstract_text(list(laid.blocks()))
    except Exception as exc:  # noqa: BLE001 - metadata is best effort; the body is extracted later anyway
        log.debug("no abstract: %s", exc)
        return None
    finally:
        sub.close()
    return text if text and len(text) <= _MAX_ABSTRACT_CHARS else None


def _authors(meta_author: str | None) -> list[str]:
    """The PDF metadata's author field split into names ('A, B and C'; e-mail addresses dropped)."""
    if not meta_author or not _LETTERS.search(meta_author):
        return []
    text = _EMAIL_PAREN.sub("", meta_author)
    parts = re.split(r"\s*(?:;|,|\band\b|&)\s*", text)
    names = [" ".join(p.split()) for p in parts]
    names = [n for n in names if _LETTERS.search(n) and "@" not in n]
    if any(len(n.split()) == 1 for n in names):  # 'Doe, J.' style: commas are not separators here
        return [" ".join(text.split())] if len(text) <= 200 else []
    return names


def read_pdf(data: bytes, file_name: str) -> PdfPaper:
    """Identity and metadata of one PDF; ``PdfRejected`` (empty, not_pdf, truncated, encrypted,
    corrupt) when the bytes are not a usable PDF."""
    from pipeline.sources.pdf.text import open_pdf

    doc = open_pdf(data)
    try:
        page = doc[0]
        try:
            first_text = page.get_text()
        except Exception as exc:  # noqa: BLE001 - a broken content stream
            raise PdfRejected("corrupt", f"{type(exc).__name__}: {exc}") from exc
        stamp = arxiv_stamp(first_text)
        named = arxiv_id_from_name(file_name)
        version = cat = stamped = None
        if stamp:
            pid, version, cat, stamped = stamp
            source, id_from = "arxiv", "stamp"
        elif named:
            (pid, version), source, id_from = named, "arxiv", "file name"
        else:
            pid = f"{LOCAL_SOURCE}:{hashlib.sha256(data).hexdigest()[:16]}"
            source, id_from = LOCAL_SOURCE, "sha256"
        meta = doc.metadata or {}
        title: str | None = " ".join((meta.get("title") or "").split())
        title_from = "metadata"
        if not _looks_like_title(title):
            title, title_from = first_page_title(page), "first page"
        if title:
            title = title_case(title)  # 'ADAM: A METHOD ...' as arXiv records it: 'Adam: A Method ...'
        year = published = None
        m = re.match(r"^(\d{2})(\d{2})\.", pid) if source == "arxiv" else None
        if m and 1 <= int(m.group(2)) <= 12:
            year = 2000 + int(m.group(1))
            published = date(year, int(m.group(2)), 1)
        elif stamped:
            year = stamped.year
        if stamped and version == 1:
            published = stamped
        authors = _authors(meta.get("author")) or first_page_authors(page)
        return PdfPaper(
            paper_id=pid, source=source, external_id=pid if source == "arxiv" else pid.split(":", 1)[1],
            title=title or None, abstract=_abstract(doc), authors=authors, version=version,
            primary_category=cat, stamp_date=stamped, published=published, year=year, id_from=id_from,
            title_from=title_from if title else None,
        )
    finally:
        doc.close()


# ================================================================================================
# the folder (I/O at the edges)


def find_pdfs(folder: str | Path, follow_links: bool = False) -> tuple[list[Path], int, list[Path]]:
    """(``*.pdf`` files under ``folder`` in path order, count of other files ignored, links skipped); a single PDF
    file is accepted too. A symbolic link to a file outside ``folder`` is skipped (listed third) unless
    ``follow_links``: a folder is what its owner put in it, not whatever its links point at (links within the folder,
    and links to folders, which are not walked, change nothing). ``UserError`` for a missing folder or one without
    PDFs."""
    p = Path(folder)
    if not p.exists():
        raise UserError(f"{p}: no such folder")
    if p.is_file():
        if p.suffix.lower() != ".pdf":
            raise UserError(f"{p}: not a folder, a .pdf file or a library (.bib, .json CSL-JSON, .ris)")
        return [p], 0, []
    files, other, skipped = [], 0, []
    root = p.resolve()
    for f in sorted(p.rglob("*")):
        rel = f.relative_to(p)
        if any(part.startswith(".") for part in rel.parts) or not f.is_file():
            continue
        if f.suffix.lower() != ".pdf":
            other += 1
        elif f.is_symlink() and not follow_links and not f.resolve().is_relative_to(root):
            skipped.append(f)
        else:
            files.append(f)
    if not files:
        links = f", {len(skipped)} links to files outside it skipped (--follow-links reads them)" if skipped else ""
        raise UserError(f"{p}: no .pdf files in this folder" + (f" ({other} other files{links})" if other or skipped else ""))
    return files, other, skipped


def read_limited(path: Path, max_bytes: int) -> bytes:
    """The bytes of ``path``, refused (``too_large``) when it holds more than ``max_bytes``: the size is
    checked before reading, and never more than ``max_bytes + 1`` bytes are read (a file that grows, or
    one whose size the file system does not report, cannot fill the memory either)."""
    size = path.stat().st_size
    if size > max_bytes:
        raise PdfRejected("too_large", f"{size} bytes > pdf_max_bytes ({max_bytes})")
    with path.open("rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise PdfRejected("too_large", f"more than pdf_max_bytes ({max_bytes}) bytes")
    return data


def pdf_worker(settings: Settings) -> PdfWorker:
    """The worker process that reads each PDF within ``PAPERKB_PDF_TIMEOUT_S`` (:mod:`pipeline.sources.pdf.worker`)."""
    from pipeline.sources.pdf.worker import for_import

    return for_import(settings)


_METADATA_RANK = {METADATA_SOURCE: 0, "library": 1}  # a row written from these may be overwritten by a better one


@writes("import-pdfs")
def import_pdfs(settings: Settings, folder: str | Path, worker: PdfWorker | None = None,
                follow_links: bool = False) -> dict:
    """Import every PDF under ``folder`` (or that the library file ``folder`` points at) as a paper
    (see the module doc). Idempotent. Each file is read in ``worker`` (:func:`pdf_worker` when None) within
    ``PAPERKB_PDF_TIMEOUT_S``: one it cannot read in time is rejected (``timeout``), and the others go on. A link to
    a file outside the folder is skipped (``links_skipped``) unless ``follow_links`` (:func:`find_pdfs`).

    Returns a summary: files, papers, arxiv, local, rejected, ignored, upserts per table,
    pdfs_stored (new or changed bytes in the raw zone), refetch (fulltext rows dropped), run_id, seconds;
    for a library also library, format, entries, problems, imported (entry -> paper) and not_imported
    (each entry left out, with the reason).
    """
    from pipeline.library.manager_pdfs import apply_entry, entry_label, is_library_file, library_pdfs
    from pipeline.raw import RawZone
    from pipeline.sources.pdf.client import SOURCE as PDF_SOURCE
    from pipeline.sources.pdf.client import raw_relpath
    from pipeline.warehouse import Warehouse

    if worker is None:
        with pdf_worker(settings) as own:  # (it starts while the folder is listed)
            return import_pdfs(settings, folder, worker=own, follow_links=follow_links)
    t0 = time.perf_counter()
    lib = library_pdfs(folder) if is_library_file(Path(folder)) else None
    items: list[tuple[Path, Any]]  # (file, its library entry or None)
    links: list[Path] = []
    if lib is not None:
        items, ignored = [(e.path, e.entry) for e in lib.pdfs], 0
    else:
        files, ignored, links = find_pdfs(folder, follow_links)
        items = [(f, None) for f in files]
        for link in links:
            log.info("import-pdfs: %s skipped: a link to a file outside the folder (--follow-links reads it)", link)
    raw = RawZone(settings.raw_dir)
    papers: dict[str, tuple[PdfPaper, Path, bytes]] = {}
    rejects: list[dict] = [{"record_key": f"{lib.source}#{n['index']}", "reason": n["reason"],
                            "detail": f"entry {n['key'] or n['index']}: {n['detail']}"} for n in lib.not_imported] if lib else []
    not_imported = list(lib.not_imported) if lib else []
    imported = []
    with progress.task("import-pdfs: reading the PDFs", total=len(items), unit="files") as bar:
        for n, (f, entry) in enumerate(items):
            bar.update(completed=n)
            try:
                data = read_limited(f, settings.pdf_max_bytes)
                paper = worker.call(read_pdf, data, f.name)
                if entry is not None:
                    paper = apply_entry(paper, entry)
            except PdfRejected as rej:
                rejects.append({"record_key": str(f), "reason": rej.reason, "detail": rej.detail})
            except OSError as exc:
                rejects.append({"record_key": str(f), "reason": "unreadable", "detail": f"{type(exc).__name__}: {exc}"})
            except Exception as exc:  # noqa: BLE001 - a file our reader fails on is rejected; the rest go on
                log.warning("import-pdfs: reading %s failed: %s: %s", f, type(exc).__name__, exc)
                rejects.append({"record_key": str(f), "reason": "read_error", "detail": f"{type(exc).__name__}: {exc}"})
            else:
                if paper.paper_id in papers:
                    rejects.append({"record_key": str(f), "reason": "duplicate_paper",
                                    "detail": f"{paper.paper_id} is also {papers[paper.paper_id][1]}"})
                else:
                    papers[paper.paper_id] = (paper, f, data)
                    if entry is not None:
                        imported.append({**entry_label(entry), "paper_id": paper.paper_id, "file": str(f)})
                    continue
            if entry is not None:
                not_imported.append({**entry_label(entry), "reason": rejects[-1]["reason"],
                                     "detail": f"{f}: {rejects[-1]['detail']}"})

    summary: dict = {"files": len(items), "papers": len(papers), "rejected": len(rejects), "ignored": ignored,
                     "rejected_files": [] if lib is not None else [  # a library's are its not_imported entries
                         {"file": r["record_key"], "reason": r["reason"], "detail": r["detail"]} for r in rejects],
                     "arxiv": sum(1 for p, _, _ in papers.values() if p.source == "arxiv"),
                     "local": sum(1 for p, _, _ in papers.values() if p.source == LOCAL_SOURCE),
                     "pdfs_stored": 0, "refetch": 0, "paper_ids": sorted(papers),
                     "links_skipped": [str(link) for link in links]}
    if lib is not None:
        summary.update(library=lib.source, format=lib.format, entries=lib.entries, problems=lib.problems,
                       imported=imported, not_imported=sorted(not_imported, key=lambda n: n["index"]))
    with Warehouse(settings) as wh:
        wh.init()
        with wh.run(STEP) as run:
            ids = list(papers)
            known = dict(wh.con.execute(
                "SELECT paper_id, metadata_source FROM papers WHERE paper_id IN (SELECT unnest(?))", [ids]).fetchall()) if ids else {}
            # rows from arXiv's own metadata (harvest, lookup) are better than what a PDF says, and a
            # library entry's better than a PDF alone: keep them
            mine = [papers[pid][0] for pid in ids
                    if known.get(pid) is None
                    or _METADATA_RANK.get(known[pid], 99) <= _METADATA_RANK[papers[pid][0].metadata_source]]
            summary["kept_metadata"] = len(ids) - len(mine)
            with wh.transaction():
                for pid, (paper, f, data) in papers.items():
                    rel = raw_relpath(pid)
                    sha = hashlib.sha256(data).hexdigest()
                    if raw.has(PDF_SOURCE, rel) and hashlib.sha256(raw.read(f"{PDF_SOURCE}/{rel}")).hexdigest() == sha:
                        continue
                    raw.write(PDF_SOURCE, rel, data, url=f.resolve().as_uri(), params={"paper_id": pid},
                              content_type="application/pdf")
                    summary["pdfs_stored"] += 1
                    # new bytes for a paper the fulltext step already saw: make it extract them again
                    summary["refetch"] += catalog_changes.returning(
                        wh.con, "fulltext_docs",
                        "DELETE FROM fulltext_docs WHERE paper_id = ? AND raw_sha256 IS DISTINCT FROM ? RETURNING paper_id",
                        [pid, sha])
                summary["upserts"] = _write_rows(wh, mine)
                if rejects:
                    summary["rejects_recorded"] = _add_rejects(wh, rejects, run.run_id)
            run.count("in", len(items))
            run.count("out", len(papers))
            run.count("rejected", len(rejects))
            run.count("pdfs_stored", summary["pdfs_stored"])
            summary["run_id"] = run.run_id
    summary["seconds"] = round(time.perf_counter() - t0, 2)
    log.debug("%s", summary_line(summary))
    return summary


def lookup_imported(settings: Settings, summary: dict) -> dict | None:
    """Ask the arXiv API for the imported arXiv papers whose row still comes from their PDF alone, so their
    authors, title, dates and categories are arXiv's own (``paperkb lookup``). None when there were none;
    ``{"error": ...}`` when the API cannot be reached (the PDF's metadata stays: nothing is lost)."""
    from pipeline.errors import StepFailed, UserError
    from pipeline.steps.harvest import run_lookup
    from pipeline.warehouse import Warehouse

    ids = [pid for pid in summary.get("paper_ids", []) if not pid.startswith(f"{LOCAL_SOURCE}:")]
    if not ids:
        return None
    with Warehouse(settings, read_only=True) as wh:
        ids = [r[0] for r in wh.con.execute(
            "SELECT paper_id FROM papers WHERE paper_id IN (SELECT unnest(?)) AND metadata_source = ? ORDER BY 1",
            [ids, METADATA_SOURCE]).fetchall()]
    if not ids:
        return None
    try:
        return run_lookup(settings, ids)
    except (UserError, StepFailed) as exc:
        return {"error": str(exc), "requested": len(ids)}


def _write_rows(wh, papers: list[PdfPaper]) -> dict:
    """papers, authors (new ids only) and paper_authors rows, through the import-collection writers."""
    import pyarrow as pa

    from pipeline.sources.arxiv.records import author_key
    from pipeline.sources.local_corpus import _replace_paper_authors, _upsert

    if not papers:
        return {}
    rows = {
        "paper_id": [p.paper_id for p in papers],
        "source": [p.source for p in papers],
        "external_id": [p.external_id for p in papers],
        "title": [p.title for p in papers],
        "abstract": [p.abstract for p in papers],
        "categories": pa.array([[p.primary_category] if p.primary_category else [] for p in papers], pa.list_(pa.string())),
        "primary_category": [p.primary_category for p in papers],
        "year": pa.array([p.year for p in papers], pa.int32()),
        "published": pa.array([p.published for p in papers], pa.date32()),
        "latest_version": pa.array([p.version for p in papers], pa.int32()),
        "doi": [p.doi for p in papers],
        "metadata_source": [p.metadata_source for p in papers],
    }
    out = {"papers": _upsert(wh, "papers", rows, ["paper_id"])}
    names: dict[str, str] = {}
    pa_ids, pa_pos, pa_aid, pa_name = [], [], [], []
    for p in papers:
        for pos, name in enumerate(p.authors, start=1):
            aid = author_key(name)
            names.setdefault(aid, name)
            pa_ids.append(p.paper_id)
            pa_pos.append(pos)
            pa_aid.append(aid)
            pa_name.append(name)
    if names:  # new author ids only: an author row a harvest wrote is better than a PDF's spelling
        have = {r[0] for r in wh.con.execute("SELECT author_id FROM authors WHERE author_id IN (SELECT unnest(?))",
                                             [list(names)]).fetchall()}
        new = {k: v for k, v in names.items() if k not in have}
        out["authors"] = _upsert(wh, "authors", {"author_id": list(new), "name": list(new.values())}, ["author_id"])
    out["paper_authors"] = _replace_paper_authors(wh, rows["paper_id"], pa_ids, pa_pos, pa_aid, pa_name)
    return out


def _add_rejects(wh, rows: list[dict], run_id: str) -> int:
    """Record each rejected file once: a rerun over the same bad file adds no row. A file name that is not UTF-8 is
    recorded with its odd bytes as ``\\xff`` (:func:`~pipeline.terminal.storable`)."""
    from datetime import timezone

    n = 0
    now = datetime.now(timezone.utc)
    for r in rows:
        r = {**r, "record_key": storable(r["record_key"]), "detail": storable(r["detail"] or "")}
        rid = hashlib.sha256(f"{STEP}\0{r['record_key']}\0{r['reason']}\0{r['detail']}".encode()).hexdigest()[:32]
        if scalar(wh.con, "SELECT count(*) FROM rejects WHERE reject_id = ?", [rid]):
            continue
        wh.con.execute(
            "INSERT INTO rejects (reject_id, run_id, step, raw_path, record_key, reason, detail, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [rid, run_id, STEP, None, r["record_key"], r["reason"], (r["detail"] or "")[:4000], now])
        n += 1
    return n


def summary_line(s: dict) -> str:
    """One line for the CLI: counts in, out, rejected."""
    up = s.get("upserts", {}).get("papers", {})
    skipped = len(s.get("links_skipped", []))
    head, tail = "import-pdfs:", f", {s.get('ignored', 0)} other files ignored" + (
        f", {skipped} links to files outside the folder skipped" if skipped else "")
    if s.get("library"):
        left = s.get("not_imported", [])
        head = (f"import-pdfs {printable(Path(s['library']).name, one_line=True)} ({s['format']}, {s['entries']} entries, "
                f"{sum(n['reason'] == 'no_pdf' for n in left)} without a PDF, "
                f"{sum(n['reason'] == 'missing_file' for n in left)} with a missing file):")
        tail = f", {len(s['problems'])} unparsable blocks" if s.get("problems") else ""
    return (f"{head} {s.get('files', 0)} PDF files in, {s.get('papers', 0)} papers ({s.get('arxiv', 0)} arXiv, "
            f"{s.get('local', 0)} local; {up.get('inserted', 0)} new, {up.get('updated', 0)} updated, "
            f"{up.get('unchanged', 0)} unchanged, {s.get('kept_metadata', 0)} kept their arXiv or library metadata), "
            f"{s.get('pdfs_stored', 0)} PDFs stored in the raw zone, {s.get('rejected', 0)} rejected"
            f"{tail} [{s.get('seconds', 0)}s]")


def entry_lines(s: dict) -> list[str]:
    """One line per library entry that was not imported (and per unparsable block), and per file of a
    folder that was rejected, with the reason: nothing is dropped silently. One line each whatever a file name or a
    title holds: a newline, ESC or NUL in it prints as ``\\n``, ``\\x1b``, ``\\x00``
    (:func:`~pipeline.terminal.printable`)."""
    def one(value: object) -> str:
        return printable(value, one_line=True)

    lines = [f"  not imported #{n['index']:<4} {one(n['key'] or '-')}: {n['reason']}: {one(n['detail'])}"
             + (f" [{one(n['title'])}]" if n.get("title") else "") for n in s.get("not_imported", [])]
    lines += [f"  rejected {one(r['file'])}: {r['reason']}: {one(r['detail'])}" for r in s.get("rejected_files", [])]
    lines += [f"  skipped {one(link)}: a link to a file outside the folder (--follow-links reads it)"
              for link in s.get("links_skipped", [])]
    return lines + [f"  unparsable   {one(p)}" for p in s.get("problems", [])]
