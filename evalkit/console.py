"""Terminal output: progress bars and rich tables. Nothing here computes."""

from __future__ import annotations

import contextlib
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

console = Console()
err_console = Console(stderr=True)


@contextlib.contextmanager
def passk_progress():
    """A callback `(done, total, tokens)` driving a bar with ETA and tokens/s.

    The bar appears on the first call, so errors before sampling print alone.
    """
    import time

    columns = (
        TextColumn("[bold]sampling"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} samples"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    bar = Progress(*columns, console=err_console)
    state: dict = {}

    def update(done: int, total: int, tokens: int) -> None:
        if not state:
            bar.start()
            state.update(task=bar.add_task("sampling", total=total, rate=""), start=time.monotonic())
        elapsed = time.monotonic() - state["start"]
        rate = f"{tokens / elapsed:.0f} tok/s" if elapsed > 0 and tokens else ""
        bar.update(state["task"], total=total, completed=done, rate=rate)

    try:
        yield update
    finally:
        bar.stop()


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def print_passk(summary: dict, out: Path) -> None:
    task = summary["task"]
    title = f"pass@k  {summary['model']['name']} on {task['name']}  ({summary['problems_with_samples']} problems, n={summary['sampling']['n']})"
    table = Table(title=title)
    for col in ("k", "pass@k", f"{int(summary['confidence'] * 100)}% CI", "problems", "excluded (n<k)"):
        table.add_column(col, justify="right")
    for row in summary["pass_at_k"]:
        ci = f"[{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]"
        table.add_row(str(row["k"]), _fmt(row["pass_at_k"]), ci, str(row["n_problems"]), str(row["n_excluded"]))
    console.print(table)
    counts = ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items())
    console.print(f"outcomes: {counts}")
    if not summary["complete"]:
        console.print("[yellow]incomplete: rerun the same command to finish the missing samples[/yellow]")
    console.print(f"wrote {out / 'samples.jsonl'} and {out / 'summary.json'}")
