"""Importers for local corpora: SMART test collections (CISI, Cranfield, CACM) and JSONL.

Queries and judgments of these collections are read by ``pipeline.evaluation.qrels`` (evaluation owns it);
external ids here are the same document numbers, so runs and qrels line up.

Every import lands the input file byte-exact in the raw zone (``raw/collections/<name>/<file>``)
and parses from there. Rows written (collection ``name``, document number ``N``):

- ``papers``: ``paper_id='<name>:<N>'``, ``source=<name>``, ``external_id='<N>'``, title, abstract,
  ``published``/``year`` from ``.B``, ``journal_ref`` = the ``.B`` text, ``categories`` = CACM ``.C``;
- ``authors`` / ``paper_authors``: ``.A`` lines in file order;
- ``works``: one per corpus paper (``work_id = paper_id``) plus, for JSONL, one per referenced id
  that is not in the file (``paper_id`` NULL);
- ``citations``: CACM type-5 ``.X`` links (direction from ``.B`` dates, see ``cacm_citations``) and
  JSONL ``references``.

CISI's ``.X`` field is *not* imported as citations: its lines are (other doc, co-citation count,
this doc) without a type or a direction, and 24 of 1,460 records carry a date, so any direction
would be invented.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import date
from pathlib import Path

from pipeline import catalog_changes
from pipeline.errors import UserError
from pipeline.sources.smart import SmartRecord, iter_smart_records, normalise_docno
from pipeline.terminal import storable
from pipeline.writer_lock import writes

log = logging.getLogger(__name__)

RAW_SOURCE = "collections"
FORMATS = ("smart", "jsonl")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], start=1)}
_MONTH_RE = re.compile(r"\b(" + "|".join(_MONTHS) + r")\b", re.IGNORECASE)
_YEAR_RE = re.compile(r"\b(1[89]\d\d|20\d\d)\b")


# ================================================================================================
# SMART format (pure functions)
# ================================================================================================
def parse_smart_date(b: str | None) -> tuple[date | None, int | None]:
    """``.B`` text -> (published date when a month is given, year).

    ``'CACM December, 1958'`` -> (1958-12-01, 1958); ``'j. ae. scs. 25, 1958, 324.'`` -> (None, 1958);
    ``'1970'`` -> (None, 1970). The first plausible year (1800-2099) is taken.
    """
    if not b:
        return None, None
    y = _YEAR_RE.search(b)
    if not y:
        return None, None
    year = int(y.group(1))
    m = _MONTH_RE.search(b)
    return (date(year, _MONTHS[m.group(1).lower()], 1) if m else None), year


def parse_smart_links(lines: list[str] | None) -> list[tuple[str, int, str]]:
    """``.X`` lines ``other<TAB>type<TAB>this`` -> (other, type, this); malformed lines are skipped."""
    out = []
    for line in lines or []:
        parts = line.split()
        if len(parts) == 3 and parts[1].lstrip("-").isdigit():
            out.append((normalise_docno(parts[0]), int(parts[1]), normalise_docno(parts[2])))
    return out


def smart_paper(rec: SmartRecord) -> dict:
    """A parsed record as a plain dict (docno, title, abstract, authors, published, year, ...)."""
    published, year = parse_smart_date(rec.text("B"))
    authors = [a.strip() for a in rec.fields.get("A", []) if a.strip()]
    cats = (rec.text("C") or "").split()
    return {
        "docno": normalise_docno(rec.docno),
        "title": rec.text("T"),
        "abstract": rec.text("W"),
        "authors": authors,
        "published": published,
        "year": year,
        "venue_text": rec.text("B"),
        "keywords": rec.text("K"),
        "categories": cats,
        "links": parse_smart_links(rec.fields.get("X")),
    }


def has_typed_links(papers: list[dict]) -> bool:
    """True when the ``.X`` middle column is CACM's link type (only 4, 5, 6 occur, 5 among them).

    CISI's middle column is a co-citation count (1, 2, 3, ... ), which is not imported."""
    kinds = {typ for p in papers for _, typ, _ in p["links"]}
    return 5 in kinds and kinds <= {4, 5, 6}


