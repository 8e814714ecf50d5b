"""`evalkit regrade`: grade a passk run's stored completions again, without sampling.

    evalkit regrade runs/base
    evalkit regrade runs/base --out runs/base-regraded
    evalkit regrade runs/base --compare math-verify
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalkit.cli_options import build, with_options
from evalkit.options import GradingOptions

__all__ = ["regrade"]


@with_options(GradingOptions)
def regrade(
    run: Annotated[Path, typer.Argument(help="An evalkit passk run folder.")],
    out: Annotated[Path | None, typer.Option(help="Write the regraded run here (new or empty folder) instead of in place; in place keeps the old grades as samples.graded-by-<version>.jsonl.")] = None,
    compare: Annotated[str | None, typer.Option(help="Also grade with this grader and write the disagreement table (grader-compare.json, shown by evalkit report): math-verify (its defaults), math-verify-strict (TRL's accuracy_reward recipe), or your own module:function called as function(completion, gold) -> bool.")] = None,
 **given,
) -> None:
    """Regrade stored completions with this evalkit's grader; print old vs new pass@k.

    Example: evalkit regrade runs/base   (interrupted? rerun the same command to resume)
             evalkit regrade runs/base --compare math-verify   (where the two graders disagree)
    """
    from evalkit.console import passk_progress, print_grader_compare, print_regrade
    from evalkit.regrade import run_regrade

    grading = build(GradingOptions, given).validate()
    with passk_progress("regrading") as progress:
        result = run_regrade(run, out, grading, progress=progress, compare=compare)
    print_regrade(result, out or run)
    if result.compared is not None:
        print_grader_compare(result.compared, out or run)
