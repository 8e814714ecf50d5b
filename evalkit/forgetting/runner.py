"""Run a forgetting suite on a base and a trained model, compare them item by item.

    report = run_forgetting(ForgettingOptions(base="smollm2-135m", model="runs/grpo/final", limit=20), out=Path("runs/forget"))

Both models see the same items, the same user prompts (each rendered with
its own chat template) and the same seeds, with greedy decoding. Per
benchmark: accuracies, the paired difference (model - base) with a seeded
bootstrap interval, McNemar's test on the per-item outcomes (exact binomial
below 25 discordant pairs) and its Holm-adjusted p-value over the suite.
The verdict uses the Holm-adjusted p-values. With `train_task`, the forward
KL of kl.py on that task's prompts. Not resumable: a run recomputes all.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.forgetting import BENCHMARKS, MC_FORMAT, SUITES
from evalkit.forgetting.generate import EvalSettings
from evalkit.options import GradingOptions, ModelOptions
from evalkit.runstore import FolderLock, versions

__all__ = ["ForgettingOptions", "resolve_suite", "run_forgetting", "compare", "verdict", "write_outputs"]


@dataclass(frozen=True)
class ForgettingOptions(GradingOptions, ModelOptions):
    """`model` (and `base`, the same kind of value), dtype and device as in evalkit.options;
    grader_workers: grader / sandbox processes; grade_timeout: seconds per graded item."""

    base: str = "smollm2-135m"
    suite: str = "default"  # a name in SUITES or comma-separated benchmark names
    mc_files: tuple[tuple[str, str], ...] = ()  # (benchmark name, JSONL path)
    train_task: str | None = None
    limit: int = 50  # items per benchmark; 0 = all
    task_seed: int = 0
    max_new_tokens: int = 0  # 0 = per-benchmark default
    batch_size: int = 8
    seed: int = 0
    mc_norm: str = "sum"
    kl_prompts: int = 32
    kl_samples: int = 1
    kl_max_new_tokens: int = 64
    n_boot: int = 2000
    confidence: float = 0.95
    alpha: float = 0.05


def parse_mc_files(specs: list[str]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise UsageError(f"--mc-file {spec!r}: expected NAME=PATH, e.g. --mc-file mmlu=mmlu.jsonl")
        pairs.append((name.strip(), path.strip()))
    return tuple(pairs)


def resolve_suite(suite: str, mc_files: tuple[tuple[str, str], ...]) -> tuple[list[tuple[str, str]], list[str]]:
    """[(name, kind)] to run and messages for skipped benchmarks."""
    from evalkit.tasks import rgym

    names = list(SUITES[suite]) if suite in SUITES else [n.strip() for n in suite.split(",") if n.strip()]
    files = dict(mc_files)
    names += [n for n in files if n not in names]
    chosen, skipped = [], []
    for name in dict.fromkeys(names):
        kind = "mc" if name in files else BENCHMARKS.get(name)
        if kind is None and name in rgym.dataset_names():
            kind = "rgym"
        if kind is None:
            raise UsageError(
                f"unknown benchmark {name!r}: use a suite ({', '.join(SUITES)}), benchmarks from "
                f"{', '.join(BENCHMARKS)}, any reasoning-gym dataset, or a multiple-choice file "
                f"with --mc-file {name}=path.jsonl"
            )
        if kind == "mc" and name not in files:
            skipped.append(f"{name} skipped: no file given; add it with --mc-file {name}=path.jsonl ({MC_FORMAT})")
            continue
        chosen.append((name, kind))
    if not chosen:
        raise UsageError(f"suite {suite!r}: nothing to run; " + "; ".join(skipped))
    return chosen, skipped


def _load_items(name: str, kind: str, opts: ForgettingOptions):
    from evalkit.forgetting import humaneval, multiple_choice, rgym_families

    if kind == "rgym":
        return rgym_families, rgym_families.load(name, limit=opts.limit, seed=opts.task_seed)
    if kind == "humaneval":
        return humaneval, humaneval.load(limit=opts.limit)
    return multiple_choice, multiple_choice.load(name, dict(opts.mc_files)[name], limit=opts.limit)


def _identity(ref, dtype: str) -> dict:
    from evalkit.models import weights_hash

    return {"name": ref.name, "path": ref.path, "weights_hash": weights_hash(ref.path), "dtype": dtype}


def run_forgetting(opts: ForgettingOptions, out: Path | None = None, *,
                   progress: Callable[[str, int], Callable[[int], None]] | None = None) -> dict:
    """Evaluate both models on every benchmark; returns the report (and writes it with `out`)."""
    from evalkit.runstore import check_writable

    _validate(opts)
    check_writable(out)
    chosen, skipped = resolve_suite(opts.suite, opts.mc_files)
    loaded = [(name, kind, *_load_items(name, kind, opts)) for name, kind in chosen]  # fail early
    lock = FolderLock(Path(out)) if out is not None else None  # one writer per output folder
    try:
        return _evaluate(opts, out, chosen, skipped, loaded, progress)
    except BaseException:
        if lock is not None:
            lock.release(remove_if_created=True)
        raise
    finally:
        if lock is not None:
            lock.release()


def _evaluate(opts: ForgettingOptions, out, chosen, skipped, loaded, progress) -> dict:
    """Both models on every loaded benchmark, compared; the report (written to `out` when given)."""
    from evalkit.models import load_model, resolve_device, resolve_model

    refs = {"base": resolve_model(opts.base), "model": resolve_model(opts.model)}
    device = resolve_device(opts.device)
    models = {side: load_model(ref, dtype=opts.dtype, device=device) for side, ref in refs.items()}
    settings = EvalSettings(**{f.name: getattr(opts, f.name) for f in fields(EvalSettings)})
    rows, records = [], []
    for name, kind, module, items in loaded:
        outcomes = {}
        for side, (model, tok) in models.items():
            tick = progress(f"{name} [{side}]", len(items.ids)) if progress else None
            outcomes[side] = module.evaluate(items, model, tok, settings, tick)
        rows.append(compare(name, kind, items.identity(), outcomes["base"], outcomes["model"], opts))
        records += _item_records(name, outcomes["base"], outcomes["model"])
    _holm(rows)
    report = {
        "kind": "forgetting",
        "models": {side: _identity(ref, opts.dtype) for side, ref in refs.items()},
        "suite": opts.suite, "benchmarks": rows, "skipped": skipped,
        "verdict": verdict(rows, opts.alpha),
        "kl": _kl(opts, models) if opts.train_task else None,
        "settings": {**asdict(opts), "device": device, "decoding": "greedy (temperature 0), n=1"},
        "statistics": {
            "difference": "model accuracy - base accuracy, paired percentile bootstrap over items",
            "test": "McNemar on per-item outcomes; exact binomial below 25 discordant pairs, else "
                    "chi-square with continuity correction; p_holm: Holm-adjusted over the suite",
            "confidence": opts.confidence, "alpha": opts.alpha, "n_boot": opts.n_boot,
        },
        "versions": versions(),
    }
    if out is not None:
        write_outputs(report, records, Path(out))
    return report


def _validate(opts: ForgettingOptions) -> None:
    if opts.limit < 0 or opts.batch_size < 1 or opts.grader_workers < 1 or opts.grade_timeout <= 0:
        raise UsageError("--limit must be >= 0, --batch-size and --grader-workers >= 1, --grade-timeout > 0")
    if opts.kl_prompts < 1 or opts.kl_samples < 1 or opts.kl_max_new_tokens < 1:
        raise UsageError("--kl-prompts, --kl-samples and --kl-max-new-tokens must be at least 1")
    if not 0 < opts.alpha < 1 or not 0 < opts.confidence < 1:
        raise UsageError("--alpha and --confidence must be in (0, 1)")
    if opts.mc_norm not in ("sum", "token", "byte"):
        raise UsageError(f"--mc-norm {opts.mc_norm}: choose one of sum, token, byte")


def compare(name: str, kind: str, identity: dict, base: list, model: list, opts: ForgettingOptions) -> dict:
    """One benchmark's row: accuracies, paired difference with interval, McNemar."""
    from metrics.paired import mcnemar, paired_difference

    assert [o.item_id for o in base] == [o.item_id for o in model], "outcomes must be aligned by item"
    a = [o.correct for o in base]
    b = [o.correct for o in model]
    diff = paired_difference(a, b, n_boot=opts.n_boot, confidence=opts.confidence, seed=opts.seed)
    return {
        "benchmark": name, "kind": kind, **diff, "mcnemar": mcnemar(a, b), "source": identity,
        "outcomes": {"base": dict(Counter(o.outcome for o in base)), "model": dict(Counter(o.outcome for o in model))},
    }


