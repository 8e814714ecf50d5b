"""Length metrics, outcome efficiency and AES by hand, and `evalkit length` on real runs."""

import json
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from evalkit.cli import app
from metrics.length import (
    accuracy_by_length,
    aes,
    length_summary,
    locate_answer,
    outcome_efficiency,
)


def test_length_summary_by_hand():
    s = length_summary([10, 20, 30, 40], [True, False, True, False], [False, False, True, True])
    assert s["mean_tokens"] == 25
    assert s["mean_tokens_correct"] == 20 and s["mean_tokens_incorrect"] == 30
    assert s["truncation_rate"] == 0.5 and s["accuracy"] == 0.5
    assert s["tokens_per_correct"] == 50  # 100 tokens spent for 2 correct answers
    none = length_summary([5, 7], [False, False], [False, False])
    assert none["tokens_per_correct"] is None and none["mean_tokens_correct"] is None


def test_accuracy_by_length_quantile():
    tokens = [5, 1, 8, 3, 2, 7, 4, 6]
    correct = [False, True, False, True, True, False, True, False]
    table = accuracy_by_length(tokens, correct, quantiles=4)
    assert table["n"].tolist() == [2, 2, 2, 2]
    assert table["min_tokens"].tolist() == [1, 3, 5, 7] and table["max_tokens"].tolist() == [2, 4, 6, 8]
    assert table["accuracy"].tolist() == [1.0, 1.0, 0.0, 0.0]
    tied = accuracy_by_length([4, 4, 4], [True, False, True], quantiles=4)
    assert tied["n"].sum() == 3 and len(tied) == 3  # never more bins than samples


def test_locate_answer():
    assert locate_answer("17 is not it; the answer is 7.", ["7"]) == len("17 is not it; the answer is 7")
    assert locate_answer("x = 2.5 then 5", ["5"]) == len("x = 2.5 then 5")
    assert locate_answer("so \\boxed{42}", [None, "42"]) == len("so \\boxed{42")
    assert locate_answer("nothing here", ["9", ""]) is None


def test_outcome_efficiency_by_hand():
    texts = ["ab 7 cdefgh", "7", "the sum is 12 12", "wrong 3", "no number"]
    answers = [["7"], ["7"], [None, "12"], ["3"], ["5"]]
    correct = [True, True, True, False, True]
    got = outcome_efficiency(texts, answers, correct)
    ratios = [4 / 11, 1 / 1, 13 / 16]  # characters up to the end of the first answer / all
    assert got["outcome_efficiency"] == pytest.approx(np.mean(ratios))
    assert got["outcome_efficiency_all"] == pytest.approx(sum(ratios) / 5)
    assert got["n_located"] == 3 and got["n_unlocated"] == 1 and got["n_correct"] == 4
    words = outcome_efficiency(texts[:1], answers[:1], [True], count=lambda t: len(t.split()))
    assert words["outcome_efficiency"] == pytest.approx(2 / 3)  # "ab 7" of "ab 7 cdefgh"


@pytest.mark.parametrize(
    ("base_len", "length", "base_acc", "acc", "want"),
    [
        (100, 80, 0.5, 0.6, 1 * 0.2 + 3 * 0.2),  # shorter and more accurate
        (100, 80, 0.5, 0.4, 1 * 0.2 - 5 * 0.2),  # shorter but less accurate: penalty g=5
        (100, 120, 0.5, 0.5, -0.2),  # longer, same accuracy
    ],
)
def test_aes_by_hand(base_len, length, base_acc, acc, want):
    got = aes(base_len, length, base_acc, acc)
    assert got["aes"] == pytest.approx(want)
    assert got["d_len"] == pytest.approx((base_len - length) / base_len)


def test_aes_undefined_without_base_accuracy():
    assert aes(100, 50, 0.0, 0.3)["aes"] is None


# ---- CLI on real run folders ------------------------------------------------

@pytest.fixture(scope="module")
def runs(tiny_model, tmp_path_factory):
    """Two real passk runs of the tiny model (different max_new_tokens, so lengths
    differ). The random model is never right, so some samples are relabelled
    correct with their first character as the extracted answer."""
    from evalkit.passk import PasskOptions, run_passk

    root = tmp_path_factory.mktemp("length_runs")
    paths = []
    for name, max_new, every in (("base", 8, 2), ("tuned", 4, 3)):
        out = root / name
        run_passk(PasskOptions(model=str(tiny_model), task="arith", n=4, ks=(1, 4), limit=2,
                               max_new_tokens=max_new, batch_size=8, grader_workers=1), out)
        records = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
        for j, r in enumerate(records):
            if j % every == 0 and r["completion"].strip():
                r["outcome"], r["extracted"] = "correct", r["completion"].strip()[0]
            else:
                r["outcome"] = "incorrect"
        (out / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        paths.append(out)
    return paths


def _records(path):
    return [json.loads(x) for x in (path / "samples.jsonl").read_text().splitlines()]


def test_length_cli_against_samples(runs, tiny_model, tmp_path):
    base, tuned = runs
    out = tmp_path / "rep"
    result = CliRunner().invoke(app, ["length", str(tuned), "--base", str(base), "--model", str(tiny_model),
                                      "--quantiles", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "length.json").read_text())
    row = report["tables"]["runs"][0]
    recs, base_recs = _records(tuned), _records(base)
    tokens = np.array([r["num_tokens"] for r in recs])
    ok = np.array([r["outcome"] == "correct" for r in recs])
    assert row["mean_tokens"] == pytest.approx(tokens.mean())
    assert row["truncation_rate"] == pytest.approx(np.mean([r["finish_reason"] == "length" for r in recs]))
    assert row["tokens_per_correct"] == pytest.approx(tokens.sum() / ok.sum())
    base_len = np.mean([r["num_tokens"] for r in base_recs])
    base_acc = np.mean([r["outcome"] == "correct" for r in base_recs])
    assert row["aes"] == pytest.approx(aes(base_len, tokens.mean(), base_acc, ok.mean())["aes"])
    assert report["base"]["mean_tokens"] == pytest.approx(base_len)
    # the run's own tokenizer is the length unit (completions may hold special tokens)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)

    def count(text):
        return len(tok(text, add_special_tokens=False)["input_ids"])

    want = outcome_efficiency([r["completion"] for r in recs], [[r["extracted"]] for r in recs], ok, count)
    assert row["outcome_efficiency"] == pytest.approx(want["outcome_efficiency"])
    assert report["outcome_efficiency_unit"].startswith("tokens")
    assert sum(b["n"] for b in report["tables"]["by_length"]) == len(recs)
    assert report["runs"][0]["model"]["sha256"] and report["runs"][0]["task"]["name"] == "arith"
    assert (out / "length_runs.csv").is_file() and (out / "length_by_length.csv").is_file()


def test_length_cli_bad_input(runs, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(runs[0], other)
    summary = json.loads((other / "summary.json").read_text())
    summary["task"]["seed"] = 99
    (other / "summary.json").write_text(json.dumps(summary))
    runner = CliRunner()
    assert runner.invoke(app, ["length", str(runs[1]), "--base", str(other)]).exit_code == 2
    mixed = runner.invoke(app, ["length", str(runs[1]), str(other), "--allow-mixed-tasks"])
    assert mixed.exit_code == 0, mixed.output
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "summary.json").write_text("{not json")
    (broken / "samples.jsonl").write_text("")
    result = runner.invoke(app, ["length", str(broken)])
    assert result.exit_code == 2 and "unreadable" in result.output
