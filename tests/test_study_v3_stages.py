"""Issue 44's study stages: passk at the final checkpoint beside the picked one
([evaluations.passk-final]) and the masked updates ([evaluations.masked]), planned and run on a
tiny model; a study without them plans as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

STUDIES = Path(__file__).parents[1] / "studies"

SEEDED = """
title = "v3 stages"
base_model = "{base}"
device = "cpu"
seeds = [0]
[train_task]
name = "arith"
size = 40
[eval_task]
seed = 1
size = 40
limit = 3
[validation]
seed = 2
size = 40
limit = 3
max_new_tokens = 4
[budget]
per_method = 8
[methods.es]
population = 2
prompts_per_iteration = 2
sigma = 0.05
alpha = 0.05
max_new_tokens = 4
save_every = 1
[methods.grpo]
group_size = 2
prompts_per_step = 2
lr = 1e-3
max_new_tokens = 4
micro_batch = 4
save_every = 1
[evaluations.passk]
n = 2
k = [1, 2]
max_new_tokens = 4
[evaluations.passk-final]
n = 2
k = [1, 2]
max_new_tokens = 4
temperature = 0.5
[evaluations.masked]
fractions = [0.05, 1.0]
mask_by = ["abs"]
"""


def _study(tmp_path, base) -> Path:
    path = tmp_path / "v3.toml"
    path.write_text(SEEDED.replace("{base}", str(base)))
    return path


def test_the_new_evaluations_are_planned_per_arm_and_seed(tmp_path):
    from evalkit.study.spec import read_spec
    from evalkit.study.stages import plan

    spec = read_spec(_study(tmp_path, "smollm2-135m"))
    assert spec.evaluations["masked"].fractions == (0.05, 1.0) and spec.evaluations["masked"].mask_by == ("abs",)
    stages = {s.name: s for s in plan(spec)}
    for m in ("es", "grpo"):
        final, masked = stages[f"final-passk-{m}-s0"], stages[f"masked-{m}-s0"]
        assert final.out == f"passk-final/{m}/seed-0" and f"validate-{m}-s0" in final.needs
        assert final.identity["passk-final"]["temperature"] == 0.5
        assert masked.out == f"masked/{m}/seed-0" and masked.weights == (f"train-{m}-s0",)
        assert masked.identity["masked"] == {"fractions": [0.05, 1.0], "mask_by": ["abs"], "scope": ["global"],
                                             "mask_seed": 0}
    assert not any(n.startswith("passk-final") for n in stages)  # the entropy/length reports read passk-* only


def test_v2_plans_without_them():
    from evalkit.study.spec import read_spec
    from evalkit.study.stages import plan

    names = [s.name for s in plan(read_spec(STUDIES / "seed-cpu-v2.toml"))]
    assert not [n for n in names if n.startswith(("final-passk", "masked"))]


def test_they_need_a_seeded_study(tmp_path):
    from helpers.studies import toy_study

    from evalkit.errors import UsageError
    from evalkit.study.spec import read_spec

    path = tmp_path / "s.toml"
    path.write_text(toy_study(extra="[evaluations.masked]\n"))
    with pytest.raises(UsageError, match="evaluations.masked"):
        read_spec(path)
    path.write_text(toy_study(extra="[evaluations.masked]\nfractions = [2.0]\n"))
    with pytest.raises(UsageError, match="fractions"):
        read_spec(path)


def test_the_final_stage_reads_the_picked_run_when_the_pick_is_the_final(tmp_path):
    from dataclasses import replace

    from evalkit.study.spec import read_spec
    from evalkit.study.stages import plan

    spec = read_spec(_study(tmp_path, "smollm2-135m"))
    spec = replace(spec, evaluations={**spec.evaluations, "passk-final": spec.evaluations["passk"]})
    stage = next(s for s in plan(spec) if s.name == "final-passk-es-s0")
    ckpt = "train/es/seed-0/step-000002"
    results = {"train-es-s0": {"checkpoint": ckpt}, "validate-es-s0": {"picked": {"checkpoint": ckpt}},
               "passk-es-s0": {"run": "passk/es/seed-0", "complete": True}}
    got = stage.run(tmp_path / "passk-final" / "es" / "seed-0", results)  # draws nothing
    assert got == {"run": "passk/es/seed-0", "complete": True, "checkpoint": ckpt, "same_as": "passk-es-s0"}


@pytest.mark.slow
def test_the_stages_run_on_a_tiny_model(tmp_path, tiny_model):
    from evalkit.study import run_study

    state = run_study(_study(tmp_path, tiny_model), tmp_path / "out", until="masked-grpo-s0")
    out, stages = tmp_path / "out", state["stages"]
    for m in ("es", "grpo"):
        final = stages[f"final-passk-{m}-s0"]["result"]
        assert final["checkpoint"] == stages[f"train-{m}-s0"]["result"]["checkpoint"]
        assert (out / final["run"] / "summary.json").is_file()
        masked = json.loads((out / stages[f"masked-{m}-s0"]["result"]["file"]).read_text())
        rows = {r["label"]: r for r in masked["rows"]}
        assert set(rows) == {"abs-global-q0.05", "abs-global-q1"} and rows["abs-global-q1"]["same_as"] == "trained"
        assert masked["trained"] == str(out / stages[f"validate-{m}-s0"]["result"]["picked"]["checkpoint"])
        assert rows["abs-global-q0.05"]["problems"] == 3