def _holm(rows: list[dict]) -> None:
    from metrics.paired import holm_adjust

    adjusted = holm_adjust([r["mcnemar"]["p_value"] for r in rows])
    for row, p in zip(rows, adjusted, strict=True):
        row["mcnemar"]["p_holm"] = float(p)


def verdict(rows: list[dict], alpha: float) -> str:
    """One line: which benchmarks moved significantly (Holm-adjusted McNemar)."""
    def p(row):
        return row["mcnemar"].get("p_holm", row["mcnemar"]["p_value"])

    drops = [r["benchmark"] for r in rows if p(r) < alpha and r["difference"] < 0]
    gains = [r["benchmark"] for r in rows if p(r) < alpha and r["difference"] > 0]
    mean = sum(r["difference"] for r in rows) / len(rows)
    tail = f"mean difference {mean:+.3f} over {len(rows)} benchmarks; Holm-adjusted McNemar, alpha {alpha:g}"
    if drops:
        more = f"; gains on {', '.join(gains)}" if gains else ""
        return f"FORGETTING: significantly worse on {', '.join(drops)}{more} ({tail})"
    if gains:
        return f"NO FORGETTING DETECTED: no significant drop; significantly better on {', '.join(gains)} ({tail})"
    return f"NO SIGNIFICANT CHANGE on any benchmark ({tail})"


