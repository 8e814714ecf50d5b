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
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.tasks.base import OUTCOMES, Grade, Problem, Task, TaskSpec, answer_text

__all__ = [
    "OUTCOMES", "Problem", "TaskSpec", "Task", "Grade", "TASKS", "load_task", "scorer_for", "task_names",
    "answer_text", "grader_version", "graded_by", "stale_grades", "load_task_identity", "parse_task_config",
    "reference_completion", "math_profile", "question_key",
]

def _arith(size: int, seed: int, config: dict) -> Task:
    from evalkit.tasks import arith

    return arith.build(size, seed, config)


def _pairsum(size: int, seed: int, config: dict) -> Task:
    from evalkit.tasks import pairsum

    return pairsum.build(size, seed, config)


# Plain dict of evalkit's own tasks; any reasoning-gym dataset is reachable by
# its own name too (see task_names()).
TASKS: dict[str, Callable[[int, int, dict], Task]] = {"arith": _arith, "pairsum": _pairsum}


def question_key(task: str, question: str) -> str:
    """What makes two questions of `task` the same question (a study's splits never share one):
    the task's own rule where it has one (arith: evalkit.tasks.arith.question_key; pairsum:
    evalkit.tasks.pairsum.question_key), else the text."""
    if task == "arith":
        from evalkit.tasks import arith

        return arith.question_key(question)
    if task == "pairsum":
        from evalkit.tasks import pairsum

        return pairsum.question_key(question)
    return question


def task_names() -> list[str]:
    from evalkit.tasks import rgym

    return sorted(TASKS) + rgym.dataset_names()


def parse_task_config(text: str) -> dict:
    """`--task-config` JSON as a dict, or a UsageError with an example."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--task-config {text!r}: not JSON ({exc.msg}); e.g. '{{\"max_operand\": 9}}'") from exc
    if not isinstance(config, dict):
        raise UsageError("--task-config must be a JSON object")
    return config


def load_task(name: str, *, size: int = 200, seed: int = 0, config: dict | None = None) -> Task:
    """A task by name or file path; unknown names list the valid ones."""
    config = config or {}
    if name in TASKS:
        return TASKS[name](size, seed, config)
    path = Path(name).expanduser()
    if name.startswith("hf:") or path.is_dir():
        from evalkit.tasks import hf

        return hf.load(name, config)
    if path.suffix.lower() in (".jsonl", ".parquet") or path.exists():
        from evalkit.tasks import files

        return files.load(path, config)
    from evalkit.tasks import rgym

    if name in rgym.dataset_names():
        return rgym.build(name, size, seed, config)
    import difflib

    names = rgym.dataset_names()
    close = difflib.get_close_matches(name, [*TASKS, *names], n=3)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise UsageError(
        f"unknown task {name!r}: use evalkit's {', '.join(sorted(TASKS))}, one of the {len(names)} reasoning-gym "
        "datasets (e.g. chain_sum, countdown, basic_arithmetic; all: python -c \"import reasoning_gym.factory as f; "
        f"print(sorted(f.DATASETS))\"), a dataset (hf:NAME[:CONFIG][:SPLIT] or a folder), or a .jsonl / .parquet "
        f"file of problems{hint}"
    )


def reference_completion(problem: Problem, kind: str) -> str:
    """The reference answer written as the task's prompt asks for it (what a right completion
    says): the bare answer for math tasks, `<answer>...</answer>` for reasoning-gym."""
    if kind == "reasoning_gym":
        from evalkit.tasks.rgym import answer_tag

        return answer_tag(problem.answer)
    return problem.answer


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
    if kind == "pairsum":
        from evalkit.tasks.pairsum import VERSION

        return VERSION
    raise UsageError(f"task kind {kind!r} has no scorer")


def graded_by(settings: dict) -> str | None:
    """The grader version a stored run (run.json / summary.json, read through
    evalkit.records.upgrade, which names evalkit 0.1's graders) was graded with."""
    from evalkit.records import UNVERSIONED_GRADERS

    return settings.get("grader") or UNVERSIONED_GRADERS.get((settings.get("task") or {}).get("kind"))


def stale_grades(settings: dict) -> str | None:
    """A one-line warning when a stored run was graded by another grader than this evalkit's."""
    kind = (settings.get("task") or {}).get("kind")
    if kind not in ("math", "reasoning_gym", "pairsum"):
        return None
    then, now = graded_by(settings), grader_version(kind)
    if then == now:
        return None
    return f"graded by {then}, not by this evalkit's {now}: `evalkit regrade` updates the grades"


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


def math_profile(spec: TaskSpec) -> str:
    """The math grading profile of a task (evalkit.tasks.mathgrade): `arith` for evalkit's
    arithmetic, the dataset preset (`math`, `gsm8k`, `aime`), else `math`."""
    if spec.name == "arith":
        return "arith"
    from evalkit.tasks.mathgrade import PROFILES

    preset = json.loads(spec.config or "{}").get("preset")
    return preset if preset in PROFILES else "math"


def scorer_for(spec: TaskSpec) -> Callable[[str, Problem], Grade]:
    """The scorer of a task, rebuilt from its spec (inside grader workers)."""
    if spec.kind == "math":
        from functools import partial

        from evalkit.tasks.mathgrade import score

        return partial(score, profile=math_profile(spec))
    if spec.kind == "reasoning_gym":
        from evalkit.tasks import rgym

        return rgym.scorer(spec)
    if spec.kind == "pairsum":
        from evalkit.tasks.pairsum import score

        return score
    raise UsageError(f"task {spec.name!r} has no scorer (kind {spec.kind!r})")
