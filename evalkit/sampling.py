"""Batched sampling with the Hugging Face backend, deterministic per sample.

Each call takes a fixed chunk of problems; its rows (problem i, sample j) are split into lanes
(`lane_count`: one per CPU thread, each of at least LANE_ROWS rows; one lane off the CPU). Each
lane runs in its own thread with one intra-op thread: its prompts are left-padded and run through
the model once (prefill), the key/value cache is copied to the lane's rows in preallocated
buffers (evalkit.kvcache: `[rows, heads, prompt + new tokens, head_dim]` per layer, each step
written in place), and the rows decode together, a Llama model by evalkit.decode's step (about 20
ops per layer), any other by its own forward. A row that finishes stays in its batch slot, no
longer drawn for; when fewer than COMPACT_BELOW of the slots are live the batch is compacted (one
copy). When the lane's prompts share a long token prefix (a chat template's system prompt: 27 of
~47 tokens for the default model and task), that prefix is run once and its cache shared by every
prompt; only the rest is prefilled per prompt, padded on its left (between prefix and rest,
masked). Each token keeps its position (prefix 0..P-1, then the prompt's own tokens), so the
computation is the same up to float rounding.

Why lanes (issue 46): with torch's intra-op threads every op of a step (7165 torch calls per step
in transformers' forward) ends at an OpenMP barrier that waits for the slowest thread; on a
shared machine a thread that is descheduled holds the other at every barrier, and sampler hf-3
fell to a tenth of its idle rate where other work kept the load at 5 to 8 on 2 cores. Lanes share
nothing while they decode: a busy machine slows each by its share of a core, as for any single
thread. The lanes are a function of the chunk and the thread count only, so which of them run at
the same time (all, or one after another) never changes a bit of the samples.

Determinism: sample j of problem i draws its uniforms from its own generator
seeded by `sample_seed(seed, problem_id, j)` (a hash, so seeds never overlap
across problems, unlike `seed + j` schemes), and tokens are drawn by inverse
CDF from the exact (full-vocabulary) distribution. Float rounding still
depends on what shares the batch, so callers must keep chunks and the thread count (the lanes)
fixed: the same chunk on the same thread count gives bitwise the same samples.

The sampler's version (SAMPLER_VERSION) names what shapes the samples' bits
beyond the settings: the lanes, the decode step, the cache layout, when rows leave the batch, the
draw. Every passk run records it (`sampler` in run.json) and a run drawn by another version is
not resumed. hf-1 (evalkit up to issue 26): a cache grown by concatenation, every finished row
pruned at once (frozen in benchmarks/sampler_hf1.py). hf-2 (a few hours of issue 26): the
preallocated cache, finished rows kept until fewer than 0.75 of the slots were live. hf-3 (issue
26 to 46, frozen in benchmarks/sampler_hf3.py): one batch of every row on torch's intra-op
threads, transformers' forward, the preallocated cache compacted (one copy of the filled
positions) whenever a row finishes: `python benchmarks/bench_sampling.py --compact
0.5,0.75,0.9,1` measured COMPACT_BELOW = 1 fastest on 2 cores (338 tok/s against 309 at 0.5 and
307 at 0.9), and it stays so. hf-4: hf-3's cache and draw in lanes of single-threaded rows, with
evalkit.decode's step for Llama models.

Every sampling parameter is explicit: temperature, top_p and max_new_tokens
come from the caller; top_k is never applied (the model's generation_config,
which often sets `top_k=50`, is ignored). Temperature 0 means greedy.

Entropy: per token `H_t = -sum_v p_t(v) log p_t(v)` in nats over the full
vocabulary of softmax(logits / temperature), before top-p truncation (Cui et
al. 2025; TRL and verl compute it the same way), averaged over the generated
tokens of a sample, the stop token included. Greedy rows use temperature 1.

Limits: the buffers hold every row at full length from the start (memory of
a cache whose rows all run to max_new_tokens); models whose cache has
sliding-window or linear-attention layers keep transformers' growing cache
(evalkit.kvcache). A chunk of fewer than 2 x LANE_ROWS rows is one lane on every thread (the
barriers again: on a busy machine a larger --batch-size keeps two lanes). Lanes finish at their
own pace: the first to finish leaves its core idle until the other does. Each lane streams every
weight once per step (lanes do not split the weights between them as intra-op threads do).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import groupby

from evalkit.lanes import Cancelled, lane_count, run_lanes, serialized

__all__ = [
    "SamplingConfig", "Sample", "derive_seed", "sample_seed", "render_prompt", "sample_chunk", "sample_texts",
    "sample_problems",
    "stop_token_ids", "eos_ids", "decode_completion", "SAMPLER_VERSION", "lane_count",
    "run_lanes",
]

SAMPLER_VERSION = "hf-4"  # bump whenever a change can move a sample's bits at the same settings


@dataclass(frozen=True)
class SamplingConfig:
    n: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    seed: int = 0
    record_entropy: bool = True

    def effective(self) -> dict:
        """The settings that shaped the samples, as recorded in summaries."""
        return {
            "n": self.n,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": 0,
            "max_new_tokens": self.max_new_tokens,
            "seed": self.seed,
            "do_sample": self.temperature > 0,
            "repetition_penalty": 1.0,
            "entropy": "exact, full vocabulary, softmax(logits / temperature), nats",
        }


@dataclass(frozen=True)
class Sample:
    problem_index: int  # position of the problem in the chunk
    sample_index: int
    token_ids: tuple[int, ...]  # generated tokens, stop token excluded
    num_tokens: int  # generated tokens, stop token included
    finish_reason: str  # "stop" or "length"
    mean_entropy: float | None
    seed: int


def derive_seed(*parts) -> int:
    """A 63-bit seed from any parts, e.g. `(run_seed, "es", step, member)`, by hashing: seeds of
    different parts never overlap (unlike `seed + j` schemes)."""
    key = "\x1f".join(map(str, parts)).encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") >> 1


def sample_seed(seed: int, problem_id: str, sample_index: int) -> int:
    """The seed of one (run seed, problem, sample index)."""
    return derive_seed(seed, problem_id, sample_index)


def render_prompt(tokenizer, user_text: str) -> str:
    """The chat template when the tokenizer has one, else the bare text."""
    if getattr(tokenizer, "chat_template", None):
        messages = [{"role": "user", "content": user_text}]
        return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return user_text


CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length")


def context_length(ref) -> int | None:
    """The positions a checkpoint's model can attend over (its config.json), or None if unknown."""
    import json
    from pathlib import Path

    folder = Path(getattr(ref, "config_dir", None) or ref.path)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    config = config.get("text_config", config) if isinstance(config, dict) else {}
    return next((int(config[k]) for k in CONTEXT_KEYS if isinstance(config.get(k), int)), None)


