"""`evalkit import` speed: a 100k-sample file to a run folder, against plain JSON parsing of it.

    python benchmarks/bench_import.py                  # 12,500 problems x 8 samples, kept grades
    python benchmarks/bench_import.py --problems 2000 --regrade 2000

The file: generic JSONL (`jsonl` format) with problem_id, completion (about 120 characters,
a boxed answer), gold, correct, extracted and num_tokens per line, seeded. Measured in one
run: the named baseline (`json.loads` of every line of the file, nothing else), then
`run_import` with `--keep-grades` (read, map, write samples.jsonl, summarize: pass@k, pass^k,
maj@k, G-Pass@k, mean@n with their bootstrap intervals, and rename into place). Target (issue
24): the 100k-sample import in under 30 s on 2 cores. `--regrade N` also times regrading N of
the samples with evalkit's grader (what `--regrade` adds per sample; the grader's own speed is
bench_grading's).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from record import result  # noqa: E402


def write_file(path: Path, problems: int, n: int, seed: int) -> int:
    rng = random.Random(seed)
    with open(path, "w") as fh:
        for i in range(problems):
            gold = rng.randint(0, 999)
            skill = rng.random()
            for _ in range(n):
                ok = rng.random() < skill
                answer = gold if ok else gold + rng.choice((1, 2, 3, 10))
                text = f"We add the numbers step by step and simplify the result. The answer is \\boxed{{{answer}}}."
                fh.write(json.dumps({"problem_id": f"q{i}", "completion": text, "gold": str(gold), "correct": ok,
                                     "extracted": str(answer), "num_tokens": 20 + rng.randint(0, 60)}) + "\n")
    return problems * n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problems", type=int, default=12_500)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--regrade", type=int, default=0, help="also regrade this many samples (0: skip)")
    args = parser.parse_args()

    from evalkit.importers import ImportOptions, run_import

    root = Path(tempfile.mkdtemp(prefix="bench_import_"))
    try:
        path = root / "samples.jsonl"
        total = write_file(path, args.problems, args.n, seed=0)
        size = path.stat().st_size
        start = time.perf_counter()
        with open(path, encoding="utf-8") as fh:
            parsed = sum(1 for line in fh if json.loads(line))
        baseline = time.perf_counter() - start
        assert parsed == total
        opts = ImportOptions(gold_field="gold", correct_field="correct", grades="keep")
        start = time.perf_counter()
        summary = run_import("jsonl", path, root / "run", opts)
        seconds = time.perf_counter() - start
        print(f"{total} samples ({args.problems} problems x {args.n}), {size / 1e6:.1f} MB")
        print(f"baseline json.loads of every line: {baseline:.2f} s")
        print(f"evalkit import jsonl --keep-grades: {seconds:.2f} s ({total / seconds:,.0f} samples/s), "
              f"{seconds / baseline:.1f}x the plain parse; pass@1 {summary['pass_at_k'][0]['pass_at_k']:.4f}, "
              f"maj@{args.n} {summary['maj_at_k'][-1]['maj_at_k']:.4f}")
        result("import 100k samples (s / 30 s)", measured=f"{seconds:.2f} s for {total} samples",
               baseline="the issue's 30 s", ratio=seconds / 30.0, target="<= 1.0" if total >= 100_000 else None,
               note=f"{seconds / baseline:.1f}x json.loads of the file ({baseline:.2f} s)")
        result("import vs plain JSON parse", measured=f"{seconds:.2f} s", baseline=f"json.loads {baseline:.2f} s",
               ratio=seconds / baseline, target=None)
        if args.regrade:
            small = root / "small.jsonl"
            with open(path) as src, open(small, "w") as dst:
                for _ in range(args.regrade):
                    dst.write(src.readline())
            start = time.perf_counter()
            run_import("jsonl", small, root / "regraded", ImportOptions(gold_field="gold", correct_field="correct",
                                                                       grades="regrade"))
            regrade = time.perf_counter() - start
            print(f"--regrade of {args.regrade} samples: {regrade:.2f} s ({args.regrade / regrade:,.0f} samples/s)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
