"""`verl`: verl's rollout / validation dumps (`<step>.jsonl`) and main_generation's parquet.

    evalkit import verl checkpoints/val_generations/ --out runs/verl-val      # the last step's dump
    evalkit import verl val_generations/120.jsonl --out runs/verl-120 --tokenizer Qwen/Qwen2.5-1.5B
    evalkit import verl gen/test_output.parquet --out runs/verl-gen --regrade

Dumps: volcengine/verl `verl/trainer/ppo/ray_trainer.py` `_dump_generations` (read at v0.4.1,
v0.5.0, v0.6.0, v0.7.0) writes `<dump_path>/<global_steps>.jsonl`, one line per completion: `input`
(the decoded prompt), `output`, `score` (the summed token-level reward), `step`, and every reward
extra key of the same length (e.g. `acc` and `pred` of `verl/utils/reward_score/math_dapo.py`);
since v0.6.0 also `gts` (reward_model.ground_truth). A dump without `gts` (v0.4, v0.5) has no gold
answers: give `--task` (matched by the prompt text). There is no group id: completions are grouped
by `input`. The kept grade is `acc` where the dump has it, else `score` (>= 1 correct: verl's
rule-based scorers give 1.0 for a right answer); `pred` is the extracted answer.
main_generation: `verl/trainer/main_generation.py` (v0.4.1 to v0.7.0) writes the input dataset's columns plus
`responses` (a list of n_samples strings per row) with `dataset.to_parquet`; the prompt is the
dataset's chat list (`prompt`, verl's data format), the gold `reward_model.ground_truth`, the
id `extra_info.index` (else the row). It has no grades: they are regraded.
Every dump line is checked against `DUMP_LINE` and every parquet row against `GEN_ROW` before
use: `output` a string, `responses` a list of strings (a string is refused, never one
completion per character), `score`/`acc` a number or bool, `step` a non-negative integer.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.errors import UsageError
from evalkit.importers.base import (
    Imported,
    ImportOptions,
    last_user_text,
    read_json_lines,
    read_parquet,
    step_file,
)
from evalkit.importers.fields import COMPLETIONS, GOLD, INDEX, KEY, SCORE, TEXT, add_problem
from evalkit.schema import Json, ListOf, Obj, Opt, Str, check, plain

__all__ = ["read"]

FMT = "verl dump"
DUMP_LINE = Obj({"input": TEXT, "output": TEXT, "score": SCORE, "step": INDEX},
                optional={"gts": GOLD, "acc": SCORE, "pred": Json()})
GEN_ROW = Obj({"responses": COMPLETIONS}, optional={
    "prompt": Opt(Str() | ListOf(Json())), "extra_info": Opt(Obj({}, optional={"index": KEY})),
    "reward_model": Opt(Obj({}, optional={"ground_truth": GOLD}))})


def read(path: Path, opts: ImportOptions) -> Imported:
    if path.suffix.lower() == ".parquet":
        return _generation(path)
    return _dump(_step_file(path, opts.step), opts)


def _step_file(path: Path, step: int | None) -> Path:
    return path if path.is_file() else step_file(path, "", ".jsonl", step, FMT)


def _dump(path: Path, opts: ImportOptions) -> Imported:
    problems, samples, steps = {}, [], set()
    lines = read_json_lines(path, FMT)
    has_acc = all(isinstance(r, dict) and "acc" in r for _, r in lines)
    for number, raw in lines:
        where = f"{path}:{number}"
        record = check(DUMP_LINE, raw, where, FMT)
        prompt, output = record["input"], record["output"]
        gold, score = record.get("gts"), record["score"]  # gts: since v0.6.0
        steps.add(record["step"])
        info = problems.setdefault(prompt, {"question": prompt, "gold": gold})
        if info["gold"] != gold:
            raise UsageError(f"{where}: the same input has another gts ({str(gold)[:30]!r}, "
                             f"before {str(info['gold'])[:30]!r})")
        sample = {"problem": prompt, "completion": output, "score": record["acc"] if has_acc else score}
        if isinstance(record.get("pred"), str):
            sample["extracted"] = record["pred"]
        samples.append(sample)
    if len(steps) > 1:
        raise UsageError(f"{path}: holds steps {sorted(steps)[:4]}; one dump file is one step")
    grade = "acc" if has_acc else "score"
    mapping = {"problem": "input (grouped: no group id in the dump)", "gold": "gts (since verl 0.6; else --task)",
               "completion": "output",
               "grade": f"{grade} (>= 1 or true is correct)", "extracted": "pred (when present)"}
    return Imported("verl", f"verl-step{next(iter(steps))}", (path,), problems, samples, mapping, grade,
                    notes={"step": next(iter(steps))})


def _plain(value):
    """numpy arrays of a parquet row (nested in dicts) as lists; NaN (an absent value) as None."""
    value = plain(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return None if isinstance(value, float) and value != value else value


def _generation(path: Path) -> Imported:
    frame = read_parquet(path, "verl main_generation")
    if "responses" not in frame.columns:
        raise UsageError(f"{path}: no column 'responses'; not a verl main_generation output?")
    problems, samples = {}, []
    for i, raw in enumerate(frame.to_dict("records")):
        where = f"{path}: row {i + 1}"
        row = check(GEN_ROW, {k: _plain(v) for k, v in raw.items()}, where, "verl main_generation output")
        key = str((row.get("extra_info") or {}).get("index", i))
        gold = (row.get("reward_model") or {}).get("ground_truth")
        add_problem(problems, key, {"question": last_user_text(row.get("prompt")), "gold": gold}, where)
        for j, text in enumerate(row["responses"]):
            samples.append({"problem": key, "completion": text, "index": j})
    mapping = {"problem": "extra_info.index (else the row)", "question": "the last user turn of prompt",
               "gold": "reward_model.ground_truth", "completion": "responses[j]", "grade": None}
    return Imported("verl", path.stem, (path,), problems, samples, mapping, None,
                    f"{path}: main_generation output has no grades: use --regrade")
