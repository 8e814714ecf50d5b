"""Two checks a seeded study's arms get, read from its folder (study.json and the run folders):
the positive control on the validation split, and the comparison of two arms at matched pass@1.

    validation_control(Path("results/study-v3"), "es", seed=0)          # metrics.positive_control
    validation_plateau(Path("results/study-v3"), "es", 0, margin=1 / 64, after=2)   # metrics.plateau
    matched_pass1(Path("results/study-v3"), "grpo", "es", seed=0, ks=[1, 8, 64])   # metrics.matched

`validation_control` reads the arm's validate stage (every candidate checkpoint's greedy run and
the pick) and the base's (validation/base), and tests the pick against the base at alpha / m over
the m candidates. `matched_pass1` reads the curves stages (passk at every saved checkpoint on the
held-out split; [evaluations.curves]) of two arms of one seed, with the base's curve point as
both arms' step 0 when `with_base`, and compares pass@k where their pass@1 match. Reads files
only; both return plain dicts a findings or report stage can write.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

__all__ = ["validation_control", "validation_plateau", "matched_pass1", "per_problem_counts", "arm_summary"]


def _stages(root: Path) -> dict:
    return json.loads((Path(root) / "study.json").read_text(encoding="utf-8"))["stages"]


def _results(root: Path) -> dict:
    return {name: s.get("result") for name, s in _stages(root).items()}


def per_problem_counts(run: Path, order: list | None = None) -> tuple[list, np.ndarray, np.ndarray]:
    """(problem ids, n, c) of a run folder, in `order` when given (every id must be there)."""
    from analyses.runs import load_run

    table = load_run(run).per_problem().set_index("problem_id")
    ids = list(table.index) if order is None else list(order)
    missing = [i for i in ids if i not in table.index]
    if missing or len(ids) != len(table):
        raise ValueError(f"{run}: its problems differ from the base's (e.g. {(missing or list(table.index))[0]})")
    table = table.loc[ids]
    return ids, table["n"].to_numpy(), table["c"].to_numpy()


def validation_control(root: Path, method: str, seed: int, *, alpha: float = 0.05) -> dict:
    """The positive control of arm `method`, seed `seed` (metrics.positive_control)."""
    from metrics.positive_control import positive_control

    root, results = Path(root), _results(root)
    ids, n, c = per_problem_counts(root / results["validate-base"]["picked"]["run"])
    arm = results[f"validate-{method}-s{seed}"]
    scores = {}
    for cand in arm["candidates"]:
        _, cn, cc = per_problem_counts(root / cand["run"], ids)
        scores[cand["run"]] = cc / cn
    report = positive_control(c / n, scores, arm["picked"]["run"], alpha=alpha)
    return {**report, "method": method, "seed": seed, "picked_step": arm["picked"]["step"],
            "verdict": "ES comparisons judged" if report["passed"] else "not tested: the arm did not beat the base"}


def validation_plateau(root: Path, method: str, seed: int, *, margin: float, after: int = 1) -> dict:
    """metrics.plateau on the arm's validation curve (its last trainer's checkpoints): completions
    to the plateau, and wall time pro rata: the training stage's seconds x the share of the arm's
    completions spent by then (the checkpoints carry no clock; equal time per completion assumed)."""
    from metrics.plateau import plateau

    stages = _stages(root)
    rows = stages[f"validate-{method}-s{seed}"]["result"]["candidates"]
    train = stages[f"train-{method}-s{seed}"]
    spent = train["result"]["budget"]["completions"]
    found = plateau([r["completions"] for r in rows], [r["reward"] for r in rows], margin=margin, after=after)
    return {**found, "method": method, "seed": seed, "step": rows[found["index"]]["step"],
            "seconds_pro_rata": train["seconds"] * found["completions"] / spent if spent else None,
            "train_seconds": train["seconds"], "train_completions": spent}


def _curve(root: Path, results: dict, name: str, ids: list) -> list:
    from metrics.matched import CurvePoint

    points = []
    for p in results[name]["points"]:
        _, n, c = per_problem_counts(root / p["run"], ids)
        points.append(CurvePoint(f"{p.get('trainer', 'base')} step {p.get('step', 0)}", n, c))
    return points


def matched_pass1(root: Path, arm_a: str, arm_b: str, seed: int, ks, *, target: float | None = None,
                  with_base: bool = True) -> dict:
    """metrics.matched.matched_comparison of two arms' curves (b - a), one seed."""
    from metrics.matched import matched_comparison

    root, results = Path(root), _results(root)
    base_run = root / results["curves-base"]["points"][0]["run"]
    ids, _, _ = per_problem_counts(base_run)
    base = _curve(root, results, "curves-base", ids) if with_base else []
    a = base + _curve(root, results, f"curves-{arm_a}-s{seed}", ids)
    b = base + _curve(root, results, f"curves-{arm_b}-s{seed}", ids)
    found = matched_comparison(a, b, ks, target=target)
    found["boot_seed"] = found.pop("seed")
    gap = found["pass1_gap"]["difference"]
    return {**found, "a_arm": arm_a, "b_arm": arm_b, "seed": seed, "with_base": with_base,
            "matched": bool(abs(gap) <= MATCH_TOLERANCE), "tolerance": MATCH_TOLERANCE}


PLATEAU_MARGIN = 1 / 64  # one validation problem of 64 (v3's split), fixed before v3's data
PLATEAU_AFTER = 1  # a plateau is reached when at least one saved checkpoint follows it
MATCH_TOLERANCE = 0.02  # picks whose pass@1 differ by more are not a match (the arms never met there)
MATCHED = (("es-large", "grpo"), ("es", "grpo"), ("grpo", "es-grpo"))  # (a, b): b - a, the base as both's step 0


def arm_summary(study) -> dict:
    """Every trained arm's positive control and plateau per validated seed, and the matched-pass@1
    comparisons of MATCHED per seed both arms have curves on (analyses.study_seeded.Study `study`);
    what is not in the study is left out. The findings list them beside the claims."""
    root, out = study.root, {"positive_control": {}, "plateau": {}, "matched": {},
                             "plateau_rule": {"margin": PLATEAU_MARGIN, "after": PLATEAU_AFTER}}
    if study.result("validate-base") is None:
        return out
    for arm in study.methods:
        seeds = [s for s in study.seeds_of(arm, "validate") if study.result(f"validate-{arm}-s{s}")]
        if seeds:
            out["positive_control"][arm] = [validation_control(root, arm, s) for s in seeds]
            out["plateau"][arm] = [validation_plateau(root, arm, s, margin=PLATEAU_MARGIN, after=PLATEAU_AFTER)
                                   for s in seeds if study.result(f"train-{arm}-s{s}")]
    if study.result("curves-base") is None:
        return out
    for a, b in MATCHED:
        arms = [m for m in (a, b) if m != "base"]
        seeds = [s for s in study.common_seeds("curves", *arms)
                 if all(study.result(f"curves-{m}-s{s}") for m in arms)]
        if seeds:
            out["matched"][f"{b} - {a}"] = [_matched(root, a, b, s) for s in seeds]
    return out


def _matched(root: Path, a: str, b: str, seed: int) -> dict:
    """matched_pass1 of b against a at every k the curve runs allow (k <= n / 2)."""
    results = _results(root)
    n = int(per_problem_counts(root / results["curves-base"]["points"][0]["run"])[1].min())
    return matched_pass1(root, a, b, seed, [k for k in (2, 4, 8, 16, 32, 64) if 2 * k <= n])
