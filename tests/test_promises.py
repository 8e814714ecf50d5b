"""The run-folder promises, tried as an adversarial user would (docs/reliability.md):

1. a bad input gets one line and exit 2, with nothing written and the user's files untouched;
2. a crash at any instant loses no finished work, and a rerun resumes to identical results;
3. one writer per folder;
4. a command's output folder never overwrites or deletes a file it did not write.

Each table row is one input or fault; `_refused` checks exit 2, one line starting `error:`, no
traceback, the fragment, and that every file under the row's folder is byte-for-byte as before.
(The sandbox rows are in tests/test_sandbox.py and tests/test_forgetting_humaneval.py; the
first 85 bad inputs in tests/test_bad_inputs.py.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.refusals import assert_refused, snapshot
from typer.testing import CliRunner

from evalkit.cli import app

runner = CliRunner()
FAST = ["--n", "2", "--k", "1,2", "--limit", "2", "--max-new-tokens", "4", "--batch-size", "4", "--device", "cpu"]
USER_FILES = {  # a user's folder, with files named as evalkit's outputs are
    "index.html": b"<html>my site</html>", "figures/logo.png": b"\x89PNG my logo", "tables/data.csv": b"a,b\n1,2\n",
    "notes.txt": b"mine", "diff.json": b'{"mine": true}', "length.json": b'{"mine": 1}',
    "groups.json": b'{"mine": 2}', "run.json": b'{"mine": 3}', "forgetting.json": b"{}",
}


def _refused(args: list[str], fragment: str, root: Path) -> None:
    assert_refused(lambda: runner.invoke(app, args), fragment, root)


@pytest.fixture(scope="module")
def world(tiny_model, tmp_path_factory):
    """A finished passk run of the tiny model, a task file, an evalkit report and a trace file."""
    root = tmp_path_factory.mktemp("world")
    run = root / "run"
    assert runner.invoke(app, ["passk", str(tiny_model), *FAST, "--out", str(run)]).exit_code == 0
    report = root / "report"
    assert runner.invoke(app, ["report", str(run), "--out", str(report)]).exit_code == 0
    traces = root / "traces.jsonl"
    traces.write_text(json.dumps({"prompt": "1+1?", "completion": "2"}) + "\n")
    return {"model": str(tiny_model), "run": run, "report": report, "traces": traces, "root": root}


def _user_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "site"
    for name, data in USER_FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


def _fill(args, world, out):
    return [a.replace("{model}", world["model"]).replace("{run}", str(world["run"]))
             .replace("{traces}", str(world["traces"])).replace("{report}", str(world["report"]))
             .replace("{out}", str(out)) for a in args]


# ---------------------------------------------------------------- 1. a user's folder as --out

FOREIGN = [
    (["report", "{run}", "--out", "{out}"], "which is not an evalkit output"),
    (["diff", "{model}", "{model}", "--out", "{out}"], "which is not an evalkit output"),
    (["entropy", "{run}", "--out", "{out}"], "which is not an evalkit output"),
    (["length", "{run}", "--out", "{out}"], "which is not an evalkit output"),
    (["groups", "{run}", "--out", "{out}"], "which is not an evalkit output"),
    (["traces", "{model}", "--traces", "{traces}", "--device", "cpu", "--out", "{out}"],
     "which is not an evalkit output"),
    (["forgetting", "{model}", "{model}", "--suite", "letter_counting", "--limit", "1", "--device", "cpu",
      "--out", "{out}"], "which is not an evalkit output"),
    (["passk", "{model}", *FAST, "--out", "{out}"], "holds run.json, which is not an evalkit run's"),
    (["regrade", "{run}", "--out", "{out}"], "holds run.json, which is not an evalkit run's"),
    (["train", "es", "--model", "{model}", "--device", "cpu", "--out", "{out}"],
     "holds run.json, which is not an evalkit run's"),
    (["study", str(Path(__file__).parents[1] / "studies" / "smoke.toml"), "--out", "{out}"], "not empty"),
]


@pytest.mark.parametrize(("args", "fragment"), FOREIGN, ids=[a[0] + ("-" + a[1] if a[0] == "train" else "")
                                                            for a, _ in FOREIGN])
def test_a_users_folder_is_never_written(world, tmp_path, args, fragment):
    folder = _user_folder(tmp_path)
    _refused(_fill(args, world, folder), fragment.replace("{out}", str(folder)), tmp_path)


def test_an_earlier_report_is_replaced_and_its_stale_files_only_are_removed(world, tmp_path):
    out = Path(shutil.copytree(world["report"], tmp_path / "r"))
    (out / "figures" / "old-figure.png").write_bytes(b"stale")  # not ours: the mark does not list it
    _refused(["report", str(world["run"]), "--out", str(out)], "figures/old-figure.png", tmp_path)
    (out / "figures" / "old-figure.png").unlink()
    mark = json.loads((out / ".evalkit-outputs.json").read_text())
    mark["outputs"]["report"]["files"].append("tables/dropped.csv")  # an earlier report's table
    (out / ".evalkit-outputs.json").write_text(json.dumps(mark))
    (out / "tables" / "dropped.csv").write_text("x\n1\n")
    assert runner.invoke(app, ["report", str(world["run"]), "--out", str(out)]).exit_code == 0
    assert not (out / "tables" / "dropped.csv").exists()
    assert snapshot(out)["index.html"] == (world["report"] / "index.html").read_bytes()


# ---------------------------------------------------------------- 2. values checked before work

VALUES = [
    (["passk", "{model}", *FAST, "--temperature", "1e-39"], "--temperature 1e-39: must be 0 or at least 0.001"),
    (["passk", "{model}", *FAST, "--temperature", "inf"], "--temperature inf: give a finite number"),
    (["passk", "{model}", *FAST, "--top-p", "nan"], "--top-p nan: give a finite number"),
    (["passk", "{model}", *FAST, "--grade-timeout", "0"], "--grade-timeout 0.0: must be > 0"),
    (["passk", "{model}", *FAST, "--grade-timeout", "3e6"], "--grade-timeout 3000000.0: must be <= 86400"),
    (["passk", "{model}", *FAST, "--grader-workers", "0"], "--grader-workers 0: must be >= 1"),
    (["passk", "{model}", *FAST, "--seed", "-1"], "--seed -1: must be >= 0"),
    (["passk", "{model}", *FAST, "--task-size", "0"], "--task-size 0: must be >= 1"),
    (["passk", "{model}", *FAST[2:], "--n", "1000000000"], "--n 1000000000: must be <= 100000"),
    (["passk", "{model}", *FAST, "--max-new-tokens", "0"], "--max-new-tokens 0: must be >= 1"),
    (["passk", "{model}", *FAST[:-2], "--device", "quantum"], "--device quantum: not a device"),
    (["passk", "{model}", *FAST[:-2], "--device", "mps"], "--device mps: device type mps is not supported"),
    (["passk", "{model}", *FAST, "--task-seed", "-2"], "--task-seed -2: must be >= 0"),
    (["train", "grpo", "--model", "{model}", "--top-p", "0", "--out", "{out}"], "--top-p 0.0: must be > 0"),
    (["train", "grpo", "--model", "{model}", "--temperature", "1e-39", "--out", "{out}"],
     "--temperature 1e-39: must be >= 0.001"),
    (["train", "grpo", "--model", "{model}", "--grader-workers", "0", "--out", "{out}"], "--grader-workers 0"),
    (["train", "grpo", "--model", "{model}", "--seed", "-1", "--out", "{out}"], "--seed -1"),
    (["train", "grpo", "--model", "{model}", "--device", "quantum", "--out", "{out}"], "--device quantum"),
    (["train", "grpo", "--model", "{model}", "--lr", "inf", "--out", "{out}"], "--lr inf: give a finite number"),
    (["train", "es", "--model", "{model}", "--sigma", "inf", "--out", "{out}"], "--sigma inf"),
    (["train", "es", "--model", "{model}", "--grade-timeout", "0", "--out", "{out}"], "--grade-timeout 0.0"),
    (["train", "es", "--model", "{model}", "--task-size", "0", "--out", "{out}"], "--task-size 0"),
    (["train", "distill", "--model", "{model}", "--teacher", "{model}", "--temperature", "0", "--out", "{out}"],
     "--temperature 0.0: must be >= 0.001"),
    (["entropy", "--model", "{model}", "--samples", "{traces}", "--temperature", "nan"],
     "--temperature nan: give a finite number"),
    (["entropy", "--model", "{model}", "--samples", "{traces}", "--temperature", "-1"],
     "--temperature -1.0: must be >= 0"),
    (["entropy", "--model", "{model}", "--samples", "{traces}", "--batch-tokens", "0"], "--batch-tokens 0"),
    (["entropy", "--model", "{model}", "--samples", "{traces}", "--device", "quantum"], "--device quantum"),
    (["length", "{run}", "--quantiles", "0", "--out", "{out}"], "--quantiles 0: must be >= 1"),
    (["groups", "{run}", "--group-sizes", "1,4", "--out", "{out}"], "--group-sizes 1,4: must be >= 2"),
    (["groups", "{run}", "--target", "1.5", "--out", "{out}"], "--target 1.5: must be < 1"),
    (["groups", "{run}", "--train-group-size", "1", "--out", "{out}"], "--train-group-size 1: must be >= 2"),
    (["regrade", "{run}", "--grader-workers", "0"], "--grader-workers 0: must be >= 1"),
    (["regrade", "{run}", "--grade-timeout", "inf"], "--grade-timeout inf: give a finite number"),
    (["forgetting", "{model}", "{model}", "--kl-prompts", "0", "--out", "{out}"], "--kl-prompts 0: must be >= 1"),
    (["forgetting", "{model}", "{model}", "--grade-timeout", "0", "--out", "{out}"], "--grade-timeout 0.0"),
    (["forgetting", "{model}", "{model}", "--device", "quantum", "--out", "{out}"], "--device quantum"),
    (["diff", "{model}", "{model}", "--threads", "-1", "--out", "{out}"], "--threads -1: must be >= 0"),
    (["diff", "{model}", "{model}", "--rtol", "nan", "--out", "{out}"], "--rtol nan: give a finite number"),
    (["traces", "{model}", "--traces", "{traces}", "--batch-size", "0", "--out", "{out}"], "--batch-size 0"),
]


@pytest.mark.parametrize(("args", "fragment"), VALUES, ids=[f"{a[0]}-{i}" for i, (a, _) in enumerate(VALUES)])
def test_a_bad_value_is_refused_before_any_work(world, tmp_path, args, fragment):
    _refused(_fill(args, world, tmp_path / "out"), fragment, tmp_path)
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- 3. corrupt state found on resume

def _break_settings_object(run):
    (run / "run.json").write_text("[1, 2]")


def _break_settings_utf8(run):
    (run / "run.json").write_bytes(b'{"kind": "passk\xff"}')


def _break_settings_json(run):
    (run / "run.json").write_text('{"kind": "passk", ')


def _break_outcome(run):
    lines = (run / "samples.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    del record["outcome"]
    (run / "samples.jsonl").write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")


def _break_problem(run):
    lines = (run / "samples.jsonl").read_text().splitlines()
    record = json.loads(lines[0]) | {"problem_id": "not-a-problem", "sample_index": 99}
    (run / "samples.jsonl").write_text("\n".join([*lines, json.dumps(record)]) + "\n")


def _break_index(run):
    lines = (run / "samples.jsonl").read_text().splitlines()
    record = json.loads(lines[0]) | {"sample_index": "zero"}
    (run / "samples.jsonl").write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")


def _break_lock(run):
    (run / ".lock").unlink(missing_ok=True)
    (run / ".lock").mkdir()


STATE = [
    (_break_settings_object, "run.json: not a JSON object"),
    (_break_settings_utf8, "run.json: not UTF-8 text"),
    (_break_settings_json, "run.json: not valid JSON"),
    (_break_outcome, "samples.jsonl:1: corrupt line (outcome None is not one of"),
    (_break_problem, "holds a sample of problem 'not-a-problem'"),
    (_break_index, "samples.jsonl:1: corrupt line (no sample_index)"),
    (_break_lock, ".lock: cannot be opened as evalkit's lock file"),
]


@pytest.mark.parametrize(("damage", "fragment"), STATE, ids=[d.__name__[7:] for d, _ in STATE])
def test_corrupt_state_on_resume_is_one_line_naming_the_file(world, tmp_path, damage, fragment):
    run = Path(shutil.copytree(world["run"], tmp_path / "run"))
    damage(run)
    _refused(["passk", world["model"], *FAST, "--out", str(run)], fragment, tmp_path)


def test_an_unreadable_outputs_mark_is_named(world, tmp_path):
    out = Path(shutil.copytree(world["report"], tmp_path / "r"))
    (out / ".evalkit-outputs.json").write_text("{torn")
    _refused(["report", str(world["run"]), "--out", str(out)], ".evalkit-outputs.json is unreadable", tmp_path)


# ---------------------------------------------------------------- 4. --out paths, files, the command line

def test_out_paths_that_cannot_be_written(world, tmp_path):
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "a_file").write_text("x")
    for out, fragment in ((tmp_path / "dangling", "which does not exist"),
                          (tmp_path / "loop", "a link that cannot be followed"),
                          (tmp_path / "loop" / "deeper", "a link that cannot be followed"),
                          (tmp_path / "a_file" / "run", "is a file, not a folder")):
        for command in (["passk", world["model"], *FAST], ["report", str(world["run"])], ["length", str(world["run"])]):
            _refused([*command, "--out", str(out)], fragment, tmp_path)


ENCODINGS = [
    ('{"question": "caf\\ud800?", "answer": "1"}\n', "holds a lone surrogate"),
    ('{"id": "a", "question": "q", "answer": "1"}\n{"id": "b", "question": "r", "answer": "2"}\n'
     '{"id": "a", "question": "s", "answer": "3"}\n', "problem id 'a' is given twice (problems 1 and 3)"),
]


@pytest.mark.parametrize(("text", "fragment"), ENCODINGS, ids=["surrogate", "duplicate-id"])
def test_task_files_that_are_not_text_or_not_unique(world, tmp_path, text, fragment):
    task = tmp_path / "task.jsonl"
    task.write_text(text, encoding="utf-8")
    _refused(["passk", world["model"], *FAST, "--task", str(task), "--out", str(tmp_path / "o")], fragment, tmp_path)


def test_a_carriage_return_or_line_separator_inside_a_string_does_not_split_the_line(tmp_path):
    from evalkit.jsonio import read_jsonl

    task = tmp_path / "task.jsonl"
    task.write_bytes('{"question": "one\rtwo\u2028three", "answer": "1"}\n{"question": "q", "answer": "2"}\n'
                     .encode("utf-8"))
    assert [r["question"] for _, r in read_jsonl(task)] == ["one\rtwo\u2028three", "q"]


def test_a_multiple_choice_file_in_latin_1_is_one_line(world, tmp_path):
    mc = tmp_path / "mc.jsonl"
    mc.write_bytes('{"question": "caf\xe9?", "choices": ["a", "b"], "answer": 0}\n'.encode("latin-1"))
    _refused(["forgetting", world["model"], world["model"], "--suite", "mine", "--mc-file", f"mine={mc}",
              "--device", "cpu", "--out", str(tmp_path / "o")], "not UTF-8 text", tmp_path)


PARSE = [
    (["passk", "--bogus"], "No such option: --bogus"),
    (["passk", "--n", "two"], "Invalid value for '--n'"),
    (["diff"], "Missing argument"),
    (["forgetting", "a", "b", "--timeout", "3"], "No such option: --timeout"),
    (["train", "grpo", "--group-size", "x"], "Invalid value for '--group-size'"),
    (["report", "--title"], "requires an argument"),
    (["nosuch"], "No such command 'nosuch'"),
]


@pytest.mark.parametrize(("args", "fragment"), PARSE, ids=[" ".join(a[:2]) for a, _ in PARSE])
def test_a_command_line_click_cannot_parse_is_one_line(tmp_path, args, fragment):
    """Through `main`, as a user's shell runs it (CliRunner calls the same group's main)."""
    _refused(args, fragment, tmp_path)


# ---------------------------------------------------------------- 5. one writer; kills; failures after the work

def test_a_second_report_into_a_folder_in_use_is_refused(world, tmp_path):
    from helpers.locking import held_by_another_process

    out = tmp_path / "r"
    with held_by_another_process(out) as pid:
        _refused(["report", str(world["run"]), "--out", str(out)], f"being written by process {pid}", tmp_path)


def test_a_report_killed_while_writing_resumes_to_the_uninterrupted_report(world, tmp_path, monkeypatch):
    import evalkit.outdir as outdir

    real = outdir._write_files

    def killed_after_the_first_file(folder, files):
        real(folder, dict(list(files.items())[:1]))
        raise KeyboardInterrupt  # Ctrl-C (or the disk filling) between two files

    monkeypatch.setattr(outdir, "_write_files", killed_after_the_first_file)
    out = tmp_path / "r"
    assert runner.invoke(app, ["report", str(world["run"]), "--out", str(out)]).exit_code == 130
    assert json.loads((out / ".evalkit-outputs.json").read_text())["outputs"]["report"]["state"] == "writing"
    monkeypatch.setattr(outdir, "_write_files", real)
    assert runner.invoke(app, ["report", str(world["run"]), "--out", str(out)]).exit_code == 0
    reference = snapshot(world["report"])
    resumed = snapshot(out)
    for name in ("index.html", "report.md", *[k for k in reference if k.startswith(("figures/", "tables/"))]):
        assert resumed[name] == reference[name], name


def test_a_result_that_cannot_be_written_after_the_work_is_kept_beside_it(world, tmp_path, monkeypatch):
    import evalkit.outdir as outdir

    calls = {"n": 0}
    real = outdir._write_files

    def disk_full_in_out(folder, files):
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(28, "No space left on device")
        return real(folder, files)

    monkeypatch.setattr(outdir, "_write_files", disk_full_in_out)
    out = tmp_path / "len"
    result = runner.invoke(app, ["length", str(world["run"]), "--out", str(out)])
    assert result.exit_code == 2 and "No space left on device" in result.output, result.output
    rescued = next(tmp_path.glob("len.rescued-*"))
    assert f"kept in {rescued}" in result.output
    assert json.loads((rescued / "length.json").read_text())["command"] == "length"


def test_a_finished_diff_is_kept_when_its_out_cannot_take_it(world, tmp_path, monkeypatch):
    import evalkit.outdir as outdir

    real = outdir._write_files

    def removed_during_the_work(folder, files):
        if folder.name == "d":
            raise OSError(30, "Read-only file system")
        return real(folder, files)

    monkeypatch.setattr(outdir, "_write_files", removed_during_the_work)
    result = runner.invoke(app, ["diff", world["model"], world["model"], "--out", str(tmp_path / "d")])
    assert result.exit_code == 2 and "Read-only file system" in result.output, result.output
    rescued = next(tmp_path.glob("d.rescued-*"))
    assert json.loads((rescued / "diff.json").read_text())["kind"] == "diff" and (rescued / "tensors.csv").is_file()


def test_a_command_that_fails_before_its_work_leaves_no_folder(world, tmp_path):
    out = tmp_path / "new" / "report"
    _refused(["report", str(tmp_path / "nothing-here"), "--out", str(out)], "no usable input", tmp_path)
    assert not out.exists()


def test_a_failed_trainer_start_does_not_lock_the_folder_to_its_settings(world, tmp_path):
    from evalkit.cli_train import train_app

    out = tmp_path / "t"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"kind": "train-grpo", "options": {"lr": 1}}))  # a failed start
    (out / "metrics.jsonl").write_text("")
    result = CliRunner().invoke(train_app, ["es", "--model", world["model"], "--device", "cpu", "--population", "2",
                                            "--iterations", "1", "--prompts-per-iteration", "1",
                                            "--max-new-tokens", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "run.json").read_text())["kind"] == "train-es"


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="a full disk is a tiny tmpfs mounted in a private mount namespace: needs root and unshare")
def test_a_full_disk_is_refused_before_the_work_or_kept_beside_it(world, tmp_path):
    """`--out` on a 64 KiB tmpfs (a private mount namespace: the host sees nothing)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    command = (f"mount -t tmpfs -o size=64k tmpfs {disk} && "
               f"{sys.executable} -c 'from evalkit.cli import main; main()' length {world['run']} --out {disk}/len")
    done = subprocess.run(["unshare", "--mount", "sh", "-c", command], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "bytes free on its filesystem" in done.stderr, done.stderr
    assert list(disk.iterdir()) == []  # the tmpfs was private: the host folder stays empty


def test_a_study_killed_in_its_report_stage_resumes_to_the_same_report(tmp_path, monkeypatch):
    """The committed study (every other stage done) with its report stage to run again: killed
    between two files, the rerun finishes it byte-for-byte as an uninterrupted run does."""
    import evalkit.outdir as outdir

    committed = Path(__file__).parents[1] / "results" / "study"
    spec = str(Path(__file__).parents[1] / "studies" / "seed-cpu.toml")

    def without_report(name: str) -> Path:
        out = Path(shutil.copytree(committed, tmp_path / name))
        state = json.loads((out / "study.json").read_text())
        del state["stages"]["report"]
        (out / "study.json").write_text(json.dumps(state))
        shutil.rmtree(out / "report")
        return out

    whole, out = without_report("whole"), without_report("killed")
    assert runner.invoke(app, ["study", spec, "--out", str(whole)]).exit_code == 0
    real = outdir._write_files

    def killed(folder, files):
        real(folder, dict(list(files.items())[:3]))
        raise KeyboardInterrupt

    monkeypatch.setattr(outdir, "_write_files", killed)
    assert runner.invoke(app, ["study", spec, "--out", str(out)]).exit_code == 130
    monkeypatch.setattr(outdir, "_write_files", real)
    result = runner.invoke(app, ["study", spec, "--out", str(out)])
    assert result.exit_code == 0, result.output
    def files(root: Path) -> dict:  # the report names its inputs by path: the two folders' names differ
        return {k: v.replace(str(root).encode(), b"STUDY") for k, v in snapshot(root / "report").items()}

    assert files(out) == files(whole)


LEGACY_FOLDERS = [("study/diff/es", "diff"), ("study/entropy", "entropy"), ("study/length", "length"),
                  ("study/groups", "groups"), ("study/report", "report"), ("study/forgetting/es", "forgetting"),
                  ("diagnostics/traces-base-on-grpo", "traces"),
                  ("diagnostics/tokens-grpo-teacher-base-student", "tokens")]


@pytest.mark.parametrize(("folder", "kind"), LEGACY_FOLDERS, ids=[k for _, k in LEGACY_FOLDERS])
def test_output_folders_written_before_the_mark_are_recognised_as_evalkits(tmp_path, folder, kind):
    """The committed results' output folders (no .evalkit-outputs.json) are the command's own:
    a rerun replaces them instead of refusing them as a user's."""
    from evalkit.outdir import OutputFolder

    copy = Path(shutil.copytree(Path(__file__).parents[1] / "results" / folder, tmp_path / "f"))
    claim = OutputFolder.claim(copy, kind)
    claim.release()
    (copy / "notes.txt").write_text("mine")
    with pytest.raises(Exception, match="notes.txt, which is not an evalkit output"):
        OutputFolder.claim(copy, kind)


def test_a_cache_that_is_a_file_is_one_line(world, tmp_path, monkeypatch):
    (tmp_path / "cache").write_text("not a folder")
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    _refused(["passk", "smollm2-135m", *FAST, "--out", str(tmp_path / "o")], "EVALKIT_CACHE=", tmp_path)


@pytest.mark.slow
def test_a_conversion_killed_mid_save_leaves_nothing_in_the_cache(tmp_path, monkeypatch):
    """The built-in model's one-time conversion into a fresh cache, after one killed mid-save
    (its `smollm2-135m.tmp<pid>` of a process that is gone): the leftover is removed."""
    from evalkit.models import resolve_model

    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path))
    stale = tmp_path / "smollm2-135m.tmp999999999"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"half")
    ref = resolve_model("smollm2-135m")
    assert (Path(ref.path) / "model.safetensors").stat().st_size > 100_000_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["smollm2-135m"]


