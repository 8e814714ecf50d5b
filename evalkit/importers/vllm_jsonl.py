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
it exactly by teacher forcing.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.errors import UsageError
from evalkit.importers.base import Imported, ImportOptions, need, read_json_lines

__all__ = ["read"]

FMT = "vLLM RequestOutput JSONL"


def read(path: Path, opts: ImportOptions) -> Imported:
    if path.is_dir():
        raise UsageError(f"{path}: give the JSONL file of RequestOutput records itself")
    problems, samples = {}, []
    offsets: dict[str, int] = {}
    for number, record in read_json_lines(path, FMT):
        where = f"{path}:{number}"
        need(record, "request_id", where, FMT)
        prompt, outputs = need(record, "prompt", where, FMT), need(record, "outputs", where, FMT)
        if not isinstance(outputs, list):
            raise UsageError(f"{where}: field 'outputs' is not a list of CompletionOutput records")
        gold = need(record, opts.gold_field, where, FMT) if opts.gold_field else None
        key = str(prompt)
        problems.setdefault(key, {"question": key, "gold": gold})
        base = offsets.get(key, 0)
        for j, output in enumerate(outputs):
            text = need(output, "text", f"{where} outputs[{j}]", FMT)
            ids = need(output, "token_ids", f"{where} outputs[{j}]", FMT)
            samples.append({"problem": key, "completion": str(text), "index": base + int(output.get("index", j)),
                            "token_ids": list(ids),
                            "finish_reason": "length" if output.get("finish_reason") == "length" else "stop"})
        offsets[key] = base + len(outputs)
    mapping = {"problem": "prompt", "completion": "outputs[i].text", "num_tokens": "len(outputs[i].token_ids)",
               "finish_reason": "outputs[i].finish_reason", "gold": opts.gold_field or "--task", "grade": None}
    return Imported("vllm", path.stem, (path,), problems, samples, mapping, None,
                    f"{path}: vLLM outputs hold no grades: use --regrade")
