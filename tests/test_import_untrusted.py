"""Hostile and malformed files of every import format (issue 43): each field of each writer's
record typed, nesting bounded, sizes bounded. One row per input: exit 2, one line naming the
file, the line or record, the field, what was expected and what was found, nothing written and
the user's files untouched (`helpers.refusals.assert_refused`); or, for a valid file that was
refused before (a 200 KB CSV cell), the correct result. Fixtures are written with each tool's own
field names (tests/test_import.py cites the writers), then one field is broken."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from helpers.refusals import assert_refused, fill
from typer.testing import CliRunner

from evalkit.cli import app

runner = CliRunner()
REAL = Path(__file__).parent / "data" / "real"
DEEP = "[" * 200_000 + "]" * 200_000


def jsonl(path: Path, rows) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


def lm_line(**change):
    line = {"doc_id": 0, "doc": {"question": "What is 3 + 4?"}, "target": "7",
            "arguments": {"gen_args_0": {"arg_0": "Q: What is 3 + 4?\nA:", "arg_1": {}}},
            "resps": [["The answer is 7."]], "filtered_resps": [["7"]], "filter": "none",
            "metrics": ["exact_match"], "doc_hash": "d", "prompt_hash": "p", "target_hash": "t", "exact_match": 1.0}
    return line | change


def sample(**change):
    return {"problem_id": "a", "completion": "It is 7", "answer": "7", "num_tokens": 3} | change


def le_row(doc=None, response=None):
    doc = {"query": "What is 3 + 4?", "choices": ["7"], "gold_index": 0, "id": "0", "task_name": "lighteval|arith|0",
           "original_query": "What is 3 + 4?"} | (doc or {})
    response = {"input": "q", "text": ["The answer is 7."], "output_tokens": [[5, 6]]} | (response or {})
    return {"doc": doc, "metric": {"em": 1.0}, "model_response": response}


def parquet(path: Path, rows) -> str:
    import pandas as pd

    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path)
    return str(path)


def verl_line(**change):
    return {"input": "What is 3 + 4?", "output": "7", "score": 1.0, "step": 3, "gts": "7"} | change


def vllm_line(**change):
    output = {"index": 0, "text": "7", "token_ids": [5, 6], "finish_reason": "stop"} | change.pop("output", {})
    return {"request_id": "0", "prompt": "What is 3 + 4?", "prompt_token_ids": [1], "outputs": [output],
            "gold": "7"} | change


def review(index=0, **change):
    line = {"index": index, "target": "7", "messages": [{"role": "user", "content": "What is 3 + 4?"}],
            "sample_score": {"score": {"value": {"acc": 1.0}, "prediction": "7", "extracted_prediction": "7",
                                       "main_score_name": "acc"}, "sample_id": index, "group_id": index}}
    return line | change


def eval_log(path: Path, change_sample=None, member=None, header=None) -> str:
    """The real inspect_ai log (tests/data/real/inspect/log_streaming.eval) with one member changed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(REAL / "inspect" / "log_streaming.eval") as zin, \
            zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zout:
        for name in zin.namelist():
            data = zin.read(name)
            if name == "samples/1_epoch_1.json" and change_sample is not None:
                data = change_sample(json.loads(data)) if callable(change_sample) else change_sample
            if name == "header.json" and header is not None:
                data = header(json.loads(data))
            zout.writestr(name, data if isinstance(data, bytes | str) else json.dumps(data))
        if member is not None:
            zout.writestr(*member)
    return str(path)


def _without(data: dict, key: str) -> dict:
    return {k: v for k, v in data.items() if k != key}


