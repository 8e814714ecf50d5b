"""Stop a command at each of its writes (SIGKILL on entering the syscall, injected by strace),
rerun it, and compare what it leaves with an uninterrupted run's.

    with Zygote() as z:
        whole = z.run(argv, OUT, trace=True)        # the reference: its calls on OUT's paths, in order
        points = kill_points(whole.trace)           # [Call]: every write, rename, removal, ...
        z.run(argv, OUT, kill=points[3], paths=traced_paths(whole.trace, OUT))   # SIGKILL there
        z.run(argv, OUT)                            # the rerun; then compare state(...) with the reference's

Each command runs in a child forked from one process that has already imported evalkit, torch,
transformers and matplotlib (the zygote): a run costs its own work, not Python's start-up. The
zygote also starts the graders' forkserver once (math_verify preloaded), shared by its children,
and `warm_here` runs a command without torch work (a report) in the zygote itself, so that
matplotlib's caches are warm in every child. The child waits on a pipe until strace has
attached to it (`strace -p`), so its pid, and with it the names of its temporary files
(`.NAME.tmpPID`), is known before it starts: the kill is counted among the calls on OUT's paths
only (`strace -P`), never among a pipe's or the terminal's.

Only the child's main thread is traced: it makes every write to OUT (the sampler's and grader's
threads and processes write none; checked once with `strace -f` on passk). A kill on entering a
call that changes nothing on disk (an open for reading, fsync, flock: a SIGKILL keeps the page
cache) leaves the state of a kill on entering the next call that does (`kill_points`): killing
at each call that writes, creates, renames, links, removes or truncates under OUT reaches every
state a kill can leave there.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

STRACE = shutil.which("strace")
# The calls that change what is under OUT (openat only with a flag that writes, checked on the reference).
MUTATING = ("openat", "write", "pwrite64", "writev", "rename", "renameat", "renameat2", "link", "linkat", "unlink",
            "unlinkat", "mkdir", "mkdirat", "rmdir", "ftruncate", "truncate", "fsync", "fdatasync", "flock")
WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")

ZYGOTE = r"""
import ctypes, json, os, sys, traceback
import torch, transformers, matplotlib  # noqa: F401  what the commands import, once
matplotlib.use("Agg")
import matplotlib.pyplot  # noqa: F401
import transformers.models.llama.modeling_llama  # noqa: F401  the tiny model's class
import evalkit.cli, evalkit.passk, evalkit.interpolate, evalkit.importers.run, evalkit.regrade  # noqa: F401
import analyses.report  # noqa: F401
import evalkit.tasks.mathgrade  # noqa: F401

import multiprocessing.forkserver as forkserver
forkserver.set_forkserver_preload(["evalkit.grading", "evalkit.tasks", "evalkit.tasks.arith", "evalkit.tasks.mathgrade",
                                   "math_verify"])  # the scorers import math_verify (0.8 s) lazily
forkserver.ensure_running()  # one grader forkserver, shared by every child: its start is paid once

libc = ctypes.CDLL(None, use_errno=True)
print("ready", flush=True)
for line in iter(sys.stdin.readline, ""):
    job = json.loads(line)
    if "here" in job:  # a command run in this process (no torch work: fork-safe), so that its caches
        out = os.dup(1)  # (matplotlib's text layout, fonts) are warm in every child
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1), os.dup2(null.fileno(), 2)
            sys.argv = ["evalkit", *job["here"]]
            try:
                evalkit.cli.main()
            except SystemExit:
                pass
            sys.stdout.flush(), sys.stderr.flush()
        os.dup2(out, 1), os.dup2(out, 2), os.close(out)
        print(json.dumps({"done": True}), flush=True)
        continue
    r, w = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(w)
            forkserver._forkserver.ensure_running = lambda: None  # the zygote's, alive while it lives
            libc.prctl(0x59616D61, ctypes.c_ulong(-1), 0, 0, 0)  # PR_SET_PTRACER_ANY: strace -p may attach
            os.read(r, 1)  # go: strace has attached (or no strace)
            log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0), os.dup2(log, 1), os.dup2(log, 2)
            os.chdir(job["cwd"])
            os.environ.update(job.get("env", {}))
            sys.argv = ["evalkit", *job["argv"]]
            try:
                evalkit.cli.main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            os._exit(code)
    os.close(r)
    print(json.dumps({"pid": pid}), flush=True)
    sys.stdin.readline()
    os.write(w, b"g")
    os.close(w)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)
