"""Grading: math-verify in killable workers; timeouts and crashes are outcomes."""

import time

import pytest

from evalkit.grading import Grader
from evalkit.tasks import Grade, Problem, load_task
from evalkit.tasks.mathgrade import score

HANG = r"\boxed{7^{7^{7^{7}}}}"  # math-verify spins on this for its whole 5 s alarm


def test_math_scorer_cases():
    p = Problem("p", "What is 13 + 14?", "27")
    assert score("13 + 14 = 27", p).outcome == "correct"
    assert score("The final answer is 13 + 14 = 40.", p).outcome == "incorrect"
    assert score("The answer is 13 + 14.", p, "arith") == Grade("no_answer", "13 + 14", "answer phrase: restates the question")
    assert score("The answer is \\boxed{27}.", p).outcome == "correct"
    assert score("I think 28", p).outcome == "incorrect"
    assert score("no idea", p) == Grade("no_answer")
    assert score("0.5", Problem("q", "half?", "1/2")).outcome == "correct"


def test_hanging_input_is_timeout_in_bounded_time():
    task = load_task("arith", size=3)
    jobs = [("so 27", task.problems[0]), (HANG, task.problems[1]), (f"{task.problems[2].answer}", task.problems[2])]
    start = time.monotonic()
    with Grader(task.spec, workers=2, deadline=1.5) as grader:
        grades = grader.grade(jobs)
        assert time.monotonic() - start < 15
        assert grades[1].outcome == "timeout"
        assert grades[2].outcome == "correct"
        # the killed worker was replaced: the grader still works
        assert grader.grade([(task.problems[2].answer, task.problems[2])])[0].outcome == "correct"


def test_math_verify_own_timeout_is_not_incorrect():
    task = load_task("arith", size=1)
    with Grader(task.spec, workers=1, deadline=30) as grader:
        (grade,) = grader.grade([(HANG, task.problems[0])])
    assert grade.outcome == "timeout"


def test_reasoning_gym_scorer():
    task = load_task("chain_sum", size=4, seed=1)
    p = task.problems[0]
    with Grader(task.spec, workers=1) as grader:
        right, wrong, missing = grader.grade(
            [(f"<answer>{p.answer}</answer>", p), ("<answer>-999999</answer>", p), (p.answer, p)]
        )
    assert right.outcome == "correct" and wrong.outcome == "incorrect" and missing.outcome == "no_answer"


@pytest.mark.parametrize("name", ["nope", "chainsum"])
def test_unknown_task_lists_valid_names(name):
    from evalkit.errors import UsageError

    with pytest.raises(UsageError, match="arith.*chain_sum"):
        load_task(name)


PATHOLOGICAL = ["answer is " * 10000, "1+" * 20000, "(" * 20000, "\\boxed{" * 5000, "$" * 20000,
                "".join(f"\\boxed{{{i}}} and " for i in range(3000)), "{" * 20000 + "}" * 20000,
                "\\[ " * 10000, "The answer is " + "1," * 20000]


def test_a_very_long_answer_is_compared_as_text_only():
    """docs/grading.md, limits: past SYMBOLIC_CHARS an answer is not parsed as LaTeX."""
    from evalkit.tasks.math_equal import SYMBOLIC_CHARS, equivalent

    assert equivalent("4", "1+1+1+1")
    terms = SYMBOLIC_CHARS // 2 + 1
    assert not equivalent(str(terms), "+".join(["1"] * terms))


def test_pathological_completions_are_graded_not_timed_out():
    """Grading stays about linear in the text: walls of phrases, boxes or brackets are graded
    within the default deadline, not left to it."""
    task = load_task("arith", size=1)
    with Grader(task.spec, workers=1, deadline=10.0) as grader:
        grades = grader.grade([(text, task.problems[0]) for text in PATHOLOGICAL])
    assert [g.outcome for g in grades if g.outcome in ("timeout", "error")] == []
