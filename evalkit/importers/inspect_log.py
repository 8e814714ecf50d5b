"""`inspect`: inspect_ai evaluation logs, `logs/<date>_<task>_<id>.eval` (a zip) or `.json`.

    inspect eval gsm8k.py --epochs 8 --model openai/gpt-4o-mini   # then
    evalkit import inspect logs/2025-01-01T00-00-00+00-00_gsm8k_AbC.eval --out runs/insp --keep-grades

Writer: UKGovernmentBEIS/inspect_ai (read at tag 0.3.260) `src/inspect_ai/log/_log.py` `EvalLog`
(version, status, eval {task, model, config.epochs, dataset}, results {total_samples,
completed_samples, scores[{name, metrics}]}, samples) and `EvalSample` (id, epoch, input: a
string or chat messages, target: a string or list, output: `ModelOutput` {choices[0].message
.content, stop_reason, usage.output_tokens; `completion` in newer logs}, scores: {scorer:
Score {value, answer}}). `.json` is the EvalLog as one JSON document; `.eval`
(`src/inspect_ai/log/_recorders/eval.py`) is a zip of `header.json` (the EvalLog without
samples), `samples/<id>_epoch_<epoch>.json`, `summaries.json`, `reductions.json`, and
`_journal/start.json` while it runs. The epochs of a sample are its samples here (epoch e is
sample index e-1), so pass@k is exact over epochs. The kept grade is the first scorer's value
(`--correct-field` names another): `src/inspect_ai/scorer/_metric.py` CORRECT "C", INCORRECT "I",
PARTIAL "P" (not correct), NOANSWER "N" (no answer), a number (>= 1 correct) or a bool. A log
whose status is not "success", or with fewer samples than `results.completed_samples` or than
the dataset's samples times the epochs, is partial. The `inspect_ai` package is used where it
is installed (`read_eval_log`); the files are read directly otherwise, with the same fields.
The header is checked against `HEADER` and every sample against `SAMPLE` before use (`epoch` a
positive integer, never NaN; `usage.output_tokens` non-negative; the completion a string); one
sample id with two different targets is refused naming both. A `.eval` member may be at most
`MAX_RATIO` times the log file's size once inflated (deflate itself tops out near 1032), so a
zip bomb is one line, not an exhausted machine.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from evalkit import schema
from evalkit.errors import UsageError
from evalkit.importers.base import (
    Imported,
    ImportOptions,
    last_user_text,
    message_text,
    reported,
)
from evalkit.importers.fields import COUNT, KEY, SCORE, add_problem
from evalkit.schema import Float, Int, Json, ListOf, MapOf, Obj, Opt, Str, check

__all__ = ["read"]

FMT = "inspect_ai log"
MAX_RATIO = 256
CONTENT = Opt(Str() | ListOf(Json()))
# src/inspect_ai/log/_log.py EvalLog / EvalSample (fields read here; the others kept as they are)
HEADER = Obj({"eval": Obj({}, optional={
    "task": Opt(Str()), "model": Opt(Str()), "config": Opt(Obj({}, optional={"epochs": Opt(Int(min=1))})),
    "dataset": Opt(Obj({}, optional={"sample_ids": Opt(ListOf(Json()))}))})}, optional={
    "status": Opt(Str()), "results": Opt(Obj({}, optional={
        "total_samples": Opt(COUNT), "completed_samples": Opt(COUNT),
        "scores": Opt(ListOf(Obj({}, optional={"name": Opt(Str()), "metrics": Opt(MapOf(Obj({}, optional={
            "value": Opt(Float(finite=False))})))})))}))})
OUTPUT = Obj({}, optional={
    "completion": Opt(Str()), "usage": Opt(Obj({}, optional={"output_tokens": Opt(COUNT)})),
    "choices": Opt(ListOf(Obj({}, optional={"message": Opt(Obj({}, optional={"content": CONTENT})),
                                            "stop_reason": Opt(Str())})))})
SAMPLE = Obj({"id": KEY, "epoch": Int(min=1)}, optional={
    "input": Opt(Str() | ListOf(Json())), "target": Opt(Str() | ListOf(Str())), "output": Opt(OUTPUT),
    "scores": Opt(MapOf(Obj({}, optional={"value": SCORE | Json(), "answer": Opt(Str() | Json())})))})
VALUES = {"C": "correct", "I": "incorrect", "P": "incorrect", "N": "no_answer"}


def read(path: Path, opts: ImportOptions) -> Imported:
    if path.is_dir():
        raise UsageError(f"{path}: give the .eval or .json log file itself")
    header, raw_samples = _load(path)
    header = check(HEADER, header, path, FMT)
    samples = [(where, check(SAMPLE, s, where, FMT)) for where, s in raw_samples]
    evaluation = header["eval"]
    problems, out = {}, []
    scorer = opts.correct_field or _first_scorer(header, samples)
    for where, sample in samples:
        key = str(sample["id"])
        target = sample.get("target")
        gold = target[0] if isinstance(target, list) and target else target
        add_problem(problems, key, {"question": _question(sample.get("input")), "gold": gold}, where)
        output = sample.get("output") or {}
        choice = (output.get("choices") or [{}])[0] or {}
        text = output.get("completion") or message_text((choice.get("message") or {}).get("content"))
        record = {"problem": key, "completion": text, "index": sample["epoch"] - 1,
                  "finish_reason": "length" if choice.get("stop_reason") in ("max_tokens", "model_length") else "stop"}
        tokens = (output.get("usage") or {}).get("output_tokens")
        if tokens is not None:
            record["num_tokens"] = tokens
        score = (sample.get("scores") or {}).get(scorer) if scorer else None
        if isinstance(score, dict):
            record["score"] = _value(score.get("value"))
            if isinstance(score.get("answer"), str):
                record["extracted"] = score["answer"]
        out.append(record)
    graded = bool(out) and all("score" in s for s in out)
    mapping = {"problem": "samples[].id", "index": "samples[].epoch - 1", "question": "samples[].input",
               "gold": "samples[].target", "completion": "output.completion (else choices[0].message.content)",
               "num_tokens": "output.usage.output_tokens", "grade": f"scores.{scorer}.value" if graded else None}
    epochs = (evaluation.get("config") or {}).get("epochs")
    return Imported("inspect", str(evaluation.get("task") or path.stem).replace("/", "_"), (path,), problems, out,
                    mapping, f"scores.{scorer}" if graded else None,
                    f"{path}: the log's samples have no {scorer or 'scorer'} score: use --regrade",
                    model=evaluation.get("model"), sampling={"epochs": epochs} if epochs else {},
                    partial=_partial(path, header, len(out)), reported=_reported(path, header, scorer))


def _load(path: Path) -> tuple[dict, list[tuple[str, dict]]]:
    """(the log without its samples, [(where, sample)]), with inspect_ai where it is installed."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        return _load_eval(path) if path.suffix == ".eval" else _load_json(path)
    try:
        log = read_eval_log(str(path))
    except Exception as exc:  # inspect_ai raises several types for a bad file
        raise UsageError(f"{path}: not a readable {FMT} ({type(exc).__name__}: {str(exc)[:80]})") from None
    data = json.loads(log.model_dump_json())
    return data, [(f"{path}: samples[{i}]", s) for i, s in enumerate(data.pop("samples", None) or [])]


