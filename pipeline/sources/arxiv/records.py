"""Parse arXiv responses (from the raw zone) into plain records. No HTTP and no database here.

Two wire formats:

- OAI-PMH pages (``ListRecords``/``GetRecord``), metadataPrefix ``arXivRaw`` (version history,
  authors as one free-text string) or ``arXiv`` (structured authors, created/updated dates).
  Pages are read with ``lxml.etree.iterparse`` and each record element is freed once parsed, so
  memory stays flat however large a page is.
- arXiv API Atom feeds (``/api/query?id_list=...``), read with feedparser. feedparser keeps only
  the last ``arxiv:affiliation`` of an entry, so the per-author list (name + affiliations) is
  read from the same bytes with lxml.

A record is a dict with the ``papers`` columns plus ``authors`` (list of dicts) and ``versions``
(list of dicts). Problems with one record come back as ``Reject`` values; a page that is not
well-formed XML raises ``MalformedResponse`` (the caller rejects the whole page).
"""

from __future__ import annotations

import io
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from email.utils import parsedate_to_datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from lxml import etree

from pipeline.dates import date_of
from pipeline.sources.arxiv.ids import parse_arxiv_id

OAI_NS = "http://www.openarchives.org/OAI/2.0/"
ARXIVRAW_NS = "http://arxiv.org/OAI/arXivRaw/"
ARXIV_NS = "http://arxiv.org/OAI/arXiv/"
ATOM_NS = "http://www.w3.org/2005/Atom"
ARXIV_ATOM_NS = "http://arxiv.org/schemas/atom"

_T_RECORD = f"{{{OAI_NS}}}record"
_T_ERROR = f"{{{OAI_NS}}}error"
_T_RESPONSE_DATE = f"{{{OAI_NS}}}responseDate"
_T_TOKEN = f"{{{OAI_NS}}}resumptionToken"
_T_HEADER = f"{{{OAI_NS}}}header"
_T_METADATA = f"{{{OAI_NS}}}metadata"

# columns each kind of response can fill; the others are left alone on upsert
OAI_PAPER_COLUMNS = [
    "paper_id", "source", "external_id", "title", "abstract", "categories", "primary_category",
    "published", "updated", "year", "doi", "dois", "journal_ref", "comments", "license", "submitter",
    "report_no", "msc_class", "acm_class", "latest_version", "oai_datestamp", "metadata_source",
]
API_PAPER_COLUMNS = [
    "paper_id", "source", "external_id", "title", "abstract", "categories", "primary_category",
    "published", "updated", "year", "doi", "dois", "journal_ref", "comments", "latest_version",
    "metadata_source",
]


class MalformedResponse(Exception):
    """A response body that is not well-formed XML (e.g. truncated) or not the expected document."""


@dataclass
class Reject:
    record_key: str | None
    reason: str
    detail: str = ""


@dataclass
class OaiPage:
    """What one OAI-PMH response says besides its records."""

    response_date: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    resumption_token: str | None = None  # None: no element; "": empty element (list complete)
    complete_list_size: int | None = None
    cursor: int | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    deleted: int = 0


# --------------------------------------------------------------------------------------------
# small pure helpers
# --------------------------------------------------------------------------------------------
_NON_WORD = re.compile(r"[\W_]+")


def clean_text(s: str | None) -> str | None:
    """Collapse the line wrapping arXiv puts in titles and abstracts; ``None`` stays ``None``.

    An empty string becomes ``None``; any other text (also ``"0"``) is kept."""
    if s is None:
        return None
    s = " ".join(s.split())
    return s if s != "" else None


@lru_cache(maxsize=65536)
def author_key(name: str) -> str:
    """Readable author id from a name: accents stripped, case folded, non-letters as '-'."""
    if name.isascii():
        return _NON_WORD.sub("-", name.lower()).strip("-") or name.strip().lower()
    decomposed = unicodedata.normalize("NFKD", name)
    base = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    key = _NON_WORD.sub("-", base.casefold()).strip("-")
    return key or name.strip().casefold()


_latex = None


