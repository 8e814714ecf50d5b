"""What lies between two checkpoints: accuracy and loss along `(1 - t) A + t B`, and the barrier.

    evalkit interpolate runs/es/final runs/grpo/final --task arith --points 11 --out runs/interp
    evalkit interpolate runs/es/final runs/grpo/final --through smollm2-135m --points 5 --out runs/plane

One model is loaded (A, through `evalkit.models.load_model`, so every checkpoint format works);
for each point its weights are written tensor by tensor from the checkpoints' readers
(`evalkit.checkpoints`: one tensor of each side in memory at a time, mixed in float64 and cast
to the model's dtype; the endpoints are the stored tensors exactly). Then, per point:

- held-out accuracy: the task's problems sampled and graded exactly as `evalkit passk` does
  (same chunks, seeds and thread count, so t = 0 and t = 1 give passk's samples on A and B);
  greedy by default (`--n 1 --temperature 0`), pass@k with `--n`; each point is a run folder
  `points/<label>/` (run.json, samples.jsonl, summary.json) that a rerun resumes;
- the mean token loss (nats) of one fixed set of completions: sample 0 of every problem at A and
  at B (`completions.jsonl`), teacher-forced at every point (`evalkit.forced`), the completion's
  tokens scored (the stop token is not);
- the barrier `max_t [f(t) - ((1 - t) f(0) + t f(1))]` of the loss and of the error rate
  (1 - accuracy) over t in [0, 1], with a percentile bootstrap interval over problems
  (`metrics.interpolate`).

`--extrapolate` adds points beyond the endpoints (t from -0.5 to 1.5, same spacing; never in the
barrier). `--through BASE`: the plane of the two updates from BASE, `BASE + a (A - BASE) +
b (B - BASE)` on a points x points grid of (a, b) in [0, 1]; the A-B line is its anti-diagonal
(a + b = 1), where the barrier is taken.

Outputs (`--out`): interpolate.json (every point's figures, both barriers, the inputs'
identities), points.csv (one row per point), completions.jsonl, points/<label>/.
Cost: one model load, then per point one pass over both checkpoints' tensors, one sampling
run and one teacher-forced pass. Limits: the HF backend in one process (no vLLM, no Ray); both
checkpoints must have the same tensor names and shapes as A's model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from evalkit.errors import UsageError
from evalkit.options import PasskOptions, option
from evalkit.rundir import RunDir

__all__ = ["InterpolateOptions", "Point", "path_points", "run_interpolate", "POINTS_DIR"]

POINTS_DIR = "points"


@dataclass(frozen=True)
class InterpolateOptions(PasskOptions):
    """`evalkit interpolate`: passk's sampling options (greedy defaults) plus the path; HF in one
    process (its row of evalkit.options.SCALE)."""

    kind: ClassVar[str] = "interpolate"
    own_defaults = {"n": 1, "ks": (1,), "temperature": 0.0}

    other: str = option("", "Checkpoint B (the path runs from model A at t = 0 to B at t = 1).", identity=False)
    through: str | None = option(None, "BASE: measure the plane BASE + a (A - BASE) + b (B - BASE) on a points x "
                                 "points grid instead of the line.", identity=False)
    points: int = option(11, "Points along the path in [0, 1], endpoints included (per axis with --through).",
                         min=2, max=201)
    extrapolate: bool = option(False, "Also points beyond the endpoints: t from -0.5 to 1.5, same spacing.")
    loss_batch_tokens: int = option(4096, "Positions per teacher-forced batch for the loss.", min=1, identity=False)


@dataclass(frozen=True)
class Point:
    label: str
    t: float | None  # position on the A-B line (None off it, in the plane)
    weights: tuple[float, float, float]  # of (BASE, A, B)
    a: float | None = None  # plane coordinates (--through)
    b: float | None = None


def _steps(opts: InterpolateOptions) -> list[int]:
    """Positions as integers i of t = i / (points - 1), so that t and 1 - t are exact."""
    last = opts.points - 1
    extra = last // 2 if opts.extrapolate else 0
    return list(range(-extra, last + extra + 1))


def path_points(opts: InterpolateOptions) -> list[Point]:
    """The points to evaluate, in the order of t (or of the grid, a then b). Weights are exact
    quotients of integers, so the endpoints (and BASE's corner) are weights 0 and 1 exactly."""
    last = opts.points - 1
    steps = _steps(opts)
    if opts.through is None:
        return [Point(f"t{i / last:+.4f}", i / last, (0.0, (last - i) / last, i / last)) for i in steps]
    out = []
    for i in steps:
        for j in steps:
            a, b = i / last, j / last
            out.append(Point(f"a{a:+.4f}_b{b:+.4f}", b if i + j == last else None,
                             ((last - i - j) / last, a, b), a, b))
    return out


@dataclass
class _Run:
    """What every point shares: the model, its tokenizer and stop ids, the readers' tensors,
    the problems and their chunks, the grader, where outputs go."""

    opts: InterpolateOptions
    out: Path
    model: object
    tokenizer: object
    stop: list
    sides: list  # [BASE or None, A, B] Checkpoints
    task: object
    problems: list
    chunks: list
    grader: object
    settings: dict
    current: tuple | None = None  # the weights in the model now


def _mix(entries, weights: tuple):
    """The tensor at `weights` of (BASE, A, B): a stored tensor exactly when one weight is 1 and
    the others 0, else the float64 sum."""
    from evalkit.checkpoints import read_bits
    from evalkit.checkpoints.tensors import as_torch

    if sorted(weights) == [0.0, 0.0, 1.0]:
        e = entries[weights.index(1.0)]
        return as_torch(read_bits(e), e.dtype, e.shape)
    total = None
    for e, w in zip(entries, weights, strict=True):
        if w == 0.0:
            continue
        part = as_torch(read_bits(e), e.dtype, e.shape).double() * w
        total = part if total is None else total + part
    return total


def _set_weights(run: _Run, weights: tuple) -> None:
    """Write the point's weights into the model, one tensor at a time."""
    import torch

    if run.current == weights:
        return
    tied = getattr(run.model.config, "tie_word_embeddings", False)
    with torch.no_grad():
        for name, param in run.model.state_dict(keep_vars=True).items():
            entries = [cp.tensors.get(name) if cp is not None else None for cp in run.sides]
            if entries[1] is None and tied and name == "lm_head.weight":
                continue  # tied to the embedding, written with it
            param.copy_(_mix(entries, weights).to(param.dtype))
    run.current = weights


def _check_sides(model, sides: list) -> None:
    """Every model tensor in every checkpoint, same shape: else one line naming it."""
    tied = getattr(model.config, "tie_word_embeddings", False)
    for name, param in model.state_dict().items():
        for cp in sides:
            if cp is None or (tied and name == "lm_head.weight" and name not in cp.tensors):
                continue
            e = cp.tensors.get(name)
            if e is None:
                raise UsageError(f"{cp.label}: has no tensor {name!r}, which the model of A has")
            if tuple(e.shape) != tuple(param.shape):
                raise UsageError(f"{cp.label}: tensor {name!r} is {list(e.shape)}, A's is {list(param.shape)}")


def _point_dir(run: _Run, point: Point) -> RunDir:
    """The point's run folder, open and locked (to be used in a `with`)."""
    point_record = {"label": point.label, "t": point.t, "a": point.a, "b": point.b,
                    "weights": {"base": point.weights[0], "A": point.weights[1], "B": point.weights[2]}}
    return RunDir.open(run.out / POINTS_DIR / point.label, {**run.settings, "point": point_record})


def _sample(run: _Run, point: Point, folder: RunDir) -> list[dict]:
    """The point's samples, drawn where its folder misses some as passk draws them (its chunks and
    loop, evalkit.rundir.sample_missing), the point's weights loaded first."""
    from evalkit.chunks import draw_chunk, sampling_config
    from evalkit.rundir import sample_missing

    cfg = sampling_config(run.opts)

    def draw(jobs):
        for index, part in jobs:
            _set_weights(run, point.weights)
            yield index, draw_chunk(run.model, run.tokenizer, part, cfg, run.stop)

    sample_missing(folder, run.chunks, run.opts.n, draw, run.grader.grade)
    return folder.samples()


def _fixed_set(run: _Run, endpoint_samples: list[list[dict]]) -> list[dict]:
    """Sample 0 of every problem at A and at B: the completions whose loss is measured everywhere."""
    records = []
    for side, samples in zip(("A", "B"), endpoint_samples, strict=True):
        first = {r["problem_id"]: r for r in samples if r["sample_index"] == 0}
        for p in run.problems:
            records.append({"problem_id": p.id, "from": side, "prompt": p.prompt,
                            "completion": first[p.id]["completion"] or "", "finish_reason": "length"})
    return records


def _loss(run: _Run, point: Point, fixed: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Per problem: summed token NLL (nats) of its fixed completions at the point, and their tokens."""
    import torch

    from evalkit.forced import forced_from_records, score_positions

    _set_weights(run, point.weights)
    forced = forced_from_records(run.tokenizer, fixed, temperature=1.0)

    def reduce(sample, rows):
        logp = torch.log_softmax(rows[0].double(), dim=-1)
        ids = torch.tensor(sample.completion_ids[: sample.num_tokens])
        return float(-logp[torch.arange(len(ids)), ids].sum()), len(ids)

    scored = score_positions([run.model], forced, reduce, max_batch_tokens=run.opts.loss_batch_tokens)
    index = {p.id: i for i, p in enumerate(run.problems)}
    nll, tokens = np.zeros(len(run.problems)), np.zeros(len(run.problems))
    for record, value in zip(fixed, scored, strict=True):
        if value is not None:
            nll[index[record["problem_id"]]] += value[0]
            tokens[index[record["problem_id"]]] += value[1]
    return nll, tokens


def _open(opts: InterpolateOptions, out: Path):
    """Models, readers, task and the run settings (before any folder is written)."""
    from evalkit.checkpoints import open_checkpoint
    from evalkit.checkpoints.validate import same_architecture
    from evalkit.chunks import chunk_problems, sampling_config
    from evalkit.models import identity, load_model, resolve_device, resolve_model
    from evalkit.rundir import sampled_settings
    from evalkit.sampling import stop_token_ids
    from evalkit.scale import sampler_version
    from evalkit.tasks import load_task

    device = resolve_device(opts.device)
    task = load_task(opts.task, size=opts.task_size, seed=opts.task_seed, config=opts.task_config_dict())
    problems = task.problems[: opts.limit] if opts.limit else task.problems
    refs = {"A": resolve_model(opts.model), "B": resolve_model(opts.other)}
    if opts.through:
        refs["base"] = resolve_model(opts.through)
    a = open_checkpoint(refs["A"].path)
    sides = [open_checkpoint(refs["base"].path, like=a) if opts.through else None, a,
             open_checkpoint(refs["B"].path, like=a)]
    same_architecture([a, *(cp for cp in sides if cp is not None and cp is not a)], strict=True,
                      command="interpolate")  # before the model is loaded or anything written
    model, tokenizer = load_model(refs["A"], dtype=opts.dtype, device=device)
    _check_sides(model, sides)
    settings = {"kind": "interpolate-point", "models": {k: identity(r, opts.dtype) for k, r in refs.items()},
                **sampled_settings(opts, task, len(problems), sampling_config(opts).effective(),
                                   sampler_version(opts.backend))}
    parts = (model, tokenizer, stop_token_ids(model, tokenizer), sides, task, problems, chunk_problems(problems, opts))
    return parts, settings, device


def _check_out(out: Path) -> None:
    """A new folder, or one holding an interpolation (its points/): else one line, before any work.
    The lock file and temporary files (evalkit.jsonio.temp_path) do not count."""
    from evalkit.jsonio import temp_writer
    from evalkit.locks import LOCK

    held = [p for p in out.iterdir() if p.name != LOCK and temp_writer(p.name) is None] if out.is_dir() else []
    if held and not (out / POINTS_DIR).is_dir():
        raise UsageError(f"{out}: folder is not empty and holds no evalkit interpolation; use another --out")


def run_interpolate(opts: InterpolateOptions, out: Path, progress=None) -> dict:
    """Evaluate every point (resuming what is there), then write interpolate.json and points.csv;
    returns the interpolate.json summary. `progress(done, total, label)` after each point."""
    import torch

    from evalkit.chunks import cpu_threads
    from evalkit.grading import Grader
    from evalkit.locks import locked
    from evalkit.models import resolve_device
    from evalkit.rundir import check_writable

    opts.validate()
    if not opts.other:
        raise UsageError("give two checkpoints: A B")
    out = Path(out)
    check_writable(out)
    threads_before = torch.get_num_threads()
    if threads := cpu_threads(opts, resolve_device(opts.device)):
        torch.set_num_threads(threads)  # as passk's LocalChunks: samples depend on the thread count
    try:
        with locked(out):  # one writer, before any work (the points' folders have their own locks too)
            _check_out(out)
            parts, settings, _ = _open(opts, out)
            with Grader(parts[4].spec, workers=opts.grader_workers, deadline=opts.grade_timeout) as grader:
                run = _Run(opts, out, *parts[:4], parts[4], parts[5], parts[6], grader, settings)
                return _evaluate(run, progress)
    finally:
        torch.set_num_threads(threads_before)


def _evaluate(run: _Run, progress) -> dict:
    from evalkit.interpolate_outputs import write_outputs
    from evalkit.rundir import summarize

    points = path_points(run.opts)
    ends = [next(p for p in points if p.weights == w) for w in ((0.0, 1.0, 0.0), (0.0, 0.0, 1.0))]
    endpoint_samples = []
    for point in ends:
        with _point_dir(run, point) as folder:
            endpoint_samples.append(_sample(run, point, folder))
    fixed = _fixed_set(run, endpoint_samples)
    order = sorted(points, key=lambda p: p.weights != run.current)  # the weights loaded now first
    rows, nll, correct = {}, {}, {}
    for done, point in enumerate(order, 1):
        with _point_dir(run, point) as folder:
            samples = _sample(run, point, folder)
            summary = summarize(samples, run.problems, folder.settings, run.opts.record())
            nll[point.label], tokens = _loss(run, point, fixed)
            summary["loss"] = {"mean_token_nll": float(nll[point.label].sum() / max(tokens.sum(), 1)),
                               "tokens": int(tokens.sum()), "completions": "completions.jsonl"}
            folder.write_summary(summary)
        correct[point.label] = _per_problem_accuracy(samples, run.problems)
        rows[point.label] = (point, summary)
        if progress:
            progress(done, len(order), point.label)
    return write_outputs(run, points, rows, (nll, tokens, correct), fixed)


def _per_problem_accuracy(samples: list[dict], problems: list) -> np.ndarray:
    """c / n per problem (the unbiased pass@1)."""
    n, c = {p.id: 0 for p in problems}, {p.id: 0 for p in problems}
    for r in samples:
        n[r["problem_id"]] += 1
        c[r["problem_id"]] += r["outcome"] == "correct"
    return np.array([c[p.id] / n[p.id] if n[p.id] else np.nan for p in problems])
