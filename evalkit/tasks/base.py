"""What every task shares: the problem, grade and task records, and the text a scorer reads.

The task modules (arith, files, rgym, mathgrade) import these from here; `evalkit.tasks`
re-exports them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

__all__ = ["OUTCOMES", "Problem", "Grade", "TaskSpec", "Task", "answer_text", "unfinished_reasoning"]

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


# End-of-turn tokens of common chat templates: the reply ends at the first one.
_END_OF_TURN = re.compile(r"<\|im_end\|>|<\|endoftext\|>|<\|eot_id\|>|<\|end_of_text\|>|<\|end\|>|</s>|<end_of_turn>")
_SPECIAL = re.compile(r"<\|[A-Za-z0-9_]+\|>|<s>")


def first_duplicate(ids: list[str]) -> str | None:
    """A message naming the first id given twice, with both places (1-based), or None."""
    seen: dict[str, int] = {}
    for place, pid in enumerate(ids, start=1):
        if pid in seen:
            return f"problem id {pid!r} is given twice (problems {seen[pid]} and {place})"
        seen[pid] = place
    return None


def answer_text(completion: str) -> str:
    """The part of a completion a scorer reads, the same for every scorer: cut at the first
    end-of-turn token (a model that runs past its turn writes the next turn), other special
    tokens dropped, and only the text after the last `</think>` of a reasoning model. A
    `<think>` never closed is unfinished reasoning: nothing is read (TRL's and open-r1's
    accuracy rewards grade only the text after `</think>`)."""
    text = _SPECIAL.sub("", _thoughts(_END_OF_TURN.split(completion, maxsplit=1)[0]))
    if _unclosed(text):
        return ""
    return text.rsplit("</think>", 1)[-1]


def unfinished_reasoning(completion: str) -> bool:
    """A `<think>` with no `</think>` after it, before the end of the turn."""
    return _unclosed(_thoughts(_END_OF_TURN.split(completion, maxsplit=1)[0]))


def _thoughts(text: str) -> str:
    """Sky-T1 / OpenThoughts' `<|begin_of_thought|>` ... `<|end_of_thought|>` as `<think>` tags."""
    return text.replace("<|begin_of_thought|>", "<think>").replace("<|end_of_thought|>", "</think>")


def _unclosed(text: str) -> bool:
    opened = text.rfind("<think>")
    return opened >= 0 and text.find("</think>", opened) < 0