def latex_to_unicode(s: str) -> str:
    """Decode LaTeX accents in names (``J\\"urgen`` -> ``Jürgen``) with pylatexenc; plain text is
    returned unchanged without calling the parser."""
    if "\\" not in s and "{" not in s:
        return s
    global _latex
    if _latex is None:
        from pylatexenc.latex2text import LatexNodes2Text

        _latex = LatexNodes2Text()
    try:
        return _latex.latex_to_text(s)
    except Exception:  # noqa: BLE001 - a name we cannot decode is kept as written
        return s


_SPLIT = re.compile(r"\s*(?:,|;|\band\b|&)\s*", re.IGNORECASE)
_ET_AL = re.compile(r"^(?:et\.?\s*al\.?|others)$", re.IGNORECASE)
_TRAILING_ET_AL = re.compile(r"\s+et\.?\s*al\.?$", re.IGNORECASE)


def split_author_string(s: str) -> list[tuple[str, str | None]]:
    """Split arXivRaw's free-text author list into ``(name, affiliation)`` pairs, in order.

    arXiv writes ``A. One, B. Two (Univ X), and C. Three``. Parenthesised text is an affiliation of
    the name just before it; the numbered form ``((1) Univ X, (2) Univ Y)`` cannot be mapped to
    names reliably and is dropped. Hand-written because no maintained library parses this field
    (arXiv's own code does the same with regular expressions).
    """
    s = latex_to_unicode(" ".join(s.split()))
    pieces: list[tuple[str, str | None]] = []
    if "(" not in s:  # the common case: no affiliations
        parts = [_TRAILING_ET_AL.sub("", p.strip()) for p in _SPLIT.split(s)]
        return [(p, None) for p in parts if p and not _ET_AL.match(p)]
    depth, name_buf, aff_buf = 0, list[str](), list[str]()
    names_text: list[tuple[str, str | None]] = []  # (text outside parens, following paren text)
    for ch in s:
        if ch == "(":
            if depth == 0:
                aff_buf = []
            else:
                aff_buf.append(ch)
            depth += 1
        elif ch == ")" and depth > 0:
            depth -= 1
            if depth == 0:
                names_text.append(("".join(name_buf), "".join(aff_buf).strip()))
                name_buf = []
            else:
                aff_buf.append(ch)
        elif depth > 0:
            aff_buf.append(ch)
        else:
            name_buf.append(ch)
    names_text.append(("".join(name_buf), None))
    for text, aff in names_text:
        parts = [_TRAILING_ET_AL.sub("", p.strip()) for p in _SPLIT.split(text)]
        parts = [p for p in parts if p and not _ET_AL.match(p)]
        if aff and aff.startswith("("):
            aff = None  # numbered affiliation list
        for i, p in enumerate(parts):
            pieces.append((p, aff if (aff and i == len(parts) - 1) else None))
    return pieces


_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}


def parse_version_date(s: str | None) -> datetime | None:
    """arXivRaw version dates ('Tue, 3 Apr 2007 22:04:11 GMT') as UTC datetimes.

    The fixed GMT form is split by hand (5x faster than email.utils, which is the fallback)."""
    if not s:
        return None
    try:
        _wd, day, mon, year, hms, zone = s.split()
        if zone in ("GMT", "UTC", "+0000"):
            h, m, sec = hms.split(":")
            return datetime(int(year), _MONTHS[mon], int(day), int(h), int(m), int(sec), tzinfo=timezone.utc)
    except (ValueError, KeyError):
        pass
    try:
        return parsedate_to_datetime(s).astimezone(timezone.utc)
    except (TypeError, ValueError):
        return None


def _date(dt: datetime | None) -> date | None:
    return dt.date() if dt is not None else None


def _split_dois(s: str | None) -> list[str]:
    return s.split() if s else []


