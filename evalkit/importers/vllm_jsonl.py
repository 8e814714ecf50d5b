"""`vllm`: JSONL of vLLM `RequestOutput`-shaped records, one per request (n completions each).

    evalkit import vllm outputs.jsonl --out runs/vllm --task hf:HuggingFaceH4/MATH-500::test

vLLM writes no such file itself: this is the shape users dump. Fields: vllm-project/vllm
`vllm/outputs.py` (v0.33.0, the release `tools/vllm_check.py` checks) `RequestOutput` (request_id, prompt,
prompt_token_ids, outputs) and `CompletionOutput` (index, text, token_ids, cumulative_logprob,
logprobs, finish_reason), dumped one request per line (e.g. `{"request_id": o.request_id,
"prompt": o.prompt, "outputs": [vars(c) ...]}`). Requests with the same prompt are one problem;
`outputs[i].index` is the sample index within a request. num_tokens is `len(token_ids)` (kept
as `token_ids`); finish_reason `length` stays `length`, anything else (stop, abort, None) reads
as `stop`. There are no gold answers and no grades: `--task` (matched by the prompt text) or
`--gold-field` (a top-level key beside the RequestOutput fields), and they are regraded.
vLLM's top-k `logprobs` are not an entropy: `evalkit entropy --model M --samples RUN` computes
it exactly by teacher forcing. Every line is checked against `REQUEST` before use: `outputs` a
list of records, each `text` a string and `token_ids` a list of non-negative integers (null is
refused); one prompt given two different golds is refused naming both.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.errors import UsageError
from evalkit.importers.base import Imported, ImportOptions, read_json_lines
from evalkit.importers.fields import GOLD, INDEX, KEY, TEXT, TOKEN_IDS, add_problem
from evalkit.schema import ListOf, Obj, Opt, Str, check

__all__ = ["read"]

FMT = "vLLM RequestOutput JSONL"
OUTPUT = Obj({"text": TEXT, "token_ids": TOKEN_IDS}, optional={"index": INDEX, "finish_reason": Opt(Str())})
REQUEST = Obj({"request_id": KEY, "prompt": TEXT, "outputs": ListOf(OUTPUT)})


def read(path: Path, opts: ImportOptions) -> Imported:
    if path.is_dir():
        raise UsageError(f"{path}: give the JSONL file of RequestOutput records itself")
    problems, samples = {}, []
    offsets: dict[str, int] = {}
    schema = Obj({**REQUEST.fields, **({opts.gold_field: GOLD} if opts.gold_field else {})})
    for number, raw in read_json_lines(path, FMT):
        where = f"{path}:{number}"
        record = check(schema, raw, where, FMT)
        gold = record[opts.gold_field] if opts.gold_field else None
        key = record["prompt"]
        add_problem(problems, key, {"question": key, "gold": gold}, where)
        base = offsets.get(key, 0)
        for j, output in enumerate(record["outputs"]):
            samples.append({"problem": key, "completion": output["text"], "index": base + output.get("index", j),
                            "token_ids": output["token_ids"],
                            "finish_reason": "length" if output.get("finish_reason") == "length" else "stop"})
        offsets[key] = base + len(record["outputs"])
    mapping = {"problem": "prompt", "completion": "outputs[i].text", "num_tokens": "len(outputs[i].token_ids)",
               "finish_reason": "outputs[i].finish_reason", "gold": opts.gold_field or "--task", "grade": None}
    return Imported("vllm", path.stem, (path,), problems, samples, mapping, None,
                    f"{path}: vLLM outputs hold no grades: use --regrade")
