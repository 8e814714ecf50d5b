"""What a `torch.save` file holds, without running its pickle and without reading its tensors.

    from evalkit.checkpoints.torchzip import read_torch_file
    tree = read_torch_file("pytorch_model.bin")   # the saved object, tensors as `Stored`
    entries = tensor_entries(tree, "pytorch_model.bin")

Writer: pytorch `torch/serialization.py` (`_save`: an uncompressed zip holding `<name>/data.pkl`,
`<name>/byteorder` and one record `<name>/data/<key>` per storage; `_load`'s `persistent_load`
names a storage by `('storage', storage type, key, location, numel)`). The pickle is run by
torch's own weights-only unpickler (`torch._weights_only_unpickler`, what
`torch.load(weights_only=True)` uses): only tensors, plain containers and the types torch
allowlists (DTensor's among them) can be built, so a pickle asking for anything else, a
`__reduce__` that would run a command for one, is refused before it does anything. Storages are
given to it as empty `meta` storages, so no tensor data is read here: each tensor becomes a
`Stored` (storage record, offset, shape, strides), and a `TensorEntry` points at its bytes in
the zip (records are stored uncompressed, so they are plain byte ranges of the file).

A torch.save blob embedded in a larger file (PyTorch DCP's `.distcp`) is read the same way
from its byte range. Files in the legacy (pre-1.6, not zip) format are read by
`torch.load(weights_only=True)` whole.

Limits: big-endian files, compressed records and non-CPU-layout tensors (sparse, quantized)
are refused with one line saying so.
"""

from __future__ import annotations

import io
import math
import os
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evalkit.checkpoints.pickled import Loaded, check_view, refusal, walk
from evalkit.checkpoints.tensors import DTYPES, TORCH_DTYPES, TensorEntry, bad

__all__ = ["Stored", "read_torch_file", "tensor_entries", "refusal"]


@dataclass(frozen=True)
class Stored:
    """A tensor of a torch.save file: its storage's bytes in the file, and its view of them."""

    file: str
    data_start: int  # absolute offset of the storage's bytes
    storage_bytes: int
    dtype: str  # safetensors dtype name
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int  # storage offset, in elements

    def contiguous(self) -> bool:
        expect, acc = [], 1
        for size in reversed(self.shape):
            expect.append(acc)
            acc *= size
        return all(s == e for s, e, n in zip(self.stride, reversed(expect), self.shape, strict=True) if n > 1)

    def entry(self, name: str) -> TensorEntry:
        """Where its bytes are: one byte range when contiguous, else a gather of its view."""
        size = DTYPES[self.dtype][0]
        n = math.prod(self.shape)
        if self.contiguous():
            start = self.data_start + self.offset * size
            return TensorEntry(name, self.file, self.dtype, self.shape, start, start + n * size)
        return TensorEntry(name, self.file, self.dtype, self.shape, 0, n * size, source=self._gather)

    def _gather(self) -> np.ndarray:
        size, bits, _ = DTYPES[self.dtype]
        with open(self.file, "rb") as fh:
            fh.seek(self.data_start)
            raw = np.frombuffer(fh.read(self.storage_bytes), dtype=bits)
        view = np.lib.stride_tricks.as_strided(raw[self.offset:], self.shape,
                                               [s * size for s in self.stride], writeable=False)
        return np.ascontiguousarray(view).reshape(-1)


class _Window(io.RawIOBase):
    """Bytes [base, base + length) of a file as a seekable file (a blob inside a .distcp)."""

    def __init__(self, fh, base: int, length: int):
        self.fh, self.base, self.length, self.pos = fh, base, length, 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, pos, whence=0):
        self.pos = {0: pos, 1: self.pos + pos, 2: self.length + pos}[whence]
        return self.pos

    def tell(self):
        return self.pos

    def readinto(self, buf):
        n = max(0, min(len(buf), self.length - self.pos))
        self.fh.seek(self.base + self.pos)
        got = self.fh.readinto(memoryview(buf)[:n])
        self.pos += got
        return got


@dataclass(frozen=True)
class _Info:
    filename: str
    compress_type: int
    file_size: int
    header_offset: int


