"""One self-contained comparison report from passk runs and the other commands' outputs.

    from analyses.report import build_report
    result = build_report(["runs/base", "runs/grpo", "reports/diff"], Path("reports/study"), title="Study")
    result.sections   # keys of the sections present, e.g. ("summary", "passk", "coverage", ...)
    result.problems   # [(path, why)] inputs that could not be used (also in the report)

Sections, each present only when its data was given: summary (always: only
differences whose interval excludes 0), problems (inputs that could not be
used), passk, voting (pass^k, maj@k, G-Pass@k beside pass@k), coverage (two or more runs of one task sharing problems),
graders (`evalkit regrade --compare`'s disagreement tables), entropy, weights, forgetting, length, groups, inputs (always). See
inputs.py for how inputs are recognised, document.py for the files written.

Limits: everything is held in memory (fine for runs of ~100k samples); the
summary's pass@k intervals are per k, not adjusted for looking at several k.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analyses.report.document import Section, Table, document_files
from analyses.report.grader_sections import graders_section
from analyses.report.inputs import Found, discover
from analyses.report.interpolate_sections import interpolate_section
from analyses.report.model_sections import forgetting_findings, forgetting_section, weights_section
from analyses.report.passk_sections import (
    CONFIDENCE,
    N_BOOT,
    compare_runs,
    coverage_section,
    passk_findings,
    passk_section,
    run_labels,
)
from analyses.report.sample_sections import entropy_section, groups_section, length_section
from analyses.report.token_sections import tokens_section, traces_section
from analyses.report.voting_sections import voting_section

__all__ = ["ReportResult", "build_report", "build_sections", "SECTION_ORDER"]

SECTION_ORDER = ("summary", "problems", "study", "passk", "voting", "coverage", "graders", "entropy", "weights", "forgetting",
                 "length", "groups", "traces", "tokens", "interpolation", "inputs")
GUARDED = (KeyError, TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError)


@dataclass(frozen=True)
class ReportResult:
    out: Path
    written: tuple[Path, ...]
    sections: tuple[str, ...]
    problems: tuple[tuple[str, str], ...]


def _summary(findings: list[str], found: Found) -> Section:
    method = (f"Differences listed here have a {int(CONFIDENCE * 100)}% interval that excludes 0: pass@k "
              f"from a paired percentile bootstrap over the problems both runs share ({N_BOOT} resamples, "
              "seed 0, each k on its own, not adjusted for several k); forgetting from evalkit forgetting's "
              "paired bootstrap over benchmark items. Everything else is in the sections below.")
    if findings:
        return Section("summary", "Summary", (method, tuple(findings)))
    comparable = len(found.runs) > 1 or found.of("forgetting")
    text = ("No difference between the inputs is statistically supported." if comparable
            else "Nothing to compare statistically: give two or more passk runs of one task, "
                 "or a forgetting output.")
    return Section("summary", "Summary", (method, text))


def _inputs(found: Found, labels: dict) -> Section:
    blocks: list = [Table("inputs", "Inputs recognised (by the kind recorded in their files)",
                          pd.DataFrame(found.listing, columns=["path", "holds", "what"]))]
    if found.runs:
        rows = [{"run": labels[id(r)], "model": (r.summary.get("model") or {}).get("name"),
                 "dtype": (r.summary.get("model") or {}).get("dtype"),
                 "task": (r.summary.get("task") or {}).get("name"),
                 "problems": int(r.samples["problem_id"].nunique()), "samples": len(r.samples),
                 "temperature": (r.summary.get("sampling") or {}).get("temperature"),
                 "complete": r.summary.get("complete"), "path": str(r.path)} for r in found.runs]
        blocks.append(Table("runs", "passk runs (identity from summary.json)", pd.DataFrame(rows)))
    return Section("inputs", "Inputs", tuple(blocks))


def _problems(found: Found) -> Section | None:
    if not found.problems:
        return None
    items = tuple(f"{path}: {why}" for path, why in found.problems)
    return Section("problems", "Inputs that could not be used", (items,))


def build_sections(found: Found, extra: Sequence[Section] = ()) -> list[Section]:
    """All sections for what `found` holds, in SECTION_ORDER; a section whose inputs turn out
    malformed is left out and the reason added to found.problems. `extra`: sections made
    elsewhere (a seeded study's, analyses.report.study_sections), placed first, so that the study's
    own findings open the report; the summary of pairwise differences then follows them."""
    runs, labels = found.runs, run_labels(found.runs)
    comparisons = _guard(found, "passk comparisons", lambda: compare_runs(runs, labels)) or []
    builders = {
        "passk": lambda: passk_section(runs, labels, comparisons) if runs else None,
        "voting": lambda: voting_section(runs, labels),
        "coverage": lambda: coverage_section(comparisons) if comparisons else None,
        "graders": lambda: graders_section(found.of("grader-compare")),
        "entropy": lambda: entropy_section(runs, labels, found.of("entropy"), found.trainers),
        "weights": lambda: weights_section(found.of("diff")),
        "forgetting": lambda: forgetting_section(found.of("forgetting")),
        "length": lambda: length_section(runs, labels, found.of("length")),
        "groups": lambda: groups_section(runs, labels, found.of("groups"), found.trainers),
        "traces": lambda: traces_section(found.of("traces")),
        "tokens": lambda: tokens_section(found.of("tokens")),
        "interpolation": lambda: interpolate_section(found.of("interpolate")),
    }
    body = [s for key, make in builders.items() if (s := _guard(found, f"{key} section", make))]
    findings = passk_findings(comparisons) + (_guard(
        found, "forgetting summary", lambda: forgetting_findings(found.of("forgetting"))) or [])
    summary = _summary(findings, found)
    problems = [p] if (p := _problems(found)) else []  # last: builders may have added problems
    tail = [*body, _inputs(found, labels)]
    if not extra:
        return [summary, *problems, *tail]
    # a study's own story (what was found, its limitations) first; every pairwise difference after it
    return [*problems, *extra, Section("summary", "Every pairwise difference between runs", summary.blocks), *tail]


def _guard(found: Found, what: str, make):
    try:
        return make()
    except GUARDED as exc:
        found.problems.append((what, f"left out: malformed input ({type(exc).__name__}: {exc})"))
        return None


def _usable(found: Found) -> bool:
    return bool(found.runs or found.trainers or any(found.outputs.values()))


def build_report(paths: Sequence[str | Path], out: Path, *, title: str = "evalkit report",
                 extra: Sequence[Section] = (), salvage: bool = False) -> ReportResult:
    """Discover the inputs, build every section their data allows, write DIR (see document.py).
    No usable input at all is a UsageError saying, for each input, what it lacks. `extra`:
    sections built elsewhere (build_sections). `salvage`: TensorBoard logs with torn or corrupt
    records are read for their intact records (evalkit.trainlogs.read_event_file)."""
    from evalkit.errors import UsageError
    from evalkit.outdir import OutputFolder

    identity = {"inputs": [str(p) for p in paths], "title": title, **({"salvage": True} if salvage else {})}
    with OutputFolder.claim(Path(out), "report", identity) as folder:  # before any work: locked, never a user's
        found = discover(paths, salvage=salvage)
        if not _usable(found):
            listing = "; ".join(f"{p}: {why}" for p, why in found.problems) or "nothing was given"
            raise UsageError(f"no usable input for a report ({listing}); give passk run folders or the outputs "
                             "of evalkit diff/entropy/length/groups/forgetting/train")
        sections = build_sections(found, extra)
        written = folder.publish(document_files(title, sections))
    return ReportResult(Path(out), tuple(written), tuple(s.key for s in sections), tuple(found.problems))
