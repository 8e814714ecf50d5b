"""`evalkit report` on real inputs made in the test: passk runs of edited tiny models, a GRPO
trainer folder, two diffs, entropy/length/groups outputs and a forgetting output.

Checks: each section appears exactly when its data is given; the summary lists the pass@k
and forgetting differences whose interval excludes 0 and no others; runs of different tasks
get separate, labelled charts; bad inputs are listed (report and terminal) without aborting;
figures are byte-identical across builds and every inline image decodes to the PNG file.
"""

from __future__ import annotations

import base64
import io
import re
import shutil

import pandas as pd
import pytest
import typer
from helpers.report_runs import build_all
from typer.testing import CliRunner

from analyses.report import build_report
from evalkit.cli_report import report
from evalkit.errors import handle_errors

ALL = ("broad", "sharp", "arith", "train", "diff", "diff3", "samples", "groups", "forgetting")
RUN_SECTIONS = {"summary", "passk", "voting", "coverage", "entropy", "length", "groups", "inputs"}

app = typer.Typer()
app.command()(handle_errors(report))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, tiny_model):
    return build_all(tmp_path_factory.mktemp("report_inputs"), tiny_model)


@pytest.fixture(scope="module")
def everything(inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp("everything") / "report"
    return build_report([inputs[k] for k in ALL], out, title="All inputs"), out


def _html_sections(out) -> list[str]:
    return re.findall(r'<section id="sec-([a-z]+)"', (out / "index.html").read_text())


@pytest.mark.parametrize("given, expected", [
    (("broad", "sharp"), RUN_SECTIONS),
    (("arith",), RUN_SECTIONS - {"coverage"}),
    (("diff",), {"summary", "weights", "inputs"}),
    (("forgetting",), {"summary", "forgetting", "inputs"}),
    (("train",), {"summary", "entropy", "groups", "inputs"}),
    (("samples",), {"summary", "entropy", "length", "inputs"}),
])
def test_sections_present_exactly_when_their_data_is(inputs, tmp_path, given, expected):
    result = build_report([inputs[k] for k in given], tmp_path / "r")
    assert set(result.sections) == expected and not result.problems
    assert set(_html_sections(tmp_path / "r")) == expected
    markdown = (tmp_path / "r" / "report.md").read_text()
    assert markdown.count("\n## ") == len(expected)


def test_everything_gives_every_section(everything):
    result, out = everything
    assert result.sections == ("summary", "passk", "voting", "coverage", "entropy", "weights", "forgetting",
                               "length", "groups", "inputs")
    assert _html_sections(out) == list(result.sections) and not result.problems
    inputs = pd.read_csv(out / "tables" / "inputs.csv")
    assert sorted(inputs["holds"].str.split().str[0].unique()) == [
        "diff", "entropy", "forgetting", "groups", "length", "passk", "train-grpo"]
    overlap = pd.read_csv(out / "tables" / "weights_overlap.csv")
    assert {"jaccard", "cosine"} <= set(overlap.columns) and len(overlap) > 1
    kinds = pd.read_csv(out / "tables" / "weights_kinds.csv")
    assert kinds["update"].nunique() == 3  # GRPO - broad, sharp - tiny, broad - tiny
    assert {"kl_sequence", "ci_low", "ci_high"} <= set(pd.read_csv(out / "tables" / "forgetting.csv").columns)


def _pass1(run_dir) -> pd.Series:
    samples = pd.read_json(run_dir / "samples.jsonl", lines=True)
    return samples.assign(ok=samples["outcome"] == "correct").groupby("problem_id")["ok"].mean()


def test_summary_lists_only_supported_differences(inputs, everything):
    result, out = everything
    summary = (out / "report.md").read_text().split("\n## ")[1]
    diffs = pd.read_csv(out / "tables" / "passk_differences.csv")
    digits = diffs[diffs["reference"] == "broad"]
    # pass@1 difference is the mean over problems of c/n differences, computed here from samples
    expected = (_pass1(inputs["sharp"]) - _pass1(inputs["broad"])).mean()
    assert digits.loc[digits["k"] == 1, "difference"].item() == pytest.approx(expected)
    for row in digits.to_dict("records"):
        excludes_zero = row["ci_low"] > 0 or row["ci_high"] < 0
        assert row["supported"] == excludes_zero
        assert (f"pass@{row['k']} {row['difference']:+.3f}" in summary) == excludes_zero
    assert digits["supported"].any(), "the sharp model is much better at k=1 by construction"
    forgetting = pd.read_csv(out / "tables" / "forgetting.csv")
    for row in forgetting.to_dict("records"):
        assert (f"on {row['benchmark']}: accuracy" in summary) == (row["ci_low"] > 0 or row["ci_high"] < 0)


def test_crossing_is_marked_where_the_curves_cross(everything):
    from metrics.compare import curve_crossings

    _, out = everything
    curves = pd.read_csv(out / "tables" / "passk_differences.csv")
    digits = curves[curves["reference"] == "broad"]
    crossings = curve_crossings(digits["k"], digits["pass_reference"], digits["pass_other"])
    assert crossings, "broad (two answers) overtakes sharp (one answer) at large k by construction"
    text = (out / "report.md").read_text()
    for c in crossings:
        assert f"broad overtakes sharp at k ≈ {c['k']:.3g}" in text


def test_runs_of_different_tasks_get_separate_labelled_charts(inputs, tmp_path):
    result = build_report([inputs["broad"], inputs["arith"]], tmp_path / "r")
    assert "coverage" not in result.sections  # no shared problems across tasks
    figures = sorted(p.name for p in (tmp_path / "r" / "figures").glob("passk_*.png"))
    assert figures == ["passk_task1.png", "passk_task2.png"]
    curves = pd.read_csv(tmp_path / "r" / "tables" / "passk_curves.csv")
    assert curves.groupby("run")["task"].nunique().max() == 1
    assert {t.split(" ")[0] for t in curves["task"]} == {"digits", "arith"}
    markdown = (tmp_path / "r" / "report.md").read_text()
    assert "Pass@K on digits (digits#" in markdown and "Pass@K on arith (arith#" in markdown


def test_bad_inputs_are_listed_and_do_not_abort(inputs, tmp_path):
    broken = tmp_path / "broken_diff"
    shutil.copytree(inputs["diff"], broken)
    (broken / "diff.json").write_text((broken / "diff.json").read_text()[:200])
    empty_run = tmp_path / "empty_run"
    empty_run.mkdir()
    shutil.copy(inputs["sharp"] / "summary.json", empty_run / "summary.json")
    (empty_run / "samples.jsonl").write_text("")
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    missing = tmp_path / "missing"
    args = [str(p) for p in (inputs["broad"], broken, empty_run, nothing, missing)]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "r" / "index.html").read_text()
    assert _html_sections(tmp_path / "r")[:3] == ["summary", "problems", "passk"]
    for bad in (broken / "diff.json", empty_run / "summary.json", nothing, missing):
        assert str(bad) in result.output and str(bad) in page
    assert "weights" not in _html_sections(tmp_path / "r")