class _CentralDirectory:
    """The entries of a plain (not zip64) zip from its end record and central directory: what
    `zipfile.ZipFile` reads, in a few struct calls (a DCP folder holds one zip per tensor)."""

    def __init__(self, fh, base: int, size: int):
        if size < 22:
            raise zipfile.BadZipFile("too short")
        fh.seek(base + size - 22)
        end = fh.read(22)
        if end[:4] != b"PK\x05\x06":
            raise zipfile.BadZipFile("no end record (a comment, or zip64)")
        count, cd_size, cd_offset = struct.unpack("<HII", end[10:20])
        if 0xFFFF in (count,) or 0xFFFFFFFF in (cd_size, cd_offset) or cd_offset + cd_size > size:
            raise zipfile.BadZipFile("zip64 or out of range")
        fh.seek(base + cd_offset)
        raw, at, self.infos = fh.read(cd_size), 0, {}
        for _ in range(count):
            if raw[at:at + 4] != b"PK\x01\x02":
                raise zipfile.BadZipFile("bad central directory")
            method, _, _, _, comp, plain, n, m, k = struct.unpack("<HHHIIIHHH", raw[at + 10:at + 34])
            offset = struct.unpack("<I", raw[at + 42:at + 46])[0]
            if 0xFFFFFFFF in (comp, plain, offset):
                raise zipfile.BadZipFile("zip64 entry")
            name = raw[at + 46:at + 46 + n].decode("utf-8", "replace")
            self.infos[name] = _Info(name, method, plain, offset)
            at += 46 + n + m + k
        self.fh, self.base = fh, base

    def namelist(self) -> list[str]:
        return list(self.infos)

    def infolist(self) -> list[_Info]:
        return list(self.infos.values())

    def read(self, name: str) -> bytes:
        info = self.infos[name]
        if info.compress_type != zipfile.ZIP_STORED:
            raise zipfile.BadZipFile(f"{name} is compressed")
        self.fh.seek(_data_offset(self.fh, self.base, info))
        return self.fh.read(info.file_size)


def read_torch_file(path: str | Path, base: int = 0, length: int | None = None, fh=None):
    """The object a torch.save file (or the blob at [base, base + length)) holds, its tensors
    as `Stored` (legacy files: loaded tensors). `fh`: the file, already open (DCP's blobs)."""
    path = str(path)
    if fh is None:
        with open(path, "rb") as own:
            return read_torch_file(path, base, length, own)
    fh.seek(base)
    if fh.read(4) != b"PK\x03\x04":
        if base or length is not None:
            raise bad(path, f"the record at byte {base} is not a torch.save zip")
        from evalkit.checkpoints.legacy import read_legacy

        return read_legacy(path)
    size = length if length is not None else fh.seek(0, 2)
    try:
        try:
            archive = _CentralDirectory(fh, base, size)
        except (zipfile.BadZipFile, struct.error):
            archive = zipfile.ZipFile(_Window(fh, base, size))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise bad(path, f"corrupt torch.save zip ({exc})") from None
    return _unpickle(path, fh, archive, base)