"""


@dataclass(frozen=True)
class Call:
    """One syscall of a trace: its name, its n-th place among the calls of that name on OUT's
    paths, the paths it names (pid in temporary names as `{pid}`) and its line."""

    name: str
    n: int
    paths: tuple[str, ...]
    line: str


@dataclass(frozen=True)
class Run:
    code: int  # exit status; -9 when killed
    output: str  # stdout and stderr
    trace: list  # [Call] on OUT's paths, when traced
    pid: int


def strace_works() -> str | None:
    """Why strace cannot attach to a process here and kill it on a chosen call, or None."""
    if STRACE is None:
        return "strace is not installed"
    probe = subprocess.Popen([sys.executable, "-c", "import os, sys; sys.stdin.readline(); os.getppid()"],
                             stdin=subprocess.PIPE, text=True)
    tracer = subprocess.Popen([STRACE, "-p", str(probe.pid), "-o", os.devnull, "-e", "trace=getppid",
                               "-e", "inject=getppid:signal=SIGKILL:when=1"], stderr=subprocess.PIPE, text=True)
    try:
        attached = tracer.stderr.readline()
        probe.communicate("\n", timeout=20)
        tracer.wait(timeout=20)
    except subprocess.TimeoutExpired:
        return "strace -p did not return"
    finally:
        probe.kill()
        tracer.kill()
        probe.wait(), tracer.wait()
    if "attached" not in attached:
        return f"strace -p cannot attach ({attached.strip()[:160]})"
    return None if probe.returncode == -9 else f"strace did not kill on the chosen call (exit {probe.returncode})"


class Zygote:
    """The forking process (see the module docstring); `run` one command in a fresh child."""

    def __init__(self, env: dict | None = None):
        root = Path(__file__).resolve().parents[2]
        self.env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", **(env or {})}
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), self.env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen([sys.executable, "-c", ZYGOTE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=self.env, cwd=root)
        assert self.proc.stdout.readline().strip() == "ready", "the zygote did not start"
        self.scratch = Path(tempfile.mkdtemp(prefix="killpoints-"))

    def run(self, argv: list[str], out: Path, *, cwd: Path | None = None, kill: Call | None = None,
            fault: str | None = None, paths: tuple[str, ...] = (), trace: bool = False, env: dict | None = None) -> Run:
        """Run `evalkit ARGV` in a fresh child. `trace`: list its calls on OUT's paths. `kill`: SIGKILL on
        entering that call (counted among the calls of its name on `paths`, `{pid}` filled in).
        `fault`: an strace tamper for that call instead (`error=ENOSPC`)."""
        log = self.scratch / "output.txt"
        job = {"argv": [str(a) for a in argv], "cwd": str(cwd or self.scratch), "log": str(log), "env": env or {}}
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        pid = json.loads(self.proc.stdout.readline())["pid"]
        tracer, trace_file = None, self.scratch / "trace.txt"
        if trace or kill is not None:
            if kill is not None:
                what = f"{kill.name}:{fault or 'signal=SIGKILL'}:when={kill.n}"
                filters = ["-e", f"trace={kill.name}", "-e", f"inject={what}",
                           *[a for p in paths for a in ("-P", p.replace("{pid}", str(pid)))]]
            else:
                filters = ["-e", "trace=" + ",".join(MUTATING)]
            tracer = subprocess.Popen([STRACE, "-y", "-p", str(pid), "-o", str(trace_file), *filters],
                                      stderr=subprocess.PIPE, text=True)
            attached = tracer.stderr.readline()
            assert "attached" in attached, attached
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        code = json.loads(self.proc.stdout.readline())["code"]
        calls = []
        if tracer is not None:
            tracer.communicate(timeout=60)
            calls = parse(trace_file.read_text(), Path(out), pid)
        return Run(code, log.read_text(errors="replace"), calls, pid)

    def warm_here(self, argv: list[str]) -> None:
        """Run `evalkit ARGV` in the zygote itself (a command that does no torch work, such as
        `report`): what it caches (matplotlib's fonts and text layout) is warm in every child."""
        self.proc.stdin.write(json.dumps({"here": [str(a) for a in argv]}) + "\n")
        self.proc.stdin.flush()
        assert json.loads(self.proc.stdout.readline()) == {"done": True}

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        self.proc.wait(timeout=60)
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> Zygote:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


LINE = re.compile(r"^(\w+)\((.*)\)\s+= (.*)$")
QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
DECORATED = re.compile(r"\d+<([^>]*)>")


def parse(text: str, out: Path, pid: int) -> list[Call]:
    """The calls of an strace -y log that name a path under `out` (or `out` itself), numbered per
    syscall name; the killed call (`= ?`) included."""
    out = str(out)
    calls, counts = [], {}
    for line in text.splitlines():
        match = LINE.match(line)
        if not match or match.group(1) not in MUTATING:
            continue
        name, args = match.group(1), match.group(2)
        named = [p for p in QUOTED.findall(args) + DECORATED.findall(args) if p == out or p.startswith(out + "/")]
        if not named:
            continue
        counts[name] = counts.get(name, 0) + 1
        paths = tuple(dict.fromkeys(re.sub(rf"\.tmp{pid}$", ".tmp{pid}", p) for p in named))
        calls.append(Call(name, counts[name], paths, line))
    return calls


KEEPS = ("fsync", "fdatasync", "flock")  # change nothing a SIGKILL leaves: the page cache outlives the process


def kill_points(calls: list[Call]) -> list[Call]:
    """The calls that change what is under OUT: all but opens that only read, syncs and locks (a
    kill on entering one of those leaves what a kill on entering the next call leaves)."""
    return [c for c in calls if c.name not in KEEPS and (c.name != "openat" or any(f in c.line for f in WRITE_FLAGS))]


def traced_paths(calls: list[Call], out: Path) -> tuple[str, ...]:
    """Every path the calls name, and OUT: the `strace -P` set of a killed run."""
    return tuple(dict.fromkeys([str(out), *(p for c in calls for p in c.paths)]))


def state(root: Path) -> dict:
    """What a kill left under `root`: files by relative path (pid in temporary names as `{pid}`,
    the lock's content, a pid, left out) with their bytes, folders as None; {} when it is absent."""
    if not root.exists():
        return {}
    found = {}
    for path in sorted(root.rglob("*")):
        rel = re.sub(r"\.tmp\d+$", ".tmp{pid}", path.relative_to(root).as_posix())
        found[rel] = None if path.is_dir() else b"" if path.name == ".lock" else path.read_bytes()
    return found


def without(files: dict, drop: dict) -> dict:
    """`files` (state) with the JSON keys `drop` names removed: {relative path: (key, ...)}."""
    kept = dict(files)
    for rel, keys in drop.items():
        if kept.get(rel):
            data = json.loads(kept[rel])
            for key in keys:
                data.pop(key, None)
            kept[rel] = json.dumps(data, sort_keys=True).encode()
    return kept
