"""`evalkit import`: another tool's samples as an evalkit run folder (evalkit.importers).

    evalkit import lm-eval out/model/samples_gsm8k_2025-01-01T00-00-00.jsonl --out runs/lm-gsm8k
    evalkit import jsonl samples.csv --out runs/mine --gold-field answer --correct-field correct --keep-grades
    evalkit import inspect logs/2025-01-01T00-00-00+00-00_gsm8k_AbC.eval --out runs/insp --keep-grades
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalkit.cli_options import build, with_options
from evalkit.importers.base import ImportOptions

__all__ = ["import_samples"]


@with_options(ImportOptions, skip=("grades",), helps={
    "task": "Match the problems to this task's (a task name or .jsonl/.parquet file, as for evalkit passk) by id or "
            "question text, and grade with its scorer; default: the gold answers in the file, graded as math."})
def import_samples(
    format: Annotated[str, typer.Argument(help="lm-eval, lighteval, verl, trl, opencompass, evalscope, vllm, inspect or jsonl (also CSV).")],  # noqa: A002
    path: Annotated[Path, typer.Argument(help="The file the tool wrote, or its folder (OpenCompass, evalscope, lm-eval: one run per dataset, in OUT/<dataset>/).")],
    out: Annotated[Path, typer.Option(help="New run folder: run.json (with the provenance), samples.jsonl, summary.json.")],
    keep_grades: Annotated[bool, typer.Option("--keep-grades", help="Keep the file's own per-sample grades (refused when it has none per completion).")] = False,
    regrade: Annotated[bool, typer.Option("--regrade", help="Grade every completion with evalkit's grader (the task's scorer).")] = False,
    **given,
) -> None:
    """Import samples from lm-eval, lighteval, verl, TRL, OpenCompass, evalscope, vLLM, inspect_ai or JSONL/CSV.

    Example: evalkit import lm-eval out/samples_gsm8k_2025-01-01.jsonl --out runs/lm --filter flexible-extract
    Then every command reads it: evalkit regrade runs/lm; evalkit groups runs/lm; evalkit report runs/lm --out r
    """
    from evalkit.console import passk_progress, print_import
    from evalkit.errors import UsageError
    from evalkit.importers import run_import

    if keep_grades and regrade:
        raise UsageError("give --keep-grades or --regrade, not both")
    grades = "keep" if keep_grades else "regrade" if regrade else "auto"
    opts = build(ImportOptions, given, grades=grades)
    with passk_progress("grading") as progress:
        summary = run_import(format, path, out, opts, progress=progress)
    print_import(summary, out)
