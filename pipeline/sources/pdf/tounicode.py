"""Repair a font's ToUnicode map that contradicts the font's own glyph names, before MuPDF reads the text.

Some PDFs carry TeX's math fonts with an explicit encoding (``/Differences [33 /alpha /beta /epsilon1 /theta ...]``)
and a ToUnicode CMap made from another font's table: arXiv 1412.6980 (Adam) maps CMMI10's ``theta`` to U+2713 (✓),
``alpha`` to U+21B5 (↵), ``beta`` to nothing, and CMSY10's ``nabla`` to ``r``, ``infinity`` to ``1``, ``radical`` to
``p``. MuPDF trusts ToUnicode, so its text read "r✓ft(✓t−1)" for ∇θ f_t(θ_{t−1}) in every passage, title and
search. The glyph names say what each code is. A font's map is replaced only when it contradicts every glyph name
it can be checked against (a name the Adobe Glyph List or :data:`TEX_NAMES` knows, a code mapped to one character):
a sound map agrees with its letters, and a map that is wrong everywhere is not a spelling choice. Codes whose name
is unknown, and ligatures (one code, several characters), keep what the map says. The PDF's bytes are not
changed: the document is repaired in memory (a new ToUnicode stream for that font), and only the text read from
it differs. On the 10 real PDFs of ``../shared/data``, the seven TeX fonts of one PDF are repaired and no other (tests).
"""

from __future__ import annotations

import logging
import re

import pymupdf

log = logging.getLogger(__name__)

# glyph names of TeX's Computer Modern math fonts that the Adobe Glyph List lacks (fontTools.agl knows the others:
# alpha, theta, nabla, infinity, element, radical, asteriskmath, ...); the variant letters TeX names with a 1
TEX_NAMES = {
    "epsilon1": "\u03b5", "theta1": "\u03d1", "pi1": "\u03d6", "rho1": "\u03f1", "sigma1": "\u03c2",
    "phi1": "\u03c6", "circledot": "\u2299", "bardbl": "\u2016", "negationslash": "\u0338",
    "latticetop": "\u22a4", "perpendicular": "\u22a5", "turnstileleft": "\u22a2", "turnstileright": "\u22a3",
    "angbracketleft": "\u27e8", "angbracketright": "\u27e9", "minusplus": "\u2213", "periodcentered": "\u00b7",
    "dotlessj": "\u0237", "star": "\u22c6", "arrowdblleft": "\u21d0", "arrowdblright": "\u21d2",
    # the Greek letters the Adobe Glyph List sends to look-alike symbols (increment, ohm, micro sign)
    "Delta": "\u0394", "Omega": "\u03a9", "mu": "\u03bc",
}

_DIFFERENCES = re.compile(r"/Differences\s*\[(.*?)\]", re.S)
_TOKEN = re.compile(r"/([^\s/\[\]<>()]+)|(\d+)")
_BFCHAR = re.compile(r"beginbfchar(.*?)endbfchar", re.S)
_BFRANGE = re.compile(r"beginbfrange(.*?)endbfrange", re.S)
_PAIR = re.compile(r"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]*)>")
_RANGE = re.compile(r"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>\s*(?:<([0-9A-Fa-f]*)>|\[([^\]]*)\])")


# the sizes of TeX's extension font (CMEX): parenleftBigg, summationdisplay, radicalbig, tildewide are ( ∑ √ ~
_SIZED = re.compile(r"(?<=[a-z])(big|Big|bigg|Bigg|display|text|wide|wider|widest)$")


def glyph_text(name: str) -> str:
    """The character a glyph name stands for ('' when neither the Adobe Glyph List nor :data:`TEX_NAMES` knows it)."""
    from fontTools import agl  # the Adobe Glyph List and its uniXXXX / uXXXX forms, as fontTools keeps them

    base = _SIZED.sub("", name)
    return TEX_NAMES.get(name) or agl.toUnicode(name) or (base != name and (TEX_NAMES.get(base) or agl.toUnicode(base))) or ""


def differences(encoding: str) -> dict[int, str]:
    """code -> glyph name of an ``/Encoding`` dictionary's ``/Differences`` array (its PDF source)."""
    m = _DIFFERENCES.search(encoding)
    out: dict[int, str] = {}
    code = 0
    for name, number in _TOKEN.findall(m.group(1) if m else ""):
        if number:
            code = int(number)
        else:
            out[code] = name
            code += 1
    return out


def _utf16(hexstr: str) -> str:
    data = bytes.fromhex(hexstr if len(hexstr) % 2 == 0 else "0" + hexstr)
    return data.decode("utf-16-be", errors="replace") if data else ""


