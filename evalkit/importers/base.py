"""What every importer shares: the options, what a reader returns, and the checks of a source file.

A reader (one module per format) turns the files another tool wrote into an `Imported`: the
problems as that tool names them (a key, the question text, the gold answer when it has one)
and one plain dict per completion. `evalkit.importers.run` matches the problems to a task,
grades or keeps the grades, and writes the run folder. A reader never writes anything; a file
that does not match its format is a UsageError naming the first missing field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from evalkit.errors import UsageError
from evalkit.options import GradingOptions, TaskOptions, option
from evalkit.tasks.base import OUTCOMES

__all__ = ["ImportOptions", "Imported", "need", "outcome_of", "message_text", "GRADES", "one_file",
           "read_json_lines", "step_file", "reported", "Reported"]

GRADES = ("auto", "keep", "regrade")


@dataclass(frozen=True)
class ImportOptions(GradingOptions, TaskOptions):
    """`evalkit import`'s options: the task the problems are matched to (TaskOptions; none: the
    gold answers in the file), the grades, the generic format's fields, the tokenizer."""

    kind: ClassVar[str] = "import"
    own_defaults = {"task": None}  # the gold answers in the file

    grades: str = option("auto", "keep (the file's own per-sample scores), regrade (evalkit's grader) or auto (keep "
                         "where the file has a score per completion, else regrade).", choices=GRADES)
    problem_field: str = option("problem_id", "jsonl/csv: field holding the problem (an id or the question text).")
    completion_field: str = option("completion", "jsonl/csv: field holding the completion text.")
    gold_field: str | None = option(None, "jsonl/csv, vllm, trl: field holding the gold answer (else --task).")
    correct_field: str | None = option(None, "jsonl/csv, trl: field holding the per-sample grade (true/false, 0/1, a "
                                       "reward >= 1 is correct, or an evalkit outcome); trl: the reward column.")
    tokenizer: str | None = option(None, "Count completion tokens with this model's tokenizer (checkpoint folder, hub "
                                   "name or smollm2-135m) where the file has no token ids or counts.")
    step: int | None = option(None, "verl dumps / TRL completions folder: the training step to import (default: "
                              "the last).", min=0)
    filter: str | None = option(None, "lm-eval: the filter whose lines are read (strict-match, flexible-extract, "  # noqa: A003
                                "none, ...); default: the first the task lists, named in the output.")
    partial: bool = option(False, "Import a file the tool had not finished (one shard, a tmp_ file, a log still "
                           "running, missing documents); the summary then says partial wherever it shows a figure.")


@dataclass(frozen=True)
class Imported:
    """What a reader found. `samples`: one dict per completion with `problem` (a key of
    `problems`), `completion`, and where the source has them `index`, `score` (its own grade),
    `extracted`, `num_tokens`, `token_ids`, `finish_reason`. `problems`: key -> {"question",
    "gold"} (either None when the source lacks it)."""

    format: str
    name: str  # the benchmark as the source names it (a task name for the problems file)
    files: tuple[Path, ...]
    problems: dict[str, dict]
    samples: list[dict]
    mapping: dict  # evalkit's field -> where it came from
    grades: str | None  # the source field holding a per-sample grade, or None
    no_grades_why: str | None = None  # said when --keep-grades is asked and `grades` is None
    model: str | None = None
    sampling: dict = field(default_factory=dict)
    notes: dict = field(default_factory=dict)
    partial: str | None = None  # why the file is not a whole run, by what the file itself declares; None: whole
    reported: Reported | None = None  # the tool's own score for the file, where it wrote one beside


@dataclass(frozen=True)
class Reported:
    """The score the tool itself reported for the imported samples: `metric` as it names it,
    `value` as a fraction, `as_written` as the file holds it (OpenCompass writes percent),
    `source` the file it came from. run.json's `import.reported` is its `asdict`."""

    metric: str
    value: float
    as_written: float
    source: str


def reported(metric: str, written, source: Path | str, *, percent: bool = False) -> Reported | None:
    """A `Reported` from a number the tool wrote (None when it is not a number)."""
    if isinstance(written, bool) or not isinstance(written, int | float) or math.isnan(written):
        return None
    return Reported(metric, written / 100 if percent else float(written), float(written), str(source))


