"""The v3 pilot's second round for its second task (issue 44): pairsum's prompt and answer length.

    python studies/pilot_v3_prompts.py --out /tmp/pilot-v3b      # rerun to resume
    cp /tmp/pilot-v3b/prompts.json /tmp/pilot-v3b/prompts.md results/pilot-v3/

The first round (studies/pilot_v3.py, results/pilot-v3/pilot.md) found no configuration that
meets its rule: the best base pass@1 was 0.034, about 57% of completions were cut at 32 new
tokens, about 60% named no pair, and the commonest wrong answer was the prompt's own example
("3 + 4"). This round changes what that reading points at, and nothing else: the answer length
(64 new tokens) and the prompt (evalkit.tasks.pairsum.PROMPTS: 2 and 3 give no example numbers;
3 asks for "a + b = target").

Rules, written here before any figure of this round was read:

1. Screen: each variant in SCREEN is sampled on 16 problems x 32 samples at T = 1, 64 new
   tokens. A variant whose screen pass@1 lies in [0.03, 0.40] goes to confirmation.
2. Confirmation: in order of the screen's distinct right pairs per solved problem (most first),
   a variant is measured as the first round's rule 1 measures (studies/pilot_v3.py:
   24 problems x 64 at T = 1, once greedily, pass@k to k = 64, the placebo floor, the unique
   questions; here at 64 new tokens) and picked by that rule's `pick` (base pass@1 in
   [0.05, 0.30], placebo@64 < 0.01, 240 held-out and 64 validation unique questions). The first
   eligible one is the second task; at most CONFIRM variants are confirmed.
3. If none is eligible, prompts.md says so, and the study's second task is not settled.

ADDED after the first three screen rows were read (pass@1 0.014, 0.021, 0.033 at T = 1, most
completions rambling prose): the same screen at the setting the v2 claims made primary
(studies/seed-cpu-v2.claims.toml: T 0.6, top-p 0.95, the literature's), for prompt 3; such a row
is confirmed at that setting, by the same rule (its pass@1 read at T 0.6, top-p 0.95).

ADDED2 after both T = 1 confirmations (4 numbers up to 40, prompts 2 and 3) met the pass@1 band
(0.087, 0.063) and the unique questions but not the floor (placebo@64 0.018, 0.022), and the
T 0.6 screen of 6 numbers up to 30 read pass@1 0.029: 4 numbers up to 60 and up to 80 (prompt 2,
T = 1), where fewer lists share a right pair; the same screen and rules, ADDED2's rows confirmed
before the other rows not yet confirmed, at most CONFIRM = 4 per sampling setting (2 as first
written).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import pilot_v3 as first  # noqa: E402  (the first round's measurement and rule)

TOKENS = 64
SCREEN_SIZE = (16, 32)  # problems x samples
SCREEN_PASS1 = (0.03, 0.40)
CONFIRM = 4  # 2 as first written (ADDED2)
SCREEN = [{"numbers": 6, "max_value": 30, "pairs": 2, "prompt": 1},
          {"numbers": 6, "max_value": 30, "pairs": 2, "prompt": 2},
          {"numbers": 6, "max_value": 30, "pairs": 2, "prompt": 3},
          {"numbers": 4, "max_value": 40, "pairs": 2, "prompt": 2},
          {"numbers": 4, "max_value": 40, "pairs": 2, "prompt": 3}]
NUCLEUS = {"temperature": 0.6, "top_p": 0.95}
ADDED = [{"numbers": 6, "max_value": 30, "pairs": 2, "prompt": 3}, {"numbers": 8, "max_value": 40, "pairs": 2, "prompt": 3}]
ADDED2 = [{"numbers": 4, "max_value": 60, "pairs": 2, "prompt": 2}, {"numbers": 4, "max_value": 80, "pairs": 2, "prompt": 2}]


def name_of(config: dict, nucleus: bool = False) -> str:
    return first.name_of(config) + ("-t0.6-p0.95" if nucleus else "")


def _settings(problems: int, n: int, ks: tuple) -> None:
    """The first round's functions read these module globals."""
    first.PROBLEMS, first.N, first.TOKENS, first.KS = problems, n, TOKENS, ks


def screen(config: dict, out: Path, nucleus: bool = False) -> dict:
    from analyses.runs import load_run
    from evalkit.passk import PasskOptions, run_passk
    from evalkit.tasks import load_task

    problems, n = SCREEN_SIZE
    _settings(problems, n, (1, 4, 16))
    folder = out / "screen" / name_of(config, nucleus)
    sampling = NUCLEUS if nucleus else {"temperature": 1.0}
    start = time.perf_counter()
    run_passk(PasskOptions(model=first.MODEL, task="pairsum", task_size=problems, task_seed=0,
                           task_config=json.dumps(config), max_new_tokens=TOKENS, limit=problems, device="cpu",
                           n=n, ks=(1, 4, 16), **sampling), folder)
    seconds = time.perf_counter() - start
    task = {p.id: p for p in load_task("pairsum", size=problems, seed=0, config=config).problems}
    samples = first.regraded(load_run(folder).samples, task)
    row = first.config_row(name_of(config, nucleus), config, samples, task, float("nan"))
    return row | {"seconds": seconds, "load": os.getloadavg(), "nucleus": nucleus}


