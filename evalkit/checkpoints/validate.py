"""Checks every reader's tensors get before anything is computed from them.

    check_tensors(tensors, config, where)   # raises a one-line UsageError

- bytes: each tensor's byte ranges hold exactly `numel * itemsize` bytes of its dtype;
- role: a tensor whose name says it is a float weight (embedding, projection, norm, lm_head)
  stored in an integer or bool dtype is refused (unless config.json declares a quantization),
  with what its values read as: a float32 layernorm weight whose header says I32 reads as
  integers near 1.07e9, which is how a lying header with the same bytes shows;
- plausibility: norm weights whose values are implausible for their role (|w| > 1e6, or
  every nonzero |w| < 1e-30: the float bits of small integers) are refused;
- config: with the checkpoint's own config.json, the shapes of embeddings, q/k/v/o, MLP and
  norm weights against its hidden_size, vocab_size, head counts, head_dim and
  intermediate_size, and layer indices against num_hidden_layers.
Only small reads: up to 64K values of each norm weight (and of an integer-typed float role).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from evalkit.checkpoints.tensors import (
    DTYPES,
    FLOATS,
    ChunkReader,
    TensorEntry,
    bad,
    layer_index,
    module_kind,
    to_values,
)
from evalkit.errors import UsageError
from evalkit.schema import Bool, Int, Json, ListOf, Obj, Opt, Str

__all__ = ["check_tensors", "same_architecture", "TensorMatch", "ARCH_KEYS", "MODEL_CONFIG",
           "SAMPLE"]

SAMPLE = 1 << 16
SIZE = Int(min=1, max=1 << 40)
# config.json as transformers writes it (`configuration_utils.py` `to_json_string`): the fields
# evalkit reads, each a positive integer (null where transformers writes None); others kept as they are
MODEL_CONFIG = Obj({}, optional={
    "model_type": Str(), "hidden_size": Opt(SIZE), "num_hidden_layers": Opt(SIZE), "vocab_size": Opt(SIZE),
    "num_attention_heads": Opt(SIZE), "num_key_value_heads": Opt(SIZE), "head_dim": Opt(SIZE),
    "intermediate_size": Opt(SIZE | ListOf(SIZE)), "tie_word_embeddings": Opt(Bool()),
    "quantization_config": Opt(Json())})
# config.json keys two checkpoints of one architecture share (a resized vocabulary is a tensor
# shape difference, listed by diff, instead)
ARCH_KEYS = ("model_type", "hidden_size", "num_hidden_layers", "intermediate_size",
             "num_attention_heads", "num_key_value_heads")


FLOAT_ROLES = ("embedding", "lm_head", "q_proj", "k_proj", "v_proj", "o_proj", "mlp_gate", "mlp_up",
               "mlp_down", "norm")


def check_tensors(tensors: dict[str, TensorEntry], config: dict | None, where) -> None:
    quantized = bool((config or {}).get("quantization_config"))
    reader = ChunkReader(1, SAMPLE * 8)
    try:
        for name in sorted(tensors):
            entry = tensors[name]
            _bytes(entry)
            kind = module_kind(name)
            if kind in FLOAT_ROLES and name.endswith((".weight", ".bias")):
                if entry.dtype not in FLOATS and not quantized:
                    raise _wrong_dtype(reader, entry, kind)
                if kind == "norm" and entry.dtype in FLOATS and entry.numel and entry.source is None:
                    _plausible(reader, entry, kind)
            if config:
                _against_config(entry, kind, config, where)
    finally:
        reader.close()


def _bytes(entry: TensorEntry) -> None:
    if entry.source is not None:
        return  # made tensors are checked against their shape when made (TensorCache)
    held = sum(end - start for _, start, end in entry.spans)
    if held != entry.nbytes or any(end < start for _, start, end in entry.spans):
        raise bad(entry.file, f"tensor {entry.name!r}: {held} bytes for {entry.dtype}{list(entry.shape)}, "
                              f"which needs {entry.nbytes}")


def _sample(reader: ChunkReader, entry: TensorEntry) -> np.ndarray:
    bits = reader.bits(0, entry, 0, min(SAMPLE, entry.numel))
    return np.asarray(to_values(bits, entry.dtype), dtype=np.float64)


def _wrong_dtype(reader, entry: TensorEntry, kind: str):
    what = f"tensor {entry.name!r} (a {kind} weight) is stored as {entry.dtype}"
    if entry.numel and entry.source is None and DTYPES[entry.dtype][2] is not None:
        top = float(np.abs(_sample(reader, entry)).max())
        what += f", its values reaching {top:.3g}"
    return bad(entry.file, f"{what}: this role holds floats, so the dtype in the header is wrong "
                           "(a float tensor's bytes labelled as integers?)")


def _plausible(reader, entry: TensorEntry, kind: str) -> None:
    values = np.abs(_sample(reader, entry))
    finite = values[np.isfinite(values)]
    nonzero = finite[finite > 0]
    top = float(finite.max()) if finite.size else 0.0
    if top > 1e6 or (nonzero.size >= 8 and float(nonzero.max()) < 1e-30):
        raise bad(entry.file, f"tensor {entry.name!r} ({entry.dtype}): values up to {top:.3g}, implausible for a "
                              f"{kind} weight; is the header's dtype right?")


def _against_config(entry: TensorEntry, kind: str, config: dict, where) -> None:
    layer = layer_index(entry.name)
    layers = config.get("num_hidden_layers")
    if layer is not None and isinstance(layers, int) and layer >= layers:
        raise bad(where, f"tensor {entry.name!r} is in layer {layer}, config.json has {layers} layers")
    expect = _expected(entry.name, kind, config)
    if expect is not None and tuple(entry.shape) != expect:
        raise bad(where, f"tensor {entry.name!r} is {list(entry.shape)}, config.json's sizes make it "
                         f"{list(expect)}")


def _expected(name: str, kind: str, c: dict) -> tuple | None:
    """The shape config.json implies for a Llama/Qwen/Mistral-named tensor, None if unknown."""
    def ints(*keys):
        values = [c.get(k) for k in keys]
        return values if all(isinstance(v, int) and v > 0 for v in values) else None

    hidden, vocab, inter = c.get("hidden_size"), c.get("vocab_size"), c.get("intermediate_size")
    heads, kv = c.get("num_attention_heads"), c.get("num_key_value_heads") or c.get("num_attention_heads")
    head_dim = c.get("head_dim") or (hidden // heads if ints("hidden_size", "num_attention_heads") else None)
    bias = name.endswith(".bias")
    shapes = {}
    if ints("hidden_size", "vocab_size") and not bias:
        shapes.update(embedding=(vocab, hidden), lm_head=(vocab, hidden))
    if ints("hidden_size", "num_attention_heads") and isinstance(head_dim, int) and isinstance(kv, int):
        q, k = heads * head_dim, kv * head_dim
        shapes.update(q_proj=(q, hidden), k_proj=(k, hidden), v_proj=(k, hidden), o_proj=(hidden, q))
        if bias:
            shapes.update(q_proj=(q,), k_proj=(k,), v_proj=(k,), o_proj=(hidden,))
    if ints("hidden_size", "intermediate_size") and not bias and ".experts." not in name:
        shapes.update(mlp_gate=(inter, hidden), mlp_up=(inter, hidden), mlp_down=(hidden, inter))
    if ints("hidden_size") and re.search(r"(input_layernorm|post_attention_layernorm|(^|\.)norm)\.weight$", name):
        shapes["norm"] = (hidden,)
    return shapes.get(kind)


# ---------------------------------------------------------------- two checkpoints: one architecture


@dataclass(frozen=True)
class TensorMatch:
    """How the tensors of BASE and the others line up, by name: `pairs` (same name, shape and,
    unless `as_dtype` says otherwise, dtype), and the problems (`missing` from an other, `extra`
    in an other, `mismatched` shape or dtype, `skipped` dtypes with no values)."""

    pairs: list
    missing: list
    extra: list
    mismatched: list
    skipped: list

    def problems(self) -> dict:
        return {"missing": self.missing, "extra": self.extra, "mismatched": self.mismatched, "skipped": self.skipped}


def _layers(cp) -> int | None:
    """The number of decoder layers the tensor names show (max index + 1), None without layers."""
    found = [i for i in (layer_index(n) for n in cp.tensors) if i is not None]
    return max(found) + 1 if found else None


def same_architecture(cps: list, as_dtype: str | None = None, *, strict: bool = False,
                      command: str = "diff") -> TensorMatch:
    """The one check every command comparing checkpoints makes (diff, interpolate, forgetting):
    the same architecture by config.json (`ARCH_KEYS`, where both have one) and by the layers
    the tensor names show, and tensor names in common; refused in one line otherwise. The
    tensors are then matched by name; `strict` (a command that mixes or swaps weights) also
    refuses any tensor missing, extra or of another shape. A tied lm_head (config
    `tie_word_embeddings`) may be stored on one side only."""
    from evalkit.checkpoints.tensors import DTYPES, value_dtype

    base, rest = cps[0], cps[1:]
    for other in rest:
        if base.config and other.config:
            for key in ARCH_KEYS:
                if base.config.get(key) != other.config.get(key):
                    raise UsageError(f"{other.path}: different architecture from {base.path} ({key} "
                                     f"{base.config.get(key)} vs {other.config.get(key)}); {command} needs two "
                                     "checkpoints of the same model")
        if not set(base.tensors) & set(other.tensors):
            raise UsageError(f"{other.path}: no tensor names in common with {base.path} "
                             "(different architectures?)")
        layers = _layers(base), _layers(other)
        if layers[0] != layers[1]:
            raise UsageError(f"{other.path}: {layers[1] or 0} layers by its tensor names, {base.path} has "
                             f"{layers[0] or 0}; {command} needs two checkpoints of the same model")
    match = TensorMatch([], [], [], [], [])
    for cp in rest:
        match.extra.extend(f"{cp.label}: {n}" for n in sorted(set(cp.tensors) - set(base.tensors)))
    for entry in sorted(base.tensors.values(), key=lambda e: e.name):  # same sums however sharded
        others = [cp.tensors.get(entry.name) for cp in rest]
        if any(o is None for o in others):
            where = ", ".join(cp.label for cp, o in zip(rest, others, strict=True) if o is None)
            match.missing.append(f"{where}: {entry.name}")
        elif any((value_dtype(o.dtype, as_dtype), o.shape) != (value_dtype(entry.dtype, as_dtype), entry.shape)
                 for o in others):
            described = [f"{e.dtype}{list(e.shape)}" for e in (entry, *others)]
            match.mismatched.append(f"{entry.name}: " + " vs ".join(described))
        elif DTYPES[entry.dtype][2] is None:
            match.skipped.append(f"{entry.name}: {entry.dtype} is not supported")
        else:
            match.pairs.append((entry, *others))
    if strict:
        tied = any((cp.config or {}).get("tie_word_embeddings") for cp in cps)
        lines = [("missing", m) for m in match.missing] + [("extra", m) for m in match.extra] + \
            [("of another shape", m) for m in match.mismatched if _shape_differs(m)]
        lines = [(what, m) for what, m in lines if not (tied and m.endswith(": lm_head.weight"))]
        if lines:
            what, first = lines[0]
            raise UsageError(f"{first}: a tensor {what} ({len(lines)} tensors differ by name or shape); {command} "
                             "needs two checkpoints of the same model")
    return match


def _shape_differs(line: str) -> bool:
    """A `mismatched` line whose shapes differ (a dtype difference alone is not a shape one)."""
    described = [part.split("[", 1)[1] for part in line.split(": ", 1)[1].split(" vs ")]
    return len(set(described)) > 1
