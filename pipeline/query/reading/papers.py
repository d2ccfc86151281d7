"""Lists of corpus papers (filtered and sorted) and author profiles: a name as printed, or the one author a name
names in part (:mod:`pipeline.query.author_names`)."""

from __future__ import annotations

from typing import Any

from pipeline.errors import AmbiguousName, UnknownPaper, UserError
from pipeline.query.author_names import name_parts, names_match, search_word
from pipeline.query.reading.args import PAPER_SORTS, _choice, _limit
from pipeline.query.reading.cards import paper_cards
from pipeline.query.reading.models import AuthorProfile, NameCount, PaperPage, YearCount


def h_index(citations: list[int]) -> int:
    """The largest h such that h of the papers have at least h citations each."""
    ranked = sorted((c or 0 for c in citations), reverse=True)
    return sum(1 for i, c in enumerate(ranked, start=1) if c >= i)


_PAPER_ORDER = {
    "pagerank": "pagerank DESC NULLS LAST, cites DESC NULLS LAST, paper_id",
    "citations": "cites DESC NULLS LAST, pagerank DESC NULLS LAST, paper_id",
    "date": "published DESC NULLS LAST, year DESC NULLS LAST, paper_id",
    "title": "lower(title) NULLS LAST, paper_id",
}


def list_papers(con, *, sort: str = "pagerank", author: str | None = None, category: str | None = None,
                year_from: int | None = None, year_to: int | None = None, limit: int = 20,
                offset: int = 0) -> PaperPage:
    """Corpus papers, filtered (``author``: a case-insensitive part of an author's name, as the search's
    filter; ``category``: an arXiv category, primary or not; years inclusive) and sorted by
    ``pagerank``, ``citations``, ``date`` (newest first) or ``title``."""
    limit, offset = _limit(limit, offset)
    sort = _choice("sort", sort, PAPER_SORTS)
    if year_from is not None and year_to is not None and year_from > year_to:
        raise UserError(f"year_from {year_from} is after year_to {year_to}")
    where: list[str] = ["TRUE"]
    params: list[Any] = []
    if author and author.strip():  # a part of the name, or the name in part ("A. Vaswani" for "Ashish Vaswani")
        # or a part of the name accents and punctuation aside ("muller" for "Jürgen Müller")
        key = con.execute(f"SELECT {_NAME_KEY.format('?')}", [author.strip()]).fetchone()[0]
        where.append(f"paper_id IN (SELECT paper_id FROM paper_authors WHERE contains(lower(name), lower(?)) "
                     f"OR (? <> '' AND contains({_NAME_KEY.format('name')}, ?)) OR name IN (SELECT unnest(?::VARCHAR[])))")
        params += [author.strip(), key, key, _names_in_part(con, author.strip())]
    if category and category.strip():
        # its spellings first (any case), then a plain list match: no lambda (their syntax changed in DuckDB 1.3)
        spelt = [r[0] for r in con.execute("SELECT DISTINCT c FROM (SELECT unnest(categories) AS c FROM papers) "
                                           "WHERE lower(c) = lower(?)", [category.strip()]).fetchall()]
        where.append("(lower(primary_category) = lower(?) OR list_has_any(categories, ?::VARCHAR[]))")
        params += [category.strip(), spelt]
    if year_from is not None:
        where.append("year >= ?")
        params.append(int(year_from))
    if year_to is not None:
        where.append("year <= ?")
        params.append(int(year_to))
    base = f"""
        WITH m AS (SELECT paper_id, max(pagerank) AS pagerank, max(citation_count) AS cites
                   FROM paper_metrics WHERE paper_id IS NOT NULL GROUP BY paper_id),
        listed AS (
            SELECT p.paper_id, p.title, p.year, coalesce(p.published, p.publication_date) AS published, m.pagerank,
                   coalesce(p.citation_count, m.cites) AS cites
            FROM papers p LEFT JOIN m USING (paper_id)
            WHERE {' AND '.join(where)})"""
    total = con.execute(base + "SELECT count(*) FROM listed", params).fetchone()[0]
    ids = [r[0] for r in con.execute(base + f"SELECT paper_id FROM listed ORDER BY {_PAPER_ORDER[sort]} LIMIT ? OFFSET ?",
                                     [*params, limit, offset]).fetchall()]
    found = paper_cards(con, ids)
    return PaperPage(total=int(total), offset=offset, limit=limit, sort=sort, items=[found[i] for i in ids if i in found])


# a name's key: accents stripped, lower case, letters and digits only ('Perlis, A. J.' = 'Perlis, A.J.')
_NAME_KEY = "regexp_replace(lower(strip_accents({})), '[^a-z0-9]', '', 'g')"


