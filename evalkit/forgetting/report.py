"""Terminal output for `evalkit forgetting`: progress bars and the comparison table."""

from __future__ import annotations

import contextlib
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

__all__ = ["forgetting_progress", "print_forgetting"]

console = Console()
err_console = Console(stderr=True)


@contextlib.contextmanager
def forgetting_progress():
    """Yields `start(label, total) -> tick(k)`: one bar per (benchmark, model)."""
    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=err_console)
    started = []

    def start(label: str, total: int):
        if not started:
            bar.start()
            started.append(True)
        task = bar.add_task(label, total=total)
        return lambda k=1: bar.advance(task, k)

    try:
        yield start
    finally:
        bar.stop()


def _pct(x) -> str:
    return "-" if x is None or x != x else f"{100 * x:.1f}"


def _p(x) -> str:
    return "-" if x is None else (f"{x:.3g}" if x >= 1e-3 else f"{x:.1e}")


def print_forgetting(report: dict, out: Path | None) -> None:
    models = report["models"]
    stats = report["statistics"]
    table = Table(title=f"forgetting: {models['base']['name']} (base) -> {models['model']['name']} (model)")
    for col in ("benchmark", "n", "base%", "model%", "diff", f"{int(stats['confidence'] * 100)}% CI",
                "b/c", "p", "p Holm"):
        table.add_column(col, justify="left" if col == "benchmark" else "right", no_wrap=True)
    for r in report["benchmarks"]:
        m = r["mcnemar"]
        table.add_row(r["benchmark"], str(r["n"]), _pct(r["base_accuracy"]), _pct(r["model_accuracy"]),
                      f"{100 * r['difference']:+.1f}", f"{100 * r['ci_low']:+.1f}..{100 * r['ci_high']:+.1f}",
                      f"{m['b']}/{m['c']}", _p(m["p_value"]), _p(m.get("p_holm")))
    console.print(table)
    console.print("[dim]accuracy and diff in percentage points; b/c = items only the base / only the model "
                  "got right; p = McNemar (exact below 25 discordant)[/dim]")
    for line in report["skipped"]:
        console.print(f"[yellow]{line}[/yellow]")
    _print_kl(report.get("kl"))
    console.print(f"[bold]{report['verdict']}[/bold]")
    if out is not None:
        console.print(f"wrote {out / 'forgetting.json'} and {out / 'items.jsonl'}")


def _print_kl(kl: dict | None) -> None:
    if not kl:
        return
    if kl["status"] != "computed":
        console.print(f"[yellow]KL on {kl['task']['name']} not computed: {kl['reason']}[/yellow]")
        return
    se = kl["kl_sequence_se"]
    tok_se = kl["kl_per_token_se"]
    console.print(
        f"{kl['direction']} on {kl['task']['name']} ({kl['prompts']} prompts x {kl['samples_per_prompt']}): "
        f"{kl['kl_sequence']:.4f}" + (f" ± {se:.4f} (SE)" if se is not None else "") + " per completion, "
        f"{kl['kl_per_token']:.5f}" + (f" ± {tok_se:.5f}" if tok_se is not None else "") + " per token"
    )
    console.print(f"[dim]estimator: {kl['estimator']}[/dim]")
