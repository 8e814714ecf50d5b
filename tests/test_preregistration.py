"""Pre-registered claims (issue 44): the statistics against references (metrics.inference: the
two-level bootstrap's exact variance, the Satterthwaite interval, Holm, power), the claims file
and its rules (analyses.claims), the re-analysis of a hand-made seeded study (analyses.reanalyse:
revised claims flagged with the registered verdict beside, Holm across claims, the random-stream
check near a threshold), and `evalkit study` recording the registration before training."""

from __future__ import annotations

import itertools
import json
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from analyses.claims import interval_verdict, parse_claims, per_run_verdict, read_claims
from evalkit.errors import UsageError
from metrics.inference import (
    bootstrap_p,
    crossed_mean_squares,
    detectable_effect,
    holm,
    power_two_sided,
    satterthwaite_interval,
    t_test_p,
    two_level_bootstrap_variance,
    two_sample_bootstrap_variance,
)
from metrics.seeds import two_level_replicates, two_sample_replicates

ROOT = Path(__file__).parents[1]

# ---------------------------------------------------------------- the statistics


def test_the_two_level_bootstrap_variance_is_exact_by_enumerating_every_draw():
    """2 seeds x 3 problems: all 2^2 x 3^3 equally likely draws of the two-level bootstrap."""
    x = np.array([[0.1, 0.7, 0.3], [0.5, 0.2, 0.9]])
    means = [x[np.ix_(s, p)].mean() for s in itertools.product(range(2), repeat=2)
             for p in itertools.product(range(3), repeat=3)]
    assert np.mean(means) == pytest.approx(x.mean(), abs=1e-15)
    assert np.var(means) == pytest.approx(two_level_bootstrap_variance(x), rel=1e-12)


def test_the_bootstrap_replicates_have_the_exact_variance():
    rng = np.random.default_rng(7)
    x, a, b = rng.normal(size=(3, 20)), rng.normal(size=(3, 20)), rng.normal(size=(4, 20))
    reps = two_level_replicates(x, n_boot=60000, seed=1)[:, 0]
    assert reps.var() == pytest.approx(two_level_bootstrap_variance(x), rel=0.03)
    reps = two_sample_replicates(a, b, n_boot=60000, seed=2)[:, 0]
    assert reps.var() == pytest.approx(two_sample_bootstrap_variance(a, b), rel=0.03)


def test_satterthwaite_with_fixed_problems_is_the_balanced_one_way_random_effects_interval():
    """Seeds random, problems fixed: the grand mean's interval is the one-sample t interval over
    the S seed means (balanced one-way ANOVA: MS_between / (S P) = var(seed means) / S, S - 1 df)."""
    from scipy import stats

    x = np.array([[0.2, 0.4, 0.9, 0.1], [0.5, 0.5, 0.6, 0.3], [0.9, 0.6, 0.8, 0.7]])
    row = satterthwaite_interval(x, problems="fixed")
    means = x.mean(axis=1)
    low, high = stats.t.interval(0.95, 2, loc=means.mean(), scale=stats.sem(means))
    assert (row["ci_low"], row["ci_high"], row["df"]) == pytest.approx((low, high, 2.0))
    assert crossed_mean_squares(x)["seed"] / x.size == pytest.approx(means.var(ddof=1) / 3)


def test_satterthwaite_on_additive_data_is_the_hand_worked_formula():
    """x = u_s + v_i has no residual: V = (MS_seed + MS_problem) / (S P) and
    df = V'^2 / (MS_seed^2 / (S - 1) + MS_problem^2 / (P - 1)), V' = MS_seed + MS_problem."""
    u, v = np.array([0.0, 0.2, 0.7]), np.array([0.1, 0.4, 0.0, 0.3, 0.5])
    x = u[:, None] + v[None, :]
    ms_seed = 5 * ((u - u.mean()) ** 2).sum() / 2          # P sum (xbar_s - xbar)^2 / (S - 1)
    ms_problem = 3 * ((v - v.mean()) ** 2).sum() / 4       # S sum (xbar_i - xbar)^2 / (P - 1)
    ms = crossed_mean_squares(x)
    assert (ms["seed"], ms["problem"], ms["error"]) == pytest.approx((ms_seed, ms_problem, 0.0), abs=1e-12)
    row = satterthwaite_interval(x)
    assert row["se"] ** 2 == pytest.approx((ms_seed + ms_problem) / 15)
    assert row["df"] == pytest.approx((ms_seed + ms_problem) ** 2 / (ms_seed**2 / 2 + ms_problem**2 / 4))


