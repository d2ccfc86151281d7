"""A :class:`~pipeline.feeds.feed.Feed` as Atom 1.0 (feedgen), JSON Feed 1.1, and a Markdown or HTML digest.

Entry ids are the paper's canonical URL (arXiv abstract page, DOI, its own URL) when it has one, else
the ``tag:`` URI ``tag:paperkb,2026:paper/<id>``, so a reader that saw a paper in an earlier feed
recognises it. Every item has a link: that URL, else the paper's page on the served site
(``feed_base_url``/paper?id=...) when the setting is given, else the ``tag:`` URI. Each JSON Feed item
carries paperkb's own fields under ``_paperkb`` (paper id, similarity, why, passage), as the JSON Feed
spec reserves ``_``-prefixed keys for extensions.

No paper can break a feed: text is cleaned for each format before it is written (characters XML cannot
hold, such as control characters and lone surrogates, are dropped everywhere; the Markdown digest escapes
HTML and keeps each item on its own lines; non-finite numbers become ``null`` in JSON).
"""

from __future__ import annotations

import html
import json
import math
import re
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from pipeline.feeds.feed import Feed, FeedItem

JSON_FEED_VERSION = "https://jsonfeed.org/version/1.1"
SUMMARY_CHARS = 600
TAG_PREFIX = "tag:paperkb,2026:paper/"
# what XML 1.0 cannot hold (C0 controls but tab/newline/return, lone surrogates, U+FFFE/U+FFFF), and the
# C1 controls and DEL, which no reader wants in a title either
_BAD_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_URL_SAFE = ";/?:@&=+$,-_.!~*'#%"


def clean(text) -> str:
    """``text`` (any value; ``None`` is "") without the characters a feed format cannot hold."""
    return _BAD_CHARS.sub("", "" if text is None else str(text))


def line(text) -> str:
    """``text`` cleaned, on one line (runs of whitespace, newlines included, as one space)."""
    return " ".join(clean(text).split())


def _md(text) -> str:
    """One line of Markdown text that renders as written: HTML escaped, link brackets escaped."""
    return html.escape(line(text), quote=False).replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def _opt(text) -> str | None:
    return clean(text) if text is not None else None


def _number(x):
    return x if not isinstance(x, float) or math.isfinite(x) else None


def item_url(it: FeedItem) -> str | None:
    """The paper's own absolute URL (arXiv, DOI, its URL), cleaned and percent-encoded, or None."""
    u = line(it.url)
    return quote(u, safe=_URL_SAFE) if u and _SCHEME.match(u) else None


def item_link(it: FeedItem, base: str | None) -> str:
    """Every item's link: its own URL, else its page on the served site (``base``), else its ``tag:`` id."""
    return item_url(it) or (f"{base}/paper?id={quote(clean(it.paper_id), safe='')}" if base else _tag(it))


def _tag(it: FeedItem) -> str:
    return TAG_PREFIX + quote(clean(it.paper_id), safe=":/")


def render(fmt: str, feed: Feed, settings=None) -> str:
    base = quote(line(getattr(settings, "feed_base_url", None)), safe=_URL_SAFE).rstrip("/") or None
    return {"atom": to_atom, "json": to_json_feed, "md": to_markdown, "html": to_html}[fmt](feed, base)


def _entry_id(it: FeedItem) -> str:
    return item_url(it) or _tag(it)


def _item_title(it: FeedItem) -> str:
    return line(it.title) or line(it.paper_id) or "untitled"


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
    text = clean(it.abstract or it.passage or "").strip()
    if len(text) > SUMMARY_CHARS:
        text = text[:SUMMARY_CHARS].rsplit(" ", 1)[0] + " ..."
    return f"Why: {line(it.why)}." + (f"\n\n{text}" if text else "")


def _title(feed: Feed) -> str:
    return f"paperkb: {line(feed.name)}"


def _name(feed: Feed) -> str:
    return quote(clean(feed.name), safe="")


def _describe(feed: Feed) -> str:
    return f"New papers matching {line(feed.description)} (snapshot {line(feed.snapshot_id)})"


def _feed_url(base: str | None, feed: Feed, fmt: str) -> str | None:
    return f"{base}/api/feeds/{_name(feed)}?format={fmt}" if base else None


