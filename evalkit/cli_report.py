"""`evalkit report`: one self-contained HTML + Markdown comparison report.

    evalkit report runs/base runs/es runs/grpo reports/diff reports/forget --out reports/study --title "ES vs GRPO"
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["report"]


def report(
    inputs: Annotated[list[Path], typer.Argument(help="passk run folders and folders holding the outputs of evalkit diff, entropy, length, groups, forgetting or train (walked 3 levels down); what each holds is read from its files, in the order given (the first run of a task is the reference).")],
    out: Annotated[Path, typer.Option(help="Report folder: index.html, report.md, figures/*.png, tables/*.csv. Must be new, empty, or an earlier report (which is replaced).")],
    title: Annotated[str, typer.Option(help="Title at the top of the report.")] = "evalkit report",
    salvage: Annotated[bool, typer.Option(help="Read TensorBoard training logs whose records are torn or fail their "
                                               "CRC: the intact ones are used and the skipped bytes named (without it, "
                                               "such a log is not used, with the last good step named).")] = False,
) -> None:
    """Build the comparison report: Pass@K, coverage, entropy, weights, forgetting, length, GRPO groups.

    Example: evalkit report runs/base runs/grpo reports/diff --out reports/study --title "GRPO vs base"
    """
    from analyses.report import build_report
    from evalkit.console import console, err_console

    result = build_report(inputs, out, title=title, salvage=salvage)
    for path, why in result.problems:
        err_console.print(f"[yellow]not used[/yellow] {path}: {why}", soft_wrap=True, markup=True, highlight=False)
    console.print(f"sections: {', '.join(result.sections)}", soft_wrap=True)
    console.print(f"wrote {result.out / 'index.html'}, {result.out / 'report.md'} and "
                  f"{len(result.written) - 2} figures/tables under {result.out}", soft_wrap=True)
