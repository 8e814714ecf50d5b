"""`evalkit passk`: sample, grade, store, estimate; resumable.

    evalkit passk smollm2-135m --task arith --n 16 --k 1,2,4,8,16 --out runs/base

Problems are processed in fixed chunks of `max(1, batch_size // n)` problems
in task order, so a resumed run recomputes exactly the chunks it had and
draws bitwise the same samples (see evalkit.sampling). Only samples missing
from `samples.jsonl` are appended.

Float results on CPU depend on torch's thread count, so the sampler runs
with a fixed `threads` (recorded as `cpu_threads` in run.json): a resume or
a Ray run (evalkit.scale) with the same threads draws the same samples.
Sampling is done by a chunk executor: `LocalChunks` (one model replica in
this process) by default; `run_passk(..., executor=...)` plugs in another
(evalkit.scale.ray_passk, evalkit.scale.vllm_backend) that may return chunks
in any order; the driver grades and appends what it does not already have.
"""

from __future__ import annotations

import json
import platform
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.runstore import RunDir
from evalkit.sampling import SamplingConfig

__all__ = ["PasskOptions", "LocalChunks", "run_passk", "summarize", "chunk_problems"]


@dataclass(frozen=True)
class PasskOptions:
    model: str = "smollm2-135m"
    task: str = "arith"
    task_size: int = 200
    task_seed: int = 0
    task_config: str = "{}"
    n: int = 16
    ks: tuple[int, ...] = (1, 2, 4, 8, 16)
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    seed: int = 0
    limit: int | None = 50
    batch_size: int = 64
    dtype: str = "float32"
    device: str = "auto"
    grader_workers: int = 2
    grade_timeout: float = 10.0
    confidence: float = 0.95
    n_boot: int = 1000
    threads: int = 0  # CPU threads per model replica; 0 = torch's default here


def validate(opts: PasskOptions) -> None:
    if opts.n < 1:
        raise UsageError(f"--n {opts.n}: need at least 1 sample per problem")
    if not opts.ks:
        raise UsageError("--k: give at least one k, e.g. --k 1,2,4")
    bad = [k for k in opts.ks if k < 1 or k > opts.n]
    if bad:
        raise UsageError(f"--k {','.join(map(str, bad))}: every k must be between 1 and --n {opts.n}")
    if opts.limit is not None and opts.limit < 1:
        raise UsageError(f"--limit {opts.limit}: need at least 1 problem")
    if opts.batch_size < 1 or opts.max_new_tokens < 1:
        raise UsageError("--batch-size and --max-new-tokens must be at least 1")
    if opts.temperature < 0 or not 0 < opts.top_p <= 1:
        raise UsageError("--temperature must be >= 0 and --top-p in (0, 1]")
    if opts.threads < 0:
        raise UsageError(f"--threads {opts.threads}: give 1 or more (0 = torch's default)")


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def parse_task_config(text: str) -> dict:

    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--task-config {text!r}: not JSON ({exc.msg}); e.g. '{{\"max_operand\": 9}}'") from exc
    if not isinstance(config, dict):
        raise UsageError("--task-config must be a JSON object")
    return config


def cpu_threads(opts: PasskOptions, device: str) -> int | None:
    """The intra-op thread count the samples depend on (None off CPU)."""
    import torch

    if not device.startswith("cpu"):
        return None
    return opts.threads or torch.get_num_threads()


