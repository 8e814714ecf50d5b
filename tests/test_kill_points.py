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

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import killpoints
from helpers.refusals import fill

from evalkit.outdir import MARK

# Fields that differ between two uninterrupted runs of the same command, masked before comparing
# (a file's name -> JSON keys at its top level); nothing else is:
#   summary.json's `timing` (passk, interpolate's points: wall seconds and tokens of this session).
VARIES = {"summary.json": ("timing",)}
WORKERS = 2  # zygotes run side by side, each killing every other call: one per core
REAL = Path(__file__).parent / "data" / "real"
LM_EVAL = REAL / "lm-eval-pyfade" / "gsm8k" / "samples_gsm8k_2025-09-09T13-31-53.431753.jsonl"  # 3 documents

SMALL = ["--task", "arith", "--limit", "2", "--max-new-tokens", "4", "--batch-size", "2", "--device", "cpu",
         "--threads", "1", "--grader-workers", "1"]


@pytest.fixture(scope="module")
def zygotes():
    why = killpoints.strace_works()
    if why is not None:
        if os.environ.get("EVALKIT_REQUIRE_STRACE") == "1":
            pytest.fail(f"EVALKIT_REQUIRE_STRACE=1 but {why}")
        pytest.skip(f"needs strace attached to a process: {why}")
    with ThreadPoolExecutor(WORKERS) as pool:
        started = list(pool.map(lambda _: killpoints.Zygote(), range(WORKERS)))
    try:
        yield started
    finally:
        for zygote in started:
            zygote.close()


def test_strace_is_there_when_the_make_target_says_so():
    """`make test` sets EVALKIT_REQUIRE_STRACE where strace is installed: a broken one fails loudly."""
    if os.environ.get("EVALKIT_REQUIRE_STRACE") == "1":
        assert killpoints.strace_works() is None, killpoints.strace_works()


@pytest.fixture(scope="module")
def inputs(tiny_model, tmp_path_factory, zygotes):
    """The tiny model and a planted copy, a finished passk run of it (regrade's input), and a
    finished import of a real lm-eval file (report's input: its smallest report)."""
    from helpers.formats import planted_copy

    root = tmp_path_factory.mktemp("kill-inputs")
    trained = planted_copy(tiny_model, root / "trained")
    made = {"model": tiny_model, "trained": trained, "run": root / "run", "imported": root / "imported",
            "lm_eval": LM_EVAL}
    for argv in (["passk", "{model}", "--n", "2", "--k", "1,2", *SMALL, "--out", "{run}"],
                 ["import", "lm-eval", "{lm_eval}", "--partial", "--out", "{imported}"]):
        done = zygotes[0].run([fill(a, made) for a in argv], root)
        assert done.code == 0, done.output
    for run in (made["run"], made["imported"]):
        (run / ".lock").unlink()  # runs as a user copies them: the copies below start with no lock
    for i, zygote in enumerate(zygotes):  # matplotlib's caches warm: a report costs its own figures only
        zygote.warm_here(["report", made["imported"], "--out", root / f"warm-{i}"])
    return made


def _fresh(work: Path) -> dict:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    return {"out": work / "out"}


def _run_copy(inputs, work: Path) -> dict:
    _fresh(work)
    shutil.copytree(inputs["run"], work / "run")
    return {"out": work / "run"}


CASES = {  # command -> (argv, prepare(inputs, work) -> fills: the same inputs under `work` each time)
    "passk": (["passk", "{model}", "--n", "2", "--k", "1,2", *SMALL, "--out", "{out}"], lambda i, w: _fresh(w)),
    "interpolate": (["interpolate", "{model}", "{trained}", "--points", "2", "--n", "1", "--k", "1", *SMALL,
                     "--out", "{out}"], lambda i, w: _fresh(w)),
    "import": (["import", "lm-eval", "{lm_eval}", "--partial", "--out", "{out}"], lambda i, w: _fresh(w)),
    "regrade": (["regrade", "{out}", "--grader-workers", "1"], _run_copy),
    "report": (["report", "{imported}", "--out", "{out}"], lambda i, w: _fresh(w)),
}


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


