"""findings.md of a pre-registered (re-)analysis (analyses.reanalyse): what was found in plain words
first, then the limitations, the claims table, the rules revised after the data, the secondary
and sensitivity readings, and the stability check.

    text = reanalysis_markdown(json.loads(Path("results/study-v2-reanalysis/findings.json").read_text()))

Every number is a field of findings.json; the sentences are chosen by each claim's verdict.
"""

from __future__ import annotations

__all__ = ["reanalysis_markdown", "plain_words", "summary", "at_a_glance", "endpoint_text", "limitations", "ci_text", "gate_text"]


def ci_text(ev: dict, digits: int = 3) -> str:
    f = f"{{:+.{digits}f}}"
    return f"{f.format(ev['estimate'])} [{f.format(ev['ci_low'])}, {f.format(ev['ci_high'])}]"


def _setting(detail: dict) -> str:
    s = detail.get("sampling") or {}
    if not s:  # not measured (a failed gate): the setting's name
        return str(detail.get("setting"))
    if detail.get("setting") == "control":
        return f"the curve runs (n {s.get('n')}), ES-then-GRPO's pick against GRPO at its GRPO step"
    top = f", top-p {s.get('top_p')}" if s.get("top_p") not in (None, 1.0) else ""
    return f"T {s.get('temperature')}{top}, n {s.get('n')}"


def endpoint_text(claim: dict, ev: dict | None = None) -> str:
    """The endpoint in words: what is measured, where."""
    ev = ev or claim["primary"]
    d = ev.get("detail") or {"setting": claim["settings"].get("setting")}
    e = claim["endpoint"]
    read = f", {ev['problems']} problems" if ev.get("problems") else ""
    if e == "pass@k":
        floor = " above the placebo floor" if d.get("unit") == "above-floor" else ""
        return f"{claim['contrast']}, pass@{d.get('k', claim['settings'].get('k'))}{floor} ({_setting(d)}{read})"
    if e == "entropy":
        return f"{claim['contrast']}, nats per generated token ({_setting(d)}{read})"
    if e == "accuracy":
        if "items" not in d:
            return f"{claim['contrast']}, accuracy on {claim['settings'].get('benchmark')}"
        return (f"{claim['contrast']}, accuracy on {d.get('benchmark')} ({d.get('items')} items, base "
                f"{d.get('base_accuracy', float('nan')):.3f})")
    if e == "changed-fraction":
        return f"{claim['contrast']}, share of bf16 weights changed (one short bf16 run each)"
    if e == "gain-retained":
        st = claim["settings"]
        return (f"{claim['contrast'].partition(' - ')[0]}'s validation gain kept by its top {st.get('q'):g} of "
                f"entries by {'|dW|' if st.get('mask_by') == 'abs' else '|dW| / |W|'}, per seed")
    return f"{claim['contrast']}, top-{claim['settings'].get('q')} share of ||dW||^2 at the closest norms, per seed"


def _runs_text(claim: dict, ev: dict | None = None) -> str:
    ev = ev or claim["primary"]
    a, _, b = claim["contrast"].partition(" - ")
    parts = []
    for r in ev.get("runs", []):
        what = "a random mask" if claim["endpoint"] == "gain-retained" else "an i.i.d. Gaussian update"
        ref = f", {what} {r['reference']:.5f}" if "reference" in r else ""
        parts.append(f"{r['run']}: {a} {r['a']:.5g}, {b} {r['b']:.5g}{ref}")
    return "; ".join(parts)


def _thr(t: float) -> str:
    return "0" if t == 0 else f"{t:+g}"


