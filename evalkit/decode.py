"""One decode step of a Llama-family model in a few large ops: the sampler's step after the prefill.

    step = decode_step(model, cache)            # None: use the model's own forward
    logits = step(tokens, positions, mask)      # tokens, positions [rows]; mask [rows, filled + 1] of 0/1

transformers' Llama forward spends ~240 torch calls per layer on one new token (a causal mask
built each step, rotary halves concatenated, q, k and v projected and transposed apart,
scaled-dot-product attention's flash kernel for a single query); the sampler's decode ran at
42.7% of the dense matmul rate inside it while the same matmuls alone reach 57.7% (issue 26).
This step is about 20 calls per layer, reading the model's own weights (no copies, so a trainer
that changes them in place is seen at the next call):
- q and k projected into one buffer and rotated together (rotary embedding, half-split form);
- keys and values written into the preallocated cache (evalkit.kvcache.InPlaceLayer);
- attention over the filled positions as two batched matmuls, the padding mask an additive bias
  built once per step, grouped query heads read from their shared key/value head without a copy;
- each residual added inside its matmul (`addmm`); RMSNorm as transformers computes it.

Numerics: the same operations as transformers' forward in another grouping, so logits agree to
float32 rounding (tests/test_decode.py: within 1e-4 of the logits' scale), not bit for bit;
which of the two a run used is part of its sampler version (evalkit.sampling).

Limits: `LlamaForCausalLM` with the default rotary embedding, no attention or MLP bias, SiLU,
`pretraining_tp` 1, and a cache of InPlaceLayers; anything else gets None (the model's forward).
"""

from __future__ import annotations

__all__ = ["decode_step", "LlamaStep"]


def decode_step(model, cache):
    """A LlamaStep over `cache` when the model and cache are those it handles, else None."""
    from evalkit.kvcache import is_preallocated

    config = model.config
    rope = getattr(config, "rope_parameters", None) or {"rope_type": "default"}
    plain = (type(model).__name__ == "LlamaForCausalLM" and rope.get("rope_type") == "default"
             and not getattr(config, "attention_bias", False) and not getattr(config, "mlp_bias", False)
             and getattr(config, "hidden_act", "silu") == "silu" and getattr(config, "pretraining_tp", 1) == 1)
    return LlamaStep(model, cache) if plain and is_preallocated(cache) else None


class LlamaStep:
    """The decode step of one model over one cache; build one per decode loop (cheap: references only)."""

    def __init__(self, model, cache):
        config, inner = model.config, model.model
        self.cache = cache
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.scale = self.head_dim**-0.5
        self.embed = inner.embed_tokens.weight
        self.inv_freq = inner.rotary_emb.inv_freq
        self.layers = [_Layer(layer) for layer in inner.layers[: config.num_hidden_layers]]
        self.norm, self.eps = inner.norm.weight, inner.norm.variance_epsilon
        self.lm_head = model.lm_head.weight

    def __call__(self, tokens, positions, mask):
        """Logits [rows, vocab] for one new token per row at `positions`; `mask` [rows, keys] marks the
        keys each row attends to (its own prompt and tokens, this one included)."""
        import torch
        import torch.nn.functional as F

        rows, heads, kv, dim = tokens.shape[0], self.heads, self.kv_heads, self.head_dim
        cos, sin = self._rotary(positions)
        bias = torch.zeros(mask.shape, dtype=self.embed.dtype, device=mask.device).masked_fill_(mask == 0, float("-inf"))
        bias = bias[:, None, None, :].expand(rows, kv, heads // kv, mask.shape[1]).reshape(rows * kv, heads // kv, -1)
        x = F.embedding(tokens, self.embed)
        qk = torch.empty(rows, (heads + kv) * dim, dtype=x.dtype, device=x.device)
        for layer, cached in zip(self.layers, self.cache.layers, strict=True):
            h = torch.rms_norm(x, (x.shape[-1],), layer.ln_attn, layer.eps)
            torch.mm(h, layer.q.t(), out=qk[:, : heads * dim])
            torch.mm(h, layer.k.t(), out=qk[:, heads * dim :])
            rotated = _rotate(qk.view(rows, heads + kv, dim), cos, sin)
            value = F.linear(h, layer.v).view(rows, kv, 1, dim)
            keys, values = cached.update(rotated[:, heads:, None], value)
            query = rotated[:, :heads].reshape(rows * kv, heads // kv, dim)
            scores = torch.baddbmm(bias, query, keys.flatten(0, 1).transpose(1, 2), alpha=self.scale)
            weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(scores.dtype)  # as transformers' sdpa
            attn = torch.bmm(weights, values.flatten(0, 1)).view(rows, heads * dim)
            x = torch.addmm(x, attn, layer.o.t())
            h = torch.rms_norm(x, (x.shape[-1],), layer.ln_mlp, layer.eps)
            gate = F.silu(F.linear(h, layer.gate), inplace=True).mul_(F.linear(h, layer.up))
            x = torch.addmm(x, gate, layer.down.t())
        return F.linear(torch.rms_norm(x, (x.shape[-1],), self.norm, self.eps), self.lm_head)

    def _rotary(self, positions):
        """cos and sin [rows, 1, head_dim] for the half-split rotation, sin signed for the swapped halves."""
        import torch

        freqs = positions.float()[:, None] * self.inv_freq.float()[None]
        cos, sin = freqs.cos().to(self.embed.dtype), freqs.sin().to(self.embed.dtype)
        return torch.cat([cos, cos], -1)[:, None], torch.cat([-sin, sin], -1)[:, None]


def _rotate(x, cos, sin):
    """x * cos + rotate_half(x) * sin as transformers' apply_rotary_pos_emb computes it: rotate_half is
    (-x2, x1), here (x2, x1) against a sin whose first half is negated (the same products, bit for bit)."""
    half = x.shape[-1] // 2
    swapped = x.unflatten(-1, (2, half)).flip(-2).flatten(-2)
    return x * cos + swapped * sin


class _Layer:
    """One decoder layer's weights (the model's tensors themselves)."""

    def __init__(self, layer):
        attn, mlp = layer.self_attn, layer.mlp
        self.ln_attn, self.ln_mlp = layer.input_layernorm.weight, layer.post_attention_layernorm.weight
        self.eps = layer.input_layernorm.variance_epsilon
        self.q, self.k, self.v, self.o = attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight, attn.o_proj.weight
        self.gate, self.up, self.down = mlp.gate_proj.weight, mlp.up_proj.weight, mlp.down_proj.weight
