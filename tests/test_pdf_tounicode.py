"""Fonts whose ToUnicode map contradicts their own glyph names are read by the names (pipeline/sources/pdf/tounicode.py).

On the real PDFs: arXiv 1412.6980 (Adam) carries TeX's math fonts with a map from another font's table (theta as
U+2713, alpha as U+21B5, nabla as "r"); its extracted text now reads its algorithm as written, and no other PDF of
the ten has a font repaired. The CMap reading and writing are checked on their own.
"""

from __future__ import annotations

import pytest

from pipeline.sources.pdf.text import layout, open_pdf
from pipeline.sources.pdf.tounicode import cmap_entries, corrected, differences, repair_tounicode, write_cmap

BOGUS = "✓↵✏⇤⌘◆"  # what the Adam PDF's map gave for theta, alpha, epsilon, asteriskmath, big parentheses


@pytest.fixture(scope="module")
def pdfs(shared_data):
    folder = shared_data / "arxiv" / "pdf"
    found = sorted(folder.glob("*.pdf"))
    if not found:
        pytest.skip(f"no PDFs under {folder}")
    return {p.stem: p.read_bytes() for p in found}


def _text(data: bytes) -> str:
    doc = open_pdf(data)
    try:
        return "\n".join(b.text for b in layout(doc).blocks())
    finally:
        doc.close()


def test_only_the_fonts_that_contradict_their_glyph_names_are_repaired(pdfs):
    import pymupdf

    repaired = {}
    for stem, data in pdfs.items():
        doc = pymupdf.open(stream=data, filetype="pdf")
        repaired[stem] = sorted(name.split("+")[-1] for name in repair_tounicode(doc))
        doc.close()
    assert repaired.pop("1412.6980") == ["CMEX10", "CMMI10", "CMMI7", "CMR10", "CMSY10", "CMSY6", "CMSY7"]
    assert all(not names for names in repaired.values()), repaired


def test_the_adam_papers_algorithm_reads_as_written(pdfs):
    text = _text(pdfs["1412.6980"])
    assert "gt ←∇θft(θt−1)" in text  # was "gt r✓ft(✓t−1)": nabla as "r", theta as a check mark, no arrow
    assert "mt ←β1 · mt−1 + (1 −β1) · gt" in text  # beta and the arrows were mapped to nothing
    assert text.count("θ") > 100 and text.count("α") > 50
    assert not any(c in text for c in BOGUS)


def test_a_pdf_without_such_fonts_reads_the_same(pdfs):
    import pymupdf

    data = pdfs["1706.03762"]
    doc = pymupdf.open(stream=data, filetype="pdf")  # MuPDF alone, no repair
    try:
        plain = "\n".join(b.text for b in layout(doc).blocks())
    finally:
        doc.close()
    assert _text(data) == plain


def test_cmaps_and_encodings_are_read_and_written():
    cmap = ("2 beginbfchar\n<21> <21B5>\n<22> <0000>\nendbfchar\n2 beginbfrange\n<23> <24> <0041>\n"
            "<25> <26> [<0066006C> <03B8>]\nendbfrange\n")
    entries = cmap_entries(cmap)
    assert entries == {0x21: "↵", 0x22: "\x00", 0x23: "A", 0x24: "B", 0x25: "fl", 0x26: "θ"}
    assert cmap_entries(write_cmap(entries).decode("ascii")) == entries
    assert differences("<< /Type /Encoding /Differences [ 33 /alpha /beta 40 /nabla ] >>") == \
        {33: "alpha", 34: "beta", 40: "nabla"}
    names = {0x21: "alpha", 0x22: "beta", 0x25: "f_l", 0x27: "g12"}
    fixed = corrected(names, {0x21: "↵", 0x22: "\x00", 0x25: "fl", 0x27: "q"})
    # contradicted everywhere it can be checked: the names win; a ligature and an unknown name keep the map's
    assert fixed == {0x21: "α", 0x22: "β", 0x25: "fl", 0x27: "q"}
    assert corrected(names, {0x21: "α", 0x22: "\x00"}) is None  # agrees with one name: a sound map, kept
    assert corrected({0x27: "g12"}, {0x27: "q"}) is None  # nothing to check it against
