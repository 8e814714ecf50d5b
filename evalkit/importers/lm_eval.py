"""`lm-eval`: lm-evaluation-harness `--log_samples` files, `samples_<task>_<date>.jsonl`.

    evalkit import lm-eval out/model/samples_gsm8k_2025-01-01T00-00-00.jsonl --out runs/lm --filter flexible-extract
    evalkit import lm-eval out/model/ --out runs/lm            # every samples_* file of the folder, one run each

Writers (EleutherAI/lm-evaluation-harness, read at the tags named):
- v0.4.3 to v0.4.12 `lm_eval/loggers/evaluation_tracker.py` `save_results_samples`: one JSON
  object per line in `samples_<task>_<date_id>.jsonl`, `arguments` turned into `{"gen_args_0":
  {"arg_0": prompt, "arg_1": gen_kwargs}}`; between v0.4.2 and v0.4.3 the same tracker wrote
  `samples_<task>_<date_id>.json` (commit 3850e21ac made it newline-delimited);
- v0.4.0 to v0.4.2 `lm_eval/__main__.py`: `json.dumps(samples[task], indent=2)` (one JSON array)
  into `<model_args>_<task>.jsonl`, `arguments` as `[[prompt, gen_kwargs]]`.
Both read here: a file whose first character is `[` is the array.
The logged example is built in `lm_eval/evaluator.py` (v0.4.11: doc_id, doc, target, arguments,
resps, filtered_resps, filter, metrics, doc_hash, prompt_hash, target_hash, and each metric's
value under its name), once per (document, filter), every document of the first filter, then
the next filter's (files of mid-2024 log no `filter` and no `metrics`: one filter, read as
`none`). `--filter NAME` chooses the filter whose lines are read; the default is the
first the task lists (gsm8k: strict-match), named in the output. With `repeats: K`, `resps[0]`
holds the K completions and the metric is one value per document (the filter votes or takes the
first): there are no per-completion grades, so they are regraded. With one completion the
metric (the first in `metrics`, when it is a number) is its grade. `filtered_resps[0]` is each
completion's extracted answer when the filter keeps all K; filter `none` extracts nothing (its
value is the completion itself), and lm-eval's "[invalid]" reads as no answer.
Completeness: the `results_<date_id>.json` written beside with the same date declares
`n-samples.<task>.effective`; without it the doc_ids must run 0..N-1. The same results file
gives the model name and the tool's own score (`<metric>,<filter>`).
Every line is checked against `LINE` (evalkit.schema) before it is used: `metrics` a list of
names, `doc_id` a non-negative integer (or a string), `resps` a list of lists; the results
file's fields against `RESULTS`.
"""

from __future__ import annotations

from pathlib import Path

from evalkit import schema
from evalkit.errors import UsageError
from evalkit.importers.base import Imported, ImportOptions, read_json_lines, reported
from evalkit.importers.fields import GOLD, KEY, add_problem, bounded_gaps
from evalkit.schema import Float, Int, Json, ListOf, MapOf, Obj, Opt, Str, check

__all__ = ["read"]

# `filter`, `metrics`: since mid-2024
LINE = Obj({"doc_id": KEY, "doc": Json(), "target": GOLD, "arguments": Json(), "resps": ListOf(ListOf(Json())),
            "filtered_resps": Json()}, optional={"filter": Str(), "metrics": ListOf(Str())})
RESULTS = Obj({}, optional={"model_name": Opt(Str()), "results": Opt(MapOf(MapOf(Json()))),
                            "n-samples": Opt(MapOf(Obj({}, optional={"effective": Int(min=0), "original": Int(min=0)})))})
FMT = "lm-eval samples"
QUESTION_KEYS = ("question", "problem", "Question", "Problem", "input")


def read(path: Path, opts: ImportOptions) -> Imported | list[Imported]:
    if path.is_file():
        return _read_file(path, opts)
    files = sorted(p for p in path.glob("samples_*.json*") if p.suffix in (".json", ".jsonl") and p.is_file())
    if not files:
        raise UsageError(f"{path}: no samples_<task>_<date>.jsonl of lm-eval in the folder; give the file")
    runs = [_read_file(p, opts) for p in files]
    return runs[0] if len(runs) == 1 else runs


def _lines(path: Path) -> list[tuple[str, dict]]:
    """(where, record) of a JSONL file or of the JSON array older lm-eval wrote."""
    try:
        with open(path, encoding="utf-8") as fh:
            head = fh.read(64).lstrip()
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not head.startswith("["):
        return [(f"{path}:{n}", r) for n, r in read_json_lines(path, FMT)]
    records = schema.read_json(path, FMT)
    if not isinstance(records, list) or not records:
        raise UsageError(f"{path}: empty; no {FMT} records")
    return [(f"{path}: record {i}", r) for i, r in enumerate(records)]


