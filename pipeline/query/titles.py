"""Title-match boosts and the light stemmer they use.

Points (design, "Scoring"): exact title +20; stemmed title +15 (when not exact); title starts
with a 4+ letter query word +10; +5 per stemmed query word found in the title; up to +10 for
excerpt overlap normalised by the excerpt's length; list/index pages -10, offset by +8 for
definitional queries and +3 otherwise; +2 for the primary source (the paper is primary-listed
in a category the user asked for or harvests). Points are shown as the ``title`` signal and
added to the score times ``query_title_boost_scale``.

The stemmer is a light S-stemmer (Harman 1991: plurals only), hand-written because Snowball
would also fold derivations (``retrieval`` -> ``retriev``) that a title match must keep apart,
plus words ending in ``s`` that are not plurals (the exception list).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

STEM_EXCEPTIONS = frozenset({"this", "less", "across", "always", "towards"})
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_STOP = frozenset(
    "a an and are as at be by for from has have how in is it of on or that the to was were what which who why with "
    "about into its their there these they this those than then between over under via using do does".split()
)
_LIST_TITLE = re.compile(r"^\s*(list of|lists of|index of|index to|table of contents|contents|bibliography|glossary|references)\b", re.I)
_DEFINITIONAL = re.compile(r"^\s*(what (is|are|does)|define|definition of|meaning of|who (is|was))\b", re.I)


def light_stem(word: str) -> str:
    """Harman's S-stemmer with the exception list: ``queries``->``query``, ``indexes``->``index``... ``this`` stays."""
    w = word.lower()
    if w in STEM_EXCEPTIONS or len(w) <= 3:
        return w
    if w.endswith("ies") and not w.endswith(("eies", "aies")):
        return w[:-3] + "y"
    if w.endswith("es") and not w.endswith(("aes", "ees", "oes")) and w[:-2].endswith(("s", "x", "z", "ch", "sh")):
        return w[:-2]
    if w.endswith("s") and not w.endswith(("us", "ss", "is")):
        return w[:-1]
    return w


def words(text: str) -> list[str]:
    return _WORD.findall((text or "").lower())


def stems(text: str) -> list[str]:
    return [light_stem(w) for w in words(text)]


def _norm(text: str) -> str:
    return " ".join(words(text))


@dataclass(frozen=True)
class Boost:
    exact: float = 0.0
    stemmed: float = 0.0
    starts: float = 0.0
    words: float = 0.0
    excerpt: float = 0.0
    list_page: float = 0.0
    primary: float = 0.0

    @property
    def total(self) -> float:
        return self.exact + self.stemmed + self.starts + self.words + self.excerpt + self.list_page + self.primary


def title_boost(query: str, title: str, excerpt: str = "", primary: bool = False) -> Boost:
    """The title-match points for one result (see module doc)."""
    q_norm, t_norm = _norm(query), _norm(title)
    exact = 20.0 if q_norm and q_norm == t_norm else 0.0
    q_stems = [s for s in stems(query)]
    t_stems = stems(title)
    stemmed = 15.0 if not exact and q_stems and q_stems == t_stems else 0.0
    q_words = words(query)
    t_words = words(title)
    starts = 10.0 if t_words and any(len(w) >= 4 and w == t_words[0] for w in q_words) else 0.0
    content = {s for s, w in zip(q_stems, q_words) if w not in _STOP}
    t_set = set(t_stems)
    word_pts = 5.0 * len(content & t_set)
    e_stems = stems(excerpt)
    excerpt_pts = 10.0 * min(1.0, sum(1 for s in e_stems if s in content) / len(e_stems)) if e_stems and content else 0.0
    list_pts = 0.0
    if _LIST_TITLE.search(title or ""):
        list_pts = -10.0 + (8.0 if _DEFINITIONAL.search(query) else 3.0)
    return Boost(exact, stemmed, starts, word_pts, round(excerpt_pts, 4), list_pts, 2.0 if primary else 0.0)


# a query names a title when it holds at least this many of the title's content words (or is a phrase of the title
# of at least NAMING_PHRASE of them): "sequence to sequence learning" names "Sequence to sequence learning with neural
# networks", "neural networks" names neither it nor any other title holding those two words among others
NAMING_SHARE = 0.6
NAMING_PHRASE = 3


def _folded_words(text: str) -> list[str]:
    """:func:`words` of ``text`` with accents left out (``Schrödinger``, ``Schr¨odinger`` as a PDF prints it, and
    ``schrodinger`` are one word)."""
    from pipeline.query.contexts import fold

    return words(fold(text or ""))


def _content(text: str) -> set[str]:
    return {light_stem(w) for w in _folded_words(text) if w not in _STOP}


def may_name_a_title(query: str) -> bool:
    """Whether ``query`` holds the two content words :func:`names_title` needs at least."""
    return len(_content(query)) >= 2


def names_title(query: str, title: str) -> float:
    """How fully ``query`` names the work titled ``title``: the share of the title's content words (stemmed, stop
    words aside) the query holds, when the query holds no other content word and at least two, and holds either
    :data:`NAMING_SHARE` of them or a phrase of the title of :data:`NAMING_PHRASE` content words or more (repeats
    counted); else 0."""
    q_words, t_words = _folded_words(query), _folded_words(title)
    q, t = _content(query), _content(title)
    if len(q) < 2 or not q <= t:
        return 0.0
    share = len(q) / len(t)
    phrase = f" {' '.join(map(light_stem, q_words))} " in f" {' '.join(map(light_stem, t_words))} "
    long = sum(w not in _STOP for w in q_words) >= NAMING_PHRASE
    return share if share >= NAMING_SHARE or (phrase and long) else 0.0
