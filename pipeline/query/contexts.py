"""Where a paper cites a work in its text (citation contexts): the sentences of its body that carry the in-text
marker of the reference-list entry that names the work, as Semantic Scholar shows under each citing paper.

A PDF's reference list gives each entry's marker: a number when the list is numbered (``[35] Ilya Sutskever ...``
or ``1. Ciresan, D.C., ...``: cited as ``[35]``, ``[12, 35]`` or ``[33–35]``), else its first author's surname and
year (cited as ``Sutskever et al. (2014)``, ``(Sutskever et al., 2014a)``, ``Kingma & Ba, 2015`` or ``Amari
(1998)``, or after the same authors' other years, ``(Radford et al., 2018; 2019)``: "et al." for three authors or
more, both surnames for two, the year's letter when the entry prints one; accents aside). The text is the paper's body as the chunks cover it (``body[char_start:char_end] == text``), cut
into sentences as :mod:`pipeline.query.excerpt` cuts a passage; only sentences of the body and the appendix count
(the reference list itself, front matter and acknowledgements do not). Pure functions:
:func:`pipeline.query.reading.references` and ``cited_by`` read the rows.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from pipeline.query.author_names import surname
from pipeline.query.excerpt import sentence_starts

CONTEXT_ROLES = frozenset({"body", "appendix"})
MAX_CONTEXTS = 3  # sentences kept per citing entry (the first ones in reading order)
MAX_CHARS = 400  # a longer sentence (a table read as text) is cut, " …" at the cut

_NUMBERED = re.compile(r"^\s*(?:\[(\d{1,4})\]|(\d{1,3})\.\s+(?=[A-Z]))")  # "[35] Ilya Sutskever, ...", "1. Ciresan, D.C., ..."
_BLANK_LINE = re.compile(r"\n[ \t]*\n\s*(?=[A-Z0-9])")  # before a capital: a page break inside a sentence is not one
_BRACKETS = re.compile(r"\[(\d{1,4}(?:\s*[,;–-]\s*\d{1,4})*)\]")  # "[35]", "[12, 35]", "[33–35]"


@dataclass
class Context:
    """One sentence of the citing paper that cites the work."""

    text: str
    page: int | None  # the PDF page of the passage it is in
    section: str | None  # that passage's section heading
    marker: list[int] | None = None  # [start, end) of the marker in ``text`` ("[35]", "Sutskever et al. (2014)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Entry:
    """What the reference list prints of one entry: its text, parsed authors and year."""

    raw: str
    authors: tuple[str, ...]
    year: int | None


def number_of(raw: str) -> int | None:
    """The entry's number in a numbered reference list (``[35] ...``), else None."""
    m = _NUMBERED.match(raw or "")
    return int(m.group(1) or m.group(2)) if m else None


def cited_numbers(sentence: str) -> set[int]:
    """The reference numbers a sentence cites in brackets, ranges spelt out (``[33–35]``: 33, 34, 35); a bracket
    holding a 0 is an interval, not a citation."""
    out: set[int] = set()
    for group in _BRACKETS.findall(sentence):
        numbers: set[int] = set()
        for part in re.split(r"\s*[,;]\s*", group):
            ends = [int(x) for x in re.split(r"\s*[–-]\s*", part) if x]
            if len(ends) == 2 and 0 <= ends[1] - ends[0] <= 50:
                numbers.update(range(ends[0], ends[1] + 1))
            else:
                numbers.update(ends)
        if 0 not in numbers:  # "[0, 1]" is an interval: reference lists count from 1
            out |= numbers
    return out


# accents as a PDF's text layer may give them apart from their letter ("H´enaff" for "Hénaff")
_LOOSE_ACCENTS = dict.fromkeys(map(ord, "\u00b4`\u00a8\u02dc\u02c6\u00b8\u02da\u02c7\u02d8\u02dd\u02d9"))


def fold(text: str) -> str:
    """``text`` with its accents left out, on their letters or printed apart (what markers are matched on)."""
    if text.isascii() and "`" not in text:
        return text
    return "".join(c for c in unicodedata.normalize("NFKD", text.translate(_LOOSE_ACCENTS)) if not unicodedata.combining(c))


