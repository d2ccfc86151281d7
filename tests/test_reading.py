"""Reading the catalog (pipeline.query.reading): references, citing papers, lists, authors, Connected
Papers' prior and derivative works and the page's examples, on CACM's real citation links and on the
10 recorded arXiv PDFs' own bibliographies."""

from __future__ import annotations

from dataclasses import asdict

import duckdb
import pytest

from pipeline.errors import AmbiguousName, UnknownPaper, UserError
from pipeline.query import reading


def _catalog(settings):
    from pipeline import snapshots

    return snapshots.open_catalog(snapshots.resolve(settings.snapshots_dir, None))


@pytest.fixture(scope="module")
def cacm(cacm_snapshot):
    con = _catalog(cacm_snapshot)
    yield con
    con.close()


def _most_cited(con) -> str:
    return con.execute("SELECT paper_id FROM paper_metrics ORDER BY in_degree DESC, paper_id LIMIT 1").fetchone()[0]


def _all(fn, con, pid, **kw):
    """Every item of a listing, page by page."""
    items, offset = [], 0
    while True:
        page = fn(con, pid, limit=7, offset=offset, **kw)
        items += page.items
        offset += 7
        if offset >= page.total:
            return page.total, items


# ---- pure helpers ---------------------------------------------------------------------------------
def test_links_from_what_is_known():
    l = reading.make_links(arxiv_id="1706.03762", doi="10.5555/1", s2_id="a" * 40)
    assert l.arxiv == "https://arxiv.org/abs/1706.03762" and l.pdf == "https://arxiv.org/pdf/1706.03762"
    assert l.doi == "https://doi.org/10.5555/1" and l.s2 == "https://www.semanticscholar.org/paper/" + "a" * 40
    none = reading.make_links(s2_id="cacm:12", pdf_url="https://example.org/x.pdf")
    assert none.s2 is None and none.arxiv is None and none.pdf == "https://example.org/x.pdf"


def test_a_pdf_address_is_linked_only_when_it_is_http():
    """Issue 64: Semantic Scholar's openAccessPdf.url is data; any scheme reached the page's link chips' href."""
    for url in ("javascript:alert(document.domain)", "JavaScript:alert(1)", "data:text/html,<script>alert(1)</script>",
                "vbscript:x", "file:///etc/passwd", "//evil.example/x.pdf", "https://example.org/a b.pdf", " "):
        assert reading.make_links(pdf_url=url).pdf is None, url
    assert reading.make_links(pdf_url=" HTTP://example.org/x.pdf ").pdf == "HTTP://example.org/x.pdf"


def test_h_index_and_example_queries():
    assert reading.h_index([10, 8, 5, 4, 3]) == 4 and reading.h_index([]) == 0 and reading.h_index([0, 0]) == 0
    assert reading.example_query("Attention Is All You Need") == "attention is all you need"
    assert reading.example_query("BERT: Pre-training of Deep Bidirectional Transformers") is None  # one word
    assert reading.example_query("The Design of a Compiler for ALGOL 60") == "design of a compiler for algol"
    assert reading.pick_examples(["Sorting networks", "Sorting by merging", "Hash tables"]) == ["sorting networks", "hash tables"]


# ---- CACM: real citation links --------------------------------------------------------------------
def test_cited_by_lists_every_citing_paper_once(cacm):
    pid = _most_cited(cacm)
    in_degree = cacm.execute("SELECT in_degree FROM paper_metrics WHERE paper_id = ?", [pid]).fetchone()[0]
    total, items = _all(reading.cited_by, cacm, pid)
    assert total == in_degree == len(items) > 10
    assert len({i.paper_id for i in items}) == total and all(i.paper_id and i.title for i in items)
    counts = [i.citation_count or 0 for i in items]
    assert counts == sorted(counts, reverse=True)  # most cited first
    years = [i.year or 0 for i in reading.cited_by(cacm, pid, sort="year", limit=200).items]
    assert years == sorted(years, reverse=True)
    # each citing paper lists the paper among its references
    for citer in items[:5]:
        _, refs = _all(reading.references, cacm, citer.paper_id)
        assert pid in {r.paper_id for r in refs}
        assert all(r.source == "cacm" for r in refs)


