"""`evalkit import` on files other tools wrote in real runs (tests/data/real, provenance in its
manifest.json): the tool's own score is reproduced with --keep-grades, every layout is read, and
each silent wrong number of issue 41 is refused or fixed, one row per failure. Files derived here
from a real file (shards, a joined file, a running log) are cut the way the tool itself cuts."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import zipfile
from pathlib import Path

import pytest
from helpers.refusals import assert_refused
from typer.testing import CliRunner

from evalkit.cli import app

runner = CliRunner()
REAL = Path(__file__).parent / "data" / "real"
MANIFEST = json.loads((REAL / "manifest.json").read_text())
PYFADE = REAL / "lm-eval-pyfade"
COREV2 = REAL / "opencompass-corev2" / "predictions" / "qwen-7b-chat-hf" / "COREV2_6A_.json"


def run(*args) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, " ".join(result.output.split())


def imported(*args) -> tuple[dict, str]:
    code, output = run("import", *args)
    assert code == 0, output
    out = Path(args[args.index("--out") + 1])
    if not (out / "summary.json").is_file():  # a folder of several datasets: OUT/<dataset>/
        return {"runs": {p.parent.name: json.loads(p.read_text()) for p in out.glob("*/summary.json")}}, output
    return json.loads((out / "summary.json").read_text()), output


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]


def pass_at(summary: dict, k: int) -> float:
    return next(r["pass_at_k"] for r in summary["pass_at_k"] if r["k"] == k)


def test_every_real_file_is_the_one_its_manifest_names():
    assert {e["format"] for e in MANIFEST["files"]} == {"evalscope", "inspect", "opencompass", "lm-eval"}
    for entry in MANIFEST["files"]:
        data = (REAL / entry["file"]).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (entry["bytes"], entry["sha256"]), entry["file"]
        assert entry["repo"] and len(entry["commit"]) == 40 and entry["path"] and entry["licence"]


# ---------------------------------------------------------------- evalscope: three layouts, subsets

EVALSCOPE = [  # (reviews, benchmark, model, the report's score)
    ("evalscope-0.x/reviews/Qwen2.5-0.5B-Instruct", "gsm8k", "Qwen2.5-0.5B-Instruct", 0.4),
    ("evalscope-1.2/reviews/qwen2.5-7b-instruct", "gsm8k", "qwen2.5-7b-instruct", 0.9),
    ("evalscope-1.2/reviews/qwen2.5-7b-instruct", "iquiz", "qwen2.5-7b-instruct", 0.35),
    ("evalscope-1.7/reviews/qwen3-max", "gsm8k", "qwen3-max", 1.0),
    ("evalscope-1.7/reviews/qwen3-max", "iquiz", "qwen3-max", 0.8),
]


@pytest.mark.parametrize(("folder", "bench", "model", "score"), EVALSCOPE, ids=[f"{f[:13]}-{b}" for f, b, _, _ in EVALSCOPE])
def test_evalscope_keep_grades_is_the_reports_score_with_question_text_and_model(tmp_path, folder, bench, model,
                                                                                 score):
    out = tmp_path / "run"
    summary, output = imported("evalscope", REAL / folder, "--out", out, "--keep-grades")
    one = summary["runs"][bench] if "runs" in summary else summary
    assert pass_at(one, 1) == pytest.approx(score, abs=1e-12)
    assert one["import"]["reported"]["value"] == pytest.approx(score) and one["model"]["name"] == model
    task = next(((out / bench) if "runs" in summary else out).glob("task/*.jsonl"))
    questions = [json.loads(line) for line in task.read_text().splitlines()]
    assert all(len(q["question"]) > 40 and q["question"] != q["id"] for q in questions)  # the text, not the id
    assert "the tool reported" in output and "rerun the same command" not in output


def test_evalscope_subsets_are_never_merged(tmp_path):
    """iquiz's subsets EQ and IQ both number their problems 0..9: a folder keeps them apart, and
    the two files joined into one are refused (the MATH-500 levels failure of issue 41)."""
    summary, _ = imported("evalscope", REAL / "evalscope-1.7/reviews/qwen3-max", "--out", tmp_path / "run",
                          "--keep-grades")
    iquiz = summary["runs"]["iquiz"]
    assert iquiz["problems_with_samples"] == 20 and iquiz["sampling"]["n"] == 1
    ids = {r["problem_id"] for r in rows(tmp_path / "run" / "iquiz")}
    assert ids == {f"{s}/{i}" for s in ("EQ", "IQ") for i in range(10)}
    joined = tmp_path / "joined" / "iquiz_all.jsonl"
    joined.parent.mkdir()
    joined.write_bytes(b"".join((REAL / "evalscope-1.7/reviews/qwen3-max" / f"iquiz_{s}.jsonl").read_bytes()
                                for s in ("EQ", "IQ")))
    assert_refused(lambda: runner.invoke(app, ["import", "evalscope", str(joined), "--out", str(tmp_path / "j")]),
                   "several subsets joined into one file", tmp_path)


def test_evalscope_regrade_agrees_on_gsm8k_in_every_layout(tmp_path):
    for i, folder in enumerate(("evalscope-0.x/reviews/Qwen2.5-0.5B-Instruct/gsm8k_main.jsonl",
                                "evalscope-1.2/reviews/qwen2.5-7b-instruct/gsm8k_main.jsonl",
                                "evalscope-1.7/reviews/qwen3-max/gsm8k_main.jsonl")):
        summary, _ = imported("evalscope", REAL / folder, "--out", tmp_path / str(i), "--regrade")
        assert summary["import"]["agreement_with_source"] == {"same_correctness": 10, "samples": 10}
        assert pass_at(summary, 1) == pytest.approx(summary["import"]["reported"]["value"])


def test_an_off_by_one_task_is_refused_naming_the_pair(tmp_path):
    """evalscope's gsm8k ids are 0-based places in the test split; a task file without ids numbers
    its lines from 1: problem "3" of each is another problem. Refused, never shifted."""
    old = [json.loads(line) for line in (REAL / "evalscope-0.x/reviews/Qwen2.5-0.5B-Instruct/gsm8k_main.jsonl")
           .read_text().splitlines()]
    gsm8k = [r["raw_input"] for r in sorted(old, key=lambda r: r["index"])]  # GSM8K test problems 0..9
    no_ids, with_ids = tmp_path / "gsm8k_no_ids.jsonl", tmp_path / "gsm8k_ids.jsonl"
    no_ids.write_text("".join(json.dumps(r) + "\n" for r in gsm8k))
    with_ids.write_text("".join(json.dumps({"id": str(i), **r}) + "\n" for i, r in enumerate(gsm8k)))
    review = REAL / "evalscope-1.7/reviews/qwen3-max/gsm8k_main.jsonl"
    assert_refused(lambda: runner.invoke(app, ["import", "evalscope", str(review), "--out", str(tmp_path / "off"),
                                               "--task", str(no_ids), "--preset", "gsm8k"]),
                   "problem '3' of the file is not problem '3' of the task", tmp_path)
    summary, _ = imported("evalscope", review, "--out", tmp_path / "on", "--task", with_ids, "--preset", "gsm8k",
                          "--keep-grades")
    assert summary["import"]["notes"]["matched"] == {"id and question text": 10} and pass_at(summary, 1) == 1.0


# ---------------------------------------------------------------- inspect_ai

def test_inspect_eval_log_epochs_are_samples_with_exact_pass_at_k(tmp_path):
    summary, output = imported("inspect", REAL / "inspect/log_streaming.eval", "--out", tmp_path / "run",
                               "--keep-grades")
    assert summary["sampling"]["n"] == 2 and summary["sampling"]["epochs"] == 2
    assert pass_at(summary, 1) == pytest.approx(0.75) == summary["import"]["reported"]["value"]
    # problem 1: epochs incorrect, correct; problem 2: correct, correct -> pass@2 = 1, pass^2 = 1/2
    assert pass_at(summary, 2) == 1.0
    assert next(r["pass_hat_k"] for r in summary["pass_hat_k"] if r["k"] == 2) == pytest.approx(0.5)
    by = {(r["problem_id"], r["sample_index"]): r for r in rows(tmp_path / "run")}
    assert by[("1", 0)]["outcome"] == "incorrect" and by[("1", 1)]["completion"] == "Yes."
    assert [by[k]["num_tokens"] for k in sorted(by)] == [1, 2, 2, 1]  # output.usage.output_tokens
    assert summary["model"]["name"] == "azureai/Meta-Llama-3-1-405B-Instruct-jqf" and "PARTIAL" not in output


def test_inspect_json_and_eval_logs_of_one_run_import_the_same(tmp_path):
    a, _ = imported("inspect", REAL / "inspect/log_formats.json", "--out", tmp_path / "a", "--keep-grades")
    b, _ = imported("inspect", REAL / "inspect/log_formats.eval", "--out", tmp_path / "b", "--keep-grades")
    assert rows(tmp_path / "a") == rows(tmp_path / "b") and pass_at(a, 1) == pass_at(b, 1) == 0.0


def test_a_running_inspect_log_is_refused_unless_partial(tmp_path):
    """The .eval zip as inspect_ai leaves it while it runs: samples and _journal/start.json, no header."""
    running = tmp_path / "logs" / "running.eval"
    running.parent.mkdir()
    with zipfile.ZipFile(REAL / "inspect/log_streaming.eval") as src, zipfile.ZipFile(running, "w") as dst:
        for name in src.namelist():
            if name.startswith(("_journal/start.json", "samples/1_")):
                dst.writestr(name, src.read(name))
    assert_refused(lambda: runner.invoke(app, ["import", "inspect", str(running), "--out", str(tmp_path / "r")]),
                   "not 'success': a partial run; give --partial", tmp_path)
    summary, output = imported("inspect", running, "--out", tmp_path / "p", "--partial", "--keep-grades")
    assert "not 'success'" in summary["partial"] and "PARTIAL pass@k" in output and "partial: imported" in output


# ---------------------------------------------------------------- lm-eval

GSM8K_RUNS = [  # (samples file, the model its results_*.json names): 3 documents of a --limit 100 run
    ("samples_gsm8k_2025-09-09T13-31-53.431753.jsonl", "gemma3:12b-u1"),
    ("samples_gsm8k_2025-09-09T13-42-42.857006.jsonl", "gemma3:12b-it-q4_K_M"),
]
SUBJECTS = ("chemistry", "health", "psychology")


def lm_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def results_beside(path: Path) -> dict:
    return json.loads(path.with_name("results_" + path.stem.rsplit("_", 1)[1] + ".json").read_text())


@pytest.mark.parametrize(("name", "model"), GSM8K_RUNS, ids=["tuned", "base"])
def test_lm_eval_a_cut_file_is_refused_and_imports_as_partial_with_its_own_grades(tmp_path, name, model):
    """The file holds 3 of the run's 100 documents (cut by the repository's author); the results
    file lm-eval wrote beside declares 100, so the import is refused; with --partial the kept grades
    are the file's exact_match, the tool's score over its 100 is shown beside, and every line is
    the file's: completion, extracted answer, question text, model."""
    path = PYFADE / "gsm8k" / name
    lines, results = lm_lines(path), results_beside(path)
    assert_refused(lambda: runner.invoke(app, ["import", "lm-eval", str(path), "--out", str(tmp_path / "r")]),
                   f"3 documents for filter 'strict-match', but results_{name[14:-6]}.json declares 100 "
                   "(n-samples.gsm8k.effective): a partial file", tmp_path)
    summary, output = imported("lm-eval", path, "--out", tmp_path / "p", "--partial", "--keep-grades")
    assert pass_at(summary, 1) == pytest.approx(sum(line["exact_match"] for line in lines) / len(lines))
    assert summary["problems_with_samples"] == len(lines) == 3 and summary["sampling"]["n"] == 1
    assert summary["model"]["name"] == model == results["model_name"]
    assert summary["import"]["reported"]["value"] == results["results"]["gsm8k"]["exact_match,strict-match"]
    assert summary["partial"].startswith(name) and "PARTIAL pass@k" in output
    assert "lm-eval filter: strict-match (the default: the first the task lists" in output
    by = {r["problem_id"]: r for r in rows(tmp_path / "p")}
    assert sorted(by) == sorted(str(line["doc_id"]) for line in lines)
    for line in lines:
        row = by[str(line["doc_id"])]
        assert (row["completion"], row["extracted"]) == (line["resps"][0][0], line["filtered_resps"][0])
    task = {q["id"]: q for q in map(json.loads, next((tmp_path / "p").glob("task/*.jsonl")).read_text().splitlines())}
    for line in lines:  # the question text kept, the gold cut after lm-eval's "####"
        assert task[str(line["doc_id"])]["question"] == line["doc"]["question"]
        assert task[str(line["doc_id"])]["answer"] == line["target"].split("####")[-1].strip()
    regraded, _ = imported("lm-eval", path, "--out", tmp_path / "g", "--partial", "--regrade")
    assert regraded["import"]["agreement_with_source"] == {"same_correctness": 3, "samples": 3}


