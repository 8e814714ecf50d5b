"""Training curves in and out: `--report-to` loggers, and readers of other trainers' logs.

    with ScalarLogger("tensorboard", Path("runs/grpo")) as log:   # runs/grpo/tensorboard/events.out.tfevents.*
        log.log({"step": 1, "reward": 0.5, "entropy": 0.8})
    read_training_log(Path("runs/grpo/tensorboard"))                 # [{"step": 1, "reward": 0.5, ...}]

Out (`evalkit train ... --report-to tensorboard|trackio|wandb`): every numeric value of a
step's metrics record goes to the logger at that step, as TRL's `report_to` does, beside
metrics.jsonl (which stays the trainer's own record and its resume point). All offline:
TensorBoard event files under OUT/tensorboard (torch.utils.tensorboard's SummaryWriter, which
needs the `tensorboard` package), wandb in offline mode under OUT (`wandb sync` uploads it
later), trackio's local store (project `evalkit`, run named after OUT). A logger whose package
is missing is refused before training starts, in one line.

In (`read_training_log`): one list of `{"step", name: value}` records from
- evalkit's metrics.jsonl (one JSON object per line with `step`);
- TRL's trainer_state.json (`log_history`, huggingface/transformers `trainer_callback.py`
  `TrainerState`);
- verl's file logger JSONL (volcengine/verl `verl/utils/tracking.py` `FileLogger.log`:
  `{"step": step, "data": {name: value}}` per line);
- TensorBoard event files (`events.out.tfevents.*`): TFRecord framing (uint64 length, uint32
  masked CRC, data, uint32 masked CRC) around `tensorflow.Event` protobufs (step = field 2,
  summary = field 5; Summary.Value: tag = 1, simple_value = 2, tensor = 8 with float_val /
  double_val / tensor_content), decoded here with no dependency (tensorboard's own reader is
  used only by the tests, to check this one). A torn last record is ignored.
Names are kept as logged, and evalkit's names added where a known alias is present:
`reward` (TRL `train/reward`, verl `critic/score/mean`), `entropy` (`train/entropy`, verl
`actor/entropy`), `frac_reward_zero_std` (any `.../frac_reward_zero_std`), so `groups` and
`report` read every trainer's curves by one name.

Limits: images, histograms and text summaries in event files are skipped; wandb and trackio
runs are written, not read back (read their exports as JSONL).
"""

from __future__ import annotations

import json
import math
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.schema import Float, Int, check, json_lines, read_json

__all__ = ["REPORT_TO", "ScalarLogger", "check_report_to", "read_training_log", "read_event_file", "ALIASES",
           "find_training_log"]

REPORT_TO = ("none", "tensorboard", "trackio", "wandb")
ALIASES = {  # evalkit's name -> the names other trainers log it under
    "reward": ("train/reward", "critic/score/mean"),
    "entropy": ("train/entropy", "actor/entropy"),
    "frac_reward_zero_std": ("train/frac_reward_zero_std",),
}
PACKAGES = {"tensorboard": "tensorboard", "trackio": "trackio", "wandb": "wandb"}


# ---------------------------------------------------------------- out


def check_report_to(kind: str) -> None:
    """Refuse a logger whose package is not installed (one line, before any work)."""
    if kind == "none":
        return
    if kind not in REPORT_TO:
        raise UsageError(f"--report-to {kind}: choose {', '.join(REPORT_TO)}")
    import importlib.util

    if importlib.util.find_spec(PACKAGES[kind]) is None:
        raise UsageError(f"--report-to {kind}: the {PACKAGES[kind]} package is not installed "
                         f"(pip install -c constraints.txt {PACKAGES[kind]}); metrics.jsonl is written without it")


def _scalars(record: dict) -> dict[str, float]:
    return {k: float(v) for k, v in record.items() if k != "step" and isinstance(v, int | float)
            and not isinstance(v, bool) and math.isfinite(v)}


class ScalarLogger:
    """`log(record)`: the record's numeric values at `record["step"]` to the logger, flushed at
    once (a killed run keeps what it logged); `close()` ends the logger's run."""

    def __init__(self, kind: str, out: Path):
        check_report_to(kind)
        self.kind, out = kind, Path(out)
        if kind == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter

            self._run = SummaryWriter(log_dir=str(out / "tensorboard"))
        elif kind == "wandb":
            import wandb

            self._run = wandb.init(project="evalkit", name=out.name, dir=str(out), mode="offline")
        elif kind == "trackio":
            import trackio

            trackio.init(project="evalkit", name=out.name, resume="allow")
            self._run = trackio  # trackio logs through its module functions (log, finish)
        else:
            self._run = None

    def log(self, record: dict) -> None:
        values, step = _scalars(record), int(record["step"])
        if self.kind == "tensorboard":
            for name, value in values.items():
                self._run.add_scalar(name, value, step)
            self._run.flush()
        elif self.kind in ("wandb", "trackio"):
            self._run.log(values, step=step)

    def close(self) -> None:
        if self.kind == "tensorboard":
            self._run.close()
        elif self.kind in ("wandb", "trackio"):
            self._run.finish()

    def __enter__(self) -> ScalarLogger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------- in


