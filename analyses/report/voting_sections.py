"""The metrics beside pass@k: pass^k, maj@k, G-Pass@k (tau = 0.5) and mG-Pass@k per run and k.

    from analyses.report.voting_sections import voting_section
    section = voting_section(runs, labels)   # None without runs

Computed from each run's stored samples with metrics.voting (so runs summarized before these
metrics existed get them too), at the k's of the run's pass@k curve. maj@k needs every
incorrect sample's extracted answer; where a run lacks them (grades kept from another tool
without its extractions) it is left blank and the reason given. Intervals are in each run's
summary.json (pass@k's bootstrap); the definitions and sources in metrics/voting.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pandas as pd

from analyses.report.document import Section, Table
from analyses.report.passk_sections import curve_ks
from analyses.runs import Run

__all__ = ["voting_section"]


def _rows(run: Run, label: str) -> tuple[list[dict], str | None]:
    from metrics.voting import vote_classes

    s = run.samples
    wrong = s["outcome"] == "incorrect"
    unknown = int((wrong & s["extracted"].isna()).sum())
    answers = s["extracted"].where(wrong, None).tolist()
    _, classes = vote_classes(s["problem_id"].tolist(), s["correct"].tolist(), answers)
    ks = curve_ks(max(c + sum(o) for c, o in classes))
    signatures = Counter((c, tuple(o)) for c, o in classes)  # problems with the same votes count once
    rows = [_row(label, k, {sig: m for sig, m in signatures.items() if sig[0] + sum(sig[1]) >= k}, bool(unknown))
            for k in ks]
    why = f"{label}: maj@k left out, {unknown} incorrect samples have no extracted answer" if unknown else None
    return rows, why


def _row(label: str, k: int, kept: dict, no_votes: bool) -> dict:
    """The means over the problems with n >= k of each metric at k (`kept`: vote signature -> problems)."""
    from metrics.passk import pass_at_k
    from metrics.voting import g_pass_at_k, maj_at_k, mg_pass_at_k, pass_hat_k

    def mean(value) -> float:
        return sum(m * value(c + sum(o), c, o) for (c, o), m in kept.items()) / sum(kept.values())

    return {"run": label, "k": k, "problems": sum(kept.values()),
            "pass@k": mean(lambda n, c, o: pass_at_k(n, c, k)),
            "pass^k": mean(lambda n, c, o: pass_hat_k(n, c, k)),
            "maj@k": None if no_votes else mean(lambda n, c, o: maj_at_k(c, o, k)),
            "G-Pass@k t=0.5": mean(lambda n, c, o: g_pass_at_k(n, c, k, 0.5)),
            "mG-Pass@k": mean(lambda n, c, o: mg_pass_at_k(n, c, k)) if k >= 2 else None}


def voting_section(runs: Sequence[Run], labels: dict) -> Section | None:
    if not runs:
        return None
    rows, notes = [], []
    for run in runs:
        got, why = _rows(run, labels[id(run)])
        rows += got
        notes += [why] if why else []
    text = ("pass^k: all k samples right, C(c,k)/C(n,k); maj@k: the plurality answer of k samples is right, exact "
            "over all k-subsets, ties split evenly; G-Pass@k t=0.5: at least half of k right (OpenCompass, "
            "arXiv 2412.13147); mG-Pass@k: its mean over t in (0.5, 1]. Each averages over the problems with n >= k. "
            "Intervals: each run's summary.json; definitions: metrics/voting.py.")
    blocks = [text, Table("voting", "pass@k beside pass^k, maj@k, G-Pass@k and mG-Pass@k", pd.DataFrame(rows))]
    if notes:
        blocks.append(tuple(notes))
    return Section("voting", "pass^k, maj@k and G-Pass@k", tuple(blocks))
