"""`evalscope`: evalscope's review files, `<work_dir>/reviews/<model>/<benchmark>_<subset>.jsonl`.

    evalkit import evalscope outputs/20250101_000000/reviews/qwen/gsm8k_main.jsonl --out runs/es --keep-grades
    evalkit import evalscope outputs/20250101_000000/reviews/qwen/ --out runs/es   # one run per benchmark

Writers (modelscope/evalscope, read at the tags named), one file per subset:
- before 1.0 (v0.17.1 `evalscope/evaluator/evaluator.py` `_get_review`): the model's chat
  completion record (`choices[i].message.content`, `usage`, `model`) with `index` (the
  problem's place in its subset), `subset_name`, `raw_input` (the dataset record: the question)
  and per choice `review: {gold, pred, result}`; the grade is `result`, the choices are samples.
- 1.0 to 1.6 (v1.0.0, v1.6.0 `evalscope/api/evaluator/cache.py` `ReviewResult`): `{index,
  input, target, sample_score}`, `input` the prompt rendered as markdown
  (`TaskState.input_markdown`: "**User**: ..."), no model name in the line.
- 1.7 on (v1.7.0 ... v1.10.0 `ReviewResult`): `{index, target, messages, sample_score}` (1.7 to
  1.9 add `trajectory`, 1.10 `agent_trace`); the question is the last user message
  (`evalscope/api/messages/chat_message.py`: content a string or text parts).
  `sample_score` (`evalscope/api/metric/scorer.py` `SampleScore`): `score {value: {metric:
  value}, extracted_prediction, prediction, main_score_name}`, `sample_id`, `group_id`. With
  `repeats: K` (`evalscope/api/dataset/builder.py`, `dataset.py` `reindex`) each sample is copied K
  times in a row and `group_id = sample_id // K`: the group is the problem, the order within it
  the sample index. Ids restart at 0 in every subset, so subsets are never merged: a folder's
  files become `<subset>/<group_id>` problems of their benchmark's run, and one file holding an
  index twice (several subsets' files joined) is refused.
The report `<work_dir>/reports/<model>/<benchmark>.json` (`evalscope/report/report.py`) names
the model (`model_name`), the benchmark's subsets with their `num` (completeness), and the
tool's own score. Kept grade: the main value (`main_score_name`, else the first), >= 1 or true is
correct. Every line is checked against `REVIEW` (1.0 on) or `OLD_REVIEW` (before 1.0), and the
report against `REPORT`, before use: `index` a non-negative integer, the prediction a string,
token counts non-negative; one problem with two different targets is refused naming both.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.importers.base import (
    Imported,
    ImportOptions,
    last_user_text,
    message_text,
    read_json_lines,
    reported,
)
from evalkit.importers.fields import COUNT, GOLD, INDEX, KEY, SCORE, TEXT, add_problem, bounded_gaps
from evalkit.schema import Float, Json, ListOf, MapOf, Obj, Opt, Str, check, load_json

__all__ = ["read"]

FMT = "evalscope reviews"
MESSAGE = Obj({}, optional={"role": Opt(Str()), "content": Opt(Str() | ListOf(Json())), "model": Opt(Str())})
# evalscope/api/evaluator/cache.py `ReviewResult` with evalscope/api/metric/scorer.py `SampleScore`
REVIEW = Obj({"index": INDEX, "sample_score": Obj({"score": Obj({}, optional={
    "value": Opt(MapOf(SCORE | Json())), "prediction": Opt(TEXT), "extracted_prediction": Opt(Str() | Json()),
    "main_score_name": Opt(Str()), "status": Opt(Str())})}, optional={"sample_id": Opt(KEY), "group_id": Opt(KEY)})},
    optional={"target": GOLD, "messages": Opt(ListOf(MESSAGE)), "input": Opt(Str() | Json())})
# v0.17.1 evalscope/evaluator/evaluator.py `_get_review`: the chat completion record plus reviews
OLD_REVIEW = Obj({"index": INDEX, "choices": ListOf(Obj({"review": Obj({}, optional={
    "gold": GOLD, "pred": Json(), "result": SCORE})}, optional={
    "message": Opt(Obj({}, optional={"content": Opt(Str() | ListOf(Json()))})), "finish_reason": Opt(Str())}))},
    optional={"usage": Opt(Obj({}, optional={"completion_tokens": Opt(COUNT)})), "raw_input": Json(), "model": Opt(Str())})
SUBSET = Obj({}, optional={"name": Json(), "num": INDEX, "score": Opt(Float(finite=False))})
# evalscope/report/report.py `Report`: model_name, metrics[{name, score, categories[{subsets[{name, num, score}]}]}]
REPORT = Obj({}, optional={"model_name": Opt(Str()), "metrics": Opt(ListOf(Obj({}, optional={
    "name": Opt(Str()), "score": Opt(Float(finite=False)),
    "categories": Opt(ListOf(Obj({}, optional={"subsets": Opt(ListOf(SUBSET))})))})))})
QUESTION_KEYS = ("question", "problem", "query", "input", "prompt")


def read(path: Path, opts: ImportOptions) -> Imported | list[Imported]:
    if path.is_file():
        report = _report_of(path.parent, path.stem)
        subset = _subset(path.stem, report)
        return _dataset(report[0] if report else path.stem, [(subset, path)], report, single=True)
    files = sorted(p for p in path.glob("*.jsonl") if p.is_file())
    if not files:
        raise UsageError(f"{path}: no <benchmark>_<subset>.jsonl reviews of evalscope in the folder")
    groups: dict[str, list] = {}
    reports = {}
    for file in files:
        report = _report_of(path, file.stem)
        name = report[0] if report else file.stem  # without its report, a file is its own benchmark
        reports[name] = report
        groups.setdefault(name, []).append((_subset(file.stem, report), file))
    runs = [_dataset(name, members, reports[name], single=len(members) == 1) for name, members in groups.items()]
    return runs[0] if len(runs) == 1 else runs


def _report_of(folder: Path, stem: str) -> tuple[str, dict, Path] | None:
    """(benchmark, report, its path) of the report evalscope wrote for the benchmark of `stem`."""
    reports = folder.parent.parent / "reports" / folder.name
    for candidate in sorted(reports.glob("*.json"), key=lambda p: -len(p.stem)):
        if stem.startswith(candidate.stem + "_"):
            try:
                data = load_json(candidate.read_bytes(), candidate)
            except (OSError, UsageError):  # not JSON: not the report evalscope writes
                continue
            if isinstance(data, dict):
                return candidate.stem, check(REPORT, data, candidate, "evalscope report"), candidate
    return None


def _subset(stem: str, report) -> str:
    return stem[len(report[0]) + 1:] if report else stem


def _subsets_declared(report) -> dict[str, int]:
    """subset -> num as the report declares them."""
    out = {}
    for metric in (report[1].get("metrics") or [])[:1] if report else []:
        for category in metric.get("categories") or []:
            for subset in category.get("subsets") or []:
                if isinstance(subset, dict) and isinstance(subset.get("num"), int):
                    out[str(subset.get("name"))] = subset["num"]
    return out


def _dataset(name: str, members: list[tuple[str, Path]], report, *, single: bool) -> Imported:
    problems, samples, models, partial = {}, [], set(), None
    declared = _subsets_declared(report)
    for subset, path in members:
        before = len(samples)
        model, indices = _read_file(path, subset if not single else None, problems, samples)
        models.add(model)
        partial = partial or _gaps(path, indices)
        num = declared.get(subset)
        if num is not None and num not in (len(samples) - before, len(set(indices))):
            partial = partial or (f"{path.name}: {len(samples) - before} samples, the report declares {num} for "
                                  f"subset {subset!r}: a partial file")
    if single and declared and len(declared) > 1:
        note = {"subset": members[0][0], "other_subsets_in_report": sorted(set(declared) - {members[0][0]})}
    else:
        note = {"subsets": [s for s, _ in members]}
    model = (report[1].get("model_name") if report else None) or next((m for m in models if m), None)
    mapping = {"problem": "sample_score.group_id (before 1.0: index)" + ("" if single else ", as <subset>/<id>"),
               "question": "messages' last user turn / input / raw_input", "gold": "target (before 1.0: review.gold)",
               "completion": "sample_score.score.prediction (before 1.0: choices[i].message.content)",
               "grade": "sample_score.score.value[main] (before 1.0: review.result)",
               "extracted": "score.extracted_prediction (before 1.0: review.pred)"}
    return Imported("evalscope", name, tuple(p for _, p in members), problems, samples, mapping, "score.value",
                    model=model, notes=note, partial=partial, reported=_reported(report, members, single))


def _reported(report, members, single: bool):
    if not report:
        return None
    metric = (report[1].get("metrics") or [{}])[0]
    if single:
        for category in metric.get("categories") or []:
            for subset in category.get("subsets") or []:
                if isinstance(subset, dict) and subset.get("name") == members[0][0]:
                    return reported(f"{metric.get('name')} ({members[0][0]})", subset.get("score"), report[2])
        return None
    return reported(str(metric.get("name")), metric.get("score"), report[2])


def _gaps(path: Path, indices: list) -> str | None:
    missing, first = bounded_gaps(indices)
    if missing:
        return f"{path.name}: indices 0..{max(indices)} lack {missing} (first {first}): a partial file"
    return None


def _read_file(path: Path, subset: str | None, problems: dict, samples: list):
    """Append the file's problems and samples; returns (the model named in it, the indices)."""
    model, indices, seen, order = None, [], {}, Counter()
    for number, raw in read_json_lines(path, FMT):
        where = f"{path}:{number}"
        record = check(OLD_REVIEW if isinstance(raw, dict) and "choices" in raw else REVIEW, raw, where, FMT)
        index = record["index"]
        if index in seen:
            raise UsageError(f"{where}: index {index} again (line {seen[index]}); evalscope writes one file per "
                             "subset and numbers each from 0: several subsets joined into one file? import the "
                             "reviews folder (subsets are kept apart)")
        seen[index] = number
        indices.append(index)
        rows = _old(record, where) if "choices" in record else _new(record, where)
        for key, info, sample, named in rows:
            key = f"{subset}/{key}" if subset else key
            add_problem(problems, key, info, where)
            sample["problem"] = key
            if sample.get("index") is None:
                sample["index"] = order[key]
            order[key] += 1
            samples.append(sample)
            model = model or named
    return model, indices


