"""Ray overhead and speed-up: passk and one ES iteration, 1 and 2 Ray workers vs one process.

    python benchmarks/bench_scale.py                      # smollm2-135m, this machine's cores
    python benchmarks/bench_scale.py --limit 16 --population 8

Baseline: the one-process run (`run_passk`, `run_es`) at torch's default
thread count. Ray runs use a local cluster started once (its start-up time
is printed separately); each Ray run includes starting its actors and
loading one model replica per actor. 1 worker gets all cores as threads
(same compute as the baseline: the ratio is Ray's overhead, target <= 1.15),
2 workers get cores // 2 threads each (the ratio is the speed-up).
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
    ap.add_argument("--population", type=int, default=4, help="ES members in the one iteration")
    ap.add_argument("--prompts", type=int, default=4, help="ES prompts per member")
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
    eopts = ESOptions(model=args.model, task="arith", population=args.population, iterations=1,
                      prompts_per_iteration=args.prompts, max_new_tokens=args.max_new_tokens, grader_workers=1,
                      save_every=1, device="cpu")
    print(f"cores {cores}, torch threads {torch.get_num_threads()}, model {args.model}")
    print(f"passk: {args.limit} problems x {args.n} samples, {args.max_new_tokens} new tokens, chunks of 2 problems")
    print(f"es: 1 iteration, population {args.population}, {args.prompts} prompts, greedy")

    t = {}
    t["passk plain"] = timed(lambda: run_passk(popts, tmp / "p0"))
    t["es plain"] = timed(lambda: run_es(eopts, tmp / "e0"))
    t["ray cluster start"] = timed(lambda: ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False))
    for workers in (1, 2):
        t[f"passk ray {workers}"] = timed(lambda w=workers: run_passk_ray(popts, tmp / f"p{w}", workers=w))
        t[f"es ray {workers}"] = timed(lambda w=workers: run_es_ray(eopts, tmp / f"e{w}", workers=w))
    ray.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)

    for name, seconds in t.items():
        print(f"{name:<20} {seconds:8.1f} s")
    for kind in ("passk", "es"):
        base = t[f"{kind} plain"]
        print(f"{kind}: 1 Ray worker / plain = {t[f'{kind} ray 1'] / base:.2f}x (target <= 1.15x); "
              f"plain / 2 Ray workers = {base / t[f'{kind} ray 2']:.2f}x speed-up; "
              f"with cluster start: {(t[f'{kind} ray 1'] + t['ray cluster start']) / base:.2f}x")


if __name__ == "__main__":
    main()
