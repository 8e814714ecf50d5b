"""Parameter-update statistics on arrays: sparsity, norms, concentration, rank, overlap.

    from metrics.weights import Chunk, chunk_stats, finish_stats, new_stats
    acc = new_stats()
    chunk_stats(acc, Chunk(a_bits, b_bits, a, b), atol=1e-5)  # once per chunk
    print(finish_stats(acc)["changed_frac_bits"])

Source: Mukherjee et al. 2025 (arXiv 2505.11711), "RL finetunes small subnetworks":
`sparsity = 1 - ||theta_1 - theta_0||_0 / n` on bf16 checkpoints, also with `|delta| <= 1e-5`
counted as unchanged, and update rank `matrix_rank(delta) / min(shape)`. The bf16-aware relative
tolerance follows arXiv 2511.08567: bf16 keeps 8 significant bits, so an update smaller than
about `|w| * 2^-9` (half a bf16 ulp) is absorbed by rounding.

Everything is streamed: `chunk_stats` turns one chunk of a tensor pair into additive counts and
sums, `merge_stats` adds them up (per tensor, layer, module kind, whole model) and `finish_stats`
turns the sums into fractions and norms. Conventions, chosen deliberately:

- Exact change compares raw bits (bf16 and fp16 as uint16, fp32 as uint32): a NaN with the same
  payload on both sides is unchanged, any other NaN change is a change, and +0 -> -0 IS a change
  (the stored bytes differ) although its delta is 0, so it never counts under a tolerance.
- Deltas are `other - base` in float32 (float64 for float64 tensors). Entries where either side is
  NaN or Inf (or the delta overflows) are left out of every delta statistic and counted instead.
- Concentration (share of `||delta||^2` in the top 0.1% / 1% / 10% of entries) comes from a
  mergeable histogram of |delta| binned by the top 16 bits of its float32 bit pattern (i.e. bf16
  resolution): counts by `np.bincount`, squares added into the accumulator in entry order. For non-negative floats the bit pattern is monotonic in
  the value, so the bins are ordered by |delta|; the sign bit is 0, so 2^15 bins suffice. Bins
  above the cut are summed exactly; the bin holding the cut contributes its mean square per
  entry taken, which is exact when its entries are equal and otherwise off by at most the spread
  of d^2 inside that one bin (< 1.6% relative, on that bin's share only).

Limits: pure numpy; no I/O. Counts are exact. Every sum (squared deltas, squared weights, the
overlap's dot products) is of exact float64 squares/products, in a fixed order (`lane_sum`), so
this reference and the compiled kernels (`evalkit/diff_kernel.c`, `evalkit.diff_kernels`) give identical
figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "BF16_RTOL",
    "CONCENTRATION_QS",
    "bf16_to_f32",
    "lane_sum",
    "sum_squares",
    "delta",
    "COUNTS",
    "new_stats",
    "note_span",
    "Chunk",
    "chunk_stats",
    "merge_stats",
    "detach_stats",
    "finish_stats",
    "concentration",
    "update_rank",
    "factored_spectrum",
    "spectrum_rank",
    "effective_rank",
    "new_overlap",
    "overlap_chunk",
    "finish_overlap",
]

BF16_RTOL = 2.0**-9  # half a bf16 ulp relative to |w|: smaller updates are absorbed in bf16
CONCENTRATION_QS = (0.001, 0.01, 0.1)
HIST_BINS = 1 << 15  # top 16 bits of float32 |delta|: the sign bit is 0
COUNTS = ("n", "changed_bits", "changed_atol", "changed_rel", "nonfinite_pairs",
           "nan_base", "inf_base", "nan_other", "inf_other")


def bf16_to_f32(bits: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """bf16 raw uint16 patterns -> float32 (bf16 is the top half of a float32)."""
    out = np.empty(bits.shape, np.uint32) if out is None else out.view(np.uint32)[: bits.size]
    np.left_shift(bits, 16, out=out, dtype=np.uint32, casting="unsafe")
    return out.view(np.float32)


def delta(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`b - a` in float32 (float64 inputs stay float64).

    Exact for bf16/fp16 pairs of realistic magnitude, and for fp32 pairs within a factor 2 of
    each other (Sterbenz lemma), i.e. for any training update.
    """
    wide = np.float64 if np.float64 in (a.dtype, b.dtype) else np.float32
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: counted by chunk_stats
        return np.subtract(b, a, dtype=wide)


