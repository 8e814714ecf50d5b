"""`evalkit interpolate`: accuracy and loss along (1 - t) A + t B, and the barrier between them.

    evalkit interpolate runs/es/final runs/grpo/final --task arith --points 11 --out runs/interp
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalkit.cli_options import build, with_options
from evalkit.interpolate import InterpolateOptions

__all__ = ["interpolate"]


@with_options(InterpolateOptions, skip=("model", "other", "backend", "ray_workers", "ray_address",
                                        "logprobs"), helps={
    "n": "Samples per problem at each point: 1 with --temperature 0 is greedy accuracy; more for pass@k.",
    "limit": "Use the first N held-out problems of the task (0 = all)."})
def interpolate(
    a: Annotated[str, typer.Argument(help="Checkpoint A (t = 0): any format evalkit reads, BASE+ADAPTER, or a model name.")],
    b: Annotated[str, typer.Argument(help="Checkpoint B (t = 1), of the same model as A.")],
    out: Annotated[Path, typer.Option(help="Output folder: interpolate.json, points.csv, completions.jsonl, points/<label>/ run folders. Rerun to resume.")],
    **given,
) -> None:
    """Accuracy and loss along the straight line between two checkpoints, and its barrier.

    Example: evalkit interpolate runs/es/final runs/grpo/final --task arith --limit 40 --out runs/interp
    Example: evalkit interpolate runs/es/final runs/grpo/final --through smollm2-135m --points 5 --out runs/plane
    """
    from evalkit.console import counted_progress, print_interpolate
    from evalkit.interpolate import run_interpolate

    opts = build(InterpolateOptions, given, model=a, other=b)
    with counted_progress() as start:
        ticks = []

        def progress(done: int, total: int, label: str) -> None:
            if not ticks:
                ticks.append(start("points", total))
            ticks[0]()

        summary = run_interpolate(opts, out, progress=progress)
    print_interpolate(summary, out)
