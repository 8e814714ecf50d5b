"""Paired comparison of two models on the same items: difference and McNemar.

Both functions take two boolean arrays aligned by item (`base[i]`, `model[i]`:
did each model get item i right). Pure numpy/scipy; no I/O.

Sources: McNemar (1947), "Note on the sampling error of the difference
between correlated proportions"; continuity correction by Edwards (1948);
exact form as in statsmodels `mcnemar(exact=True)`: two-sided
`min(1, 2 * Binom(b + c, 1/2).cdf(min(b, c)))`. Bootstrap: Efron &
Tibshirani (1993), percentile interval, resampling items (pairs) jointly so
the correlation between the two models' outcomes is kept.
"""

from __future__ import annotations

import numpy as np

__all__ = ["paired_difference", "mcnemar", "discordant_counts", "holm_adjust", "EXACT_BELOW"]

EXACT_BELOW = 25  # discordant pairs below which the exact binomial form is used


def _pair(base, model) -> tuple[np.ndarray, np.ndarray]:
    base = np.asarray(base, dtype=bool)
    model = np.asarray(model, dtype=bool)
    if base.shape != model.shape or base.ndim != 1:
        raise ValueError(f"need two 1-d arrays of the same length, got {base.shape} and {model.shape}")
    return base, model


def discordant_counts(base, model) -> tuple[int, int]:
    """(b, c): b = items the base got right and the model wrong, c = the reverse."""
    base, model = _pair(base, model)
    return int(np.sum(base & ~model)), int(np.sum(~base & model))


def paired_difference(base, model, *, n_boot: int = 2000, confidence: float = 0.95, seed: int = 0) -> dict:
    """Accuracy difference `mean(model) - mean(base)` with a seeded percentile bootstrap.

    Items are resampled with replacement as pairs (one index draws both
    outcomes), `n_boot` times; the interval is the (alpha/2, 1 - alpha/2)
    quantiles of the resampled differences. Returns base_accuracy,
    model_accuracy, difference, ci_low, ci_high, n (NaN figures when n = 0).
    """
    base, model = _pair(base, model)
    n = base.size
    if n == 0:
        nan = float("nan")
        return {"base_accuracy": nan, "model_accuracy": nan, "difference": nan,
                "ci_low": nan, "ci_high": nan, "n": 0}
    delta = model.astype(np.float64) - base.astype(np.float64)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    boots = delta[idx].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(boots, [alpha, 1.0 - alpha])
    return {
        "base_accuracy": float(base.mean()),
        "model_accuracy": float(model.mean()),
        "difference": float(delta.mean()),
        "ci_low": float(low),
        "ci_high": float(high),
        "n": int(n),
    }


def mcnemar(base, model, *, exact_below: int = EXACT_BELOW) -> dict:
    """McNemar's test of equal accuracy on paired binary outcomes.

    With b, c the discordant counts (see `discordant_counts`):
    - b + c = 0: no evidence either way, p = 1;
    - b + c < exact_below: exact, `p = min(1, 2 * sum_{i<=min(b,c)} C(b+c, i) / 2^(b+c))`;
    - otherwise: `chi2 = (|b - c| - 1)^2 / (b + c)` with 1 degree of freedom
      (Edwards' continuity correction), `p = chi2.sf(stat, 1)`.
    Returns b, c, statistic (None for the exact form), p_value, method.
    """
    from scipy.stats import binom, chi2

    b, c = discordant_counts(base, model)
    n = b + c
    if n == 0:
        return {"b": b, "c": c, "statistic": None, "p_value": 1.0, "method": "no discordant pairs"}
    if n < exact_below:
        p = min(1.0, 2.0 * float(binom.cdf(min(b, c), n, 0.5)))
        return {"b": b, "c": c, "statistic": None, "p_value": p, "method": "exact binomial"}
    stat = (abs(b - c) - 1.0) ** 2 / n
    return {"b": b, "c": c, "statistic": float(stat), "p_value": float(chi2.sf(stat, 1)),
            "method": "chi-square, continuity corrected"}


def holm_adjust(p_values) -> np.ndarray:
    """Holm (1979) step-down adjusted p-values, family-wise error control.

    Sorted ascending p_(1..m): `adj_(i) = max_{j<=i} min(1, (m - j + 1) p_(j))`,
    returned in the input order.
    """
    p = np.asarray(p_values, dtype=np.float64)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted
