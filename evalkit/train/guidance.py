"""Context given to GRPO rollouts: a weak model's prefix (guidance) and a hint for all-wrong groups.

    evalkit train grpo --guide-model M --guide-tokens 8 --guided-rollouts 2 --out runs/guided
    evalkit train grpo --hint all-wrong --hint-fraction 0.5 --out runs/hinted

Weak-model guidance (Shen et al.): in each group, `guided_rollouts` of the G rollouts start from a
`guide_tokens`-token prefix of a completion the guide model sampled (temperature as GRPO's); the
policy continues from there. Hints for difficulty extremes (Hu et al.): a group whose rewards
are all 0 is sampled once more, each rollout starting from the first `hint_fraction` (by
characters) of the problem's reference: its worked solution when the task provides one
(`entry["solution"]`), else its answer.

In both, the given text becomes part of the rollout's prompt: the policy's continuation is
sampled after `rendered prompt + given text`, graded as `given text + continuation`, and trained
with the given tokens as context, so they are out of the loss and of the ratio by construction
(token_logprobs covers completion tokens only). Advantages use the whole group.
"""

from __future__ import annotations

from evalkit.errors import UsageError

__all__ = ["hint_text", "given_rollouts", "guide_prefixes", "check_guidance"]


def check_guidance(opts) -> None:
    """Guidance and hint options that cannot work, refused with the reason."""
    if opts.guided_rollouts < 0 or opts.guide_tokens < 0:
        raise UsageError("--guided-rollouts and --guide-tokens must be >= 0")
    if opts.guided_rollouts:
        if not opts.guide_model:
            raise UsageError("--guided-rollouts: give --guide-model (the weak model whose prefixes guide)")
        if opts.guided_rollouts >= opts.group_size:
            raise UsageError(f"--guided-rollouts {opts.guided_rollouts}: must be below --group-size "
                             f"{opts.group_size} (some rollouts must be the policy's own)")
        if opts.guide_tokens < 1:
            raise UsageError("--guide-tokens: give the prefix length (>= 1) with --guided-rollouts")
        from evalkit.models import tokenizer_difference

        if why := tokenizer_difference(opts.model, opts.guide_model):
            raise UsageError(f"--guide-model {opts.guide_model}: {why}; the prefix must be the policy's tokens")
    if opts.hint not in (None, "all-wrong"):
        raise UsageError(f"--hint {opts.hint}: the one kind is all-wrong")
    if opts.hint and not 0 < opts.hint_fraction < 1:
        raise UsageError(f"--hint-fraction {opts.hint_fraction}: must be in (0, 1)")


def hint_text(problem, fraction: float) -> str:
    """The first `fraction` of the problem's worked solution, else of its answer."""
    entry = problem.entry or {}
    source = str(entry.get("solution") or problem.answer)
    return source[: max(1, int(len(source) * fraction))]


def given_rollouts(model, tokenizer, grader, prompts, problems, given: list[list[str]], opts, seed: int, stop):
    """For problem i and each text in `given[i]`, one policy rollout continuing `prompt + text`:
    [(problem index, prompt ids incl. the text, completion ids, reward, context tokens, Sample)]."""
    from evalkit.sampling import SamplingConfig, decode_completion, sample_chunk

    rows = [(i, text) for i, texts in enumerate(given) for text in texts]
    if not rows:
        return []
    budget = max(1, opts.max_new_tokens - max(len(tokenizer(t, add_special_tokens=False)["input_ids"])
                                                for _, t in rows))
    cfg = SamplingConfig(1, opts.temperature, opts.top_p, budget, seed)
    contexts = [prompts[i] + text for i, text in rows]
    ids = [f"{problems[i].id}#given{k}" for k, (i, _) in enumerate(rows)]
    model.eval()
    samples = sample_chunk(model, tokenizer, contexts, ids, cfg, stop_ids=stop)
    texts = [rows[s.problem_index][1] + decode_completion(tokenizer, s.token_ids) for s in samples]
    rewards = [1.0 if g.outcome == "correct" else 0.0 for g in grader.grade(
        [(t, problems[rows[s.problem_index][0]]) for t, s in zip(texts, samples, strict=True)])]
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id in stop else stop[0]
    out = []
    for s, r in zip(samples, rewards, strict=True):
        i, text = rows[s.problem_index]
        prompt_ids = tuple(tokenizer(contexts[s.problem_index], add_special_tokens=False)["input_ids"])
        context = len(prompt_ids) - len(tokenizer(prompts[i], add_special_tokens=False)["input_ids"])
        out.append((i, prompt_ids, s.token_ids + ((eos,) if s.finish_reason == "stop" else ()), r, context, s))
    return out


def guide_prefixes(guide, tokenizer, prompts, problems, m: int, opts, seed: int, stop) -> list[list[str]]:
    """m prefixes per prompt: the first `guide_tokens` tokens of the guide model's samples, as text."""
    from evalkit.sampling import SamplingConfig, decode_completion, sample_chunk

    cfg = SamplingConfig(m, opts.temperature, opts.top_p, opts.guide_tokens, seed, record_entropy=False)
    samples = sample_chunk(guide, tokenizer, prompts, [f"{p.id}#guide" for p in problems], cfg, stop_ids=stop)
    out: list[list[str]] = [[] for _ in prompts]
    for s in samples:
        out[s.problem_index].append(decode_completion(tokenizer, s.token_ids))
    return out
