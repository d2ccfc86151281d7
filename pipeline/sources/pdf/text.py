"""PDF bytes -> laid-out text blocks in reading order, with headings, abstract and body marked.

MuPDF gives text blocks (its JSON text page, see ``page_json``) with fonts and positions. On top
of that this module adds what a search index needs and PyMuPDF does not decide for us:

- validation: empty file, not a PDF, encrypted, truncated or corrupt -> ``PdfRejected(reason)``;
- reading order that survives two-column layouts: blocks are sorted per column inside horizontal
  bands separated by full-width blocks (titles, wide figures, wide captions);
- noise removal: rotated text (the arXiv side stamp ``arXiv:1706.03762v5 [cs.CL] ...`` and rotated
  figure labels), running headers/footers (margin text repeated on several pages) and page numbers;
- section headings (numbered or well-known names, set in bold or a larger size) and the abstract.

Pure layout logic; I/O is only ``pymupdf.open`` on bytes.
"""

from __future__ import annotations

import logging
import re
import string
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

import msgspec
import pymupdf
from pymupdf import mupdf

from pipeline.sources.pdf.tounicode import repair_tounicode

log = logging.getLogger(__name__)

# Text flags: no image blocks (images and vector paths also change how MuPDF cuts text into
# blocks; the figure cue collects them in a separate run, figures.page_graphics) and ligatures
# expanded ("ﬁ" -> "fi") so search tokens match.
TEXT_FLAGS = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES & ~pymupdf.TEXT_PRESERVE_LIGATURES
# MuPDF's JSON dump writes coordinates and sizes as integers times this scale: 0.0001 pt precision.
_JSON_SCALE = 10000.0

_BOLD_FONT = re.compile(r"(Bold|Medi|Semi|Heavy|Black|BX)", re.I)
_PAGE_NUMBER = re.compile(r"^\W*(\d{1,4}|[ivxlcdm]{1,6})\W*$", re.I)
_ARXIV_STAMP = re.compile(r"^arXiv:\s*\S+\s+\[[^\]]+\]", re.I)
_NUMBERED_HEADING = re.compile(r"^(?:\d+(?:\.\d+)*\.?|[A-H](?:\.\d+)*\.?|[IVX]+\.)\s+[A-Z]")
_KNOWN_HEADINGS = re.compile(
    r"^(?:\d+(?:\.\d+)*\.?\s+)?(abstract|introduction|background|related work|conclusions?|discussion|"
    r"acknowledge?ments?|acknowlegements?|references|bibliography|appendix|appendices|"
    r"experiments?|results|methods?|limitations|future work)\s*$",
    re.I,
)
# The parts of a paper, as GROBID labels them: what each block (and chunk) is. Only the SEARCHABLE ones are
# search passages; references and front matter are stored (a paper's references are read from them) but
# never indexed, shown as a best passage or used as query feedback.
ROLES = ("front", "abstract", "body", "caption", "acknowledgements", "references", "appendix")
SEARCHABLE_ROLES = ("body", "acknowledgements", "appendix")
_REFERENCES_HEAD = re.compile(r"^(?:\d+\.?\s+|[A-Z]\.?\s+)?(references|bibliography|literature cited|works cited)\s*:?\s*$", re.I)
_ACK_HEAD = re.compile(r"acknowle?dge?ments?|acknowlegements?", re.I)
_APPENDIX_HEAD = re.compile(r"\b(appendix|appendices|supplementary material)\b", re.I)
_LETTERED_HEAD = re.compile(r"^[A-H](?:\.\d+)*\.?\s+\S")
# a run-in bibliography heading glued to the first entry: "References [1] Jimmy Lei Ba, ..." / "REFERENCES 1. A. B..."
_RUN_IN_REFERENCES = re.compile(r"^\s*(references|bibliography)\s*(\[\d+\]|1\.\s|[A-Z][^\s]*,)", re.I)
_ABSTRACT_HEAD = re.compile(r"^\s*abstract\s*[.:\u2014\u2013-]?\s*", re.I)
_WORD = re.compile(r"\w+")
_CAPTION_START = re.compile(r"^\s*(Figure|FIGURE|Fig\.|FIG\.|Table|TABLE)\s*\d")
_TWO_LETTERS = re.compile(r"[^\W\d_]{2}")
# a word as dehyphenation compares it: letters, with inner hyphens or apostrophes ("self-attention", "don't")
_LETTERS_WORD = re.compile(r"[^\W\d_]+(?:['-][^\W\d_]+)*")
# a footnote's mark glued to its first word by the superscript ("4To illustrate", "1https://...", "\u2020Work performed")
# -- not "3x3", "31st"
_NOTE_MARK = re.compile(r"^(\d{1,2}|[*\u2217\u2020\u2021\u00a7\u00b6\u21e4])(?=[A-Z][a-z]|https?://)")
# a footnote that notes the text: numbered ("1 https://...", "4 To illustrate"). The first page's other footnotes are
# about the authors and the venue ("∗Equal contribution", "†Work performed while at Google Brain", "∗CIFAR Senior Fellow",
# "31st Conference on Neural Information Processing Systems (NIPS 2017)"): front matter, not passages
_NUMBERED_NOTE = re.compile(r"^\d{1,2}(?:\s|[A-Z]|https?://)")
_TOKEN_EDGE = "".join(c for c in string.punctuation if c not in "-'") + "\u201c\u201d\u2018\u2019\u2013\u2014\u2026"


