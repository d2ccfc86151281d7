"""A :class:`~pipeline.feeds.write.Feed` as Atom 1.0 (feedgen), JSON Feed 1.1, and a Markdown or HTML digest.

Entry ids are the paper's canonical URL (arXiv abstract page, DOI) when it has one, else
``urn:paperkb:paper:<id>``, so a reader that saw a paper in an earlier feed recognises it. Each JSON Feed
item carries paperkb's own fields under ``_paperkb`` (paper id, similarity, why, passage), as the JSON Feed
spec reserves ``_``-prefixed keys for extensions.
"""

from __future__ import annotations

import html
import json
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from pipeline.feeds.write import Feed, FeedItem

JSON_FEED_VERSION = "https://jsonfeed.org/version/1.1"
SUMMARY_CHARS = 600


def render(fmt: str, feed: Feed, settings=None) -> str:
    base = (getattr(settings, "feed_base_url", None) or "").rstrip("/") or None
    return {"atom": to_atom, "json": to_json_feed, "md": to_markdown, "html": to_html}[fmt](feed, base)


def _entry_id(it: FeedItem) -> str:
    return it.url or f"urn:paperkb:paper:{quote(it.paper_id, safe=':/')}"


def _when(feed: Feed, it: FeedItem | None = None) -> datetime:
    """The item's publication date when known (midnight UTC), else the snapshot's publication time."""
    if it is not None and it.published and len(it.published) == 10:
        try:
            return datetime.fromisoformat(it.published).replace(tzinfo=timezone.utc)
        except ValueError:
            pass
    t = datetime.fromisoformat(feed.created_at)
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def _summary(it: FeedItem) -> str:
    text = it.abstract or it.passage or ""
    if len(text) > SUMMARY_CHARS:
        text = text[:SUMMARY_CHARS].rsplit(" ", 1)[0] + " ..."
    return f"Why: {it.why}." + (f"\n\n{text}" if text else "")


def _title(feed: Feed) -> str:
    return f"paperkb: {feed.name}"


def _feed_url(base: str | None, feed: Feed, fmt: str) -> str | None:
    return f"{base}/api/feeds/{quote(feed.name)}?format={fmt}" if base else None


def to_atom(feed: Feed, base: str | None = None) -> str:
    from feedgen.feed import FeedGenerator

    fg = FeedGenerator()
    fg.id(_feed_url(base, feed, "atom") or f"urn:paperkb:feed:{quote(feed.name)}")
    fg.title(_title(feed))
    fg.subtitle(f"New papers matching {feed.description} (snapshot {feed.snapshot_id})")
    fg.author({"name": "paperkb"})
    fg.generator("paperkb")
    fg.updated(_when(feed))
    if base:
        fg.link(href=_feed_url(base, feed, "atom"), rel="self")
        fg.link(href=f"{base}/feeds.html#{quote(feed.name)}", rel="alternate")
    for it in reversed(feed.items):  # feedgen prepends: add the last first so the file keeps feed order
        e = fg.add_entry()
        e.id(_entry_id(it))
        e.title(it.title or it.paper_id)
        if it.url:
            e.link(href=it.url, rel="alternate")
        for a in it.authors or ["unknown"]:
            e.author({"name": a})
        e.published(_when(feed, it))
        e.updated(_when(feed))
        e.summary(_summary(it))
    return fg.atom_str(pretty=True).decode("utf-8")


def json_feed(feed: Feed, base: str | None = None) -> dict:
    obj: dict[str, Any] = {
        "version": JSON_FEED_VERSION,
        "title": _title(feed),
        "description": f"New papers matching {feed.description} (snapshot {feed.snapshot_id})",
        "authors": [{"name": "paperkb"}],
        "_paperkb": {"name": feed.name, "kind": feed.kind, "threshold": feed.threshold, "snapshot_id": feed.snapshot_id,
                     "previous_snapshot_id": feed.previous_snapshot_id, "new_papers": feed.new_papers,
                     "matched": feed.matched, "notes": feed.notes},
    }
    items: list[dict[str, Any]] = []
    obj["items"] = items
    if base:
        obj["feed_url"] = _feed_url(base, feed, "json")
        obj["home_page_url"] = f"{base}/feeds.html"
    for it in feed.items:
        item = {"id": _entry_id(it), "title": it.title or it.paper_id, "content_text": _summary(it),
                "date_published": _when(feed, it).isoformat(), "date_modified": _when(feed).isoformat(),
                "authors": [{"name": a} for a in it.authors],
                "_paperkb": {"paper_id": it.paper_id, "year": it.year, "similarity": it.similarity, "why": it.why,
                             "seed": it.seed, "passage": it.passage, "page": it.page}}
        if it.url:
            item["url"] = it.url
        items.append(item)
    return obj


def to_json_feed(feed: Feed, base: str | None = None) -> str:
    return json.dumps(json_feed(feed, base), indent=1, ensure_ascii=False)


def _headline(feed: Feed) -> str:
    since = f"since snapshot {feed.previous_snapshot_id}" if feed.previous_snapshot_id else "(first snapshot)"
    return (f"{feed.matched} of {feed.new_papers} new paper(s) {since} match {feed.description} "
            f"(similarity >= {feed.threshold:.2f}; snapshot {feed.snapshot_id})")


def to_markdown(feed: Feed, base: str | None = None) -> str:
    lines = [f"# {_title(feed)}", "", _headline(feed), ""]
    lines += [f"> {n}" for n in feed.notes] + ([""] if feed.notes else [])
    for n, it in enumerate(feed.items, start=1):
        title = (it.title or it.paper_id).replace("[", "\\[").replace("]", "\\]")
        head = f"[{title}]({it.url})" if it.url else title
        authors = ", ".join(it.authors[:3]) + (" et al." if len(it.authors) > 3 else "")
        lines.append(f"{n}. **{head}** ({it.paper_id}{f', {it.year}' if it.year else ''}){f' — {authors}' if authors else ''}")
        lines.append(f"   - why: {it.why}")
        if it.passage:
            lines.append(f"   - passage: {' '.join(it.passage.split())[:300]}")
    return "\n".join(lines).rstrip() + "\n"


def to_html(feed: Feed, base: str | None = None) -> str:
    e = html.escape
    parts = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{e(_title(feed))}</title></head>",
             "<body>", f"<h1>{e(_title(feed))}</h1>", f"<p>{e(_headline(feed))}</p>"]
    parts += [f"<p><em>{e(n)}</em></p>" for n in feed.notes]
    parts.append("<ol>")
    for it in feed.items:
        title = e(it.title or it.paper_id)
        head = f'<a href="{e(it.url)}">{title}</a>' if it.url else title
        authors = e(", ".join(it.authors[:3]) + (" et al." if len(it.authors) > 3 else ""))
        parts.append(f"<li><strong>{head}</strong> ({e(it.paper_id)}{f', {it.year}' if it.year else ''})"
                     f"{f' — {authors}' if authors else ''}<br>why: {e(it.why)}"
                     + (f"<br><small>{e(' '.join(it.passage.split())[:300])}</small>" if it.passage else "") + "</li>")
    parts += ["</ol>", "</body></html>"]
    return "\n".join(parts) + "\n"
