"""Pilot for the seed study: which learning rate (GRPO) and sigma/alpha (ES) raise the training
reward of the built-in model within a few minutes on 2 CPU cores.

    python studies/pilot.py --out results/study/pilot      # rerun to resume; a few hundred seconds per row

Each row trains one setting on `arith` (the study's training split: task seed 0), then measures
the reward on the first 32 training problems before and after: mean sampled reward (T = 1,
n = 4, 32 new tokens, as GRPO samples) and greedy accuracy (as ES scores). Writes
`pilot.jsonl` (one line per setting, appended as each finishes), `pilot.md` (the table) and
the trained runs under `runs/`. Every number comes from evalkit's own functions.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

TOKENS = 32
SETTINGS = [
    ("grpo", {"lr": 1e-6}),
    ("grpo", {"lr": 1e-5}),
    ("grpo", {"lr": 5e-5}),
    ("es", {"sigma": 1e-3, "alpha": 5e-4}),
    ("es", {"sigma": 3e-3, "alpha": 1.5e-3}),
    ("es", {"sigma": 1e-2, "alpha": 5e-3}),
    # a dense fitness (a departure from the paper): the reference answer's log-probability
    ("es", {"fitness": "answer_logprob", "sigma": 1e-3, "alpha": 5e-4}),
    ("es", {"fitness": "answer_logprob", "sigma": 3e-3, "alpha": 3e-3}),
    # larger steps: ES's update alpha/N * sum z eps is small beside a 135M model's weights in 6 iterations
    ("es", {"fitness": "answer_logprob", "sigma": 3e-3, "alpha": 1e-2}),
    ("es", {"fitness": "answer_logprob", "sigma": 1e-2, "alpha": 3e-2}),
    ("es", {"sigma": 3e-3, "alpha": 1e-2}),
    # the step that moved greedy reward, run twice as long: does the gain hold?
    ("es", {"sigma": 3e-3, "alpha": 1e-2, "iterations": 12}),
]


def reward(model: str, out: Path, *, greedy: bool) -> float:
    from evalkit.passk import PasskOptions, run_passk

    opts = PasskOptions(model=model, task="arith", n=1 if greedy else 4, ks=(1,), temperature=0.0 if greedy else 1.0,
                        max_new_tokens=TOKENS, limit=32, device="cpu")
    summary = run_passk(opts, out)
    return summary["outcomes"]["correct"] / summary["samples"]


def train(method: str, options: dict, out: Path) -> tuple[str, dict]:
    from evalkit.train.es import ESOptions, run_es
    from evalkit.train.grpo import GRPOOptions, run_grpo

    if method == "grpo":
        opts = replace(GRPOOptions(max_new_tokens=TOKENS, steps=12, prompts_per_step=4, group_size=8,
                                   save_every=12, device="cpu"), **options)
        summary = run_grpo(opts, out)
        completions = opts.steps * opts.prompts_per_step * opts.group_size
    else:
        opts = replace(ESOptions(max_new_tokens=TOKENS, iterations=6, population=8, prompts_per_iteration=16,
                                 save_every=6, device="cpu"), **options)
        summary = run_es(opts, out)
        completions = opts.iterations * opts.population * opts.prompts_per_iteration
    log = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return summary["final_checkpoint"], {"completions": completions, "log": log}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/study/pilot"))
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    done_path = out / "pilot.jsonl"
    done = [json.loads(line) for line in done_path.read_text().splitlines()] if done_path.exists() else []
    base = {"sampled": reward("smollm2-135m", out / "runs" / "base-sampled", greedy=False),
            "greedy": reward("smollm2-135m", out / "runs" / "base-greedy", greedy=True)}
    for method, options in SETTINGS:
        name = method + "-" + "-".join(f"{k}{v:g}" if isinstance(v, float | int) else str(v) for k, v in options.items())
        if any(row["name"] == name for row in done):
            continue
        start = time.monotonic()
        final, info = train(method, options, out / "runs" / name)
        seconds = time.monotonic() - start
        row = {"name": name, "method": method, "options": options, "train_seconds": round(seconds, 1),
               "completions": info["completions"], "base": base,
               "after": {"sampled": reward(final, out / "runs" / f"{name}-eval-sampled", greedy=False),
                         "greedy": reward(final, out / "runs" / f"{name}-eval-greedy", greedy=True)},
               "train_reward_first": info["log"][0]["reward"], "train_reward_last": info["log"][-1]["reward"],
               "zero_spread_iterations": sum(r.get("zero_spread", False) for r in info["log"])}
        with open(done_path, "a") as fh:
            fh.write(json.dumps(row) + "\n")
        done.append(row)
        print(json.dumps(row), flush=True)
    (out / "pilot.md").write_text(table(done))


def table(rows: list[dict]) -> str:
    lines = ["| setting | completions | train s | sampled reward before -> after | greedy acc. before -> after | "
             "train reward first -> last step | ES iterations with zero spread |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        zero = f"{r['zero_spread_iterations']}" if r["method"] == "es" else "-"
        lines.append(f"| {r['name']} | {r['completions']} | {r['train_seconds']:.0f} | "
                     f"{r['base']['sampled']:.3f} -> {r['after']['sampled']:.3f} | "
                     f"{r['base']['greedy']:.3f} -> {r['after']['greedy']:.3f} | "
                     f"{r['train_reward_first']:.3f} -> {r['train_reward_last']:.3f} | {zero} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
