"""`evalkit masked`: how much of a trained model's gain its top-q update entries keep.

    evalkit masked smollm2-135m runs/grpo/step-000048 --task data/validation.jsonl --n 1 --k 1 --temperature 0 --out runs/masked
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalkit.cli_options import build, with_options
from evalkit.masking import MaskOptions
from evalkit.options import PasskOptions

__all__ = ["masked"]


@with_options(MaskOptions, PasskOptions, skip=("model",))
def masked(
    base: Annotated[str, typer.Argument(help="The checkpoint the update starts from (a folder, any format evalkit reads, or a model name).")],
    trained: Annotated[str, typer.Argument(help="The trained checkpoint, of the same model.")],
    out: Annotated[Path, typer.Option(help="Output folder: masked.json, masked.csv, runs/, masks/<label>/run/. Rerun to resume.")],
    **given,
) -> None:
    """Keep the top-q entries of the update (by |dW|, |dW|/|W| or at random), evaluate each masked model.

    Example: evalkit masked smollm2-135m runs/es/step-000012 --task data/validation.jsonl --n 1 --k 1 --temperature 0 --out runs/masked-es
    Example: evalkit masked smollm2-135m runs/grpo/step-000048 --task arith --limit 64 --n 1 --k 1 --temperature 0 --scope global,tensor --mask-by abs,rel,random --out runs/masked-grpo
    """
    from evalkit.masking import run_masked

    opts = build(MaskOptions, given).validate()
    evaluation = build(PasskOptions, given, model=trained).validate()
    report = run_masked(base, trained, opts, evaluation, out, progress=lambda label: typer.echo(f"evaluating {label}"))
    typer.echo(f"{'mask':<24} {'kept':>8} {'||dW||^2':>9} {'accuracy':>9}  gain retained [95% interval]")
    for r in report["rows"]:
        typer.echo(f"{r['label']:<24} {r['kept_frac']:>8.4f} {r['norm_share_kept']:>9.4f} {r['accuracy']:>9.4f}  "
                   f"{r['retained']:.3f} [{r['retained_low']:.3f}, {r['retained_high']:.3f}]")
    typer.echo(f"wrote {out / 'masked.json'} and {out / 'masked.csv'}")
