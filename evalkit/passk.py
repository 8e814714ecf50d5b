"""`evalkit passk`: sample, grade, store, estimate; resumable.

    evalkit passk smollm2-135m --task arith --n 16 --k 1,2,4,8,16 --out runs/base

Problems are processed in the run's fixed chunks (evalkit.chunks), so a resumed
run recomputes exactly the chunks it had and draws bitwise the same samples
(see evalkit.sampling). Only samples missing from `samples.jsonl` are appended.

The runner is picked from the options, in `pick_executor`: `LocalChunks` (one
model replica in this process), Ray actors (`ray_workers` / `ray_address`,
evalkit.scale.ray_passk) or a vLLM engine (`backend="vllm"`,
evalkit.scale.vllm_backend); evalkit.options' SCALE table refuses the combinations that do
not go together. Executors may return chunks in any order; the driver grades
and appends what it does not already have.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from evalkit.chunks import LocalChunks, chunk_problems, cpu_threads
from evalkit.errors import UsageError
from evalkit.options import PasskOptions
from evalkit.rundir import SAMPLES, RunDir, check_writable

__all__ = ["PasskOptions", "run_passk", "summarize", "voting_summary", "pick_executor"]


def pick_executor(opts: PasskOptions) -> tuple[PasskOptions, Callable]:
    """The chunk executor the options ask for (and the options it runs with: Ray actors default
    to `cores // workers` threads each)."""
    if opts.backend == "vllm":
        from evalkit.scale.vllm_backend import VllmChunks

        return opts, VllmChunks
    if opts.uses_ray:
        from functools import partial

        from evalkit.scale.ray_passk import RayChunks, default_threads

        workers = opts.ray_workers or 1
        opts = replace(opts, threads=opts.threads or default_threads(workers, opts.ray_address))
        return opts, partial(RayChunks, workers=workers, address=opts.ray_address)
    return opts, LocalChunks


def run_passk(opts: PasskOptions, out: Path, *, progress: Callable | None = None, executor: Callable | None = None,
              repair: bool = False) -> dict:
    """Run (or resume) a pass@k run into `out`; returns the summary.

    `executor(ref, opts, device)` builds the chunk executor (default: `pick_executor`); it
    loads its model replicas before `out` is touched. `repair`: corrupt lines of samples.jsonl are
    set aside in samples.rejected.jsonl and those samples drawn again.
    """
    from evalkit.grading import Grader
    from evalkit.models import identity, resolve_device, resolve_model
    from evalkit.sampling import check_context, context_length, render_prompt
    from evalkit.scale import sampler_version
    from evalkit.tasks import grader_version, load_task

    opts.validate()
    check_writable(out)
    if executor is None:
        opts, executor = pick_executor(opts)
    task = load_task(opts.task, size=opts.task_size, seed=opts.task_seed, config=opts.task_config_dict())
    problems = task.problems[: opts.limit] if opts.limit else task.problems
    ref = resolve_model(opts.model)
    device = resolve_device(opts.device)
    model_identity = identity(ref, opts.dtype)
    chunks = chunk_problems(problems, opts)
    with progress_step(progress, "starting the vLLM engine" if opts.backend == "vllm" else None):
        ex = executor(ref, opts, device)  # fails before out is touched
    try:
        check_context(ex.tokenizer, problems, opts.max_new_tokens, context_length(ref))
        settings = {
            "kind": "passk",
            "model": model_identity,
            "task": task.spec.identity(),
            "grader": grader_version(task.spec.kind),
            "sampler": sampler_version(opts.backend),  # a run drawn by another sampler is not resumed
            "problems": len(problems),
            "sampling": ex.sampling,
            "batch_size": opts.batch_size,
            "device": device,
            "cpu_threads": cpu_threads(opts, device),
        }
        run = RunDir.open(out, settings, repair=repair)
        started = time.monotonic()
        with Grader(task.spec, workers=opts.grader_workers, deadline=opts.grade_timeout) as grader:
            tokens_generated = _sample_missing(ex, grader, run, chunks, opts.n, progress)
        elapsed = time.monotonic() - started
        summary = summarize(run.samples(), opts, problems, run.settings)
        summary["model"]["path"] = ref.path
        summary["first_prompt"] = render_prompt(ex.tokenizer, problems[0].prompt)
        summary["timing"] = {"seconds_this_session": round(elapsed, 2), "tokens_this_session": tokens_generated}
        if (start := getattr(ex, "start_seconds", None)) is not None:  # a vLLM engine's start-up, not in the above
            summary["timing"]["engine_start_seconds"] = start
        run.write_summary(summary)
        return summary
    finally:
        ex.close()


def progress_step(progress: Callable | None, label: str | None):
    """`progress.step(label)` where the caller's progress shows steps (evalkit.console.passk_progress)."""
    step = getattr(progress, "step", None)
    return step(label) if step and label else contextlib.nullcontext()


