"""A reference-manager library as PDFs to import (``paperkb import-pdfs library.bib``).

The library (BibTeX, CSL-JSON or RIS) is read by :func:`pipeline.library.match.read_library`, which
lists each entry's PDF attachments (``LibraryEntry.files``; the fields it reads are in that module's
doc). Each entry with a PDF that exists becomes one file to import, the first such attachment; an entry
without a PDF attachment (``no_pdf``) or whose PDFs are all missing (``missing_file``) is listed with
the reason and goes to ``rejects`` like any unusable file.

What the entry says wins over what the PDF says about itself (:func:`apply_entry`): the arXiv id (the
paper id), title, authors, year and DOI, each where the entry has it; the rest (abstract, version and
category from the stamp when the ids agree) comes from the PDF as for a folder import. Such a paper is
written with ``metadata_source = 'library'``: a later folder import of the same PDF keeps it, a harvest
or lookup of the arXiv id replaces it with arXiv's own metadata.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from pipeline.errors import UserError
from pipeline.library.match import LibraryEntry, read_library

LIBRARY_SUFFIXES = (".bib", ".bibtex", ".json", ".ris")
METADATA_SOURCE = "library"


@dataclass
class EntryPdf:
    entry: LibraryEntry
    path: Path


@dataclass
class LibraryPdfs:
    source: str
    format: str
    entries: int
    pdfs: list[EntryPdf] = field(default_factory=list)
    not_imported: list[dict] = field(default_factory=list)  # entry (index, key, title), reason, detail
    problems: list[str] = field(default_factory=list)


def is_library_file(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in LIBRARY_SUFFIXES


def entry_label(entry: LibraryEntry) -> dict:
    return {"index": entry.index, "key": entry.key, "title": entry.title}


def library_pdfs(path: str | Path) -> LibraryPdfs:
    """The PDF of each entry of the library at ``path`` (its first PDF attachment that is a file), and
    the entries that have none. ``UserError`` for a file that cannot be read or holds no entries."""
    path = Path(path)
    fmt, entries, problems = read_library(path)
    if not entries:
        raise UserError(f"{path}: no entries in this {fmt} file" + (f" ({len(problems)} unparsable blocks)" if problems else ""))
    out = LibraryPdfs(source=str(path), format=fmt, entries=len(entries), problems=problems)
    for e in entries:
        if not e.files:
            out.not_imported.append({**entry_label(e), "reason": "no_pdf", "detail": "the entry points at no PDF file"})
            continue
        found = next((Path(f) for f in e.files if Path(f).is_file()), None)
        if found is None:
            out.not_imported.append({**entry_label(e), "reason": "missing_file",
                                     "detail": "no such file: " + "; ".join(e.files)})
            continue
        out.pdfs.append(EntryPdf(entry=e, path=found))
    return out


def display_name(name: str) -> str:
    """A reference manager's 'Family, Given' as 'Given Family' (the harvest's spelling of authors);
    'Family, Jr., Given' as 'Given Family Jr.'; other names unchanged."""
    parts = [p.strip() for p in name.split(",")]
    if len(parts) == 2 and all(parts):
        return f"{parts[1]} {parts[0]}"
    if len(parts) == 3 and all(parts):
        return f"{parts[2]} {parts[0]} {parts[1]}"
    return " ".join(name.split())


def apply_entry(paper, entry: LibraryEntry):
    """``paper`` (a :class:`pipeline.library.pdf_folder.PdfPaper` read from the entry's PDF) with the entry's arXiv
    id, title, authors, year and DOI where the entry has them. A different arXiv id than the PDF's
    makes it that paper: the stamp's version and category (another paper's) are dropped."""
    changes: dict = {}
    if entry.arxiv_id and entry.arxiv_id != paper.paper_id:
        changes.update(paper_id=entry.arxiv_id, source="arxiv", external_id=entry.arxiv_id, id_from="library",
                       version=None, primary_category=None, stamp_date=None, year=_arxiv_year(entry.arxiv_id))
    if entry.title:
        changes.update(title=entry.title, title_from="library")
    authors = [display_name(a) for a in entry.authors if a and a.strip()]
    if authors:
        changes["authors"] = authors
    if entry.year:
        changes["year"] = entry.year
    if entry.doi:
        changes["doi"] = entry.doi
    if not changes:
        return paper
    return replace(paper, **changes, metadata_source=METADATA_SOURCE)


def _arxiv_year(arxiv_id: str) -> int | None:
    m = re.match(r"^(\d{2})(\d{2})\.", arxiv_id)
    return 2000 + int(m.group(1)) if m and 1 <= int(m.group(2)) <= 12 else None