LANES = 8  # float64 sums: entry i goes to lane i % 8 of its chunk, lanes summed in fixed order


def lane_sum(x64: np.ndarray, index: np.ndarray | None = None) -> float:
    """Deterministic float64 sum: 8 sequential lanes (entry i of the chunk -> lane i % 8),
    combined as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), plus 0.0 (so never -0.0).

    `index` gives the chunk positions of a gathered `x64` (the entries left out being zeros,
    which add nothing), so a sparse and a dense pass give identical sums, and so do the
    compiled kernels (C and numba), which keep the same 8 accumulators.
    """
    if index is not None:
        lanes = np.bincount(index & (LANES - 1), weights=x64, minlength=LANES)
    else:
        k = x64.size // LANES * LANES
        lanes = (np.add.reduce(x64[:k].reshape(-1, LANES), axis=0) if k
                 else np.zeros(LANES))  # sequential down each column
        for j, value in enumerate(x64[k:]):
            lanes[j] += value
    l_ = [float(v) for v in lanes]
    return ((l_[0] + l_[1]) + (l_[2] + l_[3])) + ((l_[4] + l_[5]) + (l_[6] + l_[7])) + 0.0


def sum_squares(x: np.ndarray) -> float:
    """`sum(x**2)`, squares in float64 (exact for float32 x), summed by `lane_sum`.

    NaN or Inf in `x` give a non-finite sum (that is how `chunk_stats` notices them)."""
    with np.errstate(invalid="ignore"):  # signalling NaN payloads
        return lane_sum(np.square(x, dtype=np.float64))


def new_stats(hist: bool = True) -> dict:
    """An empty accumulator; `hist=False` skips the concentration histogram (per layer)."""
    stats = dict.fromkeys(COUNTS, 0)
    stats.update(sq_update=0.0, sq_weight=0.0, max_abs=0.0)
    if hist:
        stats.update(hist_count=np.zeros(HIST_BINS, np.int64), hist_sq=np.zeros(HIST_BINS),
                     hist_lo=HIST_BINS, hist_hi=0)  # bins >= 1 in use: within [lo, hi)
    return stats


def note_span(acc: dict, lo: int, hi: int) -> None:
    """Widen the accumulator's span of occupied histogram bins (bin 0 aside) to [lo, hi).

    Merges and `concentration` then look at that window only: a few hundred bins for a real
    update instead of all 2^15."""
    if lo < hi:
        acc["hist_lo"], acc["hist_hi"] = min(acc["hist_lo"], lo), max(acc["hist_hi"], hi)


@dataclass(frozen=True)
class Chunk:
    """One chunk of a tensor pair: the raw bit patterns of base and other, their float values `a`,
    `b`, and optionally `d = delta(a, b)`, modified in place by `chunk_stats` (entries where either
    side is NaN/Inf set to 0, and counted). `b` may be None when `widen` (bits -> values) is given:
    other's values are then made only where needed."""

    a_bits: np.ndarray
    b_bits: np.ndarray
    a: np.ndarray
    b: np.ndarray | None = None
    d: np.ndarray | None = None
    widen: Callable | None = None


def chunk_stats(acc, chunk: Chunk, *, atol: float, rtol: float = BF16_RTOL) -> dict:
    """Add one chunk into the accumulator `acc` (from `new_stats()`) and return it.

    When at most a quarter of the bits differ, only those entries are gathered (index + gather,
    ~4x cheaper than whole-chunk passes); otherwise the chunk is processed whole. With or
    without `chunk.d`, the figures are identical.
    """
    a_bits, b_bits, a, b, d, widen = chunk.a_bits, chunk.b_bits, chunk.a, chunk.b, chunk.d, chunk.widen
    n = int(a_bits.size)
    moved = np.not_equal(a_bits, b_bits)
    changed = int(np.count_nonzero(moved))
    sq_w = sum_squares(a)
    acc["n"] += n
    acc["changed_bits"] += changed
    if changed == 0 and math.isfinite(sq_w):
        acc["sq_weight"] += sq_w
        acc["hist_count"][0] += n  # every delta is 0
        return acc
    if changed <= n // 4 and math.isfinite(sq_w):
        where = np.flatnonzero(moved)
        ai = a[where]  # a copy: free to overwrite
        if d is not None:
            di = d[where]
        else:
            di = delta(ai, b[where] if b is not None else widen(b_bits[where]))
        sq64 = np.square(di, dtype=np.float64)  # exact for float32 deltas
        sq_u = lane_sum(sq64, where)
        if math.isfinite(sq_u):  # else a NaN/Inf moved: the whole chunk below counts them
            acc["hist_count"][0] += n - changed  # unchanged bits: zero delta
            acc["sq_weight"] += sq_w
            acc["sq_update"] += sq_u
            _delta_stats(acc, np.abs(di, out=di), ai, sq64, atol, rtol)
            return acc
    return _whole(acc, a, b if b is not None else widen(b_bits), d, sq_w, atol, rtol)


