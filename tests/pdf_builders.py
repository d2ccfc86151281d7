"""Small PDFs written byte by byte for the tests of hostile input (nothing here is a real paper: those are read
from ``../shared/data``). Each is a complete PDF (header, cross-reference table, ``%%EOF``) that MuPDF opens
without repairing it."""

from __future__ import annotations

import zlib


def pdf(objects: list[bytes]) -> bytes:
    """A PDF of ``objects`` (object 1 is the catalog), numbered from 1, with its cross-reference table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def stream(data: bytes, compress: bool = True) -> bytes:
    """A stream object's source (Flate-compressed unless ``compress`` is False)."""
    body = zlib.compress(data, 9) if compress else data
    return (b"<< /Filter /FlateDecode /Length %d >>\nstream\n" if compress else b"<< /Length %d >>\nstream\n") % len(body) \
        + body + b"\nendstream"


def pdf_with_tounicode(cmap: bytes) -> bytes:
    """One page showing codes 33-35 in a Type1 font whose encoding names them alpha, beta, gamma and whose
    ToUnicode map is ``cmap``: the kind of font :mod:`pipeline.sources.pdf.tounicode` reads the map of."""
    content = b"BT /F1 12 Tf 72 720 Td (!\"#) Tj ET"
    return pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
        stream(content, compress=False),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding << /Type /Encoding "
        b"/Differences [33 /alpha /beta /gamma] >> /ToUnicode 6 0 R >>",
        stream(cmap),
    ])


# the two maps of issue 64: a 1,059-byte PDF whose map has 2,000 ranges of a million codes each (240 s and no end),
# and 20,000 unclosed beginbfchar in 1,350 bytes (23 s to import, 27 s to extract, growing with the square)
MILLION_CODE_RANGES = b"2000 beginbfrange\n" + b"<00000000> <0010FF00> <0000>\n" * 2000 + b"endbfrange\n"
UNCLOSED_BFCHAR = b"beginbfchar\n" * 20_000


def slow_pdf(heavy_pages: int, light_pages: int = 0, ops: int = 400_000) -> bytes:
    """``light_pages`` pages of one line of text, then ``heavy_pages`` pages that each show ``ops`` one-word strings
    (one content stream that every heavy page shares: a few kilobytes compressed, tens of megabytes for MuPDF and
    the layout to read, page after page)."""
    light = b"BT /F1 12 Tf 72 720 Td (A page of text with a few words.) Tj ET"
    heavy = b"BT /F1 1 Tf " + b"1 0 0 1 10 10 Tm (ab) Tj " * ops + b"ET"
    n = light_pages + heavy_pages
    kids = b" ".join(b"%d 0 R" % (6 + i) for i in range(n))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, n),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        stream(light),
        stream(heavy),
    ]
    for i in range(n):
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                       b"/Contents %d 0 R >>" % (4 if i < light_pages else 5))
    return pdf(objects)