def cacm_citations(papers: list[dict]) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Directed citation edges (citing docno, cited docno) from CACM type-5 ``.X`` links.

    A type-5 link is stored in both records without a direction; repeated lines are counts. The
    later-published document (``.B`` month and year) cites the earlier one. When both have the
    same month (or a date is missing) the higher document number cites the lower: CACM numbers
    mostly follow publication order (242 of 3,203 consecutive numbers go back in time), and
    nothing better is recorded. Self-links and links to documents not in the file are dropped (counted).
    """
    by_no = {p["docno"]: p for p in papers}
    pairs: set[tuple[str, str]] = set()
    stats = {"links_type5": 0, "self_links": 0, "dangling": 0, "by_date": 0, "by_number": 0}
    for p in papers:
        for other, typ, this in p["links"]:
            if typ != 5:
                continue
            stats["links_type5"] += 1
            a, b = this or p["docno"], other
            if a == b:
                stats["self_links"] += 1
                continue
            if a not in by_no or b not in by_no:
                stats["dangling"] += 1
                continue
            pairs.add((a, b) if _docno_key(a) < _docno_key(b) else (b, a))
    edges = []
    for a, b in sorted(pairs, key=lambda ab: (_docno_key(ab[0]), _docno_key(ab[1]))):
        da, db = _month_key(by_no[a]), _month_key(by_no[b])
        if da is not None and db is not None and da != db:
            stats["by_date"] += 1
            edges.append((a, b) if da > db else (b, a))
        else:
            stats["by_number"] += 1
            edges.append((b, a))  # b has the higher number
    stats["edges"] = len(edges)
    return edges, stats


def _docno_key(s: str):
    return (0, int(s), "") if s.isdigit() else (1, 0, s)


def _month_key(p: dict):
    if p.get("published") is not None:
        return (p["published"].year, p["published"].month)
    return None


# ================================================================================================
# JSONL (pure)
# ================================================================================================
_SURROGATE = re.compile("[\ud800-\udfff]")
MIN_YEAR, MAX_YEAR = 1, 9999  # what a date can hold (and the warehouse's INTEGER column, with room to spare)


def _jsonl_text(value: object, name: str) -> str | None:
    """A JSONL text field: None, or a string without an unpaired surrogate (``"\\ud800"`` is valid JSON, but no
    UTF-8 text: the warehouse cannot store it). ``ValueError`` says which field and why."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name!r} must be text, not {type(value).__name__}")
    bad = _SURROGATE.search(value)
    if bad:
        raise ValueError(f"{name!r} holds an unpaired surrogate (\\u{ord(bad.group()):04x}, character {bad.start() + 1})")
    return value


def _jsonl_id(value: object, name: str) -> str:
    """An id (a paper's or a reference's): text or a whole number, as text."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"{name!r} must be text or a whole number, not {type(value).__name__}")
    return (_jsonl_text(value, name) if isinstance(value, str) else str(value)).strip()  # type: ignore[union-attr]


def _jsonl_year(value: object) -> int | None:
    """A year: a whole number (or its text) from :data:`MIN_YEAR` to :data:`MAX_YEAR`; None when absent."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"'year' must be a number, not {type(value).__name__}")
    shown = storable(value if isinstance(value, str) else repr(value))[:40]
    try:
        year = int(value)
    except (ValueError, OverflowError):  # "soon", NaN, Infinity (Python's json reads those two)
        raise ValueError(f"'year' {shown} is not a year") from None
    if not MIN_YEAR <= year <= MAX_YEAR:
        raise ValueError(f"'year' {shown} is not a year from {MIN_YEAR} to {MAX_YEAR}")
    return year


