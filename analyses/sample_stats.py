"""Entropy, length and group reports from passk run folders.

    from analyses.runs import load_runs
    from analyses.sample_stats import entropy_report, write_report
    report = entropy_report(load_runs(["runs/step100", "runs/step200"]), fit=True)
    write_report(report, Path("reports/ent"))   # entropy.json + entropy_*.csv

Each report is a `Report`: the command, the runs' identities (model, task,
sampling from summary.json), named tables (DataFrames) and notes (fits,
chosen definitions). The formulas live in metrics/; this module only picks
the columns and checks the input.

Accuracy here is per sample (correct samples / samples), which equals the
mean over problems of c/n when every problem has the same n.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analyses.runs import Run, reference_answers, step_hint, task_key
from evalkit.errors import UsageError
from evalkit.jsonio import frame_records, plain_json

__all__ = ["Report", "entropy_report", "length_report", "report_files", "write_report", "NO_ENTROPY_HELP"]

NO_ENTROPY_HELP = (
    "has no entropy values; get them with `evalkit entropy --model M --samples FILE` "
    "(teacher-forced, from a JSONL of prompt/completion) or rerun `evalkit passk` into a new folder"
)


@dataclass(frozen=True)
class Report:
    command: str
    runs: tuple[dict, ...]
    tables: dict[str, pd.DataFrame]
    notes: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        tables = {name: frame_records(t) for name, t in self.tables.items()}
        return plain_json({"command": self.command, "runs": list(self.runs), **self.notes, "tables": tables})


def report_files(report: Report) -> dict[str, str]:
    """<command>.json (strict JSON) and <command>_<table>.csv, by file name."""
    import json

    files = {f"{report.command}.json": json.dumps(report.to_json(), indent=2, allow_nan=False, default=str) + "\n"}
    for name, table in report.tables.items():
        files[f"{report.command}_{name}.csv"] = table.to_csv(index=False)
    return files


def write_report(report: Report, out: Path) -> list[Path]:
    """DIR/<command>.json plus DIR/<command>_<table>.csv, through evalkit.outdir's contract
    (locked, a user's files never overwritten, replaced atomically)."""
    from evalkit.outdir import OutputFolder

    with OutputFolder.claim(Path(out), report.command) as folder:
        return folder.publish(report_files(report))


def _identity(run: Run, mixed: bool) -> dict:
    return {**run.identity(), "label": run.label, "task_key": task_key(run) if mixed else None}


def _mixed(runs: Sequence[Run]) -> bool:
    return len({task_key(r) for r in runs}) > 1


def _steps(runs: Sequence[Run], steps: Sequence[int] | None) -> tuple[list, str]:
    if steps is not None:
        if len(steps) != len(runs):
            raise UsageError(f"--steps has {len(steps)} values for {len(runs)} runs; give one per run")
        return list(steps), "--steps"
    return [step_hint(r) for r in runs], "command-line order (step column: hint read from model path)"


def entropy_report(runs: Sequence[Run], *, steps: Sequence[int] | None = None, fit: bool = False) -> Report:
    """Per-run entropy summary, and the Cui et al. fit over the runs when asked.

    Order: by `steps` when given, else the command line's order (the step
    read from a model path such as `.../step-000100` is shown, never used to
    reorder). The fit itself does not depend on the order.
    """
    from metrics.entropy import entropy_summary, fit_entropy_law

    for run in runs:
        if not run.has_entropy():
            raise UsageError(f"{run.path} {NO_ENTROPY_HELP}")
    step_values, ordering = _steps(runs, steps)
    mixed = _mixed(runs)
    rows = []
    for run, step in zip(runs, step_values, strict=True):
        s = run.samples
        summary = entropy_summary(s["mean_entropy"], s["num_tokens"], s["correct"])
        quantiles = summary.pop("quantiles")
        rows.append({"run": run.label, "task": task_key(run) if mixed else run.summary["task"]["name"],
                     "step": step, "accuracy": float(s["correct"].mean()), **summary, **quantiles})
    table = pd.DataFrame(rows)
    if steps is not None:
        table = table.sort_values("step", kind="stable").reset_index(drop=True)
    notes: dict = {"ordering": ordering, "entropy": "nats; mean_per_sample is the batch mean used for the fit"}
    if fit:
        notes["fit"] = _fit(table, mixed, fit_entropy_law)
    return Report("entropy", tuple(_identity(r, mixed) for r in runs), {"runs": table}, notes)


def _fit(table: pd.DataFrame, mixed: bool, fit_entropy_law) -> dict:
    if mixed:
        raise UsageError("--fit needs runs of one task (one training trajectory); drop --allow-mixed-tasks")
    if len(table) < 2:
        raise UsageError("--fit needs at least 2 runs (checkpoints of one training run)")
    try:
        result = fit_entropy_law(table["mean_per_sample"], table["accuracy"])
    except ValueError as exc:
        raise UsageError(f"--fit: {exc}") from exc
    result["law"] = "R = -a * exp(H) + b (Cui et al. 2025, arXiv 2505.22617); R = accuracy, H = mean_per_sample"
    if len(table) < 3:
        result["warning"] = "2 points fit exactly: R^2 = 1 carries no information"
    return result


def length_report(
    runs: Sequence[Run],
    *,
    base: Run | None = None,
    count: Callable[[str], int] | None = None,
    quantiles: int = 4,
) -> Report:
    """Length figures per run, accuracy by length quantile, outcome efficiency, AES vs base.

    `count` measures outcome efficiency's prefix and total (a tokenizer's
    token count); None uses characters as a proxy.
    """
    from metrics.length import accuracy_by_length, aes, length_summary

    everyone = [*runs, *([base] if base is not None else [])]
    mixed = _mixed(everyone)
    base_row = length_summary(base.samples["num_tokens"], base.samples["correct"],
                              base.samples["truncated"]) if base is not None else None
    rows, bins = [], []
    for run in runs:
        s = run.samples
        row = {"run": run.label, "task": task_key(run) if mixed else run.summary["task"]["name"],
               **length_summary(s["num_tokens"], s["correct"], s["truncated"]),
               **_efficiency(run, count)}
        if base_row is not None:
            score = aes(base_row["mean_tokens"], row["mean_tokens"], base_row["accuracy"], row["accuracy"])
            row.update(d_len=score["d_len"], d_acc=score["d_acc"], aes=score["aes"])
        rows.append(row)
        bins.append(accuracy_by_length(s["num_tokens"], s["correct"], quantiles).assign(run=run.label))
    by_length = pd.concat(bins, ignore_index=True)
    notes = {
        "length_unit": "generated tokens, stop token included (samples.jsonl num_tokens)",
        "outcome_efficiency_unit": "tokens (tokenizer of --model)" if count else "characters (proxy; pass --model for tokens)",
        "outcome_efficiency": "Chen et al. 2024 (arXiv 2412.21187): mean over correct responses of "
        "length up to the end of the first occurrence of the answer (grader's extracted, else reference) "
        "/ total length; outcome_efficiency_all averages over all responses with incorrect = 0",
        "aes": "O1-Pruner: a=1, b=3, g=5; L = mean_tokens, Acc = accuracy",
        "base": None if base is None else {**_identity(base, mixed), **base_row},
    }
    cols = ["run", *[c for c in by_length.columns if c != "run"]]
    tables = {"runs": pd.DataFrame(rows), "by_length": by_length[cols]}
    return Report("length", tuple(_identity(r, mixed) for r in runs), tables, notes)


def _efficiency(run: Run, count: Callable[[str], int] | None) -> dict:
    from metrics.length import outcome_efficiency

    s = run.samples
    refs = reference_answers(run) if s["correct"].any() else None
    answers = [(e, (refs or {}).get(p)) for e, p in zip(s["extracted"], s["problem_id"], strict=True)]
    texts = [t if isinstance(t, str) else "" for t in s["completion"]]
    return outcome_efficiency(texts, answers, s["correct"].to_numpy(), count or len)

