"""Grading cases for `pairsum` (evalkit.tasks.pairsum), each graded by hand, and the task's build.

The table's problems are written out below; a row's grade is what a careful human gives under
the task's contract: the last `a + b` chain of the answer text names the pair, which is right
when a and b are two different numbers of the list that add up to the target (in either
order). Rows marked "sampled" are SmolLM2-135M-Instruct completions from the v3 pilot
(studies/pilot_v3.py, read by eye); the others were written to reach one rule each.
"""

from __future__ import annotations

from itertools import combinations

import pytest

from evalkit.errors import UsageError
from evalkit.tasks import Problem, load_task, question_key, scorer_for
from evalkit.tasks.pairsum import PROMPTS, answers, build, score

PROMPT = PROMPTS[1]


def _problem(numbers: list[int], target: int) -> Problem:
    pairs = sorted(sorted(p) for p in combinations(numbers, 2) if sum(p) == target)
    prompt = PROMPT.format(target=target, numbers=", ".join(map(str, numbers)))
    return Problem("p", prompt, f"{pairs[0][0]} + {pairs[0][1]}", {"numbers": numbers, "target": target,
                                                                      "pairs": pairs})


FOURTEEN = _problem([10, 3, 4, 11], 14)  # right: 3 + 11, 4 + 10
FIFTEEN = _problem([5, 10, 6, 9], 15)  # right: 5 + 10, 6 + 9
SEVEN = _problem([7, 2, 12, 5, 9], 14)  # right: 2 + 12, 5 + 9; 7 + 7 uses 7 twice

CASES = [
    # (problem, completion, outcome, extracted)
    (FOURTEEN, "3 + 11", "correct", "3 + 11"),
    (FOURTEEN, "11 + 3", "correct", "3 + 11"),  # reversed order: the same answer key
    (FOURTEEN, "10 + 4 = 14", "correct", "4 + 10"),  # the other right pair
    (FOURTEEN, "3+11=14", "correct", "3 + 11"),
    (FOURTEEN, "Answer: 3 + 11.", "correct", "3 + 11"),  # a full stop after the number is no decimal
    (FOURTEEN, "3 + 4", "incorrect", "3 + 4"),  # the prompt's example: both in the list, wrong sum
    (FOURTEEN, "1 + 13 = 14", "incorrect", "1 + 13"),  # the right sum, numbers not in the list
    (FOURTEEN, "2 + 12", "incorrect", "2 + 12"),
    (SEVEN, "7 + 7 = 14", "incorrect", "7 + 7"),  # the same number twice
    (SEVEN, "5 + 9", "correct", "5 + 9"),
    (FOURTEEN, "3 + 11 + 0", "incorrect", "3 + 11 + 0"),  # a chain of three is no pair
    (FOURTEEN, "3 + 11 = 14, and also 4 + 10 = 14", "correct", "4 + 10"),  # several chains: the last
    (FOURTEEN, "4 + 10 = 14? No: 3 + 12", "incorrect", "3 + 12"),  # the last chain decides
    (FOURTEEN, "The numbers are 3 and 11.", "correct", "3 + 11"),  # a pair joined by "and"
    (FOURTEEN, "11 plus 3 = 14", "correct", "3 + 11"),  # by "plus"
    (FOURTEEN, "3 AND 11", "correct", "3 + 11"),
    (FOURTEEN, "10, 3 and 4", "incorrect", "3 + 4"),  # a list's tail: the last two joined
    (FOURTEEN, "3 and 4 and 7", "incorrect", "3 + 4 + 7"),  # a chain of three, however joined
    (FOURTEEN, "The numbers are three and eleven.", "no_answer", None),  # numbers in words: no chain
    (FOURTEEN, "3, 11", "no_answer", None),  # a comma joins no pair (lists are everywhere)
    (FOURTEEN, "3 andrew 11", "no_answer", None),  # "and" as a word only
    (FOURTEEN, "", "no_answer", None),
    (FOURTEEN, "-3 + 11", "incorrect", "-3 + 11"),  # a sign is part of the number, not dropped
    (FOURTEEN, "\u22123 + 11", "incorrect", "-3 + 11"),  # the Unicode minus too
    (FIFTEEN, "3.5 + 10.5 = 14", "incorrect", "3.5 + 10.5"),  # decimals read whole, never as 5 + 10
    (FIFTEEN, "5.0 + 10", "incorrect", "5.0 + 10"),  # a decimal is not a number of the list
    (FIFTEEN, "15 + 0", "incorrect", "0 + 15"),
    (FOURTEEN, "<think>3 + 11</think>4 + 10", "correct", "4 + 10"),  # only the text after the reasoning
    (FOURTEEN, "3 + 11<|im_end|>3 + 4", "correct", "3 + 11"),  # cut at the end of the turn
    (FOURTEEN, "x3 + 11", "no_answer", None),  # "x3" is no number: no chain is left
    # sampled (the pilot's 6 numbers up to 30, 2 pairs), read by eye
    (_problem([2, 27, 19, 21, 18, 20], 39), "Sure, here are the two numbers that add up to 39: 18 and 21.",
     "correct", "18 + 21"),
    (_problem([14, 20, 4, 27, 9, 3], 23), "14 + 2 = 26, 4 + 2 = 6, 27 + 9 = 26, 9", "incorrect", "9 + 27"),
    (_problem([13, 26, 27, 10, 16, 12], 39), "Yes. These numbers are: 13, 19. You will add up to 3 * 13 + 19, so ",
     "incorrect", "13 + 19"),  # "*" joins nothing: the chain is 13 + 19, not in the list either way
    (_problem([3, 21, 10, 12, 14, 6], 24), "Definitely 3 + 4, in decimal format. That is correct!", "incorrect",
     "3 + 4"),  # the prompt's example, echoed: the commonest wrong answer
    (_problem([20, 22, 9, 16, 3, 26], 42), "2 + 3 = 5. \nThese numbers add to 42, so 2 + 3 = 5.", "incorrect",
     "2 + 3"),
    # sampled (4 numbers up to 40, 2 pairs)
    (FOURTEEN, "Expressing the numbers moded mathematically results in 3 + 4 = 7 and 3 + 4 = 7 that agree.",
     "incorrect", "3 + 4"),  # pairsum-2 read "7 and 3 + 4" as one chain: "7 + 3 + 4"
    (FOURTEEN, "10 + 4 = 14 and 3 + 11 = 14", "correct", "3 + 11"),  # not "14 and 3 + 11"
    (FOURTEEN, "A pair of numbers (3, 11) that add up to 14 would be 3 and 11. That's the answer.", "correct",
     "3 + 11"),
    (FOURTEEN, "Let x be the two numbers we want to add to 21 to get 3 and 11.", "correct", "3 + 11"),  # prose,
    # read as a pair since it comes last (the contract's limit)
]


