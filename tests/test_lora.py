"""LoRA adapters read as updates: `evalkit diff BASE ADAPTER` gives bitwise the figures of
diffing the merged model, with the update's rank by construction and its effective rank."""

import json
import math

import numpy as np
import pytest
from helpers import formats
from typer.testing import CliRunner

from evalkit.diff import DiffOptions, diff_checkpoints

LORA_COLUMNS = ("lora_r", "lora_alpha", "lora_scaling", "lora_rank_by_construction", "lora_rank",
                "lora_effective_rank")


def figures(result) -> str:
    from evalkit.jsonio import plain_json

    summary = {k: result.summary.get(k) for k in ("updates", "tensors_compared", "missing", "extra",
                                                   "mismatched", "skipped")}
    rows = [{k: v for k, v in r.items() if k not in LORA_COLUMNS} for r in result.tensors]
    return json.dumps(plain_json({"summary": summary, "rows": rows}), sort_keys=True)


def _diff(*args):
    return diff_checkpoints([str(a) for a in args], DiffOptions(chunk_elems=1000))


def test_hand_written_adapter_diffs_as_the_merged_model(tiny_model, tmp_path):
    adapter, factors = formats.save_lora_by_hand(tiny_model, tmp_path / "adapter", r=4, alpha=8.0)
    merged = formats.merged_by_hand(tiny_model, factors, 8.0 / 4, tmp_path / "merged")
    got = _diff(tiny_model, adapter)
    assert figures(got) == figures(_diff(tiny_model, merged))
    assert figures(_diff(tiny_model, f"{tiny_model}+{adapter}")) == figures(got)
    lora = got.summary["lora"]["other"]
    assert lora["modules"] == len(factors) == 4 and lora["scaling"] == [2.0]
    assert lora["rank_by_construction"] == {"mean": 4.0, "min": 4.0, "max": 4.0}
    for row in got.tensors:
        module = row["tensor"].removesuffix(".weight")
        if module not in factors:
            assert "lora_rank" not in row
            continue
        a, b = (t.double().numpy() for t in factors[module])
        delta = 2.0 * b @ a
        s = np.linalg.svd(delta, compute_uv=False)
        assert row["lora_rank"] == np.linalg.matrix_rank(delta.astype(np.float32)) == 4
        p = s[s > 1e-12 * s.max()] / s[s > 1e-12 * s.max()].sum()
        assert row["lora_effective_rank"] == pytest.approx(math.exp(-(p * np.log(p)).sum()), rel=1e-9)
        assert 1 < row["lora_effective_rank"] < 4


def test_low_rank_factors_report_their_true_rank(tiny_model, tmp_path):
    """r = 4, but B's columns span only 2 directions: rank by construction 4, rank 2."""
    import torch
    from safetensors.torch import load_file, save_file

    adapter, _ = formats.save_lora_by_hand(tiny_model, tmp_path / "adapter", r=4)
    weights = load_file(str(adapter / "adapter_model.safetensors"))
    for key, t in weights.items():
        if "lora_B" in key:
            weights[key] = torch.cat([t[:, :2], t[:, :2]], dim=1)
    save_file(weights, str(adapter / "adapter_model.safetensors"))
    lora = _diff(tiny_model, adapter).summary["lora"]["other"]
    assert lora["rank_by_construction"]["max"] == 4 and lora["rank"] == {"mean": 2.0, "min": 2.0, "max": 2.0}
    assert lora["effective_rank"]["max"] <= 2


@pytest.mark.parametrize("rslora", [False, True])
def test_adapter_written_by_peft_diffs_as_peft_merge(tiny_model, tmp_path, rslora):
    peft = pytest.importorskip("peft")
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    config = peft.LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj", "down_proj"],
                             use_rslora=rslora, lora_dropout=0.0)
    model = peft.get_peft_model(model, config)
    torch.manual_seed(3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:  # peft initialises B at zero: an untrained adapter changes nothing
                p.normal_(0, 0.05)
    model.save_pretrained(tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_model.safetensors").is_file()
    assert (tmp_path / "adapter" / "adapter_config.json").is_file()
    model.merge_and_unload().save_pretrained(tmp_path / "merged")
    got = _diff(tiny_model, tmp_path / "adapter")
    assert figures(got) == figures(_diff(tiny_model, tmp_path / "merged"))
    scaling = 16 / math.sqrt(4) if rslora else 16 / 4
    assert got.summary["lora"]["other"]["scaling"] == [scaling]
    assert got.summary["lora"]["other"]["use_rslora"] is rslora
    changed = got.summary["updates"]["other"]["kinds"]
    assert changed["q_proj"]["changed_bits"] > 0 and changed["mlp_up"]["changed_bits"] == 0


def test_dora_is_refused_in_one_line(tiny_model, tmp_path):
    from evalkit.cli import app

    adapter, _ = formats.save_lora_by_hand(tiny_model, tmp_path / "adapter", use_dora=True)
    res = CliRunner().invoke(app, ["diff", str(tiny_model), str(adapter)])
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    assert "DoRA" in res.output


def test_adapter_on_another_base_is_refused(tiny_model, tmp_path):
    from helpers.tinymodel import make_tiny_model

    from evalkit.cli import app

    other = make_tiny_model(tmp_path / "wide", hidden=48)
    adapter, _ = formats.save_lora_by_hand(tiny_model, tmp_path / "adapter")
    res = CliRunner().invoke(app, ["diff", str(other), str(adapter)])
    assert res.exit_code == 2 and res.output.count("\n") == 1
    assert "another base model" in res.output


def test_cli_writes_lora_columns(tiny_model, tmp_path):
    import pandas as pd

    from evalkit.cli import app

    adapter, factors = formats.save_lora_by_hand(tiny_model, tmp_path / "adapter")
    res = CliRunner().invoke(app, ["diff", str(tiny_model), str(adapter), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    rows = pd.read_csv(tmp_path / "out" / "tensors.csv")
    lora_rows = rows[rows["lora_rank"].notna()]
    assert sorted(lora_rows["tensor"]) == sorted(f"{m}.weight" for m in factors)
    saved = json.loads((tmp_path / "out" / "diff.json").read_text())
    assert saved["inputs"]["other"]["format"] == "lora"
