"""The metrics users compare pass@k with: pass^k, maj@k, G-Pass@k_tau, mG-Pass@k, mean@n.

Each is an unbiased estimate, for one problem with n stored samples of which c are correct,
of a quantity of k samples drawn without replacement from the n; the tables average them over
problems with the same percentile bootstrap over problems as pass@k (`metrics.passk.
bootstrap_passk`, one seeded draw per set of problems that count, paired across k). A k
larger than a problem's n is averaged over the problems with n >= k and the rest counted
(`n_excluded`), never padded, as for pass@k.

- pass^k (all k correct; tau-bench's pass^k, Yao et al. 2024, arXiv 2406.12045):
  `C(c,k) / C(n,k) = prod_{i<k} (c-i)/(n-i)` (the product form never overflows; it is
  metrics.groups' all-correct share, read as a metric).
- G-Pass@k_tau (Liu et al. 2024, arXiv 2412.13147; OpenCompass
  `opencompass/openicl/icl_evaluator/icl_base_evaluator.py` `compute_g_pass_at_k`, lighteval
  `metrics_sample.py` `GPassAtK`): `P(X >= m)`, X ~ hypergeometric(n, c, k),
  `m = max(ceil(tau*k), 1)`, i.e. `sum_{j>=m} C(c,j) C(n-c,k-j) / C(n,k)`; tau = 0 is pass@k.
  The ceiling is of the decimal tau as written (0.55 * 100 = 55; in floats 55.00000000000001,
  whose ceiling is 56).
- mG-Pass@k (same sources, `compute_mg_pass_at_k`): `2/k * sum_{i=ceil(k/2)+1}^{k} P(X >= i)`,
  the paper's `2 * integral_{0.5}^{1} G-Pass@k_tau dtau` on the grid i/k. It is 0 at k = 1 by
  this formula, so it is tabulated for k >= 2 only.
- mean@n (lighteval `AvgAtN`): the mean over a problem's n samples of its 0/1 score, c/n,
  averaged over problems. It equals pass@1; reported on its own because peers report it so.
- maj@k (majority vote of k samples; lm-eval `filters/selection.py` `MajorityVoteFilter`,
  lighteval `MajAtN`): the probability that the plurality answer of k samples drawn without
  replacement is correct, computed exactly over all C(n,k) subsets (`maj_at_k`), not from one
  draw of k as the peers do. Ties: lm-eval takes `Counter.most_common(1)` (the tied answer seen
  first) and lighteval `max(answers, key=answers.count)` (the same); over the k! equally likely
  orders of a drawn subset, each tied answer is seen first equally often, so the peers' rule
  is, in expectation, a uniform choice among the tied answers: a tie of t + 1 answers counts
  1/(t+1) for each. Answer classes (`vote_classes`): every correct sample votes for the gold
  answer (they are equal to it, so to each other); an incorrect sample votes for its extracted
  answer as written (stripped); samples with no answer (no_answer, timeout, error) vote
  together for "no answer", which is never correct (lm-eval's regex filter turns them into one
  "[invalid]" vote the same way). maj@1 = pass@1.

Limits: two wrong answers written differently but equal (`1/2`, `0.5`) are two classes here,
which can only help the correct class; maj@k costs O(r k^3) integer steps per distinct vote
signature (r classes of at least j votes), cached, so n up to a few hundred is fine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache

import numpy as np
import pandas as pd

from metrics.passk import bootstrap_passk

__all__ = [
    "pass_hat_k",
    "g_pass_at_k",
    "mg_pass_at_k",
    "maj_at_k",
    "threshold_count",
    "vote_classes",
    "pass_hat_table",
    "g_pass_table",
    "mg_pass_table",
    "maj_table",
    "mean_at_n",
    "TAUS",
    "NO_ANSWER",
]

TAUS = (0.0, 0.25, 0.5, 0.75, 1.0)  # OpenCompass's and lighteval's default thresholds
NO_ANSWER = ("no answer",)  # the class key of samples without an answer (a tuple: never an answer string)


def _check(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n or n < 1:
        raise ValueError(f"need 0 <= c <= n and n >= 1, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got n={n}, k={k}")


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k of one problem: `C(c,k)/C(n,k) = prod_{i<k} (c-i)/(n-i)`, 0 when c < k."""
    _check(n, c, k)
    if c < k:
        return 0.0
    i = np.arange(k, dtype=np.float64)
    return float(np.prod((c - i) / (n - i)))


