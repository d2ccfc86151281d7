"""Caption cues on a small synthetic PDF (made here with PyMuPDF): the regex alone is not enough.

The real-data checks are in test_figures_real.py; this file isolates each layout cue.
"""

from __future__ import annotations

import pymupdf

from pipeline.sources.pdf.figures import LABEL, find_figures
from pipeline.sources.pdf.text import assign_kinds, layout

BODY = ("The quick experiments in this section were repeated five times with different seeds and the "
        "results were averaged before we compared them with the baselines of earlier work.")


def _paragraph(page, y, text, font="helv", size=10, width=95):
    words, lines, cur = text.split(), [], ""
    for w in words:
        if len(cur) + len(w) + 1 > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    lines.append(cur)
    for k, line in enumerate(lines):
        page.insert_text((72, y + k * 12), line, fontname=font, fontsize=size)
    return y + len(lines) * 12


def _make_pdf() -> bytes:
    doc = pymupdf.open()
    p1 = doc.new_page()
    _paragraph(p1, 80, BODY * 2)
    p1.draw_rect(pymupdf.Rect(150, 120, 450, 250), color=(0, 0, 0), fill=(0.8, 0.8, 0.9))  # a figure
    _paragraph(p1, 266, "Figure 1: A drawn box standing in for a plot, with a legend in the body font.")
    _paragraph(p1, 330, BODY * 3)
    # a body paragraph that happens to start with a label: same font, nothing drawn near it
    _paragraph(p1, 420, "Figure 2. shows how the loss falls when the learning rate is halved, which "
                        "we discuss below together with the other ablations of this section. " + BODY)
    _paragraph(p1, 520, BODY * 3)
    p2 = doc.new_page()
    _paragraph(p2, 80, BODY * 3)
    # no graphics, but a bold label line: the font tells
    _paragraph(p2, 200, "Figure 3: A caption whose label line is set in bold type.", font="hebo")
    _paragraph(p2, 260, BODY * 3)
    # label alone on its line, graphics above, legend text on the following lines of the block
    p2.draw_rect(pymupdf.Rect(150, 340, 450, 440), color=(0, 0, 0))
    p2.insert_text((72, 456), "Figure 4:", fontname="helv", fontsize=10)
    _paragraph(p2, 468, "Attention maps of the second layer; every head looks at a different part "
                        "of the input sentence and the colours mark the heads.")
    _paragraph(p2, 560, BODY * 3)
    return doc.tobytes()


def test_layout_cues_decide_not_the_regex():
    doc = pymupdf.open(stream=_make_pdf(), filetype="pdf")
    laid = layout(doc)
    figs = {f.number: f for f in find_figures(doc, laid)}
    assign_kinds(laid)
    assert sorted(figs) == [1, 3, 4], {n: f.text[:40] for n, f in figs.items()}
    assert figs[1].cues["graphics"] and not figs[1].cues["font"]
    assert figs[3].cues["font"]
    assert figs[4].text.startswith("Figure 4: Attention maps") and figs[4].text.endswith("mark the heads.")
    # "Figure 2." did start a block and match the label pattern: the cues turned it down
    starts = [b.lines[0].text for b in laid.blocks() if LABEL.match(b.lines[0].text)]
    assert any(t.startswith("Figure 2. shows") for t in starts)
    body = " ".join(b.text for b in laid.blocks() if b.kind != "caption")
    assert "Figure 2. shows how the loss falls" in body  # kept as body text
    assert "A drawn box standing in" not in body  # captions are not body text
