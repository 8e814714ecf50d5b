"""`evalkit interpolate`: the endpoints are passk on A and B, a model with itself has no barrier,
a planted barrier is recovered, the plane's corners are its three models."""

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import formats
from helpers.studies import toy_study
from typer.testing import CliRunner

from metrics.interpolate import barrier, bootstrap_barrier

SAMPLING = ["--n", "2", "--k", "1,2", "--temperature", "1.0", "--limit", "3", "--max-new-tokens", "6",
            "--batch-size", "6", "--device", "cpu", "--threads", "1", "--task", "arith"]


def _cli(*args):
    from evalkit.cli import app

    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return res


@pytest.fixture(scope="module")
def trained(tiny_model, tmp_path_factory):
    return formats.planted_copy(tiny_model, tmp_path_factory.mktemp("interp") / "trained")


def _samples(folder):
    rows = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    return sorted((r["problem_id"], r["sample_index"], r["completion"], r["outcome"], r["seed"]) for r in rows)


def test_endpoints_equal_passk_on_a_and_b(tiny_model, trained, tmp_path):
    _cli("interpolate", tiny_model, trained, *SAMPLING, "--points", "3", "--out", tmp_path / "i")
    summary = json.loads((tmp_path / "i" / "interpolate.json").read_text())
    assert [p["t"] for p in summary["points"]] == [0.0, 0.5, 1.0]
    for model, label in ((tiny_model, "t+0.0000"), (trained, "t+1.0000")):
        run = tmp_path / f"passk-{label}"
        _cli("passk", model, *SAMPLING, "--out", run)
        point = tmp_path / "i" / "points" / label
        assert _samples(point) == _samples(run)
        want = json.loads((run / "summary.json").read_text())["pass_at_k"]
        assert json.loads((point / "summary.json").read_text())["pass_at_k"] == want
    fixed = [json.loads(x) for x in (tmp_path / "i" / "completions.jsonl").read_text().splitlines()]
    assert len(fixed) == 2 * 3 and {r["from"] for r in fixed} == {"A", "B"}
    # a rerun resumes: nothing sampled again, the same figures
    before = (tmp_path / "i" / "interpolate.json").read_text()
    _cli("interpolate", tiny_model, trained, *SAMPLING, "--points", "3", "--out", tmp_path / "i")
    again = json.loads((tmp_path / "i" / "interpolate.json").read_text())
    assert again["points"] == json.loads(before)["points"]
    # the report's section and figure
    from analyses.report import build_report

    report = build_report([tmp_path / "i"], tmp_path / "report")
    assert "interpolation" in report.sections
    assert (tmp_path / "report" / "figures" / "interpolation_0.png").is_file()
    assert "Between two checkpoints" in (tmp_path / "report" / "report.md").read_text()


def test_a_model_with_itself_has_no_barrier(tiny_model, tmp_path):
    _cli("interpolate", tiny_model, tiny_model, *SAMPLING, "--points", "3", "--extrapolate", "--out", tmp_path / "s")
    summary = json.loads((tmp_path / "s" / "interpolate.json").read_text())
    assert [p["t"] for p in summary["points"]] == [-0.5, 0.0, 0.5, 1.0, 1.5]
    losses = {p["loss"] for p in summary["points"] if 0 <= p["t"] <= 1}
    assert len(losses) == 1  # 0.5 A + 0.5 A is A, bit for bit
    for name in ("loss", "error"):
        b = summary["barrier"][name]
        assert b["height"] == b["ci_low"] == b["ci_high"] == 0.0


def test_planted_quadratic_barrier_is_recovered():
    """f(t) = linear + h * 4t(1-t): the barrier is h, at t = 0.5, inside its interval."""
    ts = np.linspace(0, 1, 11)
    h = 0.3
    f = 0.2 + 0.1 * ts + h * 4 * ts * (1 - ts)
    assert barrier(ts, f) == pytest.approx((h, 0.5))
    rng = np.random.default_rng(0)
    per_problem = f[None, :] + rng.normal(0, 0.05, (400, ts.size))
    b = bootstrap_barrier(ts, per_problem, n_boot=500)
    assert b["t"] == 0.5 and b["ci_low"] < h < b["ci_high"] and b["ci_high"] - b["ci_low"] < 0.05
    convex = 0.2 + 0.1 * ts - h * 4 * ts * (1 - ts)  # better in the middle: no barrier
    assert barrier(ts, convex) == (0.0, 0.0)
    tokens = rng.integers(5, 20, 400).astype(float)  # a token-weighted loss: sums over tokens
    b = bootstrap_barrier(ts, per_problem * tokens[:, None], tokens, n_boot=200)
    assert b["height"] == pytest.approx(h, abs=0.02)


