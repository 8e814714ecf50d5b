"""Other graders to audit evalkit's against (`evalkit regrade RUN --compare NAME`).

    grade = other_grader("math-verify")("The answer is $\\frac{1}{2}$.", "0.5")   # Grade("correct", ...)
    grade = other_grader("mypkg.grading:my_score")(completion, gold)             # a user's own function

Named graders (a plain dict, GRADERS):
- `math-verify`: Math-Verify's defaults, as lighteval's `pass_at_k_math` and many RL repos
  call it: `verify(parse(gold), parse(completion))`, `parse` with its default extraction
  (`extraction_mode="any_match"`, LaTeX and plain expressions, unanchored); a gold without
  `$` or `\\boxed` is wrapped in `$...$` (Math-Verify's README).
- `math-verify-strict`: the recipe of TRL's `accuracy_reward` and open-r1: the prediction
  parsed with `LatexExtractionConfig(boxed_match_priority=0, try_extract_without_anchor=False)`
  and `extraction_mode="first_match"`, text after the last `</think>`.

A user's function `module:function` is called as `function(completion, gold)` and returns
a bool (correct or not), an outcome string (`correct`, `incorrect`, `no_answer`, ...) or a
pair (outcome, extracted answer). The module must be importable from the current folder
or the Python path. Every grader runs in evalkit's killable grader workers, under the
same deadline as evalkit's own grader.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Callable

from evalkit.errors import UsageError
from evalkit.tasks.base import OUTCOMES, Grade

__all__ = ["GRADERS", "other_grader", "grader_label", "slug"]


def _math_verify_gold(gold: str):
    from math_verify import parse

    text = gold if ("$" in gold or "\\boxed" in gold) else f"${gold}$"
    return parse(text)


def _verdict(gold_parsed, pred_parsed) -> Grade:
    from math_verify import verify

    if not gold_parsed:
        return Grade("error", None, "math-verify cannot parse the gold")
    if not pred_parsed:
        return Grade("no_answer", None, "math-verify extracted nothing")
    extracted = str(pred_parsed[-1])[:200]
    return Grade("correct" if verify(gold_parsed, pred_parsed) else "incorrect", extracted, "math-verify")


def math_verify_default(completion: str, gold: str) -> Grade:
    """Math-Verify with its defaults (module docstring)."""
    from math_verify import parse

    return _verdict(_math_verify_gold(gold), parse(completion))


def math_verify_strict(completion: str, gold: str) -> Grade:
    """TRL's `accuracy_reward` / open-r1 recipe (module docstring)."""
    from latex2sympy2_extended import NormalizationConfig
    from math_verify import LatexExtractionConfig, parse

    config = LatexExtractionConfig(
        boxed_match_priority=0, try_extract_without_anchor=False,
        normalization_config=NormalizationConfig(basic_latex=True, units=True, malformed_operators=False,
                                                 nits=False, boxed="all", equations=True),
    )
    answer = completion.rsplit("</think>", 1)[-1]
    return _verdict(_math_verify_gold(gold), parse(answer, extraction_config=[config], extraction_mode="first_match"))


GRADERS: dict[str, Callable[[str, str], Grade]] = {
    "math-verify": math_verify_default,
    "math-verify-strict": math_verify_strict,
}


def other_grader(ref: str) -> Callable[[str, str], Grade]:
    """The grader named `ref` (GRADERS) or a user's `module:function`, as (completion, gold) -> Grade."""
    if ref in GRADERS:
        return GRADERS[ref]
    module_name, _, name = ref.partition(":")
    if not module_name or not name:
        raise UsageError(f"--compare {ref}: use one of {', '.join(GRADERS)} or module:function")
    if os.getcwd() not in sys.path:  # `evalkit` runs from its bin folder: the user's folder is not on the path
        sys.path.insert(0, os.getcwd())
    try:
        function = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"--compare {ref}: cannot import it ({type(exc).__name__}: {exc})") from None
    if not callable(function):
        raise UsageError(f"--compare {ref}: {name} is not a function")
    return lambda completion, gold: _as_grade(function(completion, gold), ref)


def _as_grade(result, ref: str) -> Grade:
    if isinstance(result, Grade):
        return result
    if isinstance(result, bool):
        return Grade("correct" if result else "incorrect", None, ref)
    if isinstance(result, str) and result in OUTCOMES:
        return Grade(result, None, ref)
    if isinstance(result, tuple) and len(result) == 2 and result[0] in OUTCOMES:
        return Grade(result[0], None if result[1] is None else str(result[1])[:200], ref)
    return Grade("error", None, f"{ref} returned {type(result).__name__}, not a bool, outcome or (outcome, answer)")


def grader_label(ref: str) -> str:
    """The grader's name with its package version, for the comparison's record."""
    if ref in GRADERS:
        from importlib.metadata import version

        return f"{ref} (math-verify {version('math-verify')})"
    return ref


def slug(ref: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", ref).strip("_")
