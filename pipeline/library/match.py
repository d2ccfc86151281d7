"""Match a reference-manager library (BibTeX, RIS, CSL-JSON) to the papers of a catalog.

    entries = read_library(Path("library.bib"))            # or .ris, .json (CSL-JSON)
    report = match_entries(con, entries)                    # con: a snapshot's catalog.duckdb or the warehouse
    report.paper_ids                                        # matched corpus papers, in library order
    report.unmatched                                        # every entry that matched nothing, with the reason

Each entry is matched by DOI first, then arXiv id (an ``eprint`` field, ``arXiv:ID`` in a note or number,
an arxiv.org URL, or an arXiv DOI ``10.48550/arXiv.ID``), then by normalised title (lower-case ASCII
letters and digits only, so case, accents, LaTeX braces, punctuation and spacing do not matter; a title
must keep at least 10 characters, and one that names several papers is ambiguous, not a match). An
entry that matches nothing is listed with the reason, never dropped. Used by ``paperkb match-library``
and meant for seed sets (``paperkb interests add NAME --from FILE``).

Each entry also lists the PDFs it points at (``LibraryEntry.files``, absolute paths; what
``paperkb import-pdfs library.bib`` imports): BibTeX ``file`` (and ``pdf``) fields as Zotero, JabRef and
Better BibTeX write them (``Full Text PDF:/abs/x.pdf:application/pdf``, ``:files/12/x.pdf:PDF``, a bare
path; several separated by ``;``; backslash escapes undone) and a ``file://`` ``url``; RIS ``L1`` lines;
CSL-JSON ``file`` / ``files`` (a path or ``file://`` URL, or a list of them) and a ``file://`` ``URL``.
An attachment counts when its path ends in ``.pdf`` or its type says PDF; relative paths are resolved
against the library file's folder, ``~`` against the home folder.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from pipeline.sources.arxiv.ids import parse_arxiv_id
from pipeline.errors import UserError

MIN_TITLE_CHARS = 10
MAX_FILE_BYTES = 50_000_000
_DOI = re.compile(r"(10\.\d{4,9}/[^\s\"<>{}]+)", re.IGNORECASE)
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(.+)$", re.IGNORECASE)
_ARXIV_IN_TEXT = re.compile(
    r"(?:arxiv\.org/(?:abs|pdf)/|arxiv:\s*)([a-z\-]+(?:\.[A-Za-z]{2})?/\d{7}|\d{4}\.\d{4,5})(?:v\d+)?", re.IGNORECASE)


@dataclass
class LibraryEntry:
    index: int  # position in the file, from 1
    key: str | None  # citation key / RIS ID / CSL id
    title: str | None = None
    doi: str | None = None
    arxiv_id: str | None = None
    year: int | None = None
    authors: list[str] = field(default_factory=list)
    type: str | None = None
    files: list[str] = field(default_factory=list)  # the PDFs it points at (absolute once read_library resolved them)


@dataclass
class Matched:
    entry: LibraryEntry
    paper_id: str
    by: str  # 'doi' | 'arxiv' | 'title'
    title: str | None = None  # the catalog's title


@dataclass
class Unmatched:
    entry: LibraryEntry
    reason: str


@dataclass
class MatchReport:
    source: str
    format: str
    entries: int
    matched: list[Matched] = field(default_factory=list)
    unmatched: list[Unmatched] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # blocks of the file that could not be parsed

    @property
    def paper_ids(self) -> list[str]:
        out: list[str] = []
        for m in self.matched:
            if m.paper_id not in out:
                out.append(m.paper_id)
        return out

    def to_dict(self) -> dict:
        return {"source": self.source, "format": self.format, "entries": self.entries,
                "matched": [asdict(m) for m in self.matched], "unmatched": [asdict(u) for u in self.unmatched],
                "problems": list(self.problems), "paper_ids": self.paper_ids}


# ---- normalisation ------------------------------------------------------------------------------
def normalize_title(title: str | None) -> str:
    """Lower-case ASCII letters and digits of a title (accents folded, everything else dropped)."""
    if not title:
        return ""
    s = unicodedata.normalize("NFKD", title)
    s = "".join(ch for ch in s if not unicodedata.combining(ch)).lower()
    return re.sub(r"[^a-z0-9]", "", s)


def normalize_doi(text: str | None) -> str | None:
    if not text:
        return None
    m = _DOI.search(str(text))
    return m.group(1).rstrip(".,;").lower() if m else None


def arxiv_from(*texts: str | None) -> str | None:
    """The first arXiv id in ``texts`` (a bare id, arXiv:ID, an arxiv.org URL, an arXiv DOI), normalised."""
    for t in texts:
        if not t:
            continue
        t = str(t).strip()
        m = _ARXIV_DOI.match(t) or _ARXIV_DOI.match(normalize_doi(t) or "")
        if m:
            t = m.group(1)
        try:
            return parse_arxiv_id(t).paper_id
        except ValueError:
            pass
        m = _ARXIV_IN_TEXT.search(t)
        if m:
            try:
                return parse_arxiv_id(m.group(1)).paper_id
            except ValueError:
                pass
    return None


def _split_escaped(text: str, sep: str) -> list[str]:
    """``text`` split on ``sep`` where it is not backslash-escaped (the escapes are kept)."""
    parts, cur, i = [], [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            cur.append(text[i:i + 2])
            i += 2
            continue
        if ch == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def _is_pdf(path: str, kind: str | None = None) -> bool:
    return path.lower().endswith(".pdf") or "pdf" in (kind or "").lower()


def file_field_paths(value: str | None) -> list[str]:
    """The PDF paths of a BibTeX ``file`` field: ``;``-separated attachments, each a bare path or
    ``description:path:type`` (Zotero, JabRef: ``\\:`` and ``\\;`` escaped). Other attachments (an HTML
    snapshot) are left out; paths are returned as written (relative ones are not resolved here)."""
    out = []
    for item in _split_escaped(value or "", ";"):
        item = item.strip()
        if not item:
            continue
        parts = _split_escaped(item, ":")
        kind = None
        if len(parts) >= 3:  # description:path:type (a Windows drive's colon escaped, or not)
            kind, path = parts[-1], ":".join(parts[1:-1])
        elif len(parts) == 2 and len(parts[0]) == 1 and parts[0].isalpha():  # C:\x.pdf
            path = item
        elif len(parts) == 2 and parts[0].lower() == "file":  # file:///x.pdf
            path = item
        elif len(parts) == 2:  # description:path
            path = parts[1]
        else:
            path = item
        path = _unescape(path.strip())
        if path and _is_pdf(path, kind):
            out.append(path)
    return out


def _file_urls(*values) -> list[str]:
    """The ``file://`` URLs and plain paths among ``values`` (strings or lists of strings) that name PDFs."""
    out = []
    for v in values:
        for s in (v if isinstance(v, list) else [v]):
            if isinstance(s, str) and s.strip() and _is_pdf(s.strip()) and (
                    s.strip().lower().startswith("file:") or "://" not in s):
                out.append(s.strip())
    return out


