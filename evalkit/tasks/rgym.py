"""Any reasoning-gym dataset, scored by its own `score_answer`.

The prompt is the dataset's question plus an instruction to put the final
answer in `<answer>...</answer>` tags; the extracted answer is the text of
the last such tag (reasoning-gym's own `extract_answer`), `no_answer` when
there is none. `score_answer` may give partial credit: only a score of 1.0
is `correct`; the score itself goes into the grade's detail.

Example: `load_task("chain_sum", size=50, seed=0, config={"max_terms": 3})`.
"""

from __future__ import annotations

import functools
import json

from evalkit.errors import UsageError
from evalkit.tasks.base import Grade, Problem, Task, TaskSpec, answer_text

# Bump whenever a change can change a grade (2: special tokens handled by answer_text).
VERSION = "reasoning_gym-3"  # 3: a <think> never closed is no answer (evalkit.tasks.answer_text)
INSTRUCTION = "\n\nGive only your final answer inside <answer></answer> tags."


@functools.cache
def dataset_names() -> list[str]:
    from reasoning_gym.factory import DATASETS

    return sorted(DATASETS)


@functools.lru_cache(maxsize=8)
def _dataset(name: str, size: int, seed: int, config: str):
    import reasoning_gym

    try:
        return reasoning_gym.create_dataset(name, size=size, seed=seed, **json.loads(config))
    except (TypeError, ValueError, AssertionError) as exc:
        raise UsageError(f"reasoning-gym {name}: bad config {config} ({exc})") from exc


def build(name: str, size: int, seed: int, config: dict) -> Task:
    spec = TaskSpec(name, "reasoning_gym", size, seed, json.dumps(config, sort_keys=True))
    data = _dataset(name, size, seed, spec.config)
    problems = tuple(
        Problem(f"{name}-{seed}-{i}", entry["question"] + INSTRUCTION, str(entry["answer"]), entry)
        for i, entry in enumerate(data)
    )
    return Task(spec, problems)


def answer_tag(answer: str) -> str:
    """An answer as the instruction asks for it."""
    return f"<answer>{answer}</answer>"


def scorer(spec: TaskSpec):
    data = _dataset(spec.name, spec.size, spec.seed, spec.config)

    def score(completion: str, problem: Problem) -> Grade:
        from reasoning_gym.utils import extract_answer

        answer = extract_answer(answer_text(completion))
        if answer is None:
            return Grade("no_answer")
        value = float(data.score_answer(answer, problem.entry))
        return Grade("correct" if value >= 1.0 else "incorrect", answer, f"score={value:g}")

    return score