@pytest.mark.parametrize(("problem", "completion", "outcome", "extracted"), CASES)
def test_pairsum_case(problem, completion, outcome, extracted):
    got = score(completion, problem)
    assert got.outcome == outcome, (got, completion)
    if extracted is not None:
        assert got.extracted == extracted, (got, completion)


def test_every_right_answer_and_the_reference_grade_correct():
    task = build(60, 3, {"numbers": 6, "max_value": 30, "pairs": 2})
    scorer = scorer_for(task.spec)
    for p in task.problems:
        assert len(p.entry["pairs"]) >= 2 and len(set(p.entry["numbers"])) == 6
        assert all(1 <= x <= 30 for x in p.entry["numbers"])
        assert scorer(p.answer, p).outcome == "correct"
        for a in answers(p.entry):
            a_, b_ = a.split(" + ")
            assert scorer(a, p).outcome == scorer(f"{b_} + {a_}", p).outcome == "correct"
        wrong = {f"{a} + {b}" for a, b in combinations(sorted(p.entry["numbers"]), 2)} - set(answers(p.entry))
        assert all(scorer(w, p).outcome == "incorrect" for w in wrong)


def test_build_is_determined_by_its_seed():
    config = {"numbers": 5, "max_value": 25, "pairs": 2}
    one, two = load_task("pairsum", size=40, seed=7, config=config), build(40, 7, config)
    assert [(p.id, p.prompt, p.answer, p.entry) for p in one.problems] == \
           [(p.id, p.prompt, p.answer, p.entry) for p in two.problems]
    other = build(40, 8, config)
    assert [p.prompt for p in other.problems] != [p.prompt for p in one.problems]
    assert one.spec.identity()["config"] == config and one.spec.kind == "pairsum"


def test_bad_configs_are_refused_with_the_fix():
    for config, words in (({"numbers": 2}, "at least 3"), ({"numbers": 30, "max_value": 20}, "at most max_value"),
                          ({"numbers": 4, "pairs": 3}, "at least 6 numbers"), ({"size": 3}, "unknown config"),
                          ({"prompt": 9}, "prompt must be one of"), ({"prompt": True}, "prompt must be one of"),
                          ({"prompt": "2"}, "prompt must be one of")):
        with pytest.raises(UsageError, match=words):
            build(5, 0, config)