class PdfRejected(Exception):
    """The bytes are not a usable PDF. ``reason`` is a short code for the rejects table."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail

    def __reduce__(self):  # pickled as (reason, detail), not as its message (the PDF worker sends it back)
        return (type(self), (self.reason, self.detail))


@dataclass(slots=True)
class Line:
    text: str
    bbox: tuple[float, float, float, float]
    size: float
    bold: bool
    font: str


@dataclass
class Block:
    page: int  # 1-based
    bbox: tuple[float, float, float, float]
    lines: list[Line]
    size: float  # dominant font size of the block (character-weighted)
    bold: bool  # all text bold
    font: str  # dominant font
    kind: str = "body"  # body | heading | abstract | caption | front
    section: str | None = None
    role: str = "body"  # the part of the paper (ROLES): set by assign_kinds
    _text: str | None = field(default=None, repr=False)
    stats: tuple = field(default=(), repr=False)  # (chars per font size, chars per font name)
    footnote: bool = False
    words: frozenset[str] = field(default=frozenset(), repr=False)  # the document's (document_words): set by layout

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = join_lines([ln.text for ln in self.lines], self.words)
        return self._text

    @property
    def x0(self) -> float:
        return self.bbox[0]

    @property
    def y0(self) -> float:
        return self.bbox[1]

    @property
    def x1(self) -> float:
        return self.bbox[2]

    @property
    def y1(self) -> float:
        return self.bbox[3]


@dataclass
class PageLayout:
    number: int  # 1-based
    width: float
    height: float
    blocks: list[Block]  # reading order, noise removed


@dataclass
class LaidOutPdf:
    pages: list[PageLayout]
    body_size: float
    body_font: str
    n_dropped: dict[str, int] = field(default_factory=dict)  # what was removed as noise, by kind
    # blocks without two letters dropped as figure noise, by page: a reference list's continuation lines
    # ("1735-1780.", "(5786):504-507, 2006.") are such blocks, and the reference step puts them back
    no_word_blocks: dict[int, list[Block]] = field(default_factory=dict)
    words: frozenset[str] = frozenset()  # the document's words (document_words): how its line breaks are joined

    @property
    def n_pages(self) -> int:
        return len(self.pages)

    def blocks(self):
        for p in self.pages:
            yield from p.blocks


# ------------------------------------------------------------------------------------------------
# opening


def open_pdf(data: bytes) -> pymupdf.Document:
    """Open PDF bytes or raise ``PdfRejected`` with reason empty/not_pdf/encrypted/truncated/corrupt."""
    if not data:
        raise PdfRejected("empty", "0 bytes")
    head = bytes(data[:1024])
    if b"%PDF-" not in head:  # say what was expected, never what the file holds (it may be any file)
        raise PdfRejected("not_pdf", f"no %PDF- header in the first {len(head)} bytes ({len(data)} bytes in all)")
    # A complete PDF ends with %%EOF (possibly followed by whitespace or a few junk bytes).
    # MuPDF would silently "repair" a cut-off file and give us part of a paper: we reject it.
    if b"%%EOF" not in bytes(data[-2048:]):
        raise PdfRejected("truncated", f"no %%EOF marker at the end of {len(data)} bytes")
    try:
        doc = pymupdf.open(stream=bytes(data), filetype="pdf")
    except Exception as exc:  # noqa: BLE001 - MuPDF raises several types for broken files
        raise PdfRejected("corrupt", f"{type(exc).__name__}: {exc}") from exc
    if doc.needs_pass:
        doc.close()
        raise PdfRejected("encrypted", "password required")
    if doc.page_count == 0:
        doc.close()
        raise PdfRejected("corrupt", "no pages")
    try:
        repair_tounicode(doc)  # a font whose ToUnicode contradicts its glyph names is read by the names
    except Exception as exc:  # noqa: BLE001 - a repair that fails leaves the text as MuPDF reads it
        log.warning("PDF: fonts' ToUnicode maps left as they are: %s: %s", type(exc).__name__, exc)
    return doc


# ------------------------------------------------------------------------------------------------
# text helpers


def document_words(lines: Iterable[str]) -> frozenset[str]:
    """The lower-cased words of a document's ``lines`` that no line break cut (a line's last token, when it ends with a
    hyphen, is left out), each hyphenated word also as its parts: what :func:`join_lines` asks whether a word broken
    over two lines is one word or a compound."""
    kept = []
    for line in lines:
        line = line.rstrip()
        if line.endswith("-"):
            line = line[:max(line.rfind(" "), 0)]
        kept.append(line)
    # tokens with their punctuation stripped (a regex over the document's text cost 3x the split)
    words = {t.strip(_TOKEN_EDGE) for t in "\n".join(kept).lower().split()}
    for w in [w for w in words if "-" in w]:
        words.update(w.split("-"))
    words.discard("")
    return frozenset(words)


def keeps_hyphen(before: str, after: str, words: frozenset[str]) -> bool:
    """Whether a line ending in ``before`` + "-" and the next line starting ``after`` break a compound at its own
    hyphen ("short-" + "term", "end-to-" + "end", "state-" + "of-the-art") rather than one word
    ("transla-" + "tion"). The document decides (``words``, :func:`document_words`): a word it prints joined is
    joined, a compound it prints hyphenated keeps its hyphen, as does a break beside another hyphen; anything else
    is joined, as typesetters break words."""
    last = before[before.rfind(" ") + 1:]  # the token the break cut (not the whole paragraph so far)
    head = _LETTERS_WORD.findall(last)
    tail = _LETTERS_WORD.match(after)
    if not head or tail is None:
        return False
    stem, nxt = head[-1].rsplit("-", 1)[-1], tail.group(0)
    if (stem + nxt.split("-", 1)[0]).lower() in words:
        return False
    return "-" in last or "-" in nxt or f"{stem}-{nxt}".lower() in words


def join_lines(lines: list[str], words: frozenset[str] = frozenset()) -> str:
    """Join the lines of one paragraph: a space between lines, hyphenated word breaks re-joined ("tar-" + "get"),
    compounds broken at their hyphen kept whole ("short-" + "term"; ``words``: the document's, see
    :func:`keeps_hyphen`)."""
    out = ""
    for raw in lines:
        t = " ".join(raw.split())
        if not t:
            continue
        if not out:
            out = t
        elif out.endswith("-") and len(out) > 1 and out[-2].isalpha() and t[0].islower():
            out = out + t if keeps_hyphen(out[:-1], t, words) else out[:-1] + t  # "tar-" + "get" -> "target"
        else:
            out = out + " " + t
    return _GLUED_MARK.sub(_unmarked, out) if _MAY_GLUE.search(out) else out


# a footnote's mark set as a superscript after the sentence it notes, glued to its punctuation: "... to train.1",
# "(NSP).5 Despite" (30 in the bodies of the 10 arXiv test PDFs, and two that ended an abstract) -- before a capital or the end,
# after a lower-case word or a parenthesis; not "Table 1.2", "Sect.4 Then" (an abbreviation before a number), nor after a
# comma ("αt,1", a subscript in a figure)
_GLUED_MARK = re.compile(r"([A-Za-z]*)([a-z)])([.;:!?])\d{1,2}(?=\s+[A-Z(]|$)")
_MAY_GLUE = re.compile(r"[a-z)][.;:!?]\d")  # the cheap test first: most blocks hold none
_NUMBERED = frozenset({"fig", "figs", "eq", "eqs", "sec", "sect", "secs", "tab", "ch", "chap", "no", "nos", "vol", "ref",
                       "refs", "app", "thm", "def", "alg", "lem", "prop", "cor", "p", "pp", "art", "par"})


def _unmarked(m: re.Match) -> str:
    word = m.group(1) + m.group(2)
    return m.group(0) if word.lower() in _NUMBERED else word + m.group(3)


def _font_name(name: str) -> str:
    """Font name without the subset tag ("RCUMTF+NimbusRomNo9L-Medi" -> "NimbusRomNo9L-Medi"),
    as PyMuPDF reports it."""
    return name[7:] if len(name) > 7 and name[6] == "+" else name


def _size_key(size: float) -> float:
    return round(size * 2) / 2  # 9.9 / 10.0 / 10.1 are one size


# MuPDF's JSON text page (fz_print_stext_page_as_json), decoded straight into typed records.
# Coordinates and sizes are integers times _JSON_SCALE. Unused keys (wmode, family, style) are skipped.
class _JBox(msgspec.Struct):
    x: int
    y: int
    w: int
    h: int


class _JFont(msgspec.Struct):
    name: str
    weight: str
    size: int


class _JLine(msgspec.Struct):
    bbox: _JBox
    text: str = ""
    x: int = 0  # origin of the first character
    y: int = 0
    font: _JFont | None = None  # font of the first character (None: a line without characters)


class _JBlock(msgspec.Struct):
    type: str
    bbox: _JBox | None = None
    lines: list[_JLine] = []


class _JPage(msgspec.Struct):
    blocks: list[_JBlock]


_JSON_PAGE = msgspec.json.Decoder(_JPage)


def page_json(textpage: pymupdf.TextPage) -> _JPage:
    """MuPDF's own JSON dump of a text page: blocks, and per line its box, text, first-character
    origin and font (name, bold weight, size).

    Why not ``TextPage.extractDICT()``: it builds a dict per span with a dozen keys, which costs as
    much as the text extraction itself (1.8x bare ``get_text()`` with it; this dump decoded with
    msgspec adds about 0.15x). The blocks and lines are the same; a line carries the font of its
    first character (MuPDF's choice), where the dict had one entry per font run."""
    buf = mupdf.fz_new_buffer(16384)
    out = mupdf.FzOutput(buf)
    mupdf.fz_print_stext_page_as_json(out, textpage.this, _JSON_SCALE)
    out.fz_close_output()
    data = mupdf.fz_buffer_extract_copy(buf)
    try:
        return _JSON_PAGE.decode(data)
    except msgspec.DecodeError:  # a character MuPDF wrote as invalid UTF-8 (e.g. a lone surrogate)
        return _JSON_PAGE.decode(data.decode("utf-8", "replace").encode("utf-8"))


@lru_cache(maxsize=256)
def _json_size(size: int) -> float:
    """Size key of a JSON font size (an integer times ``_JSON_SCALE``)."""
    return _size_key(size / _JSON_SCALE)


@lru_cache(maxsize=512)
def _font_style(name: str, weight: str) -> tuple[str, bool]:
    """(font name as PyMuPDF reports it, bold) for a JSON font entry."""
    font = _font_name(name)
    return font, weight == "bold" or bool(_BOLD_FONT.search(font))


def _make_block(pno: int, raw: _JBlock, n_dropped: Counter) -> Block | None:
    """One MuPDF JSON text block -> Block (rotated lines dropped). Kept lean: it runs for every line."""
    lines: list[Line] = []
    size_chars: dict[float, int] = {}
    font_chars: dict[str, int] = {}
    bold_chars = total_chars = 0
    k = 1.0 / _JSON_SCALE
    raw_lines = raw.lines
    for ln in raw_lines:
        f = ln.font
        if f is None:  # a line without characters
            if ln.text:  # pragma: no cover - MuPDF older than PyMuPDF 2.0's 1.28 wrote no fonts
                raise RuntimeError("MuPDF's JSON text page has no fonts: upgrade PyMuPDF")
            continue
        bb = ln.bbox
        size_raw = f.size
        # Rotated text (arXiv side stamp, rotated axis labels): the JSON has no writing direction,
        # but the first character's origin tells. Horizontal text starts at the box's left edge
        # (up to an accent set before it) below the top; text written upwards starts an ascender
        # inside the box, text written downwards a descender inside and at the top edge. On the 10
        # arXiv test PDFs this drops exactly the lines whose direction is not (1, 0).
        dx = ln.x - bb.x
        if dx > 0.3 * size_raw or (dx > 0.05 * size_raw and ln.y - bb.y < 0.3 * size_raw):
            n_dropped["rotated_lines"] += 1
            continue
        text = ln.text
        if not text or text.isspace():
            continue
        nchar = len(text)
        size = _json_size(size_raw)
        font, bold = _font_style(f.name, f.weight)
        size_chars[size] = size_chars.get(size, 0) + nchar
        font_chars[font] = font_chars.get(font, 0) + nchar
        if bold:
            bold_chars += nchar
        total_chars += nchar
        x0, y0 = bb.x * k, bb.y * k
        lines.append(Line(text, (x0, y0, x0 + bb.w * k, y0 + bb.h * k), size, bold, font))
    if not lines:
        return None
    if len(lines) == len(raw_lines) and raw.bbox is not None:
        box = raw.bbox
        x0, y0 = box.x * k, box.y * k
        bbox = (x0, y0, x0 + box.w * k, y0 + box.h * k)
    else:
        bbox = (min(ln.bbox[0] for ln in lines), min(ln.bbox[1] for ln in lines),
                max(ln.bbox[2] for ln in lines), max(ln.bbox[3] for ln in lines))
    block = Block(page=pno, bbox=bbox, lines=lines, size=max(size_chars, key=size_chars.__getitem__),
                  bold=bold_chars >= 0.9 * total_chars, font=max(font_chars, key=font_chars.__getitem__))
    block.stats = (size_chars, font_chars)
    return block


# ------------------------------------------------------------------------------------------------
# reading order


def order_blocks(blocks: list[Block]) -> list[Block]:
    """Reading order for one- and two-column pages.

    Blocks are walked top to bottom. A block that crosses the page's middle (title, one-column
    text, wide figure or caption) closes a band; inside a band, the left column is read before the
    right column, each top to bottom.
    """
    if len(blocks) < 2:
        return list(blocks)
    left = min(b.x0 for b in blocks)
    right = max(b.x1 for b in blocks)
    mid = (left + right) / 2
    tol = 0.02 * (right - left)
    out: list[Block] = []
    col_l: list[Block] = []
    col_r: list[Block] = []

    def flush() -> None:
        out.extend(sorted(col_l, key=lambda b: (b.y0, b.x0)))
        out.extend(sorted(col_r, key=lambda b: (b.y0, b.x0)))
        col_l.clear()
        col_r.clear()

    for b in sorted(blocks, key=lambda b: (b.y0, b.x0)):
        if b.x1 <= mid + tol:
            col_l.append(b)
        elif b.x0 >= mid - tol:
            col_r.append(b)
        else:
            flush()
            out.append(b)
    flush()
    return out


def _footnotes_last(blocks: list[Block], height: float, body_size: float) -> list[Block]:
    """Footnotes go after the page's text, so a paragraph running from one column (or page) into the
    next is not cut by them. A footnote: smaller than body text, in the lower 30% of the page, and
    with no body-size text below it in its column. Relative order is kept."""
    def is_note(b: Block) -> bool:
        if b.size > body_size - 0.9 or b.y0 < 0.7 * height or _CAPTION_START.match(b.lines[0].text):
            return False
        return not any(o.size >= body_size - 0.4 and o.y0 >= b.y1 and min(o.x1, b.x1) > max(o.x0, b.x0)
                       for o in blocks)

    flags = [is_note(b) for b in blocks]
    if not any(flags):
        return blocks
    for b, f in zip(blocks, flags):
        b.footnote = f
        marked = _NOTE_MARK.sub(r"\1 ", b.lines[0].text, count=1) if f else b.lines[0].text
        if marked != b.lines[0].text:  # "4To illustrate ..." (the mark set as a superscript) -> "4 To illustrate ..."
            b.lines[0].text, b._text = marked, None
    return [b for b, f in zip(blocks, flags) if not f] + [b for b, f in zip(blocks, flags) if f]


def _carry_footnotes(pages: list[PageLayout]) -> None:
    """When a page's text stops mid-sentence, its footnotes are read after the first block of the
    next page (the rest of that sentence), so the footnotes do not split the paragraph."""
    carry: list[Block] = []
    for page in pages:
        if carry:
            k = 1 if page.blocks else 0
            page.blocks[k:k] = carry
            carry = []
        notes = [b for b in page.blocks if b.footnote and b.page == page.number]
        text = [b for b in page.blocks if not b.footnote]
        if notes and text and not re.search(r"[.!?:)\]]\s*$", text[-1].text):
            page.blocks = [b for b in page.blocks if b not in notes]
            carry = notes
    if carry:
        pages[-1].blocks.extend(carry)


# ------------------------------------------------------------------------------------------------
# running headers / footers / page numbers


def _margin_key(text: str) -> str:
    return re.sub(r"\d+", "#", " ".join(text.lower().split()))


def _drop_margins(pages: list[tuple[int, float, list[Block]]], n_dropped: Counter,
                  no_words: dict[int, list[Block]] | None = None) -> None:
    """Remove page numbers and text repeated in the top/bottom margin of several pages (in place).

    Margin = top/bottom 10% of the page (13% for a bare page number: LNCS prints it inside the
    running head, lower than other styles). Text repeats when it is equal after digits are masked
    ("Published as a conference paper at ICLR 2015", "2 O. Ronneberger et al.")."""
    band, number_band = 0.10, 0.13

    def in_band(b: Block, height: float, frac: float) -> bool:
        return b.y1 < frac * height or b.y0 > (1 - frac) * height

    seen: Counter = Counter()
    for _, height, blocks in pages:
        seen.update({_margin_key(b.text) for b in blocks if in_band(b, height, band)})
    repeat_min = 2 if len(pages) <= 4 else 3
    for i, (pno, height, blocks) in enumerate(pages):
        keep = []
        for b in blocks:
            text = b.text
            if in_band(b, height, number_band) and _PAGE_NUMBER.match(text):
                n_dropped["page_number"] += 1
            elif in_band(b, height, band) and seen[_margin_key(text)] >= repeat_min and len(text) < 200:
                n_dropped["running_header"] += 1
            elif _ARXIV_STAMP.match(text) and len(text) < 120:
                n_dropped["arxiv_stamp"] += 1
            elif not _TWO_LETTERS.search(text):
                n_dropped["no_words"] += 1  # axis ticks and other figure-internal numbers
                if no_words is not None:
                    no_words.setdefault(pno, []).append(b)
            else:
                keep.append(b)
        pages[i] = (pno, height, keep)


# ------------------------------------------------------------------------------------------------
# headings and abstract


def heading_title(block: Block, body_size: float, *, after_front: bool) -> str | None:
    """The heading text when ``block`` looks like a section heading, else None."""
    if len(block.lines) > 3:
        return None
    text = block.text.strip()
    if not text or len(text) > 100 or len(_WORD.findall(text)) > 14:
        return None
    styled = block.bold or block.size >= body_size + 0.9 or (text.isupper() and len(text) > 3)
    if not styled and len(block.lines) == 1 and _REFERENCES_HEAD.match(text):
        return text  # a bibliography heading set like body text is still one (a line of its own)
    if not styled:
        return None
    if _KNOWN_HEADINGS.match(text):
        return text
    if _NUMBERED_HEADING.match(text) and not text.rstrip().endswith((",", ";", "=")) and _looks_like_words(text):
        return text
    # unnumbered headings ("Attention Visualizations") only after the front matter, when clearly larger
    if after_front and block.bold and block.size >= body_size + 1.4 and _looks_like_words(text) and text[0].isupper():
        return text
    return None


def _looks_like_words(text: str) -> bool:
    letters = sum(c.isalpha() for c in text)
    return letters >= 3 and letters >= 0.6 * len(text.replace(" ", ""))


def layout(doc: pymupdf.Document) -> LaidOutPdf:
    """Lay out every page: blocks in reading order, noise removed (kinds: see ``assign_kinds``)."""
    n_dropped: Counter = Counter()
    raw_pages: list[tuple[int, float, list[Block]]] = []
    widths: dict[int, float] = {}
    sizes: dict[float, int] = {}  # characters per font size / font name, all pages
    fonts: dict[str, int] = {}
    for page in doc.pages():
        pno = page.number + 1
        rect = page.rect
        widths[pno] = rect.width
        blocks = []
        for raw in page_json(page.get_textpage(flags=TEXT_FLAGS)).blocks:
            if raw.type != "text":
                continue
            b = _make_block(pno, raw, n_dropped)
            if b is None:
                continue
            blocks.append(b)
            for key, n in b.stats[0].items():
                sizes[key] = sizes.get(key, 0) + n
            for key, n in b.stats[1].items():
                fonts[key] = fonts.get(key, 0) + n
        raw_pages.append((pno, rect.height, blocks))
    # the document's words, before any block's text is joined (headers and footers included: the paper's words too)
    words = document_words(ln.text for _, _, blocks in raw_pages for b in blocks for ln in b.lines)
    for _, _, blocks in raw_pages:
        for b in blocks:
            b.words = words
    no_words: dict[int, list[Block]] = {}
    _drop_margins(raw_pages, n_dropped, no_words)
    body_size = max(sizes, key=sizes.__getitem__) if sizes else 10.0  # first of equals, as Counter.most_common
    body_font = max(fonts, key=fonts.__getitem__) if fonts else ""
    pages = [PageLayout(number=pno, width=widths[pno], height=h,
                        blocks=_footnotes_last(order_blocks(blocks), h, body_size))
             for pno, h, blocks in raw_pages]
    _carry_footnotes(pages)
    return LaidOutPdf(pages=pages, body_size=body_size, body_font=body_font, n_dropped=dict(n_dropped),
                      no_word_blocks=no_words, words=words)


def assign_kinds(laid: LaidOutPdf) -> None:
    """Mark headings, the abstract and the front matter (title, authors: before the abstract or first
    heading) and give every other block its section. Caption blocks (marked earlier) are left alone."""
    pages, body_size = laid.pages, laid.body_size
    section: str | None = None
    in_abstract = False
    seen_heading = False
    for page in pages:
        for b in page.blocks:
            if b.kind == "caption":
                continue
            title = heading_title(b, body_size, after_front=seen_heading)
            if title is not None and _ABSTRACT_HEAD.fullmatch(title):
                b.kind, b.section = "abstract", "Abstract"  # the heading itself is not body text
                in_abstract, seen_heading, section = True, True, "Abstract"
                continue
            if title is not None:
                b.kind, b.section = "heading", title
                in_abstract, seen_heading, section = False, True, title
                continue
            if not seen_heading and b.lines[0].bold and _ABSTRACT_HEAD.match(b.lines[0].text) \
                    and len(_ABSTRACT_HEAD.sub("", b.text, count=1)) > 40:
                # run-in abstract (LNCS): "Abstract. There is large consent ..."
                b.kind, b.section = "abstract", "Abstract"
                in_abstract, seen_heading, section = True, True, "Abstract"
                continue
            if in_abstract:
                b.kind, b.section = "abstract", "Abstract"
            elif not seen_heading:
                b.kind, b.section = "front", None
            else:
                b.section = section
    assign_roles(laid)


def section_role(title: str, *, after_references: bool, in_appendix: bool) -> str:
    """The role of the section a heading opens (pure: the heading text and where we are)."""
    t = title.strip()
    if _REFERENCES_HEAD.match(t):
        return "references"
    if _ACK_HEAD.search(t):
        return "acknowledgements"
    if _APPENDIX_HEAD.search(t) or ((after_references or in_appendix) and _LETTERED_HEAD.match(t)):
        return "appendix"
    if after_references:  # any section after the bibliography is back matter ("Attention Visualizations")
        return "appendix"
    return "body"


def assign_roles(laid: LaidOutPdf) -> None:
    """Give every block its role (``ROLES``), from its kind and the heading of its section: front matter
    before the abstract / first heading (and the first page's footnotes but numbered ones), the abstract, captions,
    then per section body, acknowledgements, references (bibliography) or appendix (lettered sections, 'Appendix',
    anything after the references)."""
    role = "body"
    after_references = in_appendix = False
    for b in laid.blocks():
        if b.kind in ("front", "abstract", "caption"):
            b.role = b.kind
            continue
        if b.footnote and b.page == 1 and not _NUMBERED_NOTE.match(b.lines[0].text):
            b.role = "front"  # the first page's notes on its authors and venue, not the paper's text
            continue
        if b.kind == "heading":
            role = section_role(b.section or "", after_references=after_references, in_appendix=in_appendix)
        elif role != "references" and _RUN_IN_REFERENCES.match(b.lines[0].text) and not after_references:
            role = "references"  # an unstyled "References" glued to its first entry
        after_references = after_references or role == "references"
        in_appendix = in_appendix or role == "appendix"
        b.role = role


def abstract_text(blocks: list[Block]) -> str | None:
    parts: list[str] = []
    for b in blocks:
        if b.kind == "abstract":
            parts.append(_ABSTRACT_HEAD.sub("", b.text, count=1) if not parts else b.text)
    text = "\n\n".join(p for p in parts if p.strip())
    return text or None
