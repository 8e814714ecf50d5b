"""Tensors by name: where each one's bytes are, and a chunk reader over them, for every format.

    from evalkit.checkpoints.tensors import ChunkReader
    reader = ChunkReader(sides=1, chunk_bytes=1 << 20)
    bits = reader.bits(0, checkpoint.tensors["lm_head.weight"], first=0, count=1000)

A `TensorEntry` says where a tensor's bytes are: one byte range of one file (safetensors, the
storages inside a torch.save zip, a DCP chunk), several ranges read in order (verl's FSDP
shards of one tensor, concatenated along dim 0), or a `source` that makes the whole tensor's
raw bits on demand (a LoRA module merged into its base weight, a tensor needing a gather).
`ChunkReader` reads chunks of any of them with `os.preadv` into one fixed buffer per side (no
file mapped, so resident memory is the buffers whatever the file size); a `source` tensor is
made once and kept only while chunks of it are still unread (`TensorCache`), so at most one
such tensor per side is held at a time by a tensor-ordered reader.

`cast_bits` rounds float tensors to bfloat16, float16 or float32 with round-to-nearest-even,
as torch's `.to(dtype)` does (float64 goes through float32 first, as torch does for bf16; any
NaN becomes the canonical quiet NaN of the target, so NaN == NaN by bits after a cast).

Limits: float8 tensors have no value conversion (listed as skipped by `evalkit diff`).
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from evalkit.errors import UsageError
from metrics.weights import bf16_to_f32

__all__ = ["DTYPES", "FLOATS", "CASTS", "TORCH_DTYPES", "TensorEntry", "Checkpoint", "ChunkReader",
           "TensorCache", "to_values", "cast_bits", "value_dtype", "read_bits", "MODULE_KINDS",
           "module_kind", "layer_index", "bad"]

# safetensors dtype -> (bytes per element, raw-bit dtype, value dtype or None)
DTYPES = {
    "F64": (8, "<u8", "<f8"), "F32": (4, "<u4", "<f4"), "F16": (2, "<u2", "<f2"),
    "BF16": (2, "<u2", "bf16"), "I64": (8, "<u8", "<i8"), "I32": (4, "<u4", "<i4"),
    "I16": (2, "<u2", "<i2"), "I8": (1, "u1", "i1"), "U64": (8, "<u8", "<u8"),
    "U32": (4, "<u4", "<u4"), "U16": (2, "<u2", "<u2"), "U8": (1, "u1", "u1"),
    "BOOL": (1, "u1", "u1"), "F8_E4M3": (1, "u1", None), "F8_E5M2": (1, "u1", None),
}
FLOATS = ("F64", "F32", "F16", "BF16")
CASTS = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}  # --as-dtype -> safetensors
# torch dtype names (str(torch.float32) without "torch.") -> safetensors dtype names
TORCH_DTYPES = {
    "float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16", "int64": "I64",
    "int32": "I32", "int16": "I16", "int8": "I8", "uint64": "U64", "uint32": "U32",
    "uint16": "U16", "uint8": "U8", "bool": "BOOL", "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
}


def bad(path, why: str) -> UsageError:
    """The one-line refusal every reader gives: the file, then why."""
    return UsageError(f"{path}: {why}")


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of a checkpoint: where its bytes are, and what they hold.

    `start`/`end`: absolute byte range in `file`. `parts`: when the bytes lie in several ranges
    (verl's rank shards), `((file, start, end), ...)` read in order, `file`/`start`/`end` then
    being the first. `source`: a callable returning the tensor's raw bits (a flat array of the
    dtype's bit type) when they are made rather than stored; `file` names what it comes from.
    """

    name: str
    file: str
    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int
    parts: tuple = ()
    source: Callable | None = field(default=None, compare=False, repr=False)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPES[self.dtype][0]

    @property
    def spans(self) -> tuple:
        return self.parts or ((self.file, self.start, self.end),)

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f for f, _, _ in self.spans))


