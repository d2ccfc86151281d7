"""The ids people paste for a paper (arXiv ids with a prefix, a version or as an address, DOIs, Semantic Scholar
pages), read as the catalog keys them."""

import pytest

from pipeline.query.id_forms import arxiv_id, doi, s2_paper, title_key


@pytest.mark.parametrize("typed", [
    "1706.03762", "arXiv:1706.03762", "arxiv: 1706.03762", "1706.03762v5", "arXiv:1706.03762v7",
    "https://arxiv.org/abs/1706.03762", "https://arxiv.org/abs/1706.03762v5", "http://export.arxiv.org/abs/1706.03762",
    "https://arxiv.org/pdf/1706.03762", "https://arxiv.org/pdf/1706.03762v7.pdf", "arxiv.org/abs/1706.03762/",
    "https://arxiv.org/html/1706.03762v7", "10.48550/arXiv.1706.03762", "https://doi.org/10.48550/arXiv.1706.03762",
    "  1706.03762  ",
])
def test_the_forms_of_an_arxiv_id(typed):
    assert arxiv_id(typed) == "1706.03762" and doi(typed) is None


def test_old_style_and_five_digit_arxiv_ids():
    assert arxiv_id("hep-th/9901001v2") == "hep-th/9901001"
    assert arxiv_id("arXiv:math.AG/0601001") == "math/0601001"  # the subject class is not part of the id
    assert arxiv_id("https://arxiv.org/abs/astro-ph/0601001") == "astro-ph/0601001"
    assert arxiv_id("2306.03589") == "2306.03589" and arxiv_id("arXiv:1501.00001v1") == "1501.00001"


@pytest.mark.parametrize("typed", ["cacm:1785", "1706.037", "17060.3762", "Attention Is All You Need", "",
                                   "https://example.org/abs/1706.03762", "10.1145/361002.361007"])
def test_not_an_arxiv_id(typed):
    assert arxiv_id(typed) is None


def test_dois_and_semantic_scholar_pages():
    for typed in ("10.1145/361002.361007", "doi:10.1145/361002.361007", "DOI: 10.1145/361002.361007",
                  "https://doi.org/10.1145/361002.361007", "http://dx.doi.org/10.1145/361002.361007",
                  "10.1145/361002.361007."):
        assert doi(typed) == "10.1145/361002.361007", typed
    assert doi("10.1103/PhysRevC.76.024606") == "10.1103/physrevc.76.024606"  # DOIs are case-insensitive
    assert doi("cacm:1785") is None and doi("10.48550/arXiv.1706.03762") is None
    hexid = "204e3073870fae3d05bcbc2f6a8e263d9b72e776"
    for typed in (f"https://www.semanticscholar.org/paper/Attention-is-All-you-Need-Vaswani-Shazeer/{hexid}",
                  f"https://www.semanticscholar.org/paper/{hexid}", f"semanticscholar.org/paper/x/{hexid.upper()}?sort=1"):
        assert s2_paper(typed) == hexid, typed
    assert s2_paper(hexid) is None and s2_paper("https://www.semanticscholar.org/author/123") is None
    assert title_key("  Attention  is all you NEED. ") == "attention is all you need"
