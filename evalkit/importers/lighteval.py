"""`lighteval`: lighteval's details files, `details_<task>_<date>.parquet`.

    evalkit import lighteval results/details/model/2025-01-01T00-00-00/details_lighteval|gsm8k|0_2025.parquet --out runs/le

Writer: huggingface/lighteval `src/lighteval/logging/evaluation_tracker.py` (`save_details`:
`Dataset.from_list([asdict(detail) ...])` written with `to_parquet` as
`details_<task>_<date_id>.parquet`) of `src/lighteval/logging/info_loggers.py`
`DetailsLogger.Detail`, in two layouts (read at the tags named):
- v0.11.0 to v0.13.0: columns `doc`, `model_response`, `metric`. `doc` is
  `src/lighteval/tasks/requests.py` `Doc` (query, choices, gold_index, id, task_name, ...): the
  gold is `choices[gold_index]` (the first when a list). `model_response` is
  `src/lighteval/models/model_output.py` `ModelResponse`: `text` (n completions), `output_tokens`
  (their token ids, kept in samples.jsonl as `token_ids`, and counted as num_tokens).
- v0.6.0 to v0.10.0: flat columns `example` (the query), `full_prompt`, `predictions` (the
  completions, flattened over the request's n), `cont_tokens`, `gold` (doc.get_golds()), `choices`,
  `gold_index`, `metrics`, `specifics`; no document id (the row is the problem).
`metric(s)` holds one value per document (pass@k:k=1&n=8, ...); only with one completion per
document is it that completion's grade (the first metric).
Each row is checked against `DOC`/`RESPONSE` (or `OLD_ROW`) before it is used: `text` and
`predictions` lists of strings (a string is refused, never one completion per character),
`gold_index` a non-negative integer (or a list of them) inside `choices`, token ids non-negative.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.errors import UsageError
from evalkit.importers.base import Imported, ImportOptions, one_file, read_parquet
from evalkit.importers.fields import COMPLETIONS, GOLD, INDEX, KEY, SCORE, TOKEN_IDS
from evalkit.schema import Json, ListOf, MapOf, Obj, Opt, Str, check

__all__ = ["read"]

FMT = "lighteval details"
# src/lighteval/tasks/requests.py `Doc` and src/lighteval/models/model_output.py `ModelResponse`, as
# `asdict` writes them (fields read here; the others kept as they are)
DOC = Obj({"query": Str(), "choices": ListOf(Json()), "gold_index": INDEX | ListOf(INDEX)},
          optional={"id": Opt(KEY), "original_query": Opt(Str()), "task_name": Opt(Str())})
RESPONSE = Obj({"text": COMPLETIONS}, optional={"output_tokens": Opt(ListOf(Opt(TOKEN_IDS)))})
METRIC = Opt(MapOf(SCORE | Json()))
OLD_ROW = Obj({"predictions": COMPLETIONS, "metrics": METRIC},
              optional={"example": Opt(Str()), "full_prompt": Opt(Str()), "gold": Opt(GOLD),
                        "cont_tokens": Opt(ListOf(Opt(TOKEN_IDS)))})


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
    old = "model_response" not in frame.columns and {"example", "predictions", "metrics"} <= set(frame.columns)
    columns = ("example", "predictions", "metrics") if old else ("doc", "model_response", "metric")
    for column in columns:
        if column not in frame.columns:
            raise UsageError(f"{path}: no column {column!r}; not a {FMT} file?")
    problems, samples, metric_names = {}, [], set()
    for row_number, row in enumerate(frame.to_dict("records"), start=1):
        where = f"{path}: row {row_number}"
        key, info, texts, tokens, metric = _old_row(row, where, row_number) if old else _row(row, where, row_number)
        if key in problems:
            raise UsageError(f"{where}: doc id {key!r} twice")
        problems[key] = info
        name = next(iter(metric), None)
        metric_names.add(name)
        for i, text in enumerate(texts):
            sample = {"problem": key, "completion": str(text), "index": i}
            if i < len(tokens) and tokens[i] is not None and len(tokens[i]):
                sample["token_ids"] = tokens[i]
            if len(texts) == 1 and name is not None and isinstance(metric[name], int | float | bool):
                sample["score"] = metric[name]
            samples.append(sample)
    graded = bool(samples) and all("score" in s for s in samples)
    name = sorted(n for n in metric_names if n)[0] if graded and any(metric_names) else None
    mapping = ({"problem": "the row", "question": "example", "gold": "gold[0]", "completion": "predictions[i]",
                "num_tokens": "len(cont_tokens[i])", "grade": name} if old else
               {"problem": "doc.id (else the row)", "question": "doc.original_query or doc.query",
                "gold": "doc.choices[doc.gold_index]", "completion": "model_response.text[i]",
                "num_tokens": "len(model_response.output_tokens[i])", "grade": name})
    why = f"{path}: lighteval's metric is one value per document, not per completion: use --regrade"
    first = _plain(frame["doc"].iloc[0]) if not old and len(frame) else {}
    task = str(first.get("task_name") or path.stem.removeprefix("details_").rsplit("_", 1)[0])
    return Imported("lighteval", task.replace("|", "_"), (path,), problems, samples, mapping, name, why,
                    notes={"layout": "v0.6-v0.10 flat columns" if old else "v0.11+ doc/model_response/metric"})


def _row(row: dict, where: str, number: int):
    doc = check(DOC, _plain(row["doc"]), f"{where}: doc", FMT)
    response = check(RESPONSE, _plain(row["model_response"]), f"{where}: model_response", FMT)
    metric = check(METRIC, _plain(row["metric"]), f"{where}: metric", FMT) or {}
    key = str(doc.get("id") or number - 1)
    indices = doc["gold_index"] if isinstance(doc["gold_index"], list) else [doc["gold_index"]]
    if any(i >= len(doc["choices"]) for i in indices):
        raise UsageError(f"{where}: doc: field 'gold_index': expected an index into the {len(doc['choices'])} choices, "
                         f"found {doc['gold_index']}")
    gold = doc["choices"][indices[0]] if indices else None
    return key, {"question": doc.get("original_query") or doc["query"], "gold": gold}, response["text"], \
        response.get("output_tokens") or [], metric


def _old_row(row: dict, where: str, number: int):
    row = check(OLD_ROW, {k: _plain(v) for k, v in row.items()}, where, FMT)
    texts, golds = row["predictions"], row.get("gold") or []
    tokens = row.get("cont_tokens") or []
    tokens = tokens if len(tokens) == len(texts) and all(isinstance(t, list) for t in tokens) else []
    gold = golds[0] if isinstance(golds, list) and golds else golds if not isinstance(golds, list) else None
    return str(number - 1), {"question": row.get("example") or row.get("full_prompt"), "gold": gold}, texts, \
        tokens, row["metrics"] or {}
