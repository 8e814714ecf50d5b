"""What the trainers share: seeds, the task and reward, checkpoints, the metrics log, resume.

    evalkit train grpo --out runs/grpo   # then rerun the same command to resume

Output folder (one per trainer run or stage):
    run.json        the run's settings; a different run in the folder is refused
    metrics.jsonl   one line per step, TRL metric names where one exists
    step-000010/    plain Hugging Face checkpoint (safetensors + tokenizer +
                    trainer_state.json; GRPO's last one also optimizer.pt)
    summary.json    written when the run completes: final checkpoint, steps

Resume: the newest complete `step-*` folder (folders are renamed into place
only when fully written) is loaded, metrics lines after its step are dropped,
and training continues. Every random choice of step t is seeded from
`(seed, t)` alone, so a resumed run draws the same prompts, noise and samples
as an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from evalkit.errors import UsageError
from evalkit.jsonio import write_json_atomic
from evalkit.options import (
    GradingOptions,
    MaxTokensOptions,
    ModelOptions,
    ScaleOptions,
    SeedOptions,
    TaskOptions,
    option,
)
from evalkit.rundir import discarded_if_unused
from evalkit.sampling import derive_seed
from evalkit.trainlogs import REPORT_TO, check_report_to

__all__ = [
    "Policy",
    "derive_seed",
    "Checkpoint",
    "latest_checkpoint",
    "resumes_from",
    "save_checkpoint",
    "MetricsLog",
    "load_training_task",
    "pick_problems",
    "rewards_of",
    "open_run",
    "decode_and_grade",
    "completion_metrics",
]

STEP_DIR = re.compile(r"^step-(\d{6,})$")
STATE_FILE = "trainer_state.json"


@dataclass(frozen=True)
class TrainOptions(SeedOptions, MaxTokensOptions, ScaleOptions, GradingOptions, TaskOptions, ModelOptions):
    """What every trainer takes: evalkit.options' groups (they mean what they mean for
    `evalkit passk`, same defaults) plus these. backend vllm: a colocated vLLM engine samples
    (evalkit.train.vllm); ray_workers: ES members on Ray actors (evalkit.train.es_ray).
    A trainer's class names its `kind`, the field that counts its updates (`units`), and what
    one update generates (`completions_per_unit`)."""

    units: ClassVar[str] = "steps"

    save_every: int = option(10, "Save a checkpoint every K steps (and at the last).", min=1, identity=False)
    report_to: str = option("none", "Also log each step's scalars to tensorboard (OUT/tensorboard event files), trackio "
                            "(its local store) or wandb (offline, under OUT); metrics.jsonl is written either way.",
                            choices=REPORT_TO, identity=False)

    @property
    def count(self) -> int:
        """Its ES iterations or steps."""
        return getattr(self, self.units)

    def completions_per_unit(self) -> int:
        raise NotImplementedError

    def cost(self) -> dict:
        """What the whole run generates: completions, and tokens at most (completions x max_new_tokens)."""
        completions = self.count * self.completions_per_unit()
        return {"completions": completions, "tokens": completions * self.max_new_tokens}

    def _environment(self) -> None:
        check_report_to(self.report_to)  # a missing logger package: one line, before any folder is made
        if self.backend == "vllm":  # vLLM installed and a GPU, before any folder is made
            from evalkit.models import resolve_device
            from evalkit.train.vllm import check_vllm_backend

            check_vllm_backend(resolve_device(self.device))


@dataclass(frozen=True)
class GradientOptions(TrainOptions):
    """What the gradient trainers (GRPO, distillation) share: steps of prompts, clipped AdamW."""

    steps: int = option(50, "Gradient steps (total; raise it to extend a run).", min=1, identity=False)
    prompts_per_step: int = option(4, "Prompts per step.", min=1)
    max_grad_norm: float = option(1.0, "Gradient clipping norm.", above=0)
    weight_decay: float = option(0.0, "AdamW weight decay (TRL: 0.0).", min=0)
    lr: float = option(1e-6, "AdamW learning rate (constant).", above=0)
    micro_batch: int = option(2, "Sequences per forward/backward (memory, not the result).", min=1)


@dataclass(frozen=True)
class Policy:
    """What a trainer's step samples and grades with: the model being trained and its tokenizer,
    the grader, the stop ids, the options; `sampler` another engine's sampling (evalkit.train.vllm),
    `guide` the weak model of GRPO's guided rollouts (evalkit.train.guidance)."""

    model: object
    tokenizer: object
    grader: object
    stop: tuple
    opts: TrainOptions
    sampler: Callable | None = None
    guide: object = None


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: Path


