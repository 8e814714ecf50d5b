"""Read safetensors checkpoints without mapping them: headers, checkpoints, chunks, dtype casts.

    from evalkit.safetensors_io import ChunkReader, open_checkpoint, read_header
    checkpoint = open_checkpoint("runs/grpo/ckpt")  # folder, index, file or model name
    entries = read_header("model.safetensors")   # name -> TensorEntry, every offset checked
    reader = ChunkReader(sides=1, chunk_bytes=1 << 20)
    bits = reader.bits(0, entries["lm_head.weight"], first=0, count=1000)

The header (8-byte little-endian length + JSON) is parsed and validated here, every offset
checked against the file size, so a truncated or fuzzed file is a one-line UsageError naming
the file, never a crash or a hang. `open_checkpoint` indexes every tensor of a folder (one
file, several, or shards named by `model.safetensors.index.json`) or of a single file by name.
Data is read with `os.preadv` at the header's offsets into fixed buffers: no file is mapped,
so resident memory is the buffers, whatever the file size (safetensors' `safe_open` maps the
whole file; the tests check this reader returns exactly what `safe_open` returns).

`cast_bits` rounds float tensors to bfloat16, float16 or float32 with round-to-nearest-even,
as torch's `.to(dtype)` does (float64 goes through float32 first, as torch does for bf16; any
NaN becomes the canonical quiet NaN of the target, so NaN == NaN by bits after a cast).

Limits: float8 tensors have no value conversion (listed as skipped by `evalkit diff`).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evalkit.errors import UsageError
from metrics.weights import bf16_to_f32

__all__ = ["DTYPES", "CASTS", "TensorEntry", "Checkpoint", "read_header", "open_checkpoint", "ChunkReader", "to_values",
           "cast_bits", "value_dtype", "MODULE_KINDS", "module_kind", "layer_index"]

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
MAX_HEADER = 100_000_000  # safetensors' own limit
INDEX = "model.safetensors.index.json"


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of a checkpoint: where its bytes are, and what they hold."""

    name: str
    file: str
    dtype: str
    shape: tuple[int, ...]
    start: int  # absolute byte offset in the file
    end: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Checkpoint:
    label: str  # what the user typed
    path: str
    tensors: dict  # name -> TensorEntry
    config: dict | None = None


def _bad(path, why: str) -> UsageError:
    return UsageError(f"{path}: {why}")


