"""Where `evalkit diff`'s time goes on bf16 pairs: the C kernel's body against its histogram.

    python benchmarks/profile_diff.py            # 32M-entry bf16 chunks in memory, 1 thread

Times `diff_ckernel.chunk_stats` on in-memory bf16 pairs (no file reading) in three cases:
identical sides (no entry changed: the vectorised body only), every entry changed by a small
random amount (each changed entry also goes into the |delta| histogram, one scalar update in
entry order, which keeps the float64 sums bitwise the same on every path) and a memory pass
over the same bytes (numpy sum of both sides as uint16 -> the read ceiling in memory).
Prints ns per entry pair and GB/s of pair bytes for each.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from record import result

from evalkit import diff_ckernel
from metrics.weights import new_stats


def best(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=32 * 2**20)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    base = rng.normal(0, 0.02, args.entries).astype(np.float32)
    moved = base + rng.normal(0, 1e-3, args.entries).astype(np.float32)
    a = (base.view(np.uint32) >> 16).astype(np.uint16)
    b = (moved.view(np.uint32) >> 16).astype(np.uint16)
    changed = float(np.mean(a != b))

    def stats(x, y):
        return lambda: diff_ckernel.chunk_stats(new_stats(), x, y, "BF16", atol=1e-8, rtol=1e-5)

    stats(a, a)()  # build / load the kernels
    pair_bytes = 2 * a.nbytes
    cases = {
        "memory pass (sum of both sides)": lambda: (a.sum(dtype=np.uint64), b.sum(dtype=np.uint64)),
        "kernel, no entry changed": stats(a, a),
        f"kernel, {100 * changed:.0f}% of entries changed": stats(a, b),
    }
    seconds = {name: best(fn, args.reps) for name, fn in cases.items()}
    for name, s in seconds.items():
        print(f"{name:34s} {s:6.3f} s  {1e9 * s / args.entries:5.2f} ns/pair  {pair_bytes / s / 1e9:6.2f} GB/s")
    body, full = seconds["kernel, no entry changed"], seconds[f"kernel, {100 * changed:.0f}% of entries changed"]
    print(f"histogram share of the kernel on changed entries: {100 * (full - body) / full:.0f}% "
          f"({1e9 * (full - body) / (changed * args.entries):.2f} ns per changed entry)")
    result("diff kernel histogram share (bf16, 1 thread)", measured=f"{1e9 * full / args.entries:.2f} ns/pair",
           baseline=f"no entry changed {1e9 * body / args.entries:.2f} ns/pair", ratio=full / body,
           target=None, note="profile, not a target: changed entries each cost one scalar histogram update")


if __name__ == "__main__":
    main()