def plain_words(claim: dict) -> str:
    """One paragraph: the claim, its verdict, the figure that decided it, what could not be seen."""
    ev, v, t = claim["primary"], claim["verdict"], _thr(claim["threshold"])
    head = f"**{claim['statement']}: {v}.**"
    if ev.get("kind") == "gated":
        return f"{head} {gate_text(claim['gate'])}"
    if ev.get("kind") is None:
        lost = (ev.get("detail") or {}).get("no_gain")
        if lost:
            return (f"{head} No seed read has a gain to keep: " + ", ".join(
                f"seed {x['seed']} gained {x['gain']:+.3f} on validation" for x in lost) + ".")
        return f"{head} The endpoint could not be measured from the study's files."
    if ev["kind"] == "runs":
        return f"{head} {endpoint_text(claim)}: {_runs_text(claim)}."
    sat = ev["satterthwaite"]
    measured = (f"{endpoint_text(claim)} is {ci_text(ev)} (95% two-level bootstrap; Satterthwaite "
                f"{_sat(sat)})")
    holm = f"Holm-adjusted p {ev['holm_p']:.3g}"
    if v == "supported":
        text = f"{measured}: on the claim's side of {t} ({holm})."
    elif v == "contradicted":
        text = f"{measured}: on the other side of {t} from the claim ({holm})."
    else:
        text = (f"{measured}; {holm}. A true value {ev['detectable']:.3f} beyond {t} would be found 80% of the "
                f"time (from the Satterthwaite interval: {_num(ev.get('detectable_satterthwaite'))}).")
        if ev["verdict_unadjusted"] != v:
            text += f" Without Holm's correction it would read {ev['verdict_unadjusted']}."
    if sat.get("verdict") and sat["verdict"] != v:
        text += (f" The Satterthwaite t test (df {_num(sat['df'], '.1f')}), Holm-adjusted (p "
                 f"{_num(sat['holm_p'], '.3g')}), gives {sat['verdict']}.")
    for other in claim.get("also_at", {}).values():
        if other.get("p"):
            text += f" At {_setting(other['detail'])}: {ci_text(other)}, {other['verdict']} (unadjusted)."
    if claim.get("gate"):
        text += " " + gate_text(claim["gate"])
    return f"{head} {text}"


def at_a_glance(claim: dict) -> str:
    """One line: the verdict, the statement, and the figure that decided it (or why none did)."""
    ev, head = claim["primary"], f"**{claim['verdict']}**: {claim['statement']}"
    if ev.get("kind") == "gated":
        why = "; ".join(_tally(arm, controls) for arm, controls in claim["gate"]["controls"].items())
        return f"{head} (its gate: {why})"
    if ev.get("kind") is None:
        lost = (ev.get("detail") or {}).get("no_gain")
        return f"{head} ({'no seed read had a validation gain to keep' if lost else 'not measurable'})"
    if ev["kind"] == "runs":
        return f"{head} (judged seed by seed: {_runs_text(claim)})"
    return f"{head} ({endpoint_text(claim)}: {ci_text(ev)})"


def _tally(arm: str, controls: list[dict]) -> str:
    return f"{arm} beat the base on validation in {sum(c['passed'] for c in controls)} of {len(controls)} seeds"


def gate_text(gate: dict) -> str:
    """Why a gated claim was not judged: each arm's positive control per seed."""
    parts = []
    for arm, controls in gate["controls"].items():
        seeds = ", ".join(f"seed {c['seed']} {c['model'] - c['base']:+.3f} (p {c['p_value']:.3g} against "
                          f"{c['level']:.3g})" for c in controls)
        parts.append(f"{_tally(arm, controls)} ({seeds})")
    return (f"Its gate needs {', '.join(gate['arms'])} to beat the base on the validation split in at least "
            f"{gate['share']:.0%} of the seeds first: " + "; ".join(parts) + ". " +
            ("It passed." if gate["passed"] else "It did not, so the comparison was not judged and is not in "
             "Holm's family."))


def summary(result: dict) -> str:
    """The verdicts in one paragraph: how many of each (at_a_glance lists which), where the
    Satterthwaite interval reads otherwise, and which of the study's own rules were changed after
    its data."""
    claims = result["claims"]
    groups = {v: [c["id"] for c in claims if c["verdict"] == v] for v in result["verdicts"]}
    words = {"supported": "supports", "contradicted": "contradicts", "inconclusive": "cannot tell",
             "not tested": "could not test"}
    parts = [f"{words[v]} {len(ids)}" for v, ids in groups.items() if ids]
    text = f"Of its {len(claims)} claims, the study " + ", ".join(parts) + " (one line each below)."
    other = [c["id"] for c in claims if (c["primary"].get("satterthwaite") or {}).get("verdict") not in
             (None, c["verdict"])]
    if other:
        text += (f" The Satterthwaite interval, which counts the seeds as the few runs they are, would read "
                 f"{len(other)} of these otherwise after Holm's correction ({', '.join(other)}): with "
                 f"{len(result['seeds'])} seeds, even large effects are not certain.")
    changed = [r for r in result.get("revised_rules") or [] if r["changed_the_verdict"]]
    if changed:
        text += (" The study's own write-up changed " + (f"{len(changed)} rules" if len(changed) > 1 else "a rule")
                 + " after reading its figures: " + "; ".join(
                     f"its {r['claim']} claim read {r['first_written']} as first written, {r['revised']} as revised"
                     for r in changed) + " (flagged on each claim split from them).")
    return text