def check_context(tokenizer, problems, max_new_tokens: int, context: int | None) -> None:
    """Refuse, before any sampling, a problem whose rendered prompt plus `max_new_tokens` does
    not fit the model's context: one line naming it and the lengths."""
    if not context:
        return
    for problem in problems:
        length = len(tokenizer(render_prompt(tokenizer, problem.prompt), add_special_tokens=False)["input_ids"])
        if length + max_new_tokens > context:
            from evalkit.errors import UsageError

            raise UsageError(f"problem {problem.id!r}: its prompt is {length} tokens, and with --max-new-tokens "
                             f"{max_new_tokens} it exceeds the model's context of {context} positions; lower "
                             "--max-new-tokens or leave the problem out")


def sample_texts(model, tokenizer, texts: Sequence[str], ids: Sequence[str], cfg: SamplingConfig, *,
                 stop_ids: Sequence[int], rendered: bool = False) -> list[Sample]:
    """cfg.n samples of each user text, rendered with the chat template first (unless
    `rendered`); `ids` seed them (sample j of text i draws from (cfg.seed, ids[i], j))."""
    prompts = list(texts) if rendered else [render_prompt(tokenizer, t) for t in texts]
    return sample_chunk(model, tokenizer, prompts, list(ids), cfg, stop_ids=stop_ids)


