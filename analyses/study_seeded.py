"""The figures of a seeded study (evalkit.study.stages' seeded plan), read from its folder only.

    figures = seeded_figures(Path("results/study-v2"))   # analyses.study_findings turns them into verdicts

Everything comes from the study's own files: study.json (the plan, the picked checkpoints, the
stage times), data/heldout.jsonl (answers), the passk runs at the picked checkpoints (passk/,
passk-nucleus/), the curve runs at every saved checkpoint (curves/), sparsity/, diff/ and
forgetting/. Intervals are the two-level bootstrap over seeds, then problems (metrics.seeds,
2000 replicates, seed 0); "per_seed" lists each seed's own figure. A difference between two
arms (ES - GRPO) resamples each arm's seeds apart (two-sample, `_apart`): seed s of ES and seed s
of GRPO are separate runs, no pair; "per_seed_each" lists each arm's own seeds. ES-then-GRPO is
paired with ES and with GRPO by seed: its seed s repeats ES seed s's first iterations exactly and
draws GRPO seed s's prompts.

An arm's seeds are those the study planned its stage on (`Study.seeds_of`: a method trained on
some of the study's seeds, an evaluation filtered to some arms and seeds); a pairing by seed
reads the seeds both arms have.

Each pass@k figure has its chance floor beside it (metrics.placebo: every completion scored
against the answers of the other problems, same counts). "Above the floor" is pass@k minus
placebo@k, per problem.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path

import numpy as np

from analyses.runs import load_run

__all__ = ["Study", "seeded_figures", "N_BOOT", "AFTER_FIGURES", "STAGE_TIME_LABEL"]

N_BOOT = 2000
# the stages that run after the figures are taken: the budget's stage time leaves them out
AFTER_FIGURES = ("findings", "report")
STAGE_TIME_LABEL = f"every stage but {' and '.join(AFTER_FIGURES)}"


def _interval(values) -> dict:
    """Two-level estimate and interval of values[seed, problem] (one column), per seed listed."""
    from metrics.seeds import per_seed, two_level_bootstrap

    est, low, high = two_level_bootstrap(values, n_boot=N_BOOT)
    return {"difference": est, "ci_low": low, "ci_high": high, "per_seed": [r[0] for r in per_seed(values,
                                                                                                     n_boot=200)],
            "seeds": int(np.shape(values)[0]), "problems": int(np.shape(values)[1])}


def _apart(a, b, names: tuple[str, str]) -> dict:
    """mean(a) - mean(b) for two separately trained arms (values[seed, problem], one column):
    their seeds resampled apart, the problems shared (metrics.seeds.two_sample_bootstrap); each
    arm's per-seed figures listed, since seed s of one arm is no partner of seed s of the other."""
    from metrics.seeds import two_sample_bootstrap

    est, low, high = two_sample_bootstrap(a, b, n_boot=N_BOOT)
    return {"difference": est, "ci_low": low, "ci_high": high, "interval": "two-sample: each arm's seeds apart",
            "per_seed_each": {name: np.asarray(x, float).mean(axis=1).tolist() for name, x in zip(names, (a, b),
                                                                                                    strict=True)},
            "seeds": {name: int(np.shape(x)[0]) for name, x in zip(names, (a, b), strict=True)},
            "problems": int(np.shape(a)[1])}


STAGE_NAMES = {"passk-final": "final-passk"}  # evaluations whose stages are named otherwise


