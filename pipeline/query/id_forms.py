"""The ids people paste for a paper, read as the catalog keys them: arXiv ids with a prefix, a version or as a URL,
DOIs as URLs, Semantic Scholar pages.

``arXiv:1706.03762``, ``1706.03762v5``, ``https://arxiv.org/abs/1706.03762``, ``https://arxiv.org/pdf/1706.03762v7``
and arXiv's own DOI ``10.48550/arXiv.1706.03762`` are all the paper ``1706.03762``; ``https://doi.org/10.1145/361002.361007``
and ``doi:10.1145/361002.361007`` are the DOI ``10.1145/361002.361007``;
``https://www.semanticscholar.org/paper/Attention-is-All-you-Need-Vaswani-Shazeer/204e3073870fae3d05bcbc2f6a8e263d9b72e776``
is the S2 paper ``204e3073870fae3d05bcbc2f6a8e263d9b72e776``. Pure functions: :func:`pipeline.query.records.resolve_ids`
looks the results up.
"""

from __future__ import annotations

import re

# new-style ids (0704.0001 on) and old-style ones (hep-th/9901001; a subject class, math.AG/0601001, is not part of it)
_ARXIV = re.compile(
    r"^(?:(?:https?://)?(?:www\.|export\.)?arxiv\.org/(?:abs|pdf|html)/|arxiv:\s*|(?:https?://)?(?:dx\.)?doi\.org/"
    r"10\.48550/arxiv\.|10\.48550/arxiv\.)?"
    r"(\d{4}\.\d{4,5}|[a-z-]+(?:\.[a-z]{2})?/\d{7})(?:v\d+)?(?:\.pdf)?/?$", re.IGNORECASE)
_DOI = re.compile(r"^(?:(?:https?://)?(?:dx\.)?doi\.org/|doi:\s*)?(10\.\d{4,9}/\S+)$", re.IGNORECASE)
_S2 = re.compile(r"^(?:https?://)?(?:www\.)?semanticscholar\.org/paper/(?:[^/?#]+/)?([0-9a-f]{40})(?:[/?#].*)?$",
                 re.IGNORECASE)


def arxiv_id(text: str) -> str | None:
    """The arXiv id (no version) ``text`` names, or None."""
    m = _ARXIV.match(text.strip())
    if not m:
        return None
    found = m.group(1)
    if "/" in found:  # old style: the archive in lower case, without a subject class
        archive, number = found.split("/")
        return f"{archive.split('.')[0].lower()}/{number}"
    return found


def doi(text: str) -> str | None:
    """The DOI ``text`` names (lower case: DOIs are case-insensitive), or None. arXiv's own DOIs are arXiv ids."""
    if arxiv_id(text) is not None:
        return None
    m = _DOI.match(text.strip())
    return m.group(1).rstrip(".").lower() if m else None


def s2_paper(text: str) -> str | None:
    """The Semantic Scholar paper id a Semantic Scholar page's address names, or None."""
    m = _S2.match(text.strip())
    return m.group(1).lower() if m else None


def title_key(text: str) -> str:
    """A title as it is compared: case folded, spaces collapsed, a final period dropped."""
    return " ".join(text.split()).rstrip(".").casefold()
