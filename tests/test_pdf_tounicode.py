"""Fonts whose ToUnicode map contradicts their own glyph names are read by the names (pipeline/sources/pdf/tounicode.py).

On the real PDFs: arXiv 1412.6980 (Adam) carries TeX's math fonts with a map from another font's table (theta as
U+2713, alpha as U+21B5, nabla as "r"); its extracted text now reads its algorithm as written, and no other PDF of
the ten has a font repaired. The CMap reading and writing are checked on their own.
"""

from __future__ import annotations

import time

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


# ---- issue 64: a map is anyone's input -----------------------------------------------------------------------------
def _in_time(seconds: float, fn, *args):
    """``fn(*args)``'s value (or the exception it raised), failing the test when it takes longer than ``seconds``
    (it is left to run in a daemon thread: a map read the old way took minutes, or had no end)."""
    import threading

    done: dict = {}

    def run():
        try:
            done["value"] = fn(*args)
        except Exception as exc:  # noqa: BLE001 - returned to the test
            done["value"] = exc

    t = threading.Thread(target=run, daemon=True)
    t0 = time.perf_counter()
    t.start()
    t.join(seconds)  # (returns late when the thread holds the GIL in one long call, such as a regex's)
    took = time.perf_counter() - t0
    assert not t.is_alive() and took <= seconds, f"{fn.__name__}: {took:.1f} s, more than {seconds} s"
    return done["value"]


def _open_and_read(data: bytes) -> str:
    doc = open_pdf(data)
    try:
        return doc[0].get_text()
    finally:
        doc.close()


@pytest.mark.parametrize("cmap", ["MILLION_CODE_RANGES", "UNCLOSED_BFCHAR"])
def test_a_hostile_map_of_a_few_kilobytes_is_read_in_a_moment(cmap):
    import pdf_builders

    source = getattr(pdf_builders, cmap)
    data = pdf_builders.pdf_with_tounicode(source)
    assert len(data) < 1400  # issue 64's sizes: 1,059 and 1,350 bytes
    # the PDF opens (the map read, refused or empty, then left to MuPDF) and reads by the glyph names
    assert _in_time(5, _open_and_read, data).strip() == "αβγ"  # was: 240 s with no end, and 23 s
    entries = _in_time(2, cmap_entries, source.decode("latin-1"))

    from pipeline.sources.pdf.tounicode import CMapRefused

    if cmap == "MILLION_CODE_RANGES":  # 2,000 ranges of a million codes: 256 each, and refused past 65,536
        assert isinstance(entries, CMapRefused) and "more than 65536 codes" in str(entries)
        with pytest.raises(CMapRefused, match="above 0xff"):  # a simple font's map: refused at its first code
            cmap_entries(source.decode("latin-1"), max_code=0xFF)
    else:
        assert entries == {}
    # linear: four times the unclosed blocks (960 kB, under the 1 MiB a map may have) cost no more than a moment
    assert _in_time(2, cmap_entries, (pdf_builders.UNCLOSED_BFCHAR * 4).decode("latin-1")) == {}


def test_a_map_is_read_in_one_pass_within_its_bounds():
    # a range covers one last byte (the CMap spec's rule): <0000> <FFFF> is <0000> <00FF>
    assert cmap_entries("1 beginbfrange\n<0000> <FFFF> <0041>\nendbfrange") == {i: chr(0x41 + i) for i in range(256)}
    # an unclosed block ends at the next operator; what follows is read
    assert cmap_entries("beginbfchar\n" * 1000 + "1 beginbfchar\n<21> <03B1>\nendbfchar\n") == {0x21: "α"}
    assert cmap_entries("1 beginbfrange\n<21> <22> [<03B1> <03B2> <03B3>\n1 beginbfchar\n<23> <03B3>\nendbfchar") == {0x23: "γ"}
    # skipped: ranges out of order, source codes wider than 4 bytes, destinations longer than 512 bytes
    odd = ("3 beginbfchar\n<0000000021> <0041>\n<22> <" + "0041" * 257 + ">\n<23> <0043>\nendbfchar\n"
           "1 beginbfrange\n<30> <2F> <0041>\nendbfrange\n")
    assert cmap_entries(odd) == {0x23: "C"}
    from pipeline.sources.pdf.tounicode import MAX_CMAP_BYTES, CMapRefused

    with pytest.raises(CMapRefused, match="bytes"):
        cmap_entries(" " * (MAX_CMAP_BYTES + 1))
    # later entries over earlier ones, in the order of the map
    assert cmap_entries("1 beginbfrange\n<21> <22> <0041>\nendbfrange\n1 beginbfchar\n<22> <03B2>\nendbfchar") == \
        {0x21: "A", 0x22: "β"}


def test_a_compressed_map_that_would_fill_the_memory_is_never_decoded_whole():
    import tracemalloc

    import pymupdf
    from pdf_builders import pdf_with_tounicode

    bomb = b"1 beginbfchar\n<21> <03B1>\nendbfchar\n" + b" " * 50_000_000  # 50 MB of spaces: 50 kB compressed
    data = pdf_with_tounicode(bomb)
    assert len(data) < 100_000
    tracemalloc.start()
    try:
        text = _open_and_read(data)  # the repair reads the map: at most 1 MiB of it is ever decoded
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20_000_000, peak  # was: the whole 50 MB stream, then a 50 MB string of it
    assert text.strip() == "αβγ"
    from pipeline.sources.pdf.tounicode import CMapRefused, cmap_text

    doc = pymupdf.open(stream=data, filetype="pdf")
    try:
        with pytest.raises(CMapRefused, match="more than 1048576 bytes"):
            cmap_text(doc, 6)
    finally:
        doc.close()
