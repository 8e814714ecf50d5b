"""Where an arm's validation curve levels off, and whether it did before training stopped.

    plateau(completions=[384, 768, 1152, 1536], rewards=[.27, .42, .48, .38], margin=1 / 64, after=2)

Rule (fixed before the data; `margin` and `after` are the study's to register): the plateau
checkpoint is the earliest whose validation reward is within `margin` of the best reward on the
curve; the curve *reached* its plateau when at least `after` checkpoints follow it (training went
on that long without beating it by more than `margin`). An arm that did not reach it was still
improving when its budget ran out: its comparisons are read at a point that is not its plateau.
Returns the plateau's index, completions and reward, the best, and `reached`. With `seconds`
(wall time at each checkpoint) it also gives the seconds to the plateau.
"""

from __future__ import annotations

import numpy as np

__all__ = ["plateau"]


def plateau(completions, rewards, *, margin: float, after: int = 1, seconds=None) -> dict:
    """See the module docstring."""
    r = np.asarray(rewards, dtype=np.float64)
    c = np.asarray(completions)
    if r.ndim != 1 or r.size == 0 or c.shape != r.shape:
        raise ValueError(f"need one reward per checkpoint, got {c.shape} completions and {r.shape} rewards")
    if margin < 0 or after < 0:
        raise ValueError("margin and after must be >= 0")
    best = float(r.max())
    i = int(np.flatnonzero(r >= best - margin)[0])
    out = {"index": i, "completions": int(c[i]), "reward": float(r[i]), "best": best, "margin": margin,
           "after": after, "checkpoints_after": int(r.size - 1 - i), "reached": bool(r.size - 1 - i >= after)}
    if seconds is not None:
        out["seconds"] = float(np.asarray(seconds, dtype=np.float64)[i])
    return out
