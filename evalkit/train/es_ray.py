"""Ray workers for `evalkit train es`: population members on actors that hold model replicas.

    evalkit train es --out runs/es --population 30 --iterations 20 --workers 2

Each actor loads the model once. The actors are created before the driver
opens the run folder (hashing the base weights), and each starts its grader
worker while torch and transformers import, so a fresh actor's start-up
(process, imports, grader) overlaps the driver's and its own set-up. Per
iteration the driver sends each member's seed and the step to a free actor;
the actor draws the step's prompts itself (the same seeded pick as
evalkit.train.es), perturbs its replica in place (`perturb_`), scores greedy
completions with its own grader, restores exactly (`restore_`) and returns
the reward with a few per-sample scalars (token count, finish reason, mean
entropy) for the metrics log. The driver z-scores the rewards, and every
actor applies the same `es_update_` from the seeds and z-scores, so no tensor
crosses the wire. After each update every replica returns `checksums` of its
weights; any mismatch stops the run with `ReplicaMismatch`. The same sums
serve as the restore check's reference for the next iteration's members, as
the one-process trainer's once-per-iteration `before` (no extra pass over
the weights per member). Actor 0 writes the checkpoints.

A worker that dies is replaced: the new actor loads the run's newest
checkpoint (or the start model) and replays the updates since then, which
gives bitwise the same weights (the same operations in the same order), then
its unfinished members are redone.

The metrics log, checkpoints and run.json are those of the one-process
trainer, so a run can be resumed with or without Ray. Weights equal a
one-process run's bitwise when the thread count is the same (the update is
elementwise; greedy rewards could flip on a near-tie under other float
rounding). Limits: `--out`, the model and the task file must be readable at
the same paths on every node (a shared filesystem on a multi-node cluster).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from pathlib import Path

from evalkit.rundir import discarded_if_unused
from evalkit.scale import ray_get, start_ray
from evalkit.scale.ray_passk import default_threads
from evalkit.train.es import (
    ESOptions,
    checksums,
    es_summary,
    es_update_,
    member_fitness,
    member_seeds,
    perturb_,
    restore_,
    step_record,
)

__all__ = ["run_es_ray", "ESWorker", "RayPopulation", "ReplicaMismatch"]

IN_FLIGHT = 2


class ReplicaMismatch(RuntimeError):
    """Replicas' weights differ after an update: the run cannot continue."""


class ESWorker:
    """A Ray actor body: one model replica, its own grader; evaluates members, applies updates."""

    def __init__(self, opts: ESOptions, device: str, threads: int):
        self.opts, self.device, self.threads = opts, device, threads
        self.sums: list[int] = []  # checksums of the weights at the start of the current iteration
        self.last_update: dict | None = None  # es_update_'s figures of the last update applied

    def prepare(self) -> int:
        """What needs no weights: the task, the grader (started in the background), torch's threads.

        Called as soon as the actor exists, while the driver opens the run folder.
        """
        import threading

        from evalkit.grading import Grader
        from evalkit.train.common import load_training_task

        opts = self.opts
        self.task = load_training_task(opts.task, opts.task_size, opts.task_seed, opts.task_config_dict())
        self.grader = Grader(self.task.spec, workers=opts.grader_workers, deadline=opts.grade_timeout)
        self.grader_error: list[BaseException] = []
        self.grader_start = threading.Thread(target=self._start_grader, daemon=True)
        self.grader_start.start()  # its worker process starts on another core while torch imports
        import torch

        if self.device.startswith("cpu"):
            torch.set_num_threads(self.threads)
        return os.getpid()

    def _start_grader(self) -> None:
        try:
            self.grader.grade([])  # starts the worker processes and waits until they are ready
        except BaseException as exc:  # re-raised by load, in the actor's main thread
            self.grader_error.append(exc)

    def load(self, source, updates: list) -> list[int]:
        """Load the model from `source`, replay `updates` [(seeds, z)], return the weight checksums."""
        from evalkit.models import load_model
        from evalkit.sampling import stop_token_ids

        opts = self.opts
        self.model, self.tokenizer = load_model(source, dtype=opts.dtype, device=self.device)
        self.params = [p for _, p in self.model.named_parameters()]  # as es._params
        self.stop = stop_token_ids(self.model, self.tokenizer)
        self.grader_start.join()
        if self.grader_error:
            raise self.grader_error[0]
        for seeds, z in updates:
            self.last_update = es_update_(self.params, seeds, z, opts.alpha, opts.noise)
        self.sums = checksums(self.params)
        return self.sums

    def pid(self) -> int:
        return os.getpid()

    def evaluate(self, step: int, member_seed: int) -> dict:
        """Perturb, score the step's prompts greedily, restore; scalars only.

        The restore check compares with the sums of the last load or update, as
        evalkit.train.es.es_iteration compares with the iteration's start.
        """
        from evalkit.train.common import derive_seed, pick_problems

        opts = self.opts
        problems = pick_problems(self.task.problems, opts.prompts_per_iteration, derive_seed(opts.seed, "es-prompts", step))
        fixes = perturb_(self.params, member_seed, opts.sigma, opts.noise)
        reward, samples = member_fitness(self.model, self.tokenizer, problems, self.grader, opts, self.stop)
        restore_(self.params, member_seed, opts.sigma, opts.noise, fixes)
        return {
            "reward": reward,
            "residual": sum(a != b for a, b in zip(self.sums, checksums(self.params), strict=True)),
            "fixups": sum(int(idx.numel()) for stored in fixes.values() for idx, _ in stored),
            "samples": [(s.num_tokens, s.finish_reason, s.mean_entropy) for s in samples],
        }

    def update(self, seeds: list[int], z: list[float]) -> list[int]:
        self.last_update = es_update_(self.params, seeds, z, self.opts.alpha, self.opts.noise)
        self.sums = checksums(self.params)
        return self.sums

    def update_figures(self) -> dict | None:
        """es_update_'s figures of the last update (the step's norm, its changed fraction)."""
        return self.last_update

    def save(self, out: str, step: int, state: dict) -> str:
        from evalkit.train.common import save_checkpoint

        return str(save_checkpoint(self.model, self.tokenizer, Path(out), step, state))

    def close(self) -> None:
        if hasattr(self, "grader"):
            self.grader_start.join()
            self.grader.close()


