"""`evalkit import`: each format's files, written here with the field names its writer uses (the
writer's source file is cited in each importer's docstring), import to a run folder whose pass@k
equals the exact fractions of the same counts, whose kept grades are the file's own, and on
which regrade, length, groups and report work unchanged."""

from __future__ import annotations

import csv
import json
import math
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalkit.cli import app

runner = CliRunner()

# (id, question, gold, correct count, samples): four problems, one with fewer samples
PROBLEMS = [("p0", "What is 3 + 4?", "7", 3, 8), ("p1", "What is 5 + 7?", "12", 8, 8),
            ("p2", "What is 9 - 6?", "3", 0, 8), ("p3", "What is 2 * 5?", "10", 2, 5)]
KS = [1, 2, 4, 8]


def completions(gold: str, correct: int, count: int) -> list[tuple[str, bool, str]]:
    """(text, correct, extracted): the first `correct` right, the others wrong in two ways."""
    out = []
    for j in range(count):
        answer = gold if j < correct else str(int(gold) + 1 + (j % 2))
        out.append((f"Let me add them up. The answer is \\boxed{{{answer}}}.", j < correct, answer))
    return out


def each_sample(problems=PROBLEMS):
    for pid, question, gold, correct, count in problems:
        for j, (text, ok, answer) in enumerate(completions(gold, correct, count)):
            yield pid, question, gold, j, text, ok, answer


def exact_pass_at_k(counts, k) -> Fraction:
    kept = [(n, c) for n, c in counts if n >= k]
    return sum((1 - Fraction(math.comb(n - c, k), math.comb(n, k)) for n, c in kept), Fraction(0)) / len(kept)


def counts_of(problems=PROBLEMS):
    return [(count, correct) for _, _, _, correct, count in problems]


def write_jsonl(root: Path) -> tuple[Path, list]:
    path = root / "mine.jsonl"
    with open(path, "w") as fh:
        for pid, _, gold, _, text, ok, _ in each_sample():
            fh.write(json.dumps({"problem_id": pid, "completion": text, "answer": gold, "correct": ok}) + "\n")
    return path, ["--gold-field", "answer", "--correct-field", "correct"]


def write_csv(root: Path) -> tuple[Path, list]:
    path = root / "mine.csv"
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["question", "response", "gold", "score", "num_tokens"])
        for _, question, gold, _, text, ok, _ in each_sample():
            writer.writerow([question, text, gold, int(ok), len(text)])
    return path, ["--problem-field", "question", "--completion-field", "response", "--gold-field", "gold",
                  "--correct-field", "score"]


def lm_eval_line(doc_id, question, gold, texts, answers, filt, exact):
    """One logged example as lm_eval/evaluator.py builds it and evaluation_tracker.py writes it."""
    return {"doc_id": doc_id, "doc": {"question": question, "answer": f"Add them. #### {gold}"},
            "target": f"Add them. #### {gold}",
            "arguments": {"gen_args_0": {"arg_0": f"Question: {question}\nAnswer:", "arg_1": {"until": ["Question:"],
                                                                                            "do_sample": True}}},
            "resps": [texts], "filtered_resps": [answers], "filter": filt, "metrics": ["exact_match"],
            "doc_hash": "d" * 64, "prompt_hash": "p" * 64, "target_hash": "t" * 64, "exact_match": exact}


def write_lm_eval(root: Path) -> tuple[Path, list]:
    """repeats=8 (resps[0] holds the completions), two filters logged per document."""
    folder = root / "lm" / "my__model"
    folder.mkdir(parents=True)
    path = folder / "samples_gsm8k_2025-01-01T00-00-00.000000.jsonl"
    with open(path, "w") as fh:
        for filt in ("flexible-extract", "strict-match"):
            for i, (_pid, question, gold, correct, count) in enumerate(PROBLEMS):
                rows = completions(gold, correct, count)
                line = lm_eval_line(i, question, gold, [r[0] for r in rows], [r[2] for r in rows], filt,
                                    float(rows[0][1]))
                fh.write(json.dumps(line) + "\n")
    (folder / "results_2025-01-01T00-00-00.000000.json").write_text(json.dumps({"model_name": "my/model"}))
    return path, []


