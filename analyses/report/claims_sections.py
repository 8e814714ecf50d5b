"""The report of a pre-registered (re-)analysis (analyses.reanalyse), from its findings.json only:
what was found first (each claim in plain words, and the difference against k that the coverage
claims read, with its band), then the limitations, the claims table, pass@k per arm, the rules
revised after the data, the secondary readings and the stability check.

    write_claims_report(json.loads(Path("results/study-v2-reanalysis/findings.json").read_text()),
                        Path("results/study-v2-reanalysis/report"))

Every figure gives each arm one colour, line style and marker (ARM_STYLE: the same in every
figure), shows no pass@k above n / 2 (findings.json holds none), and keeps its legend under the
axes, where it covers no line.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import analyses.report.figures as F
from analyses.reanalysis_tables import at_a_glance, endpoint_text, limitations, plain_words, summary
from analyses.report.document import Figure, Section, Table, write_document

__all__ = ["claims_sections", "write_claims_report", "ARM_STYLE"]

# index into analyses.report.figures.STYLES: one colour, line style and marker per arm in every figure;
# a difference between two arms that are not the base gets a colour no arm has
ARM_STYLE = {"base": 0, "es": 1, "grpo": 2, "es-grpo": 3, "es - grpo": 4, "es-large": 6, "threshold": 7}
CONTRAST_STYLE = {"grpo - base": 2, "es - base": 1, "es-grpo - base": 3, "es - grpo": 4, "es-large - base": 6}


def _plain(text: str) -> str:
    return text.replace("**", "")


def _setting_title(curves: dict) -> str:
    s = curves["sampling"]
    top = f", top-p {s['top_p']}" if s.get("top_p") not in (None, 1.0) else ""
    return f"T {s['temperature']}{top}, n {s['n']}"


def _difference_figure(result: dict, unit: str) -> Figure | None:
    specs = []
    for setting, curves in result["curves"].items():
        diffs = curves["differences"].get(unit) or {}
        series = [{"label": name, "x": curves["ks"], "y": d["estimate"], "low": d["ci_low"], "high": d["ci_high"],
                   "style": CONTRAST_STYLE.get(name, 5)} for name, d in diffs.items()]
        if not series:
            continue
        series.append({"label": "no difference", "x": [], "y": [], "hline": 0.0, "style": ARM_STYLE["threshold"]})
        specs.append({"series": series, "xlabel": "k (samples per problem, at most n / 2)",
                      "ylabel": "difference in pass@k" + (" above floor" if unit == "above-floor" else ""),
                      "title": f"{setting}: {_setting_title(curves)}", "log2x": True, "legend_below": True})
    if not specs:
        return None
    what = "raw pass@k (the primary endpoint)" if unit == "raw" else "pass@k minus its placebo floor (sensitivity)"
    read = sorted({(c["settings"].get("setting"), c["settings"]["k"]) for c in result["claims"]
                   if c["endpoint"] == "pass@k" and c.get("from") == "coverage"
                   and c["settings"].get("setting") in result["curves"]})
    where = "; ".join(f"{setting} at k = {k}" for setting, k in read) or "no k of these settings"
    return Figure(f"claims_difference_{unit}", f"The difference against k, {what}: each arm minus the base on the "
                  "same problems, and an ES arm minus GRPO (seeds resampled apart); bands: two-level 95% intervals. "
                  f"The coverage claims read {where}.", F.panels(specs, height=4.2 * len(specs)))


def _passk_figure(result: dict) -> Figure | None:
    specs = []
    for setting, curves in result["curves"].items():
        for what, label in (("pass", "pass@k"), ("floor", "placebo floor")):
            series = [{"label": arm, "x": curves["ks"], "y": c[what]["estimate"], "low": c[what]["ci_low"],
                       "high": c[what]["ci_high"], "style": ARM_STYLE.get(arm, 5)} for arm, c in curves["arms"].items()]
            specs.append({"series": series, "xlabel": "k (at most n / 2)", "ylabel": label, "log2x": True,
                          "ylim": (0, 1) if what == "pass" else None, "legend_below": True,
                          "title": f"{setting}: {_setting_title(curves)}"})
    if not specs:
        return None
    return Figure("claims_passk", "pass@k per arm at the picked checkpoints (seeds pooled) and, below each, its "
                  "placebo floor (every completion scored against other problems' answers: what chance alone reaches); "
                  "bands: two-level 95% intervals.", F.panels(specs, height=3.6 * len(specs)))


def _claims_frame(result: dict) -> pd.DataFrame:
    rows = []
    for c in result["claims"]:
        ev = c["primary"]
        sat = ev.get("satterthwaite") or {}
        rows.append({"claim": c["id"], "statement": c["statement"], "endpoint": endpoint_text(c),
                     "claim holds when": f"{c['contrast']} {'>' if c['direction'] == 'above' else '<'} "
                                         f"{c['threshold']:g}",
                     "estimate": ev.get("estimate"), "ci_low": ev.get("ci_low"), "ci_high": ev.get("ci_high"),
                     "satterthwaite_low": sat.get("ci_low"), "satterthwaite_high": sat.get("ci_high"),
                     "satterthwaite_df": sat.get("df"), "detectable_80": ev.get("detectable"),
                     "detectable_80_satterthwaite": ev.get("detectable_satterthwaite"),
                     "p": (ev.get("p") or {}).get("two_sided"), "holm_p": ev.get("holm_p"),
                     "verdict": c["verdict"], "verdict_satterthwaite": sat.get("verdict"),
                     "flags": "; ".join(c["flags"])})
    return pd.DataFrame(rows)


def _secondary_frame(result: dict) -> pd.DataFrame:
    rows = []
    for c in result["claims"]:
        for name, ev in [*((f"at {s}", e) for s, e in c.get("also_at", {}).items()),
                         *(("above the placebo floor", e) for e in c.get("sensitivity", {}).values())]:
            if ev.get("p"):
                rows.append({"claim": c["id"], "reading": f"{name}: {endpoint_text(c, ev)}", "estimate": ev["estimate"],
                             "ci_low": ev["ci_low"], "ci_high": ev["ci_high"], "verdict (unadjusted)": ev["verdict"]})
        if c.get("registered"):
            reg = c["registered"]
            rows.append({"claim": c["id"], "reading": "as registered (first written)",
                         "estimate": reg["primary"].get("estimate"), "ci_low": reg["primary"].get("ci_low"),
                         "ci_high": reg["primary"].get("ci_high"), "verdict (unadjusted)": reg["verdict"]})
    return pd.DataFrame(rows)


def _revised_frame(result: dict) -> pd.DataFrame:
    return pd.DataFrame([{"v2 claim": r["statement"], "rule": r["rule"], "what changed": r["what_changed"],
                          "as first written": r["first_written"], "first written at": r["first_written_commit"],
                          "as revised": r["revised"], "revised at": r["revised_commit"],
                          "the study's findings.json": r["in_findings"]} for r in result.get("revised_rules", [])])


def _stability_frame(result: dict) -> pd.DataFrame:
    rows = []
    for c in result["claims"]:
        st = c["primary"].get("stability")
        if st:
            ev = c["primary"]
            rows.append({"claim": c["id"], "threshold": c["threshold"], "ci_low at n_boot": ev["at_n_boot"]["ci_low"],
                         "ci_high at n_boot": ev["at_n_boot"]["ci_high"], "ci_low pooled": ev["ci_low"],
                         "ci_high pooled": ev["ci_high"], "replicates pooled": st["replicates_pooled"],
                         "per stream": st["replicates_per_stream"], "streams": st["streams_total"],
                         "streams agreeing (Holm)": st["agree"], "streams agreeing (unadjusted)": st["agree_unadjusted"]})
    return pd.DataFrame(rows)


def claims_sections(result: dict) -> list[Section]:
    found = tuple(_plain(plain_words(c)) for c in result["claims"])
    first = (("These claims were registered after the data: the verdicts re-read figures that had been seen "
              "(see the limitations).",) if result["registration"].get("retrospective") else ())
    fig = _difference_figure(result, "raw")
    glance = tuple(_plain(at_a_glance(c)) for c in result["claims"])
    out = [Section("claims-found", "What was found", (*first, summary(result), glance, *((fig,) if fig else ()),
                                                      "In detail:", found)),
           Section("claims-limitations", "Limitations", (tuple(limitations(result)),)),
           Section("claims-table", "Claims, one statement each", (
               "Each claim: its primary endpoint, the side of the threshold it puts it on, the two-level bootstrap "
               "interval with the Satterthwaite interval beside it, the effect detectable at 80% power, the p and "
               "Holm's adjusted p, the verdict, and its flags (a rule revised after the data, a verdict near its "
               "threshold, a check not met).", Table("claims", "One row per claim", _claims_frame(result))))]
    passk = _passk_figure(result)
    if passk:
        out.append(Section("claims-passk", "pass@k per arm", (passk,)))
    floor = _difference_figure(result, "above-floor")
    if floor:
        out.append(Section("claims-floor", "Sensitivity: above the placebo floor", (floor,)))
    out += [Section("claims-revised", "Rules revised after the data", (
                "The study's own findings were judged by rules changed after its figures had been read: each such "
                "claim's verdict under the rule as first written and as revised.",
                Table("claims_revised_rules", "v2's claims under both versions of the revised rules",
                      _revised_frame(result)))),
            Section("claims-secondary", "Other settings, the floor, the registered rules", (
                "Not in Holm's family; each verdict unadjusted.",
                Table("claims_secondary", "Secondary and sensitivity readings", _secondary_frame(result)))),
            Section("claims-stability", "Near a threshold: the random-stream check", (
                Table("claims_stability", "Claims with an interval end within the window of their threshold",
                      _stability_frame(result)),)),
            Section("claims-registration", "Registration and recompute", (
                (f"source: {result['registration']['source']}",
                 f"settings sha256: {result['registration']['settings_hash']}",
                 f"verdict code sha256: {result['registration']['verdict_code']['hash']}",
                 f"recompute: {result['recompute']}"),))]
    return out


def write_claims_report(result: dict, out: Path) -> list[Path]:
    title = f"Pre-registered claims: {result['study']}" + (" (registered after the data)"
                                                            if result["registration"].get("retrospective") else "")
    return write_document(title, claims_sections(result), Path(out))