def _load_eval(path: Path):
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            first = "header.json" if "header.json" in names else "_journal/start.json"
            if first not in names:
                raise UsageError(f"{path}: no header.json or _journal/start.json in the zip; not an {FMT}?")
            header = _member(zf, first, path)
            if first != "header.json" and isinstance(header, dict):
                header = {**header, "status": "started"}
            samples = [(f"{path}: {n}", _member(zf, n, path)) for n in sorted(names)
                       if n.startswith("samples/") and n.endswith(".json")]
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, ValueError) as exc:
        raise UsageError(f"{path}: not a readable .eval zip ({exc}); not an {FMT}?") from None
    return header, samples


def _member(zf: zipfile.ZipFile, name: str, path: Path):
    """One JSON member, its inflated size checked first (zipfile reads no more than it declares)."""
    size = zf.getinfo(name).file_size
    if size > MAX_RATIO * max(path.stat().st_size, 1024):
        raise UsageError(f"{path}: member {name} inflates to {size} bytes, more than {MAX_RATIO} times the log's "
                         f"{path.stat().st_size}; not an {FMT} (a zip bomb?)")
    return schema.load_json(zf.read(name), f"{path}: {name}", FMT)


def _load_json(path: Path):
    data = schema.read_json(path, FMT)
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a JSON object (an EvalLog); not an {FMT}?")
    samples = data.pop("samples", None) or []
    return data, [(f"{path}: samples[{i}]", s) for i, s in enumerate(samples)]


def _first_scorer(header: dict, samples: list) -> str | None:
    scores = (header.get("results") or {}).get("scores") or []
    if scores and isinstance(scores[0], dict) and scores[0].get("name"):
        return scores[0]["name"]
    return next((name for _, s in samples for name in (s.get("scores") or {})), None)


def _value(value):
    if isinstance(value, str) and value.upper() in VALUES:
        return VALUES[value.upper()]
    return value


def _question(value) -> str | None:
    return value if isinstance(value, str) else last_user_text(value) if isinstance(value, list) else None


def _partial(path: Path, header: dict, samples: int) -> str | None:
    status = header.get("status")
    if status != "success":
        return f"{path.name}: the log's status is {status!r}, not 'success': a partial run"
    results = header.get("results") or {}
    done = results.get("completed_samples")
    if isinstance(done, int) and samples < done:
        return f"{path.name}: {samples} samples in the log, results.completed_samples declares {done}: a partial file"
    evaluation = header.get("eval") or {}
    ids = (evaluation.get("dataset") or {}).get("sample_ids")
    epochs = (evaluation.get("config") or {}).get("epochs") or 1
    if isinstance(ids, list) and isinstance(epochs, int) and samples < len(ids) * epochs:
        return (f"{path.name}: {samples} samples in the log, the dataset's {len(ids)} samples x {epochs} epochs "
                f"declare {len(ids) * epochs}: a partial file")
    return None


def _reported(path: Path, header: dict, scorer: str | None):
    for entry in (header.get("results") or {}).get("scores") or []:
        if isinstance(entry, dict) and entry.get("name") == scorer:
            metric = (entry.get("metrics") or {}).get("accuracy") or {}
            return reported(f"{scorer} accuracy", metric.get("value"), path)
    return None
