"""`evalkit forgetting` end to end on tiny models: a model against itself
shows no difference and zero KL; against another model, completions, choice
scores and KL differ; bad input exits 2 with a message naming the fix."""

import json
import shutil

import pytest
import typer
from typer.testing import CliRunner

from evalkit.cli_forgetting import forgetting
from evalkit.errors import UsageError, handle_errors
from evalkit.forgetting.runner import parse_mc_files, resolve_suite

app = typer.Typer()
app.command()(handle_errors(forgetting))
runner = CliRunner()

MC_ROWS = [
    {"question": "2 + 2 =", "choices": ["4", "5", "22"], "answer": 0},
    {"question": "The sky is", "choices": ["blue", "made of cheese"], "answer": 0},
    {"question": "Opposite of hot:", "choices": ["warm", "cold"], "answer": 1},
]


@pytest.fixture(scope="module")
def mc_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("mc") / "tiny_mc.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in MC_ROWS) + "\n")
    return path


@pytest.fixture(scope="module")
def other_model(tmp_path_factory):
    from helpers.tinymodel import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("other") / "model", seed=1)


def _run(base, model, out, mc_file, *extra):
    args = [str(base), str(model), "--suite", "letter_counting", "--mc-file", f"tinymc={mc_file}",
            "--limit", "3", "--max-new-tokens", "6", "--train-task", "arith", "--kl-prompts", "3",
            "--kl-max-new-tokens", "4", "--device", "cpu", "--grade-timeout", "60", "--out", str(out), *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads((out / "forgetting.json").read_text())
    items = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    return result.output, report, items


def test_model_against_itself_shows_no_difference(tiny_model, mc_file, tmp_path):
    output, report, items = _run(tiny_model, tiny_model, tmp_path / "same", mc_file)
    assert [r["benchmark"] for r in report["benchmarks"]] == ["letter_counting", "tinymc"]
    for row in report["benchmarks"]:
        assert row["difference"] == row["ci_low"] == row["ci_high"] == 0.0
        assert (row["mcnemar"]["b"], row["mcnemar"]["c"], row["mcnemar"]["p_value"]) == (0, 0, 1.0)
    assert report["kl"]["status"] == "computed" and report["kl"]["kl_sequence"] == 0.0
    assert report["models"]["base"]["sha256"] == report["models"]["model"]["sha256"]
    assert report["verdict"].startswith("NO SIGNIFICANT CHANGE")
    assert len(items) == 3 + len(MC_ROWS)
    for i in items:
        assert (i["base_completion"], i["base_detail"]) == (i["model_completion"], i["model_detail"]), i
    assert "KL(pi_base || pi_model)" in output and "NO SIGNIFICANT CHANGE" in output


def test_different_model_shows_differences(tiny_model, other_model, mc_file, tmp_path):
    _, report, items = _run(tiny_model, other_model, tmp_path / "diff", mc_file)
    assert report["kl"]["kl_sequence"] > 0 and report["kl"]["kl_sequence_se"] is not None
    assert report["models"]["base"]["sha256"] != report["models"]["model"]["sha256"]
    gen = [i for i in items if i["benchmark"] == "letter_counting"]
    assert any(i["base_completion"] != i["model_completion"] for i in gen)
    choice = [i for i in items if i["benchmark"] == "tinymc"]
    assert all(i["base_detail"] != i["model_detail"] for i in choice)  # choice scores moved
    rows = {r["benchmark"]: r for r in report["benchmarks"]}
    mc_row = rows["tinymc"]
    flips = sum(i["base_correct"] != i["model_correct"] for i in choice)
    assert mc_row["mcnemar"]["b"] + mc_row["mcnemar"]["c"] == flips
    assert mc_row["difference"] == pytest.approx(
        (sum(i["model_correct"] for i in choice) - sum(i["base_correct"] for i in choice)) / len(choice))


def test_different_tokenizers_refuse_kl_but_compare_accuracy(tiny_model, mc_file, tmp_path):
    from transformers import AutoTokenizer

    folder = tmp_path / "retok"
    shutil.copytree(tiny_model, folder)
    tok = AutoTokenizer.from_pretrained(folder)
    tok.add_tokens(["<extra>"])
    tok.save_pretrained(folder)
    output, report, _ = _run(tiny_model, folder, tmp_path / "out", mc_file)
    assert report["kl"]["status"] == "refused" and "tokenizers differ" in report["kl"]["reason"]
    assert len(report["benchmarks"]) == 2
    assert "not computed" in output


@pytest.mark.parametrize("args,message", [
    (["--suite", "no_such_bench"], "unknown benchmark 'no_such_bench'"),
    (["--suite", "letter_counting", "--mc-file", "mmlu=/nonexistent.jsonl"], "no such file"),
    (["--suite", "letter_counting", "--mc-file", "mmlu"], "expected NAME=PATH"),
    (["--suite", "mmlu"], "--mc-file mmlu=path.jsonl"),
    (["--mc-norm", "max"], "--mc-norm max"),
])
def test_bad_input_exits_2_with_the_fix(tiny_model, args, message):
    result = runner.invoke(app, [str(tiny_model), str(tiny_model), *args])
    assert result.exit_code == 2
    assert message in result.output


def test_default_suite_skips_multiple_choice_without_files():
    chosen, skipped = resolve_suite("default", ())
    assert [n for n, _ in chosen] == ["word_sorting", "letter_counting", "spell_backward", "humaneval"]
    assert [s.split()[0] for s in skipped] == ["mmlu", "hellaswag", "arc"]
    assert all("--mc-file" in s and '"choices"' in s for s in skipped)
    chosen, skipped = resolve_suite("default", parse_mc_files(["mmlu=x.jsonl", "mine=y.jsonl"]))
    assert ("mmlu", "mc") in chosen and ("mine", "mc") in chosen and len(skipped) == 2


def test_user_suite_accepts_any_reasoning_gym_family():
    chosen, _ = resolve_suite("caesar_cipher, humaneval", ())
    assert chosen == [("caesar_cipher", "rgym"), ("humaneval", "humaneval")]
    with pytest.raises(UsageError, match="unknown benchmark"):
        resolve_suite("humaneval,typo", ())