def sample_problems(model, tokenizer, problems, cfg: SamplingConfig, *, stop_ids: Sequence[int]) -> list[Sample]:
    """cfg.n samples of each problem's prompt (rendered), seeded by the problem's id."""
    return sample_texts(model, tokenizer, [p.prompt for p in problems], [p.id for p in problems], cfg,
                        stop_ids=stop_ids)


def decode_completion(tokenizer, token_ids) -> str:
    """A completion's text, decoded one way for evaluation, training reward and forgetting.

    Special tokens stay in the text (the stop token is already cut), so the text re-tokenizes
    to the generated tokens for teacher-forced checks; scorers read it through
    `evalkit.tasks.answer_text`, which drops them.
    """
    return tokenizer.decode(list(token_ids), skip_special_tokens=False)


def eos_ids(generation_eos, tokenizer) -> list[int]:
    """Stop ids: a generation config's `eos_token_id` (an int, a list or None) plus the
    tokenizer's eos."""
    ids = [generation_eos] if isinstance(generation_eos, int) else list(generation_eos or [])
    if tokenizer.eos_token_id is not None:
        ids.append(tokenizer.eos_token_id)
    return sorted(set(ids))


def stop_token_ids(model, tokenizer) -> list[int]:
    return eos_ids(model.generation_config.eos_token_id, tokenizer)


