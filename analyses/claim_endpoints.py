"""Each pre-registered claim's endpoint, read from a seeded study's folder, and its test.

    from analyses.claim_endpoints import measure, evaluate
    m = measure(Study(root), claim)          # the arrays the claim's endpoint reads
    row = evaluate(claim, m, test)           # estimate, intervals, p, detectable effect, per-run verdict

Endpoints (analyses.claims.ENDPOINTS), all from the study's own files through
analyses.study_seeded.Study: pass@k per problem at the picked checkpoints (`setting` passk or
passk-nucleus; `control`: ES-then-GRPO's pick and GRPO at the same GRPO step, from the curve
runs), raw by default and above the placebo floor as the sensitivity analysis (`floor=True`);
token entropy per problem; forgetting accuracy per item; the bf16 changed fraction per run; the
top-q share of ||dW||^2 per seed at matched norm. An arm is read on its own seeds
(`Study.seeds_of`: the seeds its stage was planned on); a pairing by seed reads the seeds both
arms have.

A measured endpoint is `one` (x[seed, problem]: an arm minus the base per problem, or two arms
paired by seed), `apart` (a[seed, problem], b[seed, problem]: two arms trained separately), or
`runs` (exact values per run: no sampling interval). The interval is the two-level bootstrap
(metrics.seeds; `test.n_boot` replicates, `test.boot_seed`), with the Satterthwaite interval of
the crossed random-effects model beside it (metrics.inference), the bootstrap p of the claim's
threshold, and the effect detectable at `test.power` from each interval's standard error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from analyses.claims import Claim, ClaimTest, interval_verdict, per_run_verdict

__all__ = ["Measured", "measure", "evaluate", "replicates", "stability", "difference_curves", "arm_curves"]


@dataclass(frozen=True)
class Measured:
    kind: str  # "one", "apart" or "runs" (module docstring)
    x: np.ndarray | None = None  # one: x[seed, problem]; apart: a
    y: np.ndarray | None = None  # apart: b
    runs: tuple = ()  # runs: ({"run": ..., "a": ..., "b": ..., "holds": bool}, ...)
    detail: dict = field(default_factory=dict)  # what was read: setting, k, n, sampling, unit

    @property
    def estimate(self) -> float:
        if self.kind == "one":
            return float(self.x.mean())
        if self.kind == "apart":
            return float(self.x.mean() - self.y.mean())
        return float(np.mean([r["a"] - r["b"] for r in self.runs]))


def _ks(run) -> list[int]:
    return sorted({int(r["k"]) for r in run.summary.get("pass_at_k", [])})


def _sampling(run) -> dict:
    s = run.summary.get("sampling") or {}
    return {k: s.get(k) for k in ("temperature", "top_p", "n", "max_new_tokens")}


def _per_problem(study, kind: str, model: str, seed, k: int, what: str) -> np.ndarray | None:
    """pass@k, pass@k minus placebo@k, or entropy per held-out problem of one run (None: not done)."""
    run = study.run_of(kind, model, seed)
    if run is None:
        return None
    n = int(run.per_problem()["n"].min())
    if what != "entropy" and 2 * k > n:
        raise ValueError(f"{run.path}: pass@{k} needs n >= {2 * k} samples per problem (k <= n / 2), has {n}")
    t = study.table(run, [k])
    return {"raw": t["pass"][:, 0], "above-floor": t["pass"][:, 0] - t["placebo"][:, 0], "entropy": t["entropy"]}[what]


def _arm(study, kind: str, model: str, k: int, what: str, seeds: list[int]) -> np.ndarray | None:
    if model == "base":
        row = _per_problem(study, kind, "base", None, k, what)
        return None if row is None else row[None]
    rows = [_per_problem(study, kind, model, s, k, what) for s in seeds]
    return None if not rows or any(r is None for r in rows) else np.stack(rows)


def _seeds(study, claim: Claim, kind: str) -> dict:
    """Each arm of the contrast's seeds: its own, or (paired by seed) those both arms have."""
    arms = [m for m in claim.contrast if m != "base"]
    if claim.get("pairing") == "seed":
        common = study.common_seeds(kind, *arms)
        return dict.fromkeys(arms, common)
    return {m: study.seeds_of(m, kind) for m in arms}


def _pair(claim: Claim, a: np.ndarray | None, b: np.ndarray | None, detail: dict) -> Measured | None:
    if a is None or b is None:
        return None
    pairing = claim.get("pairing")
    if pairing == "apart":
        return Measured("apart", a, b, detail=detail)
    return Measured("one", a - b, detail=detail)  # per problem against the base (b has one row), or by seed