def test_facts_counts_are_the_listings_totals(cacm):
    pid = _most_cited(cacm)
    facts = reading.paper_facts(cacm, pid)
    assert facts.cited_by_count == reading.cited_by(cacm, pid).total
    assert facts.reference_count == reading.references(cacm, pid).total
    assert facts.venue.startswith("CACM") and facts.published[:4].isdigit()
    assert facts.links == reading.Links()  # CACM knows no arXiv id, DOI or S2 id
    ext = cacm.execute("SELECT external_id FROM papers WHERE paper_id = ?", [pid]).fetchone()[0]
    assert reading.paper_facts(cacm, ext).paper_id == pid  # the collection's own number works too
    with pytest.raises(UnknownPaper):
        reading.references(cacm, "cacm:999999")
    with pytest.raises(UserError):
        reading.cited_by(cacm, pid, limit=0)
    with pytest.raises(UserError):
        reading.cited_by(cacm, pid, sort="pagerank")


def test_list_papers_sorts_filters_and_pages(cacm):
    by_cites = reading.list_papers(cacm, sort="citations", limit=50)
    assert by_cites.total == cacm.execute("SELECT count(*) FROM papers").fetchone()[0]
    counts = [p.citation_count or 0 for p in by_cites.items]
    assert counts == sorted(counts, reverse=True) and counts[0] > 10
    wirth = reading.list_papers(cacm, author="WIRTH", sort="date", limit=200)
    assert wirth.total == len(wirth.items) > 5
    assert all(any("wirth" in a.lower() for a in p.authors) for p in wirth.items)
    years = [p.year for p in wirth.items]
    assert years == sorted(years, reverse=True)
    window = reading.list_papers(cacm, year_from=1970, year_to=1971, limit=200)
    assert window.total and all(1970 <= p.year <= 1971 for p in window.items)
    paged = [p.paper_id for o in (0, 10, 20) for p in reading.list_papers(cacm, limit=10, offset=o).items]
    assert paged == [p.paper_id for p in reading.list_papers(cacm, limit=30).items]
    category = reading.examples(cacm).category
    in_category = reading.list_papers(cacm, category=category.upper(), limit=5)
    assert in_category.total == cacm.execute("SELECT count(*) FROM papers WHERE primary_category = ? "
                                             "OR list_contains(categories, ?)", [category, category]).fetchone()[0] > 0
    with pytest.raises(UserError):
        reading.list_papers(cacm, year_from=1971, year_to=1970)


def test_author_profile_joins_spellings(cacm):
    a = reading.author_profile(cacm, "perlis, a.j.")
    b = reading.author_profile(cacm, "Perlis, A. J.")
    assert a == b and len(a.names) >= 2  # 'Perlis, A. J.' and 'Perlis, A.J.' are one author
    n = cacm.execute("SELECT count(DISTINCT paper_id) FROM paper_authors "
                     "WHERE lower(replace(replace(name, ' ', ''), '.', '')) = 'perlis,aj'").fetchone()[0]
    assert a.paper_count == n == len(a.papers) and sum(y.count for y in a.years) == n
    assert a.h_index == reading.h_index([p.citation_count or 0 for p in a.papers])
    assert a.first_year <= a.last_year and a.coauthors
    assert all("perlis" not in c.name.lower() for c in a.coauthors)
    with pytest.raises(UnknownPaper):
        reading.author_profile(cacm, "Nobody, N.")


def test_the_papers_author_filter_takes_a_name_as_cited(cacm):
    """``paperkb papers --author`` matched a part of the printed name only: "A. J. Perlis" found nothing."""
    printed = reading.list_papers(cacm, author="Perlis, A. J.", limit=50)
    for typed in ("A. J. Perlis", "Alan J. Perlis"):
        got = reading.list_papers(cacm, author=typed, limit=50)
        assert got.total == printed.total == 10 and [p.paper_id for p in got.items] == [p.paper_id for p in printed.items]
    assert reading.list_papers(cacm, author="J. A. Perlis").total == 1  # the other Perlis
    assert reading.list_papers(cacm, author="X. Perlis").total == 0


