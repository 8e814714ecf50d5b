"""Comparing two pass@k curves: paired differences over shared problems, crossing points.

    from metrics.compare import paired_passk_difference, curve_crossings
    table = paired_passk_difference((n_a, c_a), (n_b, c_b), ks=[1, 2, 4, 8])  # b - a per k
    curve_crossings([1, 2, 4, 8], [0.2, 0.3, 0.4, 0.5], [0.3, 0.35, 0.38, 0.4])

Sources: pass@k per problem is Chen et al. 2021's unbiased estimator
(metrics.passk). The difference of two models' mean pass@k over the same
problems is a paired statistic: resampling problems (pairs of per-problem
estimates drawn together) keeps the correlation between the models, as in
Efron & Tibshirani (1993) and metrics.paired. The crossing point follows the
log2 k axis on which Pass@K curves are drawn (Yue et al. 2025, arXiv 2504.13837:
RL wins at small k, the base overtakes it at large k).

Limits: intervals are percentile intervals at each k separately, not adjusted
for looking at several k at once; a k larger than a problem's n (on either
side) leaves that problem out at that k, and the count is reported.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from metrics.passk import bootstrap_passk, per_problem_passk

__all__ = ["per_problem_passk", "paired_passk_difference", "curve_crossings"]


def paired_passk_difference(
    a: tuple, b: tuple, ks, *, n_boot: int = 2000, confidence: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """Mean pass@k of B minus A over shared problems, with a paired bootstrap interval.

    `a` and `b` are each (samples per problem n, correct per problem c), aligned by problem
    (element i of every array is the same problem). Per problem `d_i(k) = pass@k_B,i - pass@k_A,i`; the estimate is
    `mean_i d_i(k)` and the interval the percentile bootstrap of that mean,
    problems resampled with replacement. Columns: k, pass_a, pass_b,
    difference, ci_low, ci_high, n_problems (both n >= k), n_excluded,
    supported (interval excludes 0).
    """
    ks = np.asarray(ks, dtype=np.int64)
    if ks.size == 0 or np.any(ks < 1):
        raise ValueError("give at least one k, every k >= 1")
    a = per_problem_passk(*a, ks)
    b = per_problem_passk(*b, ks)
    if a.shape != b.shape:
        raise ValueError(f"need arrays aligned by problem, got {a.shape[0]} and {b.shape[0]} problems")
    both = ~np.isnan(a) & ~np.isnan(b)
    d = np.where(both, b - a, np.nan)
    low, high = bootstrap_passk(d, n_boot=n_boot, confidence=confidence, seed=seed)
    counts = both.sum(axis=0)
    safe = np.maximum(counts, 1)
    mean_a = np.where(counts > 0, np.where(both, a, 0.0).sum(axis=0) / safe, np.nan)
    mean_b = np.where(counts > 0, np.where(both, b, 0.0).sum(axis=0) / safe, np.nan)
    table = pd.DataFrame({
        "k": ks, "pass_a": mean_a, "pass_b": mean_b, "difference": mean_b - mean_a,
        "ci_low": low, "ci_high": high, "n_problems": counts, "n_excluded": len(d) - counts,
    })
    table["supported"] = (table["ci_low"] > 0) | (table["ci_high"] < 0)
    return table


def curve_crossings(ks, a, b) -> list[dict]:
    """Where curve B crosses curve A, on the log2 k axis.

    Between consecutive k where `b - a` changes sign (strictly, or touches 0
    after being non-zero), the crossing `k*` is found by linear
    interpolation of `b - a` in log2 k: `log2 k* = x0 + (x1 - x0) * d0 / (d0 - d1)`.
    Returns a list of {k, k_before, k_after, direction}, direction
    "b_overtakes_a" (B was below, ends above) or "a_overtakes_b". NaN points
    are skipped.
    """
    ks = np.asarray(ks, dtype=np.float64)
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    keep = ~np.isnan(d) & (ks >= 1)
    x, d, ks = np.log2(ks[keep]), d[keep], ks[keep]
    order = np.argsort(x, kind="stable")
    x, d, ks = x[order], d[order], ks[order]
    nonzero = np.flatnonzero(d != 0)
    out = []
    for i, j in zip(nonzero[:-1], nonzero[1:], strict=True):
        if np.sign(d[i]) == np.sign(d[j]):
            continue
        x_star = x[i] + (x[j] - x[i]) * d[i] / (d[i] - d[j])
        out.append({
            "k": float(2.0**x_star) if math.isfinite(x_star) else float(ks[j]),
            "k_before": int(ks[i]), "k_after": int(ks[j]),
            "direction": "b_overtakes_a" if d[j] > 0 else "a_overtakes_b",
        })
    return out