def _old(record: dict, where: str):
    """Before 1.0: one line per problem, its choices the samples, each with its review."""
    raw = record.get("raw_input") if isinstance(record.get("raw_input"), dict) else {}
    question = next((raw[k] for k in QUESTION_KEYS if isinstance(raw.get(k), str)), None)
    choices = record["choices"]
    tokens = (record.get("usage") or {}).get("completion_tokens") if len(choices) == 1 else None
    for i, choice in enumerate(choices):
        review = choice["review"]
        content = (choice.get("message") or {}).get("content")
        info = {"question": question, "gold": review.get("gold")}
        sample = {"completion": message_text(content), "index": i, "score": review.get("result"),
                  "extracted": _text(review.get("pred")), "finish_reason": "length" if choice.get("finish_reason") == "length"
                  else "stop"}
        if isinstance(tokens, int):
            sample["num_tokens"] = tokens
        yield str(record["index"]), info, sample, record.get("model")


def _new(record: dict, where: str):
    """1.0 on: one line per sample; the group is the problem."""
    sample_score = record["sample_score"]
    score = sample_score["score"]
    messages = record.get("messages") or []
    group = sample_score.get("group_id")
    key = str(group if group is not None else sample_score.get("sample_id", record["index"]))
    question = last_user_text(messages) if messages else _markdown_input(record.get("input"))
    completion = score.get("prediction")
    if completion is None:
        said = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
        if not said:
            raise UsageError(f"{where}: no score.prediction and no assistant message: no completion")
        completion = message_text(said[-1].get("content"))
    named = next((m.get("model") for m in messages if isinstance(m, dict) and m.get("model")), None)
    value = _main_value(score) if str(score.get("status") or "success").lower() in ("success", "scorestatus.success") \
        else None
    sample = {"completion": completion, "score": value, "extracted": _text(score.get("extracted_prediction"))}
    yield key, {"question": question, "gold": record.get("target")}, sample, named


def _text(value) -> str | None:
    """An extracted answer as text (a number evalscope extracted, as its digits); None otherwise."""
    if isinstance(value, bool) or value is None:
        return None
    return value if isinstance(value, str) else str(value) if isinstance(value, int | float) else None


def _markdown_input(text) -> str | None:
    """1.0-1.6 `input`: messages rendered as "**Role**: content"; the last user turn's content."""
    if not isinstance(text, str):
        return None
    return text.rsplit("**User**: ", 1)[-1].strip() or text


def _main_value(score: dict):
    value = score.get("value") or {}
    if not isinstance(value, dict) or not value:
        return None
    name = score.get("main_score_name")
    return value[name] if name in value else next(iter(value.values()))
