"""Forward KL from the base policy to the trained one on the training task's prompts.

    result = forward_kl(base, model, tokenizer, prompts, ids, ForgettingOptions(kl_samples=1, kl_max_new_tokens=64))

Direction and estimator (RL's Razor, arXiv 2509.04259: forgetting tracks
`E_{x ~ new task}[KL(pi_0 || pi)]`): for each prompt x, completions y are
sampled from the *base* at temperature 1 (no top-p, no top-k), up to
`max_new_tokens`; both models are teacher-forced on (x, y), and at every
generated position t, the stop token included, the KL is computed exactly
over the full vocabulary:
    KL_t = sum_v pi_0(v | x, y_<t) [log pi_0(v | x, y_<t) - log pi(v | x, y_<t)].
The sequence KL estimate is `sum_t KL_t` (nats per completion): by the
chain rule its expectation under y ~ pi_0 is exactly KL(pi_0(.|x) || pi(.|x))
over completions (truncated at max_new_tokens), with lower variance than the
log-ratio of sampled tokens. Also reported: the per-token mean `mean_t KL_t`.
Both are averaged over samples per prompt, then over prompts; the standard
error is over prompts (`std(ddof=1) / sqrt(P)`). Beside the per-completion mean, the KL per
token pooled over every generated position, `sum_t KL_t / #positions` over all completions
(`kl_per_token_pooled`: long completions weigh by their length), with the per-prompt sums and
position counts it is made of, so it can be bootstrapped over prompts as a ratio.
Refused (not estimated) when the two tokenizers differ: the per-token
distributions would not live on the same space.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["DIRECTION", "ESTIMATOR", "token_kls", "forward_kl"]

DIRECTION = "KL(pi_base || pi_model), forward, nats"
ESTIMATOR = (
    "completions sampled from the base at temperature 1; exact full-vocabulary KL at every "
    "generated position (stop token included) under teacher forcing; sequence KL = sum over "
    "positions, averaged over samples then prompts; standard error over prompts"
)


def _window_logits(model, rows, pad_id: int, keep: int):
    """The last `keep` positions' logits of each left-padded (prompt + completion) row."""
    import torch

    from evalkit.forced import forced_forward

    with torch.inference_mode():
        logits, _ = forced_forward(model, [list(p) + list(c) for p, c, _ in rows], pad_id=pad_id, left=True, keep=keep)
    return logits


def token_kls(base, model, rows: Sequence[tuple], *, pad_id: int, batch_size: int = 8) -> list[np.ndarray]:
    """Exact per-position KL(pi_base || pi_model) along each completion.

    `rows` are (prompt_ids, completion_ids, stopped): completion_ids exclude
    the stop token; `stopped` adds the position where the stop was drawn.
    Returns one float64 array per row (length len(completion) + stopped).
    """
    import torch

    result: list[np.ndarray] = []
    for start in range(0, len(rows), batch_size):
        part = rows[start : start + batch_size]
        keep = max(len(c) for _, c, _ in part) + 1
        lb = _window_logits(base, part, pad_id, keep)
        lm = _window_logits(model, part, pad_id, keep)
        for r, (_, completion, stopped) in enumerate(part):
            m = len(completion)
            sl = slice(keep - 1 - m, keep - 1 + int(bool(stopped)))
            lp = torch.log_softmax(lb[r, sl].double(), dim=-1)
            lq = torch.log_softmax(lm[r, sl].double(), dim=-1)
            result.append((lp.exp() * (lp - lq)).sum(-1).clamp(min=0.0).cpu().numpy())
    return result


def _mean_se(values: list[float]) -> tuple[float, float | None]:
    arr = np.asarray(values, dtype=np.float64)
    se = float(arr.std(ddof=1) / np.sqrt(arr.size)) if arr.size > 1 else None
    return float(arr.mean()), se


def forward_kl(base, model, tokenizer, prompts: Sequence[str], ids: Sequence[str], opts) -> dict:
    """Estimate E_x[KL(pi_base || pi_model)] on `prompts` (user texts); see the module doc. `opts`
    (evalkit forgetting's options): kl_samples base completions per prompt, kl_max_new_tokens,
    seed, batch_size."""
    from evalkit.sampling import SamplingConfig, render_prompt, sample_texts, stop_token_ids

    samples, max_new_tokens, seed, batch_size = opts.kl_samples, opts.kl_max_new_tokens, opts.seed, opts.batch_size
    cfg = SamplingConfig(n=samples, temperature=1.0, top_p=1.0, max_new_tokens=max_new_tokens,
                         seed=seed, record_entropy=False)
    stop = stop_token_ids(base, tokenizer)
    chunk = max(1, batch_size // samples)
    seq_kl, tok_kl, lengths, truncated, kl_sums, positions = [], [], [], 0, [], []
    for start in range(0, len(prompts), chunk):
        rendered = [render_prompt(tokenizer, p) for p in prompts[start : start + chunk]]
        drawn = sample_texts(base, tokenizer, rendered, ids[start : start + chunk], cfg, stop_ids=stop, rendered=True)
        prompt_ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in rendered]
        rows = [(prompt_ids[s.problem_index], s.token_ids, s.finish_reason == "stop") for s in drawn]
        kls = token_kls(base, model, rows, pad_id=tokenizer.pad_token_id or 0, batch_size=batch_size)
        for i in range(len(rendered)):
            mine = [k for s, k in zip(drawn, kls, strict=True) if s.problem_index == i]
            seq_kl.append(float(np.mean([k.sum() for k in mine])))
            tok_kl.append(float(np.mean([k.mean() if k.size else 0.0 for k in mine])))
            kl_sums.append(float(sum(k.sum() for k in mine)))
            positions.append(int(sum(k.size for k in mine)))
        lengths += [k.size for k in kls]
        truncated += sum(s.finish_reason == "length" for s in drawn)
    seq_mean, seq_se = _mean_se(seq_kl)
    tok_mean, tok_se = _mean_se(tok_kl)
    return {
        "status": "computed", "direction": DIRECTION, "estimator": ESTIMATOR,
        "kl_sequence": seq_mean, "kl_sequence_se": seq_se, "kl_per_token": tok_mean, "kl_per_token_se": tok_se,
        "prompts": len(seq_kl), "samples_per_prompt": samples, "max_new_tokens": max_new_tokens,
        "temperature": 1.0, "seed": seed, "mean_positions": float(np.mean(lengths)),
        "truncated_fraction": truncated / max(len(lengths), 1), "per_prompt_kl_sequence": seq_kl,
        "kl_per_token_pooled": sum(kl_sums) / max(sum(positions), 1), "per_prompt_kl_sum": kl_sums,
        "per_prompt_positions": positions, "per_prompt_kl_per_token": tok_kl,
    }
