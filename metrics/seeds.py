"""Intervals over training seeds and problems: the two-level bootstrap.

    from metrics.seeds import two_level_bootstrap, per_seed
    est, low, high = two_level_bootstrap(values)   # values[seed, problem, k] (or [seed, problem])

A study trains every arm once per seed and evaluates each seed's checkpoint on the same
held-out problems, so a figure is `mean_s mean_i x[s, i]` and it varies for two reasons:
another training run (seed) and another sample of problems. One replicate draws S seeds with
replacement, then P problems with replacement, and averages `x` over the drawn (seed, problem)
pairs:

    mean_b = sum_s sum_i C_s[b, s] C_p[b, i] x[s, i] / (S P)

with C_s, C_p the draw counts. The problems are crossed with the seeds (every seed is
evaluated on the same problems), so one problem draw serves every drawn seed, which keeps
a paired difference (arm - base on the same problem) paired. This is the hierarchical
bootstrap of Davison & Hinkley (1997, section 3.8) for a crossed two-way design; with one
seed it is the percentile bootstrap over problems (metrics.passk.bootstrap_passk) up to the
random stream. Columns (k) share the draws, as a curve's band should.

Two arms trained separately (ES and GRPO) have no pairing between their seeds: seed 0 of one
and seed 0 of the other are unrelated runs. Their difference is bootstrapped as two samples
(`two_sample_bootstrap`): each replicate draws each arm's seeds on its own, and one problem draw
for both (the problems are still crossed with every run), so the interval carries both arms'
seed variance and no covariance that the seed numbering would invent.

Limits: with 3 seeds the seed level has only 10 distinct resamples: the interval says what
three runs show, not what a hundred would. Values must be finite (a k above some n: give only
the k every problem has).
"""

from __future__ import annotations

import numpy as np

__all__ = ["two_level_bootstrap", "two_level_replicates", "two_sample_bootstrap", "two_sample_replicates",
           "per_seed"]


def two_level_replicates(values, *, n_boot: int = 2000, seed: int = 0) -> np.ndarray:
    """The replicate means [replicate, k] of `values[seed, problem(, k)]` (module docstring):
    what the interval is read from, and what a statistic of the mean curve (a crossing k) is
    bootstrapped over."""
    x = _cube(values)
    n_seeds, n_problems, _ = x.shape
    rng = np.random.default_rng(seed)
    seeds = _counts(rng.integers(0, n_seeds, size=(n_boot, n_seeds)), n_seeds)
    problems = _counts(rng.integers(0, n_problems, size=(n_boot, n_problems)), n_problems)
    return np.einsum("bs,bp,spk->bk", seeds, problems, x) / (n_seeds * n_problems)


def _cube(values) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64)
    if x.ndim == 2:
        x = x[:, :, None]
    if x.ndim != 3 or 0 in x.shape[:2]:
        raise ValueError(f"need values[seed, problem(, k)] with at least one of each, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("values must be finite (leave out the k some problem cannot estimate)")
    return x


def two_level_bootstrap(values, *, n_boot: int = 2000, confidence: float = 0.95, seed: int = 0):
    """(estimate, low, high) per column of `values[seed, problem(, k)]`: the grand mean and its
    percentile interval over replicates that resample seeds, then problems (module docstring)."""
    squeeze = np.ndim(values) == 2
    x = _cube(values)
    means = two_level_replicates(x, n_boot=n_boot, seed=seed)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha], axis=0)
    estimate = x.mean(axis=(0, 1))
    if squeeze:
        return float(estimate[0]), float(low[0]), float(high[0])
    return estimate, low, high


def two_sample_replicates(a, b, *, n_boot: int = 2000, seed: int = 0) -> np.ndarray:
    """Replicates [replicate, k] of mean(a) - mean(b), `a[seed_a, problem(, k)]` and
    `b[seed_b, problem(, k)]` on the same problems: each arm's seeds drawn on their own, one
    problem draw shared (module docstring)."""
    x, y = _cube(a), _cube(b)
    if x.shape[1:] != y.shape[1:]:
        raise ValueError(f"the two arms need the same problems (and k): shapes {x.shape} and {y.shape}")
    (sa, n_problems, _), sb = x.shape, y.shape[0]
    rng = np.random.default_rng(seed)
    seeds_a = _counts(rng.integers(0, sa, size=(n_boot, sa)), sa)
    seeds_b = _counts(rng.integers(0, sb, size=(n_boot, sb)), sb)
    problems = _counts(rng.integers(0, n_problems, size=(n_boot, n_problems)), n_problems)
    return (np.einsum("bs,bp,spk->bk", seeds_a, problems, x) / (sa * n_problems)
            - np.einsum("bs,bp,spk->bk", seeds_b, problems, y) / (sb * n_problems))


def two_sample_bootstrap(a, b, *, n_boot: int = 2000, confidence: float = 0.95, seed: int = 0):
    """(estimate, low, high) of mean(a) - mean(b) for two separately trained arms: the percentile
    interval over `two_sample_replicates`."""
    squeeze = np.ndim(a) == 2
    x, y = _cube(a), _cube(b)
    reps = two_sample_replicates(x, y, n_boot=n_boot, seed=seed)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(reps, [alpha, 1.0 - alpha], axis=0)
    estimate = x.mean(axis=(0, 1)) - y.mean(axis=(0, 1))
    if squeeze:
        return float(estimate[0]), float(low[0]), float(high[0])
    return estimate, low, high


def per_seed(values, *, n_boot: int = 2000, confidence: float = 0.95, seed: int = 0) -> list[tuple]:
    """[(estimate, low, high)] for each seed alone: its mean over problems and the percentile
    bootstrap over problems (the interval one training run would report)."""
    from metrics.passk import bootstrap_passk

    x = np.asarray(values, dtype=np.float64)
    out = []
    for row in x:
        row = row[:, None] if row.ndim == 1 else row
        low, high = bootstrap_passk(row, n_boot=n_boot, confidence=confidence, seed=seed)
        est = row.mean(axis=0)
        out.append((float(est[0]), float(low[0]), float(high[0])) if row.shape[1] == 1 else (est, low, high))
    return out


def _counts(idx: np.ndarray, width: int) -> np.ndarray:
    """counts[b, j]: how often unit j is drawn in replicate b."""
    n_boot = idx.shape[0]
    flat = (idx + (np.arange(n_boot) * width)[:, None]).ravel()
    return np.bincount(flat, minlength=n_boot * width).reshape(n_boot, width).astype(np.float64)
