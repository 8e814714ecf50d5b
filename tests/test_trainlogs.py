"""Training logs in and out: `evalkit train --report-to tensorboard` writes event files that
TensorBoard's own reader and evalkit's (evalkit.trainlogs) read back the same, and that `groups`
and `report` read; verl's file logger and TRL's trainer_state.json read as one record per step."""

from __future__ import annotations

import json
import struct

import pytest
from typer.testing import CliRunner

from evalkit.cli import app
from evalkit.errors import UsageError
from evalkit.trainlogs import read_event_file, read_training_log

runner = CliRunner()


@pytest.fixture(scope="module")
def grpo_run(tiny_model, tmp_path_factory):
    """A 3-step GRPO run on the tiny model with --report-to tensorboard."""
    root = tmp_path_factory.mktemp("tb")
    task = root / "digits.jsonl"
    task.write_text("".join(json.dumps({"id": f"d{i}", "question": f"Digit {i}?", "answer": str(i % 10)}) + "\n"
                            for i in range(8)))
    out = root / "grpo"
    result = runner.invoke(app, ["train", "grpo", "--out", str(out), "--model", str(tiny_model), "--task", str(task),
                                 "--group-size", "4", "--prompts-per-step", "2", "--steps", "3", "--max-new-tokens",
                                 "2", "--grader-workers", "1", "--save-every", "3", "--device", "cpu",
                                 "--report-to", "tensorboard"])
    assert result.exit_code == 0, result.output
    return out


def scalars(record: dict) -> dict:
    return {k: v for k, v in record.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def test_report_to_tensorboard_writes_what_metrics_jsonl_holds(grpo_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logged = [json.loads(line) for line in (grpo_run / "metrics.jsonl").read_text().splitlines()]
    events = list((grpo_run / "tensorboard").glob("events.out.tfevents.*"))
    assert len(events) == 1
    ours = read_training_log(grpo_run / "tensorboard")
    assert [r["step"] for r in ours] == [r["step"] for r in logged] == [1, 2, 3]
    accumulator = EventAccumulator(str(grpo_run / "tensorboard"))
    accumulator.Reload()
    tags = set(accumulator.Tags()["scalars"])
    assert tags == {k for r in logged for k in scalars(r) if k != "step"}  # every scalar, and only scalars
    for record, read in zip(logged, ours, strict=True):
        for name, value in scalars(record).items():
            assert read[name] == pytest.approx(struct.unpack("<f", struct.pack("<f", value))[0], abs=0), name
    for tag in tags:  # evalkit's reader and TensorBoard's agree on every value
        theirs = {e.step: e.value for e in accumulator.Scalars(tag)}
        assert theirs == {r["step"]: r[tag] for r in ours if tag in r}, tag


def test_groups_and_report_read_the_event_files(grpo_run, tmp_path):
    import shutil

    result = runner.invoke(app, ["groups", str(_a_run(tmp_path)), "--train-log", str(grpo_run / "tensorboard"),
                                 "--train-group-size", "4", "--out", str(tmp_path / "groups")])
    assert result.exit_code == 0, result.output
    observed = json.loads((tmp_path / "groups" / "groups.json").read_text())["tables"]["train_log"]
    logged = [json.loads(line) for line in (grpo_run / "metrics.jsonl").read_text().splitlines()]
    assert [r["observed_frac_zero"] for r in observed] == [r["frac_reward_zero_std"] for r in logged]
    alone = tmp_path / "only_events"
    shutil.copytree(grpo_run / "tensorboard", alone)  # no metrics.jsonl, no run.json: only TensorBoard's files
    result = runner.invoke(app, ["report", str(alone), "--out", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    report = (tmp_path / "report" / "report.md").read_text()
    assert "training log (3 steps)" in report and "## GRPO groups" in report  # frac_reward_zero_std per step
    assert "| only_events | train-log |" in report  # the entropy law fitted over its (entropy, reward) steps


def _a_run(root):
    """A small imported run (the groups command needs one beside the log)."""
    path = root / "s.jsonl"
    path.write_text("".join(json.dumps({"problem_id": f"p{i % 3}", "completion": str(i % 2), "gold": "1",
                                        "num_tokens": 1}) + "\n" for i in range(12)))
    result = runner.invoke(app, ["import", "jsonl", str(path), "--out", str(root / "run"), "--gold-field", "gold"])
    assert result.exit_code == 0, result.output
    return root / "run"


def test_verl_file_logger_and_trl_trainer_state(tmp_path):
    verl = tmp_path / "verl" / "exp.jsonl"  # verl/utils/tracking.py FileLogger: {"step", "data"} per line
    verl.parent.mkdir()
    verl.write_text("".join(json.dumps({"step": s, "data": {"actor/entropy": 1.0 / s, "critic/score/mean": 0.1 * s}})
                            + "\n" for s in (1, 2)) + '{"step": 3, "da')  # a torn last line
    records = read_training_log(verl.parent)
    assert records == [{"step": 1, "actor/entropy": 1.0, "critic/score/mean": 0.1, "entropy": 1.0, "reward": 0.1},
                       {"step": 2, "actor/entropy": 0.5, "critic/score/mean": 0.2, "entropy": 0.5, "reward": 0.2}]
    state = tmp_path / "trainer_state.json"  # transformers TrainerState: log_history
    state.write_text(json.dumps({"global_step": 2, "log_history": [
        {"step": 1, "reward": 0.25, "frac_reward_zero_std": 0.5, "epoch": 0.1},
        {"step": 2, "train_runtime": 10.0}]}))
    assert read_training_log(state)[0] == {"step": 1, "reward": 0.25, "frac_reward_zero_std": 0.5, "epoch": 0.1}


def test_tensor_scalars_and_a_torn_record(tmp_path):
    """TF2-style tensor summaries (float and double) read as scalars; a torn last record stops the
    read naming the last good step, and --salvage (salvage=True) reads the records before it."""
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path))
    for step in (1, 2):
        values = [summary_pb2.Summary.Value(tag="f32", tensor=tensor_pb2.TensorProto(dtype=1, float_val=[step / 4])),
                  summary_pb2.Summary.Value(tag="f64", tensor=tensor_pb2.TensorProto(dtype=2, double_val=[step / 3])),
                  summary_pb2.Summary.Value(tag="simple", simple_value=-step)]
        writer.add_event(event_pb2.Event(step=step, wall_time=1.0, summary=summary_pb2.Summary(value=values)))
    writer.close()
    path = next(tmp_path.glob("events.out.tfevents.*"))
    records = read_event_file(path)
    assert records == [{"step": 1, "f32": 0.25, "f64": 1 / 3, "simple": -1.0},
                       {"step": 2, "f32": 0.5, "f64": 2 / 3, "simple": -2.0}]
    path.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(UsageError, match=r"run past the end of the file \(torn\); the last good step is 1"):
        read_event_file(path)
    with pytest.warns(UserWarning, match="1 unreadable stretches skipped"):
        assert read_event_file(path, salvage=True) == records[:1]


def test_a_missing_logger_package_is_one_line(tmp_path, tiny_model):
    import importlib.util

    if importlib.util.find_spec("trackio") is not None:
        pytest.skip("trackio is installed here")
    result = runner.invoke(app, ["train", "grpo", "--out", str(tmp_path / "t"), "--model", str(tiny_model),
                                 "--report-to", "trackio"])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "the trackio package is not installed" in result.output and not (tmp_path / "t").exists()
