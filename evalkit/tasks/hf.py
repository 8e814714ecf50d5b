"""Problems from Hugging Face `datasets`: the hub, the local hub cache, or a folder on disk.

    load_task("hf:openai/gsm8k:main:test")                 # NAME[:CONFIG][:SPLIT]; the gsm8k preset applies
    load_task("hf:HuggingFaceH4/MATH-500::test")           # no config; the math preset applies
    load_task("data/my_set", preset="aime")                # a save_to_disk folder, or json/parquet/csv files

`datasets.load_dataset` reads the hub when the network allows and the local cache otherwise
(`HF_DATASETS_OFFLINE=1` is respected); a `save_to_disk` folder is read with `load_from_disk`,
any other folder with `load_dataset(folder)`. Fields: `--question-field`, `--answer-field`,
`--id-field`, else the preset's, else the first present of the file tasks' names. Graded as math
(evalkit.tasks.mathgrade) against the gold answer the preset extracts.

Presets (a plain dict, PRESETS), each: fields, how the gold answer is extracted, what the
prompt asks for:
- gsm8k: the answer field is a worked solution ending "#### 72"; the gold is what follows the
  last `####`, commas removed (the dataset card of openai/gsm8k; lm-evaluation-harness's gsm8k
  task: `answer.split('####')[-1].strip()`, and its strict filter `#### (-?[0-9.,]+)`).
- math: the gold is the content of the last `\\boxed{}` of the solution (Hendrycks et al.'s MATH;
  lighteval and lm-eval's `remove_boxed(last_boxed_only_string(solution))`); MATH-500's own
  `answer` field is used when present.
- aime: integer answers 0..999 (AIME's format; lighteval's aime tasks), leading zeros dropped.
Applied automatically when the dataset name contains gsm8k, math or aime (case-insensitive).

Identity: name, config, split, revision (hub) and the dataset's fingerprint (its content hash),
so resuming with another version of the data is refused.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.tasks.base import Problem, Task, TaskSpec, first_duplicate

__all__ = ["PRESETS", "Preset", "load", "gold_answer"]

QUESTION_KEYS = ("question", "problem", "prompt", "Problem", "Question")
ANSWER_KEYS = ("answer", "solution", "final_answer", "Answer", "Solution")
ID_KEYS = ("id", "unique_id", "ID")


@dataclass(frozen=True)
class Preset:
    question: str
    answer: str
    gold: str  # how the gold answer is read from the answer field: "text", "after_hashes", "last_boxed", "integer"
    instruction: str  # appended to the question


PRESETS = {
    "gsm8k": Preset("question", "answer", "after_hashes",
                    "Solve the problem and end with 'The final answer is N.'"),
    "math": Preset("problem", "solution", "last_boxed", "Put your final answer in \\boxed{}."),
    "aime": Preset("problem", "answer", "integer", "The answer is an integer from 0 to 999. "
                   "Put your final answer in \\boxed{}."),
}


SOURCE_KEYS = ("preset", "question_field", "answer_field", "id_field")  # what --task-config may set here


def source_options(config: dict, name: str) -> tuple[str | None, dict]:
    """(preset, {question, answer, id: field}) from a file or dataset task's config; other keys
    are refused (`dataset` is what the task identity records, and is ignored)."""
    unknown = set(config) - set(SOURCE_KEYS) - {"dataset"}
    if unknown:
        raise UsageError(f"{name}: unknown config keys {sorted(unknown)}; valid: {', '.join(SOURCE_KEYS)}")
    fields = {k.removesuffix("_field"): config[k] for k in SOURCE_KEYS[1:] if config.get(k)}
    return config.get("preset"), fields


def load(name: str, config: dict | None = None) -> Task:
    """The dataset's rows as problems (see the module docstring)."""
    preset, fields = source_options(config or {}, name)
    data, identity = _dataset(name)
    if len(data) == 0:
        raise UsageError(f"{name}: the split {identity['split']!r} is empty")
    try:
        rows = list(data)
    except UnicodeDecodeError as exc:
        raise UsageError(f"{name}: the data is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    problems, used = rows_to_problems(rows, set(data.column_names), name, identity["name"], preset, fields)
    source = name if name.startswith("hf:") else identity["source"]
    spec = TaskSpec(f"hf:{identity['name']}", "math", len(problems), None,
                    json.dumps({**used, "dataset": identity}, sort_keys=True), source, identity["fingerprint"])
    return Task(spec, tuple(problems))


def rows_to_problems(rows: list[dict], columns: set, label: str, dataset_name: str, preset: str | None,
                     fields: dict) -> tuple[list[Problem], dict]:
    """Problems from records (a dataset's rows, a JSONL file's lines), and the config that made
    them: the preset and the fields used, for the task's identity."""
    chosen = _preset(preset, dataset_name)
    question = _field(fields.get("question"), chosen.question if chosen else None, QUESTION_KEYS, columns,
                      "question", label)
    answer = _field(fields.get("answer"), _answer_field(chosen, columns), ANSWER_KEYS, columns, "answer", label)
    id_field = fields.get("id") or next((k for k in ID_KEYS if k in columns), None)
    if id_field and id_field not in columns:
        raise UsageError(f"{label}: no id field {id_field!r}; fields are {', '.join(sorted(columns))}")
    rule = "text" if chosen is None or (answer == "answer" and chosen.gold == "last_boxed") else chosen.gold
    problems = []
    for i, row in enumerate(rows):
        if row.get(question) is None or row.get(answer) is None:
            raise UsageError(f"{label}: row {i + 1} has no {question!r} or no {answer!r}")
        gold = gold_answer(row[answer], rule)
        if gold is None:
            raise UsageError(f"{label}: row {i + 1}: no gold answer in {answer!r} under the {rule} rule "
                             f"({str(row[answer])[:60]!r})")
        text = str(row[question]) + (f"\n\n{chosen.instruction}" if chosen else "")
        problems.append(Problem(str(row[id_field]) if id_field else str(i + 1), text, gold))
    if clash := first_duplicate([p.id for p in problems]):
        raise UsageError(f"{label}: problem ids are not unique (field {id_field!r}): {clash}; give --id-field")
    name = next((k for k, v in PRESETS.items() if v == chosen), None)
    used = {"preset": name, "question_field": question, "answer_field": answer, "id_field": id_field}
    return problems, used


def gold_answer(value, rule: str) -> str | None:
    """The gold answer read from an answer field by a preset's rule (None when absent)."""
    text = str(value).strip()
    if rule == "after_hashes":
        if "####" not in text:
            return None
        return text.rsplit("####", 1)[1].strip().replace(",", "") or None
    if rule == "last_boxed":
        from evalkit.tasks.mathgrade import last_boxed

        return last_boxed(text)
    if rule == "integer":
        match = re.fullmatch(r"\s*0*(\d{1,3})\s*", text)
        return match.group(1) if match else None
    return text or None


def _answer_field(chosen: Preset | None, columns: set) -> str | None:
    if chosen is None:
        return None
    if chosen.gold == "last_boxed" and "answer" in columns:  # MATH-500 states the answer itself
        return "answer"
    return chosen.answer


def _field(given: str | None, preset: str | None, defaults: tuple, columns: set, what: str, name: str) -> str:
    if given:
        if given not in columns:
            raise UsageError(f"{name}: no {what} field {given!r}; fields are {', '.join(sorted(columns))}")
        return given
    for key in (preset, *defaults):
        if key and key in columns:
            return key
    raise UsageError(f"{name}: no {what} field among {', '.join(sorted(columns))}; give --{what}-field")


def _preset(preset: str | None, name: str) -> Preset | None:
    if preset is not None:
        if preset not in PRESETS:
            raise UsageError(f"--preset {preset}: choose one of {', '.join(PRESETS)}")
        return PRESETS[preset]
    lowered = name.lower()
    for key, value in PRESETS.items():
        if key in lowered:
            return value
    return None


def _dataset(name: str):
    """(datasets.Dataset, identity) for `hf:NAME[:CONFIG][:SPLIT]` or a folder."""
    if name.startswith("hf:"):
        return _from_hub(name[3:])
    return _from_folder(Path(name).expanduser())


def _from_hub(spec: str):
    import datasets

    parts = spec.split(":")
    if len(parts) > 3 or not parts[0]:
        raise UsageError(f"hf:{spec}: write hf:NAME[:CONFIG][:SPLIT], e.g. hf:openai/gsm8k:main:test")
    path, config, split = parts[0], (parts[1] if len(parts) > 1 else "") or None, \
        (parts[2] if len(parts) > 2 else "") or "test"
    try:
        data = datasets.load_dataset(path, config, split=split)
    except Exception as exc:  # offline and not cached, no such split or config, ...
        offline = os.environ.get("HF_DATASETS_OFFLINE") == "1" or os.environ.get("HF_HUB_OFFLINE") == "1"
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise UsageError(f"hf:{spec}: cannot load dataset {path!r} (config {config}, split {split})"
                         f"{' offline' if offline else ''}: {first}; download it once with network, or "
                         "save it with Dataset.save_to_disk and give that folder") from None
    return data, {"name": path, "config": config, "split": split, "revision": _revision(data),
                  "source": path, "fingerprint": data._fingerprint}


def _from_folder(folder: Path):
    import datasets

    if _no_data_files(folder):  # save_to_disk of an empty split writes no shard: load_from_disk fails on it
        raise UsageError(f"{folder}: the split is empty (no rows)")
    try:
        if (folder / "dataset_info.json").is_file() or (folder / "dataset_dict.json").is_file():
            data = datasets.load_from_disk(str(folder))
        else:
            data = datasets.load_dataset(str(folder))
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise UsageError(f"{folder}: not a dataset folder datasets can read ({first})") from None
    split = None
    if isinstance(data, datasets.DatasetDict):
        split = "test" if "test" in data else next(iter(data))
        data = data[split]
    return data, {"name": folder.name, "config": None, "split": split, "revision": None,
                  "source": str(folder.resolve()), "fingerprint": data._fingerprint}


def _no_data_files(folder: Path) -> bool:
    try:
        return json.loads((folder / "state.json").read_text())["_data_files"] == []
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _revision(data) -> str | None:
    info = getattr(data, "info", None)
    return getattr(info, "version", None) and str(info.version)
