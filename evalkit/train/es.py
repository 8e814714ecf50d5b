"""Evolution Strategies for LLMs, as published (Qiu et al. 2025, arXiv 2509.24372).

    evalkit train es --out runs/es --population 30 --sigma 1e-3 --alpha 5e-4 --iterations 50

One iteration (step t):
1. draw `prompts_per_iteration` problems with a generator seeded by (seed, t);
2. for each member n of the population, seed `s_n = hash(seed, t, n)`: for
   every parameter tensor add `sigma * eps` in place, with eps regenerated from
   the tensor's seed (i.i.d. default: `s_n + tensor index`; `--noise
   correlated`: `s_n` for every tensor, as in the original code); score the
   greedy completions of the prompts (fitness = mean 0/1 reward); restore;
3. z-score the fitnesses, `z = (R - mean) / (std + 1e-8)`, ddof 0;
4. per tensor `theta += alpha / N * sum_n z_n * eps_n`, accumulated in fp32
   and rounded once to the model's dtype (in bf16 the ~1e-5 signal of
   per-member updates would be truncated).

Exact restore, without a second model copy: `theta - sigma*eps` does not
give back `theta` bitwise (about 0.6% of fp32 and 1.2% of bf16 weights
drift in a plain implementation). While perturbing a chunk, the restore is
computed ahead; the few elements where it would miss are stored (int32 index
+ original value) and written back after the subtraction. A checksum of each
tensor's bits before and after verifies the round trip; `restore_residual`
in metrics.jsonl counts tensors that failed (0 expected).

Noise is generated in chunks of 2^20 elements from one generator per
tensor; on CPU this is bitwise the stream of `torch.randn(numel)`, so the
noise is the original's while the extra memory stays at a few chunks.
Perturb and restore keep their chunk temporaries in per-thread buffers
(`_scratch`). Limits: here members are evaluated in turn in one process
(spread over Ray actors: `evalkit.train.es_ray`); parameters must be
contiguous (Hugging Face models are).

`--backend vllm` (GPU): the HF model stays the master copy and is perturbed,
restored and updated here exactly as above; only the scoring of each member
goes to a colocated vLLM engine that is given the perturbed weights first
(`evalkit.train.vllm`, `sampler=` of `member_fitness`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from evalkit.errors import UsageError
from evalkit.options import option
from evalkit.records import TRAINERS
from evalkit.rundir import discarded_if_unused
from evalkit.train.common import TrainOptions

__all__ = [
    "ESOptions",
    "run_es",
    "perturb_",
    "restore_",
    "es_update_",
    "tensor_seed",
    "member_seeds",
    "checksums",
    "step_record",
]

CHUNK = 1 << 20  # elements per noise chunk; a multiple of 16 keeps CPU randn's stream intact


FITNESS = ("reward", "answer_logprob")


@dataclass(frozen=True)
class ESOptions(TrainOptions):  # backend vllm: members scored by a colocated vLLM engine
    kind: ClassVar[str] = "es"
    units: ClassVar[str] = "iterations"

    population: int = option(30, "ES population size N (paper: 30).", min=2, note="ES z-scores need at least 2 members")
    sigma: float = option(1e-3, "ES noise scale (paper: 1e-3).", above=0)
    alpha: float = option(5e-4, "ES step size; theta += alpha/N * sum z_n eps_n (paper: 5e-4).", min=0)
    iterations: int = option(50, "ES iterations (total; raise it to extend a run).", min=1, identity=False)
    prompts_per_iteration: int = option(16, "Prompts scored per ES iteration (greedy, fitness = mean reward).", min=1)
    noise: str = option("iid", "iid (per-tensor seeds) or correlated (original code: one seed for all tensors).",
                        choices=("iid", "correlated"))
    fitness: str = option("reward", "reward (the paper: mean 0/1 reward of greedy completions) or answer_logprob (mean "
                          "per-token log-probability of the reference answer, teacher-forced: dense, a departure from "
                          "the paper; metrics' reward is then the unperturbed model's greedy reward).", choices=FITNESS)

    def scale(self):
        from evalkit.options import SCALE

        return SCALE["es" if self.fitness == "reward" else f"es-{self.fitness}"]

    def completions_per_unit(self) -> int:
        return self.population * self.prompts_per_iteration


TRAINERS["train-es"] = ESOptions  # its records are upgraded with it (evalkit.records)


def tensor_seed(member_seed: int, index: int, noise: str) -> int:
    """Seed of tensor `index` for one member: the same for all tensors when correlated."""
    return member_seed if noise == "correlated" else (member_seed + index) % 2**63


def member_seeds(seed: int, step: int, population: int) -> list[int]:
    from evalkit.train.common import derive_seed

    return [derive_seed(seed, "es", step, n) for n in range(population)]


def _params(model) -> list:
    params = [p for _, p in model.named_parameters()]  # tied weights appear once
    assert all(p.is_contiguous() for p in params)
    return params


_SCRATCH = threading.local()


def _scratch(name: str, n: int, dtype, device):
    """This thread's reusable buffer `name` (CHUNK elements or more), first n elements.

    Chunk temporaries allocated afresh would be mapped and unmapped by the allocator every
    chunk (glibc's mmap threshold is kept fixed, see `_fixed_mmap_threshold`): page faults
    that cost perturb and restore a third of their time."""
    import torch

    bufs = _SCRATCH.__dict__.setdefault("bufs", {})
    key = (name, dtype, str(device))
    if key not in bufs or bufs[key].numel() < n:
        bufs[key] = torch.empty(max(n, CHUNK), dtype=dtype, device=device)
    return bufs[key][:n]


def _noise(param, seed: int):
    """Yield (flat chunk of the tensor, its fp32 noise) from one seeded generator."""
    import torch

    gen = torch.Generator(device=param.device).manual_seed(seed)
    flat = param.data.view(-1)
    for start in range(0, flat.numel(), CHUNK):
        part = flat[start : start + CHUNK]
        eps = _scratch("eps", part.numel(), torch.float32, param.device)
        torch.randn(part.numel(), generator=gen, out=eps)
        yield start, part, eps


def _bits(t):
    import torch

    return t.view({8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}[t.element_size()])


def checksums(params) -> list[int]:
    """Per-tensor sum of the raw bits (int64): any single changed element changes it."""
    import torch

    sums = []
    for p in params:  # chunked: an int64 copy of the embedding alone would be 226 MB
        flat = _bits(p.data.view(-1))
        sums.append(sum(int(flat[s : s + CHUNK].sum(dtype=torch.int64)) for s in range(0, flat.numel(), CHUNK)))
    return sums


def per_tensor(fn, params) -> list:
    """`fn(i, p)` for every tensor, on as many Python threads as torch has
    intra-op threads: noise generation is single-threaded per generator, so
    tensors run side by side (each thread's ops with one intra-op thread).
    Every tensor's work is independent, so results do not depend on it."""
    import torch

    workers = torch.get_num_threads()
    if workers <= 1 or len(params) < 2:
        return [fn(i, p) for i, p in enumerate(params)]
    torch.set_num_threads(1)
    try:
        return list(_pool(workers).map(fn, range(len(params)), params))
    finally:
        torch.set_num_threads(workers)


_POOLS: dict = {}


def _pool(workers: int):
    """One long-lived thread pool per size: its threads keep their `_scratch` buffers from
    one perturb/restore to the next (a pool per call would fault them in every time)."""
    from concurrent.futures import ThreadPoolExecutor

    if workers not in _POOLS:
        _POOLS[workers] = ThreadPoolExecutor(workers, thread_name_prefix="es-tensors")
    return _POOLS[workers]


def _fixed_mmap_threshold() -> None:
    """Keep glibc's mmap threshold fixed (64 KiB). glibc raises it after large
    blocks are freed; the chunk-sized temporaries of perturb/restore then pile
    up in the heap (here +300 to +900 MB of resident memory over a few
    members), breaking ES's inference-sized memory. No effect off glibc."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 16)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


def _flatnonzero(mask):
    """Indices of True entries; numpy's scan is ~6x faster than torch's on CPU."""
    import numpy as np
    import torch

    if mask.device.type != "cpu":
        return torch.nonzero(mask).squeeze(1)
    return torch.from_numpy(np.flatnonzero(mask.numpy()))


def perturb_(params, member_seed: int, sigma: float, noise: str) -> dict:
    """theta += sigma * eps in place; returns the fix-ups that make restore_ exact."""
    import torch

    _fixed_mmap_threshold()

    def one(i, p):
        stored = []
        for start, part, eps in _noise(p, tensor_seed(member_seed, i, noise)):
            k, dtype = part.numel(), part.dtype
            eps.mul_(sigma)
            # computed in fp32, rounded once to the weights' dtype (as `(part.float() + eps).to(dtype)`)
            new = torch.add(part, eps, out=_scratch("new", k, dtype, p.device))
            back = torch.sub(new, eps, out=_scratch("back", k, dtype, p.device))
            moved = torch.ne(_bits(back), _bits(part), out=_scratch("miss", k, torch.bool, p.device))
            miss = _flatnonzero(moved)
            if miss.numel():
                stored.append(((miss + start).to(torch.int32), part[miss].clone()))
            part.copy_(new)
        return stored

    return {i: stored for i, stored in enumerate(per_tensor(one, params)) if stored}


def restore_(params, member_seed: int, sigma: float, noise: str, fixes: dict) -> None:
    """theta -= sigma * eps with the same noise, then write back the stored misses."""
    import torch

    def one(i, p):
        for _, part, eps in _noise(p, tensor_seed(member_seed, i, noise)):
            eps.mul_(sigma)
            torch.sub(part, eps, out=part)  # in fp32, rounded once to the weights' dtype
        flat = p.data.view(-1)
        for index, values in fixes.get(i, ()):
            flat[index.long()] = values

    per_tensor(one, params)


def es_update_(params, seeds: list[int], z, alpha: float, noise: str) -> dict:
    """theta += alpha / N * sum_n z_n eps_n per tensor, summed in fp32, rounded once.

    Returns what the step did, measured where it is applied (no extra pass over the weights):
    `update/norm`, the L2 norm of the change actually stored (new - old in the weights' dtype,
    read in fp32); `update/norm_fp32`, the norm of alpha/N sum z_n eps_n before rounding; and
    `update/changed_frac`, the share of elements whose bits changed; `update/rel_norm`,
    `update/norm` over the weights' norm before the step (divided by 2^-9, half a bf16 ulp, it
    says whether a step survives bf16 rounding on a typical weight); `update/over_half_ulp_frac`,
    the share of entries whose fp32 step exceeds half the bf16 spacing at their weight
    (common.over_half_bf16_spacing: those a bf16 model keeps). Squares are summed in float64
    chunk by chunk by numpy on CPU, so the figures do not depend on torch's thread count (a Ray
    actor's line equals the one-process trainer's)."""
    import torch

    from evalkit.train.common import over_half_bf16_spacing

    n_members = len(seeds)
    d = sum(p.numel() for p in params)
    stats = {"update/norm": 0.0, "update/norm_fp32": 0.0, "update/changed_frac": 0.0, "update/rel_norm": 0.0,
             "update/over_half_ulp_frac": 0.0, "update/params": d}
    active = [(s, float(zn)) for s, zn in zip(seeds, z, strict=True) if zn != 0.0]
    if not active or alpha == 0.0:
        return stats  # all rewards equal: the update vanishes (and adding +0.0 would flip -0.0 bits)
    applied = intended = weights = 0.0
    changed = over = 0
    for i, p in enumerate(params):
        # one generator per member, all drawing into one shared buffer: memory stays at two chunks
        gens = [(torch.Generator(device=p.device).manual_seed(tensor_seed(s, i, noise)), zn) for s, zn in active]
        flat = p.data.view(-1)
        eps = torch.empty(min(CHUNK, flat.numel()), dtype=torch.float32, device=p.device)
        acc = torch.empty_like(eps)
        for start in range(0, flat.numel(), CHUNK):
            part = flat[start : start + CHUNK]
            k = part.numel()
            acc[:k].zero_()
            for gen, zn in gens:
                torch.randn(k, generator=gen, out=eps[:k])
                acc[:k].add_(eps[:k], alpha=zn)
            step = acc[:k].mul_(alpha / n_members)
            old = part.float()
            new = (old + step).to(part.dtype)
            intended += _square_sum(step.square())
            applied += _square_sum((new.float() - old).square_())
            weights += _square_sum(old.square())
            changed += int(torch.ne(_bits(new), _bits(part)).sum())
            over += over_half_bf16_spacing(step, old)
            part.copy_(new)
    return {**stats, "update/norm": applied**0.5, "update/norm_fp32": intended**0.5, "update/changed_frac": changed / d,
            "update/over_half_ulp_frac": over / d, "update/rel_norm": (applied / weights) ** 0.5 if weights else float("inf")}


def _square_sum(squares) -> float:
    """Sum of a chunk of squares in float64: numpy's (one thread, fixed order) on CPU."""
    import numpy as np
    import torch

    if squares.device.type == "cpu":
        return float(np.sum(squares.numpy(), dtype=np.float64))
    return float(squares.sum(dtype=torch.float64))


