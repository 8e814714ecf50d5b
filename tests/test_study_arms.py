"""Issue 44's planner keys for the v3 study: the ES variant arm `es-large` ([methods.es]'s options
overlaid with its own), an arm's own seeds (`[methods.X] seeds`), and the evaluations' `methods` /
`seeds` filters; planned on the stage list, checked key by key, read by the analyses on each
arm's own seeds, and run end to end on a tiny model. A study without them plans as before
(tests/test_study_v2.py: results/study-v2 still reads as done)."""

from __future__ import annotations

import json

import pytest

V3 = """
title = "v3 arms"
base_model = "{base}"
device = "cpu"
seeds = [0, 1]
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
seeds = [0]
[methods.es-large]
alpha = 0.2
seeds = [1]
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
methods = ["grpo"]
seeds = [1]
limit = 2
[evaluations.masked]
fractions = [1.0]
mask_by = ["abs"]
methods = ["es-large", "grpo"]
seeds = [1]
[evaluations.diff]
methods = ["es", "es-large"]
"""


def _write(tmp_path, text: str, base="smollm2-135m"):
    path = tmp_path / "v3.toml"
    path.write_text(text.replace("{base}", str(base)))
    return path


def _plan(tmp_path, text: str = V3):
    from evalkit.study.spec import read_spec
    from evalkit.study.stages import plan

    spec = read_spec(_write(tmp_path, text))
    return spec, {s.name: s for s in plan(spec)}


def test_es_large_is_es_with_its_own_options_on_its_own_seeds(tmp_path):
    from evalkit.train.es import ESOptions

    spec, stages = _plan(tmp_path)
    (es,), (large,) = spec.methods["es"], spec.methods["es-large"]
    assert isinstance(large.opts, ESOptions) and large.kind == "es"
    assert (large.opts.alpha, es.opts.alpha) == (0.2, 0.05)
    assert (large.opts.population, large.opts.sigma, large.opts.save_every) == (2, 0.05, 1)  # [methods.es]'s
    assert spec.seeds_of("es") == (0,) and spec.seeds_of("es-large") == (1,) and spec.seeds_of("grpo") == (0, 1)
    trains = [n for n in stages if n.startswith("train-")]
    assert trains == ["train-es-s0", "train-grpo-s0", "train-grpo-s1", "train-es-large-s1"]
    assert stages["train-es-large-s1"].identity["trainers"][0]["alpha"] == 0.2
    assert stages["train-es-large-s1"].out == "train/es-large/seed-1"
    for kind in ("validate", "passk"):
        assert {f"{kind}-es-s0", f"{kind}-es-large-s1", f"{kind}-grpo-s1"} <= set(stages)
        assert f"{kind}-es-s1" not in stages and f"{kind}-es-large-s0" not in stages
    assert spec.budget["spent"]["es-large"] == spec.budget["spent"]["es"]  # the budget rule per training run


def test_the_evaluation_filters_choose_arms_and_seeds(tmp_path):
    spec, stages = _plan(tmp_path)
    assert [n for n in stages if n.startswith("final-passk")] == ["final-passk-grpo-s1"]
    assert "passk-grpo-s1" in stages["final-passk-grpo-s1"].needs
    assert [n for n in stages if n.startswith("masked")] == ["masked-grpo-s1", "masked-es-large-s1"]
    assert [n for n in stages if n.startswith("diff")] == ["diff-es-s0", "diff-es-large-s1"]
    assert "sparsity-s1" not in stages  # ES is not trained on seed 1


def test_a_filter_is_no_part_of_a_stage_identity(tmp_path):
    from evalkit.study.stages import identity_hash

    _, narrow = _plan(tmp_path)
    _, wide = _plan(tmp_path, V3.replace('methods = ["grpo"]\nseeds = [1]\n', ""))
    assert {"final-passk-grpo-s0", "final-passk-es-s0", "final-passk-es-large-s1"} <= set(wide)
    assert identity_hash(wide["final-passk-grpo-s1"].identity) == identity_hash(narrow["final-passk-grpo-s1"].identity)