class Study:
    """A seeded study folder: its record and its runs, loaded once each."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.state = json.loads((self.root / "study.json").read_text(encoding="utf-8"))
        self.spec = self.state["spec"]
        self.seeds = list(self.spec["seeds"])
        self.methods = list(self.spec["methods"])
        self._runs: dict = {}

    def result(self, stage: str) -> dict | None:
        record = self.state["stages"].get(stage) or {}
        return record.get("result") if record.get("status") == "done" else None

    @cached_property
    def planned(self) -> set:
        """The names of the stages in the study's plan (study.json)."""
        return {row["stage"] for row in self.state.get("plan") or []}

    def seeds_of(self, model: str, kind: str = "train") -> list[int]:
        """The seeds the study planned stage `kind` of arm `model` on (`kind-model-s<seed>`), in the
        study's order: the arm's own seeds, less those an evaluation's filter leaves out (a record
        without a plan: every seed)."""
        return [s for s in self.seeds if not self.planned or self.stage(kind, model, s) in self.planned]

    @staticmethod
    def stage(kind: str, model: str, seed: int | None = None) -> str:
        """The stage of evaluation `kind` on `model` (passk-final's are named final-passk-...)."""
        return f"{STAGE_NAMES.get(kind, kind)}-{model}" + ("" if seed is None else f"-s{seed}")

    def base_setting(self, kind: str) -> str | None:
        """The evaluation whose base run stands for `kind`'s: itself, or for passk-final (which
        has no base stage) the picked checkpoints' evaluation recorded with the same settings."""
        if kind not in STAGE_NAMES:
            return kind
        evaluations = self.spec.get("evaluations") or {}
        mine = {k: v for k, v in (evaluations.get(kind) or {}).items() if k not in ("methods", "seeds")}
        return next((other for other in ("passk-nucleus", "passk") if mine and mine ==
                     {k: v for k, v in (evaluations.get(other) or {}).items() if k not in ("methods", "seeds")}), None)

    def common_seeds(self, kind: str, *models: str) -> list[int]:
        """The seeds every one of `models` has stage `kind` on: those a pairing by seed reads."""
        return [s for s in self.seeds if all(s in self.seeds_of(m, kind) for m in models)]

    def seeded(self, kind: str, model: str) -> list[tuple[int, dict]]:
        """(seed, result) of each done stage `kind-model-s<seed>`, in seed order."""
        return [(s, r) for s in self.seeds_of(model, kind) if (r := self.result(self.stage(kind, model, s))) is not None]

    def control(self) -> tuple[np.ndarray, list[int], list] | None:
        """The GRPO control, paired by seed: pass@1 per problem [seed, problem] of ES-then-GRPO's
        picked checkpoint minus GRPO's at the same GRPO step (both curve runs), those steps, and
        ES-then-GRPO's runs; None until all are done."""
        pairs, steps = [], []
        seeds = [s for s in self.common_seeds("curves", "es-grpo", "grpo") if s in self.seeds_of("es-grpo", "validate")]
        if not seeds:
            return None
        for s in seeds:
            pick = (self.result(f"validate-es-grpo-s{s}") or {}).get("picked")
            seq, grpo = self.result(f"curves-es-grpo-s{s}"), self.result(f"curves-grpo-s{s}")
            if not (pick and seq and grpo):
                return None
            mine = next(p for p in seq["points"] if p["trainer"] == "grpo" and p["step"] == pick["step"])
            ctl = next((p for p in grpo["points"] if p["step"] == pick["step"]), None)
            if ctl is None:
                return None
            pairs.append((self.run(mine["run"]), self.run(ctl["run"])))
            steps.append(pick["step"])
        mine, ctl = ([self.table(pair[i], [1])["pass"][:, 0] for pair in pairs] for i in (0, 1))
        return np.stack(mine) - np.stack(ctl), steps, [pair[0] for pair in pairs]

    @cached_property
    def answers(self) -> dict:
        """Each held-out problem's right answers: its `answer`, or (a task with several right
        answers, whose lines keep `kind` and `entry`: pairsum) every one of them."""
        lines = (self.root / "data" / "heldout.jsonl").read_text(encoding="utf-8").splitlines()
        return {r["id"]: _right_answers(r) for r in map(json.loads, lines)}

    @cached_property
    def problems(self) -> list:
        return list(self.answers)

    def run(self, rel: str):
        if rel not in self._runs:
            self._runs[rel] = load_run(self.root / rel)
        return self._runs[rel]

    def run_of(self, kind: str, model: str, seed: int | None):
        if model == "base" and kind in STAGE_NAMES:
            same = self.base_setting(kind)
            return None if same is None else self.run_of(same, "base", None)
        result = self.result(self.stage(kind, model, seed))
        return self.run(result["run"]) if result else None

    def table(self, run, ks) -> dict:
        """Per problem (held-out order; a run of an evaluation with `limit` reads the split's first
        N problems): pass@k [problem, k], placebo@k, entropy, answer keys."""
        from metrics.passk import per_problem_passk
        from metrics.placebo import answer_key, placebo_passk

        s = run.samples
        groups = {pid: g for pid, g in s.groupby("problem_id", sort=False)}
        ids = self.problems[: len(groups)]  # an evaluation's `limit`: the first N held-out problems
        missing = [p for p in ids if p not in groups] or sorted(set(groups) - set(self.problems))
        if missing:
            raise ValueError(f"{run.path}: its problems are not the held-out split's first {len(groups)} "
                             f"(e.g. {missing[0]})")
        keys = [[answer_key(x) if o in ("correct", "incorrect") else None
                 for x, o in zip(groups[p]["extracted"], groups[p]["outcome"], strict=True)] for p in ids]
        n = np.array([len(groups[p]) for p in ids])
        c = np.array([int(groups[p]["correct"].sum()) for p in ids])
        own = [frozenset(answer_key(a) for a in self.answers[p]) for p in ids]
        entropy = np.array([_token_weighted(groups[p]["mean_entropy"].to_numpy(float),
                                            groups[p]["num_tokens"].to_numpy(float)) for p in ids])
        return {"n": n, "c": c, "pass": per_problem_passk(n, c, ks), "placebo": placebo_passk(keys, own, ks),
                "entropy": entropy, "keys": keys, "own": own}


