"""Stream two (or three) safetensors checkpoints tensor by tensor and measure the update.

    evalkit diff smollm2-135m runs/grpo/ckpt --out runs/diff-grpo
    evalkit diff base/ es/ grpo/ --out runs/diff-es-vs-grpo      # two updates of one base

Tensors are paired by name, never by file, so the checkpoints may be sharded differently
(`model.safetensors.index.json`, several files without an index, or one `.safetensors` file).
Headers are validated and data read chunk by chunk (`os.preadv` into fixed buffers, no file
mapped) by `evalkit.checkpoints`, so peak resident memory is a few chunk buffers plus
histograms, whatever the model size. Per chunk of bf16, fp16 or fp32 bits, one compiled pass
computes every figure: the C kernels (`evalkit.diff_ckernel`, built at first use by the system
compiler) or, without a compiler, numba's (`evalkit.diff_kernels`); otherwise (float64 or
integer tensors, `--rank`, `kernel="numpy"`) the numpy reference `metrics.weights.chunk_stats`
does, with identical results (see `_pick_kernel`).
With `--as-dtype`, float tensors of both sides are first rounded to that dtype (nearest even,
as torch's `.to`), so a float32 base can be compared with a bf16 trained copy.

Limits: float8 tensors are listed as skipped; tensors whose shape or dtype differ between the
checkpoints are listed and skipped (compare checkpoints saved in the same dtype, or pass
`--as-dtype`: see docs/references.md, bf16 absorbs small updates). `--rank` holds each 2-D update
whole in float32 and runs an SVD: memory and time grow with the largest matrix. Speed: about
1.3-1.7 ns of CPU per element pair with the C kernels, 4-8 ns in numpy (bit compare, index of
the changed entries, gathers, two bincounts); see `benchmarks/bench_diff.py`.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evalkit.checkpoints import FORMATS, open_checkpoint
from evalkit.checkpoints.safetensors import read_header
from evalkit.checkpoints.tensors import (
    CASTS,
    DTYPES,
    Checkpoint,
    ChunkReader,
    TensorCache,
    TensorEntry,
    cast_bits,
    layer_index,
    module_kind,
    to_values,
    value_dtype,
)
from evalkit.checkpoints.validate import same_architecture
from evalkit.errors import UsageError
from evalkit.options import ThreadsOptions, option
from metrics import weights as W

__all__ = ["Checkpoint", "DiffOptions", "DiffResult", "read_header", "open_checkpoint",
           "diff_checkpoints", "output_files", "write_outputs"]



KERNELS = ("auto", "c", "numba", "numpy")


@dataclass(frozen=True)
class DiffOptions(ThreadsOptions):
    own_defaults = {"threads": 2}

    atol: float = option(1e-5, "Absolute tolerance: |delta| <= atol counts as unchanged.", min=0)
    rtol: float = option(W.BF16_RTOL, "Relative tolerance: |delta| <= rtol*|w| counts as unchanged; default 2^-9, "
                         "half a bf16 ulp (absorbed in bf16).", min=0)
    rank: bool = option(False, "Also compute rank(delta)/min(shape) of every 2-D update (SVD: slow for big "
                        "matrices).")
    chunk_elems: int = option(1 << 19, "Elements per chunk read (2 MB float32 temporaries: few Python calls, "
                              "bounded memory).", min=1, identity=False)
    format: str = option("auto", "How OTHER (or A and B) are stored: auto (detected from the folder), "
                         "safetensors, bin (.bin/.pth/.pt), dcp, verl, deepspeed or lora (an adapter "
                         "on BASE).", choices=FORMATS, identity=False)
    as_dtype: str | None = option(None, "Round float tensors of every checkpoint to bfloat16, float16 or float32 "
                                  "(nearest even, as torch) before comparing, e.g. an fp32 base against a bf16 "
                                  "trained copy.", choices=tuple(CASTS))
    # chunk statistics: "c" (diff_kernel.c, built by the system compiler), "numba", "numpy"
    # (slowest, no compiler needed) or "auto" (see `_pick_kernel`); all give identical figures.
    # Default from $EVALKIT_DIFF_KERNEL
    kernel: str = field(default_factory=lambda: os.environ.get("EVALKIT_DIFF_KERNEL", "auto"),
                        metadata={"help": "Chunk statistics kernel: auto, c, numba or numpy (identical figures).",
                                  "choices": KERNELS, "identity": False})


@dataclass(frozen=True)
class DiffResult:
    summary: dict  # diff.json
    tensors: list = field(default_factory=list)  # one row per (tensor, update)
    overlaps: list = field(default_factory=list)  # three-way: one row per tensor


def _tied(cp: Checkpoint) -> list[str]:
    cfg = cp.config or {}
    tied = cfg.get("tie_word_embeddings", False)
    return [f"{cp.label}: lm_head.weight tied to the input embedding "
            f"({'stored' if 'lm_head.weight' in cp.tensors else 'not stored'})"] if tied else []


def _read(reader: ChunkReader, side: int, entry: TensorEntry, first: int, count: int,
          dtype: str) -> np.ndarray:
    """Raw bits of one chunk, rounded to `dtype` when the entry is stored in another."""
    bits = reader.bits(side, entry, first, count)
    return bits if entry.dtype == dtype else cast_bits(bits, entry.dtype, dtype)


AUTO_NUMBA_BYTES = 1 << 30  # without a C compiler, `auto` uses numba from 1 GiB of tensors
KERNELS = ("auto", "c", "numba", "numpy")


def _kernels(dtype: str, kernel: str):
    """The module whose `chunk_stats` / `overlap_chunk` handle chunks of `dtype`: the C
    kernels (`evalkit.diff_ckernel`), numba's (`evalkit.diff_kernels`) or None (numpy).

    Imported here, not at module import: numba costs ~0.5 s and ~130 MB resident memory."""
    if kernel == "numpy" or dtype not in ("BF16", "F16", "F32"):
        return None
    if kernel == "c":
        from evalkit import diff_ckernel

        return diff_ckernel
    from evalkit import diff_kernels

    return diff_kernels if diff_kernels.usable(dtype, kernel) else None


def _pick_kernel(kernel: str, total_bytes: int) -> str:
    """`auto`: the C kernels when a C compiler built them (cheap at any size), else numba from
    AUTO_NUMBA_BYTES (its import and first compile pay off on big checkpoints only), else numpy.
    An explicit `c` or `numba` that cannot run is a usage error saying why."""
    from evalkit import diff_ckernel

    if kernel == "c" and not diff_ckernel.available():
        raise UsageError(f"kernel 'c' cannot run: {diff_ckernel.reason()} (use auto, numba or "
                         "numpy)")
    if kernel == "numba":
        from evalkit import diff_kernels

        if not diff_kernels.available():
            raise UsageError("kernel 'numba' asked for but numba is not installed")
    if kernel != "auto":
        return kernel
    if diff_ckernel.available():
        return "c"
    return "numba" if total_bytes >= AUTO_NUMBA_BYTES else "numpy"


@dataclass
class _Tensor:
    """One tensor (2 or 3 sides) being streamed: its accumulators, filled chunk by chunk."""

    entries: tuple
    dtype: str  # the dtype its values are compared in
    kernels: object  # module with chunk_stats/overlap_chunk, or None for numpy
    accs: list  # one `metrics.weights` accumulator per update
    overlap: dict | None  # three-way only
    full: list | None  # --rank: the whole float32 deltas of a 2-D tensor
    chunks: int  # how many chunk results are still to be merged

    @classmethod
    def start(cls, entries: tuple, opts: DiffOptions) -> _Tensor:
        n, ups = entries[0].numel, len(entries) - 1
        dtype = value_dtype(entries[0].dtype, opts.as_dtype)
        full = ([np.empty(n, np.float32) for _ in range(ups)]
                if opts.rank and len(entries[0].shape) == 2 else None)
        kernels = _kernels(dtype, opts.kernel) if full is None else None
        return cls(entries, dtype, kernels, [W.new_stats() for _ in range(ups)],
                   W.new_overlap() if ups == 2 else None, full,
                   max(1, math.ceil(n / opts.chunk_elems)))

    def merge(self, part: tuple) -> None:
        """Add one chunk's results (in chunk order: the float sums depend on it)."""
        accs, overlap = part
        for acc, chunk_acc in zip(self.accs, accs, strict=True):
            W.merge_stats(acc, chunk_acc)
        if overlap is not None:
            _sum_into(self.overlap, overlap)
        self.chunks -= 1

    def result(self) -> tuple:
        shape = self.entries[0].shape
        ranks = ([W.update_rank(f.reshape(shape)) for f in self.full] if self.full
                 else [None] * len(self.accs))
        return self.entries, self.accs, self.overlap, ranks


