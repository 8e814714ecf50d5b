"""A study's findings: one row per claim of the ES vs GRPO papers, from the study's stored outputs.

    write_findings(Path("results/study"), ["es", "grpo", "es-grpo"], Path("results/study/findings"))

Reads only what the study wrote (passk runs, diff.json, forgetting.json, entropy from the
samples, training logs) and writes `findings.json` and `findings.md`. Claims (Ba et al., "ES vs
GRPO", and the neighbours listed in docs/references.md, "The claims evalkit tests"), each
with its figures, intervals, the rule that turns them into a verdict, and the smallest
difference the study could have told from zero (the half-width of its interval):

- coverage: ES keeps pass@k at large k where GRPO narrows it. Paired bootstrap over held-out
  problems (metrics.compare) of each method minus the base, and ES minus GRPO, at k = 1 and
  the largest k. Supported when ES - GRPO at the largest k is above 0 (interval), contradicted
  when below, else inconclusive.
- entropy: GRPO collapses token entropy, ES does not. Per-problem mean token entropy of the
  held-out samples (nats, per token), each method minus the base, paired bootstrap over
  problems (metrics.paired). Supported when GRPO's drop is significant and ES's is not;
  contradicted when ES drops significantly more than GRPO or GRPO does not drop; else inconclusive.
- sparsity: ES updates are sparse and concentrated. diff.json of each method against the base in
  the training dtype: changed fraction by bits, changed beyond half a bf16 ulp (the precision
  artefact of arXiv 2511.08567), the share of ||dW||^2 in the top 1% of entries. Supported when
  ES changes a smaller fraction than GRPO beyond the bf16 threshold and is more concentrated;
  contradicted when both are the other way round; else inconclusive (no interval: a diff is exact).
- forgetting: ES does not forget. evalkit forgetting per method (paired differences, Holm-adjusted
  McNemar) and the forward KL(pi_base || pi_model) on training prompts (per token, and ES - GRPO
  per completion, paired over the same base completions). Contradicted when ES loses
  significantly on any benchmark; supported when nothing moved significantly on benchmarks the
  base solves at least once; inconclusive when the base is at the floor everywhere (0 correct:
  nothing to lose), with KL as the measure of how far each method moved.
- es-grpo: ES then GRPO beats either alone. Paired pass@1 of ES-then-GRPO minus ES and minus
  GRPO. Supported when both are above 0, contradicted when either is below 0, else inconclusive.

Other methods of a study (distill, grpo-guided, grpo-hinted) appear in the figures (each minus
the base, their diffs, forgetting and training rows) but no verdict reads them: the claims are
about ES and GRPO. `other_methods` lists them and findings.md says so under the table.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from analyses.runs import Run, load_run

__all__ = ["write_findings", "findings", "CLAIM_METHODS"]

CLAIM_METHODS = ("es", "grpo", "es-grpo")  # the methods the verdicts read


def write_findings(root: Path, methods: list[str], out: Path) -> dict:
    """findings.json and findings.md in `out` (see the module docstring)."""
    from evalkit.jsonio import plain_json, write_atomic, write_json_atomic

    result = plain_json(findings(Path(root), methods))
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "findings.json", result)
    write_atomic(out / "findings.md", lambda fh: fh.write(to_markdown(result)))
    return result


def findings(root: Path, methods: list[str]) -> dict:
    runs = {m: load_run(root / "passk" / m) for m in ["base", *methods] if (root / "passk" / m).is_dir()}
    rows = [_coverage(runs), _entropy(runs), _sparsity(root, methods), _forgetting(root, methods),
            _sequence(runs)]
    return {"kind": "study-findings", "methods": methods, "claims": [r for r in rows if r is not None],
            "other_methods": [m for m in methods if m not in CLAIM_METHODS], "training": _training(root, methods)}


# ---------------------------------------------------------------- helpers


def _counts(run: Run):
    table = run.per_problem().set_index("problem_id")
    return table


def _paired(runs: dict, a: str, b: str, ks) -> dict:
    """b - a per k over the problems both ran, paired bootstrap."""
    from metrics.compare import paired_passk_difference

    ta, tb = _counts(runs[a]), _counts(runs[b])
    shared = ta.index.intersection(tb.index)
    table = paired_passk_difference((ta.loc[shared, "n"], ta.loc[shared, "c"]),
                                    (tb.loc[shared, "n"], tb.loc[shared, "c"]), ks)
    return {int(r.k): {"a": a, "b": b, "pass_a": r.pass_a, "pass_b": r.pass_b, "difference": r.difference,
                       "ci_low": r.ci_low, "ci_high": r.ci_high, "n_problems": int(r.n_problems)}
            for r in table.itertuples()}


def _sign(row: dict) -> int:
    """+1 / -1 when the interval lies above / below 0, else 0."""
    return 1 if row["ci_low"] > 0 else -1 if row["ci_high"] < 0 else 0


def _half_width(rows) -> float:
    widths = [(r["ci_high"] - r["ci_low"]) / 2 for r in rows if r]
    return float(np.nanmax(widths)) if widths else float("nan")


# ---------------------------------------------------------------- the claims


def _coverage(runs: dict) -> dict | None:
    if "base" not in runs or len(runs) < 2:
        return None
    ks = sorted({r["k"] for r in runs["base"].summary.get("pass_at_k", [])})
    kmax = ks[-1]
    rows = {f"{m} - base": _paired(runs, "base", m, [1, kmax]) for m in runs if m != "base"}
    verdict, rule = "inconclusive", "ES - GRPO at the largest k above 0: supported; below: contradicted"
    if {"es", "grpo"} <= set(runs):
        rows["es - grpo"] = _paired(runs, "grpo", "es", [1, kmax])
        sign = _sign(rows["es - grpo"][kmax])
        verdict = {1: "supported", -1: "contradicted", 0: "inconclusive"}[sign]
    return {"claim": "coverage", "statement": "ES keeps pass@k at large k where GRPO narrows it",
            "k_max": kmax, "differences": rows, "verdict": verdict, "rule": rule,
            "detectable": _half_width([r[kmax] for r in rows.values()])}


def _problem_entropy(run: Run):
    s = run.samples.dropna(subset=["mean_entropy"])
    weighted = (s["mean_entropy"] * s["num_tokens"]).groupby(s["problem_id"]).sum()
    return weighted / s.groupby("problem_id")["num_tokens"].sum()


def _entropy(runs: dict) -> dict | None:
    from metrics.passk import bootstrap_passk

    if "base" not in runs or not runs["base"].has_entropy():
        return None
    base = _problem_entropy(runs["base"])
    rows = {}
    for m in (m for m in runs if m != "base"):
        other = _problem_entropy(runs[m])
        shared = base.index.intersection(other.index)
        a, b = base.loc[shared].to_numpy(), other.loc[shared].to_numpy()
        (low,), (high,) = bootstrap_passk((b - a)[:, None], n_boot=2000)  # percentile bootstrap over problems
        rows[f"{m} - base"] = {"base_entropy": float(a.mean()), "entropy": float(b.mean()),
                               "difference": float((b - a).mean()), "ci_low": float(low), "ci_high": float(high),
                               "n": int(len(shared))}
    verdict = "inconclusive"
    if {"es - base", "grpo - base"} <= set(rows):
        es, grpo = _sign(rows["es - base"]), _sign(rows["grpo - base"])
        if grpo < 0 and es >= 0:
            verdict = "supported"
        elif grpo >= 0 or (es < 0 and rows["es - base"]["difference"] < rows["grpo - base"]["difference"]):
            verdict = "contradicted" if grpo > 0 or es < 0 else "inconclusive"
    return {"claim": "entropy", "statement": "GRPO collapses token entropy and ES does not",
            "unit": "nats per generated token, held-out samples", "differences": rows, "verdict": verdict,
            "rule": "GRPO - base below 0 and ES - base not: supported; GRPO up, or ES down more than GRPO: "
                    "contradicted", "detectable": _half_width(list(rows.values()))}


def _sparsity(root: Path, methods: list[str]) -> dict | None:
    rows = {}
    for m in methods:
        path = root / "diff" / m / "diff.json"
        if path.is_file():
            overall = json.loads(path.read_text())["updates"]["other"]["overall"]
            rows[m] = {k: overall.get(k) for k in ("changed_frac_bits", "changed_frac_rel", "changed_frac_atol",
                                                   "top_1pct_share", "top_0.1pct_share", "rel_norm",
                                                   "update_norm")}
    if not rows:
        return None
    for r in rows.values():
        r["equals_base"] = r["changed_frac_bits"] == 0
    verdict = "inconclusive"
    if {"es", "grpo"} <= set(rows) and not (rows["es"]["equals_base"] or rows["grpo"]["equals_base"]):
        es, grpo = rows["es"], rows["grpo"]
        sparser = es["changed_frac_rel"] < grpo["changed_frac_rel"]
        concentrated = es["top_1pct_share"] > grpo["top_1pct_share"]
        verdict = "supported" if sparser and concentrated else "contradicted" if not (sparser or concentrated) \
            else "inconclusive"
    return {"claim": "sparsity", "statement": "ES updates are sparse and concentrated", "by_method": rows,
            "verdict": verdict, "rule": "ES sparser beyond half a bf16 ulp and more concentrated (top 1% share) "
                                        "than GRPO: supported; neither: contradicted"}


def _forgetting(root: Path, methods: list[str]) -> dict | None:
    rows, kls = {}, {}
    for m in methods:
        path = root / "forgetting" / m / "forgetting.json"
        if path.is_file():
            report = json.loads(path.read_text())
            kl = kls[m] = report.get("kl") or {}
            rows[m] = {"verdict": report["verdict"], "kl_per_token": kl.get("kl_per_token"),
                       "kl_per_token_se": kl.get("kl_per_token_se"),
                       "benchmarks": {b["benchmark"]: {k: b.get(k) for k in ("base_accuracy", "model_accuracy",
                                                                              "difference", "ci_low", "ci_high")}
                                      | {"p_holm": b["mcnemar"].get("p_holm")} for b in report["benchmarks"]}}
    if not rows:
        return None
    verdict, note = "inconclusive", None
    if "es" in rows:
        marks = rows["es"]["benchmarks"].values()
        lost = any(b["p_holm"] is not None and b["p_holm"] < 0.05 and b["difference"] < 0 for b in marks)
        # A benchmark the base never solves cannot show a loss: at the floor, "no change" says nothing
        # (and a gain there does not stand against "no change where there was something to lose").
        informative = [b for b in marks if _solved(b)]
        moved = any(b["p_holm"] is not None and b["p_holm"] < 0.05 for b in informative)
        if lost:
            verdict = "contradicted"
        elif not informative:
            note = "the base solves none of these items (floor): no loss could be measured"
        elif not moved:
            verdict = "supported"
    widths = [(b["ci_high"] - b["ci_low"]) / 2 for r in rows.values() for b in r["benchmarks"].values() if _solved(b)]
    return {"claim": "forgetting", "statement": "ES does not forget what it was not trained on", "by_method": rows,
            "kl_es_minus_grpo": _kl_difference(kls), "verdict": verdict, "note": note,
            "rule": "a significant loss for ES (Holm-adjusted McNemar < 0.05): contradicted; no significant "
                    "change on benchmarks the base solves at least once: supported; all at the floor: "
                    "inconclusive", "detectable": float(np.nanmax(widths)) if widths else None}


def _solved(bench: dict) -> bool:
    """The base solves the benchmark at least once: it has something to lose."""
    return (bench["base_accuracy"] or 0) > 0


def _kl_difference(kls: dict) -> dict | None:
    """KL(base || ES) - KL(base || GRPO) per completion, from each method's forgetting `kl`
    block, paired over the same base completions (same prompts, seed and samples in both
    forgetting runs), percentile bootstrap over prompts."""
    from metrics.passk import bootstrap_passk

    for m in ("es", "grpo"):
        kl = kls.get(m) or {}
        if kl.get("status") != "computed" or not kl.get("per_prompt_kl_sequence"):
            return None
    same = all(kls["es"].get(k) == kls["grpo"].get(k) for k in ("prompts", "seed", "mean_positions", "task"))
    if not same:
        return None
    d = np.asarray(kls["es"]["per_prompt_kl_sequence"]) - np.asarray(kls["grpo"]["per_prompt_kl_sequence"])
    (low,), (high,) = bootstrap_passk(d[:, None], n_boot=2000)
    return {"unit": "nats per completion", "es": kls["es"]["kl_sequence"], "grpo": kls["grpo"]["kl_sequence"],
            "difference": float(d.mean()), "ci_low": float(low), "ci_high": float(high), "prompts": int(len(d))}


def _sequence(runs: dict) -> dict | None:
    if not {"es-grpo", "es", "grpo"} <= set(runs):
        return None
    rows = {"es-grpo - es": _paired(runs, "es", "es-grpo", [1])[1],
            "es-grpo - grpo": _paired(runs, "grpo", "es-grpo", [1])[1]}
    signs = [_sign(r) for r in rows.values()]
    verdict = "supported" if min(signs) > 0 else "contradicted" if min(signs) < 0 else "inconclusive"
    return {"claim": "es-grpo", "statement": "ES then GRPO beats either alone (pass@1, held out)",
            "differences": rows, "verdict": verdict,
            "rule": "both differences above 0: supported; either below 0: contradicted",
            "detectable": _half_width(list(rows.values()))}


def _training(root: Path, methods: list[str]) -> dict:
    """Training reward and entropy, first and last logged step, per trainer folder, and
    what gave no learning signal, in each trainer's own terms (`_no_signal`)."""
    out = {}
    for m in methods:
        for log in sorted((root / "train" / m).glob("**/metrics.jsonl")):
            lines = [json.loads(x) for x in log.read_text(encoding="utf-8").split("\n") if x.strip()]
            if lines:
                name = str(log.parent.relative_to(root / "train"))
                out[name] = {"steps": len(lines), "reward_first": lines[0].get("reward"),
                             "reward_last": lines[-1].get("reward"),
                             "reward_mean_last_quarter": float(np.mean([x.get("reward", np.nan) for x in
                                                                        lines[-max(1, len(lines) // 4):]])),
                             "entropy_first": lines[0].get("entropy"), "entropy_last": lines[-1].get("entropy"),
                             **_no_signal(lines)}
    return out


def _no_signal(lines: list[dict]) -> dict:
    """ES: iterations whose members' fitness were all equal (`zero_spread`: no update direction).
    GRPO: the mean share of groups whose rewards were all equal (`frac_reward_zero_std`: zero
    advantage) and the steps where every group was so. A log with neither key (distillation)
    gets neither figure: a count over a key the trainer does not write would read 0."""
    if any("zero_spread" in x for x in lines):
        return {"zero_spread_iterations": sum(bool(x.get("zero_spread")) for x in lines)}
    shares = [x["frac_reward_zero_std"] for x in lines if x.get("frac_reward_zero_std") is not None]
    if shares:
        return {"mean_frac_reward_zero_std": float(np.mean(shares)),
                "steps_every_group_zero_std": sum(v == 1.0 for v in shares)}
    return {}


def to_markdown(result: dict) -> str:
    lines = ["| claim | figures | verdict |", "|---|---|---|"]
    for c in result["claims"]:
        lines.append(f"| {c['statement']} | {_figures(c)} | {c['verdict']} |")
    if result.get("other_methods"):
        lines.append(f"\n{', '.join(result['other_methods'])}: figures listed above for comparison; the verdicts "
                     f"read {', '.join(CLAIM_METHODS)} only (the claims are about ES and GRPO).")
    return "\n".join(lines) + "\n"


def _figures(claim: dict) -> str:
    def ci(r):
        return f"{r['difference']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"

    if claim["claim"] == "coverage":
        k = claim["k_max"]
        return "; ".join(f"{name}: pass@1 {ci(r[1])}, pass@{k} {ci(r[k])}" for name, r in claim["differences"].items())
    if claim["claim"] in ("entropy", "es-grpo"):
        return "; ".join(f"{name}: {ci(r)}" for name, r in claim["differences"].items())
    if claim["claim"] == "sparsity":
        return "; ".join(f"{m}: equals its base (no weight changed)" if r["equals_base"] else
                         f"{m}: changed {r['changed_frac_bits']:.1%} (bits), {r['changed_frac_rel']:.1%} beyond "
                         f"bf16, top-1% share {r['top_1pct_share']:.1%}" for m, r in claim["by_method"].items())
    parts = [f"{m}: accuracy {_accuracies(r)}, KL/token {_num(r['kl_per_token'])}"
             for m, r in claim["by_method"].items()]
    if claim.get("kl_es_minus_grpo"):
        parts.append(f"KL per completion es - grpo: {ci(claim['kl_es_minus_grpo'])}")
    if claim.get("note"):
        parts.append(claim["note"])
    return "; ".join(parts)


def _accuracies(row: dict) -> str:
    return ", ".join(f"{name} {b['base_accuracy']:.2f} -> {b['model_accuracy']:.2f}"
                     for name, b in row["benchmarks"].items())


def _num(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


# ---------------------------------------------------------------- seeded studies (issue 29)
#
# Verdict words, each claim's rule below and a test each in tests/test_findings_v2.py:
#   supported          the claim's strong form holds, every interval on its side of 0
#   partly supported   the direction holds (ES ahead of GRPO where the claim says so), its strong form does not
#   contradicted       the interval says the opposite of the claim
#   inconclusive       the deciding interval holds 0: the study could not tell; `detectable` is its half
#                      width, roughly the smallest effect it could have told from zero
#   not tested         the measurement could not be made (missing, at the floor, or all-zero updates)

VERDICTS = ("supported", "partly supported", "contradicted", "inconclusive", "not tested")
FORGETTING_MARGIN = 0.05  # a loss smaller than this (accuracy) is "no forgetting"
FLOOR = 0.2  # a benchmark the base scores below max(FLOOR, chance) has nothing to lose
MIN_ITEMS = 200  # fewer items than this cannot show a loss of FORGETTING_MARGIN (issue 29)
CONCENTRATION_MARGIN = 0.05  # top-q share above an i.i.d. Gaussian update's by this (relative): concentrated
FORGETTING_ORDER = ("contradicted", "partly supported", "inconclusive", "supported")  # weakest for the claim first


def side(row: dict | None) -> int | None:
    """+1 / -1 when the interval lies above / below 0, 0 when it holds 0, None when missing."""
    if row is None:
        return None
    return 1 if row["ci_low"] > 0 else -1 if row["ci_high"] < 0 else 0


def half_width(row: dict | None) -> float | None:
    return None if row is None else (row["ci_high"] - row["ci_low"]) / 2


def coverage_verdict(es_grpo: dict | None, grpo_base: dict | None, es_base: dict | None) -> tuple[str, str]:
    """On pass@k above the chance floor at the largest k where the base clears it.

    The claim is a conjunction (GRPO narrows pass@k at large k; ES keeps it), so GRPO widening it
    (GRPO - base above 0) contradicts it unless ES is still ahead of GRPO (then the direction
    holds: partly supported)."""
    rule = ("ES - GRPO below 0, or GRPO - base above 0 (GRPO widened it) with ES - GRPO not above 0: "
            "contradicted; ES - GRPO above 0 with GRPO - base below 0 and ES - base not: supported; ES - GRPO "
            "above 0 otherwise: partly supported; ES - GRPO holding 0 and GRPO - base not above 0: inconclusive; "
            "no k where the base clears its floor: not tested")
    signs = side(es_grpo), side(grpo_base), side(es_base)
    if None in signs:
        return "not tested", rule
    d, g, e = signs
    if d < 0 or (g > 0 and d == 0):
        return "contradicted", rule
    if d > 0:
        return ("supported" if g < 0 and e >= 0 else "partly supported"), rule
    return "inconclusive", rule


def entropy_verdict(es_base: dict | None, grpo_base: dict | None, grpo_es: dict | None) -> tuple[str, str]:
    rule = ("GRPO - base below 0 and ES - base not: supported; both below 0 and GRPO - ES below 0: partly "
            "supported; GRPO - base above 0, or GRPO - ES above 0: contradicted; else inconclusive")
    e, g, d = side(es_base), side(grpo_base), side(grpo_es)
    if None in (e, g, d):
        return "not tested", rule
    if g < 0 and e >= 0:
        return "supported", rule
    if g < 0 and e < 0 and d < 0:
        return "partly supported", rule
    if g > 0 or d > 0:
        return "contradicted", rule
    return "inconclusive", rule


def es_concentrated(es_share: float, grpo_share: float, gaussian_share: float) -> bool:
    """ES's update is more concentrated than GRPO's *and* than i.i.d. noise: its top-q share of
    ||dW||^2 exceeds GRPO's and the i.i.d. Gaussian update's by CONCENTRATION_MARGIN (relative).

    The Gaussian is the reference because an ES update is a weighted sum of i.i.d. Gaussian
    perturbations, dense and unconcentrated by construction (issue 29); its top-1% share at
    1.3e8 entries has a sampling error near 1e-4 relative, so a margin of 5% tells structure from
    noise. Without the Gaussian reference, an update that *is* noise (ES, 0.08448 against the
    Gaussian's 0.08449 in the v2 study) reads as "more concentrated" than one lighter-tailed than
    noise (GRPO's Adam steps, 0.0801)."""
    return es_share > grpo_share and es_share > gaussian_share * (1 + CONCENTRATION_MARGIN)


def sparsity_verdict(sparser: list | None, concentrated: list | None) -> tuple[str, str]:
    """`sparser`: per bf16 run, ES changed a smaller share of bf16 weights than GRPO;
    `concentrated`: per seed, `es_concentrated` at matched norm (top-1% share)."""
    rule = (f"ES sparser in bf16 and, in every seed, more concentrated at matched norm (top-1% share of ||dW||^2 "
            f"above GRPO's and over {CONCENTRATION_MARGIN:.0%} above an i.i.d. Gaussian update's): supported; one of "
            "the two: partly supported; neither: contradicted; seeds disagreeing: inconclusive; no bf16 run or "
            "matched pair: not tested")
    if not sparser or not concentrated:
        return "not tested", rule
    a, b = (all(x) if len(set(x)) == 1 else None for x in (sparser, concentrated))
    if a is None or b is None:
        return "inconclusive", rule
    return ("supported" if a and b else "partly supported" if a or b else "contradicted"), rule


def forgetting_verdict(es_base: dict | None, es_grpo: dict | None, informative: bool) -> tuple[str, str]:
    """One benchmark (the claim takes the weakest over every benchmark that counts: `FORGETTING_ORDER`)."""
    rule = (f"on a benchmark of at least {MIN_ITEMS} items the base scores at least max({FLOOR}, chance) on: ES - "
            f"base's lower bound above -{FORGETTING_MARGIN} (any loss under the margin): supported; ES - base below 0 "
            "with ES - GRPO above 0: partly supported; below 0 otherwise: contradicted; else inconclusive; no such "
            "benchmark: not tested; over several benchmarks, the weakest (contradicted, partly supported, "
            "inconclusive, supported)")
    if not informative or es_base is None:
        return "not tested", rule
    if es_base["ci_low"] > -FORGETTING_MARGIN:
        return "supported", rule
    if side(es_base) < 0:
        return ("partly supported" if side(es_grpo) == 1 else "contradicted"), rule
    return "inconclusive", rule


def sequence_verdict(minus_es: dict | None, minus_grpo: dict | None, minus_control: dict | None) -> tuple[str, str]:
    rule = ("ES-then-GRPO - ES and - GRPO (same total budget) both above 0: supported; above ES and above the GRPO "
            "control (same GRPO steps) only: partly supported; either of the first two below 0: contradicted; else "
            "inconclusive")
    a, b, c = side(minus_es), side(minus_grpo), side(minus_control)
    if a is None or b is None:
        return "not tested", rule
    if a > 0 and b > 0:
        return "supported", rule
    if a < 0 or b < 0:
        return "contradicted", rule
    if a > 0 and c == 1:
        return "partly supported", rule
    return "inconclusive", rule


def write_seeded_findings(root: Path, out: Path) -> dict:
    """findings.json and findings.md of a seeded study (`seeded_result`); with pre-registered
    claims, findings.md opens with them."""
    from analyses.reanalysis_tables import reanalysis_markdown
    from analyses.study_tables import seeded_markdown
    from evalkit.jsonio import write_atomic, write_json_atomic

    result = seeded_result(Path(root))
    text = seeded_markdown(result, _shown(Path(root)))
    if "preregistered" in result:
        text = (reanalysis_markdown(result["preregistered"]) + "\n# The claims under analyses.study_findings' "
                "rules\n\n" + text)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "findings.json", result)
    write_atomic(out / "findings.md", lambda fh: fh.write(text))
    return result


def seeded_result(root: Path) -> dict:
    """findings.json's content for a seeded study: analyses.study_seeded's figures and these
    rules' claims, and, when study.json holds a registration (`evalkit study` with a claims
    file), the pre-registered claims under `preregistered` (analyses.reanalyse), each revision
    of them since the registration flagged. As the file holds it (plain JSON)."""
    from analyses.study_seeded import seeded_figures
    from evalkit.jsonio import plain_json

    figures = seeded_figures(Path(root))
    result = {"kind": "study-findings", "seeded": True, "verdicts": list(VERDICTS), "claims": seeded_claims(figures),
              "figures": figures}
    state = json.loads((Path(root) / "study.json").read_text(encoding="utf-8"))
    if state.get("registration"):
        from analyses.preregistered import preregistered_findings

        command = f"python -m analyses.recompute {_shown(Path(root))} preregistered"
        result["preregistered"] = preregistered_findings(Path(root), None, command=command, figures=figures)
    return json.loads(json.dumps(plain_json(result)))


def _shown(root: Path) -> str:
    """The study folder as a command run from here names it (relative when below here)."""
    try:
        return str(root.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(root)


def seeded_claims(f: dict) -> list[dict]:
    return [_coverage_claim(f), _entropy_claim(f), _sparsity_claim(f), _forgetting_claim(f), _sequence_claim(f)]


def _claim(name: str, statement: str, verdict_rule: tuple, deciding: dict | None, **figures) -> dict:
    verdict, rule = verdict_rule
    return {"claim": name, "statement": statement, "verdict": verdict, "rule": rule,
            "detectable": half_width(deciding) if verdict == "inconclusive" else None, **figures}


def _coverage_claim(f: dict) -> dict:
    rows = {}
    for kind, cov in f["coverage"].items():
        k = cov["k_clear"]
        d = cov["differences"]
        pick = (lambda name, k=k, d=d: (d.get(name) or {}).get(k) if k is not None else None)  # noqa: E731
        at = cov["ks"].index(k) if k is not None else None
        floor = None if at is None else {name: c["placebo"]["estimate"][at]
                                         for name, c in [("base", cov["base"]), *cov["arms"].items()]}
        rows[kind] = {"k": k, "sampling": cov["sampling"], "es - grpo": pick("es - grpo"),
                      "grpo - base": pick("grpo - base"), "es - base": pick("es - base"), "placebo_floor": floor,
                      "verdict": coverage_verdict(pick("es - grpo"), pick("grpo - base"), pick("es - base"))[0]}
    kind = "passk-nucleus" if "passk-nucleus" in rows else "passk" if "passk" in rows else None
    main = rows.get(kind) or {}
    verdict, rule = coverage_verdict(main.get("es - grpo"), main.get("grpo - base"), main.get("es - base"))
    s = main.get("sampling") or {}
    verdict = verdict, rule + (f"; decided at the literature's setting (passk-nucleus: T {s.get('temperature')}, "
                               f"top-p {s.get('top_p')}), the other setting's verdict beside it"
                               if kind == "passk-nucleus" else "")
    return _claim("coverage", "ES keeps pass@k at large k where GRPO narrows it", verdict, main.get("es - grpo"),
                  setting=kind, settings=rows, unit="pass@k minus its placebo floor, at the largest k where the "
                                                   "base clears its floor")


def _entropy_claim(f: dict) -> dict:
    e = f.get("entropy") or {}
    d = e.get("differences", {})
    verdict = entropy_verdict(d.get("es - base"), d.get("grpo - base"), d.get("grpo - es"))
    return _claim("entropy", "GRPO collapses token entropy and ES does not", verdict, d.get("grpo - base"),
                  differences=d, unit=e.get("unit"))


def _sparsity_claim(f: dict) -> dict:
    s = f.get("sparsity") or {}
    bf16 = s.get("bf16") or {}
    # an update that rounds to nothing in bf16 is not sparse, it is absent: not tested
    sparser = ([bf16["es"]["changed_frac_bits"] < bf16["grpo"]["changed_frac_bits"]]
               if {"es", "grpo"} <= set(bf16) and all(bf16[m]["changed_frac_bits"] for m in ("es", "grpo")) else None)
    concentrated = []
    for row in (s.get("matched") or {}).values():
        if row["matched"] is None:
            continue
        q = row["qs"].index(0.01) if 0.01 in row["qs"] else 0
        concentrated.append(es_concentrated(row["top_share"]["es"][q], row["top_share"]["grpo"][q],
                                            row["gaussian_top_share"][q]))
    return _claim("sparsity", "ES updates are sparse and concentrated", sparsity_verdict(sparser, concentrated or None),
                  None, bf16=bf16, matched=s.get("matched"), picked_fp32=s.get("picked_fp32"))


def _forgetting_claim(f: dict) -> dict:
    """Every benchmark of at least MIN_ITEMS items the base scores at least max(FLOOR, chance) on
    counts; the claim's verdict is the weakest of theirs (FORGETTING_ORDER), each listed."""
    fg = f.get("forgetting") or {}
    statement = "ES does not forget what it was not trained on"
    counted = {}
    for name, b in (fg.get("benchmarks") or {}).items():
        floor = max(FLOOR, b.get("chance") or 0.0)
        if b["base_accuracy"] >= floor and b["items"] >= MIN_ITEMS and "es" in b["arms"]:
            counted[name] = {"floor": floor, "verdict": forgetting_verdict(b["arms"]["es"], b.get("es - grpo"), True)[0]}
    if not counted:
        return _claim("forgetting", statement, forgetting_verdict(None, None, False), None,
                      benchmarks=fg.get("benchmarks"), kl=fg.get("kl"))
    name = min(counted, key=lambda n: FORGETTING_ORDER.index(counted[n]["verdict"]))
    b = fg["benchmarks"][name]
    verdict = forgetting_verdict(b["arms"]["es"], b.get("es - grpo"), True)
    return _claim("forgetting", statement, verdict, b["arms"]["es"], benchmark=name, floor=counted[name]["floor"],
                  counted=counted, benchmarks=fg.get("benchmarks"), kl=fg.get("kl"))


def _sequence_claim(f: dict) -> dict:
    s = f.get("sequence") or {}
    verdict = sequence_verdict(s.get("es-grpo - es"), s.get("es-grpo - grpo"), s.get("es-grpo - grpo control"))
    return _claim("es-grpo", "ES then GRPO beats either alone (pass@1, held out)", verdict, s.get("es-grpo - grpo"),
                  differences=s)