def chunk_problems(problems: Sequence, opts: PasskOptions) -> list:
    """The run's fixed chunks: `max(1, batch_size // n)` problems each, in task order."""
    size = max(1, opts.batch_size // opts.n)
    return [problems[start : start + size] for start in range(0, len(problems), size)]


class LocalChunks:
    """One model replica in this process; samples chunks in order.

    An executor has `tokenizer`, `sampling` (the settings that shape the
    samples, for run.json), `extra` (fields added to every sample record),
    `map(jobs)` yielding `(chunk index, {(problem id, j): (text, Sample)})`
    for `jobs = [(chunk index, problems)]` in any order, and `close()`.
    """

    def __init__(self, ref, opts: PasskOptions, device: str):
        import torch

        from evalkit.models import load_model
        from evalkit.sampling import stop_token_ids

        self.threads_before = torch.get_num_threads()
        if threads := cpu_threads(opts, device):
            torch.set_num_threads(threads)
        self.model, self.tokenizer = load_model(ref, dtype=opts.dtype, device=device)
        self.stop = stop_token_ids(self.model, self.tokenizer)
        self.cfg = sampling_config(opts)
        self.sampling = self.cfg.effective()
        self.extra: dict = {}

    def map(self, jobs) -> Iterator[tuple[int, dict]]:
        for index, part in jobs:
            yield index, draw_chunk(self.model, self.tokenizer, part, self.cfg, self.stop)

    def close(self) -> None:
        import torch

        torch.set_num_threads(self.threads_before)


def sampling_config(opts: PasskOptions) -> SamplingConfig:
    return SamplingConfig(opts.n, opts.temperature, opts.top_p, opts.max_new_tokens, opts.seed)


def draw_chunk(model, tokenizer, part, cfg: SamplingConfig, stop) -> dict:
    """{(problem id, j): (completion text, Sample)} for one chunk of problems."""
    from evalkit.sampling import decode_completion, render_prompt, sample_chunk

    prompts = [render_prompt(tokenizer, p.prompt) for p in part]
    samples = sample_chunk(model, tokenizer, prompts, [p.id for p in part], cfg, stop_ids=stop)
    return {(part[s.problem_index].id, s.sample_index): (decode_completion(tokenizer, s.token_ids), s) for s in samples}


def run_passk(opts: PasskOptions, out: Path, *, progress: Callable | None = None, executor: Callable | None = None) -> dict:
    """Run (or resume) a pass@k run into `out`; returns the summary.

    `executor(ref, opts, device)` builds the chunk executor (default
    `LocalChunks`); it loads its model replicas before `out` is touched.
    """
    from evalkit.grading import Grader
    from evalkit.models import resolve_model, weights_hash
    from evalkit.sampling import render_prompt
    from evalkit.tasks import grader_version, load_task

    validate(opts)
    task = load_task(opts.task, size=opts.task_size, seed=opts.task_seed, config=parse_task_config(opts.task_config))
    problems = task.problems[: opts.limit] if opts.limit else task.problems
    ref = resolve_model(opts.model)
    device = resolve_device(opts.device)
    model_identity = {"name": ref.name, "sha256": weights_hash(ref.path), "dtype": opts.dtype}
    chunks = chunk_problems(problems, opts)
    ex = (executor or LocalChunks)(ref, opts, device)  # fails before out is touched
    try:
        settings = {
            "kind": "passk",
            "model": model_identity,
            "task": task.spec.identity(),
            "grader": grader_version(task.spec.kind),
            "problems": len(problems),
            "sampling": ex.sampling,
            "batch_size": opts.batch_size,
            "device": device,
            "cpu_threads": cpu_threads(opts, device),
        }
        run = RunDir.open(out, settings)
        done = {(r["problem_id"], r["sample_index"]) for r in run.samples()}
        started = time.monotonic()
        tokens_generated = 0
        total = len(problems) * opts.n
        if progress:
            progress(len(done), total, 0)
        jobs = [(i, part) for i, part in enumerate(chunks) if any((p.id, j) not in done for p in part for j in range(opts.n))]
        with Grader(task.spec, workers=opts.grader_workers, deadline=opts.grade_timeout) as grader:
            for index, drawn in ex.map(jobs):
                missing = [(p, j) for p in chunks[index] for j in range(opts.n) if (p.id, j) not in done]
                tokens_generated += sum(s.num_tokens for _, s in drawn.values())
                grades = grader.grade([(drawn[(p.id, j)][0], p) for p, j in missing])
                run.append(
                    _record(p, j, *drawn[(p.id, j)], g) | ex.extra for (p, j), g in zip(missing, grades, strict=True)
                )
                done.update((p.id, j) for p, j in missing)
                if progress:
                    progress(len(done), total, tokens_generated)
        elapsed = time.monotonic() - started
        summary = summarize(run.samples(), opts, problems, settings)
        summary["model"]["path"] = ref.path
        summary["first_prompt"] = render_prompt(ex.tokenizer, problems[0].prompt)
        summary["timing"] = {"seconds_this_session": round(elapsed, 2), "tokens_this_session": tokens_generated}
        run.write_summary(summary)
        return summary
    finally:
        ex.close()


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
    from evalkit.runstore import frame_records
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
    return {
        **settings,
        "complete": all(n >= opts.n for n in ns),
        "versions": _versions(),
        "options": {k: v for k, v in asdict(opts).items() if k not in ("model", "task")},
        "samples": len(records),
        "problems_with_samples": len(answered),
        "outcomes": {o: outcomes.get(o, 0) for o in ("correct", "incorrect", "no_answer", "timeout", "error")},
        "confidence": opts.confidence,
        "interval": "percentile bootstrap over problems",
        "pass_at_k": [] if table is None else frame_records(table),
    }


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in ("evalkit", "torch", "transformers", "math-verify", "reasoning-gym", "numpy"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out
