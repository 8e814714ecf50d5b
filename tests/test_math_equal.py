"""The math-3 grading contract, one row per failure class of issue 23 and per choice made
where the benchmarks' conventions differ (evalkit.tasks.mathgrade, math_answer, math_equal)."""

import time

import pytest

from evalkit.tasks import Problem
from evalkit.tasks.math_equal import equivalent, normalize
from evalkit.tasks.math_value import value
from evalkit.tasks.mathgrade import score

MATH500_1 = ("Convert the point $(0,3)$ in rectangular coordinates to polar coordinates.  Enter your answer in "
             "the form $(r,\\theta),$ where $r > 0$ and $0 \\le \\theta < 2 \\pi.$")

CASES = [
    # (class, profile, question, gold, completion, outcome)
    ("currency", "gsm8k", "It costs $12 and $24 more.", "36", "12 + 24 = $36 in total. The final answer is $36.", "correct"),
    ("currency", "gsm8k", "", "18", "She makes 9 * 2 = $18 every day.\n\\boxed{\\$18}", "correct"),
    ("currency", "gsm8k", "", "18", "She makes 9 * 2 = $18 every day.\nThe final answer is $19.", "incorrect"),
    ("currency", "math", "", "\\$40", "So the final answer is $\\boxed{\\$40}$.", "correct"),
    ("currency", "math", "", "\\$15,\\!000", "The total is $\\boxed{15000}$.", "correct"),
    ("currency", "gsm8k", "", "9500", '{"reasoning": "...", "answer": "$9 500"}', "correct"),
    ("restatement", "math", "What is $1\\frac14$ of 1?", "1\\frac{1}{4}", "\\boxed{1 \\frac{1}{4}}", "correct"),
    ("restatement", "math", "What is 1/2?", "\\frac{1}{2}", "\\boxed{\\frac{1}{2}}", "correct"),
    ("restatement", "math", MATH500_1, "\\left( 3, \\frac{\\pi}{2} \\right)",
     "the polar coordinates are $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}.$", "correct"),
    ("restatement", "arith", "What is 13 + 14?", "27", "The answer is \\boxed{13 + 14}.", "no_answer"),
    ("restatement", "math", "What is 13 + 14?", "27", "13 + 14 = ?", "no_answer"),
    ("shorthand", "math", "", "\\frac12", "\\boxed{\\frac{1}{2}}", "correct"),
    ("shorthand", "math", "", "\\frac{1}{2}", "\\boxed{\\frac12}", "correct"),
    ("shorthand", "math", "", "\\frac{360}7", "\\boxed{\\frac{360}{7}}", "correct"),
    ("shorthand", "math", "", "\\sqrt{3}", "\\boxed{\\sqrt3}", "correct"),
    ("shorthand", "math", "", "\\tfrac83", "\\boxed{\\frac{8}{3}}", "correct"),
    ("shorthand", "math", "", "\\frac12", "\\boxed{\\frac{1}{3}}", "incorrect"),
    ("percent", "math", "", "25\\%", "\\boxed{25}", "correct"),
    ("percent", "math", "", "20\\%", "The answer is 20%.", "correct"),
    ("percent", "math", "", "25\\%", "\\boxed{0.25}", "incorrect"),  # choice: a percentage is its number
    ("equation", "math", "", "4x-5y=-50", "The line is $\\boxed{4x-5y=-50}$.", "correct"),
    ("equation", "math", "", "4x-5y=-50", "The line is $\\boxed{-4x+5y=50}$.", "correct"),
    ("equation", "math", "", "4x-5y=-50", "The line is $\\boxed{-50}$.", "incorrect"),
    ("equation", "math", "", "x - 3z = 0", "\\boxed{x - 3z = 0}", "correct"),
    ("equation", "math", "", "a_3 = 2, a_{37} = 19", "\\boxed{a_{37} = 19, a_3 = 2}", "correct"),
    ("equation", "math", "", "y = x^2 + 2", "\\boxed{x^2+2}", "correct"),
    ("equation", "math", "", "x^2 + y^2 = 13", "\\boxed{13}", "incorrect"),
    ("several boxes", "math", "", "-2, 1", "The roots are $\\boxed{-2}$ and $\\boxed{1}$.", "correct"),
    ("several boxes", "math", "", "1", "The roots are $\\boxed{-2}$ and $\\boxed{1}$.", "incorrect"),
    ("several boxes", "math", "", "2, 3", "so x = \\boxed{2} or x = \\boxed{3}.", "correct"),
    ("intermediate box", "math", "", "10,455", "First \\boxed{255}.\n\nThen ... The final answer is $10,455$.", "correct"),
    ("prose math", "math", "", "x \\ge 5", "Therefore $x \\geq 5$ is the solution.", "correct"),
    ("prose math", "math", "", "(1, 2)", "So the point is $(1, 2)$.", "correct"),
    ("prose math", "math", "", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}",
     "We get $\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}$.", "correct"),
    ("prose math", "math", "", "x^2+2x+1", "The answer is x^2+2x+1.", "correct"),
    ("prose math", "math", "", "2", "The answer is 2x.", "incorrect"),
    ("number format", "math", "", "1000.99", "1000,99", "correct"),
    ("number format", "math", "", "0.4", "The answer is .4", "correct"),
    ("number format", "math", "", "1000", "1 000", "correct"),
    ("number format", "math", "", "10{,}000", "\\boxed{10,000}", "correct"),
    ("number format", "math", "", "2, 3", "\\boxed{2,3}", "correct"),  # a list, not 2.3
    ("text answer", "math", "", "\\text{odd}", "$odd$", "correct"),
    ("text answer", "math", "", "\\text{odd}", "The function is $\\boxed{\\text{even}}$.", "incorrect"),
    ("text answer", "math", "", "\\text{(C)}", "The answer is (C).", "correct"),
    ("text answer", "math", "", "E", "\\boxed{\\mathrm{E}}", "correct"),
    ("text answer", "math", "", "\\text{A,D}", "\\boxed{D, A}", "correct"),
    ("time", "math", "", "12:00", "The answer is 12:00.", "correct"),
    ("time", "math", "", "12:00", "The answer is 1:00.", "incorrect"),
    ("time", "math", "", "\\text{4:30 p.m.}", "\\boxed{4:30 PM}", "correct"),
    ("not math", "math", "", "The midpoints form a regular hexagon around the centre", "\\boxed{6}", "error"),
    ("reasoning", "math", "", "7", "<think>maybe \\boxed{3}</think>The answer is \\boxed{7}.", "correct"),
    ("reasoning", "math", "", "3", "<think>maybe \\boxed{3}</think>The answer is \\boxed{7}.", "incorrect"),
    ("reasoning", "math", "", "3", "<think>so the answer is \\boxed{3}", "no_answer"),
    ("reasoning", "math", "", "3", "<|begin_of_thought|>so \\boxed{3}", "no_answer"),
    ("reasoning", "math", "", "3", "<|begin_of_thought|>hm<|end_of_thought|><|begin_of_solution|>\\boxed{3}",
     "correct"),
    ("unfinished", "math", "", "\\frac{14}{3}", "we get \\[ f(x) = \\frac{3x}{5} + \\frac{", "no_answer"),
    ("unfinished", "math", "", "3", "so $x = \\boxed{", "no_answer"),
    ("invented follow-up", "math", "", "0", "So the result is:\n\\boxed{0}\n\nYour turn:\nCompute 7 - 9. "
     "Put it in $\\boxed{[answer]}$.", "correct"),
    ("blank", "gsm8k", "", "12", "It holds 5 feet.\nTherefore, the answer (arabic numerals) is _____.", "no_answer"),
    ("aime", "aime", "", "33", "so $m + n = \\boxed{033}$", "correct"),
    ("aime", "aime", "", "33", "so $m + n = \\boxed{34}$", "incorrect"),
    ("gsm8k ####", "gsm8k", "", "72", "48/2 = <<48/2=24>>24\n48+24 = <<48+24=72>>72\n#### 72", "correct"),
    ("gsm8k flexible", "gsm8k", "", "72", "She sold 48 + 24 = 72 clips.", "correct"),
    ("word number", "gsm8k", "", "4", "The answer is four.", "correct"),
    ("word number", "gsm8k", "", "4", "Four containers were imported.", "no_answer"),  # a limit: words are read only as an answer
]


