"""The HumanEval sandbox contains hostile programs: loops, fork bombs, memory
bombs, deletions outside its folder, killing the parent. Limits are kept
small: this machine has 2 shared cores. Programs run in children forked by
one pre-warmed worker per slot: the worker is reused, cannot be touched by
its programs, and a worker that dies or hangs costs one `error`, not a hang."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from evalkit.forgetting import sandbox
from evalkit.forgetting.sandbox import Limits, run_program

ROOT = os.geteuid() == 0
SMALL = Limits(timeout=3.0, cpu_seconds=3, memory_mb=256, max_procs=4, file_mb=1)
# Layers are tested one at a time too: without the in-child guard, only
# privileges, rlimits and the process-group/uid kill remain.
UNGUARDED = Limits(timeout=3.0, cpu_seconds=3, memory_mb=256, max_procs=4, file_mb=1, guard=False)


def _leftovers() -> list[int]:
    return sandbox.uid_processes(sandbox._sandbox_uid(0)) if ROOT else []


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
                   f"open({str(canary)!r}, 'w').write('')"):
        result = run_program(attack, limits)
        assert result.status == "error", (attack, result)
        assert canary.read_text() == "alive"


@pytest.mark.parametrize("limits", [SMALL, UNGUARDED], ids=["guarded", "unguarded"])
def test_killing_the_parent_fails(limits):
    if not limits.guard and not ROOT:
        pytest.skip("without the guard, only the privilege drop (root) protects the parent")
    result = run_program("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", limits)
    assert result.status == "error"
    # Still here: the test process (the parent) is alive.
    assert os.getpid() > 0


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
        assert result.status == "error" and "PermissionError" in result.detail, (attack, result)
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
    result = run_program(orphan, UNGUARDED)
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
    monkeypatch.setattr(sandbox, "LAUNCHER", "import os, sys\n"
                        "os.execv(sys.argv[1], [sys.argv[1], '-I', '-S', *sys.argv[2:], '0'])")
    try:
        escape = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(30)\n"
        assert run_program(escape, UNGUARDED).status == "passed"
        assert _leftovers() == []
        assert open(f"/proc/{_worker_pid()}/cmdline", "rb").read().split(b"\0")[-2] == b"0"
    finally:
        sandbox._shutdown_workers()
