"""Files from outside are untrusted (issue 43): checkpoints, their configs, training logs and two
models compared, tried as a hostile file would. Each row is one input: exit 2, one line naming
the file, the field, what was expected and what was found, nothing written and every file under
the fixture's folder as it was (`helpers.refusals.assert_refused`); or, where the input is
valid, the correct result. The importers' rows are in tests/test_import_untrusted.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import hostile
from helpers.refusals import assert_refused, fill
from typer.testing import CliRunner

from evalkit.cli import app

runner = CliRunner()


def _json(path: Path, data) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(path)


def _model_copy(tiny_model, folder: Path, config_change=None) -> str:
    shutil.copytree(tiny_model, folder)
    if config_change is not None:
        config = json.loads((folder / "config.json").read_text())
        config_change(config)
        (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def _lora(tiny_model, folder: Path, **config) -> str:
    from helpers.formats import save_lora_by_hand

    adapter, _ = save_lora_by_hand(tiny_model, folder)
    data = json.loads((adapter / "adapter_config.json").read_text())
    (adapter / "adapter_config.json").write_text(json.dumps({**data, **config}))
    return str(adapter)


def _lora_zero_rows(tiny_model, folder: Path) -> str:
    from safetensors.torch import load_file, save_file

    adapter = Path(_lora(tiny_model, folder))
    weights = load_file(str(adapter / "adapter_model.safetensors"))
    weights = {k: (v[:0] if "lora_A" in k else v[:, :0]) for k, v in weights.items()}
    save_file(weights, str(adapter / "adapter_model.safetensors"))
    return str(adapter)


def _dcp(tiny_model, folder: Path, change) -> str:
    from helpers.formats import save_dcp

    return str(hostile.dcp_metadata(save_dcp(tiny_model, folder), change))


def _relative_path(meta, path: str) -> None:
    for info in meta.storage_data.values():
        info.relative_path = path


def _past_the_end(meta) -> None:
    info = next(iter(meta.storage_data.values()))
    info.length += 1 << 30


def _index(tiny_model, folder: Path, weight_map) -> str:
    shutil.copytree(tiny_model, folder)
    _json(folder / "model.safetensors.index.json", {"metadata": {}, "weight_map": weight_map})
    return str(folder)


def _no_config_layers(folder: Path, layers: int) -> str:
    from helpers.checkpoints import SHAPES, base_values, save

    values = base_values("F32")
    for i in range(2, layers):
        values |= {n.replace("layers.1.", f"layers.{i}."): v for n, v in values.items() if "layers.1." in n}
    assert len([n for n in SHAPES if "layers.1." in n]) == 2
    return str(save(folder, values, "F32", config=None))


def _run_folder(root: Path) -> str:
    root.mkdir(parents=True, exist_ok=True)
    path = root / "samples.jsonl"
    path.write_text("".join(json.dumps({"problem_id": f"p{i % 3}", "completion": str(i % 2), "gold": "1",
                                        "num_tokens": 1}) + "\n" for i in range(12)))
    result = runner.invoke(app, ["import", "jsonl", str(path), "--out", str(root / "run"), "--gold-field", "gold"])
    assert result.exit_code == 0, result.output
    return str(root / "run")


STEPS = {1: 0.25, 2: 0.5, 3: 0.75, 4: 0.5, 5: 0.25, 6: 0.5}


def _events(folder: Path, damage=None) -> str:
    path = hostile.tb_events(folder, STEPS)
    if damage is not None:
        damage(path)
    return str(path)


@pytest.fixture(scope="module")
def files(tiny_model, tmp_path_factory):
    from helpers.tinymodel import make_tiny_model

    root = tmp_path_factory.mktemp("untrusted")
    made = {"root": root, "model": str(tiny_model)}
    made["three_layers"] = str(make_tiny_model(root / "three", layers=3))
    made["pth_stride0"] = str(hostile.pth_view(root / "stride0" / "pytorch_model.pth"))
    made["pth_stride0_legacy"] = str(hostile.pth_view(root / "stride0_legacy" / "old.pth", legacy=True))
    made["pth_meta"] = str(hostile.pth_meta(root / "meta" / "pytorch_model.bin"))
    made["pth_deep"] = str(hostile.pth_deep(root / "deep" / "pytorch_model.bin"))
    made["verl_huge"] = str(hostile.verl_world(root / "verl_huge", 10**9))
    made["verl_text"] = str(hostile.verl_world(root / "verl_text", 1, fsdp_world="1"))
    made["kv_text"] = _model_copy(tiny_model, root / "kv_text", lambda c: c.update(num_key_value_heads="2"))
    made["hidden_neg"] = _model_copy(tiny_model, root / "hidden_neg", lambda c: c.update(hidden_size=-5))
    made["config_deep"] = _model_copy(tiny_model, root / "config_deep")
    (Path(made["config_deep"]) / "config.json").write_text("[" * 200_000 + "]" * 200_000)
    made["lora_r0"] = _lora(tiny_model, root / "lora_r0", r=0)
    made["lora_rows0"] = _lora_zero_rows(tiny_model, root / "lora_rows0")
    made["lora_regex"] = _lora(tiny_model, root / "lora_regex", alpha_pattern={"q_proj(": 16})
    made["lora_alpha_text"] = _lora(tiny_model, root / "lora_alpha_text", lora_alpha="16")
    made["dcp_escape"] = _dcp(tiny_model, root / "dcp_escape", lambda m: _relative_path(m, "../../../etc/passwd"))
    made["dcp_past_end"] = _dcp(tiny_model, root / "dcp_past_end", _past_the_end)
    made["index_escape"] = _index(tiny_model, root / "index_escape", {"model.norm.weight": "../model.safetensors"})
    made["index_number"] = _index(tiny_model, root / "index_number", {"model.norm.weight": 5})
    made["names_2"] = _no_config_layers(root / "names_2", 2)
    made["names_3"] = _no_config_layers(root / "names_3", 3)
    made["run"] = _run_folder(root / "imported")
    made["tb_crc"] = _events(root / "tb_crc", lambda p: hostile.tb_float_at(p, 3, 0.75, 1.2))
    made["tb_length"] = _events(root / "tb_length", lambda p: hostile.tb_length_at(p, 3, 9))
    made["tb_torn"] = _events(root / "tb_torn", lambda p: p.write_bytes(p.read_bytes()[:-5]))
    made["tb_range"] = _events(root / "tb_range", lambda p: hostile.tb_float_at(p, 3, 0.75, 1.2, fix_crc=True))
    made["tb_garbage"] = _json(root / "tb_garbage" / "events.out.tfevents.1.host", "not a TFRecord at all")
    made["state_range"] = _json(root / "trl" / "trainer_state.json", {"log_history": [
        {"step": 1, "frac_reward_zero_std": 0.5}, {"step": 2, "frac_reward_zero_std": 1.2}]})
    made["verl_step"] = _json(root / "verl_log" / "log.jsonl", '{"step": "abc", "data": {"actor/entropy": 1}}\n')
    made["log_deep"] = _json(root / "deep_log" / "metrics.jsonl", "[" * 200_000 + "]" * 200_000 + "\n")
    made["task_deep"] = _json(root / "task" / "problems.jsonl", '{"question": "1+1?", "answer": "2"}\n' +
                              "[" * 200_000 + "]" * 200_000 + "\n")
    return made


D = ["--out", "{root}/out"]
GROUPS = ["groups", "{run}", "--train-group-size", "4", "--out", "{root}/g", "--train-log"]

CASES = [
    # checkpoints: declared sizes against the file, before anything is allocated
    (["diff", "{model}", "{pth_stride0}", *D], "34359738368 elements (137438953472 bytes) viewed over a storage of 16 "
                                               "bytes (strides [0]), more than the file's"),
    (["diff", "{model}", "{pth_stride0_legacy}", *D], "viewed over a storage of 16 bytes"),
    (["diff", "{model}", "{pth_meta}", *D], "tensor 'model.norm.weight': a meta tensor [32] with no data in the file"),
    (["diff", "{model}", "{pth_deep}", *D], "nested more than 64 levels deep"),
    (["diff", "{model}", "{verl_huge}", "--format", "verl", *D],
     "world size 1000000000, but the shards of rank 1, ... are missing (999999999 of 1000000000)"),
    (["diff", "{model}", "{verl_text}", "--format", "verl", *D],
     "field 'world_size': expected an integer >= 1, found a string ('1')"),
    (["diff", "{model}", "{dcp_escape}", *D], "relative_path '../../../etc/passwd' is not a file of the checkpoint folder"),
    (["diff", "{model}", "{dcp_past_end}", *D], "ends past the end of the file"),
    (["diff", "{model}", "{index_escape}", *D],
     "field 'weight_map.model.norm.weight': expected a file name in the same folder, found a string ('../model"),
    (["diff", "{model}", "{index_number}", *D], "field 'weight_map.model.norm.weight': expected a file name"),
    # config.json and adapter_config.json: every field typed
    (["diff", "{model}", "{kv_text}", *D],
     "config.json: field 'num_key_value_heads': expected an integer in [1, 1099511627776] or null, found a string ('2')"),
    (["diff", "{model}", "{hidden_neg}", *D], "field 'hidden_size': expected an integer in [1, 1099511627776] or null, found -5"),
    (["diff", "{model}", "{config_deep}", *D], "config.json: nested too deeply to read"),
    (["diff", "{model}", "{lora_r0}", *D], "adapter_config.json: field 'r': expected an integer in [1, 1048576], found 0"),
    (["diff", "{model}", "{lora_rows0}", *D], "lora_A has 0 rows, adapter_config.json's r is 4"),
    (["diff", "{model}", "{lora_regex}", *D],
     "field 'alpha_pattern.q_proj(': expected a key that is a valid regular expression"),
    (["diff", "{model}", "{lora_alpha_text}", *D], "field 'lora_alpha': expected a finite number >= 0, found a string"),
    # two models: one architecture, checked in one place, before anything is loaded or written
    (["interpolate", "{model}", "{three_layers}", "--device", "cpu", "--out", "{root}/i"],
     "num_hidden_layers 2 vs 3); interpolate needs two checkpoints of the same model"),
    (["diff", "{model}", "{three_layers}", *D], "num_hidden_layers 2 vs 3); diff needs two checkpoints of the same model"),
    (["diff", "{names_2}", "{names_3}", *D], "3 layers by its tensor names"),
    (["forgetting", "{model}", "{three_layers}", "--suite", "letter_counting", "--limit", "1", "--device", "cpu",
      "--out", "{root}/f"], "forgetting needs two checkpoints of the same model"),
    # training logs: TensorBoard records CRC-checked, evalkit's names typed
    ([*GROUPS, "{tb_crc}"], "record 4 at byte"),
    ([*GROUPS, "{tb_crc}"], "its data fails its CRC (corrupt); the last good step is 2 (3 records read); rerun with "
                            "--salvage"),
    ([*GROUPS, "{tb_length}"], "its length field fails its CRC (corrupt); the last good step is 2"),
    ([*GROUPS, "{tb_torn}"], "run past the end of the file (torn); the last good step is 5"),
    ([*GROUPS, "{tb_range}"], "step 3: field 'frac_reward_zero_std': expected a number in [0, 1], found 1.2"),
    ([*GROUPS, "{tb_garbage}"], "not a TensorBoard event file"),
    ([*GROUPS, "{state_range}"], "log_history[1]: field 'frac_reward_zero_std': expected a number in [0, 1], found 1.2"),
    ([*GROUPS, "{verl_step}"], "log.jsonl:1: field 'step': expected an integer, found a string ('abc')"),
    ([*GROUPS, "{log_deep}"], "metrics.jsonl:1: nested too deeply to read"),
    (["passk", "{model}", "--n", "2", "--k", "1", "--limit", "1", "--max-new-tokens", "2", "--device", "cpu",
      "--task", "{task_deep}", "--out", "{root}/p"], "problems.jsonl:2: nested too deeply to read"),
]


@pytest.mark.parametrize(("args", "fragment"), CASES, ids=[f"{a[0]}-{i}" for i, (a, _) in enumerate(CASES)])
def test_an_untrusted_file_is_one_line_exit_2_and_writes_nothing(files, args, fragment):
    assert_refused(lambda: runner.invoke(app, [fill(a, files) for a in args]), fragment, files["root"])


def test_salvage_reads_the_intact_records_around_a_corrupt_one(files, tmp_path):
    """--salvage: the record failing its CRC (step 3) is skipped, every other step is read, and the
    skipped bytes are named; a corrupted length field mid-file loses its record only, not 3 to 6."""
    from evalkit.trainlogs import read_training_log

    for name in ("tb_crc", "tb_length"):
        with pytest.warns(UserWarning, match="1 unreadable stretches skipped"):
            records = read_training_log(Path(files[name]), salvage=True)
        assert {r["step"]: r["frac_reward_zero_std"] for r in records} == {s: v for s, v in STEPS.items() if s != 3}
    result = runner.invoke(app, ["groups", files["run"], "--train-log", files["tb_length"], "--train-group-size", "4",
                                 "--salvage", "--out", str(tmp_path / "g")])
    assert result.exit_code == 0, result.output
    assert "unreadable stretches skipped" in result.output
    observed = json.loads((tmp_path / "g" / "groups.json").read_text())["tables"]["train_log"]
    assert [r["step"] for r in observed] == [1, 2, 4, 5, 6]


def test_an_untouched_event_file_reads_every_step(files, tmp_path):
    from evalkit.trainlogs import read_training_log

    path = hostile.tb_events(tmp_path / "ok", STEPS)
    assert {r["step"]: r["frac_reward_zero_std"] for r in read_training_log(path)} == STEPS


def test_a_timeout_or_an_error_is_never_agreement():
    from evalkit.grader_compare import _entry, agrees

    class Problem:
        prompt, answer = "q", "1"

    outcomes = [("incorrect", "timeout"), ("correct", "error"), ("incorrect", "incorrect"), ("correct", "incorrect"),
                ("timeout", "timeout")]
    records = [{"problem_id": "p", "sample_index": i, "completion": "x", "outcome": a} for i, (a, _) in enumerate(outcomes)]
    others = {("p", i): {"outcome": b, "extracted": None, "detail": None} for i, (_, b) in enumerate(outcomes)}
    entry = _entry(records, others, {"p": Problem()}, "evalkit", "other")
    assert (entry["samples"], entry["decided"], entry["undecided"], entry["disagree"]) == (5, 2, 3, 1)
    assert entry["agreement"] == 0.5 and len(entry["undecided_samples"]) == 3
    assert [agrees(a, b) for a, b in outcomes] == [None, None, True, False, None]


def test_a_grader_that_fails_on_every_sample_agrees_with_nothing(tmp_path, monkeypatch):
    """A user's grader raising on every completion: every sample undecided, agreement null."""
    run = Path(_run_folder(tmp_path / "imp"))
    (tmp_path / "boom.py").write_text("def grade(completion, gold):\n    raise ValueError('no')\n")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["regrade", str(run), "--compare", "boom:grade"])
    assert result.exit_code == 0, result.output
    (entry,) = json.loads((run / "grader-compare.json").read_text())["comparisons"]
    assert (entry["decided"], entry["undecided"], entry["agreement"], entry["disagree"]) == (0, 12, None, 0)
    assert "12 with a timeout or error counted in neither" in result.output