def step_dir(out: Path, step: int) -> Path:
    return Path(out) / f"step-{step:06d}"


def sweep_partial_checkpoints(out: Path) -> None:
    """Remove `.step-NNNNNN.tmp*` folders a killed save left behind (only complete, renamed
    checkpoints are ever read)."""
    for tmp in Path(out).glob(".step-*.tmp*"):
        shutil.rmtree(tmp, ignore_errors=True)


def latest_checkpoint(out: Path) -> Checkpoint | None:
    """The complete checkpoint with the highest step, or None."""
    found = []
    for child in Path(out).iterdir() if Path(out).is_dir() else []:
        match = STEP_DIR.match(child.name)
        if match and (child / STATE_FILE).is_file():
            found.append(Checkpoint(int(match.group(1)), child))
    return max(found, key=lambda c: c.step, default=None)


def resumes_from(checkpoint: Path) -> bool:
    """Whether the run that wrote `checkpoint` (a step-* folder) can go on from it exactly. ES's state
    is its weights and its seed; a gradient trainer's (gradient_run: GRPO, distillation) is also its
    AdamW state, which only the newest checkpoint keeps (save_checkpoint). The kind is read from the
    run.json beside the checkpoint (an ES-then-GRPO run has one per stage)."""
    try:
        kind = json.loads((Path(checkpoint).parent / "run.json").read_text(encoding="utf-8")).get("kind")
    except (OSError, ValueError, AttributeError):
        kind = None
    return kind == "train-es" or (Path(checkpoint) / "optimizer.pt").is_file()


