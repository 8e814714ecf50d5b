"""End to end: the built-in model against a copy with a few planted changes, through the CLI."""

import json
import os
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

PLANT = {  # tensor -> (flat positions, added value)
    "model.layers.3.self_attn.q_proj.weight": ([0, 1000, 5000], 0.5),
    "model.layers.17.mlp.down_proj.weight": (list(range(2000, 2010)), -0.25),
    "model.norm.weight": ([7], 1e-6),  # below --atol: changed in bits only
}


@pytest.mark.slow
def test_builtin_model_against_perturbed_copy(tmp_path):
    from evalkit.cli import app
    from evalkit.diff import read_header
    from evalkit.models import resolve_model

    src = resolve_model("smollm2-135m").path
    copy = tmp_path / "perturbed"
    copy.mkdir()
    shutil.copy(os.path.join(src, "config.json"), copy)
    shutil.copyfile(os.path.join(src, "model.safetensors"), copy / "model.safetensors")
    entries = read_header(copy / "model.safetensors")
    deltas = {}
    fd = os.open(copy / "model.safetensors", os.O_RDWR)
    try:
        for name, (positions, add) in PLANT.items():
            entry = entries[name]
            assert entry.dtype == "F32"
            for pos in positions:
                old = np.frombuffer(os.pread(fd, 4, entry.start + 4 * pos), "<f4")[0]
                new = np.float32(old + np.float32(add))
                os.pwrite(fd, new.tobytes(), entry.start + 4 * pos)
                deltas.setdefault(name, []).append(np.float32(new - old))
    finally:
        os.close(fd)

    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["diff", "smollm2-135m", str(copy), "--out", str(out)])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "diff.json").read_text())
    update = summary["updates"]["other"]
    everything = np.concatenate([np.array(d, np.float64) for d in deltas.values()])
    assert summary["tensors_compared"] == len(entries) == 272
    assert update["overall"]["changed_bits"] == 14
    assert update["overall"]["changed_atol"] == 13
    assert update["overall"]["update_norm"] == pytest.approx(np.sqrt((everything**2).sum()), rel=1e-6)
    assert update["overall"]["max_abs_update"] == pytest.approx(np.abs(everything).max())
    assert update["kinds"]["q_proj"]["changed_bits"] == 3
    assert update["kinds"]["mlp_down"]["changed_bits"] == 10
    assert update["kinds"]["norm"]["changed_bits"] == 1 and update["kinds"]["norm"]["changed_atol"] == 0
    assert update["layers"]["3"]["changed_bits"] == 3 and update["layers"]["17"]["changed_bits"] == 10
    assert sum(v["changed_bits"] for v in update["layers"].values()) == 13
    assert any("tied" in t for t in summary["tied"])
    assert "layers.17" in res.output
