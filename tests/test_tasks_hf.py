"""Hugging Face `datasets` sources and the GSM8K / MATH / AIME presets: gold answers against a
hand table, grading, the task identity a resume checks, and refusals. Datasets are made here
with `Dataset.from_dict` + `save_to_disk` (no network)."""

from __future__ import annotations

import json

import pytest

from evalkit.errors import UsageError
from evalkit.tasks import load_task
from evalkit.tasks.hf import gold_answer
from evalkit.tasks.mathgrade import score

GSM8K = {
    "question": ["Tom has 3 apples and buys 4 more. How many apples?", "A shop sells 1,200 pens a day. How many in 2 days?"],
    "answer": ["3 + 4 = <<3+4=7>>7\n#### 7", "1,200 x 2 = <<1200*2=2400>>2,400\n#### 2,400"],
}
MATH = {
    "problem": ["What is $1/2 + 0$?", "Simplify $\\sqrt{8}$."],
    "solution": ["We have $\\frac{1}{2} + 0 = \\boxed{\\frac{1}{2}}$.", "First \\boxed{8}; no: $\\sqrt{8} = \\boxed{2\\sqrt{2}}$."],
    "unique_id": ["m/1", "m/2"],
}

GOLD = [  # (answer field, rule, gold a careful reader takes)
    ("Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 eggs.\n#### 18", "after_hashes", "18"),
    ("... so 1,234 in all\n#### 1,234", "after_hashes", "1234"),
    ("no marker here: 12", "after_hashes", None),
    ("#### -5", "after_hashes", "-5"),
    ("So the answer is $\\boxed{\\frac{3}{4}}$.", "last_boxed", "\\frac{3}{4}"),
    ("\\boxed{1} then \\boxed{2}", "last_boxed", "2"),
    ("nested \\boxed{\\sqrt{2}+\\frac{1}{3}} end", "last_boxed", "\\sqrt{2}+\\frac{1}{3}"),
    ("\\boxed{(1, 2)} and an empty \\boxed{}", "last_boxed", "(1, 2)"),
    ("no box", "last_boxed", None),
    ("033", "integer", "33"),
    ("204", "integer", "204"),
    ("1000", "integer", None),
    ("3.5", "integer", None),
    (" 72 ", "text", "72"),
]


@pytest.mark.parametrize(("field", "rule", "gold"), GOLD)
def test_gold_answers_match_the_hand_table(field, rule, gold):
    assert gold_answer(field, rule) == gold


def _saved(tmp_path, name: str, columns: dict, splits: dict | None = None):
    from datasets import Dataset, DatasetDict

    path = tmp_path / name
    if splits:
        DatasetDict({s: Dataset.from_dict(c) for s, c in splits.items()}).save_to_disk(str(path))
    else:
        Dataset.from_dict(columns).save_to_disk(str(path))
    return path


def test_gsm8k_preset_applies_by_name_and_grades(tmp_path):
    task = load_task(str(_saved(tmp_path, "gsm8k_test", GSM8K)))
    assert [p.answer for p in task.problems] == ["7", "2400"]
    assert all("The final answer is" in p.prompt for p in task.problems)  # the preset's instruction
    identity = task.spec.identity()
    assert identity["config"]["preset"] == "gsm8k" and identity["source_sha256"]
    p = task.problems[1]
    assert score("1,200 x 2 = 2,400. The final answer is 2,400.", p).outcome == "correct"
    assert score("The final answer is 2,000.", p).outcome == "incorrect"


def test_math_preset_takes_the_last_boxed_answer_and_ids(tmp_path):
    task = load_task(str(_saved(tmp_path, "competition", MATH)), config={"preset": "math"})
    assert [(p.id, p.answer) for p in task.problems] == [("m/1", "\\frac{1}{2}"), ("m/2", "2\\sqrt{2}")]
    assert score("so \\boxed{0.5}", task.problems[0]).outcome == "correct"
    assert score("\\boxed{\\sqrt{8}}", task.problems[1]).outcome == "correct"
    assert score("\\boxed{8}", task.problems[1]).outcome == "incorrect"


