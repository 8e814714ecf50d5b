"""The chance floor of a pass@k curve: each completion scored against another problem's answer.

    from metrics.placebo import answer_key, placebo_passk
    keys = [[answer_key(x) for x in extracted_of_problem] for extracted_of_problem in runs]
    floor = placebo_passk(keys, [answer_key(a) for a in answers], ks=[1, 8, 64])   # [problem, k]

Why: on a task whose answers range over a few dozen values (two-number addition: 2..40),
a model that writes any plausible number is right by chance more often as k grows; the
seed study's base reached pass@16 0.163 against other problems' answers. A coverage claim at
large k means something only where the curve stands above this floor.

Definition (same counts as the real curve): for problem i with n_i samples, and each problem
j whose answer differs from i's, `c_ij` = samples of i whose answer equals j's answer; the
placebo pass@k of problem i is the mean over those j of Chen et al.'s unbiased
`pass@k(n_i, c_ij, k)` (metrics.passk). This is the exact expectation of "score every
completion of problem i against the answer of a problem drawn at random among those with
another answer" (no random draw, so no extra noise). Problems sharing i's answer are left out:
against them a solved problem would score its own skill, not chance. A problem whose answer
every other problem shares has no placebo (NaN).

A problem with several right answers (evalkit's `pairsum`: several pairs reach the target) gives
its answers as a set of keys: a completion counts for problem j when its key is any of j's, and
the partners of i are the problems with no right answer in common with i's.

Answers are compared as `answer_key`s: numbers by value (27, 27.0 and " 27" are one key),
other text stripped and case-folded. `key_agreement` says how often that comparison, against
the problem's own answer, gives the grader's verdict (the placebo is only as good as it).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["answer_key", "placebo_passk", "placebo_counts", "key_agreement"]


def answer_key(text) -> str | None:
    """A comparable form of an extracted answer: a finite number by value, else stripped,
    case-folded text; None for no answer."""
    if text is None:
        return None
    s = str(text).strip().replace(",", "")
    if not s:
        return None
    try:
        value = float(s)
    except ValueError:
        return s.casefold()
    if not math.isfinite(value):
        return s.casefold()
    return repr(int(value)) if value == int(value) else repr(value)


def _answer_set(answer) -> frozenset:
    """A problem's right answer keys: one key, or a set (list, tuple) of them."""
    return frozenset(answer) if isinstance(answer, (set, frozenset, list, tuple)) else frozenset([answer])


def placebo_counts(keys: list[list], answers: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n, c, valid): n[i] samples of problem i; c[i, j] how many are one of problem j's answers;
    valid[i, j] True where j shares no answer with i (the partners the floor averages over).
    An answer is a key, or a set of keys for a problem with several right answers."""
    sets = [_answer_set(a) for a in answers]
    n = np.asarray([len(k) for k in keys], dtype=np.int64)
    index: dict = {}
    for j, answer in enumerate(sets):
        for a in answer:
            index.setdefault(a, []).append(j)
    c = np.zeros((len(keys), len(sets)), dtype=np.int64)
    for i, row in enumerate(keys):
        for key in row:
            for j in index.get(key, ()) if key is not None else ():
                c[i, j] += 1
    if all(len(a) == 1 for a in sets):
        own = np.asarray([next(iter(a)) for a in sets], dtype=object)
        valid = own[:, None] != own[None, :]
    else:
        valid = np.array([[not (a & b) for b in sets] for a in sets], dtype=bool)
    return n, c, valid


def placebo_passk(keys: list[list], answers: list, ks) -> np.ndarray:
    """Matrix [problem, k]: mean over partners j (answer_j != answer_i) of pass@k(n_i, c_ij, k),
    NaN where k > n_i or problem i has no partner."""
    from metrics.passk import per_problem_passk

    ks = np.asarray(ks, dtype=np.int64)
    n, c, valid = placebo_counts(keys, answers)
    out = np.full((len(keys), len(ks)), np.nan)
    for i in range(len(keys)):
        partners = np.flatnonzero(valid[i])
        if partners.size == 0 or n[i] == 0:
            continue
        table = per_problem_passk(np.full(partners.size, n[i]), c[i, partners], ks)
        out[i] = table.mean(axis=0)  # NaN columns (k > n) stay NaN
    return out


def key_agreement(keys: list[list], answers: list, correct: list[list]) -> float:
    """Share of samples with an answer where `key == answer key` agrees with the grader's
    `correct` (1.0: the placebo compares answers exactly as the grader does)."""
    agree = total = 0
    for row, answer, marks in zip(keys, answers, correct, strict=True):
        for key, ok in zip(row, marks, strict=True):
            if key is None:
                continue
            total += 1
            agree += (key in _answer_set(answer)) == bool(ok)
    return agree / total if total else float("nan")