def _read_file(path: Path, opts: ImportOptions) -> Imported:
    lines = [(where, check(LINE, doc, where, FMT)) for where, doc in _lines(path)]
    filters: list[str] = []
    for _where, doc in lines:
        doc.setdefault("filter", "none")  # older files log one filter and no name
        doc.setdefault("metrics", [])
        if doc["filter"] not in filters:
            filters.append(doc["filter"])
    chosen = opts.filter or filters[0]
    if chosen not in filters:
        raise UsageError(f"--filter {chosen}: not in {path.name} (filters: {', '.join(filters)})")
    problems, samples, repeats, metric = {}, [], set(), None
    for where, doc in lines:
        if doc["filter"] != chosen:
            continue
        completions = _completions(doc["resps"], where)
        repeats.add(len(completions))
        key = str(doc["doc_id"])
        if key in problems:
            raise UsageError(f"{where}: doc_id {key} logged twice for filter {chosen!r}")
        add_problem(problems, key, {"question": _question(doc), "gold": doc["target"]}, where)
        extracted = _extracted(doc["filtered_resps"], completions, chosen)
        metric = metric or (doc["metrics"][0] if doc["metrics"] else None)
        score = _score(doc, metric, where) if metric and len(completions) == 1 else None
        for i, text in enumerate(completions):
            sample = {"problem": key, "completion": text, "index": i, "extracted": extracted[i]}
            if score is not None:
                sample["score"] = score
            samples.append(sample)
    graded = bool(samples) and all("score" in s for s in samples)
    results, results_path = _results(path)
    task = _task_name(path, lines[0][1], results)
    mapping = {"problem": "doc_id", "question": "doc.question (else the prompt)", "gold": "target",
               "completion": "resps[0][i]", "extracted": "filtered_resps[0] (per completion; none for filter none)",
               "grade": metric if graded else None, "filter": chosen}
    why = (f"{path}: lm-eval logs one {metric} per document, not per completion (repeats {max(repeats)}): use --regrade"
           if max(repeats) > 1 else f"{path}: lm-eval's {metric} is not a per-document number here: use --regrade")
    notes = {"filters": filters, "filter_read": chosen, "repeats": sorted(repeats),
             "filter_choice": "--filter" if opts.filter else "the default: the first the task lists"}
    score = ((results or {}).get("results") or {}).get(task, {}).get(f"{metric},{chosen}")
    return Imported("lm-eval", task, (path,), problems, samples, mapping,
                    metric if graded else None, why, model=(results or {}).get("model_name"), notes=notes,
                    partial=_partial(path, problems, task, chosen, results, results_path),
                    reported=reported(f"{metric},{chosen}", score, results_path) if results_path else None)


def _score(doc: dict, metric: str, where: str) -> float | None:
    """The metric's value logged beside the document: a number (bools and NaN as lm-eval logs
    them), or None when the line does not hold it as one."""
    value = doc.get(metric)
    if value is None or isinstance(value, list | dict | str):
        return None
    return check(Float(finite=False), value, f"{where}: field {metric!r}")


def _completions(resps, where: str) -> list[str]:
    if not isinstance(resps, list) or not resps or not isinstance(resps[0], list):
        raise UsageError(f"{where}: field 'resps' is not a list of per-request lists; not an lm-eval samples file?")
    if len(resps) != 1 or not all(isinstance(t, str) for t in resps[0]):
        raise UsageError(f"{where}: 'resps' holds log-likelihoods or several requests: not a generation task "
                         "(only generate_until tasks have completions to import)")
    return resps[0]


def _extracted(filtered, completions: list[str], name: str) -> list:
    """Each completion's extracted answer, where the filter kept one per completion."""
    k = len(completions)
    first = filtered[0] if isinstance(filtered, list) and filtered else None
    values = first if isinstance(first, list) and len(first) == k else [first] * k if k == 1 else [None] * k
    values = [v[0] if isinstance(v, list) and len(v) == 1 else v for v in values]
    return [None if (name == "none" or not isinstance(v, str) or v == "[invalid]" or v == text) else v
            for v, text in zip(values, completions, strict=True)]


def _question(doc: dict) -> str | None:
    body = doc["doc"] if isinstance(doc["doc"], dict) else {}
    for key in QUESTION_KEYS:
        if isinstance(body.get(key), str):
            return body[key]
    args = doc["arguments"]
    if isinstance(args, dict):  # v0.4.3+: {"gen_args_0": {"arg_0": prompt, ...}}
        prompt = (args.get("gen_args_0") or {}).get("arg_0")
    else:  # v0.4.0-0.4.2: [[prompt, gen_kwargs]]
        prompt = args[0][0] if args and isinstance(args[0], list) and args[0] else None
    return prompt if isinstance(prompt, str) else None


def _results(path: Path) -> tuple[dict | None, Path | None]:
    """The results_<date_id>.json lm-eval wrote beside with the same date (None when there is none)."""
    date = path.stem.rsplit("_", 1)[-1] if path.name.startswith("samples_") else None
    candidate = path.with_name(f"results_{date}.json") if date else None
    if candidate is None or not candidate.is_file():
        return None, None
    try:
        data = schema.load_json(candidate.read_bytes(), candidate)
    except (OSError, UsageError):  # not JSON: not the results file lm-eval writes, and not used
        return None, None
    return (check(RESULTS, data, candidate, "lm-eval results"), candidate) if isinstance(data, dict) else (None, None)


def _task_name(path: Path, first: dict, results: dict | None) -> str:
    """lm-eval's task name: the one results_*.json names, else from the file name it wrote."""
    names = list((results or {}).get("results") or {})
    stem = path.stem.removeprefix("samples_")
    guess = stem.rsplit("_", 1)[0] if path.name.startswith("samples_") and "_" in stem else stem
    return guess if guess in names or len(names) != 1 else names[0]


def _partial(path: Path, problems: dict, task: str, name: str, results: dict | None, source: Path | None) -> str | None:
    """Why the file is not the whole run, by the run's own declaration (or doc_ids 0..N-1)."""
    declared = (((results or {}).get("n-samples") or {}).get(task) or {}).get("effective")
    if isinstance(declared, int):
        if declared != len(problems):
            return (f"{path.name}: {len(problems)} documents for filter {name!r}, but {source.name} declares "
                    f"{declared} (n-samples.{task}.effective): a partial file")
        return None
    ids = [int(k) for k in problems if k.isdigit()]
    missing, first = bounded_gaps(ids)
    if missing:
        return (f"{path.name}: doc_ids 0..{max(ids)} lack {missing} (first {first}) for filter {name!r}: "
                "a partial file")
    return None
