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
def passk_progress(label: str = "sampling"):
    """A callback `(done, total, tokens=0)` driving a bar with ETA and tokens/s.

    The bar appears on the first call, so errors before sampling print alone.
    """
    import time

    columns = (
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} samples"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    bar = Progress(*columns, console=err_console)
    state: dict = {}

    def update(done: int, total: int, tokens: int = 0) -> None:
        if not state:
            bar.start()
            state.update(task=bar.add_task(label, total=total, rate=""), start=time.monotonic())
        elapsed = time.monotonic() - state["start"]
        rate = f"{tokens / elapsed:.0f} tok/s" if elapsed > 0 and tokens else ""
        bar.update(state["task"], total=total, completed=done, rate=rate)

    try:
        yield update
    finally:
        if state:  # a bar never started prints nothing (an error stays one line)
            bar.stop()


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def print_regrade(result, out: Path) -> None:
    """Old against new pass@k, and the outcomes that changed."""
    summary, regraded = result.summary, result.summary["regraded"]
    old = {row["k"]: row for row in result.previous["pass_at_k"]}
    table = Table(title=f"regraded {summary['problems_with_samples']} problems x n={summary['sampling']['n']}: "
                        f"{regraded['from']} -> {regraded['to']}")
    level = f"{int(summary['confidence'] * 100)}% CI"
    for col in ("k", "old pass@k", f"old {level}", "new pass@k", f"new {level}", "change"):
        table.add_column(col, justify="right")
    for row in summary["pass_at_k"]:
        before = old.get(row["k"], {})
        change = None if before.get("pass_at_k") is None else row["pass_at_k"] - before["pass_at_k"]
        table.add_row(str(row["k"]), _fmt(before.get("pass_at_k")),
                      f"[{_fmt(before.get('ci_low'))}, {_fmt(before.get('ci_high'))}]", _fmt(row["pass_at_k"]),
                      f"[{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]", "-" if change is None else f"{change:+.3f}")
    console.print(table)
    moves = ", ".join(f"{k} {v}" for k, v in regraded["transitions"].items()) or "none"
    console.print(f"changed outcomes: {regraded['changed']} of {summary['samples']} ({moves})")
    if result.torn_line:
        console.print(f"[yellow]line {result.torn_line} of the old samples.jsonl was torn (a crash mid-write) "
                      "and is left out[/yellow]")
    console.print(f"wrote {out / 'samples.jsonl'} and {out / 'summary.json'}")


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
