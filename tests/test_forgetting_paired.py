"""metrics.paired: McNemar (exact and chi-square), paired bootstrap, Holm."""

import numpy as np
import pytest
from scipy.stats import binomtest, chi2

from metrics.paired import discordant_counts, holm_adjust, mcnemar, paired_difference


def _pairs(b: int, c: int, both: int = 5, neither: int = 5):
    base = [1] * b + [0] * c + [1] * both + [0] * neither
    model = [0] * b + [1] * c + [1] * both + [0] * neither
    return base, model


def test_discordant_counts():
    assert discordant_counts(*_pairs(3, 7)) == (3, 7)


@pytest.mark.parametrize("b,c", [(0, 5), (3, 7), (10, 2), (12, 12), (1, 0)])
def test_exact_form_matches_two_sided_binomial_test(b, c):
    result = mcnemar(*_pairs(b, c))
    assert result["method"] == "exact binomial"
    assert result["p_value"] == pytest.approx(binomtest(b, b + c, 0.5).pvalue, rel=1e-12)


def test_chi_square_form_for_many_discordant_pairs():
    result = mcnemar(*_pairs(30, 12))
    stat = (abs(30 - 12) - 1) ** 2 / 42  # = 289 / 42
    assert result["method"].startswith("chi-square")
    assert result["statistic"] == pytest.approx(stat)
    assert result["p_value"] == pytest.approx(chi2.sf(stat, 1))
    assert result["p_value"] < 0.05


def test_no_discordant_pairs_gives_p_one():
    result = mcnemar([1, 0, 1], [1, 0, 1])
    assert (result["b"], result["c"], result["p_value"]) == (0, 0, 1.0)


def test_paired_difference_and_its_interval():
    base, model = _pairs(2, 10, both=20, neither=8)
    out = paired_difference(base, model, n_boot=4000, seed=1)
    assert out["base_accuracy"] == pytest.approx(22 / 40)
    assert out["model_accuracy"] == pytest.approx(30 / 40)
    assert out["difference"] == pytest.approx(8 / 40)
    assert out["ci_low"] < out["difference"] < out["ci_high"]
    assert out["ci_low"] > 0  # 10 vs 2 discordant: clearly better
    assert paired_difference(base, model, n_boot=4000, seed=1) == out  # seeded


def test_identical_outcomes_have_a_zero_width_interval():
    out = paired_difference([1, 0, 1, 1], [1, 0, 1, 1])
    assert out["difference"] == out["ci_low"] == out["ci_high"] == 0.0


def test_pairing_narrows_the_interval_compared_with_independent_resampling():
    rng = np.random.default_rng(0)
    base = rng.random(200) < 0.6
    model = base.copy()
    model[:10] = ~model[:10]  # only 10 items change
    out = paired_difference(base, model, n_boot=2000)
    assert out["ci_high"] - out["ci_low"] < 0.1  # paired about 0.06 wide; unpaired about 0.19


def test_mismatched_lengths_are_rejected():
    with pytest.raises(ValueError):
        mcnemar([1, 0], [1])


def test_holm_adjustment():
    adjusted = holm_adjust([0.01, 0.04, 0.03, 0.5])
    # sorted 0.01, 0.03, 0.04, 0.5 -> 0.04, 0.09, 0.09 (monotone), 0.5
    np.testing.assert_allclose(adjusted, [0.04, 0.09, 0.09, 0.5])
    assert holm_adjust([]).size == 0