def _diff_chunk(reader: ChunkReader, t: _Tensor, first: int, count: int,
                opts: DiffOptions) -> tuple:
    """Entries [first, first + count) of one tensor: per update, the chunk's figures (compact,
    from the reader's scratch accumulators; merged by the caller in chunk order), the overlap's
    additive counts, and the --rank deltas written in place.

    Two-way without --rank, only the base is widened whole; the other side's values are made
    where its bits differ (`widen`). Overlap and rank need the deltas whole.
    """
    entries, dtype, ups = t.entries, t.dtype, len(t.entries) - 1
    accs = reader.scratch[:ups]  # this thread's accumulators, emptied again by detach_stats
    if count == 0:
        return [W.detach_stats(acc) for acc in accs], None
    bits = [_read(reader, i, e, first, count, dtype) for i, e in enumerate(entries)]
    if t.kernels:  # one compiled pass per update (and one for the overlap)
        for j in range(1, ups + 1):
            t.kernels.chunk_stats(accs[j - 1], bits[0], bits[j], dtype, atol=opts.atol,
                                  rtol=opts.rtol)
        overlap = (t.kernels.overlap_chunk(bits[0], bits[1], bits[2], dtype)
                   if t.overlap is not None else None)
        return [W.detach_stats(acc) for acc in accs], overlap
    whole = t.overlap is not None or t.full is not None
    vals = [reader.values(i, e, b, dtype) if i == 0 or whole else None
            for i, (e, b) in enumerate(zip(entries, bits, strict=True))]
    deltas = []
    for j in range(1, ups + 1):
        d = W.delta(vals[0], vals[j]) if whole else None
        W.chunk_stats(accs[j - 1], W.Chunk(bits[0], bits[j], vals[0], vals[j], d, lambda x: to_values(x, dtype)),
                      atol=opts.atol, rtol=opts.rtol)
        deltas.append(d)
        if t.full is not None:
            t.full[j - 1][first:first + count] = d
    overlap = (W.overlap_chunk(bits[0], bits[1], bits[2], deltas[0], deltas[1])
               if t.overlap is not None else None)
    return [W.detach_stats(acc) for acc in accs], overlap


