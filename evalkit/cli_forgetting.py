"""`evalkit forgetting`: compare a base and a trained model on benchmarks it was not trained on.

    evalkit forgetting smollm2-135m runs/grpo/final --limit 20 --train-task arith --out runs/forget
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["forgetting"]


def forgetting(
    base: Annotated[str, typer.Argument(help="Base checkpoint: folder, hub name, or built-in 'smollm2-135m'.")],
    model: Annotated[str, typer.Argument(help="Trained checkpoint to compare against the base.")],
    suite: Annotated[str, typer.Option(help="Suite name (default, reasoning, code) or comma-separated benchmarks, e.g. 'word_sorting,humaneval'.")] = "default",
    mc_file: Annotated[list[str] | None, typer.Option(help="Multiple-choice benchmark file NAME=PATH (JSONL: question, choices, answer index); repeatable, e.g. --mc-file mmlu=mmlu.jsonl.")] = None,
    train_task: Annotated[str | None, typer.Option(help="Training task (evalkit task name or file): also estimate forward KL(pi_base || pi_model) on its prompts.")] = None,
    limit: Annotated[int, typer.Option(help="Items per benchmark (the first N); 0 = all.")] = 50,
    out: Annotated[Path | None, typer.Option(help="Folder for forgetting.json and items.jsonl (per-item outcomes).")] = None,
    max_new_tokens: Annotated[int, typer.Option(help="Generation cap; 0 = per-benchmark default (reasoning-gym 96, HumanEval 384).")] = 0,
    batch_size: Annotated[int, typer.Option(help="Prompts (or choice sequences) per forward batch.")] = 8,
    seed: Annotated[int, typer.Option(help="Seed for decoding, the bootstrap and KL sampling.")] = 0,
    task_seed: Annotated[int, typer.Option(help="Seed of the reasoning-gym generators (same items for both models).")] = 0,
    mc_norm: Annotated[str, typer.Option(help="Multiple-choice score: sum (log-likelihood), token (per token) or byte (per UTF-8 byte).")] = "sum",
    kl_prompts: Annotated[int, typer.Option(help="Training-task prompts for the KL estimate.")] = 32,
    kl_samples: Annotated[int, typer.Option(help="Completions sampled from the base per KL prompt.")] = 1,
    kl_max_new_tokens: Annotated[int, typer.Option(help="Length cap of the KL completions.")] = 64,
    dtype: Annotated[str, typer.Option(help="float32, bfloat16 or float16 (both models).")] = "float32",
    device: Annotated[str, typer.Option(help="auto, cpu, cuda, cuda:1 ...")] = "auto",
    workers: Annotated[int, typer.Option(help="Grader / sandbox processes.")] = 2,
    timeout: Annotated[float, typer.Option(help="Seconds per graded item or HumanEval program before it is 'timeout'.")] = 10.0,
    alpha: Annotated[float, typer.Option(help="Significance level of the verdict (Holm-adjusted McNemar).")] = 0.05,
) -> None:
    """Accuracy of BASE and MODEL on each benchmark, paired differences, McNemar tests, forward KL.

    Example: evalkit forgetting smollm2-135m runs/grpo/final --suite reasoning --limit 20 --out runs/forget
    """
    from evalkit.forgetting.report import forgetting_progress, print_forgetting
    from evalkit.forgetting.runner import ForgettingOptions, parse_mc_files, run_forgetting

    opts = ForgettingOptions(
        base=base, model=model, suite=suite, mc_files=parse_mc_files(mc_file or []), train_task=train_task,
        limit=limit, task_seed=task_seed, max_new_tokens=max_new_tokens, batch_size=batch_size, seed=seed,
        dtype=dtype, device=device, workers=workers, timeout=timeout, mc_norm=mc_norm, kl_prompts=kl_prompts,
        kl_samples=kl_samples, kl_max_new_tokens=kl_max_new_tokens, alpha=alpha,
    )
    with forgetting_progress() as progress:
        report = run_forgetting(opts, out, progress=progress)
    print_forgetting(report, out)