def write_lm_eval_single(root: Path) -> tuple[Path, list]:
    """repeats=1: one completion per document, the metric is its grade."""
    path = root / "samples_arith_2025.jsonl"
    with open(path, "w") as fh:
        for i, (_pid, question, gold, j, text, ok, answer) in enumerate(each_sample()):
            line = lm_eval_line(i, f"{question} (copy {j})", gold, [text], [answer], "none", float(ok))
            fh.write(json.dumps(line) + "\n")
    return path, []


def write_lighteval(root: Path) -> tuple[Path, list]:
    import pandas as pd

    rows = []
    for pid, question, gold, correct, count in PROBLEMS:
        texts = [r[0] for r in completions(gold, correct, count)]
        rows.append({"doc": {"query": f"Question: {question}\nAnswer:", "choices": [f" {gold}"], "gold_index": 0,
                             "id": pid, "task_name": "lighteval|arith|0", "instruction": "", "specific": None,
                             "original_query": question},
                     "metric": {"pass@k:k=1&n=8": correct / count},
                     "model_response": {"input": question, "input_tokens": [1, 2, 3], "text": texts,
                                        "output_tokens": [[5] * len(t) for t in texts], "text_post_processed": None,
                                        "logprobs": [], "truncated_tokens_count": 0, "padded_tokens_count": 0}})
    path = root / "details_lighteval|arith|0_2025-01-01T00-00-00.parquet"
    pd.DataFrame(rows)[["doc", "metric", "model_response"]].to_parquet(path)
    return path, []


def write_lighteval_old(root: Path) -> tuple[Path, list]:
    """lighteval v0.6-v0.10: flat columns of DetailsLogger.Detail (info_loggers.py at v0.10.0)."""
    import pandas as pd

    rows = []
    for _pid, question, gold, correct, count in PROBLEMS:
        texts = [r[0] for r in completions(gold, correct, count)]
        rows.append({"example": question, "instruction": "", "full_prompt": f"Question: {question}\nAnswer:",
                     "num_effective_few_shots": 0, "num_asked_few_shots": 0, "predictions": texts,
                     "prediction_logits": [], "input_tokens": [[1, 2, 3]], "cont_tokens": [[5] * len(t) for t in texts],
                     "truncated": [0], "padded": [0], "gold": [gold], "pred_logits": [], "choices": [],
                     "gold_index": [], "metrics": {"pass@1:8_samples": correct / count}, "specifics": {"kind": "arith"}})
    path = root / "details_lighteval|arith|0_2025-01-01T00-00-00.parquet"
    pd.DataFrame(rows).to_parquet(path)
    return path, []


def verl_lines(step: int):
    for _pid, question, gold, _, text, ok, answer in each_sample():
        yield {"input": f"user\n{question}\nassistant\n", "output": text, "gts": gold, "score": 1.0 if ok else -1.0,
               "step": step, "acc": ok, "pred": answer}


def write_verl(root: Path) -> tuple[Path, list]:
    folder = root / "val_generations"
    folder.mkdir()
    for step in (10, 20):
        (folder / f"{step}.jsonl").write_text("\n".join(json.dumps(x) for x in verl_lines(step)) + "\n")
    return folder, []


def write_verl_generation(root: Path) -> tuple[Path, list]:
    import pandas as pd

    rows = []
    for i, (_pid, question, gold, correct, count) in enumerate(PROBLEMS):
        rows.append({"data_source": "arith", "prompt": [{"role": "user", "content": question}], "ability": "math",
                     "reward_model": {"style": "rule", "ground_truth": gold},
                     "extra_info": {"index": i, "split": "test"},
                     "responses": [r[0] for r in completions(gold, correct, count)]})
    path = root / "test_output.parquet"
    pd.DataFrame(rows).to_parquet(path)
    return path, []


def write_trl(root: Path) -> tuple[Path, list]:
    import pandas as pd

    task = root / "arith_task.jsonl"
    task.write_text("".join(json.dumps({"id": pid, "question": q, "answer": g}) + "\n" for pid, q, g, _, _ in PROBLEMS))
    folder = root / "grpo" / "completions"
    folder.mkdir(parents=True)
    rows = [{"step": 5, "prompt": f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n",
             "completion": text, "accuracy_reward": float(ok), "advantage": 0.5 if ok else -0.5}
            for _, question, _, _, text, ok, _ in each_sample()]
    pd.DataFrame(rows).to_parquet(folder / "completions_00005.parquet")
    return root / "grpo", ["--task", str(task)]


OC_PROBLEMS = [(p, q, g, c, 8) for p, q, g, c, _ in PROBLEMS]  # n copies of a whole dataset: equal n


