"""The peak resident memory a call adds (Linux): VmHWM reset to VmRSS before it, read after it.

    grew, result = peak_growth(lambda: read_training_log(path))
"""

from __future__ import annotations


def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out


def peak_growth(fn) -> tuple[int, object]:
    """(bytes of resident memory `fn()` added at its peak, what it returned or the exception it
    raised). Writing 5 to /proc/self/clear_refs resets the peak (VmHWM) to the current RSS."""
    import gc

    gc.collect()
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    start = _status()["VmRSS"]
    try:
        got = fn()
    except Exception as exc:  # a refusal is a result here
        got = exc
    return _status()["VmHWM"] - start, got
