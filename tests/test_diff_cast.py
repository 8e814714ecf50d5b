"""evalkit diff --as-dtype: rounding as torch does, and an fp32 base against a bf16 trained copy."""

import json
import math

import numpy as np
import pytest
from helpers.checkpoints import CONFIG, SHAPES, save, write_st
from typer.testing import CliRunner

from evalkit.checkpoints.tensors import cast_bits, to_values
from evalkit.diff import DiffOptions, diff_checkpoints
from evalkit.errors import UsageError

TORCH = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64"}


def awkward_values(n: int = 20_000) -> np.ndarray:
    """Random magnitudes over the whole float32 range, exact bf16/fp16 ties, subnormals, infs."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-140, 120, n))).astype(np.float32)
    ties = ((rng.integers(0, 1 << 16, 500).astype(np.uint32) << 16) | 0x8000).view(np.float32)
    half_ties = (np.float32(1) + np.arange(500, dtype=np.float32) * np.float32(2**-11))
    specials = np.array([0.0, -0.0, np.inf, -np.inf, 1e-45, 3.4e38, 65519.0, 65520.0, 6e-8],
                        np.float32)
    return np.concatenate([x, ties[np.isfinite(ties)], half_ties, specials])


@pytest.mark.parametrize("src", ["F64", "F32", "F16", "BF16"])
@pytest.mark.parametrize("target", ["BF16", "F16", "F32"])
def test_cast_bits_rounds_exactly_as_torch(src, target):
    import torch

    values = awkward_values().astype(np.float64)
    if src == "F64":  # bits below float32's precision: torch rounds via float32 (twice)
        values *= 1 + np.random.default_rng(1).standard_normal(values.size) * 2.0**-25
    ref = torch.from_numpy(values).to(getattr(torch, TORCH[src]))
    raw = ref.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[ref.element_size()]).numpy()
    bits = raw.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[raw.itemsize])
    ours = cast_bits(bits, src, target)
    want = ref.to(getattr(torch, TORCH[target]))
    want_bits = want.view(torch.int16 if target != "F32" else torch.int32).numpy().view(ours.dtype)
    assert np.array_equal(ours, want_bits), (src, target)
    assert np.array_equal(to_values(ours, target), want.float().numpy())


def test_cast_bits_makes_every_nan_one_pattern():
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF], np.uint32)
    assert set(cast_bits(nans, "F32", "BF16").tolist()) == {0x7FC0}
    assert set(cast_bits(nans, "F32", "F16").tolist()) == {0x7E00}


# planted in the bf16 copy: tensor -> (flat positions, added value); base entries there set to 1.0
PLANT = {"model.layers.0.self_attn.q_proj.weight": ([1, 2, 200], 0.5),
         "model.layers.1.mlp.down_proj.weight": ([7], -0.25),
         "lm_head.weight": ([0, 1023], 2.0**-6)}


@pytest.fixture
def fp32_and_bf16(tmp_path):
    """An fp32 base (values not exact in bf16) and its bf16 copy with PLANT added."""
    import torch

    rng = np.random.default_rng(3)
    base = {n: (rng.standard_normal(s) * 0.02).astype(np.float32) for n, s in SHAPES.items()}
    for name, (pos, _) in PLANT.items():
        base[name].reshape(-1)[pos] = 1.0
    trained = {}
    for name, v in base.items():
        t = torch.from_numpy(v).to(torch.bfloat16)
        if name in PLANT:
            pos, add = PLANT[name]
            t.view(-1)[pos] += add
        trained[name] = t.view(torch.int16).numpy().view(np.uint16)
    base_dir = save(tmp_path / "fp32", base, "F32")
    other = tmp_path / "bf16"
    other.mkdir()
    (other / "config.json").write_text(json.dumps(CONFIG))
    write_st(other / "model.safetensors", {n: ("BF16", b) for n, b in trained.items()})
    return base_dir, other, base, trained


def test_fp32_base_against_bf16_copy_as_bfloat16(fp32_and_bf16):
    base_dir, other, base, trained = fp32_and_bf16
    with pytest.raises(UsageError, match="no tensor could be compared"):
        diff_checkpoints([str(base_dir), str(other)])  # every tensor is a dtype mismatch
    result = diff_checkpoints([str(base_dir), str(other)], DiffOptions(as_dtype="bfloat16"))
    s = result.summary
    assert s["options"]["as_dtype"] == "bfloat16" and s["mismatched"] == []
    overall = s["updates"]["other"]["overall"]
    planted_n = sum(len(p) for p, _ in PLANT.values())
    assert overall["changed_bits"] == overall["changed_atol"] == planted_n  # rounding is no change
    sq = sum(len(p) * a * a for p, a in PLANT.values())
    assert overall["update_norm"] == pytest.approx(math.sqrt(sq), rel=1e-12)
    assert overall["max_abs_update"] == 0.5
    rows = {r["tensor"]: r for r in result.tensors}
    for name, (pos, _) in PLANT.items():
        assert rows[name]["changed_bits"] == len(pos)
    # the base's norm is that of the base rounded to bf16 by torch
    import torch

    sq_w = sum(float((torch.from_numpy(v).to(torch.bfloat16).double() ** 2).sum())
               for v in base.values())
    assert overall["weight_norm"] == pytest.approx(math.sqrt(sq_w), rel=1e-6)


def test_fp32_base_against_bf16_copy_as_float32(fp32_and_bf16):
    base_dir, other, base, trained = fp32_and_bf16
    s = diff_checkpoints([str(base_dir), str(other)], DiffOptions(as_dtype="float32")).summary
    widened = {n: (b.astype(np.uint32) << 16).view(np.float32) for n, b in trained.items()}
    differ = sum(int(np.count_nonzero(base[n].ravel() != widened[n].ravel())) for n in base)
    sq = sum(float(np.sum((widened[n].ravel().astype(np.float64) - base[n].ravel()) ** 2))
             for n in base)
    overall = s["updates"]["other"]["overall"]
    assert overall["changed_bits"] == differ > 0.9 * overall["n"]  # bf16 rounding moves most
    assert overall["update_norm"] == pytest.approx(math.sqrt(sq), rel=1e-9)


def test_cli_as_dtype_recorded_and_checked(fp32_and_bf16, tmp_path):
    from evalkit.cli import app

    base_dir, other, _, _ = fp32_and_bf16
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["diff", str(base_dir), str(other), "--as-dtype", "bfloat16",
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "as bfloat16" in res.output
    summary = json.loads((out / "diff.json").read_text())
    assert summary["options"]["as_dtype"] == "bfloat16"
    assert summary["updates"]["other"]["overall"]["changed_bits"] == 6
    res = CliRunner().invoke(app, ["diff", str(base_dir), str(other), "--as-dtype", "fp8"])
    assert res.exit_code == 2 and "choose bfloat16, float16 or float32" in res.output