def _num(x, spec: str = ".3f") -> str:
    return "n/a" if x is None else f"{x:{spec}}"


def _sat(sat: dict, table: bool = False) -> str:
    """The Satterthwaite interval and df; n/a where it is undefined (no spread between seeds or
    problems: written as null)."""
    interval = f"[{_num(sat['ci_low'], '+.3f')}, {_num(sat['ci_high'], '+.3f')}]"
    return f"{interval} ({_num(sat['df'], '.1f')})" if table else f"{interval}, df {_num(sat['df'], '.1f')}"


def limitations(result: dict) -> list[str]:
    """What limits every verdict: from the study's files and the claims file's own list."""
    out = []
    reg = result["registration"]
    if reg.get("retrospective"):
        out.append(f"The claims were registered after the data ({reg.get('written') or 'retrospectively'}): "
                   "every verdict here is a re-analysis of figures that had been read, not a test fixed in advance. "
                   "A claims file named by the study file is recorded in study.json before the first training "
                   "stage; v3 is the first study to run that way.")
    seeds = result["seeds"]
    per_arm = {arm: len(rows) for arm, rows in ((result.get("arms") or {}).get("positive_control") or {}).items()}
    counted = (f"{len(seeds)} training seeds per arm" if len(set(per_arm.values())) <= 1 else
               "training seeds per arm " + ", ".join(f"{a} {n}" for a, n in per_arm.items()))
    out.append(f"{counted} and {result['problems']} held-out problems (an evaluation with a limit reads its first "
               "N; each claim's endpoint says how many it read): the bootstrap's seed "
               "level has few distinct resamples, so its intervals are narrower than the Satterthwaite intervals "
               "beside them wherever the seeds disagree; both are listed, and the flags say where they disagree.")
    out += [f"{c['check']}: NOT MET ({c['detail']})" for c in result.get("checks", []) if not c["ok"]]
    near = [c["id"] for c in result["claims"] if "stability" in c["primary"]]
    if near:
        out.append(f"{', '.join(near)}: an interval end within {result['test']['stability_window']} of the "
                   "threshold; decided on the pooled replicates of the random-stream check.")
    return out + list(result.get("limitations", []))


def _claims_table(result: dict) -> list[str]:
    lines = ["| claim | endpoint | estimate [95% two-level] | Satterthwaite 95% (df) | detectable at 80% power "
             "(bootstrap; Satterthwaite) | p | Holm p | verdict | flags |", "|" + "---|" * 9]
    for c in result["claims"]:
        ev = c["primary"]
        if ev.get("p"):
            s = ev["satterthwaite"]
            cells = [ci_text(ev), _sat(s, table=True),
                     f"{ev['detectable']:.3f}; {_num(ev.get('detectable_satterthwaite'))}",
                     f"{ev['p']['two_sided']:.3g}", f"{ev['holm_p']:.3g}"]
        elif ev.get("kind") == "gated":
            cells = ["gate failed: " + ", ".join(c["gate"]["arms"]) + " did not beat the base", "-", "-", "-", "-"]
        else:
            cells = [_runs_text(c) or "-", "-", "-", "-", "-"]
        side = ">" if c["direction"] == "above" else "<"
        lines.append(f"| {c['id']}: {c['statement']} | {endpoint_text(c)} {side} {_thr(c['threshold'])} | "
                     + " | ".join(cells) + f" | **{c['verdict']}** | {'; '.join(c['flags']) or '-'} |")
    return lines


def _revised_table(result: dict) -> list[str]:
    rows = result.get("revised_rules") or []
    if not rows:
        return ["No rule of the study's own findings was changed after its data."]
    lines = ["| v2 claim | rule | what changed | verdict as first written | verdict as revised | the study's "
             "findings.json |", "|" + "---|" * 6]
    for r in rows:
        det = (f" (detectable ±{r['detectable_first_written']:.3f})" if r.get("detectable_first_written") else "")
        lines.append(f"| {r['statement']} | `{r['rule']}` | {r['what_changed']} | {r['first_written']}{det} "
                     f"({r['first_written_commit']}) | **{r['revised']}** ({r['revised_commit']}) | "
                     f"{r['in_findings']}{'' if r['revised_is_the_files'] else ' (DIFFERS from the revised rule)'} |")
    return lines


