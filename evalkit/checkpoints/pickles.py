"""`.bin` / `.pth` / `.pt` state dicts (torch.save pickles), read with weights-only loading only.

    evalkit diff smollm2-135m runs/es/pytorch_model.pth --out runs/diff-es

Writers: transformers' `save_pretrained(safe_serialization=False)` (`pytorch_model.bin`, or
shards named by `pytorch_model.bin.index.json`'s `weight_map`), and any `torch.save(
model.state_dict(), path)` (the ES paper's accelerated code saves `pytorch_model.pth` keyed by
vLLM's parameter names: `evalkit.checkpoints.vllm` un-fuses them). Every file is read by
`evalkit.checkpoints.torchzip` (torch's weights-only unpickler; tensors stay on disk), so a
pickle needing anything beyond tensors and plain containers is refused with one line and
nothing in it runs.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.checkpoints.tensors import TensorEntry, bad
from evalkit.checkpoints.torchzip import read_torch_file, tensor_entries

__all__ = ["PICKLE_SUFFIXES", "BIN_INDEX", "pickle_files", "read_pickles"]

PICKLE_SUFFIXES = (".bin", ".pth", ".pt")
BIN_INDEX = "pytorch_model.bin.index.json"


def pickle_files(folder: Path) -> list[Path]:
    """The state-dict pickles of a folder: an index's shards, else every .bin/.pth/.pt file
    (optimizer and trainer states left out)."""
    if (folder / BIN_INDEX).is_file():
        from evalkit.checkpoints.safetensors import WEIGHT_MAP
        from evalkit.schema import check, read_json

        index = folder / BIN_INDEX
        shards = sorted(set(check(WEIGHT_MAP, read_json(index, "checkpoint index"), index,
                                  "checkpoint index")["weight_map"].values()))
        for shard in shards:
            if not (folder / shard).is_file():
                raise bad(folder / BIN_INDEX, f"names shard {shard}, which is missing")
        return [folder / s for s in shards]
    skip = ("optim", "optimizer", "scheduler", "rng_state", "training_args", "extra_state", "scaler")
    return sorted(p for p in folder.iterdir() if p.suffix in PICKLE_SUFFIXES and p.is_file()
                  and not p.name.startswith(skip))


def read_pickles(files: list[Path]) -> dict[str, TensorEntry]:
    """Every tensor of the files by name; a name in two files is refused."""
    tensors: dict[str, TensorEntry] = {}
    for file in files:
        for name, entry in tensor_entries(read_torch_file(file), file).items():
            if name in tensors:
                raise bad(file, f"tensor {name!r} also in {Path(tensors[name].file).name}")
            tensors[name] = entry
    if not tensors:
        raise bad(files[0] if files else "?", "no tensors in the state dict")
    return tensors
