"""A run killed with SIGKILL mid-sampling, then rerun, yields exactly the
samples of an uninterrupted run: no duplicate, no loss. And the run store
cuts a torn last line."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from evalkit.errors import UsageError
from evalkit.rundir import RunDir

ARGS = ["--n", "3", "--k", "1,3", "--limit", "40", "--max-new-tokens", "24", "--batch-size", "3"]


def cli(model, out, *, wait=True):
    cmd = [sys.executable, "-c", "from evalkit.cli import main; main()", "passk", str(model), *ARGS, "--out", str(out)]
    if wait:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def keyed(path):
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return {(r["problem_id"], r["sample_index"]): r for r in records}, len(records)


@pytest.mark.slow
def test_sigkill_then_resume_matches_uninterrupted(tiny_model, tmp_path):
    whole = tmp_path / "whole"
    assert cli(tiny_model, whole).returncode == 0
    reference, count = keyed(whole / "samples.jsonl")
    assert count == 120

    killed = tmp_path / "killed"
    proc = cli(tiny_model, killed, wait=False)
    samples = killed / "samples.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if samples.exists() and samples.read_bytes().count(b"\n") >= 9:
            break
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = samples.read_bytes().count(b"\n")
    if partial >= 120:
        pytest.fail("the run finished before it could be killed; make it longer")

    result = cli(tiny_model, killed)
    assert result.returncode == 0, result.stderr
    resumed, resumed_count = keyed(samples)
    assert resumed_count == 120  # no duplicates
    assert resumed == reference  # same samples, bit for bit in text, entropy and seed


def test_torn_last_line_is_cut_on_reopen(tmp_path):
    settings = {"kind": "passk", "x": 1}
    run = RunDir.open(tmp_path / "r", settings)
    run.append([{"problem_id": "p", "sample_index": 0, "outcome": "correct"}])
    with open(tmp_path / "r" / "samples.jsonl", "ab") as fh:
        fh.write(b'{"problem_id": "p", "sampl')
    assert len(run.samples()) == 1
    run = RunDir.open(tmp_path / "r", settings)
    run.append([{"problem_id": "p", "sample_index": 1, "outcome": "incorrect"}])
    assert [r["sample_index"] for r in run.samples()] == [0, 1]


def test_settings_mismatch_names_the_key(tmp_path):
    run = RunDir.open(tmp_path / "r", {"kind": "passk", "seed": 0})
    run.append([{"problem_id": "p", "sample_index": 0, "outcome": "correct"}])
    run.lock.release()
    with pytest.raises(UsageError, match="seed=0"):
        RunDir.open(tmp_path / "r", {"kind": "passk", "seed": 1})


def test_a_folder_without_work_is_taken_over_by_another_command(tmp_path):
    """A start that failed before any work (only run.json and empty logs) does not lock the
    folder to its settings: the corrected command takes it over."""
    run = RunDir.open(tmp_path / "r", {"kind": "passk", "seed": 0})
    (tmp_path / "r" / "samples.jsonl").write_text("")
    run.lock.release()
    again = RunDir.open(tmp_path / "r", {"kind": "passk", "seed": 1})
    assert again.settings["seed"] == 1
    assert json.loads((tmp_path / "r" / "run.json").read_text())["seed"] == 1
