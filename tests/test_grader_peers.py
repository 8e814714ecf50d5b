"""evalkit's math grader against other graders' own test verdicts.

`tests/data/peers/grader_verdicts.jsonl` holds every (gold, prediction, verdict) of the
parametrized grading tests of three peers, read from their test files at the commits it
names: Math-Verify (`tests/test_all.py`, `test_numina_cases.py`, `test_open_thoughts.py`,
`test_boxed.py`, `test_yujianll.py`; Apache-2.0; predictions are model completions, graded
with `score`), NeMo-Skills (`tests/test_math_equal.py`, both argument orders; Apache-2.0) and
hendrycks' MATH (`modeling/math_equivalence_test.py`; MIT), whose predictions are extracted
answers, compared with `equivalent`. Rows that set a non-default option of the peer
(`precision=2`, `allow_set_relation_comp=True`) test the option, not a verdict, and are left out.

Every other row must agree, except the divergences below: each is a choice written in the
grading contract (evalkit.tasks.math_equal, mathgrade) or a peer's verdict that is itself
wrong, with the reason. The test also checks that each listed divergence still diverges, so
the list stays true.
"""

import json
from pathlib import Path

import pytest

from evalkit.tasks import Problem
from evalkit.tasks.math_equal import equivalent
from evalkit.tasks.mathgrade import gold_text, score

ROWS = [json.loads(line) for line in (Path(__file__).parent / "data/peers/grader_verdicts.jsonl").open()]
DEFAULTS = {"precision": 6, "strict": True, "allow_set_relation_comp": False}

DIVERGENCES = {  # (repo, test function, line): why evalkit's verdict differs
    ("huggingface/Math-Verify", "test_number_extraction", 71):
        "gold '1,22' is a list in evalkit: a decimal comma is read only in an answer to a one-number gold",
    ("huggingface/Math-Verify", "test_number_extraction", 87):
        "gold '0,111' is thousands in evalkit (English benchmarks write decimal points)",
    ("huggingface/Math-Verify", "test_latex_notation", 132):
        "'Answer $ \\n 9 \\n $': Math-Verify refuses inline math across lines; evalkit reads the 9 (last number)",
    ("huggingface/Math-Verify", "test_latex_notation", 133):
        "'Answer \\( \\n 9 \\n \\)': as above, the answer is readable",
    ("huggingface/Math-Verify", "test_math_extraction_additional_cases", 754):
        "gold (1,3) is a pair or an interval; the set {1,3} is neither",
    ("huggingface/Math-Verify", "test_numina_cases", 121):
        "gold W(n) = 1 and W(n) = -1 against W(x)=1orW(x)=-1: another variable, and 'or' glued to the names",
    ("huggingface/Math-Verify", "test_open_thoughts", 24):
        "a gold that is a sentence is refused as `error` (issue 23: a non-math gold is never graded)",
    ("huggingface/Math-Verify", "test_boxed", 8):
        "gold boxes joined by '++++++' are not one answer group in evalkit",
    ("huggingface/Math-Verify", "test_string_extraction", 28):
        "Math-Verify's own expected verdict is wrong: 1 - 1/e is not 1 + 1/e",
    ("hendrycks/math", "test_order", 15):
        "a bare list is a set in evalkit (Math-Verify's FiniteSet); hendrycks compares strings in order",
    ("hendrycks/math", "test_decimals", 50):
        "as above: 0.1, 4, 2 and 4, .1, 2 are the same set",
}


def _key(row: dict) -> tuple:
    return row["source"]["repo"], row["source"]["test"], row["source"]["line"]


def _applies(row: dict) -> bool:
    return all(row.get("params", {}).get(k, v) == v for k, v in DEFAULTS.items())


def _evalkit_verdict(row: dict) -> bool:
    if row["kind"] == "answer":
        return equivalent(row["gold"], row["pred"])
    return score(row["pred"], Problem("p", "", gold_text(row["gold"]))).outcome == "correct"


CASES = [r for r in ROWS if _applies(r)]


@pytest.mark.parametrize("row", CASES, ids=lambda r: f"{r['source']['repo']}:{r['source']['test']}:{r['source']['line']}")
def test_agrees_with_peer_verdict(row):
    got = _evalkit_verdict(row)
    if _key(row) in DIVERGENCES:
        assert got != row["expected"], f"no longer diverges: {DIVERGENCES[_key(row)]}"
    else:
        assert got == row["expected"], (row["gold"][-200:], row["pred"][-200:])


def test_table_is_large_and_divergences_are_few():
    assert len(CASES) >= 300
    assert {r["source"]["repo"] for r in CASES} == {"huggingface/Math-Verify", "NVIDIA/NeMo-Skills", "hendrycks/math"}
    assert len(DIVERGENCES) / len(CASES) < 0.05
    assert set(DIVERGENCES) <= {_key(r) for r in CASES}