def resolve_file(path: str, base: Path) -> str:
    """An attachment path as an absolute path: ``file://`` URLs decoded, ``~`` expanded, a relative path
    taken from ``base`` (the library file's folder)."""
    if path.lower().startswith("file:"):
        u = urlparse(path)
        path = unquote(u.path)
        if u.netloc and u.netloc != "localhost":
            path = f"//{u.netloc}{path}"
    p = Path(os.path.expanduser(path))
    return os.path.normpath(p if p.is_absolute() else base / p)


def _year(value) -> int | None:
    m = re.search(r"\b(\d{4})\b", str(value or ""))
    return int(m.group(1)) if m else None


# ---- readers ------------------------------------------------------------------------------------
def detect_format(path: Path, text: str) -> str:
    suffix = path.suffix.lower()
    if suffix in (".bib", ".bibtex"):
        return "bibtex"
    if suffix == ".ris":
        return "ris"
    if suffix == ".json":
        return "csl-json"
    head = text.lstrip()[:2000]
    if head.startswith(("[", "{")):
        return "csl-json"
    if re.search(r"^TY  - ", head, re.M):
        return "ris"
    if "@" in head:
        return "bibtex"
    raise UserError(f"{path}: cannot tell the format (use a .bib, .ris or .json CSL-JSON file)")


