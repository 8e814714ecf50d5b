"""HumanEval scoring through the sandbox: all 164 canonical solutions pass,
wrong and hostile completions do not; code extraction from chat replies."""

from collections import Counter

import pytest

from evalkit.forgetting import humaneval


@pytest.fixture(scope="module")
def problems():
    return humaneval.load().problems


def test_all_canonical_solutions_pass(problems):
    assert len(problems) == 164
    outcomes = humaneval.score(problems, [p["canonical_solution"] for p in problems], workers=2)
    bad = [(o.item_id, o.outcome, o.detail) for o in outcomes if o.outcome != "correct"]
    assert bad == []


def test_wrong_solutions_fail(problems):
    first = problems[:4]
    wrong = ["    return None\n", "    return 42\n", "    raise ValueError('no')\n", "    while True:\n        pass\n"]
    from evalkit.forgetting.sandbox import Limits

    outcomes = humaneval.score(first, wrong, limits=Limits(timeout=2, cpu_seconds=2))
    assert [o.outcome for o in outcomes] == ["incorrect", "incorrect", "error", "timeout"]


def test_chat_style_full_function_in_a_fence_is_used(problems):
    p = problems[0]
    reply = ("Here you go:\n```python\nfrom typing import List\n\ndef has_close_elements(numbers, threshold):\n"
             "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n"
             "```\nThis checks every pair.")
    assert humaneval.score([p], [reply])[0].outcome == "correct"
    broken = reply.replace("< threshold", "> threshold")
    assert humaneval.score([p], [broken])[0].outcome == "incorrect"


def test_body_only_completion_continues_the_prompt(problems):
    p = problems[2]  # truncate_number
    assert p["entry_point"] == "truncate_number"
    assert humaneval.score([p], ["    return number % 1.0\n"])[0].outcome == "correct"


def test_hostile_completion_is_recorded_not_raised(problems, tmp_path):
    canary = tmp_path / "canary"
    canary.write_text("x")
    hostile = [f"    import os\n    os.remove({str(canary)!r})\n", "    import os\n    os.kill(os.getppid(), 9)\n"]
    outcomes = humaneval.score(problems[:2], hostile)
    assert Counter(o.outcome for o in outcomes) == {"error": 2}
    assert canary.read_text() == "x"


def test_extract_code_takes_the_first_fence():
    assert humaneval.extract_code("a\n```python\nx = 1\n```\n```python\ny = 2\n```") == "x = 1\n"
    assert humaneval.extract_code("```\nz = 3\n") == "z = 3\n"  # unterminated fence
    assert humaneval.extract_code("    return 1\n") == "    return 1\n"
