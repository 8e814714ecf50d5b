"""Bad user input: one exception type, and the CLI wrapper that turns it into exit 2."""

from __future__ import annotations

import functools


class UsageError(Exception):
    """Bad input from the user; the message names the problem and the fix."""


class StaleGrades(UserWarning):
    """A stored run was graded by another grader version than this evalkit's."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill PID`, `timeout`, a scheduler pre-empting the job): handled as Ctrl-C is, so
    that what was done is recorded (a study stage's status and time, a journal's last line)
    before the exit. A second SIGTERM during that ends the process at once."""


_UNSET = object()


def _terminate(signum, frame):
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise Terminated()


def handle_errors(fn):
    """Wrap a typer command: UsageError -> one line on stderr, exit 2;
    Ctrl-C -> say how to resume, exit 130; SIGTERM -> the same, exit 143 (128 + 15)."""
    import typer

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        import signal
        import warnings

        def show(message, category, *_args, **_kwargs):
            typer.echo(f"warning: {message}", err=True)

        try:
            previous = signal.signal(signal.SIGTERM, _terminate)
        except ValueError:  # not the main thread (a command called from a test's thread): left as it is
            previous = _UNSET
        if previous is signal.SIG_IGN:  # whoever started us wants SIGTERM ignored: so be it
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("always", StaleGrades)
                warnings.showwarning = show
                return fn(*args, **kwargs)
        except UsageError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt as exc:
            word, code = ("terminated (SIGTERM)", 143) if isinstance(exc, Terminated) else ("interrupted", 130)
            typer.echo(f"\n{word}: results written so far are kept; rerun the same command to resume", err=True)
            raise typer.Exit(code) from None
        finally:
            if previous is not _UNSET:  # None: a handler not set from Python, put back as the default
                signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)

    return wrapper