class RayPopulation:
    """The actors of one ES run, kept identical; replaces dead ones by load + replay.

    The actors start (and `prepare`) on construction; `load(source)` gives them the weights.
    """

    def __init__(self, opts: ESOptions, device: str, *, workers: int, threads: int, address: str | None):
        self.ray, self.started = start_ray(address, max(os.cpu_count() or 1, workers * threads))
        self.args = (opts, device, threads)
        self.resources = {"num_cpus": threads, "num_gpus": 0 if device.startswith("cpu") else 1}
        self.remote_cls = self.ray.remote(ESWorker)
        self.source = None  # the weights new actors load; set by load, moved by rebase
        self.updates: list = []  # (seeds, z) applied since `source`
        self.replacements, self.max_replacements = 0, 4 * workers
        self.actors, self.prepared = [], []  # actor handles, and the refs of their `prepare`
        for _ in range(workers):
            actor, prepared = self._new_actor()
            self.actors.append(actor)
            self.prepared.append(prepared)

    def _new_actor(self):
        actor = self.remote_cls.options(max_restarts=0, **self.resources).remote(*self.args)
        return actor, actor.prepare.remote()

    def _load(self, slots: list[int]) -> list[list[int]]:
        """Load `source` plus the updates since into the actors in `slots`; their checksums."""
        refs = [self.actors[s].load.remote(self.source, self.updates) for s in slots]
        got = ray_get(self.ray, [self.prepared[s] for s in slots] + refs)  # a failed prepare raises here
        return got[len(slots):]

    def load(self, source) -> None:
        """Every actor loads `source` (the start model or the checkpoint resumed from)."""
        self.source, self.updates = source, []
        self.check(self._load(list(range(len(self.actors)))), step=0)

    def _replace(self, slot: int) -> list[int]:
        """A new actor in `slot` at the current weights; returns its checksums."""
        self.replacements += 1
        if self.replacements > self.max_replacements:
            raise RuntimeError(f"Ray workers died {self.replacements} times; giving up (out of memory?)")
        self.ray.kill(self.actors[slot])
        self.actors[slot], self.prepared[slot] = self._new_actor()
        return self._load([slot])[0]

    def rebase(self, checkpoint: Path) -> None:
        """New replacements load this checkpoint instead of replaying every update."""
        from evalkit.models import ModelRef

        self.source = ModelRef(self.source.name, str(checkpoint))
        self.updates = []

    def evaluate(self, step: int, seeds: list[int]) -> list[dict]:
        """Every member's result, in member order, spread over free actors."""
        from ray.exceptions import OutOfMemoryError, RayActorError

        queue, inflight, results = deque(enumerate(seeds)), {}, {}

        def submit(slot: int) -> None:
            if queue:
                n, seed = queue.popleft()
                inflight[self.actors[slot].evaluate.remote(step, seed)] = (slot, n, seed)

        for slot in range(len(self.actors)):
            for _ in range(IN_FLIGHT):
                submit(slot)
        while inflight:
            [done], _ = self.ray.wait(list(inflight), num_returns=1)
            slot, n, seed = inflight.pop(done)
            try:
                results[n] = self.ray.get(done)
            except (RayActorError, OutOfMemoryError):
                lost_refs = [r for r, v in inflight.items() if v[0] == slot]
                lost = [(n, seed)] + [inflight.pop(r)[1:] for r in lost_refs]
                queue.extendleft(reversed(lost))
                self._replace(slot)
                for _ in range(IN_FLIGHT):
                    submit(slot)
                continue
            submit(slot)
        return [results[n] for n in range(len(seeds))]

    def update(self, step: int, seeds: list[int], z: list[float]) -> dict | None:
        """Every replica applies the update; a dead one is replaced (its replay includes it).
        Returns es_update_'s figures, from actor 0 (every replica applies the same update)."""
        from ray.exceptions import OutOfMemoryError, RayActorError

        self.updates.append((seeds, z))  # first, so a replacement replays this step too
        refs = [a.update.remote(seeds, z) for a in self.actors]
        sums = []
        for slot, ref in enumerate(refs):
            try:
                sums.append(self.ray.get(ref))
            except (RayActorError, OutOfMemoryError):
                sums.append(self._replace(slot))
        self.check(sums, step)
        try:
            return self.ray.get(self.actors[0].update_figures.remote())
        except (RayActorError, OutOfMemoryError):  # died since: the figures are lost, not the weights
            return None

    def check(self, sums: list[list[int]], step: int) -> None:
        for slot, other in enumerate(sums[1:], start=1):
            if other != sums[0]:
                bad = next(i for i, (a, b) in enumerate(zip(sums[0], other, strict=True)) if a != b)
                raise ReplicaMismatch(
                    f"step {step}: worker {slot}'s weights differ from worker 0's (first at parameter "
                    f"tensor {bad}); replicas must stay identical, so the run stops. Use one device type "
                    "and torch build on every node, then rerun to resume from the last checkpoint."
                )

    def save(self, out: Path, step: int, state: dict) -> Path:
        path = Path(self.ray.get(self.actors[0].save.remote(str(out), step, state)))
        self.rebase(path)
        return path

    def close(self) -> None:
        for actor in self.actors:
            if self.source is None:  # stopped before loading (e.g. a refused run folder): just kill
                self.ray.kill(actor)
                continue
            try:
                self.ray.get(actor.close.remote(), timeout=30)
            except Exception:  # a dead or hung actor is killed below anyway
                pass
            self.ray.kill(actor)
        if self.started:
            self.ray.shutdown()


