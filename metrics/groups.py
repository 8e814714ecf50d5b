"""Zero-advantage GRPO groups estimated from a pass@k run's per-problem (n, c).

A group of G samples carries no GRPO signal when every reward is equal (with a
binary reward: all correct or all wrong), because every advantage
`(r_i - mean_g) / (std_g + eps)` is then 0 (docs/references.md, "Zero-advantage
groups"; DeepSeekMath GRPO; DAPO dynamic sampling filters such groups).

For one problem with n stored samples of which c are correct, the unbiased
estimate of the probability that G samples drawn without replacement are
uniform is

    P_zero(G) = [C(c, G) + C(n - c, G)] / C(n, G),   G <= n,

reported as its two parts (all correct: `C(c,G)/C(n,G)`, all wrong:
`C(n-c,G)/C(n,G)`). It is the pass@k estimator's complement read the other
way (pass@k = 1 - C(n-c,k)/C(n,k), Chen et al. 2021). Computed in the product
form `prod_{i<G} (c - i) / (n - i)` so it never overflows.

Limits: a problem with n < G has no unbiased estimate at that G; it is left
out of the average and counted (`n_excluded`), never padded. With non-binary
rewards, TRL's `frac_reward_zero_std` also counts groups of equal partial
scores; this estimator counts only all-correct and all-wrong groups.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = [
    "uniform_fraction",
    "zero_advantage",
    "zero_advantage_table",
    "difficulty_buckets",
    "zero_advantage_by_bucket",
    "smallest_group_size",
    "uniform_problems",
    "BUCKETS",
]

# Difficulty buckets by per-problem pass rate c/n; the ends are exact.
BUCKETS = ("0", "(0,0.25]", "(0.25,0.5]", "(0.5,0.75]", "(0.75,1)", "1")


def uniform_fraction(n: int, m: int, g: int) -> float:
    """`C(m, g) / C(n, g)`: the chance that g of n items drawn without
    replacement all come from a subset of m, as `prod_{i<g} (m-i)/(n-i)`."""
    if not 0 <= m <= n or not 1 <= g <= n:
        raise ValueError(f"need 0 <= m <= n and 1 <= g <= n, got n={n}, m={m}, g={g}")
    if m < g:
        return 0.0
    i = np.arange(g, dtype=np.float64)
    return float(np.prod((m - i) / (n - i)))


def zero_advantage(n: int, c: int, g: int) -> tuple[float, float]:
    """(all-correct, all-wrong) estimates for one problem: `C(c,G)/C(n,G)`, `C(n-c,G)/C(n,G)`."""
    return uniform_fraction(n, c, g), uniform_fraction(n, n - c, g)


def _per_problem(ns: np.ndarray, cs: np.ndarray, g: int) -> tuple[np.ndarray, np.ndarray]:
    """Arrays of the two parts, NaN where n < G."""
    correct = np.full(len(ns), np.nan)
    wrong = np.full(len(ns), np.nan)
    for i, (n, c) in enumerate(zip(ns, cs, strict=True)):
        if n >= g:
            correct[i], wrong[i] = zero_advantage(int(n), int(c), g)
    return correct, wrong


def zero_advantage_table(ns, cs, group_sizes) -> pd.DataFrame:
    """One row per G: mean over problems with n >= G of the estimate.

    Columns: group_size, frac_zero (all_correct + all_wrong), frac_all_correct,
    frac_all_wrong, frac_informative (1 - frac_zero), n_problems (averaged),
    n_excluded (n < G). Fractions are NaN when no problem has n >= G.
    """
    ns, cs = np.asarray(ns, dtype=np.int64), np.asarray(cs, dtype=np.int64)
    rows = []
    for g in group_sizes:
        if g < 1:
            raise ValueError(f"group size must be >= 1, got {g}")
        correct, wrong = _per_problem(ns, cs, int(g))
        used = ~np.isnan(correct)
        mean_c = float(correct[used].mean()) if used.any() else np.nan
        mean_w = float(wrong[used].mean()) if used.any() else np.nan
        rows.append({
            "group_size": int(g),
            "frac_zero": mean_c + mean_w,
            "frac_all_correct": mean_c,
            "frac_all_wrong": mean_w,
            "frac_informative": 1.0 - (mean_c + mean_w),
            "n_problems": int(used.sum()),
            "n_excluded": int((~used).sum()),
        })
    return pd.DataFrame(rows)


def difficulty_buckets(ns, cs) -> np.ndarray:
    """Bucket label per problem from its pass rate c/n (see BUCKETS)."""
    rate = np.asarray(cs, dtype=np.float64) / np.asarray(ns, dtype=np.float64)
    edges = np.searchsorted([0.25, 0.5, 0.75], rate, side="left") + 1  # 1..4 inside (0, 1)
    labels = np.array(BUCKETS, dtype=object)[np.clip(edges, 1, 4)]
    labels[rate == 0] = BUCKETS[0]
    labels[rate == 1] = BUCKETS[-1]
    return labels


def zero_advantage_by_bucket(ns, cs, group_sizes) -> pd.DataFrame:
    """`zero_advantage_table` within each difficulty bucket, with a `bucket` column."""
    ns, cs = np.asarray(ns), np.asarray(cs)
    labels = difficulty_buckets(ns, cs)
    parts = []
    for bucket in BUCKETS:
        sel = labels == bucket
        if sel.any():
            table = zero_advantage_table(ns[sel], cs[sel], group_sizes)
            parts.append(table.assign(bucket=bucket))
    if not parts:
        return pd.DataFrame()
    out = pd.concat(parts, ignore_index=True)
    return out[["bucket", *[c for c in out.columns if c != "bucket"]]]


def smallest_group_size(ns, cs, target: float, *, max_group: int | None = None) -> int | None:
    """Smallest G in 2..max_group (default: the smallest n, so no problem is
    excluded) whose estimated informative fraction reaches `target`; None if none does.

    The informative fraction never decreases with G for a fixed problem, so the
    search stops at the first G that reaches the target.
    """
    if not 0 < target <= 1:
        raise ValueError(f"target must be in (0, 1], got {target}")
    limit = int(np.min(ns)) if max_group is None else int(max_group)
    for g in range(2, limit + 1):
        row = zero_advantage_table(ns, cs, [g]).iloc[0]
        if row["n_problems"] and row["frac_informative"] >= target:
            return g
    return None


def uniform_problems(ids, ns, cs) -> dict[str, list]:
    """Problems whose stored samples were all correct or all wrong.

    These are the ones DAPO-style dynamic sampling would filter at every G.
    """
    ids, ns, cs = list(ids), np.asarray(ns), np.asarray(cs)
    return {
        "all_correct": [p for p, n, c in zip(ids, ns, cs, strict=True) if c == n],
        "all_wrong": [p for p, c in zip(ids, cs, strict=True) if c == 0],
    }