def test_an_author_is_found_by_surname_or_initials_and_a_shared_surname_lists_its_authors(cacm):
    exact = reading.author_profile(cacm, "Dijkstra, E. W.")
    for typed in ("Dijkstra", "E. W. Dijkstra", "Edsger Dijkstra", "dijkstra, e."):
        found = reading.author_profile(cacm, typed)
        assert found.asked == typed and found.name == exact.name and found.papers == exact.papers
        assert found.coauthors == exact.coauthors  # the author's own spellings are not their co-authors
    assert exact.asked is None
    # CACM prints two authors named Perlis: the surname alone names both, their initials one each
    with pytest.raises(AmbiguousName) as many:
        reading.author_profile(cacm, "Perlis")
    assert many.value.candidates == [("Perlis, A. J.", 10), ("Perlis, J. A.", 1)]  # most papers first
    assert "names 2 authors: Perlis, A. J. (10 papers), Perlis, J. A. (1 paper)" in str(many.value)
    assert reading.author_profile(cacm, "A. J. Perlis").name.startswith("Perlis, A")
    assert reading.author_profile(cacm, "J. A. Perlis").name == "Perlis, J. A."
    smiths = cacm.execute("SELECT count(DISTINCT regexp_replace(lower(name), '[^a-z]', '', 'g')) FROM paper_authors "
                          "WHERE regexp_matches(name, '(^|[^A-Za-z])Smith([^A-Za-z]|$)')").fetchone()[0]
    with pytest.raises(AmbiguousName) as common:
        reading.author_profile(cacm, "Smith")
    assert len(common.value.candidates) == min(smiths, reading.CANDIDATES_LISTED) > reading.CANDIDATES_SHOWN
    assert f"names {smiths} authors" in str(common.value) and f"and {smiths - reading.CANDIDATES_SHOWN} more" in str(common.value)
    with pytest.raises(UnknownPaper) as none:
        reading.author_profile(cacm, "E. D. Knuth")  # his initials the other way round
    assert not isinstance(none.value, AmbiguousName)


def test_prior_and_derivative_works_count_the_neighbourhood(cacm):
    pid = _most_cited(cacm)
    rel = [r[0] for r in cacm.execute("SELECT related_work_id FROM related WHERE paper_id = ? ORDER BY rank LIMIT 20",
                                      [pid]).fetchall()]
    nodes = [pid, *rel]
    pd = reading.prior_and_derivative(cacm, nodes, limit=10)
    assert pd.papers == len(nodes) and pd.prior and pd.derivative
    for kind, near, far in (("prior", "citing_work_id", "cited_work_id"), ("derivative", "cited_work_id", "citing_work_id")):
        items = getattr(pd, kind)
        assert [i.count for i in items] == sorted((i.count for i in items), reverse=True)
        for i in items:
            n = cacm.execute(f"SELECT count(DISTINCT {near}) FROM citations WHERE {far} = ? "
                             f"AND {near} IN (SELECT unnest(?::VARCHAR[]))", [i.work_id, nodes]).fetchone()[0]
            assert i.count == n >= 2 and i.in_set == (i.work_id in nodes)


