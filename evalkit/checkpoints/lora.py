"""PEFT LoRA adapters as updates: each target module's `W + scaling * B @ A`, made when read.

    evalkit diff smollm2-135m runs/lora/adapter --out runs/diff-lora
    evalkit passk smollm2-135m+runs/lora/adapter --task arith

Writer: huggingface/peft (`utils/save_and_load.py` `get_peft_model_state_dict`: the file
`adapter_model.safetensors` (or `adapter_model.bin`) beside `adapter_config.json`, keys
`base_model.model.<module>.lora_A.weight` / `lora_B.weight` (`lora_embedding_A` /
`lora_embedding_B` for embeddings, `lora_B.bias` with `lora_bias`), the adapter name removed;
`modules_to_save` copies under `base_model.model.<module>.weight`). The update is peft's own
arithmetic (`tuners/lora/layer.py`): `get_delta_weight` = `transpose(B @ A, fan_in_fan_out) *
scaling` (in float32 when the adapter is fp16/bf16, then cast back, as peft does on CPU),
`scaling = lora_alpha / r` (`use_rslora`: `lora_alpha / sqrt(r)`), r and alpha per module from
`rank_pattern` / `alpha_pattern` (peft's `get_pattern_key`), and `merge()` adds it in place in
the base weight's dtype (embeddings: cast to it first). So the merged tensors are bitwise those of
peft's `merge_and_unload()`, one module at a time: no merged model is made. The base is the
checkpoint given before the adapter; its other tensors are read as they are.

Limits: DoRA (`use_dora`, `lora_magnitude_vector`) is refused with one line (its update
depends on the base weight's column norms); so are non-LoRA PEFT types and convolution LoRA.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evalkit.checkpoints.tensors import TensorEntry, as_torch, bad, read_bits, torch_bits
from evalkit.schema import Bool, Float, Int, MapOf, Obj, Opt, Regex, Str, check, read_json

__all__ = ["ADAPTER_CONFIG", "Module", "Adapter", "is_adapter", "read_adapter", "apply_adapter"]

ADAPTER_CONFIG = "adapter_config.json"
PREFIX = "base_model.model."
_KEY = re.compile(r"^(?P<module>.+)\.(?P<part>lora_A\.weight|lora_B\.weight|lora_B\.bias|"
                  r"lora_embedding_A|lora_embedding_B|lora_magnitude_vector(\.weight)?)$")


@dataclass(frozen=True)
class Module:
    """One target module: base tensor `target` (and `bias`) plus `scaling * B @ A`."""

    name: str  # the module's name in the base model
    a: TensorEntry
    b: TensorEntry
    r: int
    alpha: float
    scaling: float
    embedding: bool = False
    fan_in_fan_out: bool = False
    bias: TensorEntry | None = None  # lora_B.bias (lora_bias=True)

    @property
    def target(self) -> str:
        return f"{self.name}.weight"


@dataclass(frozen=True)
class Adapter:
    path: str
    config: dict
    modules: tuple[Module, ...]
    saved: dict = field(default_factory=dict)  # modules_to_save: base tensor name -> entry


def is_adapter(folder: Path) -> bool:
    return (folder / ADAPTER_CONFIG).is_file()


RANK = Int(min=1, max=1 << 20)
ALPHA = Float(min=0)
# peft `tuners/lora/config.py` `LoraConfig` (written by `save_pretrained` as adapter_config.json):
# the fields read here, typed; `rank_pattern` / `alpha_pattern` keys are regular expressions
ADAPTER = Obj({}, optional={
    "peft_type": Opt(Str()), "r": RANK, "lora_alpha": ALPHA, "use_rslora": Opt(Bool()), "use_dora": Opt(Bool()),
    "fan_in_fan_out": Opt(Bool()), "rank_pattern": Opt(MapOf(RANK, keys=Regex())),
    "alpha_pattern": Opt(MapOf(ALPHA, keys=Regex())), "base_model_name_or_path": Opt(Str())})


def _config(folder: Path) -> dict:
    path = folder / ADAPTER_CONFIG
    config = check(ADAPTER, read_json(path, ADAPTER_CONFIG), path, ADAPTER_CONFIG)
    if config.get("peft_type") not in (None, "LORA"):
        raise bad(path, f"a {config.get('peft_type')} adapter: only LoRA adapters are read as updates")
    if config.get("use_dora"):
        raise bad(path, "a DoRA adapter (use_dora): not read; its update rescales the base weight by "
                        "column norms (merge it with peft's merge_and_unload and diff the merged model)")
    return config


def _weights(folder: Path) -> dict[str, TensorEntry]:
    from evalkit.checkpoints.pickles import read_pickles
    from evalkit.checkpoints.safetensors import read_header

    if (folder / "adapter_model.safetensors").is_file():
        return read_header(folder / "adapter_model.safetensors")
    if (folder / "adapter_model.bin").is_file():
        return read_pickles([folder / "adapter_model.bin"])
    raise bad(folder, "adapter_config.json without adapter_model.safetensors or adapter_model.bin")


def _pattern(patterns: dict, module: str, default):
    """peft's `get_pattern_key`: the first pattern matching the end of the module name."""
    for key in patterns or {}:
        if re.match(rf"(.*\.)?({key})$", module):
            return patterns[key]
    return default


