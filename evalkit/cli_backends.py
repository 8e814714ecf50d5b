"""`evalkit backends-check`: the HF sampler and a vLLM engine on the same model, task and settings.

    evalkit backends-check smollm2-135m --device cpu --task arith --n 64 --limit 60 --out runs/backends
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalkit.cli_options import build, with_options
from evalkit.scale.backends_check import BackendsCheckOptions

__all__ = ["backends_check"]


@with_options(BackendsCheckOptions, skip=("model",), helps={
    "n": "Samples per problem in the sampled runs.", "ks": "Comma-separated k values, each <= n/2.",
    "limit": "Problems (the first N of the task).", "temperature": "Temperature of the sampled runs (greedy is T = 0).",
    "top_p": "Nucleus mass of the sampled runs; 1.0 = off.", "max_new_tokens": "Generation length cap.",
    "seed": "Run seed of the sampled runs.", "batch_size": "Sequences per forward pass (passk's --batch-size: its chunk)."})
def backends_check(
    model: Annotated[str, typer.Argument(help=BackendsCheckOptions.help("model"))] = "smollm2-135m",
    out: Annotated[Path, typer.Option(help="Output folder: check.json, check.md, sampled-hf/ and sampled-vllm/ "
                                           "(passk run folders; rerun to resume).")] = Path("runs/backends-check"),
    **given,
) -> None:
    """Do the HF sampler and vLLM draw from the same distribution? Greedy completions, teacher-forced
    log-probs, pass@k with paired intervals, entropy and length; needs vLLM (`make vllm`).

    Example: evalkit backends-check smollm2-135m --device cpu --task arith --n 64 --limit 60 --out runs/backends
    """
    from evalkit.console import console, passk_progress
    from evalkit.scale.backends_check import run_backends_check
    from evalkit.scale.vllm_backend import import_vllm

    opts = build(BackendsCheckOptions, given, model=model)
    opts.validate()
    import_vllm()  # missing: one line, before any work
    with passk_progress() as progress:
        run_backends_check(opts, out, progress=progress, say=lambda text: console.print(f"[bold]{text}"))
    console.print((out / "check.md").read_text())
    console.print(f"wrote {out / 'check.json'} and {out / 'check.md'}")
