"""Issue 44's arm checks: the positive control on validation and the comparison at matched pass@1
(metrics.positive_control, metrics.matched, analyses.arm_checks on the committed v2 study)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from metrics.matched import CurvePoint, matched_comparison, nearest_checkpoint, pass1
from metrics.passk import per_problem_passk
from metrics.positive_control import one_sided_p, positive_control

V2 = Path(__file__).resolve().parents[1] / "results" / "study-v2"


def _point(label, cs, n=8):
    cs = np.asarray(cs)
    return CurvePoint(label, np.full(cs.size, n), cs)


def test_nearest_checkpoint_ties_to_the_earlier():
    curve = [_point("s0", [0, 0, 8, 0]), _point("s1", [4, 4, 0, 0]), _point("s2", [8, 8, 0, 0])]
    assert [pass1(p) for p in curve] == [0.25, 0.25, 0.5]
    assert nearest_checkpoint(curve, 0.3) == 0 and nearest_checkpoint(curve, 0.45) == 2


def test_matched_comparison_reads_each_arm_at_the_common_pass1():
    rng = np.random.default_rng(0)
    a = [_point(f"a{i}", rng.binomial(8, p, 40)) for i, p in enumerate((0.1, 0.3, 0.5, 0.7))]
    b = [_point(f"b{i}", rng.binomial(8, p, 40)) for i, p in enumerate((0.2, 0.35, 0.45))]
    out = matched_comparison(a, b, [2, 8], n_boot=500)
    assert out["target"] == max(pass1(p) for p in b)  # b tops out lower: the highest level both reach
    assert out["b"]["label"] == "b2" and out["a"]["label"] == a[nearest_checkpoint(a, out["target"])].label
    pa, pb = a[out["a"]["index"]], b[out["b"]["index"]]
    for row in out["passk"]:
        want = per_problem_passk(pb.ns, pb.cs, [row["k"]]) - per_problem_passk(pa.ns, pa.cs, [row["k"]])
        assert row["difference"] == pytest.approx(float(want.mean()))
        assert row["low"] <= row["difference"] <= row["high"] and row["problems"] == 40
    assert out["pass1_gap"]["difference"] == pytest.approx(out["b"]["pass1"] - out["a"]["pass1"])
    given = matched_comparison(a, b, [8], target=0.1, n_boot=200)
    assert given["a"]["label"] == "a0" and given["target_rule"] == "given"


def test_matched_comparison_refuses_curves_over_other_problems():
    with pytest.raises(ValueError, match="same problems"):
        matched_comparison([_point("a", [1, 2])], [_point("b", [1, 2, 3])], [2])


def test_one_sided_p_exact_and_permutation():
    base = np.array([0, 0, 0, 0, 1, 1, 0, 0, 0, 0])
    model = np.array([1, 1, 1, 1, 1, 0, 0, 0, 0, 0])
    p, method = one_sided_p(base, model)
    assert method.startswith("exact") and p == pytest.approx(6 / 32)  # 4 wins, 1 loss: P(X >= 4), X ~ Bin(5, .5)
    assert one_sided_p(base, base)[0] == 1.0
    p_perm, method = one_sided_p(base * 0.5, model * 0.5 + 0.01)
    assert method == "sign-flip permutation" and 0 < p_perm < 0.2


def test_positive_control_corrects_for_the_candidates():
    base = np.zeros(40)
    strong = np.r_[np.ones(8), np.zeros(32)]  # 8 wins, no loss: p = 2^-8
    one = positive_control(base, {"a": strong}, "a")
    many = positive_control(base, {str(i): strong for i in range(200)}, "0")
    assert one["passed"] and one["p_value"] == pytest.approx(2 ** -8) and one["gain_low"] > 0
    assert not many["passed"] and many["level"] == 0.05 / 200  # 0.0039 > 0.00025
    with pytest.raises(ValueError, match="not among"):
        positive_control(base, {"a": strong}, "b")


@pytest.mark.skipif(not (V2 / "study.json").is_file(), reason="the committed v2 study")
def test_on_the_committed_v2_study():
    from analyses.arm_checks import matched_pass1, validation_control

    control = validation_control(V2, "es", 0)
    assert control["candidates"] == 4 and control["picked_step"] == 9 and control["problems"] == 64
    assert control["base"] == pytest.approx(0.265625) and control["model"] == pytest.approx(0.484375)
    assert control["level"] == pytest.approx(0.0125) and control["passed"] == (control["p_value"] <= 0.0125)
    from analyses.arm_checks import validation_plateau

    flat = validation_plateau(V2, "es", 0, margin=1 / 64, after=1)  # rewards 17, 27, 31, 24 of 64
    assert (flat["step"], flat["completions"], flat["reached"]) == (9, 1152, True)
    assert flat["seconds_pro_rata"] == pytest.approx(584.1 * 1152 / 1536)
    matched = matched_pass1(V2, "grpo", "es", 0, [1, 8, 64])
    assert matched["a"]["curve"][0] == matched["b"]["curve"][0]  # the base's point starts both curves
    assert len(matched["a"]["curve"]) == 5 and [r["k"] for r in matched["passk"]] == [1, 8, 64]
    assert matched["seed"] == 0 and matched["boot_seed"] == 0
    assert matched["matched"] == (abs(matched["pass1_gap"]["difference"]) <= 0.02)


@pytest.mark.skipif(not (V2 / "study.json").is_file(), reason="the committed v2 study")
def test_the_arm_summary_lists_every_arm_and_flags_a_pair_that_never_met():
    """v2: every trained arm's control and plateau per seed; GRPO against ES at matched pass@1 per
    seed, GRPO's curve jumping past ES's best (0.125 at seed 0): its nearest point is the base's,
    0.077 below, so the pair is flagged unmatched rather than read as a comparison."""
    from analyses.arm_checks import arm_summary
    from analyses.study_seeded import Study

    out = arm_summary(Study(V2))
    assert set(out["positive_control"]) == {"es", "grpo", "es-grpo"}
    assert [c["seed"] for c in out["positive_control"]["es"]] == [0, 1, 2]
    assert [r["seed"] for r in out["matched"]["grpo - es"]] == [0, 1, 2]
    first = out["matched"]["grpo - es"][0]
    assert first["b"]["label"] == "base step 0" and first["matched"] is False
    assert first["pass1_gap"]["difference"] == pytest.approx(0.048 - 0.125, abs=0.001)


def test_plateau_is_the_earliest_checkpoint_near_the_best():
    from metrics.plateau import plateau

    p = plateau([384, 768, 1152, 1536], [0.27, 0.42, 0.48, 0.38], margin=1 / 64, after=2)
    assert (p["index"], p["completions"], p["best"], p["checkpoints_after"], p["reached"]) == (2, 1152, 0.48, 1, False)
    p = plateau([1, 2, 3, 4, 5], [0.1, 0.47, 0.5, 0.49, 0.5], margin=0.05, after=2, seconds=[10, 20, 30, 40, 50])
    assert (p["index"], p["reached"], p["seconds"]) == (1, True, 20.0)
    with pytest.raises(ValueError):
        plateau([1, 2], [0.1], margin=0.0)