def _whole(acc: dict, a, b, d, sq_w: float, atol: float, rtol: float) -> dict:
    """The dense path: every entry of the chunk, non-finite entries counted and zeroed."""
    owned = d is None
    d = delta(a, b) if owned else d
    sq64 = np.square(d, dtype=np.float64)
    sq_u = lane_sum(sq64)
    if not (math.isfinite(sq_w) and math.isfinite(sq_u)):
        sq_w = _nonfinite(acc, a, b, d)
        sq64 = np.square(d, dtype=np.float64)
        sq_u = lane_sum(sq64)
    acc["sq_weight"] += sq_w
    acc["sq_update"] += sq_u
    _delta_stats(acc, np.abs(d, out=d if owned else None), np.abs(a), sq64, atol, rtol)
    return acc


def _delta_stats(acc: dict, absd, absa, sq64, atol: float, rtol: float) -> None:
    """Counts, max and histogram of |delta| (`absa` = |base| or base, overwritten: a scratch)."""
    acc["max_abs"] = max(acc["max_abs"], float(absd.max()))
    acc["changed_atol"] += int(np.count_nonzero(absd > atol))
    limit = np.abs(absa, out=absa)
    with np.errstate(invalid="ignore"):  # signalling NaN payloads
        limit *= rtol
    acc["changed_rel"] += int(np.count_nonzero(absd > limit))
    f32 = absd.astype(np.float32, copy=False)  # float64 tensors: bins at float32 resolution
    bins = np.right_shift(f32.view(np.uint32), 16, dtype=np.intp)  # bincount's casts cost 4x
    count = np.bincount(bins)  # length = top bin + 1
    acc["hist_count"][: count.size] += count
    used = np.flatnonzero(count[1:])
    if used.size:
        note_span(acc, int(used[0]) + 1, int(used[-1]) + 2)
    np.add.at(acc["hist_sq"], bins, sq64)  # into the accumulator, in entry order (as the kernel)


def _nonfinite(acc: dict, a, b, d) -> float:
    """Count NaN/Inf on each side, zero those deltas in place, return float64 sum of a^2."""
    acc["nan_base"] += int(np.isnan(a).sum())
    acc["inf_base"] += int(np.isinf(a).sum())
    acc["nan_other"] += int(np.isnan(b).sum())
    acc["inf_other"] += int(np.isinf(b).sum())
    bad = ~(np.isfinite(a) & np.isfinite(b) & np.isfinite(d))
    acc["nonfinite_pairs"] += int(bad.sum())
    d[bad] = 0
    return sum_squares(np.where(np.isfinite(a), a, 0))


def merge_stats(acc: dict, part: dict) -> dict:
    """Add `part` (an accumulator, or one from `detach_stats`) into `acc` in place (counts and
    sums add, max takes the max)."""
    for key in (*COUNTS, "sq_update", "sq_weight"):
        acc[key] += part[key]
    acc["max_abs"] = max(acc["max_abs"], part["max_abs"])
    if "hist_count" in acc:  # bin 0 and the part's span: the other bins hold zeros
        lo, hi = part["hist_lo"], part["hist_hi"]
        for key in ("hist_count", "hist_sq"):
            acc[key][0] += part[key][0]
            if lo < hi:
                acc[key][lo:hi] += part[key][1:] if part.get("detached") else part[key][lo:hi]
        note_span(acc, lo, hi)
    return acc


