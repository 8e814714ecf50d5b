"""Checkpoints in the formats trainers write, made from a tiny model's safetensors folder.

    trained = planted_copy(tiny_model, tmp / "trained")   # the equivalent safetensors checkpoint
    save_dcp(trained, tmp / "dcp")                          # torch.distributed.checkpoint.save
    save_verl_fsdp(trained, tmp / "verl", world=2)          # two real FSDP2 ranks (gloo, CPU)
    save_vllm_pth(trained, tmp / "es")                      # pytorch_model.pth, vLLM's fused names
    save_lora_by_hand(tiny_model, tmp / "adapter")          # PEFT's file names and keys

Each writer follows its source's layout (cited per function), so the reader is tested against
what trainers write, not against itself.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

LORA_TARGETS = ("q_proj", "v_proj")
DIFF_FIGURES = ("updates", "tensors_compared", "missing", "extra", "mismatched", "skipped", "overlap")


def diff_figures(result) -> str:
    """Everything a diff measured (not where its inputs were), as exact JSON text: two
    checkpoints read alike give the same string."""
    from evalkit.jsonio import plain_json

    summary = {k: result.summary.get(k) for k in DIFF_FIGURES}
    return json.dumps(plain_json({"summary": summary, "rows": list(result.tensors)}), sort_keys=True)


def load_sd(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(Path(folder) / "model.safetensors"))


def copy_config(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for f in Path(src).iterdir():
        if f.suffix in (".json", ".jinja", ".txt", ".model") and f.name != "model.safetensors.index.json":
            shutil.copy(f, dst / f.name)


def planted_copy(src: Path, dst: Path, seed: int = 1, dtype=None) -> Path:
    """The tiny model with a planted update: a sparse change in every 2-D tensor, a dense one in
    layer 0's MLP and the final norm; saved as plain safetensors (the reference)."""
    import torch
    from safetensors.torch import save_file

    sd = load_sd(src)
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, t in sorted(sd.items()):
        t = t.clone()
        flat = t.view(-1)
        pick = torch.randint(0, flat.numel(), (max(1, flat.numel() // 50),), generator=gen)
        flat[pick] += 0.01 * torch.randn(pick.numel(), generator=gen)
        if "layers.0.mlp" in name or name == "model.norm.weight":
            t += 1e-3 * torch.randn(t.shape, generator=gen)
        out[name] = t.to(dtype) if dtype is not None else t
    copy_config(src, dst)
    save_file(out, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


def save_dcp(src: Path, dst: Path, accelerate: bool = False) -> Path:
    """`torch.distributed.checkpoint.save` of the state dict, no process group (pytorch
    `torch/distributed/checkpoint/state_dict_saver.py`); `accelerate`: as accelerate's FSDP
    SHARDED_STATE_DICT saves it, `{"model": state_dict}` into `pytorch_model_fsdp_0/` beside
    the config (accelerate `utils/fsdp_utils.py` `save_fsdp_model`)."""
    import torch.distributed.checkpoint as dcp

    sd = load_sd(src)
    if accelerate:
        copy_config(src, dst)
        dcp.save({"model": sd}, checkpoint_id=str(dst / "pytorch_model_fsdp_0"))
    else:
        dcp.save(sd, checkpoint_id=str(dst))
        copy_config(src, dst)
    return dst


def save_verl_fsdp(src: Path, dst: Path, world: int = 2) -> Path:
    """Real FSDP2 shards from `world` gloo ranks on the CPU, saved as verl's
    `FSDPCheckpointManager.save_checkpoint` saves them (volcengine/verl
    `verl/utils/checkpoint/fsdp_checkpoint_manager.py`): `model_world_size_{W}_rank_{r}.pt` =
    `torch.save(model.state_dict())` per rank, `fsdp_config.json` {FSDP_version, world_size}
    and `huggingface/` (config + tokenizer) from rank 0."""
    dst.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, __file__, str(src), str(dst), str(world)], check=True,
                   capture_output=True, timeout=300)
    return dst


def _fsdp_rank(rank: int, world: int, src: str, dst: str, port: int) -> None:
    import os

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from transformers import AutoConfig, AutoModelForCausalLM

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("fsdp",))
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(src))
    result = model.load_state_dict(load_sd(Path(src)), strict=False)
    assert not result.unexpected_keys and set(result.missing_keys) <= {"lm_head.weight"}, result
    if result.missing_keys:  # tied to the embedding (save_pretrained drops it)
        model.tie_weights()
    for layer in model.model.layers:  # verl's apply_fsdp2: each decoder layer, then the root
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    torch.save(model.state_dict(), f"{dst}/model_world_size_{world}_rank_{rank}.pt")
    if rank == 0:
        with open(f"{dst}/fsdp_config.json", "w") as fh:
            json.dump({"FSDP_version": 2, "world_size": world}, fh, indent=4)
        copy_config(Path(src), Path(dst) / "huggingface")
    dist.barrier()
    dist.destroy_process_group()


