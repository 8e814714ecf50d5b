"""ES's logged step size and fitness spread (issue 44): checked against direct computations on a
tiny model, in the update itself and through a whole run's metrics.jsonl."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from evalkit.train import es  # noqa: E402
from metrics.grpo import population_zscores  # noqa: E402


def _params(tiny_model, dtype):
    from transformers import AutoModelForCausalLM

    return es._params(AutoModelForCausalLM.from_pretrained(tiny_model, dtype=getattr(torch, dtype)))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("chunk", [es.CHUNK, 48])
def test_update_figures_are_the_change_applied(tiny_model, dtype, chunk, monkeypatch):
    monkeypatch.setattr(es, "CHUNK", chunk)  # 48: many chunks per tensor, some ragged
    params = _params(tiny_model, dtype)
    before = [p.detach().clone() for p in params]
    seeds = es.member_seeds(5, 1, 6)
    z = population_zscores([0.0, 0.25, 0.25, 0.5, 1.0, 0.75])
    alpha = 2e-3 if dtype == "bfloat16" else 1e-4  # bf16: large enough that some elements move
    got = es.es_update_(params, seeds, z, alpha, "iid")

    d = sum(p.numel() for p in params)
    delta = torch.cat([(p.detach().double() - b.double()).view(-1) for p, b in zip(params, before, strict=True)])
    changed = sum(int((es._bits(p.detach().view(-1)) != es._bits(b.view(-1))).sum())
                  for p, b in zip(params, before, strict=True))
    noise = [[torch.randn(p.numel(), generator=torch.Generator().manual_seed(es.tensor_seed(s, i, "iid")))
              for i, p in enumerate(params)] for s in seeds]
    intended = torch.cat([alpha / len(seeds) * sum(float(zn) * noise[n][i].double() for n, zn in enumerate(z))
                          for i in range(len(params))])
    assert got["update/params"] == d
    assert got["update/norm"] == pytest.approx(float(delta.norm()), rel=1e-6)
    assert got["update/norm_fp32"] == pytest.approx(float(intended.norm()), rel=1e-5)
    assert got["update/changed_frac"] == changed / d
    weights = torch.cat([b.double().view(-1) for b in before]).norm()
    assert got["update/rel_norm"] == pytest.approx(float(delta.norm() / weights), rel=1e-6)
    assert 0 < changed < d if dtype == "bfloat16" else changed > 0.99 * d


def test_step_over_perturbation_is_about_alpha_over_sigma_root_n(tiny_model):
    params = _params(tiny_model, "float32")
    n, sigma, alpha = 30, 1e-3, 5e-4  # the paper's settings: ratio about 0.091
    z = population_zscores(np.random.default_rng(0).integers(0, 17, n) / 16)
    record = es.step_record(es.es_update_(params, es.member_seeds(0, 1, n), z, alpha, "iid"), sigma)
    d = record["update/params"]
    assert record["perturbation/norm"] == sigma * math.sqrt(d)
    assert record["update/over_perturbation"] == record["update/norm"] / (sigma * math.sqrt(d))
    assert record["update/over_perturbation"] == pytest.approx(alpha / (sigma * math.sqrt(n)), rel=0.05)


def test_no_spread_no_step(tiny_model):
    params = _params(tiny_model, "float32")
    record = es.step_record(es.es_update_(params, es.member_seeds(0, 1, 3), population_zscores([0.5] * 3), 1.0,
                                          "iid"), 1e-3)
    assert record["update/norm"] == record["update/over_perturbation"] == record["update/changed_frac"] == 0.0
    assert record["update/rel_norm"] == 0.0
    assert es.step_record(None, 1e-3) == {}  # a Ray update whose figures were lost: no fields, no zeros


def test_fitness_spread_fields():
    from evalkit.sampling import Sample

    one = [Sample(0, 0, (), 3, "stop", 1.0, 0)]  # as evalkit.train.es_ray rebuilds the members' samples
    record = es.iteration_record(3, [0.25, 0.5, 0.5, 1.0], one, 0, 0)
    assert record["fitness/spread"] == 0.75 and record["fitness/distinct"] == 3
    assert record["fitness/std"] == pytest.approx(np.std([0.25, 0.5, 0.5, 1.0]))
    flat = es.iteration_record(1, [0.5, 0.5], one, 0, 0)
    assert flat["fitness/spread"] == 0.0 and flat["fitness/distinct"] == 1 and flat["zero_spread"]


def test_a_run_logs_the_step_its_checkpoint_shows(tiny_model, tmp_path):
    """answer_logprob fitness is dense, so every iteration moves; the logged norm of iteration 1
    is ||checkpoint 1 - base|| and the ratio divides it by sigma sqrt(d)."""
    from safetensors.torch import load_file

    from evalkit.train.es import ESOptions, run_es

    task = tmp_path / "t.jsonl"
    task.write_text("".join(json.dumps({"id": f"p{i}", "question": f"{i}+1?", "answer": str(i + 1)}) + "\n"
                            for i in range(4)))
    opts = ESOptions(model=str(tiny_model), task=str(task), population=4, sigma=0.01, alpha=0.005, iterations=2,
                     prompts_per_iteration=4, max_new_tokens=2, grader_workers=1, save_every=1, device="cpu",
                     fitness="answer_logprob")
    run_es(opts, tmp_path / "es")
    records = [json.loads(x) for x in (tmp_path / "es" / "metrics.jsonl").read_text().splitlines()]
    base, first = load_file(tiny_model / "model.safetensors"), load_file(tmp_path / "es" / "step-000001" /
                                                                          "model.safetensors")
    delta = torch.cat([(first[k].double() - base[k].double()).view(-1) for k in base])
    d = delta.numel()
    assert records[0]["update/params"] == d
    assert records[0]["update/norm"] == pytest.approx(float(delta.norm()), rel=1e-6)
    assert records[0]["update/over_perturbation"] == pytest.approx(float(delta.norm()) / (0.01 * math.sqrt(d)),
                                                                   rel=1e-6)
    for r in records:
        assert r["fitness/distinct"] >= 2 and r["fitness/spread"] == r["fitness/max"] - r["fitness/min"] > 0