def test_lm_eval_the_filter_is_named_and_one_not_logged_is_refused(tmp_path):
    """The task lists strict-match and flexible-extract (the results file scores both); the file
    logs strict-match only: it is named as the default, chosen by --filter, and flexible-extract
    is refused naming what the file holds."""
    path = PYFADE / "gsm8k" / GSM8K_RUNS[0][0]
    assert {"exact_match,strict-match", "exact_match,flexible-extract"} <= set(results_beside(path)["results"]["gsm8k"])
    summary, output = imported("lm-eval", path, "--out", tmp_path / "a", "--partial", "--filter", "strict-match")
    assert summary["import"]["notes"]["filters"] == ["strict-match"] and "(--filter;" in output
    assert_refused(lambda: runner.invoke(app, ["import", "lm-eval", str(path), "--out", str(tmp_path / "c"),
                                               "--partial", "--filter", "flexible-extract"]),
                   "--filter flexible-extract: not in samples_gsm8k_2025-09-09T13-31-53.431753.jsonl "
                   "(filters: strict-match)", tmp_path)


def test_lm_eval_without_its_results_file_missing_doc_ids_are_partial(tmp_path):
    """The same file copied without the results file beside: completeness falls back to doc_ids
    0..N-1, and 16..18 lack 0..15. Imported with --partial, the report's tables say so too."""
    alone = tmp_path / "out" / GSM8K_RUNS[0][0]
    alone.parent.mkdir()
    shutil.copy(PYFADE / "gsm8k" / GSM8K_RUNS[0][0], alone)
    assert_refused(lambda: runner.invoke(app, ["import", "lm-eval", str(alone), "--out", str(tmp_path / "r")]),
                   "doc_ids 0..18 lack 16 (first 0)", tmp_path)
    summary, output = imported("lm-eval", alone, "--out", tmp_path / "p", "--partial", "--keep-grades")
    assert summary["partial"].startswith(alone.name) and "PARTIAL pass@k" in output
    assert summary["model"]["name"] == "lm-eval import"  # nothing beside names it
    code, shown = run("report", tmp_path / "p", "--out", tmp_path / "report")
    assert code == 0, shown
    assert "p (partial)" in (tmp_path / "report" / "report.md").read_text()


