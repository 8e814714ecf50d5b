"""`arith`: the default task, two-number addition the default model half-knows.

SmolLM2-135M-Instruct adds numbers up to 20 correctly about one time in nine
(honest pass@1 0.11-0.14 on 24 problems x 8 samples, the grader of
evalkit.tasks.mathgrade), and about half the problems are solved at k = 8, so
pass@k rises with k instead of sitting at 0 or 1. Graded with the math
contract (evalkit.tasks.mathgrade). Config: `max_operand` (default 20, at
least 1), `terms` (default 2, at least 1).

Example problem: "What is 13 + 14? Answer with just the number." -> "27".

Prompt version 2 (recorded in the task identity) asks for "just the number";
version 1 ("Give the final answer as a number.") was graded by a scorer that
credited restated questions. Five wordings were compared on the same 24
problems x 8 samples (48 new tokens): "just the number" gave the highest
honest pass@1 (0.135 against 0.109 for version 1); asking for "The answer is
N." made the model stop answering (half the samples `no_answer`).
"""

from __future__ import annotations

import json
import random
import re

from evalkit.errors import UsageError
from evalkit.tasks.base import Problem, Task, TaskSpec

PROMPT = "What is {expr}? Answer with just the number."
PROMPT_VERSION = 2


def build(size: int, seed: int, config: dict) -> Task:
    unknown = set(config) - {"max_operand", "terms"}
    if unknown:
        raise UsageError(f"arith: unknown config keys {sorted(unknown)}; valid: max_operand, terms")
    max_operand = _positive_int(config, "max_operand", 20)
    terms = _positive_int(config, "terms", 2)
    rng = random.Random(seed)
    problems = []
    for i in range(size):
        numbers = [rng.randint(1, max_operand) for _ in range(terms)]
        prompt = PROMPT.format(expr=" + ".join(map(str, numbers)))
        problems.append(Problem(f"arith-{seed}-{i}", prompt, str(sum(numbers))))
    spec = TaskSpec("arith", "math", size, seed, json.dumps(config, sort_keys=True), prompt_version=PROMPT_VERSION)
    return Task(spec, tuple(problems))


QUESTION = re.compile(r"What is (\d+(?: \+ \d+)*)\? Answer with just the number\.")


def operands(question: str) -> tuple[int, ...] | None:
    """The numbers an arith question adds, or None when it is not one."""
    match = QUESTION.fullmatch(question.strip())
    return tuple(int(x) for x in match.group(1).split(" + ")) if match else None


def question_key(question: str) -> str:
    """What makes two arith questions the same question: the multiset of the numbers it adds
    (`13 + 14` and `14 + 13` are one, so a study never holds out a commuted training question);
    a text that is no arith question is its own key."""
    found = operands(question)
    return question if found is None else "arith:" + "+".join(map(str, sorted(found)))


def _positive_int(config: dict, key: str, default: int) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"arith: config {key} must be an integer of at least 1, got {value!r}")
    return value
