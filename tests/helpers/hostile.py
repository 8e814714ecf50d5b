"""Hostile files of the formats evalkit reads from other tools: small files that declare big or
malformed things (issue 43). Each writer makes the file as its tool lays it out, then breaks one
thing, so a reader is tested on what an attacker or a corrupted disk can hand it.

    pth_view(path, elements=2**35)     # a 1.4 KB torch.save zip: a stride-0 view of 2**35 floats
    tb_events(folder, {1: 0.2, 2: 0.3}) # a TensorBoard event file (tensorboard's own writer)
"""

from __future__ import annotations

import json
import pickle
import struct
import zipfile
from pathlib import Path


def pth_view(path: Path, elements: int = 2**35, legacy: bool = False) -> Path:
    """torch.save of {"w": a 4-float storage viewed with stride 0 as `elements` floats}."""
    import torch

    view = torch.zeros(4).as_strided((elements,), (0,))
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"w": view}, path, _use_new_zipfile_serialization=not legacy)
    return path


def pth_meta(path: Path) -> Path:
    """torch.save of a meta tensor: torch writes `_rebuild_meta_tensor_no_storage`, no bytes."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model.norm.weight": torch.empty(32, device="meta")}, path)
    return path


def pth_deep(path: Path, depth: int = 200_000) -> Path:
    """A torch.save zip whose data.pkl is {"w": [[[...]]]} nested `depth` deep (EMPTY_LIST x depth,
    APPEND x depth-1): the weights-only unpickler builds it without recursing."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save({"w": torch.ones(2)}, tmp)
    deep = b"\x80\x02}X\x01\x00\x00\x00w" + b"]" * depth + b"a" * (depth - 1) + b"s."
    with zipfile.ZipFile(tmp) as zin, zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, deep if info.filename.endswith("data.pkl") else zin.read(info.filename))
    tmp.unlink()
    return path


def verl_world(folder: Path, world: int, ranks=(0,), fsdp_world=None) -> Path:
    """A verl actor folder whose shard files are named for world size `world` (ranks `ranks`
    present) and whose fsdp_config.json says `fsdp_world` (default `world`)."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    for rank in ranks:
        torch.save({"model.norm.weight": torch.ones(4)}, folder / f"model_world_size_{world}_rank_{rank}.pt")
    (folder / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2,
                                                         "world_size": world if fsdp_world is None else fsdp_world}))
    return folder


def dcp_metadata(folder: Path, change) -> Path:
    """A DCP folder's .metadata re-pickled with torch's own classes after `change(metadata)`."""
    from torch.distributed.checkpoint import FileSystemReader

    meta = FileSystemReader(str(folder)).read_metadata()
    change(meta)
    (folder / ".metadata").write_bytes(pickle.dumps(meta))
    return folder


def tb_events(folder: Path, values: dict[int, float], tag: str = "train/frac_reward_zero_std") -> Path:
    """A TensorBoard event file written by tensorboard's EventFileWriter: one scalar per step."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    folder.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(folder))
    for step, value in values.items():
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
        writer.add_event(event_pb2.Event(step=step, wall_time=1.0, summary=summary))
    writer.close()
    return next(folder.glob("events.out.tfevents.*"))


def tb_records(path: Path) -> list[tuple[int, int]]:
    """(offset, length) of every TFRecord of an event file (uint64 length, crc, data, crc)."""
    data, at, out = path.read_bytes(), 0, []
    while at + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, at)
        out.append((at, length))
        at += 12 + length + 4
    return out


def tb_float_at(path: Path, record: int, old: float, new: float, fix_crc: bool = False) -> None:
    """Replace the float32 `old` inside record `record` by `new` (its CRC left stale unless `fix_crc`)."""
    from tensorboard.summary.writer.record_writer import masked_crc32c

    data = bytearray(path.read_bytes())
    at, length = tb_records(path)[record]
    body = bytes(data[at + 12:at + 12 + length])
    packed = struct.pack("<f", old)
    assert body.count(packed) == 1
    body = body.replace(packed, struct.pack("<f", new))
    data[at + 12:at + 12 + length] = body
    if fix_crc:
        data[at + 12 + length:at + 16 + length] = struct.pack("<I", masked_crc32c(body))
    path.write_bytes(bytes(data))


def tb_length_at(path: Path, record: int, delta: int) -> None:
    """Add `delta` to record `record`'s length field (its CRC left stale)."""
    data = bytearray(path.read_bytes())
    at, length = tb_records(path)[record]
    data[at:at + 8] = struct.pack("<Q", length + delta)
    path.write_bytes(bytes(data))
