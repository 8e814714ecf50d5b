"""SIGTERM (`kill PID`, `timeout`, a scheduler pre-empting a job) is handled as Ctrl-C is: what
was done is recorded before the exit (a study stage's status and time), the exit code is 143
and the message says how to resume; the handler is put back after the command."""

import json
import os
import signal
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from evalkit.errors import handle_errors

STUDIES = Path(__file__).resolve().parents[1] / "studies"
runner = CliRunner()


def _app(body):
    app = typer.Typer()
    app.command("run")(handle_errors(body))
    app.command("other")(lambda: None)  # two commands: `run` is a subcommand, as in evalkit
    return app


def _kill_self(sig):
    def body():
        os.kill(os.getpid(), sig)
        time.sleep(30)  # the signal arrives first
        raise AssertionError("the signal did not stop the command")
    return body


@pytest.mark.parametrize(("sig", "code", "word"), [(signal.SIGTERM, 143, "terminated (SIGTERM)"),
                                                   (signal.SIGINT, 130, "interrupted")])
def test_a_signal_ends_the_command_with_a_resume_line(sig, code, word):
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if ignored:  # started as a background job (`make test &`): the shell ignores Ctrl-C for it, so Python set no
        signal.signal(signal.SIGINT, signal.default_int_handler)  # KeyboardInterrupt handler; as in a terminal here
    try:
        before = signal.getsignal(signal.SIGTERM)
        result = runner.invoke(_app(_kill_self(sig)), ["run"])
        assert result.exit_code == code, result.output
        assert f"{word}: results written so far are kept; rerun the same command to resume" in result.output
        assert signal.getsignal(signal.SIGTERM) is before  # put back
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_a_terminated_study_records_the_stage_as_interrupted_with_its_time(tmp_path, monkeypatch):
    import evalkit.study as study
    from evalkit.cli import app
    from evalkit.study.stages import Stage

    def done(folder, results):
        folder.mkdir(parents=True)
        return {"file": "x"}

    def killed(folder, results):
        folder.mkdir(parents=True)
        time.sleep(0.2)
        _kill_self(signal.SIGTERM)()

    stages = [Stage("first", "first", (), {"inputs": {}}, 0, done),
              Stage("second", "second", ("first",), {"inputs": {"first": ""}}, 0, killed)]
    monkeypatch.setattr("evalkit.study.stages.plan", lambda spec, sampler=None: stages)
    out = tmp_path / "study"
    result = runner.invoke(app, ["study", str(STUDIES / "smoke.toml"), "--out", str(out)])
    assert result.exit_code == 143, result.output
    recorded = json.loads((out / study.STUDY_FILE).read_text())["stages"]
    assert recorded["first"]["status"] == "done"
    assert recorded["second"]["status"] == "interrupted" and recorded["second"]["seconds"] >= 0.2


def test_a_sigterm_ignored_by_whoever_started_evalkit_stays_ignored():
    def body():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # nothing arrives: the command goes on and ends normally

    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        result = runner.invoke(_app(body), ["run"])
        assert result.exit_code == 0, result.output
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)
