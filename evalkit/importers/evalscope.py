"""`evalscope`: evalscope's review files, `reviews/<model>/<benchmark>_<subset>.jsonl`.

    evalscope eval ... --repeats 8   # then
    evalkit import evalscope outputs/20250101_000000/reviews/qwen/gsm8k_main.jsonl --out runs/es --keep-grades

Writer: modelscope/evalscope `evalscope/api/evaluator/cache.py` `save_review_cache` (one line
per `ReviewResult.model_dump()`: index, target, messages, sample_score) with
`evalscope/api/metric/scorer.py` `SampleScore` (score, sample_id, group_id, generation_index)
and `Score` (value: {metric: value}, the first key the main one unless main_score_name, status,
extracted_prediction, prediction). `evalscope/api/benchmark/adapters/default_data_adapter.py`
sets `group_id` (the problem of k repeated samples) and `generation_index` (the repeat). The
completion is `score.prediction`, else the last assistant message; the question the last user
message (`evalscope/api/messages/chat_message.py`: content a string or text parts); the gold
`target`. Kept grade: the main value, >= 1 (or true) is correct; a score whose status is not
usable has no value and is an error.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.errors import UsageError
from evalkit.importers.base import (
    Imported,
    ImportOptions,
    last_user_text,
    message_text,
    need,
    one_file,
    read_json_lines,
)

__all__ = ["read"]

FMT = "evalscope reviews"


def _main_value(score: dict):
    value = score.get("value") or {}
    if not isinstance(value, dict) or not value:
        return None
    name = score.get("main_score_name")
    return value[name] if name in value else next(iter(value.values()))


def read(path: Path, opts: ImportOptions) -> Imported:
    path = one_file(path, "*.jsonl", "evalscope")
    problems, samples, model = {}, [], None
    for number, record in read_json_lines(path, FMT):
        where = f"{path}:{number}"
        sample_score = need(record, "sample_score", where, FMT)
        score = need(sample_score, "score", f"{where} sample_score", FMT)
        messages = record.get("messages") or []
        group = sample_score.get("group_id")
        key = str(group if group is not None else sample_score.get("sample_id", need(record, "index", where, FMT)))
        problems.setdefault(key, {"question": last_user_text(messages), "gold": record.get("target")})
        completion = score.get("prediction")
        if completion is None:
            said = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
            if not said:
                raise UsageError(f"{where}: no score.prediction and no assistant message: no completion")
            completion = message_text(said[-1].get("content"))
        model = model or next((m.get("model") for m in messages if isinstance(m, dict) and m.get("role") == "assistant"
                               and m.get("model")), None)
        status = str(score.get("status") or "success").lower()
        value = _main_value(score) if status in ("success", "scorestatus.success") else None
        samples.append({"problem": key, "completion": str(completion), "index": sample_score.get("generation_index"),
                        "score": value, "extracted": score.get("extracted_prediction")})
    mapping = {"problem": "sample_score.group_id (else sample_id)", "completion": "sample_score.score.prediction",
               "gold": "target", "grade": "sample_score.score.value[main]", "extracted": "score.extracted_prediction",
               "index": "sample_score.generation_index"}
    return Imported("evalscope", path.stem, (path,), problems, samples, mapping, "score.value", model=model)