def cmap_entries(cmap: str) -> dict[int, str]:
    """code -> text of a ToUnicode CMap's bfchar and bfrange entries (one-byte and two-byte codes alike)."""
    out: dict[int, str] = {}
    for block in _BFCHAR.findall(cmap):
        for src, dst in _PAIR.findall(block):
            out[int(src, 16)] = _utf16(dst)
    for block in _BFRANGE.findall(cmap):
        for lo, hi, start, array in _RANGE.findall(block):
            codes = range(int(lo, 16), int(hi, 16) + 1)
            if array:
                for code, dst in zip(codes, re.findall(r"<([0-9A-Fa-f]*)>", array)):
                    out[code] = _utf16(dst)
            elif start:
                text = _utf16(start)
                for i, code in enumerate(codes):  # the last character counts up (PDF 32000-1, 9.10.3)
                    out[code] = text[:-1] + chr(ord(text[-1]) + i) if text else ""
    return out


def corrected(names: dict[int, str], mapped: dict[int, str]) -> dict[int, str] | None:
    """The map with each checkable code's glyph name in place of what ``mapped`` says, when ``mapped`` contradicts
    every glyph name it can be checked against (and at least one); None when it agrees with any of them."""
    checkable = {}
    for code, name in names.items():
        text = glyph_text(name)
        if len(text) == 1 and len(mapped.get(code, "")) <= 1:
            checkable[code] = text
    if not checkable or any(mapped.get(code) == text for code, text in checkable.items()):
        return None
    return {**mapped, **checkable}


def write_cmap(entries: dict[int, str]) -> bytes:
    """A ToUnicode CMap of one-byte codes (simple fonts) holding ``entries``."""
    rows = [f"<{code:02X}> <{text.encode('utf-16-be').hex().upper()}>" for code, text in sorted(entries.items()) if text]
    chunks = [rows[i:i + 100] for i in range(0, len(rows), 100)]  # a bfchar block holds at most 100 entries
    body = "".join(f"{len(c)} beginbfchar\n" + "\n".join(c) + "\nendbfchar\n" for c in chunks)
    return ("/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n/CIDSystemInfo << /Registry (Adobe) "
            "/Ordering (UCS) /Supplement 0 >> def\n/CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n"
            f"1 begincodespacerange\n<00> <FF>\nendcodespacerange\n{body}endcmap\n"
            "CMapName currentdict /CMap defineresource pop\nend\nend\n").encode("ascii")


def _object(doc: pymupdf.Document, xref: int, key: str) -> tuple[str, str]:
    """(kind, PDF source) of ``key`` of object ``xref``: an indirect object's source, or an inline value's."""
    kind, value = doc.xref_get_key(xref, key)
    if kind == "xref":
        return kind, doc.xref_object(int(value.split()[0]))
    return kind, value


_REF = re.compile(r"(\d+)\s+0\s+R")


def page_font_xrefs(doc: pymupdf.Document, pno: int) -> list[int]:
    """The fonts a page's own text uses (its ``/Resources /Font``), by xref. Not the fonts of its Form XObjects (the
    text inside figures): PyMuPDF's ``get_page_fonts`` walks those too, which cost as much as reading the whole text
    of a PDF with many drawn figures (arXiv 1706.03762: 2,580 resource dictionaries, 124 ms)."""
    page = doc.page_xref(pno)
    kind, value = doc.xref_get_key(page, "Resources/Font")
    if kind == "xref":
        value = doc.xref_object(int(value.split()[0]))
    elif kind != "dict":  # resources inherited from the page tree, or none: ask PyMuPDF
        return [f[0] for f in doc.get_page_fonts(pno)]
    return [int(x) for x in _REF.findall(value)]


def repair_tounicode(doc: pymupdf.Document) -> list[str]:
    """Give every simple font of the pages' text whose ToUnicode contradicts all its glyph names (:func:`corrected`)
    a ToUnicode from those names, in memory. Returns the repaired fonts' names."""
    repaired: list[str] = []
    seen: set[int] = set()
    for pno in range(doc.page_count):
        for xref in page_font_xrefs(doc, pno):
            if xref in seen:
                continue
            seen.add(xref)
            if doc.xref_get_key(xref, "Subtype")[1] not in ("/Type1", "/MMType1", "/TrueType", "/Type3"):
                continue
            kind, tounicode = doc.xref_get_key(xref, "ToUnicode")
            if kind != "xref":
                continue
            names = differences(_object(doc, xref, "Encoding")[1])
            if not names:
                continue
            try:
                mapped = cmap_entries(doc.xref_stream(int(tounicode.split()[0])).decode("latin-1"))
            except Exception:  # noqa: BLE001 - an unreadable map stays as it is (MuPDF reads what it can)
                continue
            fixed = corrected(names, mapped) if max(mapped, default=0) <= 0xFF else None  # (simple fonts: 1 byte)
            if fixed is None:
                continue
            new = doc.get_new_xref()
            doc.update_object(new, "<<>>")
            doc.update_stream(new, write_cmap(fixed))
            doc.xref_set_key(xref, "ToUnicode", f"{new} 0 R")
            repaired.append(doc.xref_get_key(xref, "BaseFont")[1].lstrip("/"))
    if repaired:
        log.info("PDF: %d font(s) whose ToUnicode contradicts their glyph names read by the names: %s",
                 len(repaired), ", ".join(sorted(set(repaired))))
    return repaired
