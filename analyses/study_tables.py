"""findings.md of a seeded study: the claims table, then the tables each figure comes from.

    text = seeded_markdown(json.loads(Path("results/study-v2/findings/findings.json").read_text()))

Every number here is a field of findings.json (same folder); the table names say which.
"""

from __future__ import annotations

import shlex

from analyses.study_seeded import STAGE_TIME_LABEL

__all__ = ["seeded_markdown", "ci", "num", "seeds_text"]


def num(x, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def ci(row: dict | None, digits: int = 3) -> str:
    if row is None:
        return "n/a"
    seeds = seeds_text(row, digits)
    return (f"{row['difference']:+.{digits}f} [{row['ci_low']:+.{digits}f}, {row['ci_high']:+.{digits}f}]"
            + (f" (seeds {seeds})" if seeds else ""))


def seeds_text(row: dict, digits: int = 3) -> str:
    """A difference's per-seed figures: each seed's own difference (against the base), or, for
    two separately trained arms, each arm's seeds ("es: +0.1, +0.2; grpo: ...")."""
    if "per_seed_each" in row:
        return "; ".join(f"{name}: " + ", ".join(f"{v:.{digits}f}" for v in values)
                         for name, values in row["per_seed_each"].items())
    return ", ".join(f"{v:+.{digits}f}" for v in row.get("per_seed", []))


def seeded_markdown(result: dict, root: str = "STUDY") -> str:
    """`root`: the study folder as the recompute commands name it."""
    f = result["figures"]
    lines = [f"Seeds {', '.join(map(str, f['seeds']))}; {f['problems']} held-out problems. Intervals: 95% two-level "
             "bootstrap (seeds, then problems; two arms' seeds apart); per-seed figures in brackets after them. "
             "Each row's figures and verdict are recomputed from the study's files, and compared with findings.json, "
             "by the command beside it.", "",
             "| claim | figures | verdict | recompute |", "|---|---|---|---|"]
    for c in result["claims"]:
        verdict = c["verdict"] + (f" (detectable +-{c['detectable']:.3f})" if c.get("detectable") else "")
        lines.append(f"| {c['statement']} | {_figures(c)} | {verdict} | "
                     f"`python -m analyses.recompute {shlex.quote(root)} claims/{c['claim']}` |")
    lines += ["", "Verdict rules:", *[f"- {c['claim']}: {c['rule']}" for c in result["claims"]]]
    lines += _checks(f) + _coverage_tables(f) + _narrowing_tables(f) + _stopping_table(f) + _budget_table(f)
    return "\n".join(lines) + "\n"


def _figures(c: dict) -> str:
    if c["claim"] == "coverage":
        parts = []
        for kind, row in c["settings"].items():
            s = row["sampling"]
            parts.append(f"{kind} (T {s['temperature']}, top-p {s['top_p']}, n {s['n']}): at k = {row['k']} above the "
                         f"floor, ES - GRPO {ci(row['es - grpo'])}, GRPO - base {ci(row['grpo - base'])}, "
                         f"ES - base {ci(row['es - base'])}: {row['verdict']}")
        return "; ".join(parts) or "no pass@k runs"
    if c["claim"] == "entropy":
        return "; ".join(f"{name}: {ci(row)}" for name, row in c["differences"].items()) or "no entropy recorded"
    if c["claim"] == "sparsity":
        return _sparsity_text(c)
    if c["claim"] == "forgetting":
        return _forgetting_text(c)
    return "; ".join(f"{name}: {ci(row)}" for name, row in c["differences"].items()
                     if "per_seed" in row or "per_seed_each" in row) or "n/a"


def _sparsity_text(c: dict) -> str:
    parts = []
    bf16 = c.get("bf16") or {}
    if {"es", "grpo"} <= set(bf16):
        parts.append(f"bf16-trained runs: ES changes {bf16['es']['changed_frac_bits']:.1%} of bf16 weights, GRPO "
                     f"{bf16['grpo']['changed_frac_bits']:.1%}"
                     + ("" if all(bf16[m]["changed_frac_bits"] for m in ("es", "grpo")) else
                        " (an update that rounds to nothing in bf16: sparsity not tested)"))
    for seed, row in (c.get("matched") or {}).items():
        m = row["matched"]
        if m is None:
            parts.append(f"seed {seed}: {row['note']}")
            continue
        q = row["qs"].index(0.01) if 0.01 in row["qs"] else 0
        parts.append(f"seed {seed} matched pair (ES step {m['es']['step']}, GRPO step {m['grpo']['step']}, norm ratio "
                     f"{m['norm_ratio_es_over_grpo']:.3g}): top-{row['qs'][q]:g} share ES {row['top_share']['es'][q]:.3f}, "
                     f"GRPO {row['top_share']['grpo'][q]:.3f}, Gaussian {row['gaussian_top_share'][q]:.3f}; effective "
                     f"rank / min dim ES {num(row['effective_rank']['es']['mean_ratio'])}, GRPO "
                     f"{num(row['effective_rank']['grpo']['mean_ratio'])}")
    return "; ".join(parts) or "not measured"


def _forgetting_text(c: dict) -> str:
    parts = []
    for name, b in (c.get("benchmarks") or {}).items():
        chance = f", chance {b['chance']:.2f}" if b.get("chance") else ""
        arms = ", ".join(f"{m} {ci(r)}" for m, r in b["arms"].items())
        counted = (c.get("counted") or {}).get(name)
        why = f"counted: {counted['verdict']}" if counted else "not counted (below its floor, or too few items)"
        parts.append(f"{name} ({b['items']} items, base {b['base_accuracy']:.3f}{chance}; {why}): model - base {arms}")
    for m, kl in (c.get("kl") or {}).items():
        if kl:
            p = kl["per_token_pooled"]
            parts.append(f"KL({m}) on {kl['task']}: per token pooled {p['estimate']:.3f} [{p['ci_low']:.3f}, "
                         f"{p['ci_high']:.3f}], mean of per-completion means "
                         f"{kl['per_token_mean_of_completions']['difference']:.3f}")
    return "; ".join(parts) or "not measured"


def _coverage_tables(f: dict) -> list[str]:
    out = []
    for kind, cov in f["coverage"].items():
        ks = cov["ks"]
        s = cov["sampling"]
        out += ["", f"pass@k and its placebo floor, {kind} (T {s['temperature']}, top-p {s['top_p']}, n {s['n']}; "
                    f"findings.json figures.coverage.{kind}):", "",
                "| model | " + " | ".join(f"pass@{k} (floor)" for k in ks) + " |", "|---" * (len(ks) + 1) + "|"]
        for name, curve in [("base", cov["base"]), *cov["arms"].items()]:
            cells = [f"{p:.3f} ({fl:.3f})" for p, fl in zip(curve["pass"]["estimate"], curve["placebo"]["estimate"],
                                                            strict=True)]
            out.append(f"| {name} | " + " | ".join(cells) + " |")
        out.append(f"\nThe base clears its floor (interval above 0) up to k = {cov['k_clear']}.")
    return out


def _narrowing_tables(f: dict) -> list[str]:
    out = []
    for kind, arms in f["narrowing"].items():
        out += ["", f"Per-problem narrowing, {kind} (figures.narrowing.{kind}; per seed):", "",
                "| arm | base solves, arm never | arm solves, base never | collapsed onto a wrong answer | "
                "distinct answers per problem (base) | crossing k [95%] (share of replicates crossing) |",
                "|---|---|---|---|---|---|"]
        for m, n in arms.items():
            seeds = n["per_seed"]
            x = n["crossing"]
            cross = "none" if x["k"] is None else f"{x['k']:.1f} [{num(x['ci_low'], 1)}, {num(x['ci_high'], 1)}]"
            out.append(f"| {m} | {', '.join(str(r['base_solves_arm_never']) for r in seeds)} of {n['base_solved']} | "
                       f"{', '.join(str(r['arm_solves_base_never']) for r in seeds)} | "
                       f"{', '.join(str(r['collapsed_onto_wrong']) for r in seeds)} | "
                       f"{', '.join(format(r['distinct_answers'], '.1f') for r in seeds)} "
                       f"({n['base_distinct_answers']:.1f}) | "
                       f"{cross} ({x['share_of_replicates_crossing']:.2f}) |")
    return out


def _checks(f: dict) -> list[str]:
    rows = f.get("checks") or []
    return (["", "What the claims assume, checked on the study's files (`figures.checks`):", ""]
            + [f"- {'ok' if r['ok'] else 'NOT MET'}: {r['check']} ({r['detail']})" for r in rows]) if rows else []


def _stopping_table(f: dict) -> list[str]:
    s = f["stopping"]
    out = ["", f"Stopping rule {s['rule']} (figures.stopping; greedy validation reward per candidate step; base "
                f"{num(s['base_reward'])}):", "", "| arm | seed | candidates (step: reward) | picked |", "|---|---|---|---|"]
    for m, rows in s["arms"].items():
        for r in rows:
            cands = ", ".join(f"{step}: {reward:.3f}" for step, reward in r["candidates"])
            out.append(f"| {m} | {r['seed']} | {cands} | {r['picked_trainer']} step {r['picked_step']} |")
    return out


def _budget_table(f: dict) -> list[str]:
    b = f["budget"]
    out = ["", f"Budget (figures.budget; measured from the training logs and study.json; {STAGE_TIME_LABEL} "
               f"{b['stage_seconds_total']} s):", "", "| arm | seed | completions | generated tokens | train seconds |",
           "|---|---|---|---|---|"]
    for m, rows in b.items():
        if isinstance(rows, list):
            out += [f"| {m} | {r['seed']} | {r.get('completions')} | {r.get('tokens')} | {r.get('train_seconds')} |"
                    for r in rows]
    return out
