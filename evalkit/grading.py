"""Grading in killable worker processes with a parent-side deadline.

math-verify's own timeouts use `signal.alarm` and can still hang on
pathological input (nested powers, huge sympy printing), so every scorer
call runs in a worker process; a worker that overruns the deadline is
killed and replaced, and its item is graded `timeout`. A worker that dies
gives `error`. A hung grader never stalls the run.

Example:
    with Grader(task.spec, workers=2, deadline=10) as grader:
        grades = grader.grade([(completion, problem), ...])
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections import deque
from multiprocessing.connection import wait

from evalkit.tasks import Grade, Problem, TaskSpec, scorer_for

__all__ = ["Grader"]


def _scorer(spec: TaskSpec, other: str | None):
    """The task's own scorer, or another grader (evalkit.tasks.other_graders) given the gold."""
    if other is None:
        return scorer_for(spec)
    from evalkit.tasks.other_graders import other_grader

    grade = other_grader(other)
    return lambda completion, problem: grade(completion, problem.answer)


def _worker(conn, spec: TaskSpec, other: str | None = None) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    score = _scorer(spec, other)
    conn.send("ready")
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        completion, problem = job
        try:
            grade = score(completion, problem)
        except Exception as exc:  # a failure on one sample is recorded, not raised
            grade = Grade("error", None, f"{type(exc).__name__}: {exc}"[:500])
        conn.send(grade)


class _Slot:
    """One worker process and the job it is running."""

    def __init__(self, ctx, spec: TaskSpec, other: str | None = None):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, spec, other), daemon=True)
        self.proc.start()
        child.close()
        self.job: int | None = None
        self.started = 0.0

    def wait_ready(self, timeout: float = 300.0) -> None:
        """The worker says "ready" once its scorer is built; a worker that dies
        first usually failed to import the caller's main module."""
        try:
            if self.conn.poll(timeout) and self.conn.recv() == "ready":
                return
        except (EOFError, OSError):
            pass
        self.kill()
        raise RuntimeError(
            f"a grader worker failed to start (exit code {self.proc.exitcode}). Workers re-import "
            "the main module: a script that calls evalkit must guard its entry point with "
            "`if __name__ == '__main__':`"
        )

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join(timeout=5)
        self.conn.close()


class Grader:
    def __init__(self, spec: TaskSpec, *, workers: int = 2, deadline: float = 10.0, other: str | None = None):
        """`other`: grade with another grader (evalkit.tasks.other_graders) instead of the task's."""
        self.spec, self.workers, self.deadline, self.other = spec, workers, deadline, other
        self._ctx = mp.get_context("forkserver")
        self._slots: list[_Slot] = []

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for slot in self._slots:
            try:
                slot.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            slot.proc.join(timeout=1)
            if slot.proc.is_alive():
                slot.kill()
        self._slots = []

    def grade(self, jobs: list[tuple[str, Problem]]) -> list[Grade]:
        """Grades in the order of `jobs`; never raises for one bad item."""
        if not self._slots:
            self._slots = [_Slot(self._ctx, self.spec, self.other) for _ in range(self.workers)]
            for slot in self._slots:
                slot.wait_ready()
        results: list[Grade | None] = [None] * len(jobs)
        pending = deque(range(len(jobs)))
        while pending or any(s.job is not None for s in self._slots):
            for slot in self._slots:
                if slot.job is None and pending:
                    slot.job = pending.popleft()
                    slot.started = time.monotonic()
                    slot.conn.send(jobs[slot.job])
            busy = [s for s in self._slots if s.job is not None]
            first_deadline = min(s.started for s in busy) + self.deadline
            ready = wait([s.conn for s in busy], timeout=max(0.0, first_deadline - time.monotonic()))
            for slot in busy:
                job = slot.job
                if slot.conn in ready:
                    results[job] = self._receive(slot)
                elif time.monotonic() - slot.started >= self.deadline:
                    results[job] = Grade("timeout", None, f"grader exceeded {self.deadline:g}s")
                    self._replace(slot)
        return results  # type: ignore[return-value]

    def _receive(self, slot: _Slot) -> Grade:
        try:
            grade = slot.conn.recv()
        except (EOFError, OSError):
            code = slot.proc.exitcode
            self._replace(slot)
            return Grade("error", None, f"grader worker died (exit code {code})")
        slot.job = None
        return grade

    def _replace(self, slot: _Slot) -> None:
        slot.kill()
        fresh = _Slot(self._ctx, self.spec, self.other)
        fresh.wait_ready()
        self._slots[self._slots.index(slot)] = fresh
