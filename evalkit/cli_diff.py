"""`evalkit diff`: what training changed in the weights, streamed tensor by tensor.

    evalkit diff smollm2-135m runs/grpo/ckpt --out runs/diff-grpo
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["diff"]

KIND_ORDER = ("embedding", "q_proj", "k_proj", "v_proj", "o_proj", "mlp_gate", "mlp_up",
              "mlp_down", "norm", "lm_head", "other")


def diff(
    models: Annotated[list[str], typer.Argument(help="BASE OTHER, or BASE A B: checkpoint folders (sharded or not), .safetensors files, or model names such as smollm2-135m.")],
    atol: Annotated[float, typer.Option(help="Absolute tolerance: |delta| <= atol counts as unchanged.")] = 1e-5,
    rtol: Annotated[float, typer.Option(help="Relative tolerance: |delta| <= rtol*|w| counts as unchanged; default 2^-9, half a bf16 ulp (absorbed in bf16).")] = 2.0**-9,
    rank: Annotated[bool, typer.Option("--rank", help="Also compute rank(delta)/min(shape) of every 2-D update (SVD: slow for big matrices).")] = False,
    out: Annotated[Path | None, typer.Option(help="Folder for diff.json (summary) and tensors.csv (one row per tensor); overlap.csv with three checkpoints.")] = None,
    top: Annotated[int, typer.Option(help="Most-changed layers to show.")] = 8,
    workers: Annotated[int, typer.Option(help="Threads comparing chunks at once (a chunk buffer each).")] = 2,
    as_dtype: Annotated[str | None, typer.Option("--as-dtype", help="Round float tensors of every checkpoint to bfloat16, float16 or float32 (nearest even, as torch) before comparing, e.g. an fp32 base against a bf16 trained copy.")] = None,
) -> None:
    """Changed fraction, update norms, concentration and overlap of checkpoint updates.

    Example: evalkit diff smollm2-135m runs/es/ckpt runs/grpo/ckpt --atol 1e-5 --out runs/diff
    Example: evalkit diff smollm2-135m runs/grpo/ckpt-bf16 --as-dtype bfloat16

    Speed: compiled C kernels, built once by the system C compiler ($CC or cc) into
    ~/.cache/evalkit/kernels; without a compiler, numba or numpy (same figures, slower).
    EVALKIT_DIFF_KERNEL=auto|c|numba|numpy chooses.
    """
    from evalkit.diff import DiffOptions, diff_checkpoints, write_outputs
    from evalkit.errors import UsageError
    from evalkit.safetensors_io import CASTS

    if len(models) not in (2, 3):
        raise UsageError(f"got {len(models)} checkpoints: give BASE OTHER, or BASE A B")
    if not (atol >= 0 and rtol >= 0):
        raise UsageError("--atol and --rtol must be >= 0")
    if workers < 1:
        raise UsageError("--workers must be >= 1")
    if as_dtype is not None and as_dtype not in CASTS:
        raise UsageError(f"--as-dtype {as_dtype}: choose one of {', '.join(CASTS)}")
    opts = DiffOptions(atol=atol, rtol=rtol, rank=rank, workers=workers, as_dtype=as_dtype)
    with _progress() as progress:
        result = diff_checkpoints(list(models), opts, progress=progress)
    written = write_outputs(result, out) if out is not None else []  # results first, then the tables
    print_diff(result.summary, top)
    for path in written:
        typer.echo(f"wrote {path}")


def _progress():
    import contextlib

    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    @contextlib.contextmanager
    def bar():
        progress = Progress("[bold]diff", BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                            console=Console(stderr=True), transient=True)
        state: dict = {}

        def update(done: int, total: int) -> None:
            if not state:
                progress.start()
                state["task"] = progress.add_task("diff", total=total)
            progress.update(state["task"], completed=done)

        try:
            yield update
        finally:
            if state:  # stopping a bar that never started prints a stray newline
                progress.stop()

    return bar()


def _pct(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.2f}%"


def _num(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3g}"


STAT_COLUMNS = (("changed", "changed_frac_bits", _pct), (">atol", "changed_frac_atol", _pct),
                (">rtol|w|", "changed_frac_rel", _pct), ("|dW|", "update_norm", _num),
                ("|dW|/|W|", "rel_norm", _num), ("max|dW|", "max_abs_update", _num))
SHARE_COLUMNS = (("top 0.1%", "top_0.1pct_share", _pct), ("top 1%", "top_1pct_share", _pct),
                 ("top 10%", "top_10pct_share", _pct))


def _table(title: str, first: str, rows: list[tuple[str, dict]], columns):
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    table.add_column(first)
    for head, _, _ in columns:
        table.add_column(head, justify="right")
    for label, stats in rows:
        table.add_row(label, *(fmt(stats.get(key)) for _, key, fmt in columns))
    return table


def print_diff(summary: dict, top: int = 8) -> None:
    """Overall, per module kind, most-changed layers, overlap and problems, as rich tables."""
    from rich.console import Console

    console = Console()
    updates = summary["updates"]
    base = summary["inputs"]["base"]["name"]
    cast = summary["options"].get("as_dtype")
    console.print(f"[bold]base[/bold] {base}; " + "; ".join(
        f"[bold]{lab}[/bold] {summary['inputs'][lab]['name']}" for lab in updates)
        + f"; {summary['tensors_compared']} tensors compared" + (f" as {cast}" if cast else ""))
    console.print("[dim]changed: raw bits differ; >atol: |dW| > atol; >rtol|w|: |dW| > rtol*|W| "
                  "(survives bf16); top q: share of |dW|^2 in the largest q of entries[/dim]")
    for lab, u in updates.items():
        kinds = sorted(u["kinds"].items(), key=lambda kv: KIND_ORDER.index(kv[0]))
        rows = [("overall", u["overall"]), *kinds]
        console.print(_table(f"Update {lab} - base, by module kind", "kind", rows, STAT_COLUMNS))
        console.print(_table(f"Concentration of |dW|^2 ({lab})", "kind", rows, SHARE_COLUMNS))
        layers = sorted(u["layers"].items(), key=lambda kv: (-kv[1]["changed_frac_bits"],
                                                             -(kv[1]["rel_norm"] or 0)))
        console.print(_table(f"Most-changed layers ({lab}, by changed fraction)", "layer",
                             [(f"layers.{i}", s) for i, s in layers[:top]], STAT_COLUMNS))
        if u.get("rank"):
            r = u["rank"]
            console.print(f"rank(dW)/min(shape) over {r['matrices']} matrices ({lab}): mean "
                          f"{r['mean_rank_ratio']:.3f}, min {r['min_rank_ratio']:.3f}, "
                          f"{r['full_rank']} full rank")
    if "overlap" in summary:
        _print_overlap(console, summary["overlap"])
    _print_problems(console, summary)


def _print_overlap(console, overlap: dict) -> None:
    columns = (("changed A", "changed_a", str), ("changed B", "changed_b", str),
               ("both", "changed_both", str), ("Jaccard", "jaccard", _num),
               ("chance", "jaccard_chance", _num), ("x chance", "jaccard_over_chance", _num),
               ("cosine", "cosine", _num), ("same sign", "sign_agreement", _pct))
    rows = [("overall", overlap["overall"]),
            *sorted(overlap["kinds"].items(), key=lambda kv: KIND_ORDER.index(kv[0]))]
    console.print(_table("Overlap of updates A and B (changed by bits)", "", rows, columns))


def _print_problems(console, summary: dict) -> None:
    overall = [u["overall"] for u in summary["updates"].values()]
    nonfinite = {key: sum(o[key] for o in overall) for key in
                 ("nan_base", "inf_base", "nan_other", "inf_other", "nonfinite_pairs")}
    lines = [f"[yellow]{key}[/yellow] ({len(summary[key])}): " + "; ".join(summary[key][:5])
             + (" ..." if len(summary[key]) > 5 else "")
             for key in ("missing", "extra", "mismatched", "skipped") if summary[key]]
    lines += [f"[dim]tied[/dim]: {t}" for t in summary["tied"]]
    if any(nonfinite.values()):
        lines.append("[red]non-finite[/red]: " + ", ".join(f"{k} {v}" for k, v in nonfinite.items()))
    for line in lines:
        console.print(line)
