"""The run folder of `evalkit import` (evalkit.importers.run): checked before the work, written
after it, in place (no final rename that could fail once the grading is done).

    check_out(out, runs, names)                 # before the work: empty, or this import's own
    write_run(out, imported, task, records, provenance, own)   # run.json, samples, summary.json

A folder holds what an import writes (`IMPORT_FILES`), from the same source files, or it is
refused before anything is graded: the rerun of an interrupted import finishes it (the samples
it lacks are appended), another import's folder is never mixed into. A folder that cannot be
written after the work (a full disk, changed under the lock by a writer that takes none) gives
one line naming the folder beside it where the finished import is kept (evalkit.outdir.rescue).
"""

from __future__ import annotations

import glob
import os
import shutil
from collections import Counter
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.importers.base import Imported
from evalkit.jsonio import file_sha256

__all__ = ["KeptBeside", "IMPORT_FILES", "check_out", "sweep_old_temporary_folder", "write_task_file", "task_file", "write_run"]

class KeptBeside(UsageError):
    """A finished import its folder could not take, written beside it (the message says where)."""


IMPORT_FILES = ("run.json", "samples.jsonl", "summary.json", "task")  # what an import writes in its folder


def _held(folder: Path) -> list[str]:
    """The entries of a folder, its lock and temporary files (evalkit.jsonio.temp_path) left out."""
    from evalkit.jsonio import temp_writer
    from evalkit.locks import LOCK

    return sorted(n for n in os.listdir(folder) if n != LOCK and temp_writer(n) is None)


def check_out(out: Path, runs: list[Imported], names: list[str]) -> None:
    """`out` is empty, or holds what this import writes (its run folder, or one per dataset when the
    file holds several) from the same source files, which the rerun of an interrupted import goes
    on with; else one line, before anything is graded or written. (Another import into the same
    folder at the same time is refused by the lock.)"""
    entries = _held(out)
    if not entries:
        return
    if len(runs) == 1:
        found = {out: runs[0]}
    else:
        by_name = dict(zip(names, runs, strict=True))
        found = {out / name: by_name.get(name) for name in entries}
    for folder, imported in found.items():
        if why := _not_an_import(folder, imported):
            raise UsageError(f"--out {out}: exists and is not empty ({why}); evalkit import writes a new run "
                             "folder, or finishes its own interrupted one: use a new or empty --out")


def _not_an_import(folder: Path, imported: Imported | None) -> str | None:
    """Why `folder` is not (the start of) the run folder of an evalkit import of `imported`'s
    files, or None; `imported` None: of any files."""
    from evalkit.rundir import read_settings

    if not folder.is_dir() or folder.is_symlink():
        return f"{folder.name} is not a folder"
    entries = _held(folder)
    if other := next((n for n in entries if n not in IMPORT_FILES), None):
        return f"it holds {folder / other}, which an import does not write"
    if "run.json" not in entries:
        return next((f"{folder / n} without run.json" for n in entries if n != "task"), None)
    settings = read_settings(folder / "run.json")
    source = settings.get("import")
    if settings.get("kind") != "passk" or not isinstance(source, dict):
        return f"{folder / 'run.json'} is not an import's"
    if imported is not None:
        theirs = [s.get("sha256") for s in source.get("sources", []) if isinstance(s, dict)]
        if theirs != [file_sha256(f) for f in imported.files]:
            named = next((s.get("path") for s in source.get("sources", []) if isinstance(s, dict)), "?")
            return f"it holds an import of other files ({named})"
    return None


def sweep_old_temporary_folder(out: Path) -> None:
    """The folder that imports before issue 43 wrote beside `out` and renamed into place
    (`.<out>.import-PID`), left by a kill: removed when its writer no longer runs and it holds
    only what an import writes."""
    from evalkit.jsonio import writer_running

    for old in out.parent.glob(f".{glob.escape(out.name)}.import-*"):
        pid = old.name.rsplit("-", 1)[1]
        if pid.isdigit() and not writer_running(int(pid)) and old.is_dir() and not old.is_symlink() \
                and _not_an_import(old, None) is None:
            shutil.rmtree(old, ignore_errors=True)


