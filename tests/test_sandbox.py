"""The HumanEval sandbox contains hostile programs: loops, fork bombs, memory
bombs, deletions outside its folder, killing the parent. Limits are kept
small: this machine has 2 shared cores."""

import os
import time

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