def threshold_count(k: int, tau: float) -> int:
    """`m = max(ceil(tau * k), 1)`, the ceiling of the decimal tau as written (not of a float product)."""
    if not 0 <= tau <= 1:
        raise ValueError(f"tau must be in [0, 1], got {tau}")
    return max(math.ceil(Fraction(str(tau)) * k), 1)


def g_pass_at_k(n: int, c: int, k: int, tau: float) -> float:
    """G-Pass@k_tau of one problem: `P(X >= m)`, X ~ hypergeometric(n, c, k) (module docstring)."""
    _check(n, c, k)
    return _at_least(n, c, k, threshold_count(k, tau))


def mg_pass_at_k(n: int, c: int, k: int) -> float:
    """mG-Pass@k of one problem: `2/k * sum_{i=ceil(k/2)+1}^{k} P(X >= i)`."""
    _check(n, c, k)
    return 2.0 / k * sum(_at_least(n, c, k, i) for i in range(math.ceil(k / 2) + 1, k + 1))


def _at_least(n: int, c: int, k: int, m: int) -> float:
    """P(X >= m), X ~ hypergeometric(n, c, k); 0 when m > min(c, k) (OpenCompass's guard)."""
    from scipy.stats import hypergeom

    if m > min(c, k):
        return 0.0
    return float(hypergeom.sf(m - 1, n, c, k))


def maj_at_k(correct: int, others: Sequence[int], k: int) -> float:
    """maj@k of one problem, exact over all k-subsets: `correct` samples vote for the gold answer,
    `others[i]` samples for the i-th other answer (or "no answer"); ties split uniformly."""
    others = tuple(sorted((int(m) for m in others if m > 0), reverse=True))
    n = correct + sum(others)
    _check(n, correct, k)
    return float(_maj_exact(correct, others, k))


@lru_cache(maxsize=65536)
def _maj_exact(correct: int, others: tuple[int, ...], k: int) -> Fraction:
    """P(the gold answer wins the vote of a uniform k-subset) as an exact fraction.

    For j gold votes among the k, the other k - j votes must give every other answer at most
    j, and t answers exactly j (then the gold answer wins with probability 1/(t+1)). Answers
    with fewer than j samples can never reach j: together they are one binomial
    `C(sum m, s)`. Each answer with at least j samples adds `sum_{a<j} C(m,a) x^a + y C(m,j) x^j`
    to a polynomial in x (votes taken) and y (answers tied at j)."""
    n = correct + sum(others)
    total = Fraction(0)
    for j in range(1, min(correct, k) + 1):
        rest = k - j
        small = sum(m for m in others if m < j)
        ties_max = rest // j
        # poly[s][t]: ways to take s votes from the large answers with t of them at exactly j
        poly = [[0] * (ties_max + 1) for _ in range(rest + 1)]
        poly[0][0] = 1
        for m in (m for m in others if m >= j):
            grown = [[0] * (ties_max + 1) for _ in range(rest + 1)]
            for s in range(rest + 1):
                for t in range(ties_max + 1):
                    ways = poly[s][t]
                    if not ways:
                        continue
                    for a in range(min(j - 1, rest - s) + 1):
                        grown[s + a][t] += ways * math.comb(m, a)
                    if s + j <= rest and t < ties_max:
                        grown[s + j][t + 1] += ways * math.comb(m, j)
            poly = grown
        weighted = Fraction(0)
        for s in range(rest + 1):
            fill = math.comb(small, rest - s)
            if fill:
                weighted += sum(Fraction(poly[s][t], t + 1) for t in range(ties_max + 1) if poly[s][t]) * fill
        total += weighted * math.comb(correct, j)
    return total / math.comb(n, k)


def vote_classes(problem_ids, correct, answers) -> tuple[list, list[tuple[int, tuple[int, ...]]]]:
    """Per problem (first-appearance order): (ids, [(c, other answers' vote counts)]).

    `correct[i]`: sample i is correct; `answers[i]`: its extracted answer (None or "" = no
    answer). Correct samples are one class, the gold answer's; the others vote by their
    answer text, stripped; all samples without an answer are one "no answer" class."""
    votes: dict = {}
    for pid, ok, answer in zip(problem_ids, correct, answers, strict=True):
        counts = votes.setdefault(pid, {})
        if ok:
            key = None
        elif answer is None or (isinstance(answer, float) and math.isnan(answer)) or not str(answer).strip():
            key = NO_ANSWER
        else:
            key = str(answer).strip()
        counts[key] = counts.get(key, 0) + 1
    ids = list(votes)
    return ids, [(counts.pop(None, 0), tuple(sorted(counts.values(), reverse=True))) for counts in votes.values()]


