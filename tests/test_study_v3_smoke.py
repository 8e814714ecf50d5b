"""The v3 study's shape end to end on a tiny model (issue 44): every arm (ES at two step sizes,
GRPO, ES-then-GRPO), arms on their own seeds, evaluations' filters and limits, GRPO's final
checkpoints, masked updates, bf16 runs at two step sizes, forgetting with the base scored once,
and studies/seed-cpu-v3.claims.toml itself (k 32 read at k 2, what the tiny runs' n allows),
registered before training, through findings.md and the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
STUDY = '''
title = "v3 smoke"
base_model = "{base}"
device = "cpu"
seeds = [0, 1]
claims = "{claims}"
[train_task]
name = "pairsum"
size = 12
config = { numbers = 4, max_value = 80, pairs = 2, prompt = 2 }
[eval_task]
seed = 1
size = 40
limit = 6
[validation]
seed = 2
size = 40
limit = 4
max_new_tokens = 6
[budget]
per_method = 16
[methods.es]
population = 2
prompts_per_iteration = 2
sigma = 0.05
alpha = 0.05
max_new_tokens = 6
save_every = 1
[methods.es-large]
alpha = 0.2
seeds = [1]
[methods.grpo]
group_size = 2
prompts_per_step = 2
lr = 1e-3
max_new_tokens = 6
micro_batch = 4
save_every = 1
[methods.es-grpo]
es_share = 0.25
[evaluations.passk]
n = 2
k = [1]
max_new_tokens = 6
[evaluations.passk-nucleus]
n = 4
k = [1, 2]
max_new_tokens = 6
temperature = 0.6
top_p = 0.95
limit = 4
methods = ["base", "es-large", "grpo"]
[evaluations.passk-final]
n = 4
k = [1, 2]
max_new_tokens = 6
temperature = 0.6
top_p = 0.95
limit = 4
methods = ["grpo"]
[evaluations.curves]
n = 2
k = [1]
max_new_tokens = 6
limit = 4
methods = ["base", "es-large", "grpo", "es-grpo"]
[evaluations.entropy]
[evaluations.length]
[evaluations.masked]
fractions = [0.05]
mask_by = ["abs", "random"]
methods = ["es-large", "grpo"]
seeds = [1]
[evaluations.sparsity]
bf16_completions = 8
bf16_scales = [1.0, 4.0]
[evaluations.forgetting]
suite = "facts"
mc_files = { facts = "%s" }
limit = 8
kl_task = "letter_counting"
kl_prompts = 4
kl_samples = 2
kl_max_new_tokens = 6
base_once = true
methods = ["es-large", "grpo"]
''' % (ROOT / "studies" / "data" / "facts-mc-v3.jsonl")


@pytest.mark.slow
def test_the_v3_study_and_its_registered_claims_run_end_to_end_on_a_tiny_model(tmp_path, tiny_model):
    from analyses.claims import VERDICTS, read_claims
    from evalkit.study import run_study

    claims = (ROOT / "studies" / "seed-cpu-v3.claims.toml").read_text().replace("k = 32", "k = 2")
    (tmp_path / "claims.toml").write_text(claims)
    study = tmp_path / "v3.toml"
    study.write_text(STUDY.replace("{base}", str(tiny_model)).replace("{claims}", str(tmp_path / "claims.toml")))
    state = run_study(study, tmp_path / "out")
    assert {s["status"] for s in state["stages"].values()} == {"done"}
    assert state["registration"]["training_done_before"] == [] and not state["registration"]["retrospective"]
    found = json.loads((tmp_path / "out" / "findings" / "findings.json").read_text())["preregistered"]
    rows = {r["id"]: r for r in found["claims"]}
    assert set(rows) == {c.id for c in read_claims(tmp_path / "claims.toml").claims}
    assert all(r["verdict"] in VERDICTS and r["status"] == "unchanged" for r in rows.values())
    for r in rows.values():  # every ES comparison carries its gate, read on the arm's own seeds
        gate = r.get("gate")
        assert (gate is not None) == bool(r["settings"].get("gate"))
        if gate and "es-large" in gate["arms"]:
            assert [c["seed"] for c in gate["controls"]["es-large"]] == [1]
        if gate and not gate["passed"]:
            assert r["verdict"] == "not tested" and r["primary"].get("holm_p") is None
    assert rows["grpo-final-narrows"]["primary"]["detail"]["setting"] == "passk-final"
    assert set(found["arms"]["positive_control"]) == {"es", "es-large", "grpo", "es-grpo"}
    text = (tmp_path / "out" / "findings" / "findings.md").read_text()
    assert text.index("## What was found") < text.index("## Limitations") < text.index("## The arms")
    assert (tmp_path / "out" / "report" / "index.html").is_file()
