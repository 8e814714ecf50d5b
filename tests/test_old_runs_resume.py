"""Run folders written before issue 28's options refactor still resume.

`tests/data/pre28/` holds a passk run, a 2-step GRPO run and a 2-iteration ES run on the tiny
test model, written by evalkit as it was just before options became self-validating classes
with one identity mechanism (run with the model folder named `tiny`, from the folder above
`runs/`). Rerunning their commands must resume them: the passk run is complete (nothing is
sampled again), the trainers extend by one step from their last checkpoint.
"""

import json
import os
import shutil
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent / "data" / "pre28"


@pytest.fixture
def old_runs(tmp_path, monkeypatch):
    from helpers.tinymodel import make_tiny_model

    from evalkit.models import weights_hash

    shutil.copytree(FIXTURE, tmp_path / "runs")
    monkeypatch.chdir(tmp_path)
    make_tiny_model(Path("tiny"))
    recorded = json.loads((tmp_path / "runs" / "passk" / "run.json").read_text())["model"]["sha256"]
    if weights_hash("tiny") != recorded:
        pytest.skip("the tiny model is not bitwise the fixture's on this machine (another torch or CPU)")
    return tmp_path / "runs"


def test_old_passk_run_resumes_without_sampling(old_runs):
    from evalkit.passk import PasskOptions, run_passk

    before = (old_runs / "passk" / "samples.jsonl").read_bytes()
    run_passk(PasskOptions(model="tiny", task="arith", n=4, ks=(1, 2, 4), limit=3, max_new_tokens=8,
                           batch_size=64, device="cpu", grader_workers=1), Path("runs/passk"))
    assert (old_runs / "passk" / "samples.jsonl").read_bytes() == before


def test_old_trainer_runs_extend_from_their_last_checkpoint(old_runs):
    from evalkit.train import run_es, run_grpo
    from evalkit.train.es import ESOptions
    from evalkit.train.grpo import GRPOOptions

    run_grpo(GRPOOptions(model="tiny", task="arith", task_size=20, device="cpu", steps=3, group_size=2,
                         prompts_per_step=2, max_new_tokens=8, save_every=1, grader_workers=1), Path("runs/grpo"))
    run_es(ESOptions(model="tiny", task="arith", task_size=20, device="cpu", iterations=3, population=2,
                     prompts_per_iteration=2, max_new_tokens=8, save_every=1, grader_workers=1), Path("runs/es"))
    for run in ("grpo", "es"):
        steps = [json.loads(line)["step"] for line in (old_runs / run / "metrics.jsonl").read_text().splitlines()]
        assert steps == [1, 2, 3], run
        assert (old_runs / run / "step-000003").is_dir()
    assert os.path.exists(old_runs / "grpo" / "step-000003" / "optimizer.pt")
