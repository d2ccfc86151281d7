"""Issue 28, defect 1: no paper can break a feed writer.

Property tests (hypothesis) over arbitrary unicode -- control characters, NUL, lone surrogates, HTML,
Markdown and XML syntax, newlines -- in every field of a feed and of its items, for each format that
``pipeline/feeds/formats.py`` writes (Atom, JSON Feed, the Markdown and HTML digests): each renders,
encodes as UTF-8, parses with its format's reader, and gives every item an id and a link.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.feeds.formats import TAG_PREFIX, item_link, render
from pipeline.feeds.write import Feed, FeedItem

ANY = st.text(alphabet=st.characters(exclude_categories=()), max_size=40)  # surrogates and controls included
URL = st.one_of(st.none(), ANY, ANY.map(lambda s: f"https://example.org/{s}"), st.just("local-file.pdf"))
FLOAT = st.floats(allow_nan=True, allow_infinity=True)

items = st.builds(
    FeedItem, paper_id=ANY, title=st.one_of(st.none(), ANY), authors=st.lists(ANY, max_size=4),
    year=st.one_of(st.none(), st.integers(-10**6, 10**6)), published=st.one_of(st.none(), ANY, st.just("2024-02-29")),
    url=URL, abstract=st.one_of(st.none(), ANY), similarity=FLOAT, why=ANY, passage=st.one_of(st.none(), ANY),
    page=st.one_of(st.none(), st.integers(0, 10**4)), seed=st.one_of(st.none(), ANY))
feeds = st.builds(
    Feed, name=ANY, kind=ANY, description=ANY, threshold=FLOAT, snapshot_id=ANY,
    created_at=st.just("2026-11-25T01:02:03.000004+00:00"), previous_snapshot_id=st.one_of(st.none(), ANY),
    new_papers=st.integers(0, 10**6), matched=st.integers(0, 10**6), items=st.lists(items, max_size=4),
    notes=st.lists(ANY, max_size=3))
BASES = st.sampled_from([None, "https://papers.example.org", "https://papers.example.org/kb/"])
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _settings(base):
    return SimpleNamespace(feed_base_url=base)


@FUZZ
@given(feed=feeds, base=BASES)
def test_atom_parses_and_every_entry_has_an_id_and_a_link(feed, base):
    import feedparser
    from lxml import etree

    text = render("atom", feed, _settings(base))
    root = etree.fromstring(text.encode("utf-8"))  # well-formed XML, or this raises
    ns = {"a": "http://www.w3.org/2005/Atom"}
    entries = root.findall("a:entry", ns)
    assert len(entries) == len(feed.items)
    for e in entries:
        assert e.findtext("a:id", namespaces=ns)
        assert e.findtext("a:title", namespaces=ns)
        links = [x for x in e.findall("a:link", ns) if x.get("rel", "alternate") == "alternate"]  # the default rel
        assert links and links[0].get("href")
    parsed = feedparser.parse(text)
    assert not parsed.bozo, parsed.bozo_exception
    assert len(parsed.entries) == len(feed.items)


@FUZZ
@given(feed=feeds, base=BASES)
def test_json_feed_is_strict_json_and_every_item_has_an_id_and_a_url(feed, base):
    def no_constants(name):
        raise AssertionError(f"{name} is not JSON")

    text = render("json", feed, _settings(base))
    text.encode("utf-8")
    obj = json.loads(text, parse_constant=no_constants)
    assert obj["version"] == "https://jsonfeed.org/version/1.1"
    assert len(obj["items"]) == len(feed.items)
    for item in obj["items"]:
        assert item["id"] and item["url"] and item["title"]


@FUZZ
@given(feed=feeds, base=BASES)
def test_markdown_digest_writes_no_raw_html_and_one_line_per_field(feed, base):
    text = render("md", feed, _settings(base))
    text.encode("utf-8")
    # the only '<' are those around link destinations: (<url>), which hold no '<', '>' or space
    assert "<" not in re.sub(r"\]\(<[^<>\s]+>\)", "", text)
    numbered = [ln for ln in text.splitlines() if re.match(r"^\d+\. \*\*\[", ln)]
    assert len(numbered) == len(feed.items)
    assert len([ln for ln in text.splitlines() if ln.startswith("   - why:")]) == len(feed.items)


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)


@FUZZ
@given(feed=feeds, base=BASES)
def test_html_digest_holds_only_its_own_tags(feed, base):
    text = render("html", feed, _settings(base))
    text.encode("utf-8")
    parser = _Tags()
    parser.feed(text)
    assert set(parser.tags) <= {"html", "head", "meta", "title", "body", "h1", "p", "em", "ol", "li", "strong", "a",
                                "br", "small"}
    assert parser.tags.count("li") == len(feed.items) and parser.tags.count("a") == len(feed.items)


def _item(**kw) -> FeedItem:
    base = dict(paper_id="local:ab12", title="A title", authors=[], year=None, published=None, url=None,
                abstract=None, similarity=0.9, why="abstract at similarity 0.90 to the query")
    return FeedItem(**{**base, **kw})


@pytest.mark.parametrize("url, base, expected", [
    ("https://arxiv.org/abs/1409.0473", "https://kb.example.org", "https://arxiv.org/abs/1409.0473"),
    (None, "https://kb.example.org", "https://kb.example.org/paper?id=local%3Aab12"),
    (None, None, TAG_PREFIX + "local:ab12"),
    ("not a url", None, TAG_PREFIX + "local:ab12"),
])
def test_every_item_links_to_its_url_else_its_served_page_else_its_tag_id(url, base, expected):
    assert item_link(_item(url=url), base) == expected


def test_a_title_with_html_and_control_characters_is_written_cleanly():
    feed = Feed(name="nl", kind="query", description="query 'x'", threshold=0.5, snapshot_id="s2",
                created_at="2026-11-25T01:02:03+00:00", previous_snapshot_id="s1", new_papers=1, matched=1,
                items=[_item(title="<script>alert(1)</script> Sets\x08 and\x00 y\x0b", abstract="a\x1fb")])
    md = render("md", feed)
    assert "<script>" not in md and "&lt;script&gt;alert(1)&lt;/script&gt; Sets and y" in md
    atom = render("atom", feed)
    assert "Sets and y" in atom and "\x08" not in atom and "\x00" not in atom
    assert f"<id>{TAG_PREFIX}local:ab12</id>" in atom