def _stream(pairs: list[tuple], opts: DiffOptions, sides: int, on_bytes):
    """Yield (entries, accs, overlap, ranks) per tensor, in order; `opts.threads` threads.

    The unit of work is a chunk, so a large tensor (the embedding) is spread over every
    thread; each chunk's figures start from empty accumulators and are merged into its
    tensor's in chunk order, so they do not depend on the thread count. The kernels and numpy release the GIL.
    At most 4 x threads chunks are in flight (one read buffer per thread), which keeps
    memory bounded.
    """
    threads = opts.threads or min(4, os.cpu_count() or 1)
    readers: queue.SimpleQueue = queue.SimpleQueue()
    cache = TensorCache()  # tensors made when read (LoRA merges, gathers): one per side at a time
    made = [ChunkReader(sides, opts.chunk_elems * 8, cache) for _ in range(threads)]
    for reader in made:
        reader.scratch = [W.new_stats() for _ in range(sides - 1)]  # per-chunk accumulators
        readers.put(reader)

    def jobs():
        for entries in pairs:
            t = _Tensor.start(entries, opts)
            n = entries[0].numel
            for first in range(0, max(n, 1), opts.chunk_elems):
                yield t, first, min(opts.chunk_elems, n - first)

    def one(job: tuple) -> tuple:
        t, first, count = job
        reader = readers.get()
        try:
            part = _diff_chunk(reader, t, first, count, opts)
        finally:
            readers.put(reader)
        on_bytes(sum(count * DTYPES[e.dtype][0] for e in t.entries))
        return t, part

    def merged(results):
        for t, part in results:
            t.merge(part)
            if t.chunks == 0:
                yield t.result()

    try:
        if threads == 1:
            yield from merged(map(one, jobs()))
            return
        with ThreadPoolExecutor(threads) as pool:
            window: collections.deque = collections.deque()

            def done():
                for job in jobs():
                    window.append(pool.submit(one, job))
                    if len(window) >= 4 * threads:
                        yield window.popleft().result()
                while window:
                    yield window.popleft().result()

            yield from merged(done())
    finally:
        for reader in made:
            reader.close()


def _open(arg: str, fmt: str = "auto", like=None):
    """A checkpoint by what the user typed: a path, or a model name (built-in, hub, BASE+ADAPTER)
    resolved to its local folder by evalkit.models, labelled as typed."""
    from evalkit.checkpoints import split_adapter
    from evalkit.models import resolve_model

    if Path(arg).expanduser().exists():
        return open_checkpoint(arg, fmt, like)
    path = resolve_model(arg).path
    if not (Path(path).is_dir() or split_adapter(path)):
        raise UsageError(f"{arg}: not available locally; download the checkpoint and pass its folder")
    return dataclasses.replace(open_checkpoint(path, fmt, like), label=arg)