def _item_records(name: str, base: list, model: list) -> list[dict]:
    records = []
    for a, b in zip(base, model, strict=True):
        record = {"benchmark": name, "item_id": a.item_id}
        for side, o in (("base", a), ("model", b)):
            record.update({f"{side}_outcome": o.outcome, f"{side}_correct": o.correct,
                           f"{side}_extracted": o.extracted, f"{side}_detail": o.detail,
                           f"{side}_completion": o.completion})
        records.append(record)
    return records


def _kl(opts: ForgettingOptions, models: dict) -> dict:
    from evalkit.forgetting import kl
    from evalkit.tasks import load_task

    (base, base_tok), (model, model_tok) = models["base"], models["model"]
    task = load_task(opts.train_task, size=max(opts.kl_prompts, 1), seed=opts.task_seed)
    identity = task.spec.identity()
    why = kl.tokenizer_mismatch(base_tok, model_tok, base, model)
    if why:
        return {"status": "refused", "reason": why, "direction": kl.DIRECTION, "task": identity}
    problems = task.problems[: opts.kl_prompts]
    result = kl.forward_kl(base, model, base_tok, [p.prompt for p in problems], [p.id for p in problems],
                           samples=opts.kl_samples, max_new_tokens=opts.kl_max_new_tokens,
                           seed=opts.seed, batch_size=opts.batch_size)
    return {**result, "task": identity}


def write_outputs(report: dict, records: list[dict], out: Path) -> None:
    """`forgetting.json` and `items.jsonl`, each written to a temporary file then renamed."""
    from evalkit.runstore import write_atomic, write_json_atomic

    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "items.jsonl", lambda fh: fh.writelines(
        json.dumps(record, ensure_ascii=False) + "\n" for record in records))
    write_json_atomic(out / "forgetting.json", report)
