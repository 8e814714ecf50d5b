"""Inference for a study's pre-registered claims: a mixed-model interval beside the two-level
bootstrap, the bootstrap's exact variance, bootstrap p-values, Holm's correction and power.

    from metrics.inference import satterthwaite_interval, holm, detectable_effect
    row = satterthwaite_interval(x)            # x[seed, problem]: one arm minus the base, or paired by seed
    row = satterthwaite_interval(a, b)         # two arms trained apart, on the same problems
    holm([0.01, 0.04, 0.03])                   # -> [0.03, 0.06, 0.06]
    detectable_effect(se=0.05)                 # 0.140: the effect a two-sided 5% test finds 80% of the time

The design (metrics.seeds): every seed's checkpoint is evaluated on the same held-out problems,
so a figure x[s, i] follows the crossed random-effects model

    x[s, i] = mu + a_s + b_i + e_si,   a ~ (0, s2_seed), b ~ (0, s2_problem), e ~ (0, s2_error)

(e holds the seed x problem interaction: one value per cell). The grand mean's variance is
s2_seed / S + s2_problem / P + s2_error / (S P); from the two-way ANOVA's mean squares
(MS_seed = P sum_s (xbar_s - xbar)^2 / (S - 1), MS_problem = S sum_i (xbar_i - xbar)^2 / (P - 1),
MS_error = sum_si r_si^2 / ((S - 1)(P - 1)), r the doubly centred values) its unbiased
estimate is (MS_seed + MS_problem - MS_error) / (S P), and Satterthwaite's (1946) degrees of
freedom for a linear combination sum c_j MS_j are (sum c_j MS_j)^2 / sum (c_j MS_j)^2 / df_j
(Searle, Casella & McCulloch 1992, "Variance Components", sections 4.4 and 5.2). The seed
component is truncated at 0 (MS_seed < MS_error: no seed variance seen, its terms dropped).

Limits: the model's normality is what gives the t quantile; with 3 seeds the seed term has 2
degrees of freedom, so the interval is wide where the seeds disagree (that is its point beside
a bootstrap that has only 10 distinct seed resamples). Values must be finite.
"""

from __future__ import annotations

import numpy as np

__all__ = ["two_level_bootstrap_variance", "two_sample_bootstrap_variance", "crossed_mean_squares",
           "satterthwaite_interval", "bootstrap_p", "t_test_p", "holm", "power_two_sided", "detectable_effect"]


def _matrix(values) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2 or 0 in x.shape:
        raise ValueError(f"need values[seed, problem] with at least one of each, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("values must be finite")
    return x


def _double_centred(x: np.ndarray) -> np.ndarray:
    return x - x.mean(axis=1, keepdims=True) - x.mean(axis=0, keepdims=True) + x.mean()


def two_level_bootstrap_variance(values) -> float:
    """Exact variance, over the resampling, of one two-level bootstrap replicate's mean
    (metrics.seeds.two_level_replicates: S seeds drawn with replacement, then P problems, one
    problem draw for every seed):

        V* = sum_s (xbar_s - xbar)^2 / S^2 + sum_i (xbar_i - xbar)^2 / P^2 + sum_si r_si^2 / (S P)^2

    Derivation: the draw counts are C_s = 1 + g_s, D_i = 1 + d_i with g, d independent, mean 0
    and covariance I - J/S (resp. I - J/P) (multinomial); the replicate mean is
    xbar + g.xbar_s / S + d.xbar_i / P + g'x d / (S P), whose three random terms are
    uncorrelated, and (I - J/S) x (I - J/P) = r. It is the plug-in (ddof 0) version of the
    crossed model's variance, so with few seeds it is smaller than that variance's unbiased
    estimate (satterthwaite_interval)."""
    x = _matrix(values)
    s, p = x.shape
    return float(((x.mean(axis=1) - x.mean()) ** 2).sum() / s**2 + ((x.mean(axis=0) - x.mean()) ** 2).sum() / p**2
                 + (_double_centred(x) ** 2).sum() / (s * p) ** 2)


def two_sample_bootstrap_variance(a, b) -> float:
    """Exact variance of one replicate of mean(a) - mean(b) in metrics.seeds.two_sample_replicates
    (each arm's seeds drawn apart, one problem draw shared): the seed and residual terms of
    `two_level_bootstrap_variance` for each arm, and the problem term of the per-problem
    difference of arm means z_i = abar_i - bbar_i: sum_i (z_i - zbar)^2 / P^2."""
    x, y = _matrix(a), _matrix(b)
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"the two arms need the same problems: shapes {x.shape} and {y.shape}")
    p = x.shape[1]
    z = x.mean(axis=0) - y.mean(axis=0)
    out = ((z - z.mean()) ** 2).sum() / p**2
    for m in (x, y):
        s = m.shape[0]
        out += ((m.mean(axis=1) - m.mean()) ** 2).sum() / s**2 + (_double_centred(m) ** 2).sum() / (s * p) ** 2
    return float(out)


