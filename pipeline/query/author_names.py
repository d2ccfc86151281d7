"""Whether a name someone types names an author as printed: a surname alone, initials, either order.

A researcher looks an author up as they cite them: ``Vaswani``, ``A. Vaswani``, ``Vaswani, A.`` or ``Alan Perlis`` for
the ``Perlis, A. J.`` a catalog prints. Both names are cut into parts (accents stripped, case folded, split at
anything that is not a letter or a digit); the typed name matches when each of its parts is a different part of the
printed one, whole or as an initial of it (``a`` for ``ashish``, ``alan`` for a printed ``A.``), one typed part of two
letters or more is a whole part of the printed name (the surname: initials alone name nobody), and the other parts
come in the printed order (``A. J. Perlis`` is ``Perlis, A. J.``, not ``Perlis, J. A.``), an initial first being the
first given name's (``Perlis, A.`` is not ``Perlis, J. A.``); the surname may stand first or last. Pure functions:
:func:`pipeline.query.reading.author_profile` and the author filters read the names.
"""

from __future__ import annotations

import re
import unicodedata

_SPLIT = re.compile(r"[^0-9a-z]+")


def name_parts(name: str) -> list[str]:
    """The parts of a name: accents stripped, case folded, cut at every character that is not a letter or digit but an
    apostrophe (``O'Reilly`` is one part, ``oreilly``)."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", name) if not unicodedata.combining(c)).casefold()
    return [p for p in _SPLIT.split(plain.replace("'", "").replace("\u2019", "")) if p]


def search_word(typed: str) -> str | None:
    """The word to look printed names up by before :func:`names_match` checks them: the longest of a name of two parts
    or more (one part of it is the surname, printed whole); None for a single word, which a substring match covers."""
    parts = name_parts(typed)
    words = [w for w in parts if len(w) > 1]
    return max(words, key=len) if len(parts) > 1 and words else None


def _part_matches(typed: str, printed: str) -> bool:
    if typed == printed:
        return True
    if len(typed) == 1:  # an initial typed: any printed part it begins
        return printed.startswith(typed)
    return len(printed) == 1 and typed.startswith(printed)  # a printed initial: the typed name spelt out


def names_match(typed: str, printed: str) -> bool:
    """Whether the name ``typed`` names the author printed as ``printed`` (see the module doc)."""
    t, p = name_parts(typed), name_parts(printed)
    if not t or len(t) > len(p) or not any(len(w) > 1 and w in p for w in t):
        return False
    given = len(name_parts(printed.split(",", 1)[0])) if "," in printed else None  # 'Perlis, A. J.': from part 1

    def placements(i: int, taken: tuple[int, ...]):  # each typed part to a different printed part (a few parts)
        if i == len(t):
            yield taken
            return
        for j, w in enumerate(p):
            if j not in taken and _part_matches(t[i], w):
                yield from placements(i + 1, taken + (j,))

    return any(_in_order(t, p, at, given) for at in placements(0, ()))


def _in_order(typed: list[str], printed: list[str], at: tuple[int, ...], given: int | None) -> bool:
    """Whether, leaving out one part matched whole (the surname: first in 'Perlis, A. J.', last in 'A. J. Perlis'),
    the other typed parts come in the printed order ('A. J. Perlis' is not 'Perlis, J. A.'), an initial first being
    the first given name's ('Perlis, A.' is not 'Perlis, J. A.'; ``given``: where the given names start after a
    comma, else they start the name)."""
    for s, w in enumerate(typed):
        if len(w) > 1 and w == printed[at[s]]:
            rest = at[:s] + at[s + 1:]
            first = given if given is not None else (1 if at[s] == 0 else 0)
            if all(a < b for a, b in zip(rest, rest[1:])) and not (
                    rest and len(typed[0 if s else 1]) == 1 and rest[0] != first):
                return True
    return False


_SUFFIXES = {"jr", "jr.", "sr", "sr.", "ii", "iii", "iv"}


def surname(name: str) -> str:
    """The surname of a name as printed: before the comma of ``Perlis, A. J.``, else the last word of ``Ashish Vaswani``
    (a ``Jr.`` after it left out)."""
    name = " ".join(name.split())
    if "," in name:
        head = [w for w in name.split(",", 1)[0].split() if w.casefold() not in _SUFFIXES]
        if head:
            return " ".join(head)
    words = [w for w in name.replace(",", " ").split() if w.casefold() not in _SUFFIXES]
    return words[-1] if words else name


def short_byline(names: list[str]) -> str:
    """The authors as a citation gives them in running text: ``Dijkstra``, ``Kingma & Ba``, ``Vaswani et al.``."""
    last = [surname(n) for n in names if n and n.strip()]
    if len(last) <= 1:
        return last[0] if last else ""
    return f"{last[0]} & {last[1]}" if len(last) == 2 else f"{last[0]} et al."
