"""One machine-readable line per benchmark measurement, read by `run_all.py`.

A benchmark prints its own human-readable lines and, for each measurement
that has a target, calls `result(...)`: it prints

    RESULT {"bench": ..., "name": ..., "ratio": ..., "target": ">= 0.5", "met": true, ...}

`run_all.py` collects these lines into `results/benchmarks/SUMMARY.md`. The
ratio is always against a baseline measured in the same run (these machines
are noisy: absolute times are shown for context only).
"""

from __future__ import annotations

import json
import operator
import os
import sys
from pathlib import Path

_OPS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}


def met(ratio: float, target: str) -> bool:
    """Whether `ratio` meets a target written as '>= 0.5' or '<= 0.1'."""
    op, value = target.split()
    return bool(_OPS[op](ratio, float(value)))


def result(name: str, *, measured: str, baseline: str, ratio: float, target: str | None,
           note: str = "") -> dict:
    """Print one RESULT line; `measured`/`baseline` are short descriptions with their figures."""
    row = {
        "bench": Path(sys.argv[0]).stem,
        "name": name,
        "measured": measured,
        "baseline": baseline,
        "ratio": round(float(ratio), 4),
        "target": target,
        "met": None if target is None or ratio != ratio else met(ratio, target),  # NaN: not measured
        "note": note,
        "load": [round(x, 2) for x in os.getloadavg()],
    }
    print("RESULT " + json.dumps(row), flush=True)
    return row
