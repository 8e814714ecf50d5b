"""PyTorch Distributed Checkpoint (DCP) folders, read without a process group.

    evalkit diff base/ runs/fsdp/pytorch_model_fsdp_0 --out runs/diff-fsdp

Writer: pytorch `torch/distributed/checkpoint/filesystem.py` (`FileSystemWriter`: `.metadata`
pickles a `Metadata` whose `state_dict_metadata[fqn]` is a `TensorStorageMetadata` (dtype in
`properties`, global `size`, `chunks` of offsets and sizes) and whose `storage_data` maps each
chunk's `MetadataIndex(fqn, offset)` to a `_StorageInfo(relative_path, offset, length)` in a
`__{rank}_{i}.distcp` file; `_write_item` writes each tensor chunk there with `torch.save`).
accelerate's FSDP `SHARDED_STATE_DICT` saves `{"model": state_dict}` this way into
`pytorch_model_fsdp_0/` (names then start with `model.`, stripped here when every name has it).

Unlike `FileSystemReader.read_metadata` (plain `pickle.load`), `.metadata` is unpickled here
with only DCP's own metadata class names allowed, each built as a plain record of its fields; each chunk is read by
`evalkit.checkpoints.torchzip` (weights-only, tensors left on disk). A tensor in one chunk,
or in chunks that split it along dim 0, is a byte range (or ranges) of the .distcp files; any
other split is gathered when read (one tensor in memory).

Limits: DCP written with stream transforms (`_extensions`, e.g. compression) is refused.
"""

from __future__ import annotations

import io
import math
import pickle
from pathlib import Path

import numpy as np

from evalkit.checkpoints.tensors import DTYPES, TORCH_DTYPES, TensorEntry, bad
from evalkit.checkpoints.torchzip import Stored, read_torch_file
from evalkit.schema import MAX_DEPTH, Int, ListOf, Obj, Opt, Str, check

__all__ = ["METADATA", "is_dcp", "read_dcp"]

METADATA = ".metadata"

# The classes the .metadata pickle names, as built here: plain records, not DCP's own classes (whose
# import costs ~0.5 s), and nothing else. Their pickled state: a dict (dataclasses, _StorageInfo's
# __getstate__) or, for TensorProperties, the tuple (dtype, layout, requires_grad, memory format, pin_memory).
_RECORDS = {
    "torch.distributed.checkpoint.metadata": {
        "Metadata", "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata",
        "TensorProperties", "MetadataIndex", "StorageMeta", "_MEM_FORMAT_ENCODING"},
    "torch.distributed.checkpoint.filesystem": {"_StorageInfo"},
    "torch.distributed.checkpoint.planner": {"WriteItemType", "LoadItemType"},
}
_REAL = {  # module -> names taken as they are (values, not code that runs)
    "torch.serialization": {"_get_layout"},
    "torch": {"Size", *TORCH_DTYPES, "float8_e4m3fn", "float8_e5m2", "complex64", "complex128"},
    "pathlib": {"PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath", "Path"},
    "collections": {"OrderedDict"},
    "builtins": {"set", "frozenset"},
}


def is_dcp(folder: Path) -> bool:
    return (folder / METADATA).is_file() and any(folder.glob("*.distcp"))


class _Record:
    """A DCP metadata object read back as its fields (`__setstate__` keeps the pickled state)."""

    def __init__(self, *args):
        self.args = args  # enums are rebuilt by calling the class with their value

    def __setstate__(self, state):
        if isinstance(state, dict):
            self.__dict__.update(state)
        elif type(self).__name__ == "TensorProperties" and isinstance(state, tuple) and state:
            self.dtype = state[0]
        else:
            self.state = state


def _record_class(name: str) -> type:
    return type(name, (_Record,), {})


_CLASSES = {(m, n): _record_class(n) for m, names in _RECORDS.items() for n in names}


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _CLASSES:
            return _CLASSES[(module, name)]
        if name in _REAL.get(module, ()):
            import importlib

            return getattr(importlib.import_module(module), name)
        raise pickle.UnpicklingError(f"GLOBAL {module}.{name} is not a DCP metadata class")


def _metadata(folder: Path):
    path = folder / METADATA
    try:
        return _MetadataUnpickler(io.BytesIO(path.read_bytes())).load()
    except pickle.UnpicklingError as exc:
        raise bad(path, f"refused: {exc} (only DCP's metadata classes are unpickled)") from None
    except Exception as exc:  # truncated or fuzzed: EOFError, ValueError, ...
        raise bad(path, f"corrupt DCP metadata ({type(exc).__name__})") from None


SIZE = ListOf(Int(min=0), max_len=MAX_DEPTH)
INDEX = Obj({"fqn": Str()}, optional={"offset": Opt(SIZE)})
INFO = Obj({"relative_path": Str(nonempty=True), "offset": Int(min=0), "length": Int(min=0)},
           optional={"transform_descriptors": Opt(ListOf(Str()))})


def _fields(record, schema, where: str) -> dict:
    """A metadata record's fields (its pickled state), checked against `schema`."""
    state = vars(record) if isinstance(record, _Record) else record
    return check(schema, state, f"{METADATA} {where}", "DCP metadata")


