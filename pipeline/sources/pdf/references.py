"""Reference lists of scientific PDFs -> one string per reference -> records with fields.

Pure functions on laid-out blocks (``text.layout`` + ``text.assign_kinds``); no I/O.

- ``reference_blocks(laid, doc=None)`` picks the blocks of the reference section (after a heading
  named References/Bibliography, before the next heading, e.g. an appendix), with repairs of the
  layout's body-text decisions (see there). Kept here, small and replaceable, until text.py marks
  blocks with an explicit role. ``extract_references(laid, doc)`` runs the three steps.
- ``split_references(blocks)`` cuts those blocks into ``RefString`` s. MuPDF puts several
  references in one block, or one reference over several blocks, columns and pages, so the cut is
  made on visual lines (a block's Lines on one baseline merged), per page and column:
  numbered lists ("[1]", "1.", "1 ") start a reference at the next expected number; author-year
  lists start one at the column's left margin, continuation lines being indented (hanging
  indent). A list without indentation falls back to "previous line ends with a period, this one
  starts with a capitalised surname and a comma".
- ``parse_reference(text)`` -> ``Reference``: identifiers by regex (arXiv in every spelling seen:
  ``arXiv:1409.0473``, ``CoRR abs/1409.0473``, ``arXiv preprint arXiv:1705.03122v2``, a bare
  ``1507.06228``; DOI; URL), the year (``(2017)``, ``. 2017.``, ``, 2017.``, ``et al.2015]``), then
  authors / title / venue by the three layouts of these papers: "Authors (Year). Title. Venue."
  (APA/natbib), "Authors. Year. Title. Venue." (ACL) and "Authors. Title. Venue, Year." or
  "Authors: Title. Venue (Year)" (numbered, LNCS, ICLR).

Why rules and not refextract. Measured with ``python -m bench.references`` on the 153
hand-labelled references of ``tests/fixtures/reference_labels.json`` (10 arXiv PDFs, 14-16 each;
the labels' raw strings are parsed, so split errors are counted apart)::

    field      rules P / R / F1         refextract P / R / F1
    title      1.000 / 1.000 / 1.000    - / 0.000 / 0.000   (it extracts no article titles)
    year       1.000 / 1.000 / 1.000    1.000 / 1.000 / 1.000
    arxiv_id   1.000 / 1.000 / 1.000    1.000 / 0.800 / 0.889  (misses "abs/...", bare ids)
    doi        1.000 / 1.000 / 1.000    1.000 / 1.000 / 1.000  (2 DOIs in the labels)
    url        1.000 / 1.000 / 1.000    1.000 / 0.714 / 0.833
    authors    1.000 / 1.000 / 1.000    0.977 / 0.512 / 0.672  (per-author surname)
    venue      1.000 / 1.000 / 1.000    0.800 / 0.056 / 0.105  (containment match)
    time       ~0.4 ms per reference    ~60-140 ms per reference + 1.9-4 s loading its knowledge bases

refextract is built for high-energy-physics references (INSPIRE): report numbers, journal
abbreviations, DOIs. On these CS references it gives no article title, finds authors for half of
them and is two orders of magnitude slower; no combination adds anything the rules miss, so it is
not a dependency (the benchmark runs it when it is installed).

Caveat on the 1.000s: the rules were written while reading these same 10 reference lists, so the
label scores are in-sample. Out of sample, a read-through of the 245 unlabelled references of the
10 papers found 5 with a wrong author list, title or year (a year before 1950, "Łukasz" twice,
"K.-i."): about 98% of unseen strings of these styles right. The rules were then fixed and 4 of
the 5 added to the labels; a test over all 393 references then caught one the "K.-i." fix broke
("Zhu." read as an initial), also fixed and labelled. Styles
the 10 papers lack (Vancouver/IEEE with quoted titles, physics references without titles) are not
measured. On 78 labelled references of 6 other PDFs (``--heldout``, BENCHMARKS.md) the rules as
written here scored title 0.852, doi 0.833, url 0.750, authors 0.956 out of sample; the general
fixes that followed (identifiers re-joined, "!"/"?" inside titles, marks and odd case in author lists,
the year in its usual place, books in a series, a column edge without its overrunning lines) were
informed by those misses.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pipeline.sources.arxiv.ids import parse_arxiv_id
from pipeline.sources.pdf.text import TEXT_FLAGS, Block, LaidOutPdf, Line, keeps_hyphen

_TWO_LETTERS = re.compile(r"[^\W\d_]{2}")
_CAPTION = re.compile(r"^\s*(Figure|FIGURE|Fig\.|FIG\.|Table|TABLE)\s*\d+\s*[:.]")

_REF_HEADING = re.compile(r"^(?:[\dIVX]+\.?\s*)?(references|bibliography|literature cited|works cited)\s*$", re.I)


@dataclass(slots=True)
class RefString:
    text: str  # one whole reference, lines joined, hyphenation repaired
    page: int  # 1-based page where it starts


@dataclass
class Reference:
    raw: str
    authors: list[str] = field(default_factory=list)
    title: str | None = None
    year: int | None = None
    venue: str | None = None
    arxiv_id: str | None = None  # normal form, no version: '1706.03762'
    doi: str | None = None  # lowercase, no resolver prefix
    url: str | None = None


# ------------------------------------------------------------------------------------------------
# the reference section


def _squash_heading(title: str) -> str:
    """'R EFERENCES' (small caps set as two runs) -> 'REFERENCES'."""
    t = " ".join(title.split())
    if re.fullmatch(r"(?:[\dIVX]+\.?\s+)?[A-Z](?:\s?[A-Z])+", t):
        t = re.sub(r"(?<=[A-Z])\s(?=[A-Z])", "", t)
    return t


def is_reference_heading(title: str | None) -> bool:
    return bool(title) and bool(_REF_HEADING.match(_squash_heading(title or "")))


def reference_blocks(laid: LaidOutPdf, doc: Any = None) -> list[Block]:
    """The blocks of the (first) reference section, in reading order, after ``assign_kinds``.

    The section is what follows a References/Bibliography heading up to the next heading, or up
    to a block in larger type (an unnumbered appendix title such as BERT's "Appendix for ...").
    Repairs of layout decisions that suit body text but not a reference list:

    - reference blocks at the foot of a column that the layout took for footnotes (same size as
      the references, moved after the next page's first block and so given that block's section)
      are put back; real footnotes (smaller type) and table/figure captions are left out;
    - with ``doc`` (the open ``pymupdf.Document`` of ``laid``), lines without two letters that the
      layout drops as figure noise ("1735–1780.", "(5786):504–507, 2006.", "2012.") are put back
      where they lie inside the reference columns: they carry page ranges and years.
    """
    blocks = list(laid.blocks())
    start = next((i for i, b in enumerate(blocks) if b.kind == "heading" and is_reference_heading(b.section)), None)
    if start is None:
        return []
    head = blocks[start]
    section = head.section
    body = [b for b in blocks[start + 1:] if b.section == section and b.kind not in ("heading", "caption")]
    if not body:
        return []
    sizes: Counter = Counter()
    for b in body:
        sizes[b.size] += len(b.text)
    ref_size = sizes.most_common(1)[0][0]
    for k, b in enumerate(body):
        if k and (b.size >= ref_size + 0.9 and len(b.text) < 200 or b.bold and ref_size < laid.body_size):
            body = body[:k]  # a larger (or bold) title after the list: the end of the section
            break
    body = [b for b in body if b.size >= ref_size - 0.9 and not _CAPTION.match(b.lines[0].text)]
    last_page = max(b.page for b in body)
    ids = {id(b) for b in body}
    for b in blocks[start + 1:]:
        if id(b) in ids or not b.footnote or b.page > last_page or abs(b.size - ref_size) > 0.6:
            continue
        if b.page == head.page and b.y0 < head.y0 and b.x0 < head.x1:
            continue  # above the heading in its column
        body.append(b)
    if doc is not None:
        body.extend(_dropped_lines(laid, doc, body, ref_size))
    widths = {p.number: p.width for p in laid.pages}

    def key(b: Block) -> tuple[int, int, float]:
        w = widths.get(b.page, 612.0)
        return (b.page, 1 if b.x0 >= 0.48 * w else 0, b.y0)

    return sorted(body, key=key)


def _no_word_blocks(laid: LaidOutPdf, doc: Any, pno: int) -> list[tuple[float, float, float, float, list[str]]]:
    """(box, line texts) of the page's text blocks without two letters: the ones the layout kept aside
    (``LaidOutPdf.no_word_blocks``: no second text extraction), else read again from ``doc``."""
    if laid.no_word_blocks or not laid.n_dropped.get("no_words"):
        return [(*b.bbox, [ln.text for ln in b.lines]) for b in laid.no_word_blocks.get(pno, [])]
    return [(x0, y0, x1, y1, text.splitlines())  # a LaidOutPdf made without them
            for x0, y0, x1, y1, text, _, kind in doc[pno - 1].get_text("blocks", flags=TEXT_FLAGS)
            if kind == 0 and text.strip() and not _TWO_LETTERS.search(text)]


def _dropped_lines(laid: LaidOutPdf, doc: Any, body: list[Block], ref_size: float) -> list[Block]:
    """Text blocks without two letters inside the reference columns (see ``reference_blocks``)."""
    out: list[Block] = []
    for pno in sorted({b.page for b in body}):
        page_blocks = [b for b in body if b.page == pno]
        kept = laid.pages[pno - 1].blocks if pno - 1 < len(laid.pages) else []
        height = laid.pages[pno - 1].height if pno - 1 < len(laid.pages) else 792.0
        for x0, y0, x1, y1, texts in _no_word_blocks(laid, doc, pno):
            if y0 < 0.08 * height or y1 > 0.92 * height:
                continue  # page numbers and other margin text
            col = [b for b in page_blocks if b.x0 - 2 <= x0 and x1 <= b.x1 + 2]
            if not col or not (min(b.y0 for b in col) < y0 < max(b.y1 for b in col) + 3 * ref_size):
                continue
            if any(min(x1, b.x1) > max(x0, b.x0) + 1 and min(y1, b.y1) > max(y0, b.y0) + 1 for b in kept):
                continue  # already there
            rows = [t for t in texts if t.strip()]
            h = (y1 - y0) / max(len(rows), 1)
            lines = [Line(t, (x0, y0 + i * h, x1, y0 + (i + 1) * h), ref_size, False, "") for i, t in enumerate(rows)]
            out.append(Block(page=pno, bbox=(x0, y0, x1, y1), lines=lines, size=ref_size, bold=False, font="",
                             words=laid.words))
    return out


# ------------------------------------------------------------------------------------------------
# splitting


@dataclass
class _VLine:
    text: str
    x0: float
    y0: float
    x1: float
    page: int
    size: float
    col: int = 0


_MARKER = re.compile(r"^\s*(?:\[(\d{1,3})\]|(\d{1,3})\.(?=\s)|(\d{1,3})(?=\s+\S))\s*")
_ACCENTS = {"´": "\u0301", "`": "\u0300", "¨": "\u0308", "˜": "\u0303", "ˆ": "\u0302", "¸": "\u0327", "ˇ": "\u030c"}
_SPACING_ACCENT = re.compile(r"([´¨˜ˆˇ¸])\s?([A-Za-zı])")


def fix_accents(text: str) -> str:
    """TeX's spacing accents as MuPDF extracts them ("S´ebastien", "Merri¨enboer") -> "Sébastien"."""
    if not any(c in text for c in _ACCENTS):
        return text
    return unicodedata.normalize("NFC", _SPACING_ACCENT.sub(lambda m: m.group(2).replace("ı", "i") + _ACCENTS[m.group(1)], text))


def _visual_lines(blocks: list[Block]) -> list[_VLine]:
    """Lines of the blocks in order, pieces of one baseline (justified text) merged."""
    out: list[_VLine] = []
    for b in blocks:
        cur: _VLine | None = None
        for ln in b.lines:
            x0, y0, x1, _ = ln.bbox
            if cur is not None and abs(y0 - cur.y0) < 0.5 * max(ln.size, 1.0) and x0 > cur.x0:
                cur.text = cur.text.rstrip() + " " + ln.text.strip()
                cur.x1 = max(cur.x1, x1)
                continue
            cur = _VLine(ln.text.strip(), x0, y0, x1, b.page, ln.size)
            out.append(cur)
    # columns: per page, left of the middle of the text on that page
    pages: dict[int, list[_VLine]] = {}
    for v in out:
        pages.setdefault(v.page, []).append(v)
    for vs in pages.values():
        left, right = min(v.x0 for v in vs), max(v.x1 for v in vs)
        mid = (left + right) / 2
        two = any(v.x1 < mid for v in vs) and any(v.x0 > mid for v in vs)
        if not two:
            # a few lines running past their column's right edge (a long URL) pushed the middle
            # right of the second column's margin: measure the edge without them
            ends = sorted(v.x1 for v in vs)
            edge = ends[int(0.9 * (len(ends) - 1))] + 10.0
            over = sum(1 for x in ends if x > edge)
            if 0 < over <= max(1, len(ends) // 20):
                mid = (left + max(x for x in ends if x <= edge)) / 2
                two = any(v.x1 < mid for v in vs) and any(v.x0 > mid for v in vs)
        for v in vs:
            v.col = 1 if two and v.x0 > mid else 0
    return [v for v in out if v.text]


def _thresholds(lines: list[_VLine]) -> dict[tuple[int, int], float | None]:
    """Per (page, column): x below which a line starts at the left margin (None: no indentation)."""
    groups: dict[tuple[int, int], list[float]] = {}
    for v in lines:
        groups.setdefault((v.page, v.col), []).append(v.x0)
    out: dict[tuple[int, int], float | None] = {}
    for key, xs in groups.items():
        left = min(xs)
        indented = Counter(round(x) for x in xs if left + 2.0 < x < left + 40.0)
        if indented:
            indent = indented.most_common(1)[0][0]
            out[key] = (left + indent) / 2
        else:
            out[key] = None
    return out


_URL_START = re.compile(r"(?:https?://|www\.)", re.I)
_DOI_START = re.compile(r"(?:^|[:/(\[])10\.(?:\d{4,9}(?:/|$)|$)")
_URL_CHARS = r"[\w\-~%./?=&#+:@!$*'()]"
_NOT_URL_WORDS = {"and", "in", "at", "see", "or", "the", "of", "to", "on", "last", "accessed", "retrieved", "visited"}


def _continues_identifier(cur: str, nxt: str) -> bool:
    """Whether ``nxt`` is the rest of a URL or DOI that a line break (and so a space) cut ``cur``
    short: "https://doi.org/10." + "1007/BF01789463", "https://s3-us-west-2." + "amazonaws.",
    "10.1017/" + "CBO9780511615825", "10.1016/0095-8956(85)" + "90092-9", "language_" + "understanding".
    Ordinary words after an identifier and its closing period are left apart."""
    is_url = bool(_URL_START.search(cur))
    is_doi = not is_url and bool(_DOI_START.search(cur))
    if not (is_url or is_doi) or not nxt or not re.fullmatch(_URL_CHARS + r"+[.,;]?", nxt):
        return False
    core = nxt.rstrip(".,;")
    if not core or core.lower() in _NOT_URL_WORDS:
        return False
    if cur.endswith(("/", "_", "-", "~", "=", "?", "&", "#", "%")) and cur[-2:] != "//":
        return core[0].isalnum()
    if cur.endswith(")") and is_doi:  # SICI-style DOIs: 10.1016/0095-8956(85)90092-9
        return "(" in cur and bool(re.fullmatch(r"\d[\d\-]*[\dX]", core))
    if not cur.endswith(".") or len(cur) < 2 or not cur[-2].isalnum():
        return False
    if core[0].isdigit():
        return "/" in core  # "https://doi.org/10." + "1007/...": not a year after the URL's closing period
    if not core[0].islower():
        return False
    if is_doi:
        return "/" in core or "." in core
    host = re.sub(r"^(?:https?://)?", "", cur.rstrip("."), flags=re.I)
    if "/" not in host:  # still in the host name: "s3-us-west-2." + "amazonaws." + "com/..."
        return "/" in core or "." in core or nxt.endswith(".")
    return "/" in core or bool(re.fullmatch(r"[a-z]{2,5}", core))  # a path piece or a file extension ("pdf")


def rejoin_identifiers(text: str) -> str:
    """Spaces that line joins left inside URLs and DOIs removed (see ``_continues_identifier``)."""
    toks = text.split(" ")
    if len(toks) < 2 or not (_URL_START.search(text) or "10." in text):
        return text
    out = [toks[0]]
    for t in toks[1:]:
        if _continues_identifier(out[-1], t):
            out[-1] += t
        else:
            out.append(t)
    return " ".join(out)


def join_reference_lines(lines: list[str], words: frozenset[str] = frozenset()) -> str:
    """Join the lines of one reference: hyphenated words re-joined ("Lan-" + "guage"), hyphenated
    names kept ("Warde-" + "Farley"), compounds the paper prints hyphenated kept ("self-" + "attention";
    ``words``: the document's, :func:`pipeline.sources.pdf.text.keeps_hyphen`), URLs and DOIs broken over lines (or
    spaced inside a line) re-joined, spacing accents fixed."""
    out = ""
    for raw in lines:
        t = " ".join(raw.split())
        if not t:
            continue
        if not out:
            out = t
            continue
        out = rejoin_identifiers(out)  # "https://s3-us-west-2. amazonaws. com/x/language-": the URL is the last token
        last = out.rsplit(" ", 1)[-1]
        if re.match(r"https?://", last) and not last.endswith((".", ",")) or last.endswith(("://",)):
            out += t
        elif _continues_identifier(last, t.split(" ", 1)[0]):
            out += t
        elif out.endswith("-") and len(out) > 1 and out[-2].isalpha() and t[0].islower():
            out = out + t if keeps_hyphen(out[:-1], t, words) else out[:-1] + t  # "self-" + "attention": the paper's words
        elif out.endswith("-") and len(out) > 1 and out[-2].isalpha() and t[0].isupper():
            out += t
        else:
            out += " " + t
    return fix_accents(rejoin_identifiers(out))


def split_references(blocks: list[Block]) -> list[RefString]:
    """One ``RefString`` per reference of the reference-section blocks (in reading order)."""
    lines = _visual_lines(blocks)
    if not lines:
        return []
    first = _MARKER.match(lines[0].text)
    numbered = first is not None and (first.group(1) or first.group(2) or first.group(3)) == "1"
    thresholds = _thresholds(lines)
    any_indent = any(t is not None for t in thresholds.values())
    refs: list[tuple[int, list[str]]] = []
    expected = 1
    for v in lines:
        th = thresholds[(v.page, v.col)]
        at_margin = th is None or v.x0 < th
        if numbered:
            m = _MARKER.match(v.text)
            n = int(m.group(1) or m.group(2) or m.group(3)) if m else None
            start = n == expected and (at_margin or not refs)
            if start and refs and m is not None and m.group(3) and th is None:
                # a bare "2 " at the margin of an unindented list: only after a finished line
                start = bool(re.search(r"[.?!)\]]\s*$", refs[-1][1][-1]))
            if start:
                expected += 1
        elif any_indent and th is not None:
            start = at_margin
        else:
            prev = refs[-1][1][-1] if refs else ""
            start = not refs or (prev.rstrip().endswith(".") and bool(re.match(r"[A-Z][\w'’\-]+,", v.text)))
        if start or not refs:
            refs.append((v.page, [v.text]))
        else:
            refs[-1][1].append(v.text)
    words = blocks[0].words if blocks else frozenset()
    return [RefString(join_reference_lines(ls, words), page) for page, ls in refs]


# ------------------------------------------------------------------------------------------------
# parsing

_LEAD = re.compile(r"^\s*(?:WWW:\s*|\[\d{1,3}\]|\d{1,3}\.\s|\d{1,3}\s(?=[A-Z])|\[[^\]]{2,60}?\d{4}[a-z]?\])\s*")
_LABEL_YEAR = re.compile(r"^\s*\[[^\]]*?((?:19|20)\d{2})[a-z]?\]")
_DOI = re.compile(r"(?:https?://(?:dx\.)?doi\.org/|doi:\s*)?(10\.\d{4,9}/[^\s\"<>]+)", re.I)
_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"]+", re.I)
_ARXIV = re.compile(
    r"(?:arXiv\s*:?\s*|arxiv\.org/(?:abs|pdf)/|(?:CoRR\s*,?\s*)?abs/)\s*"
    r"((?:\d{4}\.\d{4,5}|[a-z\-]+(?:\.[A-Z]{2})?/\d{7})(?:v\d+)?)",
    re.I,
)
_BARE_ARXIV = re.compile(r"(?<![\d.\-/:])((?:0[7-9]|1\d|2\d)(?:0[1-9]|1[0-2])\.\d{4,5})(?:v\d+)?(?![\d.]*\d)")
_YEAR = r"(?:19[5-9]\d|20[0-4]\d)"
_OLD_YEAR = r"(?:1[89]\d\d|20[0-4]\d)"  # in "(1945)" or ". 1945." a number is a year; bare, only from 1950 on
_PAREN_YEAR = re.compile(r"\((" + _OLD_YEAR + r")[a-z]?\)")
_ACL_YEAR = re.compile(r"\.\s+(" + _OLD_YEAR + r")[a-z]?\.\s")
_PLACED_YEAR = re.compile(r"(?:^|[.,]\s)\s*(" + _YEAR + r")[a-z]?(?=\.(?:\s|$)|\s*$)")  # its own sentence, or a list's end
_ANY_YEAR = re.compile(r"(?<![\w/.:\-])(" + _YEAR + r")[a-z]?(?![\w/\-]|\.\d)")
_INITIAL = re.compile(r"^(?:[A-ZÀ-ÖØ-ÞŁ][a-z]?\.?-?)+(?:(?<=-)[a-z]\.)?$")  # "D.", "G.E", "J.-R", "Ch.", "K.-i."
_NAME_SEP = re.compile(r",\s*(?:and\s+|&\s*)?|\s+and\s+|\s*&\s*")
_PARTICLES = {"van", "von", "de", "der", "den", "da", "dos", "di", "du", "le", "la", "del", "della", "des", "y", "jing", "al", "bin", "ten", "st"}


_NAME_MARKS = re.compile(r"[*†‡§¶`´¨˜ˆˇ¸]")  # affiliation marks ("Savva*"), TeX accents set apart ("Konečn`y")


@lru_cache(maxsize=1 << 16)  # the same tokens recur in every author list (a third of the parse time)
def _is_name_token(tok: str) -> bool:
    tok = _NAME_MARKS.sub("", tok)
    t = tok.strip(",.;")
    if not t:
        return False
    if t.lower() in _PARTICLES:
        return True
    if _INITIAL.match(t + ".") or re.fullmatch(r"(?:[A-Z]\.){1,3}(?:-[A-Z]\.)?", tok.rstrip(",;")):
        return True
    if not (t[0].isupper() and re.fullmatch(r"[^\W\d_][\w'’\-]*", t)):
        return False
    return not t.isupper() or len(t) <= 3


@lru_cache(maxsize=1 << 16)
def _name_like(piece: str, max_tokens: int = 5) -> bool:
    toks = piece.split()
    return 0 < len(toks) <= max_tokens and all(_is_name_token(t) for t in toks)


def _loose_name(piece: str) -> bool:
    """A name piece in odd case ("brian ichter", "jia Li"): 1-3 words of letters."""
    toks = _NAME_MARKS.sub("", piece).split()
    return 0 < len(toks) <= 3 and all(re.fullmatch(r"[^\W\d_][\w'’\-]*\.?", t) for t in toks)


def _names_list(pieces: list[str]) -> bool:
    """Whether comma/and-separated pieces are a list of names: all name-like, or (a list of three or
    more) at most a quarter of them names in odd case ("brian ichter") among proper ones."""
    strict = sum(1 for p in pieces if _name_like(p))
    if strict == len(pieces):
        return bool(pieces)
    return len(pieces) >= 3 and strict >= 2 and 4 * strict >= 3 * len(pieces) and all(_name_like(p) or _loose_name(p) for p in pieces)


def _author_end(text: str) -> int | None:
    """Index where the author list ends (at the '.' or ':' closing it) in 'Authors. Title. ...'."""
    for m in re.finditer(r"[.:](?=\s+\S)", text):
        i = m.start()
        left = text[:i]
        tail = left.rsplit(None, 1)[-1] if left.split() else ""
        if m.group(0) == ":" and not (_INITIAL.match(tail + ".") or tail.endswith(".")):
            continue  # a colon inside a name list only closes it after an initial (LNCS "Sun, J.: Title")
        if tail.lower() == "al" or tail.lower().endswith("et al"):
            return i
        pieces = [p for p in _NAME_SEP.split(left) if p.strip() and p.strip() not in ("(...)", "and")]
        if not _names_list(pieces):
            return None if m.group(0) == "." and not _INITIAL.match(tail + ".") else None
        if m.group(0) == ":":
            return i
        if _INITIAL.match(tail + ".") and len(tail) <= 4:
            # "Y. Bengio, ...": an initial's period; the list goes on when a name piece follows
            rest = re.sub(r"^(?:and|&)\s+", "", text[i + 1:].lstrip())
            nxt = re.match(r"([^,.:;]+?)(,|\s+and\s|\.|$)", rest)
            if nxt and (_name_like(nxt.group(1), 3) and (nxt.group(2) != "." or len(nxt.group(1).split()) <= 2)
                        or nxt.group(2) == "," and _loose_name(nxt.group(1))):
                continue
        return i
    return None


_VENUE_WORDS = {"arxiv", "in", "pages", "pp", "volume", "vol", "preprint", "doi", "url", "http", "https", "technical", "proceedings"}


def _sentence_end(text: str) -> int:
    """End of the first sentence (the title): '. ', '? ', '! ' not after an initial/abbreviation,
    ' (2014)', ', 2008.' at the very end, or ', http...' (LNCS web references)."""
    pat = r"([.?!])(?=\s+\S|\s*$)|\s\((?=" + _YEAR + r"[a-z]?\))|,\s*(?=" + _YEAR + r"[a-z]?\.?\s*$)|,\s*(?=https?://)"
    for m in re.finditer(pat, text):
        i = m.start()
        if not m.group(1):
            return i
        tail = text[:i].rsplit(None, 1)[-1] if text[:i].split() else ""
        if re.fullmatch(r"(?:[A-Z]|vs|e\.g|i\.e|al|Proc|Vol|No|pp|Jr|St)", tail):
            continue
        if m.group(1) in "?!":
            nxt = re.match(r"\s*([^\s,.:;]+)", text[i + 1:])
            if nxt and nxt.group(1).isalpha() and nxt.group(1).islower() and nxt.group(1) not in _VENUE_WORDS:
                continue  # "Meetup! a corpus of ...": a lower-case word goes on with the sentence
            return i + 1
        return i
    return len(text)


def split_authors(text: str) -> list[str]:
    """'Bahdanau, D., Cho, K., and Bengio, Y.' / 'D. Bahdanau, K. Cho, and Y. Bengio' -> names,
    given names first ('D. Bahdanau'); 'et al.' and elisions dropped."""
    text = re.sub(r"(?<=\w)[*†‡]+", "", text)  # affiliation marks: "Savva*"
    s = " ".join(text.replace(" & ", " and ").split()).strip(" .,;:")
    s = re.sub(r",?\s*\bet al\.?$", "", s).strip(" ,")
    s = re.sub(r",?\s+and\s+", ", ", s)
    pieces = [p.strip() for p in s.split(",") if p.strip() and p.strip() not in ("(...)", "...", "others", "et al.")]
    if not pieces:
        return []
    last_and = re.split(r"\s(?:and|&)\s", " ".join(text.split()))
    if len(last_and) > 1:  # "..., and Bengio, Y." (inverted) vs "..., and Y. Bengio"
        inverted = "," in last_and[-1].strip(" .,")
    else:
        inverted = len(pieces) >= 2 and (
            (len(pieces[0].split()) == 1 and not _INITIAL.match(pieces[0] + "."))
            or all(_INITIAL.match(t + ("" if t.endswith(".") else ".")) for t in pieces[1].replace(".", ". ").split())
        )
    if not inverted:
        return pieces
    names = []
    for k in range(0, len(pieces) - 1, 2):
        given = pieces[k + 1]
        if re.fullmatch(r"[A-Z](?:\.-?[A-Z])*", given):
            given += "."  # the list's closing period was cut off with the list: "Bengio, Y"
        names.append(f"{given} {pieces[k]}")
    if len(pieces) % 2:
        names.append(pieces[-1])
    return names


_IN_SERIES = re.compile(r"(.+?),\s*(?:volume|vol\.)\s*\d+\s+of\s+(\S.*)$")


def _clean_title(t: str) -> str | None:
    t = t.strip().strip(" ,;:").strip()
    t = t.strip("\"“”")
    t = re.sub(r"[.,]$", "", t).strip()
    t = re.sub(r",\s*(?:volume|vol\.)\s*\d+$", "", t)
    return t or None


def _clean_venue(v: str) -> str | None:
    v = re.sub(r"^(?:In:?\s+)", "", v.strip())
    names_arxiv = bool(re.search(r"\barxiv\b", v, re.I))
    v = _URL.sub(" ", v)
    v = re.sub(r"\bCoRR\b\s*,?\s*abs/\S+", "CoRR", v)
    v = _ARXIV.sub(" ", v)
    v = _BARE_ARXIV.sub(" ", v)
    v = re.sub(r"\[[a-z\-]+(?:\.[A-Za-z\-]+)?\]", " ", v)  # arXiv category: [cs.CV]
    v = _DOI.sub(" ", v)
    v = _URL.sub(" ", v)
    v = re.sub(r"\b(?:doi|URL|ISSN\s*[\d\-X]+)\b:?", " ", v)
    v = re.sub(r"\(" + _YEAR + r"[a-z]?\)", " ", v)
    v = re.sub(r",?\s*(?:pp?\.|pages)\s*[\d–\-]+.*$", "", v)
    v = re.sub(r",?\s*" + _YEAR + r"[a-z]?\.?\s*$", "", v.strip())
    v = re.sub(r"\s+", " ", v).strip(" ,.;:")
    if not v and names_arxiv:
        return "arXiv"
    return v or None


def parse_reference(text: str) -> Reference:
    """Fields of one reference string (see the module docstring for the layouts handled)."""
    raw = " ".join(text.split())
    ref = Reference(raw=raw)
    text = rejoin_identifiers(raw)
    label_year = _LABEL_YEAR.match(raw)
    body = _LEAD.sub("", _LEAD.sub("", text, count=1), count=1)

    m = _DOI.search(body)
    if m:
        ref.doi = m.group(1).rstrip(".,;)").lower()
    for m in _URL.finditer(body):
        url = m.group(0).rstrip(".,;)")
        ref.url = url if url.lower().startswith("http") else "http://" + url
        break
    m = _ARXIV.search(body)
    if m is None and ref.doi is None:
        m = _BARE_ARXIV.search(_URL.sub(" ", body))
    if m is not None:
        try:
            ref.arxiv_id = parse_arxiv_id(m.group(1)).paper_id
        except ValueError:
            pass
    if ref.arxiv_id is None and ref.url and "arxiv.org/" in ref.url.lower():
        try:
            ref.arxiv_id = parse_arxiv_id(ref.url).paper_id
        except ValueError:
            pass

    scrub = _ARXIV.sub(" ", _DOI.sub(" ", _URL.sub(" ", body)))  # no years inside identifiers
    paren = _PAREN_YEAR.search(scrub)
    acl = _ACL_YEAR.search(scrub)
    authors_part = title_part = None
    rest = ""
    if paren and _name_like_list(body[: body.find(paren.group(0))] if paren.group(0) in body else ""):
        i = body.find(paren.group(0))
        ref.year = int(paren.group(1))
        authors_part = body[:i]
        after = body[i + len(paren.group(0)):].lstrip(" .,:")
        e = _sentence_end(after)
        title_part, rest = after[:e], after[e:].lstrip(" .")
    elif acl and _name_like_list(body[: body.find(acl.group(0))] if acl.group(0) in body else ""):
        i = body.find(acl.group(0))
        ref.year = int(acl.group(1))
        authors_part = body[:i]
        after = body[i + len(acl.group(0)):]
        e = _sentence_end(after)
        title_part, rest = after[:e], after[e:].lstrip(" .")
    else:
        end = _author_end(body)
        if end is not None:
            authors_part = body[:end]
            after = body[end + 1:].lstrip()
            e = _sentence_end(after)
            title_part, rest = after[:e], after[e:].lstrip(" .")
        else:
            e = _sentence_end(body)
            title_part, rest = body[:e], body[e:].lstrip(" .")
        years = [int(y) for y in _ANY_YEAR.findall(scrub)]
        placed = [int(y) for y in _PLACED_YEAR.findall(scrub)]
        if paren:
            ref.year = int(paren.group(1))
        elif placed:  # ". 1986." / ", 1986." over a year inside a venue "(Singer Island, Fla., 1984)"
            ref.year = placed[-1]
        elif years:
            ref.year = years[-1]
    if ref.year is None and label_year:
        ref.year = int(label_year.group(1))
    if authors_part:
        ref.authors = split_authors(authors_part)
    series = _IN_SERIES.match(title_part or "")
    if series:  # BibTeX's book in a series: "Title, volume 92 of Series Name. Publisher, 1997."
        title_part, rest = series.group(1), series.group(2)
    if title_part:
        ref.title = _clean_title(title_part)
    if rest:
        ref.venue = _clean_venue(rest)
    return ref


def _name_like_list(text: str) -> bool:
    pieces = [p for p in _NAME_SEP.split(text.strip(" .,")) if p.strip()]
    pieces = [p for p in pieces if p.strip() not in ("(...)", "et al.", "et al")]
    return _names_list([p.replace("et al.", "").strip() or "X" for p in pieces])


def reference_entries(laid: LaidOutPdf, doc: Any = None) -> list[RefString]:
    """The bibliography's entries, and the blocks' roles made to agree with them: the blocks of the list
    (including entries the layout moved as footnotes) get role 'references', and blocks after the list
    that its section still held get 'appendix' (a larger unnumbered appendix title and what follows it), or
    'body' for a footnote the layout carried past the list."""
    blocks = reference_blocks(laid, doc)
    ours = {id(b) for b in blocks}
    for b in blocks:
        b.role = "references"
    order = list(laid.blocks())
    last = max((i for i, b in enumerate(order) if id(b) in ours), default=-1)
    if last >= 0:
        for b in order[last + 1:]:
            if b.role == "references":
                b.role = "body" if b.footnote else "appendix"  # a footnote carried past the list is body text
    return split_references(blocks)


def extract_references(laid: LaidOutPdf, doc: Any = None) -> list[Reference]:
    """The parsed reference list of a laid-out PDF (``assign_kinds`` already run)."""
    return [parse_reference(r.text) for r in split_references(reference_blocks(laid, doc))]
