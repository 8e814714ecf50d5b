"""Entropy law fit, entropy summaries, teacher-forced entropy vs the sampler, `evalkit entropy`."""

import json
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from evalkit.cli import app
from metrics.entropy import entropy_summary, fit_entropy_law


def test_fit_recovers_known_law_exactly():
    h = np.linspace(0.1, 1.5, 7)
    r = -0.2 * np.exp(h) + 0.9
    fit = fit_entropy_law(h, r)
    assert fit["a"] == pytest.approx(0.2, abs=1e-12)
    assert fit["b"] == pytest.approx(0.9, abs=1e-12)
    assert fit["ceiling"] == pytest.approx(0.7, abs=1e-12)
    assert fit["r2"] == pytest.approx(1.0, abs=1e-12) and fit["n_points"] == 7
    assert fit_entropy_law(h[::-1], r[::-1])["a"] == pytest.approx(0.2)  # order does not matter


def test_fit_with_noise_stays_close():
    rng = np.random.default_rng(0)
    h = rng.uniform(0.05, 1.2, 200)
    r = -0.15 * np.exp(h) + 0.8 + rng.normal(0, 0.01, h.size)
    fit = fit_entropy_law(h, r)
    assert fit["a"] == pytest.approx(0.15, abs=0.01)
    assert fit["b"] == pytest.approx(0.8, abs=0.02)
    assert 0.9 < fit["r2"] < 1.0
    assert fit["rmse"] == pytest.approx(0.01, rel=0.2)


@pytest.mark.parametrize("h", [[0.5], [0.5, 0.5, 0.5]])
def test_fit_refuses_degenerate_input(h):
    with pytest.raises(ValueError):
        fit_entropy_law(h, [0.1] * len(h))


def test_entropy_summary_by_hand():
    s = entropy_summary([1.0, 2.0, np.nan, 4.0], [1, 3, 5, 4], [True, False, True, False])
    assert s["mean_per_sample"] == pytest.approx(7 / 3)
    assert s["mean_per_token"] == pytest.approx((1 * 1 + 2 * 3 + 4 * 4) / 8)
    assert s["mean_correct"] == pytest.approx(1.0)
    assert s["mean_incorrect"] == pytest.approx(3.0)
    assert s["quantiles"]["q50"] == pytest.approx(2.0)
    assert s["n_samples"] == 4 and s["n_missing"] == 1


# ---- teacher forcing on the tiny model -------------------------------------

@pytest.fixture(scope="module")
def tiny(tiny_model):
    from evalkit.models import load_model, resolve_model

    return load_model(resolve_model(str(tiny_model)))


