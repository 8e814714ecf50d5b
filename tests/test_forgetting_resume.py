"""`evalkit forgetting` resumes from its journal: killed with SIGKILL and rerun, it writes
exactly the forgetting.json and items.jsonl of an uninterrupted run (byte for byte: neither file
holds a timing); a rerun of a finished run loads no model; other settings are refused naming
the setting; a torn last line is redone; a corrupt line in the middle is one line, exit 2."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import typer
from typer.testing import CliRunner

from evalkit.cli_forgetting import forgetting
from evalkit.errors import handle_errors
from evalkit.forgetting.journal import JOURNAL

app = typer.Typer()
app.command()(handle_errors(forgetting))
runner = CliRunner()

OUTPUTS = ("forgetting.json", "items.jsonl")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from helpers.tinymodel import make_tiny_model

    folder = tmp_path_factory.mktemp("models")
    return make_tiny_model(folder / "base", seed=0), make_tiny_model(folder / "other", seed=1)


@pytest.fixture(scope="module")
def mc_file(tmp_path_factory):
    rows = [{"question": f"{i} + {i} =", "choices": [str(2 * i), str(i), str(i + 1)][: 2 + i % 2], "answer": 0}
            for i in range(24)]
    path = tmp_path_factory.mktemp("mc") / "sums.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _args(models, mc_file, out, *extra):
    base, model = models
    return [str(base), str(model), "--suite", "letter_counting", "--mc-file", f"sums={mc_file}", "--limit", "24",
            "--batch-size", "2", "--max-new-tokens", "12", "--train-task", "arith", "--kl-prompts", "4",
            "--kl-max-new-tokens", "6", "--device", "cpu", "--grader-workers", "1", "--out", str(out), *extra]


# 12 generation batches and 30 pair batches (24 items, 60 choices) per model, and the KL
UNITS = 2 * (12 + 30) + 1


def _invoke(*args):
    return runner.invoke(app, list(args))


@pytest.fixture(scope="module")
def whole(models, mc_file, tmp_path_factory):
    """An uninterrupted run: the reference."""
    out = tmp_path_factory.mktemp("whole") / "run"
    result = _invoke(*_args(models, mc_file, out))
    assert result.exit_code == 0, result.output
    return out


def _lines(path):
    return path.read_bytes().splitlines(keepends=True)


def _same_outputs(folder, reference):
    for name in OUTPUTS:
        assert (folder / name).read_bytes() == (reference / name).read_bytes(), name


def test_journal_holds_every_unit_once(whole):
    lines = _lines(whole / JOURNAL)
    header, records = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    assert header["journal"] == "forgetting" and header["identity"]["batch_size"] == 2
    keys = [("kl",) if "kl" in r else (r["benchmark"], r["side"], r["unit"]) for r in records]
    assert len(keys) == len(set(keys)) == UNITS
    report = json.loads((whole / "forgetting.json").read_text())
    assert report["kl"]["status"] == "computed" and [r["n"] for r in report["benchmarks"]] == [24, 24]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM])
def test_killed_then_resumed_matches_uninterrupted(models, mc_file, whole, tmp_path, sig):
    out = tmp_path / "killed"
    cmd = [sys.executable, "-c", "from evalkit.cli import main; main()", "forgetting", *_args(models, mc_file, out)]
    # the child gets Ctrl-C's default disposition itself: under `nohup` or a background job of a
    # non-interactive shell (CI runners) it would inherit SIGINT ignored and never see the signal
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    journal = out / JOURNAL
    deadline = time.monotonic() + 300
    seen = 0
    while time.monotonic() < deadline and proc.poll() is None:
        seen = journal.read_bytes().count(b"\n") - 1 if journal.exists() else 0
        if seen >= 5:
            break
        time.sleep(0.005)
    os.kill(proc.pid, sig)  # SIGINT: Ctrl-C; SIGTERM: kill PID, a scheduler's pre-emption
    assert proc.wait() == {signal.SIGKILL: -signal.SIGKILL, signal.SIGINT: 130, signal.SIGTERM: 143}[sig]
    partial = journal.read_bytes().count(b"\n") - 1
    if partial >= UNITS or (out / "forgetting.json").exists():
        pytest.fail("the run finished before it could be killed; make it longer")
    assert partial >= seen >= 5  # every unit finished before the signal is kept

    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert f"{partial} of {UNITS} units done by an earlier run, reused" in result.stderr
    _same_outputs(out, whole)
    records = [json.loads(line) for line in _lines(journal)[1:]]
    assert len(records) == UNITS  # nothing computed twice


def test_finished_run_reruns_without_model_work(models, mc_file, whole, tmp_path, monkeypatch):
    import evalkit.models

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(evalkit.models, "load_model", refuse)
    out = shutil.copytree(whole, tmp_path / "again")
    result = _invoke(*_args(models, mc_file, out))
    assert result.exit_code == 0, result.output
    assert f"{UNITS} of {UNITS} units done by an earlier run, reused" in result.output
    _same_outputs(out, whole)
    assert (out / JOURNAL).read_bytes() == (whole / JOURNAL).read_bytes()

    # the statistics are not part of the journal's identity: recomputed from the units
    result = _invoke(*_args(models, mc_file, out, "--alpha", "0.5"))
    assert result.exit_code == 0, result.output
    report = json.loads((out / "forgetting.json").read_text())
    assert report["statistics"]["alpha"] == 0.5 and "alpha 0.5" in report["verdict"]
    assert (out / "items.jsonl").read_bytes() == (whole / "items.jsonl").read_bytes()


@pytest.mark.parametrize("extra,named", [
    (["--max-new-tokens", "13"], "max_new_tokens=12, not 13"),
    (["--limit", "23"], "limit=24, not 23"),
    (["--kl-prompts", "5"], "kl.prompts=4, not 5"),
])
def test_other_settings_are_refused_naming_them(models, mc_file, whole, tmp_path, extra, named):
    out = shutil.copytree(whole, tmp_path / "other")
    result = _invoke(*_args(models, mc_file, out, *extra))
    assert result.exit_code == 2, result.output
    assert named in result.output and "use another --out" in result.output
    assert result.output.strip().count("\n") == 0, result.output  # one line
    assert (out / JOURNAL).read_bytes() == (whole / JOURNAL).read_bytes()


def test_another_model_is_refused_naming_its_weights(models, mc_file, whole, tmp_path):
    out = shutil.copytree(whole, tmp_path / "swapped")
    base, model = models
    args = _args(models, mc_file, out)
    args[0], args[1] = str(model), str(base)
    result = _invoke(*args)
    assert result.exit_code == 2 and "base.sha256=" in result.output, result.output


def test_torn_last_line_is_redone(models, mc_file, whole, tmp_path):
    out = shutil.copytree(whole, tmp_path / "torn")
    for name in OUTPUTS:
        (out / name).unlink()
    journal = out / JOURNAL
    lines = _lines(journal)
    journal.write_bytes(b"".join(lines[:-3]) + lines[-3][: len(lines[-3]) // 2])  # killed mid-write
    result = _invoke(*_args(models, mc_file, out))
    assert result.exit_code == 0, result.output
    assert f"{UNITS - 3} of {UNITS} units done by an earlier run, reused" in result.output
    _same_outputs(out, whole)
    assert len(_lines(journal)) == UNITS + 1 and all(json.loads(line) for line in _lines(journal))


def test_corrupt_middle_line_is_one_line_naming_it(models, mc_file, whole, tmp_path):
    out = shutil.copytree(whole, tmp_path / "corrupt")
    journal = out / JOURNAL
    lines = _lines(journal)
    lines[4] = b'{"benchmark": "letter_cou\x00\n'
    journal.write_bytes(b"".join(lines))
    result = _invoke(*_args(models, mc_file, out))
    assert result.exit_code == 2, result.output
    assert result.output.strip().count("\n") == 0, result.output
    assert f"{journal}:5: corrupt line" in result.output and "delete line 5" in result.output

    del lines[4]  # the way out the message gives: that unit is computed again
    journal.write_bytes(b"".join(lines))
    result = _invoke(*_args(models, mc_file, out))
    assert result.exit_code == 0, result.output
    _same_outputs(out, whole)


def test_valid_json_that_is_no_unit_of_this_run_is_refused(models, mc_file, whole, tmp_path):
    out = shutil.copytree(whole, tmp_path / "alien")
    journal = out / JOURNAL
    lines = _lines(journal)
    record = json.loads(lines[3])
    record["range"] = [record["range"][0], record["range"][1] + 1]
    lines[3] = (json.dumps(record) + "\n").encode()
    journal.write_bytes(b"".join(lines))
    result = _invoke(*_args(models, mc_file, out))
    assert result.exit_code == 2 and f"{journal}:4: corrupt line (not a unit of this run)" in result.output
