"""A kill at any instant, then a rerun, gives the finished result (issue 43; docs/reliability.md).

Each command runs once, traced, to list the calls by which it changes what is under its folder
(every open for writing, write, rename, link, removal, mkdir and truncation). Then, for every one
of them: the inputs made again, the command killed (SIGKILL) on entering that call, the same
command run again untraced, and everything under the folder compared byte for byte with what
the uninterrupted run left; no temporary file of a dead writer is left. The kill is injected by
strace at the n-th call of that name on the folder's paths (`inject=SYSCALL:signal=SIGKILL:when=N`),
not at a timed instant (tests/helpers/killpoints.py). A call that changes nothing on disk (an open
for reading, fsync, flock: a SIGKILL keeps the page cache) leaves what a kill at the next call
leaves, so it is not a kill point of its own.

Skipped, with the reason, where strace cannot attach to a process (a container without ptrace);
`make test` sets EVALKIT_REQUIRE_STRACE=1 where strace is installed, and there it fails instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import killpoints
from helpers.refusals import fill

# Fields that differ between two uninterrupted runs of the same command, masked before comparing
# (relative path under the case's folder -> JSON keys at the top level); nothing else is.
#   passk, interpolate's points: summary.json's `timing` (wall seconds, tokens per second).
VARIES = {"summary.json": ("timing",)}

SMALL = ["--task", "arith", "--limit", "2", "--max-new-tokens", "4", "--batch-size", "2", "--device", "cpu",
         "--threads", "1"]


@pytest.fixture(scope="module")
def zygote():
    why = killpoints.strace_works()
    if why is not None:
        if os.environ.get("EVALKIT_REQUIRE_STRACE") == "1":
            pytest.fail(f"EVALKIT_REQUIRE_STRACE=1 but {why}")
        pytest.skip(f"needs strace attached to a process: {why}")
    with killpoints.Zygote() as z:
        yield z


def test_strace_is_there_when_the_make_target_says_so():
    """`make test` sets EVALKIT_REQUIRE_STRACE where strace is installed: a broken one fails loudly."""
    if os.environ.get("EVALKIT_REQUIRE_STRACE") == "1":
        assert killpoints.strace_works() is None, killpoints.strace_works()


@pytest.fixture(scope="module")
def inputs(tiny_model, tmp_path_factory, zygote):
    """The tiny model and a planted copy, a finished passk run of it (regrade's and report's
    input), and an import file in evalkit's plain JSONL format with its own grades."""
    from helpers.formats import planted_copy
    from test_import import write_jsonl

    root = tmp_path_factory.mktemp("kill-inputs")
    trained = planted_copy(tiny_model, root / "trained")
    run = root / "run"
    done = zygote.run(["passk", str(tiny_model), "--n", "2", "--k", "1,2", *SMALL, "--out", str(run)], run)
    assert done.code == 0, done.output
    (run / ".lock").unlink()  # a run as a user copies it: the copies below start with no lock
    source, extra = write_jsonl(root)
    return {"model": tiny_model, "trained": trained, "run": run, "source": source, "source_args": extra}


def _fresh(work: Path) -> None:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)


def _run_copy(inputs, work: Path) -> dict:
    _fresh(work)
    shutil.copytree(inputs["run"], work / "run")
    return {"out": work / "run"}


CASES = {
    "passk": (["passk", "{model}", "--n", "2", "--k", "1,2", *SMALL, "--out", "{out}"],
              lambda inputs, work: (_fresh(work), {"out": work / "out"})[1]),
    "interpolate": (["interpolate", "{model}", "{trained}", "--points", "2", "--n", "1", "--k", "1", *SMALL,
                     "--out", "{out}"],
                    lambda inputs, work: (_fresh(work), {"out": work / "out"})[1]),
    "import": (["import", "jsonl", "{source}", "{source_args}", "--out", "{out}"],
               lambda inputs, work: (_fresh(work), {"out": work / "out"})[1]),
    "regrade": (["regrade", "{out}"], _run_copy),
    "report": (["report", "{run}", "--out", "{out}"],
               lambda inputs, work: (_fresh(work), {"out": work / "out"})[1]),
}


def _argv(template: list[str], inputs: dict, fills: dict) -> list[str]:
    values = {**inputs, **fills}
    argv = []
    for arg in template:
        if arg == "{source_args}":
            argv += inputs["source_args"]
        else:
            argv.append(fill(arg, values))
    return argv


def _seen(work: Path) -> dict:
    """What is under `work` (killpoints.state), the fields that vary between runs masked."""
    files = killpoints.state(work)
    drop = {rel: keys for rel in files for name, keys in VARIES.items() if rel.rsplit("/", 1)[-1] == name}
    return killpoints.without(files, drop)


def _dead_temps(work: Path) -> list[str]:
    from evalkit.jsonio import temp_writer, writer_running

    return [str(p) for p in work.rglob("*") if (pid := temp_writer(p.name)) is not None and not writer_running(pid)]


def _first_difference(want: dict, got: dict) -> str:
    for rel in sorted(set(want) | set(got)):
        if want.get(rel, "absent") != got.get(rel, "absent"):
            return f"{rel}: {'absent' if rel not in want else 'kept'} in the uninterrupted run, " \
                   f"{'absent' if rel not in got else 'different'} after the kill and rerun"
    return ""