def fuse_vllm(sd: dict, config: dict) -> dict:
    """HF names -> vLLM's (`vllm/model_executor/models/llama.py` `stacked_params_mapping`:
    q, k, v into qkv_proj and gate, up into gate_up_proj, concatenated along dim 0)."""
    import torch

    out = {}
    for name, t in sd.items():
        if ".q_proj." in name:
            k, v = sd[name.replace("q_proj", "k_proj")], sd[name.replace("q_proj", "v_proj")]
            out[name.replace("q_proj", "qkv_proj")] = torch.cat([t, k, v])
        elif ".gate_proj." in name:
            out[name.replace("gate_proj", "gate_up_proj")] = torch.cat([t, sd[name.replace("gate_proj", "up_proj")]])
        elif not any(p in name for p in (".k_proj.", ".v_proj.", ".up_proj.")):
            out[name] = t
    return out


def save_vllm_pth(src: Path, dst: Path, with_config: bool = False) -> Path:
    """`torch.save(state_dict)` keyed by vLLM's parameter names into pytorch_model.pth, as the
    ES paper's accelerated code saves its checkpoints."""
    import torch

    dst.mkdir(parents=True, exist_ok=True)
    config = json.loads((Path(src) / "config.json").read_text())
    torch.save(fuse_vllm(load_sd(src), config), dst / "pytorch_model.pth")
    if with_config:
        copy_config(src, dst)
    return dst


def adapter_config(base: Path, r: int, alpha: float, **extra) -> dict:
    """adapter_config.json with the fields peft's LoraConfig writes (peft `tuners/lora/config.py`)."""
    return {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": str(base),
            "r": r, "lora_alpha": alpha, "lora_dropout": 0.0, "target_modules": list(LORA_TARGETS),
            "bias": "none", "fan_in_fan_out": False, "use_rslora": False, "use_dora": False,
            "init_lora_weights": True, "modules_to_save": None, "rank_pattern": {}, "alpha_pattern": {},
            "inference_mode": True, "revision": None, **extra}


def save_lora_by_hand(base: Path, dst: Path, r: int = 4, alpha: float = 8.0, seed: int = 2, **extra):
    """A PEFT LoRA adapter written by hand: `adapter_model.safetensors` with keys
    `base_model.model.<module>.lora_A.weight` / `lora_B.weight` (peft `utils/save_and_load.py`,
    adapter name removed) and `adapter_config.json`. Returns (folder, {module: (A, B)})."""
    import torch
    from safetensors.torch import save_file

    sd = load_sd(base)
    gen = torch.Generator().manual_seed(seed)
    tensors, factors = {}, {}
    for name, w in sorted(sd.items()):
        module = name.removesuffix(".weight")
        if name.endswith(".weight") and module.rsplit(".", 1)[-1] in LORA_TARGETS:
            a = 0.1 * torch.randn(r, w.shape[1], generator=gen)
            b = 0.1 * torch.randn(w.shape[0], r, generator=gen)
            tensors[f"base_model.model.{module}.lora_A.weight"] = a
            tensors[f"base_model.model.{module}.lora_B.weight"] = b
            factors[module] = (a, b)
    dst.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(dst / "adapter_model.safetensors"), metadata={"format": "pt"})
    (dst / "adapter_config.json").write_text(json.dumps(adapter_config(base, r, alpha, **extra), indent=2))
    return dst, factors


def merged_by_hand(base: Path, factors: dict, scaling: float, dst: Path) -> Path:
    """BASE with W += (B @ A) * scaling per module (peft's fp32 merge), as plain safetensors."""
    from safetensors.torch import save_file

    sd = load_sd(base)
    for module, (a, b) in factors.items():
        sd[f"{module}.weight"] += (b @ a) * scaling
    copy_config(base, dst)
    save_file(sd, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


if __name__ == "__main__":
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    mp.spawn(_fsdp_rank, args=(int(sys.argv[3]), sys.argv[1], sys.argv[2], free), nprocs=int(sys.argv[3]))