def test_fields_can_be_named_for_any_source(tmp_path):
    data = {"q": ["1+1?"], "a": ["2"], "key": ["x1"]}
    folder = _saved(tmp_path, "mine", data)
    task = load_task(str(folder), config={"question_field": "q", "answer_field": "a", "id_field": "key"})
    assert [(p.id, p.prompt, p.answer) for p in task.problems] == [("x1", "1+1?", "2")]
    jsonl = tmp_path / "gsm.jsonl"  # a JSONL file read the same way, with a preset
    jsonl.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in zip(*GSM8K.values(), strict=True)))
    file_task = load_task(str(jsonl), config={"preset": "gsm8k"})
    assert [p.answer for p in file_task.problems] == ["7", "2400"] and file_task.problems[0].id == "1"


def test_a_dataset_dict_folder_reads_the_test_split(tmp_path):
    folder = _saved(tmp_path, "dd", {}, splits={"train": {"question": ["a"], "answer": ["1"]},
                                                 "test": {"question": ["b", "c"], "answer": ["2", "3"]}})
    task = load_task(str(folder))
    assert [p.answer for p in task.problems] == ["2", "3"] and task.spec.identity()["config"]["dataset"]["split"] == "test"


def test_another_version_of_the_data_is_refused_on_resume(tmp_path, tiny_model):
    from evalkit.passk import PasskOptions, run_passk

    folder = _saved(tmp_path, "gsm8k_v", GSM8K)
    opts = PasskOptions(model=str(tiny_model), task=str(folder), n=1, ks=(1,), limit=None, max_new_tokens=2,
                        grader_workers=1, device="cpu")
    run_passk(opts, tmp_path / "run")
    changed = dict(GSM8K, answer=["3 + 4 = 7\n#### 7", "#### 2,401"])
    import shutil

    shutil.rmtree(folder)
    _saved(tmp_path, "gsm8k_v", changed)
    with pytest.raises(UsageError, match="task="):
        run_passk(opts, tmp_path / "run")


@pytest.mark.parametrize(("make", "config", "message"), [
    (lambda t: _saved(t, "empty", {"question": [], "answer": []}), {}, "is empty"),
    (lambda t: _saved(t, "nofield", {"text": ["x"], "answer": ["1"]}), {}, "no question field"),
    (lambda t: _saved(t, "named", {"question": ["x"], "answer": ["1"]}), {"question_field": "nope"},
     "no question field 'nope'"),
    (lambda t: _saved(t, "gsm8k_bad", {"question": ["x"], "answer": ["no marker"]}), {}, "no gold answer"),
    (lambda t: _saved(t, "p", {"question": ["x"], "answer": ["1"]}), {"preset": "mmlu"}, "--preset mmlu"),
    (lambda t: _saved(t, "k", {"question": ["x"], "answer": ["1"]}), {"max_operand": 3}, "unknown config keys"),
])
def test_refusals_name_the_problem(tmp_path, make, config, message):
    with pytest.raises(UsageError, match=message):
        load_task(str(make(tmp_path)), config=config)


def test_non_utf8_data_files_are_refused(tmp_path):
    folder = tmp_path / "latin"
    folder.mkdir()
    (folder / "data.json").write_bytes('{"question": "caf\xe9", "answer": "1"}\n'.encode("latin-1"))
    with pytest.raises(UsageError, match="not UTF-8|not a dataset folder"):
        load_task(str(folder))


def test_a_missing_hub_dataset_offline_is_one_clear_line(monkeypatch):
    import datasets

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    with pytest.raises(UsageError, match="cannot load dataset 'evalkit-no-such/dataset'.*offline") as info:
        load_task("hf:evalkit-no-such/dataset:main:test")
    assert "\n" not in str(info.value)
    with pytest.raises(UsageError, match="hf:NAME"):
        load_task("hf:a:b:c:d")


def test_a_missing_split_is_refused(tmp_path):
    folder = tmp_path / "jsonfolder"
    folder.mkdir()
    (folder / "test.json").write_text(json.dumps({"question": "1+1?", "answer": "2"}) + "\n")
    assert [p.answer for p in load_task(f"hf:{folder}").problems] == ["2"]  # data files through load_dataset
    with pytest.raises(UsageError, match="split nope"):
        load_task(f"hf:{folder}::nope")
