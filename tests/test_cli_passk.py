"""`evalkit passk` through the CLI: a good run, resume, and every bad input."""

import json

import pytest
from typer.testing import CliRunner

from evalkit.cli import app

runner = CliRunner()
FAST = ["--n", "2", "--k", "1,2", "--limit", "2", "--max-new-tokens", "4", "--batch-size", "4"]


def invoke(*args):
    return runner.invoke(app, ["passk", *map(str, args)])


@pytest.fixture(scope="module")
def good_run(tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "good"
    result = invoke(tiny_model, *FAST, "--out", out)
    assert result.exit_code == 0, result.output
    return out


def test_good_run_writes_contract(good_run):
    summary = json.loads((good_run / "summary.json").read_text())
    lines = (good_run / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 4 and summary["samples"] == 4 and summary["complete"]
    record = json.loads(lines[0])
    for key in ("problem_id", "sample_index", "completion", "extracted", "outcome", "num_tokens",
                "finish_reason", "mean_entropy", "seed"):
        assert key in record
    assert summary["sampling"]["top_k"] == 0 and summary["sampling"]["temperature"] == 1.0
    assert summary["model"]["sha256"] and summary["first_prompt"].startswith("<|im_start|>user")
    assert [row["k"] for row in summary["pass_at_k"]] == [1, 2]


def test_rerun_is_a_no_op_resume(good_run, tiny_model):
    before = (good_run / "samples.jsonl").read_bytes()
    result = invoke(tiny_model, *FAST, "--out", good_run)
    assert result.exit_code == 0, result.output
    assert (good_run / "samples.jsonl").read_bytes() == before


def test_different_settings_refused_naming_the_setting(good_run, tiny_model):
    before = (good_run / "samples.jsonl").read_bytes()
    result = invoke(tiny_model, *FAST, "--temperature", "0.5", "--out", good_run)
    assert result.exit_code == 2
    assert "sampling" in result.output and "0.5" in result.output
    assert (good_run / "samples.jsonl").read_bytes() == before


# Bad input to passk (paths, checkpoints, option values, task files, --out) is in the one
# table of tests/test_bad_inputs.py; this file keeps passk's own promises.


def _assert_usage_error(result, out, *fragments):
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.output.strip().startswith("error:") and result.output.count("\n") <= 2
    for fragment in fragments:
        assert fragment in result.output
    assert not out.exists(), "nothing may be written on bad input"








def test_unknown_task(tiny_model, tmp_path):
    out = tmp_path / "o"
    _assert_usage_error(invoke(tiny_model, "--task", "arithmetic-typo", *FAST, "--out", out), out, "arith", "chain_sum")










def test_jsonl_and_parquet_tasks(tiny_model, tmp_path):
    import pandas as pd

    rows = [{"id": "a", "question": "1+1?", "answer": "2"}, {"id": "b", "problem": "2+3?", "solution": "5"}]
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    pd.DataFrame([{"id": "a", "question": "1+1?", "answer": "2"}]).to_parquet(tmp_path / "p.parquet")
    for task in (jsonl, tmp_path / "p.parquet"):
        out = tmp_path / f"run-{task.suffix[1:]}"
        result = invoke(tiny_model, "--task", task, *FAST, "--out", out)
        assert result.exit_code == 0, result.output
        summary = json.loads((out / "summary.json").read_text())
        assert summary["task"]["source_sha256"] and summary["problems"] == (2 if task == jsonl else 1)


def test_help_documents_every_option():
    result = runner.invoke(app, ["passk", "--help"])
    assert result.exit_code == 0
    for option in ("--task", "--n", "--k", "--temperature", "--top-p", "--max-new-tokens", "--seed",
                   "--limit", "--batch-size", "--out"):
        assert option in result.output
