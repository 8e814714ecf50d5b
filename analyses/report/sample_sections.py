"""Entropy, length and GRPO-group sections: from passk runs, sample reports and trainer logs.

    from analyses.report.sample_sections import entropy_section, length_section, groups_section
    section = entropy_section(runs, labels, found.of("entropy"), found.trainers)  # None: no data

Each builder returns None when none of its data was given. Formulas are
metrics/'s: entropy_summary and fit_entropy_law (Cui et al. 2025,
`R = -a exp(H) + b`), length_summary and aes (O1-Pruner, a=1 b=3 g=5, against
the first run given for the same task), zero_advantage_table
(`[C(c,G) + C(n-c,G)] / C(n,G)` per problem). Trainer logs are
`evalkit train` metrics.jsonl lines (TRL names: reward, entropy,
frac_reward_zero_std).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

import analyses.report.figures as F
from analyses.report.document import Figure, Section, Table
from analyses.report.inputs import Output, Trainer
from analyses.report.passk_sections import by_task, curve_ks
from analyses.runs import Run

__all__ = ["entropy_section", "length_section", "groups_section", "trainer_series", "fit_trajectory"]

MIN_FIT_POINTS = 3


def trainer_series(trainer: Trainer, key: str) -> tuple[list, list]:
    """(steps, values) of one logged metric, skipping steps without it."""
    pairs = [(r["step"], r[key]) for r in trainer.records
             if isinstance(r.get(key), int | float) and not isinstance(r.get(key), bool) and "step" in r]
    return [p[0] for p in pairs], [float(p[1]) for p in pairs]


def fit_trajectory(trainer: Trainer) -> dict | None:
    """Cui et al.'s law over a training log's (entropy, reward) steps, or None when it cannot be fitted."""
    from metrics.entropy import fit_entropy_law

    by_step = {r["step"]: r for r in trainer.records if "step" in r}
    pts = [(r["entropy"], r["reward"]) for r in by_step.values()
           if isinstance(r.get("entropy"), float) and isinstance(r.get("reward"), int | float)]
    if len(pts) < MIN_FIT_POINTS:
        return None
    try:
        return {**fit_entropy_law([p[0] for p in pts], [p[1] for p in pts]),
                "points": pts}
    except ValueError:
        return None


def _run_entropy(runs: Sequence[Run], labels: dict) -> list:
    from metrics.entropy import entropy_summary

    rows = []
    for run in (r for r in runs if r.has_entropy()):
        s = run.samples
        summary = entropy_summary(s["mean_entropy"], s["num_tokens"], s["correct"])
        quantiles = summary.pop("quantiles")
        rows.append({"run": labels[id(run)], "task": run.summary["task"]["name"],
                     "accuracy": float(s["correct"].mean()), **summary, **quantiles})
    if not rows:
        return []
    frame = pd.DataFrame(rows)
    dots = [{"label": r["run"], "value": r["mean_per_sample"], "low": r["q10"], "high": r["q90"]} for r in rows]
    png = F.dot_chart(dots, xlabel="mean token entropy per sample (nats)", zero_line=False,
                      title="Token entropy per model")
    return [Figure("entropy_runs", "Mean token entropy per model; whiskers: 10th to 90th percentile "
                   "of the per-sample means", png),
            Table("entropy_runs", "Token entropy per run (nats; sampling distribution at the run's temperature)",
                  frame)]


def _entropy_outputs(outputs: Sequence[Output]) -> list:
    blocks = []
    for i, out in enumerate(outputs, 1):
        table = pd.DataFrame(out.data["tables"]["runs"])
        blocks.append(Table(f"entropy_report{i}", f"evalkit entropy ({out.path})", table))
        fit = out.data.get("fit")
        if fit:
            h = table["mean_per_sample"].astype(float)
            blocks.append(f"Entropy law over {out.label}: R = -{fit['a']:.4g}·exp(H) + {fit['b']:.4g}, "
                          f"R² = {fit['r2']:.3f} over {fit['n_points']} runs; predicted ceiling at H = 0: "
                          f"{fit['ceiling']:.3f}." + (f" {fit['warning']}" if fit.get("warning") else ""))
            blocks.append(_law_figure(f"entropy_law_report{i}", [(str(r), x, y) for r, x, y in zip(
                table["run"], h, table["accuracy"], strict=True)], fit, "accuracy (fraction of samples)"))
    return blocks


def _law_figure(name: str, points: list, fit: dict, ylabel: str) -> Figure:
    hs = np.linspace(min(p[1] for p in points), max(p[1] for p in points), 50)
    curve = {"x": hs.tolist(), "y": (-fit["a"] * np.exp(hs) + fit["b"]).tolist(), "label": "R = -a·exp(H) + b"}
    pts = [{"x": x, "y": y, "label": lab, "group": "observed"} for lab, x, y in points]
    png = F.scatter_fit(pts, F.Axes("mean token entropy H (nats)", ylabel, "Entropy-performance law (Cui et al. 2025)"),
                        curves=[curve], annotate=len(points) <= 12)
    return Figure(name, "Observed (entropy, performance) points and the fitted law", png)


def _trainer_entropy(trainers: Sequence[Trainer]) -> list:
    logged = [t for t in trainers if trainer_series(t, "entropy")[0]]
    if not logged:
        return []
    specs = [{"series": [{"label": t.label, "x": trainer_series(t, key)[0], "y": trainer_series(t, key)[1],
                          "style": i} for i, t in enumerate(logged)], "xlabel": "training step",
              "ylabel": ylabel} for key, ylabel in (("entropy", "token entropy (nats)"),
                                                     ("reward", "mean reward (fraction correct)"))]
    blocks: list = [Figure("entropy_training", "Entropy and reward along training (metrics.jsonl)",
                           F.panels(specs, title="Training trajectories"))]
    fits = [(t, fit_trajectory(t)) for t in logged]
    rows = [{"trainer": t.label, "kind": t.settings.get("kind"), "a": f["a"], "b": f["b"], "r2": f["r2"],
             "ceiling": f["ceiling"], "n_points": f["n_points"]} for t, f in fits if f]
    if rows:
        blocks.append(Table("entropy_law_training", "R = -a·exp(H) + b fitted over each trainer's steps "
                            "(R = mean reward, H = mean token entropy, nats)", pd.DataFrame(rows)))
        t, f = next((t, f) for t, f in fits if f)
        blocks.append(_law_figure("entropy_law_training", [(str(i + 1), h, r) for i, (h, r) in
                                                           enumerate(f["points"])], f,
                                  f"mean reward of {t.label} (fraction)"))
    short = [t.label for t, f in fits if not f]
    if short:
        blocks.append(f"No law fitted for {', '.join(short)}: fewer than {MIN_FIT_POINTS} steps with "
                      "entropy and reward, or no spread in entropy.")
    return blocks


def entropy_section(runs, labels, outputs: Sequence[Output], trainers: Sequence[Trainer]) -> Section | None:
    blocks = [*_run_entropy(runs, labels), *_entropy_outputs(outputs), *_trainer_entropy(trainers)]
    return Section("entropy", "Entropy", tuple(blocks)) if blocks else None


def _length_rows(runs: Sequence[Run], labels: dict) -> pd.DataFrame:
    from metrics.length import aes, length_summary

    rows = []
    for group in by_task(runs).values():
        base = None
        for run in group:
            s = run.samples
            row = {"run": labels[id(run)], "task": run.summary["task"]["name"],
                   **length_summary(s["num_tokens"], s["correct"], s["truncated"])}
            base = base or row
            score = aes(base["mean_tokens"], row["mean_tokens"], base["accuracy"], row["accuracy"])
            rows.append({**row, "aes_reference": base["run"], "d_len": score["d_len"],
                         "d_acc": score["d_acc"], "aes": score["aes"]})
    return pd.DataFrame(rows)


def length_section(runs, labels, outputs: Sequence[Output]) -> Section | None:
    blocks: list = []
    if runs:
        frame = _length_rows(runs, labels)
        pts = [{"x": r["mean_tokens"], "y": r["accuracy"], "label": r["run"], "group": r["run"]}
               for r in frame.to_dict("records")]
        png = F.scatter_fit(pts, F.Axes("mean response length (tokens, stop token included)",
                                        "accuracy (fraction of samples correct)", "Length against accuracy"))
        blocks += ["AES (O1-Pruner, a=1, b=3, g=5) is against the first run given for the same task.",
                   Figure("length", "Mean response length against accuracy, one marker per model", png),
                   Table("length_runs", "Response length per run (tokens)", frame)]
    for i, out in enumerate(outputs, 1):
        blocks.append(Table(f"length_report{i}", f"evalkit length ({out.path}); base: "
                            f"{(out.data.get('base') or {}).get('label', 'none')}",
                            pd.DataFrame(out.data["tables"]["runs"])))
    return Section("length", "Length", tuple(blocks)) if blocks else None


def _predicted(runs: Sequence[Run], labels: dict) -> list:
    from metrics.groups import zero_advantage_table

    frames = []
    for run in runs:
        counts = run.per_problem()
        sizes = [g for g in curve_ks(int(counts["n"].max())) if g >= 2]
        if sizes:
            frames.append(zero_advantage_table(counts["n"], counts["c"], sizes).assign(run=labels[id(run)]))
    if not frames:
        return ["No run has at least 2 samples per problem: no group prediction."]
    frame = pd.concat(frames, ignore_index=True)
    series = [{"label": lab, "x": t["group_size"].tolist(), "y": t["frac_zero"].tolist()}
              for lab, t in frame.groupby("run", sort=False)]
    png = F.line_chart(series, F.Axes("group size G (samples per prompt, log2 scale)", "predicted zero-advantage "
                                      "fraction", "GRPO groups without learning signal", (-0.02, 1.02)), log2x=True)
    cols = ["run", *[c for c in frame.columns if c != "run"]]
    return [Figure("groups_predicted", "Predicted fraction of GRPO groups whose rewards are all equal "
                   "(all correct or all wrong), per group size", png),
            Table("groups_predicted", "Zero-advantage fraction per G, unbiased estimate "
                  "[C(c,G) + C(n-c,G)] / C(n,G) averaged over problems", frame[cols])]


def _observed(trainers: Sequence[Trainer], outputs: Sequence[Output]) -> list:
    series = [{"label": t.label, "x": trainer_series(t, "frac_reward_zero_std")[0],
               "y": trainer_series(t, "frac_reward_zero_std")[1]} for t in trainers
              if trainer_series(t, "frac_reward_zero_std")[0]]
    for out in outputs:
        log = out.data.get("tables", {}).get("train_log")
        if log:
            note = out.data.get("train_log") or {}
            series.append({"label": f"{out.label} (G={note.get('group_size')})", "x": [r["step"] for r in log],
                           "y": [r["observed_frac_zero"] for r in log],
                           "hline": note.get("predicted_frac_zero")})
    if not series:
        return []
    png = F.line_chart(series, F.Axes("training step", "observed zero-advantage fraction",
                                      "Groups with zero reward spread during training", (-0.02, 1.02)))
    return [Figure("groups_training", "Observed fraction of groups with zero reward spread per training step "
                   "(frac_reward_zero_std); a horizontal line in a series' style is its prediction", png)]


def groups_section(runs, labels, outputs: Sequence[Output], trainers: Sequence[Trainer]) -> Section | None:
    blocks: list = _predicted(runs, labels) if runs else []
    for i, out in enumerate(outputs, 1):
        blocks.append(Table(f"groups_report{i}", f"evalkit groups ({out.path})",
                            pd.DataFrame(out.data["tables"]["sizes"])))
    blocks += _observed(trainers, outputs)
    return Section("groups", "GRPO groups", tuple(blocks)) if blocks else None