def _right_answers(record: dict) -> list:
    if record.get("kind") == "pairsum":
        from evalkit.tasks.pairsum import answers

        return answers(record["entry"])
    return [record["answer"]]


def _token_weighted(entropy: np.ndarray, tokens: np.ndarray) -> float:
    """Mean entropy per generated token over the samples that have one (a sample without an
    entropy, or with no tokens, adds nothing to either sum)."""
    known = np.isfinite(entropy) & (tokens > 0)
    return float((entropy[known] * tokens[known]).sum() / tokens[known].sum()) if known.any() else float("nan")


def seeded_figures(root: Path) -> dict:
    """Every figure the seeded findings and report read (module docstring)."""
    study = Study(root)
    out = {"seeds": study.seeds, "methods": study.methods, "problems": len(study.problems),
           "coverage": {}, "narrowing": {}}
    for kind in ("passk", "passk-nucleus", "passk-final"):
        if study.run_of(kind, "base", None) is None or not any(study.seeded(kind, m) for m in study.methods):
            continue
        out["coverage"][kind], out["narrowing"][kind] = _coverage(study, kind)
    out["entropy"] = _entropy(study)
    out["curves"] = _curves(study)
    out["stopping"] = _stopping(study)
    out["budget"] = _budget(study)
    out["sequence"] = _sequence(study)
    out["forgetting"] = _forgetting(study)
    out["sparsity"] = _sparsity(study)
    out["checks"] = _checks(study, out)
    return out


def _checks(study: Study, figures: dict) -> list[dict]:
    """What the claims assume, checked on the study's own files (issue 29's design): n >= 2 max k
    on at least 60 held-out problems, every seed of every arm present, every evaluated run
    complete, and the KL on another task's prompts than the training task's."""
    rows = []

    def check(name: str, ok: bool, detail: str) -> None:
        rows.append({"check": name, "ok": bool(ok), "detail": detail})

    check("held-out problems >= 60", len(study.problems) >= 60, f"{len(study.problems)} problems")
    for kind, cov in figures["coverage"].items():
        n, k = cov["sampling"].get("n"), max(cov["ks"])
        check(f"{kind}: n >= 2 max k", n is not None and n >= 2 * k, f"n {n}, max k {k}")
        missing = [m for m in study.methods if study.seeds_of(m, kind) and m not in cov["arms"]]
        check(f"{kind}: every seed of every arm", not missing,
              "all present" if not missing else f"left out (a seed not done): {', '.join(missing)}")
    incomplete = sorted(rel for rel, run in study._runs.items() if run.summary.get("complete") is False)
    check("every run read is complete", not incomplete, "all complete" if not incomplete else ", ".join(incomplete[:5]))
    for seed, row in ((figures.get("sparsity") or {}).get("matched") or {}).items():
        ratio = (row.get("matched") or {}).get("norm_ratio_es_over_grpo")
        if ratio is not None:
            check(f"sparsity seed {seed}: matched norms within 2x", 0.5 <= ratio <= 2.0,
                  f"||dES|| / ||dGRPO|| relative norms {ratio:.3g}")
    train = (study.spec.get("train_task") or {}).get("name")
    tasks = {(kl or {}).get("task") for kl in ((figures.get("forgetting") or {}).get("kl") or {}).values() if kl}
    if tasks:
        check("KL on another task's prompts", train not in tasks, f"KL task {', '.join(map(str, tasks))}, training "
                                                                  f"task {train}")
    return rows


