"""The sampler's decode step (evalkit.decode): transformers' forward in fewer ops, same logits to
float32 rounding, on the model's own weights; models it does not handle keep their forward."""

import pytest


@pytest.fixture(scope="module")
def loaded(tiny_model):
    from evalkit.models import load_model, resolve_model

    return load_model(resolve_model(str(tiny_model)))


PROMPTS = ["What is 2+2?", "Spell cat backwards, then say something longer.", "hi"]


def _two_caches(model, tok, repeats=2, extra=8):
    """The prefill of PROMPTS (left-padded: rows with different pad widths) twice, each preallocated."""
    from evalkit.kvcache import preallocate
    from evalkit.sampling import _prefill, render_prompt

    rendered = [render_prompt(tok, p) for p in PROMPTS]
    caches = []
    for _ in range(2):
        out, mask = _prefill(model, tok, rendered, "cpu")
        caches.append(preallocate(out.cache, repeats, mask.shape[1] + extra))
    return caches, mask.repeat_interleave(repeats, dim=0)


def _steps(model, step, forward_cache, mask, tokens, count):
    """`count` decode steps by the model's forward and by `step`; yields (forward logits, step logits)."""
    import torch

    positions = mask.sum(-1)
    for _ in range(count):
        mask = torch.cat([mask, mask.new_ones(len(mask), 1)], dim=-1)
        ref = model(input_ids=tokens[:, None], attention_mask=mask, position_ids=positions[:, None],
                    cache=forward_cache, use_cache=True).logits[:, -1]
        yield ref, step(tokens, positions, mask)
        positions, tokens = positions + 1, ref.argmax(-1)


def test_step_logits_equal_the_model_forward_to_float_rounding(loaded):
    """Left padding (rows attend to different keys), grouped query heads (4 heads, 2 key/value heads),
    a row per sample of each prompt, six steps: within 1e-4 of the logits' scale, the same argmax."""
    import torch

    from evalkit.decode import LlamaStep, decode_step

    model, tok = loaded
    with torch.inference_mode():
        (forward_cache, step_cache), mask = _two_caches(model, tok)
        step = decode_step(model, step_cache)
        assert isinstance(step, LlamaStep)
        tokens = torch.tensor([5, 6, 7, 8, 9, 10])
        for ref, got in _steps(model, step, forward_cache, mask, tokens, 6):
            assert (ref - got).abs().max() <= 1e-4 * ref.abs().max()
            assert torch.equal(ref.argmax(-1), got.argmax(-1))
        layer = step_cache.layers[0]
        assert layer.length == mask.shape[1] + 6  # the step wrote its keys into the preallocated cache


def test_step_reads_weights_changed_in_place(loaded):
    """A trainer perturbs the weights in place (ES): the step reads the model's tensors, not copies."""
    import torch

    from evalkit.decode import decode_step

    model, tok = loaded
    weight = model.model.layers[0].mlp.down_proj.weight
    saved = weight.detach().clone()
    try:
        with torch.inference_mode():
            (forward_cache, step_cache), mask = _two_caches(model, tok)
            step = decode_step(model, step_cache)
            weight.add_(torch.randn_like(weight))  # after the step was built
            tokens = torch.tensor([5, 6, 7, 8, 9, 10])
            ref, got = next(_steps(model, step, forward_cache, mask, tokens, 1))
            assert (ref - got).abs().max() <= 1e-4 * ref.abs().max()
    finally:
        with torch.no_grad():
            weight.copy_(saved)


def test_models_and_caches_the_step_does_not_handle_keep_their_forward(loaded):
    """A Qwen2 model (biased q/k/v projections) and a cache that is not preallocated get None; the
    sampler then decodes with the model's forward, and each sample is still its own uniforms' draw."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from transformers.cache_utils import DynamicCache

    from evalkit import sampling
    from evalkit.decode import decode_step
    from evalkit.sampling import SamplingConfig, render_prompt, sample_chunk

    model, tok = loaded
    (_, cache), _ = _two_caches(model, tok)
    assert decode_step(model, cache) is not None
    assert decode_step(model, DynamicCache(config=model.config)) is None
    torch.manual_seed(0)
    qwen = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                                        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)).eval()
    assert decode_step(qwen, cache) is None
    cfg = SamplingConfig(n=2, temperature=1.0, max_new_tokens=6, seed=1, record_entropy=False)
    prompt = render_prompt(tok, PROMPTS[0])
    samples = sample_chunk(qwen, tok, [prompt], ["q"], cfg, stop_ids=[-1])
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    for s in samples:
        with torch.no_grad():
            logits = qwen(torch.tensor([ids + list(s.token_ids)])).logits[0, len(ids) - 1 : -1]
        drawn, _ = sampling._draw(logits, sampling._uniforms([s.seed], 6, "cpu")[0], cfg, record=False)
        assert drawn.tolist() == list(s.token_ids)
