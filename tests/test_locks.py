"""One writer per run folder: a second passk, regrade or study into a folder in use gets one line
naming the holder's pid and exit 2, writing nothing; the lock dies with its process (SIGKILL)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.locking import held_by_another_process
from typer.testing import CliRunner

from evalkit.cli import app
from evalkit.errors import UsageError
from evalkit.locks import FolderLock

runner = CliRunner()
FAST = ["--n", "2", "--k", "1,2", "--limit", "2", "--max-new-tokens", "4", "--batch-size", "4"]


def test_a_second_passk_into_a_folder_in_use_is_refused(tiny_model, tmp_path):
    out = tmp_path / "run"
    with held_by_another_process(out) as pid:
        result = runner.invoke(app, ["passk", str(tiny_model), *FAST, "--out", str(out)])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert f"being written by process {pid}" in result.output
    assert sorted(p.name for p in out.iterdir()) == [".lock"]  # nothing written by the refused run
    again = runner.invoke(app, ["passk", str(tiny_model), *FAST, "--out", str(out)])  # free again
    assert again.exit_code == 0, again.output


def test_regrade_and_study_take_the_same_lock(tmp_path):
    import shutil

    run = Path(shutil.copytree(Path(__file__).parent / "data" / "run_v01", tmp_path / "old"))
    with held_by_another_process(run):
        result = runner.invoke(app, ["regrade", str(run)])
    assert result.exit_code == 2 and "being written by process" in result.output
    study = tmp_path / "study"
    with held_by_another_process(study):
        result = runner.invoke(app, ["study", str(Path(__file__).parents[1] / "studies" / "smoke.toml"),
                                     "--out", str(study)])
    assert result.exit_code == 2 and "being written by process" in result.output


def _another_process_can_lock(folder: Path) -> bool:
    code = "import sys; from evalkit.locks import FolderLock; FolderLock(sys.argv[1]).release()"
    return subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True).returncode == 0


def test_within_one_process_a_folder_can_be_reopened(tmp_path):
    folder = tmp_path / "f"
    first = FolderLock(folder)
    second = FolderLock(folder)  # e.g. a run resumed by the process that holds it
    assert first.held and second.held
    second.release()
    assert not _another_process_can_lock(folder)  # one holder left: still held
    first.release()
    assert _another_process_can_lock(folder)  # every holder released: free for the next one
    again = FolderLock(folder)
    assert again.held
    again.release()


def test_the_lock_dies_with_a_killed_process(tmp_path):
    folder = tmp_path / "held"
    code = ("import sys, time; from evalkit.locks import FolderLock; lock = FolderLock(sys.argv[1]); "
            "print('locked', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    with pytest.raises(UsageError, match=f"process {proc.pid}"):
        FolderLock(folder)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while True:  # the kernel drops a dead process's flock
        try:
            FolderLock(folder).release()
            break
        except UsageError:
            assert time.monotonic() < deadline
            time.sleep(0.1)