def test_satterthwaite_one_seed_is_the_t_interval_over_problems_and_a_base_row_is_a_paired_difference():
    from scipy import stats

    rng = np.random.default_rng(3)
    x = rng.normal(size=(1, 12))
    row = satterthwaite_interval(x)
    low, high = stats.t.interval(0.95, 11, loc=x.mean(), scale=stats.sem(x[0]))
    assert (row["ci_low"], row["ci_high"], row["df"]) == pytest.approx((low, high, 11))
    a, base = rng.normal(size=(3, 12)), rng.normal(size=(1, 12))
    assert satterthwaite_interval(a, base) == pytest.approx(satterthwaite_interval(a - base))


def test_satterthwaite_covers_about_95_percent_of_crossed_random_effects_data():
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(1500):
        x = rng.normal(0, 0.1, (5, 1)) + rng.normal(0, 0.1, (1, 30)) + rng.normal(0, 0.1, (5, 30))
        row = satterthwaite_interval(x)
        hits += row["ci_low"] <= 0 <= row["ci_high"]
    assert 0.93 <= hits / 1500 <= 0.97


def test_holm_against_a_hand_worked_table():
    # sorted: .005 x4 = .02; .01 x3 = .03; .03 x2 = .06; .04 x1 = .04 -> .06 (monotone)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])                   # capped at 1
    out = holm([0.02, np.nan, 0.01])                                       # a claim without a test
    assert out[0] == pytest.approx(0.02) and np.isnan(out[1]) and out[2] == pytest.approx(0.02)


def test_power_and_the_detectable_effect_against_the_normal_formula():
    from scipy.stats import norm

    assert detectable_effect(1.0) == pytest.approx(norm.ppf(0.975) + norm.ppf(0.8))   # 2.8016
    assert detectable_effect(0.05) == pytest.approx(0.05 * 2.801585, rel=1e-5)
    assert power_two_sided(detectable_effect(1.0), 1.0) == pytest.approx(0.8, abs=1e-4)  # the far tail: 1e-6
    assert power_two_sided(0.0, 1.0) == pytest.approx(0.05)
    assert power_two_sided(1.0, 0.5, alpha=0.01) == pytest.approx(norm.cdf(2 - norm.ppf(0.995))
                                                                  + norm.cdf(-2 - norm.ppf(0.995)))
    assert detectable_effect(1.0, df=2) == pytest.approx(4.302653 + 1.060660, rel=1e-5)  # t(2) quantiles
    assert detectable_effect(1.0, df=1e7) == pytest.approx(detectable_effect(1.0), rel=1e-5)


def test_bootstrap_and_t_test_p_values():
    p = bootstrap_p([-1.0, 0.0, 1.0, 2.0, 3.0], 0.5)
    assert (p["above"], p["below"], p["two_sided"], p["replicates"]) == pytest.approx((3 / 6, 4 / 6, 1.0, 5))
    p = bootstrap_p(np.linspace(1, 2, 999), 0.0)                         # never 0: (0 + 1) / (B + 1)
    assert p["above"] == pytest.approx(1 / 1000) and p["two_sided"] == pytest.approx(2 / 1000)
    t = t_test_p(1.0, 0.5, 10, 0.0)
    from scipy import stats

    assert t["two_sided"] == pytest.approx(2 * stats.t.sf(2.0, 10)) and t["above"] < t["below"]
    assert t_test_p(1.0, 0.0, 10, 0.0) is None


# ---------------------------------------------------------------- the claims file and its rules


def test_the_v2_claims_file_splits_each_claim_into_one_statement():
    claims = read_claims(ROOT / "studies" / "seed-cpu-v2.claims.toml")
    assert claims.retrospective and len(claims.claims) == 10
    assert {c.parent for c in claims.claims} == {"coverage", "entropy", "sparsity", "forgetting", "es-grpo"}
    byid = {c.id: c for c in claims.claims}
    assert (byid["grpo-narrows"].contrast, byid["grpo-narrows"].direction) == (("grpo", "base"), "below")
    assert (byid["es-broader"].get("pairing"), byid["es-broader"].get("k")) == ("apart", 64)
    # the one rule of v2 revised after the data that a split claim still carries: registered as first written
    assert claims.registered_settings()["claims"]["es-concentrated"]["reference_margin"] == "none"
    assert claims.settings()["claims"]["es-concentrated"]["reference_margin"] == 0.05
    assert claims.test.stability_boot >= 20000


