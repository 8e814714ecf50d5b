"""Report section for `evalkit interpolate`: accuracy and loss along the path between two
checkpoints, with the straight line between the endpoints, and the barriers.

    from analyses.report.interpolate_sections import interpolate_section
    section = interpolate_section(found.of("interpolate"))

interpolate.json (evalkit.interpolate): `points` (t, or a/b in the plane, accuracy, loss),
`barrier.loss` / `barrier.error` (height, t, ci_low, ci_high; metrics.interpolate).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

import analyses.report.figures as F
from analyses.report.document import Figure, Section, Table
from analyses.report.inputs import Output

__all__ = ["interpolate_section"]

DESCRIPTION = ("Along θ(t) = (1 − t)·A + t·B, each point's weights written tensor by tensor into one model: "
               "held-out accuracy (sampled as evalkit passk samples) and the mean token loss of one fixed set "
               "of completions (sample 0 of every problem at A and at B). The barrier is max over t in [0, 1] "
               "of f(t) − ((1 − t)·f(0) + t·f(1)), for the loss and for the error rate (1 − accuracy), with a "
               "percentile bootstrap interval over problems; about 0 means the two checkpoints are linearly "
               "connected (arXiv 2604.01499). The dotted lines join the endpoints.")


def _line(points: list[dict]) -> list[dict]:
    return sorted((p for p in points if p.get("t") is not None), key=lambda p: p["t"])


def _names(o: Output) -> tuple[str, str]:
    """A's and B's paths less the folders they share (`es/seed-0/step-000009` and
    `grpo/seed-0/step-000036` for two arms of one study), at least their last two components."""
    a, b = (Path(str(o.data["models"][side]["name"])).parts for side in ("A", "B"))
    shared = 0
    while shared < min(len(a), len(b)) - 1 and a[shared] == b[shared]:
        shared += 1
    keep = max(max(len(a), len(b)) - shared, 2)
    return str(Path(*a[-keep:])), str(Path(*b[-keep:]))


def _series(o: Output, key: str) -> list[dict]:
    line = _line(o.data["points"])
    ends = [p for p in line if p["t"] in (0.0, 1.0)]
    label = " → ".join(_names(o))
    out = [{"label": label, "x": [p["t"] for p in line], "y": [p[key] for p in line]}]
    if len(ends) == 2:
        out.append({"label": "straight line between the endpoints", "x": [0.0, 1.0],
                    "y": [ends[0][key], ends[1][key]], "style": 1})
    return out


def _barrier_row(o: Output) -> dict:
    d, row = o.data, {"interpolation": o.label}
    a, b = _names(o)
    row.update(A=a, B=b, path=d["path"])
    for name in ("loss", "error"):
        b = (d.get("barrier") or {}).get(name) or {}
        row.update({f"{name}_barrier": b.get("height"), f"{name}_at_t": b.get("t"),
                    f"{name}_ci_low": b.get("ci_low"), f"{name}_ci_high": b.get("ci_high")})
    return row


def interpolate_section(outputs: Sequence[Output]) -> Section | None:
    if not outputs:
        return None
    blocks: list = [DESCRIPTION]
    for i, o in enumerate(outputs):
        specs = [{"series": _series(o, "accuracy"), "xlabel": "t (0 = A, 1 = B)", "ylabel": "accuracy"},
                 {"series": _series(o, "loss"), "xlabel": "t (0 = A, 1 = B)", "ylabel": "loss (nats / token)"}]
        blocks.append(Figure(f"interpolation_{i}", f"Accuracy and loss along A → B ({o.label})",
                             F.panels(specs, title=f"{o.label}: the path between two checkpoints")))
    blocks.append(Table("interpolation_barriers", "Barriers along A → B (95% bootstrap over problems)",
                        pd.DataFrame([_barrier_row(o) for o in outputs])))
    points = [{"interpolation": o.label, **{k: v for k, v in p.items() if k != "pass_at_k"}}
              for o in outputs for p in o.data["points"]]
    blocks.append(Table("interpolation_points", "Every point", pd.DataFrame(points)))
    return Section("interpolation", "Between two checkpoints", tuple(blocks))