def es_record(step: int, seeds: list[int], members: list[dict]) -> dict:
    """The metrics line of evalkit.train.es.es_iteration, from the members' scalars."""
    from evalkit.sampling import Sample
    from evalkit.train.es import iteration_record

    assert len(members) == len(seeds)
    samples = [Sample(0, 0, (), t, f, e, 0) for m in members for t, f, e in m["samples"]]
    return iteration_record(step, [m["reward"] for m in members], samples,
                            sum(m["residual"] for m in members), sum(m["fixups"] for m in members))


@discarded_if_unused
def run_es_ray(opts: ESOptions, out: Path, *, progress: Callable | None = None) -> dict:
    """`run_es` with population members evaluated on `opts.ray_workers` Ray actors (joining
    `opts.ray_address` when given; `opts.threads` each, default cores // workers); same run
    folder. Called by `run_es` when the options ask for Ray."""
    from evalkit.models import ModelRef, resolve_device
    from evalkit.rundir import check_writable
    from evalkit.train.common import (
        MetricsLog,
        load_training_task,
        open_run,
        sweep_partial_checkpoints,
    )
    from metrics.grpo import population_zscores

    opts.validate()
    check_writable(out)
    workers, address = opts.ray_workers or 1, opts.ray_address
    threads = opts.threads
    task = load_training_task(opts.task, opts.task_size, opts.task_seed, opts.task_config_dict())
    # the actors start now: their imports and graders overlap the run folder's weight hashing
    pop = RayPopulation(opts, resolve_device(opts.device), workers=workers,
                        threads=threads or default_threads(workers, address), address=address)
    try:
        run, ref, ckpt = open_run(out, "train-es", opts, task)
        sweep_partial_checkpoints(out)
        start = ckpt.step if ckpt else 0
        log = MetricsLog(Path(out) / "metrics.jsonl")
        log.keep_through(start)
        pop.load(ModelRef(ref.name, str(ckpt.path)) if ckpt else ref)
        for step in range(start + 1, opts.iterations + 1):
            seeds = member_seeds(opts.seed, step, opts.population)
            members = pop.evaluate(step, seeds)
            z = population_zscores([m["reward"] for m in members])
            update = pop.update(step, seeds, [float(v) for v in z])
            record = {**es_record(step, seeds, members), **step_record(update, opts.sigma)}
            log.append(record)
            if step % opts.save_every == 0 or step == opts.iterations:
                pop.save(out, step, {"kind": "es", "seed": opts.seed})
            if progress:
                progress(step, opts.iterations, record["reward"])
    finally:
        pop.close()
    return es_summary(run, log, out, opts.iterations, {"ray_workers": workers, "ray_replacements": pop.replacements})