def test_lm_eval_json_array_layout_and_filter_none(tmp_path):
    """v0.4.0-0.4.2 wrote the samples as one indented JSON array (arguments [[prompt, kwargs]]);
    with filter none the filtered response is the completion itself: nothing was extracted."""
    lines = lm_lines(PYFADE / "gsm8k" / GSM8K_RUNS[0][0])
    old = [{**r, "arguments": [[r["arguments"]["gen_args_0"]["arg_0"], r["arguments"]["gen_args_0"]["arg_1"]]]}
           for r in lines]
    array = tmp_path / "model=gemma3:12b-u1_gsm8k.jsonl"
    array.write_text(json.dumps(old, indent=2, ensure_ascii=False))
    summary, _ = imported("lm-eval", array, "--out", tmp_path / "a", "--partial", "--keep-grades")
    assert summary["samples"] == 3 and pass_at(summary, 1) == pytest.approx(1 / 3)
    assert [r["completion"] for r in rows(tmp_path / "a")] == [r["resps"][0][0] for r in lines]
    first = lines[0]
    none = tmp_path / "samples_gsm8k_2026-01-01T00-00-00.jsonl"
    none.write_text(json.dumps({**first, "doc_id": 0, "filtered_resps": first["resps"][0], "filter": "none"}) + "\n")
    summary, _ = imported("lm-eval", none, "--out", tmp_path / "b", "--keep-grades")
    record = rows(tmp_path / "b")[0]
    assert record["extracted"] is None and record["outcome"] == "correct" and first["exact_match"] == 1.0