def test_a_zero_size_tensor_under_rank_is_counted_not_a_crash(tmp_path):
    import numpy as np
    from helpers.checkpoints import save

    values = {"model.embed_tokens.weight": np.ones((64, 16), np.float32), "model.extra.weight": np.zeros((0, 16), np.float32),
              "model.norm.weight": np.ones((16,), np.float32)}
    a = save(tmp_path / "a", values, "F32")
    b = save(tmp_path / "b", {k: v + 0.5 for k, v in values.items()}, "F32")
    result = runner.invoke(app, ["diff", str(a), str(b), "--rank", "--out", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    rows = (tmp_path / "d" / "tensors.csv").read_text().splitlines()
    assert any(row.startswith("model.extra.weight") for row in rows[1:])


def test_a_trainer_whose_model_fails_to_load_leaves_no_folder(world, tmp_path):
    """The weights fail only when loaded (after the run folder was opened): the folder it made,
    holding no work, is removed again."""
    broken = Path(shutil.copytree(world["model"], tmp_path / "broken"))
    (broken / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not a header at all}")
    for trainer in (["es", "--population", "2", "--iterations", "1"], ["grpo", "--steps", "1"]):
        out = tmp_path / f"run-{trainer[0]}"
        result = runner.invoke(app, ["train", *trainer, "--model", str(broken), "--device", "cpu", "--out", str(out)])
        assert result.exit_code == 2 and result.output.startswith("error:"), result.output
        assert not out.exists(), sorted(p.name for p in out.iterdir())


# ---------------------------------------------------------------- 5. an --out no final rename could take (issue 43)
# No command renames its output folder into place: each takes `--out`'s lock before any work and
# writes inside it (a run folder through evalkit.rundir, an output folder through evalkit.outdir),
# so a link to a folder and a mount point are written through, and a folder another writer holds
# or fills is refused before the work.

IMPORT = ["import", "jsonl", "{source}", "--gold-field", "answer", "--correct-field", "correct", "--out", "{out}"]
INTO = [  # a command and the file its result is known by
    (IMPORT, "summary.json"),
    (["passk", "{model}", *FAST, "--out", "{out}"], "summary.json"),
    (["report", "{run}", "--out", "{out}"], "index.html"),
    (["length", "{run}", "--out", "{out}"], "length.json"),
]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    from test_import import write_jsonl

    return write_jsonl(tmp_path_factory.mktemp("source"))[0]


def _with_source(args, world, out, source):
    return [a.replace("{source}", str(source)) for a in _fill(args, world, out)]


@pytest.mark.parametrize(("args", "main"), INTO, ids=[a[0] for a, _ in INTO])
def test_an_out_that_links_to_an_empty_folder_gets_the_result_there(world, source, tmp_path, args, main):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "out").symlink_to(target)
    result = runner.invoke(app, _with_source(args, world, tmp_path / "out", source))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out").is_symlink() and (target / main).is_file()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="an empty mount point is a tmpfs mounted in a private mount namespace: needs root and unshare")
def test_an_out_that_is_an_empty_mount_point_gets_the_result_on_that_filesystem(world, source, tmp_path):
    """Each command's `--out` an empty tmpfs (a container's `/out`), in a private mount namespace."""
    mounts = [tmp_path / f"mnt{i}" for i in range(len(INTO))]
    for mount in mounts:
        mount.mkdir()
    jobs = [(_with_source(args, world, mount, source), str(mount / main)) for (args, main), mount in zip(INTO, mounts, strict=True)]
    script = ("import json, os, sys\nfrom typer.testing import CliRunner\nfrom evalkit.cli import app\n"
              "for args, main in json.loads(sys.argv[1]):\n"
              "    r = CliRunner().invoke(app, args)\n"
              "    print(json.dumps([r.exit_code, os.path.isfile(main), r.output[-300:]]))\n")
    command = " && ".join(f"mount -t tmpfs -o size=64m tmpfs {m}" for m in mounts) + \
        f" && {sys.executable} -c \"$0\" \"$1\""
    done = subprocess.run(["unshare", "--mount", "sh", "-c", command, script, json.dumps(jobs)], capture_output=True,
                          text=True, timeout=600, cwd=Path(__file__).parent)
    assert done.returncode == 0, done.stderr
    for (args, _), line in zip(INTO, done.stdout.splitlines(), strict=True):
        code, there, output = json.loads(line)
        assert code == 0 and there, (args[0], output)
    assert all(list(m.iterdir()) == [] for m in mounts)  # the tmpfs were private: the host folders stay empty


def test_an_import_into_a_folder_another_import_holds_or_filled_is_refused_before_the_work(world, source, tmp_path):
    """Another import writing `--out` (its lock held), or one that finished there first from
    other files: one line, nothing written. The same import finished there first: its result
    again, byte for byte."""
    from helpers.locking import held_by_another_process

    out = tmp_path / "out"
    with held_by_another_process(out) as pid:
        _refused(_with_source(IMPORT, world, out, source), f"being written by process {pid}", tmp_path)
    other = tmp_path / "other.jsonl"
    other.write_text(source.read_text().replace('"p0"', '"q0"'))
    assert runner.invoke(app, _with_source(IMPORT, world, out, other)).exit_code == 0
    _refused(_with_source(IMPORT, world, out, source), "it holds an import of other files", tmp_path)
    same = tmp_path / "same"
    assert runner.invoke(app, _with_source(IMPORT, world, same, source)).exit_code == 0
    before = snapshot(same)
    assert runner.invoke(app, _with_source(IMPORT, world, same, source)).exit_code == 0
    assert snapshot(same) == before


@pytest.mark.parametrize("args", [IMPORT, ["report", "{run}", "--out", "{out}"]], ids=["import", "report"])
def test_a_relative_out_whose_working_directory_was_removed_is_one_line(world, source, tmp_path, args):
    gone = tmp_path / "gone"
    gone.mkdir()
    argv = _with_source(args, world, Path("out"), source)
    code = (f"import os, sys; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); from evalkit.cli import main; "
            f"sys.argv = ['evalkit', *{argv!r}]; main()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error:") and done.stderr.count("\n") == 1, done.stderr
    assert "the working directory it is relative to was removed" in done.stderr
    assert sorted(tmp_path.iterdir()) == []
