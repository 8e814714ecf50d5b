"""`jsonl`: any JSONL or CSV file with one completion per line, fields named by options.

    evalkit import jsonl samples.jsonl --out runs/mine --gold-field answer --correct-field correct

`--problem-field` (default `problem_id`) names the problem, by an id or its question text;
`--completion-field` (default `completion`) the completion; `--gold-field` the gold answer
(else `--task`); `--correct-field` a per-sample grade kept with `--keep-grades` (true/false,
0/1, a reward >= 1, or an evalkit outcome). Fields named as in evalkit's own samples.jsonl are
carried over when present: `sample_index`, `extracted`, `num_tokens`, `finish_reason`,
`mean_entropy`, `seed`; so an evalkit run's samples.jsonl imports back as the same run
(`--task` its task, `--correct-field outcome`). CSV values are text: numbers are read as such.
"""

from __future__ import annotations

import csv
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.importers.base import Imported, ImportOptions, need, read_json_lines

__all__ = ["read"]

CARRIED = ("sample_index", "extracted", "num_tokens", "finish_reason", "mean_entropy", "seed")


def _csv_rows(path: Path) -> list[tuple[int, dict]]:
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            rows = [(i + 2, row) for i, row in enumerate(csv.DictReader(fh))]  # line 1 is the header
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except csv.Error as exc:
        raise UsageError(f"{path}: not a readable CSV file ({exc})") from None
    if not rows:
        raise UsageError(f"{path}: no rows under the header")
    return rows


def _number(value, where: str, name: str):
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            return float(value) if "." in value or "e" in value.lower() else int(value)
        except ValueError:
            raise UsageError(f"{where}: field {name!r} is not a number ({value[:20]!r})") from None
    return value


def read(path: Path, opts: ImportOptions) -> Imported:
    if path.is_dir():
        raise UsageError(f"{path}: give the JSONL or CSV file itself")
    is_csv = path.suffix.lower() == ".csv"
    rows = _csv_rows(path) if is_csv else read_json_lines(path, "JSONL")
    fields = {"problem": opts.problem_field, "completion": opts.completion_field}
    problems: dict[str, dict] = {}
    samples = []
    for number, row in rows:
        where = f"{path}:{number}"
        key = str(need(row, opts.problem_field, where, "samples (--problem-field)"))
        completion = need(row, opts.completion_field, where, "samples (--completion-field)")
        if not isinstance(completion, str):
            raise UsageError(f"{where}: field {opts.completion_field!r} is not text")
        gold = need(row, opts.gold_field, where, "samples (--gold-field)") if opts.gold_field else None
        info = problems.setdefault(key, {"question": key, "gold": None if gold is None else str(gold)})
        sample = {"problem": key, "completion": completion}
        if opts.correct_field:
            sample["score"] = need(row, opts.correct_field, where, "samples (--correct-field)")
        for name in CARRIED:
            value = row.get(name)
            if value is not None and value != "":
                sample[name] = _number(value, where, name) if name in ("sample_index", "num_tokens", "seed",
                                                                       "mean_entropy") else value
        if "sample_index" in sample:
            sample["index"] = int(sample.pop("sample_index"))
        samples.append(sample)
        if gold is not None and info["gold"] is None:
            info["gold"] = str(gold)
    mapping = {**fields, "gold": opts.gold_field or "--task", "grade": opts.correct_field,
               "carried": [n for n in CARRIED if any((n if n != "sample_index" else "index") in s for s in samples)]}
    if any("num_tokens" in s for s in samples):
        mapping["num_tokens"] = "num_tokens field"
    return Imported("jsonl", path.stem, (path,), problems, samples, mapping, opts.correct_field,
                    no_grades_why=f"{path}: no --correct-field given; name the field holding each sample's grade, "
                                  "or use --regrade")