# --------------------------------------------------------------------------------------------
# OAI-PMH
# --------------------------------------------------------------------------------------------
def read_oai_page(source: bytes | Path | str) -> OaiPage:
    """Parse one OAI-PMH response (bytes or a file path) streaming, record by record.

    Raises ``MalformedResponse`` when the body is not well-formed XML or not an OAI-PMH document."""
    page = OaiPage()
    fh = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else open(source, "rb")
    root = None
    try:
        # only the elements we use come back to Python; everything inside a record is read from its element
        ctx = etree.iterparse(
            fh, events=("end",), tag=(_T_RECORD, _T_RESPONSE_DATE, _T_ERROR, _T_TOKEN),
            huge_tree=True, resolve_entities=False, no_network=True, remove_comments=True,
        )
        for _event, el in ctx:
            if root is None:
                root = el.getroottree().getroot()
                if root.tag != f"{{{OAI_NS}}}OAI-PMH":
                    raise MalformedResponse(f"not an OAI-PMH response (root element {root.tag})")
            tag = el.tag
            if tag == _T_RECORD:
                _parse_record(el, page)
                el.clear()
                parent = el.getparent()
                while el.getprevious() is not None:
                    del parent[0]
            elif tag == _T_RESPONSE_DATE:
                page.response_date = (el.text or "").strip() or None
            elif tag == _T_ERROR:
                page.error_code = el.get("code") or "unknown"
                page.error_message = clean_text(el.text) or ""
            elif tag == _T_TOKEN:
                page.resumption_token = (el.text or "").strip()
                size, cursor = el.get("completeListSize"), el.get("cursor")
                page.complete_list_size = int(size) if size and size.isdigit() else None
                page.cursor = int(cursor) if cursor and cursor.isdigit() else None
        if root is None:
            root = getattr(ctx, "root", None)
            tag = root.tag if root is not None else None
            raise MalformedResponse("empty response body" if tag is None else f"not an OAI-PMH response (root element {tag})")
    except etree.XMLSyntaxError as exc:
        raise MalformedResponse(f"not well-formed XML: {exc}") from exc
    finally:
        fh.close()
    return page


_LOCAL_NAMES: dict[str, str] = {}


def _local(tag: str) -> str:
    """Element name without its namespace (memoised: the same few dozen tags repeat)."""
    name = _LOCAL_NAMES.get(tag)
    if name is None:
        name = _LOCAL_NAMES[tag] = tag.rsplit("}", 1)[-1]
    return name


def _parse_record(el: etree._Element, page: OaiPage) -> None:
    header = el.find(_T_HEADER)
    identifier = header.findtext(f"{{{OAI_NS}}}identifier") if header is not None else None
    if header is not None and header.get("status") == "deleted":
        page.deleted += 1
        return
    metadata = el.find(_T_METADATA)
    if metadata is None or len(metadata) == 0:
        page.rejects.append(Reject(identifier, "record without metadata"))
        return
    root = metadata[0]
    datestamp = date_of(header.findtext(f"{{{OAI_NS}}}datestamp")) if header is not None else None
    try:
        if root.tag == f"{{{ARXIVRAW_NS}}}arXivRaw":
            rec = _parse_arxivraw(root)
        elif root.tag == f"{{{ARXIV_NS}}}arXiv":
            rec = _parse_arxiv(root)
        else:
            page.rejects.append(Reject(identifier, "unsupported metadata format", _local(root.tag)))
            return
    except ValueError as exc:
        page.rejects.append(Reject(identifier, "bad record", str(exc)))
        return
    rec["oai_datestamp"] = datestamp
    problem = _check(rec)
    if problem:
        page.rejects.append(Reject(rec.get("paper_id") or identifier, problem))
        return
    page.records.append(rec)


def _check(rec: dict[str, Any]) -> str | None:
    if rec.get("title") is None:
        return "missing title"
    if not rec.get("categories"):
        return "missing categories"
    return None


def _base(paper_id: str, fields: dict[str, str | None], metadata_source: str) -> dict[str, Any]:
    cats = (fields.get("categories") or "").split()
    dois = _split_dois(fields.get("doi"))
    return {
        "paper_id": paper_id,
        "source": "arxiv",
        "external_id": paper_id,
        "title": clean_text(fields.get("title")),
        "abstract": clean_text(fields.get("abstract")),
        "categories": cats,
        "primary_category": cats[0] if cats else None,
        "doi": dois[0] if dois else None,
        "dois": dois,
        "journal_ref": clean_text(fields.get("journal-ref")),
        "comments": clean_text(fields.get("comments")),
        "license": clean_text(fields.get("license")),
        "submitter": clean_text(fields.get("submitter")),
        "report_no": clean_text(fields.get("report-no")),
        "msc_class": clean_text(fields.get("msc-class")),
        "acm_class": clean_text(fields.get("acm-class")),
        "metadata_source": metadata_source,
    }