def to_atom(feed: Feed, base: str | None = None) -> str:
    from feedgen.feed import FeedGenerator

    fg = FeedGenerator()
    fg.id(_feed_url(base, feed, "atom") or f"urn:paperkb:feed:{_name(feed)}")
    fg.title(_title(feed))
    fg.subtitle(_describe(feed))
    fg.author({"name": "paperkb"})
    fg.generator("paperkb")
    fg.updated(_when(feed))
    if base:
        fg.link(href=_feed_url(base, feed, "atom"), rel="self")
        fg.link(href=f"{base}/feeds.html#{_name(feed)}", rel="alternate")
    for it in reversed(feed.items):  # feedgen prepends: add the last first so the file keeps feed order
        e = fg.add_entry()
        e.id(_entry_id(it))
        e.title(_item_title(it))
        e.link(href=item_link(it, base), rel="alternate")
        for a in [line(a) for a in it.authors or []] or ["unknown"]:
            if a:
                e.author({"name": a})
        e.published(_when(feed, it))
        e.updated(_when(feed))
        e.summary(_summary(it))
    return fg.atom_str(pretty=True).decode("utf-8")


def json_feed(feed: Feed, base: str | None = None) -> dict:
    obj: dict[str, Any] = {
        "version": JSON_FEED_VERSION,
        "title": _title(feed),
        "description": _describe(feed),
        "authors": [{"name": "paperkb"}],
        "_paperkb": {"name": clean(feed.name), "kind": clean(feed.kind), "threshold": _number(feed.threshold),
                     "snapshot_id": clean(feed.snapshot_id),
                     "previous_snapshot_id": _opt(feed.previous_snapshot_id),
                     "new_papers": feed.new_papers, "matched": feed.matched, "notes": [clean(n) for n in feed.notes]},
    }
    items: list[dict[str, Any]] = []
    obj["items"] = items
    if base:
        obj["feed_url"] = _feed_url(base, feed, "json")
        obj["home_page_url"] = f"{base}/feeds.html"
    for it in feed.items:
        item = {"id": _entry_id(it), "url": item_link(it, base), "title": _item_title(it), "content_text": _summary(it),
                "date_published": _when(feed, it).isoformat(), "date_modified": _when(feed).isoformat(),
                "authors": [{"name": a} for a in (line(a) for a in it.authors) if a],
                "_paperkb": {"paper_id": clean(it.paper_id), "year": it.year, "similarity": _number(it.similarity),
                             "why": clean(it.why), "seed": _opt(it.seed), "passage": _opt(it.passage), "page": it.page}}
        items.append(item)
    return obj


def to_json_feed(feed: Feed, base: str | None = None) -> str:
    return json.dumps(json_feed(feed, base), indent=1, ensure_ascii=False)


def _headline(feed: Feed) -> str:
    since = f"since snapshot {line(feed.previous_snapshot_id)}" if feed.previous_snapshot_id else "(first snapshot)"
    return (f"{feed.matched} of {feed.new_papers} new paper(s) {since} match {line(feed.description)} "
            f"(similarity >= {feed.threshold:.2f}; snapshot {line(feed.snapshot_id)})")


def to_markdown(feed: Feed, base: str | None = None) -> str:
    lines = [f"# {_md(_title(feed))}", "", _md(_headline(feed)), ""]
    lines += [f"> {_md(n)}" for n in feed.notes] + ([""] if feed.notes else [])
    for n, it in enumerate(feed.items, start=1):
        title = _md(_item_title(it))
        head = f"[{title}](<{item_link(it, base)}>)"
        authors = _md(", ".join(it.authors[:3]) + (" et al." if len(it.authors) > 3 else ""))
        lines.append(f"{n}. **{head}** ({_md(it.paper_id)}{f', {it.year}' if it.year else ''}){f' — {authors}' if authors else ''}")
        lines.append(f"   - why: {_md(it.why)}")
        if line(it.passage):
            lines.append(f"   - passage: {_md(line(it.passage)[:300])}")
    return "\n".join(lines).rstrip() + "\n"


def to_html(feed: Feed, base: str | None = None) -> str:
    def e(text) -> str:
        return html.escape(line(text))

    parts = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{e(_title(feed))}</title></head>",
             "<body>", f"<h1>{e(_title(feed))}</h1>", f"<p>{e(_headline(feed))}</p>"]
    parts += [f"<p><em>{e(n)}</em></p>" for n in feed.notes]
    parts.append("<ol>")
    for it in feed.items:
        title = e(_item_title(it))
        head = f'<a href="{e(item_link(it, base))}">{title}</a>'
        authors = e(", ".join(it.authors[:3]) + (" et al." if len(it.authors) > 3 else ""))
        parts.append(f"<li><strong>{head}</strong> ({e(it.paper_id)}{f', {it.year}' if it.year else ''})"
                     f"{f' — {authors}' if authors else ''}<br>why: {e(it.why)}"
                     + (f"<br><small>{e(line(it.passage)[:300])}</small>" if line(it.passage) else "") + "</li>")
    parts += ["</ol>", "</body></html>"]
    return "\n".join(parts) + "\n"
