"""A user's own problems from a local JSONL or Parquet file, graded with math-verify.

One record per problem. The question is read from the first present field
of `question`, `problem`, `prompt`; the answer from `answer`, `solution`,
`final_answer`; the id from `id` (else the line number). A bad line is
reported by number.

Example line: {"id": "q1", "question": "What is 2+2?", "answer": "4"}

A file of problems of a task whose scorer reads the problem's record (`FILE_KINDS`: pairsum)
holds `kind` and `entry` on every line, as a study's held-out split writes them
(evalkit.study.stages), and is graded by that task's scorer instead of math-verify.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.jsonio import file_sha256, read_jsonl
from evalkit.tasks.base import Problem, Task, TaskSpec, first_duplicate

QUESTION_KEYS = ("question", "problem", "prompt")
FILE_KINDS = ("pairsum",)  # task kinds whose scorer reads `entry`: a file of them keeps it
ANSWER_KEYS = ("answer", "solution", "final_answer")


def load(path: Path, config: dict | None = None) -> Task:
    """The file's problems. `config` (from --preset, --question-field, ...): read the records as a
    dataset's rows are read (evalkit.tasks.hf), with that preset's gold answers and prompt."""
    if not path.is_file():
        raise UsageError(f"{path}: no such task file")
    records = _read_parquet(path) if path.suffix.lower() == ".parquet" else read_jsonl(path)
    if not records:
        raise UsageError(f"{path}: holds no problems")
    digest = file_sha256(path)
    if config:
        return _load_with(path, records, config, digest)
    kind = _kind(path, records)
    problems = []
    for lineno, record in records:
        question = _first(record, QUESTION_KEYS)
        answer = _first(record, ANSWER_KEYS)
        if question is None or answer is None:
            raise UsageError(
                f"{path}:{lineno}: needs a question ({'/'.join(QUESTION_KEYS)}) "
                f"and an answer ({'/'.join(ANSWER_KEYS)})"
            )
        pid = str(record.get("id", lineno))
        entry = record.get("entry") if kind != "math" else None
        if kind != "math" and not isinstance(entry, dict):
            raise UsageError(f"{path}:{lineno}: a {kind} problem needs its `entry` (the record its scorer reads)")
        problems.append(Problem(pid, str(question), str(answer), entry))
    if clash := first_duplicate([p.id for p in problems]):
        raise UsageError(f"{path}: problem ids are not unique: {clash}")
    spec = TaskSpec(path.stem, kind, len(problems), None, "{}", str(path.resolve()), digest)
    return Task(spec, tuple(problems))


def _load_with(path: Path, records: list, config: dict, digest: str) -> Task:
    import json

    from evalkit.tasks.hf import rows_to_problems, source_options

    preset, fields = source_options(config, str(path))
    rows = [r for _, r in records]
    columns = set().union(*(r.keys() for r in rows))
    problems, used = rows_to_problems(rows, columns, str(path), path.stem, preset, fields)
    if not fields.get("id") and "id" not in columns:  # line numbers, as without a config
        problems = [replace(p, id=str(lineno)) for p, (lineno, _) in zip(problems, records, strict=True)]
    spec = TaskSpec(path.stem, "math", len(problems), None, json.dumps(used, sort_keys=True), str(path.resolve()),
                    digest)
    return Task(spec, tuple(problems))


def _kind(path: Path, records: list) -> str:
    """The file's task kind: `math` unless its lines name one of FILE_KINDS (all the same)."""
    kinds = {str(r.get("kind", "math")) for _, r in records}
    if len(kinds) > 1 or not kinds <= {"math", *FILE_KINDS}:
        raise UsageError(f"{path}: lines name the task kinds {sorted(kinds)}; a file holds one of math, "
                         f"{', '.join(FILE_KINDS)}")
    return kinds.pop()


def _first(record: dict, keys: tuple[str, ...]):
    return next((record[k] for k in keys if record.get(k) is not None), None)


def _read_parquet(path: Path) -> list[tuple[int, dict]]:
    import pandas as pd

    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise UsageError(f"{path}: not a readable Parquet file ({exc})") from exc
    return [(i + 1, row) for i, row in enumerate(frame.to_dict("records"))]
