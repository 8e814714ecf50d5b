"""Sparsity tested by function: keep only the top-q entries of an update and measure how much of
the trained model's gain on a task remains.

    evalkit masked smollm2-135m runs/grpo/step-000048 --task data/validation.jsonl --n 1 --k 1 \\
        --temperature 0 --fractions 0.01,0.05,0.2,1 --mask-by abs,rel --out runs/masked-grpo

For each key (`abs`: |dW|; `rel`: |dW| / |W_base|; `random`: a seeded uniform key, the control)
and scope (`global`: the ceil(q d) largest keys over all d entries of the model; `tensor`: the
ceil(q n_t) largest of each tensor) and fraction q, the masked model takes the trained
checkpoint's value where the mask is on and the base's elsewhere: `where(mask, trained, base)`,
so q = 1 is the trained model and q = 0 the base, bitwise. The threshold is exact (a two-pass
radix select over the float32 keys, metrics.masking); ties at it are taken in the order tensors
sorted by name, then flat index, so exactly ceil(q d) entries are kept.

Each masked model is written as a plain Hugging Face folder (the trained checkpoint's config and
tokenizer files, one model.safetensors in the trained checkpoint's dtypes; a base stored in
another dtype is rounded to it first, as `evalkit diff --as-dtype` rounds) and evaluated by
`evalkit.passk.run_passk` with the given options (greedy pass@1 is `--n 1 --k 1 --temperature 0`).
The base and the trained model are evaluated the same way; q = 1 and q = 0 read those runs
instead of evaluating a copy. Per problem the score is the share of its samples graded correct;
the gain retained `(masked - base) / (trained - base)` comes with a paired bootstrap interval
over problems (metrics.masking.gain_retained).

Outputs (`--out`): masked.json (every mask: its key, scope, q, entries kept, the share of
||dW||^2 it keeps, accuracy, gain retained with its interval, its run), masked.csv (the same
rows), runs/base/, runs/trained/, masks/<label>/run/ (passk run folders; a rerun resumes them).
The masked weights are deleted after their evaluation unless `--keep-weights` (a model's size
each). Reads any checkpoint format evalkit.checkpoints reads. Limits: a tensor the base does not
store (a tied lm_head stored on one side only) is kept from the trained checkpoint unmasked and
listed; the HF writer holds one masked model in memory while it writes it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import numpy as np

from evalkit.options import Options, PasskOptions, option
from metrics.masking import KEYS

__all__ = ["MaskOptions", "SCOPES", "Pair", "pairs_of", "masked_tensors", "run_masked"]

SCOPES = ("global", "tensor")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".distcp", ".gguf")


@dataclass(frozen=True)
class MaskOptions(Options):
    """Which masks: fractions, keys and scopes (the evaluation's own options are a PasskOptions)."""

    kind: ClassVar[str] = "masked"

    fractions: tuple[float, ...] = option((0.01, 0.05, 0.2, 1.0), "Comma-separated top-q fractions of the update's "
                                          "entries to keep (1 = the trained model, 0 = the base).",
                                          each={"min": 0, "max": 1})
    mask_by: tuple[str, ...] = option(("abs", "rel"), "Comma-separated keys: abs (|dW|), rel (|dW|/|W| of the base), "
                                      "random (a seeded uniform key: the control).", each={"choices": KEYS})
    scope: tuple[str, ...] = option(("global",), "Comma-separated: global (one top-q over the whole model) and/or "
                                    "tensor (top-q of each tensor).", each={"choices": SCOPES})
    mask_seed: int = option(0, "Seed of the random keys (--mask-by random).", min=0)
    keep_weights: bool = option(False, "Keep each masked model's folder after its evaluation.", identity=False)


@dataclass(frozen=True)
class Pair:
    """One tensor of the trained checkpoint and the base's tensor of that name (None: kept as trained)."""

    index: int  # in name order: the random keys' seed and the ties' order
    trained: object  # evalkit.checkpoints.TensorEntry
    base: object | None


def pairs_of(base_cp, trained_cp) -> list[Pair]:
    """The trained checkpoint's tensors by name, each with the base's (float tensors only; others
    and tensors the base lacks have base None)."""
    from evalkit.checkpoints import FLOATS

    out = []
    for i, name in enumerate(sorted(trained_cp.tensors)):
        t, b = trained_cp.tensors[name], base_cp.tensors.get(name)
        usable = b is not None and t.dtype in FLOATS and b.dtype in FLOATS and tuple(b.shape) == tuple(t.shape)
        out.append(Pair(i, t, b if usable else None))
    return out


def _sides(pair: Pair) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(base bits in the trained dtype, trained bits, float32 keys' inputs delta and |base|)."""
    from evalkit.checkpoints import cast_bits, read_bits, to_values

    t = pair.trained
    tb = read_bits(t)
    bb = read_bits(pair.base)
    if pair.base.dtype != t.dtype:
        bb = cast_bits(bb, pair.base.dtype, t.dtype)
    tv = np.asarray(to_values(tb, t.dtype), dtype=np.float32)
    bv = np.asarray(to_values(bb, t.dtype), dtype=np.float32)
    return bb, tb, (tv - bv, bv)


def _keys(pair: Pair, by: str, seed: int, values=None) -> np.ndarray:
    from metrics.masking import mask_keys

    delta, base = values if values is not None else _sides(pair)[2]
    return mask_keys(delta, base, by, seed=[seed, pair.index] if by == "random" else None)


def _thresholds(pairs: list[Pair], by: str, seed: int, ks: list[int]) -> list:
    from metrics.masking import top_thresholds

    def keys_of():
        return (_keys(p, by, seed) for p in pairs if p.base is not None)

    return top_thresholds(keys_of, ks)


def masked_tensors(pairs: list[Pair], by: str, scope: str, q: float, seed: int = 0) -> tuple[dict, dict]:
    """({name: torch tensor} of the masked model, figures: entries, kept, share of ||dW||^2 kept,
    names kept unmasked). See the module docstring for the rule."""
    from evalkit.checkpoints import read_bits
    from evalkit.checkpoints.tensors import as_torch
    from metrics.masking import select, top_count, top_thresholds

    masked = [p for p in pairs if p.base is not None]
    total = sum(p.trained.numel for p in masked)
    threshold, ties = _thresholds(masked, by, seed, [top_count(q, total)])[0] if scope == "global" else (None, 0)
    out, kept, norm, kept_norm, taken = {}, 0, 0.0, 0.0, 0
    for p in pairs:
        t = p.trained
        if p.base is None:
            out[t.name] = as_torch(read_bits(t), t.dtype, t.shape)
            continue
        bb, tb, values = _sides(p)
        keys = _keys(p, by, seed, values)
        if scope == "tensor":
            [(threshold, ties)], taken = top_thresholds(lambda k=keys: [k], [top_count(q, keys.size)]), 0
        mask, used = select(keys, threshold, ties - taken)
        taken += used
        out[t.name] = as_torch(np.where(mask, tb, bb), t.dtype, t.shape)
        sq = values[0].astype(np.float64) ** 2
        kept, norm, kept_norm = kept + int(mask.sum()), norm + float(sq.sum()), kept_norm + float(sq[mask].sum())
    figures = {"entries": total, "kept": kept, "kept_frac": kept / total if total else float("nan"),
               "norm_share_kept": kept_norm / norm if norm else float("nan"),
               "unmasked": [p.trained.name for p in pairs if p.base is None]}
    return out, figures


def _write_model(folder: Path, tensors: dict, config_dirs: list[Path]) -> None:
    """A Hugging Face folder: the config and tokenizer files, then model.safetensors."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    for source in config_dirs:
        for f in sorted(Path(source).iterdir()):
            if f.is_file() and not f.name.endswith((*WEIGHT_SUFFIXES, ".index.json")) and f.name != "optimizer.pt" \
                    and not (folder / f.name).exists():
                shutil.copyfile(f, folder / f.name)
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})


def _scores(run: Path) -> dict:
    """{problem id: share of its samples graded correct} of a passk run folder."""
    from evalkit.jsonio import read_samples

    n, c = {}, {}
    for r in read_samples(run / "samples.jsonl"):
        n[r["problem_id"]] = n.get(r["problem_id"], 0) + 1
        c[r["problem_id"]] = c.get(r["problem_id"], 0) + (r["outcome"] == "correct")
    return {p: c[p] / n[p] for p in n}


def _evaluate(model: str, evaluation: PasskOptions, run: Path) -> Path:
    from evalkit.passk import run_passk

    summary = run_passk(replace(evaluation, model=model), run)
    assert summary["complete"], f"{run}: the evaluation did not finish"
    return run


@dataclass(frozen=True)
class _Inputs:
    base: str
    trained: str
    pairs: list
    config_dirs: list


def _open(base: str, trained: str) -> _Inputs:
    from evalkit.checkpoints import open_checkpoint
    from evalkit.checkpoints.validate import same_architecture
    from evalkit.models import resolve_model, tokenizer_folder

    refs = resolve_model(base), resolve_model(trained)
    base_cp = open_checkpoint(refs[0].path)
    trained_cp = open_checkpoint(refs[1].path, like=base_cp)
    same_architecture([base_cp, trained_cp], strict=True, command="masked")
    dirs = [Path(trained_cp.config_dir or refs[1].config_dir or refs[1].path)]
    dirs.append(Path(tokenizer_folder(refs[1])))
    return _Inputs(base, trained, pairs_of(base_cp, trained_cp), [d for d in dirs if d.is_dir()])


def _mask_row(inputs: _Inputs, mask: tuple, opts: MaskOptions, evaluation: PasskOptions, out: Path) -> dict:
    """One mask (by, scope, q): built, evaluated (or read from the base / trained run), its figures."""
    from evalkit.jsonio import write_json_atomic
    from metrics.masking import top_count

    by, scope, q = mask
    label = f"{by}-{scope}-q{q:g}"
    total = sum(p.trained.numel for p in inputs.pairs if p.base is not None)
    row = {"label": label, "by": by, "scope": scope, "q": q}
    if top_count(q, total) in (0, total):  # the base or the trained model, bitwise: their runs
        same = "base" if top_count(q, total) == 0 else "trained"
        return {**row, "entries": total, "kept": top_count(q, total), "kept_frac": float(same == "trained"),
                "norm_share_kept": float(same == "trained"), "unmasked": [], "run": f"runs/{same}", "same_as": same}
    folder, run = out / "masks" / label / "model", out / "masks" / label / "run"
    figures = _read_json(out / "masks" / label / "mask.json")
    if not figures or not _complete(run):
        tensors, figures = masked_tensors(inputs.pairs, by, scope, q, opts.mask_seed)
        _write_model(folder, tensors, inputs.config_dirs)
        del tensors
        _evaluate(str(folder), evaluation, run)
        write_json_atomic(out / "masks" / label / "mask.json", figures)
    if not opts.keep_weights:
        shutil.rmtree(folder, ignore_errors=True)
    return {**row, **figures, "run": str(run.relative_to(out))}


def _read_json(path: Path) -> dict:
    import json

    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _complete(run: Path) -> bool:
    return bool(_read_json(run / "summary.json").get("complete"))


def run_masked(base: str, trained: str, opts: MaskOptions, evaluation: PasskOptions, out: Path,
               progress: Callable | None = None) -> dict:
    """Evaluate the base, the trained model and every mask into `out` (resuming what is there);
    write masked.json and masked.csv; returns masked.json's content. `progress(label)` before each."""
    from evalkit.jsonio import plain_json, write_atomic, write_json_atomic
    from evalkit.locks import locked
    from evalkit.rundir import check_writable

    opts.validate()
    evaluation.validate()
    out = Path(out)
    check_writable(out)
    with locked(out):
        inputs = _open(base, trained)
        for name, model in (("base", base), ("trained", trained)):
            if progress:
                progress(name)
            _evaluate(model, evaluation, out / "runs" / name)
        rows = []
        for mask in ((by, scope, q) for by in opts.mask_by for scope in opts.scope for q in opts.fractions):
            if progress:
                progress(f"{mask[0]}-{mask[1]}-q{mask[2]:g}")
            rows.append(_mask_row(inputs, mask, opts, evaluation, out))
        report = {"kind": "masked", "base": base, "trained": trained, "options": opts.identity(),
                  "evaluation": evaluation.identity(), "rows": _with_gains(rows, out),
                  "rule": "where(mask, trained, base); mask = the ceil(q d) largest keys (global) or ceil(q n_t) "
                          "of each tensor; ties at the threshold by tensor name, then flat index",
                  "retained": "(masked - base) / (trained - base), per-problem scores, paired percentile bootstrap "
                              "over problems (2000 resamples, seed 0)"}
        write_json_atomic(out / "masked.json", plain_json(report))
        import pandas as pd

        flat = [{k: v for k, v in r.items() if not isinstance(v, (list, dict))} for r in report["rows"]]
        write_atomic(out / "masked.csv", lambda fh: pd.DataFrame(flat).to_csv(fh, index=False))
    return report


def _with_gains(rows: list[dict], out: Path) -> list[dict]:
    """Each row with its accuracy and the gain retained (metrics.masking.gain_retained)."""
    from metrics.masking import gain_retained

    base, trained = _scores(out / "runs" / "base"), _scores(out / "runs" / "trained")
    ids = list(base)
    if set(trained) != set(ids):
        raise AssertionError("the base and trained runs scored different problems")
    done = []
    for r in rows:
        masked = _scores(out / r["run"])
        g = gain_retained([base[i] for i in ids], [trained[i] for i in ids], [masked[i] for i in ids])
        done.append({**r, "accuracy": g["masked"], "base_accuracy": g["base"], "trained_accuracy": g["trained"],
                     "retained": g["retained"], "retained_low": g["retained_ci"][0],
                     "retained_high": g["retained_ci"][1], "masked_gain": g["masked_gain"],
                     "masked_gain_low": g["masked_gain_ci"][0], "masked_gain_high": g["masked_gain_ci"][1],
                     "undefined_frac": g["undefined_frac"], "problems": g["n"]})
    return done
