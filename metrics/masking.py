"""Top-q masks of a parameter update, chosen exactly by a streamed radix select, and the share of
a gain that a masked update keeps.

    keys = mask_keys(delta, base, "abs")              # |dW| (or "rel": |dW|/|W|) as uint32 keys
    [(threshold, ties)] = top_thresholds(lambda: (keys_of_each_tensor), [top_count(0.01, n)])
    mask, taken = select(keys, threshold, ties - taken_so_far)           # tensor by tensor
    gain_retained(base_scores, trained_scores, masked_scores)            # with a paired interval

Keys. A non-negative float32's bit pattern, read as uint32, orders like its value, so the k
largest keys are found in two counting passes over the whole model (the top 16 bits, then the
low 16 bits inside the bin that holds the k-th largest): `threshold` is the exact k-th largest
key and `ties` how many entries equal to it are taken. Memory: two 65,536-bin histograms.
`rel` is |dW| / |W| with |W| the base's; W = 0 gives +inf when dW != 0 (always kept first) and
0 when dW = 0. `random` is a seeded uniform key: the control, a mask of the same size that
ignores the update.

Ties. Entries above the threshold are all selected; of the entries equal to it, the first ones in
the caller's order (evalkit.masking: tensors sorted by name, then flat index) until k are taken.
So exactly k entries are selected, and the choice depends on nothing but the keys and that order.

Gain retained: `(mean(masked) - mean(base)) / (mean(trained) - mean(base))` over problems,
with a percentile bootstrap resampling problems jointly (one index draws all three scores, as
metrics.paired), seeded; resamples where the trained model's gain is not positive leave the ratio
undefined and are counted (`undefined_frac`), the interval read from the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

__all__ = ["KEYS", "mask_keys", "top_thresholds", "select", "top_count", "gain_retained"]

KEYS = ("abs", "rel", "random")
BINS = 1 << 16


def top_count(q: float, n: int) -> int:
    """Entries a top-q mask keeps: ceil(q n) (the convention of metrics.sparsity's share curve),
    exactly n at q = 1 and 0 at q = 0."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q {q}: need 0 <= q <= 1")
    x = q * n
    near = round(x)  # 0.05 * 100 is 5.000000000000001 in floats: that is 5, not 6
    return min(n, int(near if abs(x - near) <= 1e-9 * max(1.0, x) else np.ceil(x)))


def mask_keys(delta, base, by: str, seed: int | None = None) -> np.ndarray:
    """uint32 keys (flat) that order entries by |delta|, |delta|/|base| or at random (`seed`)."""
    d = np.abs(np.asarray(delta, dtype=np.float32).ravel())
    if by == "abs":
        key = d
    elif by == "rel":
        w = np.abs(np.asarray(base, dtype=np.float32).ravel())
        with np.errstate(divide="ignore", invalid="ignore"):
            key = np.where(d == 0, np.float32(0), d / w).astype(np.float32)
    elif by == "random":
        if seed is None:
            raise ValueError("by='random' needs a seed")
        return np.random.default_rng(seed).integers(0, 1 << 32, d.size, dtype=np.uint32)
    else:
        raise ValueError(f"by {by!r}: choose one of {', '.join(KEYS)}")
    if np.isnan(key).any():
        raise ValueError("NaN in the update: a masked model needs finite weights")
    return np.ascontiguousarray(key, dtype=np.float32).view(np.uint32)


def _cut(counts: np.ndarray, k: int) -> tuple[int, int]:
    """(bin, how many of that bin's entries to take) so that the bins above it plus those make k."""
    above = np.concatenate([np.cumsum(counts[::-1])[::-1][1:], [0]])  # entries in bins above each bin
    b = int(np.flatnonzero((above < k) & (above + counts >= k))[0])
    return b, int(k - above[b])


def top_thresholds(keys_of: Callable[[], Iterable[np.ndarray]], ks) -> list[tuple[int | None, int]]:
    """For each k: (the exact k-th largest key, how many keys equal to it are taken), over every
    array `keys_of()` yields (called twice: a pass over the top 16 bits, one over the low 16 bits
    inside the bins that hold the cuts); (None, 0) for k = 0, nothing selected."""
    high = np.zeros(BINS, np.int64)
    for keys in keys_of():
        high += np.bincount(keys >> 16, minlength=BINS)
    if any(k > int(high.sum()) for k in ks):
        raise ValueError(f"k {max(ks)}: only {int(high.sum())} entries")
    bins = {k: _cut(high, k)[0] for k in ks if k > 0}
    low = {b: np.zeros(BINS, np.int64) for b in set(bins.values())}
    if low:
        for keys in keys_of():
            top = keys >> 16
            for b, counts in low.items():
                counts += np.bincount(keys[top == b] & 0xFFFF, minlength=BINS)
    out = []
    for k in ks:
        if k == 0:
            out.append((None, 0))
            continue
        b = bins[k]
        bit, ties = _cut(low[b], k - int(high[b + 1:].sum()))
        out.append(((b << 16) | bit, ties))
    return out


def select(keys: np.ndarray, threshold: int | None, ties_left: int) -> tuple[np.ndarray, int]:
    """(boolean mask of the selected entries, ties taken here): every key above `threshold`, and
    the first `ties_left` keys equal to it (see the module's rule on ties)."""
    if threshold is None:
        return np.zeros(keys.shape, bool), 0
    mask = keys > threshold
    if ties_left > 0:
        equal = np.flatnonzero(keys == threshold)[:ties_left]
        mask[equal] = True
        return mask, int(equal.size)
    return mask, 0


def gain_retained(base, trained, masked, *, n_boot: int = 2000, confidence: float = 0.95, seed: int = 0) -> dict:
    """Share of the trained model's gain over the base that the masked model keeps, per-problem
    scores aligned (1-d arrays: greedy 0/1, or a mean reward per problem); see the module docstring.
    Returns the three means, `gain` (trained - base), `masked_gain` (masked - base) with its
    paired interval, `retained` with its interval, `undefined_frac` and n."""
    b, t, m = (np.asarray(x, dtype=np.float64) for x in (base, trained, masked))
    if not b.shape == t.shape == m.shape or b.ndim != 1:
        raise ValueError(f"need three 1-d score arrays of one length, got {b.shape}, {t.shape}, {m.shape}")
    n = b.size
    nan = float("nan")
    if n == 0:
        return {"n": 0, "base": nan, "trained": nan, "masked": nan, "gain": nan, "masked_gain": nan,
                "masked_gain_ci": [nan, nan], "retained": nan, "retained_ci": [nan, nan], "undefined_frac": nan}
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    gain, kept = (t - b)[idx].mean(axis=1), (m - b)[idx].mean(axis=1)
    defined = gain > 0
    alpha = (1.0 - confidence) / 2.0
    ratio_ci = (np.quantile(kept[defined] / gain[defined], [alpha, 1 - alpha]).tolist() if defined.any()
                else [nan, nan])
    point_gain = float((t - b).mean())
    return {"n": int(n), "base": float(b.mean()), "trained": float(t.mean()), "masked": float(m.mean()),
            "gain": point_gain, "masked_gain": float((m - b).mean()),
            "masked_gain_ci": np.quantile(kept, [alpha, 1 - alpha]).tolist(),
            "retained": float((m - b).mean()) / point_gain if point_gain > 0 else nan,
            "retained_ci": ratio_ci, "undefined_frac": float(1.0 - defined.mean())}
