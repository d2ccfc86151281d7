"""nDCG@10, AP and R@100 of a run, computed as ``trec_eval`` (and ir-measures, through pytrec_eval) computes them.

The base install profile evaluates a snapshot without ir-measures: its pytrec_eval backend requires SciPy
(143 MB, never imported), which kept the profile over its size (pyproject.toml). These are the three
measures ``paperkb eval`` reports, with ``trec_eval``'s conventions, so the figures stay comparable with the
literature; tests/test_evaluate.py checks them against ir-measures on random runs, ties and grades included:

- the run is ordered by score, highest first, ties broken by docid in *descending* byte order (``trec_eval``'s
  ``comp_sim_docno``); the order of the lines or of the dict does not matter;
- a document is relevant when its judgement is >= 1 (``relevance_level`` 1); an unjudged document, or one
  judged < 1, is not; negative judgements are "in the pool but unjudged" (gain 0);
- nDCG@k: the judgements are the gains, discounted by log2(rank + 1), over the ideal ordering of every
  positive judgement of the query (retrieved or not); AP: precision at each relevant document retrieved,
  summed, over the number of relevant documents; R@k: relevant documents in the first k over all of them.
"""

from __future__ import annotations

import math
import re
from typing import Callable, Mapping

RELEVANCE_LEVEL = 1  # trec_eval's default (-l 1): a judgement of 1 or more is relevant

_NAME = re.compile(r"^(nDCG|AP|R)(?:@(\d+))?$")


def ranking(docs: Mapping[str, float]) -> list[str]:
    """The docids of one query's run in ``trec_eval``'s order: score descending, then docid descending."""
    return [d for d, _ in sorted(docs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]


def ndcg(gains: list[float], judged: Mapping[str, int], cutoff: int | None) -> float:
    """``ndcg_cut_k`` (``ndcg`` without a cutoff) of the gains in rank order."""
    top = gains if cutoff is None else gains[:cutoff]
    dcg = 0.0
    for i, g in enumerate(top):
        if g > 0:
            dcg += g / math.log2(i + 2)
    ideal_gains = sorted((g for g in judged.values() if g > 0), reverse=True)
    if cutoff is not None:
        ideal_gains = ideal_gains[:cutoff]
    ideal = 0.0
    for i, g in enumerate(ideal_gains):
        ideal += g / math.log2(i + 2)
    return dcg / ideal if ideal > 0 else 0.0


def average_precision(gains: list[float], n_relevant: int, cutoff: int | None) -> float:
    """``map`` (``map_cut_k`` with a cutoff)."""
    found, total = 0, 0.0
    for i, g in enumerate(gains if cutoff is None else gains[:cutoff]):
        if g >= RELEVANCE_LEVEL:
            found += 1
            total += found / (i + 1)
    return total / n_relevant if n_relevant else 0.0


def recall(gains: list[float], n_relevant: int, cutoff: int | None) -> float:
    """``recall_k`` (``set_recall`` without a cutoff)."""
    top = gains if cutoff is None else gains[:cutoff]
    return sum(1 for g in top if g >= RELEVANCE_LEVEL) / n_relevant if n_relevant else 0.0


def measure(name: str) -> Callable[[list[float], Mapping[str, int]], float]:
    """``nDCG@10``, ``AP``, ``R@100``... (ir-measures' names) as ``f(gains in rank order, judgements)``."""
    m = _NAME.match(name)
    if not m:
        raise ValueError(f"unknown measure {name!r}")
    kind, cutoff = m.group(1), int(m.group(2)) if m.group(2) else None
    if kind == "nDCG":
        return lambda gains, judged: ndcg(gains, judged, cutoff)
    if kind == "AP":
        return lambda gains, judged: average_precision(gains, _n_relevant(judged), cutoff)
    return lambda gains, judged: recall(gains, _n_relevant(judged), cutoff)


def _n_relevant(judged: Mapping[str, int]) -> int:
    return sum(1 for g in judged.values() if g >= RELEVANCE_LEVEL)


def per_query(names: tuple[str, ...] | list[str], qrels: Mapping[str, Mapping[str, int]],
              run: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """``{measure: {qid: value}}`` for every judged query, as ir-measures' ``iter_calc`` gives them: a query the run
    does not answer scores 0, a query nobody judged is left out."""
    fns = {n: measure(n) for n in names}
    out: dict[str, dict[str, float]] = {n: {} for n in names}
    for qid, judged in qrels.items():
        gains = [float(max(judged.get(d, 0), 0)) for d in ranking(run.get(qid) or {})]
        for n, f in fns.items():
            out[n][qid] = f(gains, judged)
    return out
