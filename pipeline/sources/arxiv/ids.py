"""arXiv identifiers: one normal form for every way an id is written.

arXiv has two id schemes (https://info.arxiv.org/help/arxiv_identifier.html):

- new style since April 2007: ``YYMM.NNNN`` (to 2014) or ``YYMM.NNNNN`` (from 2015), e.g. ``2104.12255``;
- old style before that: ``archive/YYMMNNN``, e.g. ``astro-ph/0601001``; sometimes written with the
  subject class, ``math.GT/0309136``, which names the same paper as ``math/0309136``.

Either may carry a version suffix (``v2``). The normal form (``paper_id`` everywhere in the warehouse)
has no version and no prefix; the version is kept separately.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_NEW = re.compile(r"^(\d{4}\.\d{4,5})(?:v(\d+))?$")
_OLD = re.compile(r"^([a-z]+(?:-[a-z]+)*)(?:\.[A-Za-z]{2})?/(\d{7})(?:v(\d+))?$")
# prefixes people and services put in front of an id
_PREFIXES = re.compile(
    r"^(?:https?://(?:www\.|export\.)?arxiv\.org/(?:abs|pdf)/|oai:arxiv\.org:|arxiv:)", re.IGNORECASE
)


class ArxivId(NamedTuple):
    paper_id: str  # normal form, no version
    version: int | None  # None when the id named no version


def parse_arxiv_id(text: str) -> ArxivId:
    """Normalise an arXiv id in any common spelling; ``ValueError`` when it is not one.

    >>> parse_arxiv_id("arXiv:2104.12255v1")
    ArxivId(paper_id='2104.12255', version=1)
    >>> parse_arxiv_id("oai:arXiv.org:astro-ph/0601001")
    ArxivId(paper_id='astro-ph/0601001', version=None)
    >>> parse_arxiv_id("math.GT/0309136v2")
    ArxivId(paper_id='math/0309136', version=2)
    """
    if text is None:
        raise ValueError("no arXiv id")
    s = _PREFIXES.sub("", text.strip())
    if s.endswith(".pdf"):
        s = s[:-4]
    m = _NEW.match(s)
    if m:
        return ArxivId(m.group(1), int(m.group(2)) if m.group(2) else None)
    m = _OLD.match(s)
    if m:
        return ArxivId(f"{m.group(1)}/{m.group(2)}", int(m.group(3)) if m.group(3) else None)
    raise ValueError(f"not an arXiv id: {text!r}")


def normalize_arxiv_id(text: str) -> str:
    """The warehouse's ``paper_id`` for an arXiv id (version dropped)."""
    return parse_arxiv_id(text).paper_id


def is_arxiv_id(text: str) -> bool:
    try:
        parse_arxiv_id(text)
    except ValueError:
        return False
    return True