def write_opencompass(root: Path) -> tuple[Path, list]:
    folder = root / "predictions" / "my-model"
    folder.mkdir(parents=True)
    size, data = len(OC_PROBLEMS), {}
    for i, (_pid, question, gold, correct, count) in enumerate(OC_PROBLEMS):
        for copy, (text, _, _) in enumerate(completions(gold, correct, count)):
            data[str(copy * size + i)] = {"origin_prompt": [{"role": "HUMAN", "prompt": question}],
                                          "prediction": text, "gold": gold}
    path = folder / "arith_gen.json"
    path.write_text(json.dumps(dict(sorted(data.items(), key=lambda kv: int(kv[0]))), indent=4))
    return path, []


def write_evalscope(root: Path) -> tuple[Path, list]:
    folder = root / "reviews" / "my-model"
    folder.mkdir(parents=True)
    lines = []
    for group, (_pid, question, gold, correct, count) in enumerate(PROBLEMS):
        for j, (text, ok, answer) in enumerate(completions(gold, correct, count)):
            lines.append({"index": group * 8 + j, "target": gold,
                          "messages": [{"id": "a1", "content": question, "source": "input", "role": "user"},
                                       {"id": "a2", "content": text, "source": "generate", "role": "assistant",
                                        "model": "my-model"}],
                          "sample_score": {"score": {"value": {"acc": 1.0 if ok else 0.0}, "status": "success",
                                                     "extracted_prediction": answer, "prediction": text,
                                                     "explanation": None, "metadata": {}, "main_score_name": "acc"},
                                           "sample_id": group * 8 + j, "group_id": group, "generation_index": j,
                                           "sample_metadata": {}}})
    path = folder / "arith_default.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path, []


def write_vllm(root: Path) -> tuple[Path, list]:
    path = root / "outputs.jsonl"
    with open(path, "w") as fh:
        for i, (_pid, question, gold, correct, count) in enumerate(PROBLEMS):
            rows = completions(gold, correct, count)
            outputs = [{"index": j, "text": t, "token_ids": list(range(len(t))), "cumulative_logprob": -3.5,
                        "logprobs": None, "finish_reason": "stop", "stop_reason": None} for j, (t, _, _) in enumerate(rows)]
            fh.write(json.dumps({"request_id": str(i), "prompt": question, "prompt_token_ids": [1, 2, 3],
                                 "outputs": outputs, "finished": True, "gold": gold}) + "\n")
    return path, ["--gold-field", "gold"]


# format, writer, problems it holds, whether its grades are per completion (kept by default)
FORMATS = [
    ("jsonl", write_jsonl, PROBLEMS, True),
    ("jsonl", write_csv, PROBLEMS, True),
    ("lm-eval", write_lm_eval, PROBLEMS, False),
    ("lm-eval", write_lm_eval_single, None, True),
    ("lighteval", write_lighteval, PROBLEMS, False),
    ("lighteval", write_lighteval_old, PROBLEMS, False),
    ("verl", write_verl, PROBLEMS, True),
    ("verl", write_verl_generation, PROBLEMS, False),
    ("trl", write_trl, PROBLEMS, True),
    ("opencompass", write_opencompass, OC_PROBLEMS, False),
    ("evalscope", write_evalscope, PROBLEMS, True),
    ("vllm", write_vllm, PROBLEMS, False),
]
IDS = [w.__name__.removeprefix("write_") for _, w, _, _ in FORMATS]


def do_import(fmt, path, out, extra, tokenizer, *more):
    args = ["import", fmt, str(path), "--out", str(out), "--tokenizer", str(tokenizer), *extra, *more]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads((out / "summary.json").read_text()), " ".join(result.output.split())  # unwrapped


