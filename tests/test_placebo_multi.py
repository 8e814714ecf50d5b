"""metrics.placebo with several right answers per problem (evalkit's pairsum): exact values by hand.

Four problems; answers as sets of keys:
    0: {a, b}   1: {c}   2: {b, d}   3: {e, f}
Problem 2 shares b with problem 0, so neither is the other's partner. The samples' keys:
    0: c c a e      partners 1, 3: 2 of 4 hit c, 1 of 4 hits e
    1: a d x None   partners 0, 2, 3: 1 hit each for 0 (a) and 2 (d), none for 3
    2: b b f d      partners 1, 3: b is problem 0's, no partner; f is 3's: 0 and 1 of 4
    3: e f a None   partners 0, 1, 2: a is 0's: 1, 0, 0 of 4 (e and f are its own)
"""

from __future__ import annotations

import numpy as np
import pytest

from metrics.passk import pass_at_k
from metrics.placebo import key_agreement, placebo_counts, placebo_passk

KEYS = [["c", "c", "a", "e"], ["a", "d", "x", None], ["b", "b", "f", "d"], ["e", "f", "a", None]]
ANSWERS = [frozenset("ab"), frozenset("c"), frozenset("bd"), frozenset("ef")]


def test_counts_and_partners_by_hand():
    n, c, valid = placebo_counts(KEYS, ANSWERS)
    assert n.tolist() == [4, 4, 4, 4]
    assert c.tolist() == [[1, 2, 0, 1],   # a is 0's own; c is 1's; e is 3's
                          [1, 0, 1, 0],   # a (0's), d (2's)
                          [2, 0, 3, 1],   # b, b count for 0 and 2; d for 2; f for 3
                          [1, 0, 0, 2]]   # a for 0; e, f its own
    assert valid.tolist() == [[False, True, False, True],
                              [True, False, True, True],
                              [False, True, False, True],
                              [True, True, True, False]]


def test_floor_is_the_mean_over_partners_by_hand():
    floor = placebo_passk(KEYS, ANSWERS, [1, 2])
    assert floor[0, 0] == pytest.approx((2 / 4 + 1 / 4) / 2)  # 0.375
    assert floor[0, 1] == pytest.approx((pass_at_k(4, 2, 2) + pass_at_k(4, 1, 2)) / 2)  # (5/6 + 1/2) / 2
    assert floor[0, 1] == pytest.approx(2 / 3)
    assert floor[1, 0] == pytest.approx((1 / 4 + 1 / 4 + 0) / 3)  # 1/6
    assert floor[2, 0] == pytest.approx((0 + 1 / 4) / 2)  # 1/8: its b's would hit problem 0, no partner
    assert floor[3, 0] == pytest.approx((1 / 4 + 0 + 0) / 3)  # 1/12
    assert floor[3, 1] == pytest.approx(pass_at_k(4, 1, 2) / 3)  # 1/6


def test_lists_tuples_and_sets_are_one_answer_set_and_single_keys_keep_their_meaning():
    as_lists = placebo_passk(KEYS, [sorted(a) for a in ANSWERS], [1, 2])
    assert np.allclose(as_lists, placebo_passk(KEYS, ANSWERS, [1, 2]))
    single = [["7", "7", "5", None], ["5", "1", "7", "7"], ["9", "9", "9", "9"]]
    assert np.allclose(placebo_passk(single, ["5", "7", "9"], [1, 2]),
                       placebo_passk(single, [{"5"}, {"7"}, {"9"}], [1, 2]))
    assert np.isnan(placebo_passk([["a"], ["b"]], [{"a", "b"}, {"b"}], [1])).all()  # they share b: no partner


def test_key_agreement_with_answer_sets():
    assert key_agreement([["a", "b", "c"]], [frozenset("ab")], [[True, True, False]]) == 1.0
    assert key_agreement([["a", "b", "c"]], [frozenset("ab")], [[True, False, False]]) == pytest.approx(2 / 3)
