"""Pass@K curves, coverage and the paired comparisons behind the report's summary.

    from analyses.report.passk_sections import compare_runs, passk_section, coverage_section
    comparisons = compare_runs(runs, labels)     # paired bootstrap per pair of runs of one task
    section = passk_section(runs, labels, comparisons)

Runs are grouped by task identity (analyses.runs.task_key: name + hash of the
whole task record), never by folder name; each task gets its own chart, titled
with the task. Within a task the first run given is the reference: pairs are
(reference, other), plus every other pair when a task has at most MAX_ALL_PAIRS
runs. A pair's difference is `other - reference` over the problems both ran.

Coverage counts a problem as solved by a run when any of its n samples is
correct (pass@n, the largest k the run can estimate).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

import analyses.report.figures as F
from analyses.report.document import Figure, Section, Table
from analyses.runs import Run, task_key

__all__ = ["Comparison", "run_labels", "by_task", "curve_ks", "compare_runs", "passk_section",
           "coverage_section", "passk_findings", "N_BOOT", "CONFIDENCE"]

N_BOOT, CONFIDENCE, SEED = 2000, 0.95, 0
MAX_ALL_PAIRS = 4


@dataclass(frozen=True)
class Comparison:
    ref: str  # labels
    other: str
    task: str
    shared: pd.DataFrame  # problem_id, n_ref, c_ref, n_other, c_other
    table: pd.DataFrame  # metrics.compare.paired_passk_difference (b = other, a = ref)
    crossings: tuple[dict, ...]


def run_labels(runs: Sequence[Run]) -> dict[int, str]:
    """Display label per run (folder name; parent/name when two folders share a name)."""
    names = [r.label for r in runs]
    return {id(r): (f"{r.path.parent.name}/{r.label}" if names.count(r.label) > 1 else r.label)
            for r in runs}


def by_task(runs: Sequence[Run]) -> dict[str, list[Run]]:
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(task_key(run), []).append(run)
    return groups


def task_title(run: Run, key: str, many: bool) -> str:
    name = (run.summary.get("task") or {}).get("name", "?")
    return f"{name} ({key})" if many else str(name)


def curve_ks(n_max: int) -> list[int]:
    """1, 2, 4, ... up to n_max, plus n_max itself."""
    ks = [2**i for i in range(int(np.log2(max(n_max, 1))) + 1)]
    return sorted({*ks, int(n_max)})


def _pairs(group: list[Run]) -> list[tuple[Run, Run]]:
    if len(group) <= MAX_ALL_PAIRS:
        return [(a, b) for i, a in enumerate(group) for b in group[i + 1:]]
    return [(group[0], b) for b in group[1:]]


def _shared(a: Run, b: Run) -> pd.DataFrame:
    pa, pb = a.per_problem(), b.per_problem()
    merged = pa.merge(pb, on="problem_id", suffixes=("_ref", "_other"))
    return merged.astype({c: "int64" for c in ("n_ref", "c_ref", "n_other", "c_other")})


def _compare(a: Run, b: Run, labels: dict, task: str) -> Comparison | None:
    from metrics.compare import curve_crossings, paired_passk_difference

    shared = _shared(a, b)
    if shared.empty:
        return None
    n_top = int(np.minimum(shared["n_ref"], shared["n_other"]).max())
    table = paired_passk_difference((shared["n_ref"], shared["c_ref"]), (shared["n_other"], shared["c_other"]),
                                    curve_ks(n_top), n_boot=N_BOOT, confidence=CONFIDENCE, seed=SEED)
    crossings = curve_crossings(table["k"], table["pass_a"], table["pass_b"])
    return Comparison(labels[id(a)], labels[id(b)], task, shared, table, tuple(crossings))


def compare_runs(runs: Sequence[Run], labels: dict) -> list[Comparison]:
    """Paired comparisons of runs of one task (see the module docstring for which pairs)."""
    out = []
    groups = by_task(runs)
    for key, group in groups.items():
        title = task_title(group[0], key, len(groups) > 1)
        out += [c for a, b in _pairs(group) if (c := _compare(a, b, labels, title)) is not None]
    return out


def _interval(row) -> str:
    return f"{row['difference']:+.3f} [{row['ci_low']:+.3f}, {row['ci_high']:+.3f}]"


def crossing_supported(comp: Comparison, crossing: dict) -> bool:
    """Both sides of the crossing carry a difference whose interval excludes 0, with opposite signs."""
    t = comp.table[comp.table["supported"]]
    after = 1 if crossing["direction"] == "b_overtakes_a" else -1
    before_ok = ((t["k"] <= crossing["k_before"]) & (np.sign(t["difference"]) == -after)).any()
    after_ok = ((t["k"] >= crossing["k_after"]) & (np.sign(t["difference"]) == after)).any()
    return bool(before_ok and after_ok)


def _crossing_text(comp: Comparison, c: dict) -> str:
    winner, loser = (comp.other, comp.ref) if c["direction"] == "b_overtakes_a" else (comp.ref, comp.other)
    support = "supported" if crossing_supported(comp, c) else "not statistically supported"
    return (f"{winner} overtakes {loser} at k ≈ {c['k']:.3g} (between k={c['k_before']} and "
            f"k={c['k_after']}; {support})")


def passk_findings(comparisons: Sequence[Comparison]) -> list[str]:
    """Summary lines: pass@k differences whose paired interval excludes 0, supported crossings."""
    lines = []
    for comp in comparisons:
        rows = comp.table[comp.table["supported"]]
        if rows.empty:
            continue
        parts = "; ".join(f"pass@{int(r['k'])} {_interval(r)}" for _, r in rows.iterrows())
        lines.append(f"{comp.other} − {comp.ref} on {comp.task} ({len(comp.shared)} shared problems): {parts}")
        lines += [_crossing_text(comp, c) for c in comp.crossings if crossing_supported(comp, c)]
    return lines


def _curve(run: Run) -> pd.DataFrame:
    from metrics.passk import passk_table

    counts = run.per_problem()
    ks = curve_ks(int(counts["n"].max()))
    return passk_table(counts["n"], counts["c"], ks, n_boot=1000, confidence=CONFIDENCE, seed=SEED)


def _chart(title: str, curves: list[tuple[str, pd.DataFrame]], marks: list[dict], slug: str) -> Figure:
    series = [{"label": label, "x": t["k"].tolist(), "y": t["pass_at_k"].tolist(),
               "low": t["ci_low"].tolist(), "high": t["ci_high"].tolist()} for label, t in curves]
    png = F.line_chart(series, F.Axes("k (samples per problem, log2 scale)", "pass@k (fraction of problems)",
                                      f"Pass@K on {title}", (-0.02, 1.02)), log2x=True, marks=marks)
    return Figure(f"passk_{slug}", f"Pass@K on {title}: mean over problems with 95% bootstrap bands; "
                  "dotted verticals mark where a curve crosses the reference run's", png)


def passk_section(runs: Sequence[Run], labels: dict, comparisons: Sequence[Comparison]) -> Section:
    groups = by_task(runs)
    blocks: list = []
    if len(groups) > 1:
        blocks.append(f"The runs cover {len(groups)} different tasks: each task has its own chart "
                      "and the task is named in every title and table row.")
    all_curves = []
    for i, (key, group) in enumerate(groups.items()):
        title = task_title(group[0], key, len(groups) > 1)
        curves = [(labels[id(r)], _curve(r)) for r in group]
        all_curves += [t.assign(task=title, run=label) for label, t in curves]
        ref = labels[id(group[0])]
        mine = [c for c in comparisons if c.task == title]
        marks = [{"x": c["k"], "text": _crossing_text(comp, c).split(" (")[0]}
                 for comp in mine if comp.ref == ref for c in comp.crossings]
        blocks.append(_chart(title, curves, marks, f"task{i + 1}"))
        blocks += [_crossing_text(comp, c) + "." for comp in mine for c in comp.crossings]
    cols = ["task", "run", "k", "pass_at_k", "ci_low", "ci_high", "n_problems", "n_excluded"]
    blocks.append(Table("passk_curves", "pass@k per run (95% bootstrap over problems)",
                        pd.concat(all_curves, ignore_index=True)[cols]))
    if comparisons:
        blocks.append(Table("passk_differences", "Paired differences other − reference over shared problems "
                            f"(95% percentile bootstrap, {N_BOOT} resamples, per k, not adjusted for several k)",
                            _differences(comparisons)))
    return Section("passk", "Pass@K curves", tuple(blocks))


def _differences(comparisons: Sequence[Comparison]) -> pd.DataFrame:
    frames = [c.table.assign(task=c.task, reference=c.ref, other=c.other) for c in comparisons]
    cols = ["task", "reference", "other", "k", "pass_a", "pass_b", "difference", "ci_low", "ci_high",
            "supported", "n_problems", "n_excluded"]
    return pd.concat(frames, ignore_index=True)[cols].rename(
        columns={"pass_a": "pass_reference", "pass_b": "pass_other"})


def coverage_section(comparisons: Sequence[Comparison]) -> Section:
    rows = []
    for c in comparisons:
        s = c.shared
        ref_ok, other_ok = s["c_ref"] > 0, s["c_other"] > 0
        rows.append({"task": c.task, "reference": c.ref, "other": c.other, "shared_problems": len(s),
                     "samples_ref": _n_text(s["n_ref"]), "samples_other": _n_text(s["n_other"]),
                     "only_reference": int((ref_ok & ~other_ok).sum()), "only_other": int((~ref_ok & other_ok).sum()),
                     "both": int((ref_ok & other_ok).sum()), "neither": int((~ref_ok & ~other_ok).sum())})
    frame = pd.DataFrame(rows)
    parts = {"solved by both": frame["both"].tolist(), "reference only": frame["only_reference"].tolist(),
             "other only": frame["only_other"].tolist(), "neither": frame["neither"].tolist()}
    names = [f"{r['reference']} vs {r['other']}" for r in rows]
    png = F.stacked_bars(names, parts, xlabel="problems (count)", title="Coverage at the largest k (pass@n)")
    blocks = ["A problem counts as solved when any of the run's n samples is correct (the largest k). "
              "Runs with different n are compared at different budgets; the samples columns say which.",
              Figure("coverage", "Problems solved by both runs, by one only, or by neither", png),
              Table("coverage", "Coverage per pair of runs on shared problems", frame)]
    return Section("coverage", "Coverage", tuple(blocks))


def _n_text(ns: pd.Series) -> str:
    lo, hi = int(ns.min()), int(ns.max())
    return str(lo) if lo == hi else f"{lo}-{hi}"
