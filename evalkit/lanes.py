"""Lanes: a chunk's rows split into groups that decode side by side, each on one thread.

    lanes = lane_count(rows, torch.get_num_threads())
    results = run_lanes([job_a, job_b], threads_each=1, cancel=threading.Event())

evalkit.sampling splits each chunk into `lane_count` lanes and runs them with `run_lanes`: one
Python thread per lane (the first in the calling thread), each with its own intra-op thread
count, so the lanes share no OpenMP barrier (why: evalkit.sampling's docstring, issue 46). torch
releases the GIL inside its ops, so the lanes' matmuls run at once; the Python between ops takes
turns (about 5% of a step for the built-in model).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["LANE_ROWS", "lane_count", "run_lanes", "serialized", "Cancelled"]


LANE_ROWS = 16  # fewest rows in a lane: each lane streams every weight per step, so a thin one is mostly memory traffic


def lane_count(rows: int, threads: int) -> int:
    """The lanes a chunk of `rows` rows is split into on `threads` CPU threads (0: not on the CPU, one
    lane): one per thread, each of at least LANE_ROWS rows. It fixes which rows share a batch, so the
    samples depend on it, through the thread count (`cpu_threads` in run.json), never on the load."""
    return max(1, min(threads, rows // LANE_ROWS))


def run_lanes(jobs: Sequence[Callable], threads_each: int, cancel) -> list:
    """Run each job in its own thread (the first in this one), each with `threads_each` intra-op
    threads (0: as they are), in inference mode; their results in order. A lane's error is raised
    here; an interrupt in this thread sets `cancel`, which the other lanes check at every step."""
    import threading

    import torch

    results: list = [None] * len(jobs)
    errors: list[BaseException] = []
    before = torch.get_num_threads()

    def run(k: int) -> None:
        if threads_each:
            torch.set_num_threads(threads_each)  # the thread count of this thread's ops (OpenMP and MKL, per thread)
        with torch.inference_mode():
            results[k] = jobs[k]()

    def guarded(k: int) -> None:
        try:
            run(k)
        except BaseException as exc:  # noqa: BLE001 -- re-raised in the calling thread
            errors.append(exc)
            cancel.set()

    others = [threading.Thread(target=guarded, args=(k,), name=f"evalkit-lane-{k}", daemon=True)
              for k in range(1, len(jobs))]
    try:
        for thread in others:
            thread.start()
        try:
            run(0)
        except Cancelled:  # another lane failed: its error is the one to raise
            pass
        for thread in others:
            thread.join()
    except BaseException:
        cancel.set()
        raise
    finally:
        torch.set_num_threads(before)
    if errors:
        raise errors[0]
    return results


def serialized(callback: Callable[[int], None] | None) -> Callable[[int], None] | None:
    """`callback`, called by one lane at a time."""
    import threading

    if callback is None:
        return None
    lock = threading.Lock()

    def call(rows: int) -> None:
        with lock:
            callback(rows)

    return call


class Cancelled(Exception):
    """Another lane failed or was interrupted: this one stops at its next step."""
