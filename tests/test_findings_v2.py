"""The verdict words of a seeded study and the rule behind each (analyses.study_findings), and
the figures they read (analyses.study_seeded) on a hand-made study folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analyses.study_findings import (
    VERDICTS,
    coverage_verdict,
    entropy_verdict,
    es_concentrated,
    forgetting_verdict,
    sequence_verdict,
    sparsity_verdict,
)

UP, DOWN, ZERO = ({"difference": 0.2, "ci_low": 0.1, "ci_high": 0.3}, {"difference": -0.2, "ci_low": -0.3, "ci_high": -0.1},
                  {"difference": 0.0, "ci_low": -0.1, "ci_high": 0.1})
SMALL_LOSS = {"difference": -0.01, "ci_low": -0.03, "ci_high": 0.01}
SMALL_SIGNIFICANT_LOSS = {"difference": -0.012, "ci_low": -0.02, "ci_high": -0.005}


@pytest.mark.parametrize(("es_grpo", "grpo_base", "es_base", "verdict"), [
    (UP, DOWN, ZERO, "supported"),          # GRPO narrows, ES keeps, ES ahead
    (UP, ZERO, UP, "partly supported"),     # ES ahead, but GRPO did not narrow
    (UP, DOWN, DOWN, "partly supported"),   # both narrow, ES less
    (DOWN, UP, ZERO, "contradicted"),
    (ZERO, DOWN, ZERO, "inconclusive"),
    (ZERO, ZERO, ZERO, "inconclusive"),
    (ZERO, UP, UP, "contradicted"),         # GRPO widened pass@k where the claim says it narrows (v2, T 0.6)
    (UP, UP, UP, "partly supported"),       # GRPO widened it, but ES is further ahead: the direction holds
    (None, None, None, "not tested"),       # no k where the base clears its chance floor
])
def test_coverage_verdict(es_grpo, grpo_base, es_base, verdict):
    assert coverage_verdict(es_grpo, grpo_base, es_base)[0] == verdict


@pytest.mark.parametrize(("es_base", "grpo_base", "grpo_es", "verdict"), [
    (ZERO, DOWN, DOWN, "supported"),
    (DOWN, DOWN, DOWN, "partly supported"),  # both collapse, GRPO more: the direction, not the strong form
    (ZERO, UP, UP, "contradicted"),
    (DOWN, DOWN, UP, "contradicted"),        # ES collapses more than GRPO
    (DOWN, DOWN, ZERO, "inconclusive"),
    (None, DOWN, DOWN, "not tested"),
])
def test_entropy_verdict(es_base, grpo_base, grpo_es, verdict):
    assert entropy_verdict(es_base, grpo_base, grpo_es)[0] == verdict


@pytest.mark.parametrize(("sparser", "concentrated", "verdict"), [
    ([True], [True, True, True], "supported"),
    ([True], [False, False, False], "partly supported"),
    ([False], [False, False, False], "contradicted"),
    ([False], [True, False, True], "inconclusive"),  # seeds disagree
    (None, [True], "not tested"),
    ([True], None, "not tested"),                    # every update zero: no matched pair
])
def test_sparsity_verdict(sparser, concentrated, verdict):
    assert sparsity_verdict(sparser, concentrated)[0] == verdict


@pytest.mark.parametrize(("es", "grpo", "gaussian", "concentrated"), [
    (0.08448, 0.08012, 0.08449, False),  # v2 seed 0: ES is i.i.d. noise, GRPO lighter-tailed than noise
    (0.08449, 0.08405, 0.08449, False),  # v2 seed 2: all three equal to 3 decimals
    (0.20, 0.08, 0.0845, True),          # a heavy-tailed ES update
    (0.20, 0.25, 0.0845, False),         # concentrated, but GRPO more so
    (0.0880, 0.08, 0.0845, False),       # 4% above noise: inside the margin
])
def test_es_is_concentrated_only_above_both_grpo_and_iid_noise(es, grpo, gaussian, concentrated):
    assert es_concentrated(es, grpo, gaussian) is concentrated


@pytest.mark.parametrize(("es_base", "es_grpo", "informative", "verdict"), [
    (SMALL_LOSS, ZERO, True, "supported"),       # any loss is under the 0.05 margin
    (ZERO, ZERO, True, "inconclusive"),          # could hide a loss of 0.1
    (DOWN, ZERO, True, "contradicted"),
    (DOWN, UP, True, "partly supported"),        # ES forgets, less than GRPO
    (SMALL_LOSS, ZERO, False, "not tested"),     # the base is at its floor: nothing to lose
    (SMALL_SIGNIFICANT_LOSS, ZERO, True, "supported"),  # a loss, but under the margin: no forgetting
    ({"difference": -0.06, "ci_low": -0.09, "ci_high": -0.03}, ZERO, True, "contradicted"),  # past the margin
])
def test_forgetting_verdict(es_base, es_grpo, informative, verdict):
    assert forgetting_verdict(es_base, es_grpo, informative)[0] == verdict


@pytest.mark.parametrize(("minus_es", "minus_grpo", "minus_control", "verdict"), [
    (UP, UP, UP, "supported"),
    (UP, ZERO, UP, "partly supported"),   # beats GRPO at the same GRPO steps, not at the same budget
    (UP, DOWN, UP, "contradicted"),
    (UP, ZERO, ZERO, "inconclusive"),
    (None, UP, UP, "not tested"),
])
def test_sequence_verdict(minus_es, minus_grpo, minus_control, verdict):
    assert sequence_verdict(minus_es, minus_grpo, minus_control)[0] == verdict


def test_every_rule_names_its_words_and_uses_only_the_five():
    outcomes = {coverage_verdict(UP, DOWN, ZERO), entropy_verdict(ZERO, ZERO, ZERO), sparsity_verdict(None, None),
                forgetting_verdict(DOWN, ZERO, True), sequence_verdict(UP, UP, UP)}
    for verdict, rule in outcomes:
        assert verdict in VERDICTS and rule
    assert len(VERDICTS) == 5


def _run(folder: Path, answers: dict, outcomes: dict) -> None:
    """A passk run folder: outcomes {problem: [(extracted, correct), ...]}."""
    folder.mkdir(parents=True)
    lines = []
    for pid, samples in outcomes.items():
        for j, (x, ok) in enumerate(samples):
            lines.append({"problem_id": pid, "sample_index": j, "completion": str(x), "extracted": x,
                          "outcome": "correct" if ok else "incorrect", "detail": None, "num_tokens": 3,
                          "finish_reason": "stop", "mean_entropy": 1.0 if ok else 2.0, "seed": j})
    (folder / "samples.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (folder / "summary.json").write_text(json.dumps({"kind": "passk", "schema_version": 3, "complete": True,
                                                     "pass_at_k": [{"k": 1}, {"k": 2}],
                                                     "sampling": {"temperature": 1.0, "top_p": 1.0, "n": 2}}))


def _hand_made_study(tmp_path: Path) -> None:
    """Two seeds of GRPO and the base, 3 problems x 2 samples each."""
    answers = {"p0": "10", "p1": "20", "p2": "30"}
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "heldout.jsonl").write_text(
        "".join(json.dumps({"id": k, "question": k, "answer": v}) + "\n" for k, v in answers.items()))
    base = {"p0": [("10", True), ("20", False)], "p1": [("20", True), ("5", False)], "p2": [("30", True), ("30", True)]}
    grpo = {"p0": [("20", False), ("20", False)], "p1": [("20", True), ("20", True)], "p2": [("30", True), ("30", True)]}
    stages = {"passk-base": {"status": "done", "result": {"run": "passk/base"}}}
    _run(tmp_path / "passk" / "base", answers, base)
    for s in (0, 1):
        _run(tmp_path / "passk" / "grpo" / f"seed-{s}", answers, grpo)
        stages[f"passk-grpo-s{s}"] = {"status": "done", "result": {"run": f"passk/grpo/seed-{s}"}}
    spec = {"seeds": [0, 1], "methods": {"grpo": []}, "validation": {"rule": "best-greedy"}}
    (tmp_path / "study.json").write_text(json.dumps({"kind": "study", "spec": spec, "stages": stages}))


def test_figures_of_a_hand_made_study(tmp_path):
    """Two seeds, one arm per method, 3 problems x 2 samples: the placebo, the floor-cleared k,
    the per-problem narrowing and the two-level differences come out as counted by hand."""
    from analyses.study_seeded import seeded_figures

    _hand_made_study(tmp_path)
    f = seeded_figures(tmp_path)
    cov = f["coverage"]["passk"]
    # base placebo, problem 0: its "20" hits p1's answer: pass@1 (1/2 + 0)/2 against p1 and p2
    assert cov["base"]["placebo"]["estimate"][0] == pytest.approx((0.25 + 0.0 + 0.0) / 3)
    assert cov["base"]["pass"]["estimate"] == pytest.approx([(0.5 + 0.5 + 1.0) / 3, 1.0])
    n = f["narrowing"]["passk"]["grpo"]
    assert [r["base_solves_arm_never"] for r in n["per_seed"]] == [1, 1]   # p0
    assert [r["collapsed_onto_wrong"] for r in n["per_seed"]] == [1, 1]    # p0: all "20"
    assert n["base_distinct_answers"] == pytest.approx(5 / 3) and n["per_seed"][0]["distinct_answers"] == 1.0
    raw = cov["differences"]["grpo - base"][1]["raw"]
    assert raw["difference"] == pytest.approx(((0 - 0.5) + (1 - 0.5) + 0) / 3) and raw["per_seed"] == [0.0, 0.0]
    assert f["entropy"]["differences"]["grpo - base"]["difference"] == pytest.approx(
        ((2 - 1.5) + (1 - 1.5) + 0) / 3)
    checks = {c["check"]: (c["ok"], c["detail"]) for c in f["checks"]}  # a toy: too small, said so
    assert checks["held-out problems >= 60"] == (False, "3 problems")
    assert checks["passk: n >= 2 max k"] == (False, "n 2, max k 2")
    assert checks["passk: every seed of every arm"] == (True, "all present")
    assert checks["every run read is complete"] == (True, "all complete")
    from analyses.study_seeded import Study, _checks

    far = {**f, "sparsity": {"matched": {0: {"matched": {"norm_ratio_es_over_grpo": 3.0}}}}}
    checks = {c["check"]: c["ok"] for c in _checks(Study(tmp_path), far)}
    assert checks["sparsity seed 0: matched norms within 2x"] is False


def _bench(items, base_accuracy, es, chance=0.25):
    return {"items": items, "base_accuracy": base_accuracy, "chance": chance, "arms": {"es": es}, "es - grpo": ZERO}


def test_forgetting_claim_takes_the_weakest_of_every_benchmark_that_counts():
    from analyses.study_findings import _forgetting_claim

    benchmarks = {"small-loss": _bench(240, 0.5, SMALL_SIGNIFICANT_LOSS), "lost": _bench(240, 0.4, DOWN),
                  "few-items": _bench(100, 0.9, DOWN), "at-floor": _bench(240, 0.22, DOWN)}  # chance 0.25
    claim = _forgetting_claim({"forgetting": {"benchmarks": benchmarks, "kl": {}}})
    assert claim["verdict"] == "contradicted" and claim["benchmark"] == "lost"
    assert claim["counted"] == {"small-loss": {"floor": 0.25, "verdict": "supported"},
                                "lost": {"floor": 0.25, "verdict": "contradicted"}}
    del benchmarks["lost"]  # the order of the others does not matter
    claim = _forgetting_claim({"forgetting": {"benchmarks": dict(reversed(benchmarks.items())), "kl": {}}})
    assert (claim["verdict"], claim["benchmark"]) == ("supported", "small-loss")
    claim = _forgetting_claim({"forgetting": {"benchmarks": {"few-items": _bench(100, 0.9, DOWN)}, "kl": {}}})
    assert claim["verdict"] == "not tested"


def test_a_bf16_update_that_rounds_to_nothing_is_not_tested_not_sparse():
    from analyses.study_findings import _sparsity_claim

    matched = {0: {"matched": {"es": {"step": 3}, "grpo": {"step": 12}}, "qs": [0.01],
                   "top_share": {"es": [0.5], "grpo": [0.1]}, "gaussian_top_share": [0.0845]}}
    f = {"sparsity": {"bf16": {"es": {"changed_frac_bits": 0.0}, "grpo": {"changed_frac_bits": 0.3}}, "matched": matched}}
    assert _sparsity_claim(f)["verdict"] == "not tested"
    f["sparsity"]["bf16"]["es"]["changed_frac_bits"] = 0.1
    assert _sparsity_claim(f)["verdict"] == "supported"
    matched[0]["top_share"]["es"] = [0.0845]  # as i.i.d. noise: sparser in bf16 only
    assert _sparsity_claim(f)["verdict"] == "partly supported"


def test_the_chance_level_reads_the_recorded_file_from_above_the_study_wherever_it_runs(tmp_path, monkeypatch):
    import hashlib

    from analyses.study_seeded import _chance

    rows = [{"question": "q", "choices": ["a", "b", "c", "d"], "answer": 0},
            {"question": "r", "choices": ["a", "b"], "answer": 1}]
    mc = tmp_path / "repo" / "studies" / "data" / "mc.jsonl"
    mc.parent.mkdir(parents=True)
    mc.write_text("".join(json.dumps(r) + "\n" for r in rows))
    root = tmp_path / "repo" / "results" / "study"
    root.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    digest = hashlib.sha256(mc.read_bytes()).hexdigest()
    # forgetting records the absolute path it read; the study was made in another checkout
    bench = {"benchmark": "mc", "kind": "mc", "source": {"source": "/elsewhere/main/studies/data/mc.jsonl",
                                                         "items": 2, "source_sha256": digest}}
    assert _chance(bench, root) == pytest.approx((1 / 4 + 1 / 2) / 2)
    bench["source"]["source"] = str(mc)  # where it was read
    assert _chance(bench, root) == pytest.approx((1 / 4 + 1 / 2) / 2)
    bench["source"]["source"] = "/elsewhere/main/studies/data/mc.jsonl"
    assert _chance({"kind": "generation"}, root) is None
    bench["source"]["source_sha256"] = "0" * 64  # another file of that name
    with pytest.raises(ValueError, match="not found"):
        _chance(bench, root)


def test_a_figure_of_findings_json_is_recomputed_from_the_samples(tmp_path, capsys):
    from analyses.recompute import main
    from analyses.study_findings import write_seeded_findings

    _hand_made_study(tmp_path)
    write_seeded_findings(tmp_path, tmp_path / "findings")
    path = "figures/coverage/passk/differences/grpo - base/1/raw/difference"
    assert main([str(tmp_path), path]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["recomputed"] == shown["findings.json"] == pytest.approx(((0 - 0.5) + (1 - 0.5) + 0) / 3)
    assert main([str(tmp_path), "claims/entropy/verdict"]) == 0
    text = (tmp_path / "findings" / "findings.md").read_text()
    for claim in ("coverage", "entropy", "sparsity", "forgetting", "es-grpo"):  # the command beside each row
        assert f"`python -m analyses.recompute {tmp_path} claims/{claim}` |" in text
        assert main([str(tmp_path), f"claims/{claim}"]) == 0
    # a figure edited in findings.json is caught; a path that is not there is exit 2
    findings = tmp_path / "findings" / "findings.json"
    tree = json.loads(findings.read_text())
    tree["figures"]["coverage"]["passk"]["differences"]["grpo - base"]["1"]["raw"]["difference"] = 0.5
    findings.write_text(json.dumps(tree))
    assert main([str(tmp_path), path]) == 1 and "DIFFER" in capsys.readouterr().err
    assert main([str(tmp_path), "figures/no-such-block"]) == 2
    assert main([str(tmp_path / "elsewhere"), path]) == 2
    assert main([str(tmp_path)]) == 2 and main(["--help"]) == 0 and "claims/coverage/verdict" in capsys.readouterr().out
    (tmp_path / "passk" / "base" / "samples.jsonl").unlink()  # a run the figures read is gone: not "differ"
    assert main([str(tmp_path), path]) == 3 and "recomputing" in capsys.readouterr().err


def test_coverage_claim_reads_the_largest_k_above_the_floor_at_the_deciding_setting():
    from analyses.study_findings import _coverage_claim

    def setting(temperature, top_p, es_grpo):
        floor = {"estimate": [0.01, 0.05]}
        return {"ks": [1, 4], "k_clear": 4, "sampling": {"temperature": temperature, "top_p": top_p, "n": 8},
                "base": {"placebo": floor}, "arms": {"es": {"placebo": {"estimate": [0.02, 0.07]}},
                                                     "grpo": {"placebo": floor}},
                "differences": {"es - grpo": {1: DOWN, 4: es_grpo}, "grpo - base": {1: UP, 4: DOWN},
                                "es - base": {1: UP, 4: ZERO}}}

    claim = _coverage_claim({"coverage": {"passk": setting(1.0, 1.0, DOWN), "passk-nucleus": setting(0.6, 0.95, UP)}})
    assert claim["setting"] == "passk-nucleus" and claim["verdict"] == "supported"  # k = 4 decides, not k = 1
    assert claim["settings"]["passk"]["verdict"] == "contradicted"  # the other setting, beside it
    assert claim["settings"]["passk-nucleus"]["placebo_floor"] == {"base": 0.05, "es": 0.07, "grpo": 0.05}
    assert "T 0.6, top-p 0.95" in claim["rule"]
    alone = _coverage_claim({"coverage": {"passk": {**setting(1.0, 1.0, ZERO), "k_clear": None}}})
    assert alone["verdict"] == "not tested" and alone["settings"]["passk"]["placebo_floor"] is None


def test_entropy_per_token_counts_only_the_samples_that_have_one():
    import numpy as np

    from analyses.study_seeded import _token_weighted

    assert _token_weighted(np.array([1.0, 3.0]), np.array([1.0, 3.0])) == 2.5
    assert _token_weighted(np.array([1.0, np.nan]), np.array([1.0, 3.0])) == 1.0  # was 1 / 4 of the tokens
    assert np.isnan(_token_weighted(np.array([np.nan]), np.array([2.0])))


def test_the_stage_time_total_leaves_out_findings_and_report_so_rerunning_them_does_not_change_it(tmp_path):
    """findings.json is written while its own stage runs: a total over every stage would count an
    earlier findings/report run's seconds and disagree with study.json after a rerun."""
    from analyses.study_seeded import Study, _budget

    _hand_made_study(tmp_path)
    state = json.loads((tmp_path / "study.json").read_text())
    state["stages"]["passk-base"]["seconds"] = 10.0
    state["stages"]["passk-grpo-s0"]["seconds"] = 2.5
    state["stages"]["findings"] = {"status": "done", "seconds": 5.0}
    state["stages"]["report"] = {"status": "done", "seconds": 19.6}
    (tmp_path / "study.json").write_text(json.dumps(state))
    assert _budget(Study(tmp_path))["stage_seconds_total"] == 12.5
