"""A paper's front matter, read from its first page: the authors' names, and the title in the case arXiv
records it when the PDF prints it in capitals.

The author block is the text between the title (the first page's largest font) and the abstract (or the
first section heading). Each line is cut into parts at commas, 'and', '&' and the wide gaps that
separate names set side by side ("Kaiming He    Xiangyu Zhang"); a part is a name when it is two to five
capitalised words or initials and no affiliation word ("University", "Research", "Google", ...), with
footnote marks (*, †, superscript digits) dropped. E-mail addresses, affiliations and footnotes are
skipped. Pure layout logic over PyMuPDF's dict of one page.
"""

from __future__ import annotations

import re

# words that make a part an affiliation or a note, not a name
_AFFILIATION = re.compile(
    r"\b(univ\w*|universit\w*|institut\w*|research|laborator\w*|lab|labs|department|dept|school|college|"
    r"faculty|center|centre|academy|inc|ltd|corp\w*|company|google|microsoft|facebook|meta|openai|deepmind|"
    r"brain|amazon|ibm|nvidia|apple|baidu|alibaba|tencent|huawei|team|group|ai|computer|science|sciences|"
    r"engineering|informatics|mathematics|physics|language|technology|street|road|avenue|germany|france|usa|"
    r"uk|china|canada|japan|switzerland|contribution|equal|work|done|during|internship|correspondence|"
    r"preprint|conference|proceedings|arxiv|abstract|email|e-mail|http\w*|www)\b", re.I)
_PARTICLES = {"van", "von", "der", "den", "de", "di", "da", "du", "la", "le", "del", "dos", "bin", "al", "ter"}


def _name_word(w: str) -> bool:
    """'Łukasz', 'Minh-Thang', 'KyungHyun', 'P.', 'O\'Neil', 'van': a word of a person's name (any script's capitals)."""
    if w in _PARTICLES:
        return True
    core = w.rstrip(".")
    if not core or not core[0].isupper():
        return False
    return all(c.isalpha() or c in "-'’." for c in core) and not core.isupper() or len(core) <= 2
_MARKS = re.compile(r"[*∗†‡§¶⋆★♠♣♦♥#⇤]|(?<=[a-zà-ÿ])\d+(?:,\d+)*")
_SPLIT = re.compile(r"\s*(?:,|;|\band\b|&)\s*")
_STOP = re.compile(r"^\s*(abstract\b|1\.?\s+introduction|introduction\b|keywords?\b)", re.I)
_SMALL_WORDS = {"a", "an", "and", "as", "at", "but", "by", "for", "from", "in", "into", "nor", "of", "on", "or",
                "over", "per", "the", "to", "up", "via", "vs", "with"}


def _is_name(part: str) -> bool:
    words = part.split()
    if not 2 <= len(words) <= 5 or _AFFILIATION.search(part) or "@" in part:
        return False
    if not all(_name_word(w) for w in words):
        return False
    return sum(1 for w in words if len(w.rstrip(".")) > 1) >= 1 and words[-1][0].isupper()


def _line_parts(spans: list[dict], size: float) -> list[str]:
    """A line's text cut at wide gaps (names set side by side), superscript marks dropped."""
    parts: list[list[str]] = [[]]
    last_x1 = None
    for sp in spans:
        text = sp["text"]
        if not text.strip():
            continue
        if sp["size"] < 0.8 * size:  # superscript affiliation marks and footnote numbers
            last_x1 = sp["bbox"][2]
            continue
        gap = None if last_x1 is None else sp["bbox"][0] - last_x1
        if gap is not None and gap > 1.2 * size:
            parts.append([])
        elif gap is not None and gap > 0.15 * size and parts[-1]:
            parts[-1].append(" ")
        parts[-1].append(text)
        last_x1 = sp["bbox"][2]
    return ["".join(p) for p in parts if p]


def _split_wide_spaces(text: str) -> list[str]:
    """Names a PDF sets apart with runs of spaces inside one span."""
    return [t for t in re.split(r"\s{3,}", text) if t.strip()]


def first_page_authors(page) -> list[str]:
    """Author names in the order printed on a first page (``pymupdf.Page``); [] when none are found."""
    import pymupdf

    d = page.get_text("dict", flags=pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES)
    lines = []
    for b in d.get("blocks", []):
        for ln in b.get("lines", []):
            if abs(ln["dir"][0] - 1) > 1e-3:
                continue
            spans = [s for s in ln["spans"] if s["text"].strip()]
            if spans:
                lines.append((max(s["size"] for s in spans), ln["bbox"], spans))
    if not lines:
        return []
    top = max(s for s, _, _ in lines)
    title_bottom = max(bb[3] for s, bb, _ in lines if s >= top - 0.5)
    stop = min((bb[1] for s, bb, sp in lines if bb[1] > title_bottom and _STOP.match("".join(x["text"] for x in sp))),
               default=title_bottom + 0.3 * page.rect.height)
    names: list[str] = []
    for size, bb, spans in sorted(lines, key=lambda t: (round(t[1][1] / 4), t[1][0])):  # rows of 4 pt, left to right
        if bb[1] <= title_bottom - 0.5 or bb[1] >= stop or size >= top - 0.5:
            continue
        affiliation = False  # after an affiliation, the rest of its line is its address ("..., Santa Cruz")
        for chunk in _line_parts(spans, size):
            for piece in _split_wide_spaces(chunk):
                for part in _SPLIT.split(_MARKS.sub(" ", piece)):
                    part = " ".join(part.split()).strip(" .,")
                    affiliation = affiliation or bool(_AFFILIATION.search(part)) or "@" in part
                    if affiliation:
                        continue
                    for name in _two_names(part):
                        if _is_name(name) and name not in names:
                            names.append(name)
    return names


def _two_names(part: str) -> list[str]:
    """Two names set with one space between them ('Jing Gu Eliana Stefani'): four plain capitalised words,
    no initial or particle, are read as two names of two words; anything else is one part."""
    words = part.split()
    if len(words) == 4 and all(len(w) > 1 and not w.endswith(".") and w not in _PARTICLES for w in words):
        return [" ".join(words[:2]), " ".join(words[2:])]
    return [part]


def title_case(title: str) -> str:
    """A title printed in capitals, in the case arXiv records titles: 'ADAM: A METHOD FOR STOCHASTIC
    OPTIMIZATION' -> 'Adam: A Method for Stochastic Optimization'. A title with lower-case letters is
    returned as it is."""
    if any(c.islower() for c in title) or not any(c.isupper() for c in title):
        return title
    out = []
    start = True
    for word in title.split():
        lw = word.lower()
        core = re.sub(r"\W", "", lw)
        if any(ch.isdigit() for ch in lw):
            w = lw  # '16x16', '3d'
        elif core in _SMALL_WORDS and not start:
            w = lw
        else:
            w = "-".join(p[:1].upper() + p[1:] for p in lw.split("-"))
        out.append(w)
        start = word.endswith((":", "?", "!", "."))
    return " ".join(out)