def step_record(update: dict | None, sigma: float) -> dict:
    """The metrics line's step-size fields from `es_update_`'s figures: the perturbations' norm
    `sigma * sqrt(d)` (the radius the members explored: E||sigma eps|| for d i.i.d. normals, to a
    relative 1/(4d)) and the step's norm over it. With z-scored fitness (sum z_n^2 = N whenever the
    fitness has any spread) the step is about `alpha * sqrt(d / N)`, so the ratio is about
    `alpha / (sigma * sqrt(N))`: 0.091 at the paper's N 30, sigma 1e-3, alpha 5e-4."""
    if update is None:  # not measured (a Ray update whose every replica was replaced)
        return {}
    radius = sigma * update["update/params"] ** 0.5
    return {**update, "perturbation/norm": radius, "update/over_perturbation": update["update/norm"] / radius}


def member_fitness(model, tokenizer, problems, grader, opts: ESOptions, stop, sampler=None) -> tuple[float, list]:
    """Mean 0/1 reward of greedy completions (temperature 0, one per prompt).

    `sampler(prompts, problems, cfg, stop) -> [Sample]`, if given, replaces
    `sample_chunk` (a vLLM engine that first loads the model's current weights)."""
    from evalkit.sampling import SamplingConfig, render_prompt, sample_problems
    from evalkit.train.common import decode_and_grade

    cfg = SamplingConfig(n=1, temperature=0.0, max_new_tokens=opts.max_new_tokens, seed=0)
    if sampler is None:
        samples = sample_problems(model, tokenizer, problems, cfg, stop_ids=stop)
    else:
        samples = sampler([render_prompt(tokenizer, p.prompt) for p in problems], problems, cfg, stop)
    _, rewards = decode_and_grade(tokenizer, grader, samples, problems)
    return sum(rewards) / len(rewards), samples


