"""Bad input to `evalkit import`: exit 2, exactly one line naming the problem (for a file that does
not match its format, the first missing field), no traceback, nothing written. One row per case;
the fixture writes each broken file with the field names its tool writes, less one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.refusals import assert_refused, fill
from typer.testing import CliRunner

from evalkit.cli import app

runner = CliRunner()


def lm_eval_line(**drop):
    line = {"doc_id": 0, "doc": {"question": "What is 3 + 4?"}, "target": "7",
            "arguments": {"gen_args_0": {"arg_0": "Q: What is 3 + 4?\nA:", "arg_1": {}}},
            "resps": [["The answer is 7.", "It is 8."]], "filtered_resps": [["7", "8"]], "filter": "none",
            "metrics": ["exact_match"], "doc_hash": "d", "prompt_hash": "p", "target_hash": "t", "exact_match": 1.0}
    return {k: v for k, v in line.items() if k not in drop}


def jsonl(path: Path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture(scope="module")
def files(tiny_model, tmp_path_factory):
    import pandas as pd

    root = tmp_path_factory.mktemp("bad_import")
    made = {"root": root, "model": str(tiny_model)}
    made["lm_no_resps"] = jsonl(root / "samples_a_1.jsonl", [lm_eval_line(resps=1)])
    made["lm_repeats"] = jsonl(root / "samples_b_1.jsonl", [lm_eval_line()])
    made["lm_loglik"] = jsonl(root / "samples_c_1.jsonl", [{**lm_eval_line(), "resps": [[["-1.5", "False"]]]}])
    pd.DataFrame([{"doc": {"query": "q", "choices": ["1"], "gold_index": 0}, "metric": {"em": 1.0}}]).to_parquet(
        root / "details_x_1.parquet")
    made["le_no_response"] = str(root / "details_x_1.parquet")
    (root / "details_y_1.parquet").write_text("not parquet")
    made["le_not_parquet"] = str(root / "details_y_1.parquet")
    dumps = root / "verl_dumps"
    dumps.mkdir()
    jsonl(dumps / "3.jsonl", [{"input": "q", "output": "a", "score": 1.0, "step": 3}])
    made["verl_dumps"] = str(dumps)
    (root / "empty_folder").mkdir()
    made["empty_folder"] = str(root / "empty_folder")
    pd.DataFrame([{"step": 1, "prompt": "q", "accuracy_reward": 1.0, "advantage": 0.0}]).to_parquet(
        root / "completions_00001.parquet")
    made["trl_no_completion"] = str(root / "completions_00001.parquet")
    pd.DataFrame([{"step": 1, "prompt": "q", "completion": "a", "accuracy_reward": 1.0, "advantage": 0.0}]).to_parquet(
        root / "completions_00002.parquet")
    made["trl_ok"] = str(root / "completions_00002.parquet")
    (root / "oc.json").write_text(json.dumps({"0": {"origin_prompt": "q", "gold": "1"}}))
    made["oc_no_prediction"] = str(root / "oc.json")
    (root / "oc_list.json").write_text(json.dumps([{"origin_prompt": "q", "prediction": "1"}]))
    made["oc_list"] = str(root / "oc_list.json")
    made["es_no_score"] = jsonl(root / "reviews.jsonl", [{"index": 0, "target": "1", "messages": []}])
    made["vllm_no_ids"] = jsonl(root / "vllm.jsonl", [{"request_id": "0", "prompt": "q", "prompt_token_ids": [1],
                                                       "outputs": [{"index": 0, "text": "a", "finish_reason": "stop"}]}])
    made["no_completion"] = jsonl(root / "nocompletion.jsonl", [{"problem_id": "a", "text": "x"}])
    (root / "notjson.jsonl").write_text('{"problem_id": "a", "completion": "x"}\n{oops\n')
    made["notjson"] = str(root / "notjson.jsonl")
    made["good"] = jsonl(root / "good.jsonl", [{"problem_id": "a", "completion": "It is 7", "answer": "7",
                                                "ok": 1, "num_tokens": 3}])
    made["twice"] = jsonl(root / "twice.jsonl", [{"problem_id": "a", "completion": "7", "answer": "7",
                                                  "sample_index": 0, "num_tokens": 1}] * 2)
    made["no_tokens"] = jsonl(root / "notokens.jsonl", [{"problem_id": "a", "completion": "7", "answer": "7"}])
    made["nogold"] = jsonl(root / "nogold.jsonl", [{"problem_id": "a", "completion": "7", "num_tokens": 1}])
    shards = root / "oc_shards"
    shards.mkdir()
    for part in (0, 1):
        (shards / f"math_{part}.json").write_text(json.dumps({"0": {"origin_prompt": f"q{part}", "prediction": "1"}}))
    made["oc_shard"] = str(shards / "math_0.json")
    (root / "tmp_math.json").write_text(json.dumps({"0": {"origin_prompt": "q", "prediction": "1"}}))
    made["oc_tmp"] = str(root / "tmp_math.json")
    review = {"index": 0, "target": "1", "messages": [{"role": "user", "content": "q"}],
              "sample_score": {"score": {"value": {"acc": 1.0}, "prediction": "1"}, "sample_id": 0, "group_id": 0}}
    made["es_joined"] = jsonl(root / "math_all.jsonl", [review, review])
    (root / "log.eval").write_text("not a zip")
    made["insp_not_zip"] = str(root / "log.eval")
    (root / "a_file").write_text("x")
    made["a_file"] = str(root / "a_file")
    (root / "full").mkdir()
    (root / "full" / "mine.txt").write_text("mine")
    made["full"] = str(root / "full")
    return made


OUT = ["--out", "{root}/run"]
GOOD = ["import", "jsonl", "{good}", "--gold-field", "answer", *OUT]

CASES = [
    (["import", "lmeval", "{good}", *OUT], "unknown format 'lmeval'"),
    (["import", "jsonl", "{root}/missing.jsonl", *OUT], "no such file or folder"),
    (["import", "lm-eval", "{lm_no_resps}", *OUT], "no field 'resps'"),
    (["import", "lm-eval", "{lm_repeats}", *OUT, "--keep-grades"], "one exact_match per document"),
    (["import", "lm-eval", "{lm_loglik}", *OUT], "not a generation task"),
    (["import", "lighteval", "{le_no_response}", *OUT], "no column 'model_response'"),
    (["import", "lighteval", "{le_not_parquet}", *OUT], "not a readable Parquet file"),
    (["import", "verl", "{verl_dumps}", *OUT], "has no gold answer in the file; give --task"),  # verl < 0.6: no gts
    (["import", "verl", "{verl_dumps}", "--step", "7", *OUT], "--step 7: no such <step>.jsonl"),
    (["import", "verl", "{empty_folder}", *OUT], "no <step>.jsonl of verl dump"),
    (["import", "trl", "{trl_no_completion}", *OUT], "no column 'completion'"),
    (["import", "trl", "{trl_ok}", "--tokenizer", "{model}", *OUT], "has no gold answer in the file; give --task"),
    (["import", "opencompass", "{oc_no_prediction}", *OUT], "no field 'prediction'"),
    (["import", "opencompass", "{oc_list}", *OUT], "expected a JSON object"),
    (["import", "evalscope", "{es_no_score}", *OUT], "no field 'sample_score'"),
    (["import", "vllm", "{vllm_no_ids}", *OUT], "no field 'outputs[0].token_ids'"),
    (["import", "jsonl", "{no_completion}", *OUT], "no field 'completion'"),
    (["import", "jsonl", "{notjson}", *OUT], ":2: not valid JSON"),
    (["import", "jsonl", "{nogold}", *OUT], "has no gold answer in the file; give --task"),
    (["import", "jsonl", "{twice}", "--gold-field", "answer", *OUT], "sample index 0 twice"),
    ([*GOOD, "--keep-grades"], "no --correct-field given"),
    ([*GOOD, "--keep-grades", "--regrade"], "not both"),
    ([*GOOD, "--correct-field", "score"], "no field 'score'"),
    ([*GOOD, "--step", "-1"], "--step -1: must be >= 0"),
    ([*GOOD, "--task", "nope"], "unknown task 'nope'"),
    ([*GOOD, "--task", "arith"], "no problem of the file matches a problem of --task arith"),
    (["import", "jsonl", "{good}", "--gold-field", "answer", "--out", "{full}"], "exists and is not empty"),
    (["import", "jsonl", "{good}", "--gold-field", "answer", "--out", "{a_file}/run"], "is a file, not a folder"),
    (["import", "lm-eval", "{lm_repeats}", *OUT, "--filter", "strict-match"], "--filter strict-match: not in"),
    (["import", "opencompass", "{oc_shard}", *OUT], "part 0 of 2 parts of math"),
    (["import", "opencompass", "{oc_tmp}", *OUT], "the file OpenCompass keeps while it infers"),
    (["import", "evalscope", "{es_joined}", *OUT], "several subsets joined into one file"),
    (["import", "inspect", "{insp_not_zip}", *OUT], "not a readable .eval zip"),
    (["import", "jsonl", "{no_tokens}", "--gold-field", "answer", *OUT, "--tokenizer", "{root}/missing_model"],
     "no such"),
]


@pytest.mark.parametrize(("args", "fragment"), CASES, ids=[f"{a[1]}-{i}" for i, (a, _) in enumerate(CASES)])
def test_bad_import_is_one_line_exit_2_and_writes_nothing(files, args, fragment):
    assert_refused(lambda: runner.invoke(app, [fill(a, files) for a in args]), fragment, files["root"])
