"""Ray overhead and speed-up: passk and ES iterations, 1 and 2 Ray workers vs one process.

    python benchmarks/bench_scale.py                      # smollm2-135m, this machine's cores
    python benchmarks/bench_scale.py --limit 16 --population 8 --iterations 4

Baseline: the one-process run (`run_passk`, `run_es`) at torch's default
thread count. Ray runs use a local cluster started once (its start-up time
is printed separately); each Ray run includes starting its actors and
loading one model replica per actor. 1 worker gets all cores as threads
(same compute as the baseline: the ratio is Ray's overhead, target <= 1.15),
2 workers get cores // 2 threads each (the ratio is the speed-up).

Each ES run does `--iterations` iterations (default 3, a checkpoint after
each), timed at every iteration's progress call. The "es ..." rows are the
one-iteration run (start-up + iteration 1 + its checkpoint + teardown;
exactly the whole run with --iterations 1); "per iter" is the mean of
iterations 2..N (steady state: member evaluation, update, checkpoint);
"start-up" is the time to the end of iteration 1 minus one steady iteration
(plain: model load in this already-warm process, where passk has imported
torch and transformers; Ray: actor process, imports, model load, grader).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--limit", type=int, default=8, help="passk problems")
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--population", type=int, default=4, help="ES members per iteration")
    ap.add_argument("--prompts", type=int, default=4, help="ES prompts per member")
    ap.add_argument("--iterations", type=int, default=3,
                    help="ES iterations per run (>= 2 for the per-iteration figures)")
    args = ap.parse_args()

    import ray
    import torch

    from evalkit.passk import PasskOptions, run_passk
    from evalkit.scale.es_ray import run_es_ray
    from evalkit.scale.ray_passk import run_passk_ray
    from evalkit.train.es import ESOptions, run_es

    cores = os.cpu_count() or 1
    tmp = Path(tempfile.mkdtemp(prefix="bench_scale_"))
    popts = PasskOptions(model=args.model, task="arith", n=args.n, ks=(1, args.n), limit=args.limit,
                         max_new_tokens=args.max_new_tokens, batch_size=2 * args.n, grader_workers=1, device="cpu")
    eopts = ESOptions(model=args.model, task="arith", population=args.population, iterations=args.iterations,
                      prompts_per_iteration=args.prompts, max_new_tokens=args.max_new_tokens, grader_workers=1,
                      save_every=1, device="cpu")
    print(f"cores {cores}, torch threads {torch.get_num_threads()}, model {args.model}")
    print(f"passk: {args.limit} problems x {args.n} samples, {args.max_new_tokens} new tokens, chunks of 2 problems")
    print(f"es: {args.iterations} iterations per run, population {args.population}, {args.prompts} prompts, greedy")
    print(f"load average at start {load_average()} ({cores} cores: wall times are inflated when the load "
          "exceeds the cores)")

    t, es = {}, {}
    t["passk plain"] = timed(lambda: run_passk(popts, tmp / "p0"))
    es["plain"] = es_timed(run_es, eopts, tmp / "e0")
    t["es plain"] = es["plain"]["one-iteration run"]
    t["ray cluster start"] = timed(lambda: ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False))
    for workers in (1, 2):
        t[f"passk ray {workers}"] = timed(lambda w=workers: run_passk_ray(popts, tmp / f"p{w}", workers=w))
        es[f"ray {workers}"] = es_timed(run_es_ray, eopts, tmp / f"e{workers}", workers=workers)
        t[f"es ray {workers}"] = es[f"ray {workers}"]["one-iteration run"]
    ray.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)

    for name in ("plain", "ray 1", "ray 2"):
        for part in ("per iter", "start-up"):
            if es[name][part] is not None:
                t[f"es {name} {part}"] = es[name][part]
    for name, seconds in t.items():
        print(f"{name:<20} {seconds:8.1f} s")
    for kind in ("passk", "es"):
        base = t[f"{kind} plain"]
        print(f"{kind}: 1 Ray worker / plain = {t[f'{kind} ray 1'] / base:.2f}x (target <= 1.15x); "
              f"plain / 2 Ray workers = {base / t[f'{kind} ray 2']:.2f}x speed-up; "
              f"with cluster start: {(t[f'{kind} ray 1'] + t['ray cluster start']) / base:.2f}x")
    if args.iterations >= 2:
        base = es["plain"]["per iter"]
        print(f"es per iteration after start-up: 1 Ray worker / plain = {es['ray 1']['per iter'] / base:.2f}x "
              f"(target <= 1.15x); plain / 2 Ray workers = {base / es['ray 2']['per iter']:.2f}x speed-up")
        print(f"es start-up (to the end of iteration 1, less one steady iteration): plain "
              f"{es['plain']['start-up']:.1f} s (run folder, model load: torch and transformers already imported "
              f"in this process), 1 Ray worker {es['ray 1']['start-up']:.1f} s (actor process, torch and "
              f"transformers import, model load, grader) = +{es['ray 1']['start-up'] - es['plain']['start-up']:.1f} s")
    print(f"load average at end {load_average()}")


def load_average() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def es_timed(run, opts, out: Path, **kw) -> dict:
    """Times of one ES run from its progress calls: the one-iteration run, per iteration, start-up."""
    marks = []
    start = time.perf_counter()
    run(opts, out, progress=lambda step, total, reward: marks.append(time.perf_counter()), **kw)
    end = time.perf_counter()
    assert len(marks) == opts.iterations
    first, teardown = marks[0] - start, end - marks[-1]
    per_iter = (marks[-1] - marks[0]) / (len(marks) - 1) if len(marks) > 1 else None
    return {"one-iteration run": first + teardown, "per iter": per_iter,
            "start-up": first - per_iter if per_iter is not None else None}


if __name__ == "__main__":
    main()
