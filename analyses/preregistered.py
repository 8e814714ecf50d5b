"""A seeded study's claims under their registration (analyses.claims), from the study's files only:
what `python -m analyses.reanalyse` writes and a registered study's findings stage adds to its
findings.json (`preregistered`).

    result = preregistered_findings(Path("results/study-v2"), Path("studies/seed-cpu-v2.claims.toml"))

Per claim: the primary endpoint's estimate, its two-level bootstrap interval and the
Satterthwaite interval beside it (analyses.claim_endpoints), the bootstrap p of its threshold,
Holm's adjusted p across every claim that has one, the effect detectable at the registered power,
and the verdict. Any interval end within `stability_window` of the threshold (at 95%, or at the
level Holm tests the claim) gets the random-stream check, whose pooled replicates (at least
20,000 per stream) then decide. The registration is the study's (study.json `registration`,
recorded by `evalkit study` before its first training stage) or, for a study that has none, the
claims file's own, marked retrospective. A claim whose settings differ from the registered ones
is "revised after data", with its verdict under the registered settings beside; `history` (from
analyses.rule_history, given by the caller) lists the rules of the study's own findings changed
after its data, and flags the claims split from them.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

__all__ = ["preregistered_findings", "DIFFERENCES"]

DIFFERENCES = (("grpo", "base", "problem"), ("es", "base", "problem"), ("es-grpo", "base", "problem"),
               ("es", "grpo", "apart"), ("es-large", "base", "problem"), ("es-large", "grpo", "apart"))


def preregistered_findings(root: Path, claims_path: Path | None = None, *, command: str = "",
                           figures: dict | None = None, history: list[dict] | None = None) -> dict:
    """Everything findings.json holds (module docstring). `figures`: the study's seeded figures
    when the findings stage has them (their checks are listed); otherwise its findings.json's.
    `history`: analyses.rule_history.revised_rules of the study's own findings (a re-analysis)."""
    from analyses.arm_checks import arm_summary
    from analyses.claims import read_claims, registration, revisions
    from analyses.study_seeded import Study

    study = Study(Path(root))
    record = study.state.get("registration")
    if claims_path is None:
        if record is None:
            raise ValueError(f"{root}: study.json records no registration; give the claims file (--claims)")
        claims_path = Path(record["claims_file"])
    claims = read_claims(Path(claims_path))
    source = "study.json"
    if record is None:
        trained = [n for n in study.state["stages"] if n.startswith("train") and study.result(n)]
        record, source = registration(claims, str(claims_path), done_before=trained, synthesized=True), "claims file"
    revised = revisions(record, claims)
    rows = _claims(study, claims, record, revised)
    history = history or []
    _flag(rows, revised, history, record)
    checks = figures["checks"] if figures is not None else _checks(study.root)
    return {"kind": "preregistered-findings", "study": _shown(study.root), "claims_file": str(claims_path),
            "registration": {**record, "source": source}, "revisions": revised, "test": asdict(claims.test),
            "verdicts": ["supported", "contradicted", "inconclusive", "not tested"], "claims": rows,
            "revised_rules": history, "curves": _curves(study), "checks": checks, "arms": arm_summary(study),
            "seeds": study.seeds, "problems": len(study.problems), "limitations": list(claims.limitations),
            "note": claims.note, "recompute": command}


