"""What ``paperkb show``, ``papers`` and ``author`` print: a paper, a list of papers, an author, in at
most the terminal's width (80 columns when piped), from the records of :mod:`pipeline.query.reading`."""

from __future__ import annotations

import textwrap
from typing import Any

from pipeline.query.contexts import around

TOP = 5  # references, citing papers, figures and co-authors shown before "... and N more"


def _clip(text: str | None, n: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: max(n - 1, 0)] + "…"


def _num(value: Any) -> str:
    return "-" if value is None else f"{int(value):,}"


def _wrap(text: str, cols: int, indent: str = "", max_lines: int | None = None) -> list[str]:
    """``text`` in lines of ``cols``; at most ``max_lines``, the last ending in `` …`` when text is left out."""
    return textwrap.wrap(" ".join((text or "").split()), cols, initial_indent=indent, subsequent_indent=indent,
                         max_lines=max_lines, placeholder=" …") or [indent]


def _authors(names: list[str], cols: int) -> str:
    """The names within ``cols``: as many whole names as fit before `` + N more`` (the first one clipped when even it
    does not fit alone)."""
    if not names:
        return "(authors unknown)"
    shown = ", ".join(names)
    if len(shown) <= cols:
        return shown
    for k in range(len(names) - 1, 0, -1):
        head = ", ".join(names[:k]) + f" + {len(names) - k} more"
        if len(head) <= cols:
            return head
    more = f" + {len(names) - 1} more"
    return _clip(names[0], cols - len(more)) + more


def legend_line(fig: dict[str, Any]) -> str:
    """A figure as ``Figure 1 (p. 3): The Transformer ...``: a legend is stored as printed, its label included, so the
    label is not repeated (the page's paper view does the same)."""
    label = fig.get("label") or f"Figure {fig.get('number')}"
    text = " ".join((fig.get("text") or "").split())
    if text.startswith(label):
        text = text[len(label):].lstrip(" :.—–-")
    page = f" (p. {fig['page']})" if fig.get("page") else ""
    return f"{label}{page}: {text}"


def full_text_line(ft: dict[str, Any]) -> str:
    """``full text: 15 pages of arXiv v5, read 2026-11-29`` (or why the PDF could not be used)."""
    version = f"arXiv v{ft['arxiv_version']}" if ft.get("arxiv_version") else "the PDF"
    if ft.get("status") != "ok":
        return f"full text: {version} not used: {ft.get('why') or ft.get('reason') or ft.get('status')}"
    pages = f"{ft['pages']} pages of " if ft.get("pages") else ""
    return f"full text: {pages}{version}" + (f", read {ft['read_at']}" if ft.get("read_at") else "")


def card_line(card: dict[str, Any], cols: int, indent: str = "  ") -> list[str]:
    """Two lines for a paper or work: ``title (year)`` and ``id · first author · cited N``."""
    year = f" ({card['year']})" if card.get("year") else ""
    title = card.get("title") or card.get("raw") or "(untitled)"
    ident = card.get("paper_id") or card.get("work_id") or "-"
    who = (card.get("authors") or [None])[0]
    cites = card.get("citation_count")
    meta = " · ".join(x for x in (ident, f"{who} et al." if who and len(card.get("authors") or []) > 1 else who,
                                  f"cited {_num(cites)}" if cites is not None else None) if x)
    return [indent + _clip(title, cols - len(indent) - len(year)) + year, indent + "  " + _clip(meta, cols - len(indent) - 2)]


def context_lines(card: dict[str, Any], cols: int, indent: str = "    ") -> list[str]:
    """The first sentence where the citing paper's text cites the work (its ``contexts``), quoted, at most two lines,
    with its page and how many sentences cite it."""
    found = card.get("contexts") or []
    if not found:
        return []
    c = found[0]
    where = [f"p. {c['page']}" if c.get("page") else "",
             f"{card['mentions']} mentions" if (card.get("mentions") or 0) > 1 else ""]
    page = f" ({', '.join(w for w in where if w)})" if any(where) else ""
    # two lines' worth of it around the marker (wrapping loses a few characters a line)
    text, _ = around(c["text"], tuple(c.get("marker") or (0, 0)), 2 * (cols - len(indent)) - len(page) - 12)
    return _wrap(f"\u201c{text}\u201d{page}", cols, indent, max_lines=2)