def write_task_file(path: Path, text: str, wrote: list[Path]) -> None:
    """The import's task file, written atomically; one already there is kept when it holds exactly
    these bytes (an interrupted run of the same import wrote it), else refused."""
    from evalkit.jsonio import write_atomic, write_failure

    if path.exists():
        if path.is_file() and not path.is_symlink() and path.read_bytes() == text.encode("utf-8"):
            return
        raise UsageError(f"--out {path.parent.parent}: holds {path}, which is not this import's task file; "
                         "use a new or empty --out")
    try:
        if not path.parent.is_dir():
            path.parent.mkdir()
            wrote.append(path.parent)
        write_atomic(path, lambda fh: fh.write(text))
        wrote.append(path)
    except OSError as exc:
        raise UsageError(f"--out {path.parent.parent}: cannot be written ({write_failure(exc)}); nothing was "
                         "imported yet") from None


def task_file(task, out: Path) -> dict[str, bytes]:
    """The import's own task file as it lies in `out`, by name, or nothing (a --task import)."""
    source = Path(task.spec.source or "")
    if source.parent != out.resolve() / "task":
        return {}
    try:
        return {f"task/{source.name}": source.read_bytes()}
    except OSError:
        return {}


def write_run(out: Path, imported: Imported, task, records: list, provenance: dict, own: dict) -> dict:
    """run.json, then the samples it misses (all, unless an interrupted run of this import wrote
    some), then summary.json, through the run folder's one writer; a folder that cannot be written
    gives one line, the finished import (with `own`, its task file) kept beside it
    (evalkit.outdir.rescue)."""
    from evalkit.jsonio import json_text, jsonl_line
    from evalkit.outdir import rescue
    from evalkit.rundir import (
        SAMPLES,
        SETTINGS,
        SUMMARY,
        RunDir,
        WriteFailed,
        estimator_options,
        summarize,
    )

    per_problem = Counter(r["problem_id"] for r in records)
    n = max(per_problem.values())
    used = set(per_problem)
    first = {p.id for p in task.problems[: len(used)]}
    count = len(used) if first == used else len(task.problems)  # passk's --limit: the task's first problems
    provenance["samples_per_problem"] = {str(k): v for k, v in sorted(Counter(per_problem.values()).items())}
    grader = provenance.pop("grader")
    settings = {"kind": "passk", "model": {"name": imported.model or f"{imported.format} import", "sha256": None,
                                           "dtype": None},
                "task": task.spec.identity(), "grader": grader, "problems": count,
                "sampling": {"n": n, **imported.sampling},  # settings the source does not record are absent
                "import": provenance}
    run = RunDir(out, settings)
    summary = summarize(records, task.problems[:count], run.settings, estimator_options(n))
    if imported.partial:  # every figure of a partial import carries the word (console, report)
        summary["partial"] = imported.partial
    try:
        with RunDir.open(out, settings, inputs=("task",)) as run:  # one writer, as for every run folder
            done = {(r["problem_id"], r["sample_index"]) for r in run.samples()}
            run.append(r for r in records if (r["problem_id"], r["sample_index"]) not in done)
            run.write_summary(summary)
    except UsageError as exc:  # a full disk (WriteFailed), or the folder changed under the lock by a
        why = exc.why if isinstance(exc, WriteFailed) else str(exc)  # writer that takes none
        files = {SETTINGS: json_text(run.settings), SAMPLES: b"".join(jsonl_line(r) for r in records),
                 SUMMARY: json_text(summary), **own}
        raise KeptBeside(f"--out {out}: cannot be written ({why}); the finished import is kept in "
                         f"{rescue(out, files)}") from None
    return summary