def _unpickle(path: str, fh, archive, base: int):
    import pickle

    import torch
    from torch import _weights_only_unpickler as weights_only

    names = archive.namelist()
    pkl = next((n for n in names if n.endswith("data.pkl") and n.count("/") == 1), None)
    if pkl is None:
        raise bad(path, "not a torch.save file (no data.pkl in the zip)")
    prefix = pkl[: -len("data.pkl")]
    if prefix + "byteorder" in names and archive.read(prefix + "byteorder").strip() != b"little":
        raise bad(path, "a big-endian torch.save file: not read")
    records, storages = {i.filename: i for i in archive.infolist()}, {}

    def persistent_load(saved_id):
        if not (isinstance(saved_id, tuple) and len(saved_id) == 5 and saved_id[0] == "storage"):
            raise pickle.UnpicklingError(f"unexpected persistent id {str(saved_id)[:60]}")
        _, storage_type, key, _location, numel = saved_id
        if not isinstance(numel, int) or isinstance(numel, bool) or numel < 0 or not isinstance(key, str):
            raise bad(path, f"storage {str(key)[:40]!r}: declares {str(numel)[:40]} elements, not a count")
        dtype = torch.uint8 if storage_type is torch.UntypedStorage else getattr(storage_type, "dtype", None)
        if not isinstance(dtype, torch.dtype):
            raise bad(path, f"storage {key}: {str(storage_type)[:60]} is not a storage type")
        nbytes = numel * torch._utils._element_size(dtype)
        info = records.get(f"{prefix}data/{key}")
        if info is None or info.compress_type != zipfile.ZIP_STORED or info.file_size < nbytes:
            raise bad(path, f"storage {key} is missing, compressed or shorter than its {nbytes} bytes")
        raw = torch.UntypedStorage(nbytes, device="meta")
        storages[raw._cdata] = (_data_offset(fh, base, info), nbytes)
        return torch.storage.TypedStorage(wrap_storage=raw, dtype=dtype, _internal=True)

    raw = archive.read(pkl)

    def load():
        up = weights_only.Unpickler(io.BytesIO(raw), encoding="utf-8")
        up.persistent_load = persistent_load
        return up.load()

    try:
        tree = _load_dtensors(load) if b"torch.distributed.tensor" in raw else load()
    except pickle.UnpicklingError as exc:
        raise refusal(path, exc) from None
    except (EOFError, ValueError, TypeError, AttributeError, KeyError, IndexError, RuntimeError,
            struct.error) as exc:
        raise bad(path, f"corrupt pickle in the torch.save file ({type(exc).__name__}: "
                        f"{str(exc)[:100]})") from None
    return _stored(path, tree, storages, os.fstat(fh.fileno()).st_size)


# DTensor's pickle (torch/distributed/tensor/_api.py, _dtensor_spec.py, device_mesh.py,
# placement_types.py): a wrapper subclass whose state holds `_local_tensor` and `_spec`
# (DTensorSpec: mesh, placements, tensor_meta), every object NEWOBJ + a state dict. Read here
# with plain records in their place: importing torch.distributed.tensor costs ~0.9 s and ~50 MB.
_DTENSOR_NAMES = ("torch.distributed.tensor._dtensor_spec.DTensorSpec", "torch.distributed.tensor._dtensor_spec.TensorMeta",
                  "torch.distributed.tensor._dtensor_spec.ShardOrderEntry", "torch.distributed.device_mesh.DeviceMesh",
                  "torch.distributed._mesh_layout._MeshLayout", "torch.distributed._mesh_layout._FlatLayout",
                  "torch.distributed.tensor.placement_types.Shard", "torch.distributed.tensor.placement_types.Replicate",
                  "torch.distributed.tensor.placement_types.Partial")


class _Record:
    def __init__(self, *args):  # a NamedTuple (TensorMeta) is rebuilt by calling its class
        self.args = args

    def __setstate__(self, state):
        if isinstance(state, dict):
            self.__dict__.update(state)
        else:
            self.state = state


def _standins() -> list:
    import torch

    def dispatch(cls, func, types, args=(), kwargs=None):
        raise TypeError("a DTensor read from a checkpoint is not computed with")

    records = [(type(name.rsplit(".", 1)[1], (_Record,), {}), name) for name in _DTENSOR_NAMES]
    stand_in = type("DTensor", (torch.Tensor,), {"__torch_dispatch__": classmethod(dispatch)})
    return [(stand_in, "torch.distributed.tensor.DTensor"), *records]


def _load_dtensors(load):
    """DTensors read with stand-ins (see above); a pickle naming anything else of torch.distributed
    (another torch's layout) is read with torch's own classes, imported then."""
    import logging
    import pickle
    import sys

    import torch

    if "torch.distributed.tensor" not in sys.modules:  # once imported, torch's own classes are used
        try:
            with torch.serialization.safe_globals(_standins()):
                return load()
        except pickle.UnpicklingError as exc:
            if "torch.distributed" not in str(exc) or not torch.distributed.is_available():
                raise
    import torch.distributed.tensor  # noqa: F401  (torch's unpickler then builds real DTensors; no PG needed)

    # "pickling/unpickling of the DeviceMesh occurred before the PGs were created": no PG is wanted here
    logging.getLogger("torch.distributed.device_mesh").setLevel(logging.ERROR)
    return load()