def answer_logprob(model, tokenizer, problems, kind: str, stop) -> float:
    """Mean over prompts of the per-token log-probability of the reference completion (the answer
    as the task's prompt asks for it, then the stop token), teacher-forced at temperature 1: a
    dense fitness for `--fitness answer_logprob`, a departure from Qiu et al. (mean reward)."""
    import torch

    from evalkit.sampling import render_prompt
    from evalkit.tasks import reference_completion
    from evalkit.train.grpo import token_logprobs

    eos = tokenizer.eos_token_id if tokenizer.eos_token_id in stop else stop[0]
    seqs = [(tuple(tokenizer(render_prompt(tokenizer, p.prompt), add_special_tokens=False)["input_ids"]),
             tuple(tokenizer(reference_completion(p, kind), add_special_tokens=False)["input_ids"]) + (eos,))
            for p in problems]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    with torch.inference_mode():
        logp, mask = token_logprobs(model, seqs, temperature=1.0, pad_id=pad)
    return float(((logp * mask).sum(-1) / mask.sum(-1)).mean())


def es_iteration(policy, task, step: int) -> dict:
    """One ES iteration in place (`policy`: evalkit.train.common.Policy; its `sampler`: see
    member_fitness); returns its metrics record."""
    from evalkit.train.common import derive_seed, pick_problems
    from metrics.grpo import population_zscores

    model, tokenizer, grader, opts, stop, sampler = (policy.model, policy.tokenizer, policy.grader, policy.opts,
                                                     policy.stop, policy.sampler)

    params = _params(model)
    problems = pick_problems(task.problems, opts.prompts_per_iteration, derive_seed(opts.seed, "es-prompts", step))
    seeds = member_seeds(opts.seed, step, opts.population)
    before = checksums(params)
    fitness, samples, residual, misses = [], [], 0, 0
    dense = opts.fitness == "answer_logprob"
    if dense:  # the reward is the unperturbed model's, before the update; fitness steers the update
        center, samples = member_fitness(model, tokenizer, problems, grader, opts, stop, sampler)
    for s in seeds:
        fixes = perturb_(params, s, opts.sigma, opts.noise)
        misses += sum(int(idx.numel()) for stored in fixes.values() for idx, _ in stored)
        if dense:
            reward, member_samples = answer_logprob(model, tokenizer, problems, task.spec.kind, stop), []
        else:
            reward, member_samples = member_fitness(model, tokenizer, problems, grader, opts, stop, sampler)
        restore_(params, s, opts.sigma, opts.noise, fixes)
        residual += sum(a != b for a, b in zip(before, checksums(params), strict=True))
        fitness.append(reward)
        samples += member_samples
    z = population_zscores(fitness)
    update = es_update_(params, seeds, z, opts.alpha, opts.noise)
    record = {**iteration_record(step, fitness, samples, residual, misses), **step_record(update, opts.sigma)}
    if dense:
        record.update(reward=center, reward_std=None, fitness_kind="answer_logprob")
    return record