# ---------------------------------------------------------------- coverage


def _sampling(run) -> dict:
    s = run.summary.get("sampling") or {}
    return {k: s.get(k) for k in ("temperature", "top_p", "n", "max_new_tokens")}


def _coverage(study: Study, kind: str) -> tuple[dict, dict]:
    from metrics.passk import bootstrap_passk

    base_run = study.run_of(kind, "base", None)
    ks = sorted({int(r["k"]) for r in base_run.summary.get("pass_at_k", [])})
    base = study.table(base_run, ks)
    above0 = base["pass"] - base["placebo"]
    low, _ = bootstrap_passk(above0, n_boot=N_BOOT)
    clear = [k for k, lo in zip(ks, low, strict=True) if lo > 0]
    figures = {"ks": ks, "sampling": _sampling(base_run), "base": _curve(base["pass"][None], base["placebo"][None]),
               "k_clear": max(clear) if clear else None, "arms": {}, "differences": {}}
    tables, narrowing = {}, {}
    for m in study.methods:
        runs = [study.run_of(kind, m, s) for s in study.seeds_of(m, kind)]
        if not runs or any(r is None for r in runs):
            continue
        tables[m] = [study.table(r, ks) for r in runs]
        p = np.stack([t["pass"] for t in tables[m]])
        f = np.stack([t["placebo"] for t in tables[m]])
        figures["arms"][m] = _curve(p, f)
        figures["differences"][f"{m} - base"] = _by_k(ks, (p - f) - above0[None], raw=p - base["pass"][None])
        narrowing[m] = _narrowing(base, tables[m], ks)
    if {"es", "grpo"} <= set(tables):
        above = [np.stack([t["pass"] - t["placebo"] for t in tables[m]]) for m in ("es", "grpo")]
        raw = [np.stack([t["pass"] for t in tables[m]]) for m in ("es", "grpo")]
        figures["differences"]["es - grpo"] = {
            int(k): {**_apart(above[0][:, :, j], above[1][:, :, j], ("es", "grpo")),
                     "raw": _apart(raw[0][:, :, j], raw[1][:, :, j], ("es", "grpo"))} for j, k in enumerate(ks)}
    return figures, narrowing


def _curve(p: np.ndarray, f: np.ndarray) -> dict:
    """pass@k and placebo@k per k (two-level), values[seed, problem, k]."""
    from metrics.seeds import two_level_bootstrap

    out = {}
    for name, x in (("pass", p), ("placebo", f), ("above_floor", p - f)):
        est, low, high = two_level_bootstrap(x, n_boot=N_BOOT)
        out[name] = {"estimate": est.tolist(), "ci_low": low.tolist(), "ci_high": high.tolist(),
                     "per_seed": x.mean(axis=1).tolist()}
    return out


def _by_k(ks, above: np.ndarray, *, raw: np.ndarray) -> dict:
    """{k: interval of the above-floor difference, with the raw pass@k difference beside}."""
    out = {}
    for j, k in enumerate(ks):
        row = _interval(above[:, :, j])
        row["raw"] = _interval(raw[:, :, j])
        out[int(k)] = row
    return out


def _narrowing(base: dict, arm: list[dict], ks) -> dict:
    """Per seed: problems the base solves and the arm never does (and the reverse), distinct
    answers per problem, problems collapsed onto one wrong answer (>= 90% of samples) the base
    solved; and the k where the base's pass@k overtakes the arm's, with its interval."""
    rows = []
    for t in arm:
        lost = int(np.sum((base["c"] > 0) & (t["c"] == 0)))
        gained = int(np.sum((base["c"] == 0) & (t["c"] > 0)))
        rows.append({"base_solves_arm_never": lost, "arm_solves_base_never": gained,
                     "distinct_answers": _distinct(t), "collapsed_onto_wrong": _collapsed(base, t)})
    return {"per_seed": rows, "base_distinct_answers": _distinct(base),
            "base_solved": int(np.sum(base["c"] > 0)), "crossing": _crossing(base, arm, ks)}


def _distinct(t: dict) -> float:
    return float(np.mean([len({k for k in keys if k is not None}) for keys in t["keys"]]))