def read_adapter(folder: Path) -> Adapter:
    config, weights = _config(folder), _weights(folder)
    parts: dict[str, dict] = {}
    saved = {}
    for key, entry in weights.items():
        name = key.removeprefix(PREFIX)
        match = _KEY.match(name)
        if match is None:
            saved[name] = entry  # a modules_to_save copy, replacing the base tensor whole
            continue
        if match["part"].startswith("lora_magnitude_vector"):
            raise bad(folder, "the adapter holds lora_magnitude_vector (DoRA): not read")
        parts.setdefault(match["module"], {})[match["part"]] = entry
    modules = tuple(_module(folder, config, name, p) for name, p in sorted(parts.items()))
    if not modules:
        raise bad(folder, "the adapter holds no lora_A / lora_B weights")
    return Adapter(str(folder), config, modules, saved)


def _module(folder: Path, config: dict, name: str, p: dict) -> Module:
    embedding = "lora_embedding_A" in p
    a, b = (p.get("lora_embedding_A"), p.get("lora_embedding_B")) if embedding else \
        (p.get("lora_A.weight"), p.get("lora_B.weight"))
    if a is None or b is None:
        raise bad(folder, f"module {name}: lora_A or lora_B is missing")
    if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[0] != b.shape[1]:
        raise bad(folder, f"module {name}: lora_A {list(a.shape)} and lora_B {list(b.shape)} do not make "
                          "a product (convolution LoRA is not read)")
    r = a.shape[0]
    declared = _pattern(config.get("rank_pattern"), name, config.get("r", 8))
    if r != declared:  # peft builds the layer with the declared r, and refuses factors of another
        raise bad(folder, f"module {name}: lora_A has {r} rows, adapter_config.json's r"
                          f"{' (rank_pattern)' if config.get('rank_pattern') else ''} is {declared}")
    alpha = float(_pattern(config.get("alpha_pattern"), name, config.get("lora_alpha", 8)))
    scaling = alpha / math.sqrt(r) if config.get("use_rslora") else alpha / r
    return Module(name, a, b, r, alpha, scaling, embedding, bool(config.get("fan_in_fan_out")) and not embedding,
                  p.get("lora_B.bias"))


def apply_adapter(base: dict[str, TensorEntry], adapter: Adapter, where) -> dict[str, TensorEntry]:
    """The base's tensors with each target module (and modules_to_save copy) replaced by its
    merged tensor, made when read."""
    tensors = dict(base)
    for name, entry in adapter.saved.items():
        if name not in base:
            raise bad(where, f"the adapter saves {name!r}, which the base does not have")
        tensors[name] = TensorEntry(name, entry.file, entry.dtype, entry.shape, entry.start, entry.end,
                                    entry.parts, entry.source)
    for module in adapter.modules:
        target = base.get(module.target)
        if target is None:
            raise bad(where, f"the adapter targets {module.name}, which the base does not have "
                             f"(no tensor {module.target!r}: another base model?)")
        expect = _delta_shape(module)
        if tuple(target.shape) != expect:
            raise bad(where, f"module {module.name}: scaling * B @ A is {list(expect)}, the base weight "
                             f"{list(target.shape)} (another base model?)")
        tensors[module.target] = _merged(target, module, adapter.path)
        if module.bias is not None:
            bias = base.get(f"{module.name}.bias")
            if bias is None:
                raise bad(where, f"module {module.name}: lora_bias, but the base has no bias")
            tensors[bias.name] = _merged(bias, module, adapter.path, of_bias=True)
    return tensors