def test_citing_papers_are_read_from_cited_by_and_from_citations_in_a_snapshot_without_it(cacm, cacm_snapshot,
                                                                                          tmp_path):
    """``cited_by`` holds citations again, each file sorted by the work cited; the lookups by cited work read it (and
    ``reference_links_by_cited``), and in a snapshot published before them (no such views) they read ``citations``
    and ``reference_links``, with the same answers."""
    import os
    import shutil

    from pipeline import snapshots
    from pipeline.query.paper_detail import work_detail

    assert cacm.execute("SELECT count(*) FROM (SELECT * FROM citations EXCEPT ALL SELECT * FROM cited_by "
                        "UNION ALL SELECT * FROM cited_by EXCEPT ALL SELECT * FROM citations)").fetchone()[0] == 0
    view = cacm.execute("SELECT sql FROM duckdb_views() WHERE view_name = 'cited_by'").fetchone()[0]
    assert "catalog/cited_by/" in view
    # (and the catalog is opened with DuckDB's Parquet footer cache on: a snapshot's files never change)
    assert cacm.execute("SELECT current_setting('parquet_metadata_cache')").fetchone()[0] is True
    folder = snapshots.resolve(cacm_snapshot.snapshots_dir, None)
    old = tmp_path / folder.name
    shutil.copytree(folder / "catalog", old / "catalog", copy_function=os.link)
    shutil.copy(folder / snapshots.CATALOG, old / snapshots.CATALOG)
    with duckdb.connect(str(old / snapshots.CATALOG)) as con:
        con.execute("DROP VIEW cited_by")
        con.execute("DROP VIEW reference_links_by_cited")
    pid = _most_cited(cacm)
    work = cacm.execute("SELECT cited_work_id FROM citations GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1").fetchone()[0]
    nodes = [pid, *[r[0] for r in cacm.execute("SELECT related_work_id FROM related WHERE paper_id = ? ORDER BY rank "
                                               "LIMIT 20", [pid]).fetchall()]]
    con = snapshots.open_catalog(old)
    try:
        for gone in ("cited_by", "reference_links_by_cited"):
            with pytest.raises(duckdb.CatalogException):
                con.execute(f"SELECT 1 FROM {gone}")
        for a, b in ((reading.cited_by(cacm, pid, limit=50), reading.cited_by(con, pid, limit=50)),
                     (reading.paper_facts(cacm, pid), reading.paper_facts(con, pid)),
                     (reading.prior_and_derivative(cacm, nodes), reading.prior_and_derivative(con, nodes)),
                     (work_detail(cacm, work), work_detail(con, work)),
                     (reading.work_cards(cacm, [work, "nope"]), reading.work_cards(con, [work, "nope"]))):
            assert a == b and a
        assert reading.cited_by(con, pid).total > 10
    finally:
        con.close()


def test_examples_come_from_the_catalog(cacm):
    ex = reading.examples(cacm)
    assert ex.papers == 3204 and len(ex.queries) == 3 and ex.paper_id.startswith("cacm:")
    import re

    titles = [set(re.findall(r"\w+", t.lower())) for (t,) in cacm.execute("SELECT title FROM papers WHERE title IS NOT NULL").fetchall()]
    assert all(any(set(q.split()) <= t for t in titles) for q in ex.queries)
    assert ex.author and ex.year_min == 1958 and ex.year_max == 1979


def test_cards_for_papers_and_works(cacm):
    cards = reading.cards(cacm, ["cacm:1", "cacm:2", "nope"])
    assert set(cards) == {"cacm:1", "cacm:2"} and cards["cacm:1"].title


# ---- the 10 arXiv PDFs: references as printed -----------------------------------------------------
@pytest.fixture(scope="module")
def pdfs(pdf_library):
    """The 10 PDFs imported, extracted and the graph computed (no Semantic Scholar, no vectors; tests/conftest.py's
    ``pdf_library``, built once per run); the warehouse holds the catalog's tables."""
    settings, _summary = pdf_library
    con = duckdb.connect(str(settings.db_path), read_only=True)
    yield con
    con.close()


def test_pdf_references_in_printed_order_with_their_matches(pdfs):
    total, refs = _all(reading.references, pdfs, "1706.03762")
    printed = pdfs.execute("SELECT count(*) FROM paper_references WHERE paper_id = '1706.03762'").fetchone()[0]
    assert total == len(refs) >= printed > 20
    assert [r.ordinal for r in refs[:printed]] == list(range(printed))
    assert all(r.raw and r.page for r in refs[:printed])
    corpus = {r.paper_id for r in refs if r.paper_id}
    assert {"1409.0473", "1412.6980", "1508.04025", "1512.03385"} <= corpus  # tests/test_paper_parts.py TRUE_EDGES
    adam = next(r for r in refs if r.paper_id == "1412.6980")
    assert adam.links.arxiv == "https://arxiv.org/abs/1412.6980" and adam.title and adam.method != "unmatched"
    unmatched = [r for r in refs if r.method == "unmatched"]
    assert unmatched and all(r.raw and r.paper_id is None for r in unmatched)
    by_year = [r.year or 0 for r in reading.references(pdfs, "1706.03762", sort="year", limit=200).items]
    assert by_year == sorted(by_year, reverse=True)


