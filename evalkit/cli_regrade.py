"""`evalkit regrade`: grade a passk run's stored completions again, without sampling.

    evalkit regrade runs/base
    evalkit regrade runs/base --out runs/base-regraded
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["regrade"]


def regrade(
    run: Annotated[Path, typer.Argument(help="An evalkit passk run folder.")],
    out: Annotated[Path | None, typer.Option(help="Write the regraded run here (new or empty folder) instead of in place; in place keeps the old grades as samples.graded-by-<version>.jsonl.")] = None,
    grader_workers: Annotated[int, typer.Option(help="Grader processes.")] = 2,
    grade_timeout: Annotated[float, typer.Option(help="Seconds before a grader worker is killed; the sample is then 'timeout'.")] = 10.0,
) -> None:
    """Regrade stored completions with this evalkit's grader; print old vs new pass@k.

    Example: evalkit regrade runs/base   (interrupted? rerun the same command to resume)
    """
    from evalkit.console import passk_progress, print_regrade
    from evalkit.regrade import run_regrade

    with passk_progress("regrading") as progress:
        result = run_regrade(run, out, grader_workers=grader_workers, grade_timeout=grade_timeout, progress=progress)
    print_regrade(result, out or run)