@dataclass
class _Worker:
    """One zygote's share of a command's kill points, in its own folder `work`."""

    zygote: killpoints.Zygote
    work: Path
    argv: list
    out: Path
    want: dict = None
    points: list = None
    paths: tuple = ()

    def reference(self, name: str, inputs: dict) -> None:
        template, prepare = CASES[name]
        fills = prepare(inputs, self.work)
        self.argv, self.out = [fill(a, {**inputs, **fills}) for a in template], fills["out"]
        whole = self.zygote.run(self.argv, self.out, trace=True)
        assert whole.code == 0, whole.output
        self.want, self.points = _seen(self.work), killpoints.kill_points(whole.trace)
        self.paths = killpoints.traced_paths(whole.trace, self.out)

    def kill_each(self, name: str, inputs: dict, points: list, rerun_from: set) -> int:
        """Kill at each of `points`, rerun where the state left is new; returns the reruns."""
        reruns = 0
        for call in points:
            CASES[name][1](inputs, self.work)
            killed = self.zygote.run(self.argv, self.out, kill=call, paths=self.paths)
            where = f"{name} killed on entering {call.name} #{call.n} ({call.line})"
            assert killed.code == -9, f"{where}: not killed: {killed.output}"
            assert killed.trace and killed.trace[-1].paths == call.paths, f"{where}: killed at {killed.trace[-1:]}"
            left = frozenset((k, v if v is None else v.replace(str(self.work).encode(), b"{work}"))
                             for k, v in killpoints.state(self.work).items())
            if left in rerun_from:
                continue
            rerun_from.add(left)
            reruns += 1
            rerun = self.zygote.run(self.argv, self.out)
            assert rerun.code == 0, f"{where}; the rerun: {rerun.output}"
            assert not _dead_temps(self.work), f"{where}; left {_dead_temps(self.work)}"
            got = _seen(self.work)
            assert got == self.want, f"{where}: {_first_difference(self.want, got)}"
        return reruns


@pytest.mark.parametrize("name", list(CASES))
def test_a_kill_at_every_write_then_a_rerun_gives_the_uninterrupted_result(zygotes, inputs, tmp_path, name):
    """Every kill point of the command, shared among the zygotes (each in its own folder, against
    its own uninterrupted run: the folders' paths are in the files); a state a kill left that
    was already rerun (a call that changed nothing, such as removing a file already renamed) is
    not rerun again: a rerun depends only on what is on disk and the inputs."""
    workers = [_Worker(z, tmp_path / f"work{i}", [], Path()) for i, z in enumerate(zygotes)]
    with ThreadPoolExecutor(len(workers)) as pool:
        list(pool.map(lambda w: w.reference(name, inputs), workers))
        first = [(c.name, c.n) for c in workers[0].points]
        assert len(first) >= 5 and all([(c.name, c.n) for c in w.points] == first for w in workers[1:])
        rerun_from = set()
        shares = [pool.submit(w.kill_each, name, inputs, w.points[i :: len(workers)], rerun_from)
                  for i, w in enumerate(workers)]
        reruns = sum(share.result() for share in shares)
    assert reruns >= 3


def _dead_pid() -> int:
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def test_only_dead_writers_temporary_files_are_removed(zygotes, inputs, tmp_path):
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
        done = zygotes[0].run(["regrade", str(run)], run)
        assert done.code == 0, done.output
        assert not (run / f".summary.json.tmp{dead}").exists()
        assert all((run / name).read_text() == "a part" for name in kept)
    finally:
        live.kill()
        live.wait()


def test_the_folder_an_import_before_issue_43_left_is_removed_once_its_writer_is_gone(zygotes, inputs, tmp_path):
    """Imports before issue 43 wrote `.<out>.import-PID` beside `--out` and renamed it into place;
    one a kill left (its writer gone, holding only what an import writes) is removed by the next
    import into that `--out`; a live writer's stays."""
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        dead = _dead_pid()
        for pid in (dead, live.pid):
            shutil.copytree(inputs["imported"], tmp_path / f".out.import-{pid}")
        done = zygotes[0].run(["import", "lm-eval", str(LM_EVAL), "--partial", "--out", str(tmp_path / "out")], tmp_path)
        assert done.code == 0, done.output
        assert sorted(p.name for p in tmp_path.iterdir()) == [f".out.import-{live.pid}", "out"]
    finally:
        live.kill()
        live.wait()


def _case(name: str, inputs: dict, work: Path) -> tuple[list[str], Path]:
    template, prepare = CASES[name]
    fills = prepare(inputs, work)
    return [fill(a, {**inputs, **fills}) for a in template], fills["out"]


def _one_error_line(output: str, fragment: str) -> str:
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and output.rstrip("\n").splitlines()[-1] == errors[0], output
    assert fragment in errors[0], output
    return errors[0]


def _write_to(trace, suffix: str):
    return next(c for c in trace if c.name == "write" and any(p.endswith(suffix) for p in c.paths))