def work_lines(detail: dict[str, Any], cols: int) -> list[str]:
    """The ``paperkb show`` page of a cited work outside the corpus: what is known of it, who cites it here."""
    w = detail["work"]
    out = _wrap((w.get("title") or "(untitled)") + (f" ({w['year']})" if w.get("year") else ""), cols)
    out.append(_clip(f"{w['work_id']} · a cited work, not in this snapshot's corpus (no text or metrics here)", cols))
    if w.get("authors"):
        out += _wrap(_authors(w["authors"], 10 ** 6), cols)
    if w.get("venue"):
        out.append(_clip(w["venue"], cols))
    links = w.get("links") or {}
    for name in ("arxiv", "pdf", "doi", "s2"):
        if links.get(name):
            out.append(_clip(f"{name:>6}: {links[name]}", cols))
    printed = detail.get("printed") or {"total": 0, "items": []}
    if printed["items"]:
        out += ["", _section("As printed", printed["total"], len(printed["items"]), "citing papers by citations")]
        for e in printed["items"]:
            out += _wrap(e["raw"], cols, "  ", max_lines=3)
            where = f"in {e['paper_id']}" + (f", p. {e['page']}" if e.get("page") else "")
            out.append("    " + _clip(f"{where}: {e.get('title') or ''}", cols - 4))
    for title, page in (("References", detail["references"]), ("Cited by", detail["cited_by"])):
        if title == "References" and not page["total"]:
            continue
        out += ["", _section(title, page["total"], len(page["items"]), "by citations")]
        for c in page["items"]:
            out += card_line(c, cols) + context_lines(c, cols)
    together = detail.get("cited_with") or {"citing": 0, "items": []}
    if together["items"]:
        out += ["", f"Cited together with it (by the most of the {together['citing']} papers citing it):"]
        for c in together["items"]:
            head, meta = card_line(c, cols)
            out += [head, "    " + _clip(f"{meta.strip()} · with it in {c['count']} of {together['citing']}", cols - 4)]
    return out


def _section(title: str, total: int, shown: int, what: str) -> str:
    more = f" (top {shown} {what})" if total > shown else ""
    return f"{title}: {_num(total)}{more}"


def show_lines(paper: dict[str, Any], facts: dict[str, Any], refs: list[dict], cites: list[dict],
               figures: list[dict], metrics: dict[str, Any], cols: int) -> list[str]:
    """The ``paperkb show`` page of one paper."""
    out = _wrap(paper.get("title") or "(untitled)", cols)
    head = [facts["paper_id"], facts.get("published") or str(paper.get("year") or ""), facts.get("venue") or ""]
    out.append(_clip(" · ".join(h for h in head if h), cols))
    out += _wrap(_authors([b["name"] for b in facts["bylines"]], 10 ** 6), cols)
    if facts.get("categories"):
        out.append(_clip("categories: " + " ".join(facts["categories"]), cols))
    out.append("")
    m = [f"citations {_num(metrics.get('citation_count'))}"]
    if metrics.get("pagerank") is not None:
        rank = f" (rank {_num(metrics['pagerank_rank'])} of {_num(metrics['ranked'])})" if metrics.get("pagerank_rank") else ""
        m.append(f"PageRank {metrics['pagerank']:.3g}{rank}")
    if metrics.get("weight") is not None:
        m.append(f"weight {metrics['weight']:.3f}")
    out += _wrap(" · ".join(m), cols)
    links = facts.get("links") or {}
    for name in ("arxiv", "pdf", "doi", "s2"):
        if links.get(name):
            out.append(_clip(f"{name:>6}: {links[name]}", cols))
    if facts.get("full_text"):
        out.append(_clip(full_text_line(facts["full_text"]), cols))
    if paper.get("abstract"):
        out += ["", "Abstract"] + _wrap(paper["abstract"], cols, "  ")
    out += ["", _section("References", facts["reference_count"], len(refs), "by citations")]
    for r in refs:
        out += card_line(r, cols) + context_lines(r, cols)
    out += ["", _section("Cited by", facts["cited_by_count"], len(cites), "by citations")]
    for c in cites:
        out += card_line(c, cols) + context_lines(c, cols)
    if figures:
        out += ["", f"Figures: {len(figures)}"]
        for f in figures[:TOP]:
            out += _wrap(legend_line(f), cols, "  ", max_lines=2)
        if len(figures) > TOP:
            out.append(f"  ... and {len(figures) - TOP} more (--json lists them all)")
    if facts.get("sections"):
        out += ["", f"Sections: {len(facts['sections'])}"]
        for s in facts["sections"]:
            pages = (f"p. {s['page_start']}" + (f"-{s['page_end']}" if s.get("page_end") not in (None, s["page_start"]) else "")
                     if s.get("page_start") else "")
            label = _clip(s.get("section") or f"({s['role']})", cols - 24)
            out.append(f"  {label:<{cols - 24}} {s['role']:<12} {pages}".rstrip())
    return out


