"""ES internals on a tiny model: noise stream, exact perturb/restore, update vs stored noise."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from evalkit.train import es  # noqa: E402
from metrics.grpo import population_zscores  # noqa: E402


def _model(tiny_model, dtype):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model, dtype=getattr(torch, dtype))


def _bits(params):
    return [es._bits(p.detach().view(-1)).clone() for p in params]


def _stored_noise(params, member_seed, noise):
    """The published scheme: one seeded generator per tensor, randn of the tensor's size."""
    out = []
    for i, p in enumerate(params):
        gen = torch.Generator().manual_seed(es.tensor_seed(member_seed, i, noise))
        out.append(torch.randn(p.numel(), generator=gen).view(p.shape))
    return out


def test_chunked_noise_is_the_whole_tensor_stream(monkeypatch):
    monkeypatch.setattr(es, "CHUNK", 64)
    p = torch.nn.Parameter(torch.zeros(10, 37))
    chunks = torch.cat([eps.clone() for _, _, eps in es._noise(p, 5)])
    whole = torch.randn(370, generator=torch.Generator().manual_seed(5))
    assert torch.equal(chunks, whole)


def test_tensor_seeds_iid_and_correlated():
    assert es.tensor_seed(10, 0, "iid") != es.tensor_seed(10, 1, "iid")
    assert es.tensor_seed(10, 0, "correlated") == es.tensor_seed(10, 3, "correlated") == 10
    assert len(set(es.member_seeds(0, 1, 30))) == 30
    assert es.member_seeds(0, 1, 4) == es.member_seeds(0, 1, 4) != es.member_seeds(0, 2, 4)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("noise", ["iid", "correlated"])
def test_perturb_then_restore_is_bitwise_exact(tiny_model, dtype, noise):
    model = _model(tiny_model, dtype)
    params = es._params(model)
    before = _bits(params)
    # sigma large against the tiny weights: a plain subtract misses many elements
    fixes = es.perturb_(params, 1234, 0.05, noise)
    assert sum(int(i.numel()) for stored in fixes.values() for i, _ in stored) > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, _bits(params), strict=True))
    es.restore_(params, 1234, 0.05, noise, fixes)
    assert all(torch.equal(a, b) for a, b in zip(before, _bits(params), strict=True))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_plain_subtract_restore_is_not_exact_but_ours_is(tiny_model, dtype):
    model = _model(tiny_model, dtype)
    params = es._params(model)
    before = _bits(params)
    noise = _stored_noise(params, 99, "iid")
    with torch.no_grad():
        for p, e in zip(params, noise, strict=True):
            p.add_((0.05 * e).to(p.dtype))
            p.sub_((0.05 * e).to(p.dtype))
    assert any(not torch.equal(a, b) for a, b in zip(before, _bits(params), strict=True))


@pytest.mark.parametrize("chunk", [es.CHUNK, 48])
def test_perturb_adds_sigma_times_the_stored_noise(tiny_model, chunk, monkeypatch):
    monkeypatch.setattr(es, "CHUNK", chunk)
    model = _model(tiny_model, "float32")
    params = es._params(model)
    start = [p.detach().clone() for p in params]
    es.perturb_(params, 7, 1e-3, "iid")
    for p, s, e in zip(params, start, _stored_noise(params, 7, "iid"), strict=True):
        assert torch.equal(p.detach(), s + 1e-3 * e)


@pytest.mark.parametrize("chunk", [es.CHUNK, 48])
@pytest.mark.parametrize("noise", ["iid", "correlated"])
def test_update_equals_reference_with_stored_noise(tiny_model, noise, chunk, monkeypatch):
    monkeypatch.setattr(es, "CHUNK", chunk)  # 48: every tensor spans many chunks, some ragged
    model = _model(tiny_model, "float32")
    params = es._params(model)
    start = [p.detach().double() for p in params]
    seeds = es.member_seeds(3, 1, 5)
    rewards = [0.25, 0.5, 0.0, 0.5, 1.0]
    z = population_zscores(rewards)
    alpha = 5e-2
    es.es_update_(params, seeds, z, alpha, noise)
    eps = [_stored_noise(params, s, noise) for s in seeds]
    for i, (p, s) in enumerate(zip(params, start, strict=True)):
        expected = s + alpha / len(seeds) * sum(zn * eps[n][i].double() for n, zn in enumerate(z))
        assert torch.allclose(p.detach().double(), expected, rtol=0, atol=1e-6)
        assert not torch.equal(p.detach().double(), s)


def test_update_in_bf16_is_accumulated_in_fp32_then_rounded_once(tiny_model):
    model = _model(tiny_model, "bfloat16")
    params = es._params(model)
    start = [p.detach().float() for p in params]
    seeds = es.member_seeds(0, 1, 4)
    z = population_zscores([0.0, 1.0, 1.0, 0.5])
    es.es_update_(params, seeds, z, 0.1, "iid")
    eps = [_stored_noise(params, s, "iid") for s in seeds]
    for i, (p, s) in enumerate(zip(params, start, strict=True)):
        acc = sum(float(zn) * eps[n][i] for n, zn in enumerate(z))
        assert torch.equal(p.detach(), (s + acc * (0.1 / 4)).to(torch.bfloat16))


def test_zero_spread_leaves_weights_bitwise_unchanged(tiny_model):
    model = _model(tiny_model, "float32")
    params = es._params(model)
    before = _bits(params)
    z = population_zscores([0.5, 0.5, 0.5])
    assert np.all(z == 0)
    es.es_update_(params, es.member_seeds(0, 1, 3), z, 1.0, "iid")
    assert all(torch.equal(a, b) for a, b in zip(before, _bits(params), strict=True))


def test_population_zscores_use_ddof_0():
    r = np.array([0.0, 0.5, 1.0, 1.0])
    expected = (r - r.mean()) / (np.sqrt(((r - r.mean()) ** 2).mean()) + 1e-8)
    assert np.allclose(population_zscores(r), expected)
    assert np.allclose(population_zscores([0, 1]), [-1, 1], atol=1e-7)


def test_checksums_catch_a_single_changed_element(tiny_model):
    model = _model(tiny_model, "bfloat16")
    params = es._params(model)
    before = es.checksums(params)
    with torch.no_grad():
        flat = params[1].view(-1)
        flat[3] = flat[3] + 1.0
    after = es.checksums(params)
    assert [a != b for a, b in zip(before, after, strict=True)].count(True) == 1