def measure(study, claim: Claim, *, floor: bool = False, setting: str | None = None) -> Measured | None:
    """The arrays `claim`'s endpoint reads in `study` (analyses.study_seeded.Study); `floor`:
    pass@k above the placebo floor (the sensitivity analysis); `setting`: another setting than
    the claim's (its `also_at`). None when the study lacks a run the endpoint needs."""
    a, b = claim.contrast
    setting = setting or claim.get("setting")
    if claim.endpoint in ("pass@k", "entropy"):
        if setting == "control":
            return _control(study, claim)
        k = int(claim.get("k", 1))
        what = "entropy" if claim.endpoint == "entropy" else "above-floor" if floor else "raw"
        base_run = study.run_of(setting, "base", None)
        if base_run is None:
            return None
        detail = {"setting": setting, "sampling": _sampling(base_run), "unit": what}
        if claim.endpoint == "pass@k":
            detail["k"] = k
        seeds = _seeds(study, claim, setting)
        return _pair(claim, _arm(study, setting, a, k, what, seeds.get(a, [])),
                     _arm(study, setting, b, k, what, seeds.get(b, [])), detail)
    if claim.endpoint == "accuracy":
        return _accuracy(study, claim)
    if claim.endpoint == "changed-fraction":
        return _changed_fraction(study, claim)
    if claim.endpoint == "gain-retained":
        return _gain_retained(study, claim)
    return _top_share(study, claim)


def _control(study, claim: Claim) -> Measured | None:
    """ES-then-GRPO's picked checkpoint against GRPO's at the same GRPO step, per seed, from the
    curve runs (analyses.study_seeded.Study.control)."""
    if (control := study.control()) is None:
        return None
    diff, steps, runs = control
    return Measured("one", diff, detail={"setting": "control", "k": 1, "sampling": _sampling(runs[-1]),
                                         "grpo_steps": steps, "unit": "raw"})


def _accuracy(study, claim: Claim) -> Measured | None:
    import json

    name = claim.get("benchmark")

    def items(model: str, seed: int) -> list[dict] | None:
        r = study.result(f"forgetting-{model}-s{seed}")
        if r is None:
            return None
        path = (study.root / r["file"]).parent / "items.jsonl"
        rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
        return [x for x in rows if x["benchmark"] == name]

    arms, seeds = {}, _seeds(study, claim, "forgetting")
    for model in claim.contrast:
        if model == "base":
            continue
        got = [items(model, s) for s in seeds[model]]
        if not got or any(g is None for g in got):
            return None
        arms[model] = got
        if "base" not in arms:
            arms["base"] = [got[0]]
    matrix = {m: np.array([[x["model_correct" if m != "base" else "base_correct"] for x in run] for run in runs],
                          float) for m, runs in arms.items()}
    a, b = claim.contrast
    return _pair(claim, matrix[a], matrix[b], {"benchmark": name, "items": int(matrix["base"].shape[1]),
                                               "base_accuracy": float(matrix["base"].mean()), "unit": "accuracy"})


def _changed_fraction(study, claim: Claim) -> Measured | None:
    bf16 = study.result("sparsity-bf16") or {}
    a, b = claim.contrast
    if not {a, b} <= set(bf16):
        return None
    va, vb = bf16[a]["changed_frac_bits"], bf16[b]["changed_frac_bits"]
    holds = (va - vb > claim.threshold) if claim.direction == "above" else (va - vb < claim.threshold)
    # an update that rounds to nothing in bf16 is absent, not sparse (v2's rule): not tested
    runs = () if 0 in (va, vb) else ({"run": "bf16", "a": va, "b": vb, "holds": bool(holds)},)
    return Measured("runs", runs=runs, detail={"unit": "share of bf16 weights changed", "runs": 1})


def _top_share(study, claim: Claim) -> Measured | None:
    import json

    a, b = claim.contrast
    q, margin = float(claim.get("q")), claim.get("reference_margin")
    rows = []
    for s in study.seeds:
        r = study.result(f"sparsity-s{s}")
        if r is None:
            continue
        data = json.loads((study.root / r["file"]).read_text(encoding="utf-8"))
        if data.get("matched") is None or q not in data["qs"]:
            continue
        j = data["qs"].index(q)
        va, vb, gauss = data["top_share"][a][j], data["top_share"][b][j], data["gaussian_top_share"][j]
        side = (va - vb > claim.threshold) if claim.direction == "above" else (va - vb < claim.threshold)
        above_noise = isinstance(margin, int | float) and not isinstance(margin, bool)
        holds = side and (va > gauss * (1 + margin) if above_noise else True)
        rows.append({"run": f"seed {s}", "a": va, "b": vb, "reference": gauss, "holds": bool(holds),
                     "norm_ratio": data["matched"].get("norm_ratio_es_over_grpo")})
    return Measured("runs", runs=tuple(rows), detail={"unit": f"top-{q:g} share of ||dW||^2", "q": q,
                                                      "reference_margin": margin})


