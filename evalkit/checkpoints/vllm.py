"""vLLM-named state dicts: fused `qkv_proj` and `gate_up_proj` split back into Hugging Face names.

    names = unfuse(tensors, config)   # ...self_attn.qkv_proj.weight -> q_proj, k_proj, v_proj

Writer: vllm `vllm/model_executor/models/llama.py` (`LlamaAttention.qkv_proj` is a
`QKVParallelLinear` of output sizes `[num_heads * head_dim, num_kv_heads * head_dim,
num_kv_heads * head_dim]`; `LlamaMLP.gate_up_proj` a `MergedColumnParallelLinear` of
`[intermediate_size] * 2`; `load_weights`' `stacked_params_mapping` puts q, k, v and gate, up
in that order along dim 0). The same holds for Qwen2 and Mistral, whose biases are fused
alike. Rows along dim 0 are contiguous, so each part is a byte range of the fused tensor: no
copy. The split comes from the config's head counts (`head_dim`, else hidden_size /
num_attention_heads) and intermediate size; a fused tensor whose rows do not add up to them
is refused, so a name map to HF names is exact or not made.
"""

from __future__ import annotations

import math

from evalkit.checkpoints.tensors import DTYPES, TensorEntry, bad

__all__ = ["FUSED", "has_fused", "unfuse", "rows"]

FUSED = {".qkv_proj.": ("q_proj", "k_proj", "v_proj"), ".gate_up_proj.": ("gate_proj", "up_proj")}


def has_fused(tensors: dict) -> bool:
    return any(key in name for name in tensors for key in FUSED)


def _sizes(fused: str, config: dict, name: str, where) -> tuple[int, ...]:
    def need(key):
        value = config.get(key)
        if not isinstance(value, int) or value <= 0:
            raise bad(where, f"tensor {name!r} has vLLM's fused names; un-fusing it needs config.json's "
                             f"{key} (put the model's config.json beside the weights)")
        return value

    if fused == ".gate_up_proj.":
        return (need("intermediate_size"),) * 2
    heads = need("num_attention_heads")
    kv = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or need("hidden_size") // heads
    return heads * head_dim, kv * head_dim, kv * head_dim


def unfuse(tensors: dict[str, TensorEntry], config: dict | None, where) -> dict[str, TensorEntry]:
    """The tensors with every fused one replaced by its parts, in name order."""
    out: dict[str, TensorEntry] = {}
    for name, entry in tensors.items():
        fused = next((key for key in FUSED if key in name), None)
        if fused is None:
            out[name] = entry
            continue
        sizes = _sizes(fused, config or {}, name, where)
        if not entry.shape or entry.shape[0] != sum(sizes):
            raise bad(where, f"tensor {name!r}: {entry.shape[0] if entry.shape else 0} rows, but the config's "
                             f"head counts / intermediate size give {' + '.join(map(str, sizes))}")
        lo = 0
        for part, size in zip(FUSED[fused], sizes, strict=True):
            new = name.replace(fused, f".{part}.")
            if new in tensors:
                raise bad(where, f"tensor {new!r} is stored and also fused in {name!r}")
            out[new] = rows(entry, lo, lo + size, new)
            lo += size
    return out


def rows(entry: TensorEntry, lo: int, hi: int, name: str) -> TensorEntry:
    """Rows [lo, hi) of a tensor along dim 0, under a new name (byte ranges stay on disk)."""
    row = math.prod(entry.shape[1:]) * DTYPES[entry.dtype][0]
    shape = (hi - lo, *entry.shape[1:])
    if entry.source is not None:
        per = math.prod(entry.shape[1:])
        return TensorEntry(name, entry.file, entry.dtype, shape, 0, (hi - lo) * row,
                           source=lambda: entry.source()[lo * per:hi * per])
    parts, at, want = [], 0, (lo * row, hi * row)
    for file, start, end in entry.spans:
        a, b = max(want[0], at), min(want[1], at + end - start)
        if a < b:
            parts.append((file, start + a - at, start + b - at))
        at += end - start
    if not parts:
        return TensorEntry(name, entry.file, entry.dtype, shape, entry.start, entry.start)
    file, start, end = parts[0]
    return TensorEntry(name, file, entry.dtype, shape, start, end, parts=tuple(parts) if len(parts) > 1 else ())
