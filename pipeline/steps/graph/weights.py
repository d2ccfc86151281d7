"""The power law of citation counts and the survival weights it gives: ``w(x) = 1 - cdf(c(x))``, with ``w = 1`` below
``xmin`` (pure functions over NumPy arrays)."""

from __future__ import annotations

import math
import sys
import warnings
from dataclasses import asdict, dataclass

import numpy as np


@dataclass
class PowerLawFit:
    status: str  # 'ok' | 'too_few' | 'error: ...'
    n_works: int
    n_positive: int
    discrete: bool
    xmin: float | None = None
    alpha: float | None = None
    sigma: float | None = None
    n_tail: int | None = None
    ks_d: float | None = None
    compared_to: str | None = "lognormal"
    loglikelihood_ratio: float | None = None
    p_value: float | None = None

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


def fit_powerlaw(counts: np.ndarray, *, discrete: bool = False, min_n: int = 50,
                 xmin: float | None = None, compare_to: str = "lognormal") -> tuple[PowerLawFit, object | None]:
    """Fit a power law to the positive citation counts with the ``powerlaw`` package.

    xmin minimises the KS distance (unless given), alpha is the MLE; the fit is then compared with
    ``compare_to`` by a normalised log-likelihood ratio. Returns (summary, powerlaw.Fit or None).
    Fewer than ``min_n`` positive counts (or fewer than 3 distinct values) -> status 'too_few'.
    """
    import powerlaw

    counts = np.asarray(counts, dtype=np.float64)
    pos = counts[counts >= 1]
    res = PowerLawFit(status="too_few", n_works=int(len(counts)), n_positive=int(len(pos)), discrete=discrete,
                      compared_to=compare_to)
    if len(pos) < min_n or len(np.unique(pos)) < 3:
        return res, None
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            if xmin is None and not discrete:
                xmin = ks_xmin(pos)
            fit = powerlaw.Fit(pos, discrete=discrete, xmin=xmin, verbose=0)
            pl = fit.power_law
            r, p = fit.distribution_compare("power_law", compare_to, normalized_ratio=True)
        res.status = "ok"
        res.xmin, res.alpha, res.sigma = float(pl.xmin), float(pl.alpha), float(pl.standard_err)
        res.n_tail = int(np.sum(pos >= pl.xmin))
        res.ks_d = float(pl.D)
        res.loglikelihood_ratio, res.p_value = float(r), float(p)
        if not (math.isfinite(res.alpha) and res.alpha > 1):
            res.status = "error: no usable alpha"
            return res, None
        return res, fit
    except Exception as exc:  # noqa: BLE001 - a failed fit must not stop the graph step
        res.status = f"error: {type(exc).__name__}: {exc}"[:200]
        return res, None


def ks_xmin(values: np.ndarray) -> float | None:
    """The xmin that ``powerlaw.Fit(values, discrete=False)`` would choose, in O(n log n + m^2) for m distinct
    values instead of the library's O(n * m).

    Hand-written because the library's KS search builds a full ``Power_Law`` per candidate xmin, each
    trimming and summing all n values (262 s of a 6M-work graph run). This computes the same quantities on
    the distinct values with suffix sums: for candidate xmin = u_k (every distinct value but the two
    largest, as the library tries them), the tail's MLE ``alpha = 1 + n_k / sum(log(x / xmin))`` and the KS
    distance between the library's empirical CDF (its ``fitting_cdf``: the share of values strictly below
    each distinct value, renormalised above xmin) and ``1 - (x / xmin)^(1 - alpha)``. Where the library
    would not use that closed form (alpha outside (1.5, 3]: it fits numerically), the candidate is handed
    to the library itself. The choice is the library's: the smallest distance among candidates with
    ``0 < alpha < 3``, else among all. tests/test_graph.py checks it against ``powerlaw.Fit``.
    ``None`` (let the library decide) when fewer than 4 distinct values (under 2 candidates).
    """
    import powerlaw

    x = np.sort(np.asarray(values, dtype=np.float64))
    x = x[x > 0]
    n = len(x)
    u, first = np.unique(x, return_index=True)
    if len(u) < 4:  # fewer than 2 candidates: the library gives up (nan xmin); let it say so
        return None
    below = first / n  # the library's fitting_cdf: share of values < u_j
    logs = np.log(x)
    suffix = np.concatenate([np.cumsum(logs[::-1])[::-1], [0.0]])
    cand = np.arange(len(u) - 2)  # not the largest value (== xmax) nor the one before it, as the library
    n_tail = (n - first[cand]).astype(np.float64)
    alpha = 1 + n_tail / (suffix[first[cand]] - n_tail * np.log(u[cand]))
    dist = np.full(len(cand), np.nan)
    valid = np.zeros(len(cand), dtype=bool)
    parent = None
    for k in cand:
        a = alpha[k]
        if 1.5 < a <= 3:
            bins = u[k:]
            actual = (below[k:] - below[k]) / (1 - below[k])
            theory = 1 - (bins / u[k]) ** (1 - a) if a < 3 else np.full(len(bins), 10.0 ** sys.float_info.min_10_exp)
            diff = theory - actual
            dist[k] = max(diff.max(), -diff.min())
            valid[k] = a < 3
        else:  # the library fits this one numerically: let it
            if parent is None:
                parent = powerlaw.Fit(x, discrete=False, xmin=float(u[0]), verbose=0)
            pl = powerlaw.Power_Law(xmin=u[k], xmax=None, discrete=False, fit_method=parent.fit_method, data=x,
                                    parameters=parent.initial_parameters, parameter_ranges=parent.parameter_ranges,
                                    parameter_constraints=parent.parameter_constraints, parent_Fit=parent,
                                    estimate_discrete=parent.estimate_discrete, verbose=0)
            dist[k] = pl.D
            valid[k] = pl.in_range() and not pl.noise_flag
    best = int(np.ma.masked_array(dist, mask=~valid).argmin()) if valid.any() else int(np.argmin(dist))
    return float(u[best])


def survival_weights(counts: np.ndarray, fit) -> np.ndarray:
    """``w(c) = 1 - cdf(c) = P(C >= c)`` under the fitted power law (``powerlaw``'s ccdf).

    Below xmin the power law says nothing, so ``w = 1`` there (as for ``c = 0``): a paper is only
    discounted once its citation count is in the fitted tail. At ``c = xmin`` the survival is 1, so
    w is continuous and non-increasing in c, and within [0, 1]. ``fit=None`` -> all ones.
    """
    counts = np.asarray(counts, dtype=np.float64)
    w = np.ones(len(counts), dtype=np.float64)
    if fit is None:
        return w
    pl = fit.power_law
    tail = counts >= pl.xmin
    if not tail.any():
        return w
    values, inverse = np.unique(counts[tail], return_inverse=True)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        s = np.asarray(pl.ccdf(values), dtype=np.float64)
    if len(s) != len(values):  # defensive: powerlaw trims to its own [xmin, xmax]
        raise RuntimeError("powerlaw ccdf returned a different number of values")
    s = np.nan_to_num(s, nan=0.0, posinf=1.0, neginf=0.0)
    s = np.minimum.accumulate(np.clip(s, 0.0, 1.0))  # exact monotonicity despite rounding
    w[tail] = s[inverse]
    return w
