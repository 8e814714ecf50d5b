"""Find what the report's inputs hold: passk runs, diffs, sample reports, forgetting, trainers.

    from analyses.report.inputs import discover
    found = discover(["runs/base", "runs/grpo", "reports/diff", "runs/train"])
    found.runs, found.diffs, found.problems

Each given path is a folder (walked up to MAX_DEPTH levels down) or one of
the JSON files evalkit writes. What a folder holds is decided by the content
of the contract files (`summary.json`/`run.json` "kind", `diff.json` and
`forgetting.json` "kind", `entropy.json`/`length.json`/`groups.json`
"command"), never by the folder's name. A folder with none of them but another trainer's
training log (TensorBoard event files, verl's file logger JSONL, TRL's trainer_state.json;
evalkit.trainlogs) is read as a trainer's curves. Anything missing, unreadable or
unrecognised becomes a problem entry (path, why) and the rest goes on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from analyses.runs import Run, load_run
from evalkit.errors import UsageError
from evalkit.records import upgrade

__all__ = ["Found", "Output", "Trainer", "discover", "CONTRACT_FILES", "MAX_DEPTH"]

CONTRACT_FILES = ("summary.json", "run.json", "diff.json", "forgetting.json",
                  "entropy.json", "length.json", "groups.json", "traces.json", "tokens.json", "grader-compare.json",
                  "interpolate.json")
MAX_DEPTH = 3
SAMPLE_COMMANDS = ("entropy", "length", "groups")
REQUIRED = {  # top-level keys each output needs; "tables.x" is a table inside "tables"
    "diff": ("inputs", "updates", "options"), "forgetting": ("models", "benchmarks"),
    "entropy": ("tables.runs",), "length": ("tables.runs",), "groups": ("tables.sizes",),
    "traces": ("policy", "probability"), "tokens": ("models", "lorenz"), "grader-compare": ("comparisons",),
    "interpolate": ("models", "points", "barrier"),
}


@dataclass(frozen=True)
class Output:
    """One JSON output of `evalkit diff/forgetting/entropy/length/groups`."""
    path: Path  # the JSON file
    data: dict

    @property
    def label(self) -> str:
        return self.path.parent.name or str(self.path.parent)


@dataclass(frozen=True)
class Trainer:
    """One `evalkit train` stage folder: settings (run.json/summary.json) and metrics.jsonl."""
    path: Path
    settings: dict
    records: tuple[dict, ...]

    @property
    def label(self) -> str:
        return self.path.name or str(self.path)


@dataclass
class Found:
    runs: list[Run] = field(default_factory=list)
    trainers: list[Trainer] = field(default_factory=list)
    outputs: dict[str, list[Output]] = field(default_factory=dict)  # diff, forgetting, entropy, ...
    problems: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    listing: list[dict] = field(default_factory=list)  # one row per input found
    seen: set = field(default_factory=set)
    salvage: bool = False  # TensorBoard logs: skip torn or corrupt records (evalkit.trainlogs)

    def of(self, kind: str) -> list[Output]:
        return self.outputs.get(kind, [])


def _read(path: Path) -> dict:
    import evalkit.train  # noqa: F401 (the trainers' options upgrade their records)

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"unreadable JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise UsageError("not a JSON object")
    return upgrade(data)


def _jsonl(path: Path) -> tuple[dict, ...]:
    """Complete JSON lines; a torn last line (crash mid-write) is ignored."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")[: -1 if not text.endswith("\n") else None]
    return tuple(r for r in (json.loads(line) for line in lines if line.strip()) if isinstance(r, dict))


def _kind(data: dict) -> str | None:
    kind = data.get("kind")
    if isinstance(kind, str) and (kind in ("passk", "diff", "forgetting", "traces", "tokens", "grader-compare",
                                                              "interpolate")
                                  or kind.startswith("train-")):
        return kind
    command = data.get("command")
    return command if command in SAMPLE_COMMANDS else None


