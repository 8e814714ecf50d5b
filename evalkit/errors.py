"""Bad user input: one exception type, and the CLI wrapper that turns it into exit 2."""

from __future__ import annotations

import functools


class UsageError(Exception):
    """Bad input from the user; the message names the problem and the fix."""


class StaleGrades(UserWarning):
    """A stored run was graded by another grader version than this evalkit's."""


def handle_errors(fn):
    """Wrap a typer command: UsageError -> one line on stderr, exit 2;
    Ctrl-C -> say how to resume, exit 130."""
    import typer

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        import warnings

        def show(message, category, *_args, **_kwargs):
            typer.echo(f"warning: {message}", err=True)

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("always", StaleGrades)
                warnings.showwarning = show
                return fn(*args, **kwargs)
        except UsageError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            typer.echo("\ninterrupted: results written so far are kept; rerun the same command to resume", err=True)
            raise typer.Exit(130) from None

    return wrapper
