"""The sampler `hf-3`, frozen: evalkit/sampling.py's `sample_chunk` as it was from issue 26 to issue 46.

    from sampler_hf3 import sample_chunk_hf3      # benchmarks/ on sys.path, as the benchmarks run
    python benchmarks/sampler_hf3.py               # rewrite tests/data/sampler_hf3_arith24x32.json

Kept to measure the current sampler against it side by side (bench_sampling.py,
bench_sampling_peers.py) and to compare their pass@k (tests/test_sampling.py): one batch of every
row of the chunk, torch's intra-op threads (`cpu_threads`) splitting each op, transformers' Llama
forward at every decode step, a preallocated KV cache (evalkit.kvcache) compacted whenever a row
finishes; the draw and the seeds are today's. Its samples are those of every run whose run.json
says `"sampler": "hf-3"`. Nothing in evalkit imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from evalkit.sampling import SamplingConfig, sample_seed

__all__ = ["sample_chunk_hf3", "REFERENCE"]

SHARED_PREFIX_MIN = 16


def sample_chunk_hf3(model, tokenizer, prompts: Sequence[str], problem_ids: Sequence[str], cfg: SamplingConfig, *,
                     stop_ids: Sequence[int], on_token: Callable[[int], None] | None = None) -> list:
    """cfg.n samples for each rendered prompt, exactly as sampler hf-3 drew them."""
    import torch

    from evalkit.kvcache import preallocate
    from evalkit.sampling import _draw, _samples

    device = next(model.parameters()).device
    rows = [(i, j) for i in range(len(prompts)) for j in range(cfg.n)]
    seeds = [sample_seed(cfg.seed, problem_ids[i], j) for i, j in rows]
    uniforms = torch.stack([torch.rand(cfg.max_new_tokens, generator=torch.Generator().manual_seed(s),
                                       dtype=torch.float64) for s in seeds]).to(device)
    with torch.inference_mode():
        out, mask = _prefill(model, tokenizer, prompts, device)
        cache = preallocate(out.cache, cfg.n, mask.shape[1] + cfg.max_new_tokens)
        logits = out.logits[:, -1].repeat_interleave(cfg.n, dim=0)
        drawn = _decode(model, cache, logits, mask.repeat_interleave(cfg.n, dim=0), uniforms, cfg,
                        tuple(sorted(stop_ids)), on_token, _draw)
    return _samples(rows, *drawn, seeds, cfg)


def _decode(model, cache, logits, mask, uniforms, cfg, stop_ids, on_token, draw):
    import torch

    total, steps = uniforms.shape
    device, width = logits.device, mask.shape[1]
    masks = torch.cat([mask, mask.new_zeros(total, steps)], dim=-1)
    positions = mask.sum(-1, keepdim=True)
    tokens = torch.zeros(total, steps, dtype=torch.long, device=device)
    lengths = torch.full((total,), steps, dtype=torch.long, device=device)
    stopped = torch.zeros(total, dtype=torch.bool, device=device)
    entropy_sum = torch.zeros(total, dtype=torch.float64, device=device)
    stop = torch.tensor(stop_ids, device=device)
    slot_rows = torch.arange(total, device=device)
    live = torch.arange(total, device=device)
    inputs = torch.zeros(total, 1, dtype=torch.long, device=device)
    for t in range(steps):
        rows = slot_rows[live] if len(live) < len(slot_rows) else slot_rows
        next_tok, ent = draw(logits[live] if len(live) < len(slot_rows) else logits, uniforms[rows, t], cfg,
                             record=cfg.record_entropy)
        tokens[rows, t] = next_tok
        if ent is not None:
            entropy_sum[rows] += ent.double()
        if on_token is not None:
            on_token(len(rows))
        done = torch.isin(next_tok, stop)
        if done.any():
            lengths[rows[done]] = t + 1
            stopped[rows[done]] = True
            live, next_tok = live[~done], next_tok[~done]
        if t == steps - 1 or len(live) == 0:
            break
        if len(live) < len(slot_rows):  # COMPACT_BELOW = 1: compact at every finish
            cache.batch_select_indices(live)
            slot_rows, masks, positions, inputs = slot_rows[live], masks[live], positions[live], inputs[live]
            live = torch.arange(len(live), device=device)
        inputs[live, 0] = next_tok
        masks[:, width + t] = 1
        logits = model(input_ids=inputs, attention_mask=masks[:, : width + t + 1], position_ids=positions,
                       cache=cache, use_cache=True).logits[:, -1]
        positions += 1
    return tokens, lengths, stopped, entropy_sum


def _prefill(model, tokenizer, prompts: Sequence[str], device):
    import torch

    ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    shared = 0
    shortest = min((len(x) for x in ids), default=0)
    while shared < shortest - 1 and all(x[shared] == ids[0][shared] for x in ids):
        shared += 1
    if len(ids) < 2 or shared < SHARED_PREFIX_MIN:
        enc = tokenizer(list(prompts), return_tensors="pt", padding=True, add_special_tokens=False)
        mask = enc["attention_mask"].to(device)
        out = model(input_ids=enc["input_ids"].to(device), attention_mask=mask,
                    position_ids=(mask.cumsum(-1) - 1).clamp(min=0), use_cache=True, logits_to_keep=1)
        return out, mask
    prefix = torch.tensor([ids[0][:shared]], device=device)
    head = model(input_ids=prefix, position_ids=torch.arange(shared, device=device)[None], use_cache=True,
                 logits_to_keep=1)
    cache = head.cache
    cache.batch_repeat_interleave(len(ids))
    rests = [x[shared:] for x in ids]
    width = max(len(r) for r in rests)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    rest_ids = torch.tensor([[pad] * (width - len(r)) + r for r in rests], device=device)
    rest_mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rests], device=device)
    mask = torch.cat([rest_mask.new_ones(len(ids), shared), rest_mask], dim=-1)
    out = model(input_ids=rest_ids, attention_mask=mask,
                position_ids=(shared + rest_mask.cumsum(-1) - 1).clamp(min=shared), cache=cache, use_cache=True,
                logits_to_keep=1)
    return out, mask


# pass@1 reference for tests/test_sampling.py: hf-3's completions and grades on the built-in model at the
# settings of sampler_hf1.REFERENCE (24 arith problems x 32 samples, T = 1, 16 new tokens, seed 0, chunks of 8),
# drawn with 2 CPU threads.
REFERENCE = Path(__file__).parents[1] / "tests" / "data" / "sampler_hf3_arith24x32.json"


if __name__ == "__main__":
    import json

    import torch
    from sampler_hf1 import draw_and_grade

    torch.set_num_threads(2)
    REFERENCE.write_text(json.dumps(draw_and_grade(sample_chunk_hf3), indent=0) + "\n", encoding="utf-8")
    print(f"wrote {REFERENCE}")