def _add(found: Found, folder: Path, file: Path, kind: str) -> None:
    key = (folder.resolve(), "run" if kind == "passk" or kind.startswith("train-") else kind)
    if key in found.seen:
        return
    found.seen.add(key)
    if kind == "passk":
        run = load_run(folder)
        found.runs.append(run)
        found.listing.append({"path": str(folder), "holds": "passk run",
                              "what": (run.summary.get("model") or {}).get("name")})
    elif kind == "train-es-grpo":  # a container: its es/ and grpo/ stages are walked
        found.listing.append({"path": str(folder), "holds": "train es-grpo (stages below)", "what": ""})
    elif kind.startswith("train-"):
        _add_trainer(found, folder, kind)
    else:
        data = _read(file)
        _check(data, kind)
        found.outputs.setdefault(kind, []).append(Output(file, data))
        found.listing.append({"path": str(file), "holds": f"{kind} output", "what": ""})


def _check(data: dict, kind: str) -> None:
    for key in REQUIRED[kind]:
        outer, _, inner = key.partition(".")
        value = data.get(outer)
        if not value or (inner and not (isinstance(value, dict) and value.get(inner))):
            raise UsageError(f"{kind} output without '{key}' (truncated or from another version?)")


def _add_trainer(found: Found, folder: Path, kind: str) -> None:
    log = folder / "metrics.jsonl"
    if not log.is_file():
        raise UsageError(f"{kind} folder without metrics.jsonl (training not started?)")
    try:
        records = _jsonl(log)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{log}: unreadable training log ({exc})") from exc
    name = folder / "summary.json" if (folder / "summary.json").is_file() else folder / "run.json"
    settings = _read(name)
    found.trainers.append(Trainer(folder, settings, records))
    found.listing.append({"path": str(folder), "holds": f"{kind} log ({len(records)} steps)",
                          "what": (settings.get("model") or {}).get("name")})


def _folder(found: Found, folder: Path) -> bool:
    """Classify one folder by its contract files; True when something was recognised."""
    hit = False
    for name in CONTRACT_FILES:
        file = folder / name
        if not file.is_file():
            continue
        try:
            kind = _kind(_read(file))
            if kind is not None:
                _add(found, folder, file, kind)
                hit = True
        except UsageError as exc:
            found.problems.append((str(file), str(exc)))
            hit = True
    return hit


def _foreign_log(found: Found, folder: Path) -> bool:
    """A training log of another trainer (TensorBoard event files, verl's file logger, TRL's
    trainer_state.json; evalkit.trainlogs) in a folder holding no evalkit output: a Trainer."""
    from evalkit.trainlogs import find_training_log, read_training_log

    if re.fullmatch(r"step-\d{6}", folder.name) and (folder.parent / "run.json").is_file():
        return False  # an evalkit trainer's checkpoint: its trainer_state.json is evalkit's own
    log = find_training_log(folder)
    if log is None or log.name == "metrics.jsonl" or (folder.resolve(), "run") in found.seen:
        return False
    found.seen.add((folder.resolve(), "run"))
    try:
        records = tuple(read_training_log(log, found.salvage))
    except (UsageError, OSError, ValueError) as exc:
        found.problems.append((str(log), str(exc)))
        return True
    found.trainers.append(Trainer(folder, {"kind": "train-log", "log": str(log)}, records))
    found.listing.append({"path": str(log), "holds": f"training log ({len(records)} steps)", "what": ""})
    return True


def _walk(found: Found, folder: Path, depth: int) -> bool:
    hit = _folder(found, folder) or _foreign_log(found, folder)
    if depth >= MAX_DEPTH:
        return hit
    try:
        children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError as exc:
        found.problems.append((str(folder), f"cannot list ({exc.strerror or exc})"))
        return True
    for child in children:
        hit = _walk(found, child, depth + 1) or hit
    return hit


def _file(found: Found, path: Path) -> None:
    try:
        kind = _kind(_read(path))
        if kind is None:
            raise UsageError("not an evalkit output (no known 'kind' or 'command' field)")
        _add(found, path.parent, path, kind)
    except UsageError as exc:
        found.problems.append((str(path), str(exc)))


def discover(paths: Sequence[str | Path], salvage: bool = False) -> Found:
    """Everything evalkit wrote under `paths`, plus a problem entry for each bad input."""
    found = Found(salvage=salvage)
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            found.problems.append((str(path), "no such file or folder"))
        elif path.is_file():
            _file(found, path)
        elif not _walk(found, path, 0):
            found.problems.append((str(path), "holds no evalkit output (no passk run, diff.json, "
                                   "forgetting.json, entropy/length/groups.json or trainer log)"))
    return found