def detach_stats(acc: dict) -> dict:
    """A compact copy of `acc` (its histogram cut to bin 0 and the span [lo, hi)) for
    `merge_stats`, and `acc` emptied for reuse (only the used bins are cleared)."""
    part = {key: acc[key] for key in (*COUNTS, "sq_update", "sq_weight", "max_abs")}
    lo, hi = acc["hist_lo"], acc["hist_hi"]
    for key in ("hist_count", "hist_sq"):
        hist = acc[key]
        part[key] = np.concatenate([hist[:1], hist[lo:hi]])
        hist[0] = 0
        hist[lo:hi] = 0
    part.update(hist_lo=lo, hist_hi=hi, detached=True)
    acc.update(dict.fromkeys(COUNTS, 0), sq_update=0.0, sq_weight=0.0, max_abs=0.0,
               hist_lo=HIST_BINS, hist_hi=0)
    return part


def finish_stats(s: dict) -> dict:
    """Fractions and norms from an accumulator (JSON-ready floats and ints).

    changed_frac_* = changed / n (1 - sparsity); update_norm = ||d||_2;
    rel_norm = ||d||_2 / ||w_base||_2; top_*_share from `concentration`.
    """
    n = s["n"]
    out = {key: s[key] for key in COUNTS}
    for kind in ("bits", "atol", "rel"):
        out[f"changed_frac_{kind}"] = s[f"changed_{kind}"] / n if n else math.nan
    out["update_norm"] = math.sqrt(s["sq_update"])
    out["weight_norm"] = math.sqrt(s["sq_weight"])
    out["rel_norm"] = out["update_norm"] / out["weight_norm"] if s["sq_weight"] else math.nan
    out["max_abs_update"] = s["max_abs"]
    if "hist_count" in s:
        shares = concentration(s["hist_count"], s["hist_sq"], CONCENTRATION_QS,
                               span=(s["hist_lo"], s["hist_hi"]))
        for q, share in zip(CONCENTRATION_QS, shares, strict=True):
            out[f"top_{q * 100:g}pct_share"] = share
    return out


def concentration(hist_count: np.ndarray, hist_sq: np.ndarray, q: float | tuple,
                  span: tuple[int, int] | None = None) -> float | list:
    """Share of `sum d^2` held by the `ceil(q * n)` largest |d| (n = all entries, zeros included).

    Walks the |delta| histogram from the top; the bin holding the cut contributes
    `taken * mean(d^2 in bin)`. NaN when the update is zero. A tuple of q gives a list.
    `span` = (lo, hi): the bins >= 1 in use all lie in [lo, hi) (an accumulator's `hist_lo`,
    `hist_hi`), so only those are searched; by default every bin is.
    """
    qs = q if isinstance(q, tuple) else (q,)
    lo, hi = span if span is not None else (1, hist_count.size)
    used = np.concatenate([np.flatnonzero(hist_count[:1]), lo + np.flatnonzero(hist_count[lo:hi])])
    used = used[::-1]  # occupied bins, largest |d| first
    counts, sqs = hist_count[used], hist_sq[used]
    total, n = float(sqs.sum()), int(counts.sum())
    cum_n, cum_sq = np.cumsum(counts), np.cumsum(sqs)
    shares = []
    for frac in qs:
        if total == 0.0:
            shares.append(math.nan)
            continue
        k = math.ceil(frac * n - 1e-9)
        j = int(np.searchsorted(cum_n, k))  # first bin reaching k entries
        above_n = int(cum_n[j - 1]) if j else 0
        above_sq = float(cum_sq[j - 1]) if j else 0.0
        shares.append(min(1.0, (above_sq + (k - above_n) * float(sqs[j]) / int(counts[j])) / total))
    return shares if isinstance(q, tuple) else shares[0]


def update_rank(d2: np.ndarray) -> dict:
    """`matrix_rank(delta) / min(shape)` for a 2-D update (Mukherjee et al. 2025).

    numpy's default tolerance: `S.max() * max(shape) * eps(dtype)`; a zero update has rank 0, and
    an empty matrix (a dimension of 0) rank 0 with no ratio (None).
    """
    assert d2.ndim == 2
    rank = int(np.linalg.matrix_rank(d2)) if d2.size and np.any(d2) else 0
    low = min(d2.shape)
    return {"rank": rank, "min_dim": low, "rank_ratio": rank / low if low else None}


