"""Issue 44: `[evaluations.forgetting] base_once = true` scores the base once per study (the
forgetting-base stage, evalkit.forgetting.base_units) and each arm's forgetting run takes its
units: the run's forgetting.json and items.jsonl are the same bytes as a run scoring both (a
generation benchmark, a multiple-choice file and the KL, on tiny models); settings that differ
make the run score the base itself and say why; the study plans the stage, and a study without the
key keeps its stages and identities (tests/test_study_v2.py)."""

from __future__ import annotations

import json

import pytest

OUTPUTS = ("forgetting.json", "items.jsonl")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from helpers.tinymodel import make_tiny_model

    folder = tmp_path_factory.mktemp("models")
    return make_tiny_model(folder / "base", seed=0), make_tiny_model(folder / "other", seed=1)


def _opts(models, tmp_path, **kw):
    from evalkit.forgetting.runner import ForgettingOptions

    rows = [{"question": f"{i} + {i} =", "choices": [str(2 * i), str(i), str(i + 1)][: 2 + i % 2], "answer": 0}
            for i in range(10)]
    mc = tmp_path / "sums.jsonl"
    mc.write_text("".join(json.dumps(r) + "\n" for r in rows))
    base, model = models
    return ForgettingOptions(base=str(base), model=str(model), suite="letter_counting", mc_files=(("sums", str(mc)),),
                             limit=6, batch_size=2, max_new_tokens=8, train_task="arith", kl_prompts=3,
                             kl_max_new_tokens=5, device="cpu", grader_workers=1, **kw)


@pytest.mark.slow
def test_an_arm_run_on_the_base_scored_once_writes_the_bytes_of_scoring_both(models, tmp_path):
    from dataclasses import replace

    from evalkit.forgetting.base_units import score_base
    from evalkit.forgetting.runner import run_forgetting

    opts = _opts(models, tmp_path)
    run_forgetting(opts, tmp_path / "both")
    summary = score_base(opts, tmp_path / "base")
    assert set(summary["benchmarks"]) == {"letter_counting", "sums"} and summary["units"] == 3 + 8  # 6 items, 15 pairs
    said = []
    run_forgetting(opts, tmp_path / "once", base_from=tmp_path / "base", log=said.append)
    assert said[0] == f"11 base units taken from {tmp_path / 'base' / 'journal.jsonl'} (0 already in the run's journal)"
    for name in OUTPUTS:
        assert (tmp_path / "once" / name).read_bytes() == (tmp_path / "both" / name).read_bytes(), name
    items = [json.loads(x) for x in (tmp_path / "once" / "items.jsonl").read_text().splitlines()]
    assert {"base_correct", "base_completion", "model_correct"} <= set(items[0])

    said.clear()  # another batch size: other units; the run scores the base itself, and says why
    other = replace(opts, batch_size=3)
    run_forgetting(other, tmp_path / "other", base_from=tmp_path / "base", log=said.append)
    assert "batch_size 2, this run has 3; the base is scored here" in said[0]
    run_forgetting(other, tmp_path / "other-both")
    for name in OUTPUTS:
        assert (tmp_path / "other" / name).read_bytes() == (tmp_path / "other-both" / name).read_bytes(), name


def test_base_once_plans_one_base_stage_that_every_arm_reads(tmp_path):
    from test_study_arms import V3, _plan

    from evalkit.study.stages import identity_hash

    facts = tmp_path / "facts.jsonl"
    facts.write_text(json.dumps({"question": "q", "choices": ["a", "b"], "answer": 0}) + "\n")
    table = f'[evaluations.forgetting]\nmc_files = {{ facts = "{facts}" }}\nsuite = "facts"\n'
    spec, plain = _plan(tmp_path, V3 + table + 'methods = ["grpo", "es-large"]\n')
    assert "forgetting-base" not in plain and "base_once" not in spec.recorded("forgetting")
    spec, once = _plan(tmp_path, V3 + table + 'methods = ["grpo", "es-large"]\nbase_once = true\n')
    assert spec.recorded("forgetting")["base_once"] is True
    assert [n for n in once if n.startswith("forgetting")] == ["forgetting-base", "forgetting-grpo-s0",
                                                               "forgetting-grpo-s1", "forgetting-es-large-s1"]
    assert once["forgetting-base"].out == "forgetting/base" and once["forgetting-base"].weights == ()
    for name in ("forgetting-grpo-s0", "forgetting-es-large-s1"):
        assert "forgetting-base" in once[name].needs
        assert identity_hash(once[name].identity) != identity_hash(plain[name].identity)
    names = list(once)
    assert names.index("forgetting-base") < names.index("train-es-s0")  # before any training
    from evalkit.errors import UsageError

    with pytest.raises(UsageError, match="evaluations.forgetting.base_once 'yes': expected true or false"):
        _plan(tmp_path, V3 + table + 'base_once = "yes"\n')


@pytest.mark.slow
def test_the_study_scores_the_base_once_and_the_arms_take_it(tmp_path, tiny_model):
    from test_study_arms import V3, _write

    from evalkit.study import run_study

    facts = tmp_path / "facts.jsonl"
    facts.write_text("".join(json.dumps({"question": f"{i} + 1 =", "choices": [str(i + 1), str(i)], "answer": 0})
                             + "\n" for i in range(4)))
    table = (f'[evaluations.forgetting]\nmc_files = {{ facts = "{facts}" }}\nsuite = "facts"\nkl_prompts = 2\n'
             'kl_max_new_tokens = 4\nmethods = ["grpo"]\nbase_once = true\n')
    state = run_study(_write(tmp_path, V3 + table, tiny_model), tmp_path / "out", until="forgetting-grpo-s0")
    base, arm = state["stages"]["forgetting-base"]["result"], state["stages"]["forgetting-grpo-s0"]["result"]
    assert base["folder"] == "forgetting/base" and base["benchmarks"]["facts"]["items"] == 4
    assert arm["base_units"].startswith(f"{base['units']} base units taken from")
    items = (tmp_path / "out" / arm["file"]).parent / "items.jsonl"
    assert len(items.read_text().splitlines()) == 4