@dataclass(frozen=True)
class Checkpoint:
    label: str  # what the user typed
    path: str
    tensors: dict  # name -> TensorEntry
    config: dict | None = None
    format: str = "safetensors"
    notes: tuple[str, ...] = ()  # what the reader did that a reader of the figures must know
    lora: object = None  # evalkit.checkpoints.lora.Adapter when the tensors are BASE + an adapter
    config_dir: str | None = None  # the folder holding config.json (and the tokenizer)


def value_dtype(dtype: str, as_dtype: str | None = None) -> str:
    """The safetensors dtype a tensor is compared in: the --as-dtype target for floats."""
    return CASTS[as_dtype] if as_dtype and dtype in FLOATS else dtype


def to_values(bits: np.ndarray, dtype: str, out: np.ndarray | None = None) -> np.ndarray:
    """Raw bits of a safetensors `dtype` -> values: float32 (float64 for 64-bit types).

    bf16 widens by an integer shift (into `out`, a float32 buffer, when given); fp32/fp64 are
    views, no copy; fp16 and small integers become float32, 32/64-bit integers float64.
    """
    kind = DTYPES[dtype][2]
    if kind == "bf16":
        return bf16_to_f32(bits, out=out)
    values = bits.view(kind)
    if values.dtype.kind == "f" and values.dtype.itemsize >= 4:
        return values
    return values.astype(np.float64 if values.dtype.itemsize >= 4 else np.float32)


def cast_bits(bits: np.ndarray, dtype: str, target: str) -> np.ndarray:
    """Raw bits of `dtype` rounded (nearest even) to `target` (BF16, F16 or F32) raw bits."""
    if dtype == target:
        return bits
    values = to_values(bits, dtype)
    f32 = values.astype(np.float32) if values.dtype != np.float32 else values
    if target == "F32":
        return f32.view(np.uint32)
    if target == "F16":
        with np.errstate(over="ignore"):  # overflow to inf, as torch does
            out = f32.astype(np.float16).view(np.uint16)
        out[np.isnan(f32)] = 0x7E00
        return out
    u32 = f32.view(np.uint32)
    rounded = u32 + (np.uint32(0x7FFF) + ((u32 >> 16) & 1))  # the carry rounds up, ties to even
    out = (rounded >> 16).astype(np.uint16)
    out[np.isnan(f32)] = 0x7FC0
    return out


class TensorCache:
    """`source` tensors made once and shared by the readers of one pass; each is dropped when
    every one of its elements has been read (a reader going tensor by tensor holds one)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.held: dict[tuple, list] = {}  # (side, id(entry)) -> [entry, bits, elements unread]

    def take(self, entry: TensorEntry, first: int, count: int, side: int = 0) -> np.ndarray:
        key = (side, id(entry))  # the same entry on two sides is read twice over
        with self.lock:
            slot = self.held.get(key)
            if slot is None:
                bits = entry.source()
                if bits.size != entry.numel:
                    raise bad(entry.file, f"tensor {entry.name!r}: made {bits.size} values, "
                                          f"its shape {list(entry.shape)} holds {entry.numel}")
                slot = self.held[key] = [entry, bits, entry.numel]
            slot[2] -= count
            chunk = slot[1][first:first + count]
            if slot[2] <= 0:
                del self.held[key]
            return chunk


def read_bits(entry: TensorEntry) -> np.ndarray:
    """The whole tensor's raw bits (flat), read or made: for loading a model, not for diffs."""
    if entry.source is not None:
        return entry.source()
    out = np.empty(entry.numel, DTYPES[entry.dtype][1])
    view, filled = memoryview(out).cast("B"), 0
    for file, start, end in entry.spans:  # straight into the array: no buffer, no copy
        fd = os.open(file, os.O_RDONLY)
        try:
            got = os.preadv(fd, [view[filled:filled + end - start]], start)
        finally:
            os.close(fd)
        if got != end - start:
            raise bad(file, f"truncated while reading tensor {entry.name!r}")
        filled += got
    if filled != out.nbytes:
        raise bad(entry.file, f"tensor {entry.name!r}: its byte ranges hold fewer bytes than its shape")
    return out


