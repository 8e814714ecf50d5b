"""`evalkit study`: bad study files are refused before any work, the plan answers in seconds,
and studies/smoke.toml runs every stage end to end on the tiny test model, resuming after a SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.studies import toy_study
from typer.testing import CliRunner

from evalkit.cli import app

STUDIES = Path(__file__).parents[1] / "studies"
runner = CliRunner()
pytestmark = pytest.mark.usefixtures("builtin_model")  # its one-time conversion line outside any output

GOOD = toy_study()

# The seed's other methods, on GOOD's budget (16 completions): distillation 2 steps x 2 prompts x 4
# samples; guided and hinted GRPO take [methods.grpo]'s options (2 steps x 2 prompts x 4).
NEW = """
[methods.distill]
teacher = "smollm2-135m"
prompts_per_step = 2
samples_per_prompt = 4
max_new_tokens = 8
[methods.grpo-guided]
guide_model = "smollm2-135m"
guided_rollouts = 1
guide_tokens = 2
[methods.grpo-hinted]
hint = "all-wrong"
"""

# GOOD as a seeded study (issue 29): two seeds, checkpoints every update, the stopping rule.
SEEDED = GOOD.replace('title = "t"', 'title = "t"\nseeds = [0, 1]').replace(
    "max_new_tokens = 8\n[methods.grpo]", "max_new_tokens = 8\nsave_every = 1\n[methods.grpo]").replace(
    "prompts_per_step = 2\nmax_new_tokens = 8", "prompts_per_step = 2\nmax_new_tokens = 8\nsave_every = 1") + """