def _full_disk_in_passk(zygote, inputs, work: Path) -> None:
    """ENOSPC at the samples' append (run.json kept), then at the summary's write (run.json and
    samples.jsonl kept, the same bytes): one line each, and the rerun finishes the run."""
    argv, out = _case("passk", inputs, work)
    whole = zygote.run(argv, out, trace=True)
    want, paths = _seen(work), killpoints.traced_paths(whole.trace, out)
    for suffix, kept in (("samples.jsonl", ("run.json",)), (".summary.json.tmp{pid}", ("run.json", "samples.jsonl"))):
        _case("passk", inputs, work)
        full = zygote.run(argv, out, kill=_write_to(whole.trace, suffix), fault="error=ENOSPC", paths=paths)
        assert full.code == 2, full.output
        _one_error_line(full.output, "No space left on device")
        got = _seen(work)
        assert all(got[f"out/{name}"] == want[f"out/{name}"] for name in kept), suffix
        assert "out/summary.json" not in got and not _dead_temps(work), sorted(got)
        assert zygote.run(argv, out).code == 0 and _seen(work) == want  # the rerun finishes it


def _full_disk_kept_beside(zygote, inputs, work: Path, case: tuple[str, str, tuple[str, ...]]) -> None:
    """ENOSPC at the write of `case`'s temporary file (command, temporary name, files not rescued):
    one line naming the folder beside --out that holds the finished result, byte for byte the
    uninterrupted one's."""
    command, temporary, left = case
    argv, out = _case(command, inputs, work)
    whole = zygote.run(argv, out, trace=True)
    want = _seen(work)
    _case(command, inputs, work)
    full = zygote.run(argv, out, kill=_write_to(whole.trace, temporary), fault="error=ENOSPC",
                      paths=killpoints.traced_paths(whole.trace, out))
    assert full.code == 2, full.output
    line = _one_error_line(full.output, "No space left on device")
    rescued = next(work.glob("out.rescued-*"))
    assert f"kept in {rescued}" in line, line
    got = {f"out/{rel}": data for rel, data in _seen(rescued).items()}
    assert got == {rel: data for rel, data in want.items() if rel not in ("out", "out/.lock", *left)}


def _full_disk_in_import(zygote, inputs, work: Path) -> None:
    """ENOSPC at the summary's write: the finished import is kept beside --out."""
    _full_disk_kept_beside(zygote, inputs, work, ("import", ".summary.json.tmp{pid}", ()))


def _full_disk_in_regrade(zygote, inputs, work: Path) -> None:
    """ENOSPC at the first append of new grades: one line naming where the grades so far are kept;
    the old samples, summary and run.json untouched; the rerun regrades to the uninterrupted bytes."""
    argv, out = _case("regrade", inputs, work)
    whole = zygote.run(argv, out, trace=True)
    want = _seen(work)
    before = _seen(_case("regrade", inputs, work)[1].parent)
    full = zygote.run(argv, out, kill=_write_to(whole.trace, ".regrade.jsonl"), fault="error=ENOSPC",
                      paths=killpoints.traced_paths(whole.trace, out))
    assert full.code == 2, full.output
    _one_error_line(full.output, "No space left on device")
    got = _seen(work)
    assert all(got[rel] == before[rel] for rel in ("run/run.json", "run/samples.jsonl", "run/summary.json"))
    assert zygote.run(argv, out).code == 0 and _seen(work) == want  # the rerun finishes it


def _full_disk_in_report(zygote, inputs, work: Path) -> None:
    """ENOSPC at index.html's write: the finished report is kept beside --out."""
    _full_disk_kept_beside(zygote, inputs, work, ("report", ".index.html.tmp{pid}", ("out/" + MARK,)))


def test_a_full_disk_is_one_line_and_keeps_what_was_complete(zygotes, inputs, tmp_path):
    """ENOSPC injected at one write (strace `inject=write:error=ENOSPC:when=N`): exit 2, one line,
    and what was complete is kept (passk and regrade in their folder, import and report beside it)."""
    cases = [(_full_disk_in_passk, "passk"), (_full_disk_in_import, "import"), (_full_disk_in_regrade, "regrade"),
             (_full_disk_in_report, "report")]
    with ThreadPoolExecutor(len(zygotes)) as pool:
        shares = [pool.submit(lambda z, mine: [check(z, inputs, tmp_path / name) for check, name in mine],
                              zygote, cases[i :: len(zygotes)]) for i, zygote in enumerate(zygotes)]
        for share in shares:
            share.result()
