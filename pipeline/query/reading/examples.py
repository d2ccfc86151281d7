"""Example queries and id placeholders for the page, taken from the catalog itself."""

from __future__ import annotations

import re

from pipeline.query.reading.models import Examples


_STOP = {"a", "an", "and", "the", "of", "on", "in", "for", "to", "with", "by", "at", "from", "as", "its", "is",
         "are", "via", "using", "towards", "toward", "some", "new", "into", "or"}


def example_query(title: str, max_words: int = 6) -> str | None:
    """A short query made from a title: lower case, the part before any colon or bracket, no stopword at
    either end, no digits; None when that part is longer than ``max_words`` words or shorter than two."""
    head = re.split(r"[:;?(\[]| - ", title or "", maxsplit=1)[0]
    words = re.findall(r"[^\W\d_][\w'\-]*", head.lower())
    while words and words[-1] in _STOP:
        words.pop()
    while words and words[0] in _STOP:
        words.pop(0)
    return " ".join(words) if 2 <= len(words) <= max_words else None


def pick_examples(titles: list[str], n: int = 3) -> list[str]:
    """Up to ``n`` example queries from ``titles`` (most central first): each made by :func:`example_query`,
    sharing no content word with one already picked."""
    picked: list[str] = []
    seen: set[str] = set()
    for title in titles:
        q = example_query(title)
        words = set((q or "").split()) - _STOP
        if q and not words & seen:
            picked.append(q)
            seen |= words
        if len(picked) >= n:
            break
    return picked


def examples(con, *, n: int = 3) -> Examples:
    """Example queries (short forms of the titles of the most central papers), a paper id, an author, a
    category and the year range of the catalog, for the page's placeholders."""
    papers = con.execute("SELECT count(*) FROM papers").fetchone()[0]
    central = con.execute("""
        WITH m AS (SELECT paper_id, max(pagerank) AS pr FROM paper_metrics WHERE paper_id IS NOT NULL GROUP BY paper_id)
        SELECT p.paper_id, p.external_id, p.title FROM papers p LEFT JOIN m USING (paper_id)
        WHERE p.title IS NOT NULL ORDER BY m.pr DESC NULLS LAST, p.citation_count DESC NULLS LAST, p.paper_id
        LIMIT 200""").fetchall()
    queries = pick_examples([t for _, _, t in central], n)
    top = central[0] if central else (None, None, None)
    author = con.execute("""
        SELECT name FROM paper_authors GROUP BY name ORDER BY count(*) DESC, name LIMIT 1""").fetchone()
    category = con.execute("""
        SELECT primary_category FROM papers WHERE primary_category IS NOT NULL
        GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1""").fetchone()
    lo, hi = con.execute("SELECT min(year), max(year) FROM papers").fetchone()
    return Examples(papers=int(papers), queries=queries, paper_id=top[0], external_id=top[1], title=top[2],
                    author=author[0] if author else None, category=category[0] if category else None,
                    year_min=lo, year_max=hi)