def test_the_same_architecture_check_lets_a_model_through_with_itself_and_a_planted_copy(files, tmp_path):
    """The check refuses what differs, not what matches: a model and a copy with changed weights pass."""
    from helpers.formats import planted_copy

    from evalkit.checkpoints import open_checkpoint
    from evalkit.checkpoints.validate import same_architecture

    base = open_checkpoint(files["model"])
    other = open_checkpoint(str(planted_copy(Path(files["model"]), tmp_path / "planted")))
    match = same_architecture([base, other], strict=True, command="interpolate")
    assert len(match.pairs) == len(base.tensors) and not (match.missing or match.extra or match.mismatched)


def test_no_reader_allocates_more_than_a_bounded_multiple_of_its_input(tmp_path):
    """Peak resident memory each reader adds (VmHWM, reset before each read), against its file's
    size: hostile files declaring up to 128 GiB (a stride-0 view, a 2^40-byte TFRecord length,
    a world size of 10^9) are refused having added a few MiB at most; valid checkpoints read
    tensor by tensor add at most their file's size, an event file and a JSONL import a few times
    it (Python objects per record, as json.loads alone makes them).
    benchmarks/bench_reader_memory.py prints the same table at 32 MB."""
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from bench_reader_memory import make_hostile, make_inputs, measure

    hostile_rows = measure(make_hostile(tmp_path / "hostile"))
    for row in hostile_rows:
        assert row["result"].startswith("refused") and row["peak_growth_bytes"] < 32 << 20, row
    bounds = {"pth zip, tensor by tensor": 1.5, "pth legacy, tensor by tensor": 1.5,
              "safetensors, tensor by tensor": 1.5, "TensorBoard event file": 8,
              "baseline: json.loads of the JSONL lines": 8, "JSONL import reader": 8}
    rows = measure(make_inputs(tmp_path, 2))
    for row in rows:
        assert row["result"] == "read", row
        assert row["peak_growth_bytes"] <= bounds[row["reader"]] * row["file_bytes"] + (8 << 20), row
