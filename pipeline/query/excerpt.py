"""What a search result shows of its best passage: the passage from the sentence that holds most of the query's terms.

A passage of a PDF is a token window over its section, overlapping the window before it, so it often starts inside
a sentence ("increasing dimensions (option A). So they have ...") and the words that made it match may sit near its
end, past what a result line shows. The excerpt starts at the sentence holding the most distinct query terms (as BM25
analyses them: stemmed, stop words out; the first one on a tie), or as many sentences before it as make
:data:`MIN_SHOWN` characters; when no sentence holds one, at the passage's start, or at its first whole sentence
when the passage starts inside one (and that leaves enough to show). ``… `` marks the text left out before it (the
whole passage too, when it starts inside a sentence); the
passage itself (``Result.passage``) stays whole for readers that quote it (``paperkb ask``, agents).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from pipeline.query.bm25 import Analyzer

# a sentence starts after ., ! or ? (and a closing quote or bracket), at a capital, a digit, or an opening quote or
# bracket ("... option A). So they"), unless the period ends one of _ABBREVIATIONS
_SENTENCE_START = re.compile(r"(?<=[.!?])[\"'\u201d)\]]*\s+(?=[A-Z0-9\"'\u201c(\[])")
# a period that ends an abbreviation, not a sentence ("Dyer et al. (2016)", "see Fig. 3", "e.g. BERT")
_ABBREVIATIONS = frozenset({"al.", "e.g.", "i.e.", "cf.", "vs.", "fig.", "figs.", "eq.", "eqs.", "sec.", "tab.",
                            "no.", "resp.", "approx.", "et.", "ref.", "refs.", "ch.", "vol.", "pp.", "p."})
ELLIPSIS = "\u2026 "
MIN_SHOWN = 240  # characters: a sentence near the passage's end is shown with the ones before it (what a line shows)


@lru_cache(maxsize=1)
def _analyzer() -> Analyzer:
    return Analyzer()


def query_terms(queries: Iterable[str]) -> frozenset[str]:
    """The index terms of ``queries`` (the query and the expansions a search used)."""
    analyzer = _analyzer()
    return frozenset(t for q in queries for t in analyzer.terms(q))


def sentence_starts(text: str) -> list[int]:
    """Where the sentences of ``text`` start: 0, then after each ., ! or ? that ends a sentence (not an abbreviation)."""
    return [0] + [m.end() for m in _SENTENCE_START.finditer(text) if _word_before(text, m.start()) not in _ABBREVIATIONS]


def _word_before(text: str, end: int) -> str:
    """The word ending at ``end`` (lower case), found without copying the text before it (a whole paper's body)."""
    start = max(text.rfind(" ", 0, end), text.rfind("\n", 0, end), text.rfind("\t", 0, end)) + 1
    return text[start:end].lower()


def excerpt(text: str, terms: frozenset[str]) -> str:
    """``text`` from the start of its sentence with the most of ``terms`` (see the module doc), ``… `` first when
    that is not the start of ``text``."""
    if not text:
        return text
    starts = sentence_starts(text)
    best, found = 0, False
    if terms:
        analyzer = _analyzer()
        ends = starts[1:] + [len(text)]
        hits = [len(terms.intersection(analyzer.terms(text[a:b]))) for a, b in zip(starts, ends)]
        best = max(range(len(starts)), key=lambda i: (hits[i], -i))
        found = hits[best] > 0
    if not found:  # no sentence holds a query term: the passage's start, or its first whole sentence
        best = 1 if text[0].islower() and len(starts) > 1 else 0
    while best > 0 and len(text) - starts[best] < MIN_SHOWN:  # near the end: the sentences before it too
        best -= 1
    if best == 0:  # the whole passage: after ``… `` when it starts inside a sentence ("the sequence length. To ...")
        return ELLIPSIS + text if _inside_a_sentence(text) else text
    return ELLIPSIS + text[starts[best]:]


def _inside_a_sentence(text: str) -> bool:
    """Whether ``text`` starts inside a sentence: at a lower-case letter or at punctuation that continues one."""
    first = text.lstrip()[:1]
    return first.islower() or first in ",;:)]"
