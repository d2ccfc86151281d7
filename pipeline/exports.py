"""Reference-manager exports: BibTeX, RIS and CSL-JSON.

Pure functions, no I/O: :func:`render` turns :class:`BibRecord` values (built from a snapshot by
:func:`pipeline.query.records.bib_records`) into the text a reference manager imports (Zotero,
JabRef, Mendeley, EndNote, citeproc). Each format round-trips through a real parser in the tests
(bibtexparser, rispy, and citeproc-py, a CSL processor, for CSL-JSON).

Mapping (a paper with a journal reference or venue is a journal article, an arXiv paper without one a
preprint, anything else a generic/misc record):

    field         BibTeX                      RIS            CSL-JSON
    id            citation key (+ note)       ID             id (+ citation-key)
    title         title                       TI             title
    authors       author ("Last, First and")  AU (one each)  author [{family, given} | {literal}]
    year / date   year, month                 PY, DA         issued.date-parts
    doi           doi                         DO             DOI
    arXiv id      eprint, archivePrefix,      N1 arXiv:ID    number, publisher "arXiv"
                  primaryClass
    url           url                         UR             URL
    journal       journal                     JO             container-title
    abstract      abstract                    AB             abstract
    categories    keywords                    KW (one each)  keyword (comma-separated)
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field


FORMATS: dict[str, tuple[str, str]] = {  # format -> (media type, file extension)
    "bibtex": ("application/x-bibtex; charset=utf-8", "bib"),
    "ris": ("application/x-research-info-systems; charset=utf-8", "ris"),
    "csl-json": ("application/vnd.citationstyles.csl+json; charset=utf-8", "json"),
}


@dataclass
class BibRecord:
    """What an export needs to know about one paper (or a citation-graph work outside the corpus)."""

    id: str
    title: str | None = None
    authors: list[str] = field(default_factory=list)  # "Last, First" or "First Last"
    year: int | None = None
    published: str | None = None  # ISO date, YYYY-MM-DD or YYYY-MM (month known, day not)
    doi: str | None = None
    arxiv_id: str | None = None
    primary_category: str | None = None
    categories: list[str] = field(default_factory=list)
    journal: str | None = None  # journal reference or venue
    abstract: str | None = None
    url: str | None = None
    source: str | None = None  # 'arxiv', a collection name, 'local', 's2'


def check_format(fmt: str) -> str:
    """The format name, lower-cased; ValueError naming the choices otherwise."""
    f = (fmt or "").strip().lower()
    if f not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}: use {', '.join(FORMATS)}")
    return f


def render(fmt: str, records: list[BibRecord]) -> str:
    """``records`` as one document in ``fmt`` (bibtex | ris | csl-json)."""
    f = check_format(fmt)
    if f == "bibtex":
        return to_bibtex(records)
    if f == "ris":
        return to_ris(records)
    return to_csl_json(records)


def filename(fmt: str, stem: str = "paperkb") -> str:
    return f"{re.sub(r'[^A-Za-z0-9._-]+', '_', stem) or 'paperkb'}.{FORMATS[check_format(fmt)][1]}"


# ---- shared helpers -----------------------------------------------------------------------------
def _clean(text: str | None) -> str:
    return " ".join(str(text).split()) if text else ""


def split_name(name: str) -> tuple[str, str]:
    """("family", "given") from "Last, First" or "First Last" (a single word is the family name)."""
    n = _clean(name)
    if "," in n:
        family, given = n.split(",", 1)
        return family.strip(), given.strip()
    parts = n.split(" ")
    if len(parts) == 1:
        return n, ""
    return parts[-1], " ".join(parts[:-1])


def _ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()


def _kind(r: BibRecord) -> str:
    if r.journal:
        return "journal"
    if r.arxiv_id:
        return "preprint"
    return "other"


def _date_parts(r: BibRecord) -> list[int]:
    m = re.match(r"^(\d{4})-(\d{2})(?:-(\d{2}))?", r.published or "")
    if m:
        return [int(x) for x in m.groups() if x]
    return [int(r.year)] if r.year else []


def record_url(r: BibRecord) -> str | None:
    if r.url:
        return r.url
    if r.arxiv_id:
        return f"https://arxiv.org/abs/{r.arxiv_id}"
    if r.doi:
        return f"https://doi.org/{r.doi}"
    return None


def cite_keys(records: list[BibRecord]) -> list[str]:
    """One unique key per record: first author's family name + year + first title word (ascii),
    with a, b, c ... on collisions (``perlis1958report``, ``perlis1958reporta``)."""
    out: list[str] = []
    used: set[str] = set()
    for r in records:
        family = split_name(r.authors[0])[0] if r.authors else ""
        words = [w for w in re.findall(r"[A-Za-z0-9]+", _ascii(r.title or "")) if len(w) > 3] or ["paper"]
        base = re.sub(r"[^a-z0-9]", "", _ascii(family).lower()) + (str(r.year) if r.year else "") + words[0].lower()
        key, n = base, 0
        while key in used:
            n += 1
            key = base + _suffix(n)
        used.add(key)
        out.append(key)
    return out


def _suffix(n: int) -> str:
    s = ""
    while n > 0:
        n, rem = divmod(n - 1, 26)
        s = chr(ord("a") + rem) + s
    return s


# ---- BibTeX -------------------------------------------------------------------------------------
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


_ESCAPED_BRACE = re.compile(r"\\\\|\\([{}])")
_LBRACE, _RBRACE = "\ue000", "\ue001"  # stand-ins for escaped braces while the plain ones are balanced


def _bib_value(text: str) -> str:
    """A braced BibTeX value: LaTeX kept; bare & % # escaped; unmatched braces dropped.

    An escaped brace (``\\}``) is written ``\\textbraceright{}``: BibTeX counts every brace, escaped or
    not, while bibtexparser skips escaped ones, so a value holding one would parse with only one of them
    (paperkb's library reader turns the macros back into braces)."""
    v = _clean(text).replace(_LBRACE, "").replace(_RBRACE, "")
    v = _ESCAPED_BRACE.sub(lambda m: (_LBRACE if m.group(1) == "{" else _RBRACE) if m.group(1) else m.group(0), v)
    v = re.sub(r"(?<!\\)([&%#])", r"\\\1", v)
    chars, open_at = list(v), []
    for i, ch in enumerate(chars):
        if ch == "{":
            open_at.append(i)
        elif ch == "}":
            if open_at:
                open_at.pop()
            else:
                chars[i] = ""
    for i in open_at:
        chars[i] = ""
    v = "".join(chars)
    if v.endswith("\\"):
        v = v.rstrip("\\")
    return "{" + v.replace(_LBRACE, "\\textbraceleft{}").replace(_RBRACE, "\\textbraceright{}") + "}"


def to_bibtex(records: list[BibRecord]) -> str:
    entries = []
    for r, key in zip(records, cite_keys(records)):
        kind = _kind(r)
        typ = "article" if kind == "journal" else "misc"
        fields: list[tuple[str, str]] = []
        if r.title:
            fields.append(("title", r.title))
        if r.authors:
            fields.append(("author", " and ".join(
                ", ".join(p for p in split_name(a) if p).replace(" and ", " {and} ") for a in r.authors)))
        parts = _date_parts(r)
        if parts:
            fields.append(("year", str(parts[0])))
        if len(parts) > 1:
            fields.append(("month", _MONTHS[parts[1] - 1]))
        if r.journal:
            fields.append(("journal", r.journal))
        if r.doi:
            fields.append(("doi", r.doi))
        if r.arxiv_id:
            fields += [("eprint", r.arxiv_id), ("archivePrefix", "arXiv")]
            if r.primary_category:
                fields.append(("primaryClass", r.primary_category))
            if kind == "preprint":
                fields.append(("howpublished", f"arXiv:{r.arxiv_id}"))
        url = record_url(r)
        if url:
            fields.append(("url", url))
        if r.categories:
            fields.append(("keywords", ", ".join(r.categories)))
        if r.abstract:
            fields.append(("abstract", r.abstract))
        fields.append(("note", f"paperkb: {r.id}"))
        body = ",\n".join(f"  {name} = {_bib_value(value) if name != 'month' else value}" for name, value in fields)
        entries.append(f"@{typ}{{{key},\n{body}\n}}\n")
    return "\n".join(entries)


# ---- RIS ----------------------------------------------------------------------------------------
def _ris_line(tag: str, value) -> str:
    return f"{tag}  - {_clean(value)}"


def to_ris(records: list[BibRecord]) -> str:
    out: list[str] = []
    for r in records:
        kind = _kind(r)
        lines = [_ris_line("TY", {"journal": "JOUR", "preprint": "UNPB"}.get(kind, "GEN"))]
        lines.append(_ris_line("ID", r.id))
        if r.title:
            lines.append(_ris_line("TI", r.title))
        for a in r.authors:
            family, given = split_name(a)
            lines.append(_ris_line("AU", f"{family}, {given}" if given else family))
        parts = _date_parts(r)
        if parts:
            lines.append(_ris_line("PY", str(parts[0])))
        if len(parts) > 1:  # YYYY/MM/DD, the day left empty when unknown
            lines.append(_ris_line("DA", f"{parts[0]:04d}/{parts[1]:02d}/" + (f"{parts[2]:02d}" if len(parts) > 2 else "")))
        if r.journal:
            lines.append(_ris_line("JO", r.journal))
        if r.doi:
            lines.append(_ris_line("DO", r.doi))
        url = record_url(r)
        if url:
            lines.append(_ris_line("UR", url))
        for c in r.categories:
            lines.append(_ris_line("KW", c))
        if r.abstract:
            lines.append(_ris_line("AB", r.abstract))
        if r.arxiv_id:
            lines.append(_ris_line("N1", f"arXiv:{r.arxiv_id}"))
        lines.append("ER  - ")
        out.append("\n".join(lines))
    return "\n\n".join(out) + ("\n" if out else "")


# ---- CSL-JSON -----------------------------------------------------------------------------------
def csl_items(records: list[BibRecord]) -> list[dict]:
    items = []
    for r, key in zip(records, cite_keys(records)):
        kind = _kind(r)
        it: dict = {"id": r.id, "type": {"journal": "article-journal", "preprint": "article"}.get(kind, "document"),
                    "citation-key": key}
        if r.title:
            it["title"] = _clean(r.title)
        if r.authors:
            names = []
            for a in r.authors:
                family, given = split_name(a)
                names.append({"family": family, "given": given} if given else {"literal": family})
            it["author"] = names
        parts = _date_parts(r)
        if parts:
            it["issued"] = {"date-parts": [parts]}
        if r.journal:
            it["container-title"] = _clean(r.journal)
        if r.doi:
            it["DOI"] = r.doi
        if r.arxiv_id:
            it["number"] = f"arXiv:{r.arxiv_id}"
            if kind == "preprint":
                it["publisher"] = "arXiv"
        url = record_url(r)
        if url:
            it["URL"] = url
        if r.categories:
            it["keyword"] = ", ".join(r.categories)
        if r.abstract:
            it["abstract"] = _clean(r.abstract)
        if r.source:
            it["source"] = f"paperkb ({r.source})"
        items.append(it)
    return items


def to_csl_json(records: list[BibRecord]) -> str:
    return json.dumps(csl_items(records), ensure_ascii=False, indent=1) + "\n"