def _matrix(keys: Sequence, ks, value) -> np.ndarray:
    """[problem, k] of `value(key, k)` for each problem's key (its (n, c), or its vote classes),
    NaN where k > n; each distinct key is computed once."""
    ks = [int(k) for k in ks]
    rows: dict = {}
    out = np.full((len(keys), len(ks)), np.nan)
    for i, key in enumerate(keys):
        if key not in rows:
            n = _n_of(key)
            rows[key] = np.array([value(key, k) if k <= n else np.nan for k in ks], dtype=np.float64)
        out[i] = rows[key]
    return out


def _n_of(key) -> int:
    """n of a (n, c) key or of a (correct, others) vote key."""
    first, second = key
    return int(first) if not isinstance(second, tuple) else int(first) + sum(second)


def _table(per_problem: np.ndarray, ks, column: str, boot: dict) -> pd.DataFrame:
    import warnings

    low, high = bootstrap_passk(per_problem, **boot)
    counts = np.sum(~np.isnan(per_problem), axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN column: k > every n
        means = np.nanmean(per_problem, axis=0) if len(per_problem) else np.full(len(ks), np.nan)
    return pd.DataFrame({"k": list(ks), column: means, "ci_low": low, "ci_high": high,
                         "n_problems": counts, "n_excluded": len(per_problem) - counts})


def _boot(n_boot: int, confidence: float, seed: int) -> dict:
    return {"n_boot": n_boot, "confidence": confidence, "seed": seed}


def _keys(ns, cs) -> list[tuple[int, int]]:
    return list(zip(ns.tolist(), cs.tolist(), strict=True))


def _ints(*arrays):
    return [np.asarray(a, dtype=np.int64) for a in arrays]


def pass_hat_table(ns, cs, ks, *, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Mean pass^k over problems with a bootstrap interval, one row per k (columns as
    metrics.passk.passk_table's, `pass_hat_k` for `pass_at_k`)."""
    ns, cs, ks = _ints(ns, cs, ks)
    per = _matrix(_keys(ns, cs), ks, lambda key, k: pass_hat_k(*key, k))
    return _table(per, ks, "pass_hat_k", _boot(n_boot, confidence, seed))


def g_pass_table(ns, cs, ks, *, taus: Sequence[float] = TAUS, n_boot: int = 1000, confidence: float = 0.95,
                 seed: int = 0) -> pd.DataFrame:
    """Mean G-Pass@k_tau over problems with intervals, one row per (tau, k): columns k, tau,
    g_pass_at_k, ci_low, ci_high, n_problems, n_excluded."""
    ns, cs, ks = _ints(ns, cs, ks)
    frames = []
    for tau in taus:
        per = _matrix(_keys(ns, cs), ks, lambda key, k, tau=tau: g_pass_at_k(*key, k, tau))
        frame = _table(per, ks, "g_pass_at_k", _boot(n_boot, confidence, seed))
        frame.insert(1, "tau", float(tau))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def mg_pass_table(ns, cs, ks, *, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Mean mG-Pass@k over problems with intervals, one row per k >= 2 (0 at k = 1 by definition)."""
    ns, cs, ks = _ints(ns, cs, ks)
    ks = ks[ks >= 2]
    per = _matrix(_keys(ns, cs), ks, lambda key, k: mg_pass_at_k(*key, k))
    return _table(per, ks, "mg_pass_at_k", _boot(n_boot, confidence, seed))


def maj_table(classes: Sequence[tuple[int, tuple[int, ...]]], ks, *, n_boot: int = 1000, confidence: float = 0.95,
              seed: int = 0) -> pd.DataFrame:
    """Mean maj@k over problems with intervals, one row per k; `classes` as `vote_classes`
    returns them (per problem: correct count, other answers' counts)."""
    (ks,) = _ints(ks)
    keys = [(int(c), tuple(int(m) for m in others)) for c, others in classes]
    per = _matrix(keys, ks, lambda key, k: maj_at_k(*key, k))
    return _table(per, ks, "maj_at_k", _boot(n_boot, confidence, seed))


def mean_at_n(ns, cs, *, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0) -> dict:
    """mean@n: the mean over problems of c/n (each problem's own n), with its bootstrap interval."""
    ns, cs = _ints(ns, cs)
    per = (cs / np.where(ns > 0, ns, 1)).astype(np.float64)[:, None] if len(ns) else np.empty((0, 1))
    low, high = bootstrap_passk(per, **_boot(n_boot, confidence, seed))
    return {"mean_at_n": float(per.mean()) if len(ns) else None, "ci_low": float(low[0]),
            "ci_high": float(high[0]), "n_problems": int(len(ns))}
