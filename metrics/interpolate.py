"""Loss barriers along a path between two models, with a bootstrap interval over problems.

    from metrics.interpolate import barrier, bootstrap_barrier
    height, where = barrier(ts, losses)     # max_t [f(t) - ((1 - t) f(0) + t f(1))]

Definition (Frankle et al. 2020, "Linear mode connectivity and the lottery ticket hypothesis";
the form used for ES and GRPO checkpoints by arXiv 2604.01499): along `theta(t) = (1 - t) A +
t B`, the barrier of a quantity f that is worse when larger (loss, error rate) is
`max_{t in [0, 1]} [f(t) - ((1 - t) f(0) + t f(1))]`, the largest excess over the straight line
between the endpoints; 0 when f is linear or convex along the path ("linearly connected"),
positive when the middle is worse. Points with t outside [0, 1] (extrapolation) never count.
For accuracy, f = 1 - accuracy (an accuracy dip is a barrier).

The interval resamples problems with replacement (percentile bootstrap, `n_boot` draws,
seeded): each draw recomputes f at every t from the same resampled problems (so the endpoints
move with the middle) and takes its barrier.
"""

from __future__ import annotations

import numpy as np

__all__ = ["barrier", "barrier_curve", "bootstrap_barrier", "ratio_by_point"]


def barrier_curve(ts, f) -> np.ndarray:
    """`f(t) - ((1 - t) f(0) + t f(1))` at every t (f given at t = 0 and t = 1 among `ts`);
    the last axis of `f` runs over `ts`."""
    ts, f = np.asarray(ts, np.float64), np.asarray(f, np.float64)
    i0, i1 = _endpoint(ts, 0.0), _endpoint(ts, 1.0)
    return f - ((1 - ts) * f[..., i0:i0 + 1] + ts * f[..., i1:i1 + 1])


def _endpoint(ts: np.ndarray, value: float) -> int:
    where = np.flatnonzero(ts == value)
    if where.size == 0:
        raise ValueError(f"no point at t = {value:g}: the barrier needs both endpoints")
    return int(where[0])


def barrier(ts, f) -> tuple[float, float]:
    """(height, t where it is reached) over t in [0, 1]; 0.0 at an endpoint when f is convex."""
    ts = np.asarray(ts, np.float64)
    inside = (ts >= 0) & (ts <= 1)
    excess = barrier_curve(ts, f)[..., inside]
    j = int(np.argmax(excess))
    return float(excess[j]), float(ts[inside][j])


def ratio_by_point(num: np.ndarray, den: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per resample and point: `sum_p w_p num[p, t] / sum_p w_p den[p]` (token-weighted mean loss;
    `den` = 1 per problem gives the mean over problems). `weights`: [draws, problems]."""
    return (weights @ num) / (weights @ den)[:, None]


def bootstrap_barrier(ts, num, den=None, *, n_boot: int = 1000, confidence: float = 0.95,
                      seed: int = 0) -> dict:
    """Barrier of `f(t) = sum_p num[p, t] / sum_p den[p]` and its percentile interval over
    problems. `num`: [problems, points] (per-problem error rates, or loss sums); `den`: per-problem
    weights (token counts; default 1 each)."""
    num = np.asarray(num, np.float64)
    den = np.ones(num.shape[0]) if den is None else np.asarray(den, np.float64)
    height, where = barrier(ts, num.sum(0) / den.sum())
    rng = np.random.default_rng(seed)
    problems = num.shape[0]
    draws = rng.multinomial(problems, np.full(problems, 1.0 / problems), size=n_boot).astype(np.float64)
    curves = barrier_curve(ts, ratio_by_point(num, den, draws))
    inside = (np.asarray(ts) >= 0) & (np.asarray(ts) <= 1)
    heights = curves[:, inside].max(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(heights, [tail, 1 - tail])
    return {"height": height, "t": where, "ci_low": float(low), "ci_high": float(high),
            "confidence": confidence, "n_boot": n_boot, "interval": "percentile bootstrap over problems"}