def _epoch(value):
    def change(s):
        return json.dumps(s).replace(f'"epoch": {s["epoch"]}', f'"epoch": {value}', 1)
    return change


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("untrusted_import")
    r = root / "in"
    made = {"root": root}
    # lm-eval
    made["lm_nan_id"] = jsonl(r / "lm1" / "samples_a_1.jsonl", [json.dumps(lm_line()).replace('"doc_id": 0', '"doc_id": NaN')])
    made["lm_metrics5"] = jsonl(r / "lm2" / "samples_a_1.jsonl", [lm_line(metrics=5)])
    made["lm_resps_text"] = jsonl(r / "lm3" / "samples_a_1.jsonl", [lm_line(resps="The answer is 7.")])
    (r / "lm4").mkdir(parents=True)
    (r / "lm4" / "samples_a_1.json").write_text(DEEP)
    made["lm_deep"] = str(r / "lm4" / "samples_a_1.json")
    (r / "lm5" / "samples_gsm8k_2025-01-01T00-00-00.jsonl").mkdir(parents=True)
    made["lm_folder_named"] = str(r / "lm5")
    made["lm_metric_text"] = jsonl(r / "lm6" / "samples_a_1.jsonl", [lm_line(exact_match=[1, 2])])
    # JSONL / CSV
    made["gen_nan_index"] = jsonl(r / "g1.jsonl", [json.dumps(sample(sample_index=0)).replace(': 0}', ': NaN}')])
    made["gen_neg_tokens"] = jsonl(r / "g2.jsonl", [sample(num_tokens=-3)])
    made["gen_two_golds"] = jsonl(r / "g3.jsonl", [sample(), sample(completion="It is 8", answer="8")])
    made["gen_problem_obj"] = jsonl(r / "g4.jsonl", [sample(problem_id={"id": 1})])
    made["gen_completions_list"] = jsonl(r / "g5.jsonl", [sample(completion=["It is 7", "7"])])
    made["gen_deep"] = jsonl(r / "g6.jsonl", [DEEP])
    made["gen_bool_index"] = jsonl(r / "g7.jsonl", [sample(sample_index=True)])
    (r / "mine.jsonl").mkdir()
    made["gen_folder_named"] = str(r / "mine.jsonl")
    (r / "c1.csv").write_text("problem_id,completion,answer\na,7,7,extra\n")
    made["csv_extra_cell"] = str(r / "c1.csv")
    (r / "c2.csv").write_text("problem_id,completion,answer,sample_index\na,7,7,abc\n")
    made["csv_bad_index"] = str(r / "c2.csv")
    (r / "c3.csv").write_text("problem_id,completion,answer,num_tokens\na,7,7,-1\n")
    made["csv_neg_tokens"] = str(r / "c3.csv")
    # lighteval
    made["le_text_str"] = parquet(r / "le1" / "details_x_1.parquet", [le_row(response={"text": "The answer is 7."})])
    made["le_gold_neg"] = parquet(r / "le2" / "details_x_1.parquet", [le_row(doc={"gold_index": -5})])
    made["le_gold_past"] = parquet(r / "le3" / "details_x_1.parquet", [le_row(doc={"gold_index": 7})])
    made["le_tokens_neg"] = parquet(r / "le4" / "details_x_1.parquet", [le_row(response={"output_tokens": [[-1]]})])
    made["le_old_str"] = parquet(r / "le5" / "details_x_1.parquet", [{"example": "q", "predictions": "The answer",
                                                                      "metrics": {"em": 1.0}, "gold": ["7"]}])
    (r / "le6" / "details_x_1.parquet").mkdir(parents=True)
    made["le_folder_named"] = str(r / "le6")
    # verl
    made["verl_responses_str"] = parquet(r / "v1" / "test_output.parquet",
                                         [{"prompt": [{"role": "user", "content": "q"}], "responses": "The answer is 7.",
                                           "reward_model": {"ground_truth": "7"}, "extra_info": {"index": 0}}])
    made["verl_step_nan"] = jsonl(r / "v2" / "3.jsonl", [json.dumps(verl_line()).replace('"step": 3', '"step": NaN')])
    made["verl_output_null"] = jsonl(r / "v3" / "3.jsonl", [verl_line(output=None)])
    (r / "v4" / "3.jsonl").mkdir(parents=True)
    made["verl_folder_named"] = str(r / "v4")
    made["verl_two_golds"] = parquet(r / "v5" / "test_output.parquet", [
        {"prompt": "q", "responses": ["7"], "reward_model": {"ground_truth": g}, "extra_info": {"index": 0}}
        for g in ("7", "8")])
    # TRL
    made["trl_nan_completion"] = parquet(r / "t1" / "completions_00001.parquet", [
        {"step": 1, "prompt": "q", "completion": None, "accuracy_reward": 1.0, "advantage": 0.0}])
    made["trl_two_golds"] = parquet(r / "t2" / "completions_00001.parquet", [
        {"step": 1, "prompt": "q", "completion": "7", "accuracy_reward": 1.0, "advantage": 0.0, "answer": g}
        for g in ("7", "8")])
    # vLLM
    made["vllm_ids_null"] = jsonl(r / "vl1.jsonl", [vllm_line(output={"token_ids": None})])
    made["vllm_ids_neg"] = jsonl(r / "vl2.jsonl", [vllm_line(output={"token_ids": [5, -1]})])
    made["vllm_outputs_str"] = jsonl(r / "vl3.jsonl", [vllm_line(outputs="7")])
    made["vllm_two_golds"] = jsonl(r / "vl4.jsonl", [vllm_line(), vllm_line(request_id="1", gold="8")])
    # OpenCompass
    (r / "oc1").mkdir()
    (r / "oc1" / "math.json").write_text(json.dumps({"0": {"origin_prompt": "q", "prediction": ["7", "8"], "gold": "7"}}))
    made["oc_prediction_list"] = str(r / "oc1" / "math.json")
    (r / "oc2").mkdir()
    (r / "oc2" / "math.json").write_text(json.dumps({"0": {"origin_prompt": "q", "prediction": "7", "gold": "7"},
                                                     "1": {"origin_prompt": "q", "prediction": "7", "gold": "8"}}))
    made["oc_two_golds"] = str(r / "oc2" / "math.json")
    (r / "oc3").mkdir()
    (r / "oc3" / "math.json").write_text(DEEP)
    made["oc_deep"] = str(r / "oc3" / "math.json")
    # evalscope
    made["es_index_nan"] = jsonl(r / "es1" / "gsm8k_main.jsonl", [json.dumps(review()).replace('"index": 0', '"index": NaN')])
    made["es_old_tokens"] = jsonl(r / "es2" / "gsm8k_main.jsonl", [{
        "index": 0, "choices": [{"message": {"content": "7"}, "review": {"gold": "7", "pred": "7", "result": True}}],
        "usage": {"completion_tokens": -4}, "raw_input": {"question": "q"}, "model": "m"}])
    made["es_two_golds"] = jsonl(r / "es3" / "gsm8k_main.jsonl", [review(0), review(1, target="8") | {
        "sample_score": review(1)["sample_score"] | {"group_id": 0}}])
    (r / "es4" / "reviews" / "m" / "gsm8k_main.jsonl").mkdir(parents=True)
    made["es_folder_named"] = str(r / "es4" / "reviews" / "m")
    reviews = r / "es5" / "reviews" / "m"
    jsonl(reviews / "gsm8k_main.jsonl", [review()])
    (r / "es5" / "reports" / "m").mkdir(parents=True)
    (r / "es5" / "reports" / "m" / "gsm8k.json").write_text(json.dumps({"model_name": "m", "metrics": [5]}))
    made["es_report_bad"] = str(reviews)
    made["es_huge_index"] = jsonl(r / "es6" / "gsm8k_main.jsonl", [review(), review(10**12)])
    # inspect_ai
    made["insp_epoch_nan"] = eval_log(r / "i1.eval", _epoch("NaN"))
    made["insp_no_eval"] = eval_log(r / "i2.eval", header=lambda h: _without(h, "eval"))
    made["insp_tokens_neg"] = eval_log(r / "i3.eval", lambda s: s | {"output": s["output"] | {"usage": {"output_tokens": -1}}})
    made["insp_deep"] = eval_log(r / "i4.eval", DEEP)
    made["insp_bomb"] = eval_log(r / "i5.eval", member=("samples/9_epoch_1.json", b"0" * (64 << 20)))
    made["insp_two_targets"] = eval_log(r / "i6.eval", lambda s: s | {"id": 2, "epoch": 3, "target": "something else"})
    made["insp_output_text"] = eval_log(r / "i7.eval", lambda s: s | {"output": s["output"] | {"completion": ["a", "b"]}})
    return made


