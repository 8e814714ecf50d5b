"""What a torch.save pickle becomes, for both layouts (the zip: `torchzip`; the legacy one:
`legacy`): its tensors walked by key path with nesting bounded, each view checked against its
storage and its file before anything is allocated, a loaded tensor's entry, and the one-line
refusal of a pickle asking for more than tensors.

    tree = walk(tree, lambda tensor, name: ..., path=file)   # nested past MAX_DEPTH: refused
    check_view(file, "'w'", tensor, storage_bytes, file_bytes)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from evalkit.checkpoints.tensors import DTYPES, TensorEntry, bad

__all__ = ["refusal", "check_view", "walk", "Loaded"]


def refusal(path, exc: Exception) -> Exception:
    """The one line for a pickle that weights-only loading will not build."""
    text = str(exc).strip()
    needs = next((line.strip() for line in text.splitlines() if "GLOBAL" in line or "global" in line),
                 text.splitlines()[0] if text else type(exc).__name__)
    return bad(path, f"refused: the pickle asks for more than tensors and plain containers ({needs[:160]}); "
                     "evalkit loads checkpoints with torch.load(weights_only=True) only, a checkpoint being "
                     "untrusted input")


def check_view(path: str, name: str, t, storage_bytes: int, file_bytes: int) -> None:
    """A tensor's view lies inside its storage, and reading it takes no more bytes than its file
    holds: a view whose strides overlap (stride 0, `expand`) is not expanded past the file's size,
    so a 1.6 KB file cannot ask for 128 GiB."""
    size = t.element_size()
    extent = (t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True)) + 1
              if t.numel() else 0)
    if extent * size > storage_bytes:
        raise bad(path, f"tensor {name}: its view {list(t.shape)} (strides {list(t.stride())}) reaches past the end "
                        f"of its {storage_bytes}-byte storage")
    if t.numel() * size > file_bytes:
        raise bad(path, f"tensor {name}: {t.numel()} elements ({t.numel() * size} bytes) viewed over a storage of "
                        f"{storage_bytes} bytes (strides {list(t.stride())}), more than the file's {file_bytes} bytes; "
                        "evalkit reads no tensor larger than the file holding it")


def walk(tree, fn, name: str = "", depth: int = 0, path=None):
    """`fn(tensor, name)` on every tensor of a saved object (`name`: its key path); containers
    nested more than `MAX_DEPTH` levels are refused (a pickle builds any depth without recursing)."""
    import torch

    from evalkit.schema import MAX_DEPTH

    if depth > MAX_DEPTH:
        raise bad(path or "?", f"the saved object is nested more than {MAX_DEPTH} levels deep; not a state dict")
    if isinstance(tree, torch.Tensor):
        return fn(tree, repr(name.lstrip(".")) if name else "(the saved tensor)")
    if isinstance(tree, dict):
        return {k: walk(v, fn, f"{name}.{k}", depth + 1, path) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        items = [walk(v, fn, f"{name}[{i}]", depth + 1, path) for i, v in enumerate(tree)]
        return items if isinstance(tree, list) else tuple(items)
    return tree


@dataclass(frozen=True)
class Loaded:
    """A tensor torch.load made (legacy files, DeepSpeed's merger): its bits read from memory."""

    file: str
    dtype: str
    shape: tuple[int, ...]
    tensor: object

    def entry(self, name: str) -> TensorEntry:
        n = math.prod(self.shape) * DTYPES[self.dtype][0]
        return TensorEntry(name, self.file, self.dtype, self.shape, 0, n, source=self._bits)

    def _bits(self) -> np.ndarray:
        import torch

        bits = {1: torch.uint8, 2: torch.uint16, 4: torch.uint32, 8: torch.uint64}[DTYPES[self.dtype][0]]
        return self.tensor.view(bits).reshape(-1).numpy()
