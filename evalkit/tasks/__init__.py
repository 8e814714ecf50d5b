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
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.errors import UsageError

__all__ = [
    "Problem", "TaskSpec", "Task", "Grade", "TASKS", "load_task", "scorer_for", "task_names",
    "answer_text", "grader_version", "graded_by", "stale_grades", "load_task_identity",
]

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
    prompt_version: int | None = None  # set when a task's prompt wording changes (arith: 2)

    def identity(self) -> dict:
        extra = {} if self.prompt_version is None else {"prompt_version": self.prompt_version}
        return {
            "name": self.name,
            "kind": self.kind,
            "size": self.size,
            "seed": self.seed,
            "config": json.loads(self.config),
            "source": self.source,
            "source_sha256": self.source_sha256,
        } | extra


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


# End-of-turn tokens of common chat templates: the reply ends at the first one.
_END_OF_TURN = re.compile(r"<\|im_end\|>|<\|endoftext\|>|<\|eot_id\|>|<\|end_of_text\|>|<\|end\|>|</s>|<end_of_turn>")
_SPECIAL = re.compile(r"<\|[A-Za-z0-9_]+\|>|<s>")


def answer_text(completion: str) -> str:
    """The part of a completion a scorer reads, the same for every scorer: cut at the first
    end-of-turn token (a model that runs past its turn writes the next turn), other special
    tokens dropped, and only the text after the last `</think>` of a reasoning model."""
    text = _END_OF_TURN.split(completion, maxsplit=1)[0]
    text = _SPECIAL.sub("", text)
    return text.rsplit("</think>", 1)[-1]


def grader_version(kind: str) -> str:
    """Names the scorer's behaviour; it changes whenever a grade could change, so runs graded
    by another version are detectable (`evalkit regrade` brings them up to date)."""
    from importlib.metadata import version

    if kind == "math":
        from evalkit.tasks.mathgrade import VERSION

        return f"{VERSION} (math-verify {version('math-verify')})"
    if kind == "reasoning_gym":
        from evalkit.tasks.rgym import VERSION

        return f"{VERSION} (reasoning-gym {version('reasoning-gym')})"
    raise UsageError(f"task kind {kind!r} has no scorer")


def stale_grades(settings: dict) -> str | None:
    """A one-line warning when a stored run was graded by another grader than this evalkit's."""
    kind = (settings.get("task") or {}).get("kind")
    if kind not in _UNVERSIONED:
        return None
    then, now = graded_by(settings), grader_version(kind)
    if then == now:
        return None
    return f"graded by {then}, not by this evalkit's {now}: `evalkit regrade` updates the grades"


# What graded runs made before grader versions were recorded (evalkit 0.1).
_UNVERSIONED = {"math": "math-1", "reasoning_gym": "reasoning_gym-1"}


def graded_by(settings: dict) -> str | None:
    """The grader version a stored run (run.json / summary.json) was graded with."""
    kind = (settings.get("task") or {}).get("kind")
    return settings.get("grader") or _UNVERSIONED.get(kind)


def load_task_identity(identity: dict) -> Task:
    """Rebuild a stored run's task from its identity (run.json's `task`); a task file whose
    content changed since the run is refused. The prompt wording may be newer than the run's
    (`prompt_version`): problem ids and answers do not depend on it."""
    source = identity.get("source")
    task = load_task(source or identity["name"], size=identity.get("size") or 200,
                     seed=identity.get("seed") or 0, config=identity.get("config") or {})
    if source and identity.get("source_sha256") not in (None, task.spec.source_sha256):
        raise UsageError(f"{source}: the task file changed since the run was made (sha256 differs)")
    return task


def scorer_for(spec: TaskSpec) -> Callable[[str, Problem], Grade]:
    """The scorer of a task, rebuilt from its spec (inside grader workers)."""
    if spec.kind == "math":
        from evalkit.tasks.mathgrade import score

        return score
    if spec.kind == "reasoning_gym":
        from evalkit.tasks import rgym

        return rgym.scorer(spec)
    raise UsageError(f"task {spec.name!r} has no scorer (kind {spec.kind!r})")
