"""One checkpoint reader: tensors by name, with dtype and shape, streamed, for every format.

    from evalkit.checkpoints import open_checkpoint, state_dict
    cp = open_checkpoint("runs/verl/global_step_50/actor")   # format detected from the folder
    cp.tensors["model.norm.weight"]    # TensorEntry: dtype, shape, where its bytes are
    sd = state_dict(cp, dtype="float32")   # torch tensors, to load into a model

Formats (`FORMATS`; detected from the folder, or forced with `fmt` / `--format`):

    safetensors   Hugging Face folders (one file, several, an index's shards) or one file
    bin           torch.save state dicts: pytorch_model.bin (and its index), *.pth, *.pt
    dcp           PyTorch Distributed Checkpoint folders (.metadata + *.distcp)
    verl          verl FSDP rank shards model_world_size_{W}_rank_{r}.pt + fsdp_config.json
    deepspeed     DeepSpeed ZeRO folders, through deepspeed where installed
    lora          a PEFT LoRA adapter folder, read as BASE + scaling * B @ A (`BASE+ADAPTER`)

vLLM-named state dicts (fused `qkv_proj`, `gate_up_proj`) are un-fused by any reader
(`evalkit.checkpoints.vllm`), and wrapper prefixes (`module.`, `_fsdp_wrapped_module.`,
`_orig_mod.`, accelerate's `model.` around a whole state dict) are removed, so names are
Hugging Face names. Every checkpoint is validated when opened (`evalkit.checkpoints.validate`):
byte lengths, dtypes against the tensor's role, shapes against config.json. Paths only: a model
name (`smollm2-135m`, a hub name) is resolved to its folder by the caller
(`evalkit.models.resolve_model`), which imports this reader, never the other way.
"""

from __future__ import annotations

import re
from pathlib import Path

from evalkit.checkpoints.tensors import (
    CASTS,
    DTYPES,
    FLOATS,
    Checkpoint,
    ChunkReader,
    TensorCache,
    TensorEntry,
    as_torch,
    bad,
    cast_bits,
    layer_index,
    module_kind,
    read_bits,
    to_values,
    value_dtype,
)
from evalkit.errors import UsageError

__all__ = ["FORMATS", "Checkpoint", "TensorEntry", "ChunkReader", "TensorCache", "DTYPES", "FLOATS",
           "CASTS", "open_checkpoint", "detect_format", "split_adapter", "config_dir", "state_dict",
           "checkpoint_files", "weights_folder", "read_bits", "to_values", "cast_bits", "value_dtype", "module_kind",
           "layer_index"]

FORMATS = ("auto", "safetensors", "bin", "dcp", "verl", "deepspeed", "lora")
NESTED = ("actor", "pytorch_model_fsdp_0")  # verl's global_step_N/actor, accelerate's FSDP folder
WRAPPERS = re.compile(r"(^|\.)(_fsdp_wrapped_module|_checkpoint_wrapped_module|_orig_mod)\.")


def detect_format(path: Path) -> str:
    """The format of a checkpoint file or folder, from its files; one line when none fits."""
    from evalkit.checkpoints import dcp, deepspeed, lora, pickles, verl

    if path.is_file():
        if path.suffix == ".safetensors":
            return "safetensors"
        if path.suffix in pickles.PICKLE_SUFFIXES:
            return "bin"
        raise bad(path, "not a checkpoint file (.safetensors, or a .bin/.pth/.pt state dict)")
    checks = (("lora", lora.is_adapter), ("dcp", dcp.is_dcp), ("verl", verl.is_verl),
              ("safetensors", lambda p: any(p.glob("*.safetensors")) or (p / "model.safetensors.index.json").is_file()),
              ("deepspeed", deepspeed.is_deepspeed), ("bin", lambda p: bool(pickles.pickle_files(p))))
    for name, test in checks:
        if test(path):
            return name
    raise bad(path, "no weights in the folder: no *.safetensors, no .bin/.pth/.pt state dict, no DCP "
                    ".metadata, no verl model_world_size_*_rank_*.pt, no DeepSpeed ZeRO step, no "
                    "adapter_config.json (or force one with --format)")


