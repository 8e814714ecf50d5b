"""Grading one run with two graders: where evalkit's grader and another one disagree.

    evalkit regrade runs/math500 --compare math-verify       # after regrading, the audit
    evalkit regrade runs/math500 --compare mypkg.grade:score # a user's own grader

The other grader (evalkit.tasks.other_graders) grades every stored completion in the same
killable grader workers (same deadline). Its grades are appended to
`.compare-<name>.jsonl` per batch, so an interrupted audit resumes. The result goes to
`grader-compare.json` in the run folder, one entry per other grader (rerunning with
another grader adds its entry): both graders' names and versions, the agreement, the
confusion of outcomes, pass@1 under each, and every disagreement with the problem, the
gold, the completion's tail, and both verdicts and extractions. A sample either grader
could not decide (`timeout` or `error`) is counted in neither the agreement nor the
disagreements: its rows are listed apart (`undecided`), so "incorrect against a timeout" is
never an agreement. `evalkit report` shows it. No evaluation tool has this audit; it is how a user finds a grader's blind spot on
their own model's outputs.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from evalkit.jsonio import append_jsonl, write_json_atomic
from evalkit.options import GradingOptions

__all__ = ["compare_graders", "COMPARE_FILE"]

COMPARE_FILE = "grader-compare.json"
BATCH = 64
TAIL = 400  # characters of each completion's end kept in the table


def compare_graders(dest: Path, records: list[dict], by_id: dict, spec, other: str,
                    grading: GradingOptions = GradingOptions(), progress: Callable | None = None) -> dict:
    """Grade `records` (already graded by this evalkit's grader for `spec`) with `other`;
    write and return its entry."""
    from evalkit.grading import Grader
    from evalkit.tasks import grader_version
    from evalkit.tasks.other_graders import grader_label, slug

    work = dest / f".compare-{slug(other)}.jsonl"
    done = _read_work(work)
    todo = [r for r in records if _key(r) not in done]
    with Grader(spec, workers=grading.grader_workers, deadline=grading.grade_timeout, other=other) as grader:
        for start in range(0, len(todo), BATCH):
            batch = todo[start : start + BATCH]
            grades = grader.grade([(r["completion"], by_id[r["problem_id"]]) for r in batch])
            fresh = [{"problem_id": r["problem_id"], "sample_index": r["sample_index"], "outcome": g.outcome,
                      "extracted": g.extracted, "detail": g.detail} for r, g in zip(batch, grades, strict=True)]
            append_jsonl(work, fresh)
            done.update((_key(f), f) for f in fresh)
            if progress:
                progress(len(records) - len(todo) + start + len(batch), len(records))
    entry = _entry(records, done, by_id, grader_version(spec.kind), grader_label(other))
    path = dest / COMPARE_FILE
    previous = _read_compare(path)
    comparisons = {c["other"]: c for c in previous.get("comparisons", [])} | {entry["other"]: entry}
    write_json_atomic(path, {"kind": "grader-compare", "run": str(dest),
                             "comparisons": [comparisons[k] for k in sorted(comparisons)]})
    work.unlink(missing_ok=True)
    return entry


def _key(record: dict) -> tuple:
    return record["problem_id"], record["sample_index"]


def _read_work(path: Path) -> dict:
    """Grades already made, by (problem, sample); a torn last line is graded again."""
    done: dict = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").split("\n"):
            try:
                record = json.loads(line)
                done[_key(record)] = record
            except (ValueError, KeyError, TypeError):
                continue
    return done


def _read_compare(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) and data.get("kind") == "grader-compare" else {}
    except (OSError, ValueError):
        return {}


UNDECIDED = ("timeout", "error")  # a grader that ran out of time or failed said nothing about the sample


def agrees(a: str, b: str) -> bool | None:
    """Whether two graders' outcomes agree on correctness; None when either could not decide."""
    if a in UNDECIDED or b in UNDECIDED:
        return None
    return (a == "correct") == (b == "correct")


def _entry(records: list[dict], others: dict, by_id: dict, evalkit_grader: str, other_label: str) -> dict:
    """Agreement over the samples both graders decided, confusion, pass@1 under each grader,
    the disagreement rows and the undecided ones."""
    pairs = [(r, others[_key(r)]) for r in records]
    confusion = Counter((r["outcome"], o["outcome"]) for r, o in pairs)
    verdicts = [agrees(r["outcome"], o["outcome"]) for r, o in pairs]
    disagree = [pair for pair, same in zip(pairs, verdicts, strict=True) if same is False]
    undecided = [pair for pair, same in zip(pairs, verdicts, strict=True) if same is None]
    decided = len(pairs) - len(undecided)
    return {
        "evalkit": evalkit_grader,
        "other": other_label,
        "samples": len(pairs),
        "decided": decided,
        "undecided": len(undecided),
        "disagree": len(disagree),
        "agreement": 1 - len(disagree) / decided if decided else None,
        "confusion": [{"evalkit": a, "other": b, "count": n} for (a, b), n in sorted(confusion.items())],
        "pass_at_1": {"evalkit": _pass1(pairs, 0), "other": _pass1(pairs, 1)},
        "disagreements": [_row(r, o, by_id[r["problem_id"]]) for r, o in disagree],
        "undecided_samples": [_row(r, o, by_id[r["problem_id"]]) for r, o in undecided],
    }


def _pass1(pairs: list[tuple[dict, dict]], side: int) -> float | None:
    """Mean over problems of the share of correct samples (pass@1, unbiased)."""
    per: dict = {}
    for pair in pairs:
        right, total = per.get(pair[0]["problem_id"], (0, 0))
        per[pair[0]["problem_id"]] = (right + (pair[side]["outcome"] == "correct"), total + 1)
    return sum(r / t for r, t in per.values()) / len(per) if per else None


def _row(record: dict, other: dict, problem) -> dict:
    return {
        "problem_id": record["problem_id"], "sample_index": record["sample_index"],
        "question": problem.prompt[:300], "gold": problem.answer,
        "completion_tail": record["completion"][-TAIL:],
        "evalkit": {k: record.get(k) for k in ("outcome", "extracted", "detail")},
        "other": {k: other.get(k) for k in ("outcome", "extracted", "detail")},
    }