def find_training_log(folder: Path) -> Path | None:
    """The training log a folder holds, in this order: metrics.jsonl, trainer_state.json, the
    newest TensorBoard event file (also under tensorboard/), a verl file-logger JSONL."""
    folder = Path(folder)
    for name in ("metrics.jsonl", "trainer_state.json"):
        if (folder / name).is_file():
            return folder / name
    events = sorted([*folder.glob("events.out.tfevents.*"), *folder.glob("tensorboard/events.out.tfevents.*")])
    if events:
        return events[-1]
    for path in sorted(folder.glob("*.jsonl")):
        if _is_verl_log(path):
            return path
    return None


def _is_verl_log(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            first = json.loads(fh.readline())
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(first, dict) and set(first) == {"step", "data"} and isinstance(first["data"], dict)


# evalkit's names, typed: a value outside its range is a misread log, named, not a point on a curve
# (NaN is kept: a trainer logs NaN when a step diverged)
TYPED = {"step": Int(), "reward": Float(finite=False), "entropy": Float(min=0, finite=False),
         "frac_reward_zero_std": Float(min=0, max=1, finite=False)}


def read_training_log(path: Path, salvage: bool = False) -> list[dict]:
    """`{"step", name: value}` records of any log above (a file, or a folder holding one),
    with evalkit's names added for known aliases; a UsageError when it is none of them, or
    when a record's step or one of evalkit's names (`TYPED`) is not of its type and range.
    `salvage`: a TensorBoard file's torn or corrupt records are skipped (`read_event_file`)."""
    path = Path(path)
    if path.is_dir():
        found = find_training_log(path)
        if found is None:
            raise UsageError(f"{path}: no metrics.jsonl, trainer_state.json, TensorBoard event file or verl "
                             "file-logger JSONL in the folder")
        path = found
    if not path.is_file():
        raise UsageError(f"{path}: no such training log")
    if path.name.startswith("events.out.tfevents"):
        records = [(f"{path}: step {r['step']}", r) for r in read_event_file(path, salvage)]
    elif path.suffix == ".jsonl":
        records = [(f"{path}:{n}", _unwrap(r)) for n, r in json_lines(path, "training log", torn_ok=True)]
    else:
        records = _trainer_state(path)
    return [_typed(_with_aliases(r), where) for where, r in records if isinstance(r, dict) and "step" in r]


def _typed(record: dict, where: str) -> dict:
    for name, kind in TYPED.items():
        if name in record:
            record[name] = check(kind, record[name], f"{where}: field {name!r}")
    return record


def _unwrap(record):
    """verl's `{"step", "data": {...}}` as one flat record; others as they are."""
    if isinstance(record, dict) and set(record) == {"step", "data"} and isinstance(record["data"], dict):
        return {"step": record["step"], **record["data"]}
    return record


def _with_aliases(record: dict) -> dict:
    out = record  # a record read here, owned here: extended in place (one dict per step)
    for name, others in ALIASES.items():
        if name not in out:
            hit = next((k for k in (*others, *(k for k in record if k.endswith("/" + name))) if k in record), None)
            if hit is not None:
                out[name] = record[hit]
    return out


def _trainer_state(path: Path) -> list:
    data = read_json(path, "TRL trainer_state.json")
    if not isinstance(data, dict) or not isinstance(data.get("log_history"), list):
        raise UsageError(f"{path}: expected TRL trainer_state.json with a log_history list, a .jsonl log or an "
                         "events.out.tfevents file")
    return [(f"{path}: log_history[{i}]", r) for i, r in enumerate(data["log_history"])]


# ---------------------------------------------------------------- TensorBoard event files

_CRC_TABLE: list[int] = []


def _crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord frames use it; pure
    Python, about 10 MB/s."""
    if not _CRC_TABLE:
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            _CRC_TABLE.append(c)
    crc, table = 0xFFFFFFFF, _CRC_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC (tensorflow `core/lib/hash/crc32c.h` `Mask`; tensorboard
    `summary/writer/record_writer.py` `masked_crc32c`): rotate right by 15, add 0xa282ead8."""
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _record_at(data: bytes, at: int) -> tuple[bytes | None, str | None]:
    """(the event bytes of the TFRecord at `at`, None) or (None, why it is not a whole, intact record)."""
    if at + 12 > len(data):
        return None, "the file ends inside a record's header (torn)"
    (length,) = struct.unpack_from("<Q", data, at)
    if struct.unpack_from("<I", data, at + 8)[0] != masked_crc32c(data[at:at + 8]):
        return None, "its length field fails its CRC (corrupt)"
    if at + 12 + length + 4 > len(data):
        return None, f"its {length} bytes run past the end of the file (torn)"
    payload = data[at + 12:at + 12 + length]
    if struct.unpack_from("<I", data, at + 12 + length)[0] != masked_crc32c(payload):
        return None, "its data fails its CRC (corrupt)"
    return payload, None


def _resync(data: bytes, at: int) -> int:
    """The next offset after `at` where a whole, intact record starts (len(data) when none)."""
    for start in range(at + 1, len(data) - 15):
        if _record_at(data, start)[0] is not None:
            return start
    return len(data)


def read_event_file(path: Path, salvage: bool = False) -> list[dict]:
    """One record per step: every scalar summary value of the file's events at that step.

    Each record's two masked CRCs (length and data) are checked. A torn or corrupt record stops
    the read with one line naming it and the last good step; `salvage` keeps the intact records
    instead, before and after it (found again by their CRCs), and warns what was skipped."""
    import warnings

    by_step: dict[int, dict] = {}
    data = Path(path).read_bytes()
    at, count, last, skipped = 0, 0, None, []
    while at < len(data):
        payload, why = _record_at(data, at)
        if payload is not None:
            try:
                step, values = _event(payload)
            except (UsageError, IndexError, struct.error, UnicodeDecodeError):
                payload, why = None, "its data is not a readable Event protobuf"
        if payload is None:
            if at == 0 and not salvage and count == 0 and why.endswith("(corrupt)"):
                raise UsageError(f"{path}: not a TensorBoard event file (the first record {why})")
            after = f"after step {last}" if last is not None else "before any step"
            if not salvage:
                raise UsageError(f"{path}: record {count + 1} at byte {at}: {why}; the last good step is "
                                 f"{last if last is not None else 'none'} ({count} records read); rerun with --salvage "
                                 "to use the intact records")
            nxt = _resync(data, at)
            skipped.append(f"bytes {at}..{nxt} {after}")
            at = nxt
            continue
        count, last = count + 1, step
        if values:
            by_step.setdefault(step, {"step": step}).update(values)
        at += 12 + len(payload) + 4
    if skipped:
        warnings.warn(f"{path}: --salvage: {len(skipped)} unreadable stretches skipped ({'; '.join(skipped[:3])}); "
                      f"{count} intact records read", stacklevel=2)
    return [by_step[s] for s in sorted(by_step)]


def _fields(buf: bytes) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value) of a protobuf message: varints as ints, 64/32-bit as raw
    bytes, length-delimited as bytes."""
    at = 0
    while at < len(buf):
        key, at = _varint(buf, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(buf, at)
        elif wire == 1:
            value, at = buf[at : at + 8], at + 8
        elif wire == 2:
            size, at = _varint(buf, at)
            value, at = buf[at : at + size], at + size
        elif wire == 5:
            value, at = buf[at : at + 4], at + 4
        else:
            raise UsageError(f"unreadable protobuf (wire type {wire}) in a TensorBoard event")
        yield number, wire, value


def _varint(buf: bytes, at: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = buf[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, at
        shift += 7


def _event(buf: bytes) -> tuple[int, dict]:
    step, values = 0, {}
    for number, _, value in _fields(buf):
        if number == 2:
            step = value - (1 << 64) if value >= 1 << 63 else value  # int64 as a varint
        elif number == 5:
            for n, _, v in _fields(value):
                if n == 1:
                    tag, scalar = _summary_value(v)
                    if tag is not None and scalar is not None:
                        values[tag] = scalar
    return step, values


def _summary_value(buf: bytes) -> tuple[str | None, float | None]:
    tag = scalar = None
    for number, wire, value in _fields(buf):
        if number == 1:
            tag = sys.intern(value.decode("utf-8", "replace"))  # one string per tag, not per step
        elif number == 2 and wire == 5:
            (scalar,) = struct.unpack("<f", value)
        elif number == 8:
            scalar = _tensor_scalar(value)
    return tag, scalar


def _tensor_scalar(buf: bytes) -> float | None:
    """The value of a one-element DT_FLOAT (1) or DT_DOUBLE (2) TensorProto."""
    dtype, floats = 1, []
    for number, _wire, value in _fields(buf):
        if number == 1:
            dtype = value
        elif number == 4:  # tensor_content: packed little-endian values
            fmt = "<d" if dtype == 2 else "<f"
            floats += [x for (x,) in struct.iter_unpack(fmt, value)] if len(value) % struct.calcsize(fmt) == 0 else []
        elif number == 5:
            floats += [x for (x,) in struct.iter_unpack("<f", value)]  # packed (wire 2) or one (wire 5)
        elif number == 6:
            floats += [x for (x,) in struct.iter_unpack("<d", value)]
    return float(floats[0]) if len(floats) == 1 and dtype in (1, 2) else None