[validation]
rule = "best-greedy"
[evaluations.curves]
n = 2
k = [1]
"""


def _write(tmp_path, text: str) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(text)
    return path


BAD = [
    (GOOD.replace("[methods.grpo]", "[methods.ppo]"), "methods.ppo"),
    (GOOD.replace("population = 2", "population = 2\npopulaton = 3"), "methods.es.populaton"),
    (GOOD.replace('[train_task]\nname = "arith"\nsize = 20', ""), "train_task"),
    (GOOD.replace("seed = 1", "seed = 0"), "eval_task.seed"),
    (GOOD.replace("population = 2", "population = 2\niterations = 9"), "budget"),
    (GOOD.replace('title = "t"', 'title = "t"\ntitel = "x"'), "unknown key titel"),
    (GOOD.replace("[evaluations.passk]", "[evaluations.passk]\nnn = 3"), "evaluations.passk.nn"),
    (GOOD.replace("[evaluations.passk]\nn = 2\nk = [1, 2]\nmax_new_tokens = 8", "[evaluations.entropy]"),
     "evaluations.passk is missing"),
    (GOOD.replace('name = "arith"', 'name = "no_such_task"'), "train_task: unknown task"),
    (GOOD.replace("[budget]\nper_method = 16", "[budget]\nunit = \"seconds\"\nper_method = 16"), "budget.unit"),
    (GOOD + "[methods.es-grpo]\nes_share = 1.5\n", "es_share"),
    ("this is = not [toml", "not a readable TOML"),
    (GOOD.replace("population = 2", "population = 1"), "methods.es.population 1: must be >= 2"),
    (GOOD + NEW.replace("[methods.distill]", "[methods.distil]"), "methods.distil"),
    (GOOD + NEW.replace('teacher = "smollm2-135m"\n', ""), "methods.distill.teacher is missing"),
    (GOOD + NEW.replace("samples_per_prompt = 4", "samples_per_prompt = 4\ntoken_fraction = 1.5"),
     "methods.distill.token_fraction 1.5: must be <= 1"),
    (GOOD + NEW.replace("samples_per_prompt = 4", "samples_per_prompt = 4\ntoken_fraction = 0.0"),
     "methods.distill.token_fraction 0.0: must be > 0"),
    (GOOD + NEW.replace("samples_per_prompt = 4", "samples_per_prompt = 4\nsteps = 3"), "budget: the methods spend"),
    (GOOD + NEW.replace("samples_per_prompt = 4", 'samples_per_prompt = 4\nbackend = "vllm"'),
     "methods.distill.backend vllm"),
    (GOOD + NEW.replace('guide_model = "smollm2-135m"\n', ""), "methods.grpo-guided.guide_model is missing"),
    (GOOD + NEW.replace("guided_rollouts = 1\n", ""), "methods.grpo-guided.guided_rollouts is missing"),
    (GOOD + NEW.replace("guide_tokens = 2", "guide_tokens = 8"), "methods.grpo-guided.guide_tokens 8"),
    (GOOD + NEW.replace("guided_rollouts = 1", "guided_rollouts = 4"), "methods.grpo-guided: --guided-rollouts 4"),
    (GOOD + NEW.replace('hint = "all-wrong"', 'hint = "always"'), "methods.grpo-hinted.hint always: choose all-wrong"),
    (GOOD + NEW.replace('hint = "all-wrong"', 'hint_fraction = 0.5'), "methods.grpo-hinted.hint is missing"),
    (GOOD + NEW.replace('hint = "all-wrong"', 'hint = "all-wrong"\nguide_tokens = 2'),
     "methods.grpo-hinted.guide_tokens: this key makes the method grpo-guided"),
    (GOOD.replace("[methods.grpo]", '[methods.grpo]\nhint = "all-wrong"'),
     "methods.grpo.hint: this key makes the method grpo-hinted"),
    (GOOD + '[methods.es-grpo]\n[methods.es-grpo.grpo]\nguide_model = "smollm2-135m"\n',
     "methods.es-grpo.grpo.guide_model: this key makes the method grpo-guided"),
    # values of every evaluation and method table, checked by the options class that runs it (issue 28)
    (GOOD.replace("k = [1, 2]", "k = [1, 32]"), "evaluations.passk.k 32: every k must be between 1 and n = 2"),
    (GOOD.replace("[evaluations.passk]", "[evaluations.passk]\ntemperature = -1.0"),
     "evaluations.passk.temperature -1.0: must be >= 0"),
    (GOOD.replace("[evaluations.passk]", "[evaluations.passk]\ntop_p = 0.0"), "evaluations.passk.top_p 0.0: must be > 0"),
    (GOOD.replace("k = [1, 2]", "k = [0, 2]"), "evaluations.passk.k 0,2: must be >= 1"),
    (GOOD.replace("[evaluations.passk]\nn = 2", '[evaluations.passk]\nn = "two"'), "evaluations.passk.n two: expected an integer"),
    (GOOD.replace("[evaluations.passk]\nn = 2", "[evaluations.passk]\nn = 2.5"), "evaluations.passk.n 2.5: expected an integer"),
    (GOOD.replace("[evaluations.passk]\nn = 2", "[evaluations.passk]\nn = [2]"), "evaluations.passk.n 2: expected an integer"),
    (GOOD.replace("[evaluations.passk]\nn = 2", "[evaluations.passk]\nn = {a = 1}"), "evaluations.passk.n: expected an integer, got a table"),
    (GOOD.replace("[evaluations.passk]", "[evaluations.passk]\ntemperature = nan"),
     "evaluations.passk.temperature nan: give a finite number"),
    (GOOD.replace("[evaluations.passk]", "[evaluations.passk]\ntemperature = inf"),
     "evaluations.passk.temperature inf: give a finite number"),
    (GOOD + "[evaluations.forgetting]\nlimit = -3\n", "evaluations.forgetting.limit -3: must be >= 0"),
    (GOOD + '[evaluations.forgetting]\nsuite = "nope"\n', "unknown benchmark 'nope'"),
    (GOOD + "[evaluations.groups]\ntarget = 2.0\n", "evaluations.groups.target 2.0: must be < 1"),
    (GOOD + "[evaluations.groups]\ngroup_sizes = [1, 2]\n", "evaluations.groups.group_sizes 1,2: must be >= 2"),
    (GOOD + "[evaluations.diff]\natol = -1.0\n", "evaluations.diff.atol -1.0: must be >= 0"),
    (GOOD + '[evaluations.length]\nquantiles = "4"\n', "evaluations.length.quantiles 4: expected an integer"),
    (GOOD + "[evaluations.entropy]\nfit = 1\n", "evaluations.entropy.fit 1: expected true or false"),
    (GOOD.replace("population = 2", "population = 2\nsigma = -0.1"), "methods.es.sigma -0.1: must be > 0"),
    (GOOD.replace("population = 2", 'population = "2"'), "methods.es.population 2: expected an integer"),
    (GOOD.replace("[methods.grpo]", "[methods.grpo]\nlr = inf"), "methods.grpo.lr inf: give a finite number"),
    (GOOD.replace("[methods.grpo]", '[methods.grpo]\nloss = "ppo"'), "methods.grpo.loss ppo: choose grpo, dapo or dr_grpo"),
    (GOOD.replace('name = "arith"\nsize = 20', 'name = "arith"\nsize = "abc"'), "train_task.size 'abc': expected an integer"),
    (GOOD.replace('title = "t"', "title = " + "[" * 3000 + "]" * 3000), "nested too deep"),
    (GOOD.replace('title = "t"', "title = 3"), "title 3: expected a string"),
    (GOOD.replace("[methods.grpo]\n", "[methods.grpo-hinted]\nhint = 3\n[methods.grpo]\n"),
     "methods.grpo-hinted.hint 3: expected a string"),
    (GOOD.replace('[train_task]\nname = "arith"\nsize = 20', '[train_task]\nname = "arith"\nsize = 20\n'
                  'config = {preset = "nope"}'), "train_task"),
    # a seeded study (issue 29): seeds, the stopping rule's table, the evaluations only it has
    (SEEDED.replace("seeds = [0, 1]", "seeds = [0, 0]"), "seeds [0, 0]: each seed once"),
    (SEEDED.replace("seeds = [0, 1]", 'seeds = ["a"]'), "seeds ['a']: give a list of training seeds"),
    (SEEDED.replace("seeds = [0, 1]", "seeds = [0, 1]\nseed = 3"), "seed: give seeds = [...] or seed, not both"),
    (SEEDED.replace('rule = "best-greedy"', 'rule = "last"'), "validation.rule last: choose best-greedy or final"),
    (SEEDED.replace("[validation]\n", "[validation]\nseed = 1\n"), "validation.seed 1: the validation split needs"),
    (SEEDED.replace("[validation]\n", "[validation]\nlimt = 3\n"), "unknown key validation.limt"),
    (SEEDED.replace("[validation]\n", "[validation]\nlimit = 0\n"), "validation.limit 0: must be >= 1"),
    (GOOD + "[validation]\nlimit = 3\n", "validation: the stopping rule picks among checkpoints of a seeded study"),
    (GOOD + "[evaluations.curves]\nn = 2\nk = [1]\n", "evaluations.curves: reads checkpoints along training"),
    (SEEDED.replace("[evaluations.curves]\nn = 2", "[evaluations.curves]\nn = 0"), "evaluations.curves.n 0: must be >= 1"),
    (SEEDED + "[evaluations.sparsity]\nqs = [0.0]\n", "evaluations.sparsity.qs 0.0: must be > 0"),
    (SEEDED + "[evaluations.sparsity]\nbf16_completions = -1\n", "evaluations.sparsity.bf16_completions -1: must be >= 0"),
    (SEEDED.replace("save_every = 1\n[evaluations.passk]", "save_every = 2\n[evaluations.passk]") + "[methods.es-grpo]\n",
     "methods.grpo.save_every 2: the GRPO control at ES-then-GRPO's GRPO steps needs a GRPO checkpoint at step 1"),
    (SEEDED + '[evaluations.forgetting]\nsuite = "facts"\nmc_files = { facts = "no/such.jsonl" }\n',
     "evaluations.forgetting.mc_files.facts no/such.jsonl: no such file"),
    (SEEDED + '[evaluations.forgetting]\nmc_files = ["x"]\n', "evaluations.forgetting.mc_files: give a table"),
]


@pytest.mark.parametrize(("text", "key"), BAD)
def test_bad_study_files_are_refused_naming_the_key_before_any_work(tmp_path, text, key):
    out = tmp_path / "out"
    result = runner.invoke(app, ["study", str(_write(tmp_path, text)), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.output.count("\n") == 1, result.output
    assert key in result.output
    assert not out.exists()


def test_a_file_task_has_no_held_out_split_of_its_own(tmp_path):
    task = tmp_path / "p.jsonl"
    task.write_text("".join(json.dumps({"id": f"q{i}", "question": f"{i}+1?", "answer": str(i + 1)}) + "\n"
                            for i in range(5)))
    text = GOOD.replace('name = "arith"\nsize = 20', f'name = "{task}"')
    result = runner.invoke(app, ["study", str(_write(tmp_path, text)), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "problem ids are also in the training split" in result.output


def test_budget_sets_the_steps_and_dry_run_writes_nothing(tmp_path):
    from evalkit.study.spec import read_spec

    spec = read_spec(_write(tmp_path, GOOD))
    (es,), (grpo,) = spec.methods["es"], spec.methods["grpo"]
    assert (es.opts.iterations, grpo.opts.steps) == (2, 2)  # 16 / (2 x 4), 16 / (2 x 4)
    assert spec.budget["spent"] == {"es": 16, "grpo": 16}
    out = tmp_path / "plan"
    start = time.monotonic()
    result = runner.invoke(app, ["study", str(tmp_path / "study.toml"), "--out", str(out), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert time.monotonic() - start < 20 and not out.exists()
    for stage in ("heldout", "train-es", "train-grpo", "passk-base", "passk-grpo", "findings", "report"):
        assert stage in result.output
    bad = runner.invoke(app, ["study", str(tmp_path / "study.toml"), "--out", str(out), "--only", "nope"])
    assert bad.exit_code == 2 and "no such stage" in bad.output
    bad = runner.invoke(app, ["study", str(tmp_path / "study.toml"), "--out", str(out), "--until", "nope"])
    assert bad.exit_code == 2 and "--until nope: no such stage" in bad.output


def test_a_refused_change_of_the_study_file_writes_nothing(tmp_path):
    """A stage whose settings changed since it ran is refused before study.json is touched."""
    out = tmp_path / "study"
    done = runner.invoke(app, ["study", str(_write(tmp_path, GOOD)), "--out", str(out), "--only", "heldout"])
    assert done.exit_code == 0, done.output
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    changed = _write(tmp_path, GOOD.replace("limit = 3", "limit = 4"))
    refused = runner.invoke(app, ["study", str(changed), "--out", str(out), "--only", "heldout"])
    assert refused.exit_code == 2 and "stage heldout: its settings changed" in refused.output
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_the_seed_methods_share_the_budget_and_get_every_evaluation(tmp_path):
    from evalkit.study.spec import read_spec
    from evalkit.study.stages import plan

    spec = read_spec(_write(tmp_path, GOOD + NEW))
    (distill,), (guided,), (hinted,) = (spec.methods[m] for m in ("distill", "grpo-guided", "grpo-hinted"))
    assert (distill.kind, distill.count, distill.completions) == ("distill", 2, 16)  # 2 x 2 prompts x 4 samples
    assert (guided.count, guided.opts.group_size, guided.opts.max_new_tokens, guided.opts.guide_model) == (
        2, 4, 8, "smollm2-135m")  # [methods.grpo]'s options, then its own
    assert (hinted.count, hinted.opts.hint, hinted.opts.guided_rollouts) == (2, "all-wrong", 0)
    assert spec.methods["grpo"][0].opts.hint is None and spec.methods["grpo"][0].opts.guided_rollouts == 0
    assert spec.budget["spent"] == dict.fromkeys(["es", "grpo", "distill", "grpo-guided", "grpo-hinted"], 16)
    assert spec.budget["at_most"] == {"grpo-hinted": 32}  # each all-wrong group sampled once more, at most
    tokens = read_spec(_write(tmp_path, GOOD.replace("per_method = 16", 'unit = "tokens"\nper_method = 128') + NEW))
    assert tokens.methods["distill"][0].count == 2 and tokens.budget["spent"]["distill"] == 2 * 8 * 8
    names = {s.name for s in plan(read_spec(_write(tmp_path, GOOD + NEW + "[evaluations.diff]\n"
                                                                     "[evaluations.forgetting]\n")))}
    for method in ("distill", "grpo-guided", "grpo-hinted"):
        assert {f"train-{method}", f"passk-{method}", f"diff-{method}", f"forgetting-{method}"} <= names
    assert "diff-es-vs-grpo" in names and not any("vs-distill" in n or "vs-grpo-" in n for n in names)


@pytest.mark.parametrize("key", ["teacher", "guide_model"])
def test_a_teacher_or_guide_with_another_tokenizer_is_refused_before_any_work(tmp_path, tiny_model, key):
    text = GOOD + NEW.replace(f'{key} = "smollm2-135m"', f'{key} = "{tiny_model}"')
    out = tmp_path / "out"
    result = runner.invoke(app, ["study", str(_write(tmp_path, text)), "--out", str(out)])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "tokenizers differ" in result.output and key.replace("_", "-") in result.output
    assert not out.exists()


def test_a_relative_teacher_path_is_read_from_the_current_folder(tmp_path, monkeypatch):
    from evalkit.errors import UsageError
    from evalkit.models import resolve_model
    from evalkit.study.spec import read_spec

    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "teacher").symlink_to(resolve_model("smollm2-135m").path)
    path = _write(tmp_path, GOOD + NEW.replace('teacher = "smollm2-135m"', 'teacher = "teacher"'))
    monkeypatch.chdir(tmp_path / "here")
    assert read_spec(path).methods["distill"][0].opts.teacher == "teacher"
    monkeypatch.chdir(tmp_path)  # the study file's folder: no `teacher` there
    with pytest.raises(UsageError, match="methods.distill: teacher: no such folder"):
        read_spec(path)


def test_smoke_methods_plan_shows_every_method_with_its_steps_and_budget(tmp_path):
    out = tmp_path / "plan"
    result = runner.invoke(app, ["study", str(STUDIES / "smoke-methods.toml"), "--out", str(out), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert not out.exists()
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in result.output.splitlines() if line.count("│") == 5}
    assert rows["distill"] == ["distill", "2", "16"] and rows["grpo-guided"] == ["grpo", "2", "16"]
    assert rows["grpo-hinted"] == ["grpo", "2", "16 (with hints at most 32)"] and rows["es"] == ["es", "2", "16"]
    for method in ("distill", "grpo-guided", "grpo-hinted"):
        for stage in ("train", "passk", "diff", "forgetting"):
            assert f"{stage}-{method} " in result.output, (stage, method)


def _toy_methods(tmp_path, model: Path) -> Path:
    """studies/smoke-methods.toml at half its size (one step of 8 completions of 8 tokens each), with
    `model` as base, teacher and guide."""
    text = (STUDIES / "smoke-methods.toml").read_text().replace('"smollm2-135m"', f'"{model}"')
    return _write(tmp_path, text.replace("per_method = 16", "per_method = 8").replace("max_new_tokens = 16",
                                                                                      "max_new_tokens = 8"))


@pytest.mark.slow
def test_the_new_methods_train_stages_run_end_to_end(tmp_path, tiny_model):
    path, out = _toy_methods(tmp_path, tiny_model), tmp_path / "study"
    for stage in ("train-distill", "train-grpo-guided", "train-grpo-hinted", "diff-distill"):
        result = runner.invoke(app, ["study", str(path), "--out", str(out), "--only", stage])
        assert result.exit_code == 0, result.output
    stages = _stages(out)
    assert [stages[s]["status"] for s in stages] == ["done"] * 4, stages
    logs = {m: [json.loads(x) for x in (out / "train" / m / "metrics.jsonl").read_text().splitlines()]
            for m in ("distill", "grpo-guided", "grpo-hinted")}
    assert all(len(lines) == 1 for lines in logs.values())  # 8 completions: one step each
    assert "kl_selected" in logs["distill"][0] and logs["grpo-guided"][0]["frac_guided"] == 0.25
    for m in logs:
        assert (out / stages[f"train-{m}"]["result"]["checkpoint"] / "model.safetensors").is_file()
    hinted = stages["train-grpo-hinted"]["result"]["hint_completions"]
    assert hinted % 4 == 0 and 0 <= hinted <= 8  # whole groups of 4, at most the first samplings again
    assert hinted == 4 * round(logs["grpo-hinted"][0]["frac_hinted"] * 2)
    assert (out / "diff" / "distill" / "diff.json").is_file()


def _study(out: Path, model: Path) -> subprocess.Popen:
    """studies/smoke.toml on `model` (the tiny test model: the stages and the kill are what is
    tested; the built-in model runs end to end in test_e2e_real and test_forgetting_real)."""
    spec = out.parent / "smoke.toml"
    if not spec.exists():
        spec.write_text((STUDIES / "smoke.toml").read_text().replace('base_model = "smollm2-135m"',
                                                                      f'base_model = "{model}"'))
    cmd = [str(Path(sys.executable).parent / "evalkit"), "study", str(spec), "--out", str(out)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _stages(out: Path) -> dict:
    try:
        return json.loads((out / "study.json").read_text())["stages"]
    except (OSError, ValueError, KeyError):
        return {}


@pytest.mark.slow
def test_smoke_study_runs_every_stage_and_resumes_after_a_kill(tmp_path, tiny_model):
    out = tmp_path / "smoke"
    proc = _study(out, tiny_model)
    deadline = time.monotonic() + 900
    while _stages(out).get("train-es", {}).get("status") != "done":  # then kill it, mid-study
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline
        time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = _stages(out)
    es_mtime = (out / "train" / "es" / "run.json").stat().st_mtime
    proc = _study(out, tiny_model)
    output, _ = proc.communicate(timeout=1800)
    assert proc.returncode == 0, output
    stages = _stages(out)
    assert all(s["status"] == "done" for s in stages.values()), stages
    assert stages["train-es"]["seconds"] == first["train-es"]["seconds"]  # done before the kill: skipped
    assert (out / "train" / "es" / "run.json").stat().st_mtime == es_mtime
    for model in ("base", "es", "grpo", "es-grpo"):
        assert (out / "passk" / model / "samples.jsonl").is_file() and (out / "passk" / model / "summary.json").is_file()
    for path in ("entropy/entropy.json", "length/length.json", "groups/groups.json", "diff/es/diff.json",
                 "diff/grpo/diff.json", "diff/es-grpo/diff.json", "diff/es-vs-grpo/diff.json",
                 "forgetting/es/forgetting.json", "forgetting/grpo/forgetting.json", "findings/findings.json",
                 "findings/findings.md", "report/index.html", "report/report.md", "data/heldout.jsonl"):
        assert (out / path).is_file(), path
    held = [json.loads(x)["id"] for x in (out / "data" / "heldout.jsonl").read_text().splitlines()]
    assert held and all(pid.startswith("arith-1-") for pid in held)  # the eval seed's problems
    claims = {c["claim"] for c in json.loads((out / "findings" / "findings.json").read_text())["claims"]}
    assert {"coverage", "sparsity", "forgetting", "es-grpo"} <= claims
    again = runner.invoke(app, ["study", str(tmp_path / "smoke.toml"), "--out", str(out), "--dry-run"])
    assert again.exit_code == 0 and "to run" not in again.output


def test_a_stage_recorded_before_an_option_existed_still_counts_as_done(tmp_path):
    """A study.json of an evalkit that lacked some options (no schema_version; trainers without
    `preset`, `guide_model`, `hint`) reads through evalkit.records.upgrade as holding them at
    their recorded defaults: the same stage. A recorded option with another value is a changed
    stage."""
    from evalkit.records import OPTIONS_ADDED, upgrade
    from evalkit.study import stage_status
    from evalkit.study.spec import read_spec
    from evalkit.study.stages import plan

    stages = {s.name: s for s in plan(read_spec(_write(tmp_path, GOOD)))}
    assert {"preset", "guide_model", "hint"} <= set(OPTIONS_ADDED[3])

    def old_style(identity):  # the record of an evalkit without `preset`, `guide_model`, ...
        trainers = [{k: v for k, v in t.items() if k not in ("preset", "guide_model", "hint")}
                    for t in identity.get("trainers", [])]
        return {**identity, "trainers": trainers} if trainers else identity

    old = {"kind": "study", "stages": {}}
    for name in ("heldout", "train-grpo"):
        old["stages"][name] = {"identity": old_style(stages[name].identity), "identity_hash": "older", "status": "done"}
        (tmp_path / stages[name].out).mkdir(parents=True)
    assert "guide_model" in stages["train-grpo"].identity["trainers"][0]
    assert "guide_model" not in old["stages"]["train-grpo"]["identity"]["trainers"][0]
    assert stage_status(tmp_path, stages["train-grpo"], upgrade(old)) == "done"
    trainer = dict(old["stages"]["train-grpo"]["identity"]["trainers"][0], lr=0.5)
    old["stages"]["train-grpo"]["identity"]["trainers"] = [trainer]
    assert stage_status(tmp_path, stages["train-grpo"], upgrade(old)) == "changed"


def test_the_committed_seed_study_still_resumes_without_refusal():
    """results/study ran before the seed's other methods existed: every stage is still done."""
    from evalkit.study import stage_status, study_plan

    out = Path(__file__).parents[1] / "results" / "study"
    _, stages, state = study_plan(STUDIES / "seed-cpu.toml", out)
    assert {s.name: stage_status(out, s, state) for s in stages} == {s.name: "done" for s in stages}


