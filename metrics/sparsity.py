"""Scale-free statistics of a parameter update: the top-q share curve and its Gaussian reference.

    from metrics.sparsity import add_histogram, top_share_curve, gaussian_top_share
    hist = add_histogram(None, delta)              # per tensor, summed over the model
    top_share_curve(hist, [1e-3, 1e-2, 0.1])       # share of ||delta||^2 in the top q of entries
    gaussian_top_share(0.01)                       # 0.0845: what an i.i.d. Gaussian update gives

Why scale free: an update's changed fraction depends on its size (at any threshold a large
update changes more entries), and ES's update is orders of magnitude larger than GRPO's, so
counting changed entries compares sizes, not shapes. The share of the squared norm held by
the largest q of the entries does not change when the update is multiplied by a constant, and
neither does the effective rank of a matrix (metrics.weights.effective_rank).

The curve is read from a histogram of |delta| binned by the top 16 bits of its float32 bits
(sign cleared; the binning of evalkit.diff), with the cut bin interpolated by its mean square
(metrics.weights.concentration). Reference: for i.i.d. Gaussian entries, with t the |X| quantile
`P(|X| > t) = q`, `E[X^2; |X| > t] / E[X^2] = 2 t phi(t) + q` (integration by parts of
x^2 phi(x)). ES's update is a sum of Gaussian noise vectors weighted by z-scores: a value at
the Gaussian reference says its update has the shape of noise; a larger share is concentration.
"""

from __future__ import annotations

import numpy as np

__all__ = ["add_histogram", "top_share_curve", "gaussian_top_share", "BINS"]

BINS = 1 << 16


def add_histogram(hist: dict | None, delta) -> dict:
    """`hist` ({"count", "sq"} over BINS bins) with the entries of `delta` added."""
    d = np.asarray(delta, dtype=np.float32).ravel()
    bins = (np.abs(d).view(np.uint32) >> 16).astype(np.int64)
    count = np.bincount(bins, minlength=BINS).astype(np.int64)
    sq = np.bincount(bins, weights=d.astype(np.float64) ** 2, minlength=BINS)
    if hist is None:
        return {"count": count, "sq": sq}
    return {"count": hist["count"] + count, "sq": hist["sq"] + sq}


def top_share_curve(hist: dict, qs) -> list[float]:
    """Share of sum(delta^2) in the ceil(q n) largest |delta|, for each q (NaN for a zero update)."""
    from metrics.weights import concentration

    return list(concentration(hist["count"], hist["sq"], tuple(float(q) for q in qs)))


def gaussian_top_share(q: float) -> float:
    """`2 t phi(t) + q` with `P(|X| > t) = q`, X standard normal (module docstring)."""
    from scipy.stats import norm

    t = float(norm.isf(q / 2.0))
    return float(min(1.0, 2.0 * t * norm.pdf(t) + q))