GOOD_CLAIM = {"statement": "s", "endpoint": "pass@k", "setting": "passk", "k": 1, "contrast": "es - base",
              "pairing": "problem", "direction": "above", "threshold": 0.0}


@pytest.mark.parametrize(("change", "message"), [
    ({"endpoint": "vibes"}, "endpoint 'vibes': choose"),
    ({"contrast": "es minus base"}, "contrast 'es minus base'"),
    ({"contrast": "es - es"}, "contrast 'es - es'"),
    ({"direction": "up"}, "direction 'up'"),
    ({"threshold": "0"}, "threshold '0'"),
    ({"pairing": "apart"}, "a contrast with the base is paired by problem"),
    ({"k": 0}, "k 0"),
    ({"margin": 0.1}, "unknown key claims.c.margin"),
    ({"statement": ""}, "statement"),
    ({"first_written": {"threshold": 0.1}}, "first_written: a table of the settings before the data"),
])
def test_bad_claims_are_refused_naming_the_key(change, message):
    from evalkit.errors import UsageError

    with pytest.raises(UsageError, match=message):
        parse_claims({"claims": {"c": {**GOOD_CLAIM, **change}}})


@pytest.mark.parametrize(("test", "message"), [
    ({"stability_boot": 5000}, "test.stability_boot 5000: must be between 20000"),
    ({"alpha": "0.05"}, "test.alpha '0.05': expected a float"),
    ({"holm": 1}, "test.holm 1: expected true or false"),
    ({"nboot": 10}, "unknown key test.nboot"),
])
def test_a_bad_shared_test_is_refused(test, message):
    from evalkit.errors import UsageError

    with pytest.raises(UsageError, match=message):
        parse_claims({"test": test, "claims": {"c": GOOD_CLAIM}})


def test_the_rules_read_the_p_on_the_side_the_replicates_lie():
    above = {"above": 0.001, "below": 0.999, "two_sided": 0.002}
    assert interval_verdict(above, 0.05, "above") == "supported"
    assert interval_verdict(above, 0.05, "below") == "contradicted"
    assert interval_verdict(above, 0.05, "above", adjusted=0.06) == "inconclusive"  # Holm decides
    assert interval_verdict(None, 0.05, "above") == "not tested"
    assert [per_run_verdict(x) for x in ([True, True], [False], [True, False], [])] == [
        "supported", "contradicted", "inconclusive", "not tested"]


def test_a_registration_against_a_later_claims_file_names_each_revision():
    from analyses.claims import registration, revisions

    first = parse_claims({"claims": {"a": GOOD_CLAIM, "b": {**GOOD_CLAIM, "k": 2}}})
    record = registration(first, "x.toml", synthesized=True)
    assert record["recorded_at"] is None and record["retrospective"] is False
    later = parse_claims({"claims": {"a": {**GOOD_CLAIM, "threshold": 0.1}, "c": GOOD_CLAIM}})
    out = revisions(record, later)
    assert out["claims"]["a"] == {"status": "revised after data", "changed": {"threshold": [0.0, 0.1]}}
    assert out["claims"]["b"]["status"] == "dropped after data" and out["claims"]["c"]["status"] == "added after data"
    assert out["verdict_code_changed"] == [] and not out["test_changed"]
    record["verdict_code"]["files"]["metrics/inference.py"] = "0" * 64  # the code as registered differed
    assert revisions(record, first)["verdict_code_changed"] == ["metrics/inference.py"]
    assert all(r["status"] == "unchanged" for r in revisions(record, first)["claims"].values())


# ---------------------------------------------------------------- a hand-made seeded study

ANSWERS = {f"p{i}": str(10 + i) for i in range(12)}
RATES = {"base": [0.3], "es": [0.45, 0.55, 0.5], "grpo": [0.8, 0.75, 0.85]}


