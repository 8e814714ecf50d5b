"""The math scorer: the final answer a completion commits to, compared with the gold answer.

    score("13 + 14 = 27", Problem("p", "What is 13 + 14?", "27"))  # Grade("correct", "27", "equation")
    score("... The final answer is $36.", Problem("q", "...", "36"), "gsm8k")  # correct

Grading contract (grader `math-4`), per profile. A profile is chosen by the task: `arith`
for evalkit's arithmetic task, the dataset preset for MATH (`math`), GSM8K (`gsm8k`) and
AIME (`aime`), and `math` for any other problem file.

1. What is read: `evalkit.tasks.answer_text` (cut at the first end-of-turn token, only the
   text after the last `</think>`). A `<think>` that is never closed is unfinished
   reasoning: `no_answer` (TRL / open-r1 grade only after the last `</think>`).
2. The answer (evalkit.tasks.math_answer): the last box group or final-answer phrase
   (`\\boxed{}`, "The final answer is X", Minerva's "Final Answer: ...", GSM8K's `#### X`);
   else the profile's fallbacks:

   | profile | fallbacks | source of the convention |
   |---|---|---|
   | `math`, `aime` | last math span, the value after the last `=`, the last number | Math-Verify's LaTeX extraction; hendrycks' last `\\boxed{}` |
   | `gsm8k` | the last number | lm-eval `gsm8k.yaml` flexible-extract `(-?[$0-9.,]{2,})|(-?[0-9]+)` |
   | `arith` | last math span, the value after the last `=`, the last number | math-2 |

3. Restatement (every profile, for a gold that is a plain number): an unevaluated
   arithmetic expression of the question's own numbers (`13 + 14` for "What is 13 + 14?",
   boxed, phrased or found by a fallback) is not an answer: `no_answer` (math-verify
   would evaluate it and credit it; a reward that credits it can be gamed). A fraction, a
   mixed number, a tuple, an expression with letters, or any answer to a gold that is
   not a plain number (`2^{2005}`) is never a restatement.
4. The gold: the preset's field (evalkit.tasks.hf: MATH's last `\\boxed{}` of the solution,
   GSM8K's number after `####`, AIME's integer); a gold that is itself a solution is read
   by its last box. A gold that is a sentence rather than an answer is refused: `error`.
5. Equality (evalkit.tasks.math_equal.equivalent): normalised strings, times, text and
   letters, exact numbers, sets, tuples and intervals, equations, then math-verify.

Timeouts: math-verify's alarm-based timeouts raise and become `timeout`; the grader's
parent-side deadline (evalkit.grading) covers hangs the alarm cannot break.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evalkit.tasks.base import Grade, Problem, unfinished_reasoning
from evalkit.tasks.math_answer import Found, box_group, final_answer, last_boxed
from evalkit.tasks.math_equal import answer_count, equivalent, is_prose, normalize, plain_number

__all__ = ["score", "final_answer", "last_boxed", "Found", "VERSION", "PROFILES", "Profile", "grade_answer"]

# Bump whenever a change can change a grade: stored runs name the version that graded them.
VERSION = "math-4"


@dataclass(frozen=True)
class Profile:
    """How one benchmark's completions are read (the table in the module docstring)."""

    fallbacks: tuple[str, ...]


PROFILES = {
    "math": Profile(("last math", "equation", "last number")),
    "aime": Profile(("last math", "equation", "last number")),
    "gsm8k": Profile(("last number",)),
    "arith": Profile(("last math", "equation", "last number")),
}


def score(completion: str, problem: Problem, profile: str = "math") -> Grade:
    """The grade of one completion under the contract above."""
    from math_verify.errors import TimeoutException

    rules = PROFILES[profile]
    gold = gold_text(problem.answer)
    if not gold or is_prose(normalize(gold)):
        return Grade("error", None, f"reference answer {problem.answer[:80]!r} is not a math answer")
    if unfinished_reasoning(completion):
        return Grade("no_answer", None, "unfinished reasoning: <think> without </think>")
    restate = plain_number(normalize(gold)) is not None  # `2^{2005}` may answer a gold `2^{2005}`
    found = final_answer(completion, problem.prompt, rules.fallbacks, restate, expect=answer_count(gold))
    if found is None or not found.text:
        return Grade("no_answer", None, found.rule if found else None)
    if found.restates:
        return Grade("no_answer", found.text, f"{found.rule}: restates the question")
    try:
        return grade_answer(found, gold)
    except TimeoutException as exc:
        return Grade("timeout", found.text, f"math-verify: {exc}")


def grade_answer(found: Found, gold: str) -> Grade:
    """`correct` or `incorrect` for an answer already found."""
    return Grade("correct" if equivalent(gold, found.text) else "incorrect", found.text, found.rule)


def gold_text(answer: str) -> str:
    """The gold answer as compared: a solution's last box group (`\\boxed{1}\\boxed{2}` is
    `1, 2`), a worked solution's final answer, or the text without its `$...$`."""
    text = str(answer).strip()
    if "\\boxed" in text or "\\fbox" in text:
        group = box_group(text)
        return group[1] if group else ""
    if len(re.findall(r"(?<![\\A-Za-z])[A-Za-z]{2,}", text)) >= 5:  # a worked solution: its final answer
        found = final_answer(text, "", ("last math",), restate=False)
        if found is not None:
            return found.text
    if len(text) > 1 and text[0] == "$" and text[-1] == "$":
        return text.strip("$").strip()
    return text
