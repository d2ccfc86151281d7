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

A map is anyone's input, so reading it is bounded: at most :data:`MAX_CMAP_BYTES` of its stream are decoded, it is
read in one pass, and it may assign at most :data:`MAX_CMAP_CODES` codes, a range at most 256 (a map past these
bounds is left to MuPDF, unrepaired). A few kilobytes of hostile map once cost minutes (a range per line spanning a
million codes; 20,000 unclosed ``beginbfchar``, each a scan to the end of the stream).
"""

from __future__ import annotations

import logging
import re
import zlib

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

_TOKEN = re.compile(r"/([^\s/\[\]<>()]+)|(\d+)")
# one pass over a CMap: hex strings, array brackets and the bf block operators, nothing else
_CMAP_TOKEN = re.compile(r"<([0-9A-Fa-f]*)>|(\[)|(\])|\b(beginbfchar|endbfchar|beginbfrange|endbfrange)\b")

# Bounds on what a ToUnicode map may cost to read (a map is a font's, and a PDF is anyone's): a simple font's
# map is a few kilobytes (at most 2,050 bytes in the 10 real PDFs), so these only ever refuse hostile maps.
MAX_CMAP_BYTES = 1 << 20  # the decoded stream: a flate bomb is cut here, never decoded whole
MAX_CMAP_CODES = 65_536  # codes a map may assign in all (a two-byte font's whole code space)
MAX_CODE_BYTES = 4  # a source code's width (the CMap spec's codespace ranges are 1 to 4 bytes)
MAX_DST_BYTES = 512  # a destination string's (the CMap spec's limit for bfchar and bfrange)


class CMapRefused(ValueError):
    """A ToUnicode map that is not read: larger than the bounds above, or not of the kind asked for."""


# the sizes of TeX's extension font (CMEX): parenleftBigg, summationdisplay, radicalbig, tildewide are ( ∑ √ ~
_SIZED = re.compile(r"(?<=[a-z])(big|Big|bigg|Bigg|display|text|wide|wider|widest)$")


def glyph_text(name: str) -> str:
    """The character a glyph name stands for ('' when neither the Adobe Glyph List nor :data:`TEX_NAMES` knows it)."""
    from fontTools import agl  # the Adobe Glyph List and its uniXXXX / uXXXX forms, as fontTools keeps them

    base = _SIZED.sub("", name)
    return TEX_NAMES.get(name) or agl.toUnicode(name) or (base != name and (TEX_NAMES.get(base) or agl.toUnicode(base))) or ""


def differences(encoding: str) -> dict[int, str]:
    """code -> glyph name of an ``/Encoding`` dictionary's ``/Differences`` array (its PDF source); codes above
    0xFFFF are left out (no font has them). One pass over the source, whatever it holds."""
    at = encoding.find("/Differences")
    while at >= 0:  # the first /Differences followed by an array
        rest = encoding[at + len("/Differences"):at + len("/Differences") + 64].lstrip()
        if rest.startswith("["):
            break
        at = encoding.find("/Differences", at + 1)
    if at < 0:
        return {}
    start = encoding.index("[", at) + 1
    end = encoding.find("]", start)
    if end < 0:
        return {}
    out: dict[int, str] = {}
    code = 0
    for name, number in _TOKEN.findall(encoding, start, end):
        if number:
            code = int(number) if len(number) <= 5 else 1 << 16
        elif code <= 0xFFFF:
            out[code] = name
            code += 1
    return out


def _utf16(hexstr: str) -> str:
    data = bytes.fromhex(hexstr if len(hexstr) % 2 == 0 else "0" + hexstr)
    return data.decode("utf-16-be", errors="replace") if data else ""


def cmap_entries(cmap: str, *, max_code: int = 0xFFFFFFFF) -> dict[int, str]:
    """code -> text of a ToUnicode CMap's bfchar and bfrange entries (one-byte and two-byte codes alike), read in
    one pass over the map, later entries over earlier ones.

    Bounded whatever the map holds: :class:`CMapRefused` for a map longer than :data:`MAX_CMAP_BYTES`, one that
    assigns more than :data:`MAX_CMAP_CODES` codes, or one with a code above ``max_code`` (a caller that wants a
    simple font's one-byte map passes 0xFF). A range covers at most 256 codes, the CMap spec's rule that its ends
    differ in the last byte only (``<0000> <FFFF>`` reads as ``<0000> <00FF>``); an entry whose source code is wider
    than 4 bytes, whose destination is longer than 512 bytes, or whose range ends are out of order, is skipped. An
    unclosed block or array ends at the next operator, as a parser that reads on would."""
    if len(cmap) > MAX_CMAP_BYTES:
        raise CMapRefused(f"a map of {len(cmap)} bytes > {MAX_CMAP_BYTES}")
    out: dict[int, str] = {}
    left = MAX_CMAP_CODES
    block: str | None = None  # inside beginbfchar ("char") or beginbfrange ("range")
    held: list[str] = []  # the hex strings of the entry being read
    array: list[str] | None = None  # a range's [<dst> ...], while it is read

    def code(hexstr: str) -> int | None:
        if not hexstr or len(hexstr) > 2 * MAX_CODE_BYTES:
            return None
        value = int(hexstr, 16)
        if value > max_code:
            raise CMapRefused(f"code {value:#x} above {max_code:#x}")
        return value

    def put(c: int, text: str) -> None:
        nonlocal left
        left -= 1
        if left < 0:
            raise CMapRefused(f"more than {MAX_CMAP_CODES} codes")
        out[c] = text

    def put_range(lo_hex: str, hi_hex: str, dsts: list[str] | str) -> None:
        lo, hi = code(lo_hex), code(hi_hex)
        if lo is None or hi is None or hi < lo:
            return
        hi = min(hi, lo | 0xFF)  # within one last byte
        if isinstance(dsts, list):
            for c, dst in zip(range(lo, hi + 1), dsts):
                if len(dst) <= 2 * MAX_DST_BYTES:
                    put(c, _utf16(dst))
            return
        if len(dsts) > 2 * MAX_DST_BYTES:
            return
        text = _utf16(dsts)
        for i, c in enumerate(range(lo, hi + 1)):  # the last character counts up (PDF 32000-1, 9.10.3)
            if not text:
                put(c, "")
            elif ord(text[-1]) + i <= 0x10FFFF:
                put(c, text[:-1] + chr(ord(text[-1]) + i))

    for m in _CMAP_TOKEN.finditer(cmap):
        hexstr, opening, closing, op = m.groups()
        if op:
            block = {"beginbfchar": "char", "beginbfrange": "range"}.get(op)
            held, array = [], None
        elif block is None:
            continue
        elif opening:
            if block == "range" and len(held) == 2 and array is None:
                array = []
        elif closing:
            if array is not None:
                put_range(held[0], held[1], array)
                held, array = [], None
        elif array is not None:
            if len(array) < 256:  # no range spans more
                array.append(hexstr)
        else:
            held.append(hexstr)
            if block == "char" and len(held) == 2:
                src = code(held[0])
                if src is not None and len(held[1]) <= 2 * MAX_DST_BYTES:
                    put(src, _utf16(held[1]))
                held = []
            elif block == "range" and len(held) == 3:
                put_range(held[0], held[1], held[2])
                held = []
    return out


def cmap_text(doc: pymupdf.Document, xref: int) -> str:
    """The decoded source of stream ``xref`` (a ToUnicode map), decoded by us so that at most
    :data:`MAX_CMAP_BYTES` of it are ever made: :class:`CMapRefused` for a longer one, or one that is not Flate
    or not compressed (MuPDF still reads such a map; it is only not repaired)."""
    kind, filt = doc.xref_get_key(xref, "Filter")
    raw = doc.xref_stream_raw(xref)
    if kind == "null":
        data = raw[:MAX_CMAP_BYTES + 1]
    elif filt.strip("[] ") == "/FlateDecode" and doc.xref_get_key(xref, "DecodeParms")[0] == "null":
        data = zlib.decompressobj().decompress(raw, MAX_CMAP_BYTES + 1)
    else:
        raise CMapRefused(f"a stream with the filter {filt}")
    if len(data) > MAX_CMAP_BYTES:
        raise CMapRefused(f"a map of more than {MAX_CMAP_BYTES} bytes")
    return data.decode("latin-1")


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
            try:  # a simple font's map: one-byte codes
                mapped = cmap_entries(cmap_text(doc, int(tounicode.split()[0])), max_code=0xFF)
            except Exception as exc:  # noqa: BLE001 - an unreadable or refused map stays as it is (MuPDF reads what it can)
                log.debug("PDF: the ToUnicode map of font %d is left as it is: %s: %s", xref, type(exc).__name__, exc)
                continue
            fixed = corrected(names, mapped)
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
