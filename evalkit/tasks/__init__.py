"""Tasks: named problem sets with a scorer, in a plain dict.

`load_task("arith")`, `load_task("chain_sum", size=100, seed=0)` (any
reasoning-gym dataset by name), or `load_task("problems.jsonl")` (a local
JSONL or Parquet file of problems with answers, graded with math-verify).

A scorer is a pure function `(completion, problem) -> Grade`, the same for
evaluation and for training rewards. Scorers run in grader worker processes,
which rebuild them from the picklable `TaskSpec`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.errors import UsageError

__all__ = ["Problem", "TaskSpec", "Task", "Grade", "TASKS", "load_task", "scorer_for", "task_names"]

OUTCOMES = ("correct", "incorrect", "no_answer", "timeout", "error")


@dataclass(frozen=True)
class Problem:
    id: str
    prompt: str  # the user message, before any chat template
    answer: str  # the reference answer, as text
    entry: dict | None = field(default=None, compare=False)  # the source record, for its scorer


@dataclass(frozen=True)
class Grade:
    outcome: str  # one of OUTCOMES
    extracted: str | None = None
    detail: str | None = None  # why, for timeout / error / partial credit


@dataclass(frozen=True)
class TaskSpec:
    """Everything that identifies a task and rebuilds its scorer."""

    name: str  # "arith", a reasoning-gym dataset name, or "file"
    kind: str  # "math" (math-verify) or "reasoning_gym"
    size: int | None = None
    seed: int | None = None
    config: str = "{}"  # JSON of the generator's config
    source: str | None = None  # file path for file tasks
    source_sha256: str | None = None

    def identity(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "size": self.size,
            "seed": self.seed,
            "config": json.loads(self.config),
            "source": self.source,
            "source_sha256": self.source_sha256,
        }


@dataclass(frozen=True)
class Task:
    spec: TaskSpec
    problems: tuple[Problem, ...]


def _arith(size: int, seed: int, config: dict) -> Task:
    from evalkit.tasks import arith

    return arith.build(size, seed, config)


# Plain dict of evalkit's own tasks; any reasoning-gym dataset is reachable by
# its own name too (see task_names()).
TASKS: dict[str, Callable[[int, int, dict], Task]] = {"arith": _arith}


def task_names() -> list[str]:
    from evalkit.tasks import rgym

    return sorted(TASKS) + rgym.dataset_names()


def load_task(name: str, *, size: int = 200, seed: int = 0, config: dict | None = None) -> Task:
    """A task by name or file path; unknown names list the valid ones."""
    config = config or {}
    if name in TASKS:
        return TASKS[name](size, seed, config)
    path = Path(name).expanduser()
    if path.suffix.lower() in (".jsonl", ".parquet") or path.exists():
        from evalkit.tasks import files

        return files.load(path)
    from evalkit.tasks import rgym

    if name in rgym.dataset_names():
        return rgym.build(name, size, seed, config)
    raise UsageError(
        f"unknown task {name!r}: use one of evalkit's tasks ({', '.join(sorted(TASKS))}), "
        f"a reasoning-gym dataset ({', '.join(rgym.dataset_names())}), "
        "or a path to a .jsonl / .parquet file of problems"
    )


def scorer_for(spec: TaskSpec) -> Callable[[str, Problem], Grade]:
    """The scorer of a task, rebuilt from its spec (inside grader workers)."""
    if spec.kind == "math":
        from evalkit.tasks.mathgrade import score

        return score
    if spec.kind == "reasoning_gym":
        from evalkit.tasks import rgym

        return rgym.scorer(spec)
    raise UsageError(f"task {spec.name!r} has no scorer (kind {spec.kind!r})")
