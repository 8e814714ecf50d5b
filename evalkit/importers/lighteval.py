"""`lighteval`: lighteval's details files, `details_<task>_<date>.parquet`.

    evalkit import lighteval results/details/model/2025-01-01T00-00-00/details_lighteval|gsm8k|0_2025.parquet --out runs/le

Writer: huggingface/lighteval `src/lighteval/logging/evaluation_tracker.py` (`save_details`:
`Dataset.from_list([asdict(detail) ...])`, columns sorted, written with `to_parquet`) of
`src/lighteval/logging/info_loggers.py` `DetailsLogger.Detail` (doc, model_response, metric).
`doc` is `src/lighteval/tasks/requests.py` `Doc` (query, choices, gold_index, id, task_name,
specific, ...): the gold is `choices[gold_index]` (the first when a list). `model_response` is
`src/lighteval/models/model_output.py` `ModelResponse`: `text` (n completions),
`output_tokens` (their token ids, kept in samples.jsonl as `token_ids`, and counted as
num_tokens), `input_tokens`, `logprobs`. `metric` holds one value per document (pass@k:k=1&n=8,
...); only with one completion per document is it that completion's grade (the first metric).
"""

from __future__ import annotations

from pathlib import Path

from evalkit.errors import UsageError
from evalkit.importers.base import Imported, ImportOptions, need, one_file, read_parquet

__all__ = ["read"]

FMT = "lighteval details"


def _plain(value):
    """numpy arrays (how pandas returns parquet lists) as lists, recursively."""
    if hasattr(value, "tolist") and not isinstance(value, str):
        return value.tolist()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def read(path: Path, opts: ImportOptions) -> Imported:
    path = one_file(path, "details_*.parquet", "lighteval")
    frame = read_parquet(path, FMT)
    for column in ("doc", "model_response", "metric"):
        if column not in frame.columns:
            raise UsageError(f"{path}: no column {column!r}; not a {FMT} file?")
    problems, samples, metric_names = {}, [], set()
    for row_number, (doc, response, metric) in enumerate(zip(frame["doc"], frame["model_response"], frame["metric"],
                                                             strict=True), start=1):
        where = f"{path}: row {row_number}"
        doc, response = _plain(doc), _plain(response)
        query, choices, gold_index = (need(doc, k, f"{where} doc", FMT) for k in ("query", "choices", "gold_index"))
        texts = need(response, "text", f"{where} model_response", FMT)
        key = str(doc.get("id") or row_number - 1)
        if key in problems:
            raise UsageError(f"{where}: doc id {key!r} twice")
        first = gold_index[0] if isinstance(gold_index, list) else gold_index
        gold = choices[first] if isinstance(choices, list) and isinstance(first, int) and first < len(choices) else None
        problems[key] = {"question": doc.get("original_query") or query, "gold": gold}
        tokens = response.get("output_tokens") or []
        metric = _plain(metric) if isinstance(metric, dict) else {}
        name = next(iter(metric), None)
        metric_names.add(name)
        for i, text in enumerate(texts):
            sample = {"problem": key, "completion": str(text), "index": i}
            if i < len(tokens) and tokens[i] is not None and len(tokens[i]):
                sample["token_ids"] = tokens[i]
            if len(texts) == 1 and name is not None and metric[name] is not None:
                sample["score"] = metric[name]
            samples.append(sample)
    graded = bool(samples) and all("score" in s for s in samples)
    name = sorted(n for n in metric_names if n)[0] if graded and any(metric_names) else None
    mapping = {"problem": "doc.id (else the row)", "question": "doc.original_query or doc.query",
               "gold": "doc.choices[doc.gold_index]", "completion": "model_response.text[i]",
               "num_tokens": "len(model_response.output_tokens[i])", "grade": name}
    why = f"{path}: lighteval's metric is one value per document, not per completion: use --regrade"
    task = str(_plain(frame["doc"].iloc[0]).get("task_name") or path.stem) if len(frame) else path.stem
    return Imported("lighteval", task.replace("|", "_"), (path,), problems, samples, mapping, name, why)
