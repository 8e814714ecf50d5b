"""Per-token statistics of teacher-forced traces: clipping shares, divergence concentration.

    clip_shares(ratio, eps_low=0.2, eps_high=0.2)      # {"below": .., "above": .., "outside": ..}
    concentration(kl, (0.0005, 0.005, 0.05))           # share of the total held by the top q of tokens
    tokens_for_half(kl_of_one_trajectory)              # fewest tokens holding half its divergence
    lorenz(kl, points=101)                             # cumulative share against share of tokens

Sources: the GRPO/PPO ratio clip `clip(r, 1 - eps_low, 1 + eps_high)` with `r = pi_policy /
pi_behaviour` per token (TRL GRPOTrainer: eps 0.2; DAPO's clip-higher eps_high 0.28); a token
whose ratio lies outside the band gets no gradient from the clipped term (Echo-GRPO's concern:
foreign traces' critical tokens are clipped). Divergence concentration follows sparse-token
on-policy distillation (Liu et al.): the share of the trajectory-level reverse KL carried by
the most divergent tokens; the Lorenz curve sorts tokens by divergence, largest first.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["clip_shares", "concentration", "tokens_for_half", "lorenz", "probability_summary"]


def clip_shares(ratio, *, eps_low: float = 0.2, eps_high: float = 0.2) -> dict:
    """Shares of tokens whose ratio is below `1 - eps_low`, above `1 + eps_high`, and either."""
    r = np.asarray(ratio, dtype=np.float64)
    r = r[np.isfinite(r)]
    if r.size == 0:
        return {"below": math.nan, "above": math.nan, "outside": math.nan, "n": 0}
    below = float(np.mean(r < 1 - eps_low))
    above = float(np.mean(r > 1 + eps_high))
    return {"below": below, "above": above, "outside": below + above, "n": int(r.size)}


def concentration(values, qs) -> dict:
    """Share of `sum(values)` held by the top fraction q of entries (largest first), per q; at
    least one entry counts for any q > 0."""
    v = np.sort(np.asarray(values, dtype=np.float64))[::-1]
    total = float(v.sum())
    out = {}
    for q in qs:
        k = max(1, math.ceil(q * v.size)) if v.size else 0
        out[q] = float(v[:k].sum() / total) if total > 0 else math.nan
    return out


def tokens_for_half(values) -> int:
    """The fewest entries whose sum reaches half the total (0 for an empty or all-zero input)."""
    v = np.sort(np.asarray(values, dtype=np.float64))[::-1]
    total = float(v.sum())
    if total <= 0:
        return 0
    return int(np.searchsorted(np.cumsum(v), total / 2) + 1)


def lorenz(values, points: int = 101) -> dict:
    """Cumulative share of the total against the share of entries, largest entries first,
    sampled at `points` evenly spaced shares of entries (both from 0 to 1)."""
    v = np.sort(np.asarray(values, dtype=np.float64))[::-1]
    x = np.linspace(0.0, 1.0, points)
    if v.size == 0 or v.sum() <= 0:
        return {"share_of_tokens": x.tolist(), "share_of_total": [math.nan] * points}
    cum = np.concatenate([[0.0], np.cumsum(v) / v.sum()])
    idx = np.round(x * v.size).astype(int)
    return {"share_of_tokens": x.tolist(), "share_of_total": cum[idx].tolist()}


def probability_summary(p) -> dict:
    """Quantiles of token probabilities and the shares below 0.01 and 0.1."""
    p = np.asarray(p, dtype=np.float64)
    p = p[np.isfinite(p)]
    if p.size == 0:
        return {"n": 0}
    qs = (0.01, 0.05, 0.1, 0.25, 0.5, 0.75)
    return {"n": int(p.size), **{f"q{round(q * 100):02d}": float(v) for q, v in zip(qs, np.quantile(p, qs),
                                                                                     strict=True)},
            "share_below_0.01": float(np.mean(p < 0.01)), "share_below_0.1": float(np.mean(p < 0.1))}
