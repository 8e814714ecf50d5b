"""`evalkit traces` and `evalkit tokens` on tiny models: per-token figures exactly as a plain
per-sample forward pass gives them, ratio exactly 1 for a policy's own traces, a measurable gap
and divergence for another model's, and refusals."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from evalkit.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def setup(tiny_model, tmp_path_factory):
    from helpers.tinymodel import make_tiny_model

    from evalkit.passk import PasskOptions, run_passk

    root = tmp_path_factory.mktemp("traces")
    other = make_tiny_model(root / "other", seed=1)
    runs = {}
    for name, model in (("own", tiny_model), ("other", other)):
        runs[f"{name}_run"] = root / f"run-{name}"
        run_passk(PasskOptions(model=str(model), task="arith", n=2, ks=(1, 2), limit=3, max_new_tokens=6,
                               grader_workers=1, device="cpu"), runs[f"{name}_run"])
    return {"root": root, "policy": str(tiny_model), "other": str(other), **runs}


def _plain_logits(model_path: str, records):
    """Per sample, one unbatched forward of prompt + completion: the rows predicting its tokens."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evalkit.sampling import render_prompt

    model = AutoModelForCausalLM.from_pretrained(model_path).eval()
    tok = AutoTokenizer.from_pretrained(model_path)
    out = []
    for r in records:
        p = tok(render_prompt(tok, r["prompt"]), add_special_tokens=False)["input_ids"]
        c = tok(r["completion"], add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([p + c])).logits[0].float()
        out.append((c, logits[len(p) - 1 : len(p) + len(c) - 1]))
    return out


def test_token_log_probabilities_equal_a_plain_forward(setup):
    from evalkit.forced import records_of_run
    from evalkit.traces import TracesOptions, run_traces

    report = run_traces(TracesOptions(model=setup["policy"], traces=str(setup["other_run"]), own_samples=0,
                                      least=1000, device="cpu"))
    records = records_of_run(setup["other_run"])
    plain = _plain_logits(setup["policy"], records)
    expected = [float(torch.log_softmax(lg, -1)[range(len(c)), c].sum()) for c, lg in plain]
    got = [-(t["nll_per_token"] or 0.0) * t["tokens"] for t in report["per_trace"]]
    assert np.allclose(got, expected, atol=1e-4)
    n_tokens = sum(len(c) for c, _ in plain)
    assert report["tokens"] == n_tokens and len(report["least_likely"]) == n_tokens


def test_a_policys_own_traces_give_ratio_one_and_nothing_clipped(setup, tmp_path):
    result = runner.invoke(app, ["traces", setup["policy"], "--traces", str(setup["own_run"]), "--behaviour",
                                 setup["policy"], "--own-samples", "0", "--device", "cpu", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    clip = json.loads((tmp_path / "traces.json").read_text())["clip"]
    assert clip["all_tokens"]["outside"] == 0.0 and clip["all_tokens"]["n"] > 0
    assert (tmp_path / "traces_per_trace.csv").is_file() and (tmp_path / "traces_least_likely.csv").is_file()


def test_another_models_traces_show_a_gap(setup):
    from evalkit.traces import TracesOptions, run_traces

    report = run_traces(TracesOptions(model=setup["policy"], traces=str(setup["other_run"]), behaviour=setup["other"],
                                      own_samples=4, device="cpu"))
    gap = report["idiolect_gap"]
    assert gap["gap"] > 0 and gap["ci_low"] > 0  # the other model's tokens are less likely than the policy's own
    assert report["clip"]["all_tokens"]["outside"] > 0


def test_tokens_kl_equals_a_plain_forward_and_vanishes_for_one_model(setup):
    from evalkit.forced import records_of_run
    from evalkit.tokens import TokensOptions, run_tokens

    same = run_tokens(TokensOptions(model=setup["policy"], student=setup["policy"], samples=str(setup["own_run"]),
                                    device="cpu"))
    assert same["reverse_kl_total"] == pytest.approx(0.0, abs=1e-9) and same["argmax_agreement"] == 1.0
    report = run_tokens(TokensOptions(model=setup["other"], student=setup["policy"], samples=str(setup["own_run"]),
                                      device="cpu"))
    records = records_of_run(setup["own_run"])
    student, teacher = _plain_logits(setup["policy"], records), _plain_logits(setup["other"], records)
    total = 0.0
    for (_, s), (_, t), r in zip(student, teacher, records, strict=True):
        temp = r["temperature"] or 1.0
        ls, lt = torch.log_softmax(s / temp, -1), torch.log_softmax(t / temp, -1)
        kl = (ls.exp() * (ls - lt)).sum(-1)
        total += float(kl.sum())
    # the plain pass covers the completion tokens; the scorer adds the stop position when a sample stopped
    stopped_extra = report["reverse_kl_total"] - total
    assert report["reverse_kl_total"] > 0 and stopped_extra >= -1e-4
    shares = list(report["concentration"].values())
    assert 0 < shares[0] <= shares[1] <= shares[2] <= 1
    assert report["tokens_for_half"]["median"] >= 1


def test_mismatched_tokenizers_and_stored_logprobs_are_refused(setup, tmp_path):
    from transformers import AutoTokenizer

    retok = tmp_path / "retok"
    shutil.copytree(setup["policy"], retok)
    tok = AutoTokenizer.from_pretrained(retok)
    tok.add_tokens(["<extra>"])
    tok.save_pretrained(retok)
    for args in (["traces", setup["policy"], "--traces", str(setup["own_run"]), "--behaviour", str(retok)],
                 ["tokens", str(retok), setup["policy"], "--samples", str(setup["own_run"])]):
        result = runner.invoke(app, [*args, "--device", "cpu"])
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
        assert "tokeniz" in result.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "1+1?", "completion": "2 apples", "logprobs": [-0.1]}) + "\n")
    result = runner.invoke(app, ["traces", setup["policy"], "--traces", str(bad), "--own-samples", "0",
                                 "--device", "cpu"])
    assert result.exit_code == 2 and "tokenizers differ" in result.output


def test_report_has_a_section_for_each(setup, tmp_path):
    from analyses.report import build_report
    from evalkit.tokens import TokensOptions, run_tokens
    from evalkit.traces import TracesOptions, run_traces

    run_traces(TracesOptions(model=setup["policy"], traces=str(setup["other_run"]), behaviour=setup["other"],
                             own_samples=1, device="cpu"), tmp_path / "traces")
    run_tokens(TokensOptions(model=setup["other"], student=setup["policy"], samples=str(setup["own_run"]),
                             device="cpu"), tmp_path / "tokens")
    result = build_report([tmp_path / "traces", tmp_path / "tokens"], tmp_path / "report", title="t")
    assert {"traces", "tokens"} <= set(result.sections)
    assert (tmp_path / "report" / "figures" / "tokens_lorenz.png").is_file()
    assert (tmp_path / "report" / "figures" / "traces_ratio.png").is_file()
