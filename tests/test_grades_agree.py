"""Grades that agree everywhere: summary.json follows exactly from samples.jsonl, the training
reward of some tokens equals the passk outcome of the same tokens, and stale grades are named.

The tiny model here is edited to answer: its first token is "7" or "3" (then end of turn), so
it solves the answer-7 problems of the digits task some of the time (test_report_helpers)."""

from __future__ import annotations

import json
from fractions import Fraction
from math import comb

import pytest
from helpers.report_runs import QUESTIONS, edit_model, task_file

from evalkit.passk import PasskOptions, run_passk


def exact_pass_at_k(n: int, c: int, k: int) -> Fraction:
    """Chen et al.'s estimator in exact rational arithmetic: 1 - C(n-c, k) / C(n, k)."""
    return 1 - Fraction(comb(n - c, k), comb(n, k))


@pytest.fixture(scope="module")
def answering_run(tiny_model, tmp_path_factory):
    root = tmp_path_factory.mktemp("answering")
    model = edit_model(tiny_model, root / "model", {"7": 4.0, "3": 4.0})
    out = root / "run"
    run_passk(PasskOptions(model=str(model), task=str(task_file(root)), n=8, ks=(1, 2, 4, 8), limit=None,
                           max_new_tokens=4, device="cpu", grader_workers=1), out)
    return out


def test_summary_pass_at_k_follows_exactly_from_the_samples(answering_run):
    records = [json.loads(line) for line in (answering_run / "samples.jsonl").read_text().splitlines()]
    summary = json.loads((answering_run / "summary.json").read_text())
    counts: dict[str, list[int]] = {}
    for r in records:
        n_c = counts.setdefault(r["problem_id"], [0, 0])
        n_c[0] += 1
        n_c[1] += r["outcome"] == "correct"
    solved = [c for _, c in counts.values()]
    assert 0 < sum(solved) < len(records)  # the edited model answers some problems right, not all
    for row in summary["pass_at_k"]:
        exact = sum(exact_pass_at_k(n, c, row["k"]) for n, c in counts.values()) / len(counts)
        assert row["pass_at_k"] == pytest.approx(float(exact), rel=1e-12, abs=1e-15)
    assert summary["outcomes"]["correct"] == sum(solved)
    answers = {f"q{i}": a for i, (_, a) in enumerate(QUESTIONS)}
    assert all(r["extracted"] == answers[r["problem_id"]] for r in records if r["outcome"] == "correct")


def test_training_reward_equals_the_passk_outcome_of_the_same_tokens(tiny_model, monkeypatch):
    """The trainer's reward path (decode_and_grade) and passk's (draw_chunk, then the grader)
    see the same text for the same tokens, special tokens included."""
    from transformers import AutoTokenizer

    import evalkit.chunks as chunks
    from evalkit.grading import Grader
    from evalkit.sampling import Sample
    from evalkit.tasks import load_task
    from evalkit.train.common import decode_and_grade

    tok = AutoTokenizer.from_pretrained(tiny_model)
    task = load_task("arith", size=2)
    p = task.problems[0]
    a, b = p.prompt.split("What is ")[1].split("?")[0].split(" + ")
    texts = [f"{a} + {b} = {p.answer}", f"<|im_start|>{p.answer}", f"{a} + {b}", f"{p.answer}<|im_end|>7",
             f"{a} + {b} = ?", "no idea"]
    samples = [Sample(0, j, tuple(tok(t, add_special_tokens=False)["input_ids"]), 9, "stop", None, j)
               for j, t in enumerate(texts)]
    monkeypatch.setattr("evalkit.sampling.sample_chunk", lambda *args, **kwargs: samples)
    drawn = chunks.draw_chunk(None, tok, [p], None, None)  # passk's own decoding of these tokens
    with Grader(task.spec, workers=1) as grader:
        _, rewards = decode_and_grade(tok, grader, samples, [p])
        outcomes = [g.outcome for g in grader.grade([(drawn[(p.id, j)][0], p) for j in range(len(texts))])]
    assert rewards == [1.0 if o == "correct" else 0.0 for o in outcomes]
    assert outcomes == ["correct", "correct", "no_answer", "correct", "no_answer", "no_answer"]

