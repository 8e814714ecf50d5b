"""`opencompass`: OpenCompass predictions, `<work_dir>/predictions/<model>/<dataset>.json`.

    evalkit import opencompass outputs/default/20250101_000000/predictions/qwen/math_gen.json --out runs/oc
    evalkit import opencompass outputs/default/20250101_000000/predictions/qwen/ --out runs/oc  # one run per dataset

Writers (open-compass/opencompass, read at tag 0.5.3):
- `opencompass/openicl/icl_inferencer/icl_base_inferencer.py` `GenInferencerOutputHandler`
  (`save_results`, `write_to_json`): a dict `"<idx>": {origin_prompt, prediction, gold (when
  the dataset has one), res_length?}`; while inferring, `icl_gen_inferencer.py` keeps
  `tmp_<dataset>.jsonl` (`{"idx", ...}` per line; `tmp_<dataset>.json` before 0.5.3) and deletes it
  when done: a tmp_ file is partial.
- `opencompass/partitioners/size.py` and `num_worker.py` `split_dataset`: with several workers a
  dataset is cut into `[i*step:(i+1)*step]` parts named `<dataset>_<part>`, so the predictions are
  `<dataset>_0.json`, `<dataset>_1.json`, ..., every part `step` long but the last.
  `opencompass/tasks/openicl_eval.py` `_load_predictions` (and `tools/prediction_merger.py`)
  reads `<dataset>.json`, else concatenates `<dataset>_0.json`, `_1`, ... in order, each part's keys
  "0".."len-1". A folder is merged the same way; one part alone, a part missing before the last,
  or a part shorter than one after it is partial.
- `opencompass/datasets/base.py` `BaseDataset`: with `n` runs the dataset is
  `concatenate_datasets([dataset] * n)`, so copy i covers idx [i*size, (i+1)*size): the copies are
  found as the smallest period `size` of the prompts; problem = idx mod size, sample = idx // size.
`origin_prompt` is a string or a list of `{role, prompt}` turns (the last HUMAN turn is the
question). The file has no per-completion grades: they are regraded. The tool's own score is
`<work_dir>/results/<model>/<dataset>.json` `accuracy`, written in percent.
Every prediction is checked against `PREDICTION` before use: `prediction` a string (a list, as
`num_return_sequences` > 1 writes, is refused rather than read as its text), `origin_prompt` a
string or a list of turns; copies of one problem with different golds are refused naming both.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.importers.base import Imported, ImportOptions, last_user_text, reported
from evalkit.importers.fields import GOLD, TEXT, add_problem, bounded_gaps
from evalkit.schema import Float, Json, ListOf, Obj, Opt, check, json_lines, read_json

__all__ = ["read"]

FMT = "OpenCompass predictions"
PREDICTION = Obj({"origin_prompt": TEXT | ListOf(Json()), "prediction": TEXT}, optional={"gold": GOLD})
RESULTS = Obj({}, optional={"accuracy": Opt(Float(min=0, max=100))})
PART = re.compile(r"^(?P<root>.+)_(?P<part>\d+)$")


def read(path: Path, opts: ImportOptions) -> Imported | list[Imported]:
    datasets = _datasets(path.parent, [path]) if path.is_file() else _datasets(path, sorted(path.iterdir()))
    if not datasets:
        raise UsageError(f"{path}: no <dataset>.json predictions of OpenCompass in the folder")
    runs = [_imported(name, parts, why) for name, (parts, why) in datasets.items()]
    return runs[0] if len(runs) == 1 else runs


def _datasets(folder: Path, given: list[Path]) -> dict[str, tuple[list[Path], str | None]]:
    """dataset -> (its files in merge order, why it is partial or None), for the files `given`."""
    out: dict[str, tuple[list[Path], str | None]] = {}
    names = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
    for file in given:
        if not file.is_file() or file.suffix not in (".json", ".jsonl"):
            continue
        if file.name.startswith("tmp_"):
            root = file.stem.removeprefix("tmp_")
            if f"{root}.json" not in names or len(given) == 1:
                out[root] = ([file], f"{file.name}: the file OpenCompass keeps while it infers and deletes when done: "
                                     "a partial run")
            continue
        match = PART.match(file.stem)
        if match and f"{match['root']}_0.json" in names and f"{match['root']}.json" not in names:
            root = match["root"]
            parts = sorted((p for p in folder.glob(f"{root}_*.json") if PART.match(p.stem)
                            and PART.match(p.stem)["root"] == root), key=lambda p: int(PART.match(p.stem)["part"]))
            if len(given) == 1:
                out[root] = ([file], f"{file.name}: part {match['part']} of {len(parts)} parts of {root} (OpenCompass "
                                     f"merges {root}_0.json, {root}_1.json, ...): give the folder")
            else:
                out[root] = (parts, _gaps(root, parts))
        elif file.suffix == ".json":
            out[file.stem] = ([file], None)
    return out


def _gaps(root: str, parts: list[Path]) -> str | None:
    numbers = [int(PART.match(p.stem)["part"]) for p in parts]
    if numbers != list(range(len(numbers))):
        _, first = bounded_gaps(numbers)
        return f"{root}: part {root}_{first}.json is missing (parts found: {numbers[:8]}): a partial run"
    sizes = [len(_load(p)) for p in parts]
    for i, (size, later) in enumerate(zip(sizes, sizes[1:], strict=False)):
        if size < later:
            return (f"{root}_{i}.json holds {size} predictions, fewer than {root}_{i + 1}.json ({later}); OpenCompass "
                    "cuts every part but the last to one length: a partial run")
    return None


def _load(path: Path) -> dict:
    if path.suffix == ".jsonl":  # tmp_<dataset>.jsonl: {"idx": ..., ...} per line
        rows = [(f"{path}:{n}", r) for n, r in json_lines(path, FMT)]
        return {str(check(Obj({"idx": Json()}), r, where, FMT)["idx"]): r for where, r in rows}
    data = read_json(path, FMT)
    if not isinstance(data, dict) or not data:
        raise UsageError(f"{path}: expected a JSON object of \"<idx>\": {{origin_prompt, prediction, gold}}")
    return data


def _rows(path: Path, partial: bool) -> list[tuple]:
    data = _load(path)
    try:
        order = sorted(data, key=int)
    except ValueError:
        raise UsageError(f"{path}: keys are not indices (\"0\", \"1\", ...); not an {FMT} file?") from None
    if [int(k) for k in order] != list(range(len(order))) and not partial:
        raise UsageError(f"{path}: indices are not 0..{len(order) - 1}; a partial (tmp_) file?")
    rows = []
    for key in order:
        record = check(PREDICTION, data[key], f"{path}: \"{key}\"", FMT)
        rows.append((record["origin_prompt"], record["prediction"], record.get("gold"), f"{path}: \"{key}\""))
    return rows


def _period(prompts: list) -> int:
    """The smallest size dividing len(prompts) with prompts[i] == prompts[i % size] for all i."""
    total = len(prompts)
    for size in range(1, total + 1):
        if total % size == 0 and all(prompts[i] == prompts[i % size] for i in range(size, total)):
            return size
    return total


def _imported(name: str, parts: list[Path], partial: str | None) -> Imported:
    rows = [row for part in parts for row in _rows(part, partial is not None)]
    size = _period([json.dumps(r[0], sort_keys=True) for r in rows])
    problems, samples = {}, []
    for idx, (prompt, prediction, gold, where) in enumerate(rows):
        key = str(idx % size)
        add_problem(problems, key, {"question": last_user_text(prompt) or json.dumps(prompt), "gold": gold}, where)
        samples.append({"problem": key, "completion": prediction, "index": idx // size})
    mapping = {"problem": "idx mod size (copies of the dataset found by their prompts)", "gold": "gold",
               "completion": "prediction", "question": "origin_prompt (its last HUMAN turn)", "grade": None}
    if len(parts) > 1:
        mapping["merged"] = [p.name for p in parts]
    results = parts[0].parent.parent.parent / "results" / parts[0].parent.name / f"{name}.json"
    return Imported("opencompass", name, tuple(parts), problems, samples, mapping, None,
                    f"{parts[0]}: OpenCompass predictions hold no per-completion grades: use --regrade",
                    notes={"copies": len(rows) // size, "size": size, "parts": len(parts)}, partial=partial,
                    reported=_reported(results))


def _reported(path: Path):
    if not path.is_file():
        return None
    data = read_json(path, "OpenCompass results")
    if not isinstance(data, dict):
        return None
    return reported("accuracy", check(RESULTS, data, path, "OpenCompass results").get("accuracy"), path, percent=True)