def diff_checkpoints(args: list[str], opts: DiffOptions = DiffOptions(), progress=None) -> DiffResult:
    """Compare BASE with OTHER (or BASE with A and B): see the module docstring.

    `progress(done_bytes, total_bytes)` is called after every chunk.
    """
    if len(args) not in (2, 3):
        raise UsageError("give two checkpoints (BASE OTHER) or three (BASE A B)")
    opts.validate()
    if not (opts.atol >= 0 and opts.rtol >= 0):
        raise UsageError("atol and rtol must be >= 0")
    if opts.kernel not in KERNELS:
        raise UsageError(f"kernel {opts.kernel!r} (EVALKIT_DIFF_KERNEL?): choose "
                         f"{', '.join(KERNELS)}")
    base = _open(args[0])
    cps = [base, *(_open(a, opts.format, like=base) for a in args[1:])]
    match = same_architecture(cps, opts.as_dtype, command="diff")
    pairs, problems = match.pairs, match.problems()
    if not pairs:
        raise UsageError(f"{cps[1].path}: no tensor could be compared with {cps[0].path} "
                         f"({len(problems['mismatched'])} shape/dtype mismatches)")
    labels = ["other"] if len(cps) == 2 else ["A", "B"]
    total = sum(e.end - e.start for group in pairs for e in group)
    opts = dataclasses.replace(opts, kernel=_pick_kernel(opts.kernel, total))
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
        kind, layer = module_kind(name), layer_index(name)
        for lab, acc, rank in zip(labels, accs, ranks, strict=True):
            rows.append(_row(entries[0], lab, kind, layer, W.finish_stats(acc), rank))
            _add(groups[lab], kind, layer, acc, W.new_stats, W.merge_stats)
        if overlap is not None:
            ov_rows.append({"tensor": name, "kind": kind, "layer": layer,
                            **W.finish_overlap(overlap)})
            _add(ov_groups, kind, layer, overlap, W.new_overlap, _sum_into)
    summary = _summary(cps, labels, opts, groups, ov_groups, rows, problems)
    _formats(summary, cps, labels, rows)
    return DiffResult(summary, rows, ov_rows)


def _formats(summary: dict, cps: list[Checkpoint], labels: list[str], rows: list[dict]) -> None:
    """What a checkpoint that is not plain safetensors adds: its format and the reader's notes
    in `inputs`, and for a LoRA adapter the `lora` section and its tensors' rank columns."""
    from evalkit.checkpoints.lora import adapter_ranks, ranks_summary

    for role, cp in zip(["base", *labels], cps, strict=True):
        if cp.format != "safetensors":
            summary["inputs"][role]["format"] = cp.format
        if cp.notes:
            summary["inputs"][role]["notes"] = list(cp.notes)
    for lab, cp in zip(labels, cps[1:], strict=True):
        if cp.lora is None:
            continue
        ranks = adapter_ranks(cp.lora)
        for row in rows:
            if row["update"] == lab and row["tensor"] in ranks:
                row.update(ranks[row["tensor"]])
        summary.setdefault("lora", {})[lab] = ranks_summary(cp.lora, ranks)


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
    ranked = [r for r in rows if r.get("rank_ratio") is not None]  # an empty matrix has no ratio
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
                          "files": len({f for e in cp.tensors.values() for f in e.files})}
                   for role, cp in zip(roles, cps, strict=True)},
        "options": {"atol": opts.atol, "rtol": opts.rtol, "rank": opts.rank,
                    "as_dtype": opts.as_dtype},
        "conventions": {
            "changed_bits": "raw bit patterns differ (bf16/fp16 as uint16): +0/-0 counts as "
                            "changed, identical NaNs as unchanged",
            "changed_atol": "|other - base| > atol", "changed_rel": "|other - base| > rtol*|base|",
            "nonfinite": "entries with NaN/Inf on either side are counted, and left out of every "
                         "delta statistic",
            "concentration": "share of ||delta||^2 in the top q of entries, from a |delta| "
                             "histogram binned by the top 16 bits of float32 |delta| (cut bin "
                             "interpolated by its mean square)",
            "as_dtype": "float tensors of every side rounded to this dtype (nearest even, as "
                        "torch's .to; float64 via float32; NaN canonical) before comparing",
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


def output_files(result: DiffResult) -> dict[str, str]:
    """diff.json, tensors.csv (one row per tensor and update), overlap.csv (three-way), by name."""
    import json

    import pandas as pd

    from evalkit.jsonio import plain_json

    files = {"diff.json": json.dumps(plain_json(result.summary), indent=2, default=str, allow_nan=False) + "\n"}
    for name, rows in (("tensors.csv", result.tensors), ("overlap.csv", result.overlaps)):
        if rows:
            files[name] = pd.DataFrame(rows).to_csv(index=False)
    return files


def write_outputs(result: DiffResult, out: Path) -> list[Path]:
    """The diff's files into `out` under evalkit.outdir's contract (locked, never a user's files)."""
    from evalkit.outdir import OutputFolder

    with OutputFolder.claim(Path(out), "diff") as folder:
        return folder.publish(output_files(result))
