"""Report sections of a seeded study, from its findings.json (analyses.study_findings):
the claims, pass@k with the placebo floor beside every curve, curves over training, the
per-problem narrowing, the stopping rule, sparsity compared fairly, forgetting above the floor
and the budget.

    sections = study_sections(json.loads(Path("results/study-v2/findings/findings.json").read_text()))
    build_report(inputs, out, title=..., extra=sections)      # placed after the summary

Every number is a field of findings.json; the tables are also written as CSV by the report.
Each arm has one colour, line style and marker in every figure (claims_sections.ARM_STYLE).
"""

from __future__ import annotations

import pandas as pd

import analyses.report.figures as F
from analyses.report.claims_sections import ARM_STYLE
from analyses.report.document import Figure, Section, Table
from analyses.study_seeded import STAGE_TIME_LABEL
from analyses.study_tables import seeds_text

__all__ = ["study_sections"]


def study_sections(findings: dict) -> list[Section]:
    """The study's sections; a study with pre-registered claims opens with theirs
    (analyses.report.claims_sections)."""
    f = findings["figures"]
    out = []
    if findings.get("preregistered"):
        from analyses.report.claims_sections import claims_sections

        out += claims_sections(findings["preregistered"])
    out += [_claims(findings), *(_coverage(kind, cov, f["narrowing"].get(kind, {})) for kind, cov in
                                 f["coverage"].items())]
    for make in (_curves, _stopping, _sparsity, _forgetting, _budget):
        section = make(f)
        if section is not None:
            out.append(section)
    return out


def _claims(findings: dict) -> Section:
    from analyses.study_tables import _figures

    rows = [{"claim": c["statement"], "verdict": c["verdict"], "detectable": c.get("detectable"),
             "figures": _figures(c), "rule": c["rule"]} for c in findings["claims"]]
    f = findings["figures"]
    text = (f"Seeds {', '.join(map(str, f['seeds']))}, {f['problems']} held-out problems. Intervals are 95% two-level "
            "bootstraps (seeds drawn with replacement, then problems; metrics.seeds), per-seed figures listed. "
            "Verdict words: " + ", ".join(findings["verdicts"]) + "; each claim's rule is in its row.")
    return Section("study-claims", "Claims and verdicts", (text, Table("study_claims", "One row per claim",
                                                                       pd.DataFrame(rows))))


def _coverage(kind: str, cov: dict, narrowing: dict) -> Section:
    ks, s = cov["ks"], cov["sampling"]
    series = []
    for name, curve in [("base", cov["base"]), *cov["arms"].items()]:
        p, fl, i = curve["pass"], curve["placebo"], _style(name)
        series.append({"label": name, "x": ks, "y": p["estimate"], "low": p["ci_low"], "high": p["ci_high"],
                       "style": i})
        series.append({"label": f"{name}: placebo floor", "x": ks, "y": fl["estimate"], "style": i, "floor": True})
    fig = Figure(f"study_passk_{kind}", f"pass@k at the picked checkpoints with each one's placebo floor (every "
                 f"completion scored against another problem's answer), T {s['temperature']}, top-p {s['top_p']}, "
                 f"n {s['n']}; bands: two-level 95% intervals",
                 F.line_chart(series, F.Axes("k", "pass@k", ylim=(0, 1)), log2x=True))
    rows = [{"model": name, **{f"pass@{k}": v for k, v in zip(ks, c["pass"]["estimate"], strict=True)},
             **{f"floor@{k}": v for k, v in zip(ks, c["placebo"]["estimate"], strict=True)}}
            for name, c in [("base", cov["base"]), *cov["arms"].items()]]
    diffs = [{"difference": name, "k": k, "above_floor": r["difference"], "ci_low": r["ci_low"], "ci_high": r["ci_high"],
              "raw": r["raw"]["difference"], "raw_ci_low": r["raw"]["ci_low"], "raw_ci_high": r["raw"]["ci_high"],
              "per_seed": seeds_text(r)}
             for name, by_k in cov["differences"].items() for k, r in by_k.items()]
    narrow = [{"arm": m, "base solves, arm never (per seed)": ", ".join(str(r["base_solves_arm_never"])
                                                                          for r in n["per_seed"]),
               "of problems the base solves": n["base_solved"],
               "arm solves, base never": ", ".join(str(r["arm_solves_base_never"]) for r in n["per_seed"]),
               "collapsed onto a wrong answer": ", ".join(str(r["collapsed_onto_wrong"]) for r in n["per_seed"]),
               "distinct answers per problem": ", ".join(f"{r['distinct_answers']:.1f}" for r in n["per_seed"]),
               "base distinct answers": n["base_distinct_answers"], "crossing k": n["crossing"]["k"],
               "crossing ci_low": n["crossing"]["ci_low"], "crossing ci_high": n["crossing"]["ci_high"],
               "share of replicates crossing": n["crossing"]["share_of_replicates_crossing"]}
              for m, n in narrowing.items()]
    text = (f"The base's pass@k clears its floor (interval above 0) up to k = {cov['k_clear']}; the coverage verdict "
            "reads pass@k minus the floor there. The crossing k is where the base's pass@k overtakes the arm's "
            "(log2 k interpolation), with the interval over the two-level replicates that cross.")
    return Section(f"study-coverage-{kind}", f"Coverage at large k ({kind})",
                   (text, fig, Table(f"study_passk_{kind}", "pass@k and the placebo floor", pd.DataFrame(rows)),
                    Table(f"study_passk_differences_{kind}", "Differences (above the floor; raw beside)",
                          pd.DataFrame(diffs)),
                    Table(f"study_narrowing_{kind}", "Per-problem narrowing", pd.DataFrame(narrow))))