def _gain_retained(study, claim: Claim) -> Measured | None:
    """Per seed with a masked stage of the arm: the gain its top-q mask keeps (masked.json); a seed
    whose arm gained nothing on validation has no share (listed, not judged)."""
    import json

    arm, q, by = claim.contrast[0], float(claim.get("q")), claim.get("mask_by")
    scope, margin = claim.get("scope", "global"), claim.get("reference_margin")
    rows, undefined = [], []
    for s in study.seeds:
        r = study.result(f"masked-{arm}-s{s}")
        if r is None:
            continue
        data = json.loads((study.root / r["file"]).read_text(encoding="utf-8"))
        found = {(x["by"], x["scope"], float(x["q"])): x for x in data["rows"]}
        top, rand = found.get((by, scope, q)), found.get(("random", scope, q))
        if top is None or (margin is not None and rand is None):
            continue
        if top["retained"] is None or not np.isfinite(top["retained"]):  # masked.json writes NaN as null
            undefined.append({"seed": s, "gain": top["trained_accuracy"] - top["base_accuracy"]})
            continue
        side = top["retained"] > claim.threshold if claim.direction == "above" else top["retained"] < claim.threshold
        row = {"run": f"seed {s}", "a": top["retained"], "b": 0.0, "holds": bool(side),
               "interval": [top["retained_low"], top["retained_high"]]}
        if margin is not None:
            row["reference"] = rand["retained"]  # None: the random mask's share undefined, the claim not held
            row["holds"] = bool(side and rand["retained"] is not None and top["retained"] > rand["retained"] + margin)
        rows.append(row)
    return Measured("runs", runs=tuple(rows), detail={"unit": f"gain retained at the top {q:g} by {by} ({scope})",
                                                      "q": q, "mask_by": by, "scope": scope,
                                                      "reference_margin": margin, "no_gain": undefined})


# ---------------------------------------------------------------- the test


def replicates(m: Measured, n_boot: int, seed: int) -> np.ndarray:
    """The two-level bootstrap replicates of the endpoint (metrics.seeds)."""
    from metrics.seeds import two_level_replicates, two_sample_replicates

    if m.kind == "one":
        return two_level_replicates(m.x, n_boot=n_boot, seed=seed)[:, 0]
    return two_sample_replicates(m.x, m.y, n_boot=n_boot, seed=seed)[:, 0]


