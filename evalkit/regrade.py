"""`evalkit regrade`: grade a passk run's stored completions again with the current grader.

    evalkit regrade runs/base                 # in place; old grades kept as samples.graded-by-<v>.jsonl
    evalkit regrade runs/base --out runs/base-regraded

Nothing is sampled: each stored completion goes through the current scorer in
the same killable grader workers as `evalkit passk` (same `--grade-timeout`).
New grades are appended to `.regrade.jsonl` in the destination as each batch
finishes (fsynced), so an interrupted regrade resumes where it stopped. When
every sample is graded the new file replaces `samples.jsonl` in one rename
(in place, the old file is first kept as `samples.graded-by-<version>.jsonl`),
then summary.json is recomputed with the run's own k, confidence and bootstrap
settings (it holds a `regraded` record: old and new grader, changed outcomes,
the old pass@k), and run.json records the new grader last: a kill at any
instant before that leaves a run the same command regrades to the same bytes.
The destination is locked before the run is read.

A torn last line (a crash in the middle of a write) is left out, as a resumed
passk run would; any other unreadable line is refused by number.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.jsonio import append_jsonl, file_sha256, write_atomic, write_failure, write_json_atomic
from evalkit.locks import locked
from evalkit.options import GradingOptions
from evalkit.records import upgrade
from evalkit.rundir import (
    SAMPLES,
    SETTINGS,
    SUMMARY,
    RunDir,
    check_writable,
    estimator_options,
    summarize,
)
from evalkit.tasks import graded_by, grader_version

__all__ = ["run_regrade", "Regraded"]

WORK, WORK_STATE = ".regrade.jsonl", ".regrade.json"
BATCH = 64  # samples graded between appends


@dataclass(frozen=True)
class Regraded:
    summary: dict  # the new summary.json
    previous: dict  # the old grades' summary, recomputed the same way
    changed: dict  # "old -> new" outcome -> count, changed outcomes only
    torn_line: int | None  # a torn last line left out, by number
    compared: dict | None = None  # the grader audit's entry (evalkit.grader_compare), with --compare


def run_regrade(run: Path, out: Path | None = None, grading: GradingOptions = GradingOptions(), *,
                progress: Callable | None = None, compare: str | None = None) -> Regraded:
    """Regrade `run` into `out` (default: in place); resumable. With `compare`, grade it also
    with that grader and write the disagreement table (evalkit.grader_compare)."""
    from evalkit.tasks import load_task_identity

    run, dest = Path(run), Path(out or run)
    check_writable(dest)
    if compare is not None:
        from evalkit.tasks.other_graders import other_grader

        other_grader(compare)  # an unknown name or an unimportable function: one line, before any work
    if not run.is_dir():
        raise UsageError(f"{run}: no such run folder")
    with locked(dest):  # one writer before anything is read: in place, the run's own lock
        settings = _read_settings(run)
        records, torn = _read_records(run / SAMPLES)
        task = load_task_identity(settings["task"])
        problems = task.problems[: settings.get("problems") or len(task.problems)]
        by_id = {p.id: p for p in problems}
        if unknown := sorted({r["problem_id"] for r in records} - set(by_id))[:3]:
            raise UsageError(f"{run}: samples of problems the task no longer has ({', '.join(unknown)})")
        new_settings = {**settings, "grader": grader_version(task.spec.kind)}
        with RunDir.open(dest, new_settings) if dest != run else contextlib.nullcontext(), _writing(dest):
            return _regrade(run, dest, (settings, new_settings, records, torn), (task, problems, by_id), grading,
                            progress, compare)


def _regrade(run: Path, dest: Path, stored: tuple, task_parts: tuple, grading: GradingOptions, progress,
             compare: str | None) -> Regraded:
    """The regrade proper, `dest` locked: grade (resumable), then replace the samples, compare
    (with `compare`), write the summary, and run.json last: a kill anywhere before run.json is
    written leaves a run that the rerun regrades to the same bytes."""
    settings, new_settings, records, torn = stored
    task, problems, by_id = task_parts
    work = _open_work(dest, file_sha256(run / SAMPLES), new_settings["grader"])
    regraded = _grade(work, records, by_id, task.spec, grading, progress)
    old_grader, old_summary = graded_by(settings), _old_summary(run)
    if dest == run:  # the old grades stay beside the new ones
        keep = run / f"samples.graded-by-{_slug(old_grader)}.jsonl"
        _keep(run / SAMPLES, keep)
        records = _read_records(keep)[0]  # (samples.jsonl may already hold new grades after a crash)
    options = estimator_options(settings["sampling"]["n"], old_summary.get("options"))  # the run's own
    previous = summarize(records, problems, settings, options)
    changed = Counter(f"{a['outcome']} -> {b['outcome']}" for a, b in zip(records, regraded, strict=True)
                      if a["outcome"] != b["outcome"])
    _finish_work(dest, regraded)
    summary = old_summary | summarize(regraded, problems, new_settings, options)
    summary["model"] = old_summary.get("model", {}) | summary["model"]  # keeps the weights' path
    summary["regraded"] = {"from": old_grader, "to": new_settings["grader"], "source": str(run),
                           "changed": sum(changed.values()), "transitions": dict(sorted(changed.items())),
                           "previous_pass_at_k": previous["pass_at_k"], "previous_outcomes": previous["outcomes"]}
    compared = None
    if compare is not None:
        from evalkit.grader_compare import compare_graders

        compared = compare_graders(dest, regraded, by_id, task.spec, compare, grading, progress=progress)
    write_json_atomic(dest / SUMMARY, summary)
    (dest / WORK_STATE).unlink(missing_ok=True)
    write_json_atomic(dest / SETTINGS, new_settings)  # last: until then a rerun regrades again
    return Regraded(summary, previous, dict(changed), torn, compared)


@contextlib.contextmanager
def _writing(dest: Path):
    """A write that fails (a full disk, the folder removed) is one line: what is kept, how to go on."""
    try:
        yield
    except OSError as exc:
        raise UsageError(f"{dest}: cannot be written ({write_failure(exc)}); the grades made so far are kept in "
                         f"{dest / WORK} (the old ones in {SAMPLES} until it is replaced): rerun the same command "
                         "to resume") from None


def _grade(work: Path, records: list[dict], by_id: dict, spec, grading: GradingOptions, progress) -> list[dict]:
    """Every record graded again, in the run's order: resumed from the work file, each batch
    appended to it as it is graded (see the module docstring)."""
    from evalkit.grading import Grader

    done = {(r["problem_id"], r["sample_index"]): r for r in _read_records(work)[0]}
    todo = [r for r in records if (r["problem_id"], r["sample_index"]) not in done]
    if progress:
        progress(len(done), len(records))
    with Grader(spec, workers=grading.grader_workers, deadline=grading.grade_timeout) as pool:
        for start in range(0, len(todo), BATCH):
            batch = todo[start : start + BATCH]
            grades = pool.grade([(r["completion"], by_id[r["problem_id"]]) for r in batch])
            fresh = [r | {"extracted": g.extracted, "outcome": g.outcome, "detail": g.detail}
                     for r, g in zip(batch, grades, strict=True)]
            append_jsonl(work, fresh)
            done.update(((r["problem_id"], r["sample_index"]), r) for r in fresh)
            if progress:
                progress(len(done), len(records))
    return [done[(r["problem_id"], r["sample_index"])] for r in records]


def _read_settings(run: Path) -> dict:
    if not run.is_dir():
        raise UsageError(f"{run}: no such run folder")
    try:
        settings = json.loads((run / SETTINGS).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{run}: not an evalkit passk run folder (no run.json)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{run / SETTINGS}: unreadable ({exc})") from None
    if not isinstance(settings, dict) or settings.get("kind") != "passk" or "task" not in settings:
        kind = settings.get("kind") if isinstance(settings, dict) else None
        raise UsageError(f"{run}: not an evalkit passk run (run.json kind {kind!r}); "
                         "only passk runs hold graded samples")
    if not (run / SAMPLES).is_file():
        raise UsageError(f"{run}: the run has no samples.jsonl yet")
    return upgrade(settings)


def _read_records(path: Path) -> tuple[list[dict], int | None]:
    """Sample records of a samples file; (records, number of a torn last line or None)."""
    if not path.exists():
        return [], None
    records, torn = [], None
    with open(path, "rb") as fh:
        lines = fh.read().split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
            assert isinstance(record, dict) and {"problem_id", "sample_index", "completion"} <= set(record)
        except (ValueError, AssertionError):
            if number == len(lines):  # no newline after it: cut by a crash mid-write
                torn = number
                continue
            raise UsageError(f"{path}:{number}: not a sample record (corrupt line); "
                             "repair or remove it before regrading") from None
        records.append(record)
    return records, torn


def _open_work(dest: Path, source_digest: str, grader: str) -> Path:
    """The resumable work file; restarted when the source samples or the grader changed."""
    state = {"source_sha256": source_digest, "grader": grader}
    state_path = dest / WORK_STATE
    try:
        same = json.loads(state_path.read_text()) == state
    except (OSError, ValueError):
        same = False
    if not same:
        (dest / WORK).unlink(missing_ok=True)
        write_json_atomic(state_path, state)
    return dest / WORK


def _finish_work(dest: Path, records: list[dict]) -> None:
    """The regraded samples replace samples.jsonl in one rename."""
    write_atomic(dest / SAMPLES, lambda fh: fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    (dest / WORK).unlink(missing_ok=True)


def _keep(samples: Path, keep: Path) -> None:
    """The old grades stay beside the new ones (a hard link: no copy, no window without them)."""
    if keep.exists():
        return
    try:
        os.link(samples, keep)
    except OSError:  # a file system without hard links
        import shutil

        shutil.copy2(samples, keep)


def _slug(version: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", version).strip("_")


def _old_summary(run: Path) -> dict:
    try:
        return json.loads((run / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
