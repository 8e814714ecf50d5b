"""Run folders written before issue 28's options refactor still resume.

`tests/data/pre28/` holds a passk run, a 2-step GRPO run and a 2-iteration ES run on the tiny
test model, written by evalkit as it was just before options became self-validating classes
with one identity mechanism (run with the model folder named `tiny`, from the folder above
`runs/`). They were drawn by sampler hf-1, so since issue 26 rerunning their commands is refused
by name; they are still read and regraded, and every other part of their records still upgrades
(with the sampler and grader set to this evalkit's, the trainers extend by one step from their last
checkpoint).
"""

import json
import os
import shutil
from pathlib import Path

import pytest

from evalkit.sampling import SAMPLER_VERSION

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


def test_old_passk_run_is_read_and_not_resumed_by_another_sampler(old_runs):
    """Drawn by sampler hf-1 (before issue 26): rerunning its command is refused by name, and
    the folder is untouched; it is still read (analyses) and regraded."""
    from analyses.runs import load_run
    from evalkit.errors import UsageError
    from evalkit.options import GradingOptions
    from evalkit.passk import PasskOptions, run_passk
    from evalkit.regrade import run_regrade

    before = (old_runs / "passk" / "samples.jsonl").read_bytes()
    with pytest.raises(UsageError, match=f'sampler="hf-1", not "{SAMPLER_VERSION}"'):
        run_passk(PasskOptions(model="tiny", task="arith", n=4, ks=(1, 2, 4), limit=3, max_new_tokens=8,
                               batch_size=64, device="cpu", grader_workers=1), Path("runs/passk"))
    assert (old_runs / "passk" / "samples.jsonl").read_bytes() == before
    assert len(load_run(old_runs / "passk").samples) == 12
    run_regrade(old_runs / "passk", old_runs / "regraded", GradingOptions(grader_workers=1))
    assert len((old_runs / "regraded" / "samples.jsonl").read_text().splitlines()) == 12


def test_old_trainer_runs_are_not_extended_by_another_sampler(old_runs):
    """Their rollouts were drawn by sampler hf-1: extending them with this one would mix the two."""
    from evalkit.errors import UsageError
    from evalkit.train import run_es, run_grpo
    from evalkit.train.es import ESOptions
    from evalkit.train.grpo import GRPOOptions

    with pytest.raises(UsageError, match=f'sampler="hf-1", not "{SAMPLER_VERSION}"'):
        run_grpo(GRPOOptions(model="tiny", task="arith", task_size=20, device="cpu", steps=3, group_size=2,
                             prompts_per_step=2, max_new_tokens=8, save_every=1, grader_workers=1), Path("runs/grpo"))
    with pytest.raises(UsageError, match=f'sampler="hf-1", not "{SAMPLER_VERSION}"'):
        run_es(ESOptions(model="tiny", task="arith", task_size=20, device="cpu", iterations=3, population=2,
                         prompts_per_iteration=2, max_new_tokens=8, save_every=1, grader_workers=1), Path("runs/es"))
    for run in ("grpo", "es"):
        steps = [json.loads(line)["step"] for line in (old_runs / run / "metrics.jsonl").read_text().splitlines()]
        assert steps == [1, 2], run
        assert not (old_runs / run / "step-000003").exists()


def test_old_trainer_runs_extend_when_their_sampler_is_this_one(old_runs):
    """Everything else of a pre-28 trainer record still upgrades: with the sampler and the grader
    set to this evalkit's (their rewards were graded by math-3), the runs extend by one step from
    their last checkpoint."""
    from evalkit.tasks import grader_version
    from evalkit.train import run_es, run_grpo
    from evalkit.train.es import ESOptions
    from evalkit.train.grpo import GRPOOptions

    for run in ("grpo", "es"):
        record = json.loads((old_runs / run / "run.json").read_text())
        record["sampler"] = SAMPLER_VERSION
        assert record["grader"].startswith("math-3"), record["grader"]
        record["grader"] = grader_version("math")
        (old_runs / run / "run.json").write_text(json.dumps(record, indent=2))
    run_grpo(GRPOOptions(model="tiny", task="arith", task_size=20, device="cpu", steps=3, group_size=2,
                         prompts_per_step=2, max_new_tokens=8, save_every=1, grader_workers=1), Path("runs/grpo"))
    run_es(ESOptions(model="tiny", task="arith", task_size=20, device="cpu", iterations=3, population=2,
                     prompts_per_iteration=2, max_new_tokens=8, save_every=1, grader_workers=1), Path("runs/es"))
    for run in ("grpo", "es"):
        steps = [json.loads(line)["step"] for line in (old_runs / run / "metrics.jsonl").read_text().splitlines()]
        assert steps == [1, 2, 3], run
        assert (old_runs / run / "step-000003").is_dir()
    assert os.path.exists(old_runs / "grpo" / "step-000003" / "optimizer.pt")