def _sample_missing(ex, grader, run: RunDir, chunks: list, n: int, progress: Callable | None) -> int:
    """Sample the chunks that miss samples, grade them, append what is missing; returns the
    number of tokens generated."""
    stored = run.samples()
    known = {p.id for part in chunks for p in part}
    if stray := next((r for r in stored if r["problem_id"] not in known), None):
        raise UsageError(f"{run.path / SAMPLES}: holds a sample of problem {stray['problem_id']!r}, which this "
                         "task does not have; the folder belongs to another task: use another --out")
    done = {(r["problem_id"], r["sample_index"]) for r in stored}
    total, tokens = sum(len(part) for part in chunks) * n, 0
    if progress:
        progress(len(done), total, 0)
    jobs = [(i, part) for i, part in enumerate(chunks) if any((p.id, j) not in done for p in part for j in range(n))]
    for index, drawn in ex.map(jobs):
        missing = [(p, j) for p in chunks[index] for j in range(n) if (p.id, j) not in done]
        tokens += sum(s.num_tokens for _, s in drawn.values())
        grades = grader.grade([(drawn[(p.id, j)][0], p) for p, j in missing])
        run.append(_record(p, j, *drawn[(p.id, j)], g) | ex.extra for (p, j), g in zip(missing, grades, strict=True))
        done.update((p.id, j) for p, j in missing)
        if progress:
            progress(len(done), total, tokens)
    return tokens


def _record(problem, sample_index: int, text: str, sample, grade) -> dict:
    return {
        "problem_id": problem.id,
        "sample_index": sample_index,
        "completion": text,
        "extracted": grade.extracted,
        "outcome": grade.outcome,
        "detail": grade.detail,
        "num_tokens": sample.num_tokens,
        "finish_reason": sample.finish_reason,
        "mean_entropy": sample.mean_entropy,
        "seed": sample.seed,
    }


def summarize(records: list[dict], opts: PasskOptions, problems, settings: dict) -> dict:
    """Per-k estimates with intervals and outcome counts from stored samples."""
    from evalkit.jsonio import frame_records
    from evalkit.records import record_options, versions
    from metrics.passk import passk_table

    per_problem: dict[str, Counter] = {p.id: Counter() for p in problems}
    for r in records:
        per_problem[r["problem_id"]][r["outcome"]] += 1
    ns = [sum(c.values()) for c in per_problem.values()]
    cs = [c["correct"] for c in per_problem.values()]
    answered = [(n, c) for n, c in zip(ns, cs, strict=True) if n > 0]
    outcomes = Counter(r["outcome"] for r in records)
    table = passk_table(
        [n for n, _ in answered], [c for _, c in answered], list(opts.ks),
        n_boot=opts.n_boot, confidence=opts.confidence, seed=opts.seed,
    ) if answered else None
    summary = {
        **settings,
        "complete": all(n >= opts.n for n in ns),
        "versions": versions(),
        "options": record_options({k: v for k, v in asdict(opts).items() if k not in ("model", "task")}),
        "samples": len(records),
        "problems_with_samples": len(answered),
        "outcomes": {o: outcomes.get(o, 0) for o in ("correct", "incorrect", "no_answer", "timeout", "error")},
        "confidence": opts.confidence,
        "interval": "percentile bootstrap over problems",
        "pass_at_k": [] if table is None else frame_records(table),
    }
    return summary | voting_summary(records, answered, opts)


def voting_summary(records: list[dict], answered: list[tuple[int, int]], opts: PasskOptions) -> dict:
    """pass^k, maj@k, G-Pass@k_tau, mG-Pass@k and mean@n beside pass@k (metrics.voting), with the
    same bootstrap settings; maj@k needs every incorrect sample's extracted answer (else null)."""
    from evalkit.jsonio import frame_records
    from metrics.voting import (
        TAUS,
        g_pass_table,
        maj_table,
        mean_at_n,
        mg_pass_table,
        pass_hat_table,
        vote_classes,
    )

    ns, cs, ks = [n for n, _ in answered], [c for _, c in answered], list(opts.ks)
    boot = {"n_boot": opts.n_boot, "confidence": opts.confidence, "seed": opts.seed}
    unknown = sum(r["outcome"] == "incorrect" and r.get("extracted") in (None, "") for r in records)
    maj = None
    if answered and not unknown:
        _, classes = vote_classes([r["problem_id"] for r in records], [r["outcome"] == "correct" for r in records],
                                  [r.get("extracted") if r["outcome"] == "incorrect" else None for r in records])
        maj = frame_records(maj_table(classes, ks, **boot))
    return {
        "pass_hat_k": frame_records(pass_hat_table(ns, cs, ks, **boot)) if answered else [],
        "maj_at_k": maj,
        "g_pass_at_k": frame_records(g_pass_table(ns, cs, ks, taus=TAUS, **boot)) if answered else [],
        "mg_pass_at_k": frame_records(mg_pass_table(ns, cs, ks, **boot)) if answered else [],
        "mean_at_n": mean_at_n(ns, cs, **boot) if answered else None,
        "voting": {"definitions": "metrics/voting.py", "g_pass_taus": list(TAUS),
                   "maj_ties": "split uniformly (the expectation of lm-eval's and lighteval's first-seen rule)",
                   "maj_not_computed": (f"{unknown} incorrect samples have no extracted answer; `evalkit regrade` "
                                        "adds them") if unknown else None},
    }