def _collapsed(base: dict, t: dict) -> int:
    from collections import Counter

    count = 0
    for keys, own, solved in zip(t["keys"], t["own"], base["c"] > 0, strict=True):
        top = Counter(keys).most_common(1)
        if solved and top and top[0][0] is not None and top[0][0] not in own and top[0][1] >= 0.9 * len(keys):
            count += 1
    return count


def _crossing(base: dict, arm: list[dict], ks) -> dict:
    """Where the base's mean pass@k curve overtakes the arm's (log2 k, metrics.compare), on the
    point estimate and on each two-level replicate: the interval over the replicates that cross."""
    from metrics.compare import curve_crossings
    from metrics.seeds import two_level_replicates

    d = np.stack([t["pass"] for t in arm]) - base["pass"][None]

    def first(curve) -> float | None:
        found = [c["k"] for c in curve_crossings(ks, np.zeros(len(ks)), curve) if c["direction"] == "a_overtakes_b"]
        return float(found[0]) if found else None

    point = first(d.mean(axis=(0, 1)))
    reps = [first(r) for r in two_level_replicates(d, n_boot=N_BOOT)]
    hit = [r for r in reps if r is not None]
    shown = len(hit) >= 0.5 * len(reps)  # an interval over a few crossing replicates would say little
    return {"k": point, "ci_low": float(np.quantile(hit, 0.025)) if shown else None,
            "ci_high": float(np.quantile(hit, 0.975)) if shown else None,
            "share_of_replicates_crossing": len(hit) / len(reps),
            "note": "k where base pass@k - arm pass@k turns positive (log2 k interpolation); the interval is over "
                    "the replicates that cross, given when at least half do; none within "
                    f"k <= {max(ks)} when the share is 0"}


# ---------------------------------------------------------------- entropy, curves, the stopping rule


def _entropy(study: Study) -> dict | None:
    base_run = study.run_of("passk", "base", None)
    if base_run is None or not base_run.has_entropy():
        return None
    ks = [1]
    base = study.table(base_run, ks)["entropy"]
    arms = {}
    for m in study.methods:
        runs = [study.run_of("passk", m, s) for s in study.seeds_of(m, "passk")]
        if runs and all(r is not None for r in runs):
            arms[m] = np.stack([study.table(r, ks)["entropy"] for r in runs])
    out = {"unit": "nats per generated token (token-weighted per problem), held-out samples at T = 1",
           "base": float(np.nanmean(base)), "arms": {m: float(np.nanmean(x)) for m, x in arms.items()},
           "differences": {f"{m} - base": _interval(x - base[None]) for m, x in arms.items()}}
    if {"es", "grpo"} <= set(arms):
        out["differences"]["grpo - es"] = _apart(arms["grpo"], arms["es"], ("grpo", "es"))
    return out


def _curves(study: Study) -> dict:
    """pass@1, pass@k (largest k), placebo@k and entropy at every saved checkpoint, per arm and
    seed, x = the completions the arm had spent; the base is the point at 0."""
    out = {}
    base = study.result("curves-base")
    if base is None:
        return out
    base_run = study.run(base["points"][0]["run"])
    ks = sorted({int(r["k"]) for r in base_run.summary.get("pass_at_k", [])})
    out["base"] = _curve_point(study, base_run, ks)
    out["ks"] = [1, ks[-1]]
    for m in study.methods:
        out[m] = [{"seed": s, "trainer": p["trainer"], "step": p["step"], "completions": p["completions"],
                   "run": p["run"], **_curve_point(study, study.run(p["run"]), ks)}
                  for s, result in study.seeded("curves", m) for p in result["points"]]
    return out


def _curve_point(study: Study, run, ks) -> dict:
    t = study.table(run, ks)
    return {"pass@1": float(t["pass"][:, 0].mean()), f"pass@{ks[-1]}": float(t["pass"][:, -1].mean()),
            f"placebo@{ks[-1]}": float(np.nanmean(t["placebo"][:, -1])), "entropy": float(np.nanmean(t["entropy"]))}


def _stopping(study: Study) -> dict:
    rule = (study.spec.get("validation") or {}).get("rule")
    out = {"rule": rule, "base_reward": None, "arms": {}}
    base = study.result("validate-base")
    if base:
        out["base_reward"] = base["candidates"][0]["reward"]
    for m in study.methods:
        out["arms"][m] = [{"seed": s, "picked_step": r["picked"]["step"], "picked_trainer": r["picked"]["trainer"],
                           "picked_reward": r["picked"]["reward"], "picked_checkpoint": r["picked"]["checkpoint"],
                           "candidates": [(c["step"], c["reward"]) for c in r["candidates"]]}
                          for s, r in study.seeded("validate", m)]
    return out


