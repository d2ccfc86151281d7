"""Shared by the fulltext tests: read the PDF table of ../shared/data/arxiv/SOURCES.md.

The expected numbers (pages, figures, regex lines, in-body false positives, side stamp) come from
that file, never from constants in the tests.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

# the regex SOURCES.md used to count candidate caption lines
SOURCES_REGEX = re.compile(r"^\s*(Figure|Fig\.)\s*(\d+)\s*[:.]")


@dataclass
class PdfFacts:
    file: str  # 'pdf/1409.0473.pdf'
    paper_id: str
    stamp: str  # '1409.0473v7 cs.CL'
    pages: int
    figures: int
    regex_lines: int  # PyMuPDF column
    false_positives: list[str]  # quoted in-body lines, e.g. 'Figure 16.'
    style: str
    title: str = ""  # the title column ('BERT: Pre-training of Deep Bidirectional Transformers…')


def read_pdf_table(sources_md: Path) -> list[PdfFacts]:
    rows = []
    for line in sources_md.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| pdf/"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        file, title, stamp, _size, pages, figures, regex_lines, style = cells[:8]
        fps = [q.rstrip("…").strip() for q in re.findall(r'"([^"]+)"', style)]
        rows.append(PdfFacts(
            file=file, paper_id=Path(file).stem, stamp=stamp, pages=int(pages), figures=int(figures),
            regex_lines=int(regex_lines.split("/")[0]), false_positives=fps, style=style, title=title,
        ))
    return rows


def alnum(text: str) -> str:
    """Letters and digits only (ligatures expanded): compares texts across line joins and hyphens."""
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", text)).lower()


def squash(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).split())