def _parse_arxivraw(root: etree._Element) -> dict[str, Any]:
    fields: dict[str, str | None] = {}
    versions: list[dict[str, Any]] = []
    for child in root:
        name = _local(child.tag)
        if name == "version":
            v = child.get("version", "")
            num = int(v[1:]) if v[:1] == "v" and v[1:].isdigit() else None
            if num is None:
                raise ValueError(f"bad version label {v!r}")
            versions.append({
                "version": num,
                "submitted_at": parse_version_date(child.findtext(f"{{{ARXIVRAW_NS}}}date")),
                "size": child.findtext(f"{{{ARXIVRAW_NS}}}size"),
                "source_type": child.findtext(f"{{{ARXIVRAW_NS}}}source_type"),
            })
        else:
            fields[name] = child.text
    pid = parse_arxiv_id(fields.get("id") or "").paper_id
    rec = _base(pid, fields, "oai:arXivRaw")
    versions.sort(key=lambda v: v["version"])
    for v in versions:
        v["paper_id"] = pid
    rec["versions"] = versions
    rec["latest_version"] = versions[-1]["version"] if versions else None
    rec["published"] = _date(versions[0]["submitted_at"]) if versions else None
    rec["updated"] = _date(versions[-1]["submitted_at"]) if versions else None
    rec["year"] = rec["published"].year if rec["published"] else None
    rec["authors"] = [
        {"name": n, "keyname": None, "forenames": None, "affiliation": a}
        for n, a in split_author_string(fields.get("authors") or "")
    ]
    return rec


def _parse_arxiv(root: etree._Element) -> dict[str, Any]:
    fields: dict[str, str | None] = {}
    authors: list[dict[str, Any]] = []
    for child in root:
        name = _local(child.tag)
        if name == "authors":
            for a in child:
                keyname = clean_text(a.findtext(f"{{{ARXIV_NS}}}keyname"))
                forenames = clean_text(a.findtext(f"{{{ARXIV_NS}}}forenames"))
                suffix = clean_text(a.findtext(f"{{{ARXIV_NS}}}suffix"))
                affs = [t for t in (clean_text(x.text) for x in a.findall(f"{{{ARXIV_NS}}}affiliation")) if t]
                full = " ".join(p for p in (forenames, keyname, suffix) if p)
                if not full:
                    continue
                authors.append({
                    "name": latex_to_unicode(full),
                    "keyname": latex_to_unicode(keyname) if keyname else None,
                    "forenames": latex_to_unicode(forenames) if forenames else None,
                    "affiliation": "; ".join(affs) if affs else None,
                })
        else:
            fields[name] = child.text
    pid = parse_arxiv_id(fields.get("id") or "").paper_id
    rec = _base(pid, fields, "oai:arXiv")
    rec["published"] = date_of(fields.get("created"))
    rec["updated"] = date_of(fields.get("updated")) or rec["published"]
    rec["year"] = rec["published"].year if rec["published"] else None
    rec["latest_version"] = None  # this format does not say
    rec["versions"] = []
    rec["authors"] = authors
    return rec


# --------------------------------------------------------------------------------------------
# arXiv API (Atom)
# --------------------------------------------------------------------------------------------
class ApiErrorFeed(Exception):
    """The API answered with its error feed (e.g. HTTP 400 'incorrect id format for abc')."""


@dataclass
class AtomFeed:
    total_results: int | None
    records: list[dict[str, Any]]
    rejects: list[Reject]


def _struct_to_dt(st) -> datetime | None:
    if st is None:
        return None
    year, month, day, hour, minute, second = st[:6]
    return datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc)


