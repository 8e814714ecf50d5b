"""Zero-advantage GRPO groups predicted from a passk run, beside a training log.

    from analyses.runs import load_run
    from analyses.group_stats import groups_report
    report = groups_report(load_run("runs/base"), group_sizes=(2, 4, 8, 16), target=0.5,
                           train_log=Path("out/grpo/metrics.jsonl"))

Prediction: metrics.groups' unbiased estimator from each problem's n and c.
Observation: the per-step fraction of groups whose rewards had zero spread,
logged as `frac_reward_zero_std` (TRL's name) by evalkit's trainer
(`metrics.jsonl`, one JSON object per line with `step`) and by TRL
(`trainer_state.json`, `log_history` entries), or read from TensorBoard event files and verl's
file logger (evalkit.trainlogs). Keys ending in `frac_reward_zero_std` (e.g.
`train/frac_reward_zero_std`) are accepted too.

Limits: the prediction is for the checkpoint the run sampled, on the run's
problems; a training log covers the policy as it moves, on the training
prompts. With partial-credit rewards the observed fraction counts equal
scores, the prediction only all-correct and all-wrong groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analyses.runs import Run
from analyses.sample_stats import Report
from evalkit.errors import UsageError

__all__ = ["groups_report", "read_train_log", "LOG_KEY"]

LOG_KEY = "frac_reward_zero_std"


def _observed(entries: list, source: Path) -> pd.DataFrame:
    rows = []
    for entry in entries:
        if not isinstance(entry, dict) or "step" not in entry:
            continue
        keys = [k for k in entry if k == LOG_KEY or k.endswith("/" + LOG_KEY)]
        if keys and entry[keys[0]] is not None:
            rows.append({"step": int(entry["step"]), "observed_frac_zero": float(entry[keys[0]])})
    if not rows:
        raise UsageError(f"{source}: no entries with 'step' and '{LOG_KEY}'; is this a GRPO training log?")
    return pd.DataFrame(rows).drop_duplicates("step", keep="last").sort_values("step").reset_index(drop=True)


def read_train_log(path: Path, salvage: bool = False) -> pd.DataFrame:
    """step, observed_frac_zero from an evalkit metrics.jsonl, a TRL trainer_state.json, TensorBoard
    event files, verl's file-logger JSONL, or a folder holding one of them (evalkit.trainlogs;
    `salvage`: a TensorBoard file's torn or corrupt records are skipped, not refused)."""
    from evalkit.trainlogs import read_training_log

    path = Path(path)
    if not path.exists():
        raise UsageError(f"--train-log {path}: no such file")
    try:
        entries = read_training_log(path, salvage)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--train-log {path}: unreadable ({exc})") from exc
    except UsageError as exc:
        raise UsageError(f"--train-log {exc}") from None
    return _observed(entries, path)


def groups_report(
    run: Run,
    *,
    group_sizes: Sequence[int] = (2, 4, 8, 16, 32),
    target: float = 0.5,
    train_log: Path | None = None,
    train_group_size: int = 8,
    salvage: bool = False,
) -> Report:
    """Zero-advantage fractions per G (overall and by difficulty), the smallest G
    reaching `target` informative groups, always-uniform problems, and the
    training log's observed fraction beside the prediction at `train_group_size`."""
    from metrics.groups import (
        smallest_group_size,
        uniform_problems,
        zero_advantage_by_bucket,
        zero_advantage_table,
    )

    if not 0 < target <= 1:
        raise UsageError(f"--target {target}: must be in (0, 1]")
    if not group_sizes or min(group_sizes) < 2:
        raise UsageError("--group-sizes: give sizes >= 2, e.g. 2,4,8,16,32")
    counts = run.per_problem()
    ns, cs = counts["n"].to_numpy(), counts["c"].to_numpy()
    tables = {
        "sizes": zero_advantage_table(ns, cs, group_sizes),
        "buckets": zero_advantage_by_bucket(ns, cs, group_sizes),
        "problems": counts.assign(pass_rate=cs / ns),
    }
    uniform = uniform_problems(counts["problem_id"], ns, cs)
    smallest = smallest_group_size(ns, cs, target)
    notes = {
        "estimator": "[C(c,G) + C(n-c,G)] / C(n,G) per problem, averaged over problems with n >= G",
        "target_informative": target,
        "smallest_group_size": smallest,
        "searched_up_to": int(ns.min()),
        "uniform_problems": uniform,
        "n_problems": len(counts),
    }
    if train_log is not None:
        predicted = zero_advantage_table(ns, cs, [train_group_size]).iloc[0]
        observed = read_train_log(train_log, salvage)
        tables["train_log"] = observed.assign(
            predicted_frac_zero=predicted["frac_zero"],
            difference=observed["observed_frac_zero"] - predicted["frac_zero"],
        )
        notes["train_log"] = {"path": str(train_log), "group_size": train_group_size,
                              "predicted_frac_zero": float(predicted["frac_zero"]),
                              "predicted_n_excluded": int(predicted["n_excluded"]),
                              "mean_observed": float(observed["observed_frac_zero"].mean())}
    return Report("groups", (run.identity() | {"label": run.label},), tables, notes)
