"""What a reading function is given, checked: a paper id resolved (:func:`pipeline.query.records.resolve_ids`), a
page's limit and offset, a sort among those allowed."""

from __future__ import annotations

from typing import Literal

from pipeline.errors import UnknownPaper, UserError


MAX_LIMIT = 200
LINK_SORTS = ("order", "citations", "year")
REFERENCE_SORTS = (*LINK_SORTS, "mentions")  # references only: the most cited in the paper's own text first
PAPER_SORTS = ("pagerank", "citations", "date", "title")
LinkSort = Literal["order", "citations", "year"]
PaperSort = Literal["pagerank", "citations", "date", "title"]


def _limit(limit: int, offset: int) -> tuple[int, int]:
    if not 1 <= int(limit) <= MAX_LIMIT:
        raise UserError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    if int(offset) < 0:
        raise UserError(f"offset must be 0 or more, got {offset}")
    return int(limit), int(offset)


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise UserError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return value


def resolve(con, paper_id: str) -> tuple[str | None, list[str]]:
    """(corpus paper id or None, the citation-graph work ids of the paper) for any id
    :func:`~pipeline.query.records.resolve_ids` accepts. UnknownPaper when nothing matches."""
    from pipeline.query.records import resolve_ids

    (kind, pid), = resolve_ids(con, [paper_id])
    if kind == "work":
        return None, [pid]
    works = [r[0] for r in con.execute("SELECT work_id FROM works WHERE paper_id = ? ORDER BY work_id", [pid]).fetchall()]
    return pid, list(dict.fromkeys([*works, pid]))


def require_paper(con, paper_id: str) -> str:
    """The corpus paper id of ``paper_id`` (UnknownPaper for an unknown id or a work outside the corpus)."""
    from pipeline.query.records import resolve_ids

    (kind, pid), = resolve_ids(con, [paper_id])  # (not its works: a scan of works by paper id)
    if kind == "work":
        raise UnknownPaper(f"{paper_id!r} is a cited work outside the corpus, not a corpus paper")
    return pid