def test_out_must_be_new_or_an_earlier_report(inputs, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    result = CliRunner().invoke(app, [str(inputs["broad"]), "--out", str(tmp_path)])
    assert result.exit_code == 2 and "folder holds notes.txt, which is not an evalkit output" in result.output
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_rebuild_replaces_stale_figures(inputs, everything, tmp_path):
    _, out = everything
    copy = tmp_path / "r"
    shutil.copytree(out, copy)
    build_report([inputs["diff"]], copy)
    assert {p.name for p in (copy / "figures").iterdir()} == {"weights_kinds.png", "weights_layers.png"}


def test_same_inputs_give_identical_pngs_and_images_decode(inputs, everything, tmp_path):
    from PIL import Image

    _, out = everything
    again = build_report([inputs[k] for k in ALL], tmp_path / "again", title="All inputs")
    first = {p.name: p.read_bytes() for p in (out / "figures").glob("*.png")}
    second = {p.name: p.read_bytes() for p in (tmp_path / "again" / "figures").glob("*.png")}
    assert len(first) >= 10 and first == second and again.sections
    page = (out / "index.html").read_text()
    assert (tmp_path / "again" / "index.html").read_text() == page
    uris = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(uris) == len(first)
    for data in uris:
        png = base64.b64decode(data)
        assert png in first.values()
        image = Image.open(io.BytesIO(png))
        image.load()
        assert image.width > 300 and image.height > 100


def test_page_refers_to_nothing_outside_itself(everything):
    _, out = everything
    page = (out / "index.html").read_text()
    refs = re.findall(r'\b(?:src|href|action|poster)\s*=\s*"([^"]*)"', page, flags=re.IGNORECASE)
    assert refs and all(r.startswith("data:image/png;base64,") for r in refs)
    assert not re.search(r"<script|<link|<iframe|@import|url\(|@font-face", page, flags=re.IGNORECASE)
    assert not re.search(r"https?://", page)
    assert "default-src 'none'" in page


def test_an_empty_table_reads_as_no_rows_in_both_documents():
    import pandas as pd

    from analyses.report.document import Section, Table, render_html, render_markdown

    sections = [Section("s", "S", (Table("narrowing", "Per-problem narrowing", pd.DataFrame()),))]
    assert "*Per-problem narrowing* (`tables/narrowing.csv`): no rows" in render_markdown("t", sections)
    assert "|  |" not in render_markdown("t", sections)
    assert '<p id="tab-narrowing">Per-problem narrowing: no rows' in render_html("t", sections)


def test_a_study_report_opens_with_the_study_s_findings_and_the_pairwise_wall_follows(inputs, tmp_path):
    """Issue 44: a study's report shows what was found first; the per-run pairwise differences
    (many lines for arms x seeds) come after its own sections, under their own heading."""
    from analyses.report.document import Section

    extra = [Section("claimsfound", "What was found", ("Of its 2 claims, the study supports 1.",)),
             Section("claimslimits", "Limitations", (("three seeds",),))]
    result = build_report([inputs["broad"], inputs["sharp"]], tmp_path / "r", extra=extra)
    assert result.sections[:3] == ("claimsfound", "claimslimits", "summary")
    assert _html_sections(tmp_path / "r")[:3] == ["claimsfound", "claimslimits", "summary"]
    markdown = (tmp_path / "r" / "report.md").read_text()
    assert markdown.index("## What was found") < markdown.index("## Every pairwise difference between runs")
    plain = build_report([inputs["broad"], inputs["sharp"]], tmp_path / "plain")
    assert plain.sections[0] == "summary" and "## Summary" in (tmp_path / "plain" / "report.md").read_text()
