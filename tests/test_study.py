"""`evalkit study`: bad study files are refused before any work, the plan answers in seconds,
and studies/smoke.toml runs every stage end to end on the real model, resuming after a SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalkit.cli import app

STUDIES = Path(__file__).parents[1] / "studies"
runner = CliRunner()

GOOD = """
title = "t"
base_model = "smollm2-135m"
[train_task]
name = "arith"
size = 20
[eval_task]
seed = 1
limit = 3
[budget]
per_method = 16
[methods.es]
population = 2
prompts_per_iteration = 4
max_new_tokens = 8
[methods.grpo]
group_size = 4
prompts_per_step = 2
max_new_tokens = 8
[evaluations.passk]
n = 2
k = [1, 2]
max_new_tokens = 8
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
    (GOOD.replace("population = 2", "population = 1"), "methods.es: --population 1"),
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


def _study(out: Path) -> subprocess.Popen:
    cmd = [str(Path(sys.executable).parent / "evalkit"), "study", str(STUDIES / "smoke.toml"), "--out", str(out)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _stages(out: Path) -> dict:
    try:
        return json.loads((out / "study.json").read_text())["stages"]
    except (OSError, ValueError, KeyError):
        return {}


@pytest.mark.slow
def test_smoke_study_runs_every_stage_and_resumes_after_a_kill(tmp_path):
    out = tmp_path / "smoke"
    proc = _study(out)
    deadline = time.monotonic() + 900
    while _stages(out).get("train-es", {}).get("status") != "done":  # then kill it, mid-study
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline
        time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = _stages(out)
    es_mtime = (out / "train" / "es" / "run.json").stat().st_mtime
    proc = _study(out)
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
    again = runner.invoke(app, ["study", str(STUDIES / "smoke.toml"), "--out", str(out), "--dry-run"])
    assert again.exit_code == 0 and "to run" not in again.output


def test_a_stage_recorded_before_an_option_existed_still_counts_as_done(tmp_path):
    """Identities leave options at their default out: a record written by an evalkit that
    lacked an option (here: every option at its default is dropped from the record) is the
    same stage; a recorded option with another value is a changed stage."""
    from evalkit.study import stage_status
    from evalkit.study.spec import read_spec
    from evalkit.study.stages import identity_hash, option_defaults, plan

    stages = {s.name: s for s in plan(read_spec(_write(tmp_path, GOOD)))}
    defaults = option_defaults()
    assert defaults["preset"] is None and defaults["noise"] == "iid"

    def old_style(identity):  # the record of an evalkit without `preset`, `guide_model`, ...
        trainers = [{k: v for k, v in t.items() if k not in ("preset", "guide_model", "hint")}
                    for t in identity.get("trainers", [])]
        return {**identity, "trainers": trainers} if trainers else identity

    state = {"stages": {}}
    for name in ("heldout", "train-grpo"):
        ident = old_style(stages[name].identity)
        state["stages"][name] = {"identity": ident, "identity_hash": "from-an-older-evalkit", "status": "done"}
        (tmp_path / stages[name].out).mkdir(parents=True)
    assert "guide_model" in stages["train-grpo"].identity["trainers"][0]
    assert stage_status(tmp_path, stages["train-grpo"], state) == "done"
    trainer = dict(state["stages"]["train-grpo"]["identity"]["trainers"][0], lr=0.5)
    state["stages"]["train-grpo"]["identity"]["trainers"] = [trainer]
    assert stage_status(tmp_path, stages["train-grpo"], state) == "changed"
    assert identity_hash({"a": 1, "preset": None}) == identity_hash({"a": 1})


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
