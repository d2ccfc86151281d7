"""Named scoring configurations: which signals count and with what weight.

- ``seed``: the design's formula, 0.5 ck + 0.3 doc + 0.1 abs + 0.1 fig + 0.2 log(1+pr);
  BM25 only picks candidates.
- ``default``: the seed plus the lexical evidence the seed throws away: ``bm25`` (the
  passage's BM25 score over the best of the query's BM25 list, 0 when not a BM25 candidate),
  weight 0.5. Measured side by side on CISI and Cranfield (BENCHMARKS.md): the lexical signal
  adds ~+0.04 nDCG@10 on CISI and ~+0.06 on Cranfield over the seed; 0.5 beat 0.3 and 0.7 on
  both (chosen on CISI, confirmed on Cranfield), a round weight rather than a fitted one.
- ``default`` also weighs ``rm3``, the lexical pseudo-relevance feedback signal (BM25 of the RM3
  terms of the hybrid top-3 passages, see :mod:`pipeline.query.expand`): the lexical weight 0.5
  is split 0.35 original query / 0.15 feedback terms, RM3's interpolation (original-query weight
  0.7). Without feedback (expansion off or LLM) ``rm3`` equals ``bm25``, so the default then scores
  exactly seed + 0.5 bm25. Measured side by side (BENCHMARKS.md): nDCG@10 +0.013 on CISI and
  +0.006 on Cranfield over seed + 0.5 bm25, on both odd/even query halves of both collections;
  feedback depth and term count (3 passages, 30 terms) chosen on CISI, confirmed on Cranfield.
- ``default`` finally weighs ``nbr`` (0.67), score regularisation over the candidates (Diaz, CIKM
  2005; see :func:`pipeline.query.signals.neighbour_mean`): the mean score of each passage's 20 most
  similar candidate passages of other papers (setting ``query_nbr_k``). ``score + 0.67 nbr`` ranks as
  Diaz's interpolation ``0.6 own + 0.4 neighbours``. Measured side by side (BENCHMARKS.md) over the
  default without it: nDCG@10 +0.006 on CISI (not significant) and +0.006 on Cranfield (paired
  Wilcoxon p ~0.001), positive on both odd/even query halves of both; k and the interpolation
  chosen on CISI (a 4 x 5 grid) and confirmed on Cranfield, where every cell of the grid gained.
- ``hybrid``: the previous default (seed + 0.35 bm25 + 0.15 rm3, no ``nbr``), kept for comparison.
- ``bm25``, ``dense``, ``fusion``: single-signal ablations (BM25 only, cosine only, fused
  candidate score only) for ``paperkb eval``.
"""

from __future__ import annotations

from pipeline.errors import UserError

SEED = {"ck": 0.5, "doc": 0.3, "abs": 0.1, "fig": 0.1, "pr": 0.2}

CONFIGS: dict[str, dict[str, float]] = {
    "seed": dict(SEED),
    "default": {**SEED, "bm25": 0.35, "rm3": 0.15, "nbr": 0.67},
    "hybrid": {**SEED, "bm25": 0.35, "rm3": 0.15},
    "bm25": {"bm25": 1.0},
    "dense": {"ck": 1.0},
    "fusion": {"fused": 1.0},
}


#: every signal a weight can name (the five of the design, the lexical extras, score regularisation)
SIGNALS = ("ck", "doc", "abs", "fig", "pr", "bm25", "rm3", "fused", "nbr")


def weights_for(config: str, overrides: dict[str, float] | None = None) -> dict[str, float]:
    """The config's weights with ``overrides`` merged over them; unknown names are a UserError."""
    bad = sorted(set(overrides or {}) - set(SIGNALS))
    if bad:
        raise UserError(f"unknown signal(s) {', '.join(bad)} in weights: known signals are {', '.join(SIGNALS)}")
    try:
        w = dict(CONFIGS[config])
    except KeyError:
        raise UserError(f"unknown config {config!r}: choose one of {', '.join(CONFIGS)}") from None
    if overrides:
        w.update({k: float(v) for k, v in overrides.items()})
    return w
