"""What a forgetting run has finished: `journal.jsonl` in its --out folder, so a killed run resumes.

    journal = Journal.open(out, identity)      # checks the identity; None: nothing kept
    for lineno, record in journal.records: ...  # the finished units, in the order they finished
    journal.append({"benchmark": "arc", "side": "base", "unit": 0, ...})
    journal.close()

Line 1 is the header, `{"journal": "forgetting", "format": 1, "identity": {...}}`: everything
that decides what the units hold (weights, items, settings, versions). Every further line is one
finished unit, written with one `write` on an O_APPEND descriptor the moment it finishes (a
killed process, SIGKILL included, loses no finished unit) and fsynced at least every
`FSYNC_SECONDS` and on close (a crash of the machine loses at most those last seconds). The
file appears with the first finished unit, so a run refused or failed before it leaves none.

On reopen a torn last line (a kill mid-write) is cut off and its unit computed again; a corrupt
complete line is a UsageError naming the file, the line and the way out; a header with another
identity is refused, naming the first setting that differs (`evalkit.rundir.refuse_if_different`).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.jsonio import cut_torn_line, jsonl_line, plain_json, split_lines
from evalkit.records import upgrade
from evalkit.rundir import refuse_if_different

__all__ = ["JOURNAL", "FORMAT", "FSYNC_SECONDS", "Journal", "flatten", "base_identity", "take_base_units"]

JOURNAL = "journal.jsonl"
FORMAT = 1  # the records' layout; another one is refused
FSYNC_SECONDS = 1.0
MODEL_KEYS = ("model", "kl")  # a run identity's keys that the base's units do not depend on


def flatten(identity: dict, prefix: str = "") -> dict:
    """{"a.b": leaf} for a nested identity, so a refusal names the very setting that differs."""
    flat: dict = {}
    for key, value in identity.items():
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


class Journal:
    """The finished units of one run (`records`), and where the next ones go. Without a folder
    it keeps nothing (a run that writes no files)."""

    def __init__(self, folder: Path | None, identity: dict):
        self.folder = None if folder is None else Path(folder)
        self.path = None if folder is None else self.folder / JOURNAL
        self.identity = json.loads(json.dumps(plain_json(identity)))  # as read back from the file
        self.records: list[tuple[int, dict]] = []
        self._fd: int | None = None
        self._synced = 0.0

    @classmethod
    def open(cls, folder: Path | None, identity: dict) -> Journal:
        """The folder's journal, checked against `identity`; the caller holds the folder's lock."""
        journal = cls(folder, identity)
        if journal.path is not None and journal.path.exists():
            journal._read()
        return journal

    def _read(self) -> None:
        good, bad = split_lines(self.path)
        if bad:
            raise self.corrupt(bad[0][0], "not a JSON record")
        if not good:
            cut_torn_line(self.path)  # at most a header torn by a kill: written again
            return
        header = good[0][1]
        if good[0][0] != 1 or header.get("journal") != "forgetting" or not isinstance(header.get("identity"), dict):
            raise self.corrupt(1, "not a forgetting journal header")
        if header.get("format") != FORMAT:
            raise UsageError(f"{self.path}: written by another evalkit (journal format {header.get('format')}, "
                             f"this one reads {FORMAT}); use another --out")
        stored = upgrade(header["identity"])  # a journal of an older evalkit reads as written now
        refuse_if_different(self.folder, flatten(stored), flatten(self.identity), ordered=True)
        cut_torn_line(self.path)
        self.records = good[1:]

    def corrupt(self, lineno: int, why: str) -> UsageError:
        """The one-line error for a bad line, with the way out."""
        if lineno == 1:
            fix = "delete the file to start the run over, or use another --out"
        else:
            fix = f"delete line {lineno} (its unit is computed again) and rerun, or use another --out"
        return UsageError(f"{self.path}:{lineno}: corrupt line ({why}); {fix}")

    def append(self, record: dict) -> None:
        """Write one finished unit now (the header first, into a new file); fsync now and then."""
        if self.path is None:
            return
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self._synced = time.monotonic()
            if os.fstat(self._fd).st_size == 0:
                os.write(self._fd, jsonl_line({"journal": "forgetting", "format": FORMAT, "identity": self.identity}))
        os.write(self._fd, jsonl_line(record))
        if time.monotonic() - self._synced >= FSYNC_SECONDS:
            os.fsync(self._fd)
            self._synced = time.monotonic()

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None


def base_identity(identity: dict) -> dict:
    """The identity of a run's base units: the run's, less MODEL_KEYS."""
    return {**{k: v for k, v in identity.items() if k not in MODEL_KEYS}, "side": "base"}


def take_base_units(journal, folder: Path, identity: dict) -> str:
    """Append to `journal` (a run's, not yet read by its _Run) the base units that base_units.score_base wrote
    in `folder` that it lacks, when `folder`'s identity is this run's base identity; returns what
    was done, or why the base is scored here instead."""
    path = Path(folder) / JOURNAL
    good, bad = split_lines(path) if path.is_file() else ([], [])
    if bad or not good or good[0][1].get("journal") != "forgetting":
        return f"{path}: no readable base units; the base is scored here"
    want = flatten(json.loads(json.dumps(plain_json(base_identity(identity)))))
    have = flatten(upgrade(good[0][1].get("identity") or {}))
    differ = sorted(k for k in want.keys() | have.keys() if want.get(k) != have.get(k))
    if differ:
        return (f"{path}: its base units were scored with {differ[0]} {have.get(differ[0])!r}, this run has "
                f"{want.get(differ[0])!r}; the base is scored here")
    held = {(r.get("benchmark"), r.get("unit")) for _, r in journal.records if r.get("side") == "base"}
    units = [r for _, r in good[1:] if r.get("side") == "base" and (r.get("benchmark"), r.get("unit")) not in held]
    for record in units:
        journal.append(record)
        journal.records.append((len(journal.records) + 2, record))  # its line in the run's journal
    return f"{len(units)} base units taken from {path} ({len(held)} already in the run's journal)"
