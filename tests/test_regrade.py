"""`evalkit regrade` on a run made by evalkit 0.1 (tests/data/run_v01: the old results/e2e, whose
grader credited restated questions), resume after an interruption, bad input, and the stale-grade
warning and refusal that point users to it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalkit.cli import app
from evalkit.sampling import SAMPLER_VERSION
from evalkit.tasks.mathgrade import VERSION

OLD_RUN = Path(__file__).parent / "data" / "run_v01"
runner = CliRunner()


@pytest.fixture
def old_run(tmp_path):
    return Path(shutil.copytree(OLD_RUN, tmp_path / "run"))


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_in_place_regrade_reports_changes_and_keeps_the_old_grades(old_run):
    before = (old_run / "samples.jsonl").read_bytes()
    result = runner.invoke(app, ["regrade", str(old_run)])
    assert result.exit_code == 0, result.output
    assert f"math-1 -> {VERSION}" in result.output and "changed outcomes: 4 of 24" in result.output
    assert (old_run / "samples.graded-by-math-1.jsonl").read_bytes() == before
    new = lines(old_run / "samples.jsonl")
    old = lines(old_run / "samples.graded-by-math-1.jsonl")
    assert [(r["problem_id"], r["sample_index"], r["completion"]) for r in new] == \
        [(r["problem_id"], r["sample_index"], r["completion"]) for r in old]  # nothing resampled
    restated = next(r for r in new if r["completion"].startswith("13 + 10 is not given"))
    assert restated["outcome"] == "no_answer"  # evalkit 0.1 graded it correct
    summary = json.loads((old_run / "summary.json").read_text())
    assert summary["regraded"]["changed"] == 4 and summary["regraded"]["from"] == "math-1"
    assert summary["outcomes"]["correct"] == sum(r["outcome"] == "correct" for r in new) == 3
    assert summary["regraded"]["previous_outcomes"]["correct"] == 5
    assert [row["k"] for row in summary["pass_at_k"]] == [1, 2, 4] and summary["pass_at_k"][0]["ci_low"] is not None
    assert json.loads((old_run / "run.json").read_text())["grader"].startswith(VERSION)
    again = runner.invoke(app, ["regrade", str(old_run)])  # already up to date: nothing changes
    assert again.exit_code == 0 and "changed outcomes: 0 of 24" in again.output


def test_regrade_into_a_new_folder_leaves_the_source_alone(old_run, tmp_path):
    before = {p.name: p.read_bytes() for p in old_run.iterdir()}
    result = runner.invoke(app, ["regrade", str(old_run), "--out", str(tmp_path / "new")])
    assert result.exit_code == 0, result.output
    assert {p.name: p.read_bytes() for p in old_run.iterdir()} == before
    assert sorted(p.name for p in (tmp_path / "new").iterdir() if p.name != ".lock") == ["run.json", "samples.jsonl", "summary.json"]


def test_interrupted_regrade_resumes_to_the_same_result(old_run, tmp_path, monkeypatch):
    import evalkit.regrade as regrade

    reference = regrade.run_regrade(Path(shutil.copytree(OLD_RUN, tmp_path / "ref")))
    monkeypatch.setattr(regrade, "BATCH", 5)
    calls = []

    def stop_after_two_batches(done, total):
        calls.append(done)
        if len(calls) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        regrade.run_regrade(old_run, progress=stop_after_two_batches)
    assert len(lines(old_run / ".regrade.jsonl")) == 10  # two batches kept
    assert lines(old_run / "samples.jsonl") == lines(OLD_RUN / "samples.jsonl")  # untouched so far
    resumed = regrade.run_regrade(old_run, progress=lambda done, total: calls.append(done))
    assert calls[3] == 10  # the resumed run started from the kept grades
    assert lines(old_run / "samples.jsonl") == lines(tmp_path / "ref" / "samples.jsonl")
    assert resumed.summary["pass_at_k"] == reference.summary["pass_at_k"]
    assert not (old_run / ".regrade.jsonl").exists()


def _error(result, *fragments):
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.output.count("\n") == 1
    for fragment in fragments:
        assert fragment in result.output


def test_bad_input_is_one_line_and_exit_2(old_run, tmp_path):
    _error(runner.invoke(app, ["regrade", str(tmp_path / "missing")]), "no such run folder")
    (tmp_path / "empty").mkdir()
    _error(runner.invoke(app, ["regrade", str(tmp_path / "empty")]), "not an evalkit passk run folder")
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "run.json").write_text(json.dumps({"kind": "grpo", "task": {}}))
    _error(runner.invoke(app, ["regrade", str(tmp_path / "train")]), "not an evalkit passk run")
    text = (old_run / "samples.jsonl").read_text().splitlines()
    text[5] = text[5][:40]  # a corrupt line in the middle
    (old_run / "samples.jsonl").write_text("\n".join(text) + "\n")
    before = {p.name: p.read_bytes() for p in old_run.iterdir()}
    _error(runner.invoke(app, ["regrade", str(old_run)]), "samples.jsonl:6")
    assert {p.name: p.read_bytes() for p in old_run.iterdir()} == before


def test_a_torn_last_line_is_left_out_and_said(old_run):
    with open(old_run / "samples.jsonl", "a") as fh:
        fh.write('{"problem_id": "arith-0-5", "sample_')
    result = runner.invoke(app, ["regrade", str(old_run)])
    assert result.exit_code == 0, result.output
    assert "line 25" in result.output and len(lines(old_run / "samples.jsonl")) == 24


def test_stale_grades_are_named_when_read_and_refused_on_resume(old_run, tiny_model):
    result = runner.invoke(app, ["groups", str(old_run)])
    assert result.exit_code == 0, result.output
    assert "warning:" in result.output and "graded by math-1" in result.output and VERSION in result.output
    argv = ["passk", str(tiny_model), "--task", "arith", "--n", "4", "--k", "1,2,4", "--limit", "6",
            "--max-new-tokens", "24", "--out", str(old_run)]
    resume = runner.invoke(app, argv)  # drawn by hf-1: refused by its sampler first, which a regrade cannot mend
    assert resume.exit_code == 2 and 'sampler="hf-1"' in resume.output and "regrade" not in resume.output
    settings = json.loads((old_run / "run.json").read_text())
    settings["sampler"] = SAMPLER_VERSION  # as if this sampler had drawn it: the stale grades are what is refused
    (old_run / "run.json").write_text(json.dumps(settings))
    resume = runner.invoke(app, argv)
    assert resume.exit_code == 2 and "evalkit regrade" in resume.output and "math-1" in resume.output


def test_compare_writes_the_disagreement_table_and_the_report_shows_it(old_run, tmp_path):
    result = runner.invoke(app, ["regrade", str(old_run), "--compare", "math-verify"])
    assert result.exit_code == 0, result.output
    assert "vs math-verify" in result.output and "agree" in result.output
    data = json.loads((old_run / "grader-compare.json").read_text())
    (entry,) = data["comparisons"]
    assert data["kind"] == "grader-compare" and entry["samples"] == 24 and entry["evalkit"].startswith(VERSION)
    assert entry["disagree"] == len(entry["disagreements"]) > 0  # math-verify's defaults credit restated questions
    row = entry["disagreements"][0]
    assert {"problem_id", "gold", "completion_tail", "evalkit", "other"} <= set(row)
    assert {row["evalkit"]["outcome"] == "correct", row["other"]["outcome"] == "correct"} == {True, False}
    assert not list(old_run.glob(".compare-*"))
    report = runner.invoke(app, ["report", str(old_run), "--out", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    page = (tmp_path / "report" / "index.html").read_text()
    assert "Grader audit" in page and row["completion_tail"][-20:].replace("<", "&lt;")[:10] in page


def test_compare_with_a_users_own_grader_and_a_bad_name(old_run, tmp_path, monkeypatch):
    (tmp_path / "mygrader.py").write_text("def always(completion, gold):\n    return True\n")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["regrade", str(old_run), "--compare", "mygrader:always"])
    assert result.exit_code == 0, result.output
    (entry,) = json.loads((old_run / "grader-compare.json").read_text())["comparisons"]
    assert entry["pass_at_1"]["other"] == 1.0 and entry["disagree"] == sum(
        r["outcome"] != "correct" for r in lines(old_run / "samples.jsonl"))
    before = {p.name: p.read_bytes() for p in old_run.iterdir()}
    for bad in ("nosuchgrader", "nosuchmodule:f", "mygrader:missing"):
        _error(runner.invoke(app, ["regrade", str(old_run), "--compare", bad]), "--compare")
    assert {p.name: p.read_bytes() for p in old_run.iterdir()} == before
