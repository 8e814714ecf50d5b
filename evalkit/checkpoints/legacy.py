"""torch.save files in the legacy layout (before torch 1.6: not a zip), read weights-only.

    from evalkit.checkpoints.legacy import read_legacy
    tree = read_legacy("old.pth")   # the saved object, tensors as `Loaded`

Writer: pytorch `torch/serialization.py` `_legacy_save`: pickles of the magic number, the
protocol version and sys info, then the object (storages as persistent ids), then the storage
keys, then each storage's bytes. `torch.load(weights_only=True)` reads it whole, and allocates
each storage at the size its pickle declares before reading it: so the declared sizes and every
tensor view are first read here with empty (meta) storages and checked against the file's size.
Limits: the whole state dict is held in memory once loaded (these files have no byte ranges to
stream from); views into a storage (`view_metadata`) are checked against their root storage.
"""

from __future__ import annotations

import os
import struct

from evalkit.checkpoints.pickled import Loaded, check_view, refusal, walk
from evalkit.checkpoints.tensors import TORCH_DTYPES, bad

__all__ = ["read_legacy"]


def read_legacy(path: str):
    """A pre-1.6 (not zip) torch.save file, loaded whole with weights_only=True, after its
    declared sizes are checked against the file's (`_legacy_sizes`)."""
    import pickle

    import torch

    _check_sizes(path)
    try:
        tree = torch.load(path, map_location="cpu", weights_only=True, mmap=False)
    except pickle.UnpicklingError as exc:
        raise refusal(path, exc) from None
    except Exception as exc:  # corrupt files raise RuntimeError, EOFError, ...
        raise bad(path, f"not a readable torch.save file ({type(exc).__name__}: {str(exc)[:100]})") from None

    def one(t, name):
        dtype = TORCH_DTYPES.get(str(t.dtype).removeprefix("torch."))
        if dtype is None:
            raise bad(path, f"tensor {name}: a tensor of {t.dtype} is not read")
        return Loaded(path, dtype, tuple(t.shape), t.detach().contiguous())

    return walk(tree, one, path=path)


def _check_sizes(path: str) -> None:
    """The legacy layout (torch/serialization.py `_legacy_save`: pickles of the magic number, the
    protocol, sys info, then the object, whose `persistent_load` ids are `('storage', type, key,
    location, numel, view)`) read with meta storages: `torch.load` allocates each storage at its
    declared size before reading it, so the sizes (and every view) are checked against the file
    first."""
    import pickle

    import torch
    from torch import _weights_only_unpickler as weights_only

    file_bytes = os.path.getsize(path)
    storages, declared = {}, {}  # storage object -> its bytes; storage key in the file -> its bytes

    def persistent_load(saved_id):
        first = saved_id[0] if isinstance(saved_id, tuple) and saved_id else None
        kind = first.decode("ascii", "replace") if isinstance(first, bytes) else first  # bytes: a Python 2 pickle
        if kind != "storage" or len(saved_id) != 6:
            raise pickle.UnpicklingError(f"unexpected persistent id {str(saved_id)[:60]}")
        _, storage_type, key, _location, numel, _view = saved_id
        dtype = getattr(storage_type, "dtype", None)
        if not isinstance(numel, int) or isinstance(numel, bool) or numel < 0 or not isinstance(dtype, torch.dtype):
            raise bad(path, f"storage {str(key)[:40]!r}: declares {str(numel)[:40]} elements of {str(storage_type)[:40]}")
        nbytes = numel * torch._utils._element_size(dtype)
        raw = torch.UntypedStorage(nbytes, device="meta")
        storages[raw._cdata] = declared.setdefault(key, nbytes)
        return torch.storage.TypedStorage(wrap_storage=raw, dtype=dtype, _internal=True)

    try:
        with open(path, "rb") as fh:
            for _ in range(3):  # magic number, protocol version, sys info
                weights_only.Unpickler(fh, encoding="utf-8").load()
            up = weights_only.Unpickler(fh, encoding="utf-8")
            up.persistent_load = persistent_load
            tree = up.load()
    except pickle.UnpicklingError as exc:
        raise refusal(path, exc) from None
    except (EOFError, ValueError, TypeError, AttributeError, KeyError, IndexError, RuntimeError,
            struct.error) as exc:
        raise bad(path, f"not a readable torch.save file ({type(exc).__name__}: {str(exc)[:100]})") from None
    if sum(declared.values()) > file_bytes:
        raise bad(path, f"its storages declare {sum(declared.values())} bytes, the file holds {file_bytes}: truncated "
                        "or forged")

    def one(t, name):
        storage = storages.get(t.untyped_storage()._cdata)
        if storage is None:
            raise bad(path, f"tensor {name}: a meta tensor {list(t.shape)} with no data in the file")
        check_view(path, name, t, storage, file_bytes)

    walk(tree, one, path=path)
