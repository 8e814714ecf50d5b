"""Math grading speed: completions per second on one grader worker, against math-verify's defaults.

    python benchmarks/bench_grading.py                # 2000 completions, seed 0
    python benchmarks/bench_grading.py --items 5000

The completions (a fixed, seeded draw): the MATH golds written as a model writes them
(boxed, Minerva's final phrase) and, where `../shared/benchmarks/` is present, MATH
reference solutions, the same solutions ending in a wrong box (another problem's gold),
GSM8K reference solutions and money answers right and wrong; plus the 650 real completions
of tests/data/cases (TheoremQA, GAOKAO-Bench, Minerva OCW by a base model, ...). About
half are wrong answers, which need the full comparison (sympy for what has no plain value).

Equations (issue 42): every completion of the pool whose gold is an equation, and the
equation pairs of tests/test_math_equal.py on which math-verify alone takes seconds, are
graded one by one; the slowest must stay under 2 s.

Measured: evalkit's `score` in this process, then through `Grader(workers=1)` (a killable
worker process with its deadline, as `passk` and `regrade` grade), and the named baseline
in the same run: math-verify with its defaults (`verify(parse(gold), parse(completion))`),
what lighteval's `pass_at_k_math` and many RL repositories call. Target (issue 23): at
least 200 completions per second on one worker.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from record import result  # noqa: E402

SHARED = ROOT.parent / "shared" / "benchmarks"


def _items() -> list[tuple[str, str, str, str]]:
    """(profile, question, gold, completion) of every source available."""
    from evalkit.tasks.hf import gold_answer
    from evalkit.tasks.math_text import boxes

    items = []
    for line in (ROOT / "tests/data/benchmarks/math_golds.jsonl").open():
        gold = json.loads(line)["gold"]
        items += [("math", "", gold, f"So the final answer is $\\boxed{{{gold}}}$."),
                  ("math", "", gold, f"Final Answer: The final answer is ${gold}$. I hope it is correct.")]
    for path in sorted((ROOT / "tests/data/cases").glob("real_*.jsonl")):
        profile = "gsm8k" if "gsm8k" in path.name else "math"
        for line in path.open():
            row = json.loads(line)
            items.append((profile, row["problem"], row["gold"], row["completion"]))
    if (SHARED / "math_test.jsonl").is_file():
        rows = [json.loads(line) for line in (SHARED / "math_test.jsonl").open()]
        golds = [gold_answer(r["solution"], "last_boxed") for r in rows]
        for i, (r, gold) in enumerate(zip(rows, golds, strict=True)):
            last = boxes(r["solution"])[-1]
            wrong = r["solution"][: last[0]] + f"\\boxed{{{golds[(i + 1) % len(golds)]}}}" + r["solution"][last[1]:]
            items += [("math", r["problem"], gold, r["solution"]), ("math", r["problem"], gold, wrong)]
        for line in (SHARED / "gsm8k_test.jsonl").open():
            r = json.loads(line)
            gold = gold_answer(r["answer"], "after_hashes")
            reasoning = r["answer"].rsplit("####", 1)[0].rstrip()
            items += [("gsm8k", r["question"], gold, r["answer"]),
                      ("gsm8k", r["question"], gold, reasoning + f"\nThe final answer is ${gold}."),
                      ("gsm8k", r["question"], gold, reasoning + f"\nThe final answer is ${gold}1.")]
    return items


def _evalkit_in_process(items) -> float:
    from evalkit.tasks import Problem
    from evalkit.tasks.mathgrade import score

    start = time.perf_counter()
    for profile, question, gold, completion in items:
        score(completion, Problem("p", question, gold), profile)
    return time.perf_counter() - start


def _evalkit_worker(items) -> float:
    from evalkit.grading import Grader
    from evalkit.tasks import Problem, TaskSpec

    elapsed = 0.0
    for profile in ("math", "gsm8k"):
        jobs = [(c, Problem("p", q, g)) for p, q, g, c in items if p == profile]
        spec = TaskSpec("bench", "math", len(jobs), None, json.dumps({"preset": profile}))
        with Grader(spec, workers=1, deadline=10.0) as grader:
            grader.grade(jobs[:1])  # the worker's start and imports are not grading
            start = time.perf_counter()
            grader.grade(jobs)
            elapsed += time.perf_counter() - start
    return elapsed


def _slowest_equation(items) -> tuple[float, str]:
    """(seconds, gold) of the slowest comparison whose gold is an equation (in process, warm)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_math_equal import EQUATIONS

    from evalkit.tasks import Problem
    from evalkit.tasks.mathgrade import score

    jobs = [(p, q, g, c) for p, q, g, c in items if "=" in g]
    jobs += [("math", "", gold, f"The final answer is $\\boxed{{{answer}}}$.") for gold, answer in EQUATIONS]
    slowest = (0.0, "")
    for profile, question, gold, completion in jobs:
        start = time.perf_counter()
        score(completion, Problem("p", question, gold), profile)
        slowest = max(slowest, (time.perf_counter() - start, gold))
    return slowest


def _math_verify(items) -> float:
    from math_verify import parse, verify

    start = time.perf_counter()
    for _, _, gold, completion in items:
        try:
            verify(parse(gold if "$" in gold else f"${gold}$"), parse(completion))
        except Exception:  # noqa: S110 (a failure on one item is part of what is timed)
            pass
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    pool = _items()
    items = random.Random(args.seed).sample(pool, min(args.items, len(pool)))
    print(f"{len(items)} completions drawn from {len(pool)} ({'with' if SHARED.is_dir() else 'without'} "
          f"../shared/benchmarks)")
    _evalkit_in_process(items[:50])  # warm imports and the LaTeX parser once, for every side
    _math_verify(items[:50])
    in_process = len(items) / _evalkit_in_process(items)
    worker = len(items) / _evalkit_worker(items)
    baseline = len(items) / _math_verify(items)
    equation_seconds, equation_gold = _slowest_equation(pool)
    print(f"evalkit score, in process: {in_process:.0f} completions/s")
    print(f"evalkit through Grader(workers=1): {worker:.0f} completions/s")
    print(f"math-verify defaults (baseline): {baseline:.0f} completions/s")
    print(f"slowest equation comparison: {equation_seconds:.2f} s (gold {equation_gold[:60]!r})")
    result("grading rate, one worker", measured=f"evalkit {worker:.0f}/s on one grader worker",
           baseline="the issue's 200 completions/s", ratio=worker / 200, target=">= 1.0")
    result("slowest equation comparison", measured=f"{equation_seconds:.2f} s", baseline="the issue's 2 s",
           ratio=equation_seconds / 2.0, target="< 1.0")
    result("grading vs math-verify defaults", measured=f"evalkit {worker:.0f}/s (one worker)",
           baseline=f"math-verify defaults {baseline:.0f}/s in process", ratio=worker / baseline, target=None)


if __name__ == "__main__":
    main()
