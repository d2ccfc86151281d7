"""A feed as the publish builds it: the :class:`Feed` of one interest in one snapshot and its items
(:class:`FeedItem`): :mod:`pipeline.feeds.write` builds them, :mod:`pipeline.feeds.formats` writes them out."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class FeedItem:
    paper_id: str
    title: str | None
    authors: list[str]
    year: int | None
    published: str | None
    url: str | None
    abstract: str | None
    similarity: float  # the matching cosine (query: best of abstract and passages; seeds: nearest seed)
    why: str
    passage: str | None = None  # query interests: the passage nearest the query
    page: int | None = None
    seed: str | None = None  # seed interests: the nearest seed (or the one it cites)


@dataclass
class Feed:
    name: str
    kind: str
    description: str
    threshold: float
    snapshot_id: str
    created_at: str  # the snapshot's publication time (ISO)
    previous_snapshot_id: str | None
    new_papers: int  # papers new in the snapshot (matching or not)
    matched: int  # new papers that match (items may be fewer: feed_max_items)
    items: list[FeedItem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)