def test_lm_eval_folder_of_subjects_imports_each_as_its_own_partial_run(tmp_path):
    """mmlu_pro_plus: three subjects' samples with one results file beside (3 documents each of
    --limit 100): one run per subject, each partial, its kept grades the file's exact_match and the
    tool's score for that subject beside."""
    folder = PYFADE / "mmlu_pro_plus"
    assert_refused(lambda: runner.invoke(app, ["import", "lm-eval", str(folder), "--out", str(tmp_path / "r")]),
                   "declares 100 (n-samples.mmlu_pro_plus_chemistry.effective)", tmp_path)
    summary, output = imported("lm-eval", folder, "--out", tmp_path / "p", "--partial", "--keep-grades")
    results = json.loads((folder / "results_2025-10-14T14-44-39.372006.json").read_text())
    assert set(summary["runs"]) == {f"mmlu_pro_plus_{s}" for s in SUBJECTS}
    for subject in SUBJECTS:
        task = f"mmlu_pro_plus_{subject}"
        lines = lm_lines(folder / f"samples_{task}_2025-10-14T14-44-39.372006.jsonl")
        one = summary["runs"][task]
        assert pass_at(one, 1) == pytest.approx(sum(line["exact_match"] for line in lines) / 3)
        assert one["import"]["reported"]["value"] == results["results"][task]["exact_match,custom-extract"]
        assert one["model"]["name"] == results["model_name"] and one["partial"]
        questions = [json.loads(q) for q in next((tmp_path / "p" / task).glob("task/*.jsonl")).read_text().splitlines()]
        assert sorted(q["question"] for q in questions) == sorted(line["doc"]["question"] for line in lines)


