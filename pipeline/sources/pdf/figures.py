"""Figure legends: find every figure caption of a paper as one record with its full text.

A line that starts with ``Figure 3:``, ``Figure 3.`` or ``Fig. 3.`` is only a *candidate*. Body text
also has such lines ("... see\\nFigure 9. The ..." wraps so that a line starts with the label).
A candidate becomes a caption from layout cues, not from the regex alone:

1. it starts a text block (PyMuPDF groups a caption into its own block; an in-body reference sits
   in the middle of a paragraph block). A block whose label line is set in a different font from
   the line above is split there first, so a caption glued under figure text still starts a block;
2. and either its font differs from the body text (size, bold label, other font family), or
   graphics (images, vector paths) lie right above or below it (one MuPDF text-page run that
   collects image and path boxes, ``page_graphics``; only where the font does not already decide).

The legend is the whole block, plus following blocks that continue it (same size, directly below,
no sentence end yet), plus the next block when the label stands alone on its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pymupdf

from pipeline.sources.pdf.text import Block, LaidOutPdf, PageLayout, join_lines

LABEL = re.compile(r"^\s*(?P<label>(?:Figure|FIGURE|Fig\.|FIG\.)\s*(?P<num>\d+))\s*(?P<punct>[:.|]|$)")
_SENTENCE_END = re.compile(r"[.!?)\]]\s*$")


@dataclass
class FigureLegend:
    label: str  # as printed, whitespace collapsed: 'Figure 3', 'Fig. 3'
    number: int
    page: int  # 1-based
    text: str  # full legend, starting with the label
    bbox: tuple[float, float, float, float]
    cues: dict = field(default_factory=dict)  # why it was taken: font / graphics

    def to_dict(self) -> dict:
        return {"label": self.label, "number": self.number, "page": self.page, "text": self.text,
                "bbox": [round(v, 1) for v in self.bbox], "cues": self.cues}


def _hoverlap(a: tuple, b: tuple) -> float:
    return min(a[2], b[2]) - max(a[0], b[0])


def _vgap(block: tuple, rect: tuple) -> float:
    """Vertical distance between two boxes (0 when they overlap vertically)."""
    if rect[3] <= block[1]:
        return block[1] - rect[3]
    if rect[1] >= block[3]:
        return rect[1] - block[3]
    return 0.0


_IMAGE_BLOCK, _VECTOR_BLOCK = pymupdf.mupdf.FZ_STEXT_BLOCK_IMAGE, pymupdf.mupdf.FZ_STEXT_BLOCK_VECTOR
_GRAPHICS_FLAGS = pymupdf.TEXT_PRESERVE_IMAGES | pymupdf.TEXT_COLLECT_VECTORS | pymupdf.TEXT_MEDIABOX_CLIP


def page_graphics(page: pymupdf.Page) -> list[tuple[float, float, float, float]]:
    """Boxes of images and vector paths on the page, without page-sized backgrounds.

    One MuPDF text-page run that keeps images (as boxes: no pixels are decoded) and vector paths,
    cheaper than ``page.get_bboxlog()``, whose device calls back into Python for every glyph run.
    The boxes are read by walking MuPDF's block list: ``TextPage.extractBLOCKS()`` also lists
    vector blocks but leaks memory on them (PyMuPDF 2.0: about 10 MB per pass over the 10 test
    PDFs), and ``extractDICT()`` would build dicts for all the page's text again."""
    limit = 0.8 * page.rect.width * page.rect.height
    out = []
    textpage = page.get_textpage(flags=_GRAPHICS_FLAGS)
    blk = textpage.this.m_internal.first_block
    while blk is not None:
        if blk.type == _IMAGE_BLOCK or blk.type == _VECTOR_BLOCK:
            r = blk.bbox
            if (r.x1 - r.x0) * (r.y1 - r.y0) <= limit:  # else a page background
                out.append((r.x0, r.y0, r.x1, r.y1))
        blk = blk.next
    return out


def split_at_labels(page: PageLayout) -> None:
    """Split blocks where a label line starts in another font or after a gap (caption glued to figure text)."""
    out: list[Block] = []
    for b in page.blocks:
        start = 0
        for k in range(1, len(b.lines)):
            ln, prev = b.lines[k], b.lines[k - 1]
            if not LABEL.match(ln.text):
                continue
            gap = ln.bbox[1] - prev.bbox[3]
            if ln.size != prev.size or ln.font != prev.font or gap > 0.6 * ln.size:
                out.append(_sub_block(b, b.lines[start:k]))
                start = k
        out.append(b if start == 0 else _sub_block(b, b.lines[start:]))
    page.blocks = out


