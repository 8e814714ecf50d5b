"""Every format the reader opens loads as a model (config + the reader's state dict) equal to
its safetensors twin; `evalkit passk` and `evalkit forgetting` run on them, BASE+ADAPTER too."""

import json

import pytest
import typer
from helpers import formats
from typer.testing import CliRunner

from evalkit.errors import UsageError
from evalkit.models import identity, load_model, resolve_model

FAST = ["--n", "2", "--k", "1,2", "--limit", "3", "--max-new-tokens", "6", "--batch-size", "6",
        "--device", "cpu", "--threads", "1"]


@pytest.fixture(scope="module")
def trained(tiny_model, tmp_path_factory):
    return formats.planted_copy(tiny_model, tmp_path_factory.mktemp("load") / "trained")


@pytest.fixture(scope="module")
def variants(tiny_model, trained, tmp_path_factory):
    """format -> the trained weights in that format (each with config and tokenizer)."""
    root = tmp_path_factory.mktemp("variants")
    return {
        "dcp": formats.save_dcp(trained, root / "dcp"),
        "verl": formats.save_verl_fsdp(trained, root / "global_step_5" / "actor", world=2).parent,
        "bin": formats.save_vllm_pth(trained, root / "es", with_config=True),
    }


def _params(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("fmt", ["dcp", "verl", "bin"])
def test_each_format_loads_the_same_weights(trained, variants, fmt):
    import torch

    ref = resolve_model(str(variants[fmt]))
    assert ref.format == fmt
    want = _params(load_model(resolve_model(str(trained)))[0])
    model, tokenizer = load_model(ref)
    got = _params(model)
    assert sorted(got) == sorted(want)
    assert all(torch.equal(got[k], want[k]) for k in want)
    assert tokenizer.padding_side == "left"
    assert identity(ref, "float32")["sha256"] not in (None, identity(resolve_model(str(trained)), "float32")["sha256"])


def test_base_plus_adapter_loads_the_merged_model(tiny_model, tmp_path):
    import torch

    adapter, factors = formats.save_lora_by_hand(tiny_model, tmp_path / "adapter")
    merged = formats.merged_by_hand(tiny_model, factors, 2.0, tmp_path / "merged")
    ref = resolve_model(f"{tiny_model}+{adapter}")
    assert ref.format == "lora"
    got, want = _params(load_model(ref)[0]), _params(load_model(resolve_model(str(merged)))[0])
    assert all(torch.equal(got[k], want[k]) for k in want)
    other, _ = formats.save_lora_by_hand(tiny_model, tmp_path / "adapter2", seed=9)
    hashes = {identity(resolve_model(x), "float32")["sha256"]
              for x in (str(tiny_model), f"{tiny_model}+{adapter}", f"{tiny_model}+{other}")}
    assert len(hashes) == 3  # the adapter is part of the model's identity


def _passk(model, out):
    from evalkit.cli import app

    res = CliRunner().invoke(app, ["passk", str(model), *FAST, "--out", str(out)])
    assert res.exit_code == 0, res.output
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


def _texts(samples):
    return [(s["problem_id"], s["sample_index"], s["completion"], s["outcome"]) for s in samples]


def test_passk_on_verl_shards_and_on_base_plus_adapter(tiny_model, trained, variants, tmp_path):
    want = _texts(_passk(trained, tmp_path / "st"))
    assert _texts(_passk(variants["verl"], tmp_path / "verl")) == want
    adapter, factors = formats.save_lora_by_hand(tiny_model, tmp_path / "adapter")
    merged = formats.merged_by_hand(tiny_model, factors, 2.0, tmp_path / "merged")
    assert _texts(_passk(f"{tiny_model}+{adapter}", tmp_path / "lora")) == _texts(_passk(merged, tmp_path / "m"))
    summary = json.loads((tmp_path / "lora" / "summary.json").read_text())
    assert summary["model"]["name"] == f"{tiny_model}+{adapter}"


def test_forgetting_accepts_base_plus_adapter(tiny_model, tmp_path):
    from evalkit.cli_forgetting import forgetting
    from evalkit.errors import handle_errors

    app = typer.Typer()
    app.command()(handle_errors(forgetting))
    adapter, _ = formats.save_lora_by_hand(tiny_model, tmp_path / "adapter")
    args = [str(tiny_model), f"{tiny_model}+{adapter}", "--suite", "letter_counting", "--limit", "2",
            "--max-new-tokens", "4", "--train-task", "arith", "--kl-prompts", "2", "--kl-max-new-tokens", "3",
            "--device", "cpu", "--grade-timeout", "60", "--out", str(tmp_path / "f")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "f" / "forgetting.json").read_text())
    assert report["models"]["base"]["sha256"] != report["models"]["model"]["sha256"]
    assert report["kl"]["kl_sequence"] > 0


def test_checkpoint_without_config_is_refused_naming_the_fix(trained, tmp_path):
    folder = formats.save_vllm_pth(trained, tmp_path / "es")
    with pytest.raises(UsageError, match="without config.json: put the model's config.json"):
        resolve_model(str(folder))
    adapter, _ = formats.save_lora_by_hand(trained, tmp_path / "adapter")
    with pytest.raises(UsageError, match="as BASE\\+ADAPTER"):
        resolve_model(str(adapter))


def _interpolate(a, b, out) -> list[tuple]:
    from evalkit.cli import app

    res = CliRunner().invoke(app, ["interpolate", str(a), str(b), "--task", "arith", "--limit", "2",
                                   "--max-new-tokens", "4", "--points", "3", "--batch-size", "2",
                                   "--device", "cpu", "--threads", "1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "interpolate.json").read_text())
    return [(p["t"], p["accuracy"], p["loss"], p["loss_tokens"]) for p in summary["points"]]


def test_interpolate_reads_every_format_as_its_safetensors(tiny_model, trained, variants, tmp_path):
    """The path from the base to each format's checkpoint is the path to its safetensors twin,
    point for point (t = 0.5 mixes every tensor the reader streams)."""
    want = _interpolate(tiny_model, trained, tmp_path / "st")
    assert len(want) == 3 and want[0][2] != want[2][2]  # the path moves: a reader returning A would show
    for fmt in ("dcp", "verl", "bin"):
        assert _interpolate(tiny_model, variants[fmt], tmp_path / fmt) == want, fmt
    adapter, factors = formats.save_lora_by_hand(tiny_model, tmp_path / "adapter")
    merged = formats.merged_by_hand(tiny_model, factors, 2.0, tmp_path / "merged")
    assert _interpolate(tiny_model, f"{tiny_model}+{adapter}", tmp_path / "lora") == \
        _interpolate(tiny_model, merged, tmp_path / "m")