def read_library(path: Path, fmt: str | None = None) -> tuple[str, list[LibraryEntry], list[str]]:
    """(format, entries, problems) of a BibTeX, RIS or CSL-JSON file. UserError when it cannot be read."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"no such file: {path}")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise UserError(f"{path}: larger than {MAX_FILE_BYTES // 1_000_000} MB")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        text = path.read_text(encoding="latin-1")
    fmt = fmt or detect_format(path, text)
    parser = {"bibtex": parse_bibtex, "ris": parse_ris, "csl-json": parse_csl_json}.get(fmt)
    if parser is None:
        raise UserError(f"unknown library format {fmt!r}: use bibtex, ris or csl-json")
    entries, problems = parser(text, str(path))
    base = path.absolute().parent
    for e in entries:
        e.files = list(dict.fromkeys(resolve_file(f, base) for f in e.files))
    return fmt, entries, problems


def _latex_decoder():
    """bibtexparser's own LaTeX decoder, plus ``\\textbraceleft`` and ``\\textbraceright`` (how paperkb's
    BibTeX export writes a literal brace) as braces."""
    from pylatexenc.latex2text import LatexNodes2Text, MacroTextSpec, get_default_latex_context_db

    db = get_default_latex_context_db()
    db.add_context_category("paperkb-library", prepend=True, macros=[
        MacroTextSpec("url", simplify_repl="%s"), MacroTextSpec("textbraceleft", "{"), MacroTextSpec("textbraceright", "}")])
    return LatexNodes2Text(latex_context=db, keep_braced_groups=False, math_mode="verbatim")


def parse_bibtex(text: str, where: str = "library") -> tuple[list[LibraryEntry], list[str]]:
    import bibtexparser
    from bibtexparser.middlewares import LatexDecodingMiddleware

    raw = bibtexparser.parse_string(text)  # file paths and URLs as written (LaTeX decoding eats '~', '%', '\\')
    lib = LatexDecodingMiddleware(allow_inplace_modification=False, decoder=_latex_decoder()).transform(raw)
    entries = []
    for i, (e, r) in enumerate(zip(lib.entries, raw.entries), start=1):
        f = {k.lower(): (v.value if isinstance(v.value, str) else str(v.value)) for k, v in e.fields_dict.items()}
        verbatim = {k.lower(): str(v.value) for k, v in r.fields_dict.items()}
        prefix = (f.get("archiveprefix") or f.get("eprinttype") or "").lower()
        eprint = f.get("eprint") if prefix in ("", "arxiv") else None
        authors = [a.strip() for a in re.split(r"\s+and\s+", f.get("author", "")) if a.strip()]
        entries.append(LibraryEntry(
            index=i, key=e.key, title=_clean(f.get("title")), doi=normalize_doi(f.get("doi")),
            arxiv_id=arxiv_from(eprint, f.get("arxivid"), f.get("arxiv"), f.get("doi"), f.get("url"),
                                f.get("journal"), f.get("note"), f.get("howpublished")),
            year=_year(f.get("year") or f.get("date")), authors=authors, type=e.entry_type.lower(),
            files=file_field_paths(verbatim.get("file")) + file_field_paths(verbatim.get("pdf"))
            + _file_urls(verbatim.get("url"))))
    problems = [f"{where}: a block near line {getattr(b, 'start_line', '?')} could not be parsed"
                for b in lib.failed_blocks]
    return entries, problems


def parse_ris(text: str, where: str = "library") -> tuple[list[LibraryEntry], list[str]]:
    import rispy

    try:
        records = rispy.loads(text, list_tags=[*rispy.LIST_TYPE_TAGS, "L1"])
    except Exception as exc:  # rispy raises IOError/ValueError subclasses for files that are not RIS
        raise UserError(f"{where}: not a RIS file ({exc})") from None
    entries = []
    for i, r in enumerate(records, start=1):
        notes = r.get("notes") or []
        urls = r.get("urls") or []
        title = r.get("title") or r.get("primary_title") or r.get("translated_title")
        entries.append(LibraryEntry(
            index=i, key=r.get("id"), title=_clean(title), doi=normalize_doi(r.get("doi")),
            arxiv_id=arxiv_from(r.get("doi"), *urls, *notes, r.get("journal_name"), r.get("number")),
            year=_year(r.get("year") or r.get("publication_year") or r.get("date")),
            authors=list(r.get("authors") or r.get("first_authors") or []), type=r.get("type_of_reference"),
            files=_file_urls(r.get("file_attachments1"), *urls)))
    return entries, []


def parse_csl_json(text: str, where: str = "library") -> tuple[list[LibraryEntry], list[str]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: not JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:  # arrays or objects nested thousands deep: no CSL-JSON library is
        raise UserError(f"{where}: not a CSL-JSON library (its JSON is nested too deeply)") from None
    if isinstance(data, dict):
        data = data.get("items", [data])
    if not isinstance(data, list):
        raise UserError(f"{where}: a CSL-JSON file holds a list of items")
    entries, problems = [], []
    for i, it in enumerate(data, start=1):
        if not isinstance(it, dict):
            problems.append(f"{where}: item {i} is not an object")
            entries.append(LibraryEntry(index=i, key=None))
            continue
        parts = ((it.get("issued") or {}).get("date-parts") or [[None]]) if isinstance(it.get("issued"), dict) else [[None]]
        year = parts[0][0] if parts and parts[0] else None
        authors = []
        for a in it.get("author") or []:
            if isinstance(a, dict):
                authors.append(a.get("literal") or ", ".join(x for x in (a.get("family"), a.get("given")) if x))
        entries.append(LibraryEntry(
            index=i, key=str(it["id"]) if it.get("id") is not None else None, title=_clean(it.get("title")),
            doi=normalize_doi(it.get("DOI")),
            arxiv_id=arxiv_from(it.get("arxiv"), it.get("DOI"), it.get("number"), it.get("URL"), it.get("note")),
            year=_year(year), authors=authors, type=it.get("type"),
            files=_file_urls(it.get("file"), it.get("files"), it.get("URL"))))
    return entries, problems


def _clean(v) -> str | None:
    return " ".join(str(v).split()) if v else None


# ---- matching -----------------------------------------------------------------------------------
def match_entries(con, entries: list[LibraryEntry], source: str = "library", fmt: str = "?",
                  problems: list[str] | None = None) -> MatchReport:
    """Match ``entries`` against the catalog on ``con`` (papers, works): DOI, then arXiv id, then title."""
    report = MatchReport(source=source, format=fmt, entries=len(entries), problems=list(problems or []))
    titles: dict[str, str] = {}

    # DOI -> paper_id
    dois = sorted({e.doi for e in entries if e.doi})
    by_doi: dict[str, set[str]] = {}
    if dois:
        # the paper's DOI, the other DOIs arXiv lists for it, and the DOI S2 gives its work
        for d, pid in con.execute("""
                SELECT d, paper_id FROM (
                    SELECT lower(doi) AS d, paper_id FROM papers
                    UNION ALL SELECT lower(unnest(dois)), paper_id FROM papers
                    UNION ALL SELECT lower(doi), paper_id FROM works WHERE paper_id IS NOT NULL)
                WHERE d IN (SELECT unnest(?::VARCHAR[]))""", [dois]).fetchall():
            by_doi.setdefault(d, set()).add(pid)

    # arXiv id -> paper_id
    axs = sorted({e.arxiv_id for e in entries if e.arxiv_id})
    by_ax: dict[str, set[str]] = {}
    if axs:
        for pid, in con.execute("SELECT paper_id FROM papers WHERE source = 'arxiv' AND paper_id IN (SELECT unnest(?::VARCHAR[]))",
                                [axs]).fetchall():
            by_ax.setdefault(pid, set()).add(pid)
        for ax, pid in con.execute("SELECT arxiv_id, paper_id FROM works WHERE paper_id IS NOT NULL "
                                   "AND arxiv_id IN (SELECT unnest(?::VARCHAR[]))", [axs]).fetchall():
            by_ax.setdefault(ax, set()).add(pid)

    # normalised title -> paper_ids (SQL narrows, Python's normal form decides)
    keys = sorted({normalize_title(e.title) for e in entries if len(normalize_title(e.title)) >= MIN_TITLE_CHARS})
    by_title: dict[str, set[str]] = {}
    if keys:
        rows = con.execute("""SELECT paper_id, title FROM papers
                              WHERE regexp_replace(lower(strip_accents(title)), '[^a-z0-9]', '', 'g') IN (SELECT unnest(?::VARCHAR[]))""",
                           [keys]).fetchall()
        for pid, title in rows:
            k = normalize_title(title)
            if k in keys:
                by_title.setdefault(k, set()).add(pid)
                titles[pid] = title

    for e in entries:
        tkey = normalize_title(e.title)
        hit: tuple[str, str] | None = None
        reasons: list[str] = []
        for by, key, index in (("doi", e.doi, by_doi), ("arxiv", e.arxiv_id, by_ax), ("title", tkey, by_title)):
            if not key:
                continue
            if by == "title" and len(key) < MIN_TITLE_CHARS:
                reasons.append(f"title too short to match on ({len(key)} letters and digits)")
                continue
            found = sorted(index.get(key, set()))
            if len(found) == 1:
                hit = (found[0], by)
                break
            if len(found) > 1:
                reasons.append(f"{by} matches {len(found)} papers ({', '.join(found[:3])})")
            else:
                label = {"doi": f"DOI {e.doi}", "arxiv": f"arXiv id {e.arxiv_id}", "title": "title"}[by]
                reasons.append(f"{label} not in the catalog")
        if hit:
            report.matched.append(Matched(entry=e, paper_id=hit[0], by=hit[1], title=titles.get(hit[0])))
            continue
        if not (e.doi or e.arxiv_id or tkey):
            reasons.append("no DOI, arXiv id or title")
        report.unmatched.append(Unmatched(entry=e, reason="; ".join(reasons)))

    if report.matched:  # the catalog's titles for the matched papers
        missing = [m.paper_id for m in report.matched if m.title is None]
        if missing:
            t = dict(con.execute("SELECT paper_id, title FROM papers WHERE paper_id IN (SELECT unnest(?::VARCHAR[]))",
                                 [missing]).fetchall())
            for m in report.matched:
                m.title = m.title or t.get(m.paper_id)
    return report


def match_library(con, path: Path, fmt: str | None = None) -> MatchReport:
    """Read ``path`` (BibTeX, RIS or CSL-JSON) and match its entries against the catalog on ``con``."""
    fmt, entries, problems = read_library(Path(path), fmt)
    return match_entries(con, entries, source=str(path), fmt=fmt, problems=problems)