def author_profile(con, name: str, *, limit: int = 50) -> AuthorProfile:
    """The corpus papers of the author named ``name`` (see :class:`AuthorProfile` for how names are
    matched), their co-authors (most shared papers first) and years. UnknownPaper when no paper has
    that author."""
    if not isinstance(name, str) or not name.strip():
        raise UserError("the author name is empty")
    limit, _ = _limit(limit, 0)
    key = con.execute(f"SELECT {_NAME_KEY.format('?')}", [name.strip()]).fetchone()[0]
    by_key = f"SELECT paper_id, name FROM paper_authors WHERE {_NAME_KEY.format('name')} = ?"
    rows = con.execute(by_key, [key]).fetchall()
    asked = None
    if not rows:  # not a name as printed: the one author it names in part, if there is one
        key, asked = _author_named_in_part(con, name.strip()), name.strip()
        rows = con.execute(by_key, [key]).fetchall()
    spellings: dict[str, int] = {}
    for _, n in rows:
        spellings[n] = spellings.get(n, 0) + 1
    names = sorted(spellings, key=lambda n: (-spellings[n], n))
    pids = list(dict.fromkeys(p for p, _ in rows))
    found = paper_cards(con, pids)
    papers = sorted(found.values(), key=lambda c: (-(c.citation_count or 0), -(c.year or 0), c.title or ""))
    years: dict[int, int] = {}
    for c in papers:
        if c.year:
            years[c.year] = years.get(c.year, 0) + 1
    co = con.execute(f"""
        SELECT any_value(name) AS name, count(DISTINCT paper_id) AS n
        FROM paper_authors
        WHERE paper_id IN (SELECT unnest(?::VARCHAR[])) AND {_NAME_KEY.format('name')} <> ?
        GROUP BY {_NAME_KEY.format('name')} ORDER BY n DESC, name LIMIT 50""", [pids, key]).fetchall()
    return AuthorProfile(
        name=names[0], names=names, paper_count=len(papers), citation_count=sum(c.citation_count or 0 for c in papers),
        h_index=h_index([c.citation_count or 0 for c in papers]), first_year=min(years) if years else None,
        last_year=max(years) if years else None, years=[YearCount(y, n) for y, n in sorted(years.items())],
        coauthors=[NameCount(n, int(k)) for n, k in co], papers=papers[:limit], asked=asked)


def _names_in_part(con, typed: str) -> list[str]:
    """The printed author names that ``typed`` names in part (initials, either order; none for a single word, which
    the substring match covers): :func:`pipeline.query.author_names.names_match` on the names holding its longest
    word."""
    word = search_word(typed)
    if word is None:
        return []
    near = con.execute(f"SELECT DISTINCT name FROM paper_authors WHERE contains({_NAME_KEY.format('name')}, ?)",
                       [word]).fetchall()
    return [n for (n,) in near if names_match(typed, n)]


CANDIDATES_SHOWN = 5  # authors an ambiguous name's message names
CANDIDATES_LISTED = 50  # and its list holds (a common surname names thousands at arXiv's size)


def _author_named_in_part(con, name: str) -> str:
    """The name key of the one author whose printed name ``name`` matches in part (a surname alone, initials, either
    order: :func:`pipeline.query.author_names.names_match`). UnknownPaper when none does, AmbiguousName (the
    candidates, most papers first) when several do."""
    typed = name_parts(name)
    words = sorted({p for p in typed if len(p) > 1})  # one of them is the surname, printed whole
    found: list[tuple[str, str, int]] = []
    if words:  # the printed names holding one of the typed name's words, then each checked part by part
        holds = " OR ".join([f"contains({_NAME_KEY.format('name')}, ?)"] * len(words))
        for key, names, n in con.execute(f"""
                SELECT key, list(name ORDER BY k DESC, name), sum(k) FROM (
                    SELECT {_NAME_KEY.format('name')} AS key, name, count(DISTINCT paper_id) AS k FROM paper_authors
                    WHERE {holds} GROUP BY ALL)
                GROUP BY key""", words).fetchall():
            if any(names_match(name, n) for n in names):
                found.append((key, names[0], int(n)))
    if not found:
        raise UnknownPaper(f"no paper by an author named {name!r}")
    if len(found) > 1:
        found.sort(key=lambda f: (-f[2], f[1]))
        shown = [f"{printed} ({n} paper{'s' if n != 1 else ''})" for _, printed, n in found[:CANDIDATES_SHOWN]]
        more = f" and {len(found) - CANDIDATES_SHOWN} more" if len(found) > CANDIDATES_SHOWN else ""
        raise AmbiguousName(f"{name!r} names {len(found)} authors: {', '.join(shown)}{more}; give the name as printed",
                            [(printed, n) for _, printed, n in found[:CANDIDATES_LISTED]])
    return found[0][0]