def test_a_right_answer_is_right_for_few_other_problems():
    """The chance floor: one answer right for problem i is right for under 0.3% of the other
    problems. A model that named every pair of i's own list (and the prompt's example) would reach
    more of them: 4.8% at the defaults, 2.7% at 6 numbers up to 50 with 3 pairs (the bound the
    pilot lists as `structural floor`; the placebo floor measures what the model names)."""
    for config, most_any_pair in (({}, 0.05), ({"numbers": 6, "max_value": 50, "pairs": 3}, 0.03)):
        problems = build(240, 1, config).problems
        right = [set(answers(p.entry)) for p in problems]
        shares, any_pair = [], []
        for i, p in enumerate(problems):
            others = [j for j in range(len(problems)) if j != i and not right[i] & right[j]]
            shares += [sum(a in right[j] for j in others) / len(others) for a in right[i]]
            named = {f"{a} + {b}" for a, b in combinations(sorted(p.entry["numbers"]), 2)} | {"3 + 4"}
            any_pair.append(sum(bool(named & right[j]) for j in others) / len(others))
        assert sum(shares) / len(shares) < 0.003, config
        assert sum(any_pair) / len(any_pair) < most_any_pair, config


def test_question_key_ignores_the_order_of_the_list():
    a = PROMPT.format(target=14, numbers="10, 3, 4, 11")
    b = PROMPT.format(target=14, numbers="3, 4, 10, 11")
    c = PROMPT.format(target=15, numbers="3, 4, 10, 11")
    assert question_key("pairsum", a) == question_key("pairsum", b) != question_key("pairsum", c)
    assert question_key("pairsum", "What is 2 + 2?") == "What is 2 + 2?"


@pytest.mark.parametrize("version", sorted(PROMPTS))
def test_every_prompt_reads_back_to_one_key_and_draws_the_same_problems(version):
    """A prompt version changes the words only: the same seed draws the same lists, targets and
    right pairs, and every version's question has the key of the first's (a study's splits count
    a question asked in two wordings once)."""
    config = {"numbers": 6, "max_value": 30, "pairs": 2}
    plain, worded = build(30, 3, config), build(30, 3, config | {"prompt": version})
    assert [p.entry for p in plain.problems] == [p.entry for p in worded.problems]
    for a, b in zip(plain.problems, worded.problems, strict=True):
        assert question_key("pairsum", b.prompt) == question_key("pairsum", a.prompt)
        assert question_key("pairsum", b.prompt).startswith("pairsum:")
    assert ("prompt" in worded.spec.identity()["config"]) and "prompt" not in plain.spec.identity()["config"]


def test_prompt_three_repeats_its_target_and_a_changed_one_is_another_question():
    q = PROMPTS[3].format(target=27, numbers="28, 13, 25, 14, 2, 9")
    assert question_key("pairsum", q) == "pairsum:27:2,9,13,14,25,28"
    assert question_key("pairsum", q.replace("= 27.", "= 28.")) == q.replace("= 27.", "= 28.")


def test_a_file_of_pairsum_problems_keeps_its_scorer(tmp_path):
    import json

    path = tmp_path / "held.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": p.prompt, "answer": p.answer, "kind": "pairsum",
                                        "entry": p.entry}) + "\n" for i, p in enumerate(build(3, 0, {}).problems)))
    task = load_task(str(path))
    assert task.spec.kind == "pairsum"
    p = task.problems[0]
    second = answers(p.entry)[-1]
    assert scorer_for(task.spec)(second, p).outcome == "correct"  # math-verify would compare it with p.answer
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "q", "question": "x", "answer": "1 + 2", "kind": "pairsum"}) + "\n")
    with pytest.raises(UsageError, match="needs its `entry`"):
        load_task(str(bad))
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(path.read_text() + json.dumps({"id": "m", "question": "What is 1 + 1?", "answer": "2"}) + "\n")
    with pytest.raises(UsageError, match="task kinds"):
        load_task(str(mixed))


def test_a_study_split_keeps_the_scorer_and_every_right_answer(tmp_path):
    """evalkit.study.stages writes a pairsum split with `kind` and `entry`, so evalkit grades it with
    pairsum's scorer and analyses.study_seeded reads every right pair as the problem's answers."""
    import json

    from analyses.study_seeded import _right_answers
    from evalkit.study.stages import _write_problems

    problems = build(4, 2, {"numbers": 6, "max_value": 50, "pairs": 3}).problems
    _write_problems(tmp_path / "heldout.jsonl", problems, "pairsum")
    task = load_task(str(tmp_path / "heldout.jsonl"))
    assert task.spec.kind == "pairsum" and [p.entry for p in task.problems] == [p.entry for p in problems]
    lines = [json.loads(x) for x in (tmp_path / "heldout.jsonl").read_text().splitlines()]
    assert [_right_answers(r) for r in lines] == [answers(p.entry) for p in problems]
    assert all(len(_right_answers(r)) >= 3 for r in lines)
    _write_problems(tmp_path / "arith.jsonl", load_task("arith", size=2).problems, "arith")
    plain = [json.loads(x) for x in (tmp_path / "arith.jsonl").read_text().splitlines()]
    assert set(plain[0]) == {"id", "question", "answer"} and _right_answers(plain[0]) == [plain[0]["answer"]]