@pytest.mark.parametrize(("fmt", "writer", "problems", "graded"), FORMATS, ids=IDS)
def test_each_format_imports_with_exact_pass_at_k(tmp_path, tiny_model, fmt, writer, problems, graded):
    path, extra = writer(tmp_path)
    summary, output = do_import(fmt, path, tmp_path / "run", extra, tiny_model)
    counts = counts_of(problems) if problems else [(1, int(ok)) for *_, ok, _ in each_sample()]
    rows = {r["k"]: r for r in summary["pass_at_k"]}
    for k in KS:
        if any(n >= k for n, _ in counts):
            assert rows[k]["pass_at_k"] == pytest.approx(float(exact_pass_at_k(counts, k)), abs=1e-12), (k, rows[k])
            assert rows[k]["n_excluded"] == sum(n < k for n, _ in counts)
    assert summary["samples"] == sum(n for n, _ in counts)
    info = summary["import"]
    assert info["format"] == fmt and info["sources"][0]["sha256"] and info["mapping"]
    assert summary["grader"].startswith(f"{fmt}'s own grades") == graded, summary["grader"]
    assert info["samples_per_problem"] == {str(n): sum(m == n for m, _ in counts) for n in {n for n, _ in counts}}
    assert "imported" in output and "samples per problem" in output
    assert "rerun the same command" not in output  # uneven samples (p3 has 5): an import has nothing to resume


@pytest.mark.parametrize(("fmt", "writer", "problems", "graded"), [f for f in FORMATS if f[3]],
                         ids=[i for i, f in zip(IDS, FORMATS, strict=True) if f[3]])
def test_keep_grades_reproduces_the_files_own_score_and_regrade_agrees(tmp_path, tiny_model, fmt, writer, problems,
                                                                       graded):
    path, extra = writer(tmp_path)
    do_import(fmt, path, tmp_path / "kept", extra, tiny_model, "--keep-grades")
    kept = [json.loads(line) for line in (tmp_path / "kept" / "samples.jsonl").read_text().splitlines()]
    assert [r["outcome"] == "correct" for r in kept] == [ok for *_, ok, _ in each_sample()]
    assert all(r["detail"].startswith("kept") for r in kept)
    summary, output = do_import(fmt, path, tmp_path / "regraded", extra, tiny_model, "--regrade")
    regraded = [json.loads(line) for line in (tmp_path / "regraded" / "samples.jsonl").read_text().splitlines()]
    assert [r["outcome"] for r in regraded] == [r["outcome"] for r in kept]
    assert all(r["source_outcome"] == k["outcome"] for r, k in zip(regraded, kept, strict=True))
    agreement = summary["import"]["agreement_with_source"]
    assert agreement == {"same_correctness": len(kept), "samples": len(kept)}