class ChunkReader:
    """Reads chunks of tensors with os.preadv into one fixed buffer per side."""

    def __init__(self, sides: int, chunk_bytes: int, cache: TensorCache | None = None):
        self.fds: dict[str, int] = {}
        self.bufs = [bytearray(chunk_bytes) for _ in range(sides)]
        # bf16 values: one float32 per 8 bytes of buffer (the buffer is sized for 8-byte dtypes)
        self.vals = [np.empty(chunk_bytes // 8 + 1, np.float32) for _ in range(sides)]
        self.cache = cache or TensorCache()

    def _fd(self, file: str) -> int:
        if file not in self.fds:
            try:
                self.fds[file] = os.open(file, os.O_RDONLY)
            except OSError as exc:
                raise bad(file, f"cannot read ({exc.strerror or exc})") from None
        return self.fds[file]

    def bits(self, side: int, entry: TensorEntry, first: int, count: int) -> np.ndarray:
        """Raw bits of entries [first, first + count) of a tensor (a view of the side's buffer,
        or of the made tensor for a `source` entry)."""
        size, bits_dtype, _ = DTYPES[entry.dtype]
        if entry.source is not None:
            return self.cache.take(entry, first, count, side)
        view = memoryview(self.bufs[side])[: count * size]
        lo, hi, filled = first * size, (first + count) * size, 0
        at = 0  # byte offset of the current span within the tensor
        for file, start, end in entry.spans:
            a, b = max(lo, at), min(hi, at + end - start)
            if a < b:
                got = os.preadv(self._fd(file), [view[filled:filled + b - a]], start + a - at)
                if got != b - a:
                    raise bad(file, f"truncated while reading tensor {entry.name!r}")
                filled += b - a
            at += end - start
        if filled != len(view):
            raise bad(entry.file, f"tensor {entry.name!r}: its byte ranges hold fewer bytes than "
                                  "its shape")
        return np.frombuffer(view, dtype=bits_dtype, count=count)

    def values(self, side: int, entry: TensorEntry, bits: np.ndarray, dtype: str | None = None):
        """Values of `bits` (of `dtype`, default the entry's own), in the side's value buffer."""
        return to_values(bits, dtype or entry.dtype, out=self.vals[side])

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


# ---------------------------------------------------------------- Hugging Face tensor names


MODULE_KINDS = {  # first match wins; checked against the tensor name
    "lm_head": r"(^|\.)lm_head\.",
    "embedding": r"embed_tokens|(^|\.)wte\.|word_embeddings|(^|\.)embed\.",
    "q_proj": r"\.q_proj\.", "k_proj": r"\.k_proj\.", "v_proj": r"\.v_proj\.",
    "o_proj": r"\.o_proj\.", "mlp_gate": r"\.gate_proj\.", "mlp_up": r"\.up_proj\.",
    "mlp_down": r"\.down_proj\.", "norm": r"norm|(^|\.)ln_",
}


def module_kind(name: str) -> str:
    """Module kind of a Hugging Face tensor name (Llama/Qwen/Mistral naming), else 'other'."""
    for kind, pattern in MODULE_KINDS.items():
        if re.search(pattern, name):
            return kind
    return "other"


def layer_index(name: str) -> int | None:
    """`i` of `model.layers.{i}.` (or any `layers.{i}.`/`h.{i}.`), None outside the blocks."""
    match = re.search(r"(?:^|\.)(?:layers|h)\.(\d+)\.", name)
    return int(match.group(1)) if match else None


# ---------------------------------------------------------------- raw bits <-> torch


_BIT_TYPES = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}


def as_torch(bits: np.ndarray, dtype: str, shape: tuple):
    """A torch tensor of a safetensors `dtype` over raw bits (no copy)."""
    import torch

    torch_dtype = getattr(torch, next(k for k, v in TORCH_DTYPES.items() if v == dtype))
    raw = torch.from_numpy(np.ascontiguousarray(bits).view(_BIT_TYPES[DTYPES[dtype][0]]))
    return raw.view(torch_dtype).reshape(shape)


def torch_bits(tensor) -> np.ndarray:
    """A torch tensor's raw bits, flat (a copy when not contiguous)."""
    import torch

    bits = getattr(torch, _BIT_TYPES[tensor.element_size()])
    return tensor.detach().contiguous().view(bits).reshape(-1).numpy()