def _sub_block(b: Block, lines) -> Block:
    bbox = (min(ln.bbox[0] for ln in lines), min(ln.bbox[1] for ln in lines),
            max(ln.bbox[2] for ln in lines), max(ln.bbox[3] for ln in lines))
    return Block(page=b.page, bbox=bbox, lines=list(lines), size=lines[0].size,
                 bold=all(ln.bold for ln in lines), font=lines[0].font, kind=b.kind, section=b.section,
                 words=b.words)


def find_figures(doc: pymupdf.Document, laid: LaidOutPdf) -> list[FigureLegend]:
    """Mark caption blocks (``kind='caption'``) in ``laid`` and return one legend per figure number."""
    found: dict[int, FigureLegend] = {}
    graphics_by_page: dict[int, list] = {}
    for page in laid.pages:
        if not any(("Fig" in ln.text or "FIG" in ln.text) and LABEL.match(ln.text) for b in page.blocks for ln in b.lines):
            continue
        split_at_labels(page)
        for i, b in enumerate(page.blocks):
            m = LABEL.match(b.lines[0].text)
            if not m or b.kind == "caption":
                continue
            number = int(m.group("num"))
            font_cue = _font_differs(b, laid)
            graphics_cue = None  # only looked at when the font does not already tell (it costs a page run)
            if not font_cue:
                if b.page not in graphics_by_page:
                    graphics_by_page[b.page] = page_graphics(doc[b.page - 1])
                graphics_cue = _graphics_near(b, graphics_by_page[b.page])
            if not (font_cue or graphics_cue):
                continue
            members = [b]
            label_only = len(b.text.strip()) <= len(m.group(0).strip()) + 1
            j = i + 1
            while j < len(page.blocks):
                nb = page.blocks[j]
                if not _continues(members[-1], nb, label_only and len(members) == 1):
                    break
                members.append(nb)
                j += 1
            for mb in members:
                mb.kind = "caption"
            if number in found:
                continue  # e.g. "Figure 3: (continued)": the first legend is the figure's
            text = join_lines([ln.text for mb in members for ln in mb.lines], laid.words)
            label = " ".join(m.group("label").split())
            bbox = (min(x.x0 for x in members), min(x.y0 for x in members),
                    max(x.x1 for x in members), max(x.y1 for x in members))
            found[number] = FigureLegend(label=label, number=number, page=b.page, text=text, bbox=bbox,
                                         cues={"font": font_cue, "graphics": graphics_cue, "blocks": len(members)})
    return [found[n] for n in sorted(found)]


def _font_differs(b: Block, laid: LaidOutPdf) -> bool:
    first = b.lines[0]
    return first.bold or abs(b.size - laid.body_size) >= 0.5 or _family(b.font) != _family(laid.body_font)


def _family(font: str) -> str:
    return re.split(r"[-,+]", font.split("+")[-1])[0].rstrip("0123456789").lower()


def _graphics_near(b: Block, graphics: list) -> bool:
    """Images or paths right above/below the caption, or beside it (a legend set next to its figure)."""
    reach = max(3.5 * b.size, 30.0)
    for r in graphics:
        if (r[3] - r[1]) <= 2 and (r[2] - r[0]) <= 2:
            continue  # dots and hairline specks
        if _hoverlap(b.bbox, r) > 0.25 * min(b.x1 - b.x0, r[2] - r[0]) and _vgap(b.bbox, r) <= reach:
            return True
        voverlap = min(b.y1, r[3]) - max(b.y0, r[1])
        if voverlap > 0.5 * min(b.y1 - b.y0, r[3] - r[1]) and -_hoverlap(b.bbox, r) <= reach:
            return True
    return False


def _continues(cur: Block, nb: Block, label_only: bool) -> bool:
    """Does ``nb`` (next in reading order) continue the legend that ends with ``cur``?"""
    if LABEL.match(nb.lines[0].text) or re.match(r"^\s*Table\s*\d+", nb.lines[0].text):
        return False
    gap = nb.y0 - cur.y1
    if label_only:
        return -2 <= gap <= 2.0 * cur.size and _hoverlap(cur.bbox, nb.bbox) > -5 or \
            (abs(nb.y0 - cur.y0) < 2 and 0 <= nb.x0 - cur.x1 <= 3 * cur.size)
    if _SENTENCE_END.search(cur.text):
        return False
    width = min(cur.x1 - cur.x0, nb.x1 - nb.x0)
    return (-2 <= gap <= 0.7 * cur.size and abs(nb.size - cur.size) < 0.6
            and _hoverlap(cur.bbox, nb.bbox) >= 0.5 * width)