def _budget(study: Study) -> dict:
    """Per arm and seed: completions and generated tokens (from the training logs) and the
    train stage's wall time (study.json); and the wall time of every stage but AFTER_FIGURES
    (they run after the figure is taken, so their own times cannot be in it and a rerun of them
    must not change it)."""
    out = {}
    stages = study.state["stages"]
    for m in study.methods:
        out[m] = [{"seed": s, **r.get("budget", {}), "train_seconds": stages[f"train-{m}-s{s}"].get("seconds")}
                  for s, r in study.seeded("train", m)]
    out["stage_seconds_total"] = round(sum(v.get("seconds") or 0.0 for name, v in stages.items()
                                           if name not in AFTER_FIGURES), 1)
    return out


# ---------------------------------------------------------------- ES then GRPO, forgetting, sparsity


def _sequence(study: Study) -> dict | None:
    """pass@1 (T = 1, held out) of ES-then-GRPO minus ES and minus GRPO at the picked
    checkpoints (passk runs), and minus the GRPO control: GRPO's checkpoint at the GRPO step
    ES-then-GRPO's pick had reached, both from the curve runs (same settings)."""
    if not {"es", "grpo", "es-grpo"} <= set(study.methods):
        return None
    ks = [1]

    def pass1(model, seeds):
        runs = [study.run_of("passk", model, s) for s in seeds]
        return (None if not runs or any(r is None for r in runs)
                else np.stack([study.table(r, ks)["pass"][:, 0] for r in runs]))

    # paired by seed (the seeds both arms have): ES-then-GRPO's seed s runs ES seed s's first
    # iterations exactly (same seed, same options) and GRPO seed s's prompt stream; ES and GRPO
    # themselves share nothing (`_apart`)
    pairs = {m: study.common_seeds("passk", "es-grpo", m) for m in ("es", "grpo")}
    seq = {m: pass1("es-grpo", seeds) for m, seeds in pairs.items()}
    es, grpo = pass1("es", pairs["es"]), pass1("grpo", pairs["grpo"])
    if any(x is None for x in (*seq.values(), es, grpo)):
        return None
    out = {"es-grpo - es": _interval(seq["es"] - es), "es-grpo - grpo": _interval(seq["grpo"] - grpo),
           "pass@1": {m: float(x.mean()) for m, x in (("es-grpo", pass1("es-grpo", study.seeds_of("es-grpo", "passk"))),
                                                      ("es", pass1("es", study.seeds_of("es", "passk"))),
                                                      ("grpo", pass1("grpo", study.seeds_of("grpo", "passk"))))}}
    control = _control(study)
    if control is not None:
        out["es-grpo - grpo control"] = control
    return out


def _control(study: Study) -> dict | None:
    if (control := study.control()) is None:
        return None
    diff, steps, _ = control
    row = _interval(diff)  # paired by seed, as in _sequence
    row["grpo_steps"] = steps
    row["settings"] = "curve runs (evaluations.curves): ES-then-GRPO's pick and GRPO at the same GRPO step"
    return row


def _forgetting(study: Study) -> dict | None:
    per_arm = {}
    for m in study.methods:
        folders = [(study.root / r["file"]).parent for _, r in study.seeded("forgetting", m)]
        if folders and len(folders) == len(study.seeds_of(m, "forgetting")):
            per_arm[m] = [(json.loads((f / "forgetting.json").read_text()), _items(f / "items.jsonl")) for f in folders]
    if not per_arm:
        return None
    out = {"benchmarks": {}, "kl": {}}
    first = next(iter(per_arm.values()))[0][0]
    for bench in first["benchmarks"]:
        name = bench["benchmark"]
        base = np.array([x["base_correct"] for x in next(iter(per_arm.values()))[0][1] if x["benchmark"] == name],
                        float)
        row = {"items": int(base.size), "base_accuracy": float(base.mean()), "chance": _chance(bench, study.root),
               "arms": {}}
        for m, reports in per_arm.items():
            model = np.stack([[x["model_correct"] for x in items if x["benchmark"] == name] for _, items in reports])
            row["arms"][m] = {"accuracy": float(model.mean()), **_interval(model.astype(float) - base[None])}
        if {"es", "grpo"} <= set(per_arm):
            es = np.stack([[x["model_correct"] for x in items if x["benchmark"] == name] for _, items in per_arm["es"]])
            gr = np.stack([[x["model_correct"] for x in items if x["benchmark"] == name]
                           for _, items in per_arm["grpo"]])
            row["es - grpo"] = _apart(es.astype(float), gr.astype(float), ("es", "grpo"))
        out["benchmarks"][name] = row
    for m, reports in per_arm.items():
        out["kl"][m] = _kl([r["kl"] for r, _ in reports])
    return out


