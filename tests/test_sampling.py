"""The sampler: greedy equals transformers' generate, sampling follows the
model's distribution, samples are reproducible per (seed, problem, index)."""

import numpy as np
import pytest

from evalkit.models import load_model, resolve_model
from evalkit.sampling import (
    SamplingConfig,
    render_prompt,
    sample_chunk,
    sample_seed,
    stop_token_ids,
)


@pytest.fixture(scope="module")
def loaded(tiny_model):
    return load_model(resolve_model(str(tiny_model)))


PROMPTS = ["What is 2+2?", "Spell cat backwards, then say something longer."]


def _run(loaded, cfg, prompts=PROMPTS, ids=("a", "b")):
    model, tok = loaded
    rendered = [render_prompt(tok, p) for p in prompts]
    return sample_chunk(model, tok, rendered, list(ids), cfg, stop_ids=stop_token_ids(model, tok))


def test_greedy_matches_hf_generate(loaded):
    import torch

    model, tok = loaded
    samples = _run(loaded, SamplingConfig(n=1, temperature=0.0, max_new_tokens=12))
    rendered = [render_prompt(tok, p) for p in PROMPTS]
    enc = tok(rendered, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        ref = model.generate(
            **enc, do_sample=False, max_new_tokens=12, pad_token_id=tok.pad_token_id,
            eos_token_id=stop_token_ids(model, tok),
        )
    for s in samples:
        row = ref[s.problem_index, enc["input_ids"].shape[1]:].tolist()
        generated = list(s.token_ids) + ([tok.eos_token_id] if s.finish_reason == "stop" else [])
        assert row[: len(generated)] == generated


def test_same_chunk_gives_identical_samples(loaded):
    cfg = SamplingConfig(n=4, temperature=1.0, max_new_tokens=10, seed=3)
    assert _run(loaded, cfg) == _run(loaded, cfg)


def test_seed_changes_samples_and_seeds_never_overlap(loaded):
    a = _run(loaded, SamplingConfig(n=4, max_new_tokens=10, seed=0))
    b = _run(loaded, SamplingConfig(n=4, max_new_tokens=10, seed=1))
    assert [s.token_ids for s in a] != [s.token_ids for s in b]
    seeds = {sample_seed(0, f"p{i}", j) for i in range(200) for j in range(64)}
    assert len(seeds) == 200 * 64  # seed + j schemes collide across problems; hashing does not


def test_first_token_frequencies_follow_the_softmax(loaded):
    """4000 one-token samples: a chi-square test accepts softmax(logits / T)
    and rejects the distribution at another temperature (the test has power)."""
    import torch
    from scipy.stats import chisquare

    model, tok = loaded
    temperature = 0.25
    cfg = SamplingConfig(n=4000, temperature=temperature, max_new_tokens=1)
    samples = _run(loaded, cfg, prompts=PROMPTS[:1], ids=("x",))
    enc = tok([render_prompt(tok, PROMPTS[0])], return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        logits = model(**enc).logits[0, -1].double()
    first = [s.token_ids[0] if s.token_ids else tok.eos_token_id for s in samples]
    counts = np.bincount(first, minlength=len(logits))

    def p_value(t):
        expected = torch.softmax(logits / t, -1).numpy() * len(samples)
        keep = expected >= 5  # pool the rare tokens into one cell
        obs, exp = counts[keep], expected[keep]
        if expected[~keep].sum() > 1:
            obs = np.append(obs, counts[~keep].sum())
            exp = np.append(exp, expected[~keep].sum())
        return chisquare(obs, exp * obs.sum() / exp.sum()).pvalue

    assert p_value(temperature) > 1e-4
    assert p_value(2 * temperature) < 1e-6


def test_entropy_is_exact_mean_over_generated_tokens(loaded):
    import torch

    model, tok = loaded
    cfg = SamplingConfig(n=2, temperature=1.3, max_new_tokens=6, seed=5)
    samples = _run(loaded, cfg, prompts=PROMPTS[:1], ids=("x",))
    prompt_ids = tok([render_prompt(tok, PROMPTS[0])], add_special_tokens=False)["input_ids"][0]
    for s in samples:
        generated = list(s.token_ids) + ([tok.eos_token_id] if s.finish_reason == "stop" else [])
        ids = torch.tensor([prompt_ids + generated])
        with torch.no_grad():
            logits = model(ids).logits[0, len(prompt_ids) - 1 : -1] / 1.3
        logp = torch.log_softmax(logits.double(), -1)
        ent = -(logp.exp() * logp).sum(-1).mean().item()
        assert s.num_tokens == len(generated)
        assert s.mean_entropy == pytest.approx(ent, rel=1e-4)


def test_top_p_restricts_to_nucleus(loaded):
    import torch

    model, tok = loaded
    cfg = SamplingConfig(n=300, temperature=1.0, top_p=0.3, max_new_tokens=1)
    samples = _run(loaded, cfg, prompts=PROMPTS[:1], ids=("x",))
    enc = tok([render_prompt(tok, PROMPTS[0])], return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        probs = torch.softmax(model(**enc).logits[0, -1], -1)
    order = probs.argsort(descending=True)
    cum = probs[order].cumsum(0)
    nucleus = set(order[: int((cum < 0.3).sum()) + 1].tolist())
    drawn = {s.token_ids[0] if s.token_ids else tok.eos_token_id for s in samples}
    assert drawn <= nucleus


def test_shared_prompt_prefix_is_prefilled_once_with_the_same_result(loaded, monkeypatch):
    """A common prefix (here a shared instruction) runs once; logits and samples match the
    plain prefill."""
    import torch

    from evalkit import sampling

    model, tok = loaded
    texts = [f"You are a careful solver of small puzzles. {p}" for p in [*PROMPTS, "Add 3 and 4."]]
    rendered = [render_prompt(tok, p) for p in texts]
    ids = [tok(p, add_special_tokens=False)["input_ids"] for p in rendered]
    assert ids[0][:40] == ids[1][:40] == ids[2][:40]
    calls = []
    forward = model.forward
    monkeypatch.setattr(model, "forward", lambda *a, **k: calls.append(k["input_ids"].shape) or forward(*a, **k))
    with torch.inference_mode():
        shared, mask = sampling._prefill(model, tok, rendered, "cpu")
    assert len(calls) == 2 and calls[0][0] == 1 and calls[0][1] >= 40  # prefix once, then rests
    assert mask.shape[1] == shared.cache.get_seq_length()
    cfg = SamplingConfig(n=3, temperature=1.0, max_new_tokens=10, seed=5)
    got = _run(loaded, cfg, prompts=texts, ids=("a", "b", "c"))
    monkeypatch.setattr(sampling, "SHARED_PREFIX_MIN", 10**9)
    with torch.inference_mode():
        plain, _ = sampling._prefill(model, tok, rendered, "cpu")
    assert torch.allclose(shared.logits, plain.logits, atol=1e-5)
    ref = _run(loaded, cfg, prompts=texts, ids=("a", "b", "c"))
    assert [s.token_ids for s in ref] == [s.token_ids for s in got]  # equal up to float rounding:
    assert [s.mean_entropy for s in ref] == pytest.approx([s.mean_entropy for s in got], abs=1e-5)
