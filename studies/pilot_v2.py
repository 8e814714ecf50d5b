"""Base-only pilot for the v2 study: which `arith` configuration leaves room above chance at large k.

    python studies/pilot_v2.py --out /tmp/pilot-v2      # rerun to resume; then copy pilot.* into results/pilot-v2/

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
HELD_OUT, VALIDATION = 60, 64  # the study's eval_task.limit and validation.limit
DEVIATION = (
    "No configuration meets the whole rule. The default's operands (1..20) leave too few unseen "
    "questions for unique held-out and validation splits, so it cannot be used whatever its row says; "
    "of the others, only max_operand 50 has greedy >= 0.10, and its pass@1 misses 0.03 by 0.0014 "
    "(11 correct of 384 samples; 0.03 is 11.5). It is taken, with the deviation recorded here, "
    "rather than the rule being rewritten after the rows were in."
)
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
    measured = row(name, config, load_run(out / name / "sampled"), answers,
                   float(load_run(out / name / "greedy").samples["correct"].mean()))
    settings = json.loads((out / name / "sampled" / "run.json").read_text())
    return measured | {"sampler": settings.get("sampler", "hf-1")}  # runs before issue 26 name none


def v1_row() -> dict:
    """The default configuration from the first study's base run and greedy run."""
    from analyses.runs import load_run

    answers = {}
    for line in Path("results/study/data/heldout.jsonl").read_text().splitlines():
        record = json.loads(line)
        answers[record["id"]] = record["answer"]
    greedy = float(load_run(Path("results/study/greedy/base")).samples["correct"].mean())
    return row("arith-default (first study's base run)", {}, load_run(V1_BASE), answers, greedy) | {"sampler": "hf-1"}


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


def unseen_questions(config: dict) -> tuple[int, int]:
    """Unique questions left for the held-out and validation splits after the study's 200
    training prompts, made as the study's `splits` stage makes them (seeds 1 and 2, 400 each)."""
    from evalkit.study.stages import _unique
    from evalkit.tasks import load_task, question_key

    seen = {question_key("arith", p.prompt) for p in load_task("arith", size=200, seed=0, config=config).problems}
    held, _ = _unique(load_task("arith", size=400, seed=1, config=config).problems, seen, "arith", 400)
    seen |= {question_key("arith", p.prompt) for p in held}
    valid, _ = _unique(load_task("arith", size=400, seed=2, config=config).problems, seen, "arith", 400)
    return len(held), len(valid)


def feasible(row: dict) -> bool:
    held, valid = unseen_questions(row["config"])
    return held >= HELD_OUT and valid >= VALIDATION


def pick(rows: list[dict]) -> tuple[dict | None, str]:
    """The rule, then what was done when no configuration met it (see DEVIATION)."""
    usable = [r for r in rows if feasible(r)]
    ok = [r for r in usable if r["greedy"] >= 0.10 and r["pass"]["1"] >= 0.03]
    if ok:
        return min(ok, key=lambda r: r["placebo"]["16"]), "the rule"
    near = [r for r in usable if r["greedy"] >= 0.10]
    return min(near, key=lambda r: r["placebo"]["16"], default=None), "the deviation below"


def table(rows: list[dict]) -> str:
    lines = ["| configuration | problems x samples | distinct answers | pass@1 | pass@4 | pass@16 | placebo@16 | "
             "pass@16 - placebo@16 | greedy | distinct answers per problem | key agreement |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        p, f = r["pass"], r["placebo"]
        lines.append(f"| {r['name']} | {r['problems']} x {r['n']} | {r['answer_values']} | {p['1']:.3f} | "
                     f"{p['4']:.3f} | {p['16']:.3f} | {f['16']:.3f} | {p['16'] - f['16']:+.3f} | {r['greedy']:.3f} | "
                     f"{r['distinct_answers_per_problem']:.1f} | {r['key_agreement']:.3f} |")
    chosen, how = pick(rows)
    lines.append("")
    lines.append("| configuration | unseen unique questions (held-out, validation; the study needs "
                 f"{HELD_OUT}, {VALIDATION}) |")
    lines.append("|---|---|")
    lines += [f"| {r['name']} | {', '.join(map(str, unseen_questions(r['config'])))} |" for r in rows]
    lines.append("")
    lines.append("Rule: configurations with enough unseen unique questions for the splits; of those, greedy >= 0.10 "
                 "and pass@1 >= 0.03, then the lowest placebo@16. "
                 f"Picked: {chosen['name'] if chosen else 'none'}, by {how}. (The rule first read \"the largest "
                 "pass@16 - placebo@16\"; it was changed after the default and max_operand 99 rows, before the "
                 "others: that gap favours the easiest task, whose floor the study has to get away from.)")
    if how != "the rule":
        lines += ["", "Deviation: " + DEVIATION]
    samplers = {r["name"]: r.get("sampler", "hf-1") for r in rows}
    lines += ["", "Samplers (run.json `sampler`; the same draw, issue 26): "
              + ", ".join(f"{name} {version}" for name, version in samplers.items()) + "."]
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