def test_lm_eval_regrade_reads_the_final_answer_where_custom_extract_takes_the_first(tmp_path):
    """chemistry doc 7 ends "the correct answer is (D) and (K). Since (K) includes (D), we will
    choose (K). The answer is (K)." lm-eval's custom-extract (regex `answer is \\(?([A-L])\\)?`,
    take_first) keeps D and scores 0; the gold is K and evalkit's grader reads the last answer: the
    one disagreement of the 9 documents (docs/import.md)."""
    agree = {}
    for subject in SUBJECTS:
        path = PYFADE / "mmlu_pro_plus" / f"samples_mmlu_pro_plus_{subject}_2025-10-14T14-44-39.372006.jsonl"
        summary, _ = imported("lm-eval", path, "--out", tmp_path / subject, "--partial", "--regrade")
        agree[subject] = summary["import"]["agreement_with_source"]["same_correctness"]
    assert agree == {"chemistry": 2, "health": 3, "psychology": 3}
    doc7 = next(r for r in rows(tmp_path / "chemistry") if r["problem_id"] == "7")
    assert (doc7["outcome"], doc7["source_outcome"]) == ("correct", "incorrect") and "K" in doc7["extracted"]


def test_a_loglikelihood_lm_eval_file_is_refused():
    path = REAL / "lm-eval-bias" / "samples_bias_classification_2024-06-17T12-20-26.826621.json"
    code, output = run("import", "lm-eval", path, "--out", REAL / "never")
    assert code == 2 and "not a generation task" in output and not (REAL / "never").exists()


# ---------------------------------------------------------------- OpenCompass: shards, tmp_ files, percent

def shards(tmp_path: Path, step: int = 3, keep=None) -> Path:
    """COREV2_6A_ cut as OpenCompass's partitioners cut it: parts [i*step:(i+1)*step], keys from 0."""
    data = json.loads(COREV2.read_text())
    folder = tmp_path / "predictions" / "qwen-7b-chat-hf"
    folder.mkdir(parents=True)
    for part in range(math.ceil(len(data) / step)):
        if keep is None or part in keep:
            chunk = {str(i): data[str(part * step + i)] for i in range(min(step, len(data) - part * step))}
            (folder / f"COREV2_6A__{part}.json").write_text(json.dumps(chunk, indent=4, ensure_ascii=False))
    return folder