def confirm(row: dict, out: Path) -> dict:
    _settings(24, 64, (1, 4, 16, 64))
    nucleus = row.get("nucleus", False)
    first.SAMPLING = NUCLEUS if nucleus else {"temperature": 1.0}
    found = first.measure_config(row["config"], out / ("confirm-nucleus" if nucleus else "confirm"))
    return found | {"name": row["name"], "nucleus": nucleus}


def pick(confirmed: list) -> tuple[dict | None, str]:
    """The first round's rule at T = 1 first (rules 1-2); then, where none is eligible, at T 0.6 (ADDED)."""
    for nucleus, how in ((False, "the rule at T = 1"), (True, "the rule at T 0.6, top-p 0.95 (ADDED)")):
        rows = [c for c in confirmed if c.get("nucleus", False) == nucleus]
        found, by = first.pick(rows) if rows else (None, "")
        if found is not None and by == "the rule":
            return found, how
    return None, ""


def report(state: dict) -> str:
    lines = ["# pairsum, second round: the prompt and the answer length (issue 44)", "",
             "`python studies/pilot_v3_prompts.py`; the rules are in the script's docstring, written before any "
             "figure below was read. Model smollm2-135m, fp32, CPU, 64 new tokens, T = 1.", "",
             "## Screen (16 problems x 32)", "",
             "| variant | pass@1 | pass@4 | pass@16 | no_answer | incorrect | clipped | mean tokens | distinct right pairs per solved | seconds |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in state["screen"]:
        total = sum(r["outcomes"].values())
        lines.append(f"| {r['name']} | {r['pass']['1']:.3f} | {r['pass']['4']:.3f} | {r['pass']['16']:.3f} | "
                     f"{r['outcomes'].get('no_answer', 0) / total:.3f} | {r['outcomes'].get('incorrect', 0) / total:.3f} | "
                     f"{r['clipped']:.3f} | {r['mean_tokens']:.1f} | {r['distinct_right_per_solved']:.2f} | {r['seconds']:.0f} |")
    lines += ["", "## Confirmation (the first round's rule 1, 24 problems x 64)", ""]
    if state.get("confirm"):
        lines += first.config_table(state["confirm"])
    picked, how = pick(state.get("confirm", []))
    eligible = picked is not None
    lines += ["", f"Picked: **{picked['name']}** by {how}." if eligible else
              "Picked: **none**: no confirmed variant meets the rule; the second task is not settled."]
    if state.get("completions"):
        lines += ["", "Twenty of the pick's sampled completions with pairsum-3's grades, read by eye. Right pairs "
                  "written as a list (in other samples of this run: \"2, 37\", \"12. 48\") are no chain, so no_answer: the prompt asks for "
                  "the two numbers joined by a plus sign, and GRPO's reward is the same scorer.", "",
                  "| problem | completion (first 140 characters) | outcome | extracted |", "|---|---|---|---|"]
        for c in state["completions"]:
            text = c["completion"][:140].replace("|", "\\|").replace("\n", "\\n")
            lines.append(f"| {c['problem_id']} | {text} | {c['outcome']} | {c['extracted'] or ''} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "prompts.json"
    state = json.loads(path.read_text()) if path.exists() else {}

    def save():
        path.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n")
        (args.out / "prompts.md").write_text(report(state))

    done = {r["name"] for r in state.setdefault("screen", [])}
    for config, nucleus in [(c, False) for c in SCREEN] + [(c, True) for c in ADDED] + [(c, False) for c in ADDED2]:
        if name_of(config, nucleus) not in done:
            state["screen"].append(screen(config, args.out, nucleus))
            save()
            print(f"screened {name_of(config, nucleus)}: pass@1 {state['screen'][-1]['pass']['1']:.3f}", flush=True)
    state.setdefault("confirm", [])
    for nucleus in (False, True):  # rule 2 for each sampling setting apart
        passing = [r for r in state["screen"] if r.get("nucleus", False) == nucleus
                   and SCREEN_PASS1[0] <= r["pass"]["1"] <= SCREEN_PASS1[1]]
        added2 = {name_of(c) for c in ADDED2}  # confirmed first (ADDED2)
        for r in sorted(passing, key=lambda r: (r["name"] not in added2, -r["distinct_right_per_solved"]))[:CONFIRM]:
            confirmed = [c for c in state["confirm"] if c.get("nucleus", False) == nucleus]
            if first.pick(confirmed)[1] == "the rule":
                break
            if r["name"] not in {c["name"] for c in confirmed}:
                state["confirm"].append(confirm(r, args.out))
                save()
                print(f"confirmed {r['name']}: pass@1 {state['confirm'][-1]['pass']['1']:.3f}", flush=True)
    picked, _ = pick(state["confirm"])
    if picked is not None:  # twenty of its completions with their grades, to read by eye
        _settings(24, 64, (1, 4, 16, 64))
        folder = args.out / ("confirm-nucleus" if picked.get("nucleus") else "confirm")
        state["completions"] = first.show_completions(picked["config"], folder)
    save()


if __name__ == "__main__":
    main()
