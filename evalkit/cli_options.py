"""Typer options made from the options classes: each field's help, type and default are its own.

    @with_options(ESOptions, skip=("iterations",))
    def es(out: Out, **given) -> None: ...      # `given` holds one value per ESOptions field

A command's own parameters (arguments, options only it has) stay in its signature; every
field of the given classes is added after them as `--field-name`, typed and defaulted by the
class and described by its metadata (evalkit.options `option(..., help=...)`; `helps=`
overrides a text for one command). The values are checked by the class's `validate()`.
"""

from __future__ import annotations

import inspect
import typing
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["with_options", "build", "int_list", "Out", "TrainOut"]

Out = Annotated[Path | None, typer.Option(help="Output folder; rerun the same command to resume.")]
TrainOut = Annotated[Path, typer.Option(help="Output folder: run.json, metrics.jsonl, step-NNNNNN/ checkpoints. "
                                              "Rerun to resume.")]


def with_options(*classes, skip: tuple[str, ...] = (), helps: dict[str, str] | None = None):
    """Add one typer option per dataclass field (see the module docstring)."""
    helps = helps or {}

    def wrap(fn):
        own = [p for p in inspect.signature(fn, eval_str=True).parameters.values() if p.kind is not p.VAR_KEYWORD]
        taken = {p.name for p in own} | set(skip)
        added = []
        for cls in classes:
            hints = typing.get_type_hints(cls)
            for f in fields(cls):
                if f.name in taken or f.default is MISSING:
                    continue
                taken.add(f.name)
                option = typer.Option(help=helps.get(f.name) or f.metadata["help"])
                added.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                               annotation=Annotated[hints[f.name], option]))
        fn.__signature__ = inspect.Signature([*own, *added])
        return fn

    return wrap


def int_list(text: str, option: str, *, example: str = "2,4,8", required: bool = True) -> list[int]:
    """Comma-separated integers of an option such as --k or --group-sizes."""
    from evalkit.errors import UsageError

    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise UsageError(f"{option} {text!r}: expected comma-separated integers, e.g. {example}") from exc
    if required and not values:
        raise UsageError(f"{option}: give at least one integer")
    return values


def build(cls, given: dict, **overrides):
    """An options dataclass from a command's values (fields it does not have are ignored)."""
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in (given | overrides).items() if k in names})
