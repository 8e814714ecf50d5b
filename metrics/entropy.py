"""Token entropy summaries and Cui et al.'s entropy-performance law.

Token entropy (Cui et al. 2025, arXiv 2505.22617; TRL and verl alike):
`H_t = -sum_v p_t(v) log p_t(v)` in nats from softmax(logits / temperature),
averaged over a response's tokens (evalkit's sampler stores that per-sample
mean), then over the batch. The per-run figure used for the law is that
batch mean (mean over samples of per-sample means); the token-weighted mean
(every token counts once, `sum_i H_i T_i / sum_i T_i`) is reported beside it.

The law, across checkpoints of one training run: `R = -a * exp(H) + b`,
fitted here by ordinary least squares of R on x = exp(H) (it is linear in
a and b). The predicted ceiling is R at H = 0: `-a + b`.

Limits: with two points the fit is exact (R^2 = 1, no information); the
points' order does not change the fit.
"""

from __future__ import annotations

import numpy as np

__all__ = ["entropy_summary", "fit_entropy_law", "QUANTILES"]

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)


def _mean(x: np.ndarray) -> float | None:
    return float(x.mean()) if x.size else None


def entropy_summary(entropy, num_tokens, correct) -> dict:
    """Entropy figures for one run from per-sample mean entropies.

    `entropy`: per-sample mean token entropy (NaN where missing, counted);
    `num_tokens`: generated tokens per sample (weights of the token mean);
    `correct`: bool per sample. Returns mean_per_sample (batch mean),
    mean_per_token, mean_correct, mean_incorrect, std, quantiles (q10..q90),
    n_samples, n_missing.
    """
    h = np.asarray(entropy, dtype=np.float64)
    t = np.asarray(num_tokens, dtype=np.float64)
    ok = np.asarray(correct, dtype=bool)
    have = ~np.isnan(h)
    h_have, t_have, ok_have = h[have], t[have], ok[have]
    weights = t_have.sum()
    quantiles = np.quantile(h_have, QUANTILES) if h_have.size else [None] * len(QUANTILES)
    return {
        "mean_per_sample": _mean(h_have),
        "mean_per_token": float((h_have * t_have).sum() / weights) if weights > 0 else None,
        "mean_correct": _mean(h_have[ok_have]),
        "mean_incorrect": _mean(h_have[~ok_have]),
        "std": float(h_have.std()) if h_have.size else None,
        "quantiles": {f"q{round(q * 100)}": (None if v is None else float(v))
                      for q, v in zip(QUANTILES, quantiles, strict=True)},
        "n_samples": int(h.size),
        "n_missing": int((~have).sum()),
    }


def fit_entropy_law(entropy, reward) -> dict:
    """Fit `R = -a * exp(H) + b` by least squares over points (H_i, R_i).

    Source: Cui et al. 2025 (arXiv 2505.22617), eq. "R = -a e^H + b".
    Returns a, b, r2 (coefficient of determination of R), rmse, ceiling
    (`-a + b`, the predicted R at H = 0) and n_points. Needs at least two
    points with different H; raises ValueError otherwise.
    """
    h = np.asarray(entropy, dtype=np.float64)
    r = np.asarray(reward, dtype=np.float64)
    if h.shape != r.shape or h.size < 2:
        raise ValueError(f"need at least 2 (H, R) points of equal length, got {h.size} and {r.size}")
    x = np.exp(h)
    if np.ptp(x) == 0:
        raise ValueError("all points have the same entropy: the law cannot be fitted")
    design = np.column_stack([-x, np.ones_like(x)])
    (a, b), *_ = np.linalg.lstsq(design, r, rcond=None)
    residual = r - (-a * x + b)
    total = ((r - r.mean()) ** 2).sum()
    r2 = 1.0 - (residual**2).sum() / total if total > 0 else float("nan")
    return {
        "a": float(a),
        "b": float(b),
        "r2": float(r2),
        "rmse": float(np.sqrt((residual**2).mean())),
        "ceiling": float(b - a),
        "n_points": int(h.size),
    }