def _secondary_table(result: dict) -> list[str]:
    lines = ["| claim | reading | estimate [95% two-level] | verdict (unadjusted) |", "|---|---|---|---|"]
    for c in result["claims"]:
        for name, ev in [*((f"at {s}", e) for s, e in c.get("also_at", {}).items()),
                         *(("above the placebo floor", e) for e in c.get("sensitivity", {}).values())]:
            if ev.get("p"):
                lines.append(f"| {c['id']} | {name}: {endpoint_text(c, ev)} | {ci_text(ev)} | {ev['verdict']} |")
        reg = c.get("registered")
        if reg:
            shown = ci_text(reg["primary"]) if reg["primary"].get("p") else _runs_text(c, reg["primary"])
            lines.append(f"| {c['id']} | as registered (first written) | {shown} | "
                         f"{reg['verdict']} |")
    return lines


def _stability_table(result: dict) -> list[str]:
    lines = ["| claim | threshold | at 2,000 replicates | pooled interval | replicates | streams agreeing "
             "(Holm; unadjusted) | each stream's interval ends |", "|" + "---|" * 7]
    found = False
    for c in result["claims"]:
        ev = c["primary"]
        st = ev.get("stability")
        if not st:
            continue
        found = True
        was = ev["at_n_boot"]
        lo = [s["ci_low"] for s in st["streams"]]
        hi = [s["ci_high"] for s in st["streams"]]
        lines.append(f"| {c['id']} | {_thr(c['threshold'])} | [{was['ci_low']:+.4f}, {was['ci_high']:+.4f}] "
                     f"({was['verdict_unadjusted']}) | [{ev['ci_low']:+.4f}, {ev['ci_high']:+.4f}] | "
                     f"{st['replicates_pooled']:,} ({st['streams_total']} x {st['replicates_per_stream']:,}) | "
                     f"{st['agree']} of {st['streams_total']}; {st['agree_unadjusted']} of {st['streams_total']} | "
                     f"low {min(lo):+.4f} to {max(lo):+.4f}, high {min(hi):+.4f} to {max(hi):+.4f} |")
    return lines if found else ["No interval end came within the window of its threshold."]


def _arms_section(arms: dict) -> list[str]:
    """Each trained arm's positive control and plateau per seed, and the matched-pass@1 comparisons."""
    if not arms.get("positive_control"):
        return []
    rule = arms["plateau_rule"]
    lines = ["", "## The arms: did each learn, and where did it level off", "",
             "Positive control: the picked checkpoint against the base on the validation split, one-sided at "
             "alpha / m over the arm's m saved checkpoints. Plateau: the earliest checkpoint within "
             f"{rule['margin']:.4g} of the best validation reward, reached when {rule['after']} or more saved "
             "checkpoints follow it; its wall time pro rata of the training stage's.", "",
             "| arm | seed | base | picked (step) | gain [one-sided bound] | p (level) | learned | plateau at "
             "(completions, seconds) | reached |", "|" + "---|" * 9]
    plateaus = {(arm, r["seed"]): r for arm, rows in arms.get("plateau", {}).items() for r in rows}
    for arm, rows in arms["positive_control"].items():
        for c in rows:
            pl = plateaus.get((arm, c["seed"]))
            at = (f"step {pl['step']} ({pl['completions']}, {pl['seconds_pro_rata']:.0f} s)"
                  if pl and pl.get("seconds_pro_rata") is not None else "-")
            lines.append(f"| {arm} | {c['seed']} | {c['base']:.3f} | {c['model']:.3f} ({c['picked_step']}) | "
                         f"{c['gain']:+.3f} [{c['gain_low']:+.3f}] | {c['p_value']:.3g} ({c['level']:.3g}) | "
                         f"{'yes' if c['passed'] else 'no'} | {at} | {'yes' if pl and pl['reached'] else 'no'} |")
    if arms.get("matched"):
        lines += ["", "Compared at matched pass@1 (the curve runs: each arm's checkpoint nearest the pass@1 both "
                  "reach, the base as both arms' step 0), B - A per seed:", "",
                  "| B - A | seed | target pass@1 | picks (pass@1) | matched | pass@k difference [95%] |",
                  "|---|---|---|---|---|---|"]
        for name, rows in arms["matched"].items():
            for r in rows:
                diffs = "; ".join(f"k {x['k']}: {x['difference']:+.3f} [{x['low']:+.3f}, {x['high']:+.3f}]"
                                  for x in [r["pass1_gap"], *r["passk"]])
                picks = ", ".join(f"{r[arm]['label']} ({r[arm]['pass1']:.3f})" for arm in ("a", "b"))
                matched = "yes" if r["matched"] else f"no: pass@1 {r['pass1_gap']['difference']:+.3f} apart"
                lines.append(f"| {name} | {r['seed']} | {r['target']:.3f} | {picks} | {matched} | {diffs} |")
    return lines