def _curves(f: dict) -> Section | None:
    curves = f.get("curves") or {}
    if "base" not in curves:
        return None
    k = curves["ks"][-1]
    panels, rows = [], []
    for key, label in (("pass@1", "pass@1"), (f"pass@{k}", f"pass@{k}"), ("entropy", "entropy (nats/token)")):
        series = []
        for m in (x for x in f["methods"] if curves.get(x)):
            by_seed, i = {}, _style(m)
            for p in curves[m]:
                by_seed.setdefault(p["seed"], []).append(p)
            for j, (seed, points) in enumerate(sorted(by_seed.items())):
                xs = [0] + [p["completions"] for p in points]
                ys = [curves["base"][key]] + [p[key] for p in points]
                series.append({"label": f"{m}" if j == 0 else f"_{m} s{seed}", "x": xs, "y": ys, "style": i})
                if key == f"pass@{k}":  # each seed's floor from the base's, as its line
                    series.append({"label": f"{m}: placebo floor" if j == 0 else "_floor", "x": xs, "style": i,
                                   "floor": True,
                                   "y": [curves["base"][f"placebo@{k}"]] + [p[f"placebo@{k}"] for p in points]})
        panels.append({"series": series, "xlabel": "completions spent in training", "ylabel": label})
    for m in f["methods"]:
        rows += [{"arm": m, **{c: p[c] for c in ("seed", "trainer", "step", "completions", "pass@1", f"pass@{k}",
                                                 f"placebo@{k}", "entropy", "run")}} for p in curves.get(m, [])]
    fig = Figure("study_curves", f"Held-out pass@1, pass@{k} (with its placebo floor, dotted) and token "
                 "entropy at every saved checkpoint, one line per seed, x = completions the arm had spent "
                 "(ES-then-GRPO: its ES stage, then GRPO)", F.panels(panels, height=8.0))
    return Section("study-curves", "Curves over training", (fig, Table("study_curves", "Every saved checkpoint",
                                                                       pd.DataFrame(rows))))


def _style(arm: str) -> int:
    """The arm's index into figures.STYLES (an arm not in ARM_STYLE: one no named arm has)."""
    return ARM_STYLE.get(arm, 5)


def _stopping(f: dict) -> Section | None:
    s = f.get("stopping") or {}
    rows = [{"arm": m, "seed": r["seed"], "candidates (step: reward)": ", ".join(f"{a}: {b:.3f}" for a, b in
                                                                                   r["candidates"]),
             "picked": f"{r['picked_trainer']} step {r['picked_step']}", "picked reward": r["picked_reward"],
             "checkpoint": r["picked_checkpoint"]} for m, rs in s.get("arms", {}).items() for r in rs]
    if not rows:
        return None
    text = (f"Rule {s['rule']}: each arm's saved checkpoint with the highest greedy reward on the validation split "
            f"(the training generator, its own seed, no question of training or held out), ties to the earlier. "
            f"The base's greedy validation reward: {s['base_reward']}.")
    return Section("study-stopping", "The stopping rule", (text, Table("study_stopping", "Candidates and picks",
                                                                       pd.DataFrame(rows))))