def test_references_and_citing_papers_say_where_the_text_cites_them(pdfs):
    """Each printed entry of a reference list carries the sentences of the paper that cite it (numbered lists by
    their number, author-year lists by surname and year, 2014a and 2014b told apart), and each citing paper the
    sentences of its text that cite the paper: what Semantic Scholar shows as citation contexts."""
    import re

    from pipeline.query.contexts import cited_numbers

    refs = reading.references(pdfs, "1409.0473", limit=200).items  # author-year: "Cho et al. (2014a)"
    printed = [r for r in refs if r.raw]
    assert sum(bool(r.contexts) for r in printed) >= 0.8 * len(printed)
    cho = {r.raw: r.contexts for r in printed if r.raw.startswith("Cho, K.")}
    for raw, found in cho.items():
        letter = re.search(r"\(2014([ab])\)", raw).group(1)
        assert len(cho) == 2 and found and all(f"Cho et al. (2014{letter})" in c.text or f"Cho et al., 2014{letter}" in c.text
                             for c in found), (raw, found)
    assert all(c.page and c.section for r in printed for c in r.contexts)
    assert all(r.mentions == (len(r.contexts) if r.mentions < 3 else r.mentions) and (r.mentions > 0) == bool(r.contexts)
               for r in printed)
    seq2seq = next(r for r in printed if r.raw.startswith("Sutskever, I., Vinyals, O., and Le, Q. (2014)"))
    assert seq2seq.mentions >= 5 and len(seq2seq.contexts) == 3  # how often the text cites it; its first three
    assert all(r.mentions is None for r in refs if not r.raw)  # no printed entry: nothing read
    # the references the paper's own text cites most, first, page by page
    most = reading.references(pdfs, "1409.0473", sort="mentions", limit=200)
    assert most.total == len(refs) and sorted(r.work_id or r.raw for r in most.items) == sorted(r.work_id or r.raw for r in refs)
    counts = [r.mentions or 0 for r in most.items]
    assert counts == sorted(counts, reverse=True) and counts[0] == max(r.mentions or 0 for r in printed) >= 5
    pages = [r.raw for o in (0, 10, 20) for r in reading.references(pdfs, "1409.0473", sort="mentions", limit=10, offset=o).items]
    assert pages == [r.raw for r in most.items][:30]
    with pytest.raises(UserError, match="sort"):
        reading.cited_by(pdfs, "1409.0473", sort="mentions")
    numbered = reading.references(pdfs, "1706.03762", limit=200).items  # "[1] Jimmy Lei Ba ... Layer normalization"
    layer_norm = next(r for r in numbered if r.raw and r.raw.startswith("[1] "))
    assert layer_norm.contexts and all(re.search(r"\[1\]", c.text) for c in layer_norm.contexts)
    assert "layer normalization [1]" in layer_norm.contexts[0].text
    # no context is the reference list itself
    assert not any(c.text.startswith("[") for r in numbered for c in r.contexts)
    # cited by: where the Transformer and Luong et al. cite Bahdanau et al.
    citers = {r.paper_id: r.contexts for r in reading.cited_by(pdfs, "1409.0473", limit=50).items}
    assert any(2 in cited_numbers(c.text)
               for c in citers["1706.03762"])
    assert citers["1508.04025"] and all("Bahdanau et al." in c.text for c in citers["1508.04025"])


