"""The sampler `hf-1`, frozen: evalkit/sampling.py's `sample_chunk` as it was before issue 26.

    from sampler_hf1 import sample_chunk_hf1      # benchmarks/ on sys.path, as the benchmarks run
    python benchmarks/sampler_hf1.py               # rewrite tests/data/sampler_hf1_arith24x32.json

Kept only to measure the current sampler against it side by side (bench_sampling.py,
profile_sampler.py) and to compare their pass@k (tests/test_sampling.py): the KV cache grows by
concatenation (transformers' DynamicCache), every finished row is pruned from the batch at once
(`batch_select_indices`, a copy of the whole cache), the draw and the seeds are today's. Its
samples are those of every run whose run.json says `"sampler": "hf-1"` (or says nothing).
Nothing in evalkit imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from evalkit.sampling import SamplingConfig, sample_seed

__all__ = ["sample_chunk_hf1", "draw_and_grade", "REFERENCE"]

SHARED_PREFIX_MIN = 16


def sample_chunk_hf1(model, tokenizer, prompts: Sequence[str], problem_ids: Sequence[str], cfg: SamplingConfig, *,
                     stop_ids: Sequence[int], on_token: Callable[[int], None] | None = None) -> list:
    """cfg.n samples for each rendered prompt, exactly as sampler hf-1 drew them."""
    import torch

    from evalkit.sampling import Sample

    device = next(model.parameters()).device
    n, steps = cfg.n, cfg.max_new_tokens
    rows = [(i, j) for i in range(len(prompts)) for j in range(n)]
    seeds = [sample_seed(cfg.seed, problem_ids[i], j) for i, j in rows]
    uniforms = torch.stack([torch.rand(steps, generator=torch.Generator().manual_seed(s), dtype=torch.float64)
                            for s in seeds]).to(device)
    with torch.inference_mode():
        out, mask = _prefill(model, tokenizer, prompts, device)
        cache = out.cache
        cache.batch_repeat_interleave(n)
        logits = out.logits[:, -1].repeat_interleave(n, dim=0)
        mask = mask.repeat_interleave(n, dim=0)
        positions = mask.sum(-1, keepdim=True)
        live = torch.arange(len(rows), device=device)
        tokens: list[list[int]] = [[] for _ in rows]
        entropy_sum = torch.zeros(len(rows), dtype=torch.float64, device=device)
        finish = ["length"] * len(rows)
        stop = torch.tensor(sorted(stop_ids), device=device)
        for t in range(steps):
            next_tok, ent = _draw(logits.float(), uniforms[live, t], cfg, record=cfg.record_entropy)
            if ent is not None:
                entropy_sum[live] += ent.double()
            for r, tok in zip(live.tolist(), next_tok.tolist(), strict=True):
                tokens[r].append(tok)
            done = torch.isin(next_tok, stop)
            for r in live[done].tolist():
                finish[r] = "stop"
            if on_token is not None:
                on_token(len(live))
            keep = ~done
            if t == steps - 1 or not keep.any():
                break
            if not keep.all():
                cache.batch_select_indices(keep.nonzero().squeeze(-1))
                live, mask, positions, next_tok = live[keep], mask[keep], positions[keep], next_tok[keep]
            mask = torch.cat([mask, mask.new_ones(len(live), 1)], dim=-1)
            out = model(input_ids=next_tok[:, None], attention_mask=mask, position_ids=positions, cache=cache,
                        use_cache=True)
            positions = positions + 1
            logits = out.logits[:, -1]
    samples = []
    for r, (i, j) in enumerate(rows):
        ids = tokens[r]
        num = len(ids)
        if finish[r] == "stop":
            ids = ids[:-1]
        mean_h = float(entropy_sum[r] / num) if cfg.record_entropy and num else None
        samples.append(Sample(i, j, tuple(ids), num, finish[r], mean_h, seeds[r]))
    return samples


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


def _draw(logits, u, cfg: SamplingConfig, *, record: bool):
    import torch

    if cfg.temperature <= 0 and not record:
        return logits.argmax(-1), None
    temperature = cfg.temperature if cfg.temperature > 0 else 1.0
    logp = torch.log_softmax(logits / temperature, dim=-1)
    probs = logp.exp()
    ent = -(probs * logp).sum(-1) if record else None
    if cfg.temperature <= 0:
        return logits.argmax(-1), ent
    if cfg.top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        cdf = sorted_p.cumsum(-1)
        sorted_p = sorted_p.masked_fill(cdf - sorted_p > cfg.top_p, 0.0)
        cdf = sorted_p.cumsum(-1)
        idx = torch.searchsorted(cdf.double(), (u * cdf[:, -1].double())[:, None])
        idx = idx.clamp(max=logits.shape[-1] - 1)
        return order.gather(-1, idx).squeeze(-1), ent
    cdf = probs.cumsum(-1).double()
    idx = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None]).squeeze(-1)
    return idx.clamp(max=logits.shape[-1] - 1), ent


# pass@1 reference for tests/test_sampling.py: hf-1's completions and grades on the built-in model,
# 24 arith problems (size 24, seed 0) x 32 samples, T = 1, 16 new tokens, sampling seed 0, chunks of 8.
REFERENCE = Path(__file__).parents[1] / "tests" / "data" / "sampler_hf1_arith24x32.json"
PROBLEMS, SAMPLES, TOKENS, CHUNK = 24, 32, 16, 8


def draw_and_grade(sample_fn) -> dict:
    """Every (problem, sample)'s completion and whether it is correct, drawn by `sample_fn`
    (sample_chunk_hf1, or evalkit.sampling.sample_chunk) at REFERENCE's settings."""
    from evalkit.grading import Grader
    from evalkit.models import load_model, resolve_model
    from evalkit.sampling import SamplingConfig, decode_completion, render_prompt, stop_token_ids
    from evalkit.tasks import load_task

    model, tok = load_model(resolve_model("smollm2-135m"))
    task = load_task("arith", size=PROBLEMS, seed=0)
    cfg = SamplingConfig(n=SAMPLES, max_new_tokens=TOKENS, temperature=1.0, seed=0, record_entropy=False)
    stop = stop_token_ids(model, tok)
    drawn = []
    for start in range(0, PROBLEMS, CHUNK):
        part = task.problems[start:start + CHUNK]
        rendered = [render_prompt(tok, p.prompt) for p in part]
        drawn += [(part[s.problem_index], s) for s in sample_fn(model, tok, rendered, [p.id for p in part], cfg,
                                                                  stop_ids=stop)]
    texts = [decode_completion(tok, s.token_ids) for _, s in drawn]
    with Grader(task.spec, workers=1) as grader:
        grades = grader.grade([(text, p) for text, (p, _) in zip(texts, drawn, strict=True)])
    return {"settings": {"problems": PROBLEMS, "samples": SAMPLES, "max_new_tokens": TOKENS, "chunk": CHUNK},
            "rows": [{"problem_id": p.id, "sample_index": s.sample_index, "completion": text,
                      "correct": g.outcome == "correct"} for (p, s), text, g in zip(drawn, texts, grades, strict=True)]}


if __name__ == "__main__":
    import json

    REFERENCE.write_text(json.dumps(draw_and_grade(sample_chunk_hf1), indent=0) + "\n", encoding="utf-8")
    print(f"wrote {REFERENCE}")
