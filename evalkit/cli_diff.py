"""`evalkit diff`: what training changed in the weights, streamed tensor by tensor.

    evalkit diff smollm2-135m runs/grpo/ckpt --out runs/diff-grpo
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["diff"]

def diff(
    models: Annotated[list[str], typer.Argument(help="BASE OTHER, or BASE A B: checkpoint folders (sharded or not), .safetensors files, or model names such as smollm2-135m.")],
    atol: Annotated[float, typer.Option(help="Absolute tolerance: |delta| <= atol counts as unchanged.")] = 1e-5,
    rtol: Annotated[float, typer.Option(help="Relative tolerance: |delta| <= rtol*|w| counts as unchanged; default 2^-9, half a bf16 ulp (absorbed in bf16).")] = 2.0**-9,
    rank: Annotated[bool, typer.Option("--rank", help="Also compute rank(delta)/min(shape) of every 2-D update (SVD: slow for big matrices).")] = False,
    out: Annotated[Path | None, typer.Option(help="Folder for diff.json (summary) and tensors.csv (one row per tensor); overlap.csv with three checkpoints.")] = None,
    top: Annotated[int, typer.Option(help="Most-changed layers to show.")] = 8,
    threads: Annotated[int, typer.Option(help="Threads comparing chunks at once (a chunk buffer each).")] = 2,
    as_dtype: Annotated[str | None, typer.Option("--as-dtype", help="Round float tensors of every checkpoint to bfloat16, float16 or float32 (nearest even, as torch) before comparing, e.g. an fp32 base against a bf16 trained copy.")] = None,
    workers: Annotated[int | None, typer.Option(hidden=True)] = None,
) -> None:
    """Changed fraction, update norms, concentration and overlap of checkpoint updates.

    Example: evalkit diff smollm2-135m runs/es/ckpt runs/grpo/ckpt --atol 1e-5 --out runs/diff
    Example: evalkit diff smollm2-135m runs/grpo/ckpt-bf16 --as-dtype bfloat16

    Speed: compiled C kernels, built once by the system C compiler ($CC or cc) into
    ~/.cache/evalkit/kernels; without a compiler, numba or numpy (same figures, slower).
    EVALKIT_DIFF_KERNEL=auto|c|numba|numpy chooses.
    """
    from evalkit.cli_options import deprecated
    from evalkit.console import bytes_progress, print_diff
    from evalkit.diff import DiffOptions, diff_checkpoints, write_outputs
    from evalkit.errors import UsageError
    from evalkit.safetensors_io import CASTS

    threads = deprecated({"workers": workers}, "workers", "threads") or threads
    from evalkit.runstore import check_writable

    check_writable(out)  # before the work: a finished diff is never lost to a bad --out
    if len(models) not in (2, 3):
        raise UsageError(f"got {len(models)} checkpoints: give BASE OTHER, or BASE A B")
    if not (atol >= 0 and rtol >= 0):
        raise UsageError("--atol and --rtol must be >= 0")
    if threads < 1:
        raise UsageError("--threads must be >= 1")
    if as_dtype is not None and as_dtype not in CASTS:
        raise UsageError(f"--as-dtype {as_dtype}: choose one of {', '.join(CASTS)}")
    opts = DiffOptions(atol=atol, rtol=rtol, rank=rank, threads=threads, as_dtype=as_dtype)
    with bytes_progress("diff") as progress:
        result = diff_checkpoints(list(models), opts, progress=progress)
    written = write_outputs(result, out) if out is not None else []  # results first, then the tables
    print_diff(result.summary, top)
    for path in written:
        typer.echo(f"wrote {path}")
