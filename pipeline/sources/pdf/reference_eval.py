"""Field-level precision / recall / F1 of a reference parser against hand labels
(``tests/fixtures/reference_labels.json``), and split counts against the true counts.

Matching rules, per field of each labelled reference:

- title: equal after ``norm_title`` (accents removed, case-folded, hyphens and apostrophes dropped,
  other punctuation and whitespace collapsed to one space);
- year, arxiv_id, doi, url: equal (doi case-folded, url without a trailing slash);
- venue: one normalised string contains the other (venues are written in many lengths);
- authors: per author, by surname (last word of the normalised name), as multisets.

A predicted value that does not match counts as a false positive, and the missed gold value as a
false negative; a null prediction where the gold has a value is a false negative only.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from pipeline.sources.pdf.references import Reference

FIELDS = ("title", "year", "arxiv_id", "doi", "url", "venue", "authors")


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKD", text.replace("ł", "l").replace("Ł", "L").replace("ø", "o"))
    return "".join(c for c in text if not unicodedata.combining(c)).casefold()


def norm_title(text: str | None) -> str:
    if not text:
        return ""
    t = _fold(text)
    t = re.sub(r"[\-‐‑–—'’`]", "", t)
    t = re.sub(r"[\W_]+", " ", t)
    return " ".join(t.split())


def surname(name: str) -> str:
    toks = norm_title(name).split()
    return toks[-1] if toks else ""


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def _same(field: str, pred: Any, gold: Any) -> bool:
    if field == "title":
        return norm_title(pred) == norm_title(gold)
    if field == "venue":
        a, b = norm_title(pred), norm_title(gold)
        return bool(a) and bool(b) and (a in b or b in a)
    if field == "doi":
        return str(pred).lower() == str(gold).lower()
    if field == "url":
        return str(pred).rstrip("/") == str(gold).rstrip("/")
    return pred == gold


def score_one(field: str, pred: Reference, gold: dict, score: Score) -> bool:
    """Add one reference's field to ``score``; True when it is fully right."""
    if field == "authors":
        p = Counter(surname(a) for a in pred.authors)
        g = Counter(surname(a) for a in gold["authors"])
        tp = sum((p & g).values())
        score.tp += tp
        score.fp += sum(p.values()) - tp
        score.fn += sum(g.values()) - tp
        return p == g
    pv, gv = getattr(pred, field), gold[field]
    if pv is None and gv is None:
        return True
    if pv is not None and gv is not None and _same(field, pv, gv):
        score.tp += 1
        return True
    if pv is not None:
        score.fp += 1
    if gv is not None:
        score.fn += 1
    return False


def evaluate(labels: Iterable[dict], parse: Callable[[str], Reference]) -> tuple[dict[str, Score], list[tuple[dict, str]]]:
    """Scores per field of ``parse`` on the labels' raw strings, and the (label, field) misses."""
    scores = {f: Score() for f in FIELDS}
    misses: list[tuple[dict, str]] = []
    for gold in labels:
        pred = parse(gold["raw"])
        for f in FIELDS:
            if not score_one(f, pred, gold, scores[f]):
                misses.append((gold, f))
    return scores, misses


def split_counts(found: dict[str, int], truth: dict[str, int]) -> dict[str, tuple[int, int]]:
    """pdf -> (references found, true count)."""
    return {pdf: (found.get(pdf, 0), n) for pdf, n in sorted(truth.items())}