@pytest.mark.parametrize("temperature", [1.0, 0.6, 0.0])
def test_teacher_forced_entropy_equals_sampler_entropy(tiny, temperature):
    from evalkit.forced import ForcedSample, forced_from_records, teacher_entropy
    from evalkit.sampling import SamplingConfig, render_prompt, sample_chunk, stop_token_ids

    model, tok = tiny
    users = ["What is 3 + 4?", "Add 12 and 30, please. Then say why."]
    prompts = [render_prompt(tok, u) for u in users]
    # Extra stop tokens (common characters) make stopped and truncated samples both occur.
    stops = stop_token_ids(model, tok) + tok.convert_tokens_to_ids(["a", "e", " "])
    cfg = SamplingConfig(n=6, temperature=temperature, max_new_tokens=14, seed=3)
    samples = sample_chunk(model, tok, prompts, ["p0", "p1"], cfg, stop_ids=stops)
    if temperature > 0:
        assert {s.finish_reason for s in samples} == {"stop", "length"}
    recorded = np.array([s.mean_entropy for s in samples])

    prompt_ids = [tuple(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    forced = [ForcedSample(prompt_ids[s.problem_index], s.token_ids, s.finish_reason == "stop", temperature)
              for s in samples]
    assert [f.num_tokens for f in forced] == [s.num_tokens for s in samples]
    by_ids = np.array(teacher_entropy(model, forced, max_batch_tokens=120))
    np.testing.assert_allclose(by_ids, recorded, atol=1e-5, rtol=0)

    # From text: the char tokenizer re-tokenizes exactly unless a special token was generated.
    texts = [tok.decode(s.token_ids, skip_special_tokens=True) for s in samples]
    exact = [i for i, (t, s) in enumerate(zip(texts, samples, strict=True))
             if list(tok(t, add_special_tokens=False)["input_ids"]) == list(s.token_ids)]
    assert len(exact) >= len(samples) // 2
    records = [{"prompt": users[samples[i].problem_index], "completion": texts[i],
                "finish_reason": samples[i].finish_reason} for i in exact]
    by_text = teacher_entropy(model, forced_from_records(tok, records, temperature=temperature))
    np.testing.assert_allclose(by_text, recorded[exact], atol=1e-5, rtol=0)


# ---- CLI on real run folders ------------------------------------------------

@pytest.fixture(scope="module")
def runs(tiny_model, tmp_path_factory):
    """Three real passk runs of the tiny model at different temperatures, with
    outcomes relabelled to give distinct accuracies (the random model is never right)."""
    from evalkit.passk import PasskOptions, run_passk

    root = tmp_path_factory.mktemp("entropy_runs")
    paths = []
    for i, temperature in enumerate((1.0, 0.7, 0.4)):
        out = root / f"run{i}"
        run_passk(PasskOptions(model=str(tiny_model), task="arith", n=4, ks=(1, 4), limit=2,
                               max_new_tokens=6, batch_size=8, temperature=temperature,
                               grader_workers=1), out)
        records = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
        for j, r in enumerate(records):
            r["outcome"] = "correct" if j % 4 < i + 1 else "incorrect"
        (out / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        paths.append(out)
    return paths


def _records(path):
    return [json.loads(x) for x in (path / "samples.jsonl").read_text().splitlines()]


def test_entropy_cli_fit_and_outputs(runs, tmp_path):
    out = tmp_path / "rep"
    args = ["entropy", *map(str, runs[::-1]), "--fit", "--steps", "300,200,100", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads((out / "entropy.json").read_text())
    rows = report["tables"]["runs"]
    assert [r["step"] for r in rows] == [100, 200, 300]  # sorted by --steps
    assert [r["run"] for r in rows] == ["run0", "run1", "run2"]
    hs, accs = [], []
    for path, row in zip(runs, rows, strict=True):
        recs = _records(path)
        hs.append(np.mean([r["mean_entropy"] for r in recs]))
        accs.append(np.mean([r["outcome"] == "correct" for r in recs]))
        assert row["mean_per_sample"] == pytest.approx(hs[-1])
        assert row["accuracy"] == pytest.approx(accs[-1])
    want = fit_entropy_law(hs, accs)
    assert report["fit"]["a"] == pytest.approx(want["a"]) and report["fit"]["b"] == pytest.approx(want["b"])
    assert report["fit"]["ceiling"] == pytest.approx(want["b"] - want["a"])
    assert {r["task"]["name"] for r in report["runs"]} == {"arith"}
    assert (out / "entropy_runs.csv").is_file()
    assert "ceiling at H=0" in result.output


def test_entropy_cli_mixed_tasks_and_missing_entropy(runs, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(runs[0], other)
    summary = json.loads((other / "summary.json").read_text())
    summary["task"]["config"] = {"max_operand": 9}
    (other / "summary.json").write_text(json.dumps(summary))
    runner = CliRunner()
    refused = runner.invoke(app, ["entropy", str(runs[0]), str(other)])
    assert refused.exit_code == 2 and "--allow-mixed-tasks" in refused.output
    allowed = runner.invoke(app, ["entropy", str(runs[0]), str(other), "--allow-mixed-tasks",
                                  "--out", str(tmp_path / "mixed")])
    assert allowed.exit_code == 0, allowed.output
    labels = [r["task"] for r in json.loads((tmp_path / "mixed" / "entropy.json").read_text())["tables"]["runs"]]
    assert len(set(labels)) == 2 and all(label.startswith("arith#") for label in labels)
    assert runner.invoke(app, ["entropy", str(runs[0]), str(other), "--allow-mixed-tasks", "--fit"]).exit_code == 2

    bare = tmp_path / "bare"
    shutil.copytree(runs[0], bare)
    recs = [{**r, "mean_entropy": None} for r in _records(bare)]
    (bare / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    result = runner.invoke(app, ["entropy", str(bare)])
    assert result.exit_code == 2 and "evalkit entropy --model" in result.output
    assert runner.invoke(app, ["entropy", str(runs[0]), "--steps", "1,2"]).exit_code == 2
    assert runner.invoke(app, ["entropy"]).exit_code == 2


def test_entropy_cli_teacher_forces_run_and_jsonl(runs, tiny_model, tmp_path):
    runner = CliRunner()
    out = tmp_path / "forced"
    result = runner.invoke(app, ["entropy", "--model", str(tiny_model), "--samples", str(runs[1]),
                                 "--device", "cpu", "--out", str(out)])
    assert result.exit_code == 0, result.output
    table = json.loads((out / "entropy.json").read_text())["tables"]["samples"]
    recs = _records(runs[1])
    # rows whose text re-tokenizes to the generated tokens (no special token dropped) match exactly
    exact = [i for i, r in enumerate(recs)
             if len(r["completion"]) + (r["finish_reason"] == "stop") == r["num_tokens"]]
    assert exact
    for i in exact:
        assert table[i]["mean_entropy"] == pytest.approx(recs[i]["mean_entropy"], abs=1e-5)

    from evalkit.tasks import load_task

    prompts = {p.id: p.prompt for p in load_task("arith", size=200, seed=0).problems}
    jsonl = tmp_path / "external.jsonl"
    jsonl.write_text("".join(json.dumps({"prompt": prompts[recs[i]["problem_id"]], "completion": recs[i]["completion"],
                                         "temperature": 0.7, "finish_reason": recs[i]["finish_reason"]}) + "\n"
                             for i in exact))
    result = runner.invoke(app, ["entropy", "--model", str(tiny_model), "--samples", str(jsonl),
                                 "--device", "cpu", "--out", str(tmp_path / "ext")])
    assert result.exit_code == 0, result.output
    ext = json.loads((tmp_path / "ext" / "entropy.json").read_text())["tables"]["samples"]
    np.testing.assert_allclose([row["mean_entropy"] for row in ext], [recs[i]["mean_entropy"] for i in exact],
                               atol=1e-5)

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x"}\n')
    for args in (["entropy", "--model", str(tiny_model), "--samples", str(bad)],
                 ["entropy", "--samples", str(jsonl)],
                 ["entropy", str(runs[0]), "--model", str(tiny_model), "--samples", str(jsonl)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