def _items(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _chance(bench: dict, root: Path) -> float | None:
    """Multiple choice: the mean of 1 / choices over the file's items (None for generation).

    The file is the one forgetting read (its sha256 checked): at its recorded (absolute) path, or,
    in another checkout or machine, at any tail of that path under a folder above the study
    (`.../studies/data/facts-mc.jsonl` beside `.../results/study-v2`); a file not found is an
    error, not a silent chance of 0."""
    import hashlib

    source = bench.get("source") or {}
    if bench.get("kind") != "mc":
        return None
    recorded = Path(str(source.get("source")))
    tails = [Path(*recorded.parts[i:]) for i in range(1 if recorded.is_absolute() else 0, len(recorded.parts))]
    places = [recorded, *(p / tail for p in Path(root).resolve().parents for tail in tails)]
    for path in places:
        if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == source.get("source_sha256"):
            rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
            n = source.get("items") or len(rows)
            return float(np.mean([1.0 / len(r["choices"]) for r in rows[:n]]))
    raise ValueError(f"benchmark {bench.get('benchmark')}: its multiple-choice file {recorded} (sha256 "
                     f"{str(source.get('source_sha256'))[:12]}) is not found from here or above {root}; the chance "
                     "level needs it")


def _kl(blocks: list[dict]) -> dict | None:
    """KL(base || arm) per token pooled over every position (a ratio of sums, its replicates from
    the same draws), beside the mean of per-completion means; per completion (sequence)."""
    from metrics.seeds import two_level_replicates

    if any((b or {}).get("status") != "computed" or "per_prompt_kl_sum" not in b for b in blocks):
        return None
    sums = np.array([b["per_prompt_kl_sum"] for b in blocks], float)
    pos = np.array([b["per_prompt_positions"] for b in blocks], float)
    ratio = two_level_replicates(sums, n_boot=N_BOOT)[:, 0] / two_level_replicates(pos, n_boot=N_BOOT)[:, 0]
    pooled = {"estimate": float(sums.sum() / pos.sum()), "ci_low": float(np.quantile(ratio, 0.025)),
              "ci_high": float(np.quantile(ratio, 0.975)),
              "per_seed": [float(b["kl_per_token_pooled"]) for b in blocks]}
    mean = _interval(np.array([b["per_prompt_kl_per_token"] for b in blocks], float))
    seq = _interval(np.array([b["per_prompt_kl_sequence"] for b in blocks], float))
    return {"per_token_pooled": pooled, "per_token_mean_of_completions": mean, "per_completion": seq,
            "prompts": int(sums.shape[1]), "task": (blocks[0].get("task") or {}).get("name"),
            "direction": blocks[0].get("direction")}


def _sparsity(study: Study) -> dict | None:
    seeds = {}
    for s in study.seeds:
        r = study.result(f"sparsity-s{s}")
        if r:
            seeds[s] = json.loads((study.root / r["file"]).read_text())
    picked = {}
    keys = ("changed_frac_bits", "changed_frac_atol", "changed_frac_rel", "rel_norm", "top_1pct_share")
    for m in study.methods:
        overall = [(s, json.loads((study.root / r["file"]).read_text())["updates"]["other"]["overall"])
                   for s, r in study.seeded("diff", m)]
        picked[m] = [{"seed": s, **{k: o.get(k) for k in keys}} for s, o in overall]
    bf16 = study.result("sparsity-bf16")
    if not seeds and not bf16:
        return None
    return {"matched": {s: {"matched": r["matched"], "top_share": r["top_share"], "qs": r["qs"],
                            "gaussian_top_share": r["gaussian_top_share"], "effective_rank": r["effective_rank"],
                            "note": r.get("note")} for s, r in seeds.items()},
            "picked_fp32": picked, "bf16": bf16}
