"""`arith`: the default task, two-number addition the default model half-knows.

SmolLM2-135M-Instruct adds small numbers correctly some of the time, so
pass@k rises with k instead of sitting at 0 or 1. Graded with math-verify.
Config: `max_operand` (default 20), `terms` (default 2).

Example problem: "What is 13 + 14? Give the final answer as a number." -> "27".
"""

from __future__ import annotations

import json
import random

from evalkit.errors import UsageError
from evalkit.tasks import Problem, Task, TaskSpec


def build(size: int, seed: int, config: dict) -> Task:
    unknown = set(config) - {"max_operand", "terms"}
    if unknown:
        raise UsageError(f"arith: unknown config keys {sorted(unknown)}; valid: max_operand, terms")
    max_operand = int(config.get("max_operand", 20))
    terms = int(config.get("terms", 2))
    rng = random.Random(seed)
    problems = []
    for i in range(size):
        numbers = [rng.randint(1, max_operand) for _ in range(terms)]
        expr = " + ".join(map(str, numbers))
        prompt = f"What is {expr}? Give the final answer as a number."
        problems.append(Problem(f"arith-{seed}-{i}", prompt, str(sum(numbers))))
    spec = TaskSpec("arith", "math", size, seed, json.dumps(config, sort_keys=True))
    return Task(spec, tuple(problems))
