"""Two training arms compared at matched pass@1: each arm's checkpoint nearest one common pass@1,
then pass@k of the two there, with a paired interval over problems.

    a = [CurvePoint("grpo step 12", ns, cs), ...]       # per checkpoint: samples and correct per problem
    b = [CurvePoint("es step 3", ns, cs), ...]          # the same problems, in the same order
    matched_comparison(a, b, ks=[1, 8, 64])             # target: the highest pass@1 both arms reach

Why: an arm that learned more has a higher pass@1 and often a lower pass@k at large k; comparing
the final checkpoints mixes the two. Reading each arm where its pass@1 is the same asks whether,
at equal accuracy, one arm covers more problems at k samples (narrowing, Yue et al. 2025).

Rule. pass@1 of a checkpoint is the mean over problems of c/n. The target is `target` when given,
else the highest pass@1 both arms reach: min(max_a, max_b). Each arm's checkpoint is the one whose
pass@1 is nearest the target (ties to the earlier checkpoint). The matched pass@1 gap (b - a) is
reported with its interval, since a coarse curve may match poorly. Pass@k per problem is the
unbiased estimator (metrics.passk.per_problem_passk); the difference b - a is averaged over the
problems where both have n >= k, with a percentile bootstrap over problems resampled jointly
(metrics.passk.bootstrap_passk on the per-problem differences), seeded. Limits: one curve per arm
(one training seed); the picked checkpoints depend on the same samples the comparison reads, a
selection effect that is small when the curve has few points and the held-out set is large.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["CurvePoint", "pass1", "nearest_checkpoint", "matched_comparison"]


@dataclass(frozen=True)
class CurvePoint:
    """One checkpoint of an arm: its label, and per problem the samples n and correct c."""

    label: str
    ns: np.ndarray
    cs: np.ndarray


def pass1(point: CurvePoint) -> float:
    """Mean over problems of c / n (the unbiased pass@1)."""
    return float(np.mean(np.asarray(point.cs, float) / np.asarray(point.ns, float)))


def nearest_checkpoint(curve: list[CurvePoint], target: float) -> int:
    """Index of the checkpoint whose pass@1 is nearest `target`, ties to the earlier."""
    gaps = [abs(pass1(p) - target) for p in curve]
    return int(np.argmin(gaps))  # argmin returns the first of equal minima


def matched_comparison(a: list[CurvePoint], b: list[CurvePoint], ks, *, target: float | None = None,
                       n_boot: int = 2000, confidence: float = 0.95, seed: int = 0) -> dict:
    """Pick each arm's checkpoint at the common pass@1 and compare pass@k there (module docstring).
    Returns the target, each arm's pick (label, index, pass@1, the curve it was read from), and per
    k: a's and b's pass@k, the difference b - a with its interval, and the problems counted."""
    from metrics.passk import bootstrap_passk, per_problem_passk

    if not a or not b:
        raise ValueError("each arm needs at least one checkpoint")
    sizes = {len(p.ns) for p in (*a, *b)} | {len(p.cs) for p in (*a, *b)}
    if len(sizes) != 1:
        raise ValueError(f"every checkpoint must cover the same problems (sizes {sorted(sizes)})")
    curves = {"a": [pass1(p) for p in a], "b": [pass1(p) for p in b]}
    goal = float(min(max(curves["a"]), max(curves["b"]))) if target is None else float(target)
    picks = {arm: nearest_checkpoint(curve, goal) for arm, curve in (("a", a), ("b", b))}
    pa, pb = a[picks["a"]], b[picks["b"]]
    ks = [int(k) for k in ks]
    ma, mb = per_problem_passk(pa.ns, pa.cs, [1, *ks]), per_problem_passk(pb.ns, pb.cs, [1, *ks])
    diff = np.where(np.isnan(ma) | np.isnan(mb), np.nan, mb - ma)
    low, high = bootstrap_passk(diff, n_boot=n_boot, confidence=confidence, seed=seed)
    rows = []
    for j, k in enumerate([1, *ks]):
        both = ~np.isnan(diff[:, j])
        rows.append({"k": k, "problems": int(both.sum()),
                     "a": float(ma[both, j].mean()) if both.any() else float("nan"),
                     "b": float(mb[both, j].mean()) if both.any() else float("nan"),
                     "difference": float(diff[both, j].mean()) if both.any() else float("nan"),
                     "low": float(low[j]), "high": float(high[j])})
    return {"target": goal, "target_rule": "given" if target is not None else "min(max pass@1 of a, of b)",
            "a": {"label": pa.label, "index": picks["a"], "pass1": curves["a"][picks["a"]], "curve": curves["a"]},
            "b": {"label": pb.label, "index": picks["b"], "pass1": curves["b"][picks["b"]], "curve": curves["b"]},
            "pass1_gap": rows[0], "passk": rows[1:], "confidence": confidence, "n_boot": n_boot, "seed": seed}