def test_pdf_cited_by_facts_and_sections(pdfs):
    citers = {i.paper_id for i in reading.cited_by(pdfs, "1706.03762", limit=50).items}
    assert {"1810.04805", "2010.11929"} <= citers
    facts = reading.paper_facts(pdfs, "1706.03762")
    assert facts.links.arxiv == "https://arxiv.org/abs/1706.03762" and facts.links.pdf.endswith("/pdf/1706.03762")
    assert facts.bylines[0].name == "Ashish Vaswani"
    assert facts.sections and all(s.page_start and s.page_end >= s.page_start for s in facts.sections)
    assert any(s.role == "references" for s in facts.sections)
    pd = reading.prior_and_derivative(pdfs, [r[0] for r in pdfs.execute("SELECT paper_id FROM papers").fetchall()])
    assert "1409.0473" in {p.paper_id for p in pd.prior}  # cited by three of the ten


def test_the_author_filter_takes_a_name_with_or_without_its_accents(pdfs):
    """``paperkb papers --author velickovic`` found nothing for "Petar Veličković"; only the name-in-part match (of two
    words or more) folded accents."""
    for typed in ("velickovic", "Veličković", "VELICKOVIC", "P. Velickovic"):
        assert [p.paper_id for p in reading.list_papers(pdfs, author=typed).items] == ["2306.03589"], typed
    assert reading.list_papers(pdfs, author="kaiser").total == 1 and reading.list_papers(pdfs, author="?!").total == 0  # punctuation alone is no key


def test_a_paper_is_found_by_what_people_paste_for_it(pdfs):
    """``paperkb show arXiv:1706.03762`` (or its version, its arXiv address, its title) said "unknown paper id"; every
    reader of ids (show, related, recommend, path, exports, the API, MCP) goes through resolve_ids."""
    from pipeline.query.records import resolve_ids

    for typed in ("1706.03762", "arXiv:1706.03762", "1706.03762v5", "https://arxiv.org/abs/1706.03762",
                  "https://arxiv.org/pdf/1706.03762v7", "10.48550/arXiv.1706.03762", "Attention Is All You Need",
                  "attention is all you need."):
        assert resolve_ids(pdfs, [typed]) == [("paper", "1706.03762")], typed
    assert reading.paper_facts(pdfs, "https://arxiv.org/abs/1810.04805v2").paper_id == "1810.04805"
    # works the papers cite, outside the corpus: by their arXiv id or DOI in any of these forms
    cited = pdfs.execute("SELECT work_id, arxiv_id FROM works WHERE paper_id IS NULL AND arxiv_id IS NOT NULL "
                         "ORDER BY work_id LIMIT 1").fetchone()
    assert resolve_ids(pdfs, [f"https://arxiv.org/abs/{cited[1]}v2"]) == [("work", cited[0])]
    work, d = pdfs.execute("SELECT work_id, doi FROM works WHERE paper_id IS NULL AND doi IS NOT NULL "
                           "ORDER BY work_id LIMIT 1").fetchone()
    assert resolve_ids(pdfs, [f"https://doi.org/{d.upper()}"]) == [("work", work)]
    # several forms of one paper are one paper; what names nothing is still an unknown id
    assert resolve_ids(pdfs, ["arXiv:1706.03762", "1706.03762", "1409.0473v7"]) == [("paper", "1706.03762"),
                                                                                   ("paper", "1409.0473")]
    with pytest.raises(UnknownPaper, match="'arXiv:1234.56789'"):
        resolve_ids(pdfs, ["arXiv:1234.56789"])
    with pytest.raises(UnknownPaper, match="'Attention Is Most of What You Need'"):
        resolve_ids(pdfs, ["Attention Is Most of What You Need"])
    from pipeline.query.paths import shortest_paths

    pasted = shortest_paths(pdfs, "BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding",
                            "https://arxiv.org/abs/1706.03762v5")
    assert (pasted.source, pasted.target, pasted.length) == ("1810.04805", "1706.03762", 1)