@pytest.mark.parametrize(("kind", "profile", "question", "gold", "completion", "outcome"), CASES,
                         ids=[f"{c[0]}:{c[4][-30:]}" for c in CASES])
def test_contract(kind, profile, question, gold, completion, outcome):
    got = score(completion, Problem("p", question, gold), profile)
    assert got.outcome == outcome, got


@pytest.mark.parametrize(("a", "b", "same"), [
    ("\\frac{\\sqrt{3}}{3}", "\\frac{1}{\\sqrt{3}}", True),
    ("\\frac{1}{3}", "0.333333", True),
    ("1 \\pm \\sqrt{19}", "1+\\sqrt{19}, 1-\\sqrt{19}", True),
    ("(0,9)", "[0,9)", False),
    ("\\{1\\pm\\sqrt{5},-2\\}", "-2, 1+\\sqrt5, 1-\\sqrt5", True),
    ("185", "185\\", True),
    ("\\begin{pmatrix}0&1\\\\1&0\\end{pmatrix}", "\\begin{bmatrix} 0 & 1 \\\\ 1 & 0 \\end{bmatrix}", True),
    ("(3,17,3,7), (17,3,3,7)", "(17,3,3,7), (3,17,3,7), (3,17,3,7)", True),  # a set: repeats count once
    ("\\frac{x+2}{7}", "-15", False),
    ("2\\sqrt{3}", "\\sqrt{12}", True),
])
def test_equivalent(a, b, same):
    assert equivalent(a, b) is same
    assert equivalent(b, a) is same


def test_normalize_follows_hendrycks_and_minerva():
    assert normalize("\\left( 3, \\dfrac{\\pi}{2} \\right)") == "( 3, \\frac{\\pi}{2} )"
    assert normalize("90\\text{ square\nunits}") == "90"
    assert normalize("10,\\!000") == "10000"
    assert normalize("7, -2, \\text{ and } -5") == "7, -2, -5"
    assert normalize("\\frac{270}7\\text{ degrees}") == "\\frac{270}{7}"


def test_constant_values_without_sympy():
    assert value("\\frac{\\pi}{4} + 1") == pytest.approx(1.7853981633974483)
    assert value("x + 1") is None and value("1\\frac{1}{4}") is None
    start = time.monotonic()
    assert value("7^{7^{7^{7}}}") is None  # too large: math-verify decides under its deadline
    assert time.monotonic() - start < 1
