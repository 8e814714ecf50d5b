"""The positive control: does a trained arm beat its base on the validation split at all?

    positive_control(base, {"step 3": s3, "step 6": s6, "step 9": s9}, picked="step 9")

Why: a comparison of ES with GRPO says nothing about ES if ES never learned; the study reads ES's
comparisons only when this control passes, and says "not tested" otherwise (issue 44).

Test. Per-problem scores are aligned with the base's (greedy 0/1, or a mean reward). The picked
checkpoint is the best of m candidates on the same split, so its gain is biased upward; the test
is one-sided at alpha / m (Bonferroni: whichever candidate is picked, the chance that a candidate
no better than the base passes is at most alpha). With 0/1 scores it is the exact one-sided
McNemar (binomial) test on the discordant problems, `P(X >= c)`, X ~ Binomial(b + c, 1/2), c the
problems only the model solves, b those only the base solves; otherwise a seeded sign-flip
permutation test of the mean difference (20,000 flips, the observed one counted). The gain's
interval is a paired percentile bootstrap over problems, two-sided at 1 - 2 alpha / m, so its
lower bound is the one-sided bound at alpha / m. Passed: p <= alpha / m.
"""

from __future__ import annotations

import numpy as np

__all__ = ["positive_control", "one_sided_p"]

FLIPS = 20_000


def one_sided_p(base, model, *, seed: int = 0) -> tuple[float, str]:
    """(p of "model better than base", method), see the module docstring."""
    from scipy.stats import binom

    b_, m_ = np.asarray(base, float), np.asarray(model, float)
    d = m_ - b_
    if np.isin(b_, (0.0, 1.0)).all() and np.isin(m_, (0.0, 1.0)).all():
        wins, losses = int((d > 0).sum()), int((d < 0).sum())
        if wins + losses == 0:
            return 1.0, "exact binomial (McNemar), no discordant problems"
        return float(binom.sf(wins - 1, wins + losses, 0.5)), "exact binomial (McNemar)"
    signs = np.random.default_rng(seed).choice((-1.0, 1.0), size=(FLIPS, d.size))
    flipped = (signs * d).mean(axis=1)
    return float((1 + np.sum(flipped >= d.mean() - 1e-12)) / (FLIPS + 1)), "sign-flip permutation"


def positive_control(base, candidates: dict, picked, *, alpha: float = 0.05, n_boot: int = 4000,
                     seed: int = 0) -> dict:
    """Whether the picked candidate beats the base at alpha / len(candidates), one-sided."""
    if picked not in candidates:
        raise ValueError(f"picked {picked!r} is not among the candidates {list(candidates)}")
    b_ = np.asarray(base, float)
    m_ = np.asarray(candidates[picked], float)
    if b_.shape != m_.shape or b_.ndim != 1 or b_.size == 0:
        raise ValueError(f"need two non-empty 1-d score arrays of one length, got {b_.shape} and {m_.shape}")
    level = alpha / len(candidates)
    p, method = one_sided_p(b_, m_, seed=seed)
    d = m_ - b_
    boots = d[np.random.default_rng(seed).integers(0, d.size, size=(n_boot, d.size))].mean(axis=1)
    low, high = np.quantile(boots, [level, 1 - level])
    return {"passed": bool(p <= level), "p_value": p, "level": level, "alpha": alpha, "candidates": len(candidates),
            "method": method, "base": float(b_.mean()), "picked": picked, "model": float(m_.mean()),
            "gain": float(d.mean()), "gain_low": float(low), "gain_high": float(high), "problems": int(d.size),
            "rule": f"one-sided at alpha / m = {alpha:g} / {len(candidates)} (Bonferroni over the candidates the "
                    "pick was made from); interval: paired bootstrap, its lower bound one-sided at alpha / m"}