def papers_lines(page: dict[str, Any], cols: int, what: str) -> list[str]:
    """The ``paperkb papers`` list: one numbered paper per two lines."""
    first, last = page["offset"] + 1, page["offset"] + len(page["items"])
    out = [_clip(f"{_num(page['total'])} {what}, by {page['sort']}" +
                 (f"; {first}-{last} shown" if page["items"] else ""), cols)]
    for i, card in enumerate(page["items"], start=first):
        lines = card_line(card, cols - 6, indent="")
        out.append(f"{i:>4}. {lines[0]}")
        out.append(f"      {lines[1]}")
    return out


def author_lines(profile: dict[str, Any], cols: int) -> list[str]:
    """The ``paperkb author`` page: the author's numbers, years, co-authors and papers."""
    out = [_clip(profile["name"], cols)]
    if profile.get("asked"):
        out += _wrap(f"(the only author {profile['asked']!r} names)", cols)
    if len(profile["names"]) > 1:
        out += _wrap("also written: " + "; ".join(profile["names"][1:]), cols)
    span = (f"{profile['first_year']}-{profile['last_year']}" if profile["first_year"] != profile["last_year"]
            else str(profile["first_year"])) if profile["first_year"] else "years unknown"
    out.append(_clip(f"{profile['paper_count']} paper(s) · {_num(profile['citation_count'])} citations · "
                     f"h-index {profile['h_index']} · {span}", cols))
    if profile["years"]:
        out += ["", "Papers by year"] + _wrap(", ".join(f"{y['year']}: {y['count']}" for y in profile["years"]), cols, "  ")
    co = profile["coauthors"]
    if co:
        out += ["", f"Co-authors: {len(co)}" + (f" (top {TOP} by shared papers)" if len(co) > TOP else "")]
        out += ["  " + _clip(f"{c['name']} ({c['count']})", cols - 2) for c in co[:TOP]]
    shown = len(profile["papers"])
    out += ["", f"Papers: {profile['paper_count']}" + (f" (top {shown}, most cited first)" if shown < profile["paper_count"]
                                                        else " (most cited first)" if shown > 1 else "")]
    for card in profile["papers"]:
        out += card_line(card, cols)
    return out


def print_answer(answer, cols: int | None = None) -> None:
    """``paperkb ask``: the checked answer (each sentence with its citations), then the numbered evidence:
    paper, authors, year, page and section, the passage wrapped."""
    from pipeline.cli.console import out, width

    cols = cols or width()
    lines = ["Q: " + q if i == 0 else "   " + q for i, q in enumerate(_wrap(answer.question, cols - 3))]
    if answer.claims:
        lines += ["", f"Answer ({answer.model}; every sentence cites the evidence below):"]
        for c in answer.claims:
            lines += _wrap(c.text, cols - 2, "  ")
    for note in answer.notes:
        lines += _wrap(f"note: {note}", cols)
    lines += ["", f"Evidence (snapshot {answer.snapshot_id}):" if answer.evidence else "No evidence found."]
    for e in answer.evidence:
        mark = f"[{e.n}] "
        pad = " " * len(mark)
        where = " · ".join(x for x in (e.paper_id, f"{e.index} index" if e.index else None,
                                      _authors(e.authors, 40) if e.authors else None, str(e.year) if e.year else None,
                                      f"page {e.page}" if e.page else None, _clip(e.section, 30) if e.section else None) if x)
        title = _wrap(e.title or "(untitled)", cols - len(mark), max_lines=2)
        lines += [(mark if i == 0 else pad) + t for i, t in enumerate(title)]
        lines += _wrap(where, cols, pad)
        lines += _wrap(e.text, cols, pad)
        lines.append("")
    out("\n".join(lines).rstrip())
