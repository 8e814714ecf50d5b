"""safetensors checkpoints: headers parsed and validated here, folders indexed by tensor name.

    from evalkit.checkpoints.safetensors import read_header, read_folder
    entries = read_header("model.safetensors")   # name -> TensorEntry, every offset checked
    tensors = read_folder(Path("runs/grpo/ckpt"))  # one file, several, or an index's shards

The header (8-byte little-endian length + JSON) is parsed and validated here, every offset
checked against the file size, so a truncated or fuzzed file is a one-line UsageError naming
the file, never a crash or a hang. Data is then read by `evalkit.checkpoints.tensors.ChunkReader`
(`os.preadv` at the header's offsets; safetensors' `safe_open` maps the whole file instead, and
the tests check this reader returns exactly what `safe_open` returns).
Writer: huggingface/safetensors (`safetensors/src/tensor.rs`: the header layout and dtype names).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from evalkit.checkpoints.tensors import DTYPES, TensorEntry, bad
from evalkit.schema import FileName, Json, MapOf, Obj, Opt, check, read_json

__all__ = ["read_header", "read_folder", "INDEX", "MAX_HEADER"]

MAX_HEADER = 100_000_000  # safetensors' own limit
INDEX = "model.safetensors.index.json"


def read_header(path: str | Path) -> dict[str, TensorEntry]:
    """Parse and validate one safetensors header; every failure names the file."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            length = int.from_bytes(head, "little") if len(head) == 8 else -1
            if length < 2 or length > MAX_HEADER or 8 + length > size:
                raise bad(path, "not a safetensors file, or truncated (bad header length)")
            raw = fh.read(length)
    except OSError as exc:
        raise bad(path, f"cannot read ({exc.strerror or exc})") from None
    try:
        meta = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise bad(path, "corrupt safetensors header (not valid JSON)") from None
    if not isinstance(meta, dict):
        raise bad(path, "corrupt safetensors header (not a JSON object)")
    base, data_len = 8 + length, size - 8 - length
    entries = {name: _entry(path, name, info, base, data_len)
               for name, info in meta.items() if name != "__metadata__"}
    spans = sorted((e.start, e.end) for e in entries.values())
    if any(a_end > b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False)):
        raise bad(path, "corrupt safetensors header (overlapping tensors)")
    return entries


def _entry(path, name, info, base: int, data_len: int) -> TensorEntry:
    def ok_int(x):
        return isinstance(x, int) and not isinstance(x, bool) and x >= 0

    if not isinstance(info, dict) or info.get("dtype") not in DTYPES:
        raise bad(path, f"corrupt safetensors header (tensor {name!r}: unknown dtype)")
    shape, offsets = info.get("shape"), info.get("data_offsets")
    if not isinstance(shape, list) or not all(ok_int(x) for x in shape):
        raise bad(path, f"corrupt safetensors header (tensor {name!r}: bad shape)")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(ok_int(x) for x in offsets)):
        raise bad(path, f"corrupt safetensors header (tensor {name!r}: bad offsets)")
    begin, end = offsets
    if end > data_len:
        raise bad(path, f"truncated file (tensor {name!r} ends past the end of the file)")
    if begin > end or end - begin != math.prod(shape) * DTYPES[info["dtype"]][0]:
        raise bad(path, f"corrupt safetensors header (tensor {name!r}: size does not match shape)")
    return TensorEntry(name, str(path), info["dtype"], tuple(shape), base + begin, base + end)


def read_folder(path: Path) -> dict[str, TensorEntry]:
    """Every tensor of a folder: the shards `model.safetensors.index.json` names, else every
    `*.safetensors` file (a name in two files is refused)."""
    if (path / INDEX).is_file():
        return _indexed(path / INDEX)
    files = sorted(path.glob("*.safetensors"))
    tensors: dict[str, TensorEntry] = {}
    for file in files:
        for name, entry in read_header(file).items():
            if name in tensors:
                raise bad(file, f"tensor {name!r} also in {Path(tensors[name].file).name}")
            tensors[name] = entry
    return tensors


# transformers' `save_pretrained` index (`utils/hub.py` / `modeling_utils.py`): {"metadata", "weight_map": {tensor: shard}}
WEIGHT_MAP = Obj({"weight_map": MapOf(FileName())}, optional={"metadata": Opt(Json())})


def _indexed(index: Path) -> dict[str, TensorEntry]:
    weight_map = check(WEIGHT_MAP, read_json(index, "checkpoint index"), index, "checkpoint index")["weight_map"]
    headers = {}
    for shard in sorted(set(weight_map.values())):
        file = index.parent / shard
        if not file.is_file():
            raise bad(index, f"names shard {shard}, which is missing")
        headers[shard] = read_header(file)
    tensors = {}
    for name, shard in weight_map.items():
        if name not in headers[shard]:
            raise bad(index.parent / shard, f"index lists tensor {name!r}, the shard lacks it")
        tensors[name] = headers[shard][name]
    return tensors
