"""The math scorer: the final answer a completion commits to, checked with math-verify.

    score("13 + 14 = 27", Problem("p", "What is 13 + 14?", "27"))  # Grade("correct", "27", "equation")

Grading contract for math tasks (`arith`, JSONL/Parquet problem files), in
this order; the first rule that finds a value decides:

1. `\\boxed{...}`: the last boxed answer (an empty box is skipped).
2. A final-answer phrase: the last "answer is X", "answer: X", "Answer = X"
   ("The final answer is", "**Answer:**" ...), X right after the phrase.
3. An equation's result: the value after the last "=" (or "equals").
4. The last number standing on its own.

Inside a found answer an equation counts by its last side ("The final answer
is 4 + 20 = 40" answers 40). A value that is an unevaluated expression built
only from the question's own numbers ("17 + 5", "2^5" for "2 to the power of
5") restates the question: the first three rules then give `no_answer`, and
rule 4 skips it and looks further back. Numbers glued to a word on their left
("nail2", "asia.1") are not answers. Nothing found is `no_answer`.

Why not math-verify's own extraction: its `parse` defaults
(`extraction_mode="any_match"`, `try_extract_without_anchor=True`) pull
"13 + 14" out of a restated question and `verify` evaluates it to the sum
(docs/references.md "Grading"; the README of Math-Verify and TRL's
`accuracy_reward` ask for `\\boxed{}` first, `boxed_match_priority=0`,
anchored extraction, `malformed_operators=False, nits=False` for rewards).
evalkit follows that recipe (boxed first, then the anchored phrases) and adds
the equation and last-number fallbacks that lm-eval's GSM8K "flexible"
filter uses, with the restatement check none of them has. math-verify still
parses the found value (LaTeX or plain) and decides equivalence:
`verify(gold, answer)`, gold first, defaults `float_rounding=6,
numeric_precision=15, strict=True`.

Text handling (`evalkit.tasks.answer_text`): the completion is cut at the
first end-of-turn token, other special tokens are dropped, and only the text
after the last `</think>` is read.

Timeouts: math-verify's alarm-based timeouts raise and become `timeout`; the
grader's parent-side deadline (evalkit.grading) covers hangs the alarm cannot
break. Limits: answers written as words ("twenty-seven") are not read; a
plain-text expression with letters (x^2+1 without `$`) is read only inside
`$...$` or `\\boxed{}`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evalkit.tasks.base import Grade, Problem, answer_text

__all__ = ["score", "final_answer", "last_boxed", "Found", "VERSION"]

# Bump whenever a change can change a grade: stored runs name the version that graded them.
VERSION = "math-2"

_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_OP = r"(?:[-+*/×÷^]|\\times|\\cdot|\\div)"
# a number, or numbers joined by operators, optionally in parentheses; never glued to a word on its left
_VALUE = re.compile(
    rf"(?<![\w.\\])(?P<v>\(?-?{_NUM}\)?(?:\s*{_OP}\s*\(?-?{_NUM}\)?)*)(?P<pct>\s*%)?(?![\d,]\d)"
)
_LATEX_START = re.compile(r"\s*(?:\$\$?|\\\(|\\\[)")
_LATEX_COMMAND = re.compile(r"\s*-?\\(?:d?frac|sqrt|pi|tfrac)")
_PHRASE = re.compile(r"(?i:answer)\s*(?:\*\*)?\s*(?::|=|\bis\b:?)\s*(?:\*\*)?")
_EQUALS = re.compile(r"=|\bequals\b|\bis equal to\b")
_FRAC = re.compile(r"\\[dt]?frac\{\s*(-?\d+)\s*\}\{\s*(\d+)\s*\}")  # \frac{3}{5} -> 3/5 for rule 4
_FILLER = re.compile(r"\s*(?:\*\*|[\"'`])?\s*")


@dataclass(frozen=True)
class Found:
    """The answer a completion commits to: its text and the rule that found it."""

    text: str
    rule: str  # "boxed", "answer phrase", "equation", "last number"
    restates: bool = False  # an unevaluated expression of the question's own numbers


def score(completion: str, problem: Problem) -> Grade:
    from math_verify import verify
    from math_verify.errors import TimeoutException

    try:
        gold = _parse(_as_math(problem.answer))
        if not gold:
            return Grade("error", None, f"reference answer {problem.answer!r} does not parse")
        found = final_answer(completion, problem.prompt)
        if found is None:
            return Grade("no_answer")
        if found.restates:
            return Grade("no_answer", found.text, f"{found.rule}: restates the question")
        target = _parse(_as_math(found.text))
        if not target:
            return Grade("no_answer", found.text, f"{found.rule}: does not parse")
        correct = verify(gold, target, raise_on_error=True)
    except TimeoutException as exc:
        return Grade("timeout", None, f"math-verify: {exc}")
    return Grade("correct" if correct else "incorrect", found.text, found.rule)


def final_answer(completion: str, question: str) -> Found | None:
    """The answer the completion commits to under the contract above, or None."""
    text = answer_text(completion)
    operands = set(_numbers(question))
    for rule, find in (("boxed", _boxed), ("answer phrase", _after_last(_PHRASE)), ("equation", _after_last(_EQUALS))):
        value = find(text)
        if value is not None:
            value = _last_side(value)
            return Found(value, rule, _restates(value, operands))
    return _last_number(_FRAC.sub(r" \1/\2", text), operands)


def last_boxed(text: str) -> str | None:
    """Content of the last non-empty `\\boxed{...}` / `\\fbox{...}` (balanced braces), or None."""
    return _boxed(text)


def _boxed(text: str) -> str | None:
    """Content of the last non-empty `\\boxed{...}` / `\\fbox{...}` (balanced braces)."""
    for match in reversed(list(re.finditer(r"\\(?:boxed|fbox)\s*\{", text))):
        depth, start = 1, match.end()
        for i in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                if text[start:i].strip():
                    return text[start:i].strip()
                break
    return None


def _after_last(anchor: re.Pattern):
    """A finder: the value right after the last match of `anchor` that is followed by one."""

    def find(text: str) -> str | None:
        for match in reversed(list(anchor.finditer(text))):
            value = _value_at(text, match.end())
            if value is not None:
                return value
        return None

    return find


def _value_at(text: str, pos: int) -> str | None:
    """The value that starts at `pos` (after spaces, bold markers or a quote): LaTeX or a number."""
    pos = _FILLER.match(text, pos).end()
    if (latex := _LATEX_START.match(text, pos)) and (inner := _latex_env(text, latex)) is not None:
        return inner or None
    if _LATEX_COMMAND.match(text, pos):
        end = re.compile(r"[\n$]|\.(?:\s|$)").search(text, pos)
        return text[pos : end.start() if end else len(text)].strip() or None
    match = _VALUE.match(text, pos)
    if match is None:
        return None
    then = _EQUALS.match(text, _FILLER.match(text, match.end()).end())
    result = _value_at(text, then.end()) if then else None  # "4 + 20 = 40": the result
    return result if result is not None else _clean(match)


def _latex_env(text: str, start: re.Match) -> str | None:
    """The inside of a `$...$`, `$$...$$`, `\\(...\\)` or `\\[...\\]` opened at `start`; None
    for a currency sign ("$6 for pencils": no closing `$` on the line, or words inside)."""
    opener = start.group().strip()
    close = {"$$": "$$", "$": "$", "\\(": "\\)", "\\[": "\\]"}[opener]
    end = text.find(close, start.end())
    inner = text[start.end() : end if end >= 0 else len(text)]
    if opener == "$" and (end < 0 or "\n" in inner or re.search(r"(?<![\\a-zA-Z])[a-zA-Z]{3,}", inner)):
        return None
    return inner.strip()


def _last_number(text: str, operands: set[str]) -> Found | None:
    """The last value in the text that does not restate the question."""
    for match in reversed(list(_VALUE.finditer(text))):
        value = _clean(match)
        if not _restates(value, operands):
            return Found(value, "last number")
    return None


def _clean(match: re.Match) -> str:
    value = match.group("v").strip()
    if value.count("(") != value.count(")"):  # a parenthesis of the sentence, not of the value
        value = value.strip("()").strip()
    elif value.startswith("(") and value.endswith(")") and value.count("(") == 1:
        value = value[1:-1].strip()
    return value + ("%" if match.group("pct") else "")


def _last_side(value: str) -> str:
    """An equation answers with its last non-empty side: "4 + 20 = 40" -> "40"."""
    sides = [s.strip() for s in re.split(r"(?<![<>!])=(?!=)", value)]
    sides = [s for s in sides if s]
    return sides[-1] if sides else value


def _numbers(text: str) -> list[str]:
    return [n.replace(",", "") for n in re.findall(_NUM, text)]


def _restates(value: str, operands: set[str]) -> bool:
    """An expression with an operator whose numbers all come from the question."""
    body = value.lstrip("(-").strip()
    if not re.search(rf"[\d)}}]\s*{_OP}|\\frac", body):
        return False
    numbers = _numbers(body)
    return len(numbers) >= 2 and all(n in operands for n in numbers)


def _parse(latex: str):
    """math-verify's parse of an isolated value, with the reward-safe normalisation."""
    from latex2sympy2_extended import NormalizationConfig
    from math_verify import LatexExtractionConfig, parse

    config = LatexExtractionConfig(
        boxed_match_priority=0,
        normalization_config=NormalizationConfig(
            basic_latex=True, units=True, malformed_operators=False, nits=False, boxed="all", equations=False
        ),
    )
    return parse(latex, extraction_config=[config], extraction_mode="first_match", raise_on_error=True)


def _as_math(answer: str) -> str:
    """A value as math-verify's LaTeX extraction reads it: inside $...$, thousands commas removed."""
    answer = answer.strip().rstrip(".")
    if "$" in answer or "\\boxed" in answer:
        return answer
    if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?%?", answer):
        answer = answer.replace(",", "")
    answer = answer.replace("×", "\\times ").replace("÷", "\\div ").replace("%", "\\%")
    return f"${answer}$"
