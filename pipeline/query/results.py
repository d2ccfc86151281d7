"""Small typed records returned by the query API (each has ``to_dict()`` for JSON)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


def _num(v):
    return round(float(v), 6) if isinstance(v, float) else v


@dataclass
class Result:
    paper_id: str
    external_id: str | None
    title: str | None
    authors: list[str]
    year: int | None
    score: float
    signals: dict[str, float]
    passage: str
    page: int | None = None
    section: str | None = None
    chunk_id: str | None = None
    rank: int = 0
    role: str | None = None  # the part of the paper the passage is from: body, appendix, acknowledgements, abstract
    query: str | None = None  # the (sub-)query whose cosine was highest for the best passage
    index: str | None = None  # several indexes searched as one (pipeline.query.multi): the one this result is from
    also_in: list[str] | None = None  # ... and the other indexes that hold the same paper
    excerpt: str | None = None  # what a result line shows of the passage (pipeline.query.excerpt); None: the passage

    def to_dict(self) -> dict[str, Any]:
        # written out (the fields in declaration order, as asdict gives them): asdict's recursive deep copy
        # was a measurable part of a search request's CPU in `paperkb serve`
        return {"paper_id": self.paper_id, "external_id": self.external_id, "title": self.title,
                "authors": list(self.authors), "year": self.year, "score": _num(self.score),
                "signals": {k: _num(v) for k, v in self.signals.items()}, "passage": self.passage, "page": self.page,
                "excerpt": self.excerpt if self.excerpt is not None else self.passage,
                "section": self.section, "chunk_id": self.chunk_id, "rank": self.rank, "query": self.query, "role": self.role,
                **({"index": self.index, "also_in": list(self.also_in or [])} if self.index is not None else {})}


@dataclass
class SearchResponse:
    query: str
    queries: list[str]
    results: list[Result]
    notes: list[str] = field(default_factory=list)
    config: str = "default"
    fusion: str = "blend"
    expand: str = "off"
    rerank: bool = False
    title_boost: bool = False
    weights: dict[str, float] = field(default_factory=dict)
    snapshot_id: str | None = None
    took_ms: float | None = None
    indexes: list[dict[str, Any]] | None = None  # several indexes searched as one: each one's name and snapshot id
    normalisation: str | None = None  # ... and how their scores were made comparable (pipeline.query.multi)

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k != "results"
             and not (k in ("indexes", "normalisation") and v is None)}
        d["results"] = [r.to_dict() for r in self.results]
        return d


@dataclass
class Related:
    paper_id: str | None
    work_id: str | None
    title: str | None
    year: int | None
    citation_count: int | None
    ccbc_weighted: float
    ccbc_naive: float
    semantic: float
    fused: float
    quality: float
    components: dict[str, float]
    score: float
    external_id: str | None = None
    rank: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("ccbc_weighted", "ccbc_naive", "semantic", "fused", "quality", "score"):
            d[k] = _num(d[k])
        d["components"] = {k: _num(v) for k, v in self.components.items()}
        return d
