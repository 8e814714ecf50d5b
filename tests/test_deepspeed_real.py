"""DeepSpeed ZeRO folders written by deepspeed's own engine (stage 2 and 3, one CPU process, gloo)
diff, bit for bit, as the safetensors save of the engine's weights after the step; skipped where
deepspeed is not installed (tests/test_checkpoint_formats.py checks the one-line refusal then)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import formats
from typer.testing import CliRunner

from evalkit.checkpoints import open_checkpoint
from evalkit.diff import DiffOptions, diff_checkpoints

deepspeed = pytest.importorskip("deepspeed")

VARIANTS = {"stage2": (2, False), "stage3": (3, False), "openrlhf": (2, True)}

# One process, world size 1: `deepspeed.initialize` (microsoft/DeepSpeed `deepspeed/__init__.py`)
# with torch's Adam (no compiled CPU Adam), one step, `engine.save_checkpoint` (`runtime/engine.py`:
# global_step1/, `latest`). The reference is the engine's module state dict after that step
# (gathered under ZeRO-3), saved with safetensors. "openrlhf": the HF model held as `self.model` of
# a wrapper module, as OpenRLHF's Actor holds it (saved names `model.model.*`, `model.lm_head.*`).
BUILD = r"""
import json, os, socket, sys
jobs = json.loads(sys.argv[1])
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1",
                  MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
import torch
import deepspeed
from deepspeed.runtime.zero.partition_parameters import GatheredParameters
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

torch.set_num_threads(1)
# the shared-memory allreduce op is a C++ build (~80 s); one rank has nothing to reduce
sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None
deepspeed.init_distributed(dist_backend="gloo")


class Actor(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, **kw):
        return self.model(**kw)


for job in jobs:
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(job["base"], dtype=torch.float32)
    net = Actor(model) if job["wrap"] else model
    config = {"train_batch_size": 1, "train_micro_batch_size_per_gpu": 1, "steps_per_print": 10**9,
              "zero_optimization": {"stage": job["stage"]},
              "optimizer": {"type": "Adam", "params": {"lr": 1e-3, "torch_adam": True}}}
    engine, *_ = deepspeed.initialize(model=net, model_parameters=net.parameters(), config=config)
    ids = torch.randint(4, 90, (2, 12))
    engine.backward(engine(input_ids=ids, labels=ids).loss)
    engine.step()
    engine.save_checkpoint(job["zero"])
    with GatheredParameters(list(model.parameters()), enabled=job["stage"] == 3):
        sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    save_file(sd, os.path.join(job["st"], "model.safetensors"), metadata={"format": "pt"})
    print(job["stage"], type(engine.optimizer).__name__, flush=True)
"""


@pytest.fixture(scope="module")
def zero_runs(tiny_model, tmp_path_factory):
    """{variant: (ZeRO folder, its safetensors equivalent)}, from one deepspeed process."""
    root = tmp_path_factory.mktemp("zero")
    runs, jobs = {}, []
    for name, (stage, wrap) in VARIANTS.items():
        st = root / name / "safetensors"
        formats.copy_config(tiny_model, st)
        runs[name] = (root / name / "ckpt", st)
        jobs.append({"base": str(tiny_model), "stage": stage, "wrap": wrap, "zero": str(runs[name][0]), "st": str(st)})
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(Path(deepspeed.__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", BUILD, json.dumps(jobs)], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines()[-3:] == ["2 DeepSpeedZeroOptimizer", "3 DeepSpeedZeroOptimizer_Stage3",
                                            "2 DeepSpeedZeroOptimizer"], out.stdout[-2000:]
    return runs


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("fmt", ["auto", "deepspeed"])
def test_zero_checkpoint_diffs_as_its_safetensors(tiny_model, zero_runs, variant, fmt):
    zero, st = zero_runs[variant]
    assert (zero / "latest").read_text().strip() == "global_step1"
    reference = diff_checkpoints([str(tiny_model), str(st)], DiffOptions(chunk_elems=1000))
    got = diff_checkpoints([str(tiny_model), str(zero)], DiffOptions(chunk_elems=1000, format=fmt))
    assert formats.diff_figures(got) == formats.diff_figures(reference)
    other = got.summary["inputs"]["other"]
    assert other["format"] == "deepspeed" and any("fp32 master weights" in n for n in other["notes"])
    overall = got.summary["updates"]["other"]["overall"]
    assert got.summary["tensors_compared"] == 21 and overall["changed_bits"] > 0.9 * overall["n"]  # one Adam step


def test_zero_names_are_hugging_face_names(tiny_model, zero_runs):
    want = set(open_checkpoint(str(tiny_model)).tensors)
    for zero, _ in zero_runs.values():
        assert set(open_checkpoint(str(zero)).tensors) == want


def test_cli_diff_of_a_zero_folder(tiny_model, zero_runs, tmp_path):
    from evalkit.cli import app

    zero, st = zero_runs["stage3"]
    res = CliRunner().invoke(app, ["diff", str(tiny_model), str(zero), "--format", "deepspeed", "--out", str(tmp_path / "d")])
    assert res.exit_code == 0, res.output
    assert "21 tensors compared" in res.output
    assert "zero checkpoint" not in res.stdout.lower() and "accelerator" not in res.stdout.lower()  # deepspeed's prints
    saved = json.loads((tmp_path / "d" / "diff.json").read_text())
    assert saved["inputs"]["other"]["format"] == "deepspeed"


def test_a_zero_folder_with_its_config_loads_and_samples_as_its_safetensors(tiny_model, zero_runs, tmp_path):
    """passk (and every command that loads a model) opens a ZeRO folder with config.json and the
    tokenizer beside it: the same weights, the same samples as the safetensors save."""
    import shutil

    import torch

    from evalkit.models import load_model, resolve_model

    zero, st = zero_runs["stage2"]
    folder = shutil.copytree(zero, tmp_path / "ckpt")
    formats.copy_config(st, folder)
    ref = resolve_model(str(folder))
    assert ref.format == "deepspeed"
    got, want = (load_model(r)[0].state_dict() for r in (ref, resolve_model(str(st))))
    assert sorted(got) == sorted(want) and all(torch.equal(got[k], want[k]) for k in want)

    from evalkit.cli import app

    texts = []
    for name, model in (("zero", folder), ("st", st)):
        res = CliRunner().invoke(app, ["passk", str(model), "--n", "2", "--k", "1,2", "--limit", "3",
                                       "--max-new-tokens", "6", "--batch-size", "6", "--device", "cpu",
                                       "--threads", "1", "--out", str(tmp_path / f"run-{name}")])
        assert res.exit_code == 0, res.output
        lines = (tmp_path / f"run-{name}" / "samples.jsonl").read_text().splitlines()
        texts.append([(s["problem_id"], s["sample_index"], s["completion"]) for s in map(json.loads, lines)])
    assert texts[0] == texts[1] and len(texts[0]) == 6

    paths = []
    for name, model in (("zero", folder), ("st", st)):
        out = tmp_path / f"interp-{name}"
        res = CliRunner().invoke(app, ["interpolate", str(tiny_model), str(model), "--task", "arith", "--limit", "2",
                                       "--max-new-tokens", "4", "--points", "3", "--device", "cpu", "--threads", "1",
                                       "--out", str(out)])
        assert res.exit_code == 0, res.output
        summary = json.loads((out / "interpolate.json").read_text())
        paths.append([(p["t"], p["accuracy"], p["loss"]) for p in summary["points"]])
    assert paths[0] == paths[1] and paths[0][0][2] != paths[0][2][2]  # the same path from the base, and it moves