@lru_cache(maxsize=8192)  # a search page's passages ask for the same papers' entries again
def author_year(entry: Entry) -> re.Pattern[str] | None:
    """The pattern of the entry's author-year marker (see the module doc), None without a surname or a year."""
    names = [a for a in entry.authors if a and a.strip()]
    if not names or not entry.year:
        return None
    first = re.escape(fold(surname(names[0])))
    letter = re.search(rf"\b{entry.year}([a-z])\b", entry.raw or "")
    year = rf"{entry.year}{letter.group(1) if letter else '[a-z]?'}"
    many = len(names) >= 3 or re.search(r"\bet\s+al\b", entry.raw or "")
    if many:
        who = rf"{first}\s+et\s+al\.?"
    elif len(names) == 2:
        who = rf"{first}\s+(?:and|&)\s+{re.escape(fold(surname(names[1])))}"
    else:
        who = first
    # the same authors' other years may come first: "(Radford et al., 2018; 2019)", "Cho et al. (2014a, 2014b)"
    before = r"(?:(?:19|20)\d\d[a-z]?\s*[,;]\s*)*"
    return re.compile(rf"(?<!\w){who}\s*,?\s*(?:\(\s*{before}{year}\)|\[\s*{before}{year}\]|{before}{year}(?!\w))")


Sentence = tuple[str, int | None, str | None]  # its text, the page and the section of the passage it is in


def sentences(body: str, spans: Sequence[tuple[int, int, str, int | None, str | None]]) -> list[Sentence]:
    """The sentences of ``body`` (ended by a full stop, or a blank line before a capital) that lie in a passage of
    :data:`CONTEXT_ROLES`, each with that passage's page and section; ``spans``: the passages as (char_start,
    char_end, role, page, section), in char_start order."""
    starts = [s[0] for s in spans]
    # a sentence also ends at a blank line before a capital: a heading ("3 Model Architecture") does not start the next
    cuts = sorted(set(sentence_starts(body)) | {m.end() for m in _BLANK_LINE.finditer(body)}) + [len(body)]
    out = []
    for a, b in zip(cuts, cuts[1:]):
        text = " ".join(body[a:b].split())
        i = bisect.bisect_right(starts, a) - 1
        if not text or i < 0 or a >= spans[i][1] or spans[i][2] not in CONTEXT_ROLES:
            continue
        out.append((text, spans[i][3], spans[i][4]))
    return out


def body_of(passages: Iterable[tuple[int, int, str]]) -> str:
    """The body text the passages (char_start, char_end, text) cover, blanks where none does."""
    parts: list[str] = []
    end = 0
    for start, stop, text in sorted(passages, key=lambda p: p[0]):
        if stop <= end:
            continue
        if start > end:
            parts.append(" " * (start - end))
            end = start
        parts.append(text[end - start:])
        end = stop
    return "".join(parts)


@dataclass
class CitingText:
    """A citing paper's sentences (:func:`sentences`), ready for many entries' markers: folded into one string (one
    sentence a line) for the author-year patterns, and the bracketed numbers each sentence cites."""

    sents: list[Sentence]
    folded: str
    starts: list[int]  # where each sentence starts in ``folded``
    numbered: dict[int, list[int]]  # reference number -> the sentences citing it, in order


def citing_text(sents: list[Sentence]) -> CitingText:
    """The sentences folded and their cited numbers indexed (see :class:`CitingText`)."""
    starts: list[int] = []
    lines: list[str] = []
    numbered: dict[int, list[int]] = {}
    at = 0
    for i, (text, _, _) in enumerate(sents):
        starts.append(at)
        line = fold(text)
        lines.append(line)
        at += len(line) + 1
        for n in cited_numbers(text):
            numbered.setdefault(n, []).append(i)
    return CitingText(sents, "\n".join(lines), starts, numbered)


def cited_at(text: CitingText, entry: Entry) -> list[tuple[int, tuple[int, int]]]:
    """Every sentence of ``text`` that cites ``entry``, in reading order, with its marker's span in it: by the entry's
    number when the list is numbered, else by its author-year marker (how many: how often the paper cites it)."""
    number = number_of(entry.raw)
    if number is not None:
        return [(i, next(m.span() for m in _BRACKETS.finditer(text.sents[i][0]) if number in cited_numbers(m.group())))
                for i in text.numbered.get(number, [])]
    pattern = author_year(entry)
    found: list[tuple[int, tuple[int, int]]] = []
    if pattern is None:
        return found
    for m in pattern.finditer(text.folded):
        i = bisect.bisect_right(text.starts, m.start()) - 1
        if not found or found[-1][0] != i:
            found.append((i, _unfolded_span(text.sents[i][0], pattern)))
    return found


