"""`evalkit diff`: what training changed in the weights, streamed tensor by tensor.

    evalkit diff smollm2-135m runs/grpo/ckpt --out runs/diff-grpo
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalkit.cli_options import build, with_options
from evalkit.diff import DiffOptions

__all__ = ["diff"]


@with_options(DiffOptions, skip=("chunk_elems", "kernel"), helps={
    "threads": "CPU threads that compute: chunks compared at once, a read buffer each (0 = min(4, cores))."})
def diff(
    models: Annotated[list[str], typer.Argument(help="BASE OTHER, or BASE A B: checkpoint folders (safetensors, .bin/.pth, DCP, verl FSDP shards, DeepSpeed ZeRO), single files, a LoRA adapter folder (read as BASE + its update) or BASE+ADAPTER, or model names such as smollm2-135m.")],
    out: Annotated[Path | None, typer.Option(help="Folder for diff.json (summary) and tensors.csv (one row per tensor); overlap.csv with three checkpoints.")] = None,
    top: Annotated[int, typer.Option(help="Most-changed layers to show.", min=1)] = 8,
    **given,
) -> None:
    """Changed fraction, update norms, concentration and overlap of checkpoint updates.

    Example: evalkit diff smollm2-135m runs/es/ckpt runs/grpo/ckpt --atol 1e-5 --out runs/diff
    Example: evalkit diff smollm2-135m runs/grpo/ckpt-bf16 --as-dtype bfloat16
    Example: evalkit diff smollm2-135m runs/lora/adapter --out runs/diff-lora

    Speed: compiled C kernels, built once by the system C compiler ($CC or cc) into
    ~/.cache/evalkit/kernels; without a compiler, numba or numpy (same figures, slower).
    EVALKIT_DIFF_KERNEL=auto|c|numba|numpy chooses.
    """
    from evalkit.console import bytes_progress, print_diff
    from evalkit.diff import diff_checkpoints, output_files
    from evalkit.errors import UsageError
    from evalkit.outdir import claimed

    opts = build(DiffOptions, given).validate()
    if len(models) not in (2, 3):
        raise UsageError(f"got {len(models)} checkpoints: give BASE OTHER, or BASE A B")
    # --out claimed before the work (locked, never a user's files); a result it cannot take after
    # the work is kept in a sibling folder, named in the error
    with claimed(out, "diff", {"models": list(models), "options": opts.identity()}) as folder:
        with bytes_progress("diff") as progress:
            result = diff_checkpoints(list(models), opts, progress=progress)
        written = folder.publish(output_files(result)) if folder is not None else []  # results first
    print_diff(result.summary, top)
    for path in written:
        typer.echo(f"wrote {path}")
