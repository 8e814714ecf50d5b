"""Ray workers for `evalkit passk`: one model replica per actor, the run's chunks as work.

    evalkit passk smollm2-135m --n 16 --limit 200 --ray-workers 2 --out runs/base
    evalkit passk smollm2-135m --n 16 --limit 200 --ray-address auto --ray-workers 8 --out runs/base

`evalkit.passk.run_passk` picks this executor when the options ask for Ray. The unit of
work is the run's fixed chunk (`max(1, batch_size // n)` problems in task order,
evalkit.chunks.chunk_problems); each actor loads the model once and samples whole chunks with
the same code as the one-process run (evalkit.chunks.draw_chunk), with `threads` intra-op
threads. The driver
grades each chunk as it comes back and appends the samples it does not
already have to the run folder, so a resume (with or without Ray) works as
on one process, and with the same `cpu_threads` the samples are bitwise
those of a one-process run (float results on CPU depend on the thread count:
run.json records it, and a run with another count is refused).

A worker that dies (killed, out of memory, its node lost) is replaced by a
new actor and its unfinished chunks are redone; nothing is written twice
because the driver appends only samples it does not have.

Limits: the model folder must be readable at the same path on every node;
chunks come back in completion order, so samples.jsonl is ordered
differently from a one-process run (same records). Threads default to
`cpus // workers` on a local cluster and 1 per actor with --ray-address.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator

from evalkit.chunks import draw_chunk, sampling_config
from evalkit.options import PasskOptions
from evalkit.scale import ray_get, start_ray

__all__ = ["RayChunks", "PasskWorker", "default_threads"]

IN_FLIGHT = 2  # chunks queued per actor, so it samples the next one while the driver grades


def default_threads(workers: int, address: str | None) -> int:
    """Intra-op threads per actor: the local cores shared out, or 1 on a joined cluster."""
    return 1 if address else max(1, (os.cpu_count() or 1) // workers)


class PasskWorker:
    """A Ray actor body: one model replica, samples whole chunks."""

    def __init__(self, ref, opts: PasskOptions, device: str):
        self.args = (ref, opts, device)

    def load(self) -> int:
        import torch

        from evalkit.models import load_model
        from evalkit.sampling import stop_token_ids

        ref, opts, device = self.args
        if device.startswith("cpu"):
            torch.set_num_threads(opts.threads)
        self.model, self.tokenizer = load_model(ref, dtype=opts.dtype, device=device)
        self.stop = stop_token_ids(self.model, self.tokenizer)
        self.cfg = sampling_config(opts)
        return os.getpid()

    def draw(self, part) -> dict:
        return draw_chunk(self.model, self.tokenizer, part, self.cfg, self.stop)


class RayChunks:
    """Chunk executor over Ray actors (see evalkit.chunks.LocalChunks for the interface)."""

    def __init__(self, ref, opts: PasskOptions, device: str, *, workers: int, address: str | None = None):
        from transformers import AutoTokenizer

        from evalkit.models import tokenizer_folder

        self.ray, self.started = start_ray(address, max(os.cpu_count() or 1, workers * opts.threads))
        self.args = (ref, opts, device)
        self.resources = {"num_cpus": opts.threads, "num_gpus": 0 if device.startswith("cpu") else 1}
        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder(ref))  # any checkpoint format
        self.sampling = sampling_config(opts).effective()
        self.extra: dict = {}
        self.replacements = 0
        self.remote_cls = self.ray.remote(PasskWorker)
        self.max_replacements = 4 * workers
        self.actors = [self._new_actor() for _ in range(workers)]
        self.pids = self._ready(self.actors)  # model loaded everywhere before `out` is touched

    def _new_actor(self):
        return self.remote_cls.options(max_restarts=0, **self.resources).remote(*self.args)

    def _ready(self, actors) -> list[int]:
        return ray_get(self.ray, [a.load.remote() for a in actors])

    def _replace(self, slot: int) -> None:
        self.replacements += 1
        if self.replacements > self.max_replacements:
            raise RuntimeError(f"Ray workers died {self.replacements} times; giving up (out of memory?)")
        self.ray.kill(self.actors[slot])
        self.actors[slot] = self._new_actor()
        self.pids[slot] = self._ready([self.actors[slot]])[0]

    def map(self, jobs) -> Iterator[tuple[int, dict]]:
        from ray.exceptions import OutOfMemoryError, RayActorError

        queue, inflight = deque(jobs), {}

        def submit(slot: int) -> None:
            if queue:
                job = queue.popleft()
                inflight[self.actors[slot].draw.remote(job[1])] = (slot, job)

        for slot in range(len(self.actors)):
            for _ in range(IN_FLIGHT):
                submit(slot)
        while inflight:
            [done], _ = self.ray.wait(list(inflight), num_returns=1)
            slot, job = inflight.pop(done)
            try:
                drawn = self.ray.get(done)
            except (RayActorError, OutOfMemoryError):
                lost_refs = [ref for ref, (s, _) in inflight.items() if s == slot]
                lost = [job] + [inflight.pop(ref)[1] for ref in lost_refs]
                queue.extendleft(reversed(lost))  # redone first, in task order
                self._replace(slot)
                for _ in range(IN_FLIGHT):
                    submit(slot)
                continue
            submit(slot)
            yield job[0], drawn

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor)
        if self.started:
            self.ray.shutdown()
