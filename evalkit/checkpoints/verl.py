"""verl FSDP checkpoints: `model_world_size_{W}_rank_{r}.pt` shards, concatenated by placement.

    evalkit diff base/ checkpoints/global_step_50/actor --out runs/diff-verl

Writer: volcengine/verl `verl/utils/checkpoint/fsdp_checkpoint_manager.py` (`save_checkpoint`:
every rank `torch.save`s `model.state_dict()` taken under `SHARDED_STATE_DICT` as
`model_world_size_{W}_rank_{r}.pt`, values DTensors; rank 0 writes `fsdp_config.json`
(`FSDP_version`, `world_size`) and `huggingface/` (config.json, tokenizer)). Merged as verl's
own merger does (`verl/model_merger/fsdp_model_merger.py`, `_load_and_merge_state_dicts`): the
first `mesh.shape[-1]` ranks' local tensors, in rank order, concatenated along the `Shard(dim)`
of their placement (`Replicate`: rank 0's; on a ("ddp", "fsdp") mesh the ddp placement is
dropped); a plain tensor is concatenated along dim 0. Unlike that merger (`weights_only=False`,
then `.bfloat16()`), shards are read weights-only by `evalkit.checkpoints.torchzip`, and tensors
keep the dtype they were saved in (fp32 master weights, usually: compare a bf16 base with
`--as-dtype`). Shards along dim 0 stay on disk as byte ranges, read in rank order; other
placements are gathered when read (one tensor in memory).

Checked: `fsdp_config.json`'s world size against the shard files (all W ranks present, no
other world size), every rank's placements agree, and the merged shape is the DTensor's
global shape. Limits: `Partial` placements and FSDP + TP (2-D shard meshes) are refused, as
verl's merger refuses them.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from evalkit.checkpoints.tensors import DTYPES, TensorEntry, bad
from evalkit.checkpoints.torchzip import Stored, _DTensorStored, _state_dict, read_torch_file
from evalkit.schema import Int, Obj, check, read_json

__all__ = ["SHARD", "is_verl", "read_verl"]

SHARD = re.compile(r"^model_world_size_(\d+)_rank_(\d+)\.pt$")


def is_verl(folder: Path) -> bool:
    return any(SHARD.match(p.name) for p in folder.glob("model_world_size_*_rank_*.pt"))


FSDP_CONFIG = Obj({"world_size": Int(min=1)}, optional={"FSDP_version": Int(min=1)})


def _world_size(folder: Path) -> int:
    """fsdp_config.json's world size, checked against the shard files present (never by trying
    each declared rank: a world size of 10^9 costs what the folder's listing costs)."""
    config = folder / "fsdp_config.json"
    shards = [(int(m.group(1)), int(m.group(2)), p) for p in folder.iterdir() if (m := SHARD.match(p.name))]
    sizes = sorted({w for w, _, _ in shards})
    if not config.is_file():
        raise bad(folder, "verl FSDP shards without fsdp_config.json (verl writes it beside them)")
    world = check(FSDP_CONFIG, read_json(config, "fsdp_config.json"), config, "verl fsdp_config.json")["world_size"]
    if sizes != [world]:
        raise bad(folder, f"fsdp_config.json says world_size {world}, the shard files are for "
                          f"{', '.join(map(str, sizes))}")
    ranks = {r for _, r, p in shards if p.is_file()}
    if max(ranks, default=-1) >= world:
        raise bad(folder, f"world size {world}, but a shard names rank {max(ranks)}")
    if len(ranks) != world:
        missing = [r for r in range(len(ranks) + 1) if r not in ranks][:4]
        more = ", ..." if world - len(ranks) > len(missing) else ""
        raise bad(folder, f"world size {world}, but the shards of rank {', '.join(map(str, missing))}{more} are "
                          f"missing ({world - len(ranks)} of {world})")
    return world


