"""Run records: one schema with a `schema_version`; folders written before it still read and resume.

Schema 1 (evalkit 0.1) had no `schema_version` and stored `options.task_config` as a JSON string;
schema 2 stores it as the object it encodes, like `task.config`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import evalkit.train  # noqa: F401 (the trainers register the options their records are upgraded with)
from evalkit.records import SCHEMA_VERSION, upgrade
from evalkit.sampling import SAMPLER_VERSION
from evalkit.tasks.mathgrade import VERSION

RESULTS = Path(__file__).parents[1] / "results"


def _as_schema_1(path: Path) -> None:
    """Rewrite a run.json as evalkit 0.1 wrote it."""
    record = json.loads(path.read_text())
    record.pop("schema_version", None)
    for key in ("options", "es", "grpo"):
        if isinstance(record.get(key), dict) and "task_config" in record[key]:
            record[key]["task_config"] = json.dumps(record[key]["task_config"], sort_keys=True)
    path.write_text(json.dumps(record, indent=2))


def test_upgrade_reads_schema_1_as_the_current_schema():
    old = {"kind": "train-grpo", "options": {"task_config": '{"max_operand": 9}', "lr": 1e-5}}
    new = upgrade(old)
    assert new["schema_version"] == SCHEMA_VERSION and new["options"]["task_config"] == {"max_operand": 9}
    assert old["options"]["task_config"] == '{"max_operand": 9}'  # the stored record is not changed
    assert upgrade(new) is new


def test_a_schema_1_training_run_resumes(tiny_model, tmp_path):
    from evalkit.train.grpo import GRPOOptions, run_grpo

    opts = GRPOOptions(model=str(tiny_model), task="arith", task_size=8, task_config='{"max_operand": 9}',
                       group_size=2, prompts_per_step=1, steps=1, max_new_tokens=2, grader_workers=1,
                       save_every=1, device="cpu")
    out = tmp_path / "grpo"
    run_grpo(opts, out)
    assert json.loads((out / "run.json").read_text())["options"]["task_config"] == {"max_operand": 9}
    _as_schema_1(out / "run.json")
    from dataclasses import replace

    summary = run_grpo(replace(opts, steps=2), out)  # resumes from step 1, not refused
    assert summary["complete"] and summary["steps"] == 2


@pytest.mark.parametrize("name", ["e2e", "demo"])
def test_committed_runs_read_as_the_current_schema(name, tmp_path):
    from analyses.runs import load_run

    run = Path(shutil.copytree(RESULTS / name, tmp_path / name))
    _as_schema_1(run / "run.json")
    loaded = load_run(run)
    assert loaded.summary["grader"].startswith(VERSION) and len(loaded.samples) == loaded.summary["samples"]
    assert upgrade(json.loads((run / "run.json").read_text()))["schema_version"] == SCHEMA_VERSION


@pytest.mark.slow
def test_the_committed_e2e_run_resumes_as_written(tmp_path):
    """Rerunning results/e2e's command resumes it (nothing to sample: it is complete)."""
    from typer.testing import CliRunner

    from evalkit.cli import app

    run = Path(shutil.copytree(RESULTS / "e2e", tmp_path / "e2e"))
    before = (run / "samples.jsonl").read_bytes()
    result = CliRunner().invoke(app, ["passk", "smollm2-135m", *E2E_ARGS, "--out", str(run)])
    assert result.exit_code == 0, result.output
    assert (run / "samples.jsonl").read_bytes() == before


E2E_ARGS = ["--task", "arith", "--n", "4", "--k", "1,2,4", "--limit", "6", "--max-new-tokens", "24", "--seed", "0"]


def _as_drawn_by_hf1(path: Path) -> None:
    """A run.json as evalkit wrote it before samplers were named (schema 3): drawn by hf-1."""
    record = json.loads(path.read_text())
    record.pop("sampler")
    record["schema_version"] = 3
    path.write_text(json.dumps(record, indent=2))


def test_a_run_drawn_by_another_sampler_is_refused_by_name_and_still_read(tmp_path):
    """Issue 26: a passk run drawn by sampler hf-1 is not resumed by this one (one line naming both),
    its files are untouched, and regrade and analyses still read it."""
    from typer.testing import CliRunner

    from analyses.runs import load_run
    from evalkit.cli import app

    run = Path(shutil.copytree(RESULTS / "e2e", tmp_path / "e2e"))
    _as_drawn_by_hf1(run / "run.json")
    before = {f.name: f.read_bytes() for f in run.iterdir()}
    result = CliRunner().invoke(app, ["passk", "smollm2-135m", *E2E_ARGS, "--out", str(run)])
    assert result.exit_code == 2
    assert f'sampler="hf-1", not "{SAMPLER_VERSION}"' in result.output and len(result.output.strip().splitlines()) == 1
    assert {f.name: f.read_bytes() for f in run.iterdir()} == before
    assert len(load_run(run).samples) == 24
    regraded = CliRunner().invoke(app, ["regrade", str(run), "--out", str(tmp_path / "regraded")])
    assert regraded.exit_code == 0, regraded.output


def test_a_training_run_drawn_by_another_sampler_is_refused_by_name(tiny_model, tmp_path):
    from evalkit.errors import UsageError
    from evalkit.train.grpo import GRPOOptions, run_grpo

    opts = GRPOOptions(model=str(tiny_model), task="arith", task_size=8, group_size=2, prompts_per_step=1, steps=1,
                       max_new_tokens=2, grader_workers=1, save_every=1, device="cpu")
    out = tmp_path / "grpo"
    run_grpo(opts, out)
    assert json.loads((out / "run.json").read_text())["sampler"] == SAMPLER_VERSION
    _as_drawn_by_hf1(out / "run.json")
    from dataclasses import replace

    with pytest.raises(UsageError, match=f'sampler="hf-1", not "{SAMPLER_VERSION}"'):
        run_grpo(replace(opts, steps=2), out)


def test_interpolate_points_before_schema_7_name_the_sampler_they_were_drawn_by():
    """Schema 7: interpolate's point folders record their sampler; older ones read as drawn by the
    HF sampler of their evalkit (the committed study's points: hf-3, as its stages record)."""
    path = RESULTS / "study-v2" / "interpolate" / "es-grpo" / "seed-0" / "points" / "t+0.0000" / "run.json"
    point = json.loads(path.read_text())
    assert point["schema_version"] == 5 and "sampler" not in point
    assert upgrade(point)["sampler"] == "hf-3"
    study = json.loads((RESULTS / "study-v2" / "study.json").read_text())
    assert study["stages"]["interpolate-es-grpo-s0"]["identity"]["sampler"] == "hf-3"
    assert upgrade({"kind": "interpolate-point", "schema_version": 4})["sampler"] == "hf-2"
    assert "sampler" not in upgrade({"kind": "diff", "schema_version": 5})


def test_trainer_records_before_schema_5_name_the_sampler_they_were_drawn_by():
    options = {"backend": "hf"}
    assert upgrade({"kind": "train-es", "schema_version": 3, "options": options})["sampler"] == "hf-1"
    assert upgrade({"kind": "train-grpo", "schema_version": 4, "options": options})["sampler"] == "hf-2"
    assert upgrade({"kind": "train-grpo", "schema_version": 4, "options": {"backend": "vllm"}})["sampler"] == "vllm-1"
    assert upgrade({"kind": "passk", "schema_version": 3})["sampler"] == "hf-1"
    assert "sampler" not in upgrade({"kind": "passk", "schema_version": 3, "import": {"format": "lm-eval"}})
