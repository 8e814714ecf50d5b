"""The checkpoint reader on the formats trainers write: each gives the same diff, bit for bit, as
the equivalent safetensors checkpoint; bad or hostile files are refused in one line."""

import json
import os

import pytest
from helpers import formats
from typer.testing import CliRunner

from evalkit.checkpoints import open_checkpoint
from evalkit.diff import DiffOptions, diff_checkpoints
from evalkit.errors import UsageError


@pytest.fixture(scope="module")
def trained(tiny_model, tmp_path_factory):
    return formats.planted_copy(tiny_model, tmp_path_factory.mktemp("fmt") / "trained")


@pytest.fixture(scope="module")
def reference(tiny_model, trained):
    return formats.diff_figures(diff_checkpoints([str(tiny_model), str(trained)], DiffOptions(chunk_elems=1000)))


def _same(tiny_model, other, reference, **opts):
    got = diff_checkpoints([str(tiny_model), str(other)], DiffOptions(chunk_elems=1000, **opts))
    assert formats.diff_figures(got) == reference
    return got


def test_dcp_save_diffs_as_its_safetensors(tiny_model, trained, reference, tmp_path):
    folder = formats.save_dcp(trained, tmp_path / "dcp")
    got = _same(tiny_model, folder, reference)
    assert got.summary["inputs"]["other"]["format"] == "dcp"
    cp = open_checkpoint(str(folder))
    assert all(e.source is None for e in cp.tensors.values())  # byte ranges of the .distcp, no copy


def test_accelerate_fsdp_dcp_folder_is_found_and_unprefixed(tiny_model, trained, reference, tmp_path):
    out = formats.save_dcp(trained, tmp_path / "acc", accelerate=True)
    _same(tiny_model, out, reference)  # the output folder: pytorch_model_fsdp_0/ inside, "model." stripped


def test_dcp_metadata_is_not_unpickled_freely(tiny_model, trained, tmp_path):
    folder = formats.save_dcp(trained, tmp_path / "dcp")
    marker = tmp_path / "ran"
    evil = f"cos\nsystem\n(S'touch {marker}'\ntR.".encode()
    (folder / ".metadata").write_bytes(evil)
    with pytest.raises(UsageError, match="refused") as exc:
        open_checkpoint(str(folder))
    assert "\n" not in str(exc.value) and not marker.exists()


@pytest.fixture(scope="module")
def verl_folder(trained, tmp_path_factory):
    return formats.save_verl_fsdp(trained, tmp_path_factory.mktemp("verl") / "actor", world=2)


def test_verl_fsdp_two_rank_shards_diff_as_their_safetensors(tiny_model, verl_folder, reference):
    got = _same(tiny_model, verl_folder, reference)
    assert got.summary["inputs"]["other"]["format"] == "verl"
    cp = open_checkpoint(str(verl_folder))
    assert cp.config_dir.endswith("huggingface")
    parted = [e for e in cp.tensors.values() if len(e.parts) == 2]
    assert parted and all(len(e.files) == 2 for e in parted)  # rank 0's rows, then rank 1's, from disk


def test_verl_global_step_folder_opens_its_actor(tiny_model, verl_folder, reference):
    step = verl_folder.parent
    assert open_checkpoint(str(step)).format == "verl"


