"""`trl`: TRL GRPOTrainer's completion logs, `completions/completions_<step>.parquet`.

    evalkit import trl out/grpo/completions/ --out runs/trl-last --task hf:openai/gsm8k:main:test --tokenizer out/grpo
    evalkit import trl out/grpo/completions/completions_00050.parquet --out runs/trl-50 --task arith --keep-grades

Writer: huggingface/trl `trl/trainer/grpo_trainer.py` `log` (with `log_completions=True`; read at
v0.28.0, v1.0.0 and v1.9.0: the parquet file exists since commit 035c3ff15, first released in
v0.28.0; earlier releases sent the completions to wandb or the console only):
`pd.DataFrame({"step", "prompt", "completion", **rewards (one column per reward function,
named by it), **extra, "advantage"})` written to `<output_dir>/completions/completions_
{global_step:05d}.parquet`. `prompt` is the rendered prompt text. A group is the rows of one
prompt. The file holds no gold answers (the dataset's columns are not logged): give `--task`
(matched by the prompt text), or `--gold-field` when a logged extra column holds them. The kept
grade is `--correct-field` (a reward column; the only one when there is one): >= 1 is correct,
NaN (the reward function returned None) is an error. Every row is checked (`ROW`): `prompt` and
`completion` strings (a missing one is refused, not read as "nan"), `step` a non-negative
integer, the grade a number; one prompt given two different golds is refused naming both.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.errors import UsageError
from evalkit.importers.base import Imported, ImportOptions, read_parquet, step_file
from evalkit.importers.fields import GOLD, INDEX, SCORE, TEXT, add_problem
from evalkit.schema import Obj, check, plain

__all__ = ["read"]

FMT = "TRL completions"
FIXED = ("step", "prompt", "completion", "advantage")
ROW = Obj({"step": INDEX, "prompt": TEXT, "completion": TEXT})


def _step_file(path: Path, step: int | None) -> Path:
    if path.is_file():
        return path
    folder = path / "completions" if (path / "completions").is_dir() else path
    return step_file(folder, "completions_", ".parquet", step, FMT)


def read(path: Path, opts: ImportOptions) -> Imported:
    path = _step_file(path, opts.step)
    frame = read_parquet(path, FMT)
    for column in FIXED:
        if column not in frame.columns:
            raise UsageError(f"{path}: no column {column!r}; not a {FMT} file?")
    candidates = [c for c in frame.columns if c not in FIXED and str(frame[c].dtype).startswith(("float", "int"))]
    grade = opts.correct_field or (candidates[0] if len(candidates) == 1 else None)
    for name in (grade, opts.gold_field):
        if name is not None and name not in frame.columns:
            raise UsageError(f"{path}: no column {name!r}; columns are {', '.join(map(str, frame.columns))}")
    problems, samples = {}, []
    schema = Obj({**ROW.fields, **({grade: SCORE} if grade else {}), **({opts.gold_field: GOLD} if opts.gold_field else {})})
    steps = set()
    for number, raw in enumerate(frame.to_dict("records"), start=1):
        where = f"{path}: row {number}"
        row = check(schema, {k: plain(v) for k, v in raw.items()}, where, FMT)
        prompt = row["prompt"]
        steps.add(row["step"])
        gold = row.get(opts.gold_field) if opts.gold_field else None
        add_problem(problems, prompt, {"question": prompt, "gold": gold}, where)
        sample = {"problem": prompt, "completion": row["completion"]}
        if grade is not None:
            sample["score"] = row[grade]
        samples.append(sample)
    steps = sorted(steps)
    why = (f"{path}: several reward columns ({', '.join(candidates)}); name the one that grades correctness with "
           "--correct-field" if len(candidates) > 1 else f"{path}: no reward column to keep: use --regrade")
    mapping = {"problem": "prompt (a GRPO group)", "completion": "completion", "gold": opts.gold_field or "--task",
               "grade": grade, "reward_columns": candidates}
    return Imported("trl", f"trl-step{steps[0]}" if len(steps) == 1 else "trl", (path,), problems, samples, mapping,
                    grade, why, notes={"steps": steps})