def iteration_record(step: int, rewards, samples, residual: int, fixups: int) -> dict:
    """The metrics.jsonl line of one ES iteration (TRL names where one exists)."""
    import numpy as np

    from evalkit.train.common import completion_metrics

    r = np.asarray(rewards)
    return {
        "step": step,
        "reward": float(r.mean()),
        "reward_std": float(r.std()),
        "fitness/mean": float(r.mean()),
        "fitness/std": float(r.std()),
        "fitness/min": float(r.min()),
        "fitness/max": float(r.max()),
        "fitness/spread": float(r.max() - r.min()),
        "fitness/distinct": int(np.unique(r).size),
        "zero_spread": bool(r.max() == r.min()),
        "restore_residual": int(residual),
        "restore_fixups_per_member": fixups / len(r),
        **completion_metrics(samples),
    }


@discarded_if_unused
def run_es(opts: ESOptions, out: Path, *, progress: Callable | None = None) -> dict:
    """Run (or resume) ES in this process into `out`; returns the summary written to
    summary.json. `evalkit.train.run_es` picks this or the Ray runner (evalkit.train.es_ray)."""
    from evalkit.grading import Grader
    from evalkit.models import load_model
    from evalkit.sampling import stop_token_ids
    from evalkit.train.common import Policy, save_checkpoint, start_run

    opts.validate()
    if opts.uses_ray:
        raise UsageError("Ray workers asked for: call evalkit.train.run_es, which runs ES on Ray")
    at = start_run(out, "train-es", opts)
    model, tokenizer = load_model(at.source, dtype=opts.dtype, device=at.device)
    stop = stop_token_ids(model, tokenizer)
    sampler, extra, engine = None, {}, None
    if opts.backend == "vllm":  # the engine loads the folder the HF model came from
        from evalkit.train.vllm import ENTROPY_KIND, VllmPolicySampler

        engine = VllmPolicySampler(at.source.path, opts, tokenizer, stop, at.device)
        sampler, extra = engine.fitness_sampler(model), {"entropy_kind": ENTROPY_KIND}
    with contextlib.ExitStack() as cleanup, \
            Grader(at.task.spec, workers=opts.grader_workers, deadline=opts.grade_timeout) as grader:
        if engine:
            cleanup.callback(engine.close)
        for step in range(at.step + 1, opts.iterations + 1):
            record = {**es_iteration(Policy(model, tokenizer, grader, tuple(stop), opts, sampler), at.task, step),
                      **extra}
            at.log.append(record)
            if step % opts.save_every == 0 or step == opts.iterations:
                save_checkpoint(model, tokenizer, out, step, {"kind": "es", "seed": opts.seed})
            if progress:
                progress(step, opts.iterations, record["reward"])
    return es_summary(at.run, at.log, out, opts.iterations)


def es_summary(run, log, out: Path, steps: int, extra: dict | None = None) -> dict:
    """summary.json of an ES run; `extra` adds fields (e.g. the Ray worker counts)."""
    from evalkit.train.common import latest_checkpoint

    records = log.records()
    final = latest_checkpoint(out)
    summary = {
        **run.settings,
        "complete": final is not None and final.step >= steps,
        "steps": steps,
        "final_checkpoint": str(final.path) if final else None,
        "frac_zero_spread": sum(r["zero_spread"] for r in records) / len(records) if records else None,
        "restore_residual_total": sum(r["restore_residual"] for r in records),
        **(extra or {}),
    }
    run.write_summary(summary)
    return summary