@pytest.mark.parametrize(("fmt", "writer", "problems", "graded"), FORMATS, ids=IDS)
def test_every_command_reads_an_imported_run(tmp_path, tiny_model, fmt, writer, problems, graded):
    path, extra = writer(tmp_path)
    run = tmp_path / "run"
    summary, _ = do_import(fmt, path, run, extra, tiny_model)
    for args in (["regrade", str(run), "--out", str(tmp_path / "regraded")],
                 ["length", str(run), "--out", str(tmp_path / "len")],
                 ["groups", str(run), "--group-sizes", "2,4", "--out", str(tmp_path / "groups")],
                 ["report", str(run), "--out", str(tmp_path / "report")]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
    regraded = json.loads((tmp_path / "regraded" / "summary.json").read_text())
    assert regraded["pass_at_k"] == summary["pass_at_k"]  # evalkit's grader agrees with these fixtures
    assert "maj_at_k" in regraded and regraded["maj_at_k"]
    tokens = [json.loads(line)["num_tokens"] for line in (run / "samples.jsonl").read_text().splitlines()]
    texts = [json.loads(line)["completion"] for line in (run / "samples.jsonl").read_text().splitlines()]
    # one token per character: the tiny model's tokenizer, and the fixtures' token ids (lighteval, vLLM)
    assert tokens == [len(t) for t in texts]
    report = (tmp_path / "report" / "report.md").read_text()
    assert "pass^k" in report and "maj@k" in report


def test_maj_at_k_of_an_import_is_the_exact_vote(tmp_path, tiny_model):
    """p0: 3 right, wrong answers 8 and 9 alternate (3 and 2 votes): maj@k exact over subsets."""
    from itertools import combinations

    path, extra = write_jsonl(tmp_path)
    summary, _ = do_import("jsonl", path, tmp_path / "run", extra, tiny_model, "--regrade")
    per_problem = []
    for _pid, _, gold, correct, count in PROBLEMS:
        labels = [r[2] for r in completions(gold, correct, count)]
        row = {}
        for k in KS:
            if k > count:
                continue
            total = Fraction(0)
            for subset in combinations(range(count), k):
                votes = [labels[i] for i in subset]
                top = max(votes.count(v) for v in votes)
                tied = {v for v in votes if votes.count(v) == top}
                total += Fraction(1, len(tied)) if gold in tied else 0
            row[k] = total / math.comb(count, k)
        per_problem.append(row)
    for r in summary["maj_at_k"]:
        values = [p[r["k"]] for p in per_problem if r["k"] in p]
        assert r["maj_at_k"] == pytest.approx(float(sum(values, Fraction(0)) / len(values)), abs=1e-12)


def test_a_round_trip_of_an_evalkit_run_gives_the_same_summary(tmp_path):
    """The committed demo run (a real evalkit passk run), its samples.jsonl imported back."""
    from evalkit.jsonio import read_samples
    from evalkit.rundir import estimator_options, summarize
    from evalkit.tasks import load_task_identity

    demo = Path(__file__).resolve().parents[1] / "results" / "demo"
    original = json.loads((demo / "summary.json").read_text())
    result = runner.invoke(app, ["import", "jsonl", str(demo / "samples.jsonl"), "--out", str(tmp_path / "rt"),
                                 "--task", "arith", "--correct-field", "outcome", "--keep-grades"])
    assert result.exit_code == 0, result.output
    again = json.loads((tmp_path / "rt" / "summary.json").read_text())
    for key in ("pass_at_k", "outcomes", "samples", "problems_with_samples", "complete", "problems", "task",
                "confidence", "interval"):
        assert again[key] == original[key], key
    records = read_samples(demo / "samples.jsonl")
    problems = load_task_identity(original["task"]).problems[: original["problems"]]
    fresh = summarize(records, problems, {}, estimator_options(8))
    for key in ("pass_hat_k", "maj_at_k", "g_pass_at_k", "mg_pass_at_k", "mean_at_n"):
        assert again[key] == fresh[key], key
    stored = [json.loads(line) for line in (tmp_path / "rt" / "samples.jsonl").read_text().splitlines()]
    for a, b in zip(stored, records, strict=True):
        assert {k: a[k] for k in ("problem_id", "sample_index", "completion", "extracted", "outcome", "num_tokens",
                                  "finish_reason", "mean_entropy", "seed")} == \
               {k: b[k] for k in ("problem_id", "sample_index", "completion", "extracted", "outcome", "num_tokens",
                                  "finish_reason", "mean_entropy", "seed")}


def test_unequal_counts_and_unmatched_problems_are_counted(tmp_path, tiny_model):
    task = tmp_path / "task.jsonl"
    task.write_text("".join(json.dumps({"id": pid, "question": q, "answer": g}) + "\n"
                            for pid, q, g, _, _ in PROBLEMS[:3]))  # p3 is not in the task
    path, _ = write_jsonl(tmp_path)
    summary, output = do_import("jsonl", path, tmp_path / "run", ["--correct-field", "correct"], tiny_model,
                                "--task", str(task))
    notes = summary["import"]["notes"]
    assert notes["unmatched"] == {"problems": 1, "samples": 5, "examples": ["p3"]}
    assert notes["matched"] == {"id (no question text to check)": 3}  # the file names problems by id only
    assert "not matched to --task" in output and summary["problems_with_samples"] == 3


def test_without_token_counts_or_a_tokenizer_the_counts_are_null(tmp_path):
    """pass@k, maj@k and regrading need no tokens: the import goes on, num_tokens null, said once."""
    path, extra = write_jsonl(tmp_path)
    result = runner.invoke(app, ["import", "jsonl", str(path), "--out", str(tmp_path / "run"), *extra])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert len(records) == 29 and all(r["num_tokens"] is None for r in records)
    info = json.loads((tmp_path / "run" / "summary.json").read_text())["import"]
    assert info["mapping"]["num_tokens"].startswith("null for 29 completions")
    assert "num_tokens are null" in " ".join(result.output.split())


def test_teacher_forced_entropy_reads_an_imported_run(tmp_path, tiny_model):
    """`evalkit entropy --model M --samples RUN` on an import without --task (its own task file)."""
    path, extra = write_jsonl(tmp_path)
    do_import("jsonl", path, tmp_path / "run", extra, tiny_model)
    result = runner.invoke(app, ["entropy", "--model", str(tiny_model), "--samples", str(tmp_path / "run"),
                                 "--device", "cpu", "--out", str(tmp_path / "ent")])
    assert result.exit_code == 0, result.output
    table = json.loads((tmp_path / "ent" / "entropy.json").read_text())["tables"]["samples"]
    assert len(table) == 29 and all(row["mean_entropy"] > 0 for row in table)