def reanalysis_markdown(result: dict) -> str:
    reg, test = result["registration"], result["test"]
    lines = [f"# Pre-registered claims: {result['study']}", ""]
    if reg.get("retrospective"):
        note = (result.get("note") or "").rstrip(".")
        lines += [f"**Registered after the data.** {note + '. ' if note else ''}The claims file "
                  f"(`{result['claims_file']}`) was written {reg.get('written') or 'after the study ran'}; its "
                  "registration is retrospective, so these verdicts re-read figures that had been seen. The "
                  "mechanism's real test is a study that records its claims before training (v3).", ""]
    command = result["recompute"]
    how = ("add `--check` to compare with this folder's findings.json" if "analyses.reanalyse" in command
           else "it prints the recomputed value beside findings.json's and exits 1 where they differ")
    lines += [f"Recompute: `{command}` ({how}).", "", "## What was found", "", summary(result), ""]
    lines += [f"- {at_a_glance(c)}" for c in result["claims"]] + ["", "In detail:", ""]
    lines += [f"- {plain_words(c)}" for c in result["claims"]]
    lines += ["", "## Limitations", ""] + [f"- {x}" for x in limitations(result)]
    lines += ["", "## Claims, one statement each", "",
              f"Primary endpoint, the side of the threshold the statement puts it on, the 95% two-level bootstrap "
              f"({test['n_boot']:,} replicates: seeds, then problems) with the Satterthwaite interval of the crossed "
              f"random-effects model beside it, the effect detectable at {test['power']:.0%} power (two-sided "
              f"{test['alpha']}, normal approximation from the bootstrap's standard error; t from the Satterthwaite "
              f"one), the bootstrap p of the threshold and Holm's adjustment across the claims that have one.", ""]
    lines += _claims_table(result)
    notes = [f"- {c['id']}: {c['note']}" for c in result["claims"] if c.get("note")]
    lines += ["", "Notes:", "", *notes] if notes else []
    lines += ["", "## Rules revised after the data", "",
              "The study's own findings (its findings/findings.json) were judged by rules two of which were changed "
              "after its figures had been read; each such claim's verdict under the rule as first written and as "
              "revised, recomputed from that file's figures (analyses/rule_history.py):", ""]
    lines += _revised_table(result)
    lines += ["", "## At the other setting and above the placebo floor", "",
              "Secondary readings: not in Holm's family, each verdict unadjusted. Raw pass@k is the primary endpoint; "
              "pass@k minus its placebo floor (every completion scored against other problems' answers) is the "
              "sensitivity analysis.", ""]
    lines += _secondary_table(result)
    lines += _arms_section(result.get("arms") or {})
    lines += ["", "## Near a threshold: the random-stream check", "",
              f"An interval end (95%, or at the level Holm tests the claim) within {test['stability_window']} of the "
              f"threshold: {test['stability_streams']} random streams of {test['stability_boot']:,} replicates each, "
              "their pooled replicates deciding.", ""]
    lines += _stability_table(result)
    code = reg["verdict_code"]
    lines += ["", "## The registration", "",
              f"- source: {reg['source']}; settings sha256 `{reg['settings_hash'][:16]}`; verdict code sha256 "
              f"`{code['hash'][:16]}` ({', '.join(code['files'])})",
              f"- revised after the registration: {_revisions_text(result['revisions'])}"]
    return "\n".join(lines) + "\n"


def _revisions_text(revisions: dict) -> str:
    changed = [f"{cid} ({r['status']})" for cid, r in revisions["claims"].items() if r["status"] != "unchanged"]
    code = revisions.get("verdict_code_changed") or []
    parts = [", ".join(changed) or "no claim"]
    if code:
        parts.append("verdict code changed since: " + ", ".join(code))
    if revisions.get("test_changed"):
        parts.append("the shared [test] changed")
    return "; ".join(parts)
