"""The run directory: append-only samples plus an atomically replaced summary.

Layout (DESIGN.md's contract; docs/run-folder.md):
    run.json        the settings that determine the samples (written first)
    samples.jsonl   one line per (problem, sample index), appended when graded
    summary.json    identities, settings, per-k estimates, outcome counts

A crash at any instant loses at most the samples in flight: each line is
written with one `write` on an O_APPEND descriptor and fsynced per batch; a
torn last line is cut off when the run is reopened; the summary is written
to a temporary file and renamed over the old one. A stored run.json is read
through `evalkit.records.upgrade`, so folders of older versions resume.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.jsonio import (
    REJECTED,
    append_jsonl,
    cut_torn_line,
    read_samples,
    sample_problem,
    split_lines,
    write_atomic,
    write_json_atomic,
)
from evalkit.locks import LOCK, FolderLock
from evalkit.records import SCHEMA_VERSION, upgrade

__all__ = ["SETTINGS", "SAMPLES", "SUMMARY", "RunDir", "check_writable", "discarded_if_unused", "read_settings",
           "refuse_if_different"]

SETTINGS, SAMPLES, SUMMARY = "run.json", "samples.jsonl", "summary.json"
RUN_KINDS = ("passk", "train-", "interpolate")  # every run.json evalkit writes has a `kind` starting so


def check_writable(out: Path | None, what: str = "--out") -> None:
    """Refuse an output folder that cannot be written (under a regular file, a dangling or
    looping link, read-only, a full filesystem) before any work starts, without creating
    anything (evalkit.outdir.probe_out)."""
    from evalkit.outdir import probe_out

    if out is not None:
        probe_out(Path(out), what)


class RunDir:
    """One run's folder; `open` creates it or checks that it holds the same run."""

    def __init__(self, path: Path, settings: dict):
        self.path = Path(path)
        self.settings = {"schema_version": SCHEMA_VERSION, **settings}

    @classmethod
    def open(cls, path: str | Path, settings: dict, *, repair: bool = False) -> RunDir:
        """Check or create the run folder, and hold its lock while this object lives (one writer).
        `repair`: corrupt lines of samples.jsonl move to samples.rejected.jsonl (to be sampled again)."""
        run = cls(Path(path), settings)
        if run.path.exists() and not run.path.is_dir():
            raise UsageError(f"{run.path}: exists and is not a folder")
        run.lock = FolderLock(run.path)
        try:
            run._check_or_create()
            if repair:
                run._set_aside_corrupt_lines()
        except BaseException:
            run.lock.release(remove_if_created=True)
            raise
        return run

    def _check_or_create(self) -> None:
        stored_path = self.path / SETTINGS
        if stored_path.exists():
            stored = read_settings(stored_path)
            if not str(stored.get("kind", "")).startswith(RUN_KINDS):
                raise UsageError(f"{self.path}: holds {SETTINGS}, which is not an evalkit run's (kind "
                                 f"{stored.get('kind')!r}); nothing of a user is overwritten: use a new or empty --out")
            if self._holds_no_work():  # only its settings and empty logs: a failed start, taken over
                write_json_atomic(stored_path, self.settings)
                return
            refuse_if_different(self.path, upgrade(stored), self.settings)
            cut_torn_line(self.path / SAMPLES)
            return
        if any(p.name != LOCK for p in self.path.iterdir()):
            raise UsageError(f"{self.path}: folder is not empty and holds no evalkit run; use another --out")
        self.path.mkdir(parents=True, exist_ok=True)
        write_json_atomic(stored_path, self.settings)

    def _holds_no_work(self) -> bool:
        """Nothing but run.json, the lock and empty files: a start that failed before any work
        (a bad model, a killed start), which another command may take over."""
        return _no_work(self.path)

    def _set_aside_corrupt_lines(self) -> int:
        path = self.path / SAMPLES
        good, bad = split_lines(path, check=sample_problem)
        if bad:
            with open(self.path / REJECTED, "ab") as fh:
                fh.writelines(raw for _, raw in bad)
            write_atomic(path, lambda fh: fh.writelines(
                json.dumps(r, ensure_ascii=False) + "\n" for _, r in good))
        return len(bad)

    def samples(self) -> list[dict]:
        return read_samples(self.path / SAMPLES)

    def append(self, records: Iterable[dict]) -> None:
        append_jsonl(self.path / SAMPLES, records)

    def write_summary(self, summary: dict) -> Path:
        path = self.path / SUMMARY
        write_json_atomic(path, summary)
        return path


def discarded_if_unused(run_fn):
    """Wrap a trainer `run_fn(opts, out, ...)`: when it fails (a model that does not load, Ctrl-C
    before the first step) and `out` did not exist before, the folder it made is removed as long as
    it holds no work (its settings, its lock and empty logs only): nothing is left behind."""
    import functools
    import shutil

    @functools.wraps(run_fn)
    def wrapper(opts, out, *args, **kwargs):
        existed = os.path.lexists(out)
        try:
            return run_fn(opts, out, *args, **kwargs)
        except BaseException:
            folder = Path(out)
            if not existed and folder.is_dir() and _no_work(folder):
                shutil.rmtree(folder, ignore_errors=True)
            raise

    return wrapper


def _no_work(folder: Path) -> bool:
    for entry in folder.iterdir():
        if entry.name in (SETTINGS, LOCK):
            continue
        if not entry.is_file() or entry.stat().st_size > 0:
            return False
    return True


def read_settings(path: Path) -> dict:
    """A stored run.json (or summary.json) as a dict, or a UsageError naming the file and the fix."""
    fix = "move the folder aside and rerun, or use another --out"
    try:
        stored = json.loads(Path(path).read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start}); {fix}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno}); {fix}") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror}); {fix}") from None
    if not isinstance(stored, dict):
        raise UsageError(f"{path}: not a JSON object; {fix}")
    return stored


def refuse_if_different(path: Path, stored: dict, wanted: dict, *, ordered: bool = False) -> None:
    """A UsageError naming the first key whose value differs (`kind` first, then by name; `ordered`:
    in the order of `wanted`'s keys, then any only `stored` has)."""
    same_kind = stored.get("kind") == wanted.get("kind")
    if same_kind and "grader" in wanted and stored.get("grader") != wanted["grader"]:
        raise UsageError(
            f"{path} was graded by {stored.get('grader')}, this evalkit grades with {wanted['grader']}: "
            f"`evalkit regrade {path}` brings a passk run's grades up to date; or use another --out"
        )
    keys = dict.fromkeys([*wanted, *stored]) if ordered else sorted(set(stored) | set(wanted),
                                                                    key=lambda k: (k != "kind", k))
    for key in keys:  # what it is, first
        if stored.get(key) != wanted.get(key):
            raise UsageError(
                f"{path} holds a run with {key}={json.dumps(stored.get(key))}, "
                f"not {json.dumps(wanted.get(key))}; use another --out or the same settings"
            )
