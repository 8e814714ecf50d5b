"""Sparsity compared fairly, for a seeded study: ES and GRPO at matched update norm, scale free.

    report = matched_sparsity("smollm2-135m", {"es": [...], "grpo": [...]}, options, Path("sparsity/seed-0"))

1. Every saved checkpoint of the ES and GRPO arms is diffed against the base with evalkit.diff
   (written to `diff/<arm>-step-N/`): its ||delta|| / ||W|| and the changed fractions.
2. The matched pair is the (ES, GRPO) checkpoint pair whose relative norms are closest on a log
   scale; their ratio is reported (the arms may never come close: ES's random walk is large from
   its first iteration).
3. For the matched pair, scale-free statistics (metrics.sparsity): the share of ||delta||^2 in
   the top q of entries, beside the value an i.i.d. Gaussian update would give, and the
   effective rank (Roy and Vetterli 2007) of every 2-D update, from its singular values.

Tensors are read one at a time from the checkpoints' safetensors files (numpy), so memory holds
one tensor pair and its SVD. Writes sparsity.json and ranks.csv (one row per matrix and arm).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

__all__ = ["matched_sparsity", "scale_free"]


def matched_sparsity(base: str, arms: dict, options, out: Path) -> dict:
    from evalkit.diff import DiffOptions, diff_checkpoints, write_outputs
    from evalkit.jsonio import plain_json, write_atomic, write_json_atomic
    from metrics.sparsity import gaussian_top_share

    rows = {}
    for arm, checkpoints in arms.items():
        rows[arm] = []
        for c in checkpoints:
            folder = out / "diff" / f"{arm}-step-{c['step']:06d}"
            if not (folder / "diff.json").is_file():
                write_outputs(diff_checkpoints([base, c["path"]], DiffOptions()), folder)
            overall = json.loads((folder / "diff.json").read_text())["updates"]["other"]["overall"]
            rows[arm].append({"step": c["step"], "completions": c["completions"], "checkpoint": c["checkpoint"],
                              **{k: overall[k] for k in ("rel_norm", "update_norm", "changed_frac_bits",
                                                         "changed_frac_atol", "changed_frac_rel")}})
    moved = {arm: [r for r in rs if r["rel_norm"] > 0] for arm, rs in rows.items()}  # a zero update has no shape
    qs = list(options.qs)
    stats, ranks, matched = {}, [], None
    if moved["es"] and moved["grpo"]:
        es, grpo = min(((a, b) for a in moved["es"] for b in moved["grpo"]),
                       key=lambda ab: abs(math.log(ab[0]["rel_norm"]) - math.log(ab[1]["rel_norm"])))
        matched = {"es": es, "grpo": grpo, "norm_ratio_es_over_grpo": es["rel_norm"] / grpo["rel_norm"]}
        for arm, row in (("es", es), ("grpo", grpo)):
            path = next(c["path"] for c in arms[arm] if c["step"] == row["step"])
            stats[arm], matrices = scale_free(base, path, qs, rank=options.effective_rank)
            ranks += [{"arm": arm, "step": row["step"], **m} for m in matrices]
    report = {"kind": "study-sparsity", "checkpoints": rows, "matched": matched, "qs": qs,
              "top_share": {arm: s["top_share"] for arm, s in stats.items()},
              "gaussian_top_share": [gaussian_top_share(q) for q in qs],
              "effective_rank": {arm: s["effective_rank"] for arm, s in stats.items()},
              "rule": "the ES and GRPO checkpoints whose ||delta||/||W|| are closest (log scale)",
              "note": None if matched else "an arm's updates are all zero: nothing to match"}
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "sparsity.json", plain_json(report))
    if ranks:
        import pandas as pd

        write_atomic(out / "ranks.csv", lambda fh: pd.DataFrame(ranks).to_csv(fh, index=False))
    return report


def _tensors(folder: str):
    """{name: (file, key)} of a checkpoint folder's safetensors files."""
    from safetensors import safe_open

    from evalkit.models import resolve_model

    path = Path(resolve_model(folder).path)
    found = {}
    for file in sorted(path.glob("*.safetensors")):
        with safe_open(str(file), framework="numpy") as fh:
            for key in fh.keys():
                found[key] = file
    return found


def scale_free(base: str, other: str, qs: list, *, rank: bool) -> tuple[dict, list[dict]]:
    """The top-q share curve over every entry, and (with `rank`) each matrix's effective rank."""
    import numpy as np
    from safetensors import safe_open

    from metrics.sparsity import add_histogram, top_share_curve
    from metrics.weights import effective_rank

    a_files, b_files = _tensors(base), _tensors(other)
    hist, matrices = None, []
    for name in sorted(set(a_files) & set(b_files)):
        with safe_open(str(a_files[name]), framework="numpy") as fa, safe_open(str(b_files[name]), "numpy") as fb:
            a, b = fa.get_tensor(name), fb.get_tensor(name)
        if a.shape != b.shape or not np.issubdtype(a.dtype, np.floating):
            continue
        d = b.astype(np.float32) - a.astype(np.float32)
        hist = add_histogram(hist, d)
        if rank and d.ndim == 2 and np.any(d):
            s = np.linalg.svd(d, compute_uv=False)
            matrices.append({"tensor": name, "shape": "x".join(map(str, d.shape)), "min_dim": min(d.shape),
                             "effective_rank": effective_rank(s),
                             "effective_rank_ratio": effective_rank(s) / min(d.shape)})
    ratios = [m["effective_rank_ratio"] for m in matrices]
    summary = {"top_share": top_share_curve(hist, qs) if hist is not None else [],
               "effective_rank": {"matrices": len(matrices),
                                  "mean_ratio": float(np.mean(ratios)) if ratios else None,
                                  "median_ratio": float(np.median(ratios)) if ratios else None}}
    return summary, matrices
