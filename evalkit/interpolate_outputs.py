"""`evalkit interpolate`'s outputs: interpolate.json, points.csv, completions.jsonl.

    summary = write_outputs(run, points, rows, per_problem, fixed)

interpolate.json holds the inputs' identities, the path, every point's figures (t or the plane's
(a, b), the weights of BASE, A and B, accuracy = mean over problems of c / n, the pass@k rows of
its run folder, the mean token loss of the fixed completions) and the barriers of the loss and
of the error rate along the A-B line with their bootstrap intervals (metrics.interpolate).
"""

from __future__ import annotations

import json
import math

import numpy as np

__all__ = ["write_outputs", "line_of"]


def line_of(points: list, rows: dict) -> list:
    """The points on the A-B line (t set) with t in order."""
    return sorted((p for p in points if p.t is not None and p.label in rows), key=lambda p: p.t)


def _barriers(opts, line: list, per_problem: tuple) -> dict:
    from metrics.interpolate import bootstrap_barrier

    nll, tokens, correct = per_problem
    ts = [p.t for p in line]
    err = np.stack([1.0 - correct[p.label] for p in line], axis=1)
    keep = ~np.isnan(err).any(axis=1)
    boot = {"n_boot": opts.n_boot, "confidence": opts.confidence, "seed": opts.seed}
    out = {"error": bootstrap_barrier(ts, err[keep], **boot) if keep.any() else None}
    loss = np.stack([nll[p.label] for p in line], axis=1)
    has = tokens > 0
    out["loss"] = bootstrap_barrier(ts, loss[has], tokens[has], **boot) if has.any() else None
    out["definition"] = ("max over t in [0, 1] of f(t) - ((1 - t) f(0) + t f(1)); f = mean token loss of the "
                         "fixed completions (nats), or error rate = 1 - accuracy; > 0: the middle is worse "
                         "than the straight line between the endpoints")
    return out


def _point_row(point, summary: dict) -> dict:
    by_k = {f"pass@{r['k']}": r.get("pass_at_k") for r in summary.get("pass_at_k", [])}
    return {"label": point.label, "t": point.t, "a": point.a, "b": point.b,
            "weight_base": point.weights[0], "weight_A": point.weights[1], "weight_B": point.weights[2],
            "accuracy": summary["accuracy"], **by_k, "loss": summary["loss"]["mean_token_nll"],
            "loss_tokens": summary["loss"]["tokens"], "samples": summary["samples"]}


def write_outputs(run, points: list, rows: dict, per_problem: tuple, fixed: list[dict]) -> dict:
    """Write interpolate.json, points.csv and completions.jsonl into `run.out` (each replaced
    atomically); return the JSON. A folder that cannot be written is one line, the three files kept
    beside it (evalkit.outdir.rescue)."""
    import pandas as pd

    from evalkit.errors import UsageError
    from evalkit.jsonio import json_text, write_atomic, write_failure
    from evalkit.outdir import rescue
    from evalkit.records import versions

    correct = per_problem[2]
    table = []
    for point in points:
        if point.label not in rows:
            continue
        summary = rows[point.label][1]
        acc = correct[point.label]
        summary["accuracy"] = float(np.nanmean(acc)) if np.isfinite(acc).any() else math.nan
        table.append(_point_row(point, summary) | {"pass_at_k": summary.get("pass_at_k", [])})
    line = line_of(points, rows)
    result = {
        "kind": "interpolate",
        "path": "plane" if run.opts.through else "line",
        "models": run.settings["models"],
        "task": run.settings["task"],
        "grader": run.settings["grader"],
        "sampler": run.settings["sampler"],
        "problems": len(run.problems),
        "sampling": run.settings["sampling"],
        "options": run.opts.identity(),
        "versions": versions(),
        "points": table,
        "barrier": _barriers(run.opts, line, per_problem),
        "fixed_completions": {"file": "completions.jsonl", "count": len(fixed),
                              "what": "sample 0 of every problem at A and at B, scored at every point "
                                      "(completion tokens only)"},
    }
    frame = pd.DataFrame([{k: v for k, v in r.items() if k != "pass_at_k"} for r in table])
    files = {"interpolate.json": json_text(result), "points.csv": frame.to_csv(index=False),
             "completions.jsonl": "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in fixed)}
    try:
        for name, text in files.items():
            write_atomic(run.out / name, lambda fh, text=text: fh.write(text))
    except OSError as exc:  # the points' folders are complete; the three files are kept beside --out
        raise UsageError(f"--out {run.out}: cannot be written ({write_failure(exc)}); the points are kept in "
                         f"{run.out / 'points'} and interpolate.json, points.csv and completions.jsonl in "
                         f"{rescue(run.out, files)}") from None
    return result
