"""Stream two (or three) safetensors checkpoints tensor by tensor and measure the update.

    evalkit diff smollm2-135m runs/grpo/ckpt --out runs/diff-grpo
    evalkit diff base/ es/ grpo/ --out runs/diff-es-vs-grpo      # two updates of one base

Tensors are paired by name, never by file, so the checkpoints may be sharded differently
(`model.safetensors.index.json`, several files without an index, or one `.safetensors` file).
Each safetensors header is parsed and validated here (8-byte little-endian length + JSON, every
offset checked against the file size) before anything is read, so a truncated or fuzzed file is
a one-line UsageError, never a crash or a hang. Data is then read chunk by chunk with
`os.preadv` at the header's offsets into fixed buffers: no file is mapped, so peak resident
memory is a few chunk buffers plus histograms, whatever the model size (safetensors' own
`safe_open` maps the whole file, and every page touched counts as resident until it is closed;
the tests check that this reader returns exactly what `safe_open` does).

Limits: float8 tensors are listed as skipped; tensors whose shape or dtype differ between the
checkpoints are listed and skipped (compare checkpoints saved in the same dtype: see
REFERENCES.md, bf16 absorbs small updates). `--rank` holds each 2-D update whole in float32 and
runs an SVD: memory and time grow with the largest matrix.
"""

from __future__ import annotations

import collections
import json
import math
import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evalkit.errors import UsageError
from metrics import weights as W

__all__ = ["TensorEntry", "Checkpoint", "DiffOptions", "DiffResult", "read_header",
           "open_checkpoint", "diff_checkpoints", "write_outputs"]

# safetensors dtype -> (bytes per element, raw-bit dtype, value dtype or None)
DTYPES = {
    "F64": (8, "<u8", "<f8"), "F32": (4, "<u4", "<f4"), "F16": (2, "<u2", "<f2"),
    "BF16": (2, "<u2", "bf16"), "I64": (8, "<u8", "<i8"), "I32": (4, "<u4", "<i4"),
    "I16": (2, "<u2", "<i2"), "I8": (1, "u1", "i1"), "U64": (8, "<u8", "<u8"),
    "U32": (4, "<u4", "<u4"), "U16": (2, "<u2", "<u2"), "U8": (1, "u1", "u1"),
    "BOOL": (1, "u1", "u1"), "F8_E4M3": (1, "u1", None), "F8_E5M2": (1, "u1", None),
}
MAX_HEADER = 100_000_000  # safetensors' own limit
INDEX = "model.safetensors.index.json"
# config.json keys that must agree; a resized vocabulary is a listed shape mismatch instead
ARCH_KEYS = ("model_type", "hidden_size", "num_hidden_layers", "intermediate_size",
             "num_attention_heads", "num_key_value_heads")


@dataclass(frozen=True)
class TensorEntry:
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


@dataclass(frozen=True)
class DiffOptions:
    atol: float = 1e-5
    rtol: float = W.BF16_RTOL
    rank: bool = False
    chunk_elems: int = 1 << 18  # 1 MB float32 temporaries: cache-friendly, bounded memory
    workers: int = 2  # tensors processed at once (threads)


@dataclass(frozen=True)
class DiffResult:
    summary: dict  # diff.json
    tensors: list = field(default_factory=list)  # one row per (tensor, update)
    overlaps: list = field(default_factory=list)  # three-way: one row per tensor


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


def _check_same_model(cps: list[Checkpoint]) -> None:
    base = cps[0]
    for other in cps[1:]:
        if base.config and other.config:
            for key in ARCH_KEYS:
                if base.config.get(key) != other.config.get(key):
                    raise UsageError(
                        f"{other.path}: different architecture from {base.path} ({key} "
                        f"{base.config.get(key)} vs {other.config.get(key)}); diff needs two "
                        "checkpoints of the same model")
        if not set(base.tensors) & set(other.tensors):
            raise UsageError(f"{other.path}: no tensor names in common with {base.path} "
                             "(different architectures?)")