def need(record: Any, key: str, where: str, fmt: str) -> Any:
    """`record[key]`, or a UsageError naming the place and the missing field."""
    if not isinstance(record, dict):
        raise UsageError(f"{where}: not a {fmt} record (expected a JSON object, got {type(record).__name__})")
    if key not in record:
        raise UsageError(f"{where}: no field {key!r}; not a {fmt} file?")
    return record[key]


def one_file(path: Path, pattern: str, fmt: str) -> Path:
    """`path` itself, or the single file in folder `path` matching `pattern`."""
    path = Path(path)
    if path.is_file():
        return path
    if not path.is_dir():
        raise UsageError(f"{path}: no such file or folder")
    found = sorted(p for p in path.glob(pattern) if p.is_file())  # a folder named like the file is not it
    if len(found) != 1:
        names = ", ".join(p.name for p in found[:4]) or "none"
        raise UsageError(f"{path}: expected one {pattern} file of {fmt}, found {len(found)} ({names}); give the file")
    return found[0]


def step_file(folder: Path, prefix: str, suffix: str, step: int | None, fmt: str) -> Path:
    """The file `<prefix><step><suffix>` in `folder` for `--step` (the latest step when None).

    Trainers dump one file per logged step (TRL `completions_00012.parquet`, verl `12.jsonl`)."""
    steps = {}
    for path in folder.glob(f"{prefix}*{suffix}"):
        number = path.name[len(prefix):len(path.name) - len(suffix)]
        if number.isdigit() and path.is_file():
            steps[int(number)] = path
    if not steps:
        raise UsageError(f"{folder}: no {prefix}<step>{suffix} of {fmt} in the folder")
    if step is None:
        return steps[max(steps)]
    if step not in steps:
        raise UsageError(f"--step {step}: no such {prefix}<step>{suffix} in {folder} "
                         f"(steps: {', '.join(map(str, sorted(steps)))})")
    return steps[step]


def read_json_lines(path: Path, fmt: str) -> list[tuple[int, Any]]:
    """(line number, value) of every non-blank line; a line that is not JSON, not UTF-8 or nested
    too deeply is named (evalkit.schema.json_lines)."""
    from evalkit.schema import json_lines

    out = json_lines(path, fmt)
    if not out:
        raise UsageError(f"{path}: empty; no {fmt} records")
    return out


def read_parquet(path: Path, fmt: str):
    import pandas as pd

    try:
        return pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise UsageError(f"{path}: not a readable Parquet file ({type(exc).__name__}); not a {fmt} file?") from None


def outcome_of(value: Any) -> tuple[str, str | None]:
    """(outcome, detail) of a source's own per-sample grade: an evalkit outcome as it is; true /
    false; a number >= 1 is correct (verl's and TRL's rule-based rewards give 1.0 for a right
    answer, DAPO's -1 / 1), below 1 incorrect; None or NaN is an error (no grade)."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in OUTCOMES:
            return text, "kept"
        if text in ("true", "false", "yes", "no"):
            return ("correct" if text in ("true", "yes") else "incorrect"), f"kept: {value}"
        try:
            value = float(text)
        except ValueError:
            return "error", f"unreadable grade {value!r}"
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "error", "the source has no grade for this sample"
    if isinstance(value, bool):
        return ("correct" if value else "incorrect"), f"kept: {value}"
    if isinstance(value, int | float):
        return ("correct" if value >= 1 else "incorrect"), f"kept: score {value:g}"
    return "error", f"unreadable grade {value!r}"


def message_text(content: Any) -> str:
    """A chat message's text: a string, or the text parts of a list of content parts joined by newlines
    (evalscope `ChatMessageBase.text`; OpenCompass and verl write `{"role", "content"|"prompt"}` lists)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content
                         if isinstance(part, dict) and part.get("type", "text") == "text")
    return "" if content is None else str(content)


def last_user_text(messages: Any) -> str | None:
    """The text of the last user / HUMAN turn of a chat message list (None when there is none)."""
    if isinstance(messages, str):
        return messages
    if not hasattr(messages, "__iter__"):
        return None
    text = None
    for message in messages:
        if isinstance(message, dict) and str(message.get("role", "")).lower() in ("user", "human"):
            text = message_text(message.get("content", message.get("prompt")))
    return text
