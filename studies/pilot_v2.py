"""Base-only pilot for the v2 study: which `arith` configuration leaves room above chance at large k.

    python studies/pilot_v2.py --out /tmp/pilot-v2      # rerun to resume; then copy pilot.* into results/study-v2/pilot/

For each candidate generator configuration, the built-in base model samples n = 16
completions (T = 1, 32 new tokens) on 24 problems of the training generator (seed 0) and
answers them greedily; the table gives pass@1, pass@4 and pass@16 with the placebo floor
(each completion scored against other problems' answers, metrics.placebo), the distinct
answers per problem and the greedy accuracy. The rule: among the configurations whose base
has greedy accuracy >= 0.10 and sampled pass@1 >= 0.03 (ES's greedy fitness and GRPO's groups
of 8 need some correct answers to learn from), take the one with the lowest placebo@16 (the
floor the study's k = 64 must stand clear of). The first version of the rule took the largest
pass@16 - placebo@16 instead; it was changed after the default and max_operand 99 rows were in
and before the others, because that gap favours the easiest task, whose floor is what the
study has to get away from (both rules and the change are in pilot.md). The default
configuration's row is computed from the first study's base run (results/study/passk/base:
80 held-out problems x 16 samples, the same sampling), so it is not sampled again. Writes
`pilot.jsonl` (one line per configuration) and `pilot.md` (the table and the pick).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

CANDIDATES = [{"max_operand": 99}, {"max_operand": 50}, {"terms": 3}]
N, PROBLEMS, TOKENS = 16, 24, 32
KS = (1, 4, 16)
V1_BASE = Path("results/study/passk/base")


def measure(config: dict, out: Path) -> dict:
    from analyses.runs import load_run
    from evalkit.passk import PasskOptions, run_passk
    from evalkit.tasks import load_task

    name = "arith-" + ("-".join(f"{k}{v}" for k, v in sorted(config.items())) or "default")
    common = {"model": "smollm2-135m", "task": "arith", "task_size": PROBLEMS, "task_seed": 0,
              "task_config": json.dumps(config), "max_new_tokens": TOKENS, "limit": PROBLEMS, "device": "cpu"}
    run_passk(PasskOptions(**common, n=N, ks=KS, temperature=1.0), out / name / "sampled")
    run_passk(PasskOptions(**common, n=1, ks=(1,), temperature=0.0), out / name / "greedy")
    answers = {p.id: p.answer for p in load_task("arith", size=PROBLEMS, seed=0, config=config).problems}
    return row(name, config, load_run(out / name / "sampled"), answers,
               float(load_run(out / name / "greedy").samples["correct"].mean()))


def v1_row() -> dict:
    """The default configuration from the first study's base run and greedy run."""
    from analyses.runs import load_run

    answers = {}
    for line in Path("results/study/data/heldout.jsonl").read_text().splitlines():
        record = json.loads(line)
        answers[record["id"]] = record["answer"]
    greedy = float(load_run(Path("results/study/greedy/base")).samples["correct"].mean())
    return row("arith-default (first study's base run)", {}, load_run(V1_BASE), answers, greedy)


def row(name: str, config: dict, run, answers: dict, greedy: float) -> dict:
    import numpy as np

    from metrics.passk import per_problem_passk
    from metrics.placebo import answer_key, key_agreement, placebo_passk

    table = run.per_problem()
    ids = list(table["problem_id"])
    groups = run.samples.groupby("problem_id", sort=False)
    keys = [[answer_key(x) if o in ("correct", "incorrect") else None
             for x, o in zip(groups.get_group(i)["extracted"], groups.get_group(i)["outcome"], strict=True)]
            for i in ids]
    own = [answer_key(answers[i]) for i in ids]
    real = per_problem_passk(table["n"], table["c"], KS).mean(axis=0)
    floor = np.nanmean(placebo_passk(keys, own, KS), axis=0)
    distinct = float(np.mean([len({k for k in ks if k is not None}) for ks in keys]))
    labels = [str(k) for k in KS]
    return {"name": name, "config": config, "problems": len(ids), "n": int(table["n"].max()),
            "answer_values": len({answers[i] for i in ids}),
            "pass": dict(zip(labels, map(float, real), strict=True)),
            "placebo": dict(zip(labels, map(float, floor), strict=True)),
            "greedy": greedy, "distinct_answers_per_problem": distinct,
            "key_agreement": key_agreement(keys, own, [list(groups.get_group(i)["correct"]) for i in ids])}


def pick(rows: list[dict]) -> dict | None:
    ok = [r for r in rows if r["greedy"] >= 0.10 and r["pass"]["1"] >= 0.03]
    return min(ok, key=lambda r: r["placebo"]["16"], default=None)


def table(rows: list[dict]) -> str:
    lines = ["| configuration | problems x samples | distinct answers | pass@1 | pass@4 | pass@16 | placebo@16 | "
             "pass@16 - placebo@16 | greedy | distinct answers per problem | key agreement |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        p, f = r["pass"], r["placebo"]
        lines.append(f"| {r['name']} | {r['problems']} x {r['n']} | {r['answer_values']} | {p['1']:.3f} | "
                     f"{p['4']:.3f} | {p['16']:.3f} | {f['16']:.3f} | {p['16'] - f['16']:+.3f} | {r['greedy']:.3f} | "
                     f"{r['distinct_answers_per_problem']:.1f} | {r['key_agreement']:.3f} |")
    chosen = pick(rows)
    lines.append("")
    lines.append("Rule: greedy >= 0.10 and pass@1 >= 0.03, then the lowest placebo@16. "
                 f"Picked: {chosen['name'] if chosen else 'none'}. (The rule first read \"the largest pass@16 - "
                 "placebo@16\"; it was changed after the default and max_operand 99 rows, before the others: that "
                 "gap favours the easiest task, whose floor the study has to get away from.)")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/pilot-v2"))
    parser.add_argument("--configs", type=json.loads, default=CANDIDATES,
                        help="JSON list of configurations (default: all candidates); two processes may share --out")
    args = parser.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    path = out / "pilot.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    if not any(r["config"] == {} for r in rows):
        rows.append(v1_row())
        with open(path, "a") as fh:
            fh.write(json.dumps(rows[-1]) + "\n")
    for config in args.configs:
        if any(r["config"] == config for r in rows):
            continue
        row = measure(config, out / "runs")
        rows.append(row)
        with open(path, "a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)
    rows = [json.loads(x) for x in path.read_text().splitlines()]  # another process's rows too
    (out / "pilot.md").write_text(table(rows))


if __name__ == "__main__":
    main()
