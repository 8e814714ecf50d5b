"""The math scorer: math-verify, gold first.

Answer extraction (documented, math-verify 0.9 defaults): the completion is
parsed with `LatexExtractionConfig` (a `\\boxed{}` answer has priority, then
other LaTeX) and `ExprExtractionConfig` (plain numbers and expressions); the
first configuration that yields something wins. Nothing extracted gives
`no_answer`. `verify(gold, target)` is not symmetric: gold goes first.
Defaults `float_rounding=6, numeric_precision=15, strict=True`.

Timeouts: math-verify's own alarm-based timeouts (5 s) normally return
False, which would silently read as "incorrect"; here they raise and become
`timeout`, and any other math-verify failure becomes `error`. The grader's
parent-side deadline (evalkit.grading) covers hangs the alarm cannot break.

Example: `score("so the sum is 27", Problem("p", "What is 13+14?", "27"))`
is `Grade("correct", "27")`.
"""

from __future__ import annotations

from evalkit.tasks import Grade, Problem


def score(completion: str, problem: Problem) -> Grade:
    from math_verify import parse, verify
    from math_verify.errors import TimeoutException

    try:
        gold = parse(_as_math(problem.answer), raise_on_error=True)
        if not gold:
            return Grade("error", None, f"reference answer {problem.answer!r} does not parse")
        target = parse(completion, raise_on_error=True)
        if not target:
            return Grade("no_answer")
        extracted = str(target[-1]) if isinstance(target[-1], str) else str(target[0])
        correct = verify(gold, target, raise_on_error=True)
    except TimeoutException as exc:
        return Grade("timeout", None, f"math-verify: {exc}")
    return Grade("correct" if correct else "incorrect", extracted)


def _as_math(answer: str) -> str:
    """Reference answers are plain text; math-verify finds LaTeX inside $...$."""
    answer = answer.strip()
    return answer if "$" in answer or "\\boxed" in answer else f"${answer}$"
