"""Chain-of-thought length efficiency (docs/references.md, "CoT length efficiency").

- Mean response tokens over all, correct and incorrect samples; truncation
  rate (finish_reason == "length"); tokens per correct answer
  (`sum of all tokens / number correct`: the generation cost of one correct
  answer); accuracy by length quantile.
- Outcome efficiency (Chen et al. 2024, "Do NOT think that much for 2+3=?",
  arXiv 2412.21187): `mean over correct responses of T_hat_i / T_i`, T_hat the
  tokens up to (and including) the first correct answer, T the response's
  tokens. The paper's xi_O averages `sigma_i T_hat_i / T_i` over all N
  responses (sigma_i = 1 when correct, else 0); evalkit reports both
  (`outcome_efficiency` and `outcome_efficiency_all`). Responses whose answer
  cannot be located in the text are left out and counted.
- AES (O1-Pruner, Luo et al. 2025): `dLen = (L_base - L) / L_base`,
  `dAcc = (Acc - Acc_base) / Acc_base`; `AES = a*dLen + b*|dAcc|` if
  dAcc >= 0 else `a*dLen - g*|dAcc|`, with a=1, b=3, g=5. L is the mean
  response length over all samples, Acc the accuracy.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

__all__ = [
    "length_summary",
    "accuracy_by_length",
    "locate_answer",
    "outcome_efficiency",
    "aes",
]


def _mean(x: np.ndarray) -> float | None:
    return float(x.mean()) if x.size else None


def length_summary(num_tokens, correct, truncated) -> dict:
    """Length figures for one run; arrays are per sample."""
    t = np.asarray(num_tokens, dtype=np.float64)
    ok = np.asarray(correct, dtype=bool)
    cut = np.asarray(truncated, dtype=bool)
    n_correct = int(ok.sum())
    return {
        "n_samples": int(t.size),
        "accuracy": _mean(ok.astype(np.float64)),
        "mean_tokens": _mean(t),
        "mean_tokens_correct": _mean(t[ok]),
        "mean_tokens_incorrect": _mean(t[~ok]),
        "truncation_rate": _mean(cut.astype(np.float64)),
        "tokens_per_correct": float(t.sum() / n_correct) if n_correct else None,
        "n_correct": n_correct,
    }


def accuracy_by_length(num_tokens, correct, quantiles: int = 4) -> pd.DataFrame:
    """Accuracy within equal-count length bins (ties split by sample order).

    Columns: bin (1 = shortest), min_tokens, max_tokens, n, accuracy.
    """
    t = pd.Series(np.asarray(num_tokens, dtype=np.float64))
    ok = pd.Series(np.asarray(correct, dtype=bool))
    if t.empty:
        return pd.DataFrame(columns=["bin", "min_tokens", "max_tokens", "n", "accuracy"])
    bins = min(quantiles, len(t))
    labels = pd.qcut(t.rank(method="first"), bins, labels=False) + 1
    frame = pd.DataFrame({"bin": labels, "tokens": t, "correct": ok})
    grouped = frame.groupby("bin")
    return pd.DataFrame({
        "bin": grouped.size().index.astype(int),
        "min_tokens": grouped["tokens"].min().to_numpy(),
        "max_tokens": grouped["tokens"].max().to_numpy(),
        "n": grouped.size().to_numpy(),
        "accuracy": grouped["correct"].mean().to_numpy(),
    })


def locate_answer(text: str, answers: Sequence[str | None]) -> int | None:
    """End (character offset) of the first occurrence of the first answer found.

    Answers are tried in order (e.g. the grader's extracted answer, then the
    reference). An answer made of word characters must not touch other word
    characters, so "7" is not found inside "17". None when none is found.
    """
    for answer in answers:
        answer = (answer or "").strip()
        if not answer:
            continue
        pattern = re.escape(answer)
        if answer[0].isalnum():
            pattern = r"(?<![0-9A-Za-z.])" + pattern
        if answer[-1].isalnum():
            pattern += r"(?![0-9A-Za-z])"
        match = re.search(pattern, text)
        if match:
            return match.end()
    return None


def outcome_efficiency(
    texts: Sequence[str],
    answers: Sequence[Sequence[str | None]],
    correct,
    count: Callable[[str], int] = len,
) -> dict:
    """Chen et al.'s outcome efficiency with `count` as the length unit.

    `count` maps text to its length: `len` (characters, a proxy) or a
    tokenizer's token count. Returns outcome_efficiency (mean over located
    correct responses), outcome_efficiency_all (the paper's average over all
    responses, incorrect ones counting 0, located ones only in the numerator),
    n_located, n_correct, n_unlocated.
    """
    ok = np.asarray(correct, dtype=bool)
    ratios = []
    for text, cands, is_ok in zip(texts, answers, ok, strict=True):
        if not is_ok:
            continue
        end = locate_answer(text, cands)
        total = count(text)
        if end is not None and total > 0:
            ratios.append(min(count(text[:end]) / total, 1.0))
    n_correct = int(ok.sum())
    return {
        "outcome_efficiency": float(np.mean(ratios)) if ratios else None,
        "outcome_efficiency_all": float(np.sum(ratios) / len(ok)) if len(ok) and ratios else None,
        "n_located": len(ratios),
        "n_correct": n_correct,
        "n_unlocated": n_correct - len(ratios),
    }


def aes(length_base: float, length: float, acc_base: float, acc: float,
        *, a: float = 1.0, b: float = 3.0, g: float = 5.0) -> dict:
    """O1-Pruner's Accuracy-Efficiency Score of a run against a base run.

    Returns d_len, d_acc and aes; d_acc and aes are None when the base
    accuracy is 0 (relative change undefined), d_len and aes None when the
    base length is 0.
    """
    d_len = (length_base - length) / length_base if length_base else None
    d_acc = (acc - acc_base) / acc_base if acc_base else None
    if d_len is None or d_acc is None:
        score = None
    elif d_acc >= 0:
        score = a * d_len + b * abs(d_acc)
    else:
        score = a * d_len - g * abs(d_acc)
    return {"d_len": d_len, "d_acc": d_acc, "aes": score, "weights": {"a": a, "b": b, "g": g}}