def parse_jsonl(text: str) -> tuple[list[dict], list[dict]]:
    """Lines ``{id, title, abstract, authors?, year?, references?}`` -> (papers, rejects).

    A line that is not such a record is rejected (reason ``bad_jsonl_line``, the detail says which field and why), and
    the others are read: not JSON, no id, a field of the wrong type, text with an unpaired surrogate, a year that is
    not one (10**30, Infinity)."""
    papers, rejects = [], []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict) or obj.get("id") in (None, ""):
                raise ValueError("missing 'id'")
            docno = _jsonl_id(obj["id"], "id")
            if not docno:
                raise ValueError("missing 'id'")
            authors = obj.get("authors") or []
            if isinstance(authors, str):
                authors = [authors]
            if not isinstance(authors, list):
                raise ValueError("'authors' must be a list of names")
            refs = obj.get("references") or []
            if not isinstance(refs, list):
                raise ValueError("'references' must be a list of ids")
            papers.append({
                "docno": docno,
                "title": _jsonl_text(obj.get("title"), "title"),
                "abstract": _jsonl_text(obj.get("abstract"), "abstract"),
                "authors": [n.strip() for n in (_jsonl_text(a, "authors") for a in authors if a is not None) if n and n.strip()],
                "published": None,
                "year": _jsonl_year(obj.get("year")),
                "venue_text": None,
                "categories": [],
                "references": [r for r in (_jsonl_id(r, "references") for r in refs) if r],
            })
        except (ValueError, TypeError, RecursionError) as exc:  # (json's own errors are ValueErrors)
            rejects.append({"record_key": f"line {i}", "reason": "bad_jsonl_line", "detail": f"{exc}: {line[:300]}"})
    return papers, rejects


# ================================================================================================
# Import (I/O at the edges)
# ================================================================================================
def resolve_collection(path: str | Path, fmt: str, name: str | None) -> tuple[Path, str]:
    """(documents file, collection name) for a folder or file; UserError when unusable."""
    if fmt not in FORMATS:
        raise UserError(f"unknown collection format {fmt!r} (use one of {', '.join(FORMATS)})")
    p = Path(path)
    if not p.exists():
        raise UserError(f"{p}: no such file or folder")
    if p.is_dir():
        if fmt == "smart":
            cands = sorted(f for f in p.iterdir() if f.is_file() and re.search(r"\.all(\.|$)", f.name, re.I))
        else:
            cands = sorted(f for f in p.iterdir() if f.is_file() and f.suffix.lower() in (".jsonl", ".ndjson"))
        if len(cands) != 1:
            what = "a *.ALL documents file" if fmt == "smart" else "a *.jsonl file"
            found = ", ".join(c.name for c in cands) or "none"
            raise UserError(f"{p}: expected exactly one {what} (found {found}); pass the file itself")
        doc_file, default_name = cands[0], p.name
    else:
        doc_file = p
        default_name = p.parent.name if fmt == "smart" else p.name.split(".")[0]
    nm = (name or default_name).strip().lower()
    if not _NAME_RE.match(nm) or nm == "arxiv":
        raise UserError(f"bad collection name {nm!r}: use lowercase letters, digits, '-', '_' (not 'arxiv'); see --name")
    return doc_file, nm