def crossed_mean_squares(values) -> dict:
    """The two-way ANOVA without replication of x[seed, problem] (module docstring): mean squares
    and their degrees of freedom (a mean square with 0 degrees of freedom is NaN)."""
    x = _matrix(values)
    s, p = x.shape

    def ms(total: float, df: int) -> float:
        return total / df if df > 0 else float("nan")

    return {"seed": ms(p * ((x.mean(axis=1) - x.mean()) ** 2).sum(), s - 1), "df_seed": s - 1,
            "problem": ms(s * ((x.mean(axis=0) - x.mean()) ** 2).sum(), p - 1), "df_problem": p - 1,
            "error": ms((_double_centred(x) ** 2).sum(), (s - 1) * (p - 1)), "df_error": (s - 1) * (p - 1)}


def _seed_terms(x: np.ndarray, problems: str) -> list[tuple[float, int]]:
    """(c_j MS_j, df_j) of an arm's seed component in the variance of its grand mean, over S P;
    [] with one seed or when MS_seed < MS_error (the component truncated at 0)."""
    s, p = x.shape
    if s < 2:
        return []
    ms = crossed_mean_squares(x)
    if problems == "fixed" or p < 2:
        return [(ms["seed"] / (s * p), ms["df_seed"])]
    if ms["seed"] <= ms["error"]:
        return []
    return [(ms["seed"] / (s * p), ms["df_seed"]), (-ms["error"] / (s * p), ms["df_error"])]


def satterthwaite_interval(a, b=None, *, confidence: float = 0.95, problems: str = "random") -> dict:
    """The crossed random-effects interval for mean(a) (a[seed, problem]: one arm, or an arm
    minus the base per problem, or a difference paired by seed), or for mean(a) - mean(b) for two
    arms trained apart on the same problems (each arm its own seed and error components, the
    problems' component from the per-problem difference of arm means z_i):

        V = sum_arm [MS_seed - MS_error]_+ / (S_arm P) + var(z) / P

    with var(z) the sample variance of z_i (df P - 1; for one arm var(z) / P = MS_problem / (S P)),
    and the interval estimate +- t(df, (1 + confidence) / 2) sqrt(V), df by Satterthwaite
    (module docstring). `problems="fixed"` treats the problems as fixed: V = MS_seed / (S P) with
    S - 1 degrees of freedom, the balanced one-way random-effects interval for the grand mean
    (the one-sample t interval over the seed means). Returns estimate, se, df, ci_low, ci_high."""
    from scipy import stats

    if problems not in ("random", "fixed"):
        raise ValueError(f"problems {problems!r}: choose random or fixed")
    arms = [_matrix(a)] + ([] if b is None else [_matrix(b)])
    if len({m.shape[1] for m in arms}) != 1:
        raise ValueError(f"the two arms need the same problems: shapes {[m.shape for m in arms]}")
    p = arms[0].shape[1]
    terms = [t for m in arms for t in _seed_terms(m, problems)]
    if problems == "random" and p > 1:
        z = arms[0].mean(axis=0) - (arms[1].mean(axis=0) if b is not None else 0.0)
        terms.append((float(np.var(z, ddof=1)) / p, p - 1))
    estimate = float(arms[0].mean() - (arms[1].mean() if b is not None else 0.0))
    variance = float(sum(v for v, _ in terms))
    denominator = sum(v * v / df for v, df in terms if df > 0)
    if not terms or variance <= 0 or denominator <= 0:
        return {"estimate": estimate, "se": 0.0 if terms else float("nan"), "df": float("nan"),
                "ci_low": estimate if terms else float("nan"), "ci_high": estimate if terms else float("nan")}
    df = variance**2 / denominator
    half = float(stats.t.ppf((1 + confidence) / 2, df)) * variance**0.5
    return {"estimate": estimate, "se": variance**0.5, "df": float(df), "ci_low": estimate - half,
            "ci_high": estimate + half}