def test_show_tells_what_is_known_of_a_cited_work_outside_the_corpus(pdfs):
    """``paperkb show arXiv:1610.10099`` (a paper the Transformer cites, not one of the ten) said only that it is "a
    cited work outside the corpus"; it shows what the references say of it and the papers citing it now."""
    from pipeline.cli.paper_views import work_lines
    from pipeline.query.paper_detail import work_detail
    from pipeline.query.records import resolve_ids

    (kind, work), = resolve_ids(pdfs, ["https://arxiv.org/abs/1610.10099v2"])
    assert (kind, work) == ("work", "arxiv:1610.10099")
    detail = work_detail(pdfs, work, top=5)
    assert detail["work"]["title"] == "Neural machine translation in linear time" and detail["work"]["year"] == 2017
    assert [c["paper_id"] for c in detail["cited_by"]["items"]] == ["1706.03762"] == \
        [c.paper_id for c in reading.cited_by(pdfs, work).items]
    lines = work_lines(detail, 80)
    assert lines[0] == "Neural machine translation in linear time (2017)"
    assert "arxiv: https://arxiv.org/abs/1610.10099" in lines and "Cited by: 1" in lines
    assert any("1706.03762" in line for line in lines) and max(map(len, lines)) <= 80
    krizhevsky = pdfs.execute("SELECT work_id FROM works WHERE title ILIKE 'imagenet classification with deep%' "
                              "AND paper_id IS NULL").fetchone()[0]
    shown = work_detail(pdfs, krizhevsky, top=2)["cited_by"]
    assert shown["total"] >= 3 and len(shown["items"]) == 2  # the top two of all its citers, the total said
    # how the citing papers print it, and the works cited together with it (by at least two of its citers)
    assert detail["printed"]["total"] == 1 and detail["printed"]["items"][0]["paper_id"] == "1706.03762"
    assert "Neural machine translation in linear time" in detail["printed"]["items"][0]["raw"]
    assert "As printed: 1" in lines and not any(line.startswith("Cited together") for line in lines)
    seq2seq = work_detail(pdfs, "arxiv:1409.3215", top=3)
    citers = [c.paper_id for c in reading.cited_by(pdfs, "arxiv:1409.3215", limit=50).items]
    assert seq2seq["cited_with"]["citing"] == len(citers) >= 3 and seq2seq["printed"]["total"] >= 3
    for other in seq2seq["cited_with"]["items"]:
        assert other["count"] == sum(other["work_id"] in {r.work_id for r in reading.references(pdfs, c, limit=200).items}
                                     for c in citers) >= 2
    lines = work_lines(seq2seq, 80)
    assert "As printed: 4 (top 3 citing papers by citations)" in lines and max(map(len, lines)) <= 80
    together = lines.index(f"Cited together with it (by the most of the {len(citers)} papers citing it):")
    assert len(lines) - together - 1 == 2 * len(seq2seq["cited_with"]["items"]) > 0


def test_a_cited_work_exports_with_the_authors_its_citing_papers_print(pdfs):
    """A work only reference lists name exported without authors (``@misc{2014sequence, ...}``) and, for one with no
    arXiv id or DOI, with a Semantic Scholar address made of its own id (``.../paper/ref:f4a7...``), a dead link."""
    from pipeline.exports import cite_keys, to_bibtex, to_ris
    from pipeline.query.records import bib_records

    seq2seq, = bib_records(pdfs, ["arXiv:1409.3215"])
    assert seq2seq.authors[0].endswith("Sutskever") and len(seq2seq.authors) == 3 and seq2seq.source == "pdf"
    assert cite_keys([seq2seq]) == ["sutskever2014sequence"] and "author = {" in to_bibtex([seq2seq])
    lstm = pdfs.execute("SELECT work_id FROM works WHERE work_id LIKE 'ref:%' AND title ILIKE 'long short-term memory' "
                        "AND doi IS NULL AND arxiv_id IS NULL").fetchone()[0]
    record, = bib_records(pdfs, [lstm])
    assert record.url is None and "semanticscholar" not in to_ris([record]) and record.authors