OUT = ["--out", "{root}/run"]
KEEP = [*OUT, "--keep-grades"]

CASES = [
    (["import", "lm-eval", "{lm_nan_id}", *OUT], "samples_a_1.jsonl:1: field 'doc_id': expected an integer >= 0 or a string, "
                                                 "found NaN"),
    (["import", "lm-eval", "{lm_metrics5}", *OUT], ":1: field 'metrics': expected a list of strings, found 5"),
    (["import", "lm-eval", "{lm_resps_text}", *OUT], "field 'resps': expected a list of lists of values, found a string"),
    (["import", "lm-eval", "{lm_deep}", *OUT], "samples_a_1.json: nested too deeply to read"),
    (["import", "lm-eval", "{lm_folder_named}", *OUT], "no samples_<task>_<date>.jsonl of lm-eval in the folder"),
    (["import", "jsonl", "{gen_nan_index}", "--gold-field", "answer", *OUT],
     "g1.jsonl:1: field 'sample_index': expected an integer >= 0 or null, found NaN"),
    (["import", "jsonl", "{gen_neg_tokens}", "--gold-field", "answer", *OUT],
     "field 'num_tokens': expected an integer >= 0 or null, found -3"),
    (["import", "jsonl", "{gen_two_golds}", "--gold-field", "answer", *OUT],
     "g3.jsonl:2: problem 'a' has two different gold answers: a string ('7') earlier, a string ('8') here"),
    (["import", "jsonl", "{gen_problem_obj}", "--gold-field", "answer", *OUT],
     "field 'problem_id': expected an integer >= 0 or a string, found an object"),
    (["import", "jsonl", "{gen_completions_list}", "--gold-field", "answer", *OUT],
     "field 'completion': expected a string, found a list of 2"),
    (["import", "jsonl", "{gen_deep}", "--gold-field", "answer", *OUT], "g6.jsonl:1: nested too deeply to read"),
    (["import", "jsonl", "{gen_bool_index}", "--gold-field", "answer", *OUT],
     "field 'sample_index': expected an integer >= 0 or null, found true"),
    (["import", "jsonl", "{gen_folder_named}", "--gold-field", "answer", *OUT], "give the JSONL or CSV file itself"),
    (["import", "jsonl", "{csv_extra_cell}", "--gold-field", "answer", *OUT], "c1.csv:2: more cells than the header"),
    (["import", "jsonl", "{csv_bad_index}", "--gold-field", "answer", *OUT],
     "c2.csv:2: field 'sample_index': expected a number, found 'abc'"),
    (["import", "jsonl", "{csv_neg_tokens}", "--gold-field", "answer", *OUT],
     "c3.csv:2: field 'num_tokens': expected an integer >= 0 or null, found -1"),
    (["import", "lighteval", "{le_text_str}", *OUT],
     "row 1: model_response: field 'text': expected a list of strings, found a string ('The answer is 7.')"),
    (["import", "lighteval", "{le_gold_neg}", *OUT],
     "row 1: doc: field 'gold_index': expected an integer >= 0 or a list of integers >= 0, found -5"),
    (["import", "lighteval", "{le_gold_past}", *OUT], "field 'gold_index': expected an index into the 1 choices, found 7"),
    (["import", "lighteval", "{le_tokens_neg}", *OUT], "field 'output_tokens[0][0]': expected an integer >= 0, found -1"),
    (["import", "lighteval", "{le_old_str}", *OUT], "field 'predictions': expected a list of strings, found a string"),
    (["import", "lighteval", "{le_folder_named}", *OUT], "expected one details_*.parquet file of lighteval, found 0"),
    (["import", "verl", "{verl_responses_str}", *OUT],
     "row 1: field 'responses': expected a list of strings, found a string ('The answer is 7.')"),
    (["import", "verl", "{verl_step_nan}", *OUT], "3.jsonl:1: field 'step': expected an integer >= 0, found NaN"),
    (["import", "verl", "{verl_output_null}", *OUT], "field 'output': expected a string, found null"),
    (["import", "verl", "{verl_folder_named}", *OUT], "no <step>.jsonl of verl dump in the folder"),
    (["import", "verl", "{verl_two_golds}", *OUT], "row 2: problem '0' has two different gold answers"),
    (["import", "trl", "{trl_nan_completion}", "--correct-field", "accuracy_reward", *OUT],
     "row 1: field 'completion': expected a string, found null"),
    (["import", "trl", "{trl_two_golds}", "--gold-field", "answer", *OUT], "row 2: problem 'q' has two different gold answers"),
    (["import", "vllm", "{vllm_ids_null}", "--gold-field", "gold", *OUT],
     "vl1.jsonl:1: field 'outputs[0].token_ids': expected a list of integers >= 0, found null"),
    (["import", "vllm", "{vllm_ids_neg}", "--gold-field", "gold", *OUT],
     "field 'outputs[0].token_ids[1]': expected an integer >= 0, found -1"),
    (["import", "vllm", "{vllm_outputs_str}", "--gold-field", "gold", *OUT], "field 'outputs': expected a list of objects"),
    (["import", "vllm", "{vllm_two_golds}", "--gold-field", "gold", *OUT], "vl4.jsonl:2: problem 'What is 3 + 4?' has two "
                                                                          "different gold answers"),
    (["import", "opencompass", "{oc_prediction_list}", *OUT], "field 'prediction': expected a string, found a list of 2"),
    (["import", "opencompass", "{oc_two_golds}", *OUT], "problem '0' has two different gold answers"),
    (["import", "opencompass", "{oc_deep}", *OUT], "math.json: nested too deeply to read"),
    (["import", "evalscope", "{es_index_nan}", *OUT], "gsm8k_main.jsonl:1: field 'index': expected an integer >= 0, found NaN"),
    (["import", "evalscope", "{es_old_tokens}", *OUT], "field 'usage.completion_tokens': expected an integer >= 0 or null, "
                                                       "found -4"),
    (["import", "evalscope", "{es_two_golds}", *OUT], "gsm8k_main.jsonl:2: problem '0' has two different gold answers"),
    (["import", "evalscope", "{es_folder_named}", *OUT], "no <benchmark>_<subset>.jsonl reviews of evalscope in the folder"),
    (["import", "evalscope", "{es_report_bad}", *OUT], "gsm8k.json: field 'metrics[0]': expected an object, found 5"),
    (["import", "evalscope", "{es_huge_index}", *KEEP], "indices 0..1000000000000 lack 999999999999 (first 1)"),
    (["import", "inspect", "{insp_epoch_nan}", *KEEP], "samples/1_epoch_1.json: field 'epoch': expected an integer >= 1, "
                                                       "found NaN"),
    (["import", "inspect", "{insp_no_eval}", *KEEP], "i2.eval: no field 'eval'"),
    (["import", "inspect", "{insp_tokens_neg}", *KEEP], "field 'output.usage.output_tokens': expected an integer >= 0 or "
                                                        "null, found -1"),
    (["import", "inspect", "{insp_deep}", *KEEP], "samples/1_epoch_1.json: nested too deeply to read"),
    (["import", "inspect", "{insp_bomb}", *KEEP], "member samples/9_epoch_1.json inflates to 67108864 bytes, more than 256 "
                                                  "times the log's"),
    (["import", "inspect", "{insp_two_targets}", *KEEP], "problem '2' has two different gold answers"),
    (["import", "inspect", "{insp_output_text}", *KEEP], "field 'output.completion': expected a string or null, found a list"),
]