@pytest.mark.parametrize("name", list(CASES))
def test_a_kill_at_every_write_then_a_rerun_gives_the_uninterrupted_result(zygote, inputs, tmp_path, name):
    template, prepare = CASES[name]
    work = tmp_path / "work"
    fills = prepare(inputs, work)
    argv, out = _argv(template, inputs, fills), Path(fills["out"])
    whole = zygote.run(argv, out, trace=True)
    assert whole.code == 0, whole.output
    want = _seen(work)
    points = killpoints.kill_points(whole.trace)
    paths = killpoints.traced_paths(whole.trace, out)
    assert len(points) >= 5, [c.line for c in whole.trace]
    rerun_from = set()  # what kills left: a rerun depends only on that (and the inputs), so each is rerun once
    for call in points:
        prepare(inputs, work)
        killed = zygote.run(argv, out, kill=call, paths=paths)
        where = f"{name} killed on entering {call.name} #{call.n} ({call.line})"
        assert killed.code == -9, f"{where}: not killed: {killed.output}"
        assert killed.trace and killed.trace[-1].paths == call.paths, f"{where}: killed at {killed.trace[-1:]}"
        left = frozenset(killpoints.state(work).items())
        if left in rerun_from:
            continue
        rerun_from.add(left)
        rerun = zygote.run(argv, out)
        assert rerun.code == 0, f"{where}; the rerun: {rerun.output}"
        assert not _dead_temps(work), f"{where}; left {_dead_temps(work)}"
        got = _seen(work)
        assert got == want, f"{where}: {_first_difference(want, got)}"


def _dead_pid() -> int:
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def test_only_dead_writers_temporary_files_are_removed(zygote, inputs, tmp_path):
    """A rerun (here: regrade in place, a folder evalkit locked before) removes the temporary files of
    writers that no longer run, and keeps a live writer's and every file not named as evalkit names them."""
    from evalkit.jsonio import writer_running

    run = _run_copy(inputs, tmp_path)["out"]
    (run / ".lock").write_text("")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        dead = _dead_pid()
        assert not writer_running(dead)
        kept = [f".summary.json.tmp{live.pid}", ".summary.json.tmp", "summary.json.tmp12", ".notes.tmp12x"]
        for name in kept:
            (run / name).write_text("a part")
        (run / f".summary.json.tmp{dead}").write_text("a part")
        done = zygote.run(["regrade", str(run)], run)
        assert done.code == 0, done.output
        assert not (run / f".summary.json.tmp{dead}").exists()
        assert all((run / name).read_text() == "a part" for name in kept)
    finally:
        live.kill()
        live.wait()


def _traced(zygote, argv, out):
    whole = zygote.run(argv, out, trace=True)
    assert whole.code == 0, whole.output
    return whole


def _one_error_line(output: str, fragment: str) -> str:
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and output.rstrip("\n").splitlines()[-1] == errors[0], output
    assert fragment in errors[0], output
    return errors[0]


def _write_to(trace, suffix: str):
    return next(c for c in trace if c.name == "write" and any(p.endswith(suffix) for p in c.paths))


def test_a_full_disk_is_one_line_and_keeps_what_was_complete(zygote, inputs, tmp_path):
    """ENOSPC injected at a write (strace `inject=write:error=ENOSPC:when=N`): exit 2, one line, and
    what was complete is kept. passk: at the samples' append (run.json kept, the rerun finishes
    the run) and at the summary's (run.json and samples.jsonl kept, the same bytes); import: at its
    summary (the finished import kept beside --out, named in the line)."""
    template, prepare = CASES["passk"]
    work = tmp_path / "passk"
    fills = prepare(inputs, work)
    argv, out = _argv(template, inputs, fills), fills["out"]
    whole = _traced(zygote, argv, out)
    want = _seen(work)
    paths = killpoints.traced_paths(whole.trace, out)
    for suffix, kept in (("samples.jsonl", ("run.json",)), (".summary.json.tmp{pid}", ("run.json", "samples.jsonl"))):
        prepare(inputs, work)
        full = zygote.run(argv, out, kill=_write_to(whole.trace, suffix), fault="error=ENOSPC", paths=paths)
        assert full.code == 2, full.output
        _one_error_line(full.output, "No space left on device")
        got = _seen(work)
        assert all(got[f"out/{name}"] == want[f"out/{name}"] for name in kept), suffix
        assert "out/summary.json" not in got and not _dead_temps(work), sorted(got)
        assert zygote.run(argv, out).code == 0 and _seen(work) == want  # the rerun finishes it

    template, prepare = CASES["import"]
    work = tmp_path / "import"
    fills = prepare(inputs, work)
    argv, out = _argv(template, inputs, fills), fills["out"]
    whole = _traced(zygote, argv, out)
    want = _seen(work)
    prepare(inputs, work)
    full = zygote.run(argv, out, kill=_write_to(whole.trace, ".summary.json.tmp{pid}"), fault="error=ENOSPC",
                      paths=killpoints.traced_paths(whole.trace, out))
    assert full.code == 2, full.output
    line = _one_error_line(full.output, "No space left on device")
    rescued = next(work.glob("out.rescued-*"))
    assert f"kept in {rescued}" in line, line
    got = _seen(rescued)
    assert {name: got[name] for name in ("run.json", "samples.jsonl", "summary.json")} == \
        {name: want[f"out/{name}"] for name in ("run.json", "samples.jsonl", "summary.json")}