def save_checkpoint(model, tokenizer, out: Path, step: int, state: dict, *, optimizer=None) -> Path:
    """Write `out/step-NNNNNN/` atomically (temporary folder, then rename).

    With an optimizer its state goes into `optimizer.pt`, and older
    checkpoints lose theirs (only the newest is needed to resume).
    """
    import torch

    final = step_dir(out, step)
    tmp = final.with_name(f".{final.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if optimizer is not None:
            torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        write_json_atomic(tmp / STATE_FILE, {"step": step, **state})
    except BaseException:  # Ctrl-C or a full disk mid-save: no half-written folder is left behind
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    if optimizer is not None:
        for old in Path(out).glob("step-*/optimizer.pt"):
            if old.parent != final:
                old.unlink()
    return final


class MetricsLog:
    """`metrics.jsonl`: one JSON line per step, appended with a single write; with `report_to`
    (evalkit.trainlogs) each appended record's scalars also go to that logger."""

    def __init__(self, path: Path, report_to: str = "none"):
        self.path = Path(path)
        self.report_to = report_to
        self._logger = None

    def records(self) -> list[dict]:
        from evalkit.jsonio import read_records

        return read_records(self.path, hint="remove it (the steps after the newest checkpoint are redone)")

    def keep_through(self, step: int) -> None:
        """Drop lines after `step` (work redone on resume) and any torn line."""
        from evalkit.jsonio import write_atomic

        kept = [r for r in self.records() if r.get("step", 0) <= step]
        write_atomic(self.path, lambda fh: fh.writelines(json.dumps(r) + "\n" for r in kept))

    def append(self, record: dict) -> None:
        from evalkit.jsonio import append_jsonl

        append_jsonl(self.path, [record])
        if self.report_to != "none":
            from evalkit.trainlogs import ScalarLogger

            self._logger = self._logger or ScalarLogger(self.report_to, self.path.parent)
            self._logger.log(record)


def load_training_task(name: str, size: int, seed: int, config: str | dict):
    """The task (`config`: the --task-config JSON, or its dict with the dataset options merged,
    `opts.task_config_dict()`), refusing one whose scorer cannot be built (no reward)."""
    from evalkit.tasks import load_task, parse_task_config, scorer_for

    config = parse_task_config(config) if isinstance(config, str) else config
    task = load_task(name, size=size, seed=seed, config=config)
    try:
        scorer_for(task.spec)
    except UsageError as exc:
        raise UsageError(f"{exc}: a trainer needs a task with a scorer for its reward") from None
    return task


def pick_problems(problems, k: int, seed: int) -> list:
    """k distinct problems drawn with a seeded generator (all when k >= len)."""
    import random

    if k >= len(problems):
        return list(problems)
    return random.Random(seed).sample(list(problems), k)


def rewards_of(grades) -> list[float]:
    """Reward 1.0 for a correct answer, else 0.0 (the evaluation scorer's outcome)."""
    return [1.0 if g.outcome == "correct" else 0.0 for g in grades]


def open_run(out: Path, kind: str, opts, task):
    """Check or create the run folder; returns (RunDir, ModelRef, latest Checkpoint or None).

    The identity stored in run.json: trainer kind, base model (name, weights
    sha256, dtype), task identity and every option that changes the result;
    the step count and save interval are left out so a run can be extended.
    """

    from evalkit.models import identity, resolve_model
    from evalkit.rundir import RunDir
    from evalkit.scale import sampler_version
    from evalkit.tasks import grader_version

    ref = resolve_model(opts.model)
    settings = {
        "kind": kind,
        "model": identity(ref, opts.dtype),
        "task": task.spec.identity(),
        "grader": grader_version(task.spec.kind),  # the reward: a run resumed under another grader is refused
        "sampler": sampler_version(opts.backend),  # the rollouts: nor under another sampler
        "options": opts.identity(),  # how the work is spread (workers, threads) never changes the weights
    }
    run = RunDir.open(out, settings)
    return run, ref, latest_checkpoint(out)


@dataclass(frozen=True)
class Start:
    """Where a (resumed) training run starts: see `start_run`."""

    run: object  # RunDir
    task: object  # Task
    ref: object  # ModelRef of the base model
    source: object  # ModelRef to load the weights from: the newest checkpoint, else the base
    ckpt: Checkpoint | None
    step: int  # the last step already done (0 for a new run)
    log: MetricsLog
    device: str


def start_run(out: Path, kind: str, opts) -> Start:
    """The set-up both trainers share, before the model is loaded (their `validate`, which checks
    the backend, comes first): the task loaded, the run folder opened or checked (`open_run`),
    the metrics log cut back to the newest checkpoint."""
    from evalkit.models import ModelRef, resolve_device
    from evalkit.rundir import check_writable

    check_writable(out)
    device = resolve_device(opts.device)
    task = load_training_task(opts.task, opts.task_size, opts.task_seed, opts.task_config_dict())
    run, ref, ckpt = open_run(out, kind, opts, task)
    sweep_partial_checkpoints(out)
    step = ckpt.step if ckpt else 0
    log = MetricsLog(Path(out) / "metrics.jsonl", opts.report_to)
    log.keep_through(step)
    source = ModelRef(ref.name, str(ckpt.path)) if ckpt else ref
    return Start(run, task, ref, source, ckpt, step, log, device)


def decode_and_grade(tokenizer, grader, samples, problems) -> tuple[list[str], list[float]]:
    """Completion texts (decoded as `evalkit passk` does) and their 0/1 rewards."""
    from evalkit.sampling import decode_completion

    texts = [decode_completion(tokenizer, s.token_ids) for s in samples]
    jobs = [(text, problems[s.problem_index]) for text, s in zip(texts, samples, strict=True)]
    return texts, rewards_of(grader.grade(jobs))


def completion_metrics(samples) -> dict:
    """TRL's `completions/*` and `entropy` (token-weighted mean, nats) for a list of samples."""
    lengths = [s.num_tokens for s in samples]
    tokens = sum(lengths)
    ent = [s.mean_entropy * s.num_tokens for s in samples if s.mean_entropy is not None]
    return {
        "completions/mean_length": tokens / len(samples),
        "completions/max_length": max(lengths),
        "completions/clipped_ratio": sum(s.finish_reason == "length" for s in samples) / len(samples),
        "entropy": sum(ent) / tokens if ent and tokens else None,
    }


def over_half_bf16_spacing(step, weights) -> int:
    """How many entries of `step` exceed in size half the bf16 spacing at their weight (2^(e - 8)
    for a weight in [2^e, 2^(e+1)): bf16 keeps 8 significant bits), the entries a bf16 model would
    keep a change of; the rest round back to the weight (ties aside). Both tensors read as fp32."""
    import torch

    w = weights.float()
    _, exponent = torch.frexp(w)  # |w| = m 2^E, m in [0.5, 1): e = E - 1
    half = torch.ldexp(torch.ones_like(w), exponent - 9).masked_fill_(w == 0, 0.0)  # any change of a zero stays
    return int((step.float().abs() > half).sum())


def adamw_step_record(optimizer) -> dict:
    """The last AdamW step's intended update, from the optimizer's state (torch's AdamW:
    lr m_hat / (sqrt(v_hat) + eps), plus lr wd theta), per entry in fp32 before rounding to the
    weights' dtype: `update/norm_fp32`, `update/rel_norm_fp32` (over the weights' norm) and
    `update/over_half_ulp_frac`, the share of entries whose update exceeds half the bf16 spacing
    at their weight (over_half_bf16_spacing): the step size a bf16 model can hold, as ES logs it."""
    import torch

    total = over = 0
    squares = weights = 0.0
    with torch.no_grad():
        for group in optimizer.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                state = optimizer.state.get(p) or {}
                if "exp_avg" not in state:
                    continue
                t = float(state["step"])
                denom = (state["exp_avg_sq"].float().sqrt() / (1 - beta2**t) ** 0.5).add_(group["eps"])
                step = state["exp_avg"].float().div(denom).mul_(group["lr"] / (1 - beta1**t))
                step.add_(p.float(), alpha=group["lr"] * group["weight_decay"])
                total += p.numel()
                over += over_half_bf16_spacing(step, p)
                squares += float(step.double().square().sum())
                weights += float(p.double().square().sum())
    if not total:
        return {}
    return {"update/norm_fp32": squares**0.5, "update/rel_norm_fp32": (squares / weights) ** 0.5 if weights else None,
            "update/over_half_ulp_frac": over / total}


def make_optimizer(model, opts):
    """AdamW as TRL configures it (betas 0.9/0.999, eps 1e-8), `opts.lr`, `opts.weight_decay`."""
    import torch

    # foreach=False: no full-size temporaries, so peak memory stays at params + grads + 2 states
    return torch.optim.AdamW(model.parameters(), lr=opts.lr, betas=(0.9, 0.999), eps=1e-8,
                             weight_decay=opts.weight_decay, foreach=False)


@discarded_if_unused
def gradient_run(opts, out: Path, kind: str, steps: int, prepare, *, progress=None) -> Start:
    """The loop the gradient trainers share (GRPO, distillation): set up or resume the run folder,
    load the policy and its AdamW state, then for each step `step_fn(step, grader, optimizer) ->
    metrics record` (with "reward"), append it, checkpoint with the optimizer, report progress.
    `prepare(model, tokenizer, stop, start, opts, cleanup)` builds `step_fn` (extra models,
    engines; `cleanup` an ExitStack closed at the end)."""
    import torch

    from evalkit.grading import Grader
    from evalkit.models import load_model
    from evalkit.sampling import stop_token_ids

    at = start_run(out, kind, opts)
    model, tokenizer = load_model(at.source, dtype=opts.dtype, device=at.device)
    optimizer = make_optimizer(model, opts)
    if at.ckpt:
        if not resumes_from(at.ckpt.path):
            raise UsageError(f"{at.ckpt.path}: no optimizer.pt, so the run cannot resume exactly; use another --out")
        saved = at.ckpt.path / "optimizer.pt"
        try:
            optimizer.load_state_dict(torch.load(saved, map_location=at.device, weights_only=True))
        except Exception as exc:  # a truncated or foreign file: torch raises many types
            raise UsageError(f"{saved}: cannot be read ({type(exc).__name__}: truncated?); only the newest "
                             "checkpoint keeps the optimizer, so the run cannot resume exactly: use another --out "
                             "(the checkpoints stay usable as models)") from None
    stop = stop_token_ids(model, tokenizer)
    with contextlib.ExitStack() as cleanup, \
            Grader(at.task.spec, workers=opts.grader_workers, deadline=opts.grade_timeout) as grader:
        step_fn = prepare(model, tokenizer, stop, at, opts, cleanup)
        for step in range(at.step + 1, steps + 1):
            record = {"step": step, **step_fn(step, grader, optimizer), "learning_rate": opts.lr}
            at.log.append(record)
            if step % opts.save_every == 0 or step == steps:
                save_checkpoint(model, tokenizer, out, step, {"kind": kind.removeprefix("train-"), "seed": opts.seed},
                                optimizer=optimizer)
            if progress:
                progress(step, steps, record["reward"])
    return at
