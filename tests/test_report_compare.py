"""metrics.compare against brute force, and the report's figure styles and cell formatting."""

from __future__ import annotations

import itertools
from math import comb

import numpy as np
import pytest

from analyses.report.document import fmt
from analyses.report.figures import STYLES
from metrics.compare import curve_crossings, paired_passk_difference, per_problem_passk


def _brute_passk(n: int, c: int, k: int) -> float:
    """Fraction of k-subsets of the n samples holding a correct one, by enumeration."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(samples, k))
    return sum(any(s) for s in subsets) / len(subsets)


def test_per_problem_matches_enumeration_and_marks_k_above_n():
    ns, cs, ks = [6, 5, 3], [2, 0, 3], [1, 2, 4, 6]
    table = per_problem_passk(ns, cs, ks)
    for i, (n, c) in enumerate(zip(ns, cs, strict=True)):
        for j, k in enumerate(ks):
            if k > n:
                assert np.isnan(table[i, j])
            else:
                assert table[i, j] == pytest.approx(_brute_passk(n, c, k), abs=1e-12)
                assert table[i, j] == pytest.approx(1 - comb(n - c, k) / comb(n, k), abs=1e-12)


def test_paired_difference_is_mean_of_per_problem_differences_and_counts_exclusions():
    rng = np.random.default_rng(3)
    n_a = rng.integers(4, 11, size=30)
    n_b = rng.integers(4, 11, size=30)
    c_a = rng.integers(0, n_a + 1)
    c_b = rng.integers(0, n_b + 1)
    table = paired_passk_difference((n_a, c_a), (n_b, c_b), [1, 4, 8], n_boot=500)
    for row in table.to_dict("records"):
        k = row["k"]
        both = (n_a >= k) & (n_b >= k)
        d = [_brute_passk(int(nb), int(cb), k) - _brute_passk(int(na), int(ca), k)
             for na, ca, nb, cb in zip(n_a[both], c_a[both], n_b[both], c_b[both], strict=True)]
        assert 0 < row["n_problems"] == both.sum() and row["n_excluded"] == 30 - both.sum()
        assert row["difference"] == pytest.approx(np.mean(d), abs=1e-12)
        assert row["ci_low"] <= row["difference"] <= row["ci_high"]
        assert row["supported"] == (row["ci_low"] > 0 or row["ci_high"] < 0)


def test_paired_interval_detects_a_consistent_gain_that_unpaired_noise_would_hide():
    # every problem: B solves 2 more samples of 8 than A; problems vary widely in difficulty
    c_a = np.arange(0, 7)
    table = paired_passk_difference(([8] * 7, c_a), ([8] * 7, c_a + 2), [1], n_boot=2000)
    row = table.iloc[0]
    assert row["difference"] == pytest.approx(0.25)
    assert row["ci_low"] == pytest.approx(0.25) and bool(row["supported"])  # no spread in d_i
    same = paired_passk_difference(([8] * 7, c_a), ([8] * 7, c_a), [1, 8])
    assert not same["supported"].any() and (same["difference"] == 0).all()


def test_paired_difference_rejects_misaligned_inputs():
    with pytest.raises(ValueError):
        paired_passk_difference(([4, 4], [1, 2]), ([4], [1]), [1])
    with pytest.raises(ValueError):
        paired_passk_difference(([4], [1]), ([4], [1]), [0])


def test_crossing_interpolates_in_log2_k():
    ks = [1, 2, 4, 8, 16]
    rl = [0.5, 0.55, 0.6, 0.62, 0.63]
    base = [0.3, 0.4, 0.5, 0.66, 0.8]
    (c,) = curve_crossings(ks, rl, base)
    # d = base - rl: -0.1 at k=4, +0.04 at k=8 -> log2 k* = 2 + 0.1 / 0.14
    assert c["k"] == pytest.approx(2 ** (2 + 0.1 / 0.14))
    assert (c["k_before"], c["k_after"], c["direction"]) == (4, 8, "b_overtakes_a")
    (back,) = curve_crossings(ks, base, rl)
    assert back["direction"] == "a_overtakes_b" and back["k"] == pytest.approx(c["k"])


def test_crossing_through_a_tie_and_no_crossing():
    (c,) = curve_crossings([1, 2, 4], [0.2, 0.3, 0.4], [0.1, 0.3, 0.5])
    assert c["k"] == pytest.approx(2.0) and (c["k_before"], c["k_after"]) == (1, 4)
    assert curve_crossings([1, 2, 4], [0.2, 0.3, 0.4], [0.1, 0.2, 0.3]) == []
    assert curve_crossings([1, 2, 4], [0.2, np.nan, 0.4], [0.3, 0.1, 0.3])[0]["k_after"] == 4


def test_series_styles_differ_without_colour():
    assert len({(dash if isinstance(dash, str) else str(dash), marker) for _, dash, marker in STYLES}) == len(STYLES)
    assert len({marker for _, _, marker in STYLES}) == len(STYLES)


@pytest.mark.parametrize("value, text", [(None, "-"), (float("nan"), "-"), (3, "3"), (2.0, "2"),
                                         (0.123456, "0.1235"), (True, "yes"), (np.int64(4), "4"),
                                         ("a|b", "a|b")])
def test_cell_format(value, text):
    assert fmt(value) == text