def read_atom_feed(body: bytes) -> AtomFeed:
    """Parse an arXiv API response. Raises ``ApiErrorFeed`` for the API's error feed and
    ``MalformedResponse`` when the body is not a well-formed feed."""
    import feedparser

    try:
        tree = etree.fromstring(body, parser=etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError as exc:
        raise MalformedResponse(f"not well-formed XML: {exc}") from exc
    if tree.tag != f"{{{ATOM_NS}}}feed":
        raise MalformedResponse(f"not an Atom feed (root element {tree.tag})")
    parsed = feedparser.parse(body)
    entries_xml = tree.findall(f"{{{ATOM_NS}}}entry")
    if len(entries_xml) != len(parsed.entries):
        raise MalformedResponse("feed entries could not be read consistently")
    errors = [e for e in parsed.entries if "/api/errors" in (e.get("id") or "")]
    if errors:
        raise ApiErrorFeed("; ".join(clean_text(e.get("summary")) or "unknown error" for e in errors))
    total = parsed.feed.get("opensearch_totalresults")
    records: list[dict[str, Any]] = []
    rejects: list[Reject] = []
    for entry, exml in zip(parsed.entries, entries_xml):
        try:
            aid = parse_arxiv_id(entry.get("id") or "")
        except ValueError as exc:
            rejects.append(Reject(entry.get("id"), "bad id", str(exc)))
            continue
        primary = (entry.get("arxiv_primary_category") or {}).get("term")
        cats = [t.get("term") for t in entry.get("tags", []) if t.get("term")]
        if primary and primary in cats:
            cats.remove(primary)
        if primary:
            cats.insert(0, primary)
        published = _struct_to_dt(entry.get("published_parsed"))
        updated = _struct_to_dt(entry.get("updated_parsed"))
        dois = _split_dois(entry.get("arxiv_doi"))
        authors = []
        for a in exml.findall(f"{{{ATOM_NS}}}author"):
            name = clean_text(a.findtext(f"{{{ATOM_NS}}}name"))
            if not name:
                continue
            affs = [t for t in (clean_text(x.text) for x in a.findall(f"{{{ARXIV_ATOM_NS}}}affiliation")) if t]
            authors.append({"name": name, "keyname": None, "forenames": None,
                            "affiliation": "; ".join(affs) if affs else None})
        version = aid.version
        rec = {
            "paper_id": aid.paper_id,
            "source": "arxiv",
            "external_id": aid.paper_id,
            "title": clean_text(entry.get("title")),
            "abstract": clean_text(entry.get("summary")),
            "categories": cats,
            "primary_category": cats[0] if cats else None,
            "published": _date(published),
            "updated": _date(updated),
            "year": published.year if published else None,
            "doi": dois[0] if dois else None,
            "dois": dois,
            "journal_ref": clean_text(entry.get("arxiv_journal_ref")),
            "comments": clean_text(entry.get("arxiv_comment")),
            "latest_version": version,
            "metadata_source": "api",
            "authors": authors,
            "versions": [] if version is None else [{
                "paper_id": aid.paper_id, "version": version,
                "submitted_at": published if version == 1 else updated, "size": None, "source_type": None,
            }],
        }
        problem = _check(rec)
        if problem:
            rejects.append(Reject(aid.paper_id, problem))
            continue
        records.append(rec)
    return AtomFeed(total_results=int(total) if total not in (None, "") else None, records=records, rejects=rejects)


def category_matcher(patterns: list[str]):
    """A predicate on a record's categories from settings.categories.

    ``*`` keeps everything; ``cs`` or ``cs.*`` keeps an archive; ``cs.AI`` keeps that category.
    A paper is kept when any of its categories matches (cross-lists count)."""
    pats = [p.strip() for p in patterns if p and p.strip()]
    if not pats or "*" in pats:
        return lambda cats: True
    exact = {p for p in pats if "." in p and not p.endswith(".*")}
    archives = tuple(p[:-2] if p.endswith(".*") else p for p in pats if p not in exact)

    def keep(cats: list[str]) -> bool:
        for c in cats:
            if c in exact:
                return True
            for a in archives:
                if c == a or c.startswith(a + "."):
                    return True
        return False

    return keep