def _run(folder: Path, rate: float, rng) -> None:
    folder.mkdir(parents=True)
    lines = []
    for pid, answer in ANSWERS.items():
        for j in range(8):
            ok = bool(rng.random() < rate * (0.5 + int(pid[1:]) / 12))
            lines.append({"problem_id": pid, "sample_index": j, "completion": "x", "extracted": answer if ok else "99",
                          "outcome": "correct" if ok else "incorrect", "detail": None, "num_tokens": 3,
                          "finish_reason": "stop", "mean_entropy": 2.0 - rate + 0.1 * j, "seed": j})
    (folder / "samples.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (folder / "summary.json").write_text(json.dumps({"kind": "passk", "schema_version": 3, "complete": True,
                                                     "pass_at_k": [{"k": k} for k in (1, 2, 4)],
                                                     "sampling": {"temperature": 1.0, "top_p": 1.0, "n": 8}}))


def _study(root: Path, registration: dict | None = None) -> None:
    rng = np.random.default_rng(5)
    (root / "data").mkdir(parents=True)
    (root / "data" / "heldout.jsonl").write_text(
        "".join(json.dumps({"id": k, "question": k, "answer": v}) + "\n" for k, v in ANSWERS.items()))
    stages = {}
    for model, rates in RATES.items():
        for s, rate in enumerate(rates):
            rel = "passk/base" if model == "base" else f"passk/{model}/seed-{s}"
            _run(root / rel, rate, rng)
            stages["passk-base" if model == "base" else f"passk-{model}-s{s}"] = {"status": "done",
                                                                                 "result": {"run": rel}}
    state = {"kind": "study", "spec": {"seeds": [0, 1, 2], "methods": {"es": [], "grpo": []}}, "stages": stages}
    if registration is not None:
        state["registration"] = registration
    (root / "study.json").write_text(json.dumps(state))


CLAIMS = """
[test]
stability_streams = 2
[claims.grpo-better]
statement = "GRPO beats the base at pass@1"
endpoint = "pass@k"
setting = "passk"
k = 1
contrast = "grpo - base"
pairing = "problem"
direction = "above"
threshold = 0.0
[claims.es-vs-grpo]
statement = "ES is ahead of GRPO at pass@4"
endpoint = "pass@k"
setting = "passk"
k = 4
contrast = "es - grpo"
pairing = "apart"
direction = "above"
threshold = 0.0
[claims.entropy]
statement = "GRPO lowers entropy"
endpoint = "entropy"
setting = "passk"
contrast = "grpo - base"
pairing = "problem"
direction = "below"
threshold = 0.0
"""


def _registered(tmp_path: Path, text: str) -> dict:
    from analyses.claims import registration

    path = tmp_path / "claims.toml"
    path.write_text(text)
    return registration(read_claims(path), str(path))


def test_a_claim_revised_after_registration_is_flagged_with_its_verdict_under_the_registered_rule(tmp_path):
    from analyses.preregistered import preregistered_findings

    record = _registered(tmp_path, CLAIMS)
    _study(tmp_path / "study", record)
    revised = CLAIMS.replace('k = 4\ncontrast = "es - grpo"', 'k = 1\ncontrast = "es - grpo"')  # after the data
    (tmp_path / "claims.toml").write_text(revised)
    out = preregistered_findings(tmp_path / "study", tmp_path / "claims.toml")
    rows = {r["id"]: r for r in out["claims"]}
    assert out["registration"]["source"] == "study.json"
    assert rows["grpo-better"]["status"] == "unchanged" and rows["grpo-better"]["verdict"] == "supported"
    es = rows["es-vs-grpo"]
    assert es["status"] == "revised after data" and es["verdict"] == "contradicted"
    assert es["registered"]["settings"]["k"] == 4 and es["registered"]["verdict"] in ("contradicted", "inconclusive")
    assert any(f.startswith("revised after data (k: 4 -> 1)") for f in es["flags"])
    assert rows["entropy"]["verdict"] == "supported"
    ps = [r["primary"]["p"]["two_sided"] for r in out["claims"]]
    assert [r["primary"]["holm_p"] for r in out["claims"]] == pytest.approx(list(holm(ps)))
    for r in out["claims"]:  # the mixed-model interval beside the bootstrap's, and the detectable effect
        ev = r["primary"]
        assert ev["satterthwaite"]["ci_low"] < ev["estimate"] < ev["satterthwaite"]["ci_high"]
        assert ev["detectable"] == pytest.approx(detectable_effect(ev["se_boot"]))
    from analyses.reanalysis_tables import reanalysis_markdown

    text = reanalysis_markdown(json.loads(json.dumps(out)))
    assert text.index("## What was found") < text.index("## Limitations") < text.index("## Claims, one statement")
    assert "revised after data (k: 4 -> 1)" in text and "Registered after the data" not in text