def test_show_prints_each_figure_legend_once_with_its_page(pdfs):
    """A legend is stored as printed ("Figure 1: The Transformer ..."); ``paperkb show`` printed its label twice more
    ("Figure 1 1 (p. 3): Figure 1: The Transformer ...")."""
    from pipeline.cli.paper_views import legend_line

    rows = pdfs.execute("SELECT label, number, page, text FROM figures WHERE paper_id = '1706.03762' ORDER BY number").fetchall()
    assert len(rows) == 5
    for label, number, page, text in rows:
        line = legend_line({"label": label, "number": number, "page": page, "text": text})
        assert line.startswith(f"Figure {number} (p. {page}): ") and line.count(f"Figure {number}") == 1, line
        assert line.endswith(" ".join(text.split())[len(label):].lstrip(" :")[-30:])
    assert legend_line({"label": "Figure 1", "number": 1, "page": 3, "text": "Figure 1: The Transformer - model architecture."}) \
        == "Figure 1 (p. 3): The Transformer - model architecture."
    assert legend_line({"label": None, "number": 2, "page": None, "text": "A legend without its label"}) == "Figure 2: A legend without its label"


def test_show_marks_a_figure_legend_it_cuts_short(pdfs):
    """``paperkb show`` gives each figure two lines; a longer legend ended mid-sentence with nothing to say so
    ("... and feed the resulting sequence of vectors to a standard")."""
    from pipeline.cli.paper_views import show_lines

    facts = reading.paper_facts(pdfs, "2010.11929").to_dict()
    figures = [{"label": label, "number": number, "page": page, "text": text} for label, number, page, text in pdfs.execute(
        "SELECT label, number, page, text FROM figures WHERE paper_id = '2010.11929' ORDER BY number").fetchall()]
    lines = show_lines({"title": "ViT"}, facts, [], [], figures, {}, 80)
    shown = lines[lines.index("Figures: 14") + 1:][:10]
    firsts = [i for i, line in enumerate(shown) if line.startswith("  Figure ")]
    assert len(firsts) == 5 and max(map(len, shown)) <= 80
    entries = [shown[a:b] for a, b in zip(firsts, firsts[1:] + [len(shown)])]
    for entry, fig in zip(entries, figures):
        whole = " ".join(fig["text"].split())
        if len(" ".join(entry)) < len(whole):  # cut short: said so, after whole words
            assert len(entry) == 2 and entry[1].endswith(" …"), entry
        else:
            assert not entry[-1].endswith("…")
    assert any(e[-1].endswith(" …") for e in entries)  # Figure 1's legend is three lines long


def test_a_papers_full_text_says_which_pdf_its_passages_come_from(pdfs, cacm):
    """``paper_facts`` (what ``paperkb show``, the page and MCP's get_paper show): the pages, the arXiv version and
    the day of the PDF read, as ``fulltext_docs`` holds them; none for a paper without a PDF."""
    from pipeline.cli.paper_views import full_text_line

    ft = reading.paper_facts(pdfs, "1706.03762").full_text
    n_pages, read_at = pdfs.execute("SELECT n_pages, CAST(CAST(extracted_at AS DATE) AS VARCHAR) FROM fulltext_docs "
                                    "WHERE paper_id = '1706.03762'").fetchone()
    assert ft is not None and (ft.status, ft.pages, ft.read_at, ft.arxiv_version) == ("ok", n_pages, read_at, None)
    assert full_text_line(reading.paper_facts(pdfs, "1706.03762").to_dict()["full_text"]) \
        == f"full text: {n_pages} pages of the PDF, read {read_at}"
    assert full_text_line({"status": "ok", "pages": 12, "arxiv_version": 3, "read_at": "2026-11-29"}) \
        == "full text: 12 pages of arXiv v3, read 2026-11-29"
    rejected = reading.FullText("rejected", "http_404", None, 4, None)
    assert full_text_line(asdict(rejected)) == "full text: arXiv v4 not used: no PDF at its address (HTTP 404)"
    assert [reading.rejection_words(r) for r in ("http_503", "encrypted", None)] \
        == ["its server answered HTTP 503", "the PDF is password-protected", "rejected"]
    assert reading.paper_facts(cacm, "cacm:1785").full_text is None  # abstracts only
