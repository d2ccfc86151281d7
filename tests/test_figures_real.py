"""Figure legends on the 10 real arXiv PDFs, checked against ../shared/data/arxiv/SOURCES.md."""

from __future__ import annotations

import re

import pymupdf
import pytest
from fulltext_sources import SOURCES_REGEX, alnum, read_pdf_table, squash

from pipeline.steps.fulltext import extract_pdf
from pipeline.sources.pdf.text import join_lines
from pipeline.sources.pdf.tounicode import repair_tounicode

_CACHE: dict = {}


@pytest.fixture(scope="module")
def facts(shared_data):
    rows = read_pdf_table(shared_data / "arxiv" / "SOURCES.md")
    assert len(rows) == 10, "SOURCES.md should list 10 PDFs"
    return {r.paper_id: r for r in rows}


def _extract(shared_data, fact, settings):
    if fact.paper_id not in _CACHE:
        data = (shared_data / "arxiv" / fact.file).read_bytes()
        _CACHE[fact.paper_id] = extract_pdf(data, fact.paper_id, settings)
    return _CACHE[fact.paper_id]


def _regex_lines(path):
    """(page, line) for every line the SOURCES.md regex matches in bare PyMuPDF text."""
    out = []
    with pymupdf.open(path) as doc:
        for page in doc:
            for line in page.get_text().splitlines():
                if SOURCES_REGEX.match(line):
                    out.append((page.number + 1, line))
    return out


PAPERS = ["1409.0473", "1410.5401", "1412.6980", "1505.04597", "1508.04025",
          "1512.03385", "1706.03762", "1810.04805", "2010.11929", "2306.03589"]


def test_sources_table_lists_the_papers_tested(facts):
    assert sorted(facts) == sorted(PAPERS)


@pytest.mark.parametrize("paper_id", PAPERS)
def test_figure_count_matches_sources(shared_data, facts, settings, paper_id):
    fact = facts[paper_id]
    ex = _extract(shared_data, fact, settings)
    assert ex.n_pages == fact.pages
    numbers = [f.number for f in ex.figures]
    assert len(ex.figures) == fact.figures, [f.text[:40] for f in ex.figures]
    assert numbers == sorted(set(numbers)), "one legend per figure number"
    assert numbers == list(range(1, fact.figures + 1))


@pytest.mark.parametrize("paper_id", PAPERS)
def test_legends_start_with_label_and_carry_full_text(shared_data, facts, settings, paper_id):
    fact = facts[paper_id]
    ex = _extract(shared_data, fact, settings)
    path = shared_data / "arxiv" / fact.file
    with pymupdf.open(path) as doc:
        repair_tounicode(doc)  # the characters as extraction reads them (a font's wrong map: tests/test_pdf_tounicode.py)
        for fig in ex.figures:
            assert fig.text.startswith(fig.label), fig.text[:40]
            assert re.fullmatch(r"(Figure|Fig\.) \d+", fig.label)
            assert fig.label.endswith(str(fig.number))
            # the caption's own block in bare PyMuPDF output, whole, is inside the legend: every
            # wrapped line is there (compared on letters and digits, so line joins do not matter)
            blocks = [b for b in doc[fig.page - 1].get_text("blocks") if b[6] == 0]
            starts = [k for k, b in enumerate(blocks) if alnum(b[4]).startswith(alnum(fig.label))
                      and alnum(fig.text).startswith(alnum(b[4].split("\n")[0]))]
            assert starts, f"no block on page {fig.page} starts like {fig.text[:40]!r}"
            k = starts[0]
            block_lines = [ln for ln in blocks[k][4].split("\n") if ln.strip()]
            assert alnum(fig.text).startswith(alnum(join_lines(block_lines))), fig.label
            if len(block_lines) > 1:  # wrapped or label alone on its line: more than the first line
                assert len(alnum(fig.text)) > len(alnum(block_lines[0]))
            # and a block right under it that has not ended its sentence continues the legend
            nxt = blocks[k + 1] if k + 1 < len(blocks) else None
            if nxt and not re.search(r"[.!?)\]]\s*$", blocks[k][4]) and 0 <= nxt[1] - blocks[k][3] < 3 \
                    and not SOURCES_REGEX.match(nxt[4]):
                assert alnum(nxt[4].split("\n")[0]) in alnum(fig.text), f"{fig.label} misses its continuation"
            assert len(fig.text) > len(fig.label) + 10
    # most legends end a sentence (U-Net's Fig. 2 really ends with "mirroring")
    ends = sum(bool(re.search(r"[.!?)\]”\"]$", f.text)) for f in ex.figures)
    assert ends >= len(ex.figures) - 1


@pytest.mark.parametrize("paper_id", PAPERS)
def test_in_body_false_positives_are_not_captions(shared_data, facts, settings, paper_id):
    fact = facts[paper_id]
    ex = _extract(shared_data, fact, settings)
    lines = _regex_lines(shared_data / "arxiv" / fact.file)
    assert len(lines) == fact.regex_lines, "same regex, same count as SOURCES.md"
    taken = []
    for page, line in lines:
        head = squash(line).rstrip("-")  # punctuation kept: "Figure 9." is not "Figure 9:"
        if any(f.page == page and squash(f.text).startswith(head) for f in ex.figures):
            taken.append(line)
    assert len(taken) == fact.figures
    assert len(lines) - len(taken) == fact.regex_lines - fact.figures
    body = squash(ex.body)
    for fp in fact.false_positives:
        assert not any(squash(f.text).startswith(fp) for f in ex.figures), fp
        assert fp in body, f"the in-body line {fp!r} should stay in the body text"


@pytest.mark.parametrize("paper_id", PAPERS)
def test_captions_are_not_in_body_and_stamp_is_dropped(shared_data, facts, settings, paper_id):
    fact = facts[paper_id]
    ex = _extract(shared_data, fact, settings)
    body = squash(ex.body)
    for fig in ex.figures:
        assert squash(fig.text)[:60] not in body, f"{fig.label} legend is also in the body"
    arxiv_id = fact.stamp.split()[0]
    pages_text = [p.get_text() for p in pymupdf.open(shared_data / "arxiv" / fact.file)]
    bare = "".join(pages_text)
    # running headers: a line of 20+ characters printed on at least half of the pages is not body text
    counts: dict[str, int] = {}
    for t in pages_text:
        for line in {squash(ln) for ln in t.splitlines() if len(ln.strip()) >= 20}:
            counts[line] = counts.get(line, 0) + 1
    for line, n in counts.items():
        if n >= max(3, len(pages_text) // 2):
            assert line not in body, f"running header {line!r} left in the body"
    assert f"arXiv:{arxiv_id}" in bare  # the stamp is in the PDF ...
    assert f"arXiv:{arxiv_id}" not in ex.body  # ... but not in our text
    for page in ex.pages:  # no paragraph of a page is that page's printed number
        if page["char_start"] is None:
            continue
        paragraphs = ex.body[page["char_start"]:page["char_end"]].split("\n\n")
        assert str(page["page"]) not in [p.strip() for p in paragraphs], f"page number {page['page']} left in the body"
    assert not [p for p in ex.body.split("\n\n") if re.fullmatch(r"[\d\s.,]+", p)], "number-only paragraphs left"
