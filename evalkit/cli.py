"""The `evalkit` command line. Commands are thin: parse, call one function, print.

    evalkit passk smollm2-135m --task arith --n 16 --k 1,2,4,8,16 --out runs/base
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperGroup

from evalkit.cli_options import build, with_options
from evalkit.errors import handle_errors
from evalkit.options import PasskOptions



class OneLineErrors(TyperGroup):
    """A command line click cannot parse (an unknown option, a value of the wrong type, a
    missing argument) is one line naming it and the command's --help, exit 2, instead of
    click's six-line box; the commands' own errors are already one line (evalkit.errors)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        import errno
        import sys

        from typer import _click
        from typer.exceptions import Abort

        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _click.exceptions.NoArgsIsHelpError as exc:
            exc.show()  # `evalkit` alone, or a group alone: its help
            sys.exit(exc.exit_code)
        except _click.exceptions.ClickException as exc:
            where = getattr(getattr(exc, "ctx", None), "command_path", None) or "evalkit"
            message = " ".join(exc.format_message().split())
            typer.echo(f"error: {message} (see {where} --help)", err=True)
            sys.exit(exc.exit_code)
        except Abort:
            typer.echo("aborted", err=True)
            sys.exit(1)
        except OSError as exc:
            if exc.errno != errno.EPIPE:  # the reader of a pipe went away: nothing left to say
                raise
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    cls=OneLineErrors,
    help="What post-training did to a reasoning LLM: Pass@K, weight diffs, entropy, forgetting.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """What post-training did to a reasoning LLM: Pass@K, weight diffs, entropy, forgetting."""


@app.command()
@handle_errors
@with_options(PasskOptions, skip=("confidence", "n_boot"))
def passk(
    model: Annotated[str, typer.Argument(help=PasskOptions.help("model"))] = "smollm2-135m",
    out: Annotated[Path | None, typer.Option(help="Run folder (samples.jsonl, summary.json); default runs/passk-MODEL-TASK. Rerun the same command to resume.")] = None,
    repair: Annotated[bool, typer.Option("--repair", help="Set corrupt lines of samples.jsonl aside in samples.rejected.jsonl and sample them again.")] = False,
    **given,
) -> None:
    """Sample N completions per problem, grade them, and estimate pass@k with intervals.

    Example: evalkit passk smollm2-135m --task arith --n 8 --k 1,2,4,8 --limit 20 --out runs/base
    """
    from evalkit.console import passk_progress, print_passk
    from evalkit.passk import run_passk

    opts = build(PasskOptions, given, model=model)
    out = out or Path("runs") / f"passk-{Path(model).name}-{Path(opts.task).stem}"
    with passk_progress() as progress:
        summary = run_passk(opts, out, progress=progress, repair=repair)
    print_passk(summary, out)


def main() -> None:
    app()


# Each command lives in its own module and registers here, one line each.
from evalkit.cli_diff import diff  # noqa: E402
app.command("diff")(handle_errors(diff))
from evalkit.cli_samples import entropy, groups, length  # noqa: E402
app.command("entropy")(handle_errors(entropy))
app.command("length")(handle_errors(length))
app.command("groups")(handle_errors(groups))
from evalkit.cli_forgetting import forgetting  # noqa: E402
app.command("forgetting")(handle_errors(forgetting))
from evalkit.cli_train import train_app  # noqa: E402
app.add_typer(train_app, name="train")
from evalkit.cli_report import report  # noqa: E402
app.command("report")(handle_errors(report))
from evalkit.cli_regrade import regrade  # noqa: E402
app.command("regrade")(handle_errors(regrade))
from evalkit.cli_study import study  # noqa: E402
app.command("study")(handle_errors(study))
from evalkit.cli_traces import tokens, traces  # noqa: E402
app.command("traces")(handle_errors(traces))
app.command("tokens")(handle_errors(tokens))
from evalkit.cli_import import import_samples  # noqa: E402
app.command("import")(handle_errors(import_samples))
from evalkit.cli_interpolate import interpolate  # noqa: E402
app.command("interpolate")(handle_errors(interpolate))
from evalkit.cli_masked import masked  # noqa: E402
app.command("masked")(handle_errors(masked))
from evalkit.cli_backends import backends_check  # noqa: E402
app.command("backends-check")(handle_errors(backends_check))