@writes("import-collection")
def import_collection(settings, path: str | Path, fmt: str = "smart", name: str | None = None) -> dict:
    """Import a local corpus into papers/authors/paper_authors/works/citations. Idempotent.

    Returns a summary dict: collection, format, raw_path, papers, authors, works, citations,
    rejected, plus the per-table upsert counts and the CACM link statistics.
    """
    import pyarrow as pa

    from pipeline.raw import RawZone
    from pipeline.warehouse import Warehouse

    doc_file, nm = resolve_collection(path, fmt, name)
    body = doc_file.read_bytes()
    rz = RawZone(settings.raw_dir)
    entry = rz.write(RAW_SOURCE, f"{nm}/{doc_file.name}", body, url=doc_file.resolve().as_uri(),
                     params={"format": fmt, "name": nm}, content_type="text/plain")
    text = rz.read(entry).decode("utf-8", errors="replace")

    rejects: list[dict] = []
    link_stats: dict[str, int] = {}
    if fmt == "smart":
        papers, seen = [], set()
        for rec in iter_smart_records(text):
            p = smart_paper(rec)
            if not p["docno"] or p["docno"] in seen:
                rejects.append({"record_key": p["docno"] or f"line {rec.line}",
                                "reason": "duplicate_docno" if p["docno"] else "missing_docno",
                                "detail": f".I record at line {rec.line}"})
                continue
            seen.add(p["docno"])
            papers.append(p)
        edges: list[tuple[str, str]] = []
        if has_typed_links(papers):
            edges, link_stats = cacm_citations(papers)
        external: dict[str, None] = {}
    else:
        papers, rejects = parse_jsonl(text)
        uniq, seen = [], set()
        for p in papers:
            if p["docno"] in seen:
                rejects.append({"record_key": p["docno"], "reason": "duplicate_docno", "detail": "id repeated in file"})
                continue
            seen.add(p["docno"])
            uniq.append(p)
        papers = uniq
        edges = sorted({(p["docno"], r) for p in papers for r in p["references"] if r != p["docno"]})
        external = {r: None for _, r in edges if r not in seen}
    for r in rejects:
        r["raw_path"] = entry.path
    if not papers:  # (nothing to import: the lines' reasons are not stored, the first is told)
        first = f" ({len(rejects)} rejected, {rejects[0]['record_key']}: {rejects[0]['detail'][:200]})" if rejects else ""
        raise UserError(f"{doc_file}: no {fmt} records found{first}")

    pid = lambda docno: f"{nm}:{docno}"  # noqa: E731
    cited_n: dict[str, int] = {}
    ref_n: dict[str, int] = {}
    for a, b in edges:
        ref_n[a] = ref_n.get(a, 0) + 1
        cited_n[b] = cited_n.get(b, 0) + 1

    paper_rows = {
        "paper_id": [pid(p["docno"]) for p in papers],
        "source": [nm] * len(papers),
        "external_id": [p["docno"] for p in papers],
        "title": [p["title"] for p in papers],
        "abstract": [p["abstract"] for p in papers],
        "categories": [p["categories"] for p in papers],
        "primary_category": [p["categories"][0] if p["categories"] else None for p in papers],
        "published": [p["published"] for p in papers],
        "year": [p["year"] for p in papers],
        "journal_ref": [p["venue_text"] for p in papers],
    }
    work_ids = [pid(p["docno"]) for p in papers] + [pid(x) for x in external]
    work_rows = {
        "work_id": work_ids,
        "paper_id": [pid(p["docno"]) for p in papers] + [None] * len(external),
        "title": [p["title"] for p in papers] + [None] * len(external),
        "year": [p["year"] for p in papers] + [None] * len(external),
        "citation_count": [cited_n.get(p["docno"], 0) for p in papers] + [cited_n.get(x, 0) for x in external],
        "reference_count": [ref_n.get(p["docno"], 0) for p in papers] + [0] * len(external),
    }
    cit_rows = {
        "citing_work_id": [pid(a) for a, _ in edges],
        "cited_work_id": [pid(b) for _, b in edges],
        "is_influential": pa.nulls(len(edges), pa.bool_()),
        "intents": pa.nulls(len(edges), pa.list_(pa.string())),
        "source": [nm] * len(edges),
    }
    pa_ids, pa_pos, pa_aid, pa_name = [], [], [], []
    author_names: dict[str, str] = {}
    for p in papers:
        for pos, a in enumerate(p["authors"], start=1):
            aid = collection_author_id(nm, a)
            author_names.setdefault(aid, a)
            pa_ids.append(pid(p["docno"]))
            pa_pos.append(pos)
            pa_aid.append(aid)
            pa_name.append(a)

    summary: dict = {"collection": nm, "format": fmt, "raw_path": entry.path, "papers": len(papers),
                     "works": len(work_ids), "citations": len(edges), "authors": len(author_names),
                     "rejected": len(rejects)}
    if link_stats:
        summary["links"] = link_stats
    with Warehouse(settings) as wh:
        wh.init()
        with wh.run("import-collection") as run:
            with wh.transaction():
                summary["upserts"] = {
                    "papers": _upsert(wh, "papers", paper_rows, ["paper_id"]),
                    "authors": _upsert(wh, "authors", {"author_id": list(author_names), "name": list(author_names.values())}, ["author_id"]),
                    "paper_authors": _replace_paper_authors(wh, paper_rows["paper_id"], pa_ids, pa_pos, pa_aid, pa_name),
                    "works": _upsert(wh, "works", work_rows, ["work_id"]),
                    "citations": _replace_citations(wh, nm, cit_rows),
                }
                if rejects:
                    wh.add_rejects("import-collection", rejects, run_id=run.run_id)
            run.count("in", len(papers) + len(rejects))
            run.count("out", len(papers))
            run.count("rejected", len(rejects))
            run.count("citations", len(edges))
            summary["run_id"] = run.run_id
    log.info("imported %s: %d papers, %d authors, %d citations, %d rejected", nm, len(papers), len(author_names),
             len(edges), len(rejects))
    return summary


