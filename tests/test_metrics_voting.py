"""pass^k, maj@k, G-Pass@k_tau, mG-Pass@k and mean@n against exact fractions: every k-subset of
the n samples enumerated (and, for maj@k, every order, with the peers' own tie rule)."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from metrics.passk import bootstrap_passk, passk_table
from metrics.voting import (
    NO_ANSWER,
    g_pass_at_k,
    g_pass_table,
    maj_at_k,
    maj_table,
    mean_at_n,
    mg_pass_at_k,
    mg_pass_table,
    pass_hat_k,
    pass_hat_table,
    threshold_count,
    vote_classes,
)


def subsets(n, k):
    return list(itertools.combinations(range(n), k))


def brute_pass_hat(n, c, k) -> Fraction:
    return Fraction(sum(all(i < c for i in s) for s in subsets(n, k)), math.comb(n, k))


def brute_at_least(n, c, k, m) -> Fraction:
    return Fraction(sum(sum(i < c for i in s) >= m for s in subsets(n, k)), math.comb(n, k))


def labels(correct, others):
    """Sample labels: 'gold' for correct samples, then one label per other answer."""
    return ["gold"] * correct + [f"a{i}" for i, m in enumerate(others) for _ in range(m)]


def brute_maj(correct, others, k) -> Fraction:
    """Every k-subset; the gold answer's share of the plurality, ties split uniformly."""
    votes = labels(correct, others)
    total = Fraction(0)
    for s in subsets(len(votes), k):
        counts = Counter(votes[i] for i in s)
        top = max(counts.values())
        tied = [a for a, v in counts.items() if v == top]
        total += Fraction(1, len(tied)) if "gold" in tied else 0
    return total / math.comb(len(votes), k)


def lm_eval_majority_over_orders(correct, others, k) -> Fraction:
    """lm-eval's MajorityVoteFilter (`Counter(resp).most_common(1)[0][0]`) on every ordered
    draw of k samples: the exact expectation of the peers' one-draw maj@k."""
    votes = labels(correct, others)
    hits = total = 0
    for order in itertools.permutations(range(len(votes)), k):
        total += 1
        hits += Counter(votes[i] for i in order).most_common(1)[0][0] == "gold"
    return Fraction(hits, total)


CASES = [(n, c, k) for n in range(1, 9) for c in range(n + 1) for k in range(1, n + 1)]


@pytest.mark.parametrize("n,c,k", CASES[::3])
def test_pass_hat_k_is_the_exact_all_correct_fraction(n, c, k):
    assert pass_hat_k(n, c, k) == pytest.approx(float(brute_pass_hat(n, c, k)), abs=1e-15)
    assert brute_pass_hat(n, c, k) == Fraction(math.comb(c, k), math.comb(n, k))


@pytest.mark.parametrize("n,c,k", CASES[::4])
def test_g_pass_and_mg_pass_are_the_exact_subset_fractions(n, c, k):
    for tau in (0.0, 0.25, 0.5, 0.75, 1.0):
        m = max(math.ceil(Fraction(str(tau)) * k), 1)
        assert g_pass_at_k(n, c, k, tau) == pytest.approx(float(brute_at_least(n, c, k, m)), abs=1e-14)
    want = Fraction(2, k) * sum(brute_at_least(n, c, k, i) for i in range(math.ceil(k / 2) + 1, k + 1))
    assert mg_pass_at_k(n, c, k) == pytest.approx(float(want), abs=1e-14)


def test_g_pass_at_tau_zero_is_pass_at_k_and_at_one_is_pass_hat_k():
    for n, c, k in CASES:
        assert g_pass_at_k(n, c, k, 0.0) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-14)
        assert g_pass_at_k(n, c, k, 1.0) == pytest.approx(pass_hat_k(n, c, k), abs=1e-14)


def test_the_threshold_is_the_ceiling_of_the_decimal_tau():
    assert 0.55 * 100 > 55 and threshold_count(100, 0.55) == 55  # float ceil would say 56
    assert threshold_count(8, 0.0) == 1 and threshold_count(8, 0.5) == 4 and threshold_count(7, 0.5) == 4


VOTES = [(0, (3,)), (1, (1, 1)), (2, (2, 1)), (2, (1, 1, 1)), (3, (3,)), (1, (2,)), (2, (2, 2)), (3, (1, 1, 1, 1)),
         (4, (2, 2)), (2, (3, 1, 1)), (1, (1, 1, 1, 1, 1)), (5, ()), (0, ()), (3, (4, 1))]


@pytest.mark.parametrize("correct,others", [v for v in VOTES if v[0] + sum(v[1]) > 0])
def test_maj_at_k_is_the_exact_subset_vote_with_uniform_ties(correct, others):
    n = correct + sum(others)
    for k in range(1, n + 1):
        assert maj_at_k(correct, others, k) == float(brute_maj(correct, others, k)), (correct, others, k)