def sample_chunk(
    model,
    tokenizer,
    prompts: Sequence[str],
    problem_ids: Sequence[str],
    cfg: SamplingConfig,
    *,
    stop_ids: Sequence[int],
    on_token: Callable[[int], None] | None = None,
) -> list[Sample]:
    """Draw cfg.n samples for each rendered prompt; see the module docstring. `on_token(rows)`
    is called once per step of each lane with the number of rows that drew a token."""
    import threading

    import torch

    device = next(model.parameters()).device
    rows = [(i, j) for i in range(len(prompts)) for j in range(cfg.n)]
    seeds = [sample_seed(cfg.seed, problem_ids[i], j) for i, j in rows]
    uniforms = _uniforms(seeds, cfg.max_new_tokens, device)
    threads = torch.get_num_threads() if device.type == "cpu" else 0
    lanes = lane_count(len(rows), threads)
    bounds = [len(rows) * k // lanes for k in range(lanes + 1)]
    draw = _Draw(cfg, tuple(sorted(stop_ids)), serialized(on_token) if lanes > 1 else on_token, threading.Event())
    jobs = [partial(_lane, model, tokenizer, prompts, rows[a:b], uniforms[a:b], draw)
            for a, b in zip(bounds, bounds[1:], strict=False)]
    parts = run_lanes(jobs, threads // lanes if threads else 0, draw.cancel)
    drawn = [torch.cat(column) for column in zip(*parts, strict=True)]
    return _samples(rows, *drawn, seeds, cfg)


@dataclass(frozen=True)
class _Draw:
    """What the decode loop draws with: the settings, the stop ids, the per-step callback, the lanes'
    cancel flag."""

    cfg: SamplingConfig
    stop_ids: tuple[int, ...]
    on_token: Callable[[int], None] | None
    cancel: object = None


def _lane(model, tokenizer, prompts: Sequence[str], rows: Sequence[tuple[int, int]], uniforms, draw: _Draw):
    """One lane: prefill the prompts of `rows` (grouped by prompt, in order), give each row its prompt's
    cache, decode them together; returns (tokens [rows, steps], lengths, stopped, entropy sums)."""
    import torch

    from evalkit.kvcache import preallocate

    device = uniforms.device
    used = [i for i, _ in groupby(rows, key=lambda row: row[0])]
    counts = [len(list(group)) for _, group in groupby(rows, key=lambda row: row[0])]
    out, mask = _prefill(model, tokenizer, [prompts[i] for i in used], device)
    repeats = torch.tensor(counts, device=device)
    cache = preallocate(out.cache, counts[0] if len(set(counts)) == 1 else counts,
                        mask.shape[1] + uniforms.shape[1])
    logits = out.logits[:, -1].repeat_interleave(repeats, dim=0)
    return _decode(model, cache, logits, mask.repeat_interleave(repeats, dim=0), uniforms, draw)


COMPACT_BELOW = 1.0  # live fraction under which finished rows are dropped: 1.0 = at every finish (measured below)


def _decode(model, cache, logits, mask, uniforms, draw: _Draw):
    """The decode loop over every row at once; returns (tokens [rows, steps], lengths, stopped,
    entropy sums). A finished row stays in the batch (its slot keeps computing, its draws are
    skipped) until fewer than COMPACT_BELOW of the slots are live; then the batch is compacted,
    one copy of the cache. The attention mask, the cache and the tokens live in buffers written
    in place. Which rows share the batch at each step is a function of the samples alone, so a
    chunk still gives bitwise the same samples."""
    import torch

    from evalkit.decode import decode_step

    total, steps = uniforms.shape
    device, width, cfg = logits.device, mask.shape[1], draw.cfg
    step = decode_step(model, cache)
    masks = torch.cat([mask, mask.new_zeros(total, steps)], dim=-1)
    positions = mask.sum(-1, keepdim=True)
    tokens = torch.zeros(total, steps, dtype=torch.long, device=device)
    lengths = torch.full((total,), steps, dtype=torch.long, device=device)
    stopped = torch.zeros(total, dtype=torch.bool, device=device)
    entropy_sum = torch.zeros(total, dtype=torch.float64, device=device)
    stop = torch.tensor(draw.stop_ids, device=device)
    slot_rows = torch.arange(total, device=device)  # the sample in each batch slot
    live = torch.arange(total, device=device)  # the slots still drawing
    inputs = torch.zeros(total, 1, dtype=torch.long, device=device)
    for t in range(steps):
        rows = slot_rows[live] if len(live) < len(slot_rows) else slot_rows
        next_tok, ent = _draw(logits[live] if len(live) < len(slot_rows) else logits, uniforms[rows, t], cfg,
                              record=cfg.record_entropy)
        tokens[rows, t] = next_tok
        if ent is not None:
            entropy_sum[rows] += ent.double()
        if draw.on_token is not None:
            draw.on_token(len(rows))
        done = torch.isin(next_tok, stop)
        if done.any():
            lengths[rows[done]] = t + 1
            stopped[rows[done]] = True
            live, next_tok = live[~done], next_tok[~done]
        if t == steps - 1 or len(live) == 0:
            break
        if len(live) < COMPACT_BELOW * len(slot_rows):
            cache.batch_select_indices(live)
            slot_rows, masks, positions, inputs = slot_rows[live], masks[live], positions[live], inputs[live]
            live = torch.arange(len(live), device=device)
        if draw.cancel is not None and draw.cancel.is_set():
            raise Cancelled
        inputs[live, 0] = next_tok
        masks[:, width + t] = 1
        if step is not None:
            logits = step(inputs[:, 0], positions[:, 0], masks[:, : width + t + 1])
        else:
            logits = model(input_ids=inputs, attention_mask=masks[:, : width + t + 1], position_ids=positions,
                           cache=cache, use_cache=True).logits[:, -1]
        positions += 1
    return tokens, lengths, stopped, entropy_sum


def _uniforms(seeds: Sequence[int], steps: int, device):
    """One row of `steps` float64 uniforms per sample, each from the sample's own generator."""
    import torch

    rows = [torch.rand(steps, generator=torch.Generator().manual_seed(s), dtype=torch.float64) for s in seeds]
    return torch.stack(rows).to(device)


def _samples(rows, tokens, lengths, stopped, entropy_sum, seeds, cfg: SamplingConfig) -> list[Sample]:
    """The Sample records: the stop token is counted in num_tokens but not kept in token_ids."""
    samples = []
    for r, ((i, j), ids, num, stop) in enumerate(zip(rows, tokens.tolist(), lengths.tolist(), stopped.tolist(),
                                                      strict=True)):
        kept = ids[: num - 1] if stop else ids[:num]
        mean_h = float(entropy_sum[r] / num) if cfg.record_entropy and num else None
        samples.append(Sample(i, j, tuple(kept), num, "stop" if stop else "length", mean_h, seeds[r]))
    return samples


SHARED_PREFIX_MIN = 16  # tokens: a shorter common prefix is prefilled with the rest


def _prefill(model, tokenizer, prompts: Sequence[str], device):
    """Forward the prompts once; returns (output with `.cache` and last `.logits`, attention
    mask [batch, cache length]). A common token prefix of at least SHARED_PREFIX_MIN tokens
    is run once (batch 1) and its cache repeated; each prompt's rest is left-padded."""
    import torch

    ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    shared = 0
    shortest = min((len(x) for x in ids), default=0)
    while shared < shortest - 1 and all(x[shared] == ids[0][shared] for x in ids):
        shared += 1  # every prompt keeps at least one token of its own
    if len(ids) < 2 or shared < SHARED_PREFIX_MIN:
        enc = tokenizer(list(prompts), return_tensors="pt", padding=True, add_special_tokens=False)
        mask = enc["attention_mask"].to(device)
        out = model(input_ids=enc["input_ids"].to(device), attention_mask=mask,
                    position_ids=(mask.cumsum(-1) - 1).clamp(min=0), use_cache=True,
                    logits_to_keep=1)
        return out, mask
    prefix = torch.tensor([ids[0][:shared]], device=device)
    head = model(input_ids=prefix, position_ids=torch.arange(shared, device=device)[None],
                 use_cache=True, logits_to_keep=1)
    cache = head.cache
    cache.batch_repeat_interleave(len(ids))
    rests = [x[shared:] for x in ids]
    width = max(len(r) for r in rests)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    rest_ids = torch.tensor([[pad] * (width - len(r)) + r for r in rests], device=device)
    rest_mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rests], device=device)
    mask = torch.cat([rest_mask.new_ones(len(ids), shared), rest_mask], dim=-1)
    out = model(input_ids=rest_ids, attention_mask=mask,
                position_ids=(shared + rest_mask.cumsum(-1) - 1).clamp(min=shared), cache=cache,
                use_cache=True, logits_to_keep=1)
    return out, mask


