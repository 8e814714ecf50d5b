"""Load passk run directories into DataFrames, with their identities.

    from analyses.runs import load_run
    run = load_run("runs/base")      # Run(path, summary, samples)
    run.samples.groupby("problem_id").correct.sum()

`summary` is summary.json as written by `evalkit passk`; a run that crashed
before its first summary falls back to run.json (the settings), marked
`complete: False`. `samples` has one row per stored sample with the columns
of samples.jsonl plus `correct` (outcome == "correct") and `truncated`
(finish_reason == "length"). Identity (model, task, sampling) always comes
from inside the run, never from the folder's name.

Limits: loads everything into memory (a run of 100k samples is fine).
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from evalkit.errors import StaleGrades, UsageError
from evalkit.records import upgrade
from evalkit.tasks import stale_grades

__all__ = ["Run", "load_run", "load_runs", "need_token_counts", "task_key", "step_hint", "reference_answers", "load_problems",
           "COLUMNS"]

COLUMNS = ("problem_id", "sample_index", "completion", "extracted", "outcome", "detail",
           "num_tokens", "finish_reason", "mean_entropy", "seed")


@dataclass(frozen=True)
class Run:
    path: Path
    summary: dict
    samples: pd.DataFrame

    @property
    def label(self) -> str:
        """Short display name: the folder name (display only, never parsed); a partial import
        (`evalkit import --partial`) says so wherever its figures are shown."""
        name = self.path.name or str(self.path)
        return f"{name} (partial)" if self.summary.get("partial") else name

    def identity(self) -> dict:
        """What the run is, for output records: path, model, task, sampling."""
        return {
            "path": str(self.path),
            "model": self.summary.get("model"),
            "task": self.summary.get("task"),
            "sampling": self.summary.get("sampling"),
            "complete": self.summary.get("complete"),
            "samples": len(self.samples),
        }

    def per_problem(self) -> pd.DataFrame:
        """problem_id, n (samples), c (correct), in first-appearance order."""
        grouped = self.samples.groupby("problem_id", sort=False)["correct"]
        return pd.DataFrame({"n": grouped.size(), "c": grouped.sum()}).reset_index()

    def has_entropy(self) -> bool:
        return bool(self.samples["mean_entropy"].notna().any())


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: unreadable ({exc}); rerun evalkit passk into that folder") from exc
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not a JSON object; is this an evalkit run folder?")
    return data


def _read_samples(path: Path) -> pd.DataFrame:
    from evalkit.jsonio import read_samples

    try:
        records = read_samples(path)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: unreadable samples file ({exc})") from exc
    frame = pd.DataFrame.from_records(records)
    for column in COLUMNS:
        if column not in frame:
            frame[column] = None
    frame["mean_entropy"] = pd.to_numeric(frame["mean_entropy"], errors="coerce")
    frame["num_tokens"] = pd.to_numeric(frame["num_tokens"], errors="coerce")
    frame["correct"] = frame["outcome"] == "correct"
    frame["truncated"] = frame["finish_reason"] == "length"
    return frame


def load_run(path: str | Path) -> Run:
    """Read one run folder; a clear UsageError for anything missing or empty."""
    path = Path(path)
    if not path.is_dir():
        raise UsageError(f"{path}: no such run folder (make one with `evalkit passk ... --out {path}`)")
    if (path / "summary.json").is_file():
        summary = upgrade(_read_json(path / "summary.json"))
    elif (path / "run.json").is_file():
        summary = {**upgrade(_read_json(path / "run.json")), "complete": False}
    else:
        raise UsageError(f"{path}: not an evalkit run folder (no summary.json or run.json)")
    samples = _read_samples(path / "samples.jsonl")
    if samples.empty:
        raise UsageError(f"{path}: the run has no samples; rerun `evalkit passk` into it to resume")
    if samples["num_tokens"].isna().any() and not summary.get("import"):  # an import without a tokenizer may
        raise UsageError(f"{path}/samples.jsonl: samples without num_tokens; not an evalkit passk run?")
    if stale := stale_grades(summary):
        warnings.warn(f"{path}: {stale}", StaleGrades, stacklevel=2)
    return Run(path, summary, samples)


def need_token_counts(paths: Sequence[str | Path], command: str) -> None:
    """`command` counts tokens: refuse, in one line and before anything else is said, run folders
    imported without them (num_tokens null: `evalkit import` without --tokenizer)."""
    from evalkit.jsonio import read_samples

    for path in paths:
        samples = Path(path) / "samples.jsonl"
        if samples.is_file() and any(r.get("num_tokens") is None for r in read_samples(samples)):
            raise UsageError(f"{path}: imported without token counts (num_tokens null); evalkit {command} needs "
                             "them: import again with --tokenizer MODEL")


def task_key(run: Run) -> str:
    """A short stable key of the task identity (name + hash of the full identity)."""
    task = run.summary.get("task") or {}
    blob = json.dumps(task, sort_keys=True, default=str).encode()
    return f"{task.get('name', '?')}#{hashlib.sha256(blob).hexdigest()[:8]}"


def load_runs(paths: Sequence[str | Path], *, allow_mixed_tasks: bool = False) -> list[Run]:
    """Load several runs; refuse runs of different tasks unless allowed."""
    if not paths:
        raise UsageError("give at least one run folder")
    runs = [load_run(p) for p in paths]
    keys = {task_key(r) for r in runs}
    if len(keys) > 1 and not allow_mixed_tasks:
        listing = ", ".join(f"{r.label}: {task_key(r)}" for r in runs)
        raise UsageError(
            f"runs are of different tasks ({listing}); compare runs of one task, "
            "or pass --allow-mixed-tasks to put them in one table labelled by task"
        )
    return runs


_STEP = re.compile(r"(?:step|checkpoint|global_step|iter)[-_]?0*(\d+)", re.IGNORECASE)


def step_hint(run: Run) -> int | None:
    """A training step read from the model path (e.g. `.../step-000100`), or None.

    Only a display hint: an explicit step list, or the command line's order,
    decides the order of a trajectory.
    """
    model = run.summary.get("model") or {}
    for text in (model.get("path"), model.get("name")):
        matches = _STEP.findall(str(text or ""))
        if matches:
            return int(matches[-1])
    return None



def load_problems(run: Run) -> dict:
    """problem_id -> Problem, by rebuilding the run's task from its identity.

    UsageError when it cannot be rebuilt (a task file moved, an unknown name).
    """
    from evalkit.tasks import load_task_identity

    try:
        loaded = load_task_identity(run.summary.get("task") or {})
    except (KeyError, OSError, UsageError) as exc:
        raise UsageError(f"{run.path}: cannot rebuild its task ({exc})") from exc
    return {p.id: p for p in loaded.problems}


def reference_answers(run: Run) -> dict[str, str] | None:
    """problem_id -> reference answer, or None when the task cannot be rebuilt
    (callers then fall back to the grader's extracted answers)."""
    try:
        return {pid: p.answer for pid, p in load_problems(run).items()}
    except UsageError:
        return None