def contexts(text: CitingText, entry: Entry, limit: int = MAX_CONTEXTS) -> list[Context]:
    """The first ``limit`` sentences of ``text`` that cite ``entry`` (:func:`cited_at`), each with where its marker
    is; a sentence longer than :data:`MAX_CHARS` cut around the marker."""
    return [as_context(text, i, span) for i, span in cited_at(text, entry)[:limit]]


def as_context(text: CitingText, i: int, span: tuple[int, int]) -> Context:
    """Sentence ``i`` of ``text`` as a :class:`Context`, its marker at ``span``."""
    sentence, page, section = text.sents[i]
    shown, marker = around(sentence, span)
    return Context(shown, page, section, list(marker))


def _unfolded_span(sentence: str, pattern: re.Pattern[str]) -> tuple[int, int]:
    """Where ``pattern`` (over folded text) matches in ``sentence`` itself: each folded character mapped back to the
    one it came from (folding drops accents and may split a ligature)."""
    folded, origin = _fold_map(sentence)
    m = pattern.search(folded)
    if m is None or not origin:
        return 0, 0
    return origin[m.start()], origin[m.end() - 1] + 1


def around(sentence: str, span: tuple[int, int], width: int = MAX_CHARS) -> tuple[str, tuple[int, int]]:
    """``sentence``, or about ``width`` characters of it around ``span`` cut between words, ``…`` where text is left
    out; and the span's place in what is shown."""
    if len(sentence) <= width:
        return sentence, span
    start = max(0, min(span[0] - width // 3, len(sentence) - width))
    if start:
        start = sentence.find(" ", start) + 1 or start
    end = start + width
    piece = sentence[start:end] if end >= len(sentence) else sentence[start:end].rsplit(" ", 1)[0]
    lead = "\u2026 " if start else ""
    shown = lead + piece + (" \u2026" if start + len(piece) < len(sentence) else "")
    at = span[0] - start + len(lead)
    return shown, (at, min(at + span[1] - span[0], len(shown)))


def markers_in(text: str, entries: Sequence[Entry]) -> list[tuple[int, int, list[int]]]:
    """The in-text citations of ``text`` (a passage of the paper whose reference list ``entries`` is) that name its
    entries: (start, end, the indexes of the entries it cites), in text order, none overlapping (the first kept):
    a bracket group by the numbers of a numbered list, an author-year marker by its entry's pattern."""
    found: list[tuple[int, int, list[int]]] = []
    numbers = {n: i for i, e in enumerate(entries) if (n := number_of(e.raw)) is not None}
    if numbers:
        for m in _BRACKETS.finditer(text):
            cited = [numbers[n] for n in sorted(cited_numbers(m.group())) if n in numbers]
            if cited:
                found.append((m.start(), m.end(), cited))
    folded, origin = _fold_map(text)
    for i, e in enumerate(entries):
        pattern = None if number_of(e.raw) is not None else author_year(e)
        for m in pattern.finditer(folded) if pattern is not None else ():
            found.append((origin[m.start()], origin[m.end() - 1] + 1, [i]))
    found.sort(key=lambda f: (f[0], -f[1]))
    kept: list[tuple[int, int, list[int]]] = []
    for start, end, cited in found:
        if not kept or start >= kept[-1][1]:
            kept.append((start, end, cited))
    return kept


def _fold_map(text: str) -> tuple[str, list[int]]:
    """``text`` folded (:func:`fold`), and for each folded character the index of the one in ``text`` it came from."""
    if fold(text) == text:  # most passages: nothing to fold
        return text, list(range(len(text)))
    pieces, origin = [], []
    for k, ch in enumerate(text):
        piece = ch if ch < "\x80" and ch != "`" else fold(ch)
        pieces.append(piece)
        origin.extend([k] * len(piece))
    return "".join(pieces), origin