def _placement(p) -> tuple:
    """("shard", dim), ("replicate", None) or ("partial", None), real placement or stand-in."""
    kind = type(p).__name__.lower()
    if kind == "shard":
        return ("shard", int(p.dim))
    return (kind, None)


def _mesh(t) -> tuple[tuple[int, ...] | None, tuple | None]:
    """A DTensor's mesh shape and dim names (shape None when the stand-in's state does not say)."""
    raw = t._spec.mesh
    if not isinstance(raw, _Record):  # torch's own DeviceMesh
        return tuple(raw.mesh.shape), raw.mesh_dim_names
    names = getattr(raw, "_mesh_dim_names", None) or getattr(raw, "mesh_dim_names", None)
    axes = getattr(getattr(raw, "_layout", None), "axes", None)
    shape = getattr(axes, "shape", None) if axes is not None else None
    return (tuple(shape) if isinstance(shape, tuple) else None), (tuple(names) if names else None)


def _data_offset(fh, base: int, info: zipfile.ZipInfo) -> int:
    """Absolute offset of a stored record's bytes: after its local header, name and extra field."""
    fh.seek(base + info.header_offset)
    head = fh.read(30)
    if len(head) != 30 or head[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local header for {info.filename}")
    name_len, extra_len = struct.unpack("<HH", head[26:30])
    return base + info.header_offset + 30 + name_len + extra_len


def _stored(path: str, tree, storages: dict, file_bytes: int):
    """The tree with every (meta) tensor replaced by its `Stored`; DTensors keep their spec.
    Nothing is allocated for a tensor here; what reading it will take is checked now (`check_view`)."""
    import torch

    def one(t, name: str):
        if type(t).__name__ == "DTensor":
            shape, dims = _mesh(t)
            return _DTensorStored(one(t._local_tensor, name), tuple(_placement(p) for p in t._spec.placements),
                                  tuple(t.shape), shape, dims)
        dtype = TORCH_DTYPES.get(str(t.dtype).removeprefix("torch."))
        if dtype is None or t.layout != torch.strided:
            raise bad(path, f"tensor {name}: a tensor of {t.dtype} ({t.layout}) is not read")
        where = storages.get(t.untyped_storage()._cdata)
        if where is None:  # torch.save of a meta tensor: `_rebuild_meta_tensor_no_storage`, no bytes saved
            raise bad(path, f"tensor {name}: a meta tensor {list(t.shape)} with no data in the file (saved from a "
                            "model not yet materialised?)")
        start, nbytes = where
        check_view(path, name, t, nbytes, file_bytes)
        return Stored(path, start, nbytes, dtype, tuple(t.shape), tuple(t.stride()), t.storage_offset())

    return walk(tree, one, path=path)


@dataclass(frozen=True)
class _DTensorStored:
    local: Stored
    placements: tuple  # ("shard", dim), ("replicate", None), ("partial", None)
    shape: tuple[int, ...]  # the global shape
    mesh_shape: tuple[int, ...] | None  # None: not known (stand-in read of another torch's layout)
    mesh_dims: tuple | None


def tensor_entries(tree, path) -> dict[str, TensorEntry]:
    """{name: TensorEntry} of a state dict (a flat {str: tensor} mapping); `{"state_dict": ...}`
    and `{"model": ...}` wrappers are opened; non-tensor values are left out."""
    tree = _state_dict(tree, path)
    return {name: value.entry(name) for name, value in tree.items() if isinstance(value, (Stored, Loaded))}


def _state_dict(tree, path) -> dict:
    if isinstance(tree, dict):
        tensors = [v for v in tree.values() if isinstance(v, (Stored, Loaded, _DTensorStored))]
        if not tensors:
            for key in ("state_dict", "model", "module", "model_state_dict"):
                if isinstance(tree.get(key), dict):
                    return _state_dict(tree[key], path)
        if tensors and all(isinstance(k, str) for k in tree):
            return tree
    raise bad(path, "holds no state dict (a {name: tensor} mapping)")