def _shown(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _claims(study, claims, record: dict, revised: dict) -> list[dict]:
    """Each claim evaluated, Holm across them, the stability check where a verdict is near its
    threshold, then the final verdicts; the registered version of each revised claim beside."""
    from analyses.claim_endpoints import evaluate, measure
    from analyses.claims import claim_from_settings

    test, rows = claims.test, []
    current = {c.id: c for c in claims.claims}
    gates = _Gates(study, claims.test.alpha)
    for cid, status in revised["claims"].items():
        claim = current.get(cid) or claim_from_settings(cid, record["settings"]["claims"][cid])
        gate = gates.check(claim)
        m = None if gate and not gate["passed"] else measure(study, claim)
        row = {"id": cid, "statement": claim.statement, "from": claim.parent, "endpoint": claim.endpoint,
               "contrast": " - ".join(claim.contrast), "direction": claim.direction, "threshold": claim.threshold,
               "settings": claim.settings, "note": claim.get("note"), "status": status["status"],
               "primary": _judged(claim, m, test, gate), "_claim": claim, "_measured": m}
        if gate:
            row["gate"] = gate
        if status["status"] == "revised after data":
            old = claim_from_settings(cid, record["settings"]["claims"][cid])
            old_gate = gates.check(old)
            judged = _judged(old, None if old_gate and not old_gate["passed"] else measure(study, old), test, old_gate)
            row["registered"] = {"settings": old.settings, "primary": judged, "_claim": old}
        tested = m is not None
        row["also_at"] = {s: evaluate(claim, measure(study, claim, setting=s), test)
                          for s in claim.get("also_at", []) if tested}
        row["sensitivity"] = {s: evaluate(claim, measure(study, claim, floor=True), test)
                              for s in claim.get("sensitivity", []) if s == "above-floor" and tested}
        rows.append(row)
    _decide(study, rows, test)
    for row in rows:
        for key in ("_claim", "_measured"):
            row.pop(key)
        row.get("registered", {}).pop("_claim", None)
    return rows


class _Gates:
    """The positive controls a claim's gate reads (analyses.arm_checks.validation_control), each
    arm's once: every seed the arm was validated on."""

    def __init__(self, study, alpha: float):
        self.study, self.alpha, self.controls = study, alpha, {}

    def check(self, claim) -> dict | None:
        from analyses.arm_checks import validation_control
        from analyses.claims import gate_passed

        arms = claim.get("gate")
        if not arms:
            return None
        for arm in arms:
            if arm not in self.controls:  # a seed not yet validated is not counted (none: the gate fails)
                done = self.study.result("validate-base") is not None
                self.controls[arm] = [validation_control(self.study.root, arm, seed, alpha=self.alpha)
                                      for seed in self.study.seeds_of(arm, "validate")
                                      if done and self.study.result(f"validate-{arm}-s{seed}") is not None]
        share = claim.get("gate_share", 0.5)
        shown = {arm: [{k: c[k] for k in ("seed", "passed", "p_value", "level", "base", "model", "gain", "gain_low",
                                          "picked_step")} for c in self.controls[arm]] for arm in arms}
        return {"arms": list(arms), "share": share, "passed": gate_passed(arms, share, self.controls),
                "controls": shown}


def _judged(claim, m, test, gate: dict | None) -> dict:
    """The claim's evaluation, or "not tested" where its gate failed (it then leaves Holm's family)."""
    from analyses.claim_endpoints import evaluate

    if gate and not gate["passed"]:
        return {"kind": "gated", "p": None, "verdict_unadjusted": "not tested",
                "why": f"the positive control of {', '.join(gate['arms'])} did not pass in {gate['share']:.0%} of the seeds"}
    return evaluate(claim, m, test)


def _decide(study, rows: list[dict], test) -> None:
    """Holm across the primary p's (a dropped claim is not in the family), the stability check
    near a threshold, Holm again on the final p's, the verdicts; the registered version of a
    revised claim is decided with its p in the place of the new one's."""
    from analyses.claim_endpoints import measure

    family = [r for r in rows if r["status"] != "dropped after data" and r["primary"].get("kind") != "gated"]
    for r in rows:
        _stabilise(r["_claim"], r["_measured"], r["primary"], test, _holm_level(family, r, test))
        for key in ("also_at", "sensitivity"):
            for setting, ev in r[key].items():
                m = measure(study, r["_claim"], floor=key == "sensitivity", setting=setting if key == "also_at"
                            else None)
                _stabilise(r["_claim"], m, ev, test, None)
        if "registered" in r and r["registered"]["primary"].get("p") is not None:
            old = r["registered"]
            _stabilise(old["_claim"], measure(study, old["_claim"]), old["primary"], test, None)
    adjusted = _holm([r["primary"] for r in family], test)
    _satterthwaite_verdicts(family, test)
    for r, adj in zip(family, adjusted, strict=True):
        _verdict(r, r["primary"], adj, test)
        if "registered" in r:
            swapped = _holm([x["primary"] if x is not r else r["registered"]["primary"] for x in family], test)
            _verdict(r["registered"], r["registered"]["primary"], swapped[family.index(r)], test)
        _streams(r, family, test)
    for r in rows:
        if r not in family:
            _verdict(r, r["primary"], None, test)
            if "registered" in r:  # under its registered rule it was in the family: Holm-adjusted with it
                old = r["registered"]["primary"]
                joined = _holm([x["primary"] for x in family] + [old], test)[-1] if old.get("p") else None
                _verdict(r["registered"], old, joined, test)
        for key in ("also_at", "sensitivity"):
            for ev in r[key].values():
                ev["verdict"] = ev["verdict_unadjusted"]
                ev["in_holm_family"] = False


def _holm(evaluations: list[dict], test) -> list[float | None]:
    p = [e["p"]["two_sided"] if e.get("p") else np.nan for e in evaluations]
    return _adjust(p, test)


def _adjust(p: list, test) -> list[float | None]:
    from metrics.inference import holm

    adj = holm(p) if test.holm else np.asarray(p, float)
    return [None if np.isnan(a) else float(a) for a in adj]


def _satterthwaite_verdicts(family: list[dict], test) -> None:
    """The verdict each claim would get from its Satterthwaite interval's t test, Holm-adjusted
    over the same family: beside the bootstrap's, flagged where they differ."""
    from analyses.claims import interval_verdict

    sat = [(r["primary"].get("satterthwaite") or {}).get("p") for r in family]
    adjusted = _adjust([p["two_sided"] if p else np.nan for p in sat], test)
    for r, p, adj in zip(family, sat, adjusted, strict=True):
        if p is not None:
            r["primary"]["satterthwaite"]["holm_p"] = adj
            r["primary"]["satterthwaite"]["verdict"] = interval_verdict(p, test.alpha, r["direction"],
                                                                        adj if test.holm else None)


def _holm_level(family: list[dict], row: dict, test) -> float | None:
    """The confidence at which Holm's step tests this claim, 1 - alpha / (m - rank + 1), from the
    primary p's (None: no p, or not in the family)."""
    ps = [r["primary"]["p"]["two_sided"] for r in family if r["primary"].get("p")]
    if not row["primary"].get("p") or row not in family or not test.holm:
        return None
    rank = sorted(ps).index(row["primary"]["p"]["two_sided"])
    return 1 - test.alpha / (len(ps) - rank)


def _stabilise(claim, m, ev: dict, test, holm_level: float | None) -> None:
    """The random-stream check when an interval end (at 95%, or at Holm's level) is within the
    window of the threshold; its pooled replicates then give the interval, p and detectable."""
    from analyses.claim_endpoints import replicates, stability
    from analyses.claims import interval_verdict
    from metrics.inference import detectable_effect

    if ev.get("p") is None:
        return
    ends = [ev["ci_low"], ev["ci_high"]]
    if holm_level is not None:
        reps = replicates(m, test.n_boot, test.boot_seed)
        lo, hi = np.quantile(reps, [(1 - holm_level) / 2, (1 + holm_level) / 2])
        ev["holm_level"] = {"confidence": holm_level, "ci_low": float(lo), "ci_high": float(hi)}
        ends += [float(lo), float(hi)]
    distance = min(abs(e - claim.threshold) for e in ends)
    ev["distance_to_threshold"] = distance
    if distance >= test.stability_window:
        return
    check = stability(claim, m, test)
    ev["at_n_boot"] = {k: ev[k] for k in ("ci_low", "ci_high", "p", "se_boot", "verdict_unadjusted")}
    ev.update(ci_low=check["ci_low"], ci_high=check["ci_high"], p=check["p"], se_boot=check["se_boot"],
              detectable=detectable_effect(check["se_boot"], alpha=test.alpha, power=test.power))
    ev["verdict_unadjusted"] = interval_verdict(ev["p"], test.alpha, claim.direction)
    for s in check["streams"]:
        s["verdict_unadjusted"] = interval_verdict(s["p"], test.alpha, claim.direction)
    ev["stability"] = {k: check[k] for k in ("streams", "replicates_per_stream", "replicates_pooled")}


def _verdict(row: dict, ev: dict, adjusted: float | None, test) -> None:
    from analyses.claims import interval_verdict

    ev["holm_p"] = adjusted
    if ev.get("kind") == "runs" or ev.get("kind") is None:
        row["verdict"] = ev["verdict_unadjusted"]
    else:
        row["verdict"] = interval_verdict(ev["p"], test.alpha, row["direction"] if "direction" in row
                                          else row["settings"]["direction"], adjusted if test.holm else None)
    ev["verdict_by_threshold"] = _by_threshold(ev, row.get("direction") or row["settings"]["direction"])


def _by_threshold(ev: dict, direction: str) -> dict | None:
    """Which unadjusted verdict each threshold would give: where this claim's verdict flips."""
    if ev.get("p") is None:
        return None
    lo, hi = ev["ci_low"], ev["ci_high"]
    side = {"supported": "threshold below the interval's lower end", "contradicted": "above its upper end"}
    if direction == "below":
        side = {"supported": "threshold above the interval's upper end", "contradicted": "below its lower end"}
    return {"interval": [lo, hi], **side, "inconclusive": "a threshold inside the interval"}


def _streams(row: dict, family: list[dict], test) -> None:
    """Each stream's verdict with Holm, the other claims' p's as decided: the share that agree."""
    from analyses.claims import interval_verdict
    from metrics.inference import holm

    ev = row["primary"]
    if "stability" not in ev:
        return
    ps = np.array([r["primary"]["p"]["two_sided"] if r["primary"].get("p") else np.nan for r in family])
    at = family.index(row)
    for s in ev["stability"]["streams"]:
        ps_s = ps.copy()
        ps_s[at] = s["p"]["two_sided"]
        adj = holm(ps_s)[at] if test.holm else ps_s[at]
        s["verdict"] = interval_verdict(s["p"], test.alpha, row["direction"], float(adj))
    same = sum(s["verdict"] == row["verdict"] for s in ev["stability"]["streams"])
    ev["stability"]["agree"] = same
    ev["stability"]["agree_unadjusted"] = sum(s["verdict_unadjusted"] == ev["verdict_unadjusted"]
                                              for s in ev["stability"]["streams"])
    ev["stability"]["streams_total"] = len(ev["stability"]["streams"])


def _checks(root: Path) -> list[dict]:
    """The checks the study's own findings made (figures.checks), as they stand."""
    path = Path(root) / "findings" / "findings.json"
    if not path.is_file():
        return []
    return (json.loads(path.read_text(encoding="utf-8")).get("figures") or {}).get("checks") or []


def _flag(rows: list[dict], revised: dict, history: list[dict], record: dict) -> None:
    parents = {h["claim"]: h for h in history if h["changed_the_verdict"]}
    for r in rows:
        flags = []
        if record.get("retrospective"):
            flags.append("registered after the data (retrospective)")
        if r["status"] == "revised after data":
            change = revised["claims"][r["id"]]["changed"]
            what = "; ".join(f"{k}: {a!r} -> {b!r}" for k, a, b in ((k, *v) for k, v in change.items()))
            flags.append(f"revised after data ({what}); verdict under the registered rule: "
                         f"{r['registered']['verdict']}")
        elif r["status"] != "unchanged":
            flags.append(r["status"])
        parent = parents.get(r["from"])
        if parent:
            flags.append(f"from v2's {parent['claim']} claim, whose rule ({parent['rule']}) was revised after data "
                         f"({parent['revised_commit']}): {parent['first_written']} as first written "
                         f"({parent['first_written_commit']}), {parent['revised']} as revised")
        ev = r["primary"]
        if "stability" in ev:
            st = ev["stability"]
            flags.append(f"within {record['settings']['test']['stability_window']} of its threshold: decided on "
                         f"{st['replicates_pooled']:,} replicates; {st['agree']} of {st['streams_total']} streams "
                         f"of {st['replicates_per_stream']:,} agree")
        sat = ev.get("satterthwaite") or {}
        if sat.get("verdict") and sat["verdict"] != r["verdict"]:
            flags.append(f"the Satterthwaite t test (df {sat['df']:.1f}, Holm p {sat['holm_p']:.3g}) gives "
                         f"{sat['verdict']}: the verdict rests on the bootstrap, whose seed level has few distinct "
                         "resamples")
        if ev.get("kind") == "runs" and r["endpoint"] == "gain-retained":
            flags.append("judged seed by seed on each point estimate (its bootstrap interval over the validation "
                         "problems listed, not used), not in Holm's family; the gain is read on the split that "
                         "picked the checkpoint")
        elif ev.get("kind") == "runs":
            flags.append("exact per-run values: no sampling interval, not in Holm's family")
            ratios = [x.get("norm_ratio") for x in ev.get("runs", []) if x.get("norm_ratio") is not None]
            if ratios and not all(0.5 <= x <= 2 for x in ratios):
                flags.append(f"matched norm NOT MET (ES / GRPO update norms {min(ratios):.0f} to {max(ratios):.0f}x)")
        r["flags"] = flags


def _curves(study) -> dict:
    from analyses.claim_endpoints import arm_curves, difference_curves

    out = {}
    for setting in ("passk-nucleus", "passk"):
        arms = arm_curves(study, setting)
        if arms is None:
            continue
        out[setting] = {**arms, "differences": {
            unit: difference_curves(study, setting, list(DIFFERENCES), floor=unit == "above-floor")["contrasts"]
            for unit in ("raw", "above-floor")}}
    return out
