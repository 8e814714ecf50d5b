"""Reasoning-gym families as forgetting benchmarks, scored by their own scorers.

    items = load("word_sorting", limit=20, seed=0); outcomes = evaluate(items, model, tok, EvalSettings())

Problems come from `evalkit.tasks.load_task(name, size=limit, seed=seed)`
(the dataset's question plus an instruction to answer in `<answer>` tags);
completions are greedy; grading runs in evalkit's killable `Grader` workers
with the dataset's `score_answer` (only a score of 1.0 counts as correct).
Default families (word sorting, letter counting, spelling backwards) have
nothing to do with arithmetic, the usual training task.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalkit.forgetting.generate import EvalSettings, ItemOutcome, greedy_completions

__all__ = ["RgymItems", "load", "grading", "evaluate", "DEFAULT_SIZE", "MAX_NEW_TOKENS"]

DEFAULT_SIZE = 100  # problems generated when --limit is 0
MAX_NEW_TOKENS = 96


@dataclass(frozen=True)
class RgymItems:
    task: object  # evalkit.tasks.Task
    problems: tuple

    @property
    def ids(self) -> list[str]:
        return [p.id for p in self.problems]

    def identity(self) -> dict:
        from evalkit.tasks import grader_version

        return {**self.task.spec.identity(), "items": len(self.problems),
                "grader": grader_version(self.task.spec.kind)}


def load(name: str, *, limit: int, seed: int) -> RgymItems:
    from evalkit.tasks import load_task

    task = load_task(name, size=limit or DEFAULT_SIZE, seed=seed)
    return RgymItems(task, task.problems)


def grading(items: RgymItems, settings: EvalSettings):
    """The family's grader workers (a context manager; they start at the first grade): one set
    can grade any number of `evaluate` calls on parts of `items`."""
    from evalkit.grading import Grader

    return Grader(items.task.spec, workers=settings.grader_workers, deadline=settings.grade_timeout)


def evaluate(items: RgymItems, model, tokenizer, settings: EvalSettings, on_done=None, *,
             grader=None) -> list[ItemOutcome]:
    """Greedy completions, graded; `grader`: an open `grading(...)` to use (else one of its own)."""
    problems = items.problems
    texts = greedy_completions(model, tokenizer, [p.prompt for p in problems], items.ids, settings, MAX_NEW_TOKENS, on_done)
    jobs = list(zip(texts, problems, strict=True))
    if grader is not None:
        grades = grader.grade(jobs)
    else:
        with grading(items, settings) as own:
            grades = own.grade(jobs)
    return [
        ItemOutcome(p.id, g.outcome, g.extracted, g.detail, text)
        for p, g, text in zip(problems, grades, texts, strict=True)
    ]