def _sparsity(f: dict) -> Section | None:
    s = f.get("sparsity")
    if not s:
        return None
    blocks: list = ["Sparsity compared fairly: the ES and GRPO checkpoints whose ||delta|| / ||W|| are closest, the "
                    "share of ||delta||^2 in the top q of entries beside an i.i.d. Gaussian update's, effective rank "
                    "per matrix; and short runs trained in bf16, where an unchanged weight is bit-identical in bf16."]
    rows = []
    for seed, r in (s.get("matched") or {}).items():
        if r["matched"] is None:
            blocks.append(f"seed {seed}: {r['note']}")
            continue
        m = r["matched"]
        for j, q in enumerate(r["qs"]):
            rows.append({"seed": seed, "q": q, "es": r["top_share"]["es"][j], "grpo": r["top_share"]["grpo"][j],
                         "gaussian": r["gaussian_top_share"][j], "es step": m["es"]["step"],
                         "grpo step": m["grpo"]["step"], "norm ratio es/grpo": m["norm_ratio_es_over_grpo"],
                         "es eff. rank ratio": r["effective_rank"]["es"]["mean_ratio"],
                         "grpo eff. rank ratio": r["effective_rank"]["grpo"]["mean_ratio"]})
    if rows:
        blocks.append(Table("study_sparsity_matched", "Top-q share of ||delta||^2 at matched norm", pd.DataFrame(rows)))
    bf16 = s.get("bf16") or {}
    if bf16:
        blocks.append(Table("study_sparsity_bf16", "bf16-trained runs: share of bf16 weights changed",
                            pd.DataFrame([{"arm": m, **v} for m, v in bf16.items() if m != "by_scale"])))
    blocks += _bf16_scales(bf16.get("by_scale") or [])
    picked = [{"arm": m, **r} for m, rs in (s.get("picked_fp32") or {}).items() for r in rs]
    if picked:
        blocks.append(Table("study_sparsity_picked", "The picked checkpoints against the base, fp32",
                            pd.DataFrame(picked)))
    return Section("study-sparsity", "Sparsity compared fairly", tuple(blocks))


def _bf16_scales(rows: list[dict]) -> list:
    """The bf16 runs at each step size: the share of bf16 weights changed against the per-step
    update size over half a bf16 ulp (the share of entries whose step exceeds half the bf16
    spacing at their weight), one line per method through its scales."""
    if not rows:
        return []
    series = []
    for m in dict.fromkeys(r["method"] for r in rows):
        points = sorted((r["step_over_half_ulp"], r["changed_frac_bits"]) for r in rows
                        if r["method"] == m and r.get("step_over_half_ulp") is not None)
        if points:
            series.append({"label": m, "x": [p[0] for p in points], "y": [p[1] for p in points], "style": _style(m)})
    table = Table("study_sparsity_bf16_scales", "bf16 runs per method and step size (scale x alpha or lr)",
                  pd.DataFrame(rows))
    if not series:
        return [table]
    fig = Figure("study_sparsity_bf16_scales", "Share of bf16 weights each short bf16 run changed against its "
                 "per-step update size: the mean share of entries whose step exceeds half the bf16 spacing at their "
                 "weight; one point per step size (the study's bf16_scales)",
                 F.line_chart(series, F.Axes("per-step share of entries above half a bf16 ulp",
                                             "share of bf16 weights changed", ylim=(0, 1))))
    return [fig, table]


def _forgetting(f: dict) -> Section | None:
    fg = f.get("forgetting")
    if not fg:
        return None
    rows = [{"benchmark": name, "items": b["items"], "base accuracy": b["base_accuracy"], "chance": b["chance"],
             "arm": m, "accuracy": r["accuracy"], "difference": r["difference"], "ci_low": r["ci_low"],
             "ci_high": r["ci_high"], "per_seed": seeds_text(r)}
            for name, b in fg["benchmarks"].items() for m, r in b["arms"].items()]
    kl = [{"arm": m, "task": k["task"], "per token pooled": k["per_token_pooled"]["estimate"],
           "pooled ci_low": k["per_token_pooled"]["ci_low"], "pooled ci_high": k["per_token_pooled"]["ci_high"],
           "per token, mean of completions": k["per_token_mean_of_completions"]["difference"],
           "per completion": k["per_completion"]["difference"], "prompts": k["prompts"]}
          for m, k in fg["kl"].items() if k]
    text = ("Accuracy of each arm's picked checkpoint minus the base's on the same items (two-level interval over "
            "seeds, then items), and KL(pi_base || pi_arm) on prompts of a task not trained on: per token pooled "
            "over every generated position, beside the mean of per-completion means.")
    return Section("study-forgetting", "Forgetting above the floor", (
        text, Table("study_forgetting", "Benchmarks", pd.DataFrame(rows)),
        Table("study_kl", "Forward KL on another task's prompts", pd.DataFrame(kl))))


def _budget(f: dict) -> Section | None:
    b = f.get("budget") or {}
    rows = [{"arm": m, **r} for m, rs in b.items() if isinstance(rs, list) for r in rs]
    if not rows:
        return None
    return Section("study-budget", "Budget", (f"{STAGE_TIME_LABEL.capitalize()}: {b['stage_seconds_total']} s of wall time.",
                                              Table("study_budget", "Completions, tokens and training time per arm "
                                                    "and seed", pd.DataFrame(rows))))