def test_plane_through_a_base(tiny_model, trained, tmp_path):
    other = formats.planted_copy(tiny_model, tmp_path / "other", seed=7)
    greedy = ["--limit", "2", "--max-new-tokens", "4", "--device", "cpu", "--threads", "1", "--task", "arith"]
    _cli("interpolate", trained, other, "--through", tiny_model, *greedy, "--points", "2", "--out", tmp_path / "p")
    summary = json.loads((tmp_path / "p" / "interpolate.json").read_text())
    assert summary["path"] == "plane" and len(summary["points"]) == 4
    corners = {(p["a"], p["b"]): (p["weight_base"], p["weight_A"], p["weight_B"], p["t"]) for p in summary["points"]}
    assert corners == {(0.0, 0.0): (1.0, 0.0, 0.0, None), (1.0, 0.0): (0.0, 1.0, 0.0, 0.0),
                       (0.0, 1.0): (0.0, 0.0, 1.0, 1.0), (1.0, 1.0): (-1.0, 1.0, 1.0, None)}
    base_point = next(p for p in summary["points"] if p["weight_base"] == 1.0)
    _cli("interpolate", tiny_model, tiny_model, *greedy, "--points", "2", "--out", tmp_path / "b")
    alone = json.loads((tmp_path / "b" / "interpolate.json").read_text())["points"][0]
    assert base_point["accuracy"] == alone["accuracy"]


def test_bad_input_is_one_line(tiny_model, tmp_path):
    from helpers.tinymodel import make_tiny_model

    from evalkit.cli import app

    wide = make_tiny_model(tmp_path / "wide", hidden=48)
    res = CliRunner().invoke(app, ["interpolate", str(tiny_model), str(wide), "--out", str(tmp_path / "x"),
                                   "--device", "cpu"])
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    from evalkit.errors import UsageError
    from evalkit.interpolate import InterpolateOptions

    with pytest.raises(UsageError, match="--backend hf"):
        InterpolateOptions(model=str(tiny_model), other=str(tiny_model), backend="vllm").validate()


INTERPOLATE = """
[evaluations.interpolate]
points = 3
limit = 2
max_new_tokens = 4
"""


def test_study_stage_interpolate_es_grpo(tiny_model, trained, tmp_path):
    from evalkit.study.spec import read_spec
    from evalkit.study.stages import plan

    path = tmp_path / "study.toml"
    path.write_text(toy_study(tiny_model, INTERPOLATE))
    stages = {s.name: s for s in plan(read_spec(path))}
    stage = stages["interpolate-es-grpo"]
    assert stage.needs == ("heldout", "train-es", "train-grpo") and stage.out == "interpolate/es-grpo"
    assert stage.identity["interpolate"]["points"] == 3 and stage.tokens == 3 * 2 * 1 * 4
    root = tmp_path / "run"
    (root / "data").mkdir(parents=True)
    (root / "data" / "heldout.jsonl").write_text("".join(json.dumps({"question": f"What is {i} + 1?",
                                                                     "answer": str(i + 1)}) + "\n" for i in range(3)))
    results = {"heldout": {"file": "data/heldout.jsonl"}, "train-es": {"checkpoint": str(tiny_model)},
               "train-grpo": {"checkpoint": str(trained)}}
    (root / "interpolate").mkdir()
    got = stage.run(root / "interpolate" / "es-grpo", results)
    assert got["file"] == "interpolate/es-grpo/interpolate.json" and got["loss_barrier"] >= 0
    summary = json.loads((root / got["file"]).read_text())
    assert summary["problems"] == 2 and len(summary["points"]) == 3


@pytest.mark.parametrize(("a", "b", "shown"), [
    ("results/s/train/es/seed-0/step-000009", "results/s/train/grpo/seed-0/step-000036",
     ("es/seed-0/step-000009", "grpo/seed-0/step-000036")),  # two arms of one study: the arm shows
    ("runs/a/final", "runs/b/final", ("a/final", "b/final")),
    ("smollm2-135m", "runs/grpo/final", ("smollm2-135m", "runs/grpo/final")),
    ("runs/x/final", "runs/x/final", ("x/final", "x/final")),  # a model with itself
])
def test_the_report_names_the_two_checkpoints_by_what_differs(a, b, shown):
    from analyses.report.inputs import Output
    from analyses.report.interpolate_sections import _names

    assert _names(Output(Path("i/interpolate.json"), {"models": {"A": {"name": a}, "B": {"name": b}}})) == shown
