"""The v3 study's cost, stage by stage: estimated from v2's measured stage times, and measured as
v3 runs (issue 44: measure the rates before fixing the plan, say what was dropped to fit).

    python studies/plan_v3.py > results/pilot-v3/plan-v3.md       # rerun as v3 goes on

Estimate: each v3 stage's generated-token bound (evalkit's plan: problems x samples x
max_new_tokens, or a trainer's completions x max_new_tokens) divided by the rate v2 ran the same
kind of stage at (its token bound over its measured seconds, results/study-v2/study.json, 2 CPU
cores, mostly quiet); forgetting by items scored (v2: 240 items per model and its KL, v3: 870).
Stage kinds v2 did not have take the nearest kind's rate (named in the table). Measured: the
seconds results/study-v3/study.json records for each stage done so far.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
V2, V3 = ROOT / "results" / "study-v2" / "study.json", ROOT / "results" / "study-v3" / "study.json"
# v3 stage kind -> the v2 kind whose rate it takes
NEAREST = {"train-es-large": "train-es", "validate-es-large": "validate-es", "passk-es-large": "passk-es",
           "passk-nucleus-es-large": "passk-nucleus-es", "curves-es-large": "curves-es",
           "final-passk-grpo": "passk-nucleus-grpo", "masked-grpo": "validate-grpo", "masked-es-large": "validate-es",
           "forgetting-es-large": "forgetting-es", "forgetting-base": "forgetting-grpo",
           "train-bf16-es-x4": "train-bf16-es", "train-bf16-grpo-x4": "train-bf16-grpo"}
FACTS = {"v2": 240, "v3": 870}
DROPPED = [
    "ES to a validation plateau: 4 iterations per ES arm (960 completions); the published runs took hundreds.",
    "ES at the published settings at large k (passk-nucleus) and in forgetting: each of its 4 steps is 0.09 of the "
    "radius its perturbations explore (alpha / (sigma sqrt(N))), and its claims are gated on its positive control.",
    "n = 512 and k above 32: large k is 40 problems x 64 samples (k <= 32 = n / 2).",
    "Seeds: ES arms on 3 (0-2), GRPO and ES-then-GRPO on 5; forgetting and masking on 3 and 1.",
    "T 1 at large k, interpolation, diff and groups stages (v2 had them); the matched-pass@1 curves at n = 4 "
    "(k <= 2).",
]


def kind(name: str) -> str:
    return re.sub(r"-s\d+$", "", name)


def main() -> None:
    v2 = json.loads(V2.read_text())
    v2_tokens = {r["stage"]: r["tokens_estimate"] for r in v2["plan"]}
    rates, seconds = defaultdict(list), defaultdict(list)
    for name, st in v2["stages"].items():
        if st.get("seconds") and v2_tokens.get(name):
            rates[kind(name)].append(v2_tokens[name] / st["seconds"])
        if st.get("seconds"):
            seconds[kind(name)].append(st["seconds"])
    v3 = json.loads(V3.read_text())
    rows, total, done_est, done_real = defaultdict(lambda: [0, 0.0, 0.0, 0, ""]), 0.0, 0.0, 0.0
    for r in v3["plan"]:
        k = kind(r["stage"])
        src = NEAREST.get(k, k)
        if k.startswith("forgetting"):
            est = (sum(seconds[src]) / len(seconds[src])) * FACTS["v3"] / FACTS["v2"] if seconds[src] else 0.0
        elif r["tokens_estimate"] and rates[src]:
            est = r["tokens_estimate"] / (sum(rates[src]) / len(rates[src]))
        else:
            est = (sum(seconds[src]) / len(seconds[src])) if seconds[src] else 0.0
        st = v3["stages"].get(r["stage"]) or {}
        real = st.get("seconds") if st.get("status") == "done" else None
        row = rows[k]
        row[0] += 1
        row[1] += est
        row[4] = src if src != k else ""
        if real is not None:
            row[2] += real
            row[3] += 1
            done_est += est
            done_real += real
        total += est
    print("# The v3 study's cost: estimated from v2's stage rates, measured as it runs\n")
    print(__doc__.split("\n\n")[2].replace("\n", " ") + "\n")
    print("| stage kind | stages | estimated s | rate from | done | measured s (done ones) |")
    print("|---|---|---|---|---|---|")
    for k, (n, est, real, done, src) in rows.items():
        print(f"| {k} | {n} | {est:,.0f} | {src or 'same kind'} | {done} | {real:,.0f} |")
    print(f"\n**Estimated total: {total:,.0f} s ({total / 3600:.1f} h of 2 cores).**")
    if done_est:
        print(f"\nDone so far: {done_real:,.0f} s measured against {done_est:,.0f} s estimated for the same stages "
              f"({done_real / done_est:.2f}x); at that ratio the whole study takes {total * done_real / done_est / 3600:.1f} h. "
              "A stage's seconds include any other work the machine did meanwhile.")
    print("\nWhat was dropped to fit about 8 hours of 2 cores:\n")
    for line in DROPPED:
        print(f"- {line}")


if __name__ == "__main__":
    main()