def test_a_verdict_near_its_threshold_is_checked_on_streams_of_at_least_20000_replicates(tmp_path):
    from analyses.claim_endpoints import evaluate, measure
    from analyses.preregistered import preregistered_findings
    from analyses.study_seeded import Study

    _study(tmp_path / "study")
    (tmp_path / "claims.toml").write_text(CLAIMS)
    claims = read_claims(tmp_path / "claims.toml")
    first = evaluate(claims.claims[0], measure(Study(tmp_path / "study"), claims.claims[0]), claims.test)
    near = round(first["ci_low"] + 0.004, 4)  # 0.004 inside the interval's lower end: within the 0.01 window
    text = CLAIMS.replace("[claims.grpo-better]", "[registration]\nretrospective = true\n[claims.grpo-better]", 1)
    (tmp_path / "claims.toml").write_text(text.replace("threshold = 0.0", f"threshold = {near}", 1))
    out = preregistered_findings(tmp_path / "study", tmp_path / "claims.toml")
    ev = out["claims"][0]["primary"]
    st = ev["stability"]
    assert st["replicates_per_stream"] == 20000 and st["replicates_pooled"] == 2 * 20000
    assert [s["replicates"] for s in st["streams"]] == [20000, 20000] and ev["p"]["replicates"] == 40000
    assert ev["at_n_boot"]["p"]["replicates"] == 2000 and 0 <= st["agree"] <= 2
    assert "stability" not in out["claims"][2]["primary"]  # far from its threshold: no check
    assert out["registration"]["source"] == "claims file" and out["registration"]["retrospective"]
    assert any("within 0.01 of its threshold" in f for f in out["claims"][0]["flags"])


def test_findings_of_a_study_with_a_registration_open_with_its_claims_and_recompute(tmp_path, capsys):
    from analyses.recompute import main
    from analyses.study_findings import write_seeded_findings

    record = _registered(tmp_path, CLAIMS)
    _study(tmp_path / "study", record)
    write_seeded_findings(tmp_path / "study", tmp_path / "study" / "findings")
    stored = json.loads((tmp_path / "study" / "findings" / "findings.json").read_text())
    assert [c["id"] for c in stored["preregistered"]["claims"]] == ["grpo-better", "es-vs-grpo", "entropy"]
    text = (tmp_path / "study" / "findings" / "findings.md").read_text()
    assert text.startswith("# Pre-registered claims")
    assert "analyses.recompute" in text and "--check" not in text  # recompute compares by itself
    assert main([str(tmp_path / "study"), "preregistered/claims/0/verdict"]) == 0
    assert "agree" in capsys.readouterr().err
    from analyses.report.study_sections import study_sections

    keys = [s.key for s in study_sections(stored)]  # the report stage opens with them too
    assert keys[:3] == ["claims-found", "claims-limitations", "claims-table"] and "study-claims" in keys


# ---------------------------------------------------------------- `evalkit study` registers before training


