"""`jsonl`: any JSONL or CSV file with one completion per line, fields named by options.

    evalkit import jsonl samples.jsonl --out runs/mine --gold-field answer --correct-field correct

`--problem-field` (default `problem_id`) names the problem, by an id or its question text;
`--completion-field` (default `completion`) the completion; `--gold-field` the gold answer
(else `--task`); `--correct-field` a per-sample grade kept with `--keep-grades` (true/false,
0/1, a reward >= 1, or an evalkit outcome). Fields named as in evalkit's own samples.jsonl are
carried over when present: `sample_index`, `extracted`, `num_tokens`, `finish_reason`,
`mean_entropy`, `seed`; so an evalkit run's samples.jsonl imports back as the same run
(`--task` its task, `--correct-field outcome`). CSV values are text: numbers are read as such.
Every field is typed (`ROW`): the problem a string or an integer, the completion a string, the
gold a string or number, the grade a bool, number or string, indices and counts non-negative
integers; one problem given two different golds is refused naming both. A CSV cell may be as
long as the file (Python's csv module stops at 128 KiB by default).
"""

from __future__ import annotations

import csv
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.importers.base import Imported, ImportOptions, read_json_lines
from evalkit.importers.fields import COUNT, GOLD, INDEX, KEY, SCORE, TEXT, add_problem
from evalkit.schema import Choice, Float, Int, Obj, Opt, check

__all__ = ["read"]

CARRIED = {"sample_index": Opt(INDEX), "extracted": Opt(TEXT), "num_tokens": Opt(COUNT),
           "finish_reason": Opt(Choice("stop", "length")), "mean_entropy": Opt(Float(min=0, finite=False)),
           "seed": Opt(Int(min=0))}


def _schema(opts: ImportOptions) -> Obj:
    """A row: the fields named by the options, and evalkit's own fields where present."""
    fields = {opts.problem_field: KEY, opts.completion_field: TEXT}
    if opts.gold_field:
        fields[opts.gold_field] = GOLD
    if opts.correct_field:
        fields[opts.correct_field] = SCORE
    return Obj(fields, optional={k: v for k, v in CARRIED.items() if k not in fields})


def _csv_rows(path: Path) -> list[tuple[int, dict]]:
    limit = csv.field_size_limit()
    try:
        csv.field_size_limit(max(limit, path.stat().st_size + 1))  # a cell as long as the file is a cell
        with open(path, encoding="utf-8", newline="") as fh:
            rows = [(i + 2, row) for i, row in enumerate(csv.DictReader(fh))]  # line 1 is the header
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except csv.Error as exc:
        raise UsageError(f"{path}: not a readable CSV file ({exc})") from None
    finally:
        csv.field_size_limit(limit)
    if not rows:
        raise UsageError(f"{path}: no rows under the header")
    return rows


NUMBERS = ("sample_index", "num_tokens", "seed", "mean_entropy")


def _csv_values(row: dict, where: str) -> dict:
    """A CSV row's text as JSON values: empty cells absent, evalkit's numeric fields as numbers."""
    out = {}
    for name, value in row.items():
        if name is None or value is None:  # more cells than the header names, or fewer
            raise UsageError(f"{where}: {'more' if name is None else 'fewer'} cells than the header names")
        if value == "":
            continue
        if name in NUMBERS:
            try:
                value = float(value) if "." in value or "e" in value.lower() or "n" in value.lower() else int(value)
            except ValueError:
                raise UsageError(f"{where}: field {name!r}: expected a number, found {value[:20]!r}") from None
        out[name] = value
    return out


def read(path: Path, opts: ImportOptions) -> Imported:
    if path.is_dir():
        raise UsageError(f"{path}: give the JSONL or CSV file itself")
    is_csv = path.suffix.lower() == ".csv"
    rows = _csv_rows(path) if is_csv else read_json_lines(path, "JSONL")
    fields = {"problem": opts.problem_field, "completion": opts.completion_field}
    schema = _schema(opts)
    problems: dict[str, dict] = {}
    samples = []
    for number, raw in rows:
        where = f"{path}:{number}"
        row = check(schema, _csv_values(raw, where) if is_csv else raw, where, "samples (the fields the options name)")
        key = str(row[opts.problem_field])
        gold = row[opts.gold_field] if opts.gold_field else None
        add_problem(problems, key, {"question": key, "gold": None if gold is None else str(gold)}, where)
        sample = {"problem": key, "completion": row[opts.completion_field]}
        if opts.correct_field:
            sample["score"] = row[opts.correct_field]
        sample.update((name, row[name]) for name in CARRIED if row.get(name) is not None)
        if "sample_index" in sample:
            sample["index"] = sample.pop("sample_index")
        samples.append(sample)
    mapping = {**fields, "gold": opts.gold_field or "--task", "grade": opts.correct_field,
               "carried": [n for n in CARRIED if any((n if n != "sample_index" else "index") in s for s in samples)]}
    if any("num_tokens" in s for s in samples):
        mapping["num_tokens"] = "num_tokens field"
    return Imported("jsonl", path.stem, (path,), problems, samples, mapping, opts.correct_field,
                    no_grades_why=f"{path}: no --correct-field given; name the field holding each sample's grade, "
                                  "or use --regrade")
