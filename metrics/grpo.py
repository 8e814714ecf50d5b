"""Group-relative advantages (GRPO) and population z-scores (ES), in numpy.

    from metrics.grpo import group_advantages
    group_advantages([[1, 0, 0, 1]], scale="group")  # -> [[0.866, -0.866, -0.866, 0.866]]

GRPO (DeepSeekMath; TRL `GRPOTrainer._generate_and_score_completions`):
`A_i = (r_i - mean_g) / (std_g + eps)` with Bessel-corrected std and
`eps = 1e-4` (TRL; verl uses 1e-6); `scale="none"` is Dr. GRPO's
`A_i = r_i - mean_g`. ES (Qiu et al. 2025, arXiv 2509.24372): population
rewards z-scored as `(R - mean) / (std + 1e-8)` with ddof 0.

Limits: groups must all have the same size G >= 2 (a group of one has no
Bessel std). Pure numpy; no torch, no I/O.
"""

from __future__ import annotations

import numpy as np

__all__ = ["group_advantages", "group_stats", "population_zscores", "keep_informative_groups"]

TRL_EPS = 1e-4
ES_EPS = 1e-8


def group_advantages(rewards, *, scale: str = "group", eps: float = TRL_EPS) -> np.ndarray:
    """Advantages for a (groups, G) reward array, see the module docstring.

    scale="group": `(r - mean_g) / (std_g(ddof=1) + eps)` (TRL default);
    scale="none": `r - mean_g` (Dr. GRPO, TRL `scale_rewards="none"`).
    """
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 2 or r.shape[1] < 2:
        raise ValueError(f"rewards must be (groups, G) with G >= 2, got shape {r.shape}")
    centred = r - r.mean(axis=1, keepdims=True)
    if scale == "none":
        return centred
    if scale != "group":
        raise ValueError(f"scale must be 'group' or 'none', got {scale!r}")
    return centred / (r.std(axis=1, ddof=1, keepdims=True) + eps)


def group_stats(rewards) -> dict:
    """TRL's logged reward statistics for a (groups, G) reward array.

    `reward` = mean reward; `reward_std` = mean over groups of the Bessel std
    (TRL logs `std_rewards.mean()`); `frac_reward_zero_std` = share of groups
    whose rewards are all equal (zero advantage: no learning signal).
    """
    r = np.asarray(rewards, dtype=np.float64)
    std = r.std(axis=1, ddof=1)
    return {
        "reward": float(r.mean()),
        "reward_std": float(std.mean()),
        "frac_reward_zero_std": float(np.isclose(std, 0.0).mean()),
    }


def keep_informative_groups(rewards) -> np.ndarray:
    """Boolean mask of groups with 0 < #correct < G (DAPO dynamic sampling).

    DAPO (Yu et al. 2025, arXiv 2503.14476) keeps a group only when its
    rewards are not all equal; for a binary reward that is 0 < #correct < G.
    """
    r = np.asarray(rewards, dtype=np.float64)
    return r.max(axis=1) > r.min(axis=1)


def population_zscores(rewards, *, eps: float = ES_EPS) -> np.ndarray:
    """ES fitness shaping: `(R - mean) / (std + eps)` with ddof 0 (Qiu et al. 2025).

    All rewards equal gives all zeros: the ES update then vanishes.
    """
    r = np.asarray(rewards, dtype=np.float64)
    return (r - r.mean()) / (r.std(ddof=0) + eps)