def split_adapter(arg: str) -> tuple[str, str] | None:
    """`BASE+ADAPTER` -> (BASE, ADAPTER) when ADAPTER is a PEFT adapter folder, else None."""
    if "+" not in arg or Path(arg).expanduser().exists():
        return None
    base, _, adapter = arg.rpartition("+")
    folder = Path(adapter).expanduser()
    if base and (folder / "adapter_config.json").is_file():
        return base, adapter
    return None


def _local(arg: str) -> Path:
    """A local path (the folder holding the weights)."""
    path = Path(arg).expanduser()
    if not path.exists():
        raise UsageError(f"{arg}: no such checkpoint folder or file")
    return weights_folder(path)


def weights_folder(path: Path) -> Path:
    """verl's global_step_N/ (weights in actor/) and accelerate's output folder (in
    pytorch_model_fsdp_0/) are opened at the folder holding the weights."""
    if path.is_dir() and not any(path.glob("*.safetensors")) and not (path / "adapter_config.json").is_file():
        inner = [path / n for n in NESTED if (path / n).is_dir()]
        if len(inner) == 1:
            return inner[0]
    return path


def config_dir(path: Path) -> Path | None:
    """Where a checkpoint's config.json is: its folder, verl's huggingface/, or the parent
    (accelerate's FSDP folder, a DeepSpeed step, a single file's folder)."""
    folder = path if path.is_dir() else path.parent
    for candidate in (folder, folder / "huggingface", folder.parent, folder.parent / "huggingface"):
        if (candidate / "config.json").is_file():
            return candidate
    return None


def _config(folder: Path | None) -> dict | None:
    """config.json, its fields typed (`validate.MODEL_CONFIG`); None where there is none."""
    from evalkit.checkpoints.validate import MODEL_CONFIG
    from evalkit.schema import check, load_json

    if folder is None:
        return None
    path = folder / "config.json"
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise bad(path, f"cannot read ({exc.strerror or exc})") from None
    config = load_json(raw, path, "config.json")
    return check(MODEL_CONFIG, config, path, "config.json") if isinstance(config, dict) else None


def _read(path: Path, fmt: str) -> tuple[dict[str, TensorEntry], list[str]]:
    """Tensors by saved name, and notes, of one format."""
    from evalkit.checkpoints import dcp, deepspeed, pickles, safetensors, verl

    if fmt == "safetensors":
        tensors = safetensors.read_header(path) if path.is_file() else safetensors.read_folder(path)
        if not tensors and path.is_dir() and not any(path.glob("*.safetensors")):
            raise bad(path, "no *.safetensors weights in the folder")
        return tensors, []
    if fmt == "bin":
        files = [path] if path.is_file() else pickles.pickle_files(path)
        if not files:
            raise bad(path, "no .bin/.pth/.pt state dict in the folder")
        return pickles.read_pickles(files), []
    if fmt == "dcp":
        if not dcp.is_dcp(path):
            raise bad(path, "not a DCP folder (no .metadata with *.distcp files)")
        return dcp.read_dcp(path), []
    if fmt == "verl":
        if not verl.is_verl(path):
            raise bad(path, "not a verl FSDP folder (no model_world_size_*_rank_*.pt)")
        return verl.read_verl(path), ["verl FSDP shards: tensors in the dtype they were saved in "
                                      "(verl's own merger casts them to bf16)"]
    if fmt == "deepspeed":
        return deepspeed.read_deepspeed(path), [deepspeed.NOTE]
    raise AssertionError(fmt)


def clean_names(tensors: dict[str, TensorEntry], where) -> dict[str, TensorEntry]:
    """Hugging Face names: wrapper prefixes removed (see the module docstring)."""
    renamed = {}
    names = [WRAPPERS.sub(r"\1", n) for n in tensors]
    names = [n.removeprefix("module.") for n in names]
    if names and all(n.startswith("model.") for n in names) and \
            any(n.startswith(("model.model.", "model.lm_head.")) for n in names):
        names = [n.removeprefix("model.") for n in names]  # accelerate's {"model": state_dict}
    for new, (old, entry) in zip(names, tensors.items(), strict=True):
        if new in renamed:
            raise bad(where, f"tensors {old!r} and another both name {new!r}")
        renamed[new] = entry if new == old else _renamed(entry, new)
    return renamed


