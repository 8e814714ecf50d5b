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
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from evalkit.chunks import LocalChunks, chunk_problems
from evalkit.locks import locked
from evalkit.options import PasskOptions
from evalkit.rundir import RunDir, check_writable, sample_missing, sampled_settings, summarize

__all__ = ["PasskOptions", "run_passk", "pick_executor"]


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

    `executor(ref, opts, device)` builds the chunk executor (default: `pick_executor`); `out` is
    locked before it loads its model replicas, and a model that fails to load leaves no folder
    behind. `repair`: corrupt lines of samples.jsonl are set aside in samples.rejected.jsonl and
    those samples drawn again.
    """
    from evalkit.models import identity, resolve_device, resolve_model
    from evalkit.tasks import load_task

    opts.validate()
    check_writable(out)
    if executor is None:
        opts, executor = pick_executor(opts)
    with locked(out):  # one writer before any work; a run that fails before writing leaves no folder
        task = load_task(opts.task, size=opts.task_size, seed=opts.task_seed, config=opts.task_config_dict())
        problems = task.problems[: opts.limit] if opts.limit else task.problems
        ref = resolve_model(opts.model)
        model_identity = identity(ref, opts.dtype)
        with progress_step(progress, "starting the vLLM engine" if opts.backend == "vllm" else None):
            ex = executor(ref, opts, resolve_device(opts.device))
        return _sample(opts, out, (task, problems, ref, model_identity), ex, progress, repair)


def _sample(opts: PasskOptions, out: Path, inputs: tuple, ex, progress: Callable | None, repair: bool) -> dict:
    """Sample what `out` misses with the loaded executor `ex`, then write the summary."""
    from evalkit.grading import Grader
    from evalkit.models import model_record
    from evalkit.sampling import check_context, context_length, render_prompt
    from evalkit.scale import sampler_version

    task, problems, ref, model_identity = inputs
    chunks = chunk_problems(problems, opts)
    try:
        check_context(ex.tokenizer, problems, opts.max_new_tokens, context_length(ref))
        settings = sampled_settings(opts, task, len(problems), ex.sampling, sampler_version(opts.backend))
        with RunDir.open(out, {"kind": "passk", "model": model_identity, **settings}, repair=repair) as run:
            started = time.monotonic()
            with Grader(task.spec, workers=opts.grader_workers, deadline=opts.grade_timeout) as grader:
                tokens_generated = sample_missing(run, chunks, opts.n, ex.map, grader.grade, extra=ex.extra,
                                                  progress=progress)
            elapsed = time.monotonic() - started
            summary = summarize(run.samples(), problems, run.settings, opts.record())
            summary["model"] |= model_record(ref)
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
