"""The C chunk kernels of `evalkit diff` (`diff_kernel.c`), built at first use, called by ctypes.

    from evalkit import diff_ckernel
    if diff_ckernel.available():
        diff_ckernel.chunk_stats(acc, base_bits, other_bits, "BF16", atol=1e-5, rtol=2**-9)

Same interface and figure-for-figure the same results as `evalkit.diff_kernels` (numba) and the
numpy reference `metrics.weights.chunk_stats` / `overlap_chunk`: one branch-free pass over 8
lanes, float64 sums lane by lane in entry order (see the C file's header).

Why a C file next to numba: it costs ~1 MB of resident memory where numba's LLVM costs ~130 MB,
loads in milliseconds, and its explicit 8-lane vectors run several times faster than the
numba loop. The shared library is compiled once per machine with the system C compiler
(`$CC`, else `cc`; `-O3 -march=native -ffp-contract=off`, never fast-math) into
`$EVALKIT_CACHE/kernels` (default `~/.cache/evalkit/kernels`), named by a hash of the source,
the flags and the CPU's feature flags, so a shared home on mixed machines stays safe. Without
a C compiler `available()` is False and `evalkit diff` falls back to numba or numpy (slower,
same figures); `reason()` says why.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np

from evalkit.diff_kernels import add_kernel_sums, kernel_overlap
from evalkit.models import cache_dir

__all__ = ["MODES", "available", "reason", "chunk_stats", "overlap_chunk"]

MODES = ("BF16", "F16", "F32")
SOURCE = Path(__file__).with_name("diff_kernel.c")
FLAGS = ("-O3", "-ffp-contract=off", "-fPIC", "-shared", "-std=gnu11")
_F16 = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
_SUFFIX = {"BF16": "bf16", "F16": "f16", "F32": "f32"}
_LOCK = threading.Lock()
_STATE: dict = {}  # "lib": the loaded library or None, "why": the reason it is None


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor()


def _compile(target: Path) -> str | None:
    """Build the library at `target` (atomically); None when built, else why not."""
    cc = os.environ.get("CC") or "cc"
    if shutil.which(cc.split()[0]) is None:
        return f"no C compiler ({cc!r} not found; set $CC)"
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.stem, suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        for arch in (["-march=native"], []):  # some compilers or CPUs refuse -march=native
            cmd = [*cc.split(), *FLAGS, *arch, "-o", tmp, str(SOURCE)]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if done.returncode == 0:
                os.replace(tmp, target)  # atomic: a process building at the same time is harmless
                return None
            errors = [x for x in done.stderr.splitlines() if "error" in x.lower()]
            why = (errors or done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[0]
        return f"{cc} failed: {why}"
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{cc} failed: {err}"
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    p, i64, f32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
    for suffix in _SUFFIX.values():
        getattr(lib, f"stats_{suffix}").argtypes = [p, p, i64, p, f32, f32, p, p, p, p]
        getattr(lib, f"overlap_{suffix}").argtypes = [p, p, p, i64, p, p, p]
    return lib


def _load() -> ctypes.CDLL | None:
    with _LOCK:
        if "lib" not in _STATE:
            key = hashlib.sha256(SOURCE.read_bytes() + repr((FLAGS, os.environ.get("CC"),
                                 platform.machine(), _cpu_flags())).encode()).hexdigest()[:16]
            target = cache_dir() / "kernels" / f"diff_kernel-{key}.so"
            why = None if target.is_file() else _compile(target)
            try:
                _STATE["lib"] = None if why else _declare(ctypes.CDLL(str(target)))
            except OSError as err:
                why = f"could not load {target}: {err}"
                _STATE["lib"] = None
            _STATE["why"] = why
        return _STATE["lib"]


def available() -> bool:
    """True when the C kernels are built (building them now if needed) and loaded."""
    try:
        return _load() is not None
    except OSError as err:  # e.g. the cache folder is not writable
        _STATE.update(lib=None, why=str(err))
        return False


def reason() -> str:
    """Why the C kernels are unavailable ('' when they are)."""
    return "" if available() else _STATE.get("why", "")


def _ptr(x: np.ndarray) -> int:
    assert x.flags.c_contiguous
    return x.ctypes.data


def _bits(x: np.ndarray, dtype: str) -> np.ndarray:
    """Contiguous raw bits of the width the C function reads (uint32 for F32, else uint16)."""
    want = np.uint32 if dtype == "F32" else np.uint16
    if x.dtype.itemsize != np.dtype(want).itemsize:
        raise TypeError(f"{dtype} chunk given as {x.dtype}")
    return np.ascontiguousarray(x).view(want)


def _table(dtype: str):
    return _ptr(_F16) if dtype == "F16" else None


def _lib() -> ctypes.CDLL:
    lib = _STATE.get("lib") or _load()
    if lib is None:
        raise RuntimeError(f"the C diff kernels are not available: {reason()}")
    return lib


def chunk_stats(acc: dict, a_bits: np.ndarray, b_bits: np.ndarray, dtype: str, *,
                atol: float, rtol: float) -> dict:
    """Add one chunk (raw bits, safetensors `dtype` in MODES) into `acc` (from
    `metrics.weights.new_stats()`), exactly as `metrics.weights.chunk_stats` would."""
    lib = _lib()
    a_bits, b_bits = _bits(a_bits, dtype), _bits(b_bits, dtype)
    assert acc["hist_count"].dtype == np.int64 and acc["hist_sq"].dtype == np.float64
    out_i, out_f = np.zeros(11, np.int64), np.zeros(3)
    getattr(lib, f"stats_{_SUFFIX[dtype]}")(
        _ptr(a_bits), _ptr(b_bits), a_bits.size, _table(dtype), atol, rtol,
        _ptr(acc["hist_count"]), _ptr(acc["hist_sq"]), _ptr(out_i), _ptr(out_f))
    return add_kernel_sums(acc, out_i, out_f)


def overlap_chunk(base_bits, a_bits, b_bits, dtype: str) -> dict:
    """Additive overlap counts of one chunk, as `metrics.weights.overlap_chunk`."""
    lib = _lib()
    bits = [_bits(x, dtype) for x in (base_bits, a_bits, b_bits)]
    out_i, out_f = np.zeros(6, np.int64), np.zeros(3)
    getattr(lib, f"overlap_{_SUFFIX[dtype]}")(*map(_ptr, bits), bits[0].size, _table(dtype),
                                              _ptr(out_i), _ptr(out_f))
    return kernel_overlap(out_i, out_f)