@pytest.mark.parametrize("correct,others", [(1, (1, 1)), (2, (2, 1)), (2, (1, 1, 1)), (1, (2,)), (2, (2,))])
def test_uniform_ties_are_the_expectation_of_lm_evals_first_seen_rule(correct, others):
    n = correct + sum(others)
    for k in range(1, n + 1):
        assert brute_maj(correct, others, k) == lm_eval_majority_over_orders(correct, others, k)


def test_maj_at_1_is_pass_at_1_and_a_sure_majority_wins():
    assert maj_at_k(3, (2, 1), 1) == pytest.approx(3 / 6, abs=1e-15)
    assert maj_at_k(5, (1, 1), 7) == 1.0 and maj_at_k(0, (4,), 2) == 0.0


def test_maj_at_k_at_larger_n_against_the_subset_sum():
    """n = 14: 3432 subsets of 7 enumerated."""
    assert maj_at_k(4, (3, 3, 2, 1, 1), 7) == float(brute_maj(4, (3, 3, 2, 1, 1), 7))


def test_vote_classes_put_correct_samples_together_and_no_answers_together():
    ids = ["p", "p", "p", "p", "p", "p", "q", "q"]
    correct = [True, True, False, False, False, False, False, True]
    answers = ["1/2", "0.5", " 3 ", "3", None, "", "7", "7"]
    order, classes = vote_classes(ids, correct, answers)
    assert order == ["p", "q"]
    assert classes == [(2, (2, 2)), (1, (1,))]  # "3" twice, "no answer" twice; q: 7 wrong once, correct once
    assert NO_ANSWER != ("3",)


def exact_mean(values):
    return sum(values, Fraction(0)) / len(values)


def test_tables_average_the_exact_per_problem_fractions_and_count_exclusions():
    ns, cs = [8, 8, 5, 8], [3, 8, 1, 0]
    ks = [1, 2, 4, 8]
    hat = pass_hat_table(ns, cs, ks)
    for row in hat.to_dict("records"):
        k = row["k"]
        kept = [(n, c) for n, c in zip(ns, cs, strict=True) if n >= k]
        want = exact_mean([Fraction(math.comb(c, k), math.comb(n, k)) for n, c in kept])
        assert row["pass_hat_k"] == pytest.approx(float(want), abs=1e-15)
        assert row["n_problems"] == len(kept) and row["n_excluded"] == len(ns) - len(kept)
        assert row["ci_low"] <= row["pass_hat_k"] <= row["ci_high"]
    g = g_pass_table(ns, cs, ks, taus=(0.5,))
    for row in g.to_dict("records"):
        k = row["k"]
        kept = [(n, c) for n, c in zip(ns, cs, strict=True) if n >= k]
        m = max(math.ceil(Fraction(1, 2) * k), 1)
        assert row["g_pass_at_k"] == pytest.approx(float(exact_mean([brute_at_least(n, c, k, m) for n, c in kept])),
                                                   abs=1e-14)
    mg = mg_pass_table(ns, cs, ks)
    assert list(mg["k"]) == [2, 4, 8]
    mean = mean_at_n(ns, cs)
    assert mean["mean_at_n"] == pytest.approx(float(exact_mean([Fraction(c, n) for n, c in zip(ns, cs, strict=True)])))
    assert mean["mean_at_n"] == pytest.approx(passk_table(ns, cs, [1])["pass_at_k"][0], abs=1e-15)


def test_maj_table_uses_the_pass_at_k_bootstrap():
    classes = [(2, (3, 1)), (0, (6,)), (6, ()), (1, (1, 1))]
    ks = [1, 2, 4]
    table = maj_table(classes, ks, n_boot=200, seed=3)
    per = np.array([[maj_at_k(c, o, k) if k <= c + sum(o) else np.nan for k in ks] for c, o in classes])
    low, high = bootstrap_passk(per, n_boot=200, seed=3)
    np.testing.assert_array_equal(table["ci_low"], low)
    np.testing.assert_array_equal(table["ci_high"], high)
    want = [float(exact_mean([brute_maj(c, o, k) for c, o in classes if c + sum(o) >= k])) for k in ks]
    np.testing.assert_allclose(table["maj_at_k"], want, atol=1e-15)
    assert list(table["n_excluded"]) == [0, 0, 1]  # the problem with n = 3 is left out at k = 4, and counted


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        pass_hat_k(4, 5, 1)
    with pytest.raises(ValueError):
        maj_at_k(1, (1,), 3)
    with pytest.raises(ValueError):
        threshold_count(4, 1.5)