def test_a_passk_evaluation_may_read_the_first_n_held_out_problems(tmp_path):
    """`limit` in a passk-shaped evaluation (passk, passk-nucleus, passk-final, curves): the first
    N problems of the held-out split, in its identity; left out, the whole split and the identity
    a study recorded before the key."""
    _, stages = _plan(tmp_path)
    assert stages["final-passk-grpo-s1"].identity["passk-final"]["limit"] == 2
    assert "limit" not in stages["passk-grpo-s0"].identity["passk"]
    assert stages["final-passk-grpo-s1"].tokens < stages["passk-grpo-s1"].tokens * 3 / 2


def test_masked_defaults_to_the_es_and_grpo_arms(tmp_path):
    _, stages = _plan(tmp_path, V3.replace('methods = ["es-large", "grpo"]\nseeds = [1]\n', ""))
    assert [n for n in stages if n.startswith("masked")] == ["masked-es-s0", "masked-grpo-s0", "masked-grpo-s1",
                                                             "masked-es-large-s1"]


@pytest.mark.parametrize(("old", "new", "message"), [
    ("seeds = [1]\n[methods.grpo]", "seeds = [3]\n[methods.grpo]", r"methods.es-large.seeds \[3\]: seed 3 is not"),
    ("seeds = [0]\n[methods.es-large]", "seeds = [0, 0]\n[methods.es-large]", r"methods.es.seeds \[0, 0\]: each"),
    ("seeds = [0]\n[methods.es-large]", "seeds = []\n[methods.es-large]", "methods.es.seeds"),
    ('methods = ["grpo"]', 'methods = ["distill"]', "evaluations.passk-final.methods: 'distill' is not a method"),
    ('methods = ["es-large", "grpo"]', 'methods = ["base"]', "evaluations.masked.methods: 'base' is not"),
    ("[evaluations.passk]\n", '[evaluations.passk]\nmethods = ["es"]\n', 'evaluations.passk.methods: .* add "base"'),
    ('methods = ["grpo"]\nseeds = [1]', 'methods = ["grpo"]\nseeds = [2]', "evaluations.passk-final.seeds"),
    ("[evaluations.diff]\n", "[evaluations.interpolate]\nmethods = [\"es\"]\n[evaluations.diff]\n",
     "unknown key evaluations.interpolate.methods"),
])
def test_a_bad_key_is_refused_naming_it(tmp_path, old, new, message):
    from evalkit.errors import UsageError
    from evalkit.study.spec import read_spec

    assert old in V3
    with pytest.raises(UsageError, match=message):
        read_spec(_write(tmp_path, V3.replace(old, new, 1)))


def test_seeds_and_filters_need_a_seeded_study(tmp_path):
    from helpers.studies import toy_study

    from evalkit.errors import UsageError
    from evalkit.study.spec import read_spec

    path = tmp_path / "s.toml"
    path.write_text(toy_study().replace("[methods.grpo]", "seeds = [0]\n[methods.grpo]"))
    with pytest.raises(UsageError, match="methods.es.seeds"):
        read_spec(path)
    path.write_text(toy_study(extra="[evaluations.diff]\nmethods = [\"es\"]\n"))
    with pytest.raises(UsageError, match="evaluations.diff.methods: .* seeded study"):
        read_spec(path)


def test_an_arms_seeds_are_those_its_stages_were_planned_on_and_a_seed_pairing_reads_the_common_ones():
    from types import SimpleNamespace as S

    from analyses.claim_endpoints import _seeds
    from analyses.study_seeded import Study

    study = Study.__new__(Study)
    study.seeds, study.state = [0, 1, 2, 3], {"plan": [{"stage": n} for n in (
        "passk-es-s0", "passk-es-s1", "passk-es-s2", "passk-es-large-s1", "passk-es-large-s2",
        "passk-es-large-s3", "passk-grpo-s0", "passk-grpo-s1", "passk-grpo-s2", "passk-grpo-s3")]}
    assert study.seeds_of("es-large", "passk") == [1, 2, 3] and study.seeds_of("es", "passk") == [0, 1, 2]
    assert study.common_seeds("passk", "es", "es-large") == [1, 2]

    def claim(pairing, contrast=("es-large", "es")):
        return S(contrast=contrast, get=lambda key, default=None: pairing if key == "pairing" else default)

    assert _seeds(study, claim("seed"), "passk") == {"es-large": [1, 2], "es": [1, 2]}
    assert _seeds(study, claim("apart"), "passk") == {"es-large": [1, 2, 3], "es": [0, 1, 2]}
    assert _seeds(study, claim("problem", ("es-large", "base")), "passk") == {"es-large": [1, 2, 3]}


