"""A seeded study (issue 29): the plan of studies/seed-cpu-v2.toml, the splits (unique, never
seen, commuted forms included), the stopping rule, and studies/smoke-v2.toml end to end on a
tiny model (slow: every stage loads its model and grader workers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

STUDIES = Path(__file__).parents[1] / "studies"


def test_the_v2_study_plans_every_arm_per_seed_with_its_stopping_rule_and_control():
    from evalkit.study.spec import read_spec, saved_steps
    from evalkit.study.stages import plan

    spec = read_spec(STUDIES / "seed-cpu-v2.toml")
    assert spec.seeds == (0, 1, 2) and spec.validation["rule"] == "best-greedy"
    (es,), (grpo,), (es2, grpo2) = (spec.methods[m] for m in ("es", "grpo", "es-grpo"))
    assert (es.count, grpo.count, es2.count, grpo2.count) == (12, 48, 6, 24)
    assert saved_steps(es.opts) == [3, 6, 9, 12] and saved_steps(grpo.opts) == [12, 24, 36, 48]
    assert set(saved_steps(grpo2.opts)) <= set(saved_steps(grpo.opts))  # the GRPO control at 12 and 24
    assert spec.budget["spent"] == dict.fromkeys(["es", "grpo", "es-grpo"], 1536)
    names = [s.name for s in plan(spec)]
    for seed in (0, 1, 2):
        for m in ("es", "grpo", "es-grpo"):
            for kind in ("train", "validate", "passk", "passk-nucleus", "curves", "diff", "forgetting"):
                assert f"{kind}-{m}-s{seed}" in names
        assert f"sparsity-s{seed}" in names and f"interpolate-es-grpo-s{seed}" in names
    assert names[0] == "splits" and names[-2:] == ["findings", "report"]
    assert {"train-bf16-es", "train-bf16-grpo", "sparsity-bf16"} <= set(names)
    o = spec.evaluations  # the evaluators' own options objects, as the stages run them
    assert (o["passk"].n, max(o["passk"].ks), o["passk-nucleus"].temperature, o["passk-nucleus"].top_p) \
        == (128, 64, 0.6, 0.95)
    assert o["forgetting"].kl_task == "letter_counting" and o["forgetting"].mc_files == (
        ("facts", "studies/data/facts-mc.jsonl"),)
    assert spec.recorded("forgetting")["mc_files"] == [["facts", "studies/data/facts-mc.jsonl"]]


def test_a_seed_changes_only_its_own_stages():
    from evalkit.study.spec import read_spec
    from evalkit.study.stages import plan

    stages = {s.name: s for s in plan(read_spec(STUDIES / "seed-cpu-v2.toml"))}
    a, b = stages["train-es-s0"].identity, stages["train-es-s1"].identity
    assert a["trainers"][0]["seed"] == 0 and b["trainers"][0]["seed"] == 1
    assert {k: v for k, v in a.items() if k not in ("seed", "trainers", "inputs")} == \
        {k: v for k, v in b.items() if k not in ("seed", "trainers", "inputs")}


def test_splits_are_unique_and_never_seen_with_commuted_forms_included(tmp_path):
    from evalkit.study.spec import read_spec
    from evalkit.study.stages import plan
    from evalkit.tasks import load_task, question_key

    assert question_key("arith", "What is 13 + 14? Answer with just the number.") == question_key(
        "arith", "What is 14 + 13? Answer with just the number.")
    spec = read_spec(STUDIES / "seed-cpu-v2.toml")
    splits = next(s for s in plan(spec) if s.name == "splits")
    result = splits.run(tmp_path / "data", {})
    train = {question_key("arith", p.prompt) for p in load_task("arith", size=200, seed=0,
                                                                config=spec.train_task["config"]).problems}
    held, valid = ([question_key("arith", json.loads(x)["question"]) for x in (tmp_path / "data" / f).read_text()
                    .splitlines()] for f in ("heldout.jsonl", "validation.jsonl"))
    assert (len(held), len(valid)) == (60, 64) == (result["heldout"]["problems"], result["validation"]["problems"])
    assert len(set(held)) == len(held) and len(set(valid)) == len(valid)
    assert not set(held) & train and not set(valid) & (train | set(held))


def test_the_stopping_rule_takes_the_best_and_the_earlier_on_ties():
    from evalkit.study.stages import pick

    rows = [{"step": 3, "reward": 0.2}, {"step": 6, "reward": 0.5}, {"step": 9, "reward": 0.5},
            {"step": 12, "reward": 0.1}]
    assert pick(rows, "best-greedy")["step"] == 6 and pick(rows, "final")["step"] == 12


def test_a_study_without_seeds_keeps_its_one_run_plan():
    from evalkit.study.spec import read_spec
    from evalkit.study.stages import plan

    names = [s.name for s in plan(read_spec(STUDIES / "seed-cpu.toml"))]
    assert names[:4] == ["heldout", "train-es", "train-grpo", "train-es-grpo"] and "splits" not in names


def _smoke(tmp_path: Path, model) -> Path:
    """studies/smoke-v2.toml on this model, its facts file by absolute path."""
    text = (STUDIES / "smoke-v2.toml").read_text().replace('base_model = "smollm2-135m"', f'base_model = "{model}"')
    text = text.replace('"studies/data/facts-mc.jsonl"', f'"{STUDIES / "data" / "facts-mc.jsonl"}"')
    path = tmp_path / "smoke-v2.toml"
    path.write_text(text)
    return path


@pytest.mark.slow
def test_the_smoke_v2_study_runs_every_stage_on_a_tiny_model(tmp_path, tiny_model):
    from evalkit.study import run_study

    path = _smoke(tmp_path, tiny_model)
    state = run_study(path, tmp_path / "out")
    assert {s["status"] for s in state["stages"].values()} == {"done"}
    out = tmp_path / "out"
    findings = json.loads((out / "findings" / "findings.json").read_text())
    assert [c["claim"] for c in findings["claims"]] == ["coverage", "entropy", "sparsity", "forgetting", "es-grpo"]
    assert all(c["verdict"] in findings["verdicts"] for c in findings["claims"])
    picked = state["stages"]["validate-es-s1"]["result"]["picked"]
    assert (out / picked["checkpoint"] / "model.safetensors").is_file()
    curves = state["stages"]["curves-es-grpo-s0"]["result"]["points"]
    assert [(p["trainer"], p["step"]) for p in curves] == [("es", 1), ("grpo", 1)]
    assert (out / "report" / "index.html").is_file() and (out / "findings" / "findings.md").is_file()
    interp = json.loads((out / "interpolate" / "es-grpo" / "seed-0" / "interpolate.json").read_text())
    assert [p["t"] for p in interp["points"]] == [0.0, 0.5, 1.0]
    assert "Between two checkpoints" in (out / "report" / "index.html").read_text()
    again = run_study(path, out)  # everything done: nothing reruns
    assert again["stages"]["train-es-s0"]["seconds"] == state["stages"]["train-es-s0"]["seconds"]


def test_the_budget_counts_every_group_dynamic_sampling_drew(tmp_path):
    from types import SimpleNamespace as S

    from evalkit.study.stages import _budget

    grpo = S(kind="grpo", opts=S(group_size=4, completions_per_unit=lambda: 8))  # 2 prompts x 4 per step
    (tmp_path / "metrics.jsonl").write_text(
        json.dumps({"step": 1, "groups_sampled": 2, "completions/mean_length": 10.0}) + "\n"
        + json.dumps({"step": 2, "groups_sampled": 5, "completions/mean_length": 6.0}) + "\n")  # 3 rounds
    assert _budget(tmp_path, (grpo,)) == {"completions": 8 + 20, "tokens": 80 + 120}
    es = S(kind="es", opts=S(completions_per_unit=lambda: 16))
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1, "completions/mean_length": 2.5}) + "\n")
    assert _budget(tmp_path, (es,)) == {"completions": 16, "tokens": 40}


def test_the_machine_beside_the_sums_names_the_cpu_even_when_a_hypervisor_masks_its_name():
    from evalkit.study.weights import describe_machine

    info = {"machine": "x86_64", "cpus": 2, "vendor": "AuthenticAMD", "model_name": "AMD EPYC",
            "family": "26", "model": "2", "stepping": "1", "torch": "2.13.0", "torch_threads": 2}
    assert describe_machine(info) == "AMD EPYC (AuthenticAMD family 26 model 2 stepping 1), 2 CPUs, torch 2.13.0"
    assert describe_machine(None) == "a machine not recorded"
    assert describe_machine({"model_name": "arm64", "cpus": 8, "torch": "2.13.0"}) == "arm64, 8 CPUs, torch 2.13.0"


@pytest.mark.slow
def test_a_study_committed_without_its_weights_trains_them_again_and_checks_the_bytes(tmp_path, tiny_model):
    import shutil

    from evalkit.errors import UsageError
    from evalkit.study import pending_remakes, run_study, study_plan
    from evalkit.study.weights import SUMS_FILE, check_sums, machine, read_machine, read_sums

    path, out = _smoke(tmp_path, tiny_model), tmp_path / "out"
    state = run_study(path, out, until="validate-grpo-s0")  # stops there, as at the end of a working session
    names = [s.name for s in study_plan(path, out)[1]]
    assert list(state["stages"]) == names[:names.index("validate-grpo-s0") + 1]
    assert names[names.index("validate-grpo-s0") + 1] == "sparsity-s0"  # the stages reading both arms, next
    folders = {m: out / "train" / m / "seed-0" for m in ("es", "grpo")}
    sums = {m: read_sums(f) for m, f in folders.items()}
    logs = {m: (f / "metrics.jsonl").read_bytes() for m, f in folders.items()}
    assert sorted(sums["es"]) == sorted(sums["grpo"]) == ["step-000001/model.safetensors",
                                                          "step-000002/model.safetensors"]
    assert read_machine(folders["grpo"]) == machine()  # which machine wrote those bytes

    def clone_without_weights():  # what a fresh clone of the committed folder holds (.gitignore: train/**/step-*/)
        for step in [*folders["es"].glob("step-*"), *folders["grpo"].glob("step-*")]:
            shutil.rmtree(step)

    clone_without_weights()
    (folders["es"] / "weights.machine.json").unlink()  # as sums written before evalkit named the machine
    _, stages, state = study_plan(path, out)
    assert pending_remakes(out, stages, state) == ["train-es-s0", "train-grpo-s0"]
    state = run_study(path, out, only="sparsity-s0")  # it reads every checkpoint of both arms
    assert state["stages"]["sparsity-s0"]["status"] == "done"
    for m in ("es", "grpo"):  # ES (seeded noise) and GRPO (gradients, AdamW) both reproduce their bytes
        (remade,) = state["stages"][f"train-{m}-s0"]["remade"]
        assert remade["verified"] and remade["for"] == "sparsity-s0" and remade["checkpoints"] == 2
        assert remade["machine"] == read_machine(folders[m]) == machine()  # ES's: the machine that reproduced them
        assert read_sums(folders[m]) == sums[m]
        assert (folders[m] / "metrics.jsonl").read_bytes() == logs[m]  # the first run's log stands
    assert pending_remakes(out, *study_plan(path, out)[1:]) == []

    # a clone that lost only GRPO's last checkpoint: its step 1 holds no AdamW state (only the newest
    # does), so GRPO trains again from step 0; ES resumes from its step 1
    for m in ("es", "grpo"):
        assert not (folders[m] / "step-000001" / "optimizer.pt").exists()
        shutil.rmtree(folders[m] / "step-000002")
    state = run_study(path, out, only="interpolate-es-grpo-s0")
    assert state["stages"]["interpolate-es-grpo-s0"]["status"] == "done"
    for m in ("es", "grpo"):
        assert state["stages"][f"train-{m}-s0"]["remade"][-1]["verified"]
        assert not check_sums(folders[m])
    folder, sums = folders["grpo"], sums["grpo"]

    # weights that do not reproduce the recorded ones stop the study, and are not left to be read
    first = sorted(sums)[0]
    (folder / SUMS_FILE).write_text("".join(f"{'0' * 64 if n == first else d}  {n}\n" for n, d in sums.items()))
    clone_without_weights()
    with pytest.raises(UsageError, match="differ from those its done stages read") as stopped:
        run_study(path, out, only="passk-grpo-s0")
    assert f"{machine()['cpus']} CPUs" in str(stopped.value) and "trained again on" in str(stopped.value)
    assert not list(folder.glob("step-*"))


def test_the_curves_figure_draws_each_seeds_placebo_floor_from_the_base_as_its_line(monkeypatch):
    """Two seeds saved at the same steps: one floor line per seed, starting at the base's floor
    (x = 0), not one line zigzagging between seeds at each x."""
    import analyses.report.study_sections as sections

    drawn = {}
    monkeypatch.setattr(sections.F, "panels", lambda specs, **kw: drawn.setdefault("specs", specs) and b"")
    base = {"pass@1": 0.05, "pass@8": 0.28, "placebo@8": 0.027, "entropy": 2.09}
    points = [{"seed": s, "trainer": "es", "step": step, "completions": 384 * (step // 3), "run": f"r{s}{step}",
               "pass@1": 0.1, "pass@8": 0.3, "placebo@8": 0.03 + 0.01 * s, "entropy": 2.0}
              for s in (0, 1) for step in (3, 6)]
    section = sections._curves({"curves": {"ks": [1, 8], "base": base, "es": points}, "methods": ["es"]})
    assert section is not None
    floors = [s for s in drawn["specs"][1]["series"] if s.get("floor")]
    assert [(f["x"], f["y"]) for f in floors] == [([0, 384, 768], [0.027, 0.03, 0.03]),
                                                   ([0, 384, 768], [0.027, 0.04, 0.04])]
    assert not any(s.get("floor") for spec in (drawn["specs"][0], drawn["specs"][2]) for s in spec["series"])


@pytest.mark.parametrize("sampler", ["hf-3", "hf-99"])
def test_the_committed_v2_study_is_done_under_any_sampler_and_refuses_to_draw_more_under_another(
        sampler, monkeypatch, tmp_path):
    """results/study-v2 was drawn by sampler hf-3. Under a later sampler it still reads as done (its
    stages keep the sampler they were drawn with); a stage still to draw is refused, naming both
    samplers, rather than mixing two samplers' samples in one study. A stage that only reads
    (findings) may run again."""
    import shutil

    import evalkit.sampling
    from evalkit.errors import UsageError
    from evalkit.study import _same_sampler, stage_status, study_plan

    monkeypatch.setattr(evalkit.sampling, "SAMPLER_VERSION", sampler)
    root = Path(__file__).parents[1] / "results" / "study-v2"
    _, stages, state = study_plan(STUDIES / "seed-cpu-v2.toml", root)
    states = {stage.name: stage_status(root, stage, state) for stage in stages}
    assert set(states.values()) == {"done"}, {k: v for k, v in states.items() if v != "done"}
    copy = tmp_path / "study"
    copy.mkdir()
    shutil.copy(root / "study.json", copy / "study.json")  # every stage folder missing: all "to run"
    _, stages, state = study_plan(STUDIES / "seed-cpu-v2.toml", copy)
    findings = [s for s in stages if s.name == "findings"]
    _same_sampler(copy, findings, state)  # reads only: allowed
    if sampler == "hf-3":
        _same_sampler(copy, stages, state)
    else:
        with pytest.raises(UsageError, match="drawn by sampler hf-3 .* draws with hf-99"):
            _same_sampler(copy, stages, state)