def collection_author_id(collection: str, name: str) -> str:
    """Collections have no author ids: ``'<collection>:<author_key(name)>'`` (the arXiv name key,
    prefixed so a CACM 'Perlis, A. J.' never merges with an arXiv author row)."""
    from pipeline.sources.arxiv.records import author_key

    return f"{collection}:{author_key(name)}"


# -- writers ----------------------------------------------------------------------------------
def _arrow(cols: dict) -> "object":
    """The columns as an Arrow table (each a column of the warehouse table it is written to, sql/core)."""
    import pyarrow as pa

    return pa.table(cols)


def _upsert(wh, table: str, cols: dict, keys: list[str]) -> dict:
    st = wh.upsert(table, _arrow(cols), keys=keys)
    return {"inserted": st.inserted, "updated": st.updated, "unchanged": st.unchanged}


def _replace_paper_authors(wh, paper_ids, ids, pos, aids, names) -> dict:
    """The author list of each imported paper is replaced as a whole (an author may disappear)."""
    import pyarrow as pa

    new = _arrow({"paper_id": ids, "position": pos, "author_id": aids, "name": names})
    keys = ["paper_id", "position"]
    wh.con.register("_pa_ids", pa.table({"paper_id": paper_ids}))
    wh.con.register("_pa_new", new)
    try:
        stale = catalog_changes.returning(
            wh.con, "paper_authors",
            "DELETE FROM paper_authors t WHERE t.paper_id IN (SELECT paper_id FROM _pa_ids) "
            "AND NOT EXISTS (SELECT 1 FROM _pa_new n WHERE n.paper_id = t.paper_id AND n.position = t.position) "
            "RETURNING paper_id"
        )
    finally:
        wh.con.unregister("_pa_ids")
        wh.con.unregister("_pa_new")
    st = wh.upsert("paper_authors", new, keys=keys)
    return {"inserted": st.inserted, "updated": st.updated, "unchanged": st.unchanged, "deleted": int(stale or 0)}


def _replace_citations(wh, source: str, cols: dict) -> dict:
    """Citations of this collection: upsert the current edges, delete edges the file no longer has."""
    new = _arrow(cols)
    wh.con.register("_cit_new", new)
    try:
        deleted = catalog_changes.returning(
            wh.con, "citations",
            "DELETE FROM citations t WHERE t.source = ? AND NOT EXISTS (SELECT 1 FROM _cit_new n "
            "WHERE n.citing_work_id = t.citing_work_id AND n.cited_work_id = t.cited_work_id) RETURNING citing_work_id",
            [source]
        )
    finally:
        wh.con.unregister("_cit_new")
    st = wh.upsert("citations", new, keys=["citing_work_id", "cited_work_id"])
    return {"inserted": st.inserted, "updated": st.updated, "unchanged": st.unchanged, "deleted": int(deleted or 0)}