def bootstrap_p(replicates, threshold: float) -> dict:
    """One-sided bootstrap p-values of a threshold from the replicates of a statistic
    (Davison & Hinkley 1997, eq. 4.11: (r + 1) / (B + 1), never 0):
    `above` = (#{rep <= t} + 1) / (B + 1), the evidence that the value is above t, `below` the
    mirror, and the two-sided p = min(1, 2 min(above, below)). A percentile interval at level
    1 - alpha excludes t when the two-sided p is below alpha (up to the +1)."""
    r = np.asarray(replicates, dtype=np.float64).ravel()
    n = r.size
    if n == 0:
        raise ValueError("no replicates")
    above = (np.count_nonzero(r <= threshold) + 1) / (n + 1)
    below = (np.count_nonzero(r >= threshold) + 1) / (n + 1)
    return {"above": float(above), "below": float(below), "two_sided": float(min(1.0, 2 * min(above, below))),
            "replicates": int(n)}


def t_test_p(estimate: float, se: float, df: float, threshold: float) -> dict | None:
    """One- and two-sided p of a threshold from an estimate with a t-distributed standard error
    (e.g. satterthwaite_interval's): `above` = P(T >= (estimate - t) / se) under the threshold,
    i.e. t.sf((estimate - threshold) / se, df), `below` its mirror, two-sided twice the smaller;
    the same keys as bootstrap_p. None without a finite se and df."""
    from scipy import stats

    if not (np.isfinite(se) and se > 0 and np.isfinite(df)):
        return None
    z = (estimate - threshold) / se
    above, below = float(stats.t.sf(z, df)), float(stats.t.cdf(z, df))
    return {"above": above, "below": below, "two_sided": float(min(1.0, 2 * min(above, below)))}


def holm(pvalues) -> np.ndarray:
    """Holm's (1979) step-down adjusted p-values: sorted ascending p_(1) <= ... <= p_(m),
    adj_(j) = max_{i <= j} min(1, (m - i + 1) p_(i)), returned in the input order. Rejecting
    where adj < alpha controls the family-wise error rate at alpha. NaN (a claim without a test)
    is left out of the family and stays NaN."""
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    known = np.flatnonzero(~np.isnan(p))
    m = known.size
    if m == 0:
        return out
    order = known[np.argsort(p[known], kind="stable")]
    steps = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(steps)
    return out


def power_two_sided(effect, se, *, alpha: float = 0.05) -> np.ndarray | float:
    """Power of the two-sided level-alpha z test of 0 when the true value is `effect` and the
    estimate's standard error `se` (normal approximation; e.g. Chow, Shao & Wang 2008, 3.2.1):
    Phi(|effect| / se - z) + Phi(-|effect| / se - z), z = Phi^-1(1 - alpha / 2)."""
    from scipy.stats import norm

    d = np.abs(np.asarray(effect, dtype=np.float64)) / np.asarray(se, dtype=np.float64)
    z = norm.ppf(1 - alpha / 2)
    out = norm.cdf(d - z) + norm.cdf(-d - z)
    return float(out) if np.ndim(out) == 0 else out


def detectable_effect(se, *, alpha: float = 0.05, power: float = 0.8, df: float | None = None):
    """The distance from the threshold a true value must have for the two-sided level-alpha test
    to find it with probability `power`: (z_{1 - alpha/2} + z_power) se (normal approximation,
    the far tail left out; 2.80 se at 5% and 80%), or with `df` the t quantiles
    (t_{df, 1 - alpha/2} + t_{df, power}) se, the usual approximation for a t test."""
    from scipy import stats

    q = (stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power) if df is None
         else stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df))
    out = q * np.asarray(se, dtype=np.float64)
    return float(out) if np.ndim(out) == 0 else out