def read_verl(folder: Path) -> dict[str, TensorEntry]:
    """Every tensor of a verl FSDP checkpoint folder, merged across ranks."""
    world = _world_size(folder)
    files = [folder / f"model_world_size_{world}_rank_{r}.pt" for r in range(world)]
    first = _state_dict(read_torch_file(files[0]), files[0])
    ranks = _ranks_to_merge(first, world)
    if not (isinstance(ranks, int) and 1 <= ranks <= world):
        raise bad(files[0], f"its DTensors' mesh names {ranks} ranks to merge, the folder's world size is {world}")
    dicts = [first] + [_state_dict(read_torch_file(f), f) for f in files[1:ranks]]
    tensors = {}
    for name in sorted(first):
        values = [d.get(name) for d in dicts]
        if any(v is None for v in values):
            raise bad(folder, f"tensor {name!r} is missing from some rank's shard")
        if all(isinstance(v, (Stored, _DTensorStored)) for v in values):
            tensors[name] = _merge(folder, name, values)
    return tensors


def _ranks_to_merge(state: dict, world: int) -> int:
    """verl's `_calculate_shard_configuration`: the last mesh dim's size (all ranks without DTensors)."""
    pivot = state[sorted(state)[0]]
    if not isinstance(pivot, _DTensorStored):
        return world
    if pivot.mesh_shape is None:
        if len(pivot.placements) != 1:
            raise bad(pivot.local.file, "a DTensor on a 2-D mesh whose shape this torch cannot read")
        return world
    return pivot.mesh_shape[-1]


def _merge(folder: Path, name: str, values: list) -> TensorEntry:
    if isinstance(values[0], _DTensorStored):
        placements = {v.placements for v in values}
        if len(placements) != 1:
            raise bad(folder, f"tensor {name!r}: the ranks' placements differ ({placements})")
        placement = values[0].placements
        dims = values[0].mesh_dims or ()
        if len(placement) == 2 and tuple(dims)[:1] in (("dp",), ("ddp",)):
            placement = placement[1:]  # replicated over ddp: dropped, as verl's merger does
        if len(placement) != 1:
            raise bad(folder, f"tensor {name!r}: placements {placement} (FSDP + TP) are not read")
        kind, global_shape = placement[0], values[0].shape
        locals_ = [v.local for v in values]
    else:
        kind, locals_ = None, values
        global_shape = None
    if kind is not None and kind[0] == "replicate":
        return _checked(folder, name, locals_[0].entry(name), global_shape)
    if kind is not None and kind[0] != "shard":
        raise bad(folder, f"tensor {name!r}: placement {kind[0]} is not read (verl's merger refuses it too)")
    dim = kind[1] if kind is not None else 0
    return _checked(folder, name, _concat(name, locals_, dim), global_shape)


def _checked(folder, name, entry: TensorEntry, global_shape) -> TensorEntry:
    if global_shape is not None and tuple(entry.shape) != tuple(global_shape):
        raise bad(folder, f"tensor {name!r}: the shards make {list(entry.shape)}, its DTensor says "
                          f"{list(global_shape)}")
    return entry


def _concat(name: str, locals_: list[Stored], dim: int) -> TensorEntry:
    dtypes = {s.dtype for s in locals_}
    if len(dtypes) != 1 or len({len(s.shape) for s in locals_}) != 1:
        raise bad(locals_[0].file, f"tensor {name!r}: the ranks' shards differ in dtype or rank")
    dtype, ref = dtypes.pop(), locals_[0].shape
    dim = dim % max(1, len(ref))
    if any(s.shape[:dim] + s.shape[dim + 1:] != ref[:dim] + ref[dim + 1:] for s in locals_):
        raise bad(locals_[0].file, f"tensor {name!r}: the ranks' shards do not line up along dim {dim}")
    shape = ref[:dim] + (sum(s.shape[dim] for s in locals_),) + ref[dim + 1:]
    entries = [s.entry(name) for s in locals_]
    if dim == 0 and all(e.source is None for e in entries):
        kept = [e for e in entries if e.numel] or entries[:1]
        return TensorEntry(name, kept[0].file, dtype, shape, kept[0].start, kept[0].end,
                           parts=tuple((e.file, e.start, e.end) for e in kept))

    def gather() -> np.ndarray:
        from evalkit.checkpoints.tensors import read_bits

        pieces = [read_bits(e).reshape(s.shape) for e, s in zip(entries, locals_, strict=True)]
        return np.concatenate(pieces, axis=dim).reshape(-1)

    return TensorEntry(name, entries[0].file, dtype, shape, 0, math.prod(shape) * DTYPES[dtype][0],
                       source=gather)