def _forgetting_json(folder: Path, base_acc: float, model_acc: float, p: float | None, kl: list[float]) -> None:
    folder.mkdir(parents=True)
    bench = {"benchmark": "b", "base_accuracy": base_acc, "model_accuracy": model_acc,
             "difference": model_acc - base_acc, "ci_low": -0.1, "ci_high": 0.1, "mcnemar": {"p_holm": p}}
    kl_block = {"status": "computed", "kl_sequence": sum(kl) / len(kl), "kl_per_token": 1.0, "kl_per_token_se": 0.1,
                "per_prompt_kl_sequence": kl, "prompts": len(kl), "seed": 0, "mean_positions": 5.0, "task": {}}
    (folder / "forgetting.json").write_text(json.dumps({"verdict": "x", "benchmarks": [bench], "kl": kl_block}))


@pytest.mark.parametrize("base_acc,model_acc,p,verdict", [
    (0.0, 0.0, None, "inconclusive"),   # the floor: nothing to lose, no claim either way
    (0.5, 0.5, 1.0, "supported"),
    (0.5, 0.1, 0.01, "contradicted"),
])
def test_forgetting_verdict_needs_something_to_lose(tmp_path, base_acc, model_acc, p, verdict):
    from analyses.study_findings import _forgetting

    _forgetting_json(tmp_path / "forgetting" / "es", base_acc, model_acc, p, [3.0, 5.0, 4.0])
    _forgetting_json(tmp_path / "forgetting" / "grpo", 0.5, 0.5, 1.0, [1.0, 2.0, 2.0])
    claim = _forgetting(tmp_path, ["es", "grpo"])
    assert claim["verdict"] == verdict
    assert claim["kl_es_minus_grpo"]["difference"] == pytest.approx(7 / 3)  # paired over the same prompts


