"""pass@k tables: the vectorised estimator and bootstrap against the per-k loop, in one run.

    python benchmarks/bench_passk.py                 # 10k problems x n = 1024

Baseline (named, measured in the same run): `loop`, the implementation evalkit
shipped before issue 19, kept verbatim below: one `pass_curve` per problem,
then per k its own `n_boot x m` resample index and a gathered mean. evalkit's
`passk_table` computes each n's curves in one `cumprod`, shares one resample
index matrix among the k's that count the same problems, and takes every
resample's mean as one count-matrix product.

Targets (issue 19, from 2.2 s for the 11-k table and 0.67 s for the curve's
point estimates on 2 cores): the 11-k table with CIs <= 0.3 s, the full
1..1024 curve with CIs <= 3 s; written as ratios to the loop's 11-k table.
Point estimates must be bitwise equal; intervals differ (other resamples)
and their largest difference is printed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from record import result  # noqa: E402

from metrics.passk import pass_curve, passk_table, per_problem_passk  # noqa: E402


def loop_per_problem(ns, cs, ks):
    out = np.full((len(ns), len(ks)), np.nan)
    for i, (n, c) in enumerate(zip(ns, cs, strict=True)):
        curve = pass_curve(int(n), int(c))
        ok = ks <= n
        out[i, ok] = curve[ks[ok] - 1]
    return out


def loop_table(ns, cs, ks, n_boot=1000, confidence=0.95, seed=0):
    per_problem = loop_per_problem(ns, cs, ks)
    low, high = np.full(len(ks), np.nan), np.full(len(ks), np.nan)
    rng = np.random.default_rng(seed)
    alpha = (1.0 - confidence) / 2.0
    for j in range(len(ks)):
        col = per_problem[:, j]
        col = col[~np.isnan(col)]
        idx = rng.integers(0, col.size, size=(n_boot, col.size))
        means = col[idx].mean(axis=1)
        low[j], high[j] = np.quantile(means, [alpha, 1.0 - alpha])
    return np.nanmean(per_problem, axis=0), low, high


def best_of(fn, reps):
    best, out = float("inf"), None
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=10_000)
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    ns = np.full(args.problems, args.n)
    cs = rng.binomial(args.n, rng.beta(0.3, 1.5, args.problems))
    ks = 2 ** np.arange(int(np.log2(args.n)) + 1)
    full = np.arange(1, args.n + 1)
    print(f"{args.problems} problems x n = {args.n}; {len(ks)} k's; best of {args.reps}")

    t_loop, (mean_l, low_l, high_l) = best_of(lambda: loop_table(ns, cs, ks), args.reps)
    t_loop_pp, pp_l = best_of(lambda: loop_per_problem(ns, cs, full), 1)
    t_new, table = best_of(lambda: passk_table(ns, cs, ks), args.reps)
    t_new_pp, pp_n = best_of(lambda: per_problem_passk(ns, cs, full), args.reps)
    t_full, curve = best_of(lambda: passk_table(ns, cs, full), args.reps)

    same = np.array_equal(table.pass_at_k.to_numpy(), mean_l) and np.array_equal(pp_l, pp_n)
    ci_diff = max(np.abs(table.ci_low - low_l).max(), np.abs(table.ci_high - high_l).max())
    width = float(np.mean(high_l - low_l))
    print(f"loop, {len(ks)} k's with CIs        {t_loop:7.3f} s")
    print(f"loop, curve point estimates      {t_loop_pp:7.3f} s")
    print(f"evalkit, {len(ks)} k's with CIs     {t_new:7.3f} s")
    print(f"evalkit, curve point estimates   {t_new_pp:7.3f} s")
    print(f"evalkit, full curve with CIs     {t_full:7.3f} s  ({len(full)} k's)")
    print(f"point estimates bitwise equal: {same}; largest CI endpoint difference {ci_diff:.2e} "
          f"(mean CI width {width:.2e}: other resamples, same method)")
    if not same:
        raise SystemExit("point estimates differ from the loop: a result changed")
    result("passk_table, 11 k's with bootstrap CIs", measured=f"{t_new:.3f} s",
           baseline=f"per-k loop {t_loop:.3f} s", ratio=t_new / t_loop, target="<= 0.14",
           note="issue 19: 2.2 s -> <= 0.3 s")
    result("passk_table, full 1..n curve with CIs", measured=f"{t_full:.3f} s",
           baseline=f"per-k loop, 11 k's {t_loop:.3f} s", ratio=t_full / t_loop, target="<= 1.36",
           note="issue 19: <= 3 s against 2.2 s for the loop's 11 k's")
    result("pass@k curve point estimates", measured=f"{t_new_pp:.3f} s",
           baseline=f"per-problem loop {t_loop_pp:.3f} s", ratio=t_new_pp / t_loop_pp, target=None)


if __name__ == "__main__":
    main()