def _interval(reps: np.ndarray, confidence: float) -> tuple[float, float]:
    lo, hi = np.quantile(reps, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(lo), float(hi)


def evaluate(claim: Claim, m: Measured | None, test: ClaimTest, *, n_boot: int | None = None,
             seed: int | None = None) -> dict:
    """The claim's figures and its verdict before Holm (module docstring)."""
    from metrics.inference import bootstrap_p, detectable_effect, satterthwaite_interval, t_test_p

    if m is None or (m.kind == "runs" and not m.runs):
        return {"kind": None, "verdict_unadjusted": "not tested", "p": None, **({"detail": m.detail} if m else {})}
    if m.kind == "runs":
        return {"kind": "runs", "estimate": m.estimate, "runs": list(m.runs), "detail": m.detail, "p": None,
                "verdict_unadjusted": per_run_verdict([r["holds"] for r in m.runs])}
    reps = replicates(m, n_boot or test.n_boot, test.boot_seed if seed is None else seed)
    lo, hi = _interval(reps, test.confidence)
    p = bootstrap_p(reps, claim.threshold)
    satt = satterthwaite_interval(m.x, m.y if m.kind == "apart" else None, confidence=test.confidence)
    satt["p"] = t_test_p(satt["estimate"], satt["se"], satt["df"], claim.threshold)
    satt["verdict_unadjusted"] = interval_verdict(satt["p"], test.alpha, claim.direction)
    se = float(reps.std(ddof=1))
    per_seed = ({"a": m.x.mean(axis=1).tolist(), "b": m.y.mean(axis=1).tolist()} if m.kind == "apart"
                else m.x.mean(axis=1).tolist())
    return {"kind": m.kind, "estimate": m.estimate, "ci_low": lo, "ci_high": hi, "p": p, "se_boot": se,
            "satterthwaite": satt, "detectable": detectable_effect(se, alpha=test.alpha, power=test.power),
            "detectable_satterthwaite": (detectable_effect(satt["se"], alpha=test.alpha, power=test.power,
                                                           df=satt["df"]) if np.isfinite(satt["df"]) else None),
            "per_seed": per_seed, "seeds": int(m.x.shape[0]) if m.kind == "one" else [int(m.x.shape[0]),
                                                                                      int(m.y.shape[0])],
            "problems": int(m.x.shape[1]), "detail": m.detail,
            "verdict_unadjusted": interval_verdict(p, test.alpha, claim.direction)}


def stability(claim: Claim, m: Measured, test: ClaimTest) -> dict:
    """The random-stream check: `test.stability_streams` streams (seeds 1, 2, ...) of
    `test.stability_boot` replicates each; each stream's interval and p, and the pooled
    replicates' (streams x stability_boot, at least 20,000 per stream), which then decide."""
    from metrics.inference import bootstrap_p

    streams, pooled = [], []
    for s in range(1, test.stability_streams + 1):
        reps = replicates(m, test.stability_boot, test.boot_seed + s)
        lo, hi = _interval(reps, test.confidence)
        streams.append({"seed": test.boot_seed + s, "replicates": int(reps.size), "ci_low": lo, "ci_high": hi,
                        "p": bootstrap_p(reps, claim.threshold)})
        pooled.append(reps)
    reps = np.concatenate(pooled)
    lo, hi = _interval(reps, test.confidence)
    return {"streams": streams, "replicates_per_stream": test.stability_boot, "replicates_pooled": int(reps.size),
            "ci_low": lo, "ci_high": hi, "p": bootstrap_p(reps, claim.threshold), "se_boot": float(reps.std(ddof=1))}


# ---------------------------------------------------------------- curves for the report


def arm_curves(study, setting: str) -> dict | None:
    """pass@k per arm (base included) with two-level 95% intervals, k <= n / 2 only."""
    from metrics.seeds import two_level_bootstrap

    base_run = study.run_of(setting, "base", None)
    if base_run is None:
        return None
    n = int(base_run.per_problem()["n"].min())
    ks = [k for k in _ks(base_run) if 2 * k <= n]
    out = {"ks": ks, "sampling": _sampling(base_run), "arms": {}}
    for model in ["base", *study.methods]:
        runs = ([base_run] if model == "base" else [study.run_of(setting, model, s)
                                                    for s in study.seeds_of(model, setting)])
        if not runs or any(r is None for r in runs):
            continue
        tables = [study.table(r, ks) for r in runs]
        for what, key in (("pass", "pass"), ("floor", "placebo")):
            est, lo, hi = two_level_bootstrap(np.stack([t[key] for t in tables]))
            out["arms"].setdefault(model, {})[what] = {"estimate": est.tolist(), "ci_low": lo.tolist(),
                                                       "ci_high": hi.tolist()}
    return out


def difference_curves(study, setting: str, contrasts: list[tuple[str, str, str]], *, floor: bool = False) -> dict:
    """A - B against k (k <= n / 2) with its two-level 95% band, per (A, B, pairing); raw pass@k,
    or above the placebo floor."""
    from metrics.seeds import two_level_bootstrap, two_sample_bootstrap

    curves = arm_curves(study, setting)
    if curves is None:
        return {}
    ks = curves["ks"]

    def cube(model, seeds):
        runs = ([study.run_of(setting, "base", None)] if model == "base"
                else [study.run_of(setting, model, s) for s in seeds])
        if not runs or any(r is None for r in runs):
            return None
        tables = [study.table(r, ks) for r in runs]
        return np.stack([t["pass"] - (t["placebo"] if floor else 0.0) for t in tables])

    out = {"ks": ks, "unit": "above-floor" if floor else "raw", "contrasts": {}}
    for a, b, pairing in contrasts:
        arms = [m for m in (a, b) if m != "base"]
        common = study.common_seeds(setting, *arms)
        x, y = (cube(m, study.seeds_of(m, setting) if pairing == "apart" else common) for m in (a, b))
        if x is None or y is None:
            continue
        est, lo, hi = (two_sample_bootstrap(x, y) if pairing == "apart" else two_level_bootstrap(x - y))
        out["contrasts"][f"{a} - {b}"] = {"estimate": est.tolist(), "ci_low": lo.tolist(), "ci_high": hi.tolist(),
                                          "pairing": pairing}
    return out