def test_verl_world_size_is_checked(verl_folder, tmp_path):
    import shutil

    bad = tmp_path / "actor"
    shutil.copytree(verl_folder, bad)
    (bad / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": 4}))
    with pytest.raises(UsageError, match="world_size 4, the shard files are for 2"):
        open_checkpoint(str(bad))
    (bad / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": 2}))
    (bad / "model_world_size_2_rank_1.pt").unlink()
    with pytest.raises(UsageError, match="rank 1 are missing"):
        open_checkpoint(str(bad))


def test_vllm_named_pth_unfuses_to_hf_names(tiny_model, trained, reference, tmp_path):
    folder = formats.save_vllm_pth(trained, tmp_path / "es")  # no config.json: the base's un-fuses it
    got = _same(tiny_model, folder / "pytorch_model.pth", reference)
    assert any("vLLM" in n for n in got.summary["inputs"]["other"]["notes"])
    cp = open_checkpoint(str(folder / "pytorch_model.pth"), like=open_checkpoint(str(tiny_model)))
    assert not any("qkv_proj" in n or "gate_up_proj" in n for n in cp.tensors)
    assert all(e.source is None for e in cp.tensors.values())


def test_vllm_names_need_head_counts(trained, tmp_path):
    folder = formats.save_vllm_pth(trained, tmp_path / "es")
    with pytest.raises(UsageError, match="un-fusing it needs config.json's"):
        open_checkpoint(str(folder))
    cfg = json.loads((trained / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "num_key_value_heads": 4}))
    with pytest.raises(UsageError, match="rows, but the config's head counts"):
        open_checkpoint(str(folder))


def test_sharded_bin_with_index(tiny_model, trained, reference, tmp_path):
    """transformers' pre-safetensors layout (`modeling_utils.py`, WEIGHTS_INDEX_NAME):
    pytorch_model-0000i-of-00002.bin shards named by pytorch_model.bin.index.json."""
    import torch

    sd = formats.load_sd(trained)
    names = sorted(sd)
    folder = tmp_path / "bin"
    formats.copy_config(trained, folder)
    weight_map = {}
    for i, part in enumerate((names[::2], names[1::2])):
        shard = f"pytorch_model-{i + 1:05d}-of-00002.bin"
        torch.save({n: sd[n] for n in part}, folder / shard)
        weight_map.update(dict.fromkeys(part, shard))
    (folder / "pytorch_model.bin.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    _same(tiny_model, folder, reference)


def test_legacy_torch_save_format(tiny_model, trained, reference, tmp_path):
    import torch

    torch.save(formats.load_sd(trained), tmp_path / "old.bin", _use_new_zipfile_serialization=False)
    _same(tiny_model, tmp_path / "old.bin", reference)


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("zipped", [True, False])
def test_malicious_pickle_is_refused_and_runs_nothing(tiny_model, tmp_path, zipped):
    import torch

    from evalkit.cli import app

    marker = tmp_path / "ran"
    sd = formats.load_sd(tiny_model)
    sd["payload"] = _Evil(marker)
    torch.save(sd, tmp_path / "pytorch_model.bin", _use_new_zipfile_serialization=zipped)
    assert not marker.exists()
    res = CliRunner().invoke(app, ["diff", str(tiny_model), str(tmp_path / "pytorch_model.bin")])
    assert res.exit_code == 2, res.output
    assert "refused" in res.output and "weights_only" in res.output and res.output.count("\n") == 1
    assert "system" in res.output
    assert not marker.exists()


def test_lying_header_dtype_is_refused(tiny_model, tmp_path):
    """A float32 layernorm weight whose header says I32 (same bytes, same shape)."""
    from evalkit.cli import app

    folder = tmp_path / "liar"
    formats.copy_config(tiny_model, folder)
    data = bytearray((tiny_model / "model.safetensors").read_bytes())
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    assert header["model.norm.weight"]["dtype"] == "F32"
    header["model.norm.weight"]["dtype"] = "I32"
    text = json.dumps(header, separators=(",", ":")).encode()
    assert len(text) <= n
    (folder / "model.safetensors").write_bytes(bytes(data[:8]) + text.ljust(n) + bytes(data[8 + n:]))
    res = CliRunner().invoke(app, ["diff", str(tiny_model), str(folder)])
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    assert "model.norm.weight" in res.output and "I32" in res.output and "1.07e+09" in res.output


def test_shape_against_config_is_checked(tiny_model, tmp_path):
    folder = tmp_path / "cfg"
    formats.copy_config(tiny_model, folder)
    (folder / "model.safetensors").write_bytes((tiny_model / "model.safetensors").read_bytes())
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "intermediate_size": 48}))
    with pytest.raises(UsageError, match="config.json's sizes make it"):
        open_checkpoint(str(folder))


def test_deepspeed_without_deepspeed_is_one_line(tiny_model, tmp_path):
    from evalkit.cli import app

    try:
        import deepspeed  # noqa: F401
        pytest.skip("deepspeed is installed: its own reader runs")
    except ImportError:
        pass
    folder = tmp_path / "zero"
    (folder / "global_step10").mkdir(parents=True)
    (folder / "latest").write_text("global_step10")
    (folder / "global_step10" / "zero_pp_rank_0_mp_rank_00_optim_states.pt").write_bytes(b"")
    res = CliRunner().invoke(app, ["diff", str(tiny_model), str(folder)])
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    assert "DeepSpeed ZeRO" in res.output and "pip install deepspeed" in res.output


def test_forced_format_that_does_not_fit(tiny_model, trained):
    from evalkit.cli import app

    res = CliRunner().invoke(app, ["diff", str(tiny_model), str(trained), "--format", "dcp"])
    assert res.exit_code == 2 and "not a DCP folder" in res.output and res.output.count("\n") == 1
    res = CliRunner().invoke(app, ["diff", str(tiny_model), str(trained), "--format", "safetensors"])
    assert res.exit_code == 0, res.output


def test_reader_returns_torch_load_bits(trained, tmp_path):
    """Every tensor of a .pth read through the reader equals torch.load's, including a view
    saved with an offset and strides (a transposed slice) and a shared storage."""
    import torch

    from evalkit.checkpoints import read_bits
    from evalkit.checkpoints.tensors import as_torch

    base = torch.arange(60, dtype=torch.float32).reshape(6, 10)
    sd = {"a": base[1:, 2:].t(), "b": base, "c": torch.ones(3, dtype=torch.bfloat16), "d": base[2]}
    torch.save(sd, tmp_path / "x.pt")
    cp = open_checkpoint(str(tmp_path / "x.pt"))
    for name, t in sd.items():
        e = cp.tensors[name]
        assert torch.equal(as_torch(read_bits(e), e.dtype, e.shape), t), name


def test_verl_shards_read_without_importing_torch_distributed_tensor(verl_folder):
    """In a fresh process DTensors are read with plain stand-ins (no torch.distributed.tensor
    import, ~0.9 s); the entries are those torch's own classes give."""
    import subprocess
    import sys

    code = ("import json, sys; from evalkit.checkpoints import open_checkpoint; "
            f"cp = open_checkpoint({str(verl_folder)!r}); "
            "print(json.dumps({'imported': 'torch.distributed.tensor' in sys.modules, "
            "'entries': {n: [e.dtype, list(e.shape), [list(s) for s in e.spans]] for n, e in cp.tensors.items()}}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    fresh = json.loads(out.stdout.strip().splitlines()[-1])
    assert fresh["imported"] is False
    import torch.distributed.tensor  # noqa: F401  (this process: torch's own DTensor classes)

    here = {n: [e.dtype, list(e.shape), [list(s) for s in e.spans]] for n, e in open_checkpoint(str(verl_folder)).tensors.items()}
    assert fresh["entries"] == here
