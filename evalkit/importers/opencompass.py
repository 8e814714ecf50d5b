"""`opencompass`: OpenCompass predictions, `predictions/<model>/<dataset>.json`.

    evalkit import opencompass outputs/default/20250101_000000/predictions/qwen/math_gen.json --out runs/oc

Writer: open-compass/opencompass `opencompass/openicl/icl_inferencer/icl_base_inferencer.py`
`GenInferencerOutputHandler.save_results` / `write_to_json`: a dict `"<idx>": {origin_prompt,
prediction, gold (when the dataset has one), res_length?}`. With `n` runs of a dataset
(`opencompass/datasets/base.py` `BaseDataset`: `concatenate_datasets([dataset] * n)`), copy i of
n covers idx in [i*size, (i+1)*size): the copies are found as the smallest period `size` of the
prompts (idx and idx + size hold the same origin_prompt), so problem = idx mod size and sample
index = idx // size. `origin_prompt` is a string or a list of `{role, prompt}` turns (the last
HUMAN turn is the question). The file has no per-completion grades (OpenCompass's results/
folder does): they are regraded.
"""

from __future__ import annotations

import json
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.importers.base import Imported, ImportOptions, last_user_text, need

__all__ = ["read"]

FMT = "OpenCompass predictions"


def _load(path: Path) -> dict:
    if path.is_dir():
        raise UsageError(f"{path}: give the predictions/<model>/<dataset>.json file itself")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not a JSON file ({exc}); not an {FMT} file?") from None
    if not isinstance(data, dict) or not data:
        raise UsageError(f"{path}: expected a JSON object of \"<idx>\": {{origin_prompt, prediction, gold}}")
    return data


def _period(prompts: list) -> int:
    """The smallest size dividing len(prompts) with prompts[i] == prompts[i % size] for all i."""
    total = len(prompts)
    for size in range(1, total + 1):
        if total % size == 0 and all(prompts[i] == prompts[i % size] for i in range(size, total)):
            return size
    return total


def read(path: Path, opts: ImportOptions) -> Imported:
    data = _load(path)
    try:
        order = sorted(data, key=int)
    except ValueError:
        raise UsageError(f"{path}: keys are not indices (\"0\", \"1\", ...); not an {FMT} file?") from None
    if [int(k) for k in order] != list(range(len(order))):
        raise UsageError(f"{path}: indices are not 0..{len(order) - 1}; a partial (tmp_) file?")
    rows = []
    for key in order:
        where = f"{path}: \"{key}\""
        rows.append((need(data[key], "origin_prompt", where, FMT), need(data[key], "prediction", where, FMT),
                     data[key].get("gold")))
    size = _period([json.dumps(r[0], sort_keys=True) for r in rows])
    problems, samples = {}, []
    for idx, (prompt, prediction, gold) in enumerate(rows):
        key = str(idx % size)
        problems.setdefault(key, {"question": last_user_text(prompt) or json.dumps(prompt), "gold": gold})
        samples.append({"problem": key, "completion": str(prediction), "index": idx // size})
    mapping = {"problem": "idx mod size (copies of the dataset found by their prompts)", "gold": "gold",
               "completion": "prediction", "question": "origin_prompt (its last HUMAN turn)", "grade": None}
    return Imported("opencompass", path.stem, (path,), problems, samples, mapping, None,
                    f"{path}: OpenCompass predictions hold no per-completion grades: use --regrade",
                    notes={"copies": len(rows) // size, "size": size})
