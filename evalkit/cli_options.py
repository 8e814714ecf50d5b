"""Typer options made from the options classes: each field's help, type and default are its own.

    @with_options(ESOptions, skip=("iterations",))
    def es(out: Out, **given) -> None: ...      # `given` holds one value per ESOptions field
        opts = build(ESOptions, given)

A command's own parameters (arguments, options only it has) stay in its signature; every
field of the given classes is added after them as `--field-name` (or the name the field's
metadata spells: `ks` is `--k`), typed and defaulted by the class and described by its metadata
(evalkit.options `option(..., help=...)`; `helps=` overrides a text for one command). A tuple
field is a comma-separated list on the command line (`--k 1,2,4`), and a field renamed since a
release keeps its old name (`was=`) as a hidden option (`--workers` for `--ray-workers`). `build`
turns the values back into the class, which checks them (`validate()`).
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


def _spelled(f) -> str:
    return f.metadata.get("name", f.name)


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
                if f.name in taken or _spelled(f) in taken or f.default is MISSING:
                    continue
                taken |= {f.name, _spelled(f)}
                hint, default = hints[f.name], f.default
                if typing.get_origin(hint) is tuple:  # a comma-separated list
                    hint, default = str, ",".join(map(str, default))
                text = helps.get(f.name) or f.metadata["help"]
                added.append(inspect.Parameter(_spelled(f), inspect.Parameter.KEYWORD_ONLY, default=default,
                                               annotation=Annotated[hint, typer.Option(help=text)]))
                added += [inspect.Parameter(old, inspect.Parameter.KEYWORD_ONLY, default=None,
                                            annotation=Annotated[hint | None, typer.Option(hidden=True)])
                          for old in f.metadata.get("was", ())]
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
    """An options dataclass from a command's values (fields it does not have are ignored): a list
    field's text parsed, a value given under a field's old name taken for it."""
    hints, chosen = typing.get_type_hints(cls), {}
    for f in fields(cls):
        names = [n for n in (f.name, _spelled(f), *f.metadata.get("was", ())) if given.get(n) is not None]
        if f.name in overrides or not names:
            if f.name in overrides:
                chosen[f.name] = overrides[f.name]
            continue
        value = given[names[-1]]  # an old name, when given, over the default under the new one
        if isinstance(value, str) and typing.get_origin(hints[f.name]) is tuple:
            value = _items(value, typing.get_args(hints[f.name])[0], "--" + _spelled(f).replace("_", "-"))
        chosen[f.name] = value
    return cls(**chosen)


def _items(text: str, kind: type, option: str) -> tuple:
    """A comma-separated list option's values, as the field's element type (int, float or str)."""
    from evalkit.errors import UsageError

    if kind is int:
        return tuple(int_list(text, option, example="1,2,4", required=False))
    parts = [x.strip() for x in text.split(",") if x.strip()]
    if kind is float:
        try:
            return tuple(float(x) for x in parts)
        except ValueError as exc:
            raise UsageError(f"{option} {text!r}: expected comma-separated numbers, e.g. 0.01,0.05,1") from exc
    return tuple(parts)
