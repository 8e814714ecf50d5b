"""The estimators a seeded study's findings rest on (metrics.seeds, metrics.placebo,
metrics.sparsity): exact values on cases small enough to enumerate, and a slow reference loop."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from metrics.passk import pass_at_k
from metrics.placebo import answer_key, key_agreement, placebo_passk
from metrics.seeds import (
    per_seed,
    two_level_bootstrap,
    two_level_replicates,
    two_sample_bootstrap,
    two_sample_replicates,
)
from metrics.sparsity import add_histogram, gaussian_top_share, top_share_curve


def _reference_replicates(x: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """The two-level bootstrap as a plain loop: draw seeds, draw problems, average the pairs."""
    rng = np.random.default_rng(seed)
    s_idx = rng.integers(0, x.shape[0], size=(n_boot, x.shape[0]))
    p_idx = rng.integers(0, x.shape[1], size=(n_boot, x.shape[1]))
    return np.array([[np.mean([x[s, p, k] for s in s_idx[b] for p in p_idx[b]]) for k in range(x.shape[2])]
                     for b in range(n_boot)])


def test_two_level_bootstrap_matches_its_reference_loop():
    x = np.random.default_rng(3).normal(size=(3, 7, 2))
    fast = two_level_replicates(x, n_boot=200, seed=5)
    assert np.allclose(fast, _reference_replicates(x, 200, 5), rtol=0, atol=1e-12)
    est, low, high = two_level_bootstrap(x, n_boot=200, seed=5)
    assert np.allclose(est, x.mean(axis=(0, 1)))
    assert np.allclose(low, np.quantile(fast, 0.025, axis=0)) and np.allclose(high, np.quantile(fast, 0.975, axis=0))


def test_two_level_bootstrap_with_problems_alike_is_the_seed_level_alone():
    """Every problem of a seed has its seed's value: replicate means are means of S seeds drawn
    with replacement. With two seeds (values 0 and 1) they are 0, 1/2, 1 with probabilities
    1/4, 1/2, 1/4, so the 2.5% and 97.5% quantiles are exactly 0 and 1."""
    x = np.repeat(np.array([[0.0], [1.0]]), 5, axis=1)
    reps = two_level_replicates(x, n_boot=4000, seed=0)[:, 0]
    assert set(np.unique(reps)) == {0.0, 0.5, 1.0}
    assert abs(np.mean(reps == 0.5) - 0.5) < 0.03
    assert two_level_bootstrap(x, n_boot=4000, seed=0) == (0.5, 0.0, 1.0)


def test_one_seed_is_the_bootstrap_over_problems_and_per_seed_lists_each():
    x = np.array([[0.0, 0.0, 1.0, 1.0]])
    est, low, high = two_level_bootstrap(x, n_boot=2000, seed=1)
    assert est == 0.5 and 0.0 <= low < 0.5 < high <= 1.0
    rows = per_seed(np.array([[0.0, 1.0], [1.0, 1.0]]))
    assert [r[0] for r in rows] == [0.5, 1.0] and rows[1][1:] == (1.0, 1.0)
    with pytest.raises(ValueError, match="finite"):
        two_level_bootstrap(np.array([[np.nan, 1.0]]))


def test_placebo_is_the_exact_mean_over_partners_with_another_answer():
    """Problem 0 (answer 5) has samples 7, 7, 5, None: against problem 1 (answer 7) 2 of 4 hit,
    against problem 2 (answer 9) none; problem 3 shares answer 5 and is no partner."""
    keys = [["7", "7", "5", None], ["5", "1", "7", "7"], ["9", "9", "9", "9"], ["5", "5", "5", "5"]]
    answers = ["5", "7", "9", "5"]
    floor = placebo_passk(keys, answers, [1, 2])
    assert floor[0, 0] == pytest.approx((pass_at_k(4, 2, 1) + pass_at_k(4, 0, 1)) / 2)
    assert floor[0, 1] == pytest.approx((pass_at_k(4, 2, 2) + 0.0) / 2)
    assert floor[2, 0] == pytest.approx(0.0)  # its samples say 9, its own answer: no other problem's
    assert floor[3, 0] == pytest.approx((0 + 0) / 2)  # 5 is its own answer (and problem 0's: not a partner)
    brute = np.mean([np.mean([np.mean([k == answers[j] for k in keys[1]]) for j in (0, 2, 3)])])
    assert floor[1, 0] == pytest.approx(brute)
    assert np.isnan(placebo_passk([["1"], ["1"]], ["1", "1"], [1])).all()  # every problem shares the answer


def test_answer_keys_compare_numbers_by_value_and_agree_with_a_grader():
    assert answer_key(" 27") == answer_key("27.0") == answer_key("27") == "27"
    assert answer_key("1,000") == "1000" and answer_key("2.5") == "2.5" and answer_key(None) is None
    assert answer_key("Paris") == answer_key("paris ")
    assert key_agreement([["27", "3", None]], ["27"], [[True, False, False]]) == 1.0
    assert key_agreement([["27"]], ["27"], [[False]]) == 0.0


def test_top_share_curve_of_gaussian_noise_is_the_gaussian_reference():
    d = np.random.default_rng(0).standard_normal(2_000_000).astype(np.float32)
    hist = add_histogram(add_histogram(None, d[:1_000_000]), d[1_000_000:])  # summed over "tensors"
    qs = [0.001, 0.01, 0.1, 0.5]
    for q, got in zip(qs, top_share_curve(hist, qs), strict=True):
        assert got == pytest.approx(gaussian_top_share(q), abs=2e-3)
    assert gaussian_top_share(0.01) == pytest.approx(0.0845, abs=5e-4)  # 2 t phi(t) + q, t = 2.5758
    assert top_share_curve(add_histogram(None, 7.0 * d), qs) == pytest.approx(top_share_curve(
        add_histogram(None, d), qs), abs=1e-3)  # scale free
    sparse = np.zeros(10_000, np.float32)
    sparse[:10] = 1.0
    assert top_share_curve(add_histogram(None, sparse), [0.001])[0] == pytest.approx(1.0)


def test_gaussian_reference_integrates_x_squared_phi():
    from scipy import integrate
    from scipy.stats import norm

    for q in (0.002, 0.05, 0.3):
        t = norm.isf(q / 2)
        tail = 2 * integrate.quad(lambda x: x * x * norm.pdf(x), t, math.inf)[0]
        assert gaussian_top_share(q) == pytest.approx(tail, rel=1e-6)


def test_every_pair_of_seeds_is_a_possible_replicate():
    """With 2 seeds and 1 problem, the 4 ordered seed draws give means 0, .5, .5, 1 (enumerated)."""
    x = np.array([[0.0], [1.0]])
    want = sorted(np.mean(pair) for pair in itertools.product([0.0, 1.0], repeat=2))
    assert want == [0.0, 0.5, 0.5, 1.0]
    assert set(two_level_replicates(x, n_boot=500, seed=2)[:, 0]) <= set(want)


def _exact_two_sample(a, b):
    """Mean and variance of the two-sample replicate, by enumerating every equally likely draw
    (each arm's seeds, then the shared problems), in exact fractions."""
    from fractions import Fraction

    (sa, p), sb = a.shape, b.shape[0]
    values = []
    for da in itertools.product(range(sa), repeat=sa):
        for db in itertools.product(range(sb), repeat=sb):
            for dp in itertools.product(range(p), repeat=p):
                ma = sum(Fraction(a[s, i]) for s in da for i in dp) / (sa * p)
                mb = sum(Fraction(b[s, i]) for s in db for i in dp) / (sb * p)
                values.append(ma - mb)
    mean = sum(values) / len(values)
    return mean, sum((v - mean) ** 2 for v in values) / len(values)


def test_two_separately_trained_arms_are_resampled_apart_not_paired_by_seed_number():
    """a and b are the same numbers seed for seed, so pairing seed s with seed s (the two-level
    bootstrap of a - b) sees no spread at all; the two arms are separate runs, and the
    two-sample replicates have the variance of their exact enumeration."""
    a = np.array([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    b = a.copy()
    assert two_level_bootstrap(a - b, n_boot=500) == (0.0, 0.0, 0.0)
    mean, var = _exact_two_sample(a, b)
    reps = two_sample_replicates(a, b, n_boot=200_000, seed=1)[:, 0]
    assert mean == 0 and float(var) > 0.05
    assert abs(reps.mean()) < 4 * math.sqrt(float(var) / reps.size)
    assert reps.var() == pytest.approx(float(var), rel=0.02)
    est, low, high = two_sample_bootstrap(a, b, n_boot=4000)
    assert est == 0.0 and low < -0.2 and high > 0.2


def test_two_sample_bootstrap_takes_arms_of_other_seed_counts_and_one_seed_each_is_over_problems():
    rng = np.random.default_rng(4)
    a, b = rng.integers(0, 2, size=(3, 3)).astype(float), rng.integers(0, 2, size=(2, 3)).astype(float)
    mean, var = _exact_two_sample(a, b)
    reps = two_sample_replicates(a, b, n_boot=100_000, seed=2)[:, 0]
    assert float(mean) == pytest.approx(a.mean() - b.mean())
    assert reps.var() == pytest.approx(float(var), rel=0.03)
    # one seed each: only the problems vary, as the problem bootstrap of the paired difference
    one_a, one_b = a[:1], b[:1]
    assert _exact_two_sample(one_a, one_b) == _exact_two_sample(one_a - one_b, np.zeros((1, 3)))
    with pytest.raises(ValueError, match="same problems"):
        two_sample_replicates(a, b[:, :2])