def _delta_shape(module: Module) -> tuple[int, int]:
    out, _ = module.b.shape
    _, inp = module.a.shape
    return (inp, out) if module.embedding or module.fan_in_fan_out else (out, inp)


def _merged(target: TensorEntry, module: Module, path: str, of_bias: bool = False) -> TensorEntry:
    def make() -> np.ndarray:
        weight = as_torch(read_bits(target), target.dtype, target.shape)  # a fresh array: added to in place
        if target.source is not None:  # a made tensor may be a view of another's memory
            weight = weight.clone()
        if of_bias:  # peft: base_layer.bias.data += lora_B.bias * scaling
            weight += _torch(module.bias) * module.scaling
        elif module.embedding:  # peft's Embedding.merge casts the delta to the weight's dtype first
            weight += delta_weight(module).to(weight.dtype)
        else:  # peft's Linear.merge: base_layer.weight.data += delta_weight
            weight += delta_weight(module)
        return torch_bits(weight)

    return TensorEntry(target.name, path, target.dtype, target.shape, 0, target.nbytes, source=make)


def _torch(entry: TensorEntry):
    return as_torch(read_bits(entry), entry.dtype, entry.shape)


def delta_weight(module: Module):
    """peft's `get_delta_weight`: transpose(B @ A, fan_in_fan_out) * scaling, on CPU in float32
    for fp16/bf16 adapters and cast back."""
    import torch

    a, b = _torch(module.a), _torch(module.b)
    dtype = a.dtype if module.embedding else b.dtype
    half = dtype in (torch.float16, torch.bfloat16)
    if half:
        a, b = a.float(), b.float()
    product = b @ a
    if module.embedding or module.fan_in_fan_out:
        product = product.T
    out = product * module.scaling
    return out.to(dtype) if half else out


def factors(module: Module) -> tuple[np.ndarray, np.ndarray]:
    """B and A as float64 arrays (for the update's spectrum)."""
    a = _torch(module.a).double().numpy()
    b = _torch(module.b).double().numpy()
    return b, a


def adapter_ranks(adapter: Adapter) -> dict[str, dict]:
    """Per target tensor: the update's rank by construction (min(r, shape)), its numerical rank
    and effective rank (metrics.weights), from `scaling * B @ A` in float64, factored (no m x n
    product is formed)."""
    from metrics import weights as W

    out = {}
    for m in adapter.modules:
        b, a = factors(m)
        s = W.factored_spectrum(b, a, m.scaling)
        shape = _delta_shape(m)
        out[m.target] = {"lora_r": m.r, "lora_alpha": m.alpha, "lora_scaling": m.scaling,
                         "lora_rank_by_construction": min(m.r, *shape),
                         "lora_rank": W.spectrum_rank(s, shape), "lora_effective_rank": W.effective_rank(s)}
    return out


def ranks_summary(adapter: Adapter, ranks: dict[str, dict]) -> dict:
    """diff.json's `lora`: the adapter's settings and its modules' ranks."""
    rows = list(ranks.values())

    def spread(key):
        values = np.array([r[key] for r in rows], dtype=np.float64)
        return {"mean": float(np.nanmean(values)), "min": float(np.nanmin(values)), "max": float(np.nanmax(values))}

    c = adapter.config
    return {"adapter": adapter.path, "r": c.get("r"), "lora_alpha": c.get("lora_alpha"),
            "use_rslora": bool(c.get("use_rslora")), "modules": len(rows),
            "modules_to_save": sorted(adapter.saved),
            "scaling": sorted({r["lora_scaling"] for r in rows}),
            "rank_by_construction": spread("lora_rank_by_construction"),
            "rank": spread("lora_rank"), "effective_rank": spread("lora_effective_rank"),
            "definitions": {"rank_by_construction": "min(r, rows, columns) of scaling * B @ A",
                            "rank": "numerical rank of scaling * B @ A in float64 (numpy's tolerance, "
                                    "float32 eps), from its factors",
                            "effective_rank": "exp(entropy of singular values / their sum), Roy and "
                                              "Vetterli 2007",
                            "figures": "every other figure compares BASE with BASE + update merged in "
                                       "BASE's dtype, as peft's merge_and_unload stores it"}}
