"""Issue 44: bf16 sparsity at several step sizes (`[evaluations.sparsity] bf16_scales`): one short
bf16 run per method and scale (ES's alpha, GRPO's lr times the scale), the share of bf16 weights
each changed against its per-step update size over half a bf16 ulp, which both trainers log
(`update/over_half_ulp_frac`); the default [1.0] keeps today's runs and identities."""

from __future__ import annotations

import json

import pytest
from test_study_arms import V3, _plan, _write

SPARSITY = "[evaluations.sparsity]\nbf16_completions = 8\n"


def test_each_scale_is_a_run_of_its_own_and_the_first_keeps_its_identity(tmp_path):
    from evalkit.study.stages import identity_hash

    _, one = _plan(tmp_path, V3 + SPARSITY)
    spec, two = _plan(tmp_path, V3 + SPARSITY + "bf16_scales = [1.0, 4.0]\n")
    assert spec.recorded("sparsity")["bf16_scales"] == [1.0, 4.0] and "bf16_scales" not in _plan(
        tmp_path, V3 + SPARSITY)[0].recorded("sparsity")
    assert [n for n in one if n.startswith("train-bf16")] == ["train-bf16-es", "train-bf16-grpo"]
    assert [n for n in two if n.startswith("train-bf16")] == ["train-bf16-es", "train-bf16-es-x4", "train-bf16-grpo",
                                                              "train-bf16-grpo-x4"]
    for m in ("es", "grpo"):
        assert identity_hash(one[f"train-bf16-{m}"].identity) == identity_hash(two[f"train-bf16-{m}"].identity)
    es, es4 = (two[n].identity["trainer"] for n in ("train-bf16-es", "train-bf16-es-x4"))
    grpo, grpo4 = (two[n].identity["trainer"] for n in ("train-bf16-grpo", "train-bf16-grpo-x4"))
    assert (es4["alpha"], es4["sigma"], grpo4["lr"]) == (4 * es["alpha"], es["sigma"], 4 * grpo["lr"])
    assert es["dtype"] == "bfloat16" and es["seed"] == 0 and two["train-bf16-es-x4"].out == "train-bf16/es-x4"
    assert set(two["sparsity-bf16"].needs) == {"train-bf16-es", "train-bf16-es-x4", "train-bf16-grpo",
                                               "train-bf16-grpo-x4"}


@pytest.mark.parametrize("scales", ["[]", "[0.0]", "[2.0, 2.0]"])
def test_bad_scales_are_refused_naming_the_key(tmp_path, scales):
    from evalkit.errors import UsageError
    from evalkit.study.spec import read_spec

    with pytest.raises(UsageError, match="evaluations.sparsity.bf16_scales"):
        read_spec(_write(tmp_path, V3 + SPARSITY + f"bf16_scales = {scales}\n"))


def test_the_half_ulp_count_is_bf16s_rounding():
    import torch

    from evalkit.train.common import over_half_bf16_spacing

    w = torch.tensor([1.0, 1.0, -3.0, 0.0])  # bf16 spacing 2^-7 at 1, 2^-6 at 3; any change of 0 stays
    assert over_half_bf16_spacing(torch.tensor([2**-8 * 1.01, 2**-8 * 0.99, 2**-7 * 0.99, 1e-30]), w) == 2
    g = torch.Generator().manual_seed(0)
    w, step = torch.randn(20000, generator=g).bfloat16(), torch.randn(20000, generator=g) * 1e-2
    changed = int(((w.float() + step).bfloat16() != w).sum())
    assert abs(over_half_bf16_spacing(step, w) - changed) <= 0.002 * w.numel()  # ties and carries aside


@pytest.mark.slow
def test_the_bf16_runs_log_their_step_size_and_the_report_plots_it(tmp_path, tiny_model):
    from evalkit.study.spec import read_spec
    from evalkit.study.stages import plan

    spec = read_spec(_write(tmp_path, V3 + SPARSITY + "bf16_scales = [1.0, 4.0]\n", tiny_model))
    stages, out, results = {s.name: s for s in plan(spec)}, tmp_path / "out", {}
    for name in stages["sparsity-bf16"].needs:
        results[name] = stages[name].run(out / stages[name].out, {})
    for name in ("es", "grpo-x4"):
        lines = [json.loads(x) for x in (out / "train-bf16" / name / "metrics.jsonl").read_text().splitlines()]
        assert all(0 <= x["update/over_half_ulp_frac"] <= 1 for x in lines)
    got = stages["sparsity-bf16"].run(out / "sparsity" / "bf16", results)
    assert set(got) == {"es", "grpo", "by_scale"} and got["es"]["file"] == "sparsity/bf16/es/diff.json"
    rows = {(r["method"], r["scale"]): r for r in got["by_scale"]}
    assert set(rows) == {("es", 1.0), ("es", 4.0), ("grpo", 1.0), ("grpo", 4.0)}
    assert rows[("es", 1.0)]["changed_frac_bits"] == got["es"]["changed_frac_bits"]
    assert all(r["step_over_half_ulp"] is not None and r["steps"] >= 1 for r in rows.values())

    from analyses.report.study_sections import _bf16_scales

    figure, table = _bf16_scales(got["by_scale"])
    assert figure.name == "study_sparsity_bf16_scales" and figure.png.startswith(b"\x89PNG")