def _draw(logits, u, cfg: SamplingConfig, *, record: bool):
    """Next token per row by inverse CDF on uniforms u; entropy when asked.

    The token is the first whose cumulative probability (float32 cumsum) reaches `u * total` in
    float64; it is found in the float32 CDF against the smallest float32 at or above that target,
    which selects the same token without a float64 copy of the CDF."""
    import torch

    logits = logits.float()
    if cfg.temperature <= 0 and not record:
        return logits.argmax(-1), None  # greedy: no distribution needed
    temperature = cfg.temperature if cfg.temperature > 0 else 1.0
    logp = torch.log_softmax(logits / temperature if temperature != 1.0 else logits, dim=-1)
    probs = logp.exp()
    ent = -(probs * logp).sum(-1) if record else None
    if cfg.temperature <= 0:
        return logits.argmax(-1), ent
    order = None
    if cfg.top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        cdf = sorted_p.cumsum(-1)
        probs = sorted_p.masked_fill(cdf - sorted_p > cfg.top_p, 0.0)  # keep the nucleus
    cdf = probs.cumsum(-1)
    idx = torch.searchsorted(cdf, _float32_at_or_above(u * cdf[:, -1].double())[:, None])
    idx = idx.clamp(max=logits.shape[-1] - 1)
    return (order.gather(-1, idx) if order is not None else idx).squeeze(-1), ent


def _float32_at_or_above(x):
    """The smallest float32 >= each float64 in `x`: a float32 c satisfies c >= x exactly when c >= it."""
    import torch

    down = x.float()
    return torch.where(down.double() < x, torch.nextafter(down, torch.full_like(down, float("inf"))), down)
