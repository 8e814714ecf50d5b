"""Exact token entropy of given completions by a teacher-forced forward pass.

    evalkit entropy --model smollm2-135m --samples completions.jsonl --out reports/ent

For completions generated elsewhere (vLLM returns only the top-20 logprobs,
whose entropy is a truncated lower bound; docs/references.md "Token entropy"),
this recomputes the entropy evalkit's sampler records, with the same
definition (evalkit/sampling.py): per generated token, the exact
full-vocabulary entropy `H_t = -sum_v p_t(v) log p_t(v)` of
softmax(logits / temperature) in nats (temperature 1 for greedy), averaged
over the generated tokens, the stop token included when the sample stopped
(finish_reason "stop"). The stop token's entropy is that of the distribution
it was drawn from, so its id is not needed.

Each sequence is prompt ids + completion ids, left-padded like the sampler
(position ids from the attention mask), one forward pass per batch keeping
only the completion positions' logits. Agreement with the sampler's recorded
values is to float tolerance (KV-cached decoding vs one pass round
differently, about 1e-6 nats in fp32).

Limits: completions given as text are re-tokenized; a tokenizer that does
not round-trip (merges differ, special tokens dropped by decoding) gives the
entropy of a slightly different token sequence. Pass token ids when you have
them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from evalkit.errors import UsageError

__all__ = ["ForcedSample", "forced_forward", "score_positions", "teacher_entropy", "read_samples_file", "forced_from_records",
           "entropies_of_records", "records_of_run"]


@dataclass(frozen=True)
class ForcedSample:
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]  # stop token excluded
    stopped: bool  # finish_reason == "stop": one more position counts
    temperature: float  # <= 0 means greedy: entropy at temperature 1

    @property
    def num_tokens(self) -> int:
        """Generated tokens, the stop token included (the sampler's num_tokens)."""
        return len(self.completion_ids) + int(self.stopped)


def forced_forward(model, rows: Sequence[Sequence[int]], *, pad_id: int = 0, left: bool, keep: int = 0,
                   hidden: bool = False):
    """One teacher-forced forward pass over token rows padded into a batch: the one forward that
    teacher-forcing, the forward KL, multiple-choice scoring, GRPO's log-probs and distillation
    share. `left`: left padding, positions counted from each row's first token (every row ends
    at the right edge, so the last `keep` positions are each row's last); else right padding with
    the model's own positions 0..len-1. `keep`: only the last `keep` positions' logits (0: all).
    `hidden`: the decoder's last hidden states instead of logits (a caller that projects only the
    positions it needs). Gradients flow unless the caller runs it under `torch.inference_mode()`.
    Returns (output, attention mask), the mask on the model's device."""
    import torch

    device = next(model.parameters()).device
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        span = slice(width - len(row), width) if left else slice(0, len(row))
        ids[i, span] = torch.tensor(list(row), dtype=torch.long)
        mask[i, span] = 1
    ids, mask = ids.to(device), mask.to(device)
    extra = {"position_ids": (mask.cumsum(-1) - 1).clamp(min=0), "use_cache": False} if left else {}
    if hidden:
        decoder = getattr(model, model.base_model_prefix)
        return decoder(input_ids=ids, attention_mask=mask, **extra).last_hidden_state, mask
    if keep:
        extra["logits_to_keep"] = keep
    return model(input_ids=ids, attention_mask=mask, **extra).logits, mask


def _forward(model, batch: Sequence[ForcedSample], keep: int):
    """Logits (float32) of the last `keep` positions of each left-padded prompt + completion row."""
    import torch

    inputs = [list(s.prompt_ids) + list(s.completion_ids[: s.num_tokens - 1]) for s in batch]
    with torch.inference_mode():
        logits, _ = forced_forward(model, inputs, left=True, keep=keep)
        return logits.float()


def _batches(samples: Sequence[ForcedSample], max_batch_tokens: int, max_batch: int | None):
    """Index lists of samples sorted by length, each holding about `max_batch_tokens` positions
    (and at most `max_batch` sequences)."""
    order = sorted(range(len(samples)), key=lambda i: len(samples[i].prompt_ids) + samples[i].num_tokens)
    start = 0
    while start < len(order):
        end, longest = start + 1, len(samples[order[start]].prompt_ids) + samples[order[start]].num_tokens
        while end < len(order) and (max_batch is None or end - start < max_batch):
            longest = max(longest, len(samples[order[end]].prompt_ids) + samples[order[end]].num_tokens)
            if longest * (end - start + 1) > max_batch_tokens:
                break
            end += 1
        yield order[start:end]
        start = end


def score_positions(models, samples: Sequence[ForcedSample], reduce, *, max_batch_tokens: int = 4096,
                    max_batch: int | None = None, on_batch: Callable[[int], None] | None = None) -> list:
    """`reduce(sample, [logits])` for every sample, in order: one teacher-forced forward pass per
    batch and model, `logits` the float32 rows [num_tokens, vocab] that predicted the sample's
    generated tokens (divided by the sample's temperature, 1 for greedy), one per model."""
    result: list = [None] * len(samples)
    for idx in _batches(samples, max_batch_tokens, max_batch):
        batch = [samples[i] for i in idx]
        keep = max(s.num_tokens for s in batch)
        outs = [_forward(model, batch, keep) if keep else None for model in models]
        for row, i in enumerate(idx):
            s = samples[i]
            t = s.temperature if s.temperature > 0 else 1.0
            rows = [out[row, keep - s.num_tokens :] / t for out in outs] if s.num_tokens else []
            result[i] = reduce(s, rows) if s.num_tokens else None
        if on_batch:
            on_batch(len(idx))
    return result


def _mean_entropy(sample: ForcedSample, rows) -> float:
    import torch

    logp = torch.log_softmax(rows[0], dim=-1)
    return float((-(logp.exp() * logp).sum(-1)).double().sum() / sample.num_tokens)


def teacher_entropy(
    model,
    samples: Sequence[ForcedSample],
    *,
    max_batch_tokens: int = 4096,
    on_batch: Callable[[int], None] | None = None,
) -> list[float | None]:
    """Mean token entropy per sample (None for a sample with no generated token).

    Samples are batched by length so that a batch holds about
    `max_batch_tokens` positions; `on_batch(k)` is called after k samples.
    """
    return score_positions([model], samples, _mean_entropy, max_batch_tokens=max_batch_tokens, on_batch=on_batch)


def read_samples_file(path: Path) -> list[dict]:
    """Records of a JSONL of externally generated samples: prompt, completion,
    optional temperature and finish_reason; a clear UsageError otherwise."""
    from evalkit.jsonio import read_jsonl

    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such file (expected JSONL with fields prompt and completion)")
    records = []
    for number, record in read_jsonl(path):
        if not isinstance(record.get("prompt"), str) or not isinstance(record.get("completion"), str):
            raise UsageError(f"{path}:{number}: need string fields 'prompt' and 'completion'")
        if record.get("finish_reason", "stop") not in ("stop", "length"):
            raise UsageError(f"{path}:{number}: finish_reason must be 'stop' or 'length'")
        records.append(record)
    if not records:
        raise UsageError(f"{path}: no samples in the file")
    return records


def forced_from_records(
    tokenizer, records: Sequence[dict], *, raw_prompt: bool = False, temperature: float = 1.0
) -> list[ForcedSample]:
    """Tokenize prompt/completion records like the sampler does.

    The prompt is rendered with the chat template (`render_prompt`) unless
    `raw_prompt`; both parts are tokenized without added special tokens.
    A record's own `temperature` wins over the default; `finish_reason`
    defaults to "stop" (the completion ended with the stop token).
    """
    from evalkit.sampling import render_prompt

    out = []
    for r in records:
        prompt = r["prompt"] if raw_prompt else render_prompt(tokenizer, r["prompt"])
        p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        c_ids = tokenizer(r["completion"], add_special_tokens=False)["input_ids"]
        if not p_ids:
            raise UsageError("a sample has an empty prompt: nothing to condition on")
        temp = float(r.get("temperature", temperature))
        stopped = r.get("finish_reason", "stop") == "stop"
        out.append(ForcedSample(tuple(p_ids), tuple(c_ids), stopped, temp))
    return out


def entropies_of_records(model_opts, records: Sequence[dict], *, raw_prompt: bool = False,
                         temperature: float = 1.0, batch_tokens: int = 4096,
                         on_batch: Callable[[int], None] | None = None):
    """Load the model of `model_opts` (evalkit.options.ModelOptions) and teacher-force
    prompt/completion records: (mean entropy per record, generated tokens per record, the
    model's identity {name, sha256, dtype, path})."""
    from evalkit.models import identity as model_identity
    from evalkit.models import load_model, resolve_device, resolve_model

    if batch_tokens < 1:
        raise UsageError(f"--batch-tokens {batch_tokens}: need at least 1")
    dtype = model_opts.dtype
    ref = resolve_model(model_opts.model)
    model, tokenizer = load_model(ref, dtype=dtype, device=resolve_device(model_opts.device))
    forced = forced_from_records(tokenizer, records, raw_prompt=raw_prompt, temperature=temperature)
    values = teacher_entropy(model, forced, max_batch_tokens=batch_tokens, on_batch=on_batch)
    identity = {**model_identity(ref, dtype), "path": ref.path}
    return values, [f.num_tokens for f in forced], identity


def records_of_run(path: Path) -> list[dict]:
    """prompt/completion records of a passk run folder, prompts rebuilt from its task identity
    (problem_id, outcome, temperature and finish_reason kept), in samples.jsonl's order."""
    from evalkit.jsonio import read_samples
    from evalkit.records import upgrade
    from evalkit.tasks import load_task_identity

    path = Path(path)
    settings_file = path / "summary.json" if (path / "summary.json").is_file() else path / "run.json"
    try:
        settings = upgrade(json.loads(settings_file.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not an evalkit passk run folder ({exc})") from None
    try:
        problems = {p.id: p for p in load_task_identity(settings["task"]).problems}
    except (KeyError, OSError, UsageError) as exc:
        raise UsageError(f"{path}: cannot rebuild its task ({exc}); write a JSONL of prompt/completion "
                         "and pass that instead") from None
    temperature = float((settings.get("sampling") or {}).get("temperature", 1.0))
    records = []
    for r in read_samples(path / "samples.jsonl"):
        if r["problem_id"] not in problems:
            raise UsageError(f"{path}: problem {r['problem_id']} is not in the rebuilt task")
        records.append({"prompt": problems[r["problem_id"]].prompt, "completion": r.get("completion") or "",
                        "temperature": temperature, "finish_reason": r.get("finish_reason", "stop"),
                        "problem_id": r["problem_id"], "outcome": r.get("outcome")})
    if not records:
        raise UsageError(f"{path}: the run has no samples")
    return records
