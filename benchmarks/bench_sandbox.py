"""What the sandbox's private root (layer 5) costs: programs a second with and without it.

    python benchmarks/bench_sandbox.py --programs 200 --rounds 3

Baseline: the same sandbox with `Limits(private_root=False)` (the worker sees
the host's files; each program's folder is made in the host's temporary
folder), measured in the same run, rounds interleaved. Measured: plain
programs (`pass`) and HumanEval function tests (the first 40 canonical
solutions) on one warm worker, and the start of a worker (its first
program included), medians over the rounds. As root only: otherwise there
is no private root and the script says so. Prints the figures and a RESULT
line (ratio = programs a second with the private root / without; > 1 faster).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from record import result


def _plain_rate(limits, programs: int) -> float:
    from evalkit.forgetting.sandbox import run_program

    run_program("pass", limits)  # the worker is warm
    started = time.perf_counter()
    for _ in range(programs):
        assert run_program("pass", limits).status == "passed"
    return programs / (time.perf_counter() - started)


def _function_rate(limits, jobs) -> float:
    from evalkit.forgetting.sandbox import run_many

    started = time.perf_counter()
    assert all(r.status == "passed" for r in run_many(jobs, limits, workers=1))
    return len(jobs) / (time.perf_counter() - started)


def _start_seconds(limits) -> float:
    from evalkit.forgetting import sandbox

    sandbox._shutdown_workers()
    started = time.perf_counter()
    sandbox.run_program("pass", limits)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--programs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from evalkit.forgetting import humaneval
    from evalkit.forgetting.sandbox import Limits, run_program

    variants = {"host files": Limits(private_root=False), "private root": Limits()}
    if os.geteuid() != 0 or not run_program("pass").isolation.endswith("private root"):
        print("no private root here (not root, or the kernel refused it): nothing to compare")
        return
    jobs = [humaneval.function_test(p, p["canonical_solution"]) for p in humaneval.load(limit=40).problems]
    figures: dict[str, dict[str, list[float]]] = {name: {"plain": [], "function": [], "start": []} for name in variants}
    for _ in range(args.rounds):
        for name, limits in variants.items():
            figures[name]["start"].append(_start_seconds(limits))
            figures[name]["plain"].append(_plain_rate(limits, args.programs))
            figures[name]["function"].append(_function_rate(limits, jobs))
    median = {name: {key: statistics.median(values) for key, values in kinds.items()} for name, kinds in figures.items()}
    for name, m in median.items():
        print(f"{name}: {m['plain']:.0f} plain programs/s, {m['function']:.0f} HumanEval function tests/s, "
              f"worker start + first program {m['start'] * 1e3:.0f} ms (medians of {args.rounds} rounds)")
    host, private = median["host files"], median["private root"]
    result("sandbox private root, plain programs a second", measured=f"{private['plain']:.0f}/s",
           baseline=f"host files {host['plain']:.0f}/s", ratio=private["plain"] / host["plain"], target=">= 0.8")
    result("sandbox private root, HumanEval function tests a second", measured=f"{private['function']:.0f}/s",
           baseline=f"host files {host['function']:.0f}/s", ratio=private["function"] / host["function"],
           target=">= 0.8")


if __name__ == "__main__":
    main()