@pytest.mark.parametrize(("args", "fragment"), CASES, ids=[f"{a[1]}-{i}" for i, (a, _) in enumerate(CASES)])
def test_a_hostile_import_is_one_line_exit_2_and_writes_nothing(files, args, fragment):
    assert_refused(lambda: runner.invoke(app, [fill(a, files) for a in args]), fragment, files["root"])


def test_a_csv_cell_of_200_kb_is_a_cell(tmp_path):
    """Python's csv module stops at 131,072 characters a field by default; a completion of 200 KB
    is imported whole, and the limit is put back afterwards."""
    import csv

    long = "x" * 200_000 + " The answer is 7."
    path = tmp_path / "long.csv"
    with open(path, "w", newline="") as fh:
        csv.writer(fh).writerows([("problem_id", "completion", "answer"), ("a", long, "7"), ("a", "It is 8", "7")])
    before = csv.field_size_limit()
    result = runner.invoke(app, ["import", "jsonl", str(path), "--gold-field", "answer", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert [len(r["completion"]) for r in records] == [len(long), 7]
    assert [r["outcome"] for r in records] == ["correct", "incorrect"]
    assert csv.field_size_limit() == before


def test_the_same_gold_written_twice_is_one_problem(tmp_path):
    """Copies of one problem that agree on the gold (whitespace aside) are accepted, as before."""
    path = Path(jsonl(tmp_path / "same.jsonl", [sample(), sample(completion="It is 8", answer=" 7 ")]))
    result = runner.invoke(app, ["import", "jsonl", str(path), "--gold-field", "answer", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["problems"] == 1