class _Reader:
    """Reads chunks of tensors with os.preadv into one fixed buffer per side."""

    def __init__(self, sides: int, chunk_bytes: int):
        self.fds: dict[str, int] = {}
        self.bufs = [bytearray(chunk_bytes) for _ in range(sides)]
        self.vals = [np.empty(chunk_bytes // 2 + 1, np.float32) for _ in range(sides)]

    def bits(self, side: int, entry: TensorEntry, first: int, count: int) -> np.ndarray:
        size, bits_dtype, _ = DTYPES[entry.dtype]
        if entry.file not in self.fds:
            self.fds[entry.file] = os.open(entry.file, os.O_RDONLY)
        view = memoryview(self.bufs[side])[: count * size]
        got = os.preadv(self.fds[entry.file], [view], entry.start + first * size)
        if got != len(view):
            raise _bad(entry.file, f"truncated while reading tensor {entry.name!r}")
        return np.frombuffer(view, dtype=bits_dtype, count=count)

    def values(self, side: int, entry: TensorEntry, bits: np.ndarray) -> np.ndarray:
        kind = DTYPES[entry.dtype][2]
        if kind == "bf16":
            return W.bf16_to_f32(bits, out=self.vals[side])
        values = bits.view(kind)
        if values.dtype.kind == "f" and values.dtype.itemsize >= 4:
            return values
        wide = np.float64 if values.dtype.itemsize >= 4 else np.float32
        return values.astype(wide)

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)


def _pairs(cps: list[Checkpoint]) -> tuple[list[tuple], dict]:
    """Tensors comparable across all checkpoints (by name) and the problems found."""
    base, rest = cps[0], cps[1:]
    problems = {"missing": [], "extra": [], "mismatched": [], "skipped": []}
    for cp in rest:
        problems["extra"] += [f"{cp.label}: {n}" for n in sorted(set(cp.tensors) - set(base.tensors))]
    pairs = []
    for entry in sorted(base.tensors.values(), key=lambda e: e.name):  # same sums however sharded
        others = [cp.tensors.get(entry.name) for cp in rest]
        if any(o is None for o in others):
            where = ", ".join(cp.label for cp, o in zip(rest, others, strict=True) if o is None)
            problems["missing"].append(f"{where}: {entry.name}")
        elif any((o.dtype, o.shape) != (entry.dtype, entry.shape) for o in others):
            described = [f"{e.dtype}{list(e.shape)}" for e in (entry, *others)]
            problems["mismatched"].append(f"{entry.name}: " + " vs ".join(described))
        elif DTYPES[entry.dtype][2] is None:
            problems["skipped"].append(f"{entry.name}: {entry.dtype} is not supported")
        else:
            pairs.append((entry, *others))
    return pairs, problems


def _tied(cp: Checkpoint) -> list[str]:
    cfg = cp.config or {}
    tied = cfg.get("tie_word_embeddings", False)
    return [f"{cp.label}: lm_head.weight tied to the input embedding "
            f"({'stored' if 'lm_head.weight' in cp.tensors else 'not stored'})"] if tied else []


def _diff_tensor(reader: _Reader, entries: tuple, opts: DiffOptions, on_bytes) -> tuple:
    """Stream one tensor (2 or 3 sides) chunk by chunk: per-update stats, overlap, full deltas."""
    n, ups = entries[0].numel, len(entries) - 1
    accs = [W.new_stats() for _ in range(ups)]
    overlap = W.new_overlap() if ups == 2 else None
    full = ([np.empty(n, np.float32) for _ in range(ups)]
            if opts.rank and len(entries[0].shape) == 2 else None)
    for first in range(0, n, opts.chunk_elems):
        count = min(opts.chunk_elems, n - first)
        bits = [reader.bits(i, e, first, count) for i, e in enumerate(entries)]
        vals = [reader.values(i, e, b) for i, (e, b) in enumerate(zip(entries, bits, strict=True))]
        deltas = []
        for j in range(1, ups + 1):  # deltas are needed whole only for overlap and rank
            d = W.delta(vals[0], vals[j]) if overlap is not None or full is not None else None
            W.chunk_stats(accs[j - 1], bits[0], bits[j], vals[0], vals[j], d,
                          atol=opts.atol, rtol=opts.rtol)
            deltas.append(d)
            if full is not None:
                full[j - 1][first:first + count] = d
        if overlap is not None:
            part = W.overlap_chunk(bits[0], bits[1], bits[2], deltas[0], deltas[1])
            for key in overlap:
                overlap[key] += part[key]
        on_bytes(sum(count * DTYPES[e.dtype][0] for e in entries))
    ranks = [W.update_rank(f.reshape(entries[0].shape)) for f in full] if full else [None] * ups
    return accs, overlap, ranks


def _stream(pairs: list[tuple], opts: DiffOptions, sides: int, on_bytes):
    """Yield (entries, accs, overlap, ranks) per tensor, in order; `opts.workers` threads.

    numpy releases the GIL inside its loops, so tensors overlap on several cores. At most
    2 x workers tensors are in flight, which keeps memory bounded (one reader per thread).
    """
    readers: queue.SimpleQueue = queue.SimpleQueue()
    made = [_Reader(sides, opts.chunk_elems * 8) for _ in range(max(1, opts.workers))]
    for reader in made:
        readers.put(reader)

    def one(entries: tuple) -> tuple:
        reader = readers.get()
        try:
            return (entries, *_diff_tensor(reader, entries, opts, on_bytes))
        finally:
            readers.put(reader)

    try:
        if opts.workers <= 1:
            yield from map(one, pairs)
            return
        with ThreadPoolExecutor(opts.workers) as pool:
            window: collections.deque = collections.deque()
            for entries in pairs:
                window.append(pool.submit(one, entries))
                if len(window) >= 2 * opts.workers:
                    yield window.popleft().result()
            while window:
                yield window.popleft().result()
    finally:
        for reader in made:
            reader.close()


def diff_checkpoints(args: list[str], opts: DiffOptions = DiffOptions(), progress=None) -> DiffResult:
    """Compare BASE with OTHER (or BASE with A and B): see the module docstring.

    `progress(done_bytes, total_bytes)` is called after every chunk.
    """
    if len(args) not in (2, 3):
        raise UsageError("give two checkpoints (BASE OTHER) or three (BASE A B)")
    cps = [open_checkpoint(a) for a in args]
    _check_same_model(cps)
    pairs, problems = _pairs(cps)
    if not pairs:
        raise UsageError(f"{cps[1].path}: no tensor could be compared with {cps[0].path} "
                         f"({len(problems['mismatched'])} shape/dtype mismatches)")
    labels = ["other"] if len(cps) == 2 else ["A", "B"]
    total = sum(e.end - e.start for group in pairs for e in group)
    done, lock = [0], threading.Lock()

    def on_bytes(nbytes: int) -> None:
        with lock:
            done[0] += nbytes
            if progress:
                progress(done[0], total)

    groups = {lab: {"overall": W.new_stats(), "kinds": {}, "layers": {}} for lab in labels}
    ov_groups = {"overall": W.new_overlap(), "kinds": {}, "layers": {}}
    rows, ov_rows = [], []
    for entries, accs, overlap, ranks in _stream(pairs, opts, len(cps), on_bytes):
        name = entries[0].name
        kind, layer = W.module_kind(name), W.layer_index(name)
        for lab, acc, rank in zip(labels, accs, ranks, strict=True):
            rows.append(_row(entries[0], lab, kind, layer, W.finish_stats(acc), rank))
            _add(groups[lab], kind, layer, acc, W.new_stats, W.merge_stats)
        if overlap is not None:
            ov_rows.append({"tensor": name, "kind": kind, "layer": layer,
                            **W.finish_overlap(overlap)})
            _add(ov_groups, kind, layer, overlap, W.new_overlap, _sum_into)
    summary = _summary(cps, labels, opts, groups, ov_groups, rows, problems)
    return DiffResult(summary, rows, ov_rows)


def _sum_into(acc: dict, part: dict) -> dict:
    for key in acc:
        acc[key] += part[key]
    return acc


def _add(group: dict, kind: str, layer: int | None, acc: dict, new, merge) -> None:
    """Merge one tensor's accumulator into overall, its module kind and its layer."""
    merge(group["overall"], acc)
    merge(group["kinds"].setdefault(kind, new()), acc)
    if layer is not None:
        merge(group["layers"].setdefault(layer, new()), acc)


def _row(entry: TensorEntry, label: str, kind: str, layer, stats: dict, rank) -> dict:
    row = {"tensor": entry.name, "update": label, "kind": kind, "layer": layer,
           "dtype": entry.dtype, "shape": "x".join(map(str, entry.shape)), **stats}
    if rank is not None:
        row.update(rank)
    return row


def _rank_summary(rows: list[dict]) -> dict | None:
    ranked = [r for r in rows if "rank_ratio" in r]
    if not ranked:
        return None
    ratios = np.array([r["rank_ratio"] for r in ranked])
    return {"matrices": len(ranked), "mean_rank_ratio": float(ratios.mean()),
            "min_rank_ratio": float(ratios.min()), "full_rank": int((ratios == 1).sum())}


def _summary(cps, labels, opts, groups, ov_groups, rows, problems) -> dict:
    finish = W.finish_stats
    updates = {}
    for lab in labels:
        g = groups[lab]
        updates[lab] = {
            "overall": finish(g["overall"]),
            "kinds": {k: finish(v) for k, v in sorted(g["kinds"].items())},
            "layers": {str(i): finish(v) for i, v in sorted(g["layers"].items())},
            "rank": _rank_summary([r for r in rows if r["update"] == lab]),
        }
    roles = ["base", *labels]
    summary = {
        "kind": "diff",
        "inputs": {role: {"name": cp.label, "path": cp.path, "tensors": len(cp.tensors),
                          "files": len({e.file for e in cp.tensors.values()})}
                   for role, cp in zip(roles, cps, strict=True)},
        "options": {"atol": opts.atol, "rtol": opts.rtol, "rank": opts.rank},
        "conventions": {
            "changed_bits": "raw bit patterns differ (bf16/fp16 as uint16): +0/-0 counts as "
                            "changed, identical NaNs as unchanged",
            "changed_atol": "|other - base| > atol", "changed_rel": "|other - base| > rtol*|base|",
            "nonfinite": "entries with NaN/Inf on either side are counted, and left out of every "
                         "delta statistic",
            "concentration": "share of ||delta||^2 in the top q of entries, from a 2^16-bin |delta| "
                             "histogram (cut bin interpolated by its mean square)",
        },
        "tensors_compared": len(rows) // len(labels),
        "updates": updates,
        **problems,
        "tied": [t for cp in cps for t in _tied(cp)],
    }
    if len(labels) == 2:
        fo = W.finish_overlap
        summary["overlap"] = {
            "overall": fo(ov_groups["overall"]),
            "kinds": {k: fo(v) for k, v in sorted(ov_groups["kinds"].items())},
            "layers": {str(i): fo(v) for i, v in sorted(ov_groups["layers"].items())},
        }
    return summary


def _clean(obj):
    """NaN/Inf -> None so diff.json is strict JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    return obj


def write_outputs(result: DiffResult, out: Path) -> list[Path]:
    """diff.json, tensors.csv (one row per tensor and update), overlap.csv (three-way)."""
    import pandas as pd

    from evalkit.runstore import write_json_atomic

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "diff.json", _clean(result.summary))
    written = [out / "diff.json"]
    for name, rows in (("tensors.csv", result.tensors), ("overlap.csv", result.overlaps)):
        if rows:
            tmp = out / f".{name}.tmp{os.getpid()}"
            pd.DataFrame(rows).to_csv(tmp, index=False)
            os.replace(tmp, out / name)
            written.append(out / name)
    return written