def read_header(path: str | Path) -> dict[str, TensorEntry]:
    """Parse and validate one safetensors header; every failure names the file."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            length = int.from_bytes(head, "little") if len(head) == 8 else -1
            if length < 2 or length > MAX_HEADER or 8 + length > size:
                raise _bad(path, "not a safetensors file, or truncated (bad header length)")
            raw = fh.read(length)
    except OSError as exc:
        raise _bad(path, f"cannot read ({exc.strerror or exc})") from None
    try:
        meta = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _bad(path, "corrupt safetensors header (not valid JSON)") from None
    if not isinstance(meta, dict):
        raise _bad(path, "corrupt safetensors header (not a JSON object)")
    base, data_len = 8 + length, size - 8 - length
    entries = {name: _entry(path, name, info, base, data_len)
               for name, info in meta.items() if name != "__metadata__"}
    spans = sorted((e.start, e.end) for e in entries.values())
    if any(a_end > b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False)):
        raise _bad(path, "corrupt safetensors header (overlapping tensors)")
    return entries


def _entry(path, name, info, base: int, data_len: int) -> TensorEntry:
    def ok_int(x):
        return isinstance(x, int) and not isinstance(x, bool) and x >= 0

    if not isinstance(info, dict) or info.get("dtype") not in DTYPES:
        raise _bad(path, f"corrupt safetensors header (tensor {name!r}: unknown dtype)")
    shape, offsets = info.get("shape"), info.get("data_offsets")
    if not isinstance(shape, list) or not all(ok_int(x) for x in shape):
        raise _bad(path, f"corrupt safetensors header (tensor {name!r}: bad shape)")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(ok_int(x) for x in offsets)):
        raise _bad(path, f"corrupt safetensors header (tensor {name!r}: bad offsets)")
    begin, end = offsets
    if end > data_len:
        raise _bad(path, f"truncated file (tensor {name!r} ends past the end of the file)")
    if begin > end or end - begin != math.prod(shape) * DTYPES[info["dtype"]][0]:
        raise _bad(path, f"corrupt safetensors header (tensor {name!r}: size does not match shape)")
    return TensorEntry(name, str(path), info["dtype"], tuple(shape), base + begin, base + end)


def _folder_of(arg: str) -> Path:
    """A local path as given, else whatever `resolve_model` makes of the name."""
    path = Path(arg).expanduser()
    if path.exists():
        return path
    from evalkit.models import resolve_model

    ref = resolve_model(arg)
    if not Path(ref.path).is_dir():
        raise UsageError(f"{arg}: not available locally; download the checkpoint and pass its folder")
    return Path(ref.path)


def open_checkpoint(arg: str) -> Checkpoint:
    """Index every tensor of a checkpoint (folder, index, or single file) by name."""
    path = _folder_of(arg)
    if path.is_file():
        if path.suffix != ".safetensors":
            raise _bad(path, "not a .safetensors file (pytorch .bin checkpoints are not supported)")
        return Checkpoint(arg, str(path), read_header(path))
    if (path / INDEX).is_file():
        tensors = _indexed(path / INDEX)
    else:
        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise _bad(path, "no *.safetensors weights in the folder (pytorch .bin is not supported)")
        tensors = {}
        for file in files:
            for name, entry in read_header(file).items():
                if name in tensors:
                    raise _bad(file, f"tensor {name!r} also in {Path(tensors[name].file).name}")
                tensors[name] = entry
    return Checkpoint(arg, str(path), tensors, _config(path / "config.json"))


def _indexed(index: Path) -> dict[str, TensorEntry]:
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
        assert isinstance(weight_map, dict) and all(isinstance(v, str) for v in weight_map.values())
    except (OSError, ValueError, KeyError, TypeError, AssertionError, RecursionError):
        raise _bad(index, "corrupt index (expected JSON with a 'weight_map' object)") from None
    headers = {}
    for shard in sorted(set(weight_map.values())):
        file = index.parent / shard
        if not file.is_file():
            raise _bad(index, f"names shard {shard}, which is missing")
        headers[shard] = read_header(file)
    tensors = {}
    for name, shard in weight_map.items():
        if name not in headers[shard]:
            raise _bad(index.parent / shard, f"index lists tensor {name!r}, the shard lacks it")
        tensors[name] = headers[shard][name]
    return tensors


def _config(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        raise _bad(path, "corrupt config.json") from None
    return config if isinstance(config, dict) else None


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


class ChunkReader:
    """Reads chunks of tensors with os.preadv into one fixed buffer per side."""

    def __init__(self, sides: int, chunk_bytes: int):
        self.fds: dict[str, int] = {}
        self.bufs = [bytearray(chunk_bytes) for _ in range(sides)]
        # bf16 values: one float32 per 8 bytes of buffer (the buffer is sized for 8-byte dtypes)
        self.vals = [np.empty(chunk_bytes // 8 + 1, np.float32) for _ in range(sides)]

    def bits(self, side: int, entry: TensorEntry, first: int, count: int) -> np.ndarray:
        """Raw bits of entries [first, first + count) of a tensor (a view of the side's buffer)."""
        size, bits_dtype, _ = DTYPES[entry.dtype]
        if entry.file not in self.fds:
            self.fds[entry.file] = os.open(entry.file, os.O_RDONLY)
        view = memoryview(self.bufs[side])[: count * size]
        got = os.preadv(self.fds[entry.file], [view], entry.start + first * size)
        if got != len(view):
            raise _bad(entry.file, f"truncated while reading tensor {entry.name!r}")
        return np.frombuffer(view, dtype=bits_dtype, count=count)

    def values(self, side: int, entry: TensorEntry, bits: np.ndarray, dtype: str | None = None):
        """Values of `bits` (of `dtype`, default the entry's own), in the side's value buffer."""
        return to_values(bits, dtype or entry.dtype, out=self.vals[side])

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)


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