def test_the_study_records_its_claims_before_the_first_training_stage_and_keeps_them(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.studies import toy_study

    from evalkit.study import run_study
    from evalkit.study.stages import Stage, identity_hash

    seen = {}

    def train(folder: Path, results: dict) -> dict:
        folder.mkdir(parents=True, exist_ok=True)
        seen["registration"] = json.loads((tmp_path / "out" / "study.json").read_text()).get("registration")
        return {"checkpoints": []}

    def evaluate(folder: Path, results: dict) -> dict:
        folder.mkdir(parents=True, exist_ok=True)
        return {}

    trained = {"t": 1, "inputs": {}}  # an identity holds the identities of the stages it reads
    stages = [Stage("train-es-s0", "train/es/seed-0", (), trained, 0, train),
              Stage("passk-es-s0", "passk/es/seed-0", ("train-es-s0",),
                    {"p": 1, "inputs": {"train-es-s0": identity_hash(trained)}}, 0, evaluate,
                    weights=("train-es-s0",))]
    monkeypatch.setattr("evalkit.study.stages.plan", lambda spec, sampler=None: stages)
    (tmp_path / "claims.toml").write_text(CLAIMS)
    study = tmp_path / "study.toml"
    study.write_text(toy_study().replace('title = "t"', f'title = "t"\nseeds = [0, 1]\nclaims = '
                                                        f'"{tmp_path / "claims.toml"}"')
                     .replace("max_new_tokens = 8\n[methods.grpo]", "max_new_tokens = 8\nsave_every = 1\n"
                                                                    "[methods.grpo]")
                     .replace("prompts_per_step = 2\nmax_new_tokens = 8",
                              "prompts_per_step = 2\nmax_new_tokens = 8\nsave_every = 1")
                     + '[validation]\nrule = "best-greedy"\n')
    state = run_study(study, tmp_path / "out")
    record = seen["registration"]
    assert record is not None and record["training_done_before"] == [] and not record["retrospective"]
    assert record["settings"]["claims"]["es-vs-grpo"]["k"] == 4 and record["recorded_at"]
    assert state["registration"] == record
    (tmp_path / "claims.toml").write_text(CLAIMS.replace("k = 4", "k = 2"))  # edited after the data
    again = run_study(study, tmp_path / "out")
    assert again["registration"] == record  # the registration is kept as recorded
    state = json.loads((tmp_path / "out" / "study.json").read_text())
    del state["registration"]  # a study that started without claims registers late, and says so
    (tmp_path / "out" / "study.json").write_text(json.dumps(state))
    late = run_study(study, tmp_path / "out")["registration"]
    assert late["training_done_before"] == ["train-es-s0"] and late["retrospective"]


def test_a_study_file_names_a_claims_file_that_must_read(tmp_path):
    from evalkit.errors import UsageError
    from evalkit.study.spec import read_spec

    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.studies import toy_study

    (tmp_path / "claims.toml").write_text('[claims.x]\nendpoint = "vibes"\n')
    path = tmp_path / "study.toml"
    path.write_text(toy_study().replace('title = "t"', f'title = "t"\nclaims = "{tmp_path / "claims.toml"}"'))
    with pytest.raises(UsageError, match="seeds"):
        read_spec(path)
    seeded = path.read_text().replace('title = "t"', 'title = "t"\nseeds = [0]').replace(
        "max_new_tokens = 8\n[methods.grpo]", "max_new_tokens = 8\nsave_every = 1\n[methods.grpo]") + \
        '[validation]\nrule = "best-greedy"\n'
    path.write_text(seeded)
    with pytest.raises(UsageError, match="claims.x.endpoint 'vibes'"):
        read_spec(path)
    assert tomllib.loads(seeded)["claims"].endswith("claims.toml")


def _validations(root: Path, es_rates: list[float]) -> None:
    """validate-base and validate-es-s{seed} stages (one candidate each) in a hand-made study."""
    rng = np.random.default_rng(9)
    state = json.loads((root / "study.json").read_text())
    _run(root / "validate" / "base", 0.2, rng)
    state["stages"]["validate-base"] = {"status": "done", "result": {"picked": {"run": "validate/base", "step": 0}}}
    for seed, rate in enumerate(es_rates):
        rel = f"validate/es/seed-{seed}/step-3"
        _run(root / rel, rate, rng)
        state["stages"][f"validate-es-s{seed}"] = {"status": "done", "result": {
            "candidates": [{"run": rel, "step": 3}], "picked": {"run": rel, "step": 3}}}
    (root / "study.json").write_text(json.dumps(state))


@pytest.mark.parametrize("es_rates, judged", [([0.2, 0.2, 1.0], False), ([1.0, 1.0, 0.2], True)])
def test_an_es_claim_is_judged_only_when_es_first_beats_the_base_on_validation(tmp_path, es_rates, judged):
    """Issue 44: a gated claim reads "not tested" unless its arm's positive control passes in at
    least gate_share of the seeds (here 1 of 3 fails the default half, 2 of 3 passes), and a claim
    not tested leaves Holm's family."""
    from analyses.preregistered import preregistered_findings
    from analyses.reanalysis_tables import reanalysis_markdown

    _study(tmp_path / "study")
    _validations(tmp_path / "study", es_rates)
    gated = CLAIMS.replace('contrast = "es - grpo"', 'contrast = "es - grpo"\ngate = ["es"]')
    (tmp_path / "claims.toml").write_text(gated)
    out = preregistered_findings(tmp_path / "study", tmp_path / "claims.toml")
    rows = {r["id"]: r for r in out["claims"]}
    es = rows["es-vs-grpo"]
    assert [c["passed"] for c in es["gate"]["controls"]["es"]] == [r == 1.0 for r in es_rates]
    assert es["gate"]["passed"] is judged and "gate" not in rows["grpo-better"]
    text = reanalysis_markdown(json.loads(json.dumps(out)))
    if judged:
        assert es["verdict"] != "not tested" and es["primary"]["p"] is not None and "It passed." in text
        family = [r["primary"]["p"]["two_sided"] for r in out["claims"]]
    else:
        assert es["verdict"] == "not tested" and es["primary"]["kind"] == "gated" and es["primary"]["holm_p"] is None
        assert es["also_at"] == {} and "did not beat the base" in text and "not in Holm's family" in text
        glance = text[text.index("## What was found"):text.index("In detail:")]  # one line per claim first
        assert f"- **not tested**: {es['statement']} (its gate: es beat the base on validation in 1 of 3 seeds)" \
            in glance
        assert glance.count("\n- **") == len(out["claims"])
        family = [rows[c]["primary"]["p"]["two_sided"] for c in ("grpo-better", "entropy")]
    tested = [r for r in out["claims"] if r["primary"].get("p")]
    assert [r["primary"]["holm_p"] for r in tested] == pytest.approx(list(holm(family)))


def test_a_gate_must_name_trained_arms(tmp_path):
    for change, words in (('gate = ["base"]', "trained arms"), ('gate = "es"', "trained arms"),
                          ('gate = ["es"]\ngate_share = 0', "gate_share"), ("gate_share = 0.5", "give gate")):
        (tmp_path / "c.toml").write_text(CLAIMS.replace('contrast = "es - grpo"', f'contrast = "es - grpo"\n{change}'))
        with pytest.raises(UsageError, match=words):
            read_claims(tmp_path / "c.toml")


def _masked(root: Path, retained: list[float], random: float) -> None:
    """masked-grpo-s{seed} stages whose masked.json keeps `retained[seed]` at the top 5% by |dW|."""
    state = json.loads((root / "study.json").read_text())
    for seed, kept in enumerate(retained):
        rows = []
        for by, share in (("abs", None if kept != kept else kept), ("random", random)):
            rows.append({"label": f"{by}-global-q0.05", "by": by, "scope": "global", "q": 0.05, "retained": share,
                         "retained_low": None if share is None else share - 0.1,  # NaN is null in masked.json
                         "retained_high": None if share is None else share + 0.1, "base_accuracy": 0.2,
                         "trained_accuracy": 0.2 if share is None else 0.5})
        rel = f"masked/grpo/seed-{seed}/masked.json"
        (root / rel).parent.mkdir(parents=True)
        (root / rel).write_text(json.dumps({"kind": "masked", "rows": rows}))
        state["stages"][f"masked-grpo-s{seed}"] = {"status": "done", "result": {"file": rel}}
    (root / "study.json").write_text(json.dumps(state))


GAIN = """
[claims.grpo-sparse-gain]
statement = "GRPO's top 5% of update entries by |dW| keep more than half its validation gain"
endpoint = "gain-retained"
q = 0.05
mask_by = "abs"
contrast = "grpo - base"
direction = "above"
threshold = 0.5
reference_margin = 0.1
"""


@pytest.mark.parametrize("retained, random, verdict", [([0.8, 0.7, float("nan")], 0.1, "supported"),
                                                       ([0.8, 0.3, 0.9], 0.1, "inconclusive"),
                                                       ([0.8, 0.9, 0.7], 0.75, "inconclusive"),
                                                       ([0.2, 0.3, 0.1], 0.0, "contradicted")])
def test_sparsity_by_function_is_judged_seed_by_seed_against_the_random_mask(tmp_path, retained, random, verdict):
    """Issue 44, part 3: a gain-retained claim reads each seed's masked.json; a seed that gained
    nothing has no share and is listed apart; with reference_margin the top mask must also beat
    the random mask at the same q by that much."""
    from analyses.preregistered import preregistered_findings
    from analyses.reanalysis_tables import reanalysis_markdown

    _study(tmp_path / "study")
    _masked(tmp_path / "study", retained, random)
    (tmp_path / "claims.toml").write_text(GAIN)
    out = preregistered_findings(tmp_path / "study", tmp_path / "claims.toml")
    row = out["claims"][0]
    assert row["verdict"] == verdict and row["primary"]["kind"] == "runs" and row["primary"]["p"] is None
    finite = [x for x in retained if x == x]
    assert [r["a"] for r in row["primary"]["runs"]] == finite
    assert len(row["primary"]["detail"]["no_gain"]) == len(retained) - len(finite)
    assert "a random mask" in reanalysis_markdown(json.loads(json.dumps(out)))


def test_a_gain_retained_claim_needs_an_arm_against_the_base_and_a_fraction(tmp_path):
    for change, new in (('contrast = "grpo - base"', 'contrast = "grpo - es"'), ("q = 0.05", "q = 1"),
                        ('mask_by = "abs"', 'mask_by = "random"')):
        (tmp_path / "c.toml").write_text(GAIN.replace(change, new))
        with pytest.raises(UsageError, match="gain-retained"):
            read_claims(tmp_path / "c.toml")


def test_a_gate_reads_the_seeds_its_arm_was_validated_on(tmp_path):
    """An arm with its own seeds ([methods.es] seeds = [0, 1]) has no validate stage on seed 2:
    its gate reads seeds 0 and 1 (2 of 2 pass)."""
    from analyses.preregistered import preregistered_findings

    _study(tmp_path / "study")
    _validations(tmp_path / "study", [1.0, 1.0])
    state = json.loads((tmp_path / "study" / "study.json").read_text())
    state["plan"] = [{"stage": name} for name in state["stages"]] + [{"stage": "validate-grpo-s2"}]
    (tmp_path / "study" / "study.json").write_text(json.dumps(state))
    (tmp_path / "claims.toml").write_text(CLAIMS.replace('contrast = "es - grpo"', 'contrast = "es - grpo"\ngate = ["es"]'))
    out = preregistered_findings(tmp_path / "study", tmp_path / "claims.toml")
    gate = {r["id"]: r for r in out["claims"]}["es-vs-grpo"]["gate"]
    assert [c["seed"] for c in gate["controls"]["es"]] == [0, 1] and gate["passed"]


def test_a_registered_rule_outside_the_family_now_is_still_holm_adjusted_with_it(tmp_path):
    """A gate added after the data that fails takes the claim out of Holm's family, but its
    verdict under the registered rule (no gate) is adjusted as that rule's family would be."""
    from analyses.claims import registration
    from analyses.preregistered import preregistered_findings

    path = tmp_path / "claims.toml"
    path.write_text(CLAIMS)
    record = registration(read_claims(path), str(path))
    _study(tmp_path / "study", record)
    _validations(tmp_path / "study", [0.2, 0.2, 0.2])  # ES never beats the base
    path.write_text(CLAIMS.replace('contrast = "es - grpo"', 'contrast = "es - grpo"\ngate = ["es"]'))
    out = preregistered_findings(tmp_path / "study", path)
    rows = {r["id"]: r for r in out["claims"]}
    es = rows["es-vs-grpo"]
    assert es["status"] == "revised after data" and es["verdict"] == "not tested"
    family = [rows[c]["primary"]["p"]["two_sided"] for c in ("grpo-better", "entropy")]
    registered = es["registered"]["primary"]
    assert registered["holm_p"] == pytest.approx(holm([*family, registered["p"]["two_sided"]])[-1])


def test_a_gate_on_an_arm_not_yet_validated_reads_not_tested(tmp_path):
    from analyses.preregistered import preregistered_findings

    _study(tmp_path / "study")
    (tmp_path / "claims.toml").write_text(CLAIMS.replace('contrast = "es - grpo"', 'contrast = "es - grpo"\ngate = ["es"]'))
    out = preregistered_findings(tmp_path / "study", tmp_path / "claims.toml")
    es = {r["id"]: r for r in out["claims"]}["es-vs-grpo"]
    assert es["verdict"] == "not tested" and es["gate"]["controls"]["es"] == [] and not es["gate"]["passed"]


@pytest.mark.parametrize("change", ['reference_margin = "0.1"', 'direction = "below"'])
def test_a_gain_retained_reference_is_a_number_above_the_random_mask(tmp_path, change):
    old = 'reference_margin = 0.1' if change.startswith("reference") else 'direction = "above"'
    (tmp_path / "c.toml").write_text(GAIN.replace(old, change))
    with pytest.raises(UsageError, match="reference_margin"):
        read_claims(tmp_path / "c.toml")
