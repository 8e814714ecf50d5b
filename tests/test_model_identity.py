"""A model's identity hash covers the files its weights are loaded from: for a Hugging Face
folder, those transformers' from_pretrained loads by its own rules (issue 43: an unrelated
.safetensors beside two different pytorch_model.bin gave both the same hash), and summary.json
names them."""

from __future__ import annotations

import json

from evalkit.models import ModelRef, model_record, weight_files, weights_hash


def _folder(path, files: dict, config: dict | None = None):
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config or {}))
    for name, data in files.items():
        (path / name).write_bytes(data)
    return path


def test_an_unrelated_safetensors_file_is_not_hashed_in_place_of_the_loaded_bin(tmp_path):
    a = _folder(tmp_path / "a", {"pytorch_model.bin": b"A" * 64, "unrelated.safetensors": b"same"})
    b = _folder(tmp_path / "b", {"pytorch_model.bin": b"B" * 64, "unrelated.safetensors": b"same"})
    assert weight_files(a) == [a / "pytorch_model.bin"]
    assert weights_hash(str(a)) != weights_hash(str(b))
    assert model_record(ModelRef("a", str(a)))["files"] == [str(a / "pytorch_model.bin")]


def test_transformers_order_of_preference_and_shards(tmp_path):
    both = _folder(tmp_path / "both", {"model.safetensors": b"s", "pytorch_model.bin": b"b", "x.safetensors": b"x"})
    assert weight_files(both) == [both / "model.safetensors"]
    index = {"weight_map": {"a": "model-00002-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
                            "c": "model-00001-of-00002.safetensors"}}
    sharded = _folder(tmp_path / "sharded", {"model.safetensors.index.json": json.dumps(index).encode(),
                                              "model-00001-of-00002.safetensors": b"1",
                                              "model-00002-of-00002.safetensors": b"2", "stray.safetensors": b"!"})
    assert [f.name for f in weight_files(sharded)] == ["model-00001-of-00002.safetensors",
                                                      "model-00002-of-00002.safetensors"]
    named = _folder(tmp_path / "named", {"model.safetensors": b"s", "mine.safetensors": b"m"},
                    {"transformers_weights": "mine.safetensors"})
    assert weight_files(named) == [named / "mine.safetensors"]
    assert weight_files(_folder(tmp_path / "none", {"weights.npz": b"?"})) == []


def test_a_hub_name_has_no_hash_and_no_files():
    assert weights_hash("org/model") is None
    assert model_record(ModelRef("org/model", "org/model")) == {"path": "org/model", "files": None}