@pytest.mark.slow
def test_the_arms_run_on_their_own_seeds_and_the_findings_read_them(tmp_path, tiny_model):
    from evalkit.study import run_study

    out = tmp_path / "out"
    state = run_study(_write(tmp_path, V3, tiny_model), out)
    stages = state["stages"]
    assert {s["status"] for s in stages.values()} == {"done"}
    assert "train-es-s1" not in stages and "train-es-large-s0" not in stages
    run = json.loads((out / "train" / "es-large" / "seed-1" / "run.json").read_text())
    assert run["options"]["alpha"] == 0.2 and run["options"]["seed"] == 1 and run["options"]["population"] == 2
    assert state["spec"]["arm_seeds"] == {"es": [0], "es-large": [1]}
    assert state["spec"]["scopes"]["masked"] == {"methods": ["es-large", "grpo"], "seeds": [1]}
    figures = json.loads((out / "findings" / "findings.json").read_text())["figures"]
    arms = figures["coverage"]["passk"]["arms"]
    assert len(arms["es"]["pass"]["per_seed"]) == 1 and len(arms["grpo"]["pass"]["per_seed"]) == 2
    assert len(arms["es-large"]["pass"]["per_seed"]) == 1
    checks = {c["check"]: c["ok"] for c in figures["checks"]}
    assert checks["passk: every seed of every arm"]
    assert [r["seed"] for r in figures["stopping"]["arms"]["es-large"]] == [1]
    assert (out / "report" / "index.html").is_file()
    final = [json.loads(x) for x in (out / "passk-final" / "grpo" / "seed-1" / "samples.jsonl").read_text().splitlines()]
    picked = [json.loads(x) for x in (out / "passk" / "grpo" / "seed-1" / "samples.jsonl").read_text().splitlines()]
    assert len({x["problem_id"] for x in final}) == 2 and len({x["problem_id"] for x in picked}) == 3


def test_passk_final_is_read_beside_the_base_run_of_the_evaluation_with_its_settings():
    """passk-final has no base stage and its stages are named final-passk-<arm>-s<seed>: the
    analyses read its runs by that name and the base's run from the picked checkpoints'
    evaluation recorded with the same settings (none: no base, so no coverage figure)."""
    from analyses.study_seeded import Study

    study = Study.__new__(Study)
    nucleus = {"n": 64, "k": [1, 32], "temperature": 0.6, "top_p": 0.95, "limit": 40}
    study.seeds, study.state = [0, 1], {"plan": [{"stage": "final-passk-grpo-s1"}], "stages": {
        "passk-nucleus-base": {"status": "done", "result": {"run": "passk-nucleus/base"}},
        "final-passk-grpo-s1": {"status": "done", "result": {"run": "passk-final/grpo/seed-1"}}}}
    study.spec = {"evaluations": {"passk": {"n": 4}, "passk-nucleus": {**nucleus, "methods": ["base", "grpo"]},
                                  "passk-final": {**nucleus, "methods": ["grpo"]}}}
    study.run = lambda rel: rel
    assert study.seeds_of("grpo", "passk-final") == [1]
    assert study.run_of("passk-final", "grpo", 1) == "passk-final/grpo/seed-1"
    assert study.base_setting("passk-final") == "passk-nucleus"
    assert study.run_of("passk-final", "base", None) == "passk-nucleus/base"
    study.spec["evaluations"]["passk-final"]["temperature"] = 1.0
    assert study.base_setting("passk-final") is None and study.run_of("passk-final", "base", None) is None
