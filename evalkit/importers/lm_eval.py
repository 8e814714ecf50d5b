"""`lm-eval`: lm-evaluation-harness `--log_samples` files, `samples_<task>_<date>.jsonl`.

    evalkit import lm-eval out/model/samples_gsm8k_2025-01-01T00-00-00.jsonl --out runs/lm --tokenizer M

Writer: EleutherAI/lm-evaluation-harness `lm_eval/evaluator.py` (the logged `example`: doc_id,
doc, target, arguments, resps, filtered_resps, filter, metrics, doc_hash, prompt_hash,
target_hash, and each metric's value under its name) and
`lm_eval/loggers/evaluation_tracker.py` `save_results_samples` (arguments become
`{"gen_args_0": {"arg_0": prompt, "arg_1": gen_kwargs}}`, target a string). One line per
(document, filter): a task with several filters (gsm8k's strict-match and flexible-extract)
logs each document once per filter with the same `resps`; the first filter's lines are read
and the filters named in run.json. With `repeats: K`, `resps[0]` holds the K completions of
the document and the metrics are one value per document (the filter picks or votes): per-
completion grades do not exist, so `--keep-grades` is refused and they are regraded. With one
completion per document the metric (the first in `metrics`) is its grade. `filtered_resps[0]`
is each completion's extracted answer when the filter keeps all K (no take_first); lm-eval's
"[invalid]" fallback reads as no answer. The gold is `target`; the question the document's
question/problem field, else the prompt. The model's name is read from the results_*.json
lm-eval writes beside (`model_name`), when there is one.
"""

from __future__ import annotations

import json
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.importers.base import Imported, ImportOptions, need, one_file, read_json_lines

__all__ = ["read"]

FIELDS = ("doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics")
FMT = "lm-eval samples"
QUESTION_KEYS = ("question", "problem", "Question", "Problem", "input")


def read(path: Path, opts: ImportOptions) -> Imported:
    path = one_file(path, "samples_*.jsonl", "lm-eval")
    lines = read_json_lines(path, FMT)
    first_filter = None
    filters: list[str] = []
    problems, samples = {}, []
    repeats = set()
    for number, doc in lines:
        where = f"{path}:{number}"
        for key in FIELDS:
            need(doc, key, where, FMT)
        if doc["filter"] not in filters:
            filters.append(doc["filter"])
        first_filter = first_filter or doc["filter"]
        if doc["filter"] != first_filter:
            continue
        completions = _completions(doc["resps"], where)
        repeats.add(len(completions))
        key = str(doc["doc_id"])
        if key in problems:
            raise UsageError(f"{where}: doc_id {key} logged twice for filter {first_filter!r}")
        problems[key] = {"question": _question(doc), "gold": doc["target"]}
        extracted = _extracted(doc["filtered_resps"], len(completions))
        score = doc.get(doc["metrics"][0]) if doc["metrics"] and len(completions) == 1 else None
        for i, text in enumerate(completions):
            sample = {"problem": key, "completion": text, "index": i, "extracted": extracted[i]}
            if score is not None:
                sample["score"] = score
            samples.append(sample)
    graded = all("score" in s for s in samples)
    metric = lines[0][1]["metrics"][0] if lines[0][1]["metrics"] else None
    mapping = {"problem": "doc_id", "question": "doc.question (else arguments.gen_args_0.arg_0)", "gold": "target",
               "completion": "resps[0][i]", "extracted": "filtered_resps[0][i] (when the filter keeps every one)",
               "grade": metric if graded else None}
    why = (f"{path}: lm-eval logs one {metric} per document, not per completion (repeats {max(repeats)}): "
           "use --regrade")
    return Imported("lm-eval", _task_name(path), (path,), problems, samples, mapping,
                    metric if graded else None, why, model=_model_name(path),
                    notes={"filters": filters, "filter_read": first_filter, "repeats": sorted(repeats)})


def _completions(resps, where: str) -> list[str]:
    if not isinstance(resps, list) or not resps or not isinstance(resps[0], list):
        raise UsageError(f"{where}: field 'resps' is not a list of per-request lists; not an lm-eval samples file?")
    if len(resps) != 1 or not all(isinstance(t, str) for t in resps[0]):
        raise UsageError(f"{where}: 'resps' holds log-likelihoods or several requests: not a generation task "
                         "(only generate_until tasks have completions to import)")
    return resps[0]


def _extracted(filtered, k: int) -> list:
    first = filtered[0] if isinstance(filtered, list) and filtered else None
    values = first if isinstance(first, list) and len(first) == k else [first] * k if k == 1 else [None] * k
    return [None if (not isinstance(v, str) or v == "[invalid]") else v for v in values]


def _question(doc: dict) -> str:
    body = doc["doc"] if isinstance(doc["doc"], dict) else {}
    for key in QUESTION_KEYS:
        if isinstance(body.get(key), str):
            return body[key]
    args = doc["arguments"]
    prompt = (args.get("gen_args_0") or {}).get("arg_0") if isinstance(args, dict) else None
    return str(prompt or doc["doc_id"])


def _task_name(path: Path) -> str:
    """lm-eval's task name: from the file name it wrote, samples_<task>_<date>.jsonl."""
    stem = path.stem.removeprefix("samples_")
    return stem.rsplit("_", 1)[0] if "_" in stem else stem


def _model_name(path: Path) -> str | None:
    for results in sorted(path.parent.glob("results_*.json")):
        try:
            data = json.loads(results.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("model_name"), str):
            return data["model_name"]
    return None
