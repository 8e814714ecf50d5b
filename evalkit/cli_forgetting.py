"""`evalkit forgetting`: compare a base and a trained model on benchmarks it was not trained on.

    evalkit forgetting smollm2-135m runs/grpo/final --limit 20 --train-task arith --out runs/forget
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalkit.cli_options import build, deprecated, with_options
from evalkit.forgetting.runner import ForgettingOptions

__all__ = ["forgetting"]

HELPS = {
    "dtype": "float32, bfloat16 or float16 (both models).",
    "grader_workers": "Grader / sandbox processes.",
    "grade_timeout": "Seconds per graded item or HumanEval program before it is 'timeout'.",
    "suite": "Suite name (default, reasoning, code) or comma-separated benchmarks, e.g. 'word_sorting,humaneval'.",
    "train_task": "Training task (evalkit task name or file): also estimate forward KL(pi_base || pi_model) on "
                  "its prompts.",
    "limit": "Items per benchmark (the first N); 0 = all.",
    "max_new_tokens": "Generation cap; 0 = per-benchmark default (reasoning-gym 96, HumanEval 384).",
    "batch_size": "Prompts (or choice sequences) per forward batch.",
    "seed": "Seed for decoding, the bootstrap and KL sampling.",
    "task_seed": "Seed of the reasoning-gym generators (same items for both models).",
    "mc_norm": "Multiple-choice score: sum (log-likelihood), token (per token) or byte (per UTF-8 byte).",
    "kl_prompts": "Training-task prompts for the KL estimate.",
    "kl_samples": "Completions sampled from the base per KL prompt.",
    "kl_max_new_tokens": "Length cap of the KL completions.",
    "alpha": "Significance level of the verdict (Holm-adjusted McNemar).",
}
Hidden = Annotated[float | None, typer.Option(hidden=True)]


@with_options(ForgettingOptions, skip=("model", "base", "mc_files", "n_boot", "confidence"), helps=HELPS)
def forgetting(
    base: Annotated[str, typer.Argument(help="Base checkpoint: folder, hub name, or built-in 'smollm2-135m'.")],
    model: Annotated[str, typer.Argument(help="Trained checkpoint to compare against the base.")],
    mc_file: Annotated[list[str] | None, typer.Option(help="Multiple-choice benchmark file NAME=PATH (JSONL: question, choices, answer index); repeatable, e.g. --mc-file mmlu=mmlu.jsonl.")] = None,
    out: Annotated[Path | None, typer.Option(help="Folder for forgetting.json, items.jsonl (per-item outcomes) and journal.jsonl (finished units). Rerun the same command to resume.")] = None,
    workers: Hidden = None,
    timeout: Hidden = None,
    **given,
) -> None:
    """Accuracy of BASE and MODEL on each benchmark, paired differences, McNemar tests, forward KL.

    Example: evalkit forgetting smollm2-135m runs/grpo/final --suite reasoning --limit 20 --out runs/forget
    """
    from evalkit.console import counted_progress, err_console, print_forgetting
    from evalkit.forgetting.runner import parse_mc_files, run_forgetting

    old = {"workers": workers, "timeout": timeout}
    renamed = {new: value for name, new in (("workers", "grader_workers"), ("timeout", "grade_timeout"))
               if (value := deprecated(old, name, new)) is not None}
    opts = build(ForgettingOptions, given, base=base, model=model, mc_files=parse_mc_files(mc_file or []),
                 **{k: int(v) if k == "grader_workers" else v for k, v in renamed.items()})
    with counted_progress() as progress:
        report = run_forgetting(opts, out, progress=progress,
                                log=lambda line: err_console.print(line, style="dim", markup=False, highlight=False))
    print_forgetting(report, out)
