"""`evalkit forgetting`: compare a base and a trained model on benchmarks it was not trained on.

    evalkit forgetting smollm2-135m runs/grpo/final --limit 20 --train-task arith --out runs/forget
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalkit.cli_options import build, with_options
from evalkit.forgetting.runner import ForgettingOptions

__all__ = ["forgetting"]

HELPS = {  # what these shared options mean here
    "dtype": "float32, bfloat16 or float16 (both models).",
    "grader_workers": "Grader / sandbox processes.",
    "grade_timeout": "Seconds per graded item or HumanEval program before it is 'timeout'.",
    "limit": "Items per benchmark (the first N); 0 = all.",
    "task_seed": "Seed of the reasoning-gym generators (same items for both models).",
    "max_new_tokens": "Generation cap; 0 = per-benchmark default (reasoning-gym 96, HumanEval 384).",
    "batch_size": "Sequences per forward pass (prompts, or choice sequences).",
    "seed": "Seed for decoding, the bootstrap and KL sampling.",
}


@with_options(ForgettingOptions, skip=("model", "base", "mc_files", "n_boot", "confidence"), helps=HELPS)
def forgetting(
    base: Annotated[str, typer.Argument(help="Base checkpoint: folder, hub name, or built-in 'smollm2-135m'.")],
    model: Annotated[str, typer.Argument(help="Trained checkpoint to compare against the base.")],
    mc_file: Annotated[list[str] | None, typer.Option(help="Multiple-choice benchmark file NAME=PATH (JSONL: question, choices, answer index); repeatable, e.g. --mc-file mmlu=mmlu.jsonl.")] = None,
    out: Annotated[Path | None, typer.Option(help="Folder for forgetting.json, items.jsonl (per-item outcomes) and journal.jsonl (finished units). Rerun the same command to resume.")] = None,
    **given,
) -> None:
    """Accuracy of BASE and MODEL on each benchmark, paired differences, McNemar tests, forward KL.

    Example: evalkit forgetting smollm2-135m runs/grpo/final --suite reasoning --limit 20 --out runs/forget
    """
    from evalkit.console import counted_progress, err_console, print_forgetting
    from evalkit.forgetting.runner import parse_mc_files, run_forgetting

    opts = build(ForgettingOptions, given, base=base, model=model, mc_files=parse_mc_files(mc_file or []))
    with counted_progress() as progress:
        report = run_forgetting(opts, out, progress=progress,
                                log=lambda line: err_console.print(line, style="dim", markup=False, highlight=False))
    print_forgetting(report, out)