def new_overlap() -> dict:
    """Empty accumulator for two updates A, B of the same base."""
    return dict(n=0, changed_a=0, changed_b=0, changed_both=0, dot=0.0, sq_a=0.0, sq_b=0.0,
                nonzero_both=0, same_sign=0)


def overlap_chunk(base_bits, a_bits, b_bits, da, db) -> dict:
    """Additive overlap counts of one chunk: changed sets by exact bits, and the two deltas
    (non-finite entries already zeroed by `chunk_stats`)."""
    ca, cb = base_bits != a_bits, base_bits != b_bits
    both_nz = (da != 0) & (db != 0)
    return dict(
        n=int(base_bits.size), changed_a=int(np.count_nonzero(ca)),
        changed_b=int(np.count_nonzero(cb)), changed_both=int(np.count_nonzero(ca & cb)),
        dot=lane_sum(np.multiply(da, db, dtype=np.float64)),
        sq_a=sum_squares(da), sq_b=sum_squares(db), nonzero_both=int(np.count_nonzero(both_nz)),
        same_sign=int(np.count_nonzero(both_nz & (np.signbit(da) == np.signbit(db)))),
    )


def finish_overlap(s: dict) -> dict:
    """Jaccard of the changed sets against chance, cosine of the updates, sign agreement.

    jaccard = |A & B| / |A | B|. Chance: if A and B changed independent random subsets with
    fractions pA, pB, E|A & B| = n pA pB and the expected Jaccard is
    `pA pB / (pA + pB - pA pB)`. cosine = <dA, dB> / (||dA|| ||dB||). sign_agreement: fraction
    of entries changed in both whose deltas have the same sign (0.5 by chance).
    """
    n, both = s["n"], s["changed_both"]
    union = s["changed_a"] + s["changed_b"] - both
    pa, pb = (s["changed_a"] / n, s["changed_b"] / n) if n else (math.nan, math.nan)
    chance = pa * pb / (pa + pb - pa * pb) if n and (pa + pb) else math.nan
    jac = both / union if union else math.nan
    norm = math.sqrt(s["sq_a"] * s["sq_b"])
    return {
        "n": n, "changed_a": s["changed_a"], "changed_b": s["changed_b"], "changed_both": both,
        "jaccard": jac, "jaccard_chance": chance,
        "jaccard_over_chance": jac / chance if chance else math.nan,
        "cosine": s["dot"] / norm if norm else math.nan,
        "sign_agreement": s["same_sign"] / s["nonzero_both"] if s["nonzero_both"] else math.nan,
    }


def factored_spectrum(b: np.ndarray, a: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """Singular values of `scale * b @ a` (b: m x r, a: r x n) without forming the m x n product.

    With `b = Qb Rb` and `a.T = Qa Ra` (thin QR), `b @ a = Qb (Rb Ra.T) Qa.T`, and Qb, Qa have
    orthonormal columns, so the singular values are those of the r x r matrix `Rb Ra.T`.
    Cost O((m + n) r^2) instead of O(m n min(m, n)). Float64 throughout.
    """
    b64, a64 = np.asarray(b, np.float64), np.asarray(a, np.float64)
    rb = np.linalg.qr(b64, mode="r")
    ra = np.linalg.qr(a64.T, mode="r")
    return np.abs(scale) * np.linalg.svd(rb @ ra.T, compute_uv=False)


def spectrum_rank(s: np.ndarray, shape: tuple[int, int], eps: float = float(np.finfo(np.float32).eps)) -> int:
    """Numerical rank from singular values: `#{s > s.max() * max(shape) * eps}`, numpy's
    `matrix_rank` tolerance (float32 eps by default: what `update_rank` uses on float32
    deltas); 0 for a zero matrix."""
    if s.size == 0 or not np.any(s > 0):
        return 0
    return int(np.count_nonzero(s > s.max() * max(shape) * eps))


def effective_rank(s: np.ndarray) -> float:
    """Effective rank `exp(-sum p_i log p_i)`, `p = s / sum(s)` (Roy and Vetterli 2007, "The
    effective rank: a measure of effective dimensionality"): between 1 (one direction) and the
    rank (equal singular values). NaN for a zero matrix."""
    s = np.asarray(s, np.float64)
    total = s.sum()
    if not total > 0:
        return math.nan
    p = s[s > 0] / total
    return float(np.exp(-(p * np.log(p)).sum()))
