"""Ray overhead and speed-up: passk and ES iterations, 1 and 2 Ray workers vs one process.

    python benchmarks/bench_scale.py                      # smollm2-135m, this machine's cores
    python benchmarks/bench_scale.py --limit 16 --population 8 --iterations 4

Baseline: the one-process run (`run_passk`, `run_es`) at torch's default
thread count, in a fresh Python process timed from its start (it imports
torch and transformers, loads the model and starts its grader, as a user's
`evalkit passk` does). Ray runs use a local cluster started once (its
start-up time is printed separately); each Ray run includes starting its
actors (fresh processes: the same imports, model load and grader) and the
driver's work. So the 1-worker ratio is what Ray itself adds. 1 worker gets all cores as threads
(same compute as the baseline: the ratio is Ray's overhead, target <= 1.15),
2 workers get cores // 2 threads each (the ratio is the speed-up).

Each ES run does `--iterations` iterations (default 3, a checkpoint after
each), timed at every iteration's progress call. The "es ..." rows are the
one-iteration run (start-up + iteration 1 + its checkpoint + teardown;
exactly the whole run with --iterations 1); "per iter" is the mean of
iterations 2..N (steady state: member evaluation, update, checkpoint);
"start-up" is the time to the end of iteration 1 minus one steady iteration
(plain: imports, run folder, model load, grader; Ray: the same in the actor
process, plus creating it).
"""

from __future__ import annotations

import time

START = time.perf_counter()  # a child's clock starts before any import below

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

from record import result  # noqa: E402


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
    ap.add_argument("--child", nargs=3, metavar=("KIND", "OPTIONS", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(*args.child)

    import ray
    import torch

    from evalkit.passk import PasskOptions, run_passk
    from evalkit.train import run_es
    from evalkit.train.es import ESOptions

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
    t["passk plain"] = plain("passk", popts, tmp / "p0")["seconds"]
    es["plain"] = plain("es", eopts, tmp / "e0")
    t["es plain"] = es["plain"]["one-iteration run"]
    t["ray cluster start"] = timed(lambda: ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False))
    for workers in (1, 2):
        t[f"passk ray {workers}"] = timed(lambda w=workers: run_passk(dataclasses.replace(popts, ray_workers=w), tmp / f"p{w}"))
        es[f"ray {workers}"] = es_timed(run_es, dataclasses.replace(eopts, ray_workers=workers), tmp / f"e{workers}")
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
        result(f"{kind}: 1 Ray worker vs plain", measured=f"{t[f'{kind} ray 1']:.1f} s", baseline=f"plain {base:.1f} s",
               ratio=t[f"{kind} ray 1"] / base, target="<= 1.15")
    if args.iterations >= 2:
        base = es["plain"]["per iter"]
        print(f"es per iteration after start-up: 1 Ray worker / plain = {es['ray 1']['per iter'] / base:.2f}x "
              f"(target <= 1.15x); plain / 2 Ray workers = {base / es['ray 2']['per iter']:.2f}x speed-up")
        print(f"es start-up (to the end of iteration 1, less one steady iteration): plain "
              f"{es['plain']['start-up']:.1f} s (fresh process: torch and transformers import, run folder, model "
              f"load, grader), 1 Ray worker {es['ray 1']['start-up']:.1f} s (actor process, torch and "
              f"transformers import, model load, grader) = +{es['ray 1']['start-up'] - es['plain']['start-up']:.1f} s")
    print(f"load average at end {load_average()}")


def load_average() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def plain(kind: str, opts, out: Path) -> dict:
    """The one-process run of `kind` (passk | es) in a fresh Python process, timed from its start."""
    done = subprocess.run([sys.executable, __file__, "--child", kind,
                           json.dumps(dataclasses.asdict(opts)), str(out)],
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"plain {kind} run failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def child(kind: str, options: str, out: str) -> None:
    """Body of `plain`: import, run, print the times as one JSON line."""
    fields = json.loads(options)
    if kind == "passk":
        from evalkit.passk import PasskOptions, run_passk

        opts = PasskOptions(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})
        run_passk(opts, Path(out))
        print(json.dumps({"seconds": time.perf_counter() - START}))
    else:
        from evalkit.train.es import ESOptions, run_es

        print(json.dumps(es_timed(run_es, ESOptions(**fields), Path(out), start=START)))


def es_timed(run, opts, out: Path, start: float | None = None, **kw) -> dict:
    """Times of one ES run from its progress calls: the one-iteration run, per iteration, start-up
    (from `start`, default now)."""
    marks = []
    start = time.perf_counter() if start is None else start
    run(opts, out, progress=lambda step, total, reward: marks.append(time.perf_counter()), **kw)
    end = time.perf_counter()
    assert len(marks) == opts.iterations
    first, teardown = marks[0] - start, end - marks[-1]
    per_iter = (marks[-1] - marks[0]) / (len(marks) - 1) if len(marks) > 1 else None
    return {"one-iteration run": first + teardown, "per iter": per_iter,
            "start-up": first - per_iter if per_iter is not None else None}


if __name__ == "__main__":
    main()