def read_dcp(folder: Path) -> dict[str, TensorEntry]:
    """Every tensor of a DCP folder by its saved name (bytes items left out). Each metadata field
    is checked for its type and range, each chunk's file must be a file of the folder and its
    bytes inside it, before any chunk is read."""
    meta = _metadata(folder)
    storage = getattr(meta, "storage_data", None)
    items = getattr(meta, "state_dict_metadata", None)
    if not isinstance(items, dict) or not isinstance(storage, dict):
        raise bad(folder / METADATA, "not DCP metadata (no state_dict_metadata / storage_data)")
    chunks_of: dict[str, list] = {}
    for n, (index, info) in enumerate(storage.items()):
        index, info = _fields(index, INDEX, f"storage_data key {n}"), _fields(info, INFO, f"storage_data[{n}]")
        name = info["relative_path"]
        if Path(name).name != name or name in (".", ".."):
            raise bad(folder / METADATA, f"storage_data[{n}]: relative_path {name[:60]!r} is not a file of the "
                                         "checkpoint folder")
        chunks_of.setdefault(index["fqn"], []).append((index, info))
    tensors, files = {}, {}
    try:
        for fqn, md in items.items():
            if type(md).__name__ != "TensorStorageMetadata":
                continue  # bytes (a step counter, an rng state)
            tensors[fqn] = _tensor(folder, fqn, md, chunks_of.get(fqn, []), files)
    finally:
        for fh in files.values():
            fh.close()
    if not tensors:
        raise bad(folder, "the DCP checkpoint holds no tensors")
    return tensors


def _tensor(folder: Path, fqn: str, md, chunks: list, files: dict) -> TensorEntry:
    dtype = TORCH_DTYPES.get(str(getattr(getattr(md, "properties", None), "dtype", None)).removeprefix("torch."))
    shape = tuple(check(SIZE, getattr(md, "size", None), f"{folder / METADATA}: tensor {fqn!r} size"))
    if dtype is None:
        raise bad(folder, f"tensor {fqn!r}: dtype {getattr(md.properties, 'dtype', None)} is not read")
    pieces = []
    for index, info in sorted(chunks, key=lambda c: tuple(c[0].get("offset") or ())):
        if info.get("transform_descriptors"):
            raise bad(folder, f"tensor {fqn!r} was written with stream transforms "
                              f"({', '.join(info['transform_descriptors'])}): not read")
        file = folder / info["relative_path"]
        if not file.is_file():
            raise bad(folder, f"tensor {fqn!r}: its file {info['relative_path']} is missing")
        if info["offset"] + info["length"] > file.stat().st_size:
            raise bad(file, f"tensor {fqn!r}: its chunk at byte {info['offset']} ({info['length']} bytes) ends past "
                            f"the end of the file ({file.stat().st_size} bytes)")
        if file not in files:
            files[file] = open(file, "rb")  # noqa: SIM115  (closed by read_dcp)
        stored = read_torch_file(file, info["offset"], info["length"], files[file])
        if not isinstance(stored, Stored) or stored.dtype != dtype:
            raise bad(file, f"tensor {fqn!r}: the chunk at byte {info['offset']} is not a {dtype} tensor")
        offset = tuple(index.get("offset") or (0,) * len(shape))
        if len(offset) != len(shape) or len(stored.shape) != len(shape) or \
                any(o + n > d for o, n, d in zip(offset, stored.shape, shape, strict=True)):
            raise bad(folder, f"tensor {fqn!r}: a chunk {list(stored.shape)} at {list(offset)} lies outside its "
                              f"size {list(shape)}")
        pieces.append((offset, stored))
    covered = sum(math.prod(s.shape) for _, s in pieces)
    if covered != math.prod(shape):
        raise bad(folder, f"tensor {fqn!r}: its chunks hold {covered} of {math.prod(shape)} elements")
    return _assemble(fqn, dtype, shape, pieces)


def _assemble(name: str, dtype: str, shape: tuple, pieces: list) -> TensorEntry:
    """One chunk, or chunks stacked along dim 0: byte ranges. Anything else: gathered."""
    entries = [s.entry(name) for _, s in pieces]
    along0 = all(s.shape[1:] == shape[1:] and all(o == 0 for o in off[1:]) for off, s in pieces)
    rows = [off[0] for off, _ in pieces] if shape else []
    along0 = along0 and rows == [sum(s.shape[0] for _, s in pieces[:i]) for i in range(len(pieces))]
    if along0 and all(e.source is None for e in entries):
        first = entries[0]
        if len(entries) == 1:
            return TensorEntry(name, first.file, dtype, shape, first.start, first.end)
        parts = tuple((e.file, e.start, e.end) for e in entries)
        return TensorEntry(name, first.file, dtype, shape, first.start, first.end, parts=parts)

    def gather() -> np.ndarray:
        from evalkit.checkpoints.tensors import read_bits

        out, seen = np.empty(shape, DTYPES[dtype][1]), np.zeros(shape, bool)
        for (off, stored), entry in zip(pieces, entries, strict=True):
            where = tuple(slice(o, o + n) for o, n in zip(off, stored.shape, strict=True))
            out[where] = read_bits(entry).reshape(stored.shape)
            seen[where] = True
        if not seen.all():  # as many elements as the size, but two chunks overlap: a gap is left
            raise bad(entries[0].file, f"tensor {name!r}: its chunks overlap and leave {int((~seen).sum())} "
                                       "elements unwritten")
        return out.reshape(-1)

    n = math.prod(shape) * DTYPES[dtype][0]
    return TensorEntry(name, entries[0].file, dtype, shape, 0, n, source=gather)
