"""Bad input across every command: exit 2, exactly one line naming the problem, no traceback,
nothing written. One row per case; the fixtures build the broken files in the test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.refusals import assert_refused, fill
from typer.testing import CliRunner

from evalkit.cli import app

runner = CliRunner()
FAST = ["--n", "2", "--k", "1,2", "--limit", "2", "--max-new-tokens", "4", "--batch-size", "4", "--device", "cpu"]


@pytest.fixture(scope="module")
def files(tiny_model, tmp_path_factory):
    """Broken and odd inputs, made once."""
    from safetensors.torch import load_file, save_file

    root = tmp_path_factory.mktemp("bad")
    made = {"model": str(tiny_model), "root": root}
    weights = next(Path(tiny_model).glob("*.safetensors"))
    nan = Path(shutil.copytree(tiny_model, root / "nan_model"))
    tensors = load_file(weights)
    name = next(k for k in tensors if "q_proj" in k)
    tensors[name][0, 0] = float("nan")
    save_file(tensors, nan / weights.name, metadata={"format": "pt"})
    made["nan_model"] = str(nan)
    corrupt = Path(shutil.copytree(tiny_model, root / "corrupt_model"))
    (corrupt / weights.name).write_bytes(b"\x00garbage" * 100)
    made["corrupt_model"] = str(corrupt)
    truncated = Path(shutil.copytree(tiny_model, root / "truncated_model"))
    data = weights.read_bytes()
    (truncated / weights.name).write_bytes(data[: len(data) // 2])
    made["truncated_model"] = str(truncated)
    (root / "no_config").mkdir()
    made["no_config"] = str(root / "no_config")
    no_weights = root / "no_weights"
    no_weights.mkdir()
    shutil.copy(Path(tiny_model) / "config.json", no_weights)
    made["no_weights"] = str(no_weights)
    (root / "a_file").write_text("x")
    made["a_file"] = str(root / "a_file")
    (root / "bad.jsonl").write_text('{"question": "1+1?", "answer": "2"}\n{not json\n')
    (root / "latin1.jsonl").write_bytes('{"question": "caf\xe9?", "answer": "1"}\n'.encode("latin-1"))
    (root / "noanswer.jsonl").write_text('{"question": "1+1?"}\n')
    (root / "list.jsonl").write_text("[1, 2]\n")
    (root / "empty.jsonl").write_text("\n")
    (root / "dup.jsonl").write_text('{"id": "a", "question": "q", "answer": "1"}\n' * 2)
    (root / "foreign").mkdir()
    (root / "foreign" / "notes.txt").write_text("mine")
    (root / "unrelated").mkdir()
    (root / "unrelated" / "x.json").write_text(json.dumps({"hello": 1}))
    (root / "notoml.toml").write_text("this = is [not")
    for name in ("bad.jsonl", "latin1.jsonl", "noanswer.jsonl", "list.jsonl", "empty.jsonl", "dup.jsonl"):
        made[name] = str(root / name)
    return made


def P(*args):  # noqa: N802 (reads as a row of the table)
    return ["passk", "{model}", *FAST, *args]


CASES = [
    # (arguments, a fragment of the message)
    (["passk", "{root}/missing", *FAST], "no such folder"),
    (["passk", "{no_config}", *FAST], "no config.json"),
    (["passk", "{no_weights}", *FAST], "no weights"),
    (["passk", "{corrupt_model}", *FAST], "cannot load the checkpoint"),
    (["passk", "{truncated_model}", *FAST], "cannot load the checkpoint"),
    (["passk", "{nan_model}", *FAST], "holds NaN or Inf"),
    (["passk", "{a_file}", *FAST], "not a checkpoint folder"),
    (P("--temperature", "nan"), "finite number"),
    (P("--temperature", "-1"), "--temperature"),
    (P("--top-p", "0"), "--top-p"),
    (P("--top-p", "1.5"), "--top-p"),
    (P("--grade-timeout", "inf"), "finite number"),
    (["passk", "{model}", "--n", "0", "--k", "1"], "--n 0"),
    (["passk", "{model}", "--n", "2", "--k", "0"], "--k 0"),
    (["passk", "{model}", "--n", "2", "--k", "4"], "between 1 and n = 2"),
    (["passk", "{model}", "--k", "a,b"], "comma-separated integers"),
    (P("--limit", "-1"), "--limit -1"),
    (P("--batch-size", "0"), "--batch-size"),
    (P("--threads", "-1"), "--threads -1"),
    (P("--ray-workers", "-1"), "--ray-workers -1"),
    (P("--task", "nope"), "unknown task 'nope'"),
    (P("--task", "{root}/missing.jsonl"), "no such task file"),
    (P("--task", "{bad.jsonl}"), ":2: not valid JSON"),
    (P("--task", "{latin1.jsonl}"), "not UTF-8"),
    (P("--task", "{noanswer.jsonl}"), "needs a question"),
    (P("--task", "{list.jsonl}"), "expected a JSON object"),
    (P("--task", "{empty.jsonl}"), "holds no problems"),
    (P("--task", "{dup.jsonl}"), "problem id 'a' is given twice (problems 1 and 2)"),
    (P("--task-config", "notjson"), "not JSON"),
    (P("--task-config", "[1]"), "must be a JSON object"),
    (P("--task-config", '{"max_operand": -5}'), "max_operand must be an integer of at least 1"),
    (P("--task-config", '{"max_operand": "x"}'), "max_operand must be an integer"),
    (P("--task-config", '{"bogus": 1}'), "unknown config keys"),
    (P("--task", "chain_sum", "--task-config", '{"min_terms": "x"}'), "bad config"),
    (P("--dtype", "float8"), "--dtype float8"),
    (P("--backend", "tgi"), "choose hf or vllm"),
    (P("--backend", "vllm", "--ray-workers", "2"), "drop --ray-workers"),
    (P("--out", "{a_file}/run"), "is a file, not a folder"),
    (P("--out", "{root}/foreign"), "not empty"),
    (["diff", "{model}"], "give BASE OTHER"),
    (["diff", "{model}", "{root}/missing"], "no such"),
    (["diff", "{model}", "{model}", "--atol", "-1"], "--atol"),
    (["diff", "{model}", "{model}", "--as-dtype", "int8"], "--as-dtype int8"),
    (["diff", "{model}", "{model}", "--out", "{a_file}/d"], "is a file, not a folder"),
    (["entropy"], "give one or more passk run folders"),
    (["entropy", "{root}/foreign"], "not an evalkit run folder"),
    (["entropy", "--model", "{model}"], "needs both --model and --samples"),
    (["groups", "{root}/missing"], "no such run folder"),
    (["length", "{root}/unrelated"], "not an evalkit run folder"),
    (["train", "es", "--out", "{root}/t", "--population", "1"], "--population 1"),
    (["train", "es", "--out", "{root}/t", "--noise", "weird"], "--noise weird"),
    (["train", "es", "--out", "{root}/t", "--fitness", "weird"], "--fitness weird"),
    (["train", "es", "--out", "{root}/t", "--sigma", "0"], "--sigma"),
    (["train", "grpo", "--out", "{root}/t", "--group-size", "1"], "--group-size 1"),
    (["train", "grpo", "--out", "{root}/t", "--lr", "nan"], "finite number"),
    (["train", "grpo", "--out", "{root}/t", "--temperature", "0"], "--temperature"),
    (["train", "grpo", "--out", "{root}/t", "--loss", "ppo"], "--loss ppo"),
    (["train", "grpo", "--out", "{a_file}/t", "--model", "{model}"], "is a file, not a folder"),
    (["forgetting", "{model}", "{model}", "--suite", "nope"], "unknown benchmark"),
    (["forgetting", "{model}", "{model}", "--mc-norm", "max"], "--mc-norm max"),
    (["forgetting", "{model}", "{model}", "--limit", "-1"], "--limit -1: must be >= 0"),
    (["forgetting", "{model}", "{model}", "--out", "{a_file}/f"], "is a file, not a folder"),
    (["report", "{root}/unrelated", "--out", "{root}/r"], "no usable input"),
    (["report", "{root}/foreign", "--out", "{root}/r"], "no usable input"),
    (["report", "{root}/unrelated", "--out", "{a_file}/r"], "is a file, not a folder"),
    (["regrade", "{root}/foreign"], "not an evalkit passk run folder"),
    (["study", "{root}/missing.toml", "--out", "{root}/s"], "no such study file"),
    (["study", "{root}/notoml.toml", "--out", "{root}/s"], "not a readable TOML"),
]


@pytest.mark.parametrize(("args", "fragment"), CASES, ids=[f"{a[0]}-{i}" for i, (a, _) in enumerate(CASES)])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(files, args, fragment):
    assert_refused(lambda: runner.invoke(app, [fill(a, files) for a in args]), fragment, files["root"])


def test_a_corrupt_middle_line_is_named_and_repair_resamples_exactly_it(files, tmp_path):
    out = tmp_path / "run"
    args = ["passk", files["model"], *FAST, "--out", str(out)]
    assert runner.invoke(app, args).exit_code == 0
    reference = (out / "samples.jsonl").read_text().splitlines()
    lines = list(reference)
    lines[1] = lines[1][:30]  # a complete line that is not JSON
    (out / "samples.jsonl").write_text("\n".join(lines) + "\n")
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "samples.jsonl:2: corrupt line" in result.output
    assert "--repair" in result.output
    repaired = runner.invoke(app, [*args, "--repair"])
    assert repaired.exit_code == 0, repaired.output
    assert (out / "samples.rejected.jsonl").read_text() == lines[1] + "\n"
    key = lambda line: (json.loads(line)["problem_id"], json.loads(line)["sample_index"])  # noqa: E731
    assert sorted((out / "samples.jsonl").read_text().splitlines(), key=key) == sorted(reference, key=key)


def test_ctrl_c_during_a_checkpoint_save_leaves_no_temporary_folder(files, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evalkit.train.common import latest_checkpoint, save_checkpoint, sweep_partial_checkpoints

    model = AutoModelForCausalLM.from_pretrained(files["model"])
    tok = AutoTokenizer.from_pretrained(files["model"])

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tok, "save_pretrained", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(model, tok, tmp_path, 3, {"kind": "es"})
    assert list(tmp_path.iterdir()) == [] and latest_checkpoint(tmp_path) is None
    (tmp_path / ".step-000004.tmp999").mkdir()  # left by a SIGKILL mid-save
    sweep_partial_checkpoints(tmp_path)  # what a resumed trainer does first
    assert list(tmp_path.iterdir()) == []
