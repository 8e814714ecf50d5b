"""The run directory: append-only samples plus an atomically replaced summary.

Layout (DESIGN.md's contract):
    run.json        the settings that determine the samples (written first)
    samples.jsonl   one line per (problem, sample index), appended when graded
    summary.json    identities, settings, per-k estimates, outcome counts

A crash at any instant loses at most the samples in flight: each line is
written with one `write` on an O_APPEND descriptor and fsynced per batch; a
torn last line is cut off when the run is reopened; the summary is written
to a temporary file and renamed over the old one.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from pathlib import Path

from evalkit.errors import UsageError

__all__ = ["RunDir", "write_json_atomic", "read_samples", "append_jsonl", "plain_json", "frame_records"]

SETTINGS, SAMPLES, SUMMARY = "run.json", "samples.jsonl", "summary.json"


def plain_json(value):
    """Strict-JSON values: numpy scalars to Python, NaN/Inf to None (no bare `NaN` in a file)."""
    if isinstance(value, dict):
        return {k: plain_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_json(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def frame_records(frame) -> list[dict]:
    """A DataFrame's rows as plain records at full float precision (pandas' `to_json` keeps 10
    digits, so a figure stored that way no longer equals the one computed)."""
    return plain_json(frame.to_dict(orient="records"))


def write_json_atomic(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=False, default=str)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def append_jsonl(path: Path, records: Iterable[dict]) -> None:
    """Append JSON lines, one `write` each on an O_APPEND descriptor, then fsync: a crash
    tears at most the last line, which `read_samples` ignores."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for record in records:
            os.write(fd, (json.dumps(record, ensure_ascii=False) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read_samples(path: Path) -> list[dict]:
    """Complete lines of a samples file; a torn last line is ignored."""
    records = []
    if not path.exists():
        return records
    with open(path, "rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                break  # torn by a crash mid-write
            records.append(json.loads(raw))
    return records


class RunDir:
    """One run's folder; `open` creates it or checks that it holds the same run."""

    def __init__(self, path: Path, settings: dict):
        self.path = Path(path)
        self.settings = settings

    @classmethod
    def open(cls, path: str | Path, settings: dict) -> RunDir:
        run = cls(Path(path), settings)
        run._check_or_create()
        return run

    def _check_or_create(self) -> None:
        if self.path.exists() and not self.path.is_dir():
            raise UsageError(f"{self.path}: exists and is not a folder")
        stored_path = self.path / SETTINGS
        if stored_path.exists():
            try:
                stored = json.loads(stored_path.read_text())
            except json.JSONDecodeError as exc:
                raise UsageError(f"{stored_path}: unreadable ({exc.msg}); use another --out") from exc
            _refuse_if_different(self.path, stored, self.settings)
            self._cut_torn_line()
            return
        if self.path.exists() and any(self.path.iterdir()):
            raise UsageError(f"{self.path}: folder is not empty and holds no evalkit run; use another --out")
        self.path.mkdir(parents=True, exist_ok=True)
        write_json_atomic(stored_path, self.settings)

    def _cut_torn_line(self) -> None:
        path = self.path / SAMPLES
        if not path.exists():
            return
        data = path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end != len(data):
            with open(path, "r+b") as fh:
                fh.truncate(end)

    def samples(self) -> list[dict]:
        return read_samples(self.path / SAMPLES)

    def append(self, records: Iterable[dict]) -> None:
        append_jsonl(self.path / SAMPLES, records)

    def write_summary(self, summary: dict) -> Path:
        path = self.path / SUMMARY
        write_json_atomic(path, summary)
        return path


def _refuse_if_different(path: Path, stored: dict, wanted: dict) -> None:
    from evalkit.tasks import graded_by

    same_kind = stored.get("kind") == wanted.get("kind")
    if same_kind and "grader" in wanted and graded_by(stored) != wanted["grader"]:
        raise UsageError(
            f"{path} was graded by {graded_by(stored)}, this evalkit grades with {wanted['grader']}: "
            f"`evalkit regrade {path}` brings a passk run's grades up to date; or use another --out"
        )
    for key in sorted(set(stored) | set(wanted), key=lambda k: (k != "kind", k)):  # what it is, first
        if stored.get(key) != wanted.get(key):
            raise UsageError(
                f"{path} holds a run with {key}={json.dumps(stored.get(key))}, "
                f"not {json.dumps(wanted.get(key))}; use another --out or the same settings"
            )