def _renamed(entry: TensorEntry, name: str) -> TensorEntry:
    return TensorEntry(name, entry.file, entry.dtype, entry.shape, entry.start, entry.end, entry.parts, entry.source)


def open_checkpoint(arg: str, fmt: str = "auto", like: Checkpoint | None = None) -> Checkpoint:
    """Index every tensor of a checkpoint by Hugging Face name (see the module docstring).

    `like`: the checkpoint this one is compared with (its config un-fuses vLLM names when this
    one has no config.json; it is the base of an adapter given alone)."""
    from evalkit.checkpoints import lora, validate, vllm

    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt}: choose {', '.join(FORMATS)}")
    if (pair := split_adapter(arg)) is not None:
        return _with_adapter(arg, open_checkpoint(pair[0]), Path(pair[1]).expanduser())
    path = _local(arg)
    fmt = detect_format(path) if fmt == "auto" else fmt
    if fmt == "lora":
        if not lora.is_adapter(path):
            raise bad(path, "not a PEFT adapter folder (no adapter_config.json)")
        base = like if like is not None else _adapter_base(path)
        return _with_adapter(arg, base, path)
    where = config_dir(path)
    config = _config(where)
    tensors, notes = _read(path, fmt)
    if fmt != "safetensors":
        tensors = clean_names(tensors, path)
    if vllm.has_fused(tensors):
        tensors = vllm.unfuse(tensors, config or (like.config if like else None), path)
        notes.append("vLLM parameter names: qkv_proj and gate_up_proj split by the config's head counts "
                     "and intermediate size")
    validate.check_tensors(tensors, config, path)
    return Checkpoint(arg, str(path), tensors, config, fmt, tuple(notes),
                      config_dir=str(where) if where else None)


def _adapter_base(path: Path) -> Checkpoint:
    from evalkit.checkpoints.lora import _config

    name = _config(path).get("base_model_name_or_path")
    if not name or not Path(name).expanduser().exists():
        raise bad(path, "a LoRA adapter alone: give its base first (BASE ADAPTER to diff, BASE+ADAPTER to "
                        f"load){'; its base_model_name_or_path ' + repr(name) + ' is not a local folder' if name else ''}")
    return open_checkpoint(name)


def _with_adapter(label: str, base: Checkpoint, folder: Path) -> Checkpoint:
    from evalkit.checkpoints.lora import apply_adapter, read_adapter

    adapter = read_adapter(folder)
    tensors = apply_adapter(base.tensors, adapter, folder)
    note = (f"LoRA adapter {folder}: {len(adapter.modules)} modules merged one at a time as peft's "
            "merge_and_unload would")
    return Checkpoint(label, str(folder), tensors, base.config, "lora", (*base.notes, note), adapter,
                      base.config_dir)


def checkpoint_files(cp: Checkpoint) -> list[str]:
    """Every file a checkpoint's tensors are read from (for its identity hash)."""
    files = {f for e in cp.tensors.values() for f in e.files}
    if cp.lora is not None:
        files |= {f for m in cp.lora.modules for e in (m.a, m.b) for f in e.files}
    return sorted(f for f in files if Path(f).is_file())


def state_dict(cp: Checkpoint, dtype: str | None = None) -> dict:
    """{name: torch tensor} of every tensor (floats cast to `dtype`, e.g. "bfloat16"), one
    tensor read at a time: what a model built from config.json loads."""
    import torch

    out = {}
    for name, entry in cp.tensors.items():
        tensor = as_torch(read_bits(entry), entry.dtype, entry.shape)
        if dtype and entry.dtype in FLOATS:
            tensor = tensor.to(getattr(torch, dtype))
        out[name] = tensor
    return out