def test_findings_list_other_methods_without_reading_them_in_a_verdict(tmp_path):
    from analyses.study_findings import write_findings

    _forgetting_json(tmp_path / "forgetting" / "es", 0.5, 0.5, 1.0, [3.0, 5.0, 4.0])
    _forgetting_json(tmp_path / "forgetting" / "grpo", 0.5, 0.5, 1.0, [1.0, 2.0, 2.0])
    _forgetting_json(tmp_path / "forgetting" / "distill", 0.5, 0.1, 0.01, [9.0, 9.0, 9.0])  # a significant loss
    result = write_findings(tmp_path, ["es", "grpo", "distill"], tmp_path / "findings")
    (claim,) = result["claims"]
    assert claim["verdict"] == "supported" and set(claim["by_method"]) == {"es", "grpo", "distill"}
    assert result["other_methods"] == ["distill"]
    assert "distill: figures listed above" in (tmp_path / "findings" / "findings.md").read_text()


def test_training_rows_count_no_signal_in_each_trainers_own_terms(tmp_path):
    """ES counts iterations with equal fitness (`zero_spread`), GRPO averages its share of
    zero-spread groups (`frac_reward_zero_std`); a log without either key gets neither
    (a count over a key GRPO does not write once read 0 for a GRPO run whose mean share was 0.62)."""
    from analyses.study_findings import _training

    logs = {"es": [{"reward": 0.5, "zero_spread": False}, {"reward": 0.4, "zero_spread": True}],
            "grpo": [{"reward": 0.2, "frac_reward_zero_std": 0.5}, {"reward": 0.9, "frac_reward_zero_std": 1.0},
                     {"reward": 1.0, "frac_reward_zero_std": 0.75}],
            "distill": [{"reward": 0.2, "kl": 0.6}]}
    for method, lines in logs.items():
        (tmp_path / "train" / method).mkdir(parents=True)
        (tmp_path / "train" / method / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    rows = _training(tmp_path, list(logs))
    assert rows["es"]["zero_spread_iterations"] == 1 and "mean_frac_reward_zero_std" not in rows["es"]
    assert rows["grpo"]["mean_frac_reward_zero_std"] == pytest.approx(0.75)
    assert rows["grpo"]["steps_every_group_zero_std"] == 1 and "zero_spread_iterations" not in rows["grpo"]
    assert not {"zero_spread_iterations", "mean_frac_reward_zero_std"} & set(rows["distill"])


def test_a_gain_at_the_floor_does_not_stand_against_no_forgetting(tmp_path):
    """ES keeps a benchmark the base solves (p = 1) and gains significantly on one where the base
    scored 0: no loss where there was something to lose, so the claim is supported."""
    from analyses.study_findings import _forgetting

    _forgetting_json(tmp_path / "forgetting" / "es", 0.5, 0.5, 1.0, [3.0, 5.0, 4.0])
    _forgetting_json(tmp_path / "forgetting" / "grpo", 0.5, 0.5, 1.0, [1.0, 2.0, 2.0])
    report = json.loads((tmp_path / "forgetting" / "es" / "forgetting.json").read_text())
    report["benchmarks"].append({"benchmark": "floor", "base_accuracy": 0.0, "model_accuracy": 0.3, "difference": 0.3,
                                 "ci_low": 0.1, "ci_high": 0.5, "mcnemar": {"p_holm": 0.01}})
    (tmp_path / "forgetting" / "es" / "forgetting.json").write_text(json.dumps(report))
    assert _forgetting(tmp_path, ["es", "grpo"])["verdict"] == "supported"


def test_the_committed_study_is_still_done_under_this_evalkit():
    """results/study was run by an older evalkit: every stage must still read as done (an option
    added since has its old behaviour in evalkit.records.OPTIONS_ADDED), or rerunning the
    study would redo it."""
    from evalkit.study import stage_status, study_plan

    root = Path(__file__).parents[1] / "results" / "study"
    _, stages, state = study_plan(STUDIES / "seed-cpu.toml", root)
    states = {stage.name: stage_status(root, stage, state) for stage in stages}
    assert set(states.values()) == {"done"}, {k: v for k, v in states.items() if v != "done"}


def test_dry_run_says_how_far_the_study_is_and_the_time_left_from_the_done_stages():
    from types import SimpleNamespace as S

    from evalkit.console import plan_progress

    stages = [S(name="splits", tokens=0), S(name="passk-base", tokens=10**6), S(name="passk-nucleus-base", tokens=10**6),
              S(name="train-es-s0", tokens=5 * 10**5), S(name="passk-es-s0", tokens=2 * 10**6),
              S(name="train-grpo-s0", tokens=5 * 10**5), S(name="report", tokens=0)]
    statuses = ["done", "done", "done", "done", "to run", "interrupted", "to run"]
    seconds = [0.0, 1000.0, 4000.0, 5000.0, None, 300.0, None]
    line = plan_progress(stages, statuses, seconds)
    # passk ran at 1000/s (the fastest) and 2e6 / 5000 = 400/s (pooled), train at 100/s: what is left
    # takes 2e6 / 1000 + 5e5 / 100 = 7000 s at the fastest, 2e6 / 400 + 5e5 / 100 = 10000 s pooled
    assert line == ("done: 4 of 7 stages; estimated tokens left: 2,500,000; 1.9 to 2.8 h of stage time left (at "
                    "the fastest done stage of each kind, and at their pooled rate)")
    assert plan_progress(stages, ["to run"] * 7, [None] * 7) == "done: 0 of 7 stages; estimated tokens left: 5,000,000"


def test_a_stage_redone_after_its_folder_was_removed_records_its_own_time_and_a_resumed_one_adds(tmp_path):
    """A done stage whose folder was removed runs again from nothing: its record holds that
    run's seconds, not the removed run's plus these. An interrupted stage resumes: they add."""
    from evalkit.study import _run_stage
    from evalkit.study.stages import Stage, identity_hash

    def run(folder: Path, results: dict) -> dict:
        folder.mkdir(parents=True, exist_ok=True)
        return {"file": "x"}

    stage = Stage("findings", "findings", (), {"claims": "x", "inputs": {}}, 0, run)
    for status, kept in (("done", False), ("interrupted", True)):
        state = {"kind": "study", "stages": {"findings": {
            "identity": stage.identity, "identity_hash": identity_hash(stage.identity), "out": "findings",
            "status": status, "seconds": 500.0, "tokens_estimate": 0}}}
        _run_stage(tmp_path, stage, state, None)
        record = state["stages"]["findings"]
        assert record["status"] == "done"
        assert (record["seconds"] >= 500.0) is kept, (status, record["seconds"])
