"""Compiled one-pass chunk statistics for `evalkit diff` (numba), figure for figure the same as
the numpy reference `metrics.weights.chunk_stats` / `overlap_chunk`.

    from evalkit.diff_kernels import available, chunk_stats
    if available():
        chunk_stats(acc, base_bits, other_bits, "BF16", atol=1e-5, rtol=2**-9)

Per chunk, one serial loop over the raw bits (uint16 for bf16/fp16, uint32 for fp32) does what
numpy needs several passes for: bit compare, widening (bf16 by a 16-bit shift, fp16 by a
65536-entry table, fp32 by reinterpreting), NaN/Inf counts, the delta in float32, atol and
bf16-aware rtol counts (thresholds rounded to float32, as numpy compares a float32 array with
a Python float), max |delta|, the |delta| histogram (top 16 bits of float32 |delta|, squares
added into the accumulator in entry order, as `np.add.at`) and the float64 sums of exact
squares in 8 lanes by entry index, combined in the fixed order of `metrics.weights.lane_sum`.
So results are deterministic and equal to the numpy path's; parallelism comes from the
thread pool over tensors in `evalkit.diff` (the kernels release the GIL).

Compiled on first use (`cache=True`: the machine code is cached in `__pycache__`, so only the
first run on a machine pays the few seconds). Limits: float64 and integer tensors, and
`--rank` (which needs the whole delta), stay on the numpy path; without numba everything does.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from metrics.weights import COUNTS, new_stats, note_span

try:
    import numba
except ImportError:  # pragma: no cover - numba is a dependency; the numpy path still works
    numba = None

__all__ = ["MODES", "available", "usable", "chunk_stats", "overlap_chunk", "warm_up"]

MODES = ("BF16", "F16", "F32")  # safetensors dtypes the kernels decode (`_value`)
_F16 = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
_TABLE = {"BF16": None, "F16": _F16, "F32": None}  # fp16 -> float32 by lookup


def available() -> bool:
    """True when numba imported (the compiled path can run)."""
    return numba is not None


def usable(dtype: str, kernel: str = "auto") -> bool:
    """Whether chunks of safetensors `dtype` go through the kernels (`kernel`: auto|numba|numpy)."""
    if kernel not in ("auto", "numba", "numpy"):
        raise ValueError(f"kernel {kernel!r}: choose auto, numba or numpy")
    if kernel == "numba" and not available():
        raise RuntimeError("kernel 'numba' asked for but numba is not installed")
    return kernel != "numpy" and available() and dtype in MODES


def _njit(**kw):
    return numba.njit(**kw) if numba is not None else (lambda f: f)


def _value(bits, i, table):
    """Float32 value of entry i of raw bits: fp32 (uint32), bf16 (uint16, `table` None: a
    16-bit shift) or fp16 (uint16, by the float32 `table`). Chosen when numba compiles."""


if numba is not None:
    from numba import types
    from numba.extending import overload

    @overload(_value, inline="always")
    def _value_impl(bits, i, table):
        if bits.dtype == types.uint32:
            return lambda bits, i, table: np.uint32(bits[i]).view(np.float32)
        if isinstance(table, types.NoneType):
            return lambda bits, i, table: np.uint32(np.uint32(bits[i]) << np.uint32(16)).view(
                np.float32)
        return lambda bits, i, table: table[bits[i]]


@_njit(inline="always")
def _combine(lanes):
    """((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)) + 0.0, as `metrics.weights.lane_sum`."""
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + \
        ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7])) + 0.0


_EXP = {"BF16": 0x7F80, "F16": 0x7C00, "F32": 0x7F800000}  # all ones: NaN/Inf


@_njit(inline="always")
def _square(bits, i, table):
    """Exact float64 square of entry i, 0 when it is NaN/Inf."""
    v = np.float64(_value(bits, i, table))
    return v * v if math.isfinite(v) else 0.0


@_njit(inline="always")
def _scan(a_bits, b_bits, exp, table, idx):
    """Branch-free passes: (sum(w^2) per lane, changed count, m) with idx[:m] the entries that
    changed or are NaN/Inf (`idx`, a scratch of the chunk's length); only those are visited."""
    n = a_bits.size
    sq_w = np.zeros(8)
    for i in range(n // 8):
        for j in range(8):
            sq_w[j] += _square(a_bits, 8 * i + j, table)
    for k in range(n - n % 8, n):
        sq_w[k & 7] += _square(a_bits, k, table)
    changed = odd = m = 0
    for k in range(n):  # vectorized counts
        changed += a_bits[k] != b_bits[k]
        odd += (a_bits[k] & exp) == exp
    for k in range(n if changed or odd else 0):  # branch-free list of entries to visit
        x = a_bits[k]
        idx[m] = k
        m += (x != b_bits[k]) | ((x & exp) == exp)
    return sq_w, changed, m


@_njit(cache=True, nogil=True)
def _stats(a_bits, b_bits, dtype, tolerances, outs):
    """A chunk: `dtype` = (exponent mask, value table), `tolerances` = (atol, rtol), `outs` =
    (hist_count, hist_sq, idx scratch, out_i, out_f): counts into out_i[9] (order of
    `metrics.weights.new_stats`), the span [lo, hi) of histogram bins >= 1 in use into out_i[9:11],
    sums into out_f[3] (sq_update, sq_weight, max |delta|), histogram into hist_count/hist_sq; the
    entries to visit come from `_scan`."""
    exp, table = dtype
    atol, rtol = tolerances
    hist_count, hist_sq, idx, out_i, out_f = outs
    n = a_bits.size
    sq_w, changed, m = _scan(a_bits, b_bits, exp, table, idx)
    sq_u = np.zeros(8)
    n_atol = n_rel = bad = nan_a = inf_a = nan_b = inf_b = good = 0
    top = np.float32(0.0)
    lo, hi = hist_count.size, 0
    for t in range(m):
        i = idx[t]
        same = a_bits[i] == b_bits[i]
        fa = (a_bits[i] & exp) != exp
        a = _value(a_bits, i, table)
        if not fa:
            nan_a += math.isnan(a)
            inf_a += math.isinf(a)
        if same:  # the same NaN/Inf on both sides
            bad += 1
            nan_b += math.isnan(a)
            inf_b += math.isinf(a)
            continue
        b = _value(b_bits, i, table)
        fb = math.isfinite(b)
        nan_b += math.isnan(b)
        inf_b += math.isinf(b)
        d = b - a
        if not (fa and fb and math.isfinite(d)):
            bad += 1
            continue
        ad = abs(d)
        n_atol += ad > atol
        n_rel += ad > rtol * abs(a)
        top = max(top, ad)
        sq = np.float64(d) * np.float64(d)
        sq_u[i & 7] += sq
        k = np.uint32(np.float32(ad).view(np.uint32) >> np.uint32(16))
        if k:
            lo, hi = min(lo, k), max(hi, k + 1)
        hist_count[k] += 1
        hist_sq[k] += sq
        good += 1
    hist_count[0] += n - good  # unchanged or non-finite: delta 0
    out_i[0], out_i[1], out_i[2], out_i[3] = n, changed, n_atol, n_rel
    out_i[4], out_i[5], out_i[6], out_i[7], out_i[8] = bad, nan_a, inf_a, nan_b, inf_b
    out_i[9], out_i[10] = lo, hi
    out_f[0], out_f[1], out_f[2] = _combine(sq_u), _combine(sq_w), top


@_njit(inline="always")
def _delta(base_bits, x_bits, i, table):
    """other - base in float32, 0 where the bits agree or the pair is not finite."""
    if base_bits[i] == x_bits[i]:
        return np.float32(0.0)
    a = _value(base_bits, i, table)
    d = _value(x_bits, i, table) - a  # NaN whenever either side or d is NaN/Inf...
    return d if math.isfinite(d) and math.isfinite(a) else np.float32(0.0)  # ...or inf - x


@_njit(cache=True, nogil=True)
def _overlap(base_bits, a_bits, b_bits, table, out_i, out_f):
    """Three-way counts into out_i[6] (n, changed_a, changed_b, changed_both, nonzero_both,
    same_sign) and sums into out_f[3] (dot, sq_a, sq_b)."""
    dot = np.zeros(8)
    sq_a = np.zeros(8)
    sq_b = np.zeros(8)
    n_a = n_b = both = nz = same = 0
    for i in range(base_bits.size):
        ca = base_bits[i] != a_bits[i]
        cb = base_bits[i] != b_bits[i]
        n_a += ca
        n_b += cb
        both += ca and cb
        if not (ca or cb):
            continue
        da = _delta(base_bits, a_bits, i, table)
        db = _delta(base_bits, b_bits, i, table)
        j = i & 7
        dot[j] += np.float64(da) * np.float64(db)
        sq_a[j] += np.float64(da) * np.float64(da)
        sq_b[j] += np.float64(db) * np.float64(db)
        if da != 0 and db != 0:
            nz += 1
            same += (da < 0) == (db < 0)
    out_i[0], out_i[1], out_i[2], out_i[3] = base_bits.size, n_a, n_b, both
    out_i[4], out_i[5] = nz, same
    out_f[0], out_f[1], out_f[2] = _combine(dot), _combine(sq_a), _combine(sq_b)


_LOCAL = threading.local()


def _scratch(n: int) -> np.ndarray:
    """A per-thread int32 index buffer of at least n entries (reused across chunks)."""
    buf = getattr(_LOCAL, "idx", None)
    if buf is None or buf.size < n:
        buf = _LOCAL.idx = np.empty(max(n, 1 << 19), np.int32)
    return buf


def chunk_stats(acc: dict, a_bits: np.ndarray, b_bits: np.ndarray, dtype: str, *,
                atol: float, rtol: float) -> dict:
    """Add one chunk (raw bits of base and other, safetensors `dtype` in MODES) into `acc`
    (from `metrics.weights.new_stats()`), exactly as `metrics.weights.chunk_stats` would."""
    out_i, out_f = np.zeros(11, np.int64), np.zeros(3)
    _stats(a_bits, b_bits, (_EXP[dtype], _TABLE[dtype]), (np.float32(atol), np.float32(rtol)),
           (acc["hist_count"], acc["hist_sq"], _scratch(a_bits.size), out_i, out_f))
    return add_kernel_sums(acc, out_i, out_f)


def overlap_chunk(base_bits, a_bits, b_bits, dtype: str) -> dict:
    """Additive overlap counts of one chunk, as `metrics.weights.overlap_chunk`."""
    out_i, out_f = np.zeros(6, np.int64), np.zeros(3)
    _overlap(base_bits, a_bits, b_bits, _TABLE[dtype], out_i, out_f)
    return kernel_overlap(out_i, out_f)


def warm_up() -> None:
    """Compile (or load from the cache) every specialization `evalkit diff` uses."""
    for dtype in MODES:
        x = np.zeros(16, np.uint32 if dtype == "F32" else np.uint16)
        acc = new_stats()
        chunk_stats(acc, x, x, dtype, atol=1e-5, rtol=2.0**-9)
        overlap_chunk(x, x, x, dtype)


# ---------------------------------------------------------------- compiled kernels' outputs


def add_kernel_sums(acc: dict, out_i, out_f) -> dict:
    """Add a compiled kernel's chunk figures into `acc`: `out_i` = the counts in the order of
    `new_stats` (n, changed_bits, changed_atol, changed_rel, nonfinite_pairs, nan_base, inf_base,
    nan_other, inf_other) then the span [lo, hi) of histogram bins >= 1 used; `out_f` = sum of
    squared deltas, sum of squared weights, max |delta|. The kernel adds the histogram itself."""
    counts = out_i.tolist()
    for key, value in zip(COUNTS, counts[:9], strict=True):
        acc[key] += value
    note_span(acc, *counts[9:11])
    acc["sq_update"] += float(out_f[0])
    acc["sq_weight"] += float(out_f[1])
    acc["max_abs"] = max(acc["max_abs"], float(out_f[2]))
    return acc


def kernel_overlap(out_i, out_f) -> dict:
    """A compiled kernel's overlap figures as `overlap_chunk` returns them: `out_i` = n,
    changed_a, changed_b, changed_both, nonzero_both, same_sign; `out_f` = dot, sq_a, sq_b."""
    n, n_a, n_b, both, nz, same = out_i.tolist()
    return dict(n=n, changed_a=n_a, changed_b=n_b, changed_both=both, dot=float(out_f[0]),
                sq_a=float(out_f[1]), sq_b=float(out_f[2]), nonzero_both=nz, same_sign=same)