def test_opencompass_shards_merge_as_opencompass_merges_them(tmp_path):
    whole, _ = imported("opencompass", COREV2, "--out", tmp_path / "whole", "--regrade")
    merged, _ = imported("opencompass", shards(tmp_path), "--out", tmp_path / "merged", "--regrade")
    assert merged["import"]["mapping"]["merged"] == [f"COREV2_6A__{i}.json" for i in range(3)]
    strip = lambda rs: [{k: r[k] for k in ("problem_id", "sample_index", "completion")} for r in rs]  # noqa: E731
    assert strip(rows(tmp_path / "merged")) == strip(rows(tmp_path / "whole")) and len(rows(tmp_path / "whole")) == 8


@pytest.mark.parametrize(("keep", "alone", "fragment"), [
    ({0, 1, 2}, "COREV2_6A__0.json", "part 0 of 3 parts of COREV2_6A_"),
    ({0, 2}, None, "part COREV2_6A__1.json is missing"),
])
def test_opencompass_partial_shards_are_refused(tmp_path, keep, alone, fragment):
    folder = shards(tmp_path, keep=keep)
    path = folder / alone if alone else folder
    assert_refused(lambda: runner.invoke(app, ["import", "opencompass", str(path), "--out", str(tmp_path / "r")]),
                   fragment, tmp_path)


def test_opencompass_tmp_file_is_partial_and_percent_is_read_as_percent(tmp_path):
    folder = tmp_path / "outputs" / "predictions" / "qwen-7b-chat-hf"
    folder.mkdir(parents=True)
    data = json.loads(COREV2.read_text())
    (folder / "tmp_COREV2_6A_.jsonl").write_text("".join(json.dumps({"idx": int(k), **v}, ensure_ascii=False) + "\n"
                                                         for k, v in list(data.items())[:5]))
    assert_refused(lambda: runner.invoke(app, ["import", "opencompass", str(folder), "--out", str(tmp_path / "r")]),
                   "tmp_COREV2_6A_.jsonl: the file OpenCompass keeps while it infers", tmp_path)
    summary, output = imported("opencompass", folder, "--out", tmp_path / "p", "--partial", "--regrade")
    assert summary["problems_with_samples"] == 5 and summary["partial"] and "PARTIAL pass@k" in output
    shutil.copy(COREV2, folder / "COREV2_6A_.json")
    results = tmp_path / "outputs" / "results" / "qwen-7b-chat-hf"
    results.mkdir(parents=True)
    (results / "COREV2_6A_.json").write_text(json.dumps({"accuracy": 62.5}))  # OpenCompass writes percent
    summary, _ = imported("opencompass", folder / "COREV2_6A_.json", "--out", tmp_path / "w", "--regrade")
    assert summary["import"]["reported"] == {"metric": "accuracy", "value": 0.625, "as_written": 62.5,
                                             "source": str(results / "COREV2_6A_.json")}


# ---------------------------------------------------------------- no tokenizer

def test_without_a_tokenizer_token_counts_are_null_and_length_says_so(tmp_path):
    run_dir = tmp_path / "run"
    summary, output = imported("evalscope", REAL / "evalscope-1.7/reviews/qwen3-max/gsm8k_main.jsonl", "--out",
                               run_dir, "--keep-grades")
    assert all(r["num_tokens"] is None for r in rows(run_dir)) and "num_tokens are null" in output
    for args in (["groups", run_dir, "--group-sizes", "2"], ["regrade", run_dir, "--out", tmp_path / "re"]):
        code, out = run(*args)
        assert code == 0, out
    for command in ("length", "entropy"):
        result = runner.invoke(app, [command, str(run_dir)])
        assert result.exit_code == 2 and result.output.strip().count("\n") == 0, result.output
        assert "needs them: import again with --tokenizer MODEL" in result.output
    old, _ = imported("evalscope", REAL / "evalscope-0.x/reviews/Qwen2.5-0.5B-Instruct", "--out", tmp_path / "old",
                      "--keep-grades")
    assert [r["num_tokens"] for r in rows(tmp_path / "old")][:3] == [337, 168, 356]  # usage.completion_tokens
